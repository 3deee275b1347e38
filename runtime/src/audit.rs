//! What Kubewarden's audit scanner sends for an object that already exists.

use serde_json::{Value, json};

/// The AdmissionRequest the audit scanner builds for an existing object
/// (`audit-scanner:internal/scanner/admission_review.go`): a CREATE of the whole object, its
/// uid as the request uid, the kind as the resource, and no userInfo at all.
pub fn replay_request(object: &Value) -> Result<Value, String> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let name = object.pointer("/metadata/name").and_then(Value::as_str);
    let Some(name) = name.filter(|n| !kind.is_empty() && !n.is_empty()) else {
        let text: String = object.to_string().chars().take(160).collect();
        return Err(format!(
            "an object without apiVersion, kind or metadata.name: {text}"
        ));
    };
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = json!({"group": group, "version": version, "kind": kind});
    let mut request = json!({
        "uid": object.pointer("/metadata/uid").cloned().unwrap_or(json!("")),
        "kind": gvk,
        "resource": {"group": group, "version": version, "resource": kind},
        "requestKind": gvk,
        "name": name,
        "operation": "CREATE",
        "userInfo": {},
        "object": object,
        "oldObject": null,
    });
    if let Some(namespace) = object.pointer("/metadata/namespace") {
        request["namespace"] = namespace.clone();
    }
    Ok(request)
}
