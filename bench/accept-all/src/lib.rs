//! Accepts everything after decoding the request with the SDK: what decoding alone costs (the
//! benchmark's floor, settings `{}`). With `{"lookups": true}` it first makes the four typed
//! lookups of Kubewarden's context-aware test policy (`kubewarden/context-aware-test-policy`,
//! the one policy-evaluator's integration tests run): the request's Namespace, the Deployments
//! labelled `app.kubernetes.io/component` `database` and `frontend` in it, and the Service
//! `api-auth-service` there. The benchmark's context-aware peer. With `{"calls": [...]}` it
//! makes those host calls, as given, and reads nothing of their answers: a workload's protocol
//! floor, what the host must hand over whatever a policy does with it.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Service};
use kubewarden_policy_sdk::host_capabilities::kubernetes::{
    GetResourceRequest, ListResourcesByNamespaceRequest, get_resource, list_resources_by_namespace,
};
use kubewarden_policy_sdk::request::ValidationRequest;
use kubewarden_policy_sdk::settings::Validatable;
use kubewarden_policy_sdk::wapc_guest as guest;
use serde::Deserialize;

#[derive(Deserialize, Default)]
struct Settings {
    #[serde(default)]
    lookups: bool,
    #[serde(default)]
    calls: Vec<Call>,
}

/// One host call: its `kubewarden/kubernetes` operation and its request, sent as they are.
#[derive(Deserialize)]
struct Call {
    operation: String,
    request: serde_json::Value,
}

impl Validatable for Settings {
    fn validate(&self) -> Result<(), String> {
        Ok(())
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn wapc_init() {
    guest::register_function("validate", validate);
    guest::register_function(
        "validate_settings",
        kubewarden_policy_sdk::validate_settings::<Settings>,
    );
    guest::register_function(
        "protocol_version",
        kubewarden_policy_sdk::protocol_version_guest,
    );
}

fn validate(payload: &[u8]) -> guest::CallResult {
    let request = ValidationRequest::<Settings>::new(payload)?;
    if request.settings.lookups {
        let namespace = request.request.namespace.clone();
        let get = |kind: &str, api_version: &str, name: &str, namespace: Option<&str>| {
            GetResourceRequest {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
                name: name.to_owned(),
                namespace: namespace.map(str::to_owned),
                disable_cache: false,
                field_masks: None,
            }
        };
        let found: Namespace = get_resource(&get("Namespace", "v1", &namespace, None))?;
        std::hint::black_box(found.metadata.labels);
        for component in ["database", "frontend"] {
            let deployments =
                list_resources_by_namespace::<Deployment>(&ListResourcesByNamespaceRequest {
                    api_version: "apps/v1".to_owned(),
                    kind: "Deployment".to_owned(),
                    namespace: namespace.clone(),
                    label_selector: Some(format!("app.kubernetes.io/component={component}")),
                    field_selector: None,
                    field_masks: None,
                })?;
            std::hint::black_box(deployments.items.len());
        }
        let service: Service =
            get_resource(&get("Service", "v1", "api-auth-service", Some(&namespace)))?;
        std::hint::black_box(service.metadata.labels);
    }
    for call in &request.settings.calls {
        let body = serde_json::to_vec(&call.request)?;
        let answer = guest::host_call("kubewarden", "kubernetes", &call.operation, &body)?;
        std::hint::black_box(answer.len());
    }
    kubewarden_policy_sdk::accept_request()
}
