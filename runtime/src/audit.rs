//! What Kubewarden's audit scanner sends for an object that already exists.

use serde::Serialize;
use serde_json::Value;

use crate::error::Error;

/// The AdmissionRequest the audit scanner builds for an existing object
/// (`audit-scanner:internal/scanner/admission_review.go`): a CREATE of the whole object, its
/// uid as the request uid, the kind as the resource, and no userInfo at all. Borrowed from the
/// object, so that a replay writes it into its payload without copying it first.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Replay<'o> {
    uid: &'o Value,
    kind: Gvk<'o>,
    resource: Resource<'o>,
    request_kind: Gvk<'o>,
    name: &'o str,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'o Value>,
    operation: &'static str,
    user_info: NoUser,
    object: &'o Value,
    old_object: (),
}

#[derive(Serialize, Clone, Copy)]
struct Gvk<'o> {
    group: &'o str,
    version: &'o str,
    kind: &'o str,
}

#[derive(Serialize)]
struct Resource<'o> {
    group: &'o str,
    version: &'o str,
    resource: &'o str,
}

/// `userInfo: {}`: the scanner sends none.
#[derive(Serialize)]
struct NoUser {}

/// The uid of an object that has none.
static NO_UID: Value = Value::String(String::new());

impl<'o> Replay<'o> {
    pub fn of(object: &'o Value) -> Result<Replay<'o>, Error> {
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let kind = object["kind"].as_str().unwrap_or_default();
        let name = object.pointer("/metadata/name").and_then(Value::as_str);
        let Some(name) = name.filter(|n| !kind.is_empty() && !n.is_empty()) else {
            let text: String = object.to_string().chars().take(160).collect();
            return Err(Error::Unnamed(text));
        };
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let gvk = Gvk {
            group,
            version,
            kind,
        };
        Ok(Replay {
            uid: object.pointer("/metadata/uid").unwrap_or(&NO_UID),
            kind: gvk,
            resource: Resource {
                group,
                version,
                resource: kind,
            },
            request_kind: gvk,
            name,
            namespace: object.pointer("/metadata/namespace"),
            operation: "CREATE",
            user_info: NoUser {},
            object,
            old_object: (),
        })
    }
}

/// [`Replay`] as a JSON value.
pub fn replay_request(object: &Value) -> Result<Value, Error> {
    Ok(serde_json::to_value(Replay::of(object)?)?)
}
