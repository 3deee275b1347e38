//! What a stock Cozystack install writes after the API server admits a write, so that the next
//! manifest of a change set is judged against the cluster as it will be (cozystack/cozystack
//! 3c780acd):
//!
//! - an Application becomes the HelmRelease cozystack-api writes for it
//!   (`pkg/registry/apps/application/rest.go`, `convertApplicationToHelmRelease`, Create and
//!   Update), and a release reads back as the Application cozystack-api converts it to
//!   (`convertHelmReleaseToApplication`), which is the `oldObject` of an UPDATE or DELETE;
//! - a Tenant release renders what `packages/apps/tenant` renders: the tenant's Namespace with
//!   its ancestor and provider labels (`templates/namespace.yaml`), and one module release per
//!   switch that is on (`templates/{etcd,ingress,monitoring,seaweedfs,gateway,computeplane}.yaml`,
//!   `info.yaml` always); a switch turned off uninstalls its module; sub-tenants re-render when
//!   their parent's values change (their `cozystack-values` Secret is watched);
//! - a deleted Tenant takes its namespace and everything below it.
//!
//! Which of these writes are sent, in which order and by whom, and how each is judged, is
//! [`crate::sequence`]'s.

use std::collections::HashMap;

use crate::helm_controller::{FINALIZER, terminating};
use crate::state::{Objects, State};
use cozystack_policy_runtime::cluster::{ClusterObjects, object_key};
use cozystack_resolver::chart::{TENANT_KIND, TENANT_RELEASE_PREFIX, switched_on};
use cozystack_resolver::facts::{HELM_RELEASE_NAME, HELM_RELEASE_NAMESPACE};
use cozystack_resolver::model::builtin;
use cozystack_resolver::providers::ROOT_VALUE_CLASSES;
use cozystack_resolver::request::{APPS_GROUP, GROUP_LABEL, KIND_LABEL, NAME_LABEL};
use cozystack_resolver::tenant::{self, ANCESTOR_PREFIX, AncestorLabels, ROOT};
use serde_json::{Map, Value, json};

pub const RELEASE_API: &str = "helm.toolkit.fluxcd.io/v2";
pub const DEFINITION_API: &str = "cozystack.io/v1alpha1";
pub const DEFINITION_KIND: &str = "ApplicationDefinition";
/// cozystack-api's prefix for user labels and annotations carried onto the release.
const USER_PREFIX: &str = "apps.cozystack.io-";
const SHARD_LABEL: &str = "sharding.fluxcd.io/key";
const MODULE_LABEL: &str = "internal.cozystack.io/tenantmodule";
/// The classes whose provider the Tenant chart writes into a tenant's Namespace and values.
const CLASSES: &[&str] = &["etcd", "ingress", "gateway", "monitoring", "seaweedfs"];

/// How cozystack-api serves one application kind, from its ApplicationDefinition.
#[derive(Debug, Clone)]
pub struct Served {
    pub kind: String,
    pub plural: String,
    pub prefix: String,
    labels: Map<String, Value>,
    chart_ref: Value,
}

/// The kinds the cluster serves: its ApplicationDefinitions, and for a stock kind whose
/// definition is not in a dump, the stock release prefix.
#[derive(Debug, Clone, Default)]
pub struct Kinds {
    by_kind: HashMap<String, Served>,
}

/// Where `cluster` holds its ApplicationDefinitions.
pub fn definition_positions(cluster: &ClusterObjects) -> Vec<usize> {
    cluster
        .keys()
        .enumerate()
        .filter(|(_, (api, kind, _, _))| api == DEFINITION_API && kind == DEFINITION_KIND)
        .map(|(at, _)| at)
        .collect()
}

impl Kinds {
    pub fn read(cluster: &ClusterObjects) -> Kinds {
        let mut by_kind = HashMap::new();
        let definitions = definition_positions(cluster)
            .into_iter()
            .filter_map(|at| cluster.value(at));
        for definition in definitions {
            let spec = &definition["spec"];
            let Some(kind) = spec["application"]["kind"].as_str() else {
                continue;
            };
            let plural = spec["application"]["plural"]
                .as_str()
                .map_or_else(|| format!("{}s", kind.to_lowercase()), str::to_owned);
            by_kind.insert(
                kind.to_owned(),
                Served {
                    kind: kind.to_owned(),
                    plural,
                    prefix: spec["release"]["prefix"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    labels: spec["release"]["labels"]
                        .as_object()
                        .cloned()
                        .unwrap_or_default(),
                    chart_ref: spec["release"]["chartRef"].clone(),
                },
            );
        }
        Kinds { by_kind }
    }

    /// How `kind` is served; `None` when neither a definition nor the stock set knows it (the
    /// API server would answer 404 for it).
    pub fn get(&self, kind: &str) -> Option<Served> {
        if let Some(served) = self.by_kind.get(kind) {
            return Some(served.clone());
        }
        let prefix = builtin::release_prefix(kind)?;
        let lower = kind.to_lowercase();
        Some(Served {
            kind: kind.to_owned(),
            plural: format!("{lower}s"),
            prefix: prefix.to_owned(),
            labels: Map::from_iter([(SHARD_LABEL.to_owned(), json!("tenants"))]),
            chart_ref: json!({"kind": "ExternalArtifact", "namespace": "cozy-system",
                "name": format!("cozystack-{lower}-application-default-{lower}")}),
        })
    }
}

pub(crate) fn str_of<'v>(value: &'v Value, pointer: &str) -> &'v str {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `metadata.<map>[key]` of an object (`map` is `labels` or `annotations`), empty when absent.
fn metadata_entry<'v>(object: &'v Value, map: &str, key: &str) -> &'v str {
    object["metadata"][map][key].as_str().unwrap_or_default()
}

/// `m` with every key given `prefix` (cozystack-api's `addPrefixedMap`).
fn prefixed(m: &Value) -> Map<String, Value> {
    m.as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (format!("{USER_PREFIX}{k}"), v.clone()))
        .collect()
}

/// The keys of `m` that carry `prefix`, without it (`filterPrefixedMap`).
fn unprefixed(m: &Value) -> Map<String, Value> {
    m.as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.strip_prefix(USER_PREFIX)?.to_owned(), v.clone())))
        .collect()
}

impl Served {
    /// The name of app `name`'s release: `<prefix><name>`.
    pub fn release_name(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// The release of application `name` in `namespace`, if the cluster has it: cozystack-api
    /// finds it by name and requires its kind and group labels.
    pub fn release(&self, cluster: &State, namespace: &str, name: &str) -> Option<Value> {
        let release = self.release_name(name);
        cluster
            .get(RELEASE_API, "HelmRelease", &release, Some(namespace))
            .filter(|hr| {
                metadata_entry(hr, "labels", KIND_LABEL) == self.kind
                    && metadata_entry(hr, "labels", GROUP_LABEL) == APPS_GROUP
            })
    }

    /// The Application cozystack-api reads a release as (`convertHelmReleaseToApplication`).
    pub fn application_of(&self, release: &Value, api_version: &str) -> Value {
        let meta = &release["metadata"];
        let name = str_of(release, "/metadata/name");
        let mut metadata = json!({
            "name": name.strip_prefix(self.prefix.as_str()).unwrap_or(name),
            "namespace": meta["namespace"],
        });
        for key in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "deletionTimestamp",
        ] {
            if let Some(v) = meta.get(key) {
                metadata[key] = v.clone();
            }
        }
        let labels = unprefixed(&meta["labels"]);
        if !labels.is_empty() {
            metadata["labels"] = Value::Object(labels);
        }
        let annotations = unprefixed(&meta["annotations"]);
        if !annotations.is_empty() {
            metadata["annotations"] = Value::Object(annotations);
        }
        // Values keys starting with `_` are the platform's (`filterInternalKeys`).
        let spec: Map<String, Value> = release["spec"]["values"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| !k.starts_with('_'))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        json!({"apiVersion": api_version, "kind": self.kind, "metadata": metadata, "spec": spec})
    }

    /// The release cozystack-api writes for `app`; `live` is the release it replaces (Update
    /// keeps its shard label, which flux-shard-operator rewrote).
    pub fn release_for(&self, app: &Value, live: Option<&Value>) -> Value {
        let name = str_of(app, "/metadata/name");
        let mut labels = self.labels.clone();
        labels.extend(prefixed(&app["metadata"]["labels"]));
        labels.insert(KIND_LABEL.into(), json!(self.kind));
        labels.insert(GROUP_LABEL.into(), json!(APPS_GROUP));
        labels.insert(NAME_LABEL.into(), json!(name));
        if let Some(shard) = live.and_then(|hr| hr["metadata"]["labels"].get(SHARD_LABEL)) {
            labels.insert(SHARD_LABEL.into(), shard.clone());
        }
        let mut metadata = json!({"name": self.release_name(name),
            "namespace": app["metadata"]["namespace"], "labels": labels});
        let annotations = prefixed(&app["metadata"]["annotations"]);
        if !annotations.is_empty() {
            metadata["annotations"] = Value::Object(annotations);
        }
        for key in ["uid", "creationTimestamp"] {
            if let Some(v) = live.and_then(|hr| hr["metadata"].get(key)) {
                metadata[key] = v.clone();
            }
        }
        let strategy = json!({"name": "RetryOnFailure", "retryInterval": "30s"});
        json!({"apiVersion": RELEASE_API, "kind": "HelmRelease", "metadata": metadata,
            "spec": {"chartRef": self.chart_ref, "interval": "5m", "maxHistory": 5,
                "install": {"timeout": "10m", "strategy": strategy},
                "upgrade": {"timeout": "10m", "strategy": strategy},
                "valuesFrom": [{"kind": "Secret", "name": "cozystack-values"}],
                "values": app.get("spec").cloned().unwrap_or(json!({}))}})
    }
}

/// Whether `release` is a Tenant's (cozystack-api's or the root's from cozystack-basics).
pub fn is_tenant_release(release: &Value) -> bool {
    release["apiVersion"] == RELEASE_API
        && release["kind"] == "HelmRelease"
        && metadata_entry(release, "labels", KIND_LABEL) == TENANT_KIND
}

/// The tenant namespace a Tenant release renders, by the chart's `tenant.name`.
pub fn tenant_namespace_of(release: &Value) -> Option<String> {
    let parent = str_of(release, "/metadata/namespace");
    let name = str_of(release, "/metadata/name").strip_prefix(TENANT_RELEASE_PREFIX)?;
    tenant::tenant_namespace(parent, name)
}

fn label(cluster: &dyn Objects, namespace: &str, key: &str) -> Option<String> {
    let namespace = cluster.object(&object_key("v1", "Namespace", namespace, None))?;
    namespace["metadata"]["labels"][key]
        .as_str()
        .map(str::to_owned)
}

/// `_namespace.<key>` of `parent`'s `cozystack-values`, which a child's chart reads: what the
/// parent's Namespace carries, and for tenant-root what cozystack-basics writes (itself for
/// every class it always provides; its gateway and host as its Namespace states them).
fn parent_value(cluster: &dyn Objects, parent: &str, key: &str) -> String {
    if parent == ROOT && ROOT_VALUE_CLASSES.contains(&key) {
        return ROOT.to_owned();
    }
    label(cluster, parent, &format!("namespace.cozystack.io/{key}")).unwrap_or_default()
}

/// A module the Tenant chart renders: its switch key in the Tenant's values, and its kind.
#[derive(Debug, Clone)]
pub struct Module {
    pub key: String,
    pub kind: String,
}

/// What the cluster's Tenant chart renders that differs by settings and release: its module
/// switches (values key → kind, `tenantModules`) and the ancestor labels it writes.
#[derive(Clone)]
pub struct TenantChart {
    /// Each module the release's chart renders.
    pub modules: Vec<Module>,
    pub ancestors: AncestorLabels,
}

impl TenantChart {
    /// The chart of the release the settings name (main's when they name none): a module of a
    /// kind the release serves no definition of is not in its chart (ComputePlane before main).
    pub fn of(settings: &cozystack_resolver::Settings) -> TenantChart {
        let release = settings.judged();
        TenantChart {
            ancestors: release.chart_writes(),
            modules: settings
                .tenant_modules
                .iter()
                .filter(|(_, kind)| release.serves(kind))
                .map(|(key, kind)| Module {
                    key: key.to_owned(),
                    kind: kind.to_owned(),
                })
                .collect(),
        }
    }
}

/// Renders what Tenant release `release` renders, over what it rendered before, then what its
/// sub-tenants render under the values it passes down ([`render_subtenants`]).
pub fn render_tenant(cluster: &mut dyn Objects, release: &Value, chart: &TenantChart) {
    let Some(child) = tenant_namespace_of(release) else {
        return;
    };
    let parent = str_of(release, "/metadata/namespace").to_owned();
    let owner = str_of(release, "/metadata/name").to_owned();
    let values = release["spec"].get("values");
    if child != ROOT {
        render_namespace(cluster, &child, &parent, &owner, values, chart.ancestors);
    }
    let switches = chart
        .modules
        .iter()
        .map(|m| (m.key.as_str(), m.kind.as_str(), switched_on(values, &m.key)))
        .chain([("info", "Info", true)]);
    for (key, kind, on) in switches {
        let ours = |hr: &Value| {
            metadata_entry(hr, "annotations", HELM_RELEASE_NAME) == owner
                && metadata_entry(hr, "annotations", HELM_RELEASE_NAMESPACE) == parent
        };
        let existing = cluster.object(&object_key(RELEASE_API, "HelmRelease", key, Some(&child)));
        match (on, existing) {
            // helm-controller v1.5.0 adopts what holds the name (TakeOwnership).
            (true, existing) => {
                let module = module_release(&child, &parent, &owner, key, kind, existing.as_ref());
                cluster.put(module);
            }
            (false, Some(hr)) if ours(&hr) => cluster.remove(&hr),
            (false, _) => {}
        }
    }
    render_subtenants(cluster, &child, chart);
}

/// Sub-tenants read their parent's values through their cozystack-values: each Tenant release
/// in `namespace` is rendered again, but one being uninstalled, whose own sub-tenants still are
/// (helm-controller reconciles each release on its own).
fn render_subtenants(cluster: &mut dyn Objects, namespace: &str, chart: &TenantChart) {
    let subtenants: Vec<Value> = cluster
        .in_namespace(namespace)
        .into_iter()
        .filter(is_tenant_release)
        .collect();
    for sub in subtenants {
        match tenant_namespace_of(&sub).filter(|ns| ns != namespace) {
            Some(below) if terminating(&sub) => render_subtenants(cluster, &below, chart),
            Some(_) => render_tenant(cluster, &sub, chart),
            None => {}
        }
    }
}

/// The tenant's Namespace as `templates/namespace.yaml` writes it, over the live one (labels
/// others wrote stay; the chart's own are rewritten). flux-shard-operator's placement
/// reconciler stamps a new one's `internal.cozystack.io/flux-shard` later, by its own choice
/// (`internal/fluxshardoperator/controller.go`): no rule reads it, and it is not guessed.
fn render_namespace(
    cluster: &mut dyn Objects,
    child: &str,
    parent: &str,
    owner: &str,
    values: Option<&Value>,
    ancestors: AncestorLabels,
) {
    let live = cluster.object(&object_key("v1", "Namespace", child, None));
    let mut labels: Map<String, Value> = live
        .as_ref()
        .and_then(|ns| ns["metadata"]["labels"].as_object().cloned())
        .unwrap_or_default();
    labels.insert("kubernetes.io/metadata.name".into(), json!(child));
    for ancestor in tenant::chart_labels(child, ancestors).unwrap_or_default() {
        labels.insert(format!("{ANCESTOR_PREFIX}{ancestor}"), json!(""));
    }
    for class in CLASSES {
        let provider = if switched_on(values, class) {
            child.to_owned()
        } else {
            parent_value(cluster, parent, class)
        };
        labels.insert(format!("namespace.cozystack.io/{class}"), json!(provider));
    }
    let word = child.rsplit('-').next().unwrap_or_default();
    let host = match values
        .and_then(|v| v["host"].as_str())
        .filter(|h| !h.is_empty())
    {
        Some(host) => host.to_owned(),
        None => match parent_value(cluster, parent, "host") {
            parent_host if parent_host.is_empty() => String::new(),
            parent_host => format!("{word}.{parent_host}"),
        },
    };
    labels.insert("namespace.cozystack.io/host".into(), json!(host));
    let scheduling =
        label(cluster, parent, "scheduler.cozystack.io/scheduling-class").or_else(|| {
            values
                .and_then(|v| v["schedulingClass"].as_str())
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        });
    if let Some(class) = scheduling {
        labels.insert(
            "scheduler.cozystack.io/scheduling-class".into(),
            json!(class),
        );
    }
    labels.insert(
        "alpha.kubevirt.io/auto-memory-limits-ratio".into(),
        json!("1.0"),
    );
    labels.insert("app.kubernetes.io/managed-by".into(), json!("Helm"));
    labels.insert("helm.toolkit.fluxcd.io/name".into(), json!(owner));
    labels.insert("helm.toolkit.fluxcd.io/namespace".into(), json!(parent));
    let mut namespace = live.unwrap_or_else(|| json!({"apiVersion": "v1", "kind": "Namespace"}));
    let owner_uid = cluster
        .object(&object_key("v1", "Namespace", parent, None))
        .map(|ns| ns["metadata"]["uid"].clone())
        .unwrap_or(Value::Null);
    let meta = &mut namespace["metadata"];
    meta["name"] = json!(child);
    meta["labels"] = Value::Object(labels);
    meta["annotations"][HELM_RELEASE_NAME] = json!(owner);
    meta["annotations"][HELM_RELEASE_NAMESPACE] = json!(parent);
    meta["ownerReferences"] = json!([{"apiVersion": "v1", "blockOwnerDeletion": true,
        "controller": true, "kind": "Namespace", "name": parent, "uid": owner_uid}]);
    cluster.put(namespace);
}

/// A module release as the Tenant chart renders it (labels of `templates/<key>.yaml`, with
/// helm-controller's origin labels and Helm's ownership annotations), over the object it
/// adopts: Helm applies the chart's labels and chart over it and keeps the rest.
fn module_release(
    child: &str,
    parent: &str,
    owner: &str,
    key: &str,
    kind: &str,
    adopted: Option<&Value>,
) -> Value {
    let mut release = adopted.cloned().unwrap_or_else(|| {
        json!({"apiVersion": RELEASE_API, "kind": "HelmRelease",
            "metadata": {"name": key, "namespace": child},
            "spec": {"interval": "5m", "timeout": "10m",
                "valuesFrom": [{"kind": "Secret", "name": "cozystack-values"}]}})
    });
    let shard = release["metadata"]["labels"]
        .get(SHARD_LABEL)
        .cloned()
        .unwrap_or(json!("tenants"));
    let meta = &mut release["metadata"];
    meta["labels"] = json!({SHARD_LABEL: shard, MODULE_LABEL: "true",
        "app.kubernetes.io/instance": owner, "app.kubernetes.io/managed-by": "Helm",
        KIND_LABEL: kind, GROUP_LABEL: APPS_GROUP, NAME_LABEL: key,
        "helm.toolkit.fluxcd.io/name": owner, "helm.toolkit.fluxcd.io/namespace": parent});
    meta["annotations"][HELM_RELEASE_NAME] = json!(owner);
    meta["annotations"][HELM_RELEASE_NAMESPACE] = json!(parent);
    // helm-controller reconciles every HelmRelease the chart renders, its finalizer first; a
    // release being uninstalled stays so (nothing clears a deletionTimestamp).
    meta["finalizers"] = json!([FINALIZER]);
    // Each template names its module's artifact: the `default` variant, but ComputePlane's,
    // which is `kubevirt` (`templates/computeplane.yaml`).
    let variant = if key == "computeplane" {
        "kubevirt"
    } else {
        "default"
    };
    release["spec"]["chartRef"] = json!({"kind": "ExternalArtifact", "namespace": "cozy-system",
        "name": format!("cozystack-{key}-application-{variant}-{key}")});
    release
}

/// Removes namespace `namespace`, everything in it, and every tenant namespace below it (their
/// ownerReferences name their parent Namespace, so the garbage collector takes them).
pub fn remove_namespace(cluster: &mut State, namespace: &str) {
    let below = |name: &str| {
        name == namespace
            || tenant::chain_from_name(name)
                .is_some_and(|chain| chain.iter().any(|t| t == namespace))
    };
    cluster.retain(|(api_version, kind, ns, name)| {
        if !ns.is_empty() {
            return !below(ns);
        }
        !(api_version == "v1" && kind == "Namespace" && below(name))
    });
}

/// Removes a release; a Tenant's takes its tenant namespace with it (Helm uninstalls the
/// Namespace the chart rendered, after the cleanup Job deleted its releases).
pub fn remove_release(cluster: &mut State, release: &Value) {
    cluster.remove(release);
    if is_tenant_release(release)
        && let Some(child) = tenant_namespace_of(release).filter(|c| c != ROOT)
    {
        remove_namespace(cluster, &child);
    }
}
