//! The protocol floor of a workload: the smallest set of host calls that decides it, made by the
//! accept-all policy through the same host. What Kubewarden must hand over whatever the policy does: lists come without a
//! limit, masks prune data but never metadata, releases carry no provider label, and a list is
//! cluster-wide with a selector per kind (a list per namespace is a permanent watch per tenant
//! in every replica, which no policy can afford). docs/benchmarks.md#the-protocol-floor.

use std::time::{Duration, Instant};

use cozystack_capabilities_policy::definitions::DEFINITION_MASKS;
use cozystack_policy_runtime::host::HostState;
use cozystack_policy_runtime::policy::Policy;
use serde_json::{Value, json};

use crate::model::{Modelled, measure};

/// The workloads whose floor is weighed under masks that reach metadata: the DELETE of a
/// provider consumed by every tenant, at 4,000 and 40,000 tenants.
pub const UPSTREAM_WEIGHED: &str = "DELETE shared provider, 40";

/// One host call of a floor: the waPC operation and its request.
#[derive(Debug, Clone)]
pub struct Call {
    operation: &'static str,
    request: Value,
}

/// The masks of the floor's calls: no data, and the metadata a decision reads, which today's
/// host answers whole anyway and a host whose masks reach metadata would trim to these.
const RELEASE_METADATA: [&str; 3] = [
    "metadata.name",
    "metadata.namespace",
    "metadata.deletionTimestamp",
];
const NAMESPACE_METADATA: [&str; 2] = ["metadata.name", "metadata.labels"];

/// The rules: every ApplicationDefinition, masked to what a rule reads.
pub fn definitions() -> Call {
    Call {
        operation: "list_resources_all",
        request: json!({"api_version": "cozystack.io/v1alpha1", "kind": "ApplicationDefinition",
            "label_selector": null, "field_selector": null, "field_masks": DEFINITION_MASKS}),
    }
}

/// The app releases of `kinds` in every namespace, one list.
pub fn instances(kinds: &[&str]) -> Call {
    let kind = match kinds {
        [one] => format!("apps.cozystack.io/application.kind={one}"),
        many => format!("apps.cozystack.io/application.kind in ({})", many.join(",")),
    };
    Call {
        operation: "list_resources_all",
        request: json!({"api_version": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "label_selector": format!("{kind},apps.cozystack.io/application.group=apps.cozystack.io"),
            "field_selector": null, "field_masks": RELEASE_METADATA}),
    }
}

/// One Namespace: its labels name its providers and its ancestors.
pub fn namespace(name: &str) -> Call {
    Call {
        operation: "get_resource",
        request: json!({"api_version": "v1", "kind": "Namespace", "name": name,
            "namespace": null, "disable_cache": false, "field_masks": NAMESPACE_METADATA}),
    }
}

/// One HelmRelease by name: a Tenant's values are its switches, a module's metadata says
/// whether it is being uninstalled.
pub fn tenant_release(namespace: &str, name: &str) -> Call {
    Call {
        operation: "get_resource",
        request: json!({"api_version": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "name": name, "namespace": namespace, "disable_cache": false,
            "field_masks": ["metadata.name", "spec.values"]}),
    }
}

impl Call {
    /// As the accept-all policy's settings list it.
    pub fn setting(&self) -> Value {
        json!({"operation": self.operation, "request": self.request})
    }
}

/// A workload's settings with the floor's `calls` beside them, as the accept-all policy takes
/// them (it skips what it does not know).
pub fn with_calls(settings: &Value, calls: &[Call]) -> Value {
    let calls: Vec<Value> = calls.iter().map(Call::setting).collect();
    let mut settings = match settings {
        Value::Object(_) => settings.clone(),
        _ => json!({}),
    };
    settings["calls"] = Value::Array(calls);
    settings
}

/// A workload's floor as measured: its calls, the bytes they answer, and what they cost.
pub struct Floor {
    pub calls: usize,
    pub bytes: usize,
    /// The accept-all policy making the floor's calls on the workload's request, each answer
    /// handed over and left unread, in the model (measured, plus the residual).
    pub total: Duration,
}

/// Runs the accept-all policy (`floor`, with its callback thread) on `payload`, its settings
/// given `calls` to make, a fresh instance per request against the workload's host and caches.
pub fn measured(
    floor: &Policy,
    host: impl Fn() -> HostState,
    payload: &[u8],
    calls: &[Call],
    budget: Duration,
) -> Floor {
    let mut payload: Value = serde_json::from_slice(payload).expect("a workload's payload");
    // The workload's settings are handed over too (the accept-all policy skips what it does
    // not know), with the calls beside them.
    payload["settings"] = with_calls(&payload["settings"], calls);
    let payload = serde_json::to_vec(&payload).expect("a JSON payload");
    let run = || {
        let instance = floor.instantiate(host()).expect("instantiate");
        let t = Instant::now();
        let evaluation = instance.validate(&payload).expect("the floor's calls");
        (t.elapsed(), evaluation)
    };
    let (_, probe) = run();
    let mut host_samples = Vec::new();
    let [total] = measure(
        budget,
        [&mut || {
            let (elapsed, evaluation) = run();
            host_samples.push(evaluation.host_time);
            elapsed
        }],
    );
    host_samples.sort();
    let model = Modelled::new(
        total.median(),
        host_samples[host_samples.len() / 2],
        probe.exchanges.len(),
        probe.response_bytes(),
        payload.len(),
    );
    Floor {
        calls: model.calls,
        bytes: model.bytes,
        total: model.total,
    }
}
