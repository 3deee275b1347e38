//! The supply-chain verbs: push and pull with the SBOM and signatures, keygen, sign, verify,
//! sbom and verification-config. Cosign's formats through the packaging crate (the `sigstore`
//! crate underneath); keys and passwords from the command line through [`crate::trust`].

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use cozystack_packaging::signing::{self, Trust};
use cozystack_packaging::verification::{self, VerificationConfig};
use cozystack_packaging::{keys, oci, sbom};

use crate::error::Error;
use crate::output::{emit, json, read, read_text};
use crate::trust::{self, parse_annotation};

/// The signature a registry artifact must carry before it is used.
#[derive(Args)]
pub struct VerifyKeyArgs {
    /// Use the artifact only when a cosign signature by this public key (PEM) covers its
    /// digest; it is then pulled by that digest.
    #[arg(long, value_name = "PUB")]
    pub verify_key: Option<PathBuf>,
    /// An annotation that signature must carry; repeatable.
    #[arg(long = "annotation", value_name = "KEY=VALUE", value_parser = parse_annotation, requires = "verify_key")]
    pub annotations: Vec<(String, String)>,
}

impl VerifyKeyArgs {
    pub fn trust(&self) -> Result<Option<Trust>, Error> {
        self.verify_key
            .as_deref()
            .map(|key| trust::read(key, &self.annotations))
            .transpose()
    }
}

/// Where the private key's password comes from: never the command line.
#[derive(Args)]
pub struct PasswordArgs {
    /// Read the private key's password from this environment variable (without it, it is
    /// asked on the terminal).
    #[arg(long, value_name = "VAR")]
    pub key_password_env: Option<String>,
}

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

#[derive(Args)]
pub struct PullArgs {
    /// REGISTRY/REPO@DIGEST (or :TAG).
    pub source: String,
    /// Where to write the module.
    #[arg(short, value_name = "OUT")]
    pub output: PathBuf,
    /// Pull over plain HTTP.
    #[arg(long)]
    pub insecure: bool,
    #[command(flatten)]
    pub verify: VerifyKeyArgs,
}

#[derive(Args)]
pub struct KeygenArgs {
    /// Writes PREFIX.key and PREFIX.pub; neither may exist.
    #[arg(long, value_name = "PREFIX", default_value = "cosign")]
    pub output_prefix: PathBuf,
    #[command(flatten)]
    pub password: PasswordArgs,
}

#[derive(Args)]
pub struct SignArgs {
    /// REGISTRY/REPO@DIGEST (a tag is resolved once, to the digest signed).
    pub reference: String,
    /// The cosign private key.
    #[arg(long, value_name = "KEY")]
    pub key: PathBuf,
    /// An annotation the signature carries; repeatable.
    #[arg(long = "annotation", value_name = "KEY=VALUE", value_parser = parse_annotation)]
    pub annotations: Vec<(String, String)>,
    #[command(flatten)]
    pub password: PasswordArgs,
    /// Talk plain HTTP.
    #[arg(long)]
    pub insecure: bool,
}

#[derive(Args)]
pub struct VerifyArgs {
    /// REGISTRY/REPO@DIGEST or :TAG.
    pub reference: String,
    /// The public key (PEM) the signature must verify with.
    #[arg(long, value_name = "PUB")]
    pub key: Option<PathBuf>,
    /// An annotation the signature must carry; repeatable.
    #[arg(long = "annotation", value_name = "KEY=VALUE", value_parser = parse_annotation, requires = "key")]
    pub annotations: Vec<(String, String)>,
    /// Check the `pubKey` requirements of a Kubewarden verification config (or its ConfigMap)
    /// instead, as `kwctl verify --verification-config-path` does.
    #[arg(long, value_name = "FILE", conflicts_with = "key")]
    pub verification_config: Option<PathBuf>,
    /// Talk plain HTTP.
    #[arg(long)]
    pub insecure: bool,
}

#[derive(Args)]
pub struct VerificationConfigArgs {
    /// A public key (PEM) whose signature the module must carry; repeatable (all required).
    #[arg(long = "key", value_name = "PUB", required = true)]
    pub keys: Vec<PathBuf>,
    /// An annotation every such signature must carry; repeatable.
    #[arg(long = "annotation", value_name = "KEY=VALUE", value_parser = parse_annotation)]
    pub annotations: Vec<(String, String)>,
}

#[derive(Args)]
pub struct SbomArgs {
    /// REGISTRY/REPO@DIGEST or :TAG.
    pub reference: String,
    /// Print it only when the artifact's and the SBOM's signatures verify with this key.
    #[command(flatten)]
    pub verify: VerifyKeyArgs,
    /// Talk plain HTTP.
    #[arg(long)]
    pub insecure: bool,
}

/// Says on stderr which signatures a new one replaced: cosign would have kept them.
fn warn_replaced(signatures: &[signing::Signature]) {
    for signature in signatures {
        if let Some(count) = signature.replaced {
            eprintln!(
                "warning: {}: replaced {count} earlier signature(s) there; sign again with each key whose signature must stay",
                signature.signature_ref
            );
        }
    }
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

pub fn push(args: PushArgs) -> Result<(), Error> {
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

pub fn pull(args: PullArgs) -> Result<(), Error> {
    let trust = args.verify.trust()?;
    let source = trust::pinned(&args.source, trust.as_ref(), args.insecure)?;
    let (wasm, artifact) = oci::pull(&source, args.insecure)?;
    std::fs::write(&args.output, wasm).map_err(|e| Error::write(&args.output, e))?;
    emit(&json(&artifact)?)
}

pub fn keygen(args: KeygenArgs) -> Result<(), Error> {
    let prefix = args.output_prefix.display().to_string();
    let (private, public) = (
        PathBuf::from(format!("{prefix}.key")),
        PathBuf::from(format!("{prefix}.pub")),
    );
    for path in [&private, &public] {
        if path.exists() {
            return Err(format!(
                "{} exists: remove it or choose another --output-prefix",
                path.display()
            )
            .into());
        }
    }
    let password = trust::password(&private, args.password.key_password_env.as_deref(), true)?;
    let pair = keys::generate(password.as_bytes())?;
    write_private(&private, pair.private_pem.as_bytes())?;
    std::fs::write(&public, &pair.public_pem).map_err(|e| Error::write(&public, e))?;
    eprintln!(
        "wrote {} (private, keep it secret) and {} (public, for verificationConfig)",
        private.display(),
        public.display()
    );
    Ok(())
}

/// Creates the private key file readable by its owner only.
fn write_private(path: &Path, data: &[u8]) -> Result<(), Error> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
        .open(path)
        .and_then(|mut file| file.write_all(data))
        .map_err(|e| Error::write(path, e))
}

pub fn sign(args: SignArgs) -> Result<(), Error> {
    let signer = trust::signer(&args.key, args.password.key_password_env.as_deref())?;
    // Pin the digest once: the SBOM signed is the one attached to the artifact signed.
    let pinned = oci::resolve(&args.reference, args.insecure)?;
    let sbom = sbom::fetch(&pinned, args.insecure)?.map(|(_, reference)| reference);
    let signed: Vec<String> = std::iter::once(pinned).chain(sbom).collect();
    let annotations = args.annotations.into_iter().collect();
    let signatures = signing::sign(&signed, signer, &annotations, args.insecure)?;
    warn_replaced(&signatures);
    emit(&json(&signatures)?)
}

pub fn verify(args: VerifyArgs) -> Result<ExitCode, Error> {
    let verified = match (&args.key, &args.verification_config) {
        (Some(key), _) => {
            let trust = trust::read(key, &args.annotations)?;
            signing::verify(&args.reference, &trust, args.insecure)
                .map(|signature| vec![signature])
                .map_err(verification::VerifyError::from)
        }
        (None, Some(path)) => {
            let name = path.display().to_string();
            let config = VerificationConfig::read(&read_text(path)?, &name)?;
            config.verify(&args.reference, &name, args.insecure)
        }
        (None, None) => return Err("give --key or --verification-config".into()),
    };
    match verified {
        Ok(signatures) => emit(&json(&signatures)?).map(|()| ExitCode::SUCCESS),
        Err(verification::VerifyError::Sign(signing::SignError::Refused(why))) => {
            eprintln!("refused: {why}");
            Ok(ExitCode::FAILURE)
        }
        Err(e) => Err(e.into()),
    }
}

pub fn verification_config(args: VerificationConfigArgs) -> Result<(), Error> {
    let keys = args
        .keys
        .iter()
        .map(|path| trust::read(path, &[]).map(|trust| trust.key))
        .collect::<Result<Vec<_>, _>>()?;
    let annotations = args.annotations.into_iter().collect();
    let config = VerificationConfig::for_keys(&keys, &annotations)
        .to_yaml()
        .map_err(|e| Error::Encode {
            what: "the verification config",
            reason: e.to_string(),
        })?;
    emit(&config)
}

pub fn print_sbom(args: SbomArgs) -> Result<(), Error> {
    let trust = args.verify.trust()?;
    let reference = trust::pinned(&args.reference, trust.as_ref(), args.insecure)?;
    let (bom, bom_ref) = sbom::fetch(&reference, args.insecure)?.ok_or_else(|| {
        format!("{reference}: no SBOM is attached (cosign's sha256-<digest>.sbom tag is absent)")
    })?;
    if let Some(trust) = &trust {
        signing::verify(&bom_ref, trust, args.insecure).map_err(|e| format!("the SBOM: {e}"))?;
    }
    sbom::summarize(&bom).map_err(|e| format!("{bom_ref}: {e}"))?;
    emit(&String::from_utf8_lossy(&bom))
}
