//! The peer: Kubewarden's context-aware test policy's four typed lookups (a Namespace, two
//! Deployment lists by label, a Service), built with the same SDK and profile
//! (`bench/accept-all` with `{"lookups": true}`) and run on the same host model against the
//! same cluster plus the objects it looks up, so a CREATE of ours is compared with what a
//! context-aware peer costs there.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cozystack_policy_runtime::host::{ContextAwareResource, HostCache};
use cozystack_policy_runtime::policy::{Metadata, Policy};
use serde_json::{Value, json};

use crate::model::{Modelled, measure};
use crate::workloads::Row;

/// Host calls the peer makes per request.
pub const LOOKUPS: usize = 4;

/// The peer's cost in the model on `like`'s cluster and request.
pub fn measure_peer(floor_wasm: &[u8], like: &Row, budget: Duration) -> Modelled {
    let resource = |api_version: &str, kind: &str| ContextAwareResource {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
    };
    let metadata = Metadata {
        context_aware_resources: BTreeSet::from([
            resource("v1", "Namespace"),
            resource("apps/v1", "Deployment"),
            resource("v1", "Service"),
        ]),
        rules: Vec::new(),
    };
    let policy = Policy::load(floor_wasm, metadata)
        .unwrap_or_else(|e| panic!("the peer: {e}"))
        .with_callback_thread();
    let mut payload: Value =
        serde_json::from_slice(&like.workload.payload).expect("the workload's payload");
    payload["settings"] = json!({"lookups": true});
    let namespace = payload["request"]["namespace"]
        .as_str()
        .expect("a namespaced request")
        .to_owned();
    let payload = serde_json::to_vec(&payload).expect("payload");
    // What the test policy's fixture holds: the API's Deployments and its auth Service.
    let mut objects = (*like.workload.cluster).clone();
    for component in ["database", "frontend"] {
        objects.push(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": component, "namespace": namespace,
                "labels": {"app.kubernetes.io/component": component, "customer-id": "1234"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": component}},
                "template": {"metadata": {"labels": {"app": component}},
                    "spec": {"containers": [{"name": component, "image": format!("registry.example.org/{component}:1.0")}]}}}}));
    }
    objects.push(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "api-auth-service", "namespace": namespace,
            "labels": {"app.kubernetes.io/part-of": "api"}},
        "spec": {"selector": {"app": "auth"}, "ports": [{"port": 80, "targetPort": 8080}]}}));
    let cluster = Arc::new(objects);
    let cache: Arc<HostCache> = Arc::default();
    let probe = policy
        .validate_with(
            &payload,
            policy.host_state(cluster.clone(), vec![], Some(cache.clone())),
        )
        .unwrap_or_else(|e| panic!("the peer: {e}"));
    assert!(
        probe.exchanges.len() == LOOKUPS && probe.response["accepted"] == true,
        "the peer made {} calls: {}",
        probe.exchanges.len(),
        probe.response
    );
    let mut host_samples = Vec::new();
    let [stats] = measure(
        budget,
        [&mut || {
            let state = policy.host_state(cluster.clone(), vec![], Some(cache.clone()));
            let instance = policy.instantiate(state).expect("instantiate");
            let t = Instant::now();
            let evaluation = instance.validate(&payload).expect("validate");
            let elapsed = t.elapsed();
            host_samples.push(evaluation.host_time);
            elapsed
        }],
    );
    host_samples.sort();
    Modelled::new(
        stats.median(),
        host_samples[host_samples.len() / 2],
        probe.exchanges.len(),
        probe.response_bytes(),
        payload.len(),
    )
}
