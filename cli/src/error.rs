//! What a verb of the operator's tool cannot do, as one type: every verb returns it, and `main`
//! prints it as `error: …` with exit code 2 (unusable input).

use std::path::{Path, PathBuf};

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    /// Running the module: reading it, its metadata, the guest's calls, a dump.
    #[error(transparent)]
    Runtime(#[from] cozystack_policy_runtime::error::Error),
    /// Settings the simulator's statement of the rules cannot follow.
    #[error(transparent)]
    Unstated(#[from] crate::ops::simulate::statement::Unstated),
    /// Reading a cluster through kube-rs.
    #[error(transparent)]
    Live(#[from] crate::live::LiveError),
    #[error(transparent)]
    Section(#[from] cozystack_packaging::section::SectionError),
    #[error(transparent)]
    Metadata(#[from] cozystack_packaging::metadata::MetadataError),
    /// The registry: push, pull, resolve.
    #[error(transparent)]
    Oci(#[from] cozystack_packaging::oci::OciError),
    #[error(transparent)]
    Key(#[from] cozystack_packaging::keys::KeyError),
    #[error(transparent)]
    Sign(#[from] cozystack_packaging::signing::SignError),
    #[error(transparent)]
    Verify(#[from] cozystack_packaging::verification::VerifyError),
    #[error(transparent)]
    VerificationConfig(#[from] cozystack_packaging::verification::ConfigError),
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
    /// An input or a combination of flags the verb refuses, said in the verb's own words.
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

/// A message a verb composes (a refused flag, a change set it cannot judge).
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
