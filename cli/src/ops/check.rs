//! `check`'s report: what an operator and a CI system read of a change set judged against a
//! cluster as its writes land ([`cozystack_platform::admission::run`]): the text, JSON and JUnit
//! forms, and the exit code.

use cozystack_policy_runtime::policy::{rule_of, waived_by, warned_by};
use serde_json::{Value, json};

use cozystack_platform::apiserver::Identity;

pub use cozystack_platform::admission::{Observer, run, run_kustomizations};
pub use cozystack_platform::flux::apply::{
    Applied, Applier, ChangeSet, Disposition, Pruned, Report, STAYS, Step, applies_over,
    blocked_steps, pruned, unsubstituted,
};

/// The report's forms, for the verbs that print it.
pub trait Presented {
    fn exit_code(&self, warn: Option<u8>) -> u8;
    fn text(&self) -> String;
    fn json(&self, identity: &Identity) -> Value;
    fn junit(&self, judged_by: Option<&str>) -> String;
}

impl Presented for Report {
    /// 2 when a write cannot be made, 1 when one is refused or a Kustomization never lands (a
    /// dependency missing, not Ready or in a cycle: Flux retries forever); else 0, or `warn`
    /// when one was admitted with a warning and the caller asked warnings to fail (under the
    /// stock `platformWriters: warn`, every protection problem Flux would cause is a warning).
    fn exit_code(&self, warn: Option<u8>) -> u8 {
        if self.count(Disposition::Error) > 0 {
            2
        } else if self.count(Disposition::Denied) + self.count(Disposition::Rejected) > 0
            || !self.failures.is_empty()
        {
            1
        } else if self.count(Disposition::Warn) > 0 {
            warn.unwrap_or(0)
        } else {
            0
        }
    }

    /// One line per manifest, under its stage of Flux's apply, then what the change set
    /// comes to.
    fn text(&self) -> String {
        let mut out = String::new();
        for note in &self.notes {
            out.push_str(&format!("{note}\n"));
        }
        if !self.notes.is_empty() {
            out.push('\n');
        }
        let mut stage = None;
        for step in &self.steps {
            if step.stage != stage {
                stage = step.stage;
                if let Some(stage) = stage {
                    out.push_str(&format!("{}\n", stage.describe()));
                }
            }
            let operation = if step.operation.is_empty() {
                String::new()
            } else {
                format!("{} ", step.operation)
            };
            let mut line = format!(
                "{:<8} {operation}{} ({})",
                step.outcome.label(),
                step.reference,
                step.origin
            );
            if let Some(message) = &step.message {
                line.push_str(&format!(": {message}"));
            }
            for warning in &step.warnings {
                line.push_str(&format!(" | warning: {warning}"));
            }
            if let Some(note) = &step.note {
                line.push_str(&format!(" | {note}"));
            }
            out.push_str(&line);
            out.push('\n');
        }
        let judged = self.steps.iter().filter(|s| s.request.is_some()).count();
        out.push_str(&format!(
            "\n{} manifests: {judged} writes judged ({} allowed, {} with warnings, {} denied), {} not judged by this policy, {} absent, {} errors\n",
            self.steps.len(),
            self.count(Disposition::Allowed),
            self.count(Disposition::Warn),
            self.count(Disposition::Denied),
            self.count(Disposition::NotJudged),
            self.count(Disposition::Absent),
            self.count(Disposition::Error),
        ));
        for (outcome, what) in [
            (
                Disposition::Rejected,
                "refused by the API server before admission",
            ),
            (Disposition::Unchanged, "left as they are by Flux"),
            (
                Disposition::Blocked,
                "not applied by Flux: each line says what stops it",
            ),
        ] {
            let n = self.count(outcome);
            if n > 0 {
                out.push_str(&format!("{n} {what}\n"));
            }
        }
        let landed = self
            .steps
            .iter()
            .filter(|s| s.note.as_deref().is_some_and(|n| n.contains(STAYS)))
            .count();
        if landed > 0 {
            out.push_str(&format!(
                "{landed} written by cozystack-api during the dry run of a stage that failed: they stay in the cluster\n"
            ));
        }
        for failure in &self.failures {
            out.push_str(&format!("FAILED: {failure}\n"));
        }
        out
    }

    /// The report as JSON: every step with its request and the policy's response.
    fn json(&self, identity: &Identity) -> Value {
        let steps: Vec<Value> = self
            .steps
            .iter()
            .map(|s| {
                json!({"origin": s.origin, "object": s.reference, "operation": s.operation,
                    "stage": s.stage, "outcome": s.outcome, "message": s.message, "rule": s.rule(),
                    "warnings": s.warnings,
                    "warnedBy": s.response.as_ref().map(warned_by).unwrap_or_default(),
                    "waivedBy": s.response.as_ref().map(waived_by).unwrap_or_default(),
                    "note": s.note,
                    "applied": matches!(s.outcome, Disposition::Allowed | Disposition::Warn | Disposition::NotJudged),
                    "request": s.request, "response": s.response,
                    "then": s.then.iter().map(|sent| json!({"sender": sent.sender.describe(),
                        "write": sent.describe(), "allowed": sent.allowed(),
                        "rule": rule_of(&sent.response), "warnedBy": warned_by(&sent.response),
                        "waivedBy": waived_by(&sent.response),
                        "request": sent.request, "response": sent.response})).collect::<Vec<_>>()})
            })
            .collect();
        json!({"identity": {"username": identity.username, "groups": identity.groups},
            "notes": self.notes, "failures": self.failures,
            "steps": steps,
            "summary": {"manifests": self.steps.len(), "allowed": self.count(Disposition::Allowed),
                "warn": self.count(Disposition::Warn), "denied": self.count(Disposition::Denied),
                "notJudged": self.count(Disposition::NotJudged), "absent": self.count(Disposition::Absent),
                "errors": self.count(Disposition::Error), "rejected": self.count(Disposition::Rejected),
                "unchanged": self.count(Disposition::Unchanged),
                "blocked": self.count(Disposition::Blocked)}})
    }

    /// JUnit XML: one test case per manifest (a denial a failure, a write that cannot be made
    /// an error, a manifest not judged skipped), as CI systems render test reports.
    /// `judged_by` (which settings, rules and release) is the suite's property of that name;
    /// a change set that could not be read was judged by none.
    fn junit(&self, judged_by: Option<&str>) -> String {
        fn escape(text: &str) -> String {
            text.chars()
                .map(|c| match c {
                    '&' => "&amp;".into(),
                    '<' => "&lt;".into(),
                    '>' => "&gt;".into(),
                    '"' => "&quot;".into(),
                    '\'' => "&apos;".into(),
                    c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => " ".into(),
                    c => c.to_string(),
                })
                .collect()
        }
        let mut out = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"cozystack-policy check\" tests=\"{n}\" failures=\"{f}\" errors=\"{e}\" skipped=\"{s}\">\n  <testsuite name=\"cozystack-capabilities\" tests=\"{n}\" failures=\"{f}\" errors=\"{e}\" skipped=\"{s}\">\n",
            n = self.steps.len() + self.failures.len(),
            f = self.count(Disposition::Denied)
                + self.count(Disposition::Rejected)
                + self.failures.len(),
            e = self.count(Disposition::Error),
            s = self.count(Disposition::NotJudged)
                + self.count(Disposition::Absent)
                + self.count(Disposition::Unchanged)
                + self.count(Disposition::Blocked),
        );
        if let Some(judged_by) = judged_by {
            out.push_str(&format!(
                "    <properties>\n      <property name=\"judgedBy\" value=\"{}\"/>\n    </properties>\n",
                escape(judged_by)
            ));
        }
        for step in &self.steps {
            let name = if step.operation.is_empty() {
                step.reference.clone()
            } else {
                format!("{} {}", step.operation, step.reference)
            };
            out.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"{}\">\n",
                escape(&step.origin),
                escape(&name)
            ));
            let message = escape(step.message.as_deref().unwrap_or_default());
            match step.outcome {
                // The type is the row of the rule table that refused.
                Disposition::Denied => out.push_str(&format!(
                    "      <failure type=\"{}\" message=\"{message}\">{message}</failure>\n",
                    escape(step.rule().unwrap_or("denied"))
                )),
                Disposition::Error => out.push_str(&format!(
                    "      <error type=\"unusable\" message=\"{message}\">{message}</error>\n"
                )),
                Disposition::Rejected => out.push_str(&format!(
                    "      <failure type=\"rejected\" message=\"{message}\">{message}</failure>\n"
                )),
                Disposition::NotJudged | Disposition::Absent | Disposition::Unchanged => {
                    out.push_str(&format!("      <skipped message=\"{message}\"/>\n"))
                }
                Disposition::Blocked => {
                    let note = escape(step.note.as_deref().unwrap_or_default());
                    out.push_str(&format!("      <skipped message=\"{note}\"/>\n"))
                }
                Disposition::Allowed | Disposition::Warn => {}
            }
            if !step.warnings.is_empty() {
                let warnings: Vec<String> = step.warnings.iter().map(|w| escape(w)).collect();
                out.push_str(&format!(
                    "      <system-out>{}</system-out>\n",
                    warnings
                        .iter()
                        .map(|w| format!("warning: {w}"))
                        .collect::<Vec<_>>()
                        .join("\n")
                ));
            }
            out.push_str("    </testcase>\n");
        }
        // A Kustomization that never lands fails the change, though no write of it was refused.
        for failure in &self.failures {
            let message = escape(&failure.to_string());
            let name = format!("Kustomization {}", failure.kustomization);
            out.push_str(&format!(
                "    <testcase classname=\"flux\" name=\"{}\">\n      <failure type=\"never-applies\" message=\"{message}\">{message}</failure>\n    </testcase>\n",
                escape(&name)
            ));
        }
        out.push_str("  </testsuite>\n</testsuites>\n");
        out
    }
}

/// The report of a change set that cannot be read: one error naming where, so a CI system
/// that reads the JUnit file shows why the check stopped.
pub fn unreadable(error: &str) -> Report {
    // Errors name their file first (`path, document N: …`, `path: …`).
    let origin = error.split(": ").next().unwrap_or(error);
    let origin = origin.split(", document").next().unwrap_or(origin);
    let step = Step::unsent(
        origin.to_owned(),
        "the change set".to_owned(),
        Disposition::Error,
        error.to_owned(),
    );
    Report {
        steps: vec![step],
        ..Report::default()
    }
}
