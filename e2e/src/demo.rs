//! `make demo`: a short, narrated sequence on the bundled cluster, through the real wasm.

use crate::scenario::{Bundle, Scenario};
use cozystack_policy_runtime::policy::{Policy, verdict_of, warnings_of};

fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + word.len() + 1 > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines.join(&format!("\n{indent}"))
}

/// Plays `scenarios`, printing request, verdict and message; fails when one misbehaves.
pub fn play(policy: &Policy, bundle: &Bundle, scenarios: &[Scenario]) -> Result<String, String> {
    let mut out = String::new();
    out.push_str(
        "Cozystack capabilities policy: demo on the bundled cluster, through policy.wasm\n\n",
    );
    out.push_str("  tenant-root ─┬─ tenant-ktj (own monitoring and etcd) ── tenant-ktj-htdev\n");
    out.push_str("               └─ tenant-acme (no etcd provider)\n");
    let mut summary = Vec::new();
    let mut failed = Vec::new();
    for (i, scenario) in scenarios.iter().enumerate() {
        let outcome = crate::scenario::run(policy, bundle, scenario)?;
        let Some(evaluation) = &outcome.evaluation else {
            continue;
        };
        let r = scenario
            .request
            .as_ref()
            .ok_or("demo scenarios use the short request form")?;
        let who = if r.groups.is_empty() {
            r.user.clone()
        } else {
            format!("{} [{}]", r.user, r.groups.join(", "))
        };
        let target = if r.namespace.is_empty() {
            r.name.clone()
        } else {
            format!("{}/{}", r.namespace, r.name)
        };
        let request = format!("{} {} {target}", r.operation, r.kind);
        let response = &evaluation.response;
        let warnings = warnings_of(response);
        let verdict = verdict_of(response);
        let indent = " ".repeat(14);
        out.push_str(&format!(
            "\n{:>2}. {}\n",
            i + 1,
            wrap(&scenario.description, 100, "    ")
        ));
        out.push_str(&format!(
            "    request   {request}\n    as        {who}\n    verdict   {verdict}\n"
        ));
        if let Some(message) = response["message"].as_str() {
            out.push_str(&format!("    message   {}\n", wrap(message, 96, &indent)));
        }
        for warning in &warnings {
            out.push_str(&format!("    warning   {}\n", wrap(warning, 96, &indent)));
        }
        summary.push(format!(
            "{:>2}  {:<22} {request} as {}",
            i + 1,
            verdict,
            r.user
        ));
        if !outcome.passed() {
            failed.push(format!(
                "{}: {}",
                scenario.name,
                outcome.problems.join("; ")
            ));
        }
    }
    out.push_str(&format!(
        "\nSummary\n{}\n{}\n",
        "─".repeat(90),
        summary.join("\n")
    ));
    if failed.is_empty() {
        Ok(out)
    } else {
        Err(format!(
            "{out}\ndemo scenarios misbehaved:\n{}",
            failed.join("\n")
        ))
    }
}
