//! Kubewarden field masks, as the policy-server applies them (kubewarden-controller
//! v1.36.0-beta.1, `crates/policy-evaluator/src/callback_handler/kubernetes/field_mask.rs`,
//! `prune_in_place`): an allow-list of dot paths over an object's *data*. The host holds every
//! object as a kube `DynamicObject`, whose `apiVersion`, `kind` and `metadata` stand apart from its
//! data, and prunes `obj.data` alone (`callback_handler.rs` lines 281 and 306 on a GET,
//! `kubernetes/reflector.rs` line 193 for a list's store): every answer carries each object's
//! whole metadata, whatever the masks say, and a `metadata.*` mask keeps nothing more.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// The fields a `DynamicObject` holds apart from its data, which no mask prunes.
const UNMASKED: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// `FieldMaskNode`: a node without children keeps everything below it. Paths are not leaves:
/// given `spec` and `spec.x`, the node `spec` has a child and keeps `spec.x` alone.
#[derive(Default, Debug)]
struct Node {
    children: BTreeMap<String, Node>,
}

fn build(paths: &[String]) -> Node {
    let mut root = Node::default();
    for path in paths {
        let mut node = &mut root;
        for part in path.split('.') {
            node = node.children.entry(part.to_owned()).or_default();
        }
    }
    root
}

/// `prune_in_place`: an object keeps the keys the node names, each pruned by its child; an
/// array's items are pruned by the same node; a scalar is kept whole, even where the path goes
/// deeper than it.
fn prune(value: &mut Value, node: &Node) {
    if node.children.is_empty() {
        return;
    }
    match value {
        Value::Object(map) => map.retain(|key, value| match node.children.get(key) {
            Some(child) => {
                prune(value, child);
                true
            }
            None => false,
        }),
        Value::Array(items) => items.iter_mut().for_each(|item| prune(item, node)),
        _ => {}
    }
}

/// Which fields of an object the host's masks reach.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Reach {
    /// Its data, as Kubewarden's host prunes them.
    #[default]
    Data,
    /// Its metadata too: the upstream change docs/benchmarks.md weighs, measured on the same
    /// trees (an answer then carries only the `metadata.*` paths a policy names).
    Metadata,
}

/// Applies `masks` as a host whose masks reach `reach`.
pub fn apply_reaching(object: &Value, masks: Option<&[String]>, reach: Reach) -> Value {
    let mut kept = apply(object, masks);
    if reach == Reach::Metadata
        && let (Some(paths), Some(meta)) =
            (masks.filter(|m| !m.is_empty()), kept.get_mut("metadata"))
    {
        match build(paths).children.get("metadata") {
            Some(node) => prune(meta, node),
            None => *meta = Value::Object(Map::new()),
        }
    }
    kept
}

/// Applies `masks` to `object`'s data; no masks (or an empty list) keeps everything, and
/// `apiVersion`, `kind` and `metadata` are always kept whole.
pub fn apply(object: &Value, masks: Option<&[String]>) -> Value {
    let (Some(paths), Value::Object(fields)) = (masks.filter(|m| !m.is_empty()), object) else {
        return object.clone();
    };
    let root = build(paths);
    let mut kept = Map::new();
    for (key, value) in fields {
        if UNMASKED.contains(&key.as_str()) {
            kept.insert(key.clone(), value.clone());
        } else if let Some(child) = root.children.get(key) {
            let mut value = value.clone();
            prune(&mut value, child);
            kept.insert(key.clone(), value);
        }
    }
    Value::Object(kept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn masks(paths: &[&str]) -> Vec<String> {
        paths.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn masks_prune_the_data_and_never_the_metadata() {
        // callback_handler.rs:281/306 and reflector.rs:193 prune `obj.data`: a DynamicObject's
        // metadata is not in it, so it comes back whole (uid, annotations, finalizers, …).
        let object = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "a", "namespace": "b", "labels": {"x": "1"}, "uid": "u", "finalizers": ["f"]},
            "spec": {"containers": [{"image": "i", "name": "n"}, {"image": "j"}], "cardinality": {"max": 1, "scope": "tenant"}},
            "status": {"conditions": [{"type": "Ready"}]}});
        assert_eq!(
            apply(
                &object,
                Some(&masks(&[
                    "metadata.name",
                    "spec.containers.image",
                    "spec.cardinality"
                ]))
            ),
            json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "a", "namespace": "b", "labels": {"x": "1"}, "uid": "u", "finalizers": ["f"]},
                "spec": {"containers": [{"image": "i"}, {"image": "j"}], "cardinality": {"max": 1, "scope": "tenant"}}})
        );
        // A mask of metadata alone keeps no data at all.
        assert_eq!(
            apply(&object, Some(&masks(&["metadata.labels"]))),
            json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "a", "namespace": "b", "labels": {"x": "1"}, "uid": "u", "finalizers": ["f"]}})
        );
        assert_eq!(apply(&object, None), object);
        assert_eq!(apply(&object, Some(&[])), object);
    }

    #[test]
    fn masks_reaching_metadata_keep_only_the_metadata_paths_named() {
        let object = json!({"apiVersion": "v1", "kind": "HelmRelease",
            "metadata": {"name": "a", "namespace": "b", "labels": {"x": "1"}, "uid": "u"},
            "spec": {"values": {"y": 2}, "interval": "5m"}});
        assert_eq!(
            apply_reaching(
                &object,
                Some(&masks(&[
                    "metadata.name",
                    "metadata.namespace",
                    "spec.values"
                ])),
                Reach::Metadata
            ),
            json!({"apiVersion": "v1", "kind": "HelmRelease",
                "metadata": {"name": "a", "namespace": "b"}, "spec": {"values": {"y": 2}}})
        );
        assert_eq!(
            apply_reaching(&object, Some(&masks(&["spec.interval"])), Reach::Metadata),
            json!({"apiVersion": "v1", "kind": "HelmRelease", "metadata": {}, "spec": {"interval": "5m"}})
        );
        let data_only = Some(masks(&["metadata.name"]));
        assert_eq!(
            apply_reaching(&object, data_only.as_deref(), Reach::Data),
            apply(&object, data_only.as_deref())
        );
    }

    #[test]
    fn prune_in_place_keeps_scalars_and_refines_a_path_given_with_a_deeper_one() {
        // field_mask.rs `prune_in_place`: a scalar where the path goes deeper is kept; arrays are
        // transparent; a node with children prunes, so `spec` beside `spec.x` keeps `spec.x`.
        assert_eq!(
            apply(&json!({"spec": "scalar"}), Some(&masks(&["spec.x"]))),
            json!({"spec": "scalar"})
        );
        assert_eq!(
            apply(
                &json!({"spec": ["a", {"x": 1, "y": 2}]}),
                Some(&masks(&["spec.x"]))
            ),
            json!({"spec": ["a", {"x": 1}]})
        );
        assert_eq!(
            apply(
                &json!({"spec": {"x": 1, "y": 2}}),
                Some(&masks(&["spec", "spec.x"]))
            ),
            json!({"spec": {"x": 1}})
        );
    }
}
