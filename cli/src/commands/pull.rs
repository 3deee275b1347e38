//! `pull`: a policy artifact, its digest and media types checked (and its signature, with a
//! key), written as the module.

use std::path::PathBuf;

use clap::Args;
use cozystack_packaging::oci;
use cozystack_policy::error::Error;
use cozystack_policy::output::{emit, json};
use cozystack_policy::trust;

use super::VerifyKeyArgs;

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

pub fn exec(args: PullArgs) -> Result<(), Error> {
    let trust = args.verify.trust()?;
    let source = trust::pinned(&args.source, trust.as_ref(), args.insecure)?;
    let (wasm, artifact) = oci::pull(&source, args.insecure)?;
    std::fs::write(&args.output, wasm).map_err(|e| Error::write(&args.output, e))?;
    emit(&json(&artifact)?)
}
