//! The resolver's modules form layers a reader climbs bottom up: the model, the change, the
//! rules, the routing, the dashboard. This reads every `crate::` path of
//! `src/` (comments left out) and fails on a path that names no module file, on an import of a
//! higher layer, and on any import cycle between modules. It reads files: native builds only.
#![cfg(not(target_arch = "wasm32"))]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, bottom up: the first path segment of each module.
const LAYERS: &[&str] = &["model", "change", "rules", "decide", "dashboard"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, as its module path (`model::facts`; `model` for
/// `model/mod.rs`); `lib.rs`, the crate root that only declares and re-exports, is left out.
fn modules(dir: &Path, prefix: &str, out: &mut BTreeMap<String, PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let stem = path.file_stem().and_then(|s| s.to_str()).expect("name");
        let module = if prefix.is_empty() {
            stem.to_owned()
        } else if stem == "mod" {
            prefix.to_owned()
        } else {
            format!("{prefix}::{stem}")
        };
        if path.is_dir() {
            modules(&path, &module, out);
        } else if path.extension().is_some_and(|e| e == "rs") && module != "lib" {
            out.insert(module, path);
        }
    }
}

/// The code of a file without its comments (a doc link is no import).
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The module each `crate::a::b::…` path of `code` names: its longest prefix that is a module.
/// A path that names none (a re-export of the crate root) is an error.
fn imports(code: &str, known: &BTreeMap<String, PathBuf>) -> Result<BTreeSet<String>, String> {
    let mut found = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        let path: Vec<&str> = rest
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .next()
            .unwrap_or_default()
            .split("::")
            .filter(|s| !s.is_empty())
            .collect();
        let module = (1..=path.len())
            .rev()
            .map(|n| path[..n].join("::"))
            .find(|candidate| known.contains_key(candidate));
        match module {
            Some(module) => {
                found.insert(module);
            }
            None => {
                return Err(format!(
                    "crate::{} names no module file: use the module's own path",
                    path.join("::")
                ));
            }
        }
    }
    Ok(found)
}

fn layer(module: &str) -> usize {
    let top = module.split("::").next().unwrap_or_default();
    LAYERS
        .iter()
        .position(|l| *l == top)
        .unwrap_or_else(|| panic!("module {module} is in no layer of {LAYERS:?}"))
}

/// One cycle of `graph`, as the modules it goes through, if there is any.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut found = path[at..].to_vec();
            found.push(node.to_owned());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, done, path) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut done, &mut Vec::new()))
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut known = BTreeMap::new();
    modules(&src(), "", &mut known);
    assert!(known.len() >= 20, "the modules were not read: {known:?}");
    known
        .iter()
        .map(|(module, path)| {
            let mut edges =
                imports(&code(path), &known).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            // A module may use itself and its own submodules.
            edges.retain(|to| to != module && !to.starts_with(&format!("{module}::")));
            (module.clone(), edges)
        })
        .collect()
}

#[test]
fn modules_import_only_their_own_layer_and_the_ones_below() {
    let upward: Vec<String> = graph()
        .iter()
        .flat_map(|(from, edges)| edges.iter().map(move |to| (from, to)))
        .filter(|(from, to)| layer(to) > layer(from))
        .map(|(from, to)| format!("{from} -> {to}"))
        .collect();
    assert!(
        upward.is_empty(),
        "imports that climb a layer ({}): {upward:?}",
        LAYERS.join(" < ")
    );
}

#[test]
fn no_import_cycle_between_modules() {
    assert_eq!(cycle(&graph()), None, "an import cycle");
}

#[test]
fn the_checks_catch_what_they_are_for() {
    let graph = |edges: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, to) in edges {
            g.entry((*from).into()).or_default().insert((*to).into());
            g.entry((*to).into()).or_default();
        }
        g
    };
    assert_eq!(
        cycle(&graph(&[("a", "b"), ("b", "c"), ("c", "a")])),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    assert_eq!(cycle(&graph(&[("a", "b"), ("a", "c"), ("b", "c")])), None);
    let known: BTreeMap<String, PathBuf> = ["model", "model::facts"]
        .iter()
        .map(|m| ((*m).to_owned(), PathBuf::new()))
        .collect();
    assert_eq!(
        imports("use crate::model::facts::{Instance, Namespace};", &known),
        Ok(BTreeSet::from(["model::facts".to_owned()]))
    );
    assert_eq!(
        imports("use crate::facts::Instance;", &known),
        Err("crate::facts::Instance names no module file: use the module's own path".into())
    );
    assert!(layer("rules::cardinality") > layer("model::facts"));
}
