//! `simulate`: random lifecycles of the install through the module, its guarantees checked.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use cozystack_policy::error::Error;
use cozystack_policy::ops::simulate;
use cozystack_policy::platform::application::Api;
use cozystack_policy::platform::writes::TenantChart;

use super::*;

#[derive(Args)]
pub struct SimulateArgs {
    #[command(flatten)]
    evaluation: EvaluationArgs,
    /// The first seed; each run takes the next. The same seed plays the same run.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Steps per run.
    #[arg(long, default_value_t = 200)]
    steps: usize,
    /// At most this many runs, one seed each (at least one runs).
    #[arg(long)]
    runs: Option<u64>,
    /// Stop starting runs after this many seconds; with --runs, whichever comes first; with
    /// neither, 60.
    #[arg(long)]
    seconds: Option<f64>,
    /// Where the counterexample goes (counterexample.yaml).
    #[arg(long, value_name = "DIR", default_value = "target/simulate")]
    out: PathBuf,
}

pub fn exec(args: SimulateArgs) -> Result<ExitCode, Error> {
    let started = Instant::now();
    let (given, policy, cluster) = prepare_plain_too(&args.evaluation)?;
    let judged_by = given.judged_by()?;
    let settings = given.value;
    let resolved = settings::resolved(&settings)?;
    let run = simulate::Run {
        policy: &policy,
        settings: &settings,
        chart: TenantChart::of(&resolved),
        api: Api::of(&resolved),
        cluster,
    };
    let bar = indicatif::ProgressBar::new(args.steps as u64).with_style(
        indicatif::ProgressStyle::with_template("{msg} {bar:30} {pos}/{len} steps")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    if !std::io::stderr().is_terminal() {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let mut tally = simulate::Tally::default();
    // Each limit given holds; neither given, a minute.
    let seconds = match (args.runs, args.seconds) {
        (Some(_), None) => None,
        (_, seconds) => Some(seconds.unwrap_or(60.0)),
    };
    let budget = seconds.map(simulate::budget);
    let mut seed = args.seed;
    let mut runs = 0u64;
    loop {
        bar.set_message(format!("seed {seed}"));
        bar.set_position(0);
        let (actions, violation) = run.random(seed, args.steps, &mut tally, &mut || bar.inc(1))?;
        runs += 1;
        if let Some(violation) = violation {
            bar.finish_and_clear();
            let found = actions.len();
            let (actions, violation) = run.shrink(actions, violation)?;
            std::fs::create_dir_all(&args.out).map_err(|e| Error::write(&args.out, e))?;
            let path = args.out.join("counterexample.yaml");
            let text = simulate::scenario(&run, &actions, &violation, seed)?;
            std::fs::write(&path, text).map_err(|e| Error::write(&path, e))?;
            println!("{judged_by}");
            println!(
                "BROKEN {}\n  seed {seed}, step {found}, shrunk to {} steps: {}\n  {}\n  counterexample: {} (an e2e scenario: add it to e2e/scenarios/ once fixed)",
                violation.invariant,
                actions.len(),
                actions
                    .iter()
                    .map(simulate::world::Action::describe)
                    .collect::<Vec<_>>()
                    .join("; then "),
                violation.what,
                path.display()
            );
            return Ok(ExitCode::FAILURE);
        }
        seed += 1;
        let done = args.runs.is_some_and(|n| runs >= n)
            || budget.is_some_and(|budget| started.elapsed() >= budget);
        if done {
            break;
        }
    }
    bar.finish_and_clear();
    println!("{judged_by}");
    print!("{}", summary(&tally, runs, (args.seed, seed - 1), started));
    Ok(ExitCode::SUCCESS)
}

/// What the runs came to when no guarantee broke: the runs, the actions, the verdicts and the
/// rows that refused or warned, each a line.
fn summary(
    tally: &simulate::Tally,
    runs: u64,
    (first, last): (u64, u64),
    started: Instant,
) -> String {
    let list = |items: Vec<String>| items.join(", ");
    let rows = cozystack_resolver::rules::RULES
        .iter()
        .filter_map(|row| (tally.rules.get(row.name)).map(|n| format!("{} {n}", row.name)));
    let mut lines = vec![
        format!(
            "{runs} runs (seeds {first}..={last}), {} steps, {:.0} steps/s: no guarantee broken",
            tally.steps,
            simulate::rate(tally.steps, started)
        ),
        format!("actions: {}", list(counted(&tally.actions))),
        format!(
            "writes judged: {}; refused by the API server before admission: {}",
            list(counted(&tally.verdicts)),
            tally.rejected
        ),
        format!("rules in messages: {}", list(rows.collect())),
        format!(
            "user requests the rules admit: {}, every one admitted",
            tally.admissible
        ),
    ];
    let never = simulate::never_fired(tally);
    if !never.is_empty() {
        lines.push(format!("rules that never fired: {}", never.join(", ")));
    }
    lines.push(format!("largest state: {} objects", tally.largest));
    lines.iter().map(|line| format!("{line}\n")).collect()
}

/// `key n` for each entry of a count.
fn counted<K: std::fmt::Display>(map: &std::collections::BTreeMap<K, usize>) -> Vec<String> {
    map.iter().map(|(k, n)| format!("{k} {n}")).collect()
}
