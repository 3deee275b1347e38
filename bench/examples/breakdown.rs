//! Where the time of the 4,000-instance CREATE goes, natively.
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cozystack_capabilities_policy::cluster::HostCluster;
use cozystack_e2e::cluster::FixtureCluster;
use cozystack_e2e::host::{NativeHost, ResponseCache};
use cozystack_e2e::policy::{Metadata, Policy};
use cozystack_resolver::Cluster;
use serde_json::json;

fn main() {
    let mut objects = Vec::new();
    for i in 0..4000 {
        objects.push(json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "info", "namespace": format!("tenant-t{i}"), "labels": {
                "apps.cozystack.io/application.kind": "Info", "apps.cozystack.io/application.group": "apps.cozystack.io",
                "apps.cozystack.io/application.name": "info", "sharding.fluxcd.io/key": "tenants"}}}));
    }
    let cluster = Arc::new(FixtureCluster { objects });
    let wasm = std::fs::read("policy.wasm").unwrap();
    let mut metadata = Metadata::default();
    metadata.context_aware_resources.insert(cozystack_e2e::host::ContextAwareResource { api_version: "helm.toolkit.fluxcd.io/v2".into(), kind: "HelmRelease".into() });
    let policy = Policy::load(&wasm, metadata).unwrap();
    let cache: Arc<ResponseCache> = Arc::default();
    for round in 0..3 {
        let host = NativeHost(Mutex::new(policy.host_state(cluster.clone(), vec![], Some(cache.clone()))));
        let t = Instant::now();
        let list = HostCluster::new(&host).instances("Info").unwrap();
        println!("round {round}: host + decode of {} instances: {:?}", list.len(), t.elapsed());
    }
    let body: String = cache.lock().unwrap().values().next().unwrap().clone().unwrap().to_string();
    let t = Instant::now();
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    println!("serde_json::Value of {} bytes: {:?}", body.len(), t.elapsed());
    drop(v);
}
