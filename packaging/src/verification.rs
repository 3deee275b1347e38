//! Kubewarden's verification config (a PolicyServer's `verificationConfig` ConfigMap holds it
//! under `verification-config`; `kwctl verify --verification-config-path` reads it): which signatures a policy module must carry. Written for an
//! operator's keys, read back and checked offline for its `pubKey` requirements; keyless
//! requirements (`githubAction`, `genericIssuer`) need Fulcio and Rekor, which only kwctl and
//! the policy-server reach.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::keys::{self, PublicKey};
use crate::signing::{self, SignError, Signature, Trust};

/// The ConfigMap key the policy-server reads the config from.
pub const CONFIG_MAP_KEY: &str = "verification-config";

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("{path}: not a Kubewarden verification config: {reason}")]
    Parse { path: String, reason: String },
    #[error("{path}: apiVersion {0} (expected v1)", path = .1)]
    Version(String, String),
    #[error("{path}: no signature requirement (allOf and anyOf are empty)")]
    Empty { path: String },
    #[error(
        "{path}: the {kind} requirement{owner} is keyless (Fulcio and Rekor): check it with `kwctl verify --verification-config-path` or let the policy-server do it"
    )]
    Keyless {
        path: String,
        kind: &'static str,
        owner: String,
    },
    /// A `pubKey` that is not a public key (the key's name carries the file).
    #[error("{0}")]
    Key(keys::KeyError),
}

/// The config: every `allOf` requirement, and `anyOf.minimumMatches` of `anyOf.signatures`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VerificationConfig {
    pub api_version: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub all_of: Vec<Requirement>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub any_of: Option<AnyOf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnyOf {
    #[serde(default = "one")]
    pub minimum_matches: usize,
    pub signatures: Vec<Requirement>,
}

fn one() -> usize {
    1
}

/// One signature requirement, tagged by `kind` as Kubewarden writes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Requirement {
    PubKey {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<String>,
        key: String,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        annotations: BTreeMap<String, String>,
    },
    GithubAction {
        owner: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        repo: Option<String>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        annotations: BTreeMap<String, String>,
    },
    GenericIssuer {
        issuer: String,
        subject: serde_json::Value,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        annotations: BTreeMap<String, String>,
    },
}

impl VerificationConfig {
    /// Every key must have signed, each signature carrying `annotations`.
    pub fn for_keys(keys: &[PublicKey], annotations: &BTreeMap<String, String>) -> Self {
        VerificationConfig {
            api_version: "v1".to_owned(),
            all_of: keys
                .iter()
                .map(|key| Requirement::PubKey {
                    owner: None,
                    key: key.pem.clone(),
                    annotations: annotations.clone(),
                })
                .collect(),
            any_of: None,
        }
    }

    /// Reads a config, or a ConfigMap holding one under `verification-config`.
    pub fn read(text: &str, path: &str) -> Result<Self, ConfigError> {
        let parse = |reason: String| ConfigError::Parse {
            path: path.to_owned(),
            reason,
        };
        let value: serde_yaml::Value =
            serde_yaml::from_str(text).map_err(|e| parse(e.to_string()))?;
        let value = match value.get("kind").and_then(|k| k.as_str()) {
            Some("ConfigMap") => {
                let inner = value
                    .get("data")
                    .and_then(|d| d.get(CONFIG_MAP_KEY))
                    .and_then(|c| c.as_str())
                    .ok_or_else(|| parse(format!("the ConfigMap has no data.{CONFIG_MAP_KEY}")))?;
                serde_yaml::from_str(inner).map_err(|e| parse(e.to_string()))?
            }
            _ => value,
        };
        let config: VerificationConfig = serde_path_to_error::deserialize(value)
            .map_err(|e| parse(format!("{}: {}", e.path(), e.inner())))?;
        if config.api_version != "v1" {
            return Err(ConfigError::Version(config.api_version, path.to_owned()));
        }
        if config.all_of.is_empty()
            && config
                .any_of
                .as_ref()
                .is_none_or(|a| a.signatures.is_empty())
        {
            return Err(ConfigError::Empty {
                path: path.to_owned(),
            });
        }
        Ok(config)
    }

    /// The config as YAML, what `kwctl verify --verification-config-path` reads and the
    /// ConfigMap's `verification-config` holds.
    pub fn to_yaml(&self) -> Result<String, serde_yaml::Error> {
        serde_yaml::to_string(self)
    }

    /// The keys and annotations of every requirement, or which one cannot be checked offline.
    fn checks<'a>(
        requirements: impl Iterator<Item = &'a Requirement>,
        path: &str,
    ) -> Result<Vec<Trust>, ConfigError> {
        requirements
            .enumerate()
            .map(|(index, requirement)| match requirement {
                Requirement::PubKey {
                    owner,
                    key,
                    annotations,
                } => {
                    let name = match owner {
                        Some(owner) => format!("{path}: pubKey of {owner}"),
                        None => format!("{path}: pubKey #{}", index + 1),
                    };
                    keys::public_key(key.as_bytes(), &name)
                        .map(|key| Trust {
                            key,
                            annotations: annotations.clone(),
                        })
                        .map_err(ConfigError::Key)
                }
                Requirement::GithubAction { owner, repo, .. } => Err(ConfigError::Keyless {
                    path: path.to_owned(),
                    kind: "githubAction",
                    owner: format!(
                        " ({owner}{})",
                        repo.as_deref().map(|r| format!("/{r}")).unwrap_or_default()
                    ),
                }),
                Requirement::GenericIssuer { issuer, .. } => Err(ConfigError::Keyless {
                    path: path.to_owned(),
                    kind: "genericIssuer",
                    owner: format!(" ({issuer})"),
                }),
            })
            .collect()
    }

    /// Checks `reference` as the policy-server would: every `allOf` requirement and
    /// `minimumMatches` of `anyOf`. `Err(Refused)` names the first requirement not met.
    pub fn verify(
        &self,
        reference: &str,
        path: &str,
        insecure: bool,
    ) -> Result<Vec<Signature>, VerifyError> {
        let all = Self::checks(self.all_of.iter(), path)?;
        let any = match &self.any_of {
            Some(any) => (
                Self::checks(any.signatures.iter(), path)?,
                any.minimum_matches,
            ),
            None => (Vec::new(), 0),
        };
        // Read once: every requirement is checked against the same digest.
        let signatures = signing::signatures(reference, insecure)?;
        let mut verified = Vec::new();
        for trust in &all {
            verified.push(signatures.check(trust)?);
        }
        let mut refusals = Vec::new();
        let mut matched = 0;
        for trust in &any.0 {
            match signatures.check(trust) {
                Ok(signature) => {
                    matched += 1;
                    verified.push(signature);
                }
                Err(SignError::Refused(why)) => refusals.push(why),
                Err(e) => return Err(e.into()),
            }
        }
        if matched < any.1 {
            return Err(SignError::Refused(format!(
                "{path}: anyOf needs {} signature(s), {matched} verified; first refusal: {}",
                any.1,
                refusals.first().map_or("none", String::as_str)
            ))
            .into());
        }
        Ok(verified)
    }
}

#[derive(Debug, Error)]
pub enum VerifyError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Sign(#[from] SignError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_for_a_key_reads_back() {
        let pair = keys::generate(b"").unwrap();
        let key = keys::public_key(pair.public_pem.as_bytes(), "k.pub").unwrap();
        let annotations = BTreeMap::from([("env".to_owned(), "prod".to_owned())]);
        let yaml = VerificationConfig::for_keys(&[key], &annotations)
            .to_yaml()
            .unwrap();
        let back = VerificationConfig::read(&yaml, "v.yaml").unwrap();
        let [
            Requirement::PubKey {
                key, annotations, ..
            },
        ] = back.all_of.as_slice()
        else {
            panic!("{back:?}")
        };
        assert_eq!(key, &pair.public_pem);
        assert_eq!(annotations["env"], "prod");
        let checks = VerificationConfig::checks(back.all_of.iter(), "v.yaml").unwrap();
        assert_eq!(checks.len(), 1);
    }

    #[test]
    fn keyless_and_malformed_configs_say_what_is_wrong() {
        let keyless = VerificationConfig::read(
            "apiVersion: v1\nallOf:\n  - kind: githubAction\n    owner: cozystack\n    repo: capabilities-policy\n",
            "c.yaml",
        )
        .unwrap();
        let err = VerificationConfig::checks(keyless.all_of.iter(), "c.yaml")
            .err()
            .unwrap();
        assert_eq!(
            err.to_string(),
            "c.yaml: the githubAction requirement (cozystack/capabilities-policy) is keyless (Fulcio and Rekor): check it with `kwctl verify --verification-config-path` or let the policy-server do it"
        );
        let err = VerificationConfig::read("apiVersion: v2\nallOf: []\n", "c.yaml").unwrap_err();
        assert_eq!(err.to_string(), "c.yaml: apiVersion v2 (expected v1)");
        let err = VerificationConfig::read("apiVersion: v1\n", "c.yaml").unwrap_err();
        assert_eq!(
            err.to_string(),
            "c.yaml: no signature requirement (allOf and anyOf are empty)"
        );
        let err = VerificationConfig::read("apiVersion: v1\nallOf:\n  - kind: pgp\n", "c.yaml")
            .unwrap_err();
        assert!(
            err.to_string().starts_with(
                "c.yaml: not a Kubewarden verification config: allOf[0].kind: unknown variant `pgp`"
            ),
            "{err}"
        );
    }
}
