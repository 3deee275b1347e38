//! Fuzz targets of the policy crate, shared by `fuzz/` (cargo-fuzz, nightly) and the corpus
//! replay test that runs on stable in `make test`. Each target panics only when an invariant
//! breaks. A workshop crate: the policy module carries none of it.

use cozystack_resolver::facts::{Instance, Namespace, Snapshot};
use cozystack_resolver::request::{ObjectState, Operation, Request, Surface};
use cozystack_resolver::{Definition, RawField, RuleField, Settings, User};
use serde_json::json;

use cozystack_capabilities_policy::host::Host;

/// A host that answers every lookup with an error: decoding must never need it.
struct NoHost;

impl Host for NoHost {
    fn kubernetes(&self, _: &str, _: &[u8]) -> Result<Vec<u8>, String> {
        Err("no host in the fuzzer".into())
    }
}

/// Settings decoding: any bytes, no panic; what decodes also validates consistently.
pub fn settings(data: &[u8]) {
    if let Ok(settings) = cozystack_capabilities_policy::settings::parse(data) {
        assert!(
            settings.validate().is_ok(),
            "parse returned settings that do not validate"
        );
    }
}

/// Admission decoding: any payload, no panic, and a request that does not decode, or whose
/// lookups fail, is never allowed. The reference decodes the settings as a request does: the
/// shared fields, and no kind's block until a rule needs it (`validate_settings` checks every
/// block when the policy is loaded; a bad block of another kind is not this request's error).
pub fn admission(data: &[u8]) {
    let verdict = cozystack_capabilities_policy::evaluate(data, &NoHost);
    let decodes = serde_json::from_slice::<cozystack_capabilities_policy::admission::Payload>(data)
        .ok()
        .and_then(|p| {
            let settings = cozystack_capabilities_policy::settings::parse_for_request(
                p.settings
                    .map_or(b"null".as_slice(), |s| s.get().as_bytes()),
            )
            .ok()?;
            cozystack_capabilities_policy::admission::decode(p.request.get(), &settings).ok()
        });
    if decodes.is_none() {
        assert!(!verdict.allowed, "an undecodable request was allowed");
        assert_eq!(verdict.code, Some(400));
    }
    if verdict.allowed {
        assert!(verdict.message.is_none());
    } else {
        let message = verdict.message.as_deref().unwrap_or_default();
        assert!(
            !message.is_empty() && !message.contains('\n'),
            "denials are one non-empty line"
        );
    }
}

/// A host that hands back the same bytes for every lookup.
struct Echo<'a>(&'a [u8]);

impl Host for Echo<'_> {
    fn kubernetes(&self, _: &str, _: &[u8]) -> Result<Vec<u8>, String> {
        Ok(self.0.to_vec())
    }
}

type Listed<T> = Result<Vec<T>, ()>;

/// serde_json's reading of a list response, the reference for the scanner: the document as a
/// `Value`, its `items` (absent or null: none); anything else of the wrong type is an error.
fn reference_list(data: &[u8]) -> Listed<serde_json::Value> {
    use serde_json::Value;
    let Ok(Value::Object(list)) = serde_json::from_slice::<Value>(data) else {
        return Err(());
    };
    match list.get("items") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => Ok(items.clone()),
        Some(_) => Err(()),
    }
}

/// An object that may be absent or null (then empty).
fn reference_object(
    value: Option<&serde_json::Value>,
) -> Result<serde_json::Map<String, serde_json::Value>, ()> {
    match value {
        None | Some(serde_json::Value::Null) => Ok(serde_json::Map::new()),
        Some(serde_json::Value::Object(map)) => Ok(map.clone()),
        Some(_) => Err(()),
    }
}

/// Each item's `metadata`, which may be absent or null; the read values of the wrong type are
/// errors too.
fn reference_items(data: &[u8]) -> Listed<serde_json::Map<String, serde_json::Value>> {
    reference_list(data)?
        .iter()
        .map(|item| reference_object(item.as_object().ok_or(())?.get("metadata")))
        .collect()
}

/// A string field that may be absent or null.
fn reference_text(
    map: &serde_json::Map<String, serde_json::Value>,
    key: &str,
) -> Result<Option<String>, ()> {
    match map.get(key) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(()),
    }
}

fn reference_labels(
    meta: &serde_json::Map<String, serde_json::Value>,
) -> Result<serde_json::Map<String, serde_json::Value>, ()> {
    match meta.get("labels") {
        None | Some(serde_json::Value::Null) => Ok(serde_json::Map::new()),
        Some(serde_json::Value::Object(labels)) => Ok(labels.clone()),
        Some(_) => Err(()),
    }
}

/// One definition as the comparison sees it: name, kind, release prefix and the rule fields
/// as values.
type DefinitionFacts = (
    String,
    String,
    Option<String>,
    [Option<serde_json::Value>; RuleField::ALL.len()],
);

/// serde_json's reading of an ApplicationDefinitions answer, the reference for the index: each
/// item's name, kind and prefix, strings that may be absent or null (a kind or a group may not
/// be null), and its rule fields; `metadata`, `spec`, `application` and `release` objects that
/// may be absent or null; the items without a kind, or served in another group, left out.
fn reference_definitions(data: &[u8]) -> Listed<DefinitionFacts> {
    use serde_json::Value;
    let mut out = Vec::new();
    for item in reference_list(data)? {
        let item = item.as_object().ok_or(())?;
        let name =
            reference_text(&reference_object(item.get("metadata"))?, "name")?.unwrap_or_default();
        let spec = reference_object(item.get("spec"))?;
        let application = reference_object(spec.get("application"))?;
        let kind = match application.get("kind") {
            None => String::new(),
            Some(Value::String(kind)) => kind.clone(),
            Some(_) => return Err(()),
        };
        // A kind served in another API group is another kind: left out.
        let served_here = match application.get("group") {
            None => true,
            Some(Value::String(group)) => group.is_empty() || group == "apps.cozystack.io",
            Some(_) => return Err(()),
        };
        let prefix = reference_text(&reference_object(spec.get("release"))?, "prefix")?;
        let fields = RuleField::ALL.map(|field| {
            spec.get(field.key())
                .filter(|value| !value.is_null())
                .cloned()
        });
        if !kind.is_empty() && served_here {
            out.push((name, kind, prefix, fields));
        }
    }
    Ok(out)
}

/// Differential: for any bytes as the host's answer, the namespaces, releases and
/// ApplicationDefinitions the policy reads with its scanner equal what serde_json reads from the same bytes, or both fail.
pub fn lists(data: &[u8]) {
    use cozystack_resolver::Cluster;
    let host = Echo(data);
    let cluster = cozystack_capabilities_policy::cluster::HostCluster::new(&host);
    let keep: std::collections::BTreeSet<String> = [
        "tenant.cozystack.io/tenant-root",
        "namespace.cozystack.io/monitoring",
    ]
    .map(String::from)
    .into();
    let reference = reference_items(data);

    let expected: Listed<Namespace> = reference.clone().and_then(|items| {
        let mut out = Vec::new();
        for meta in items {
            let name = reference_text(&meta, "name")?;
            let all = reference_labels(&meta)?;
            let mut labels = std::collections::BTreeMap::new();
            for key in &keep {
                if let Some(value) = all.get(key) {
                    labels.insert(key.clone(), value.as_str().ok_or(())?.to_owned());
                }
            }
            if !labels.is_empty() {
                out.push(Namespace {
                    name: name.unwrap_or_default(),
                    labels,
                });
            }
        }
        Ok(out)
    });
    let scanned = cluster.namespaces(&keep).map_err(drop);
    assert_eq!(
        scanned, expected,
        "namespaces differ from serde_json's reading"
    );

    for prefix in [None, Some("postgres-")] {
        let expected: Listed<Instance> = reference.clone().and_then(|items| {
            items
                .iter()
                .map(|meta| {
                    let release = reference_text(meta, "name")?.unwrap_or_default();
                    let app = reference_text(
                        &reference_labels(meta)?,
                        cozystack_resolver::request::NAME_LABEL,
                    )?;
                    let app = match (prefix, app) {
                        (Some(p), _) => release.strip_prefix(p).unwrap_or(&release).to_owned(),
                        (None, Some(app)) if !app.is_empty() => app,
                        (None, _) => release.clone(),
                    };
                    Ok(Instance {
                        kind: "Postgres".into(),
                        namespace: reference_text(meta, "namespace")?.unwrap_or_default(),
                        app,
                        release,
                        terminating: !matches!(
                            meta.get("deletionTimestamp"),
                            None | Some(serde_json::Value::Null)
                        ),
                        rendered_by: None,
                        values: serde_json::Value::Null,
                    })
                })
                .collect()
        });
        let scanned: Listed<Instance> = cluster
            .instances("Postgres", prefix)
            .map(|list| list.iter().map(Instance::from).collect())
            .map_err(drop);
        assert_eq!(
            scanned, expected,
            "releases (prefix {prefix:?}) differ from serde_json's reading"
        );
    }

    let field = |raw: Option<&RawField>| {
        raw.map(|raw| serde_json::from_str(raw.get()).unwrap_or(serde_json::Value::Null))
    };
    let scanned: Listed<DefinitionFacts> = cluster
        .definitions()
        .map(|list| {
            list.all()
                .into_iter()
                .map(|d| {
                    let fields = RuleField::ALL.map(|f| field(d.field(f)));
                    (d.name, d.kind, d.release_prefix, fields)
                })
                .collect()
        })
        .map_err(drop);
    assert_eq!(
        scanned,
        reference_definitions(data),
        "ApplicationDefinitions differ from serde_json's reading"
    );
}

/// Reads bytes as a stream of small choices.
struct Choices<'a>(&'a [u8]);

impl Choices<'_> {
    fn next(&mut self, below: u8) -> u8 {
        match self.0.split_first() {
            Some((first, rest)) => {
                self.0 = rest;
                first % below.max(1)
            }
            None => 0,
        }
    }
}

const WORDS: [&str; 4] = ["a", "b", "root", "x1"];
const KINDS: [&str; 4] = ["Monitoring", "Postgres", "Gateway", "Redis"];
const USERS: [&str; 4] = [
    "system:serviceaccount:cozy-fluxcd:flux",
    "alice",
    "system:serviceaccount:kube-system:namespace-controller",
    "bob",
];

/// A full evaluation over arbitrary facts: a tenant tree with arbitrary (possibly forged or
/// broken) labels, instances and a request, all chosen by `data`. No panic, and every
/// denial is one line with a code.
pub fn evaluation(data: &[u8]) {
    let mut c = Choices(data);
    let names = tenant_names(&mut c);
    let snapshot = Snapshot {
        namespaces: namespaces(&mut c, &names),
        instances: instances(&mut c, &names),
        definitions: definitions(&mut c),
    };
    let request = request(&mut c, &names, &snapshot);
    let verdict = cozystack_resolver::evaluate(&request, &Settings::default(), &snapshot);
    if !verdict.allowed {
        assert!(matches!(verdict.code, Some(400 | 403 | 500)), "{verdict:?}");
        let message = verdict.message.unwrap_or_default();
        assert!(!message.is_empty() && !message.contains('\n'), "{message}");
    }
}

/// The tenant tree's namespace names, now and then one outside it.
fn tenant_names(c: &mut Choices) -> Vec<String> {
    let mut names = vec!["tenant-root".to_owned()];
    for _ in 0..c.next(6) {
        let parent = names[usize::from(c.next(names.len() as u8))].clone();
        let word = WORDS[usize::from(c.next(4))];
        let name = if parent == "tenant-root" {
            format!("tenant-{word}")
        } else {
            format!("{parent}-{word}")
        };
        names.push(if c.next(8) == 0 {
            format!("other-{word}")
        } else {
            name
        });
    }
    names
}

/// Each namespace's labels: mostly its true ancestors, sometimes forged or missing ones, and
/// the Monitoring provider it claims.
fn namespaces(c: &mut Choices, names: &[String]) -> Vec<Namespace> {
    names
        .iter()
        .map(|name| {
            let mut labels = std::collections::BTreeMap::new();
            for ancestor in names {
                // Mostly the true ancestors, sometimes forged or missing ones, rarely a value.
                let claimed =
                    c.next(3) != 0 && (name.starts_with(ancestor.as_str()) || c.next(4) == 0);
                if claimed {
                    let value = if c.next(10) == 0 {
                        "x".to_owned()
                    } else {
                        String::new()
                    };
                    labels.insert(format!("tenant.cozystack.io/{ancestor}"), value);
                }
            }
            let provider = names[usize::from(c.next(names.len() as u8))].clone();
            labels.insert(
                "namespace.cozystack.io/monitoring".into(),
                if c.next(3) == 0 {
                    String::new()
                } else {
                    provider
                },
            );
            Namespace {
                name: name.clone(),
                labels,
            }
        })
        .collect()
}

/// Up to eight instances of the kinds, some terminating, some rendered by a Tenant.
fn instances(c: &mut Choices, names: &[String]) -> Vec<Instance> {
    (0..c.next(8))
        .map(|i| {
            let ns = &names[usize::from(c.next(names.len() as u8))];
            Instance {
                kind: KINDS[usize::from(c.next(4))].into(),
                namespace: ns.clone(),
                release: format!("r{i}"),
                app: format!("app{}", c.next(3)),
                terminating: c.next(4) == 0,
                rendered_by: (c.next(2) == 0).then(|| format!("tenant-root/tenant-{}", c.next(3))),
                values: serde_json::Value::Null,
            }
        })
        .collect()
}

/// The definitions, Monitoring's count drawn.
fn definitions(c: &mut Choices) -> Vec<Definition> {
    let scope = ["namespace", "tenant", "cluster"][usize::from(c.next(3))];
    let max = c.next(3);
    let raw = RawField::from_value;
    vec![
        Definition::new("monitoring", "Monitoring")
            .with(RuleField::Dashboard, raw(&json!({"module": true})))
            .with(
                RuleField::Cardinality,
                raw(&json!({"scope": scope, "max": max})),
            )
            .with(RuleField::Protection, raw(&json!({"deletion": "protect"})))
            .with(
                RuleField::Capability,
                raw(&json!({"provides": ["monitoring"], "share": "children"})),
            ),
        Definition::new("postgres", "Postgres").with(
            RuleField::Capability,
            raw(&json!({"consumes": ["monitoring"]})),
        ),
        Definition::new("gateway", "Gateway")
            .with(RuleField::Dashboard, raw(&json!({"visibility": "hidden"}))),
    ]
}

/// A request on one of the surfaces, by one of the users, on drawn objects.
fn request(c: &mut Choices, names: &[String], snapshot: &Snapshot) -> Request {
    let surface = [
        Surface::Application,
        Surface::HelmRelease,
        Surface::Namespace,
    ][usize::from(c.next(3))];
    let operation =
        [Operation::Create, Operation::Update, Operation::Delete][usize::from(c.next(3))];
    let kind = KINDS[usize::from(c.next(4))];
    let namespace = names[usize::from(c.next(names.len() as u8))].clone();
    let state = |c: &mut Choices| ObjectState {
        labels: snapshot.namespaces[usize::from(c.next(names.len() as u8))]
            .labels
            .clone()
            .into_iter()
            .chain([
                (
                    "apps.cozystack.io/application.kind".to_owned(),
                    kind.to_owned(),
                ),
                (
                    "apps.cozystack.io/application.group".to_owned(),
                    "apps.cozystack.io".to_owned(),
                ),
            ])
            .collect(),
        terminating: c.next(5) == 0,
        spec: json!({"v": c.next(2)}),
    };
    let object = (operation != Operation::Delete).then(|| state(c));
    let old_object = (operation != Operation::Create).then(|| state(c));
    Request {
        surface,
        operation,
        kind: if surface == Surface::Namespace {
            "Namespace".into()
        } else {
            kind.into()
        },
        namespace: if surface == Surface::Namespace {
            String::new()
        } else {
            namespace.clone()
        },
        name: if surface == Surface::Namespace {
            namespace
        } else {
            format!("app{}", c.next(3))
        },
        user: User {
            username: USERS[usize::from(c.next(4))].into(),
            groups: vec![format!(
                "{}-admin",
                names[usize::from(c.next(names.len() as u8))]
            )],
        },
        dry_run: false,
        subresource: None,
        object,
        old_object,
    }
}
