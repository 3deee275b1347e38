//! Cases for the JavaScript parity test: for every scenario, the request and facts the
//! dashboard API receives and the verdict the wasm policy returned for the same request.
//! The facts are read through the policy's own host-call decoders, so both sides see the same.

use std::collections::BTreeSet;
use std::sync::Mutex;

use cozystack_capabilities_policy::cluster::HostCluster;
use cozystack_resolver::facts::{HELM_RELEASE_NAME, HELM_RELEASE_NAMESPACE};
use cozystack_resolver::{Cluster, Instance, InstanceRef, Snapshot};
use serde_json::{Value, json};

use crate::native::NativeHost;
use crate::scenario::{self, Bundle, Scenario};
use cozystack_policy_runtime::policy::Policy;

/// Every namespace with all its labels: what the `metadata.name`/`metadata.labels` masks keep.
fn namespaces(
    cluster: &cozystack_policy_runtime::cluster::ClusterObjects,
) -> Vec<cozystack_resolver::Namespace> {
    cluster
        .values()
        .filter(|o| o["apiVersion"] == "v1" && o["kind"] == "Namespace")
        .map(|o| cozystack_resolver::Namespace {
            name: o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            labels: cozystack_policy_runtime::cluster::labels_of(&o),
        })
        .collect()
}

/// A listed instance as the dashboard holds it, with the Helm release that rendered it.
fn instance(
    cluster: &cozystack_policy_runtime::cluster::ClusterObjects,
    listed: InstanceRef,
) -> Instance {
    let release = cluster.get(
        "helm.toolkit.fluxcd.io/v2",
        "HelmRelease",
        listed.release,
        Some(listed.namespace),
    );
    let annotation = |key: &str| {
        release
            .as_ref()
            .and_then(|r| r.pointer("/metadata/annotations"))
            .and_then(|a| a.get(key))
            .and_then(Value::as_str)
    };
    let rendered_by = annotation(HELM_RELEASE_NAMESPACE)
        .zip(annotation(HELM_RELEASE_NAME))
        .map(|(namespace, name)| format!("{namespace}/{name}"));
    // A Tenant's values hold its module switches: the policy reads them to tell what its chart renders.
    let values = match listed.kind {
        "Tenant" => release
            .as_ref()
            .and_then(|r| r.pointer("/spec/values"))
            .cloned()
            .unwrap_or_default(),
        _ => Value::Null,
    };
    Instance {
        rendered_by,
        values,
        ..Instance::from(listed)
    }
}

/// One case, or `None` for scenarios the API cannot express (malformed input, invalid
/// settings, failed lookups: the dashboard has the facts, it does not look them up).
pub fn case(
    policy: &Policy,
    bundle: &Bundle,
    scenario: &Scenario,
) -> Result<Option<Value>, String> {
    let outcome = scenario::run(policy, bundle, scenario)?;
    let prepared = &outcome.prepared;
    let Some(evaluation) = &outcome.evaluation else {
        return Ok(None);
    };
    let response = &evaluation.response;
    if !scenario.host_failures.is_empty() || response["code"] == 500 || response["code"] == 400 {
        return Ok(None);
    }
    let payload: Value = serde_json::from_slice(&prepared.payload).map_err(|e| e.to_string())?;
    let raw = serde_json::value::to_raw_value(&payload["request"]).map_err(|e| e.to_string())?;
    let Ok(settings) = cozystack_resolver::Settings::from_json(&prepared.settings.to_string())
    else {
        return Ok(None);
    };
    let Ok(request) = cozystack_capabilities_policy::admission::decode(raw.get(), &settings) else {
        return Ok(None);
    };
    let host = NativeHost(Mutex::new(policy.host_state(
        prepared.cluster.clone(),
        vec![],
        None,
    )));
    let cluster = HostCluster::new(&host);
    let definitions = cluster.definitions().map_err(|e| e.to_string())?.all();
    let settings: cozystack_resolver::Settings =
        serde_json::from_value(prepared.settings.clone()).map_err(|e| e.to_string())?;
    let kinds: BTreeSet<String> = definitions
        .iter()
        .map(|d| d.kind.clone())
        .chain(settings.definitions.kinds().map(str::to_owned))
        .collect();
    let mut instances = Vec::new();
    for kind in &kinds {
        let prefix = definitions
            .iter()
            .find(|d| &d.kind == kind)
            .and_then(|d| d.release_prefix.as_deref());
        let list = cluster.instances(kind, prefix).map_err(|e| e.to_string())?;
        instances.extend(list.iter().map(|i| instance(&prepared.cluster, i)));
    }
    let facts = Snapshot {
        definitions,
        namespaces: namespaces(&prepared.cluster),
        instances,
    };
    Ok(Some(json!({
        "name": scenario.name,
        "request": request,
        "facts": facts,
        "settings": prepared.settings,
        "expected": {
            "allowed": response["accepted"],
            "code": response["code"],
            "message": response["message"],
            "warnings": response["warnings"].as_array().cloned().unwrap_or_default(),
            "rule": cozystack_policy_runtime::policy::rule_of(response),
            "warnedBy": cozystack_policy_runtime::policy::warned_by(response),
            "waivedBy": cozystack_policy_runtime::policy::waived_by(response),
        },
    })))
}

/// The cases of every scenario, and the bundled cluster for the example page.
pub fn export(policy: &Policy, bundle: &Bundle, scenarios: &[Scenario]) -> Result<Value, String> {
    let mut cases = Vec::new();
    for s in scenarios {
        if let Some(case) = case(policy, bundle, s)? {
            cases.push(case);
        }
    }
    Ok(Value::Array(cases))
}

/// The bundled cluster as the example page reads it: definitions, namespaces, instances,
/// settings and a few users to choose from.
pub fn example_cluster(policy: &Policy, bundle: &Bundle) -> Result<Value, String> {
    let host = NativeHost(Mutex::new(policy.host_state(
        std::sync::Arc::new(bundle.cluster.clone()),
        vec![],
        None,
    )));
    let cluster = HostCluster::new(&host);
    let mut definitions = cluster.definitions().map_err(|e| e.to_string())?.all();
    // The dashboard has the whole definitions: the plural is what RBAC is asked about.
    for d in &mut definitions {
        d.plural = bundle
            .cluster
            .values()
            .find(|o| o.pointer("/spec/application/kind").and_then(Value::as_str) == Some(&d.kind))
            .and_then(|o| {
                o.pointer("/spec/application/plural")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            });
    }
    let mut instances = Vec::new();
    for d in &definitions {
        let list = cluster
            .instances(&d.kind, d.release_prefix.as_deref())
            .map_err(|e| e.to_string())?;
        instances.extend(list.iter().map(|i| instance(&bundle.cluster, i)));
    }
    let namespaces: Vec<_> = namespaces(&bundle.cluster)
        .into_iter()
        .filter(|n| n.name.starts_with("tenant-"))
        .collect();
    Ok(json!({
        "definitions": definitions,
        "namespaces": namespaces,
        "instances": instances,
        "settings": bundle.settings,
        "users": [
            {"username": "alice", "groups": ["tenant-ktj-admin"], "title": "alice — admin of tenant-ktj", "access": rules(TENANT_ADMIN)},
            {"username": "dave", "groups": ["tenant-acme-use"], "title": "dave — user of tenant-acme", "access": rules(&[])},
            {"username": "carol", "groups": ["tenant-acme-admin"], "title": "carol — admin of tenant-acme", "access": rules(TENANT_ADMIN)},
            {"username": "sam", "groups": ["tenant-acme-super-admin"], "title": "sam — super-admin of tenant-acme", "access": rules(&["*"])},
            {"username": "admin", "groups": ["cozystack-cluster-admin"], "title": "admin — platform administrator", "access": rules(&["*"])},
        ],
    }))
}

/// The `apps.cozystack.io` resources `cozy:tenant:admin` may write
/// (`packages/system/cozystack-basics/templates/clusterroles.yaml`): the catalog apps, Info and
/// SeaweedFS, not the other modules or Tenants.
const TENANT_ADMIN: &[&str] = &[
    "buckets",
    "clickhouses",
    "foos",
    "foundationdbs",
    "harbors",
    "httpcaches",
    "kafkas",
    "kuberneteses",
    "mariadbs",
    "mongodbs",
    "natses",
    "openbaos",
    "opensearches",
    "postgreses",
    "qdrants",
    "rabbitmqs",
    "redises",
    "seaweedfses",
    "tcpbalancers",
    "virtualmachines",
    "vmdisks",
    "vminstances",
    "vpns",
    "infos",
    "virtualprivateclouds",
];

/// A SelfSubjectRulesReview's status as the API server answers it for a tenant role: every
/// role reads all kinds (`cozy:tenant:view`), and writes `writable` (`*` for super-admin, the
/// tenant ServiceAccount and the platform's administrators).
fn rules(writable: &[&str]) -> Value {
    let mut rules = vec![
        json!({"verbs": ["get", "list", "watch"], "apiGroups": ["apps.cozystack.io"], "resources": ["*"]}),
    ];
    if !writable.is_empty() {
        rules.push(json!({"verbs": ["create", "update", "patch", "delete"], "apiGroups": ["apps.cozystack.io"], "resources": writable}));
    }
    json!({"resourceRules": rules, "nonResourceRules": [], "incomplete": false})
}
