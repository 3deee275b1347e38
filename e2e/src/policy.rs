//! The built policy module, run the way the policy-server runs it: precompiled once, a fresh
//! instance per evaluation, `{"request", "settings"}` in, a ValidationResponse out.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use serde_json::{Value, json};
use wapc::WapcHost;
use wasmtime_provider::{WasmtimeEngineProviderBuilder, WasmtimeEngineProviderPre};

use crate::cluster::FixtureCluster;
use crate::host::{ContextAwareResource, Exchange, Failure, HostState};

/// The parts of `policy-metadata.yml` the host enforces.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    #[serde(default)]
    pub context_aware_resources: BTreeSet<ContextAwareResource>,
    #[serde(default)]
    pub rules: Vec<Value>,
}

impl Metadata {
    /// The metadata embedded in an annotated module, as the policy-server reads it.
    pub fn from_module(wasm: &[u8]) -> Result<Metadata, String> {
        let value = cozystack_packaging::section::read_metadata(wasm)
            .map_err(|e| e.to_string())?
            .ok_or("the module has no io.kubewarden.metadata section: run `make annotated-policy.wasm`")?;
        serde_json::from_value(value).map_err(|e| format!("embedded metadata: {e}"))
    }
}

pub struct Policy {
    pre: WasmtimeEngineProviderPre,
    pub metadata: Metadata,
    pub wasm_size: usize,
}

pub fn read_module(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| {
        format!(
            "{}: {e} (run `make annotated-policy.wasm` first)",
            path.display()
        )
    })
}

/// One `validate` call: the response and the host calls it made.
#[derive(Debug, Clone)]
pub struct Evaluation {
    pub response: Value,
    pub exchanges: Vec<Exchange>,
}

impl Evaluation {
    /// Bytes the host handed back to the guest.
    pub fn response_bytes(&self) -> usize {
        self.exchanges
            .iter()
            .map(|e| e.response.as_ref().map_or(0, |body| body.len()))
            .sum()
    }
}

impl Policy {
    pub fn load(wasm: &[u8], metadata: Metadata) -> Result<Policy, String> {
        let pre = WasmtimeEngineProviderBuilder::new()
            .module_bytes(wasm)
            .build_pre()
            .map_err(|e| format!("cannot compile the policy module: {e}"))?;
        Ok(Policy {
            pre,
            metadata,
            wasm_size: wasm.len(),
        })
    }

    /// Loads an annotated module; its embedded metadata decides what the host allows.
    pub fn load_annotated(wasm: &Path) -> Result<Policy, String> {
        let bytes = read_module(wasm)?;
        Policy::load(&bytes, Metadata::from_module(&bytes)?)
    }

    fn call(
        &self,
        state: Arc<Mutex<HostState>>,
        operation: &str,
        payload: &[u8],
    ) -> Result<Vec<u8>, String> {
        let engine = self.pre.rehydrate(None).map_err(|e| e.to_string())?;
        let callback_state = state.clone();
        let host = WapcHost::new(
            Box::new(engine),
            Some(Box::new(
                move |_id, binding, namespace, operation, payload| {
                    let mut state = callback_state.lock().map_err(|e| e.to_string())?;
                    state
                        .serve(binding, namespace, operation, payload)
                        .map_err(Into::into)
                },
            )),
        )
        .map_err(|e| format!("cannot instantiate the policy: {e}"))?;
        host.call(operation, payload)
            .map_err(|e| format!("{operation} failed: {e}"))
    }

    pub fn protocol_version(&self) -> Result<String, String> {
        let out = self.call(Arc::default(), "protocol_version", b"")?;
        serde_json::from_slice::<String>(&out).map_err(|e| e.to_string())
    }

    /// `validate_settings`: `{"valid": bool, "message": …}`.
    pub fn validate_settings(&self, settings: &Value) -> Result<Value, String> {
        let payload = serde_json::to_vec(settings).map_err(|e| e.to_string())?;
        let out = self.call(Arc::default(), "validate_settings", &payload)?;
        serde_json::from_slice(&out).map_err(|e| e.to_string())
    }

    /// `validate` with a raw payload (for malformed-input tests).
    pub fn validate_raw(
        &self,
        payload: &[u8],
        cluster: Arc<FixtureCluster>,
        failures: Vec<Failure>,
    ) -> Result<Evaluation, String> {
        self.validate_with(payload, self.host_state(cluster, failures, None))
    }

    /// The host side of one evaluation; `cache` shares answers across evaluations.
    pub fn host_state(
        &self,
        cluster: Arc<FixtureCluster>,
        failures: Vec<Failure>,
        cache: Option<Arc<crate::host::ResponseCache>>,
    ) -> HostState {
        HostState {
            cluster,
            allowed: self.metadata.context_aware_resources.clone(),
            failures,
            cache,
            ..HostState::default()
        }
    }

    /// `validate` against a prepared host state.
    pub fn validate_with(&self, payload: &[u8], state: HostState) -> Result<Evaluation, String> {
        let state = Arc::new(Mutex::new(state));
        let out = self.call(state.clone(), "validate", payload)?;
        let response =
            serde_json::from_slice(&out).map_err(|e| format!("undecodable response: {e}"))?;
        let exchanges = std::mem::take(&mut state.lock().map_err(|e| e.to_string())?.exchanges);
        Ok(Evaluation {
            response,
            exchanges,
        })
    }

    /// `validate` with the exact payload the policy-server sends.
    pub fn validate(
        &self,
        request: &Value,
        settings: &Value,
        cluster: Arc<FixtureCluster>,
        failures: Vec<Failure>,
    ) -> Result<Evaluation, String> {
        let payload = serde_json::to_vec(&json!({"request": request, "settings": settings}))
            .map_err(|e| e.to_string())?;
        self.validate_raw(&payload, cluster, failures)
    }
}
