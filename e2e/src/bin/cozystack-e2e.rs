//! `cozystack-e2e run|demo|export|preflight`: drives the built policy wasm through the waPC
//! host.

use std::io::IsTerminal;
use std::process::ExitCode;

use cozystack_e2e::policy::Policy;
use cozystack_e2e::scenario::{self, Bundle};
use cozystack_e2e::{demo, export, policy_path, preflight, workspace};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> Result<ExitCode, String> {
    let root = workspace();
    if args.first().map(String::as_str) == Some("protocol-version") {
        // Asked of an unannotated module, to annotate it: no metadata needed to call it.
        let path = args
            .get(1)
            .map_or_else(|| root.join("policy.wasm"), std::path::PathBuf::from);
        let policy = Policy::load(
            &cozystack_e2e::policy::read_module(&path)?,
            Default::default(),
        )?;
        println!("{}", policy.protocol_version()?);
        return Ok(ExitCode::SUCCESS);
    }
    if args.first().map(String::as_str) == Some("preflight") {
        return preflight(&args[1..]);
    }
    let policy = Policy::load_annotated(&policy_path())?;
    let bundle = Bundle::load(&root.join("e2e/cluster"))?;
    match args.first().map(String::as_str) {
        Some("run") => {
            let filter = args.get(1).cloned().unwrap_or_default();
            let scenarios = scenario::load_dir(&root.join("e2e/scenarios"))?;
            let (mut passed, mut failed) = (0, 0);
            for (file, s) in scenarios.iter().filter(|(_, s)| s.name.contains(&filter)) {
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
        Some("demo") => {
            let scenarios = scenario::load_file(&root.join("e2e/demo.yaml"))?;
            let text = demo::play(&policy, &bundle, &scenarios)?;
            print!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        Some("js-fixtures") => {
            // Inputs of the JavaScript tests: parity cases and the example page's cluster.
            let out = args
                .get(1)
                .map_or_else(|| root.join("target/js"), std::path::PathBuf::from);
            let scenarios: Vec<_> = scenario::load_dir(&root.join("e2e/scenarios"))?
                .into_iter()
                .map(|(_, s)| s)
                .collect();
            let cases = cozystack_e2e::parity::export(&policy, &bundle, &scenarios)?;
            let cluster = cozystack_e2e::parity::example_cluster(&policy, &bundle)?;
            std::fs::create_dir_all(&out).map_err(|e| e.to_string())?;
            let write = |name: &str, v: &serde_json::Value| {
                std::fs::write(
                    out.join(name),
                    serde_json::to_string_pretty(v).unwrap_or_default(),
                )
                .map_err(|e| e.to_string())
            };
            write("parity-cases.json", &cases)?;
            write("cluster.json", &cluster)?;
            println!(
                "{} parity cases and the example cluster written to {}",
                cases.as_array().map_or(0, Vec::len),
                out.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Some("export") => {
            let out = root.join("e2e/kwctl");
            let scenarios: Vec<_> = scenario::load_dir(&root.join("e2e/scenarios"))?
                .into_iter()
                .map(|(_, s)| s)
                .collect();
            let files = export::export_all(&policy, &bundle, &scenarios)?;
            if out.exists() {
                std::fs::remove_dir_all(&out).map_err(|e| e.to_string())?;
            }
            for (path, content) in &files {
                let path = out.join(path);
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
                }
                std::fs::write(&path, content).map_err(|e| e.to_string())?;
            }
            println!("exported {} files to {}", files.len(), out.display());
            Ok(ExitCode::SUCCESS)
        }
        _ => Err(
            "usage: cozystack-e2e run [filter] | demo | export | protocol-version [WASM] | preflight [--settings FILE] [--output text|policyreport] DUMP...".into(),
        ),
    }
}

/// `preflight [--settings FILE] [--output text|policyreport] [--list-clean] DUMP...`: exit 0
/// when nothing is flagged, 1 when something is, 2 when the dump or the settings cannot be used.
fn preflight(args: &[String]) -> Result<ExitCode, String> {
    let usage = "usage: cozystack-e2e preflight [--settings FILE] [--output text|policyreport] [--list-clean] DUMP...";
    let (mut settings_path, mut output, mut dumps) = (None, "text".to_owned(), Vec::new());
    let mut list_clean = false;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--settings" => settings_path = Some(args.next().ok_or(usage)?.clone()),
            "--output" => output = args.next().ok_or(usage)?.clone(),
            "--list-clean" => list_clean = true,
            flag if flag.starts_with("--") => return Err(format!("unknown flag {flag}; {usage}")),
            path => dumps.push(std::path::PathBuf::from(path)),
        }
    }
    if dumps.is_empty() || !matches!(output.as_str(), "text" | "policyreport") {
        eprintln!("{usage}");
        return Ok(ExitCode::from(2));
    }
    let fail = |err: String| {
        eprintln!("error: {err}");
        Ok(ExitCode::from(2))
    };
    let settings = match settings_path.map(|p| preflight::read_settings(std::path::Path::new(&p))) {
        None => serde_json::json!({}),
        Some(Ok(settings)) => settings,
        Some(Err(err)) => return fail(err),
    };
    let started = std::time::Instant::now();
    let cluster = match preflight::read_dump(&dumps) {
        Ok(cluster) => cluster,
        Err(err) => return fail(err),
    };
    eprintln!(
        "read {} objects in {:.1} s",
        cluster.objects.len(),
        started.elapsed().as_secs_f64()
    );
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
    let policy = match Policy::load_annotated(&policy_path()) {
        Ok(policy) => policy,
        Err(err) => return fail(err),
    };
    let report = match preflight::run(&policy, std::sync::Arc::new(cluster), &settings, &progress) {
        Ok(report) => report,
        Err(err) => return fail(err),
    };
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    eprintln!(
        "replayed {} objects, done in {:.1} s",
        report.judged.len(),
        started.elapsed().as_secs_f64()
    );
    match output.as_str() {
        "policyreport" => print!(
            "{}",
            preflight::to_yaml_stream(&report.policy_reports("cozystack-capabilities"))?
        ),
        _ => print!("{}", report.text(list_clean)),
    }
    Ok(if report.findings() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
