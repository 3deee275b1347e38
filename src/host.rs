//! The one place that talks to the Kubewarden host: waPC `kubewarden/kubernetes/*` calls.
//! Everything above it sees the [`Host`] trait, so tests can answer the calls themselves.

/// A Kubernetes host capability call: operation (`get_resource`, `list_resources_all`, …)
/// and its JSON request, answered with the JSON response or the host's error text.
pub trait Host {
    fn kubernetes(&self, operation: &str, request: &[u8]) -> Result<Vec<u8>, String>;
}

/// The real host, through waPC.
pub struct WapcHost;

impl Host for WapcHost {
    fn kubernetes(&self, operation: &str, request: &[u8]) -> Result<Vec<u8>, String> {
        kubewarden_policy_sdk::wapc_guest::host_call("kubewarden", "kubernetes", operation, request)
            .map_err(|err| {
                // wapc-guest wraps the host's text as "Host error: …"; the lookup is named by the caller.
                let text = err.to_string();
                text.strip_prefix("Host error: ")
                    .map(str::to_owned)
                    .unwrap_or(text)
            })
    }
}
