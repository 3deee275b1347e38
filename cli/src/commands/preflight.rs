//! `preflight`: every Namespace and HelmRelease replayed as the audit scanner would.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::{Args, ValueEnum};
use cozystack_policy::error::Error;
use cozystack_policy::ops::preflight;
use cozystack_policy::output::{self, emit};

use super::*;

#[derive(Args)]
pub struct PreflightArgs {
    #[command(flatten)]
    evaluation: EvaluationArgs,
    /// `text` for a person; `openreports` for the openreports.io/v1alpha1 Reports and
    /// ClusterReports Kubewarden's audit scanner writes by default (`kubectl get reports -A`);
    /// `policyreport` for wgpolicyk8s.io/v1alpha2 reports, on clusters whose audit scanner was
    /// set to `reportCRDsKind: policyreport`.
    #[arg(long, value_enum, default_value_t = ReportOutput::Text)]
    output: ReportOutput,
    /// Name the clean namespaces too (by default they are counted).
    #[arg(long)]
    list_clean: bool,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ReportOutput {
    Text,
    Openreports,
    Policyreport,
}

pub fn exec(args: PreflightArgs) -> Result<ExitCode, Error> {
    let started = Instant::now();
    let (settings, policy, cluster) = prepare(&args.evaluation)?;
    // A bar on a terminal; piped or redirected, nothing but the closing line below.
    let bar = std::io::stderr().is_terminal().then(|| {
        indicatif::ProgressBar::new(0).with_style(
            indicatif::ProgressStyle::with_template("replaying {bar:40} {pos}/{len} ({eta})")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        )
    });
    let progress = |done: usize, total: usize| {
        if let Some(bar) = &bar {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
    };
    let footprint = cozystack_policy::ops::footprint::Footprint::of(&cluster);
    let judged_by = settings.judged_by()?;
    let report = preflight::run(&policy, Arc::new(cluster), &settings.settings, &progress)?;
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    eprintln!("{}", footprint.line());
    eprintln!(
        "replayed {} objects, done in {:.1} s{}",
        report.judged.len(),
        started.elapsed().as_secs_f64(),
        output::peak_memory()
    );
    match args.output {
        ReportOutput::Policyreport => emit(&preflight::to_yaml_stream(
            &report.policy_reports("cozystack-capabilities", &judged_by),
        )?)?,
        ReportOutput::Openreports => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            emit(&preflight::to_yaml_stream(&report.open_reports(
                "cozystack-capabilities",
                &judged_by,
                now,
            ))?)?
        }
        ReportOutput::Text => emit(&format!("{judged_by}\n{}", report.text(args.list_clean)))?,
    }
    Ok(if report.findings() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
