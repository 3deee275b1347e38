//! A small Cozystack-shaped cluster and request builders shared by the decision tests.
#![allow(dead_code)]

use std::cell::RefCell;

use cozystack_resolver::request::{GROUP_LABEL, KIND_LABEL, NAME_LABEL};
use cozystack_resolver::tenant::Labels;
use cozystack_resolver::{
    Cluster, Definition, DefinitionList, Instance, LookupError, Namespace, ObjectState, Operation,
    RawField, Request, RuleField, Settings, Snapshot, Surface, User, Verdict,
};
use serde_json::json;

pub const FLUX: &str = "system:serviceaccount:cozy-fluxcd:flux";
pub const API: &str = "system:serviceaccount:cozy-system:cozystack-api";

pub fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A tenant namespace with its ancestor labels and provider labels.
pub fn tenant_ns(name: &str, providers: &[(&str, &str)]) -> Namespace {
    let mut l = Labels::new();
    if name != "tenant-root" {
        for t in cozystack_resolver::tenant::chain_from_name(name).unwrap() {
            l.insert(format!("tenant.cozystack.io/{t}"), String::new());
        }
    }
    for (class, provider) in providers {
        l.insert(
            format!("namespace.cozystack.io/{class}"),
            provider.to_string(),
        );
    }
    Namespace {
        name: name.into(),
        labels: l,
    }
}

pub fn definition(name: &str, kind: &str, fields: serde_json::Value) -> Definition {
    let mut definition = Definition::new(name, kind);
    for field in RuleField::ALL {
        definition.set(field, fields.get(field.key()).map(RawField::from_value));
    }
    definition
}

pub fn instance(kind: &str, namespace: &str, app: &str) -> Instance {
    Instance {
        kind: kind.into(),
        namespace: namespace.into(),
        release: app.into(),
        app: app.into(),
        terminating: false,
        rendered_by: None,
        values: serde_json::Value::Null,
    }
}

/// tenant-root (Monitoring, Etcd) → tenant-a (own Monitoring) → tenant-a-b; tenant-c.
pub fn cluster() -> Snapshot {
    Snapshot {
        definitions: vec![
            definition(
                "monitoring",
                "Monitoring",
                json!({
                "dashboard": {"module": true, "category": "Administration"},
                "cardinality": {"scope": "tenant", "max": 1},
                "protection": {"deletion": "protect"},
                "capability": {"provides": ["monitoring"], "share": "children"}}),
            ),
            definition(
                "etcd",
                "Etcd",
                json!({
                "dashboard": {"visibility": "module"},
                "cardinality": {"scope": "tenant", "max": 1},
                "protection": {"deletion": "protect"},
                "capability": {"provides": ["etcd"], "share": "children"}}),
            ),
            definition(
                "gateway",
                "Gateway",
                json!({"dashboard": {"visibility": "hidden"}}),
            ),
            definition(
                "computeplane",
                "ComputePlane",
                json!({
                "dashboard": {"visibility": "module"},
                "cardinality": {"scope": "tenant", "max": 1},
                "protection": {"edit": "adminOnly"}}),
            ),
            definition(
                "kubernetes",
                "Kubernetes",
                json!({
                "capability": {"consumes": ["etcd", "monitoring"]}}),
            ),
            definition(
                "postgres",
                "Postgres",
                json!({
                "dashboard": {"category": "PaaS"},
                "capability": {"consumes": ["monitoring"]}}),
            ),
            definition("redis", "Redis", json!({"dashboard": {"category": "PaaS"}})),
        ],
        namespaces: vec![
            // As cozystack-basics writes it: no provider label; tenant-root's apps resolve every
            // class to tenant-root through its cozystack-values.
            tenant_ns("tenant-root", &[]),
            tenant_ns(
                "tenant-a",
                &[("monitoring", "tenant-a"), ("etcd", "tenant-root")],
            ),
            tenant_ns(
                "tenant-a-b",
                &[("monitoring", "tenant-a"), ("etcd", "tenant-root")],
            ),
            // A child of the root carries the root's values: tenant-root for every class.
            tenant_ns(
                "tenant-c",
                &[("monitoring", "tenant-root"), ("etcd", "tenant-root")],
            ),
            Namespace {
                name: "cozy-system".into(),
                labels: Labels::new(),
            },
        ],
        instances: vec![
            instance("Monitoring", "tenant-root", "monitoring"),
            instance("Monitoring", "tenant-a", "monitoring"),
            instance("Etcd", "tenant-root", "etcd"),
            instance("Kubernetes", "tenant-a-b", "dev"),
            instance("Postgres", "tenant-a-b", "db"),
            instance("Postgres", "tenant-c", "db"),
            // The root Tenant, its modules switched on as `kubectl patch tenants/root` does.
            Instance {
                release: "tenant-root".into(),
                values: json!({"monitoring": true, "etcd": true}),
                ..instance("Tenant", "tenant-root", "root")
            },
        ],
    }
}

/// The root Tenant's values: its module switches.
pub fn root_values(snapshot: &mut Snapshot) -> &mut serde_json::Value {
    &mut snapshot
        .instances
        .iter_mut()
        .find(|i| i.kind == "Tenant" && i.release == "tenant-root")
        .expect("the root Tenant")
        .values
}

pub fn user(name: &str, groups: &[&str]) -> User {
    User {
        username: name.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
    }
}

pub fn app(op: Operation, kind: &str, namespace: &str, name: &str, who: User) -> Request {
    let state = ObjectState {
        labels: Labels::new(),
        terminating: false,
        spec: json!({"size": 1}),
    };
    Request {
        surface: Surface::Application,
        operation: op,
        kind: kind.into(),
        namespace: namespace.into(),
        name: name.into(),
        user: who,
        dry_run: false,
        subresource: None,
        object: (op != Operation::Delete).then(|| state.clone()),
        old_object: (op != Operation::Create).then_some(state),
    }
}

pub fn release_labels(kind: &str, app: &str) -> Labels {
    labels(&[
        (KIND_LABEL, kind),
        (GROUP_LABEL, "apps.cozystack.io"),
        (NAME_LABEL, app),
    ])
}

pub fn release(op: Operation, namespace: &str, name: &str, labels: Labels, who: User) -> Request {
    let state = ObjectState {
        labels,
        terminating: false,
        spec: json!({"values": {}}),
    };
    Request {
        surface: Surface::HelmRelease,
        operation: op,
        kind: "HelmRelease".into(),
        namespace: namespace.into(),
        name: name.into(),
        user: who,
        dry_run: false,
        subresource: None,
        object: (op != Operation::Delete).then(|| state.clone()),
        old_object: (op != Operation::Create).then_some(state),
    }
}

pub fn namespace_update(name: &str, old: Labels, new: Labels, who: User) -> Request {
    Request {
        surface: Surface::Namespace,
        operation: Operation::Update,
        kind: "Namespace".into(),
        namespace: String::new(),
        name: name.into(),
        user: who,
        dry_run: false,
        subresource: None,
        object: Some(ObjectState {
            labels: new,
            ..Default::default()
        }),
        old_object: Some(ObjectState {
            labels: old,
            ..Default::default()
        }),
    }
}

/// tenant-a's administrator deletes tenant-a's Monitoring, which tenant-a-b's apps consume.
pub fn delete_a_monitoring() -> Request {
    app(
        Operation::Delete,
        "Monitoring",
        "tenant-a",
        "monitoring",
        user("alice", &["tenant-a-admin"]),
    )
}

/// The refusal of [`delete_a_monitoring`] on [`cluster`].
pub const A_MONITORING_HELD: &str = "Monitoring tenant-a/monitoring is protected while it provides monitoring to consumers: tenant-a-b/db (Postgres), tenant-a-b/dev (Kubernetes); delete or move those consumers first, or give their tenants another monitoring provider (protection.deletion: protect)";

pub fn decide(request: &Request, cluster: &Snapshot) -> Verdict {
    cozystack_resolver::evaluate(request, &listed(), cluster)
}

#[track_caller]
pub fn assert_denied(verdict: &Verdict, code: u16, message: &str) {
    assert!(!verdict.allowed, "expected a denial, got {verdict:?}");
    assert_eq!(verdict.code, Some(code), "{verdict:?}");
    assert_eq!(verdict.message.as_deref(), Some(message));
}

#[track_caller]
pub fn assert_allowed(verdict: &Verdict, warnings: &[&str]) {
    assert!(verdict.allowed, "expected admission, got {verdict:?}");
    assert_eq!(verdict.message, None);
    assert_eq!(verdict.warnings, warnings);
}

/// One row of a rule's table: an Application write, and what the policy answers.
pub struct Case {
    pub name: &'static str,
    /// `OPERATION Kind namespace/name by user group,group`: the write through the apps API.
    pub write: &'static str,
    pub expect: Expect,
}

pub enum Expect {
    /// Admitted with these warnings.
    Allowed(&'static [&'static str]),
    /// Refused with 403 and this message.
    Denied(&'static str),
}

/// The request a [`Case`] writes.
pub fn written(write: &str) -> Request {
    let words: Vec<&str> = write.split_whitespace().collect();
    let [op, kind, place, "by", who, rest @ ..] = words.as_slice() else {
        panic!("{write:?} is not `OPERATION Kind namespace/name by user [groups]`");
    };
    let op = match *op {
        "CREATE" => Operation::Create,
        "UPDATE" => Operation::Update,
        "DELETE" => Operation::Delete,
        other => panic!("{write:?}: no operation {other}"),
    };
    let (namespace, name) = place.split_once('/').expect("namespace/name");
    let groups: Vec<&str> = rest.iter().flat_map(|g| g.split(',')).collect();
    app(op, kind, namespace, name, user(who, &groups))
}

/// Runs every case of a rule's table on `cluster` under `settings`, and fails naming each case
/// whose verdict or message differs (all of them, not the first).
#[track_caller]
pub fn run_table(cases: &[Case], cluster: &Snapshot, settings: &Settings) {
    let mut failed = Vec::new();
    for case in cases {
        let verdict = cozystack_resolver::evaluate(&written(case.write), settings, cluster);
        let agrees = match case.expect {
            Expect::Allowed(warnings) => {
                verdict.allowed && verdict.message.is_none() && verdict.warnings == warnings
            }
            Expect::Denied(message) => {
                !verdict.allowed
                    && verdict.code == Some(403)
                    && verdict.message.as_deref() == Some(message)
            }
        };
        if !agrees {
            failed.push(format!(
                "{}: {}
  got {verdict:?}",
                case.name, case.write
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// A cluster that records the lookups made and can fail some kinds of them.
pub struct Recording<'a> {
    pub inner: &'a Snapshot,
    pub calls: RefCell<Vec<String>>,
    /// Lookups starting with one of these fail.
    pub fail: Vec<&'static str>,
}

impl<'a> Recording<'a> {
    pub fn new(inner: &'a Snapshot) -> Self {
        Recording {
            inner,
            calls: RefCell::default(),
            fail: Vec::new(),
        }
    }

    fn record(&self, call: String) -> Result<(), LookupError> {
        self.calls.borrow_mut().push(call.clone());
        if self.fail.iter().any(|prefix| call.starts_with(prefix)) {
            return Err(LookupError::new(call, "connection refused"));
        }
        Ok(())
    }
}

impl Cluster for Recording<'_> {
    fn definitions(&self) -> Result<Box<dyn DefinitionList>, LookupError> {
        self.record("list ApplicationDefinitions".into())?;
        self.inner.definitions()
    }
    fn namespace(&self, name: &str) -> Result<Namespace, LookupError> {
        self.record(format!("get Namespace {name}"))?;
        self.inner.namespace(name)
    }
    fn namespaces(
        &self,
        keep: &std::collections::BTreeSet<String>,
    ) -> Result<Vec<Namespace>, LookupError> {
        self.record("list Namespaces".into())?;
        self.inner.namespaces(keep)
    }
    fn instances(
        &self,
        kind: &str,
        prefix: Option<&str>,
    ) -> Result<cozystack_resolver::Instances, LookupError> {
        self.record(format!("list HelmReleases of kind {kind}"))?;
        self.inner.instances(kind, prefix)
    }
    fn instances_of_kinds(
        &self,
        kinds: &[(&str, &str)],
    ) -> Result<Option<Vec<cozystack_resolver::Instances>>, LookupError> {
        let names: Vec<&str> = kinds.iter().map(|(kind, _)| *kind).collect();
        self.record(format!("list HelmReleases of kinds {}", names.join(", ")))?;
        self.inner.instances_of_kinds(kinds)
    }
    fn release(
        &self,
        namespace: &str,
        release: &str,
    ) -> Result<Option<cozystack_resolver::facts::ReleaseMeta>, LookupError> {
        self.record(format!("get HelmRelease {namespace}/{release}"))?;
        self.inner.release(namespace, release)
    }
}

/// The default settings reading the rules from the ApplicationDefinitions the fixture clusters
/// list (the default rule source is the built-in set).
pub fn listed() -> Settings {
    Settings {
        definition_source: cozystack_resolver::DefinitionSource::ApplicationDefinitions,
        ..Settings::default()
    }
}

/// Settings with `platformWriters: deny`: platform identities are refused like anyone else.
pub fn deny_writers() -> Settings {
    Settings {
        platform_writers: cozystack_resolver::PlatformWriters::Deny,
        ..listed()
    }
}
