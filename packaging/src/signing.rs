//! Cosign signatures of an artifact, made and checked with the `sigstore` crate (the library
//! Kubewarden's own verifier uses): the "simple signing" payload for the manifest digest,
//! stored as cosign stores it, in the same repository under the tag `sha256-<digest>.sig`.
//! Offline keys only: no Fulcio certificate, no Rekor entry.

use std::collections::BTreeMap;

use sigstore::cosign::constraint::{AnnotationMarker, PrivateKeySigner};
use sigstore::cosign::payload::SimpleSigning;
use sigstore::cosign::verification_constraint::{
    AnnotationVerifier, PublicKeyVerifier, VerificationConstraint,
};
use sigstore::cosign::{
    ClientBuilder, Constraint, CosignCapabilities, SignatureLayer, apply_constraints,
};
use sigstore::registry::{Auth, ClientConfig, ClientProtocol, OciReference};
use thiserror::Error;

use crate::keys::{PublicKey, Signer};
use crate::oci::{self, OciError};

/// cosign's media type for a simple signing payload layer.
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";

#[derive(Debug, Error)]
pub enum SignError {
    #[error("{0}")]
    Oci(#[from] OciError),
    #[error("{0}")]
    Sigstore(String),
    /// The artifact is not trusted: the one line says why.
    #[error("{0}")]
    Refused(String),
}

impl From<sigstore::errors::SigstoreError> for SignError {
    fn from(e: sigstore::errors::SigstoreError) -> Self {
        SignError::Sigstore(e.to_string())
    }
}

/// What a signature covers, once written or verified.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Signature {
    /// `registry/repo@sha256:…` of the signed manifest.
    pub immutable_ref: String,
    pub manifest_digest: String,
    /// Where cosign keeps the signatures: `registry/repo:sha256-….sig`.
    pub signature_ref: String,
    /// The annotations the (verifying) signature carries.
    pub annotations: BTreeMap<String, String>,
    /// Signatures the tag held before this one replaced them (cosign would have kept them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaced: Option<usize>,
}

/// What a verified signature must show: made by `key`, carrying every one of `annotations`
/// (one requirement of a verification config, or `--verify-key` with its `--annotation`s).
pub struct Trust {
    pub key: PublicKey,
    pub annotations: BTreeMap<String, String>,
}

fn cosign_client(insecure: bool) -> Result<sigstore::cosign::Client, SignError> {
    let config = ClientConfig {
        protocol: if insecure {
            ClientProtocol::Http
        } else {
            ClientProtocol::Https
        },
        ..ClientConfig::default()
    };
    Ok(ClientBuilder::default()
        .with_oci_client_config(config)
        .build()?)
}

/// The stored credentials for `text`'s registry ([`oci::auth`]) in the crate's terms.
fn registry_auth(text: &str) -> Result<Auth, SignError> {
    Ok(match oci::auth(&oci::reference(text)?)? {
        oci_client::secrets::RegistryAuth::Basic(user, password) => Auth::Basic(user, password),
        oci_client::secrets::RegistryAuth::Bearer(token) => Auth::Bearer(token),
        oci_client::secrets::RegistryAuth::Anonymous => Auth::Anonymous,
    })
}

fn parse(text: &str) -> Result<OciReference, SignError> {
    Ok(oci::reference(text)?.whole().parse()?)
}

/// The signature's location and the digest `text` names now (a tag is resolved once, here).
async fn locate(
    client: &mut sigstore::cosign::Client,
    text: &str,
) -> Result<(OciReference, OciReference, String), SignError> {
    let image = parse(text)?;
    let (signature_ref, digest) = client
        .triangulate(&image, &registry_auth(text)?)
        .await
        .map_err(|e| OciError::Invalid(format!("{text}: {e}")))?;
    let pinned = OciReference::with_digest(
        image.registry().to_owned(),
        image.repository().to_owned(),
        digest.clone(),
    );
    Ok((pinned, signature_ref, digest))
}

fn annotations_of(layer: &SimpleSigning) -> BTreeMap<String, String> {
    layer
        .optional
        .as_ref()
        .map(|o| {
            o.extra
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.as_str().map_or_else(|| v.to_string(), str::to_owned),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Signs each manifest `references` name with `signer`, carrying `annotations` in the payload
/// as `cosign sign -a k=v` does. Signing again replaces what the signature tag held (the
/// crate writes the tag whole), and says how many it replaced.
pub fn sign(
    references: &[String],
    signer: Signer,
    annotations: &BTreeMap<String, String>,
    insecure: bool,
) -> Result<Vec<Signature>, SignError> {
    let mut client = cosign_client(insecure)?;
    // The annotations go into the payload before the signature is made over it.
    let constraints: Vec<Box<dyn Constraint>> = vec![
        Box::new(AnnotationMarker::new(
            annotations.clone().into_iter().collect(),
        )),
        Box::new(PrivateKeySigner::new_with_signer(signer)),
    ];
    oci::block_on(async {
        let mut signed = Vec::new();
        for reference in references {
            let (pinned, signature_ref, digest) = locate(&mut client, reference).await?;
            let mut layer = SignatureLayer::new_unsigned(&pinned, &digest)?;
            apply_constraints(&mut layer, constraints.iter())
                .map_err(|e| SignError::Sigstore(e.to_string()))?;
            let before = oci::pull_layers(
                &signature_ref.to_string(),
                SIMPLE_SIGNING_MEDIA_TYPE,
                insecure,
            )
            .await?
            .map_or(0, |layers| layers.len());
            client
                .push_signature(
                    None,
                    &registry_auth(reference)?,
                    &signature_ref,
                    vec![layer],
                )
                .await?;
            signed.push(Signature {
                immutable_ref: pinned.to_string(),
                manifest_digest: digest,
                signature_ref: signature_ref.to_string(),
                annotations: annotations.clone(),
                replaced: (before > 0).then_some(before),
            });
        }
        Ok(signed)
    })
}

/// Checks that `reference` carries a signature over its own digest that meets `trust`, as
/// `kwctl verify -k KEY -a k=v` does. The returned digest is the one verified: pull that,
/// never the tag again.
pub fn verify(reference: &str, trust: &Trust, insecure: bool) -> Result<Signature, SignError> {
    signatures(reference, insecure)?.check(trust)
}

/// An artifact's signatures, read once: every requirement checked against them speaks of the
/// same digest, however the tag moves meanwhile.
pub struct Signatures {
    /// `reference (digest)`, for messages.
    name: String,
    pinned: OciReference,
    signature_ref: OciReference,
    digest: String,
    /// What the crate trusts of the `.sig` tag: the payloads over this digest.
    layers: Vec<SignatureLayer>,
    insecure: bool,
}

/// Resolves `reference` to its digest and reads the signatures cosign keeps for it.
pub fn signatures(reference: &str, insecure: bool) -> Result<Signatures, SignError> {
    let mut client = cosign_client(insecure)?;
    oci::block_on(async {
        let (pinned, signature_ref, digest) = locate(&mut client, reference).await?;
        let layers = client
            .trusted_signature_layers(&registry_auth(reference)?, &pinned)
            .await?;
        Ok(Signatures {
            name: format!("{} ({digest})", reference.trim_start_matches("registry://")),
            pinned,
            signature_ref,
            digest,
            layers,
            insecure,
        })
    })
}

impl Signatures {
    /// The signature that meets `trust`, or one line saying why none does.
    pub fn check(&self, trust: &Trust) -> Result<Signature, SignError> {
        let (key, annotations) = (&trust.key, &trust.annotations);
        let by_key = PublicKeyVerifier::try_from(key.pem.as_bytes())?;
        let carries = AnnotationVerifier {
            annotations: annotations.clone(),
        };
        let mut signed_by_key = Vec::new();
        for layer in &self.layers {
            if by_key.verify(layer)? {
                if carries.verify(layer)? {
                    return Ok(Signature {
                        immutable_ref: self.pinned.to_string(),
                        manifest_digest: self.digest.clone(),
                        signature_ref: self.signature_ref.to_string(),
                        annotations: annotations_of(&layer.simple_signing),
                        replaced: None,
                    });
                }
                signed_by_key.push(annotations_of(&layer.simple_signing));
            }
        }
        let name = &self.name;
        if !signed_by_key.is_empty() {
            let wanted = pairs(annotations.iter());
            let found: Vec<String> = signed_by_key
                .iter()
                .map(|a| match pairs(a.iter()) {
                    p if p.is_empty() => "none".to_owned(),
                    p => p,
                })
                .collect();
            return Err(SignError::Refused(format!(
                "{name}: signed by {}, but without the annotations {wanted} (the signature carries {}): sign it again with --annotation",
                key.path,
                found.join("; ")
            )));
        }
        if !self.layers.is_empty() {
            return Err(SignError::Refused(format!(
                "{name}: {} signature(s), none made by the key {}: verify with the key it was signed with, or sign it with the key's private half",
                self.layers.len(),
                key.path
            )));
        }
        Err(SignError::Refused(self.why_unsigned()?))
    }

    /// The crate drops what it cannot trust; read the tag itself to say what is there.
    fn why_unsigned(&self) -> Result<String, SignError> {
        let (name, signature_ref) = (&self.name, &self.signature_ref);
        let payloads = oci::block_on(oci::pull_layers(
            &signature_ref.to_string(),
            SIMPLE_SIGNING_MEDIA_TYPE,
            self.insecure,
        ))?;
        let Some(payloads) = payloads else {
            return Ok(format!(
                "{name}: not signed (no cosign signature at {signature_ref}): sign it with `cozystack-policy sign`"
            ));
        };
        let signed_for: Vec<String> = payloads
            .iter()
            .filter_map(|data| serde_json::from_slice::<SimpleSigning>(data).ok())
            .map(|s| s.critical.image.docker_manifest_digest)
            .filter(|d| *d != self.digest)
            .collect();
        Ok(if signed_for.is_empty() {
            format!(
                "{name}: the signature at {signature_ref} is not a cosign signature of it: sign it again"
            )
        } else {
            format!(
                "{name}: the signature at {signature_ref} was made for {}, not for this artifact: it was moved or copied there; sign the artifact itself",
                signed_for.join(", ")
            )
        })
    }
}

fn pairs<'a>(annotations: impl Iterator<Item = (&'a String, &'a String)>) -> String {
    annotations
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}
