//! What the platform model and the tools over it cannot do, as one type: a file not read or
//! written, an answer that does not decode, an input refused, the module failing to run. The
//! operator's tool wraps it with what only its verbs meet (the registry, a live cluster).

use std::path::{Path, PathBuf};

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    /// Running the module: reading it, its metadata, the guest's calls, a dump.
    #[error(transparent)]
    Runtime(#[from] cozystack_policy_runtime::error::Error),
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what}: {source}")]
    Stream {
        what: &'static str,
        source: std::io::Error,
    },
    /// A file or answer that does not decode as what it must be: `what` names it.
    #[error("{what}: {reason}")]
    Decode { what: String, reason: String },
    #[error("cannot write {what}: {reason}")]
    Encode { what: &'static str, reason: String },
    /// An input or a combination of flags refused, said in the caller's own words.
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    pub fn read(path: &Path, source: std::io::Error) -> Error {
        Error::Read {
            path: path.to_owned(),
            source,
        }
    }

    pub fn write(path: &Path, source: std::io::Error) -> Error {
        Error::Write {
            path: path.to_owned(),
            source,
        }
    }

    pub fn decode(what: impl std::fmt::Display, reason: impl std::fmt::Display) -> Error {
        Error::Decode {
            what: what.to_string(),
            reason: reason.to_string(),
        }
    }
}

/// A message a caller composes (a refused flag, a change set it cannot judge).
impl From<String> for Error {
    fn from(message: String) -> Error {
        Error::Invalid(message)
    }
}

impl From<&str> for Error {
    fn from(message: &str) -> Error {
        Error::Invalid(message.to_owned())
    }
}
