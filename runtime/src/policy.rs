//! The built policy module, run the way the policy-server runs it: precompiled once, a fresh
//! instance per evaluation, `{"request", "settings"}` in, a ValidationResponse out.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use wapc::WapcHost;
use wasmtime_provider::{EpochDeadlines, WasmtimeEngineProviderBuilder, WasmtimeEngineProviderPre};

use crate::cluster::ClusterObjects;
use crate::error::Error;
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
    /// The host side of one evaluation of a module with this metadata: its context-aware
    /// resources are what the host lets it read; `cache` shares answers across evaluations.
    pub fn host_state(
        &self,
        cluster: Arc<ClusterObjects>,
        failures: Vec<Failure>,
        cache: Option<Arc<crate::host::HostCache>>,
    ) -> HostState {
        HostState {
            cluster,
            allowed: self.context_aware_resources.clone(),
            failures,
            cache,
            ..HostState::default()
        }
    }

    /// The metadata embedded in an annotated module, as the policy-server reads it.
    pub fn from_module(wasm: &[u8]) -> Result<Metadata, Error> {
        let value = cozystack_packaging::section::read_metadata(wasm)
            .map_err(|e| Error::Metadata(e.to_string()))?
            .ok_or(Error::NoMetadata)?;
        serde_json::from_value(value).map_err(|e| Error::Metadata(e.to_string()))
    }
}

pub struct Policy {
    pre: WasmtimeEngineProviderPre,
    pub metadata: Metadata,
    pub wasm_size: usize,
    callback_thread: Option<CallbackThread>,
}

/// One initialised instance and the host state its calls read and record.
pub struct Instance {
    host: WapcHost,
    state: Arc<Mutex<HostState>>,
}

impl Instance {
    fn call(&self, operation: &str, payload: &[u8]) -> Result<Vec<u8>, Error> {
        self.host.call(operation, payload).map_err(|e| Error::Call {
            operation: operation.to_owned(),
            reason: e.to_string(),
        })
    }

    /// `validate` again on the same instance: how `kwctl bench` times a policy (it rehydrates
    /// one evaluator and evaluates in a loop), where the policy-server takes a fresh instance
    /// for every request. The raw response; the host calls are not kept (a loop of thousands
    /// would hold every answer).
    pub fn validate_warm(&self, payload: &[u8]) -> Result<Vec<u8>, Error> {
        let out = self.call("validate", payload);
        if let Ok(mut state) = self.state.lock() {
            state.exchanges.clear();
        }
        out
    }

    /// `validate`: the response and the host calls it made.
    pub fn validate(self, payload: &[u8]) -> Result<Evaluation, Error> {
        let out = self.call("validate", payload)?;
        let response = serde_json::from_slice(&out).map_err(Error::Response)?;
        let mut state = self.state.lock().map_err(|_| Error::Poisoned)?;
        Ok(Evaluation {
            response,
            exchanges: std::mem::take(&mut state.exchanges),
            host_time: state.host_time,
        })
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// The evaluator's callback path: the guest's thread hands each host call to the callback
/// handler running on another thread (`try_send` over a channel) and blocks until the answer
/// comes back (`blocking_recv`). The benchmark pays this hop as the policy-server does.
#[derive(Clone)]
struct CallbackThread {
    jobs: std::sync::mpsc::Sender<Job>,
}

impl CallbackThread {
    fn spawn() -> CallbackThread {
        let (jobs, queue) = std::sync::mpsc::channel::<Job>();
        std::thread::spawn(move || {
            for job in queue {
                job();
            }
        });
        CallbackThread { jobs }
    }

    fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Error> {
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        self.jobs
            .send(Box::new(move || {
                let _ = reply.send(work());
            }))
            .map_err(|_| Error::Callback("has stopped"))?;
        answer.recv().map_err(|_| Error::Callback("dropped a call"))
    }
}

pub fn read_module(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|source| Error::Module {
        path: path.to_owned(),
        source,
    })
}

/// wasmtime's or waPC's refusal while the runtime was doing `what`.
fn wasm(what: &'static str, reason: impl std::fmt::Display) -> Error {
    Error::Wasm {
        what,
        reason: reason.to_string(),
    }
}

/// One `validate` call: the response and the host calls it made.
#[derive(Debug, Clone)]
pub struct Evaluation {
    pub response: Value,
    pub exchanges: Vec<Exchange>,
    /// Wall time the guest was blocked in host calls.
    pub host_time: std::time::Duration,
}

impl Evaluation {
    /// Bytes the host serialised and handed back to the guest.
    pub fn response_bytes(&self) -> usize {
        self.exchanges
            .iter()
            .map(|e| e.response.as_ref().map_or(0, |body| body.len()))
            .sum()
    }
}

/// The row of the rule table that refused, as the module names it in its audit annotations.
pub fn rule_of(response: &Value) -> Option<&str> {
    response["audit_annotations"]["rule"].as_str()
}

/// The row of the rule table each warning came from, in the order of the warnings.
pub fn warned_by(response: &Value) -> Vec<&str> {
    response["audit_annotations"]["warned-by"]
        .as_str()
        .map(|rows| rows.split(',').collect())
        .unwrap_or_default()
}

/// The rows whose refusal was waived for a platform writer, the request admitted.
pub fn waived_by(response: &Value) -> Vec<&str> {
    response["audit_annotations"]["waived-by"]
        .as_str()
        .map(|rows| rows.split(',').collect())
        .unwrap_or_default()
}

/// The warnings of a ValidationResponse (none when absent).
pub fn warnings_of(response: &Value) -> Vec<String> {
    response["warnings"]
        .as_array()
        .map(|w| {
            w.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A ValidationResponse's verdict in a word or three: `ALLOWED`, `ALLOWED with warning`,
/// `DENIED (403)`.
pub fn verdict_of(response: &Value) -> String {
    match (
        response["accepted"].as_bool(),
        warnings_of(response).is_empty(),
    ) {
        (Some(true), true) => "ALLOWED".to_owned(),
        (Some(true), false) => "ALLOWED with warning".to_owned(),
        _ => format!("DENIED ({})", response["code"]),
    }
}

/// The policy-server's evaluation timeout (`--policy-timeout`, on by default: 2 s) is a wasmtime
/// epoch deadline, so the module it runs is compiled with an epoch check at every loop and call,
/// which the guest pays for on every request. The harness compiles the same checks; it never
/// advances the epoch, so no evaluation is cut short.
const EPOCH_DEADLINES: EpochDeadlines = EpochDeadlines {
    wapc_init: 2,
    wapc_func: 2,
};

/// Set, the compiled guest's functions are named in `/tmp/perf-<pid>.map`, so `perf report`
/// shows where the guest spends its time (with a module that keeps its names: docs/benchmarks.md).
pub const PERFMAP: &str = "COZYSTACK_POLICY_PERFMAP";

/// The engine wasmtime-provider builds (`Config::default()` with epoch interruption), telling
/// the profiler about every function it compiles.
fn perfmap_engine() -> Result<wasmtime::Engine, Error> {
    let mut config = wasmtime::Config::default();
    config.epoch_interruption(true);
    config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    wasmtime::Engine::new(&config).map_err(|e| wasm("cannot set up the profiled engine", e))
}

impl Policy {
    pub fn load(wasm: &[u8], metadata: Metadata) -> Result<Policy, Error> {
        let mut builder = WasmtimeEngineProviderBuilder::new()
            .module_bytes(wasm)
            .enable_epoch_interruptions(EPOCH_DEADLINES);
        if std::env::var_os(PERFMAP).is_some() {
            builder = builder.engine(perfmap_engine()?);
        }
        let pre = builder
            .build_pre()
            .map_err(|e| self::wasm("cannot compile the policy module", e))?;
        Ok(Policy {
            pre,
            metadata,
            wasm_size: wasm.len(),
            callback_thread: None,
        })
    }

    /// Serve host calls on a separate thread, as the policy-server's callback handler does.
    pub fn with_callback_thread(mut self) -> Policy {
        self.callback_thread = Some(CallbackThread::spawn());
        self
    }

    /// Loads an annotated module; its embedded metadata decides what the host allows.
    pub fn load_annotated(wasm: &Path) -> Result<Policy, Error> {
        Policy::from_annotated(&read_module(wasm)?)
    }

    /// An annotated module's bytes (embedded in a binary, pulled from a registry).
    pub fn from_annotated(wasm: &[u8]) -> Result<Policy, Error> {
        Policy::load(wasm, Metadata::from_module(wasm)?)
    }

    /// A fresh instance for one evaluation, rehydrated from the precompiled module and
    /// initialised, with its host calls served from `state`: what the evaluator prepares before
    /// it hands the request over.
    pub fn instantiate(&self, state: HostState) -> Result<Instance, Error> {
        let state = Arc::new(Mutex::new(state));
        let engine = self
            .pre
            .rehydrate(Some(EPOCH_DEADLINES))
            .map_err(|e| wasm("cannot rehydrate the policy module", e))?;
        let callback_state = state.clone();
        let hop = self.callback_thread.clone();
        let host = WapcHost::new(
            Box::new(engine),
            Some(Box::new(
                move |_id, binding, namespace, operation, payload| {
                    let started = std::time::Instant::now();
                    let serve = {
                        let state = callback_state.clone();
                        let (binding, namespace, operation, payload) = (
                            binding.to_owned(),
                            namespace.to_owned(),
                            operation.to_owned(),
                            payload.to_vec(),
                        );
                        move || -> Result<Vec<u8>, String> {
                            let mut state = state.lock().map_err(|e| e.to_string())?;
                            state.serve(&binding, &namespace, &operation, &payload)
                        }
                    };
                    let answer = match &hop {
                        Some(thread) => thread.run(serve).map_err(|e| e.to_string())?,
                        None => serve(),
                    };
                    callback_state
                        .lock()
                        .map_err(|_| Error::Poisoned)?
                        .host_time += started.elapsed();
                    answer.map_err(Into::into)
                },
            )),
        )
        .map_err(|e| wasm("cannot instantiate the policy", e))?;
        Ok(Instance { host, state })
    }

    fn call(&self, operation: &str, payload: &[u8]) -> Result<Vec<u8>, Error> {
        self.instantiate(HostState::default())?
            .call(operation, payload)
    }

    pub fn protocol_version(&self) -> Result<String, Error> {
        let out = self.call("protocol_version", b"")?;
        Ok(serde_json::from_slice::<String>(&out)?)
    }

    /// `validate_settings`: `{"valid": bool, "message": …}`.
    pub fn validate_settings(&self, settings: &Value) -> Result<Value, Error> {
        let payload = serde_json::to_vec(settings)?;
        let out = self.call("validate_settings", &payload)?;
        Ok(serde_json::from_slice(&out)?)
    }

    /// `validate` with a raw payload (for malformed-input tests).
    pub fn validate_raw(
        &self,
        payload: &[u8],
        cluster: Arc<ClusterObjects>,
        failures: Vec<Failure>,
    ) -> Result<Evaluation, Error> {
        self.validate_with(payload, self.host_state(cluster, failures, None))
    }

    /// The host side of one evaluation; `cache` shares answers across evaluations.
    pub fn host_state(
        &self,
        cluster: Arc<ClusterObjects>,
        failures: Vec<Failure>,
        cache: Option<Arc<crate::host::HostCache>>,
    ) -> HostState {
        self.metadata.host_state(cluster, failures, cache)
    }

    /// `validate` against a prepared host state.
    pub fn validate_with(&self, payload: &[u8], state: HostState) -> Result<Evaluation, Error> {
        self.instantiate(state)?.validate(payload)
    }

    /// `validate` with the exact payload the policy-server sends.
    pub fn validate(
        &self,
        request: &Value,
        settings: &Value,
        cluster: Arc<ClusterObjects>,
        failures: Vec<Failure>,
    ) -> Result<Evaluation, Error> {
        self.validate_raw(&payload(request, settings)?, cluster, failures)
    }
}

/// The `validate` payload the policy-server sends, `{"request": …, "settings": …}`, written
/// from borrowed values (a replay of thousands of objects copies none of them).
pub fn payload<R: Serialize + ?Sized, S: Serialize + ?Sized>(
    request: &R,
    settings: &S,
) -> Result<Vec<u8>, Error> {
    #[derive(Serialize)]
    struct Payload<'a, R: ?Sized, S: ?Sized> {
        request: &'a R,
        settings: &'a S,
    }
    Ok(serde_json::to_vec(&Payload { request, settings })?)
}
