//! Kubewarden policy enforcing Cozystack's application capabilities.
//!
//! The adapter between the Kubewarden host and the resolver: decode the request and the
//! settings, answer the resolver's lookups with host calls, encode the verdict. Every decision
//! is the resolver's.

pub mod admission;
pub mod cluster;
pub mod definitions;
pub mod host;
pub mod scan;
pub mod settings;

use cozystack_resolver::{DefinitionSource, Verdict};
use kubewarden_policy_sdk::settings::SettingsValidationResponse;
use kubewarden_policy_sdk::wapc_guest as guest;
use serde::Serialize;

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

/// The SDK's `ValidationResponse` as the policy-server reads it, field for field and byte for
/// byte, without what a validating policy never sends: the SDK's type holds the mutated object
/// as a JSON value and the audit annotations as a hash map, whose serialisers (a float writer
/// and a hash table among them) would otherwise be compiled into the module.
#[derive(Debug, Serialize)]
pub struct Response {
    pub accepted: bool,
    pub message: Option<String>,
    pub code: Option<u16>,
    /// Always `null`: this policy does not mutate.
    mutated_object: Option<()>,
    /// Always `null`.
    audit_annotations: Option<()>,
    pub warnings: Option<Vec<String>>,
}

/// The Kubewarden wire form of a verdict. Warnings travel on accepted responses too.
pub fn response(verdict: Verdict) -> Response {
    Response {
        accepted: verdict.allowed,
        message: verdict.message,
        code: verdict.code,
        mutated_object: None,
        audit_annotations: None,
        warnings: (!verdict.warnings.is_empty()).then_some(verdict.warnings),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubewarden_policy_sdk::response::ValidationResponse;

    /// What the SDK's own type writes for the same verdict.
    fn sdk(verdict: &Verdict) -> Vec<u8> {
        serde_json::to_vec(&ValidationResponse {
            accepted: verdict.allowed,
            message: verdict.message.clone(),
            code: verdict.code,
            mutated_object: None,
            audit_annotations: None,
            warnings: (!verdict.warnings.is_empty()).then(|| verdict.warnings.clone()),
        })
        .unwrap()
    }

    #[test]
    fn the_response_is_the_sdks_byte_for_byte() {
        let mut warned = Verdict::allow();
        warned.warnings = vec!["a \"quoted\" warning".to_owned(), "é".to_owned()];
        for verdict in [
            Verdict::allow(),
            warned,
            Verdict::deny(403, "Redis tenant-a/cache is refused: one line".to_owned()),
            Verdict::deny(400, String::new()),
        ] {
            let ours = serde_json::to_vec(&response(verdict.clone())).unwrap();
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                String::from_utf8(sdk(&verdict)).unwrap()
            );
        }
        assert_eq!(
            serde_json::to_string(&response(Verdict::deny(403, "no".to_owned()))).unwrap(),
            r#"{"accepted":false,"message":"no","code":403,"mutated_object":null,"audit_annotations":null,"warnings":null}"#
        );
    }
}
