//! `artifacthub`: the Artifact Hub package written from the metadata.

use std::path::PathBuf;

use clap::Args;
use cozystack_packaging::{artifacthub, metadata};
use cozystack_policy::error::Error;
use cozystack_policy::output::read_text;

#[derive(Args)]
pub struct ArtifacthubArgs {
    /// policy-metadata.yml.
    #[arg(long, value_name = "FILE")]
    metadata: PathBuf,
    /// questions-ui.yml, the settings form Artifact Hub shows.
    #[arg(long, value_name = "FILE")]
    questions: Option<PathBuf>,
    /// CHANGELOG.md: the version's section becomes artifacthub.io/changes.
    #[arg(long, value_name = "FILE")]
    changelog: Option<PathBuf>,
    /// createdAt of a new package (RFC 3339); an existing OUT keeps its own.
    #[arg(long, value_name = "RFC3339")]
    created_at: Option<String>,
    /// Where to write the package.
    #[arg(short, value_name = "OUT")]
    output: PathBuf,
}

pub fn exec(args: ArtifacthubArgs) -> Result<(), Error> {
    let meta = metadata::from_yaml(&read_text(&args.metadata)?)?;
    let questions = args.questions.as_deref().map(read_text).transpose()?;
    let changelog = args.changelog.as_deref().map(read_text).transpose()?;
    // Keep the previous createdAt unless one is given: regenerating must be reproducible.
    let created = args
        .created_at
        .or_else(|| {
            std::fs::read_to_string(&args.output)
                .ok()
                .and_then(|t| artifacthub::created_at(&t))
        })
        .ok_or("--created-at is required for a new package")?;
    let doc = artifacthub::package(&meta, &created, questions.as_deref(), changelog.as_deref())?;
    std::fs::write(&args.output, doc).map_err(|e| Error::write(&args.output, e))
}
