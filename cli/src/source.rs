//! Where the policy module comes from: the release embedded at build time, a file, or an OCI
//! registry (pulled and checked against its digest by the packaging crate, as kwctl pulls it;
//! with a key, only once its cosign signature verifies, and then by the verified digest).

use std::path::PathBuf;

use cozystack_packaging::signing::Trust;
use cozystack_policy_runtime::policy::{Policy, read_module};

use crate::error::Error;
use crate::trust::pinned;

/// The module embedded by `build.rs`, when the build had one.
#[cfg(embedded_policy)]
const EMBEDDED: Option<&[u8]> = Some(include_bytes!(env!("EMBEDDED_POLICY_WASM")));
#[cfg(not(embedded_policy))]
const EMBEDDED: Option<&[u8]> = None;

/// `--policy`: absent for the embedded release, `registry://REF` for an OCI artifact, else a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Embedded,
    File(PathBuf),
    Registry { reference: String, insecure: bool },
}

impl Source {
    /// Parses `--policy` the way kwctl names modules (`registry://` prefix for OCI).
    pub fn parse(policy: Option<&str>, insecure: bool) -> Source {
        match policy {
            None => Source::Embedded,
            Some(text) => match text.strip_prefix("registry://") {
                Some(reference) => Source::Registry {
                    reference: reference.to_owned(),
                    insecure,
                },
                None => Source::File(PathBuf::from(text)),
            },
        }
    }

    /// The module's bytes and a line naming where they came from. With `trust`, only a
    /// registry artifact whose signature verifies is read.
    pub fn read(&self, trust: Option<&Trust>) -> Result<(Vec<u8>, String), Error> {
        if trust.is_some() && !matches!(self, Source::Registry { .. }) {
            return Err(
                "--verify-key checks a registry artifact's signature: give --policy registry://REF"
                    .into(),
            );
        }
        match self {
            Source::Embedded => Ok(EMBEDDED
                .map(|wasm| (wasm.to_vec(), format!("the embedded policy v{}", env!("CARGO_PKG_VERSION"))))
                .ok_or_else(|| {
                    "this build embeds no policy module: pass --policy FILE or --policy registry://REF, or build with `make cli`".to_owned()
                })?),
            Source::File(path) => Ok((read_module(path)?, path.display().to_string())),
            Source::Registry {
                reference,
                insecure,
            } => {
                let pinned = pinned(reference, trust, *insecure)?;
                let (wasm, artifact) = cozystack_packaging::oci::pull(&pinned, *insecure)
                    .map_err(|e| format!("registry://{pinned}: {e}"))?;
                let verified = trust
                    .map(|trust| format!(", signature verified with {}", trust.key.path))
                    .unwrap_or_default();
                Ok((
                    wasm,
                    format!("{reference} ({}){verified}", artifact.manifest_digest),
                ))
            }
        }
    }

    /// The module compiled once and ready to evaluate, and where it came from.
    pub fn load(&self, trust: Option<&Trust>) -> Result<(Policy, String), Error> {
        let (wasm, origin) = self.read(trust)?;
        let policy = Policy::from_annotated(&wasm).map_err(|e| format!("{origin}: {e}"))?;
        Ok((policy, origin))
    }

    /// The same, and a plain module (no metadata section: `make policy.wasm`'s, or an older
    /// build) run under the metadata this tool's own module carries, which its origin says.
    pub fn load_plain_too(&self, trust: Option<&Trust>) -> Result<(Policy, String), Error> {
        let (wasm, origin) = self.read(trust)?;
        let section = cozystack_packaging::section::read_metadata(&wasm)
            .map_err(|e| format!("{origin}: {e}"))?;
        if section.is_some() {
            let policy = Policy::from_annotated(&wasm).map_err(|e| format!("{origin}: {e}"))?;
            return Ok((policy, origin));
        }
        let (embedded, _) = Source::Embedded.load(None)?;
        let policy =
            Policy::load(&wasm, embedded.metadata.clone()).map_err(|e| format!("{origin}: {e}"))?;
        Ok((
            policy,
            format!("{origin} (plain: under the metadata of the embedded module)"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_names_parse_as_kwctl_writes_them() {
        assert_eq!(Source::parse(None, false), Source::Embedded);
        assert_eq!(
            Source::parse(Some("registry://ghcr.io/cozystack/p@sha256:ab"), true),
            Source::Registry {
                reference: "ghcr.io/cozystack/p@sha256:ab".into(),
                insecure: true
            }
        );
        assert_eq!(
            Source::parse(Some("policy.wasm"), false),
            Source::File("policy.wasm".into())
        );
    }

    #[test]
    fn a_missing_file_names_itself() {
        let err = Source::parse(Some("/nonexistent/p.wasm"), false)
            .read(None)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("/nonexistent/p.wasm: "), "{err}");
    }
}
