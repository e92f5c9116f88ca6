//! The crate's modules form no cycle: reading `src/`, each top-level
//! module's code (not its comments, not its `#[cfg(test)]` module) names
//! the modules it uses as `crate::<module>` (or an item the crate root
//! re-exports from one), and following those references never leads back.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module → the modules its code refers to.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// The top-level modules `lib.rs` declares (not `#[cfg(test)]` ones), and
/// the items it re-exports with the module each comes from.
fn declarations(lib: &str) -> (BTreeSet<String>, BTreeMap<String, String>) {
    let mut modules = BTreeSet::new();
    let mut reexports = BTreeMap::new();
    let mut test_only = false;
    for line in lib.lines().map(str::trim) {
        let declared = line
            .strip_prefix("pub mod ")
            .or_else(|| line.strip_prefix("mod "))
            .and_then(|rest| rest.strip_suffix(';'));
        if let Some(name) = declared
            && !test_only
        {
            modules.insert(name.to_string());
        }
        if let Some((module, items)) = line
            .strip_prefix("pub use ")
            .and_then(|rest| rest.strip_suffix(';'))
            .and_then(|rest| rest.split_once("::"))
            .filter(|(module, _)| *module != "crate")
        {
            for item in items.trim_matches(|c| c == '{' || c == '}').split(',') {
                let name = item.rsplit(" as ").next().unwrap_or(item);
                reexports.insert(name.trim().to_string(), module.to_string());
            }
        }
        test_only = line == "#[cfg(test)]";
    }
    (modules, reexports)
}

/// What a file's code says: without comment lines and without the test
/// module, which comes last in every file.
fn code(source: &str) -> String {
    let mut out = String::new();
    for line in source.lines() {
        let trimmed = line.trim_start();
        if trimmed == "#[cfg(test)]" {
            break;
        }
        if !trimmed.starts_with("//") {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The first path segments after each `crate::` in `code`: `crate::a::b`
/// gives `a`, `crate::{a, b::c}` gives `a` and `b`.
fn referenced(code: &str) -> BTreeSet<String> {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level entries of the group, up to its closing brace.
            let mut depth = 0;
            let mut entry_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => entry_start = true,
                    c if entry_start && is_ident(c) => {
                        let name: String =
                            group[i..].chars().take_while(|c| is_ident(*c)).collect();
                        out.insert(name);
                        entry_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            let name: String = rest.chars().take_while(|c| is_ident(*c)).collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

/// The `.rs` files of module `name`: `name.rs`, or everything under `name/`.
fn files_of(src: &Path, name: &str) -> Vec<PathBuf> {
    let file = src.join(format!("{name}.rs"));
    if file.is_file() {
        return vec![file];
    }
    let mut out = Vec::new();
    let mut dirs = vec![src.join(name)];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                out.push(path);
            }
        }
    }
    out
}

/// The module graph of the crate whose sources are in `src`.
fn graph(src: &Path) -> Graph {
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let (modules, reexports) = declarations(&lib);
    let mut graph = Graph::new();
    for module in &modules {
        let mut uses = BTreeSet::new();
        for file in files_of(src, module) {
            let source = std::fs::read_to_string(&file).expect("a source file");
            for name in referenced(&code(&source)) {
                let target = reexports.get(&name).unwrap_or(&name);
                if target != module && modules.contains(target) {
                    uses.insert(target.clone());
                }
            }
        }
        graph.insert(module.clone(), uses);
    }
    graph
}

/// A cycle of `graph` (`a -> b -> a`), if it has one.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &Graph,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|n| n == node) {
            let mut cycle = path[start..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn the_crate_has_no_module_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = graph(&src);
    assert!(
        graph.len() > 20 && graph["server"].contains("state"),
        "the graph was read: {graph:?}"
    );
    if let Some(cycle) = find_cycle(&graph) {
        panic!("module cycle: {}", cycle.join(" -> "));
    }
}

#[test]
fn references_are_read_from_code_paths_and_groups() {
    let source = "//! See [`crate::a`].\nuse crate::{b, c::{D, E}};\nfn f() { crate::d::g(); }\n#[cfg(test)]\nmod tests { use crate::e; }\n";
    let names: Vec<String> = referenced(&code(source)).into_iter().collect();
    assert_eq!(names, ["b", "c", "d"]);
}

#[test]
fn cycles_are_found_and_named() {
    let edges = |pairs: &[(&str, &str)]| {
        let mut g = Graph::new();
        for (from, to) in pairs {
            g.entry((*from).to_string())
                .or_default()
                .insert((*to).to_string());
            g.entry((*to).to_string()).or_default();
        }
        g
    };
    assert_eq!(
        find_cycle(&edges(&[("a", "b"), ("b", "c"), ("a", "c")])),
        None
    );
    assert_eq!(
        find_cycle(&edges(&[("a", "b"), ("b", "c"), ("c", "a")])),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}

#[test]
fn lib_declarations_skip_test_modules_and_map_reexports() {
    let lib = "mod a;\npub mod b;\n#[cfg(test)]\nmod c;\npub use a::{X, Y};\npub use b::Z as W;\npub use crate::a::V;\n";
    let (modules, reexports) = declarations(lib);
    assert_eq!(modules.into_iter().collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(reexports["Y"], "a");
    assert_eq!(reexports["W"], "b");
    assert!(!reexports.contains_key("V"), "{reexports:?}");
}
