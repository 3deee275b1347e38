//! `push`: an annotated module to an OCI registry as a Kubewarden policy artifact, with its
//! SBOM attached and signed as cosign does when asked.

use std::path::{Path, PathBuf};

use clap::Args;
use cozystack_packaging::{oci, sbom, signing};
use cozystack_policy::error::Error;
use cozystack_policy::output::{emit, json, read};
use cozystack_policy::trust::{self, parse_annotation};

use super::{PasswordArgs, warn_replaced};

#[derive(Args)]
pub struct PushArgs {
    /// The annotated module.
    pub wasm: PathBuf,
    /// REGISTRY/REPO:TAG.
    pub target: String,
    /// Push over plain HTTP.
    #[arg(long)]
    pub insecure: bool,
    /// Attach this CycloneDX JSON SBOM (`make sbom` writes policy.cdx.json) as cosign does.
    #[arg(long, value_name = "FILE")]
    pub sbom: Option<PathBuf>,
    /// Sign the pushed artifact (and its SBOM) with this cosign private key.
    #[arg(long, value_name = "KEY")]
    pub sign_key: Option<PathBuf>,
    /// An annotation the signature carries; repeatable.
    #[arg(long = "annotation", value_name = "KEY=VALUE", value_parser = parse_annotation, requires = "sign_key")]
    pub annotations: Vec<(String, String)>,
    #[command(flatten)]
    pub password: PasswordArgs,
}

/// What `push` reports: the artifact, and the SBOM and signatures written with it.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Pushed {
    #[serde(flatten)]
    artifact: oci::Artifact,
    #[serde(skip_serializing_if = "Option::is_none")]
    sbom: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    signatures: Vec<signing::Signature>,
}

pub fn exec(args: PushArgs) -> Result<(), Error> {
    let wasm = read(&args.wasm)?;
    let bom = args.sbom.as_deref().map(read).transpose()?;
    if let Some(bom) = &bom {
        sbom::summarize(bom).map_err(|e| format!("{}: {e}", display(args.sbom.as_deref())))?;
    }
    // The key is opened before anything is written: a wrong password pushes nothing.
    let signer = args
        .sign_key
        .as_deref()
        .map(|key| trust::signer(key, args.password.key_password_env.as_deref()))
        .transpose()?;
    let artifact = oci::push(&wasm, &args.target, args.insecure)?;
    let sbom = bom
        .map(|bom| sbom::attach(&artifact.immutable_ref, &bom, args.insecure))
        .transpose()?;
    let signatures = match signer {
        Some(signer) => {
            let signed: Vec<String> = std::iter::once(artifact.immutable_ref.clone())
                .chain(sbom.clone())
                .collect();
            let annotations = args.annotations.into_iter().collect();
            signing::sign(&signed, signer, &annotations, args.insecure)?
        }
        None => Vec::new(),
    };
    warn_replaced(&signatures);
    emit(&json(&Pushed {
        artifact,
        sbom,
        signatures,
    })?)
}

fn display(path: Option<&Path>) -> String {
    path.map(|p| p.display().to_string()).unwrap_or_default()
}
