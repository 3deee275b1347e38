//! The workloads: trees of tenants shaped like the bundled cluster, and the requests measured
//! on them.

use std::sync::Arc;
use std::time::Duration;

use cozystack_e2e::scenario::{Bundle, ShortRequest, without_slots};
use cozystack_policy_runtime::audit::replay_request;
use cozystack_policy_runtime::cluster::ClusterObjects;
use cozystack_policy_runtime::policy::payload;
use serde_json::{Value, json};

use crate::model::Modelled;

pub struct Workload {
    pub name: String,
    pub cluster: Arc<ClusterObjects>,
    pub payload: Vec<u8>,
    pub listed: usize,
    /// kwctl 1.36 `bench` on the same workload (issue #13), median µs, low and high.
    pub kwctl: Option<(f64, f64)>,
}

pub fn namespace(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
}

/// A child of the root as the Tenant chart labels it: the root's values for every class but
/// `monitoring` (the platform gateway is off, so `gateway` is empty).
pub fn tenant_labels(name: &str, monitoring: &str) -> Value {
    let mut labels = json!({"kubernetes.io/metadata.name": name, "namespace.cozystack.io/host": format!("{name}.example.org"),
        "namespace.cozystack.io/monitoring": monitoring, "namespace.cozystack.io/etcd": "tenant-root", "namespace.cozystack.io/ingress": "tenant-root",
        "namespace.cozystack.io/gateway": "", "namespace.cozystack.io/seaweedfs": "tenant-root", "tenant.cozystack.io/tenant-root": "",
        "alpha.kubevirt.io/auto-memory-limits-ratio": "1.0", "app.kubernetes.io/managed-by": "Helm", "internal.cozystack.io/flux-shard": "shard0"});
    labels[format!("tenant.cozystack.io/{name}")] = json!("");
    labels
}

pub fn release(namespace: &str, name: &str, kind: &str, app: &str) -> Value {
    json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": name, "namespace": namespace, "labels": {
            "apps.cozystack.io/application.kind": kind, "apps.cozystack.io/application.group": "apps.cozystack.io",
            "apps.cozystack.io/application.name": app, "sharding.fluxcd.io/key": "shard0"}},
        "spec": {"interval": "5m", "chartRef": {"kind": "ExternalArtifact", "name": format!("cozystack-{}", kind.to_lowercase()), "namespace": "cozy-system"},
                 "valuesFrom": [{"kind": "Secret", "name": "cozystack-values"}], "values": {}}})
}

/// The bundled definitions, the root, and `tenants` child tenants built by `each`.
pub fn tree(
    bundle: &Bundle,
    tenants: usize,
    each: impl Fn(&str, &mut Vec<Value>),
) -> ClusterObjects {
    let mut objects: Vec<Value> = bundle
        .cluster
        .values()
        .filter(|o| o["kind"] == "ApplicationDefinition")
        .collect();
    // cozystack-basics writes no provider label on tenant-root; its values resolve every class
    // to it, and its Tenant's switches (set through `tenants/root`) render its modules.
    objects.push(namespace(
        "tenant-root",
        json!({"kubernetes.io/metadata.name": "tenant-root", "platform.cozystack.io/no-delete": "true",
            "namespace.cozystack.io/host": "example.org"}),
    ));
    let mut root = release("tenant-root", "tenant-root", "Tenant", "root");
    root["spec"]["values"] = json!({"host": "example.org", "monitoring": true, "etcd": true, "ingress": true, "seaweedfs": true});
    objects.push(root);
    for (name, kind) in [
        ("monitoring", "Monitoring"),
        ("etcd", "Etcd"),
        ("ingress", "Ingress"),
        ("seaweedfs", "SeaweedFS"),
    ] {
        objects.push(release("tenant-root", name, kind, name));
    }
    for i in 0..tenants {
        let name = format!("tenant-t{i}");
        objects.push(namespace(&name, tenant_labels(&name, "tenant-root")));
        each(&name, &mut objects);
    }
    objects.push(namespace(
        "tenant-new",
        tenant_labels("tenant-new", "tenant-root"),
    ));
    objects.into_iter().collect()
}

pub fn workload(
    name: &str,
    cluster: ClusterObjects,
    request: ShortRequest,
    settings: &Value,
    listed: usize,
) -> Workload {
    let admission = request.expand(&cluster);
    Workload {
        name: name.to_owned(),
        cluster: Arc::new(cluster),
        payload: payload(&admission, settings).expect("payload"),
        listed,
        kwctl: None,
    }
}

impl Workload {
    fn kwctl(mut self, low: f64, high: f64) -> Self {
        self.kwctl = Some((low, high));
        self
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
/// what a large rule set in the settings costs a request that needs none of it.
fn sixteen_kilobytes(settings: &Value) -> Value {
    let blocks = settings["definitions"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut large = settings.clone();
    let mut copy = 0;
    while serde_json::to_vec(&large).map_or(usize::MAX, |bytes| bytes.len()) < 16 * 1024 {
        for (kind, block) in &blocks {
            large["definitions"][format!("{kind}Copy{copy}")] = block.clone();
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
        let cluster = tree(bundle, n, |ns, objects| {
            objects.push(release(ns, "info", "Info", "info"))
        });
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
        tree(bundle, 100, |ns, objects| {
            objects.push(release(ns, "info", "Info", "info"))
        }),
        request,
        settings,
        100,
    ));
    // The same CREATEs with the rules in the settings alone.
    for (name, kind, namespace, app, group, instances) in [
        (
            "CREATE of a kind with no rules",
            "Redis",
            "tenant-new",
            "cache",
            "tenant-new-use",
            false,
        ),
        (
            "CREATE catalog consumer",
            "Kubernetes",
            "tenant-new",
            "dev",
            "tenant-new-use",
            false,
        ),
        (
            "CREATE second singleton, 100 tenants",
            "Info",
            "tenant-t0",
            "info-2",
            "tenant-t0-admin",
            true,
        ),
    ] {
        let cluster = tree(bundle, 100, |ns, objects| {
            if instances {
                objects.push(release(ns, "info", "Info", "info"))
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
            objects.push(release(ns, "monitoring", "Monitoring", "monitoring"));
            objects.push(release(ns, "etcd", "Etcd", "etcd"));
        }),
        request,
        only_settings,
        100,
    ));
    // Every tenant runs a Kubernetes cluster on the root's providers.
    let consumed_tree = |tenants| {
        tree(bundle, tenants, |ns, objects| {
            objects.push(release(ns, "kubernetes-dev", "Kubernetes", "dev"))
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
    ));
    // The stock deployment's worst cases: the same DELETE with the built-in rules, whose
    // Monitoring consumers are Kubernetes and ComputePlane, and a Kubernetes cluster's CREATE.
    // kwctl's figures for the module at 6be6b36 with `definitionSource: builtin`, the model's
    // calibration (docs/benchmarks.md#calibration).
    out.push(
        workload(
            STOCK_DEPLOYMENT_DELETE,
            consumed_tree(4000),
            delete_root_monitoring(),
            &builtin_settings(),
            8002,
        )
        .kwctl(22_060.0, 30_100.0),
    );
    out.push(
        workload(
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
        )
        .kwctl(273.0, 333.0),
    );
    // The common DELETE: a provider nobody consumes, in the same 4,000-tenant tree.
    out.push(workload(
        "DELETE unconsumed provider, 4000 tenants",
        tree(bundle, 4000, |_, _| {}),
        delete_root_monitoring(),
        settings,
        0,
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
        let measured = workload(name, tree(bundle, 1, |_, _| {}), request.clone(), with, 0);
        // kwctl's Namespace label edit by a tenant, under the stock deployment.
        out.push(match name {
            STOCK_DEPLOYMENT_ZERO_CALL => measured.kwctl(27.0, 28.0),
            _ => measured,
        });
    }
    out.push(workload(
        "Namespace label UPDATE",
        tree(bundle, 1, |_, _| {}),
        request,
        settings,
        0,
    ));
    // A tenant administrator switches a module on from Administration → Modules; the same with
    // the kinds' slots dropped, for what the slot check costs on top; and under the stock
    // deployment's settings (the rule set built in).
    let module = |suffix: &str| {
        format!("CREATE of a module by its tenant admin, 100 tenants{SETTINGS_ONLY}{suffix}")
    };
    let module_tree = || {
        tree(bundle, 100, |ns, objects| {
            objects.push(release(ns, "monitoring", "Monitoring", "monitoring"))
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
        ));
    }
    // The consumed DELETE at ten times the scale.
    out.push(workload(
        "DELETE shared provider, 40000 tenants",
        consumed_tree(40_000),
        delete_root_monitoring(),
        settings,
        80_002,
    ));
    // What the audit scanner's replay of one tenant's Info release costs the policy-server: a
    // CREATE without userInfo, counted against the Info release of every tenant.
    for n in AUDIT_REPLAY_TENANTS {
        out.push(audit_replay(bundle, n));
    }
    out
}

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
        objects.push(release(ns, "info", "Info", "info"))
    });
    let request = replay_request(&release("tenant-t0", "info", "Info", "info")).expect("replay");
    Workload {
        name: audit_replay_name(tenants),
        cluster: Arc::new(cluster),
        payload: payload(&request, &builtin_settings()).expect("payload"),
        listed: tenants,
        kwctl: None,
    }
}

/// One measured workload: its cost in the model, its multiple of the floor on the same payload,
/// the guest's peak heap, and the verdict.
pub struct Row {
    pub workload: Workload,
    pub model: Modelled,
    pub floors: f64,
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
