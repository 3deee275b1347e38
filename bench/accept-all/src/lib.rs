//! Accepts everything after decoding the request with the SDK: what decoding alone costs.

use kubewarden_policy_sdk::request::ValidationRequest;
use kubewarden_policy_sdk::settings::Validatable;
use kubewarden_policy_sdk::wapc_guest as guest;
use serde::Deserialize;

#[derive(Deserialize, Default)]
struct Settings {}

impl Validatable for Settings {
    fn validate(&self) -> Result<(), String> {
        Ok(())
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn wapc_init() {
    guest::register_function("validate", validate);
    guest::register_function(
        "validate_settings",
        kubewarden_policy_sdk::validate_settings::<Settings>,
    );
    guest::register_function(
        "protocol_version",
        kubewarden_policy_sdk::protocol_version_guest,
    );
}

fn validate(payload: &[u8]) -> guest::CallResult {
    let _request = ValidationRequest::<serde_json::Value>::new(payload)?;
    kubewarden_policy_sdk::accept_request()
}
