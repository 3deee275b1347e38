//! `docs/rules.md` lists the table's rows by name, in their order: the one order a person is told
//! is the one `RULES` runs.
#![cfg(not(target_arch = "wasm32"))]

use cozystack_resolver::rules::RULES;

#[test]
fn the_documented_order_is_the_table_s() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/rules.md"))
        .unwrap_or_else(|e| panic!("docs/rules.md: {e}"));
    let line = doc
        .lines()
        .find_map(|l| l.strip_prefix("The rows of `RULES`, by name: "))
        .unwrap_or_else(|| panic!("docs/rules.md names no rows of RULES"));
    let documented: Vec<&str> = line
        .trim_end_matches('.')
        .split(", ")
        .map(|name| name.trim_matches('`'))
        .collect();
    let table: Vec<&str> = RULES.iter().map(|rule| rule.name).collect();
    assert_eq!(
        documented, table,
        "docs/rules.md and resolver/src/rules/mod.rs disagree"
    );
    // Each name is its rule's module: one file under resolver/src/rules/.
    for name in table {
        let file = format!("{}/src/rules/{name}.rs", env!("CARGO_MANIFEST_DIR"));
        assert!(std::path::Path::new(&file).is_file(), "{name}: no {file}");
    }
}
