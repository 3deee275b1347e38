//! `inspect`: the metadata embedded in a module.

use super::VerifyKeyArgs;
use clap::Args;
use cozystack_packaging::section;
use cozystack_policy::error::Error;
use cozystack_policy::output::{emit, json};
use cozystack_policy::source::Source;

#[derive(Args)]
pub struct InspectArgs {
    /// The module: a file or registry://REF; default: the embedded release.
    policy: Option<String>,
    /// Pull over plain HTTP.
    #[arg(long)]
    insecure: bool,
    #[command(flatten)]
    verify: VerifyKeyArgs,
    /// Print the built-in rule set the module carries (`definitionSource: builtin`), as the
    /// module itself reports it from validate_settings, instead of its metadata.
    #[arg(long)]
    rules: bool,
}

pub fn exec(args: InspectArgs) -> Result<(), Error> {
    let source = Source::parse(args.policy.as_deref(), args.insecure);
    let trust = args.verify.trust()?;
    if args.rules {
        let (policy, origin) = source.load(trust.as_ref())?;
        let answer =
            policy.validate_settings(&serde_json::json!({"definitionSource": "builtin"}))?;
        let rules = answer["message"]
            .as_str()
            .filter(|_| answer["valid"] == true);
        let rules = rules.ok_or_else(|| {
            format!("{origin}: the module does not report a built-in rule set (validate_settings answered {answer})")
        })?;
        return emit(&format!("{rules}\n"));
    }
    let (wasm, origin) = source.read(trust.as_ref())?;
    let meta = section::read_metadata(&wasm)?;
    let meta =
        meta.ok_or_else(|| format!("{origin}: the module has no io.kubewarden.metadata section"))?;
    emit(&json(&meta)?)
}
