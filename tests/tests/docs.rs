//! The guide against the code: tables in `docs/` that name things the code
//! defines (effects, event reasons, condition types, metric names, the
//! operator CLI's flags, the kinds the embedded server serves) say what
//! the code says, and every relative link in `docs/` and the crates'
//! READMEs resolves, anchors included. Written documentation drifts; these
//! tests make a drift fail CI instead of misleading a reader.
//!
//! Read from the Markdown (no rendering): a table is the run of lines
//! starting with `|` after a given line; a cell is split at each `|` that
//! is not escaped (`\|`), as GitHub splits them, code spans included.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::CommandFactory;
use fsm_core::Effect;
use fsm_kube::{conditions, events};

// ------------------------------------------------------------ Markdown

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_owned()
}

fn doc(name: &str) -> String {
    let path = workspace().join("docs").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The cells of a table row, trimmed.
fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    let mut out = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                out.last_mut().expect("a cell").push('|');
                chars.next();
            }
            '|' => out.push(String::new()),
            c => out.last_mut().expect("a cell").push(c),
        }
    }
    out.into_iter().map(|c| c.trim().to_owned()).collect()
}

/// The body rows of the table at or after the first line of `text` that
/// contains `marker` (its header and separator left out).
fn table_after(text: &str, marker: &str) -> Vec<Vec<String>> {
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains(marker))
        .unwrap_or_else(|| panic!("no line with {marker:?}"));
    let rows: Vec<Vec<String>> = lines[at..]
        .iter()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .map(|l| cells(l))
        .collect();
    assert!(rows.len() > 2, "no table after {marker:?}");
    rows[2..].to_vec()
}

/// The code spans of `cell`, in order.
fn code_spans(cell: &str) -> Vec<String> {
    cell.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s.to_owned())
        .collect()
}

/// The leading identifier of the first code span of `cell`
/// (`` `Entered { from, to }` `` → `Entered`).
fn first_name(cell: &str) -> String {
    code_spans(cell)
        .first()
        .map(|s| {
            s.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        })
        .unwrap_or_default()
}

/// Long flags (`--name`) in `text`.
fn long_flags(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(at) = text[i..].find("--") {
        let start = i + at + 2;
        let end = text[start..]
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
            .map_or(text.len(), |e| start + e);
        let before_ok = i + at == 0 || !bytes[i + at - 1].is_ascii_alphanumeric();
        if end > start && before_ok {
            found.insert(text[start..end].to_owned());
        }
        i = end.max(start);
    }
    found
}

// ------------------------------------------------------------ effects

/// One effect of each variant. The match in [`variant`] has no wildcard:
/// a new variant does not compile until it is added here, and then the
/// table must say what it does.
fn every_effect() -> Vec<Effect> {
    let s = || "S".to_owned();
    vec![
        Effect::Entered {
            from: Some(s()),
            to: s(),
            reason: None,
        },
        Effect::RetryScheduled {
            state: s(),
            attempt: 1,
            delay: Duration::from_secs(1),
            error: s(),
        },
        Effect::RetryWithoutAttempt {
            state: s(),
            failures: 1,
            delay: Duration::from_secs(1),
            error: s(),
        },
        Effect::RetriesExhausted {
            state: s(),
            error: s(),
        },
        Effect::Failed {
            state: s(),
            reason: s(),
        },
        Effect::TimedOut { state: s() },
        Effect::UndeclaredTransition { from: s(), to: s() },
        Effect::SpecChanged { generation: 2 },
        Effect::CompensationStarted { reason: s() },
        Effect::Compensated { state: s() },
        Effect::CompensationFailed {
            step: s(),
            error: s(),
        },
        Effect::CompensationFinished { failures: 0 },
        Effect::Checkpointed { state: s() },
        Effect::Released,
        Effect::Upgraded {
            from: s(),
            to: s(),
            from_version: 1,
            to_version: 2,
        },
        Effect::Degraded {
            state: s(),
            reason: s(),
        },
        Effect::Recovered { state: s() },
        Effect::CommandApplied {
            seq: 1,
            command: s(),
            by: None,
        },
        Effect::CommandRefused {
            seq: 1,
            command: s(),
            by: None,
            reason: s(),
        },
    ]
}

fn variant(effect: &Effect) -> &'static str {
    match effect {
        Effect::Entered { .. } => "Entered",
        Effect::RetryScheduled { .. } => "RetryScheduled",
        Effect::RetryWithoutAttempt { .. } => "RetryWithoutAttempt",
        Effect::RetriesExhausted { .. } => "RetriesExhausted",
        Effect::Failed { .. } => "Failed",
        Effect::TimedOut { .. } => "TimedOut",
        Effect::UndeclaredTransition { .. } => "UndeclaredTransition",
        Effect::SpecChanged { .. } => "SpecChanged",
        Effect::CompensationStarted { .. } => "CompensationStarted",
        Effect::Compensated { .. } => "Compensated",
        Effect::CompensationFailed { .. } => "CompensationFailed",
        Effect::CompensationFinished { .. } => "CompensationFinished",
        Effect::Checkpointed { .. } => "Checkpointed",
        Effect::Released => "Released",
        Effect::Upgraded { .. } => "Upgraded",
        Effect::Degraded { .. } => "Degraded",
        Effect::Recovered { .. } => "Recovered",
        Effect::CommandApplied { .. } => "CommandApplied",
        Effect::CommandRefused { .. } => "CommandRefused",
    }
}

fn event_type(event: &kube::runtime::events::Event) -> &'static str {
    match event.type_ {
        kube::runtime::events::EventType::Normal => "Normal",
        kube::runtime::events::EventType::Warning => "Warning",
    }
}

#[test]
fn the_effect_table_is_the_enum_with_its_events() {
    let rows = table_after(&doc("observability.md"), "| `Effect` | event");
    let documented: BTreeMap<String, Vec<String>> =
        rows.into_iter().map(|r| (first_name(&r[0]), r)).collect();
    let effects = every_effect();
    let names: BTreeSet<String> = effects.iter().map(|e| variant(e).to_owned()).collect();
    assert_eq!(
        documented.keys().cloned().collect::<BTreeSet<_>>(),
        names,
        "observability.md's Effect table and fsm_core::Effect differ"
    );
    for effect in &effects {
        let row = &documented[variant(effect)];
        let event_cell = &row[1];
        match events::for_effect(effect) {
            None => assert!(
                event_cell.starts_with("none"),
                "{}: no event, the table says {event_cell:?}",
                variant(effect)
            ),
            Some(event) => {
                let spans = code_spans(event_cell);
                assert_eq!(
                    spans.first(),
                    Some(&event.reason),
                    "{}: the event's reason",
                    variant(effect)
                );
                assert!(
                    event_cell.contains(&format!(", {}, ", event_type(&event))),
                    "{}: the event is {} ({event_cell:?})",
                    variant(effect),
                    event_type(&event)
                );
                let verb = event.action.split(' ').next().unwrap_or_default();
                assert!(
                    spans
                        .iter()
                        .skip(1)
                        .any(|s| s.split(' ').next() == Some(verb)),
                    "{}: the action starts with {verb:?} ({event_cell:?})",
                    variant(effect)
                );
            }
        }
    }
}

// ------------------------------------------------------------ events

/// Every event reason fsm-kube publishes that a test can name without a
/// cluster: each effect's, and the runtime's own (their constants).
fn reasons_from_code() -> BTreeMap<String, &'static str> {
    let mut reasons: BTreeMap<String, &'static str> = every_effect()
        .iter()
        .filter_map(events::for_effect)
        .map(|e| (e.reason.clone(), event_type(&e)))
        .collect();
    for reason in [
        conditions::TOO_LARGE_REASON,
        conditions::OBJECT_TOO_LARGE_REASON,
        conditions::NEWER_RECORD_REASON,
        conditions::UNDECODABLE_REASON,
    ] {
        reasons.insert(reason.to_owned(), "Warning");
    }
    for event in [
        events::for_corrupt(&fsm_core::DecodeError::Malformed("x".into())),
        events::for_unreadable_commands(&fsm_core::CommandListError::Malformed("x".into())),
        events::for_object_too_large(1, "x"),
        events::for_newer_record(2, 1),
    ] {
        reasons.insert(event.reason.clone(), event_type(&event));
    }
    reasons
}

/// The string literals of fsm-kube's sources, outside their test modules.
fn fsm_kube_literals() -> BTreeSet<String> {
    let mut literals = BTreeSet::new();
    let mut stack = vec![workspace().join("fsm-kube/src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("fsm-kube/src") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("a source file");
                let code = text.split("#[cfg(test)]").next().unwrap_or_default();
                for (i, piece) in code.split('"').enumerate() {
                    if i % 2 == 1 && !piece.contains(' ') {
                        literals.insert(piece.to_owned());
                    }
                }
            }
        }
    }
    literals
}

#[test]
fn the_events_table_names_every_reason_the_runtime_publishes() {
    let rows = table_after(&doc("observability.md"), "| reason | type | when |");
    let mut documented = BTreeMap::new();
    for row in &rows {
        for reason in code_spans(&row[0]) {
            documented.insert(reason, row[1].clone());
        }
    }
    for (reason, type_) in reasons_from_code() {
        let found = documented
            .get(&reason)
            .unwrap_or_else(|| panic!("observability.md's Events table lacks {reason}"));
        assert_eq!(found, type_, "{reason}'s type");
    }
    // The reasons published elsewhere (the dependents, the decoder) are at
    // least reasons the code spells out.
    let literals = fsm_kube_literals();
    for reason in documented.keys() {
        assert!(
            literals.contains(reason.as_str()) || reasons_from_code().contains_key(reason),
            "observability.md's Events table names {reason}, which fsm-kube never publishes"
        );
    }
    // "Effects" lists the runtime's own events that are not an effect's.
    let text = doc("observability.md");
    let effects_section = &text[text.find("## Effects").expect("Effects")..];
    let effects_section = &effects_section[..effects_section.find("## Tracing").expect("Tracing")];
    let from_effects: BTreeSet<String> = every_effect()
        .iter()
        .filter_map(events::for_effect)
        .map(|e| e.reason)
        .collect();
    for reason in documented.keys().filter(|r| !from_effects.contains(*r)) {
        assert!(
            effects_section.contains(&format!("`{reason}`")),
            "the Effects section's list of other events lacks {reason}"
        );
    }
}

#[test]
fn the_condition_table_is_the_condition_types() {
    let rows = table_after(
        &doc("observability.md"),
        "| condition | `True` when | reasons |",
    );
    let documented: BTreeSet<String> = rows.iter().map(|r| first_name(&r[0])).collect();
    let mut types: BTreeSet<String> = conditions::CONDITION_TYPES
        .iter()
        .map(|t| (*t).to_owned())
        .collect();
    types.insert(conditions::DEPENDENTS_READY.to_owned());
    assert_eq!(documented, types);
}

// ------------------------------------------------------------ metrics

/// The metric names `FsmMetrics` registers, as Prometheus scrapes them,
/// read from its source (`prometheus_client` does not encode a family
/// without samples, so an empty registry names nothing): each
/// `registry.register("name", …, metrics.field.clone())`, the field's
/// type in the struct saying whether it is a counter (`_total`).
fn registered_metrics() -> BTreeSet<String> {
    let source = std::fs::read_to_string(workspace().join("fsm-kube/src/metrics.rs"))
        .expect("fsm-kube/src/metrics.rs");
    let fields = &source[source.find("pub struct FsmMetrics {").expect("the struct")..];
    let fields = &fields[..fields.find('}').expect("its end")];
    let is_counter = |field: &str| {
        fields
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{field}:")))
            .unwrap_or_else(|| panic!("no field {field}"))
            .contains("Counter>")
    };
    let mut names = BTreeSet::new();
    for call in source.split("registry.register(").skip(1) {
        let call = &call[..call.find(");").expect("the call's end")];
        let name = call.split('"').nth(1).expect("the metric's name");
        let field = call
            .split("metrics.")
            .nth(1)
            .and_then(|f| f.split('.').next())
            .expect("the registered field");
        names.insert(if is_counter(field) {
            format!("operator_fsm_{name}_total")
        } else {
            format!("operator_fsm_{name}")
        });
    }
    names
}

#[test]
fn the_metric_names_in_the_guide_are_the_registered_ones() {
    let registered = registered_metrics();
    assert!(registered.len() > 10, "{registered:?}");
    let rows = table_after(&doc("observability.md"), "| metric | type | labels |");
    let table: BTreeSet<String> = rows.iter().map(|r| first_name(&r[0])).collect();
    let deploying = doc("deploying.md");
    for name in &registered {
        if name.starts_with("operator_fsm_shard_") {
            assert!(
                deploying.contains(name.as_str()),
                "deploying.md's sharding section lacks {name}"
            );
        } else {
            assert!(
                table.contains(name),
                "observability.md's metrics table lacks {name}"
            );
        }
    }
    // Every name any page mentions exists (a histogram's series aside).
    for entry in std::fs::read_dir(workspace().join("docs")).expect("docs") {
        let path = entry.expect("an entry").path();
        if path.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a page");
        for (at, _) in text.match_indices("operator_fsm_") {
            let name: String = text[at..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if text[at + name.len()..].starts_with('*') || name == "operator_fsm_" {
                // a prefix (`operator_fsm_shard_*`): some metric has it
                assert!(
                    registered.iter().any(|r| r.starts_with(&name)),
                    "{} names {name}*, which no metric starts with",
                    path.display()
                );
                continue;
            }
            let name = name.as_str();
            let base = ["_bucket", "_count", "_sum"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .unwrap_or(name);
            assert!(
                registered.contains(base),
                "{} names {name}, which is not registered",
                path.display()
            );
        }
    }
}

// ------------------------------------------------------------ the CLI

/// What a flag table row is checked against: the flag's aliases, its
/// environment variable and its default values.
type FlagFacts = (Vec<String>, Option<String>, Vec<String>);

/// The long flags of one subcommand of the operator CLI, by name.
fn flags_of(subcommand: &str) -> BTreeMap<String, FlagFacts> {
    let cli = fsm_kube::cli::Cli::<()>::command();
    let sub = cli
        .find_subcommand(subcommand)
        .unwrap_or_else(|| panic!("no subcommand {subcommand}"));
    sub.get_arguments()
        .filter_map(|arg| {
            let long = arg.get_long()?;
            if long == "help" || long == "version" {
                return None;
            }
            let aliases = arg
                .get_all_aliases()
                .unwrap_or_default()
                .into_iter()
                .map(str::to_owned)
                .collect();
            let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
            let defaults = arg
                .get_default_values()
                .iter()
                .map(|d| d.to_string_lossy().into_owned())
                .collect();
            Some((long.to_owned(), (aliases, env, defaults)))
        })
        .collect()
}

/// Checks a flags table (flag in the first cell, default in the second)
/// against `subcommand`'s flags.
fn check_flags_table(page: &str, marker: &str, subcommand: &str) {
    let flags = flags_of(subcommand);
    let rows = table_after(&doc(page), marker);
    let mut documented = BTreeSet::new();
    for row in &rows {
        let named = long_flags(&row[0]);
        for flag in &named {
            let (long, (_, env, defaults)) = flags
                .iter()
                .find(|(long, (aliases, _, _))| *long == flag || aliases.contains(flag))
                .unwrap_or_else(|| {
                    panic!("{page} documents `--{flag}`, which `{subcommand}` does not take")
                });
            documented.insert(long.clone());
            if long != flag {
                continue;
            }
            if let Some(env) = env {
                assert!(
                    row[0].contains(&format!("${env}")),
                    "{page}: `--{flag}` reads ${env}; its row does not say so"
                );
            }
            for default in defaults {
                assert!(
                    row[1].contains(default.as_str()),
                    "{page}: `--{flag}` defaults to {default}; the table says {:?}",
                    row[1]
                );
            }
        }
    }
    let missing: Vec<&String> = flags.keys().filter(|f| !documented.contains(*f)).collect();
    assert!(
        missing.is_empty(),
        "{page}'s `{subcommand}` table lacks {missing:?}"
    );
}

#[test]
fn the_run_flags_table_is_the_run_command() {
    check_flags_table("deploying.md", "`run` flags:", "run");
}

#[test]
fn the_manifests_flags_table_is_the_manifests_command() {
    check_flags_table("deploying.md", "## In one command", "manifests");
}

#[test]
fn the_concepts_page_names_every_subcommand() {
    let rows = table_after(&doc("concepts.md"), "| piece | crate | what it is |");
    let row = rows
        .iter()
        .find(|r| r[0] == "`cli::Operator`")
        .expect("the cli::Operator row");
    let named: BTreeSet<String> = code_spans(&row[2]).into_iter().collect();
    let cli = fsm_kube::cli::Cli::<()>::command();
    let subcommands: BTreeSet<String> = cli
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .filter(|s| s != "help")
        .collect();
    assert_eq!(named, subcommands);
}

// ------------------------------------------------------------ served kinds

#[tokio::test]
async fn the_served_kinds_table_is_what_the_server_serves() {
    let server = fsm_testkit::ApiServer::new();
    let discovery = kube::discovery::Discovery::new(server.client())
        .run()
        .await
        .expect("discovery");
    // (kind, group/version) → (namespaced, subresources)
    let mut served = BTreeMap::new();
    for group in discovery.groups() {
        for version in group.versions() {
            for (resource, caps) in group.versioned_resources(version) {
                let subresources: BTreeSet<String> = caps
                    .subresources
                    .iter()
                    .map(|(r, _)| r.plural.rsplit('/').next().unwrap_or_default().to_owned())
                    .collect();
                served.insert(
                    (resource.kind.clone(), resource.api_version.clone()),
                    (
                        caps.scope == kube::discovery::Scope::Namespaced,
                        subresources,
                    ),
                );
            }
        }
    }
    let rows = table_after(&doc("served-kinds.md"), "| kind | API version |");
    let mut documented = BTreeMap::new();
    for row in &rows {
        let kinds = code_spans(&row[0]);
        let version = code_spans(&row[1]).concat();
        let scopes: Vec<&str> = row[2].split(", ").collect();
        let subresources: BTreeSet<String> = code_spans(&row[3]).into_iter().collect();
        for (i, kind) in kinds.iter().enumerate() {
            let scope = if scopes.len() == kinds.len() {
                scopes[i]
            } else {
                scopes[0]
            };
            assert!(
                scope == "namespaced" || scope == "cluster",
                "{kind}: scope {scope:?}"
            );
            documented.insert(
                (kind.clone(), version.clone()),
                (scope == "namespaced", subresources.clone()),
            );
        }
    }
    assert_eq!(
        documented.keys().collect::<Vec<_>>(),
        served.keys().collect::<Vec<_>>(),
        "served-kinds.md's kinds and the embedded server's differ"
    );
    for (key, value) in &served {
        assert_eq!(
            &documented[key], value,
            "{key:?}: (namespaced, subresources)"
        );
    }
}

#[test]
fn the_readiness_rules_table_is_the_modules() {
    let source = std::fs::read_to_string(workspace().join("fsm-kube/src/dependents/readiness.rs"))
        .expect("readiness.rs");
    let in_source: Vec<Vec<String>> = source
        .lines()
        .filter_map(|l| l.strip_prefix("//! "))
        .filter(|l| l.starts_with('|'))
        .skip(2)
        .map(cells)
        .collect();
    assert!(in_source.len() > 5, "{in_source:?}");
    let in_guide = table_after(&doc("dependents.md"), "### Built-in readiness rules");
    assert_eq!(in_guide, in_source);
}

// ------------------------------------------------------------ links

/// GitHub's anchor of a heading.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown file's headings (outside code blocks).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code || !line.starts_with('#') {
            continue;
        }
        let base = slug(line.trim_start_matches('#'));
        let n = seen.entry(base.clone()).or_insert(0);
        found.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    found
}

/// The targets of the inline links and images of a Markdown text, outside
/// code blocks and code spans.
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let prose: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join("``");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            targets.push(after[..end].to_owned());
            rest = &after[end..];
        }
    }
    targets
}

/// The Markdown files the link check reads: the guide and every README.
fn checked_files() -> Vec<PathBuf> {
    let root = workspace();
    let mut files = vec![root.join("README.md"), root.join("CHANGELOG.md")];
    for entry in std::fs::read_dir(root.join("docs")).expect("docs") {
        let path = entry.expect("an entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    for entry in std::fs::read_dir(&root).expect("the workspace") {
        let readme = entry.expect("an entry").path().join("README.md");
        if readme.is_file() {
            files.push(readme);
        }
    }
    files.sort();
    files
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut broken = Vec::new();
    for file in checked_files() {
        let text = std::fs::read_to_string(&file).expect("a page");
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue; // no network at test time
            }
            let (path, anchor) = match target.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (target.as_str(), None),
            };
            let resolved = if path.is_empty() {
                file.clone()
            } else {
                file.parent().expect("a directory").join(path)
            };
            if !resolved.exists() {
                broken.push(format!("{}: {target} (no such file)", file.display()));
                continue;
            }
            if let Some(anchor) = anchor
                && resolved.extension().is_some_and(|e| e == "md")
            {
                let page = std::fs::read_to_string(&resolved).expect("a page");
                if !anchors(&page).contains(anchor) {
                    broken.push(format!("{}: {target} (no such heading)", file.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// What docs.rs renders: a crate's own documentation. Markdown a crate
/// pulls in with `include_str!` is rendered on docs.rs, where a relative
/// link points into docs.rs, not into the repository: none may have one.
#[test]
fn crate_docs_include_no_markdown_with_relative_links() {
    let root = workspace();
    for krate in [
        "operator-fsm",
        "fsm-core",
        "fsm-macros",
        "fsm-kube",
        "fsm-testkit",
        "kubectl-fsm",
    ] {
        let lib = root.join(krate).join("src/lib.rs");
        let text = std::fs::read_to_string(&lib).expect("lib.rs");
        for line in text
            .lines()
            .filter(|l| l.starts_with("#![doc = include_str!("))
        {
            let path = line
                .split('"')
                .nth(1)
                .expect("a quoted path in include_str!");
            let included = lib.parent().expect("src").join(path);
            let markdown = std::fs::read_to_string(&included).expect("the included file");
            let relative: Vec<String> = link_targets(&markdown)
                .into_iter()
                .filter(|t| !t.contains("://") && !t.starts_with('#'))
                .collect();
            assert!(
                relative.is_empty(),
                "{krate}'s crate docs include {path}, whose relative links break on docs.rs: {relative:?}"
            );
        }
    }
}

#[test]
fn the_markdown_helpers_read_what_they_should() {
    assert_eq!(cells("| `a\\|b` | c |"), ["`a|b`", "c"]);
    assert_eq!(first_name("`Entered { from }`: x"), "Entered");
    assert_eq!(
        long_flags("`--view-addr [ADDR]` (`--metrics-addr`), x--y"),
        BTreeSet::from(["view-addr".to_owned(), "metrics-addr".to_owned()])
    );
    assert_eq!(slug("1. The CRD"), "1-the-crd");
    assert_eq!(
        slug("The embedded API server for kubectl: fsm-apiserver"),
        "the-embedded-api-server-for-kubectl-fsm-apiserver"
    );
    assert_eq!(
        link_targets("see [a](b.md#c) and `[x](y)` ![i](img.png)"),
        ["b.md#c", "img.png"]
    );
}

/// A merge that stopped on a conflict and was committed anyway leaves its
/// markers in the text, which Markdown renders as prose.
#[test]
fn no_page_keeps_a_merge_conflict() {
    let mut found = Vec::new();
    for file in checked_files() {
        let text = std::fs::read_to_string(&file).expect("a Markdown file");
        for (n, line) in text.lines().enumerate() {
            if line.starts_with("<<<<<<< ") || line.starts_with(">>>>>>> ") {
                found.push(format!("{}:{}: {line}", file.display(), n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "merge conflict markers:\n{}",
        found.join("\n")
    );
}
