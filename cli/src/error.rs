//! What a verb of the operator's tool cannot do, as one type: every verb returns it, and `main`
//! prints it as `error: …` with exit code 2 (unusable input).

use std::path::Path;

use thiserror::Error;

/// What the platform model and every verb can meet (a file, a decode, a refused input, the
/// module failing): owned by the platform crate, wrapped here.
pub use cozystack_platform::error::Error as Shared;

#[derive(Debug, Error)]
pub enum Error {
    #[error(transparent)]
    Shared(#[from] Shared),
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
}

impl Error {
    pub fn read(path: &Path, source: std::io::Error) -> Error {
        Shared::read(path, source).into()
    }

    pub fn write(path: &Path, source: std::io::Error) -> Error {
        Shared::write(path, source).into()
    }

    pub fn decode(what: impl std::fmt::Display, reason: impl std::fmt::Display) -> Error {
        Shared::decode(what, reason).into()
    }

    /// Reading or writing a stream (standard input, standard output) failed.
    pub fn stream(what: &'static str, source: std::io::Error) -> Error {
        Shared::Stream { what, source }.into()
    }

    /// Cannot write `what` (a report, a manifest) for `reason`.
    pub fn encode(what: &'static str, reason: impl std::fmt::Display) -> Error {
        Shared::Encode {
            what,
            reason: reason.to_string(),
        }
        .into()
    }
}

/// Running the module: reading it, its metadata, the guest's calls, a dump.
impl From<cozystack_policy_runtime::error::Error> for Error {
    fn from(error: cozystack_policy_runtime::error::Error) -> Error {
        Error::Shared(error.into())
    }
}

/// A message a verb composes (a refused flag, a change set it cannot judge).
impl From<String> for Error {
    fn from(message: String) -> Error {
        Error::Shared(Shared::Invalid(message))
    }
}

impl From<&str> for Error {
    fn from(message: &str) -> Error {
        Error::Shared(Shared::Invalid(message.to_owned()))
    }
}
