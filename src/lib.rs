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

use cozystack_resolver::Verdict;
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
            message: settings
                .definition_source
                .builds_on_stock()
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
    pub audit_annotations: Option<Rows>,
    pub warnings: Option<Vec<String>>,
}

/// The rows of the rule table that spoke, as audit annotations (the API server files them as
/// `<webhook>/rule` and `<webhook>/warned-by`): a tool reads which rule refused from these, never
/// from the wording of a message.
#[derive(Debug, Serialize)]
pub struct Rows {
    /// The row that refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<&'static str>,
    /// The row of each warning, in their order, separated by commas.
    #[serde(rename = "warned-by", skip_serializing_if = "String::is_empty")]
    pub warned_by: String,
    /// The rows whose refusal a platform writer was let through with a warning.
    #[serde(rename = "waived-by", skip_serializing_if = "String::is_empty")]
    pub waived_by: String,
}

/// The Kubewarden wire form of a verdict. Warnings travel on accepted responses too.
pub fn response(verdict: Verdict) -> Response {
    let rows = Rows {
        rule: verdict.rule,
        warned_by: verdict.warned_by.join(","),
        waived_by: verdict.waived_by.join(","),
    };
    Response {
        accepted: verdict.allowed,
        message: verdict.message,
        code: verdict.code,
        mutated_object: None,
        audit_annotations: (rows.rule.is_some() || !rows.warned_by.is_empty()).then_some(rows),
        warnings: (!verdict.warnings.is_empty()).then_some(verdict.warnings),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubewarden_policy_sdk::response::ValidationResponse;

    /// What the SDK's own type writes for the same verdict, as JSON (its annotations are a hash
    /// map: compared as values, the order of their keys is not the wire's).
    fn sdk(verdict: &Verdict) -> serde_json::Value {
        let mut annotations = std::collections::HashMap::new();
        if let Some(rule) = verdict.rule {
            annotations.insert("rule".to_owned(), rule.to_owned());
        }
        if !verdict.warned_by.is_empty() {
            annotations.insert("warned-by".to_owned(), verdict.warned_by.join(","));
        }
        if !verdict.waived_by.is_empty() {
            annotations.insert("waived-by".to_owned(), verdict.waived_by.join(","));
        }
        serde_json::to_value(ValidationResponse {
            accepted: verdict.allowed,
            message: verdict.message.clone(),
            code: verdict.code,
            mutated_object: None,
            audit_annotations: (!annotations.is_empty()).then_some(annotations),
            warnings: (!verdict.warnings.is_empty()).then(|| verdict.warnings.clone()),
        })
        .unwrap()
    }

    #[test]
    fn the_response_is_the_sdks() {
        let mut warned = Verdict::allow();
        warned.warnings = vec!["a \"quoted\" warning".to_owned(), "é".to_owned()];
        warned.warned_by = vec!["protection", "capability"];
        warned.waived_by = vec!["protection"];
        let mut refused = Verdict::deny(403, "Redis tenant-a/cache is refused: one line");
        refused.rule = Some("cardinality");
        refused.warnings = vec!["w".to_owned()];
        refused.warned_by = vec!["slots"];
        for verdict in [
            Verdict::allow(),
            warned,
            refused,
            Verdict::deny(400, String::new()),
        ] {
            let ours = serde_json::to_value(response(verdict.clone())).unwrap();
            assert_eq!(ours, sdk(&verdict));
        }
        assert_eq!(
            serde_json::to_string(&response(Verdict::deny(403, "no".to_owned()))).unwrap(),
            r#"{"accepted":false,"message":"no","code":403,"mutated_object":null,"audit_annotations":null,"warnings":null}"#
        );
        let mut cardinality = Verdict::deny(403, "no".to_owned());
        cardinality.rule = Some("cardinality");
        assert_eq!(
            serde_json::to_string(&response(cardinality)).unwrap(),
            r#"{"accepted":false,"message":"no","code":403,"mutated_object":null,"audit_annotations":{"rule":"cardinality"},"warnings":null}"#
        );
    }
}
