//! Errors the resolver reports. Each becomes a one-line rejection in the policy.

use serde::de::DeserializeOwned;

use crate::model::json_path::path_of;
use thiserror::Error;

/// A rule source (settings or an ApplicationDefinition) that does not decode or validate.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RuleError {
    #[error("{path}: {reason}")]
    Invalid { path: String, reason: String },
    #[error("ApplicationDefinition {definition}: {path}: {reason}")]
    Definition {
        definition: String,
        path: String,
        reason: String,
    },
}

impl RuleError {
    pub fn path(&self) -> &str {
        match self {
            RuleError::Invalid { path, .. } | RuleError::Definition { path, .. } => path,
        }
    }

    pub fn reason(&self) -> &str {
        match self {
            RuleError::Invalid { reason, .. } | RuleError::Definition { reason, .. } => reason,
        }
    }
}

/// A fact the resolver needed could not be obtained. `what` names the lookup.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("lookup failed: {what}: {reason}")]
pub struct LookupError {
    pub what: String,
    pub reason: String,
}

impl LookupError {
    pub fn new(what: impl Into<String>, reason: impl Into<String>) -> Self {
        LookupError {
            what: what.into(),
            reason: reason.into(),
        }
    }
}

/// A serde_json error without its " at line L column C" suffix: settings and definitions reach
/// the policy re-serialised, so the position means nothing to the person who wrote them.
pub fn without_position(err: &serde_json::Error) -> String {
    let text = err.to_string();
    match text.rfind(" at line ") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

/// Where a JSON text failed to decode: the path in serde_path_to_error's notation (`.` for the
/// root) and the reason without a position.
#[derive(Debug)]
pub struct JsonError {
    pub path: String,
    pub reason: String,
}

/// Decodes `text`, and finds the path of a problem only when there is one: every request
/// decodes the settings, and a decoder that tracks paths is a second copy of every
/// deserialiser in the module.
pub fn decode_json<T: DeserializeOwned>(text: &str) -> Result<T, JsonError> {
    serde_json::from_str(text).map_err(|err| JsonError {
        path: path_of(text, &err),
        reason: without_position(&err),
    })
}
