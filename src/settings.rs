//! Settings decoding for `validate_settings` and `validate`: the resolver owns the settings
//! type and its checks, this only turns bytes into it.

use cozystack_resolver::Settings;

/// Parses and validates settings JSON; the error names the offending field.
pub fn parse(payload: &[u8]) -> Result<Settings, String> {
    let text =
        std::str::from_utf8(payload).map_err(|err| format!("settings are not UTF-8: {err}"))?;
    Settings::from_json(text).map_err(|err| err.to_string())
}
