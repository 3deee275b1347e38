//! The Kubernetes AdmissionRequest wire format, decoded into the resolver's [`Request`].
//!
//! Decoding is strict where the decision depends on a field (operation, kind, user, the
//! object on CREATE/UPDATE) and fails with a message naming that field: an admission policy
//! never accepts what it could not read.
//!
//! The payload is read with the scanner the host's lists are read with ([`crate::scan`]): one
//! walk of the payload that reads the request and its objects as it passes them, borrows the
//! fields the decisions read and skips the rest unallocated, instead of a serde deserialiser per
//! wire type. Its refusals are worded as serde's derived deserialisers word them (`missing
//! field`, `duplicate field`, `invalid type: …, expected …`), in serde's order, which the
//! policy's earlier decoder produced and `tests/admission.rs` checks on every way to break a
//! request; the one difference is that a struct given as a JSON array is refused, where serde
//! would read its fields by position. A payload the scanner does not take as well formed is
//! read by serde ([`Payload`]), whose message names the fault.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use cozystack_resolver::error::without_position;
use cozystack_resolver::request::{ObjectState, Operation, Request, Surface, is_read_label};
use cozystack_resolver::{Settings, User};
use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, Visitor};
use serde_json::value::RawValue;
use thiserror::Error;

use crate::scan::{Reader, ScanError, Str};

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

/// `{"request": <AdmissionRequest>, "settings": <settings>}` as the policy-server sends it, as
/// serde reads it: for a payload the scanner refuses, and as the tests' reference.
#[derive(Deserialize)]
pub struct Payload<'a> {
    #[serde(borrow)]
    pub request: &'a RawValue,
    #[serde(borrow, default)]
    pub settings: Option<&'a RawValue>,
}

/// Why a part of the request does not decode: serde's words for it.
enum Refusal {
    Reason(String),
    Scan(ScanError),
}

impl From<ScanError> for Refusal {
    fn from(err: ScanError) -> Self {
        Refusal::Scan(err)
    }
}

impl Refusal {
    fn into_error(self, path: &str) -> DecodeError {
        DecodeError::Field {
            path: path.to_owned(),
            reason: match self {
                Refusal::Reason(reason) => reason,
                Refusal::Scan(err) => err.to_string(),
            },
        }
    }
}

/// Refuses every value, expecting `0`: serde_json names what it found (`integer `5``,
/// `null`, `sequence`, …) exactly as in a derived deserialiser's `invalid type` error.
struct Expecting(&'static str);

impl<'de> Visitor<'de> for Expecting {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl<'de> DeserializeSeed<'de> for Expecting {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// `invalid type: <what raw is>, expected <expected>`.
fn refused(raw: &str, expected: &'static str) -> Refusal {
    let mut deserializer = serde_json::Deserializer::from_str(raw);
    Refusal::Reason(match Expecting(expected).deserialize(&mut deserializer) {
        Err(err) => without_position(&err),
        Ok(()) => format!("invalid type, expected {expected}"),
    })
}

fn missing(field: &str) -> Refusal {
    Refusal::Reason(format!("missing field `{field}`"))
}

fn duplicate(field: &str) -> Refusal {
    Refusal::Reason(format!("duplicate field `{field}`"))
}

/// A string that may be null.
fn optional_string<'a>(r: &mut Reader<'a>) -> Result<Option<Cow<'a, str>>, Refusal> {
    match r.peek() {
        Some(b'"') => Ok(Some(r.string()?.text()?)),
        Some(b'n') => r.null().map(|_| None).map_err(Refusal::from),
        _ => Err(refused(r.raw_value()?, "a string")),
    }
}

/// A string; null is refused, as serde refuses it for a `String`.
fn string<'a>(r: &mut Reader<'a>) -> Result<Cow<'a, str>, Refusal> {
    match r.peek() {
        Some(b'"') => Ok(r.string()?.text()?),
        _ => Err(refused(r.raw_value()?, "a string")),
    }
}

fn optional_bool(r: &mut Reader) -> Result<Option<bool>, Refusal> {
    match r.raw_value()? {
        "true" => Ok(Some(true)),
        "false" => Ok(Some(false)),
        "null" => Ok(None),
        other => Err(refused(other, "a boolean")),
    }
}

/// The fields of a struct, as a derived deserialiser reads them: each field of `names` (its
/// spellings, the first its name and the others aliases) at most once, the other keys skipped;
/// `field` reads the value of the field at the index given. Returns the fields seen, a bit each.
///
/// `field` is a trait object: the request is read once per evaluation, and a walk compiled for
/// each struct's closure would be a kilobyte of the module each.
fn fields<'a>(
    r: &mut Reader<'a>,
    what: &'static str,
    names: &[&[&str]],
    field: &mut dyn FnMut(&mut Reader<'a>, usize) -> Result<(), Refusal>,
) -> Result<u32, Refusal> {
    if r.peek() != Some(b'{') {
        return Err(refused(r.raw_value()?, what));
    }
    let mut seen = 0u32;
    r.object(|r, key: Str<'a>| {
        let Some(index) = names
            .iter()
            .position(|spellings| key.which(spellings).is_some())
        else {
            return Ok(r.skip()?);
        };
        if seen & (1 << index) != 0 {
            return Err(duplicate(names[index][0]));
        }
        seen |= 1 << index;
        field(r, index)
    })?;
    Ok(seen)
}

/// The first of `required` (indices in `names`) missing from `seen`, refused by its name.
fn require(seen: u32, names: &[&[&str]], required: &[usize]) -> Result<(), Refusal> {
    match required.iter().find(|&&index| seen & (1 << index) == 0) {
        Some(&index) => Err(missing(names[index][0])),
        None => Ok(()),
    }
}

/// What the request's top level holds, borrowed from it.
#[derive(Default)]
struct Wire<'a> {
    kind: Gvk<'a>,
    sub_resource: Option<Cow<'a, str>>,
    name: Option<Cow<'a, str>>,
    namespace: Option<Cow<'a, str>>,
    operation: Cow<'a, str>,
    user: WireUser<'a>,
    object: Option<Read<WireObject<'a>>>,
    old_object: Option<Read<WireObject<'a>>>,
    dry_run: Option<bool>,
}

#[derive(Default)]
struct Gvk<'a> {
    group: Cow<'a, str>,
    version: Cow<'a, str>,
    kind: Cow<'a, str>,
}

#[derive(Default)]
struct WireUser<'a> {
    username: Cow<'a, str>,
    groups: Option<Vec<String>>,
}

/// The request's fields by wire name; the SDK's snake_case spellings are aliases.
const WIRE_FIELDS: &[&[&str]] = &[
    &["kind"],
    &["subResource", "sub_resource"],
    &["name"],
    &["namespace"],
    &["operation"],
    &["userInfo", "user_info"],
    &["object"],
    &["oldObject", "old_object"],
    &["dryRun", "dry_run"],
];

/// A value as written; null is none.
fn raw<'a>(r: &mut Reader<'a>) -> Result<Option<&'a str>, Refusal> {
    Ok(Some(r.raw_value()?).filter(|raw| *raw != "null"))
}

fn gvk<'a>(r: &mut Reader<'a>) -> Result<Gvk<'a>, Refusal> {
    let mut gvk = Gvk::default();
    let names: &[&[&str]] = &[&["group"], &["version"], &["kind"]];
    let seen = fields(r, "struct Gvk", names, &mut |r, index| {
        let value = string(r)?;
        match index {
            0 => gvk.group = value,
            1 => gvk.version = value,
            _ => gvk.kind = value,
        }
        Ok(())
    })?;
    require(seen, names, &[2])?;
    Ok(gvk)
}

fn user<'a>(r: &mut Reader<'a>) -> Result<WireUser<'a>, Refusal> {
    let mut user = WireUser::default();
    fields(
        r,
        "struct WireUser",
        &[&["username"], &["groups"]],
        &mut |r, index| {
            if index == 0 {
                user.username = string(r)?;
                return Ok(());
            }
            user.groups = match r.peek() {
                Some(b'n') => {
                    r.null()?;
                    None
                }
                Some(b'[') => {
                    let mut groups = Vec::new();
                    r.array(|r| {
                        groups.push(string(r)?.into_owned());
                        Ok::<_, Refusal>(())
                    })?;
                    Some(groups)
                }
                _ => return Err(refused(r.raw_value()?, "a sequence")),
            };
            Ok(())
        },
    )?;
    Ok(user)
}

fn wire<'a>(r: &mut Reader<'a>) -> Result<Wire<'a>, Refusal> {
    let mut wire = Wire::default();
    // Indices in WIRE_FIELDS.
    let seen = fields(r, "struct Wire", WIRE_FIELDS, &mut |r, index| {
        match index {
            0 => wire.kind = gvk(r)?,
            1 => wire.sub_resource = optional_string(r)?,
            2 => wire.name = optional_string(r)?,
            3 => wire.namespace = optional_string(r)?,
            4 => wire.operation = string(r)?,
            5 => wire.user = user(r)?,
            6 => wire.object = object_in(r)?,
            7 => wire.old_object = object_in(r)?,
            _ => wire.dry_run = optional_bool(r)?,
        }
        Ok(())
    })?;
    // kind, operation and userInfo, in the order the earlier decoder declared them.
    require(seen, WIRE_FIELDS, &[0, 4, 5])?;
    Ok(wire)
}

/// The parts of an object the decisions read. The spec stays raw until it is known to be read:
/// a Namespace's never is.
#[derive(Default)]
struct WireObject<'a> {
    name: Option<Cow<'a, str>>,
    namespace: Option<Cow<'a, str>>,
    labels: Option<BTreeMap<String, String>>,
    terminating: bool,
    spec: Option<&'a str>,
}

fn metadata<'a>(r: &mut Reader<'a>, object: &mut WireObject<'a>) -> Result<(), Refusal> {
    let names: &[&[&str]] = &[
        &["name"],
        &["namespace"],
        &["labels"],
        &["deletionTimestamp"],
    ];
    fields(r, "struct WireMeta", names, &mut |r, index| {
        match index {
            0 => object.name = optional_string(r)?,
            1 => object.namespace = optional_string(r)?,
            2 => object.labels = labels(r)?,
            _ => object.terminating = optional_string(r)?.is_some(),
        }
        Ok(())
    })?;
    Ok(())
}

/// `metadata.labels`: a map of strings; of a key given twice the last counts. Only the labels
/// a rule reads are kept; every value is still checked to be a string.
fn labels(r: &mut Reader) -> Result<Option<BTreeMap<String, String>>, Refusal> {
    match r.peek() {
        Some(b'n') => {
            r.null()?;
            Ok(None)
        }
        Some(b'{') => {
            let mut labels = BTreeMap::new();
            r.object(|r, key| {
                let (key, value) = (key.text()?, string(r)?);
                if is_read_label(&key) {
                    labels.insert(key.into_owned(), value.into_owned());
                }
                Ok::<_, Refusal>(())
            })?;
            Ok(Some(labels))
        }
        _ => Err(refused(r.raw_value()?, "a map")),
    }
}

/// An object read in the request's walk, or why it was refused: a refusal is reported only
/// after the request's own fields are read and checked, as the earlier decoder read the
/// objects after the request.
type Read<T> = Result<T, Refusal>;

/// Reads an object with `read`, keeping a refusal for later: the walk goes on past the object
/// (skipped from its start), so that what follows it is still read and checked. A value that is
/// not an object is refused as such.
fn deferred<'a, T>(
    r: &mut Reader<'a>,
    read: impl FnOnce(&mut Reader<'a>) -> Result<T, Refusal>,
) -> Result<Read<T>, ScanError> {
    if r.peek() != Some(b'{') {
        r.skip()?;
        return Ok(Err(Refusal::Reason("must be a JSON object".into())));
    }
    let start = r.mark();
    match read(r) {
        Ok(value) => Ok(Ok(value)),
        Err(Refusal::Reason(reason)) => {
            r.rewind(start);
            r.skip()?;
            Ok(Err(Refusal::Reason(reason)))
        }
        Err(Refusal::Scan(err)) => Err(err),
    }
}

/// `object` or `oldObject`, in the request's walk; null is none.
fn object_in<'a>(r: &mut Reader<'a>) -> Result<Option<Read<WireObject<'a>>>, ScanError> {
    if r.null()? {
        return Ok(None);
    }
    deferred(r, |r| {
        let mut object = WireObject::default();
        fields(
            r,
            "struct WireObject",
            &[&["metadata"], &["spec"]],
            &mut |r, index| {
                match index {
                    0 => metadata(r, &mut object)?,
                    _ => object.spec = raw(r)?,
                }
                Ok(())
            },
        )?;
        Ok(object)
    })
    .map(Some)
}

/// An object's state and the name and namespace its metadata states.
type Decoded = (ObjectState, Option<String>, Option<String>);

fn object(
    field: &str,
    read: Option<Read<WireObject>>,
    surface: Surface,
) -> Result<Option<Decoded>, DecodeError> {
    let Some(read) = read else {
        return Ok(None);
    };
    // The part of the request named in a refusal, made only for one.
    let part = || format!(".{field}");
    let wire = read.map_err(|err| err.into_error(&part()))?;
    // Only Applications (their values) and HelmReleases (a Tenant's values, adminOnly edits)
    // are judged by their spec.
    let spec = match (surface, wire.spec) {
        (Surface::Namespace, _) | (_, None) => serde_json::Value::Null,
        (_, Some(spec)) => serde_json::from_str(spec).map_err(|err| DecodeError::Field {
            path: format!("{}.spec", part()),
            reason: without_position(&err),
        })?,
    };
    let state = ObjectState {
        labels: wire.labels.unwrap_or_default(),
        terminating: wire.terminating,
        spec,
    };
    Ok(Some((
        state,
        wire.name.map(Cow::into_owned),
        wire.namespace.map(Cow::into_owned),
    )))
}

/// The validation payload as the policy-server sends it, read in one walk: the request (a
/// refusal kept until the settings are read, which are judged first) and the settings' text.
pub struct Envelope<'a> {
    request: Read<Wire<'a>>,
    pub settings: Option<&'a str>,
}

impl<'a> Envelope<'a> {
    /// Reads `payload`. JSON is UTF-8 (RFC 8259), and the policy-server writes it from Rust
    /// strings: a payload that is not is refused whole, so serde reads text only (one reader
    /// of its in the module, not two). The scanner reads a well-formed payload; whatever it
    /// refuses (not JSON, no request, a part given twice) is read by serde, whose message names
    /// the fault as it always has, and which alone decides what is malformed.
    pub fn read(payload: &'a [u8]) -> Result<Envelope<'a>, String> {
        let text = std::str::from_utf8(payload)
            .map_err(|err| format!("cannot decode the validation payload: not UTF-8: {err}"))?;
        if let Some(envelope) = scanned(text) {
            return Ok(envelope);
        }
        let payload: Payload = serde_json::from_str(text)
            .map_err(|err| format!("cannot decode the validation payload: {err}"))?;
        Ok(Envelope {
            request: read_request(payload.request.get()),
            settings: payload.settings.map(RawValue::get),
        })
    }

    /// The request in the resolver's model; `settings` name the audit scanner.
    pub fn request(self, settings: &Settings) -> Result<Request, DecodeError> {
        finish(self.request, settings)
    }
}

/// The envelope read by the scanner; `None` for anything but an object with one `request`
/// and at most one `settings`.
fn scanned(text: &str) -> Option<Envelope<'_>> {
    let mut r = Reader::new(text);
    let (mut request, mut settings, mut twice) = (None, None, false);
    r.object(|r, key| {
        if key.is("request") {
            twice |= request.is_some();
            request = Some(deferred(r, wire)?);
        } else if key.is("settings") {
            twice |= settings.is_some();
            settings = Some(r.raw_value()?);
        } else {
            r.skip()?;
        }
        Ok::<_, ScanError>(())
    })
    .ok()?;
    r.end().ok()?;
    match (request, twice) {
        (Some(request), false) => Some(Envelope {
            request,
            settings: settings.filter(|s| *s != "null"),
        }),
        _ => None,
    }
}

/// The request read from its own text.
fn read_request(raw: &str) -> Read<Wire<'_>> {
    let mut r = Reader::new(raw);
    let read = deferred(&mut r, wire)?;
    r.end()?;
    read
}

/// Decodes `request` (the AdmissionRequest JSON, as the payload carries it) into the
/// resolver's model.
pub fn decode(raw: &str, settings: &Settings) -> Result<Request, DecodeError> {
    finish(read_request(raw), settings)
}

/// The request's checks, in the order the earlier decoder made them: its fields, then the
/// operation, the resource and the user, then the objects, then the name and namespace.
fn finish(read: Read<Wire>, settings: &Settings) -> Result<Request, DecodeError> {
    let wire = read.map_err(|err| err.into_error(""))?;
    let (kind, user) = (wire.kind, wire.user);
    let operation = match wire.operation.as_ref() {
        "CREATE" => Operation::Create,
        "UPDATE" => Operation::Update,
        "DELETE" => Operation::Delete,
        "CONNECT" => Operation::Connect,
        other => return Err(DecodeError::Operation(other.to_owned())),
    };
    let surface = match (kind.group.as_ref(), kind.kind.as_ref()) {
        ("apps.cozystack.io", _) => Surface::Application,
        ("helm.toolkit.fluxcd.io", "HelmRelease") => Surface::HelmRelease,
        ("", "Namespace") => Surface::Namespace,
        (group, kind_name) => {
            let gvk = if group.is_empty() {
                format!("{}/{kind_name}", kind.version)
            } else {
                format!("{group}/{}/{kind_name}", kind.version)
            };
            return Err(DecodeError::Resource(gvk));
        }
    };
    if kind.kind.is_empty() {
        return Err(DecodeError::Empty("kind.kind"));
    }
    let user = User {
        username: user.username.into_owned(),
        groups: user.groups.unwrap_or_default(),
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
        .map(Cow::into_owned)
        .or_else(|| meta.and_then(|(_, name, _)| name.clone()))
        .unwrap_or_default();
    let namespace = wire
        .namespace
        .filter(|n| !n.is_empty())
        .map(Cow::into_owned)
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
        kind: kind.kind.into_owned(),
        namespace,
        name,
        user,
        dry_run: wire.dry_run.unwrap_or(false),
        subresource: wire
            .sub_resource
            .filter(|s| !s.is_empty())
            .map(Cow::into_owned),
        object: new.map(|(state, ..)| state),
        old_object: old.map(|(state, ..)| state),
    })
}
