//! Expansion snapshots: the derive's output for every `#[derive(OperatorFsm)]`
//! in the workspace, compared with a file committed under
//! `fsm-macros/tests/expansions/`, so that a change to what the derive
//! generates (or to the machines it is run on) shows up as a diff.
//!
//! - Which machines: every item carrying `#[derive(... OperatorFsm ...)]`
//!   in a `.rs` file of the workspace, at any depth (in modules, function
//!   bodies, macro invocations). Directories named `target` or `target-*`,
//!   holding a `CACHEDIR.TAG`, or hidden are skipped, and so is fsm-macros,
//!   which defines the derive (its unit tests run it on tokens). The files
//!   are lexed with proc-macro2 and the token trees walked, rather than
//!   walked as a `syn` syntax tree: the workspace does not enable syn's
//!   `visit` feature, and a walk of every expression by hand would be
//!   longer than this test. An attribute naming `OperatorFsm` that is not
//!   such a derive on an enum, struct or union fails the test, so no
//!   derive site is skipped quietly. Examples in documentation (doc
//!   comments, `docs/*.md`) are text, not tokens, and are not covered.
//!   `fsm-core/tests/ui/fail` is covered: its snapshots hold the
//!   `compile_error!`s (and fallback impl) the derive returns.
//! - The input is what the compiler hands the derive: the item with its
//!   attributes, less the `#[derive]` naming `OperatorFsm` and the
//!   `#[derive]`s before it (expanded, and removed, first). `#[cfg]` and
//!   `#[cfg_attr]` are not evaluated, so an input that has any is refused.
//! - The core crate's path: the derive asks proc-macro-crate which of
//!   `operator-fsm`, `fsm-core` and `fsm-kube` the manifest being compiled
//!   names. Here that manifest is fsm-macros' own, which names none (it has
//!   no dev-dependencies, see its Cargo.toml), and without a manifest the
//!   answer is the same, so every snapshot says `::fsm_core` (or the
//!   `crate = ...` given), wherever and however the test runs; the test
//!   checks it. (In a real build the path is the one the using crate's
//!   manifest gives, `::operator_fsm::core` for the examples; the rest of
//!   the expansion does not depend on it.)
//! - A snapshot is the expansion's `to_string()`, with some of the single
//!   spaces between tokens replaced by a newline and indentation (after
//!   `;`, `,`, `{`, `}` and `#[...]` in a block, after `,` in an array), so
//!   a diff shows lines. Both are rendered in one walk of the tokens, and
//!   the test checks that the one without line breaks is `to_string()`.
//! - A snapshot is named after the file and the item: `fsm-core/tests/it/
//!   upgrade.rs`'s `mod v1 { enum Db }` is
//!   `fsm-core__tests__it__upgrade.rs--v1.Db.txt` (the enclosing `mod`s and
//!   `fn`s; a name taken twice in one scope gets `-2`, `-3`).
//!
//! `FSM_UPDATE_EXPANSIONS=1 cargo test -p fsm-macros expansion` rewrites the
//! snapshots (and removes those of machines that are gone). Without it, a
//! missing, different or stale snapshot fails the test.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use proc_macro2::{Delimiter, Group, Spacing, TokenStream, TokenTree};

/// Set to `1` to rewrite the snapshots instead of comparing them.
const UPDATE_VAR: &str = "FSM_UPDATE_EXPANSIONS";

/// The snapshots, under fsm-macros.
const SNAPSHOT_DIR: &str = "tests/expansions";

/// Lines shown before and after the first difference.
const CONTEXT_LINES: usize = 3;

/// One derive site.
#[derive(Debug)]
struct Machine {
    /// The snapshot's file name, without `.txt`.
    key: String,
    /// `file: scope::Name`, for messages.
    display: String,
    /// The derive's input.
    input: TokenStream,
}

/// A derive site found in one file, before it gets its unique name.
#[derive(Debug)]
struct Found {
    scope: Vec<String>,
    name: String,
    input: TokenStream,
}

#[test]
fn every_derive_expands_as_its_snapshot() {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = manifest_dir.parent().expect("fsm-macros is in a directory");
    // Packaged (`cargo package`, crates.io), the crate has no workspace
    // around it and the machines' sources are not there: skip. That is
    // the only case skipped; inside the repository the root's manifest
    // has `[workspace]`, and finding no machine there is a failure.
    if !is_workspace_root(root) {
        eprintln!(
            "expansion snapshots skipped: {} has no workspace manifest (packaged crate?)",
            root.display()
        );
        return;
    }
    assert_eq!(
        crate::codegen::core_path(None).to_string(),
        ":: fsm_core",
        "the snapshots assume the core crate resolves to `::fsm_core` in fsm-macros' own tests"
    );

    let machines = discover(root, manifest_dir);
    assert!(
        machines
            .iter()
            .any(|m| m.key.starts_with("fsm-core__tests__ui__pass__")),
        "no machine found in fsm-core/tests/ui/pass: the walk of {} is broken",
        root.display()
    );

    let dir = manifest_dir.join(SNAPSHOT_DIR);
    let update = std::env::var(UPDATE_VAR).is_ok_and(|v| v == "1");
    let mut problems = Vec::new();
    let mut written = 0;
    for machine in &machines {
        let expansion = super::derive(machine.input.clone());
        let (flat, pretty) = render(&expansion);
        assert_eq!(
            flat,
            expansion.to_string(),
            "{}: the snapshot rendering does not reproduce `to_string()`",
            machine.display
        );
        let name = format!("{}.txt", machine.key);
        let path = dir.join(&name);
        let expected = std::fs::read_to_string(&path)
            .ok()
            .map(|s| s.replace("\r\n", "\n"));
        if expected.as_deref() == Some(pretty.as_str()) {
            continue;
        }
        if update {
            std::fs::create_dir_all(&dir).expect("create the snapshot directory");
            std::fs::write(&path, &pretty).expect("write a snapshot");
            written += 1;
            continue;
        }
        problems.push(match expected {
            None => format!(
                "{}: no snapshot (fsm-macros/{SNAPSHOT_DIR}/{name} is missing)",
                machine.display,
            ),
            Some(expected) => format!(
                "{}: the expansion differs from fsm-macros/{SNAPSHOT_DIR}/{name}\n{}",
                machine.display,
                first_difference(&expected, &pretty)
            ),
        });
    }

    // Snapshots of machines that no longer exist.
    let mut removed = 0;
    let mut stale: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .map(|e| e.expect("read the snapshot directory").path())
            .filter(|path| {
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                !machines.iter().any(|m| name == format!("{}.txt", m.key))
            })
            .collect(),
        // Every machine is then reported as missing.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("read {}: {e}", dir.display()),
    };
    stale.sort();
    for path in stale {
        if update {
            std::fs::remove_file(&path).expect("remove a stale snapshot");
            removed += 1;
        } else {
            problems.push(format!(
                "fsm-macros/{SNAPSHOT_DIR}/{}: stale snapshot, no such machine in the workspace",
                path.file_name().unwrap_or_default().to_string_lossy()
            ));
        }
    }

    if update {
        eprintln!(
            "{} machines: {written} snapshot(s) written, {removed} stale removed",
            machines.len()
        );
    }
    assert!(
        problems.is_empty(),
        "{} of {} expansion snapshot(s) do not match (run with {UPDATE_VAR}=1 to accept the new \
         expansions, then review the diff):\n\n{}",
        problems.len(),
        machines.len(),
        problems.join("\n\n")
    );
}

/// Whether `dir/Cargo.toml` is a workspace manifest.
fn is_workspace_root(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("Cargo.toml"))
        .is_ok_and(|manifest| manifest.lines().any(|line| line.trim() == "[workspace]"))
}

/// Every derive site in the workspace's `.rs` files (fsm-macros' own left
/// out: it defines the derive), sorted by key.
fn discover(root: &Path, skip: &Path) -> Vec<Machine> {
    let mut files = Vec::new();
    rust_files(root, skip, &mut files);
    files.sort();
    let mut machines = Vec::new();
    let mut errors = Vec::new();
    for file in files {
        let source = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
        // A cheap filter: a derive names `OperatorFsm` in the text.
        if !source.contains("OperatorFsm") {
            continue;
        }
        let relative: Vec<String> = file
            .strip_prefix(root)
            .expect("under the root")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let relative_display = relative.join("/");
        let found = match find_in_source(&source) {
            Ok(found) => found,
            Err(e) => {
                errors.push(format!("{relative_display}: {e}"));
                continue;
            }
        };
        let mut taken: BTreeMap<String, usize> = BTreeMap::new();
        for f in found {
            let mut path = f.scope.clone();
            path.push(f.name);
            let base = path.join(".");
            let count = taken.entry(base.clone()).or_default();
            *count += 1;
            let suffix = match *count {
                1 => String::new(),
                n => format!("-{n}"),
            };
            machines.push(Machine {
                key: format!("{}--{base}{suffix}", relative.join("__")),
                display: format!("{relative_display}: {}{suffix}", path.join("::")),
                input: f.input,
            });
        }
    }
    assert!(
        errors.is_empty(),
        "derive sites this test does not understand:\n{}",
        errors.join("\n")
    );
    machines.sort_by(|a, b| a.key.cmp(&b.key));
    machines
}

/// The `.rs` files under `dir`, build output, hidden directories and `skip`
/// left out.
fn rust_files(dir: &Path, skip: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
    for entry in entries {
        let entry = entry.expect("read a directory entry");
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let kind = entry.file_type().expect("a file type");
        if kind.is_dir() {
            let skipped = name.starts_with('.')
                || name == "target"
                || name.starts_with("target-")
                || path.join("CACHEDIR.TAG").exists()
                || path == skip;
            if !skipped {
                rust_files(&path, skip, out);
            }
        } else if kind.is_file() && name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// The derive sites in one file's source, in source order.
fn find_in_source(source: &str) -> Result<Vec<Found>, String> {
    let stream: TokenStream = source.parse().map_err(|e| format!("does not lex: {e:?}"))?;
    let mut found = Vec::new();
    let mut errors = Vec::new();
    walk(stream, &mut Vec::new(), &mut found, &mut errors);
    if errors.is_empty() {
        Ok(found)
    } else {
        Err(errors.join("; "))
    }
}

/// Walks one level of tokens (recursing into groups), recording derive
/// sites; `scope` is the names of the enclosing `mod`s and `fn`s.
fn walk(
    stream: TokenStream,
    scope: &mut Vec<String>,
    found: &mut Vec<Found>,
    errors: &mut Vec<String>,
) {
    let tokens: Vec<TokenTree> = stream.into_iter().collect();
    // The name of the `mod` or `fn` whose body is the next brace group.
    let mut pending: Option<String> = None;
    let mut i = 0;
    while i < tokens.len() {
        // An outer attribute run: `#[...]`*.
        if is_attribute_at(&tokens, i) {
            let start = i;
            let mut end = i;
            while is_attribute_at(&tokens, end) {
                end += 2;
            }
            derive_site(&tokens, start, end, scope, found, errors);
            i = end;
            continue;
        }
        match &tokens[i] {
            TokenTree::Ident(ident) if ident == "mod" || ident == "fn" => {
                if let Some(TokenTree::Ident(name)) = tokens.get(i + 1) {
                    pending = Some(name.to_string());
                }
            }
            TokenTree::Punct(p) if p.as_char() == ';' => pending = None,
            TokenTree::Group(group) => {
                let named = group.delimiter() == Delimiter::Brace && pending.is_some();
                if named {
                    scope.push(pending.take().expect("checked"));
                }
                walk(group.stream(), scope, found, errors);
                if named {
                    scope.pop();
                }
            }
            _ => {}
        }
        i += 1;
    }
}

/// Whether `tokens[i..]` starts with an outer attribute, `#` `[...]`.
fn is_attribute_at(tokens: &[TokenTree], i: usize) -> bool {
    matches!(
        (tokens.get(i), tokens.get(i + 1)),
        (Some(TokenTree::Punct(p)), Some(TokenTree::Group(g)))
            if p.as_char() == '#' && g.delimiter() == Delimiter::Bracket
    )
}

/// Looks at the attribute run `tokens[start..end]`: if one of them is a
/// `#[derive]` naming `OperatorFsm`, records the item after it. Any other
/// mention of `OperatorFsm` in an attribute is an error: the test would
/// otherwise miss a derive it does not recognise.
fn derive_site(
    tokens: &[TokenTree],
    start: usize,
    end: usize,
    scope: &[String],
    found: &mut Vec<Found>,
    errors: &mut Vec<String>,
) {
    let attrs: Vec<&Group> = (start..end)
        .step_by(2)
        .map(|i| match &tokens[i + 1] {
            TokenTree::Group(g) => g,
            _ => unreachable!("checked by is_attribute_at"),
        })
        .collect();
    let mut derive_at = None;
    for (n, attr) in attrs.iter().enumerate() {
        if !mentions_operator_fsm(attr.stream()) {
            continue;
        }
        if derive_at.is_none() && derives_operator_fsm(attr.stream()) {
            derive_at = Some(n);
        } else {
            errors.push(format!(
                "an attribute this test does not understand: #{attr}"
            ));
        }
    }
    let Some(derive_at) = derive_at else {
        return;
    };

    // The item: `pub`, `pub(...)`? then `enum`/`struct`/`union`, its name,
    // and everything up to its body (a brace group) or its `;`.
    let mut i = end;
    if matches!(tokens.get(i), Some(TokenTree::Ident(id)) if id == "pub") {
        i += 1;
        if matches!(tokens.get(i), Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis)
        {
            i += 1;
        }
    }
    let keyword = matches!(tokens.get(i), Some(TokenTree::Ident(id))
        if id == "enum" || id == "struct" || id == "union");
    let name = match tokens.get(i + 1) {
        Some(TokenTree::Ident(name)) if keyword => name.to_string(),
        _ => {
            errors.push(format!(
                "#{} is not on an enum, struct or union",
                attrs[derive_at]
            ));
            return;
        }
    };
    let Some(last) = (i + 2..tokens.len()).find(|&j| match &tokens[j] {
        TokenTree::Group(g) => g.delimiter() == Delimiter::Brace,
        TokenTree::Punct(p) => p.as_char() == ';',
        _ => false,
    }) else {
        errors.push(format!("{name}: the item has no end"));
        return;
    };

    // The input: the attributes but the derive's own and the derives
    // before it, then the item.
    let mut input = TokenStream::new();
    for (n, attr) in attrs.iter().enumerate() {
        let expanded_before = n <= derive_at && is_derive(attr.stream());
        if !expanded_before {
            input.extend(tokens[start + 2 * n..start + 2 * n + 2].iter().cloned());
        }
    }
    input.extend(tokens[end..=last].iter().cloned());
    if let Err(e) = refuse_cfg(&input) {
        errors.push(format!("{name}: {e}"));
        return;
    }
    found.push(Found {
        scope: scope.to_vec(),
        name,
        input,
    });
}

/// Whether an attribute's tokens name `OperatorFsm` anywhere.
fn mentions_operator_fsm(stream: TokenStream) -> bool {
    stream.into_iter().any(|tt| match tt {
        TokenTree::Ident(id) => id == "OperatorFsm",
        TokenTree::Group(g) => mentions_operator_fsm(g.stream()),
        _ => false,
    })
}

/// Whether an attribute's tokens are `derive(...)`.
fn is_derive(stream: TokenStream) -> bool {
    let tokens: Vec<TokenTree> = stream.into_iter().collect();
    matches!(
        tokens.as_slice(),
        [TokenTree::Ident(id), TokenTree::Group(g)]
            if id == "derive" && g.delimiter() == Delimiter::Parenthesis
    )
}

/// Whether an attribute's tokens are `derive(..., path::OperatorFsm, ...)`.
fn derives_operator_fsm(stream: TokenStream) -> bool {
    if !is_derive(stream.clone()) {
        return false;
    }
    let Some(TokenTree::Group(list)) = stream.into_iter().nth(1) else {
        return false;
    };
    // The last identifier of each comma-separated path.
    let mut names = Vec::new();
    let mut last = None;
    for tt in list.stream() {
        match tt {
            TokenTree::Punct(p) if p.as_char() == ',' => names.extend(last.take()),
            TokenTree::Ident(id) => last = Some(id),
            _ => {}
        }
    }
    names.extend(last);
    names.iter().any(|id| id == "OperatorFsm")
}

/// The compiler evaluates `#[cfg]` and `#[cfg_attr]` before a derive sees
/// the item; this test does not, so it refuses inputs that have them.
fn refuse_cfg(input: &TokenStream) -> Result<(), String> {
    let item: syn::DeriveInput =
        syn::parse2(input.clone()).map_err(|e| format!("does not parse: {e}"))?;
    let mut attrs: Vec<&syn::Attribute> = item.attrs.iter().collect();
    match &item.data {
        syn::Data::Enum(e) => {
            for v in &e.variants {
                attrs.extend(&v.attrs);
                attrs.extend(v.fields.iter().flat_map(|f| &f.attrs));
            }
        }
        syn::Data::Struct(s) => attrs.extend(s.fields.iter().flat_map(|f| &f.attrs)),
        syn::Data::Union(u) => attrs.extend(u.fields.named.iter().flat_map(|f| &f.attrs)),
    }
    match attrs
        .iter()
        .find(|a| a.path().is_ident("cfg") || a.path().is_ident("cfg_attr"))
    {
        Some(_) => Err("has #[cfg] or #[cfg_attr], which this test does not evaluate".into()),
        None => Ok(()),
    }
}

/// The expansion twice: as proc-macro2 displays it (`to_string()`), and
/// the same with line breaks for the snapshot.
fn render(stream: &TokenStream) -> (String, String) {
    let mut flat = String::new();
    write_stream(&mut flat, stream.clone(), 0, Level::Block, false);
    let mut pretty = String::new();
    write_stream(&mut pretty, stream.clone(), 0, Level::Block, true);
    pretty.push('\n');
    (flat, pretty)
}

/// Where a token stream may be broken into lines.
#[derive(Clone, Copy, PartialEq)]
enum Level {
    /// The top level and braces: after `;`, `,`, a block, an attribute.
    Block,
    /// Brackets (an array, a slice), not an attribute's: after `,`.
    List,
    /// Parentheses and attributes: nowhere.
    Inline,
}

/// proc-macro2's `Display` for a token stream (a space between tokens but
/// after a joint punctuation), where `pretty` replaces some of the spaces
/// with a line break and indentation (see [`Level`]). A `,` between angle
/// brackets (generic arguments) does not break.
fn write_stream(out: &mut String, stream: TokenStream, depth: usize, level: Level, pretty: bool) {
    let tokens: Vec<TokenTree> = stream.into_iter().collect();
    let mut joint = false;
    let mut angles = 0usize;
    for (i, tt) in tokens.iter().enumerate() {
        if i != 0 && !joint {
            let indent = match level {
                Level::List => depth + 1,
                _ => depth,
            };
            if pretty && breaks_after(&tokens, i - 1, level, angles) {
                newline(out, indent);
            } else {
                out.push(' ');
            }
        }
        joint = false;
        match tt {
            TokenTree::Group(g) => {
                let attribute = i > 0 && is_attribute_at(&tokens, i - 1);
                write_group(out, g, depth, level, attribute, pretty);
            }
            TokenTree::Punct(p) => {
                // `->` and `=>` are not angle brackets.
                let arrow = i > 0
                    && matches!(&tokens[i - 1], TokenTree::Punct(q)
                        if q.spacing() == Spacing::Joint && matches!(q.as_char(), '-' | '='));
                match p.as_char() {
                    '<' => angles += 1,
                    '>' if !arrow => angles = angles.saturating_sub(1),
                    _ => {}
                }
                joint = p.spacing() == Spacing::Joint;
                write!(out, "{p}").expect("write to a string");
            }
            TokenTree::Ident(_) | TokenTree::Literal(_) => {
                write!(out, "{tt}").expect("write to a string");
            }
        }
    }
}

/// proc-macro2's `Display` for a group: `{ ... }`, `{ }`, `(...)`,
/// `[...]`, or the bare stream; `level` is the level the group is in.
fn write_group(
    out: &mut String,
    group: &Group,
    depth: usize,
    level: Level,
    attribute: bool,
    pretty: bool,
) {
    let empty = group.stream().is_empty();
    match group.delimiter() {
        Delimiter::Brace if empty => out.push_str("{ }"),
        Delimiter::Brace => {
            out.push('{');
            if pretty {
                newline(out, depth + 1);
            } else {
                out.push(' ');
            }
            write_stream(out, group.stream(), depth + 1, Level::Block, pretty);
            if pretty {
                newline(out, depth);
            } else {
                out.push(' ');
            }
            out.push('}');
        }
        Delimiter::Parenthesis => {
            out.push('(');
            write_stream(out, group.stream(), depth, Level::Inline, pretty);
            out.push(')');
        }
        Delimiter::Bracket => {
            let inner = if attribute {
                Level::Inline
            } else {
                Level::List
            };
            out.push('[');
            write_stream(out, group.stream(), depth, inner, pretty);
            out.push(']');
        }
        Delimiter::None => write_stream(out, group.stream(), depth, level, pretty),
    }
}

/// Whether a line ends after `tokens[i]`, at `level`, `angles` deep in
/// angle brackets.
fn breaks_after(tokens: &[TokenTree], i: usize, level: Level, angles: usize) -> bool {
    let comma = matches!(&tokens[i], TokenTree::Punct(p) if p.as_char() == ',') && angles == 0;
    match level {
        Level::Inline => false,
        Level::List => comma,
        Level::Block => match &tokens[i] {
            TokenTree::Punct(p) => comma || p.as_char() == ';',
            // Not before the `,`, `;`, `.` or `?` that goes on with it.
            TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => !matches!(
                tokens.get(i + 1),
                Some(TokenTree::Punct(p)) if matches!(p.as_char(), ',' | ';' | '.' | '?')
            ),
            TokenTree::Group(_) => i > 0 && is_attribute_at(tokens, i - 1),
            _ => false,
        },
    }
}

fn newline(out: &mut String, depth: usize) {
    out.push('\n');
    for _ in 0..depth {
        out.push_str("    ");
    }
}

/// The first line where `expected` and `actual` differ, with context.
fn first_difference(expected: &str, actual: &str) -> String {
    let old: Vec<&str> = expected.lines().collect();
    let new: Vec<&str> = actual.lines().collect();
    let at = (0..old.len().max(new.len()))
        .find(|&n| old.get(n) != new.get(n))
        .unwrap_or(0);
    let from = at.saturating_sub(CONTEXT_LINES);
    let mut out = format!(
        "first difference at line {} (- snapshot, + expansion):\n",
        at + 1
    );
    for line in &old[from..at] {
        let _ = writeln!(out, "      {}", clip(line, 0));
    }
    let column = match (old.get(at), new.get(at)) {
        (Some(a), Some(b)) => a
            .char_indices()
            .zip(b.chars())
            .find(|((_, x), y)| x != y)
            .map_or(a.len().min(b.len()), |((i, _), _)| i),
        _ => 0,
    };
    let _ = writeln!(
        out,
        "    - {}",
        old.get(at)
            .map_or("<end of snapshot>".into(), |l| clip(l, column))
    );
    let _ = writeln!(
        out,
        "    + {}",
        new.get(at)
            .map_or("<end of expansion>".into(), |l| clip(l, column))
    );
    for line in new.iter().skip(at + 1).take(CONTEXT_LINES) {
        let _ = writeln!(out, "      {}", clip(line, 0));
    }
    out
}

/// A line cut to about 160 characters around byte `column`.
fn clip(line: &str, column: usize) -> String {
    const WIDTH: usize = 160;
    if line.len() <= WIDTH {
        return line.to_owned();
    }
    let floor = |mut i: usize| {
        while !line.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let start = floor(column.saturating_sub(WIDTH / 2).min(line.len()));
    let end = floor((start + WIDTH).min(line.len()));
    format!(
        "{}{}{}",
        if start > 0 { "…" } else { "" },
        &line[start..end],
        if end < line.len() { "…" } else { "" }
    )
}

#[test]
fn derive_sites_are_found_at_any_depth_with_their_scope() {
    let source = r#"
        use fsm_core::prelude::*;

        #[derive(Clone)]
        /// Docs.
        #[derive(OperatorFsm, Debug)]
        #[fsm(resource = u8)]
        #[derive(PartialEq)]
        pub(crate) enum Top { A }

        mod v1 {
            #[derive(fsm_core::OperatorFsm)]
            pub enum Db { A }
        }

        fn test() {
            let _ = async {
                #[derive(OperatorFsm)]
                enum S { A }
            };
            #[derive(OperatorFsm)]
            enum S { B }
        }

        #[derive(OperatorFsm)]
        struct NotAnEnum;
    "#;
    let found = find_in_source(source).expect("understood");
    let names: Vec<String> = found
        .iter()
        .map(|f| [f.scope.clone(), vec![f.name.clone()]].concat().join("::"))
        .collect();
    assert_eq!(names, ["Top", "v1::Db", "test::S", "test::S", "NotAnEnum"]);
    // The derive naming `OperatorFsm` and the derives before it are gone;
    // the others, and the documentation, stay.
    assert_eq!(
        found[0].input.to_string(),
        "# [doc = \" Docs.\"] # [fsm (resource = u8)] # [derive (PartialEq)] pub (crate) enum Top { A }"
    );
}

#[test]
fn unknown_mentions_of_the_derive_are_errors() {
    for source in [
        "#[cfg_attr(test, derive(OperatorFsm))] enum S { A }",
        "#[derive(OperatorFsm)] fn f() {}",
        "#[derive(OperatorFsm)] enum S { #[cfg(test)] A }",
    ] {
        assert!(find_in_source(source).is_err(), "{source}");
    }
}

#[test]
fn the_rendering_is_to_string_with_line_breaks() {
    let tokens: TokenStream = "#[doc = \"a; b\"] impl X { fn f(&self) -> [u8; 2] { let a = S { x: 1, y: 2 }; match a { _ => {} } [0; 2] } }"
        .parse()
        .expect("lexes");
    let (flat, pretty) = render(&tokens);
    assert_eq!(flat, tokens.to_string());
    assert_eq!(
        pretty,
        "# [doc = \"a; b\"]\nimpl X {\n    fn f (& self) -> [u8 ; 2] {\n        let a = S {\n            x : 1 ,\n            y : 2\n        } ;\n        match a {\n            _ => { }\n        }\n        [0 ; 2]\n    }\n}\n"
    );
}
