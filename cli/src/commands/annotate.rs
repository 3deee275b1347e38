//! `annotate`: policy-metadata.yml embedded in the module, as kwctl annotate does.

use std::path::PathBuf;

use clap::Args;
use cozystack_packaging::{metadata, section};
use cozystack_policy::error::Error;
use cozystack_policy::output::{read, read_text};
use cozystack_policy_runtime::policy::Policy;

#[derive(Args)]
pub struct AnnotateArgs {
    /// The module to annotate.
    input: PathBuf,
    /// policy-metadata.yml.
    #[arg(long, value_name = "FILE")]
    metadata: PathBuf,
    /// The usage text (the README).
    #[arg(long, value_name = "FILE")]
    usage: PathBuf,
    /// The waPC protocol version; default: asked of the module, as kwctl does.
    #[arg(long, value_name = "VERSION")]
    protocol_version: Option<String>,
    /// Where to write the annotated module.
    #[arg(short, value_name = "OUT")]
    output: PathBuf,
}

pub fn exec(args: AnnotateArgs) -> Result<(), Error> {
    let wasm = read(&args.input)?;
    let protocol = match args.protocol_version {
        Some(version) => version,
        // An unannotated module answers protocol_version without any metadata.
        None => Policy::load(&wasm, Default::default())?.protocol_version()?,
    };
    let meta = metadata::annotated(
        metadata::from_yaml(&read_text(&args.metadata)?)?,
        &protocol,
        &read_text(&args.usage)?,
    );
    let out = section::write_metadata(&wasm, &meta)?;
    std::fs::write(&args.output, out).map_err(|e| Error::write(&args.output, e))
}
