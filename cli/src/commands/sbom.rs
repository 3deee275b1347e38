//! `sbom`: the CycloneDX SBOM attached to an artifact, printed once its signatures verify
//! when a key is given.

use clap::Args;
use cozystack_packaging::{sbom, signing};
use cozystack_policy::error::Error;
use cozystack_policy::output::emit;
use cozystack_policy::trust;

use super::VerifyKeyArgs;

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

pub fn exec(args: SbomArgs) -> Result<(), Error> {
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
