//! No library crate of the workspace has an import cycle between its
//! modules, and no module reaches a sibling's item through a re-export
//! of the crate root.
//!
//! Read from the sources (code, not comments, not the `#[cfg(test)]`
//! module that ends a file): each file is a module (`src/a/b.rs` and
//! `src/a/b/mod.rs` are `a::b`), and each `crate::…`, `super::…` or
//! `self::…` path in it refers to the deepest module the path names. A
//! reference from `a::x` to `a::y::z` is an arrow between the siblings
//! `a::x` and `a::y`; a reference to an ancestor or a descendant is not an
//! arrow (a module declares its children and they may use what it
//! defines). At every level, the arrows between siblings must form no
//! cycle.
//!
//! A path `crate::Name` whose `Name` is an item the crate root re-exports
//! from a module is an import through the root: modules import from the
//! module that defines what they use.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The library crates, by the directory of their manifest.
const CRATES: [&str; 6] = [
    "fsm-core",
    "fsm-macros",
    "fsm-kube",
    "fsm-testkit",
    "kubectl-fsm",
    "operator-fsm",
];

/// A module's path below the crate root: `[]` is the root, `["a", "b"]`
/// is `a::b`.
type ModPath = Vec<String>;

/// A crate's modules, each with its code.
struct Crate {
    name: String,
    modules: BTreeMap<ModPath, String>,
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_owned()
}

/// The module path of `file` below `src`.
fn module_of(src: &Path, file: &Path) -> ModPath {
    let relative = file.strip_prefix(src).expect("a file under src");
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().expect("a file name");
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && !(stem == "lib" && parts.is_empty()) {
        parts.push(stem.to_owned());
    }
    parts
}

/// The code of a file: without comment lines and without the inline test
/// module that comes last (`#[cfg(test)]` then `mod tests {`); a test
/// module declared in a file of its own (`#[cfg(test)]` then `mod x;`) is
/// left out by [`read_crate`] instead, and the code after it still counts.
fn code(source: &str) -> String {
    let mut out = String::new();
    let mut lines = source.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|next| next.trim_end().ends_with('{'))
        {
            break;
        }
        if !trimmed.starts_with("//") {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The modules a file declares for tests only (`#[cfg(test)]` before
/// `mod name;`).
fn test_only_children(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut test_only = false;
    for line in source.lines().map(str::trim) {
        if test_only
            && let Some(name) = line
                .strip_prefix("pub(crate) mod ")
                .or_else(|| line.strip_prefix("mod "))
                .and_then(|rest| rest.strip_suffix(';'))
        {
            out.push(name.to_owned());
        }
        test_only = line == "#[cfg(test)]";
    }
    out
}

fn read_crate(dir: &str) -> Crate {
    let src = workspace().join(dir).join("src");
    let mut modules = BTreeMap::new();
    let mut tests_only: Vec<ModPath> = Vec::new();
    let mut dirs = vec![src.clone()];
    while let Some(at) = dirs.pop() {
        for entry in std::fs::read_dir(&at).unwrap_or_else(|e| panic!("{}: {e}", at.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                // src/bin holds binaries, not modules of the library.
                if path != src.join("bin") {
                    dirs.push(path);
                }
            } else if path.extension().is_some_and(|x| x == "rs") && path != src.join("main.rs") {
                let source = std::fs::read_to_string(&path).expect("a source file");
                let module = module_of(&src, &path);
                for child in test_only_children(&source) {
                    let mut child_path = module.clone();
                    child_path.push(child);
                    tests_only.push(child_path);
                }
                modules.insert(module, code(&source));
            }
        }
    }
    // Test modules in files of their own are not the library's code.
    modules.retain(|module, _| !tests_only.iter().any(|t| module.starts_with(t)));
    Crate {
        name: dir.to_owned(),
        modules,
    }
}

/// Every path in `code` that starts with one of `roots` (`crate`,
/// `super`, `self`), as its segments, a `use` group expanded into one path
/// per entry (`crate::{a, b::{c, d}}` gives `crate::a`, `crate::b::c`,
/// `crate::b::d`).
fn paths(code: &str) -> Vec<Vec<String>> {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts_word = i == 0 || !(is_ident(chars[i - 1]) || chars[i - 1] == ':');
        if starts_word {
            for root in ["crate", "super", "self"] {
                let word: Vec<char> = root.chars().collect();
                let end = i + word.len();
                if chars.get(i..end) == Some(&word[..])
                    && chars.get(end..end + 2) == Some(&[':', ':'][..])
                {
                    let mut prefix = vec![root.to_owned()];
                    expand(&chars, end + 2, &mut prefix, &mut out);
                }
            }
        }
        i += 1;
    }
    out
}

/// Reads the rest of a path from `at` after `prefix`, pushing every path
/// it names (a group gives several).
fn expand(chars: &[char], mut at: usize, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let depth = prefix.len();
    loop {
        while chars.get(at).is_some_and(|c| c.is_whitespace()) {
            at += 1;
        }
        if chars.get(at) == Some(&'{') {
            // A group: each entry is a path of its own after the prefix.
            at += 1;
            loop {
                while chars
                    .get(at)
                    .is_some_and(|c| c.is_whitespace() || *c == ',')
                {
                    at += 1;
                }
                match chars.get(at) {
                    None => break,
                    Some('}') => break,
                    _ => {}
                }
                let mut entry = prefix.clone();
                expand(chars, at, &mut entry, out);
                // Skip to the entry's end: a comma or the group's close at
                // this depth.
                let mut nesting = 0;
                while let Some(c) = chars.get(at) {
                    match c {
                        '{' => nesting += 1,
                        '}' if nesting == 0 => break,
                        '}' => nesting -= 1,
                        ',' if nesting == 0 => break,
                        _ => {}
                    }
                    at += 1;
                }
            }
            prefix.truncate(depth);
            return;
        }
        let name: String = chars[at.min(chars.len())..]
            .iter()
            .take_while(|c| is_ident(**c))
            .collect();
        if name.is_empty() {
            break;
        }
        at += name.chars().count();
        prefix.push(name);
        if chars.get(at..at + 2) == Some(&[':', ':'][..]) {
            at += 2;
        } else {
            break;
        }
    }
    out.push(prefix.clone());
}

/// The module a path written in module `from` refers to: the deepest
/// module of the crate it names, and what follows that module (an item's
/// name, if any).
fn resolve(krate: &Crate, from: &ModPath, path: &[String]) -> Option<(ModPath, Option<String>)> {
    let mut base: ModPath = match path.first()?.as_str() {
        "crate" => Vec::new(),
        "self" => from.clone(),
        "super" => {
            let mut parent = from.clone();
            parent.pop()?;
            parent
        }
        _ => return None,
    };
    let mut rest = &path[1..];
    while rest.first().is_some_and(|s| s == "super") {
        base.pop()?;
        rest = &rest[1..];
    }
    let mut module = base;
    let mut item = None;
    for segment in rest {
        let mut deeper = module.clone();
        deeper.push(segment.clone());
        if krate.modules.contains_key(&deeper) {
            module = deeper;
        } else {
            item = Some(segment.clone());
            break;
        }
    }
    Some((module, item))
}

/// The arrows between sibling modules: (parent, from child, to child).
fn sibling_arrows(krate: &Crate) -> BTreeSet<(ModPath, String, String)> {
    let reexports = root_reexports(krate);
    let mut arrows = BTreeSet::new();
    for (from, code) in &krate.modules {
        for path in paths(code) {
            let Some((mut to, item)) = resolve(krate, from, &path) else {
                continue;
            };
            // An item of the root's re-exports belongs to its module.
            if to.is_empty()
                && let Some(defined) = item.and_then(|item| reexports.get(&item))
            {
                to = defined.clone();
            }
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            // An ancestor or a descendant: no arrow.
            if common == from.len() || common == to.len() {
                continue;
            }
            arrows.insert((
                from[..common].to_vec(),
                from[common].clone(),
                to[common].clone(),
            ));
        }
    }
    arrows
}

/// Every cycle among the children of one parent: each group of siblings
/// that reach each other (a strongly connected component of two or more),
/// with its parent.
fn cycles(arrows: &BTreeSet<(ModPath, String, String)>) -> Vec<(ModPath, Vec<String>)> {
    let mut by_parent: BTreeMap<&ModPath, BTreeMap<&str, BTreeSet<&str>>> = BTreeMap::new();
    for (parent, from, to) in arrows {
        by_parent
            .entry(parent)
            .or_default()
            .entry(from)
            .or_default()
            .insert(to);
    }
    let mut out = Vec::new();
    for (parent, graph) in by_parent {
        for group in tangled(&graph) {
            out.push((parent.clone(), group));
        }
    }
    out
}

/// The groups of two or more nodes of `graph` that all reach each other.
fn tangled(graph: &BTreeMap<&str, BTreeSet<&str>>) -> Vec<Vec<String>> {
    let reach = |start: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![start.to_owned()];
        while let Some(node) = todo.pop() {
            for next in graph.get(node.as_str()).into_iter().flatten() {
                if seen.insert((*next).to_owned()) {
                    todo.push((*next).to_owned());
                }
            }
        }
        seen
    };
    let nodes: BTreeSet<&str> = graph
        .iter()
        .flat_map(|(from, to)| std::iter::once(*from).chain(to.iter().copied()))
        .collect();
    let reached: BTreeMap<&str, BTreeSet<String>> = nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut grouped: BTreeSet<&str> = BTreeSet::new();
    let mut out = Vec::new();
    for node in &nodes {
        if grouped.contains(node) {
            continue;
        }
        let group: Vec<String> = nodes
            .iter()
            .filter(|other| reached[node].contains(**other) && reached[**other].contains(*node))
            .map(|n| (*n).to_owned())
            .collect();
        if group.len() > 1 {
            grouped.extend(nodes.iter().filter(|n| group.iter().any(|g| g == **n)));
            out.push(group);
        }
    }
    out
}

/// The names the crate root re-exports (`pub use a::B;` in lib.rs), each
/// with the module it comes from.
fn root_reexports(krate: &Crate) -> BTreeMap<String, ModPath> {
    let mut out = BTreeMap::new();
    let Some(root) = krate.modules.get(&Vec::new()) else {
        return out;
    };
    let mut statement = String::new();
    for line in root.lines().map(str::trim) {
        if statement.is_empty() && !line.starts_with("pub use ") {
            continue;
        }
        statement.push_str(line);
        statement.push(' ');
        if !line.ends_with(';') {
            continue;
        }
        let body = statement
            .trim()
            .trim_start_matches("pub use ")
            .trim_end_matches(';')
            .to_owned();
        statement.clear();
        let as_path = format!("crate::{body}");
        for path in paths(&as_path) {
            let Some((module, Some(item))) = resolve(krate, &Vec::new(), &path) else {
                continue;
            };
            if !module.is_empty() {
                out.insert(item, module);
            }
        }
    }
    out
}

/// Paths in modules other than the root that reach an item through a
/// re-export of the root: (module, item, where it is defined).
fn through_the_root(krate: &Crate) -> Vec<String> {
    let reexports = root_reexports(krate);
    let mut out = Vec::new();
    for (from, code) in &krate.modules {
        if from.is_empty() {
            continue;
        }
        for path in paths(code) {
            if path.first().map(String::as_str) != Some("crate") || path.len() < 2 {
                continue;
            }
            if let Some(defined) = reexports.get(&path[1]) {
                out.push(format!(
                    "{}::{} uses crate::{} (defined in {}::{})",
                    krate.name,
                    from.join("::"),
                    path[1],
                    krate.name,
                    defined.join("::")
                ));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[test]
fn no_library_crate_has_a_module_cycle() {
    let mut found = Vec::new();
    for dir in CRATES {
        let krate = read_crate(dir);
        assert!(
            krate.modules.len() > 1 || dir == "operator-fsm" || dir == "fsm-macros",
            "{dir}'s modules were read"
        );
        let arrows = sibling_arrows(&krate);
        for (parent, group) in cycles(&arrows) {
            let at = if parent.is_empty() {
                "the root".to_owned()
            } else {
                parent.join("::")
            };
            // Each arrow inside the group, to say what ties it.
            let inside: Vec<String> = arrows
                .iter()
                .filter(|(p, from, to)| *p == parent && group.contains(from) && group.contains(to))
                .map(|(_, from, to)| format!("{from} -> {to}"))
                .collect();
            found.push(format!(
                "{dir}, under {at}: {{{}}} ({})",
                group.join(", "),
                inside.join(", ")
            ));
        }
    }
    assert!(found.is_empty(), "module cycles:\n{}", found.join("\n"));
}

#[test]
fn modules_import_from_the_module_that_defines_what_they_use() {
    let mut found = Vec::new();
    for dir in CRATES {
        found.extend(through_the_root(&read_crate(dir)));
    }
    assert!(
        found.is_empty(),
        "imports through the crate root:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_test_module_declared_in_its_own_file_does_not_end_the_code() {
    let source = "mod a;\n#[cfg(test)]\nmod a_tests;\npub use a::B;\n#[cfg(test)]\nmod tests {\n    use crate::c;\n}\n";
    let kept = code(source);
    assert!(kept.contains("pub use a::B;"), "{kept}");
    assert!(!kept.contains("use crate::c"), "{kept}");
    assert_eq!(test_only_children(source), ["a_tests"]);
}

#[test]
fn paths_are_read_with_their_groups_and_relative_roots() {
    let code = "use crate::{a, b::{c, d::E}};\nuse super::f::G;\nfn x() { self::h::i(); }\n";
    let found: Vec<String> = paths(code).iter().map(|p| p.join("::")).collect();
    assert_eq!(
        found,
        [
            "crate::a",
            "crate::b::c",
            "crate::b::d::E",
            "super::f::G",
            "self::h::i"
        ]
    );
}

#[test]
fn cycles_are_found_between_siblings_only() {
    let krate = Crate {
        name: "k".into(),
        modules: [
            (vec![], "pub use a::T;\n".to_owned()),
            (vec!["a".into()], "use crate::b::U;\n".to_owned()),
            (vec!["b".into()], "use super::a::T;\n".to_owned()),
            (vec!["c".into()], "use self::d::V;\n".to_owned()),
            (vec!["c".into(), "d".into()], "use super::W;\n".to_owned()),
            (vec!["e".into()], "use crate::T;\n".to_owned()),
        ]
        .into_iter()
        .collect(),
    };
    assert_eq!(
        cycles(&sibling_arrows(&krate)),
        [(Vec::<String>::new(), vec!["a".to_owned(), "b".to_owned()])]
    );
    assert_eq!(
        through_the_root(&krate),
        ["k::e uses crate::T (defined in k::a)"]
    );
}

/// The public modules declared at the root of the crate in `dir`.
fn public_root_modules(dir: &str) -> Vec<String> {
    let lib = std::fs::read_to_string(workspace().join(dir).join("src/lib.rs"))
        .expect("the crate root reads");
    lib.lines()
        .filter_map(|line| line.strip_prefix("pub mod "))
        .map(|rest| rest.trim_end_matches([';', '{', ' ']).trim().to_owned())
        .collect()
}

#[test]
fn fsm_kube_has_at_most_twelve_public_modules_each_in_the_crate_docs_table() {
    let modules = public_root_modules("fsm-kube");
    assert!(
        modules.len() <= 12,
        "fsm-kube has {} public modules: {modules:?}",
        modules.len()
    );
    let lib = std::fs::read_to_string(workspace().join("fsm-kube/src/lib.rs")).unwrap();
    let table: Vec<&str> = lib.lines().filter(|l| l.starts_with("//! | ")).collect();
    for module in &modules {
        assert!(
            table.iter().any(|row| row.contains(&format!("`{module}`"))),
            "the crate docs' table does not say what `{module}` is for"
        );
    }
}
