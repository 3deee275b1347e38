//! Kubewarden field masks: an allow-list of dot paths; a path keeps the whole subtree it names,
//! and arrays are traversed implicitly (`spec.containers.image` keeps `image` of each item).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

#[derive(Default, Debug)]
struct Node {
    leaf: bool,
    children: BTreeMap<String, Node>,
}

fn build(paths: &[String]) -> Node {
    let mut root = Node::default();
    for path in paths {
        let mut node = &mut root;
        for part in path.split('.') {
            node = node.children.entry(part.to_owned()).or_default();
        }
        node.leaf = true;
    }
    root
}

fn prune(value: &Value, node: &Node) -> Option<Value> {
    if node.leaf {
        return Some(value.clone());
    }
    match value {
        Value::Object(map) => {
            let kept: Map<String, Value> = map
                .iter()
                .filter_map(|(k, v)| {
                    let child = node.children.get(k)?;
                    prune(v, child).map(|v| (k.clone(), v))
                })
                .collect();
            Some(Value::Object(kept))
        }
        Value::Array(items) => Some(Value::Array(
            items.iter().filter_map(|item| prune(item, node)).collect(),
        )),
        // The path goes deeper than the value: nothing under it to keep.
        _ => None,
    }
}

/// Applies `masks` to `object`; no masks (or an empty list) keeps everything.
pub fn apply(object: &Value, masks: Option<&[String]>) -> Value {
    match masks {
        Some(paths) if !paths.is_empty() => {
            prune(object, &build(paths)).unwrap_or(Value::Object(Map::new()))
        }
        _ => object.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_only_listed_paths() {
        let object = json!({"metadata": {"name": "a", "namespace": "b", "labels": {"x": "1"}, "uid": "u"},
            "spec": {"containers": [{"image": "i", "name": "n"}, {"image": "j"}], "cardinality": {"max": 1, "scope": "tenant"}}});
        let masks: Vec<String> = [
            "metadata.name",
            "metadata.labels",
            "spec.containers.image",
            "spec.cardinality",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            apply(&object, Some(&masks)),
            json!({"metadata": {"name": "a", "labels": {"x": "1"}},
                   "spec": {"containers": [{"image": "i"}, {"image": "j"}], "cardinality": {"max": 1, "scope": "tenant"}}})
        );
        assert_eq!(apply(&object, None), object);
        assert_eq!(
            apply(&json!({"spec": "scalar"}), Some(&["spec.x".to_string()])),
            json!({})
        );
    }
}
