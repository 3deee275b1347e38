//! Every class of break of every field of the settings' grammar (docs/settings.md), each at one
//! place of otherwise valid settings, under each rule source: refused by what `validate_settings`
//! runs (`Settings::from_json`), naming the path: `e2e/settings-breaks.yaml`, the table the
//! simulator walks against the module too (`simulator/src/validation.rs`).
#![cfg(not(target_arch = "wasm32"))]

use cozystack_resolver::model::settings::Settings;
use serde_json::{Value, json};

const SOURCES: &[&str] = &["builtin", "settings", "applicationDefinitions"];

/// The settings' grammar broken one place at a time: the table the simulator walks too.
#[derive(serde::Deserialize)]
struct Breaks {
    shared: std::collections::BTreeMap<String, Vec<Value>>,
    prefix: Vec<Value>,
    blocks: std::collections::BTreeMap<String, Vec<Value>>,
}

fn breaks() -> Breaks {
    serde_yaml::from_str(include_str!("../../e2e/settings-breaks.yaml"))
        .unwrap_or_else(|e| panic!("e2e/settings-breaks.yaml: {e}"))
}

/// `base` with `value` at the dotted `path`.
fn with(base: &Value, path: &str, value: Value) -> Value {
    let mut settings = base.clone();
    let keys: Vec<&str> = path.split('.').collect();
    let mut at = &mut settings;
    for key in &keys[..keys.len() - 1] {
        if !at[*key].is_object() {
            at[*key] = json!({});
        }
        at = &mut at[*key];
    }
    at[keys[keys.len() - 1]] = value;
    settings
}

/// The message `validate_settings` gives, or `None` when it accepts them.
fn refusal(settings: &Value) -> Option<String> {
    Settings::from_json(&settings.to_string())
        .err()
        .map(|e| e.to_string())
}

#[test]
fn every_break_of_every_field_is_refused_naming_its_path() {
    let mut missed = Vec::new();
    let mut tried = 0;
    for source in SOURCES {
        let base = json!({"definitionSource": source});
        assert_eq!(
            refusal(&base),
            None,
            "{source}: the base settings are valid"
        );
        let table = breaks();
        let mut cases: Vec<(String, Value)> = Vec::new();
        for (path, values) in table.shared {
            cases.extend(values.into_iter().map(|v| (path.clone(), v)));
        }
        let prefixes = table.prefix.into_iter();
        cases.extend(prefixes.map(|v| ("releasePrefixes.Postgres".to_owned(), v)));
        for (block, values) in table.blocks {
            let path = format!("definitions.Redis.{block}");
            cases.extend(values.into_iter().map(|v| (path.clone(), v)));
        }
        for (path, value) in cases {
            tried += 1;
            let settings = with(&base, &path, value.clone());
            // The path as the message names it: the field, or the unknown key's own name.
            let last = path.rsplit('.').next().unwrap_or(&path);
            match refusal(&settings) {
                Some(message)
                    if message.contains(&path) || message.contains(&format!("`{last}`")) => {}
                answer => missed.push(format!("{source}: {path} = {value}: {answer:?}")),
            }
        }
    }
    assert!(
        missed.is_empty(),
        "{} of {tried} breaks missed:\n{}",
        missed.len(),
        missed.join("\n")
    );
}

/// A kind the rule source does not know: a typo judges nothing, so it is refused under
/// `builtin` and `settings`, unless `releasePrefixes` names it (a kind of the operator's own);
/// under `applicationDefinitions` the cluster's definitions say which kinds exist.
#[test]
fn a_kind_the_rule_source_does_not_know_is_refused_where_the_module_can_tell() {
    let block = json!({"dashboard": {"visibility": "module"}});
    for source in ["builtin", "settings"] {
        let typo = json!({"definitionSource": source, "definitions": {"Monitorng": block}});
        let message = refusal(&typo).unwrap_or_default();
        assert!(
            message.starts_with("definitions.Monitorng: no such kind in the built-in rule set ("),
            "{source}: {message}"
        );
        let own = json!({"definitionSource": source, "definitions": {"Widget": block},
            "releasePrefixes": {"Widget": "widget-"}});
        assert_eq!(
            refusal(&own),
            None,
            "{source}: a kind of the operator's own"
        );
    }
    let listed = json!({"definitionSource": "applicationDefinitions",
        "definitions": {"Monitorng": block}});
    assert_eq!(refusal(&listed), None);
}

/// Every supported release name is accepted, exactly as written.
#[test]
fn every_supported_release_name_is_accepted() {
    for release in [
        "v1.5.0", "v1.5.1", "v1.5.2", "v1.5.3", "v1.5.4", "v1.6.0", "v1.6.1", "v1.6.2", "main",
    ] {
        assert_eq!(
            refusal(&json!({"cozystackRelease": release})),
            None,
            "{release}"
        );
    }
}
