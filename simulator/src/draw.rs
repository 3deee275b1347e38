//! Drawing: the next action of a lifecycle, chosen from the state by a seeded stream (who acts,
//! on what; the rarer platform events on streams of their own, so that a seed keeps its draws).

use crate::*;
use cozystack_platform::writes::RELEASE_API;
use cozystack_policy_runtime::cluster::ClusterObjects;
use rand::RngExt;
use rand_pcg::Pcg64;
use serde_json::{Value, json};
use statement::Role;
use world::{Action, Actor, Chain, Stray};

/// Kinds an actor creates, module kinds among them (the policy decides who may).
pub(crate) const KINDS: &[&str] = &[
    "Postgres",
    "Redis",
    "Bucket",
    "Kubernetes",
    "Harbor",
    "ExternalDNS",
    "Monitoring",
    "Etcd",
    "Ingress",
    "SeaweedFS",
    "Info",
    "ComputePlane",
    "Gateway",
    "BootBox",
];

/// The catalog kinds, each released under its own prefix: what a GitOps repository applies.
pub(crate) const CATALOG: &[&str] = &["Postgres", "Redis", "Bucket", "Kubernetes", "Harbor"];

/// The kinds whose HelmReleases a GitOps repository holds, in the simulator's draws.
pub(crate) const STRAY_KINDS: &[&str] =
    &["Postgres", "Redis", "Bucket", "Kubernetes", "ExternalDNS"];

/// One step in this many is preceded by a user's label of a Namespace.
pub(crate) const LABEL_ODDS: u32 = 30;

/// Mixed into a run's seed for the stream labels are drawn from.
pub(crate) const LABEL_STREAM: u64 = 0x6c61_6265_6c73;

/// One step in this many is preceded by helm-controller finishing an uninstall under way.
pub(crate) const FINISH_ODDS: u32 = 4;

/// Mixed into a run's seed for the stream of those.
pub(crate) const FINISH_STREAM: u64 = 0x6669_6e69_7368;

/// One step in this many is preceded by a platform write its release never renders.
pub(crate) const STRAY_ODDS: u32 = 20;

/// Mixed into a run's seed for the stream of those writes.
pub(crate) const STRAY_STREAM: u64 = 0x7374_7261_7973;

/// The Namespace labels a user sets or removes: the platform's (the ancestor chain, the chart's
/// provider labels, a capability label) and others.
pub(crate) const LABELS: &[&str] = &[
    "tenant.cozystack.io/tenant-root",
    "tenant.cozystack.io/tenant-acme",
    "namespace.cozystack.io/monitoring",
    "namespace.cozystack.io/etcd",
    "namespace.cozystack.io/capability.monitoring",
    "namespace.cozystack.io/host",
    "team",
];

/// Names tried: slots, names the charts render, and others.
pub(crate) const NAMES: &[&str] = &[
    "monitoring",
    "etcd",
    "ingress",
    "seaweedfs",
    "info",
    "db",
    "cache",
    "metrics",
    "dev",
    "monitoring-system",
    "bootbox",
    "computeplane",
    "gateway",
    "seaweedfs-db",
    "computeplane-cluster",
];

/// Tenant names: `super` binds, below tenant-root, its parent's super-admin group.
pub(crate) const TENANT_NAMES: &[&str] = &["a", "b", "dev", "qa", "super"];

/// The Tenant chart's switches (`packages/apps/tenant/values.yaml`).
pub(crate) const SWITCHES: &[&str] = &[
    "monitoring",
    "etcd",
    "ingress",
    "seaweedfs",
    "gateway",
    "computeplane",
];

/// The deepest tenant the simulator makes (tenant-root is depth 0).
pub(crate) const DEPTH: usize = 3;

/// A tenant namespace's depth below tenant-root.
pub(crate) fn depth(namespace: &str) -> usize {
    namespace.strip_prefix("tenant-").map_or(0, |rest| {
        if rest == "root" {
            0
        } else {
            rest.split('-').count()
        }
    })
}

pub(crate) fn pick<'a, T>(rng: &mut Pcg64, items: &'a [T]) -> Option<&'a T> {
    (!items.is_empty()).then(|| &items[rng.random_range(0..items.len())])
}

/// Someone holding a role in `ns`, mostly its administrators; now and then one of an
/// ancestor's, or of another tenant's (`namespaces`).
pub(crate) fn actor(rng: &mut Pcg64, ns: &str, namespaces: &[String]) -> Actor {
    let role = match rng.random_range(0..20) {
        0..=2 => Role::Account,
        3 | 4 => Role::SuperAdmin,
        5..=7 => Role::Use,
        8 => Role::View,
        _ => Role::Admin,
    };
    let chain = statement::chain(ns);
    let of = match rng.random_range(0..10) {
        0 | 1 => pick(rng, &chain).cloned(),
        2 => pick(rng, namespaces).cloned(),
        _ => None,
    };
    Actor::new(role, &of.unwrap_or_else(|| ns.to_owned()))
}

/// The tenant Namespaces of `cluster`, sorted.
pub(crate) fn tenant_namespaces(cluster: &ClusterObjects) -> Vec<String> {
    let mut namespaces: Vec<String> = cluster
        .keys()
        .filter(|(api, kind, _, name)| {
            api == "v1" && kind == "Namespace" && name.starts_with("tenant-")
        })
        .map(|(_, _, _, name)| name.clone())
        .collect();
    namespaces.sort();
    namespaces
}

/// A user labels a tenant Namespace: a label the platform writes, or one of their own, set to
/// a tenant's name or removed.
pub(crate) fn draw_label(rng: &mut Pcg64, cluster: &ClusterObjects) -> Action {
    let namespaces = tenant_namespaces(cluster);
    let namespace = pick(rng, &namespaces)
        .cloned()
        .unwrap_or_else(|| "tenant-root".to_owned());
    let key = pick(rng, LABELS).copied().unwrap_or("team");
    let value = match rng.random_range(0..4) {
        0 => None,
        _ => pick(rng, &namespaces).cloned(),
    };
    Action::Label {
        by: actor(rng, &namespace, &namespaces),
        namespace,
        key: key.to_owned(),
        value,
    }
}

/// helm-controller finishing one of the uninstalls under way, if any.
pub(crate) fn draw_finish(rng: &mut Pcg64, cluster: &ClusterObjects) -> Option<Action> {
    let terminating: Vec<(String, String)> = cluster
        .keys()
        .enumerate()
        .filter(|(_, (api, kind, _, _))| api == RELEASE_API && kind == "HelmRelease")
        .filter_map(|(at, _)| cluster.value(at))
        .filter(cozystack_platform::helm_controller::terminating)
        .map(|hr| {
            let meta = &hr["metadata"];
            (
                meta["namespace"].as_str().unwrap_or_default().to_owned(),
                meta["name"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let (namespace, name) = pick(rng, &terminating)?.clone();
    Some(Action::Finish { namespace, name })
}

/// A platform write its release never renders: a tenant Namespace relabelled by
/// helm-controller (another release's chain, a provider label up the tree or sideways), or an
/// app HelmRelease applied by Flux from a repository.
pub(crate) fn draw_stray(rng: &mut Pcg64, cluster: &ClusterObjects) -> Action {
    let namespaces = tenant_namespaces(cluster);
    if rng.random_range(0..3) == 0 {
        // ExternalDNS's prefix is "": any name it takes is its release, one Cozystack may render.
        return Action::Stray(Stray::Release {
            kind: pick(rng, STRAY_KINDS)
                .copied()
                .unwrap_or("Postgres")
                .to_owned(),
            namespace: pick(rng, &namespaces)
                .cloned()
                .unwrap_or_else(|| "tenant-root".to_owned()),
            name: pick(rng, NAMES).copied().unwrap_or("db").to_owned(),
        });
    }
    let below: Vec<String> = namespaces
        .iter()
        .filter(|ns| *ns != "tenant-root")
        .cloned()
        .collect();
    let namespace = pick(rng, &below)
        .cloned()
        .unwrap_or_else(|| "tenant-root".to_owned());
    let chain = match rng.random_range(0..3) {
        0 => Some(Chain::Full),
        1 => Some(Chain::Short),
        _ => None,
    };
    let class = pick(rng, &statement::CHART_PROVIDERS)
        .copied()
        .unwrap_or("monitoring");
    let up = statement::chain(&namespace);
    let to = match rng.random_range(0..3) {
        0 if chain.is_some() => None,
        1 => pick(rng, &namespaces).cloned(),
        _ => pick(rng, &up).cloned(),
    };
    Action::Stray(Stray::Namespace {
        namespace,
        chain,
        provider: to.map(|to| (class.to_owned(), to)),
    })
}

/// An action drawn for the state: who acts on what is there, or could be.
pub(crate) fn draw(rng: &mut Pcg64, cluster: &ClusterObjects) -> Action {
    let mut tenants = Vec::new();
    let namespaces = tenant_namespaces(cluster);
    let mut apps: Vec<(String, String)> = cluster
        .keys()
        .filter(|(api, kind, _, _)| api == RELEASE_API && kind == "HelmRelease")
        .map(|(_, _, namespace, name)| (namespace.clone(), name.clone()))
        .collect();
    apps.sort();
    let apps: Vec<(String, String, String)> = apps
        .into_iter()
        .filter_map(|(ns, name)| {
            let object = cluster.get(RELEASE_API, "HelmRelease", &name, Some(&ns))?;
            let labels = &object["metadata"]["labels"];
            let kind = labels["apps.cozystack.io/application.kind"]
                .as_str()?
                .to_owned();
            let app = labels["apps.cozystack.io/application.name"]
                .as_str()?
                .to_owned();
            Some((ns, kind, app))
        })
        .collect();
    for (ns, kind, name) in &apps {
        if kind == "Tenant" {
            tenants.push((ns.clone(), name.clone()));
        }
    }
    let actor = |rng: &mut Pcg64, ns: &str| actor(rng, ns, &namespaces);
    let admin = |rng: &mut Pcg64, ns: &str| {
        let role = match rng.random_range(0..10) {
            0 | 1 => Role::Account,
            2 => Role::SuperAdmin,
            _ => Role::Admin,
        };
        Actor::new(role, ns)
    };
    let root = "tenant-root".to_owned();
    let namespace = pick(rng, &namespaces).cloned().unwrap_or(root);
    let create = |rng: &mut Pcg64, namespace: &str| {
        let kind = pick(rng, KINDS).copied().unwrap_or("Postgres");
        let name = pick(rng, NAMES).copied().unwrap_or("db");
        Action::Create {
            by: actor(rng, namespace),
            kind: kind.into(),
            namespace: namespace.to_owned(),
            name: name.into(),
            spec: json!({}),
        }
    };
    match rng.random_range(0..29) {
        // Someone in tenant-root tries to delete the root Tenant.
        28 => Action::Delete {
            by: actor(rng, "tenant-root"),
            kind: "Tenant".into(),
            namespace: "tenant-root".into(),
            name: "root".into(),
        },
        // A user changes an app's values.
        22 | 23 if !apps.is_empty() => {
            let (ns, kind, name) = pick(rng, &apps).cloned().unwrap_or_default();
            if kind == "Tenant" {
                return create(rng, &ns);
            }
            Action::Edit {
                by: actor(rng, &ns),
                kind,
                namespace: ns,
                name,
                key: "replicas".into(),
                value: json!(rng.random_range(1..4)),
            }
        }
        // A user writes an app's HelmRelease directly.
        24 => match pick(rng, &apps).cloned() {
            Some((ns, kind, name)) if rng.random_range(0..2) == 0 => Action::Release {
                by: actor(rng, &ns),
                kind,
                namespace: ns,
                name,
                delete: true,
            },
            _ => Action::Release {
                by: actor(rng, &namespace),
                kind: pick(rng, KINDS).copied().unwrap_or("Postgres").into(),
                namespace: namespace.clone(),
                name: pick(rng, NAMES).copied().unwrap_or("db").into(),
                delete: false,
            },
        },
        // Two creates of one kind in one namespace at once.
        25 | 26 => {
            let first = create(rng, &namespace);
            let mut second = create(rng, &namespace);
            if let (Action::Create { kind, .. }, Action::Create { kind: other, .. }) =
                (&first, &mut second)
            {
                other.clone_from(kind);
            }
            Action::Race {
                first: Box::new(first),
                second: Box::new(second),
            }
        }
        // A GitOps Kustomization: catalog apps applied where their tenants are, one pruned.
        20 | 21 => {
            let mut applies = Vec::new();
            for _ in 0..rng.random_range(1..4) {
                let namespace = pick(rng, &namespaces)
                    .cloned()
                    .unwrap_or_else(|| "tenant-root".to_owned());
                let kind = pick(rng, CATALOG).copied().unwrap_or("Postgres");
                let name = pick(rng, &["db", "cache", "www", "dev"])
                    .copied()
                    .unwrap_or("db");
                let app = world::app_object(kind, &namespace, name, &json!({}));
                // kustomize refuses an object twice in one build.
                if !applies.contains(&app) {
                    applies.push(app);
                }
            }
            // What the Kustomization applied once and drops: a catalog app, or a module it
            // applied before a Tenant switch rendered it (its release then stays terminating
            // while helm-controller uninstalls it, the switch still on: slow teardown).
            let prunes = pick(rng, &apps)
                .filter(|(_, kind, _)| kind != "Tenant")
                .map(|(ns, kind, name)| {
                    json!({"apiVersion": "apps.cozystack.io/v1alpha1",
                    "kind": kind, "metadata": {"name": name, "namespace": ns}})
                })
                .into_iter()
                .collect();
            Action::Flux { applies, prunes }
        }
        0..=6 => create(rng, &namespace),
        7..=9 if depth(&namespace) < DEPTH => {
            let name = pick(rng, TENANT_NAMES).copied().unwrap_or("a");
            let mut spec = serde_json::Map::new();
            for key in SWITCHES {
                if rng.random_range(0..4) == 0 {
                    spec.insert((*key).into(), json!(true));
                }
            }
            Action::Create {
                by: admin(rng, &namespace),
                kind: "Tenant".into(),
                namespace,
                name: name.into(),
                spec: Value::Object(spec),
            }
        }
        10..=14 if !tenants.is_empty() => {
            let (ns, name) = pick(rng, &tenants).cloned().unwrap_or_default();
            let key = pick(rng, SWITCHES).copied().unwrap_or("etcd");
            Action::Switch {
                by: admin(rng, &ns),
                namespace: ns,
                name,
                key: key.into(),
                on: rng.random_range(0..2) == 0,
            }
        }
        16 if !tenants.is_empty() => {
            let (namespace, name) = pick(rng, &tenants).cloned().unwrap_or_default();
            Action::Reconcile { namespace, name }
        }
        15 => {
            let kind = pick(rng, KINDS).copied().unwrap_or("Monitoring");
            let name = pick(rng, NAMES).copied().unwrap_or("metrics");
            Action::Leftover {
                kind: kind.into(),
                namespace,
                name: name.into(),
            }
        }
        // Any app, the root Tenant too: its administrators may try; the root Tenant must stay.
        _ => match pick(rng, &apps).cloned() {
            Some((ns, kind, name)) => Action::Delete {
                by: actor(rng, &ns),
                kind,
                namespace: ns,
                name,
            },
            _ => Action::Create {
                by: admin(rng, &namespace),
                kind: "Postgres".into(),
                namespace,
                name: "db".into(),
                spec: json!({}),
            },
        },
    }
}
