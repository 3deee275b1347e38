//! `run`: one AdmissionRequest through the policy, its verdict, message and host calls.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use cozystack_policy::error::Error;
use cozystack_policy::ops::evaluate;
use cozystack_policy::output::{emit, json};

use super::*;

#[derive(Args)]
pub struct RunArgs {
    /// The request: an AdmissionReview or AdmissionRequest, JSON or YAML; `-` for stdin.
    request: PathBuf,
    #[command(flatten)]
    evaluation: EvaluationArgs,
    /// `text` for a person, `json` for the ValidationResponse and the host calls.
    #[arg(long, value_enum, default_value_t = RunOutput::Text)]
    output: RunOutput,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum RunOutput {
    Text,
    Json,
}

/// With `--output json`, an exit that judged nothing still writes a report: the error, and
/// which settings were read when they were.
pub fn exec(args: RunArgs) -> Result<ExitCode, Error> {
    match (evaluate_one(&args), args.output) {
        (Err(error), RunOutput::Json) => {
            let report = serde_json::json!({"error": error.to_string(), "judgedBy": judged_by()});
            emit(&json(&report)?)?;
            eprintln!("error: {error}");
            Ok(ExitCode::from(2))
        }
        (result, _) => result,
    }
}

fn evaluate_one(args: &RunArgs) -> Result<ExitCode, Error> {
    let request = evaluate::read_request(&args.request)?;
    let (settings, policy, cluster) = prepare(&args.evaluation)?;
    let judged_by = settings.judged_by()?;
    let evaluation = evaluate::evaluate(&policy, &request, settings.value(), cluster)?;
    match args.output {
        // Which settings judged it first, as every verb says it.
        RunOutput::Text => emit(&format!(
            "{judged_by}\n{}",
            evaluate::text(&request, &evaluation)
        ))?,
        RunOutput::Json => {
            let calls: Vec<String> = evaluation
                .exchanges
                .iter()
                .map(ToString::to_string)
                .collect();
            emit(&json(
                &serde_json::json!({"response": evaluation.response, "hostCalls": calls,
                    "judgedBy": judged_by}),
            )?)?;
        }
    }
    Ok(if evaluation.response["accepted"] == true {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
