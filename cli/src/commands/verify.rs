//! `verify`: an artifact's cosign signature checked against a public key or a Kubewarden
//! verification config, as `kwctl verify` does.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use cozystack_packaging::signing;
use cozystack_packaging::verification::{self, VerificationConfig};
use cozystack_policy::error::Error;
use cozystack_policy::output::{emit, json, read_text};
use cozystack_policy::trust::{self, parse_annotation};

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

pub fn exec(args: VerifyArgs) -> Result<ExitCode, Error> {
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
