//! The runtime's host state answering the policy compiled natively (the parity export, the
//! benchmark's native baseline): the same answers as the wasm gets, without wasmtime.

use cozystack_policy_runtime::host::HostState;

/// The same host state answering the policy compiled natively (benchmarks, parity export).
pub struct NativeHost(pub std::sync::Mutex<HostState>);

impl cozystack_capabilities_policy::host::Host for NativeHost {
    fn kubernetes(&self, operation: &str, request: &[u8]) -> Result<Vec<u8>, String> {
        self.0.lock().map_err(|e| e.to_string())?.serve(
            "kubewarden",
            "kubernetes",
            operation,
            request,
        )
    }
}
