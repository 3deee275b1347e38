//! The policy's settings as an operator has them: the ClusterAdmissionPolicy they deployed, or
//! a settings object.

use std::path::Path;

use crate::error::Error;
use cozystack_policy_runtime::policy::Policy;
use serde_json::{Value, json};

/// A settings object, or a ClusterAdmissionPolicy (its `spec.settings`); none given is `{}`.
pub fn read(path: Option<&Path>) -> Result<Value, Error> {
    let Some(path) = path else {
        return Ok(json!({}));
    };
    let text = std::fs::read_to_string(path).map_err(|e| Error::read(path, e))?;
    let value: Value = serde_yaml::from_str(&text).map_err(|e| Error::decode(path.display(), e))?;
    Ok(match value.pointer("/spec/settings") {
        Some(settings) if value["kind"] == "ClusterAdmissionPolicy" => settings.clone(),
        _ if value["kind"] == "ClusterAdmissionPolicy" => json!({}),
        _ => value,
    })
}

/// The settings as the resolver reads them, for what the tool models of the cluster (the Tenant
/// chart's switches, the release); the module itself judges them through `validate_settings`.
pub fn resolved(settings: &Value) -> Result<cozystack_resolver::Settings, Error> {
    cozystack_resolver::Settings::for_request(&settings.to_string())
        .map_err(|e| format!("settings: {e}").into())
}

/// What the policy-server does before it serves a request: `validate_settings`, and refuse to
/// go on when the policy answers that the settings are invalid.
pub fn check(policy: &Policy, settings: &Value) -> Result<(), Error> {
    let valid = policy.validate_settings(settings)?;
    if valid["valid"] == true {
        return Ok(());
    }
    Err(format!(
        "the settings are invalid: {}",
        valid["message"].as_str().unwrap_or("no reason given")
    )
    .into())
}
