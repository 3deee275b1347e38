//! The workloads: trees of tenants shaped like the bundled cluster, and the requests measured
//! on them.

use std::sync::Arc;
use std::time::Duration;

use cozystack_e2e::scenario::{Bundle, ShortRequest, without_slots};
use cozystack_policy_runtime::audit::replay_request;
use cozystack_policy_runtime::cluster::ClusterObjects;
use cozystack_policy_runtime::policy::payload;
use serde_json::{Value, json};

use crate::floor::{self, Call};
use crate::model::Modelled;

pub struct Workload {
    pub name: String,
    pub cluster: Arc<ClusterObjects>,
    pub payload: Vec<u8>,
    pub listed: usize,
    /// kwctl 1.36 `bench` on the same workload (issue #13), median µs, low and high.
    pub kwctl: Option<(f64, f64)>,
    /// The smallest set of host calls that decides it ([`crate::floor`]).
    pub floor: Vec<Call>,
}

/// The bundled objects the trees are copied from: a child of the root and its apps
/// (e2e/cluster, where each field is cited to the component that writes it), so that every
/// tree holds objects of one shape, as large as a live cluster's.
const CHILD: &str = "tenant-acme";
const CHILD_HOST: &str = "acme.example.org";

/// A copy of the bundled object `namespace/name` of `kind`, moved to `to_namespace` and named
/// `to_name`, with a uid of its own: every name, label, annotation and status field that
/// named the original names the copy.
pub fn copied(
    bundle: &Bundle,
    kind: &str,
    (namespace, name): (&str, &str),
    (to_namespace, to_name): (&str, &str),
) -> Value {
    let api_version = match kind {
        "Namespace" => "v1",
        _ => "helm.toolkit.fluxcd.io/v2",
    };
    let template = bundle
        .cluster
        .get(
            api_version,
            kind,
            name,
            (!namespace.is_empty()).then_some(namespace),
        )
        .map(|o| bundle.cluster.with_managed_fields(o))
        .unwrap_or_else(|| panic!("e2e/cluster holds no {kind} {namespace}/{name}"));
    let uid = template["metadata"]["uid"].clone();
    let short = |ns: &str| ns.strip_prefix("tenant-").unwrap_or(ns).to_owned();
    let mut text = template.to_string();
    if !name.is_empty() && name != to_name {
        text = text.replace(name, to_name);
    }
    if !namespace.is_empty() && namespace != to_namespace {
        text = text.replace(namespace, to_namespace);
    }
    text = text.replace(CHILD_HOST, &format!("{}.example.org", short(to_namespace)));
    let mut copy: Value = serde_json::from_str(&text).expect("a copy of a JSON value");
    let serial = UID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    copy["metadata"]["resourceVersion"] = json!(format!("{}", 2_000_000 + serial));
    copy["metadata"]["uid"] = json!(format!(
        "{}-{serial:012x}",
        uid.as_str()
            .unwrap_or("6f1c0d2e-0000-4000-8000")
            .rsplit_once('-')
            .map_or("", |p| p.0)
    ));
    copy
}

/// The serial a copy's uid ends with.
static UID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0x1000);

/// A child tenant's Namespace: a copy of the bundled child of the root.
pub fn child_namespace(bundle: &Bundle, name: &str) -> Value {
    copied(bundle, "Namespace", ("", CHILD), ("", name))
}

/// An app's release in `namespace`: a copy of the bundled `template` (`<namespace>/<name>`),
/// named `name` for the app `app`.
pub fn release(
    bundle: &Bundle,
    template: (&str, &str),
    namespace: &str,
    name: &str,
    app: &str,
) -> Value {
    let mut copy = copied(bundle, "HelmRelease", template, (namespace, name));
    copy["metadata"]["labels"]["apps.cozystack.io/application.name"] = json!(app);
    copy
}

/// Each tenant's Info release (the Tenant chart's), a copy of tenant-acme's.
pub fn info(bundle: &Bundle, namespace: &str) -> Value {
    release(bundle, (CHILD, "info"), namespace, "info", "info")
}

/// A tenant's Kubernetes cluster (cozystack-api's release), a copy of tenant-acme's storefront.
pub fn kubernetes(bundle: &Bundle, namespace: &str, app: &str) -> Value {
    let name = format!("kubernetes-{app}");
    release(
        bundle,
        (CHILD, "kubernetes-storefront"),
        namespace,
        &name,
        app,
    )
}

/// A module the Tenant chart renders in `namespace` (Monitoring, Etcd), a copy of tenant-ktj's.
pub fn tenant_module(bundle: &Bundle, namespace: &str, name: &str) -> Value {
    release(bundle, ("tenant-ktj", name), namespace, name, name)
}

/// The bundled definitions, the root with its Namespace, its Tenant release and its modules,
/// and `tenants` child tenants built by `each`.
pub fn tree(
    bundle: &Bundle,
    tenants: usize,
    each: impl Fn(&str, &mut Vec<Value>),
) -> ClusterObjects {
    let root = |kind: &str, name: &str| {
        bundle
            .cluster
            .values()
            .find(|o| {
                o["kind"] == kind
                    && o["metadata"]["name"] == name
                    && (kind == "Namespace" || o["metadata"]["namespace"] == "tenant-root")
            })
            .map(|o| bundle.cluster.with_managed_fields(o))
            .unwrap_or_else(|| panic!("e2e/cluster holds no {kind} {name} of tenant-root"))
    };
    let mut objects: Vec<Value> = bundle
        .cluster
        .values()
        .filter(|o| o["kind"] == "ApplicationDefinition")
        .collect();
    // cozystack-basics writes no provider label on tenant-root; its values resolve every class
    // to it, and its Tenant's switches (set through `tenants/root`) render its modules.
    objects.push(root("Namespace", "tenant-root"));
    for name in ["tenant-root", "monitoring", "etcd", "ingress", "seaweedfs"] {
        objects.push(root("HelmRelease", name));
    }
    for i in 0..tenants {
        let name = format!("tenant-t{i}");
        objects.push(child_namespace(bundle, &name));
        each(&name, &mut objects);
    }
    objects.push(child_namespace(bundle, "tenant-new"));
    objects.into_iter().collect()
}

pub fn workload(
    name: &str,
    cluster: ClusterObjects,
    request: ShortRequest,
    settings: &Value,
    listed: usize,
    floor: Vec<Call>,
) -> Workload {
    let admission = request.expand(&cluster);
    Workload {
        name: name.to_owned(),
        cluster: Arc::new(cluster),
        payload: payload(&admission, settings).expect("payload"),
        listed,
        kwctl: kwctl_measured(name),
        floor,
    }
}

/// The bundled settings with `definitionSource: settings`: the configuration for today's CRD,
/// which prunes the rules from the ApplicationDefinitions.
pub fn settings_only(bundle: &Bundle) -> Value {
    let mut settings = bundle.settings.clone();
    settings["definitionSource"] = json!("settings");
    // Each definition's release prefix, as an operator copies them from `kubectl get`.
    let prefixes: serde_json::Map<String, Value> = bundle
        .cluster
        .values()
        .filter_map(|d| {
            let kind = d.pointer("/spec/application/kind")?.as_str()?;
            Some((kind.to_owned(), d.pointer("/spec/release/prefix")?.clone()))
        })
        .collect();
    settings["releasePrefixes"] = Value::Object(prefixes);
    settings
}

/// Marks the workloads that read their rules from the settings alone.
pub const SETTINGS_ONLY: &str = ", settings only";
/// `settings` with its kind blocks repeated under made-up kinds until the whole is about 16 KB:
/// what a large rule set in the settings costs a request that needs none of it. Each made-up
/// kind has its `releasePrefixes` entry, as a kind of an operator's own must (validate_settings
/// refuses it otherwise, and so does the policy-server).
fn sixteen_kilobytes(settings: &Value) -> Value {
    let blocks = settings["definitions"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut large = settings.clone();
    let mut copy = 0;
    while serde_json::to_vec(&large).map_or(usize::MAX, |bytes| bytes.len()) < 16 * 1024 {
        for (kind, block) in &blocks {
            let made_up = format!("{kind}Copy{copy}");
            let prefix = format!("{}-copy{copy}-", kind.to_lowercase());
            large["releasePrefixes"][made_up.as_str()] = json!(prefix);
            large["definitions"][made_up] = block.clone();
        }
        copy += 1;
    }
    large
}

/// The settings of `deploy/`: the stock rule set built into the module.
pub fn builtin_settings() -> Value {
    json!({"platformWriters": "warn", "definitionSource": "builtin"})
}

/// The zero-call request with settings `{}`: the accept-all floor on its payload is the one the
/// zero-call targets divide by.
pub const ZERO_CALL_EMPTY_SETTINGS: &str = "Namespace label UPDATE, settings {}";

/// The zero-call request and a module CREATE under the stock deployment's settings.
pub const STOCK_DEPLOYMENT_ZERO_CALL: &str =
    "Namespace label UPDATE, stock deployment (built-in rules)";
pub const STOCK_DEPLOYMENT_CREATE: &str =
    "CREATE of a module by its tenant admin, 100 tenants, stock deployment (built-in rules)";

pub const STOCK_DEPLOYMENT_DELETE: &str =
    "DELETE shared provider, 4000 tenants, stock deployment (built-in rules)";
pub const STOCK_DEPLOYMENT_CONSUMER: &str =
    "CREATE of a Kubernetes consumer, 100 tenants, stock deployment (built-in rules)";

/// The module CREATE with `definitionSource: applicationDefinitions`, by the number listed.
pub const DEFINITIONS_READ: &str =
    "CREATE of a module by its tenant admin, 100 tenants, rules read from ";

/// Marks the twin of a workload whose settings hold no `cardinality.slots`.
pub const NO_SLOTS: &str = ", no slots";

pub fn workloads(bundle: &Bundle) -> Vec<Workload> {
    let defaults = &bundle.settings;
    let only_settings = &settings_only(bundle);
    let mut out = Vec::new();
    let settings = only_settings;
    for n in [1usize, 100, 4000] {
        let cluster = tree(bundle, n, |ns, objects| objects.push(info(bundle, ns)));
        let request = ShortRequest::new(
            "CREATE",
            "Info",
            "tenant-new",
            "info",
            "carol",
            &["tenant-new-admin"],
        );
        out.push(workload(
            &format!("CREATE counted kind, {n} instance(s){SETTINGS_ONLY}"),
            cluster,
            request,
            settings,
            n,
            vec![floor::instances(&["Info"])],
        ));
    }
    let settings = defaults;
    let request = ShortRequest::new(
        "CREATE",
        "Redis",
        "tenant-new",
        "cache",
        "carol",
        &["tenant-new-use"],
    );
    out.push(workload(
        "CREATE of a kind with no rules",
        tree(bundle, 100, |_, _| {}),
        request,
        settings,
        0,
        vec![floor::definitions()],
    ));
    let request = ShortRequest::new(
        "CREATE",
        "Kubernetes",
        "tenant-new",
        "dev",
        "carol",
        &["tenant-new-use"],
    );
    out.push(workload(
        "CREATE catalog consumer",
        tree(bundle, 100, |_, _| {}),
        request,
        settings,
        0,
        [
            vec![floor::definitions()],
            awaiting("tenant-new", KUBERNETES_PROVIDERS),
        ]
        .concat(),
    ));
    let request = ShortRequest::new(
        "CREATE",
        "Info",
        "tenant-t0",
        "info-2",
        "carol",
        &["tenant-t0-admin"],
    );
    out.push(workload(
        "CREATE second singleton, 100 tenants",
        tree(bundle, 100, |ns, objects| objects.push(info(bundle, ns))),
        request,
        settings,
        100,
        vec![floor::definitions(), floor::instances(&["Info"])],
    ));
    // The same CREATEs with the rules in the settings alone.
    for (name, kind, namespace, app, group, instances, floor) in [
        (
            "CREATE of a kind with no rules",
            "Redis",
            "tenant-new",
            "cache",
            "tenant-new-use",
            false,
            vec![],
        ),
        (
            "CREATE catalog consumer",
            "Kubernetes",
            "tenant-new",
            "dev",
            "tenant-new-use",
            false,
            awaiting("tenant-new", KUBERNETES_PROVIDERS),
        ),
        (
            "CREATE second singleton, 100 tenants",
            "Info",
            "tenant-t0",
            "info-2",
            "tenant-t0-admin",
            true,
            vec![floor::instances(&["Info"])],
        ),
    ] {
        let cluster = tree(bundle, 100, |ns, objects| {
            if instances {
                objects.push(info(bundle, ns))
            }
        });
        let request = ShortRequest::new("CREATE", kind, namespace, app, "carol", &[group]);
        let listed = if instances { 100 } else { 0 };
        out.push(workload(
            &format!("{name}{SETTINGS_ONLY}"),
            cluster,
            request,
            only_settings,
            listed,
            floor,
        ));
    }
    // A new Tenant with two switches on: each module it will render is counted in a namespace
    // that does not exist yet (no Namespace is read), here among 100 tenants' modules.
    let mut request = ShortRequest::new(
        "CREATE",
        "Tenant",
        "tenant-root",
        "new",
        "rita",
        &["tenant-root-super-admin"],
    );
    request.object = Some(json!({"spec": {"monitoring": true, "etcd": true}}));
    out.push(workload(
        &format!("CREATE Tenant with two switches, 100 tenants{SETTINGS_ONLY}"),
        tree(bundle, 100, |ns, objects| {
            objects.push(tenant_module(bundle, ns, "monitoring"));
            objects.push(tenant_module(bundle, ns, "etcd"));
        }),
        request,
        only_settings,
        100,
        vec![floor::instances(&["Etcd", "Monitoring"])],
    ));
    // The floor of a DELETE of tenant-root's Monitoring while consumers run: one list finds them,
    // one Namespace confirms the first resolves its monitoring to tenant-root.
    let consumed = || {
        vec![
            floor::instances(MONITORING_CONSUMERS),
            floor::namespace("tenant-t0"),
        ]
    };
    // Every tenant runs a Kubernetes cluster on the root's providers.
    let consumed_tree = |tenants| {
        tree(bundle, tenants, |ns, objects| {
            objects.push(kubernetes(bundle, ns, "dev"))
        })
    };
    let cluster = consumed_tree(4000);
    let delete_root_monitoring = || {
        ShortRequest::new(
            "DELETE",
            "Monitoring",
            "tenant-root",
            "monitoring",
            "rita",
            &["tenant-root-admin"],
        )
    };
    out.push(workload(
        "DELETE shared provider, 4000 tenants",
        cluster,
        delete_root_monitoring(),
        settings,
        8002,
        [vec![floor::definitions()], consumed()].concat(),
    ));
    // The same provider removed by its switch: a root super-admin turns monitoring off in
    // `tenants/root`, which moves every consumer pointing at tenant-root (refused, naming them).
    let mut switch_off = ShortRequest::new(
        "UPDATE",
        "Tenant",
        "tenant-root",
        "root",
        "rita",
        &["tenant-root-super-admin"],
    );
    switch_off.object = Some(json!({"spec": {"monitoring": false}}));
    out.push(workload(
        "UPDATE Tenant switching a shared provider off, 4000 tenants",
        consumed_tree(4000),
        switch_off,
        settings,
        8002,
        [vec![floor::definitions()], consumed()].concat(),
    ));
    // The stock deployment's worst cases: the same DELETE with the built-in rules, whose
    // Monitoring consumers are Kubernetes and ComputePlane, and a Kubernetes cluster's CREATE.
    out.push(workload(
        STOCK_DEPLOYMENT_DELETE,
        consumed_tree(4000),
        delete_root_monitoring(),
        &builtin_settings(),
        8002,
        consumed(),
    ));
    out.push(workload(
        STOCK_DEPLOYMENT_CONSUMER,
        consumed_tree(100),
        ShortRequest::new(
            "CREATE",
            "Kubernetes",
            "tenant-t0",
            "prod",
            "carol",
            &["tenant-t0-admin"],
        ),
        &builtin_settings(),
        100,
        awaiting("tenant-t0", KUBERNETES_PROVIDERS),
    ));
    // The common DELETE: a provider nobody consumes, in the same 4,000-tenant tree.
    out.push(workload(
        "DELETE unconsumed provider, 4000 tenants",
        tree(bundle, 4000, |_, _| {}),
        delete_root_monitoring(),
        settings,
        0,
        // No consumer: is its switch on in the owning Tenant (the root's)?
        vec![
            floor::definitions(),
            floor::instances(MONITORING_CONSUMERS),
            floor::tenant_release("tenant-root", "tenant-root"),
        ],
    ));
    // The path a module takes when a Tenant switches it off: Flux deletes the release.
    let flux = ShortRequest::new(
        "DELETE",
        "HelmRelease",
        "tenant-root",
        "monitoring",
        "system:serviceaccount:cozy-fluxcd:flux",
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:cozy-fluxcd",
            "system:authenticated",
        ],
    );
    out.push(workload(
        "DELETE unconsumed provider by Flux, 4000 tenants",
        tree(bundle, 4000, |_, _| {}),
        flux,
        settings,
        0,
        vec![floor::definitions(), floor::instances(MONITORING_CONSUMERS)],
    ));
    let mut request = ShortRequest::new(
        "UPDATE",
        "Namespace",
        "",
        "tenant-t0",
        "system:serviceaccount:cozy-system:cozystack-controller",
        &[],
    );
    // A provider label pointing at the namespace itself: judged from the request alone.
    request.set_labels.insert(
        "namespace.cozystack.io/monitoring".into(),
        Some("tenant-t0".into()),
    );
    // The same request, which makes no host call, with no settings, with the stock rule set
    // spelled out in the settings, and with the stock deployment (the rule set built in): what
    // moving and decoding the settings costs.
    let builtin = builtin_settings();
    for (name, with) in [
        (ZERO_CALL_EMPTY_SETTINGS, &json!({})),
        (
            "Namespace label UPDATE, stock rule set, settings only",
            only_settings,
        ),
        (STOCK_DEPLOYMENT_ZERO_CALL, &builtin),
        (
            "Namespace label UPDATE, 16 KB of settings",
            &sixteen_kilobytes(only_settings),
        ),
    ] {
        let measured = workload(
            name,
            tree(bundle, 1, |_, _| {}),
            request.clone(),
            with,
            0,
            vec![],
        );
        out.push(measured);
    }
    out.push(workload(
        "Namespace label UPDATE",
        tree(bundle, 1, |_, _| {}),
        request,
        settings,
        0,
        vec![],
    ));
    // A tenant administrator switches a module on from Administration → Modules; the same with
    // the kinds' slots dropped, for what the slot check costs on top; and under the stock
    // deployment's settings (the rule set built in).
    let module = |suffix: &str| {
        format!("CREATE of a module by its tenant admin, 100 tenants{SETTINGS_ONLY}{suffix}")
    };
    let module_tree = || {
        tree(bundle, 100, |ns, objects| {
            objects.push(tenant_module(bundle, ns, "monitoring"))
        })
    };
    let module_create = || {
        ShortRequest::new(
            "CREATE",
            "Monitoring",
            "tenant-new",
            "monitoring",
            "carol",
            &["tenant-new-admin"],
        )
    };
    // Its floor: the kind's instances (is one already in tenant-new?), and, Monitoring consuming
    // ingress, whether tenant-new's ingress provider runs (its Namespace's label names
    // tenant-root, whose Ingress release tells) for the awaiting warning.
    let module_floor = || {
        [
            vec![floor::instances(&["Monitoring"])],
            awaiting("tenant-new", &["ingress"]),
        ]
        .concat()
    };
    for (name, settings) in [
        (STOCK_DEPLOYMENT_CREATE.to_owned(), builtin.clone()),
        (module(""), only_settings.clone()),
        (module(NO_SLOTS), without_slots(only_settings)),
    ] {
        out.push(workload(
            &name,
            module_tree(),
            module_create(),
            &settings,
            100,
            module_floor(),
        ));
    }
    // The same CREATE with the rules read from the ApplicationDefinitions (one more list), with
    // the 14 stock definitions and with ten times as many (copies under made-up kinds): what a
    // definition the request does not need costs it.
    for copies in [0usize, 9] {
        let mut cluster = module_tree();
        let stock: Vec<Value> = cluster
            .values()
            .filter(|o| o["kind"] == "ApplicationDefinition")
            .collect();
        for copy in 1..=copies {
            cluster.extend(stock.iter().map(|definition| {
                let mut definition = definition.clone();
                let name = definition["metadata"]["name"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned();
                definition["metadata"]["name"] = json!(format!("{name}-copy{copy}"));
                if let Some(kind) = definition.pointer_mut("/spec/application/kind") {
                    *kind = json!(format!("{}Copy{copy}", kind.as_str().unwrap_or("")));
                }
                definition
            }));
        }
        let definitions = stock.len() * (copies + 1);
        out.push(workload(
            &format!("{DEFINITIONS_READ}{definitions} ApplicationDefinitions"),
            cluster,
            module_create(),
            defaults,
            100,
            [vec![floor::definitions()], module_floor()].concat(),
        ));
    }
    // The consumed DELETE at ten times the scale.
    out.push(workload(
        "DELETE shared provider, 40000 tenants",
        consumed_tree(40_000),
        delete_root_monitoring(),
        settings,
        80_002,
        [vec![floor::definitions()], consumed()].concat(),
    ));
    // What the audit scanner's replay of one tenant's Info release costs the policy-server: a
    // CREATE without userInfo, counted against the Info release of every tenant.
    for n in AUDIT_REPLAY_TENANTS {
        out.push(audit_replay(bundle, n));
    }
    out
}

/// The kinds that consume monitoring, in the bundled settings and the stock rule set alike.
const MONITORING_CONSUMERS: &[&str] = &["ComputePlane", "Kubernetes"];

/// The floor of a consumer's CREATE in `namespace`, whose labels resolve every class to
/// tenant-root: its Namespace, and the root Tenant's switches (is each provider running, or
/// must the user be warned that the app awaits one).
/// What decides the awaiting warning of a consumer created in `namespace`, a child of
/// tenant-root whose labels resolve every class there: its Namespace, then one GET of each
/// consumed module's release in tenant-root (is it there, and not being uninstalled?).
fn awaiting(namespace: &str, modules: &[&str]) -> Vec<Call> {
    let mut calls = vec![floor::namespace(namespace)];
    calls.extend(
        modules
            .iter()
            .map(|module| floor::tenant_release("tenant-root", module)),
    );
    calls
}

/// The module releases a Kubernetes cluster's classes resolve to (etcd, ingress, monitoring).
const KUBERNETES_PROVIDERS: &[&str] = &["etcd", "ingress", "monitoring"];

impl Row {
    /// The model's median over the protocol floor's.
    pub fn over_floor(&self) -> f64 {
        self.model.total.as_secs_f64() / self.protocol.total.as_secs_f64()
    }
}

/// kwctl's median for the workload `name`, where `make bench-kwctl` measured it.
fn kwctl_measured(name: &str) -> Option<(f64, f64)> {
    KWCTL_MEASURED
        .iter()
        .find(|(measured, _)| *measured == name)
        .map(|(_, us)| (*us, *us))
}

/// `make bench-kwctl`'s medians (kwctl 1.36.0-beta.1 `bench`, the same workloads served by a
/// loopback API, this module at ebccf69; docs/benchmarks.md, "In Kubewarden's own evaluator"),
/// µs: what the model is held to, so that `make bench`, run without kwctl, errs high.
pub const KWCTL_MEASURED: &[(&str, f64)] = &[
    ("CREATE counted kind, 1 instance(s), settings only", 199.0),
    ("CREATE counted kind, 100 instance(s), settings only", 705.0),
    (
        "CREATE counted kind, 4000 instance(s), settings only",
        45_640.0,
    ),
    ("CREATE of a kind with no rules", 214.0),
    ("CREATE catalog consumer", 813.0),
    ("CREATE second singleton, 100 tenants", 751.0),
    ("CREATE of a kind with no rules, settings only", 61.0),
    ("CREATE catalog consumer, settings only", 517.0),
    ("CREATE second singleton, 100 tenants, settings only", 691.0),
    (
        "CREATE Tenant with two switches, 100 tenants, settings only",
        1_310.0,
    ),
    ("DELETE shared provider, 4000 tenants", 21_990.0),
    (
        "UPDATE Tenant switching a shared provider off, 4000 tenants",
        20_870.0,
    ),
    (STOCK_DEPLOYMENT_DELETE, 24_590.0),
    (STOCK_DEPLOYMENT_CONSUMER, 531.0),
    ("DELETE unconsumed provider, 4000 tenants", 600.0),
    ("DELETE unconsumed provider by Flux, 4000 tenants", 512.0),
    ("Namespace label UPDATE, settings {}", 75.0),
    (
        "Namespace label UPDATE, stock rule set, settings only",
        120.0,
    ),
    (STOCK_DEPLOYMENT_ZERO_CALL, 74.0),
    ("Namespace label UPDATE, 16 KB of settings", 359.0),
    (
        "CREATE of a module by its tenant admin, 100 tenants, stock deployment (built-in rules)",
        1_040.0,
    ),
    (
        "CREATE of a module by its tenant admin, 100 tenants, settings only",
        1_220.0,
    ),
    (
        "CREATE of a module by its tenant admin, 100 tenants, settings only, no slots",
        1_020.0,
    ),
    (
        "CREATE of a module by its tenant admin, 100 tenants, rules read from 14 ApplicationDefinitions",
        1_080.0,
    ),
    (
        "CREATE of a module by its tenant admin, 100 tenants, rules read from 140 ApplicationDefinitions",
        2_440.0,
    ),
    (
        "audit replay of a tenant's Info release, 4000 tenants, stock deployment (built-in rules)",
        67.0,
    ),
    (
        "audit replay of a tenant's Info release, 40000 tenants, stock deployment (built-in rules)",
        66.0,
    ),
];

/// The tenants the audit replay is measured at.
pub const AUDIT_REPLAY_TENANTS: [usize; 2] = [4000, 40_000];

/// The name of the audit replay's workload at `tenants` tenants.
pub fn audit_replay_name(tenants: usize) -> String {
    format!(
        "audit replay of a tenant's Info release, {tenants} tenants, stock deployment (built-in rules)"
    )
}

/// The audit scanner's request for tenant-t0's Info release, every tenant holding its own.
fn audit_replay(bundle: &Bundle, tenants: usize) -> Workload {
    let cluster = tree(bundle, tenants, |ns, objects| {
        objects.push(info(bundle, ns))
    });
    let request = replay_request(&info(bundle, "tenant-t0")).expect("replay");
    Workload {
        kwctl: kwctl_measured(&audit_replay_name(tenants)),
        name: audit_replay_name(tenants),
        cluster: Arc::new(cluster),
        payload: payload(&request, &builtin_settings()).expect("payload"),
        listed: tenants,
        // The slot holder is the instance its scope keeps: nothing to read.
        floor: vec![],
    }
}

/// One measured workload: its cost in the model, its multiple of the floor on the same payload,
/// the guest's peak heap, and the verdict.
pub struct Row {
    pub workload: Workload,
    pub model: Modelled,
    pub floors: f64,
    /// The protocol floor: what the smallest set of calls deciding it costs, measured.
    pub protocol: crate::floor::Floor,
    pub heap_peak: usize,
    pub largest: usize,
    pub verdict: Value,
    /// The wasm's own p99 and spread, and the native build's median.
    pub p99: Duration,
    pub spread: f64,
    pub native: Duration,
    /// A request without host calls timed as `kwctl bench` times it, on a warm instance: its
    /// cost over the accept-all floor's, timed the same way.
    pub warm_floors: Option<f64>,
    /// A request without host calls on a fresh instance and the accept-all floor on the
    /// payload with settings `{}`, medians of the two timed in turns: a ratio of two rows
    /// measured minutes apart would carry the machine's drift between them.
    pub empty_floor: Option<(Duration, Duration)>,
}
