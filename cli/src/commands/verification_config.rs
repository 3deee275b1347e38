//! `verification-config`: a Kubewarden verification config requiring signatures by these keys.

use std::path::PathBuf;

use clap::Args;
use cozystack_packaging::verification::VerificationConfig;
use cozystack_policy::error::Error;
use cozystack_policy::output::emit;
use cozystack_policy::trust::{self, parse_annotation};

#[derive(Args)]
pub struct VerificationConfigArgs {
    /// A public key (PEM) whose signature the module must carry; repeatable (all required).
    #[arg(long = "key", value_name = "PUB", required = true)]
    pub keys: Vec<PathBuf>,
    /// An annotation every such signature must carry; repeatable.
    #[arg(long = "annotation", value_name = "KEY=VALUE", value_parser = parse_annotation)]
    pub annotations: Vec<(String, String)>,
}

pub fn exec(args: VerificationConfigArgs) -> Result<(), Error> {
    let keys = args
        .keys
        .iter()
        .map(|path| trust::read(path, &[]).map(|trust| trust.key))
        .collect::<Result<Vec<_>, _>>()?;
    let annotations = args.annotations.into_iter().collect();
    let config = VerificationConfig::for_keys(&keys, &annotations)
        .to_yaml()
        .map_err(|e| Error::encode("the verification config", e.to_string()))?;
    emit(&config)
}
