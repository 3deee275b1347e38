//! The committed settings schema must match the settings type; `make schema` regenerates it.

#[test]
fn settings_schema_is_current() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/settings.schema.json");
    let generated = serde_json::to_string_pretty(&cozystack_resolver::Settings::json_schema())
        .expect("schema serialises")
        + "\n";
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::write(path, &generated).expect("write settings.schema.json");
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == generated,
        "settings.schema.json is out of date with the Settings type: run `make schema` and commit it"
    );
}
