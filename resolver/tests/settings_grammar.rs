//! Every class of break of every field of the settings' grammar (docs/settings.md), each at one
//! place of otherwise valid settings, under each rule source: refused by what `validate_settings`
//! runs (`Settings::from_json`), naming the path. A class not listed here is one no test tries;
//! the simulator walks the same grammar against the module (`simulator/src/validation.rs`).
#![cfg(not(target_arch = "wasm32"))]

use cozystack_resolver::model::settings::Settings;
use serde_json::{Value, json};

const SOURCES: &[&str] = &["builtin", "settings", "applicationDefinitions"];

/// (the path, the values that break it).
fn shared() -> Vec<(&'static str, Vec<Value>)> {
    let identities = || vec![json!("alice"), json!([5]), json!([""]), json!({})];
    let classes = || {
        vec![
            json!("etcd"),
            json!([""]),
            json!(["Bad Class"]),
            json!(["etcd", 5]),
        ]
    };
    vec![
        ("platformUsers", identities()),
        ("platformGroups", identities()),
        ("platformServiceAccountNamespaces", {
            let mut v = identities();
            v.push(json!(["Not_A_Namespace"]));
            v
        }),
        ("teardownUsers", identities()),
        ("tenantAdminGroupSuffixes", identities()),
        ("tenantGroupPrefix", vec![json!(5), json!([])]),
        (
            "tenantServiceAccountsAreAdmins",
            vec![json!("true"), json!(1)],
        ),
        ("attachableClasses", classes()),
        ("legacyProviderClasses", classes()),
        (
            "tenantModules",
            vec![
                json!(["monitoring"]),
                json!({"monitoring": 5}),
                json!({"monitoring": ""}),
                json!({"Monitoring!": "Monitoring"}),
            ],
        ),
        (
            "platformWriters",
            vec![json!("Warn"), json!("allow"), json!(1), json!(["warn"])],
        ),
        (
            "definitionSource",
            vec![json!("builtIn"), json!("cluster"), json!(true)],
        ),
        (
            "cozystackRelease",
            vec![
                json!(" v1.6.2"),
                json!("v1.6.2 "),
                json!("v1.6"),
                json!("1.6.2"),
                json!("V1.6.2"),
                json!("v1.7.0"),
                json!(162),
            ],
        ),
        ("auditScannerUsername", vec![json!(5), json!([])]),
        ("releasePrefixes", vec![json!([]), json!("pg-")]),
        (
            "releasePrefixes.Postgres",
            vec![json!(5), json!("Bad_"), json!("Pg-"), json!("pg_")],
        ),
        ("definitions", vec![json!([]), json!("Monitoring")]),
        ("platformWriter", vec![json!("warn")]),
    ]
}

/// (the block, the values that break it), each under `definitions.Redis`.
fn blocks() -> Vec<(&'static str, Vec<Value>)> {
    vec![
        (
            "dashboard",
            vec![
                json!({"visibility": "Module"}),
                json!({"visibility": "private"}),
                json!({"module": "yes"}),
                json!({"visibilty": "module"}),
                json!("module"),
            ],
        ),
        (
            "cardinality",
            vec![
                json!({"scope": "tenant", "max": -1}),
                json!({"scope": "tenant", "max": 1.5}),
                json!({"scope": "tenant", "max": "1"}),
                json!({"scope": "tenants", "max": 1}),
                json!({"scope": "Tenant", "max": 1}),
                json!({"scope": "tenant", "max": 1, "slots": "cache"}),
                json!({"scope": "tenant", "max": 1, "slotNamespace": 5}),
                json!({"scope": "tenant", "maximum": 1}),
            ],
        ),
        (
            "protection",
            vec![
                json!({"deletion": "protected"}),
                json!({"deletion": "Protect"}),
                json!({"edit": "admin"}),
                json!({"deletion": true}),
                json!({"delete": "protect"}),
            ],
        ),
        (
            "capability",
            vec![
                json!({"provides": [""]}),
                json!({"provides": ["Bad Class"]}),
                json!({"consumes": ["etcd", "Etcd!"]}),
                json!({"consumes": "etcd"}),
                json!({"share": "children"}),
                json!({"provides": ["etcd"], "share": "Children"}),
                json!({"provides": ["etcd"], "shared": "children"}),
            ],
        ),
        ("cardinalty", vec![json!({"scope": "tenant", "max": 1})]),
    ]
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
        let mut cases: Vec<(String, Value)> = Vec::new();
        for (path, values) in shared() {
            for value in values {
                cases.push((path.to_owned(), value));
            }
        }
        for (block, values) in blocks() {
            for value in values {
                cases.push((format!("definitions.Redis.{block}"), value));
            }
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
