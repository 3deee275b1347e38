//! Every command-and-output example of README.md, docs/ and deploy/README.md runs as written: a
//! `console` block is `$ command` (`>` continues it), `? N` when it exits other than 0, then what
//! it prints, stderr merged as a terminal shows it; `[..]` stands for what varies in a line
//! (timings). The commands run from the workspace root against the bundled cluster, so an output
//! that drifts fails here. `make docs-examples` rewrites the outputs from what the tool prints.

mod common;

use std::path::{Path, PathBuf};

use common::workspace;

/// The pages a person reads: the README, every page of docs/, the deploy guide.
fn pages() -> Vec<PathBuf> {
    let root = workspace();
    let mut pages = vec![root.join("README.md"), root.join("deploy/README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap_or_else(|e| panic!("docs/: {e}"))
        .map(|entry| entry.unwrap_or_else(|e| panic!("{e}")).path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The opening fences of a page, with their info strings.
fn fences(page: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
    let mut open = false;
    let mut infos = Vec::new();
    for line in text.lines() {
        if let Some(info) = line.trim_start().strip_prefix("```") {
            if !open {
                // trycmd reads a fence only at the start of a line: an indented example is
                // never run.
                let indented = line.starts_with(' ') && info.trim() == "console";
                assert!(!indented, "{}: an indented console block", page.display());
                infos.push(info.trim().to_owned());
            }
            open = !open;
        }
    }
    infos
}

#[test]
fn every_example_of_the_docs_prints_what_it_shows() {
    // The commands name paths from the workspace root, as a reader of a checkout runs them.
    std::env::set_current_dir(workspace()).unwrap_or_else(|e| panic!("{e}"));
    let cases = trycmd::TestCases::new();
    cases.register_bin(
        "cozystack-policy",
        std::path::Path::new(env!("CARGO_BIN_EXE_cozystack-policy")),
    );
    for page in pages() {
        cases.case(page);
    }
}

/// A fence without a language would be taken for an example; and the pages whose subject is a
/// command show it running, so the suite above cannot pass by holding no example.
#[test]
fn examples_are_marked_and_the_command_pages_have_them() {
    let mut examples = 0;
    for page in pages() {
        let infos = fences(&page);
        assert!(
            infos.iter().all(|info| !info.is_empty()),
            "{}: a fence without a language (`text` for output that is no example)",
            page.display()
        );
        let console = infos.iter().filter(|info| *info == "console").count();
        let name = page.strip_prefix(workspace()).unwrap_or(&page).to_owned();
        let must = [
            "docs/operator-tool.md",
            "docs/rollout.md",
            "docs/simulator.md",
        ];
        if must.iter().any(|m| name == Path::new(m)) {
            assert!(console > 0, "{}: no console example", name.display());
        }
        examples += console;
    }
    assert!(examples >= 5, "{examples} console examples");
}
