//! The request decoder (`src/admission.rs`, the scanner) against serde's derived decoder it
//! replaced, kept here as the reference: every way to break a request (each value replaced by
//! values of other types, each key removed, given twice, spelt with an escape, an unknown key
//! added), compact and pretty-printed, decodes to the same request or is refused with the same
//! message. The one intended difference: a struct given as a JSON array is refused, where serde
//! reads its fields by position. The payload around the request is checked the same way
//! against serde's reading of it.

use std::collections::BTreeMap;

use cozystack_capabilities_policy::admission::{Envelope, Payload, decode};
use cozystack_capabilities_policy::settings;
use cozystack_resolver::error::without_position;
use cozystack_resolver::request::{ObjectState, Operation, Request, Surface, is_read_label};
use cozystack_resolver::{Settings, User};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

/// serde's decoder of the request, as the policy had it before the scanner read requests.
mod reference {
    use super::*;

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

    fn decode_at<'de, T: Deserialize<'de>>(part: &str, raw: &'de RawValue) -> Result<T, String> {
        if !raw.get().starts_with('{') {
            return Err(format!(
                "cannot decode request{part}: must be a JSON object"
            ));
        }
        serde_json::from_str(raw.get())
            .map_err(|err| format!("cannot decode request{part}: {}", without_position(&err)))
    }

    type Decoded = (ObjectState, Option<String>, Option<String>);

    fn object(
        field: &str,
        raw: Option<&RawValue>,
        surface: Surface,
    ) -> Result<Option<Decoded>, String> {
        let Some(raw) = raw.filter(|r| r.get() != "null") else {
            return Ok(None);
        };
        let part = format!(".{field}");
        let wire: WireObject = decode_at(&part, raw)?;
        let spec = match (surface, wire.spec) {
            (Surface::Namespace, _) | (_, None) => Value::Null,
            (_, Some(spec)) => serde_json::from_str(spec.get()).map_err(|err| {
                format!(
                    "cannot decode request{part}.spec: {}",
                    without_position(&err)
                )
            })?,
        };
        let meta = wire.metadata;
        let state = ObjectState {
            labels: (meta.labels.unwrap_or_default().into_iter())
                .filter(|(key, _)| is_read_label(key))
                .collect(),
            terminating: meta.deletion_timestamp.is_some(),
            spec,
        };
        Ok(Some((state, meta.name, meta.namespace)))
    }

    pub fn decode(raw: &RawValue, settings: &Settings) -> Result<Request, String> {
        let wire: Wire = decode_at("", raw)?;
        let operation = match wire.operation.as_str() {
            "CREATE" => Operation::Create,
            "UPDATE" => Operation::Update,
            "DELETE" => Operation::Delete,
            "CONNECT" => Operation::Connect,
            other => {
                return Err(format!(
                    "unsupported operation {other:?}: expected CREATE, UPDATE, DELETE or CONNECT"
                ));
            }
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
                return Err(format!(
                    "the policy does not handle {gvk}; match only apps.cozystack.io applications, helm.toolkit.fluxcd.io HelmReleases and core Namespaces"
                ));
            }
        };
        if wire.kind.kind.is_empty() {
            return Err("request.kind.kind is empty".into());
        }
        let user = User {
            username: wire.user_info.username,
            groups: wire.user_info.groups.unwrap_or_default(),
        };
        let audit_replay = operation == Operation::Create && user.is_audit_scanner(settings);
        if user.username.is_empty() && !audit_replay {
            return Err("request.userInfo.username is empty".into());
        }
        let new = object("object", wire.object, surface)?;
        let old = object("oldObject", wire.old_object, surface)?;
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
            return Err("request.name is empty".into());
        }
        if namespace.is_empty() && surface != Surface::Namespace {
            return Err("request.namespace is empty".into());
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
}

/// Requests of every shape the decoder reads: a Namespace label edit by the platform, an
/// application CREATE with values, a HelmRelease DELETE named only by its old object (with
/// the SDK's snake_case spellings), and the audit scanner's replay without a user.
fn samples() -> Vec<Value> {
    let labels = json!({"tenant.cozystack.io/tenant-root": "", "namespace.cozystack.io/monitoring": "tenant-root"});
    vec![
        json!({
            "uid": "u1", "kind": {"group": "", "version": "v1", "kind": "Namespace"},
            "resource": {"group": "", "version": "v1", "resource": "namespaces"},
            "name": "tenant-a", "namespace": "", "operation": "UPDATE",
            "userInfo": {"username": "system:serviceaccount:cozy-system:cozystack", "uid": "x",
                         "groups": ["system:serviceaccounts", "system:authenticated"], "extra": {"k": ["v"]}},
            "object": {"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": "tenant-a", "labels": labels, "annotations": {"a": "b"}}},
            "oldObject": {"metadata": {"name": "tenant-a", "labels": {"k": "v\u{e9}", "namespace.cozystack.io/etcd": "tenant-\u{e9}"}}},
            "dryRun": false, "options": {"kind": "UpdateOptions"}
        }),
        json!({
            "kind": {"group": "apps.cozystack.io", "version": "v1alpha1", "kind": "Postgres"},
            "name": "db", "namespace": "tenant-a", "operation": "CREATE", "subResource": "",
            "userInfo": {"username": "alice", "groups": ["tenant-a-admin"]},
            "object": {"metadata": {"name": "db", "namespace": "tenant-a", "labels": null},
                       "spec": {"replicas": 2, "size": "10Gi", "users": {"app": {}}}},
            "dryRun": true
        }),
        json!({
            "kind": {"group": "helm.toolkit.fluxcd.io", "version": "v2", "kind": "HelmRelease"},
            "name": "", "operation": "DELETE", "sub_resource": "status",
            "user_info": {"username": "system:serviceaccount:cozy-fluxcd:helm-controller"},
            "old_object": {"metadata": {"name": "monitoring", "namespace": "tenant-root",
                                        "deletionTimestamp": "2026-01-01T00:00:00Z",
                                        "labels": {"apps.cozystack.io/application.kind": "Monitoring"}},
                           "spec": {"values": {"a": [1, 2.5, null]}}},
            "object": null, "dry_run": null
        }),
        json!({
            "kind": {"group": "apps.cozystack.io", "version": "v1alpha1", "kind": "Tenant"},
            "name": "a", "namespace": "tenant-root", "operation": "CREATE", "userInfo": {},
            "object": {"metadata": {}, "spec": null}
        }),
    ]
}

/// Values of every JSON type, to replace a value with.
fn replacements() -> Vec<Value> {
    vec![
        Value::Null,
        json!(true),
        json!(7),
        json!(-3),
        json!(1.5),
        json!("x\"\u{e9}"),
        json!(""),
        json!([]),
        json!(["a", 1]),
        json!({}),
        json!({"k": "v"}),
    ]
}

/// Every path to a value in `value` (as JSON pointer tokens), the root included.
fn paths(value: &Value, at: Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(at.clone());
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let mut next = at.clone();
                next.push(key.clone());
                paths(child, next, out);
            }
        }
        Value::Array(items) => {
            for (index, child) in items.iter().enumerate() {
                let mut next = at.clone();
                next.push(index.to_string());
                paths(child, next, out);
            }
        }
        _ => {}
    }
}

fn at_mut<'v>(value: &'v mut Value, path: &[String]) -> &'v mut Value {
    path.iter().fold(value, |v, token| match v {
        Value::Object(map) => map.get_mut(token).expect("path"),
        Value::Array(items) => &mut items[token.parse::<usize>().expect("index")],
        _ => panic!("path through a scalar"),
    })
}

/// The object at `path` written with its `key` given twice (the second time as `value`), or
/// with the key spelt with a `\u` escape: text serde_json's `Value` cannot hold.
fn rewritten(
    sample: &Value,
    path: &[String],
    edit: impl Fn(&Map<String, Value>) -> String,
) -> String {
    const MARK: &str = "\"__mark__\"";
    let mut copy = sample.clone();
    let target = at_mut(&mut copy, path);
    let object = target.as_object().expect("an object").clone();
    *target = json!("__mark__");
    serde_json::to_string(&copy)
        .unwrap()
        .replacen(MARK, &edit(&object), 1)
}

fn body(object: &Map<String, Value>) -> Vec<String> {
    object
        .iter()
        .map(|(k, v)| format!("{}:{}", serde_json::to_string(k).unwrap(), v))
        .collect()
}

/// Every broken text of every sample, and the struct positions among them: a text and, when
/// the edit put an array where a struct is read, that struct's name.
fn corpus() -> Vec<(String, Option<&'static str>)> {
    let structs = |path: &[String]| -> Option<&'static str> {
        match path {
            [k] if k == "kind" => Some("Gvk"),
            [k] if k == "userInfo" || k == "user_info" => Some("WireUser"),
            [o, m] if m == "metadata" && o != "options" => Some("WireMeta"),
            _ => None,
        }
    };
    let mut texts = Vec::new();
    for sample in samples() {
        let mut all = Vec::new();
        paths(&sample, Vec::new(), &mut all);
        texts.push((sample.to_string(), None));
        for path in &all {
            for replacement in replacements() {
                let mut copy = sample.clone();
                let is_array = replacement.is_array();
                *at_mut(&mut copy, path) = replacement;
                let array_struct = structs(path).filter(|_| is_array);
                texts.push((copy.to_string(), array_struct));
            }
            let Some(object) = at_mut(&mut sample.clone(), path).as_object().cloned() else {
                continue;
            };
            for key in object.keys() {
                let mut copy = sample.clone();
                at_mut(&mut copy, path).as_object_mut().unwrap().remove(key);
                texts.push((copy.to_string(), None));
                // The key twice: the same value, then null.
                for second in ["null".to_string(), object[key].to_string()] {
                    texts.push((
                        rewritten(&sample, path, |o| {
                            let mut fields = body(o);
                            fields
                                .push(format!("{}:{second}", serde_json::to_string(key).unwrap()));
                            format!("{{{}}}", fields.join(","))
                        }),
                        None,
                    ));
                }
                // The key's first letter as a `\u` escape.
                texts.push((
                    rewritten(&sample, path, |o| {
                        let fields: Vec<String> = o
                            .iter()
                            .map(|(k, v)| {
                                let name = if k == key {
                                    let mut chars = k.chars();
                                    let first = chars.next().map_or(0, u32::from);
                                    format!("\"\\u{first:04x}{}\"", chars.as_str())
                                } else {
                                    serde_json::to_string(k).unwrap()
                                };
                                format!("{name}:{v}")
                            })
                            .collect();
                        format!("{{{}}}", fields.join(","))
                    }),
                    None,
                ));
            }
            let mut copy = sample.clone();
            at_mut(&mut copy, path)
                .as_object_mut()
                .unwrap()
                .insert("unknownKey".into(), json!({"deep": [1]}));
            texts.push((copy.to_string(), None));
        }
    }
    // Two faults, one in an object and one in the request's own fields, which are reported
    // first whatever the order of the keys.
    let wire_faults: [fn(&mut Map<String, Value>); 3] = [
        |r| drop(r.insert("userInfo".into(), json!(5))),
        |r| drop(r.remove("operation")),
        |r| {
            drop(r.insert(
                "kind".into(),
                json!({"group": "", "version": "v1", "kind": null}),
            ))
        },
    ];
    for sample in samples() {
        for field in ["object", "oldObject", "old_object"] {
            let Some(object) = sample.get(field).filter(|o| o.is_object()) else {
                continue;
            };
            let mut inner = Vec::new();
            paths(object, Vec::new(), &mut inner);
            for path in inner {
                for replacement in [json!(null), json!(7), json!([])] {
                    for fault in wire_faults {
                        let mut copy = sample.clone();
                        let request = copy.as_object_mut().unwrap();
                        let target = at_mut(request.get_mut(field).unwrap(), &path);
                        *target = replacement.clone();
                        fault(request);
                        texts.push((copy.to_string(), None));
                    }
                }
            }
        }
    }
    // The snake_case spelling beside the camelCase one.
    for alias in ["sub_resource", "user_info", "old_object", "dry_run"] {
        let mut copy = samples()[0].clone();
        copy.as_object_mut()
            .unwrap()
            .insert(alias.into(), Value::Null);
        texts.push((copy.to_string(), None));
    }
    let pretty: Vec<_> = texts
        .iter()
        .map(|(text, s)| {
            let value: Value = serde_json::from_str(text).unwrap();
            (serde_json::to_string_pretty(&value).unwrap(), *s)
        })
        .collect();
    texts.extend(pretty);
    texts
}

#[test]
fn the_scanner_decodes_every_request_as_serde_did() {
    let settings = Settings::default();
    let (mut decoded, mut refused, mut arrays) = (0, 0, 0);
    for (text, array_struct) in corpus() {
        // The request as the payload carries it.
        let payload = format!("{{\"request\":{text}}}");
        let raw: &RawValue =
            serde_json::from_str::<BTreeMap<String, &RawValue>>(&payload).unwrap()["request"];
        let ours = decode(raw.get(), &settings).map_err(|err| err.to_string());
        if let Some(name) = array_struct
            && let Err(message) = &ours
            && message.ends_with(&format!("expected struct {name}"))
        {
            arrays += 1;
            assert!(message.contains("invalid type: sequence"), "{message}");
            continue;
        }
        let theirs = reference::decode(raw, &settings);
        assert_eq!(ours, theirs, "{text}");
        match ours {
            Ok(_) => decoded += 1,
            Err(_) => refused += 1,
        }
    }
    assert!(
        decoded > 1000 && refused > 1000 && arrays > 40,
        "{decoded} decoded, {refused} refused, {arrays} arrays"
    );
}

/// The payload as the policy read it before: serde's envelope, the settings, serde's request.
fn reference_payload(payload: &[u8]) -> Result<Request, String> {
    // Not UTF-8 is refused before serde reads it (where serde would skip it, too).
    let text = std::str::from_utf8(payload)
        .map_err(|err| format!("cannot decode the validation payload: not UTF-8: {err}"))?;
    let envelope: Payload = serde_json::from_str(text)
        .map_err(|err| format!("cannot decode the validation payload: {err}"))?;
    let text = envelope.settings.map_or("null", RawValue::get);
    let settings = settings::parse_for_request(text.as_bytes())
        .map_err(|err| format!("invalid policy settings: {err}"))?;
    reference::decode(envelope.request, &settings)
}

/// Reads `payload` both ways and asserts the same outcome; whether it decoded.
fn same_as_serde(payload: &[u8]) -> bool {
    let ours = our_payload(payload);
    assert_eq!(
        ours,
        reference_payload(payload),
        "{}",
        String::from_utf8_lossy(payload)
    );
    ours.is_ok()
}

fn our_payload(payload: &[u8]) -> Result<Request, String> {
    let envelope = Envelope::read(payload)?;
    let text = envelope.settings.unwrap_or("null");
    let settings = settings::parse_for_request(text.as_bytes())
        .map_err(|err| format!("invalid policy settings: {err}"))?;
    envelope.request(&settings).map_err(|err| err.to_string())
}

/// Payloads of every shape around requests good and bad: the parts in either order, settings
/// absent, null, valid and invalid, unknown parts, a part given twice or missing, what is not
/// an object, invalid UTF-8 where serde reads it and where it only skips it (both refused
/// whole since serde reads text), nesting at serde's limit, and every truncation; each read the
/// same as serde reads it.
#[test]
fn the_payload_is_read_as_serde_read_it() {
    let mut requests: Vec<String> = samples().iter().map(Value::to_string).collect();
    let mut broken = samples()[0].clone();
    broken["userInfo"] = json!(5);
    requests.push(broken.to_string());
    let mut broken = samples()[1].clone();
    broken["object"]["metadata"] = json!(null);
    requests.push(broken.to_string());
    requests.extend(["[]", "null", "\"x\"", "{}"].map(String::from));
    let settings = [
        None,
        Some("null"),
        Some("{}"),
        Some(r#"{"auditScannerUsername":"system:serviceaccount:kubewarden:audit-scanner"}"#),
        Some(r#"{"platformWriters":"maybe"}"#),
        Some("[]"),
    ];
    let junk = r#""junk":{"a":[1,{"b":null}],"c":"\u00e9"}"#;
    let mut payloads: Vec<Vec<u8>> = Vec::new();
    for request in &requests {
        for setting in settings {
            let mut parts = vec![format!("\"request\":{request}")];
            if let Some(setting) = setting {
                parts.push(format!("\"settings\":{setting}"));
            }
            payloads.push(format!("{{{}}}", parts.join(",")).into_bytes());
            parts.reverse();
            parts.push(junk.to_owned());
            payloads.push(format!("{{ {} }}", parts.join(" , ")).into_bytes());
        }
        // A part twice, or missing.
        payloads.push(format!(r#"{{"request":{request},"request":{request}}}"#).into_bytes());
        payloads.push(
            format!(r#"{{"request":{request},"settings":{{}},"settings":null}}"#).into_bytes(),
        );
        payloads.push(format!(r#"{{"settings":{{}},"requests":{request}}}"#).into_bytes());
        // Not an object: serde reads a struct from an array, field by position.
        payloads.push(format!("[{request},{{}}]").into_bytes());
        // Trailing bytes.
        payloads.push(format!(r#"{{"request":{request}}} x"#).into_bytes());
        payloads.push(format!(r#"{{"request":{request}}}  "#).into_bytes());
    }
    let base = format!(r#"{{"request":{},"settings":{{}}}}"#, requests[0]);
    for cut in 0..base.len() {
        payloads.push(base.as_bytes()[..cut].to_vec());
    }
    for text in [
        "",
        "null",
        "5",
        "\"x\"",
        "{}",
        "[]",
        "{\"request\"}",
        "{\"request\":}",
    ] {
        payloads.push(text.as_bytes().to_vec());
    }
    // Invalid UTF-8 in a part serde skips, and in the request it reads.
    let mut skipped = format!(r#"{{"request":{},"junk":"?"}}"#, requests[0]).into_bytes();
    let at = skipped.len() - 3;
    skipped[at] = 0xff;
    payloads.push(skipped);
    let mut read = base.clone().into_bytes();
    let at = base.find("tenant-a").unwrap();
    read[at] = 0xff;
    payloads.push(read);
    for payload in &payloads[payloads.len() - 2..] {
        let at = payload.iter().position(|&b| b == 0xff).unwrap();
        assert_eq!(
            our_payload(payload).unwrap_err(),
            format!(
                "cannot decode the validation payload: not UTF-8: invalid utf-8 sequence of 1 bytes from index {at}"
            )
        );
    }
    // Nesting at serde_json's depth limit and one past it.
    for depth in [126, 127, 128, 129] {
        let nested = "[".repeat(depth) + &"]".repeat(depth);
        payloads.push(format!(r#"{{"request":{},"junk":{nested}}}"#, requests[0]).into_bytes());
    }
    let decoded = payloads.iter().filter(|p| same_as_serde(p)).count();
    let refused = payloads.len() - decoded;
    assert!(
        decoded > 40 && refused > 400,
        "{decoded} decoded, {refused} refused"
    );
}

/// Random byte edits of good payloads (a byte replaced by one of JSON's own, deleted, or a span
/// repeated), from a fixed seed: wherever the edit lands — a number, an escape, a key, the
/// envelope — the payload is read as serde reads it.
#[test]
fn randomly_edited_payloads_are_read_as_serde_read_them() {
    const ALPHABET: &[u8] = b"{}[],:\"\\ 019-+.eEtrufalsn/u\xff\xc3\xa9";
    let payloads: Vec<Vec<u8>> = samples()
        .iter()
        .map(|request| {
            format!(r#"{{"request":{request},"settings":{{"auditScannerUsername":"a"}}}}"#)
                .into_bytes()
        })
        .collect();
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move |bound: usize| {
        // xorshift64*: reproducible without a dependency.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % bound
    };
    let (mut decoded, mut refused) = (0, 0);
    for round in 0..20_000 {
        let mut payload = payloads[round % payloads.len()].clone();
        for _ in 0..1 + next(3) {
            let at = next(payload.len());
            match next(3) {
                0 => payload[at] = ALPHABET[next(ALPHABET.len())],
                1 => drop(payload.remove(at)),
                _ => {
                    let end = (at + 1 + next(8)).min(payload.len());
                    let span = payload[at..end].to_vec();
                    payload.splice(at..at, span);
                }
            }
        }
        if same_as_serde(&payload) {
            decoded += 1;
        } else {
            refused += 1;
        }
    }
    assert!(
        decoded > 1000 && refused > 5000,
        "{decoded} decoded, {refused} refused"
    );
}
