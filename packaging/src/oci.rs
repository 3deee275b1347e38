//! The policy as an OCI artifact: an image manifest with the wasm config media type and one
//! wasm layer, as `kwctl push` writes it.

use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::manifest::OciImageManifest;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::metadata::manifest_annotations;
use crate::section::read_metadata;

pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v1+json";
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.wasm.content.layer.v1+wasm";

#[derive(Debug, Error)]
pub enum OciError {
    #[error("invalid reference {0}: {1}")]
    Reference(String, String),
    #[error(
        "the module is not annotated (no io.kubewarden.metadata section): run make annotated-policy.wasm"
    )]
    NotAnnotated,
    #[error("{0}")]
    Section(#[from] crate::section::SectionError),
    #[error("registry: {0}")]
    Registry(#[from] oci_client::errors::OciDistributionError),
    #[error("{0}")]
    Invalid(String),
}

/// What a push or pull reports.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    /// `registry/repo@sha256:…` of the manifest.
    pub immutable_ref: String,
    pub manifest_digest: String,
    pub config_media_type: String,
    pub layer_media_types: Vec<String>,
    pub layer_digest: String,
    pub size: usize,
    pub annotations: std::collections::BTreeMap<String, String>,
}

fn client(insecure: bool) -> Client {
    Client::new(ClientConfig {
        protocol: if insecure {
            ClientProtocol::Http
        } else {
            ClientProtocol::Https
        },
        ..ClientConfig::default()
    })
}

fn reference(text: &str) -> Result<Reference, OciError> {
    let text = text.strip_prefix("registry://").unwrap_or(text);
    text.parse()
        .map_err(|e: oci_client::ParseError| OciError::Reference(text.to_owned(), e.to_string()))
}

fn sha256(data: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(data))
}

fn runtime() -> Result<tokio::runtime::Runtime, OciError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| OciError::Invalid(e.to_string()))
}

fn describe(
    reference: &Reference,
    manifest: &OciImageManifest,
    digest: &str,
    size: usize,
) -> Artifact {
    Artifact {
        immutable_ref: format!(
            "{}/{}@{digest}",
            reference.registry(),
            reference.repository()
        ),
        manifest_digest: digest.to_owned(),
        config_media_type: manifest.config.media_type.clone(),
        layer_media_types: manifest
            .layers
            .iter()
            .map(|l| l.media_type.clone())
            .collect(),
        layer_digest: manifest
            .layers
            .first()
            .map(|l| l.digest.clone())
            .unwrap_or_default(),
        size,
        annotations: manifest.annotations.clone().unwrap_or_default(),
    }
}

/// Pushes an annotated module; `insecure` talks plain HTTP (a registry on loopback).
pub fn push(wasm: &[u8], target: &str, insecure: bool) -> Result<Artifact, OciError> {
    let metadata = read_metadata(wasm)?.ok_or(OciError::NotAnnotated)?;
    let reference = reference(target)?;
    let layer = ImageLayer::new(wasm.to_vec(), LAYER_MEDIA_TYPE.to_owned(), None);
    let config = Config::new(b"{}".to_vec(), CONFIG_MEDIA_TYPE.to_owned(), None);
    let manifest = OciImageManifest::build(
        std::slice::from_ref(&layer),
        &config,
        Some(manifest_annotations(&metadata)),
    );
    let client = client(insecure);
    runtime()?.block_on(async {
        client
            .push(
                &reference,
                &[layer],
                config,
                &RegistryAuth::Anonymous,
                Some(manifest),
            )
            .await?;
        let (manifest, digest) = client
            .pull_image_manifest(&reference, &RegistryAuth::Anonymous)
            .await?;
        Ok(describe(&reference, &manifest, &digest, wasm.len()))
    })
}

/// Pulls a module (by tag or digest) and checks its media types and layer digest.
pub fn pull(source: &str, insecure: bool) -> Result<(Vec<u8>, Artifact), OciError> {
    let reference = reference(source)?;
    let client = client(insecure);
    runtime()?.block_on(async {
        let image = client
            .pull(&reference, &RegistryAuth::Anonymous, vec![LAYER_MEDIA_TYPE])
            .await?;
        let manifest = image
            .manifest
            .ok_or_else(|| OciError::Invalid("the registry returned no manifest".into()))?;
        let digest = image.digest.unwrap_or_default();
        if let Some(expected) = reference.digest()
            && expected != digest
        {
            return Err(OciError::Invalid(format!(
                "asked for {expected}, got {digest}"
            )));
        }
        if manifest.config.media_type != CONFIG_MEDIA_TYPE {
            return Err(OciError::Invalid(format!(
                "config media type {}",
                manifest.config.media_type
            )));
        }
        let [layer] = image.layers.as_slice() else {
            return Err(OciError::Invalid(format!(
                "expected one layer, got {}",
                image.layers.len()
            )));
        };
        if layer.media_type != LAYER_MEDIA_TYPE {
            return Err(OciError::Invalid(format!(
                "layer media type {}",
                layer.media_type
            )));
        }
        let artifact = describe(&reference, &manifest, &digest, layer.data.len());
        if sha256(&layer.data) != artifact.layer_digest {
            return Err(OciError::Invalid(
                "the layer does not match its digest".into(),
            ));
        }
        Ok((layer.data.to_vec(), artifact))
    })
}
