//! Settings decoding for `validate_settings` and `validate`: the resolver owns the settings
//! type and its checks, this only turns bytes into it.

use cozystack_resolver::Settings;
use serde::Deserialize;
use serde::de::{MapAccess, Visitor, value::MapAccessDeserializer};

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

/// Settings read in the same pass as the payload around them: `Settings` read only from an
/// object (serde would also read a struct from an array, field by position), `null` as the
/// defaults. The caller checks them with [`Settings::validate`]; on any error it reads the
/// payload again the slow way, which names the path of the problem.
pub struct Inline(pub Settings);

impl<'de> Deserialize<'de> for Inline {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Object;
        impl<'de> Visitor<'de> for Object {
            type Value = Inline;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("the settings object")
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Inline, E> {
                Ok(Inline(Settings::default()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Inline, A::Error> {
                Settings::deserialize(MapAccessDeserializer::new(map)).map(Inline)
            }
        }
        deserializer.deserialize_any(Object)
    }
}
