//! What the runtime cannot do, as one type: reading modules and dumps, running the guest. A
//! caller that reports in lines (the CLI, the harness) takes its text (`From<Error> for String`).

use std::path::PathBuf;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source} (run `make annotated-policy.wasm` first)", path.display())]
    Module {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A dump or fixture file that does not parse.
    #[error("{}: {reason}", path.display())]
    Dump { path: PathBuf, reason: String },
    /// Objects given as text that do not parse.
    #[error("{0}")]
    Objects(String),
    #[error("the module has no io.kubewarden.metadata section: run `make annotated-policy.wasm`")]
    NoMetadata,
    #[error("embedded metadata: {0}")]
    Metadata(String),
    /// wasmtime or waPC refused the module: `what` the runtime was doing.
    #[error("{what}: {reason}")]
    Wasm { what: &'static str, reason: String },
    /// A guest function failed (a trap, an epoch deadline, a host call the guest did not take).
    #[error("{operation} failed: {reason}")]
    Call { operation: String, reason: String },
    #[error("undecodable response: {0}")]
    Response(serde_json::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("the callback thread {0}")]
    Callback(&'static str),
    #[error("the host state is poisoned by a panic on another thread")]
    Poisoned,
    #[error("{0:?} is not Kind/name or Kind/namespace/name")]
    Reference(String),
    #[error("no object {0}")]
    NoObject(String),
    #[error("remove: {0}")]
    Remove(Box<Error>),
    #[error("an object without apiVersion, kind or metadata.name: {0}")]
    Unnamed(String),
}

impl From<Error> for String {
    fn from(error: Error) -> String {
        error.to_string()
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
