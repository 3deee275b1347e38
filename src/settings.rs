//! Settings decoding for `validate_settings` and `validate`: the resolver owns the settings
//! type and its checks, this only turns bytes into it.

use cozystack_resolver::Settings;

/// Parses and validates settings JSON, every field of it: `validate_settings`. The error names
/// the offending field.
pub fn parse(payload: &[u8]) -> Result<Settings, String> {
    Settings::from_json(text(payload)?).map_err(|err| err.to_string())
}

/// Parses settings JSON for one `validate`: each kind's `definitions` block is decoded and
/// checked when the request needs that kind's rules.
pub fn parse_for_request(payload: &[u8]) -> Result<Settings, String> {
    Settings::for_request(text(payload)?).map_err(|err| err.to_string())
}

fn text(payload: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(payload).map_err(|err| format!("settings are not UTF-8: {err}"))
}
