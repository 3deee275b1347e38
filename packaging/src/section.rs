//! The wasm custom section `io.kubewarden.metadata` that carries the policy metadata as JSON,
//! where kwctl writes it and the policy-evaluator reads it.

use thiserror::Error;
use wasm_encoder::{CustomSection, Module, RawSection};
use wasmparser::{Parser, Payload};

pub const METADATA_SECTION: &str = "io.kubewarden.metadata";

#[derive(Debug, Error)]
pub enum SectionError {
    #[error("not a wasm module: it does not begin with the wasm magic number (\\0asm)")]
    NotWasm,
    #[error("not a valid wasm module: {message} (at byte {offset})")]
    Parse { message: String, offset: usize },
    #[error("the {METADATA_SECTION} section is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl From<wasmparser::BinaryReaderError> for SectionError {
    /// One line: wasmparser's own message spells a bad magic number out byte by byte.
    fn from(error: wasmparser::BinaryReaderError) -> SectionError {
        SectionError::Parse {
            message: error.message().replace('\n', " "),
            offset: error.offset(),
        }
    }
}

/// The bytes every wasm module begins with.
fn check_magic(wasm: &[u8]) -> Result<(), SectionError> {
    match wasm.starts_with(b"\0asm") {
        true => Ok(()),
        false => Err(SectionError::NotWasm),
    }
}

/// Returns `wasm` with its metadata section replaced by `metadata` (every other section is
/// copied byte for byte, in order).
pub fn write_metadata(wasm: &[u8], metadata: &serde_json::Value) -> Result<Vec<u8>, SectionError> {
    check_magic(wasm)?;
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

/// The bytes of `wasm` that are code and data, not custom sections: what the policy-server
/// compiles and instantiates, whatever the metadata and the README (as usage) weigh.
pub fn code_size(wasm: &[u8]) -> Result<usize, SectionError> {
    check_magic(wasm)?;
    let mut custom = 0;
    for payload in Parser::new(0).parse_all(wasm) {
        if let Payload::CustomSection(reader) = payload? {
            // The section's id byte and its size's LEB128 bytes, then its contents.
            let size = reader.range().len();
            custom += 1 + leb128_len(size) + size;
        }
    }
    Ok(wasm.len() - custom)
}

fn leb128_len(mut value: usize) -> usize {
    let mut bytes = 1;
    while value >= 0x80 {
        value >>= 7;
        bytes += 1;
    }
    bytes
}

/// The metadata embedded in `wasm`, if it was annotated.
pub fn read_metadata(wasm: &[u8]) -> Result<Option<serde_json::Value>, SectionError> {
    check_magic(wasm)?;
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

    /// Annotating adds custom sections only: the code size stays what it was.
    #[test]
    fn the_code_size_leaves_the_custom_sections_out() {
        let plain = module();
        let code = code_size(&plain).unwrap();
        let annotated = write_metadata(&plain, &json!({"usage": "x".repeat(10_000)})).unwrap();
        assert!(annotated.len() > plain.len() + 10_000);
        assert_eq!(code_size(&annotated).unwrap(), code);
        // The plain module's own custom section ("producers", one byte) is left out too.
        assert_eq!(code, plain.len() - (1 + 1 + ("producers".len() + 1) + 1));
    }

    #[test]
    fn a_file_that_is_no_module_is_said_in_one_line() {
        let err = read_metadata(b"apiVersion: v1\nkind: List\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "not a wasm module: it does not begin with the wasm magic number (\\0asm)"
        );
        let err = read_metadata(b"\0asm\x01\0\0\0\x01")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("not a valid wasm module: ") && !err.contains('\n'),
            "{err}"
        );
    }

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
