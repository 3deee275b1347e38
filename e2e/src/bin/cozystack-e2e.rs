//! `cozystack-e2e`: the scenarios, the demo and the derived test files, through the built
//! policy wasm (`$POLICY_WASM`, else the workspace's `annotated-policy.wasm`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use cozystack_e2e::scenario::{self, Bundle, Scenario};
use cozystack_e2e::{demo, export, parity, policy_path, workspace};
use cozystack_policy_runtime::policy::Policy;

#[derive(Parser)]
#[command(
    name = "cozystack-e2e",
    about = "Scenario tests of the built policy wasm on the bundled example cluster"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the scenarios of e2e/scenarios whose name contains FILTER (all by default).
    Run {
        #[arg(default_value = "")]
        filter: String,
        /// Run the scenarios of this directory instead (a simulator's counterexample).
        #[arg(long, value_name = "DIR")]
        scenarios: Option<PathBuf>,
    },
    /// The narrated demo (e2e/demo.yaml).
    Demo,
    /// Regenerate e2e/kwctl: kwctl request files, replay sessions and e2e.bats.
    Export,
    /// Write the JavaScript tests' inputs: the parity cases and the example page's cluster.
    JsFixtures {
        #[arg(default_value = "target/js")]
        out: PathBuf,
    },
}

fn main() -> ExitCode {
    match run(Cli::parse().command) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

fn scenarios(root: &Path) -> Result<Vec<Scenario>, String> {
    Ok(scenario::load_dir(&root.join("e2e/scenarios"))?
        .into_iter()
        .map(|(_, s)| s)
        .collect())
}

fn write(path: &Path, content: &str) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(path, content).map_err(|e| format!("{}: {e}", path.display()))
}

fn run(command: Command) -> Result<ExitCode, String> {
    let root = workspace();
    let policy = Policy::load_annotated(&policy_path())?;
    let bundle = Bundle::load(&root.join("e2e/cluster"))?;
    match command {
        Command::Run { filter, scenarios } => {
            let (mut passed, mut failed) = (0, 0);
            let dir = scenarios.unwrap_or_else(|| root.join("e2e/scenarios"));
            for (file, s) in scenario::load_dir(&dir)?
                .iter()
                .filter(|(_, s)| s.name.contains(&filter))
            {
                let outcome = scenario::run(&policy, &bundle, s)?;
                if outcome.passed() {
                    passed += 1;
                    println!(
                        "ok    {} ({} host calls)",
                        s.name,
                        outcome.exchanges().len()
                    );
                } else {
                    failed += 1;
                    println!(
                        "FAIL  {} [{}]\n      {}",
                        s.name,
                        file.display(),
                        outcome.problems.join("\n      ")
                    );
                }
            }
            println!("scenarios: {passed} passed, {failed} failed");
            Ok(if failed == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Demo => {
            let scenarios = scenario::load_file(&root.join("e2e/demo.yaml"))?;
            print!("{}", demo::play(&policy, &bundle, &scenarios)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::JsFixtures { out } => {
            let cases = parity::export(&policy, &bundle, &scenarios(&root)?)?;
            let cluster = parity::example_cluster(&policy, &bundle)?;
            let pretty =
                |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default();
            write(&out.join("parity-cases.json"), &pretty(&cases))?;
            write(&out.join("cluster.json"), &pretty(&cluster))?;
            println!(
                "{} parity cases and the example cluster written to {}",
                cases.as_array().map_or(0, Vec::len),
                out.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Export => {
            let out = root.join("e2e/kwctl");
            let files = export::export_all(&policy, &bundle, &scenarios(&root)?)?;
            if out.exists() {
                std::fs::remove_dir_all(&out).map_err(|e| e.to_string())?;
            }
            for (path, content) in &files {
                write(&out.join(path), content)?;
            }
            println!("exported {} files to {}", files.len(), out.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}
