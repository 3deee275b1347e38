//! What Kubewarden's audit scanner sends for an object that already exists.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::cluster::ObjectKey;

use crate::error::Error;

/// The AdmissionRequest the audit scanner builds for an existing object
/// (`internal/audit-scanner/scanner/admission_request.go`): a CREATE of the whole object, its
/// uid as the request uid, the kind as the resource, and no userInfo at all. Borrowed from the
/// object, so that a replay writes it into its payload without copying it first: a tree, or
/// the JSON text a snapshot keeps (written as it is, never decoded).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Replay<'o, O: ?Sized = Value> {
    uid: Cow<'o, str>,
    kind: Gvk<'o>,
    resource: Resource<'o>,
    request_kind: Gvk<'o>,
    name: &'o str,
    /// The scanner's `obj.GetNamespace()`, left out when empty (`omitempty`).
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'o str>,
    operation: &'static str,
    user_info: NoUser,
    object: &'o O,
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

impl<'o> Replay<'o> {
    pub fn of(object: &'o Value) -> Result<Replay<'o>, Error> {
        let text = |path: &str| object.pointer(path).and_then(Value::as_str);
        let identity = Identity {
            api_version: text("/apiVersion").unwrap_or_default(),
            kind: text("/kind").unwrap_or_default(),
            namespace: text("/metadata/namespace").unwrap_or_default(),
            name: text("/metadata/name").unwrap_or_default(),
            uid: Cow::Borrowed(text("/metadata/uid").unwrap_or_default()),
        };
        Replay::with(identity, object, || object.to_string())
    }
}

impl<'o> Replay<'o, RawValue> {
    /// The replay of an object kept as JSON text (`ClusterObjects::entry`), its identity read
    /// from its key and its uid from the text: the object is handed over as written.
    pub fn of_text(key: &'o ObjectKey, text: &'o str) -> Result<Self, Error> {
        #[derive(Deserialize)]
        struct Object<'t> {
            #[serde(borrow, default)]
            metadata: Metadata<'t>,
        }
        #[derive(Deserialize, Default)]
        struct Metadata<'t> {
            #[serde(borrow, default)]
            uid: Option<Cow<'t, str>>,
        }
        let object: &RawValue = serde_json::from_str(text)?;
        let uid = serde_json::from_str::<Object>(text)?.metadata.uid;
        let (api_version, kind, namespace, name) = key;
        let identity = Identity {
            api_version,
            kind,
            namespace,
            name,
            uid: uid.unwrap_or_default(),
        };
        Replay::with(identity, object, || text.to_owned())
    }
}

/// What a replay names of its object.
struct Identity<'o> {
    api_version: &'o str,
    kind: &'o str,
    namespace: &'o str,
    name: &'o str,
    uid: Cow<'o, str>,
}

impl<'o, O: ?Sized> Replay<'o, O> {
    /// The object's uid, the request's (empty when it has none).
    pub fn uid(&self) -> &str {
        &self.uid
    }

    /// The scanner's request for `object`; `shown` gives its text for the error when it has no
    /// kind or name.
    fn with(id: Identity<'o>, object: &'o O, shown: impl Fn() -> String) -> Result<Self, Error> {
        if id.kind.is_empty() || id.name.is_empty() {
            return Err(Error::Unnamed(shown().chars().take(160).collect()));
        }
        let (group, version) = id
            .api_version
            .rsplit_once('/')
            .unwrap_or(("", id.api_version));
        let gvk = Gvk {
            group,
            version,
            kind: id.kind,
        };
        Ok(Replay {
            uid: id.uid,
            kind: gvk,
            resource: Resource {
                group,
                version,
                resource: id.kind,
            },
            request_kind: gvk,
            name: id.name,
            namespace: Some(id.namespace).filter(|ns| !ns.is_empty()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn release() -> Value {
        json!({
            "apiVersion": "helm.toolkit.fluxcd.io/v2",
            "kind": "HelmRelease",
            "metadata": {"name": "info", "namespace": "tenant-a", "uid": "6f1c0d2e-0000-4000-8000-000000000001"},
            "spec": {"chart": {"spec": {"chart": "info"}}},
        })
    }

    #[test]
    fn a_replay_is_the_scanners_create() {
        let request = replay_request(&release()).unwrap();
        assert_eq!(
            request,
            json!({
                "uid": "6f1c0d2e-0000-4000-8000-000000000001",
                "kind": {"group": "helm.toolkit.fluxcd.io", "version": "v2", "kind": "HelmRelease"},
                "resource": {"group": "helm.toolkit.fluxcd.io", "version": "v2", "resource": "HelmRelease"},
                "requestKind": {"group": "helm.toolkit.fluxcd.io", "version": "v2", "kind": "HelmRelease"},
                "name": "info",
                "namespace": "tenant-a",
                "operation": "CREATE",
                "userInfo": {},
                "object": release(),
                "oldObject": null,
            })
        );
    }

    #[test]
    fn a_replay_of_kept_text_is_the_replay_of_its_object() {
        for object in [
            release(),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenant-a"}}),
        ] {
            let text = object.to_string();
            let key = crate::cluster::index_key(&object);
            let kept = serde_json::to_value(Replay::of_text(&key, &text).unwrap()).unwrap();
            assert_eq!(kept, replay_request(&object).unwrap());
        }
        // A cluster-scoped object names no namespace, and one without a uid sends an empty one.
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}});
        let request = replay_request(&namespace).unwrap();
        assert_eq!(
            (request.get("namespace"), &request["uid"]),
            (None, &json!(""))
        );
    }

    #[test]
    fn an_object_without_a_name_is_refused_with_its_text() {
        let object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {}});
        let text = object.to_string();
        let key = crate::cluster::index_key(&object);
        for err in [
            Replay::of(&object).err().unwrap(),
            Replay::of_text(&key, &text).err().unwrap(),
        ] {
            assert!(
                matches!(&err, Error::Unnamed(shown) if shown == &text),
                "{err}"
            );
        }
    }
}
