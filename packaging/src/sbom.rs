//! The policy's SBOM: CycloneDX JSON of the module's crate graph (made from `Cargo.lock` by
//! cargo-cyclonedx, `make sbom`), attached beside the artifact the way `cosign attach sbom
//! --type cyclonedx` attaches one (tag `sha256-<digest>.sbom`, layer
//! `application/vnd.cyclonedx+json`), and signed like the artifact.

use serde::Deserialize;

use crate::oci::{Attachment, OciError};

/// cosign's SBOM attachment for CycloneDX JSON.
const SBOM: Attachment<'static> = Attachment {
    suffix: "sbom",
    media_type: "application/vnd.cyclonedx+json",
};

/// What an SBOM says of itself, enough to tell it is one and what it describes.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub spec_version: String,
    /// `name@version` of the component the SBOM describes.
    pub describes: String,
    pub components: usize,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Bom {
    bom_format: String,
    spec_version: String,
    #[serde(default)]
    metadata: Option<Metadata>,
    #[serde(default)]
    components: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct Metadata {
    component: Option<Component>,
}

#[derive(Deserialize)]
struct Component {
    name: String,
    #[serde(default)]
    version: String,
}

/// Checks that `data` is a CycloneDX JSON document describing one component.
pub fn summarize(data: &[u8]) -> Result<Summary, OciError> {
    let bom: Bom = serde_json::from_slice(data)
        .map_err(|e| OciError::Invalid(format!("not a CycloneDX JSON SBOM: {e}")))?;
    if bom.bom_format != "CycloneDX" {
        return Err(OciError::Invalid(format!(
            "not a CycloneDX SBOM: bomFormat is {}",
            bom.bom_format
        )));
    }
    let component = bom
        .metadata
        .and_then(|m| m.component)
        .ok_or_else(|| OciError::Invalid("the SBOM names no metadata.component".into()))?;
    Ok(Summary {
        spec_version: bom.spec_version,
        describes: format!("{}@{}", component.name, component.version),
        components: bom.components.len(),
    })
}

/// Attaches `sbom` to the artifact `reference` names; returns the SBOM's own `repo@digest`
/// (what to sign).
pub fn attach(reference: &str, sbom: &[u8], insecure: bool) -> Result<String, OciError> {
    summarize(sbom)?;
    SBOM.push(reference, sbom, insecure)
}

/// The SBOM attached to `reference` and its own `repo@digest`; `None` when there is none.
pub fn fetch(reference: &str, insecure: bool) -> Result<Option<(Vec<u8>, String)>, OciError> {
    SBOM.pull(reference, insecure)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_sbom_is_told_from_other_json() {
        let bom = br#"{"bomFormat":"CycloneDX","specVersion":"1.5",
            "metadata":{"component":{"name":"p","version":"0.1.0"}},
            "components":[{"name":"serde","version":"1.0.228"}]}"#;
        let summary = summarize(bom).unwrap();
        assert_eq!(
            (summary.describes.as_str(), summary.components),
            ("p@0.1.0", 1)
        );
        assert_eq!(
            summarize(br#"{"bomFormat":"SPDX","specVersion":"2"}"#)
                .unwrap_err()
                .to_string(),
            "not a CycloneDX SBOM: bomFormat is SPDX"
        );
        assert!(
            summarize(b"[]")
                .unwrap_err()
                .to_string()
                .starts_with("not a CycloneDX JSON SBOM: ")
        );
    }
}
