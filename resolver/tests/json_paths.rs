//! The policy finds where a settings or definition text fails to decode after the fact, from
//! serde_json's position (`model::json_path`); these tests check it names the path
//! serde_path_to_error tracks while decoding, for every way to break a sample at one place.
#![cfg(not(target_arch = "wasm32"))]

use cozystack_resolver::model::error::decode_json;
use cozystack_resolver::model::kinds::RuleFields;
use cozystack_resolver::model::settings::Settings;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Every way to break `sample` at one place: each value replaced by one of another type,
/// each object given an unknown key and stripped of each of its keys.
fn broken(sample: &Value) -> Vec<Value> {
    let wrong = [
        json!("x"),
        json!(-1),
        json!(1.5),
        json!(true),
        json!(null),
        json!([]),
        json!([1, "y"]),
        json!({}),
        json!({"k": 1}),
    ];
    let mut out = Vec::new();
    let mut at = |pointer: &str, node: &Value| {
        for value in &wrong {
            let mut copy = sample.clone();
            *copy.pointer_mut(pointer).unwrap() = value.clone();
            out.push(copy);
        }
        if let Value::Object(map) = node {
            let mut copy = sample.clone();
            copy.pointer_mut(pointer)
                .unwrap()
                .as_object_mut()
                .unwrap()
                .insert("unknownKey".into(), json!(1));
            out.push(copy);
            for key in map.keys() {
                let mut copy = sample.clone();
                copy.pointer_mut(pointer)
                    .unwrap()
                    .as_object_mut()
                    .unwrap()
                    .remove(key);
                out.push(copy);
            }
        }
    };
    fn walk(pointer: String, node: &Value, at: &mut dyn FnMut(&str, &Value)) {
        at(&pointer, node);
        match node {
            Value::Object(map) => {
                for (key, child) in map {
                    let key = key.replace('~', "~0").replace('/', "~1");
                    walk(format!("{pointer}/{key}"), child, at);
                }
            }
            Value::Array(items) => {
                for (index, child) in items.iter().enumerate() {
                    walk(format!("{pointer}/{index}"), child, at);
                }
            }
            _ => {}
        }
    }
    walk(String::new(), sample, &mut at);
    out
}

/// The path serde_path_to_error tracks while decoding, and ours found afterwards.
fn both<T: DeserializeOwned>(text: &str) -> Option<(String, String)> {
    let deserializer = &mut serde_json::Deserializer::from_str(text);
    let tracked = serde_path_to_error::deserialize::<_, T>(deserializer).err()?;
    let found = decode_json::<T>(text).err()?.path;
    Some((tracked.path().to_string(), found))
}

fn same_paths<T: DeserializeOwned>(sample: Value) {
    serde_json::from_value::<T>(sample.clone()).expect("the sample decodes");
    let mut compared = 0;
    let mut bad = 0;
    for value in broken(&sample) {
        for text in [
            serde_json::to_string(&value).unwrap(),
            serde_json::to_string_pretty(&value).unwrap(),
        ] {
            if let Some((tracked, found)) = both::<T>(&text) {
                if found != tracked {
                    eprintln!("{found} != {tracked}: {text}");
                    bad += 1;
                }
                compared += 1;
            }
        }
    }
    assert_eq!(bad, 0);
    assert!(compared > 50, "only {compared} broken texts were refused");
}

#[test]
fn finds_the_path_serde_path_to_error_tracks_in_the_settings() {
    same_paths::<Settings>(json!({
        "platformUsers": ["system:serviceaccount:cozy-system:*"],
        "platformGroups": ["cozystack-cluster-admin"],
        "platformServiceAccountNamespaces": ["cozy-fluxcd"],
        "teardownUsers": [],
        "tenantAdminGroupSuffixes": ["-admin", "-super-admin"],
        "tenantGroupPrefix": "oidc:",
        "tenantServiceAccountsAreAdmins": true,
        "attachableClasses": ["default"],
        "tenantModules": {"monitoring": "Monitoring", "etcd": "Etcd"},
        "platformWriters": "warn",
        "legacyProviderClasses": ["etcd"],
        "definitions": {"Monitoring": {"cardinality": {"scope": "tenant", "max": 1}}},
        "definitionSource": "builtin",
        "releasePrefixes": {"Postgres": "postgres-"},
        "auditScannerUsername": "",
    }));
}

#[test]
fn finds_the_path_serde_path_to_error_tracks_in_the_rule_fields() {
    same_paths::<RuleFields>(json!({
        "dashboard": {"visibility": "module", "module": true},
        "cardinality": {"scope": "cluster", "max": 2, "slots": ["a", "b"], "slotNamespace": "tenant-root"},
        "protection": {"deletion": "protect", "edit": "adminOnly"},
        "capability": {"provides": ["monitoring"], "consumes": ["etcd"], "share": "children"},
    }));
}

#[test]
fn finds_the_path_serde_path_to_error_tracks_in_nested_lists() {
    same_paths::<std::collections::BTreeMap<String, Vec<Vec<u32>>>>(json!({
        "a": [[1, 2], [3]],
        "b~/\"c": [[4]],
    }));
}
