//! `policy-metadata.yml` → the JSON metadata kwctl embeds, and the annotations an OCI
//! manifest carries.

use std::collections::BTreeMap;

use serde_json::Value;
use thiserror::Error;

pub const USAGE: &str = "io.kubewarden.policy.usage";
pub const SOURCE: &str = "io.kubewarden.policy.source";
pub const VERSION: &str = "io.kubewarden.policy.version";
pub const OCI_SOURCE: &str = "org.opencontainers.image.source";

#[derive(Debug, Error)]
pub enum MetadataError {
    #[error("policy metadata: {0}")]
    Yaml(#[from] serde_yaml::Error),
    #[error("policy metadata: {0}")]
    Invalid(String),
}

/// Reads `policy-metadata.yml` and checks what kwctl's annotate checks before embedding.
pub fn from_yaml(text: &str) -> Result<Value, MetadataError> {
    let metadata: Value = serde_yaml::from_str(text)?;
    let invalid = |m: &str| MetadataError::Invalid(m.to_owned());
    let rules = metadata["rules"]
        .as_array()
        .ok_or_else(|| invalid("rules must be a list"))?;
    if rules.is_empty() {
        return Err(invalid("rules must not be empty"));
    }
    for rule in rules {
        for key in ["apiGroups", "apiVersions", "resources", "operations"] {
            let list = rule[key]
                .as_array()
                .ok_or_else(|| invalid(&format!("every rule needs {key}")))?;
            if list.is_empty() || (list.len() > 1 && list.iter().any(|v| v == "*")) {
                return Err(invalid(&format!(
                    "{key} must be non-empty and `*` must stand alone"
                )));
            }
        }
    }
    if !metadata["mutating"].is_boolean() {
        return Err(invalid("mutating must be true or false"));
    }
    for key in ["io.kubewarden.policy.title", VERSION] {
        if !metadata["annotations"][key].is_string() {
            return Err(invalid(&format!("annotation {key} is required")));
        }
    }
    Ok(metadata)
}

/// The metadata as embedded: `protocolVersion` from the module, the README as usage.
pub fn annotated(mut metadata: Value, protocol_version: &str, usage: &str) -> Value {
    metadata["protocolVersion"] = Value::String(protocol_version.to_owned());
    metadata["annotations"][USAGE] = Value::String(usage.to_owned());
    metadata
}

/// Manifest annotations: the single-line metadata annotations (multi-line ones such as the
/// usage are dropped, as kwctl does), with the source also as `org.opencontainers.image.source`.
pub fn manifest_annotations(metadata: &Value) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = metadata["annotations"]
        .as_object()
        .map(|annotations| {
            annotations
                .iter()
                .filter_map(|(k, v)| {
                    v.as_str()
                        .filter(|s| !s.contains('\n'))
                        .map(|s| (k.clone(), s.to_owned()))
                })
                .collect()
        })
        .unwrap_or_default();
    if let Some(source) = out.get(SOURCE).cloned() {
        out.insert(OCI_SOURCE.to_owned(), source);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn manifest_annotations_drop_multiline_and_copy_source() {
        let metadata = annotated(
            json!({"annotations": {SOURCE: "https://x", "a": "b"}}),
            "v1",
            "line one\nline two",
        );
        let out = manifest_annotations(&metadata);
        assert_eq!(out.get(OCI_SOURCE).map(String::as_str), Some("https://x"));
        assert!(!out.contains_key(USAGE));
        assert_eq!(out.len(), 3);
    }

    #[test]
    fn the_committed_metadata_is_valid() {
        let text = include_str!("../../policy-metadata.yml");
        from_yaml(text).unwrap();
        assert!(from_yaml("rules: []\nmutating: false").is_err());
    }
}
