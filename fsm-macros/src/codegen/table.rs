//! `fn machine()`: the machine's static table, built with the `const`
//! builders of `fsm_core::Machine` and `StateMeta`.

use proc_macro2::{Literal, TokenStream};
use quote::quote;

use crate::diagram;
use crate::model::{FailedSpecChange, Model, Policy, SpecChange, State};

/// `fn machine()`: the static table built with the `const` builders.
pub fn machine(model: &Model, core: &TokenStream) -> TokenStream {
    let name = model.ident.to_string();
    let count = model.states.len();
    let states = model.states.iter().map(|s| state_meta(s, core));

    let mut options = Vec::new();
    if let Some(policy) = &model.retry {
        let policy = retry_policy(policy, core);
        options.push(quote!(.retry(#policy)));
    }
    if let Some(target) = &model.on_failure {
        let target = target.to_string();
        options.push(quote!(.on_failure(#target)));
    }
    match &model.on_spec_change {
        SpecChange::Restart => {}
        SpecChange::Continue => {
            options.push(quote!(.on_spec_change(#core::SpecChange::Continue)));
        }
        SpecChange::Goto(target) => {
            let target = target.to_string();
            options.push(quote!(.on_spec_change(#core::SpecChange::Goto(#target))));
        }
        SpecChange::CompensateAndRestart => {
            options.push(quote!(.on_spec_change(#core::SpecChange::CompensateAndRestart)));
        }
    }
    match &model.on_failed_spec_change {
        FailedSpecChange::Restart => {}
        FailedSpecChange::Stay => {
            options.push(quote!(.on_failed_spec_change(#core::FailedSpecChange::Stay)));
        }
        FailedSpecChange::Goto(target) => {
            let target = target.to_string();
            options.push(quote!(.on_failed_spec_change(#core::FailedSpecChange::Goto(#target))));
        }
    }
    if model.snapshot_spec {
        options.push(quote!(.snapshot_spec()));
    }
    if model.cleanup.is_some() {
        options.push(quote!(.with_cleanup()));
    }
    if model.compensate_on_delete {
        options.push(quote!(.on_delete(#core::OnDelete::Compensate)));
    }
    if model.batch_commits {
        options.push(quote!(.batch_commits()));
    }
    if let Some(version) = model.version {
        let version = Literal::u32_suffixed(version);
        options.push(quote!(.versioned(#version)));
    }

    quote! {
        fn machine() -> &'static #core::Machine {
            static STATES: [#core::StateMeta; #count] = [#(#states),*];
            static MACHINE: #core::Machine = #core::Machine::new(#name, &STATES) #(#options)*;
            &MACHINE
        }
    }
}

/// One `StateMeta` expression.
fn state_meta(s: &State, core: &TokenStream) -> TokenStream {
    let name = s.ident.to_string();
    let mut calls = Vec::new();
    let flags = [
        (s.initial, quote!(.initial())),
        (s.handler.is_some(), quote!(.with_handler())),
        (s.shape.has_data(), quote!(.with_data())),
        (s.compensate.is_some(), quote!(.with_compensation())),
        (s.ready, quote!(.ready())),
        (s.failed, quote!(.failed())),
        (s.is_final, quote!(.final_state())),
        (s.sensitive, quote!(.sensitive())),
        (s.batch_entry, quote!(.batch_entry())),
        (s.commit_on_entry, quote!(.commit_on_entry())),
        (s.commits, quote!(.commits())),
    ];
    calls.extend(
        flags
            .into_iter()
            .filter(|(on, _)| *on)
            .map(|(_, call)| call),
    );
    if !s.next.is_empty() {
        let targets = s.next.iter().map(ToString::to_string);
        calls.push(quote!(.next(&[#(#targets),*])));
    }
    if let Some(policy) = &s.retry {
        let policy = retry_policy(policy, core);
        calls.push(quote!(.retry(#policy)));
    }
    if let Some(timeout) = s.timeout {
        let d = duration(timeout.millis);
        calls.push(quote!(.timeout(#d)));
    }
    if let Some(timeout) = s.attempt_timeout {
        let d = duration(timeout.millis);
        calls.push(quote!(.attempt_timeout(#d)));
    }
    if let Some(target) = &s.on_timeout {
        let target = target.to_string();
        calls.push(quote!(.on_timeout(#target)));
    }
    if let Some(target) = &s.on_exhausted {
        let target = target.to_string();
        calls.push(quote!(.on_exhausted(#target)));
    }
    if !s.signals.is_empty() {
        let pairs = s.signals.iter().map(|(signal, target)| {
            let (signal, target) = (signal.to_string(), target.to_string());
            quote!((#signal, #target))
        });
        calls.push(quote!(.on_signals(&[#(#pairs),*])));
    }
    if !s.immutable.is_empty() {
        let paths = &s.immutable;
        calls.push(quote!(.immutable(&[#(#paths),*])));
    }
    if !s.grow_only.is_empty() {
        let paths = &s.grow_only;
        calls.push(quote!(.grow_only(&[#(#paths),*])));
    }
    if s.refuse_delete {
        calls.push(quote!(.refuses_delete()));
    }
    if !s.renamed_from.is_empty() {
        let names = &s.renamed_from;
        calls.push(quote!(.renamed_from(&[#(#names),*])));
    }
    if let Some(path) = &s.compensate {
        // Named for the diagrams (`.with_compensation()` above stays the
        // flag the engine reads).
        let function = diagram::path_name(path);
        calls.push(quote!(.compensated_by(#function)));
    }
    quote!(#core::StateMeta::new(#name) #(#calls)*)
}

/// A `Duration` in a const context.
fn duration(ms: u64) -> TokenStream {
    let ms = Literal::u64_suffixed(ms);
    quote!(::core::time::Duration::from_millis(#ms))
}

/// A `RetryPolicy` in a const context. The analysis has validated it, so the
/// `Err` arm cannot be taken.
fn retry_policy(p: &Policy, core: &TokenStream) -> TokenStream {
    let attempts = Literal::u32_suffixed(p.max_attempts);
    let initial = duration(p.initial_ms);
    let max = duration(p.max_ms);
    let factor = if p.factor.is_finite() {
        Literal::f64_suffixed(p.factor)
    } else {
        Literal::f64_suffixed(1.0)
    };
    let jitter = if p.jitter {
        quote!(#core::Jitter::Full)
    } else {
        quote!(#core::Jitter::None)
    };
    quote! {
        match #core::RetryPolicy::new(#attempts, #initial, #factor, #max) {
            ::core::result::Result::Ok(policy) => policy.with_jitter(#jitter),
            ::core::result::Result::Err(_) => {
                ::core::panic!("#[derive(OperatorFsm)] checked this retry policy")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_policies_are_const_expressions() {
        assert_eq!(
            duration(1_500).to_string(),
            ":: core :: time :: Duration :: from_millis (1500u64)"
        );
        let core = quote!(::fsm_core);
        let policy = retry_policy(
            &Policy {
                initial_ms: 250,
                jitter: true,
                ..Policy::DEFAULT
            },
            &core,
        )
        .to_string();
        assert!(policy.contains("RetryPolicy :: new (5u32"), "{policy}");
        assert!(policy.contains("from_millis (250u64)"), "{policy}");
        assert!(policy.contains("2f64"), "{policy}");
        assert!(policy.contains("Jitter :: Full"), "{policy}");
    }
}
