//! The wasm custom section `io.kubewarden.metadata` that carries the policy metadata as JSON,
//! where kwctl writes it and the policy-evaluator reads it.

use thiserror::Error;
use wasm_encoder::{CustomSection, Module, RawSection};
use wasmparser::{Parser, Payload};

pub const METADATA_SECTION: &str = "io.kubewarden.metadata";

#[derive(Debug, Error)]
pub enum SectionError {
    #[error("not a valid wasm module: {0}")]
    Parse(#[from] wasmparser::BinaryReaderError),
    #[error("the {METADATA_SECTION} section is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// Returns `wasm` with its metadata section replaced by `metadata` (every other section is
/// copied byte for byte, in order).
pub fn write_metadata(wasm: &[u8], metadata: &serde_json::Value) -> Result<Vec<u8>, SectionError> {
    let mut module = Module::new();
    for payload in Parser::new(0).parse_all(wasm) {
        let payload = payload?;
        if let Payload::CustomSection(reader) = &payload
            && reader.name() == METADATA_SECTION
        {
            continue;
        }
        if let Some((id, range)) = payload.as_section() {
            module.section(&RawSection {
                id,
                data: &wasm[range],
            });
        }
    }
    let data = serde_json::to_vec(metadata)?;
    module.section(&CustomSection {
        name: METADATA_SECTION.into(),
        data: data.into(),
    });
    Ok(module.finish())
}

/// The metadata embedded in `wasm`, if it was annotated.
pub fn read_metadata(wasm: &[u8]) -> Result<Option<serde_json::Value>, SectionError> {
    for payload in Parser::new(0).parse_all(wasm) {
        if let Payload::CustomSection(reader) = payload?
            && reader.name() == METADATA_SECTION
        {
            return Ok(Some(serde_json::from_slice(reader.data())?));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A minimal module: header, a type section and one custom section of someone else's.
    fn module() -> Vec<u8> {
        let mut m = Module::new();
        let mut types = wasm_encoder::TypeSection::new();
        types.ty().function([], []);
        m.section(&types);
        m.section(&CustomSection {
            name: "producers".into(),
            data: b"x".as_slice().into(),
        });
        m.finish()
    }

    #[test]
    fn write_then_read_and_replace() {
        let wasm = module();
        assert_eq!(read_metadata(&wasm).unwrap(), None);
        let once = write_metadata(&wasm, &json!({"protocolVersion": "v1"})).unwrap();
        assert_eq!(
            read_metadata(&once).unwrap(),
            Some(json!({"protocolVersion": "v1"}))
        );
        let twice = write_metadata(&once, &json!({"protocolVersion": "v2"})).unwrap();
        assert_eq!(
            read_metadata(&twice).unwrap(),
            Some(json!({"protocolVersion": "v2"}))
        );
        assert_eq!(
            twice.len(),
            once.len(),
            "the old section is replaced, not appended"
        );
        wasmparser::Validator::new().validate_all(&twice).unwrap();
        assert!(
            twice.windows(9).any(|w| w == b"producers"),
            "other sections are kept"
        );
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(read_metadata(b"not wasm").is_err());
    }
}
