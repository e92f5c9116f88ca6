//! The analysis: the parsed attributes checked against every rule of
//! docs/attributes.md and resolved into the [`Model`] code generation
//! reads, or every broken rule as an error on the token that breaks it,
//! all reported together.
//!
//! A [`Checker`] holds what the rules share (the enum's name, its variants,
//! the enum's retry keys) and accumulates the errors; the rules are its
//! methods, grouped by what they check: the machine as a whole
//! (`machine`), one state (`state`), a retry policy (`retry`), the serde
//! attributes (`serde`).

mod admission;
mod checker;
mod commit;
mod graph;
mod machine;
mod retry;
mod scope;
mod serde;
mod signal;
mod state;
mod upgrade;

use checker::Checker;

use crate::model::{Model, State, spec_change_entries};
use crate::parse::{EnumInput, OnDeleteArg, TypeArg};

/// Checks the parsed input and resolves it into the model.
///
/// # Errors
/// Every broken rule, each spanned on the offending token, in the order of
/// the input.
pub fn analyze(input: EnumInput) -> syn::Result<Model> {
    let EnumInput {
        ident,
        attrs,
        vis,
        generics,
        data,
        resource: TypeArg(resource),
        context: TypeArg(context),
        error: TypeArg(error),
        retry,
        on_failure,
        on_spec_change,
        on_failed_spec_change,
        snapshot_spec,
        cleanup,
        on_delete,
        krate,
        version,
        migrate,
        batch_commits,
    } = input;
    let variants = data.take_enum().unwrap_or_default();

    let mut check = Checker::new(&ident, &variants, retry.as_ref());
    check.concrete(&generics);
    check.resource(resource.as_ref());
    check.serde_encoding(&attrs, serde::ENUM_KEYS);
    for v in &variants {
        check.serde_encoding(&v.attrs, serde::VARIANT_KEYS);
    }
    let enum_retry = retry.as_ref().and_then(|own| check.policy(own, None));
    let states: Vec<State> = variants
        .iter()
        .map(|v| check.state(v, batch_commits.is_present()))
        .collect();
    check.initial_state();
    check.failed_states(on_failure.as_ref());
    let on_spec_change = check.spec_change(on_spec_change);
    let on_failed_spec_change = check.failed_spec_change(on_failed_spec_change);
    let version = check.version(version.as_ref());
    check.migrate(migrate.as_ref(), version);
    check.former_names();
    if check.is_clean() {
        let entries = spec_change_entries(&on_spec_change, &on_failed_spec_change);
        check.graph(&states, on_failure.as_ref(), &entries);
    }
    check.finish()?;

    let Some(resource) = resource else {
        // Reported by `Checker::resource`: `finish` has returned it.
        return Err(syn::Error::new(ident.span(), "missing `resource = Type`"));
    };
    Ok(Model {
        ident,
        vis,
        resource,
        context,
        error,
        retry: enum_retry,
        on_failure,
        on_spec_change,
        on_failed_spec_change,
        snapshot_spec: snapshot_spec.is_present(),
        cleanup,
        compensate_on_delete: on_delete == Some(OnDeleteArg::Compensate),
        krate,
        version,
        migrate,
        batch_commits: batch_commits.is_present(),
        states,
    })
}

#[cfg(test)]
mod tests {
    use darling::FromDeriveInput;
    use quote::quote;

    use super::*;
    use crate::model::{Handler, Policy, Shape};

    fn analyze_tokens(tokens: proc_macro2::TokenStream) -> syn::Result<Model> {
        let input: syn::DeriveInput = syn::parse2(tokens)?;
        EnumInput::from_derive_input(&input)
            .map_err(syn::Error::from)
            .and_then(analyze)
    }

    fn messages(tokens: proc_macro2::TokenStream) -> Vec<String> {
        match analyze_tokens(tokens) {
            Ok(_) => Vec::new(),
            Err(e) => e.into_iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn a_good_machine_becomes_a_model() {
        let model = analyze_tokens(quote! {
            #[fsm(resource = u8, retry(max_attempts = 3, initial = "2s"))]
            enum S {
                #[fsm(initial, handler = h, next(B), retry(max = "1m", jitter = full))]
                A,
                #[fsm(handler = h, next(Done), timeout = "10m", on_timeout = F)]
                B { x: u8, y: u8 },
                #[fsm(final)]
                Done,
                #[fsm(failed)]
                F,
            }
        });
        let model = match model {
            Ok(m) => m,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(model.states.len(), 4);
        assert_eq!(
            model.retry,
            Some(Policy {
                max_attempts: 3,
                initial_ms: 2_000,
                ..Policy::DEFAULT
            })
        );
        // The state's policy inherits what it does not set.
        assert_eq!(
            model.states[0].retry,
            Some(Policy {
                max_attempts: 3,
                initial_ms: 2_000,
                factor: 2.0,
                max_ms: 60_000,
                jitter: true,
            })
        );
        assert!(matches!(&model.states[1].shape, Shape::Named(f) if f.len() == 2));
        assert_eq!(model.states[1].timeout.map(|d| d.millis), Some(600_000));
        assert!(
            model.states[1]
                .on_timeout
                .as_ref()
                .is_some_and(|t| t == "F")
        );
        assert!(model.states[2].is_resting() && model.states[2].handler.is_none());
    }

    #[test]
    fn every_broken_rule_is_reported_at_once() {
        let errors = messages(quote! {
            #[fsm(on_spec_change = goto(B))]
            enum S<T> {
                #[fsm(handler = h, next(Nowhere), on_exhausted = B)]
                A,
                #[fsm(initial, handler = h)]
                B(T),
                #[fsm(final, handler = h)]
                C,
                D,
                #[fsm(failed, retry(factor = 0.5, max_attempts = 0, initial = "1h", max = "1s"))]
                F1,
                #[fsm(failed)]
                F2,
            }
        });
        let expect = [
            "generic enums",
            "missing `resource",
            "`next` names `Nowhere`",
            "target of `on_exhausted`",
            "`C` is `final`",
            "state `D` has no handler",
            "`max_attempts` must be at least 1",
            "`factor` must be at least 1.0",
            "`max` (\"1s\") must not be below `initial` (\"1h\")",
            "several failed states (`F1`, `F2`)",
            "target of `on_spec_change`",
        ];
        // In the order of the input, the machine's own rules last.
        assert_eq!(errors.len(), expect.len(), "{errors:#?}");
        for (message, e) in errors.iter().zip(expect) {
            assert!(message.contains(e), "no {e:?} in {message:?}");
        }
    }

    #[test]
    fn a_second_initial_state_names_the_first() {
        let errors = messages(quote! {
            #[fsm(resource = u8)]
            enum S {
                #[fsm(initial, handler = h)]
                A,
                #[fsm(initial, handler = h)]
                B,
                #[fsm(initial, failed)]
                F,
            }
        });
        assert_eq!(errors.len(), 2, "{errors:#?}");
        assert!(errors.iter().all(|e| e.contains("`A` is already initial")));
    }

    #[test]
    fn unknown_targets_get_suggestions() {
        let errors = messages(quote! {
            #[fsm(resource = u8, on_failure = Faild)]
            enum S {
                #[fsm(initial, handler = h, next(Dnoe))]
                A,
                #[fsm(final)]
                Done,
                #[fsm(failed)]
                Failed,
            }
        });
        assert_eq!(
            errors,
            [
                "`next` names `Dnoe`, which is not a variant of `S`; did you mean `Done`?",
                "`on_failure` names `Faild`, which is not a variant of `S`; did you mean `Failed`?",
            ]
        );
    }

    #[test]
    fn inherited_mistakes_are_reported_once() {
        let errors = messages(quote! {
            #[fsm(resource = u8, retry(factor = 0.5))]
            enum S {
                #[fsm(initial, handler = h, retry(max_attempts = 2))]
                A,
                #[fsm(failed)]
                F,
            }
        });
        assert_eq!(errors.len(), 1, "{errors:#?}");
    }

    #[test]
    fn durations_in_messages_are_written_as_in_the_attribute() {
        let errors = messages(quote! {
            #[fsm(resource = u8, retry(max = "0s"))]
            enum S {
                #[fsm(initial, handler = h)]
                A,
                #[fsm(failed)]
                F,
            }
        });
        assert_eq!(
            errors,
            ["`max` (\"0s\") must not be below `initial` (\"1s\"): `max` caps the backoff"]
        );
    }

    #[test]
    fn serde_renames_are_refused() {
        let errors = messages(quote! {
            #[fsm(resource = u8)]
            #[serde(rename_all = "camelCase", deny_unknown_fields)]
            enum S {
                #[fsm(initial, handler = h)]
                #[serde(rename = "a", alias = "aa")]
                A,
                #[fsm(failed)]
                F,
            }
        });
        assert_eq!(errors.len(), 2, "{errors:#?}");
        assert!(errors[0].contains("serde(rename_all)"), "{errors:#?}");
        assert!(errors[1].contains("serde(rename)"), "{errors:#?}");
    }

    #[test]
    fn graph_checks_wait_for_the_other_rules_and_honour_allows() {
        // A broken machine gets its own errors, not the graph's.
        let errors = messages(quote! {
            #[fsm(resource = u8)]
            enum S {
                #[fsm(initial, handler = h, next(Nope))]
                A,
                #[fsm(handler = h)]
                Orphan,
                #[fsm(failed)]
                F,
            }
        });
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert!(errors[0].contains("`next` names `Nope`"), "{errors:#?}");

        // An unreachable state that never rests is reported once, then
        // for what its allow leaves out.
        let orphan = |allow: proc_macro2::TokenStream| {
            messages(quote! {
                #[fsm(resource = u8)]
                enum S {
                    #[fsm(initial, handler = h, next(Done))]
                    A,
                    #[fsm(handler = h, #allow)]
                    Orphan,
                    #[fsm(final)]
                    Done,
                    #[fsm(failed)]
                    F,
                }
            })
        };
        let errors = orphan(quote!(next(Orphan)));
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert!(errors[0].contains("`Orphan` is unreachable"), "{errors:#?}");
        let errors = orphan(quote!(allow(unreachable)));
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert!(errors[0].contains("`Orphan` never rests"), "{errors:#?}");
        assert!(orphan(quote!(allow(unreachable, never_rests))).is_empty());
    }

    #[test]
    fn former_names_are_unique_and_versions_start_at_one() {
        let errors = messages(quote! {
            #[fsm(resource = u8, version = 2, migrate = m)]
            enum S {
                #[fsm(initial, handler = h, next(Done), renamed_from = "Old")]
                A,
                #[fsm(final, renamed_from = "Old", renamed_from = "A")]
                Done,
                #[fsm(failed)]
                F,
            }
        });
        assert_eq!(errors.len(), 2, "{errors:#?}");
        assert!(
            errors[0].contains("already a former name of `A`"),
            "{errors:#?}"
        );
        assert!(
            errors[1].contains("`A` is the name of a state"),
            "{errors:#?}"
        );
        let model = analyze_tokens(quote! {
            #[fsm(resource = u8, version = 2, migrate = m)]
            enum S {
                #[fsm(initial, handler = h, next(Done), renamed_from = "Old", renamed_from = "Older")]
                A,
                #[fsm(final)]
                Done,
                #[fsm(failed)]
                F,
            }
        });
        let model = match model {
            Ok(m) => m,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(model.version, Some(2));
        assert!(model.migrate.is_some());
        assert_eq!(model.states[0].renamed_from, ["Old", "Older"]);
    }

    #[test]
    fn a_converge_state_resolves_to_a_generated_handler_with_its_target() {
        let model = analyze_tokens(quote! {
            #[fsm(resource = u8)]
            enum S {
                #[fsm(initial, converge = sets::desired, next(Running), timeout = "5m")]
                Deploying { release: String },
                #[fsm(ready, final)]
                Running,
                #[fsm(failed)]
                F,
            }
        });
        let model = match model {
            Ok(m) => m,
            Err(e) => panic!("{e}"),
        };
        let deploying = &model.states[0];
        match &deploying.handler {
            Some(Handler::Converge { desired, next }) => {
                assert_eq!(crate::diagram::path_name(desired), "sets::desired");
                assert_eq!(next, "Running");
            }
            other => panic!("not a converge handler: {other:?}"),
        }
        assert_eq!(deploying.timeout.map(|d| d.millis), Some(300_000));
    }

    #[test]
    fn converge_rules_are_reported_on_the_converge_function_or_the_extra_target() {
        let errors = messages(quote! {
            #[fsm(resource = u8)]
            enum S {
                #[fsm(initial, handler = h, converge = d, next(B))]
                A,
                #[fsm(converge = d)]
                B,
                #[fsm(converge = d, next(A, B))]
                C,
                #[fsm(final, converge = d, next(A))]
                Done,
                #[fsm(failed, converge = d)]
                F,
            }
        });
        let expect = [
            "`A` has both `handler` and `converge`",
            "`converge` moves to one state once everything is ready: name it with `next(State)`",
            "`next` names `A` and `B`",
            "`Done` is `final`: the machine rests there and converges nothing",
            "`F` is `failed`: the machine rests there and converges nothing",
        ];
        assert_eq!(errors.len(), expect.len(), "{errors:#?}");
        for (message, e) in errors.iter().zip(expect) {
            assert!(message.contains(e), "no {e:?} in {message:?}");
        }
    }

    #[test]
    fn an_empty_enum_has_no_states() {
        let errors = messages(quote! {
            #[fsm(resource = u8)]
            enum S {}
        });
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert!(errors[0].contains("needs states"));
    }

    #[test]
    fn batched_commits_resolve_into_the_model() {
        let model = analyze_tokens(quote! {
            #[fsm(resource = u8, batch_commits)]
            enum S {
                #[fsm(initial, handler = h, next(B))]
                A,
                #[fsm(handler = h, next(Done), commit_on_entry)]
                B,
                #[fsm(final)]
                Done,
                #[fsm(failed)]
                F,
            }
        });
        let model = match model {
            Ok(m) => m,
            Err(e) => panic!("{e}"),
        };
        assert!(model.batch_commits);
        assert!(!model.states[0].commit_on_entry && model.states[1].commit_on_entry);
        assert!(model.states.iter().all(|s| !s.batch_entry));
    }

    #[test]
    fn commit_keys_that_change_nothing_are_refused_on_their_token() {
        let errors = messages(quote! {
            #[fsm(resource = u8)]
            enum S {
                #[fsm(initial, handler = h, next(B, C, D), commit_on_entry)]
                A,
                #[fsm(handler = h, next(Done), batch_entry, commit_on_entry)]
                B,
                #[fsm(handler = h, compensate = u, next(Done), batch_entry)]
                C,
                #[fsm(handler = h, next(Done), batch_entry)]
                D,
                #[fsm(final, batch_entry)]
                Done,
                #[fsm(failed)]
                F,
            }
        });
        let expect = [
            "`commit_on_entry` on `A` has no effect: `S` does not batch commits",
            "`B` has both `batch_entry` and `commit_on_entry`",
            "`C` has a compensation, so its entry is always committed",
            "`batch_entry` on `Done` has no effect: the machine rests in a `final` state",
        ];
        assert_eq!(errors.len(), expect.len(), "{errors:#?}");
        for (message, e) in errors.iter().zip(expect) {
            assert!(message.contains(e), "no {e:?} in {message:?}");
        }
        let errors = messages(quote! {
            #[fsm(resource = u8, batch_commits)]
            enum S {
                #[fsm(initial, handler = h, next(B, Done))]
                A,
                #[fsm(handler = h, next(Done), batch_entry)]
                B,
                #[fsm(handler = h, compensate = u, next(Done), commit_on_entry)]
                C,
                #[fsm(final)]
                Done,
                #[fsm(failed, commit_on_entry)]
                F,
            }
        });
        let expect = [
            "`batch_entry` on `B` has no effect: `S` has `batch_commits`",
            "`commit_on_entry` on `C` has no effect: a state with a compensation",
            "`commit_on_entry` on `F` has no effect: the machine rests in a `failed` state",
        ];
        assert_eq!(errors.len(), expect.len(), "{errors:#?}");
        for (message, e) in errors.iter().zip(expect) {
            assert!(message.contains(e), "no {e:?} in {message:?}");
        }
    }

    #[test]
    fn commits_resolves_into_the_model_and_is_refused_where_it_changes_nothing() {
        let model = analyze_tokens(quote! {
            #[fsm(resource = u8)]
            enum S {
                #[fsm(initial, handler = h, compensate = u, next(B))]
                A,
                #[fsm(handler = h, commits, next(Done))]
                B,
                #[fsm(final)]
                Done,
                #[fsm(failed)]
                F,
            }
        });
        let model = match model {
            Ok(m) => m,
            Err(e) => panic!("{e}"),
        };
        assert!(!model.states[0].commits && model.states[1].commits);

        let errors = messages(quote! {
            #[fsm(resource = u8)]
            enum S {
                #[fsm(initial, handler = h, next(R, Done))]
                A,
                #[fsm(ready, commits, handler = h, next(A))]
                R,
                #[fsm(final, commits)]
                Done,
                #[fsm(failed, commits)]
                F,
            }
        });
        let expect = [
            "`commits` on `R` has no effect: entering a `ready` state closes the saga's scope",
            "`commits` on `Done` has no effect: entering a `final` state closes the saga's scope",
            "`commits` on `F` makes no sense: a `failed` state",
        ];
        assert_eq!(errors.len(), expect.len(), "{errors:#?}");
        for (message, e) in errors.iter().zip(expect) {
            assert!(message.contains(e), "no {e:?} in {message:?}");
        }
    }
}
