//! The report: one table row per workload, then the targets, met or missed with their causes.

use std::collections::BTreeSet;

use crate::breakdown::Phases;
use crate::model::{Modelled, Stats, micros};
use crate::targets::Target;
use crate::workloads::Row;

/// The table's head.
pub fn header() {
    println!(
        "| workload | host calls | bytes served | largest answer | guest heap peak KiB | guest µs | host µs | modelled median µs | modelled p99 µs | spread | × accept-all | × accept-all, warm | native µs | floor calls | floor bytes | floor µs | ÷ floor | kwctl µs | model ÷ kwctl |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
}

/// kwctl's range, and the model's ratio to its middle.
fn against_kwctl(kwctl: Option<(f64, f64)>, model_micros: f64) -> (String, String) {
    match kwctl {
        None => ("–".to_owned(), "–".to_owned()),
        Some((low, high)) => (
            if low == high {
                format!("{low:.0}")
            } else {
                format!("{low:.0}–{high:.0}")
            },
            format!("{:.2}", model_micros / ((low + high) / 2.0)),
        ),
    }
}

/// One workload's row, with kwctl's figure beside the model's where the workload has one.
pub fn row(row: &Row) {
    let (w, model) = (&row.workload, &row.model);
    let (kwctl, ratio) = against_kwctl(w.kwctl, model.total.as_secs_f64() * 1e6);
    // kwctl bench's loop, timed for requests without host calls.
    let warm = row
        .warm_floors
        .map_or("–".to_owned(), |ratio| format!("{ratio:.2}"));
    println!(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {warm} | {} | {} | {} | {} | {:.2} | {kwctl} | {ratio} |",
        w.name,
        model.calls,
        model.bytes,
        row.largest,
        row.heap_peak / 1024,
        micros(model.guest()),
        micros(model.host),
        micros(model.total),
        micros(row.p99 + model.residual()),
        row.spread,
        row.floors,
        micros(row.native),
        row.protocol.calls,
        row.protocol.bytes,
        micros(row.protocol.total),
        row.over_floor(),
    );
}

/// What `make bench-kwctl` measured of the accept-all floor (settings `{}`) and of the
/// context-aware peer, lowest and highest of the runs of one day (docs/benchmarks.md, "In
/// Kubewarden's own evaluator").
const KWCTL_FLOOR: (f64, f64) = (81.0, 127.0);
const KWCTL_PEER: (f64, f64) = (354.0, 492.0);

/// The accept-all floor's row.
pub fn floor((floor, payload): &(Stats, usize)) {
    let modelled = floor.median() + crate::model::per_request(*payload);
    let (kwctl, ratio) = against_kwctl(Some(KWCTL_FLOOR), modelled.as_secs_f64() * 1e6);
    println!(
        "| accept-all floor | 0 | 0 | 0 | – | {} | 0 | {} | {} | {:.2} | 1.00 | 1.00 | – | 0 | 0 | {} | 1.00 | {kwctl} | {ratio} |",
        micros(floor.median()),
        micros(floor.median()),
        micros(floor.p99()),
        floor.spread(),
        micros(floor.median()),
    );
}

/// The context-aware peer's row (`bench/src/peer.rs`).
pub fn peer(peer: &Modelled) {
    let (kwctl, ratio) = against_kwctl(Some(KWCTL_PEER), peer.total.as_secs_f64() * 1e6);
    println!(
        "| context-aware peer (the context-aware test policy's {} lookups, SDK) | {} | {} | – | – | {} | {} | {} | – | – | – | – | – | – | – | – | – | {kwctl} | {ratio} |",
        peer.calls,
        peer.calls,
        peer.bytes,
        micros(peer.guest()),
        micros(peer.host),
        micros(peer.total),
    );
}

/// `validate_settings` on the bundled settings.
pub fn validate_settings(settings: &Stats) {
    println!(
        "| validate_settings (bundled) | 0 | 0 | 0 | – | {} | 0 | {} | {} | {:.2} | – | – | – | – | – | – | – | – | – |",
        micros(settings.median()),
        micros(settings.median()),
        micros(settings.p99()),
        settings.spread()
    );
}

/// Where each request without host calls spends its time, in the native build.
pub fn phases(phases: &[(String, Phases)]) {
    if phases.is_empty() {
        return;
    }
    println!("\nRequests without host calls, native phases (medians):");
    for (name, split) in phases {
        println!("  {name}: {}", split.line());
    }
}

/// What one background audit run costs the policy-server for the Info releases, from the
/// replay rows: each tenant's release is replayed once. A replay that counted its release
/// against every tenant's would make the run grow with the square of the tenants.
pub fn audit(rows: &[Row]) {
    println!(
        "\nAn audit run over the Info releases (one replay per tenant, modelled median each):"
    );
    for tenants in crate::workloads::AUDIT_REPLAY_TENANTS {
        let name = crate::workloads::audit_replay_name(tenants);
        if let Some(row) = rows.iter().find(|r| r.workload.name == name) {
            let run = row.model.total.as_secs_f64() * tenants as f64;
            println!(
                "  {tenants} tenants: {tenants} × {} µs = {run:.1} s of policy-server time ({} host call(s), {} bytes each)",
                micros(row.model.total),
                row.model.calls,
                row.model.bytes,
            );
        }
    }
}

/// Prints the targets and the list keys; the number missed.
pub fn targets(targets: &[Target], keys: &BTreeSet<String>) -> usize {
    println!("\nTargets");
    let mut missed = 0;
    for target in targets {
        println!(
            "  [{}] {}",
            if target.met { "met" } else { "MISSED" },
            target.text
        );
        if !target.met && !target.cause.is_empty() {
            println!("           cause: {}", target.cause);
        }
        missed += usize::from(!target.met);
    }
    println!(
        "\nbench: {} passed, {missed} failed",
        targets.len() - missed
    );
    for key in keys {
        println!("  list key: {key}");
    }
    missed
}

/// Each weighed workload's protocol floor as Kubewarden answers today, and with masks that reach
/// metadata (the upstream change docs/benchmarks.md states).
pub fn upstream(weighed: &[(&Row, crate::floor::Floor)]) {
    println!();
    println!("Protocol floors if Kubewarden's field masks reached metadata:");
    for (row, reaching) in weighed {
        println!(
            "  {}: {} bytes and {} µs today, {} bytes and {} µs with masks reaching metadata ({:.1}× fewer bytes, {:.1}× faster); the policy today {} µs",
            row.workload.name,
            row.protocol.bytes,
            micros(row.protocol.total),
            reaching.bytes,
            micros(reaching.total),
            row.protocol.bytes as f64 / reaching.bytes.max(1) as f64,
            row.protocol.total.as_secs_f64() / reaching.total.as_secs_f64(),
            micros(row.model.total),
        );
    }
}
