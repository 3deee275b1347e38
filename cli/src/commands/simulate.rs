//! `simulate`: random lifecycles of the install through the module, its guarantees checked.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use cozystack_platform::application::Api;
use cozystack_platform::writes::TenantChart;
use cozystack_policy::error::Error;
use cozystack_policy::output;
use cozystack_policy::settings::Origin;
use cozystack_policy::source::Source;
use cozystack_simulator as simulate;
use cozystack_simulator::statement::Against;
use cozystack_simulator::streams::Streams;
use cozystack_simulator::validation;
use cozystack_simulator::world::Upgrade;

use super::*;

#[derive(Args)]
pub struct SimulateArgs {
    #[command(flatten)]
    evaluation: EvaluationArgs,
    /// Play every stream of this file (docs/simulator.md: each a dump, settings, seeds and
    /// upgrades) instead of one set of runs on --dump and --settings.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["settings", "from_policy", "dump", "seed", "runs", "seconds"])]
    streams: Option<PathBuf>,
    /// The first seed; each run takes the next. The same seed plays the same run.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Steps per run (at least 1: none played proves nothing).
    #[arg(long, default_value_t = 200, value_parser = at_least_one)]
    steps: usize,
    /// At most this many runs, one seed each (at least one runs).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    runs: Option<u64>,
    /// Stop starting runs after this many seconds (a finite number above 0); with --runs,
    /// whichever comes first; with neither, 60.
    #[arg(long, value_parser = seconds)]
    seconds: Option<f64>,
    /// The rules the oracle holds the module to: the settings' (their blocks over the stock
    /// rows), or the stock rules whatever the blocks say (a relaxed row is then reported).
    #[arg(long, value_enum, default_value_t)]
    against: Against,
    /// Where the counterexample goes (counterexample.yaml).
    #[arg(long, value_name = "DIR", default_value = "target/simulate")]
    out: PathBuf,
}

pub fn exec(args: SimulateArgs) -> Result<ExitCode, Error> {
    let started = Instant::now();
    let Some(path) = &args.streams else {
        let (given, policy, cluster) = prepare_plain_too(&args.evaluation)?;
        // Each limit given holds; neither given, a minute.
        let seconds = match (args.runs, args.seconds) {
            (Some(_), None) => None,
            (_, seconds) => Some(seconds.unwrap_or(60.0)),
        };
        let seeds = simulate::Seeds {
            first: args.seed,
            runs: args.runs,
            budget: seconds.map(simulate::budget),
            steps: args.steps,
        };
        let deployment = Deployment::new(given, &policy, cluster, Vec::new(), args.against)?;
        return report(&[(deployment, seeds)], &args.out, started);
    };
    let streams = Streams::read(path)?;
    let policy = load_policy(&args.evaluation.policy, Source::load_plain_too)?;
    let mut sets = Vec::new();
    for stream in &streams.streams {
        let from = settings::read(stream.settings.as_deref())?;
        let given = Given::new(
            stream.settings(from.value().clone()),
            Origin::Stream {
                name: stream.name.clone(),
                from: Box::new(from.origin),
                changed: stream.set.is_some() || !stream.prefixes.is_empty(),
            },
        );
        let read = |dump: &Path| -> Result<_, Error> {
            let at = ClusterArgs {
                dump: vec![dump.to_owned()],
                ..args.evaluation.cluster.clone()
            };
            let cluster = judged_cluster(&at, args.evaluation.allow_empty, &given, &policy, None)?;
            Ok(stream.cluster(cluster))
        };
        let cluster = read(&stream.dump)?;
        let mut upgrades = Vec::new();
        for to in &stream.upgrades {
            let upgrade = Upgrade::of(&to.release, &read(&to.dump)?);
            // The settings each upgrade names are validated as the policy-server would.
            settings::check(&policy, &upgrade.settings(given.value()))?;
            upgrades.push(Arc::new(upgrade));
        }
        let seeds = simulate::Seeds {
            first: stream.seed,
            runs: Some(stream.runs),
            budget: None,
            steps: stream.steps,
        };
        sets.push((
            Deployment::new(given, &policy, cluster, upgrades, args.against)?,
            seeds,
        ));
    }
    let code = report(&sets, &args.out, started)?;
    if code == ExitCode::SUCCESS {
        let steps = sets
            .iter()
            .map(|(_, seeds)| seeds.runs.unwrap_or(0) * seeds.steps as u64);
        let steps = steps.sum::<u64>() as usize;
        println!(
            "{} streams, {steps} steps played in {:.0} s ({:.0} steps/s), none broken",
            sets.len(),
            started.elapsed().as_secs_f64(),
            simulate::rate(steps, started)
        );
    }
    Ok(code)
}

/// One deployment played: the settings as given, and the run they make.
struct Deployment<'p> {
    given: Given,
    run: simulate::Run<'p>,
}

impl<'p> Deployment<'p> {
    fn new(
        given: Given,
        policy: &'p Policy,
        cluster: ClusterObjects,
        upgrades: Vec<Arc<Upgrade>>,
        against: Against,
    ) -> Result<Deployment<'p>, Error> {
        let resolved = given.resolved()?;
        let run = simulate::Run {
            policy,
            settings: given.value().clone(),
            chart: TenantChart::of(resolved),
            api: Api::of(resolved),
            cluster,
            upgrades,
            against,
        };
        Ok(Deployment { given, run })
    }
}

/// Plays every set at once and reports each in order: its summary, or, at the first set that
/// broke a promise, the shrunk counterexample (written to `out`) with exit 1.
fn report(
    sets: &[(Deployment<'_>, simulate::Seeds)],
    out: &Path,
    started: Instant,
) -> Result<ExitCode, Error> {
    let total: u64 = sets
        .iter()
        .map(|(_, seeds)| seeds.runs.map_or(0, |runs| runs * seeds.steps as u64))
        .sum();
    // Validation first: settings broken in one place are refused, naming the path.
    for (deployment, seeds) in sets {
        let run = &deployment.run;
        let found = validation::check(run.policy, &run.settings, &run.cluster, seeds.first)?;
        if let Some(found) = found {
            // JSON: the scenario runner reads every YAML file of a counterexample's folder.
            let path = output::write_in(out, "settings.json", &output::json(&found.settings)?)?;
            let shown = match validation::scenario(&found, seeds.first)? {
                Some(text) => {
                    let scenario = output::write_in(out, "counterexample.yaml", &text)?;
                    format!(", counterexample: {}", scenario.display())
                }
                None => String::new(),
            };
            println!("{}", deployment.given.judged_by()?);
            println!(
                "BROKEN {}\n  seed {}: {}\n  settings: {}{shown}",
                validation::INVARIANT,
                seeds.first,
                found.what,
                path.display()
            );
            return Ok(ExitCode::FAILURE);
        }
    }
    let bar = indicatif::ProgressBar::new(total).with_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} steps")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    if !std::io::stderr().is_terminal() {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let runs: Vec<(&simulate::Run<'_>, simulate::Seeds)> =
        sets.iter().map(|(d, seeds)| (&d.run, *seeds)).collect();
    let played = simulate::play(&runs, &|| bar.inc(1))?;
    bar.finish_and_clear();
    for ((deployment, seeds), played) in sets.iter().zip(played) {
        let run = &deployment.run;
        println!("{}", deployment.given.judged_by()?);
        if !run.upgrades.is_empty() {
            let path: Vec<&str> = run.upgrades.iter().map(|u| u.release.as_str()).collect();
            println!(
                "upgraded through: {} (at even steps, the settings naming each)",
                path.join(" -> ")
            );
        }
        let Some((seed, actions, violation)) = played.broken else {
            print!(
                "{}",
                summary(
                    &played.tally,
                    played.runs,
                    (seeds.first, played.last),
                    (sets.len() == 1).then_some(started)
                )
            );
            continue;
        };
        let found = actions.len();
        let (actions, violation) = run.shrink(actions, violation)?;
        let text = simulate::scenario(run, &actions, &violation, seed)?;
        let path = output::write_in(out, "counterexample.yaml", &text)?;
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
    Ok(ExitCode::SUCCESS)
}

/// What the runs came to when no guarantee broke: the runs, the actions, the verdicts and the
/// rows that refused or warned, each a line.
fn summary(
    tally: &simulate::Tally,
    runs: u64,
    (first, last): (u64, u64),
    started: Option<Instant>,
) -> String {
    let list = |items: Vec<String>| items.join(", ");
    let rows = cozystack_resolver::rules::RULES
        .iter()
        .filter_map(|row| (tally.rules.get(row.name)).map(|n| format!("{} {n}", row.name)));
    let mut lines = vec![
        format!(
            "{runs} runs (seeds {first}..={last}), {} steps{}: no guarantee broken",
            tally.steps,
            // Sets played together share the cores: only a set played alone has a rate.
            started.map_or_else(String::new, |started| format!(
                ", {:.0} steps/s",
                simulate::rate(tally.steps, started)
            ))
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

/// A count of at least one.
fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1: none played proves nothing".to_owned()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// A time budget: finite, above zero and at most a billion seconds (`inf` or `NaN` would
/// never end, or never start; a larger one overflows a duration).
fn seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s <= 1e9 => Ok(s),
        Ok(_) => Err("must be a finite number of seconds above 0 (at most 1e9)".to_owned()),
        Err(e) => Err(e.to_string()),
    }
}
