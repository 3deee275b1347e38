//! `sign`: a pushed artifact and its SBOM signed with a cosign private key, as `cosign sign
//! --key` does.

use std::path::PathBuf;

use clap::Args;
use cozystack_packaging::{oci, sbom, signing};
use cozystack_policy::error::Error;
use cozystack_policy::output::{emit, json};
use cozystack_policy::trust::{self, parse_annotation};

use super::{PasswordArgs, warn_replaced};

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

pub fn exec(args: SignArgs) -> Result<(), Error> {
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
