//! Kubewarden policy enforcing Cozystack's application capabilities.
//!
//! The adapter between the Kubewarden host and the resolver: decode the request and the
//! settings, answer the resolver's lookups with host calls, encode the verdict. Every decision
//! is the resolver's.

pub mod admission;
pub mod cluster;
pub mod definitions;
#[doc(hidden)]
pub mod fuzzing;
pub mod host;
pub mod scan;
pub mod settings;

use cozystack_resolver::{DefinitionSource, Verdict};
use kubewarden_policy_sdk::response::ValidationResponse;
use kubewarden_policy_sdk::settings::SettingsValidationResponse;
use kubewarden_policy_sdk::wapc_guest as guest;

use crate::admission::Envelope;
use crate::cluster::HostCluster;
use crate::host::{Host, WapcHost};

/// The waPC entry point: registers the three functions the policy-server calls.
#[unsafe(no_mangle)]
pub extern "C" fn wapc_init() {
    guest::register_function("validate", validate);
    guest::register_function("validate_settings", validate_settings);
    guest::register_function(
        "protocol_version",
        kubewarden_policy_sdk::protocol_version_guest,
    );
}

fn validate(payload: &[u8]) -> guest::CallResult {
    Ok(serde_json::to_vec(&response(evaluate(payload, &WapcHost)))?)
}

fn validate_settings(payload: &[u8]) -> guest::CallResult {
    let response = match settings::parse(payload) {
        // With the built-in rule set, the accepted answer says which rules the module carries.
        Ok(settings) => SettingsValidationResponse {
            valid: true,
            message: (settings.definition_source == DefinitionSource::Builtin)
                .then(cozystack_resolver::model::builtin::summary),
        },
        Err(err) => SettingsValidationResponse {
            valid: false,
            message: Some(err),
        },
    };
    Ok(serde_json::to_vec(&response)?)
}

/// Decides one `validate` payload. Anything that cannot be decoded is rejected with 400.
pub fn evaluate(payload: &[u8], host: &dyn Host) -> Verdict {
    let bad = |message: String| Verdict::deny(cozystack_resolver::verdict::BAD_REQUEST, message);
    let envelope = match Envelope::read(payload) {
        Ok(envelope) => envelope,
        Err(message) => return bad(message),
    };
    let settings = match settings::parse_for_request(envelope.settings.unwrap_or("null").as_bytes())
    {
        Ok(settings) => settings,
        Err(err) => return bad(format!("invalid policy settings: {err}")),
    };
    let request = match envelope.request(&settings) {
        Ok(request) => request,
        Err(err) => return bad(err.to_string()),
    };
    cozystack_resolver::evaluate(&request, &settings, &HostCluster::new(host))
}

/// The Kubewarden wire form of a verdict. Warnings travel on accepted responses too.
pub fn response(verdict: Verdict) -> ValidationResponse {
    ValidationResponse {
        accepted: verdict.allowed,
        message: verdict.message,
        code: verdict.code,
        mutated_object: None,
        audit_annotations: None,
        warnings: (!verdict.warnings.is_empty()).then_some(verdict.warnings),
    }
}
