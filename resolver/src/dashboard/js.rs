//! The JavaScript API (feature `js`, target wasm32-unknown-unknown): JSON in, JSON out, so a
//! dashboard shows exactly what admission will decide.

use serde::Serialize;
use serde::de::DeserializeOwned;
use wasm_bindgen::prelude::*;

use crate::dashboard::access::Access;
use crate::model::definition::Definition;
use crate::model::facts::{Instance, Namespace, Snapshot};
use crate::model::identity::User;
use crate::model::request::Request;
use crate::model::settings::Settings;

fn parse<T: DeserializeOwned>(what: &str, json: &str) -> Result<T, JsError> {
    serde_json::from_str(json).map_err(|e| JsError::new(&format!("{what}: {e}")))
}

fn settings(json: Option<String>) -> Result<Settings, JsError> {
    match json {
        Some(text) => {
            Settings::from_json(&text).map_err(|e| JsError::new(&format!("settings: {e}")))
        }
        None => Ok(Settings::default()),
    }
}

fn to_json(value: &impl Serialize) -> Result<String, JsError> {
    serde_json::to_string(value).map_err(|e| JsError::new(&e.to_string()))
}

/// `catalog(definitions, user, namespace, instances, settings?, access?)` → JSON list of
/// `{kind, placement: "marketplace"|"modules"|"hidden", canCreate, reason?, refusedBy?:
/// "rbac"|"policy"|"both", warnings?}`. `access` is the user's RBAC in the namespace: a
/// SelfSubjectRulesReview's `status`, or verbs per plural or kind; without it only the policy's
/// half is answered.
#[wasm_bindgen]
pub fn catalog(
    definitions: &str,
    user: &str,
    namespace: &str,
    instances: &str,
    settings_json: Option<String>,
    access_json: Option<String>,
) -> Result<String, JsError> {
    let definitions: Vec<Definition> = parse("definitions", definitions)?;
    let user: User = parse("user", user)?;
    let namespace: Namespace = parse("namespace", namespace)?;
    let instances: Vec<Instance> = parse("instances", instances)?;
    let access: Option<Access> = access_json.map(|json| parse("access", &json)).transpose()?;
    let entries = crate::dashboard::catalog::catalog(
        &definitions,
        &user,
        &namespace,
        &instances,
        &settings(settings_json)?,
        access.as_ref(),
    );
    to_json(&entries)
}

/// `evaluate(request, facts, settings?)` → JSON verdict `{allowed, code?, message?, warnings?}`,
/// the verdict the policy returns for that request on those facts.
#[wasm_bindgen]
pub fn evaluate(
    request: &str,
    facts: &str,
    settings_json: Option<String>,
) -> Result<String, JsError> {
    let request: Request = parse("request", request)?;
    let facts: Snapshot = parse("facts", facts)?;
    to_json(&crate::decide::evaluate(
        &request,
        &settings(settings_json)?,
        &facts,
    ))
}

/// `validateSettings(settings)` → `null` when valid, else the message `validate_settings` gives.
#[wasm_bindgen(js_name = validateSettings)]
pub fn validate_settings(settings_json: &str) -> Option<String> {
    Settings::from_json(settings_json)
        .err()
        .map(|e| e.to_string())
}
