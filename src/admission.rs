//! The Kubernetes AdmissionRequest wire format, decoded into the resolver's [`Request`].
//!
//! Decoding is strict where the decision depends on a field (operation, kind, user, the
//! object on CREATE/UPDATE) and fails with a message naming that field: an admission policy
//! never accepts what it could not read.

use std::collections::BTreeMap;

use cozystack_resolver::error::without_position;
use cozystack_resolver::request::{ObjectState, Operation, Request, Surface};
use cozystack_resolver::{Settings, User};
use serde::Deserialize;
use serde_json::value::RawValue;
use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("cannot decode request{path}: {reason}")]
    Field { path: String, reason: String },
    #[error("unsupported operation {0:?}: expected CREATE, UPDATE, DELETE or CONNECT")]
    Operation(String),
    #[error(
        "the policy does not handle {0}; match only apps.cozystack.io applications, helm.toolkit.fluxcd.io HelmReleases and core Namespaces"
    )]
    Resource(String),
    #[error("request.{0} is empty")]
    Empty(&'static str),
}

/// `{"request": <AdmissionRequest>, "settings": <settings>}` as the policy-server sends it.
#[derive(Deserialize)]
pub struct Payload<'a> {
    #[serde(borrow)]
    pub request: &'a RawValue,
    #[serde(borrow, default)]
    pub settings: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire<'a> {
    kind: Gvk,
    #[serde(default, alias = "sub_resource")]
    sub_resource: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    operation: String,
    // Required: the audit scanner sends `"userInfo": {}` (Go omits only its empty fields).
    #[serde(alias = "user_info")]
    user_info: WireUser,
    #[serde(borrow, default)]
    object: Option<&'a RawValue>,
    #[serde(borrow, default, alias = "old_object")]
    old_object: Option<&'a RawValue>,
    #[serde(default, alias = "dry_run")]
    dry_run: Option<bool>,
}

#[derive(Deserialize)]
struct Gvk {
    #[serde(default)]
    group: String,
    #[serde(default)]
    version: String,
    kind: String,
}

#[derive(Deserialize)]
struct WireUser {
    #[serde(default)]
    username: String,
    #[serde(default)]
    groups: Option<Vec<String>>,
}

/// The parts of an object the decisions read. The spec stays raw until it is known to be read:
/// a Namespace's never is.
#[derive(Deserialize)]
struct WireObject<'a> {
    #[serde(default)]
    metadata: WireMeta,
    #[serde(borrow, default)]
    spec: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    deletion_timestamp: Option<String>,
}

/// Decodes `raw`, naming the part of the request that failed (`request.object`, …).
///
/// No field-path tracking here: it would double the deserialisation code in the wasm, and the
/// objects read are small enough that the part plus serde's message locate the problem.
fn decode_at<'de, T: Deserialize<'de>>(part: &str, raw: &'de RawValue) -> Result<T, DecodeError> {
    // serde would also read a struct from a JSON array, field by position.
    if !raw.get().starts_with('{') {
        return Err(DecodeError::Field {
            path: part.to_owned(),
            reason: "must be a JSON object".into(),
        });
    }
    serde_json::from_str(raw.get()).map_err(|err| DecodeError::Field {
        path: part.to_owned(),
        reason: without_position(&err),
    })
}

/// An object's state and the name and namespace its metadata states.
type Decoded = (ObjectState, Option<String>, Option<String>);

fn object(
    field: &str,
    raw: Option<&RawValue>,
    surface: Surface,
) -> Result<Option<Decoded>, DecodeError> {
    let Some(raw) = raw.filter(|r| r.get() != "null") else {
        return Ok(None);
    };
    let part = format!(".{field}");
    let wire: WireObject = decode_at(&part, raw)?;
    // Only Applications (their values) and HelmReleases (a Tenant's values, adminOnly edits)
    // are judged by their spec.
    let spec = match (surface, wire.spec) {
        (Surface::Namespace, _) | (_, None) => serde_json::Value::Null,
        (_, Some(spec)) => serde_json::from_str(spec.get()).map_err(|err| DecodeError::Field {
            path: format!("{part}.spec"),
            reason: without_position(&err),
        })?,
    };
    let meta = wire.metadata;
    let state = ObjectState {
        labels: meta.labels.unwrap_or_default(),
        terminating: meta.deletion_timestamp.is_some(),
        spec,
    };
    Ok(Some((state, meta.name, meta.namespace)))
}

/// Decodes `request` (the AdmissionRequest JSON) into the resolver's model.
pub fn decode(raw: &RawValue, settings: &Settings) -> Result<Request, DecodeError> {
    let wire: Wire = decode_at("", raw)?;
    let operation = match wire.operation.as_str() {
        "CREATE" => Operation::Create,
        "UPDATE" => Operation::Update,
        "DELETE" => Operation::Delete,
        "CONNECT" => Operation::Connect,
        other => return Err(DecodeError::Operation(other.to_owned())),
    };
    let surface = match (wire.kind.group.as_str(), wire.kind.kind.as_str()) {
        ("apps.cozystack.io", _) => Surface::Application,
        ("helm.toolkit.fluxcd.io", "HelmRelease") => Surface::HelmRelease,
        ("", "Namespace") => Surface::Namespace,
        (group, kind) => {
            let gvk = if group.is_empty() {
                format!("{}/{kind}", wire.kind.version)
            } else {
                format!("{group}/{}/{kind}", wire.kind.version)
            };
            return Err(DecodeError::Resource(gvk));
        }
    };
    if wire.kind.kind.is_empty() {
        return Err(DecodeError::Empty("kind.kind"));
    }
    let user = User {
        username: wire.user_info.username,
        groups: wire.user_info.groups.unwrap_or_default(),
    };
    // The audit scanner's replays carry no userInfo; any other request without a username is
    // malformed.
    let audit_replay = operation == Operation::Create && user.is_audit_scanner(settings);
    if user.username.is_empty() && !audit_replay {
        return Err(DecodeError::Empty("userInfo.username"));
    }
    let new = object("object", wire.object, surface)?;
    let old = object("oldObject", wire.old_object, surface)?;
    // DELETE names the object in the request; fall back to the objects' metadata.
    let meta = new.as_ref().or(old.as_ref());
    let name = wire
        .name
        .filter(|n| !n.is_empty())
        .or_else(|| meta.and_then(|(_, name, _)| name.clone()))
        .unwrap_or_default();
    let namespace = wire
        .namespace
        .filter(|n| !n.is_empty())
        .or_else(|| meta.and_then(|(_, _, namespace)| namespace.clone()))
        .unwrap_or_default();
    if name.is_empty() {
        return Err(DecodeError::Empty("name"));
    }
    if namespace.is_empty() && surface != Surface::Namespace {
        return Err(DecodeError::Empty("namespace"));
    }
    Ok(Request {
        surface,
        operation,
        kind: wire.kind.kind,
        namespace,
        name,
        user,
        dry_run: wire.dry_run.unwrap_or(false),
        subresource: wire.sub_resource.filter(|s| !s.is_empty()),
        object: new.map(|(state, ..)| state),
        old_object: old.map(|(state, ..)| state),
    })
}
