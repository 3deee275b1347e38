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
    Registry(oci_client::errors::OciDistributionError),
    /// The registry refused the credentials sent (none, or those stored for it).
    #[error(
        "registry: {url}: authentication required or refused: log in with `docker login` (or `podman login`) to the registry; this tool reads the credentials they store"
    )]
    Unauthorized { url: String },
    #[error("{0}")]
    Invalid(String),
    /// The registry took the connection and did not finish answering in time.
    #[error(
        "registry: no complete answer within {0} s (a registry that accepts connections and does not answer, or a proxy that holds them); check the address, or raise {TIMEOUT_VAR}"
    )]
    Timeout(u64),
}

/// The variable that sets how long one registry operation may take, in seconds.
pub const TIMEOUT_VAR: &str = "COZYSTACK_POLICY_REGISTRY_TIMEOUT";

/// How long one registry operation (a push, a pull, a verification) may take: a registry that
/// never answers must not hang a CI job. Neither oci-client's nor sigstore's client bounds a
/// whole operation, so the verbs do.
fn timeout() -> u64 {
    std::env::var(TIMEOUT_VAR)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&s| s > 0)
        .unwrap_or(120)
}

/// Runs one registry operation to completion on a runtime of its own, within [`timeout`].
pub(crate) fn block_on<T, E: From<OciError>>(
    operation: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let seconds = timeout();
    runtime()?.block_on(async {
        tokio::time::timeout(std::time::Duration::from_secs(seconds), operation)
            .await
            .map_err(|_| OciError::Timeout(seconds))?
    })
}

impl From<oci_client::errors::OciDistributionError> for OciError {
    fn from(error: oci_client::errors::OciDistributionError) -> Self {
        use oci_client::errors::OciDistributionError as E;
        match error {
            E::ServerError {
                code: 401 | 403,
                url,
                ..
            } => OciError::Unauthorized { url },
            E::AuthenticationFailure(url) => OciError::Unauthorized { url },
            other => OciError::Registry(other),
        }
    }
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

pub(crate) fn client(insecure: bool) -> Client {
    Client::new(ClientConfig {
        protocol: if insecure {
            ClientProtocol::Http
        } else {
            ClientProtocol::Https
        },
        connect_timeout: Some(std::time::Duration::from_secs(10)),
        ..ClientConfig::default()
    })
}

/// The credentials `docker login` (or `podman login`) stored for `reference`'s registry, as
/// kwctl reads them; anonymous when none is stored. A credential helper that fails is an error,
/// not a silent anonymous request.
pub(crate) fn auth(reference: &Reference) -> Result<RegistryAuth, OciError> {
    use docker_credential::{CredentialRetrievalError as Missing, DockerCredential};
    let server = reference.resolve_registry();
    let stored = docker_credential::get_credential(server).or_else(|err| match err {
        Missing::ConfigNotFound | Missing::ConfigReadError | Missing::NoCredentialConfigured => {
            docker_credential::get_podman_credential(server)
        }
        other => Err(other),
    });
    match stored {
        Ok(DockerCredential::UsernamePassword(user, password)) => {
            Ok(RegistryAuth::Basic(user, password))
        }
        Ok(DockerCredential::IdentityToken(_)) => Err(OciError::Invalid(format!(
            "{server}: the stored credential is an identity token, which is not supported: log in with a username and password"
        ))),
        Err(
            Missing::ConfigNotFound | Missing::ConfigReadError | Missing::NoCredentialConfigured,
        ) => Ok(RegistryAuth::Anonymous),
        Err(err) => Err(OciError::Invalid(format!("{server}: credentials: {err}"))),
    }
}

/// A reference as kwctl names it (`registry://` optional).
pub(crate) fn reference(text: &str) -> Result<Reference, OciError> {
    let text = text.strip_prefix("registry://").unwrap_or(text);
    text.parse()
        .map_err(|e: oci_client::ParseError| OciError::Reference(text.to_owned(), e.to_string()))
}

pub(crate) fn sha256(data: &[u8]) -> String {
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
    let auth = auth(&reference)?;
    block_on(async {
        client
            .push(&reference, &[layer], config, &auth, Some(manifest))
            .await?;
        let (manifest, digest) = client.pull_image_manifest(&reference, &auth).await?;
        Ok(describe(&reference, &manifest, &digest, wasm.len()))
    })
}

/// Pulls a module (by tag or digest) and checks its media types and layer digest.
pub fn pull(source: &str, insecure: bool) -> Result<(Vec<u8>, Artifact), OciError> {
    let reference = reference(source)?;
    let client = client(insecure);
    let auth = auth(&reference)?;
    block_on(async {
        let image = client
            .pull(&reference, &auth, vec![LAYER_MEDIA_TYPE])
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

/// `registry/repo@digest` of the manifest `reference` names now (a tag resolved once).
pub fn resolve(reference: &str, insecure: bool) -> Result<String, OciError> {
    let reference = self::reference(reference)?;
    let auth = auth(&reference)?;
    let client = client(insecure);
    let digest = block_on(async {
        Ok::<_, OciError>(client.fetch_manifest_digest(&reference, &auth).await?)
    })?;
    Ok(format!(
        "{}/{}@{digest}",
        reference.registry(),
        reference.repository()
    ))
}

/// A manifest the registry does not have (as opposed to a registry that failed).
fn not_found(error: &oci_client::errors::OciDistributionError) -> bool {
    use oci_client::errors::{OciDistributionError as E, OciErrorCode};
    match error {
        E::ImageManifestNotFoundError(_) => true,
        E::RegistryError { envelope, .. } => envelope.errors.iter().any(|e| {
            matches!(
                e.code,
                OciErrorCode::ManifestUnknown | OciErrorCode::NotFound
            )
        }),
        E::ServerError { code, .. } => *code == 404,
        _ => false,
    }
}

/// The layers of `media_type` under `reference`, or `None` when there is no such manifest.
pub(crate) async fn pull_layers(
    reference: &str,
    media_type: &str,
    insecure: bool,
) -> Result<Option<Vec<Vec<u8>>>, OciError> {
    let reference = self::reference(reference)?;
    match client(insecure)
        .pull(&reference, &auth(&reference)?, vec![media_type])
        .await
    {
        Ok(image) => Ok(Some(
            image.layers.into_iter().map(|l| l.data.to_vec()).collect(),
        )),
        Err(e) if not_found(&e) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// An attachment in cosign's layout: an image manifest of one layer under the tag
/// `sha256-<digest>.<suffix>` beside the artifact (`cosign attach sbom` writes `.sbom`).
pub(crate) struct Attachment<'a> {
    pub suffix: &'a str,
    pub media_type: &'a str,
}

impl Attachment<'_> {
    /// The tag of this attachment to the manifest `reference` names.
    async fn tag(
        &self,
        client: &Client,
        reference: &Reference,
        auth: &RegistryAuth,
    ) -> Result<Reference, OciError> {
        let digest = client.fetch_manifest_digest(reference, auth).await?;
        let tag = Reference::with_tag(
            reference.registry().to_owned(),
            reference.repository().to_owned(),
            format!("{}.{}", digest.replace(':', "-"), self.suffix),
        );
        Ok(tag)
    }

    /// Attaches `data` to `reference`; returns the attachment's own `repo@digest`.
    pub fn push(&self, reference: &str, data: &[u8], insecure: bool) -> Result<String, OciError> {
        let reference = self::reference(reference)?;
        let client = client(insecure);
        let auth = auth(&reference)?;
        block_on(async {
            let tag = self.tag(&client, &reference, &auth).await?;
            let layer = ImageLayer::new(data.to_vec(), self.media_type.to_owned(), None);
            let config = Config::oci_v1(b"{}".to_vec(), None);
            let manifest = OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
            client
                .push(&tag, &[layer], config, &auth, Some(manifest))
                .await?;
            let digest = client.fetch_manifest_digest(&tag, &auth).await?;
            Ok(format!("{}/{}@{digest}", tag.registry(), tag.repository()))
        })
    }

    /// The attachment of `reference`: its data and its own `repo@digest`, `None` when absent.
    pub fn pull(
        &self,
        reference: &str,
        insecure: bool,
    ) -> Result<Option<(Vec<u8>, String)>, OciError> {
        let reference = self::reference(reference)?;
        let client = client(insecure);
        let auth = auth(&reference)?;
        block_on(async {
            let tag = self.tag(&client, &reference, &auth).await?;
            let image = match client.pull(&tag, &auth, vec![self.media_type]).await {
                Ok(image) => image,
                Err(e) if not_found(&e) => return Ok(None),
                Err(e) => return Err(e.into()),
            };
            let digest = image
                .digest
                .ok_or_else(|| OciError::Invalid("the registry returned no digest".into()))?;
            let [layer] = image.layers.as_slice() else {
                return Err(OciError::Invalid(format!(
                    "{tag}: expected one {} layer, got {}",
                    self.media_type,
                    image.layers.len()
                )));
            };
            Ok(Some((
                layer.data.to_vec(),
                format!("{}/{}@{digest}", tag.registry(), tag.repository()),
            )))
        })
    }
}
