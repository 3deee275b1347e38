//! The top-level decision: normalise the request into one change, then judge it by the table
//! of rules.

use crate::change::{Change, Entry};
use crate::model::evaluation::Evaluation;
use crate::model::facts::Cluster;
use crate::model::request::Operation;
use crate::model::request::Request;
use crate::model::settings::Settings;
use crate::model::verdict::{Verdict, Violation};
use crate::rules::{Check, DESCRIBE, Judge, Of, Outcome, RULES, Ruled};

/// Decides one admission request. Pure: the only inputs are the request, the settings and
/// what `cluster` answers.
pub fn evaluate(request: &Request, settings: &Settings, cluster: &dyn Cluster) -> Verdict {
    let eval = Evaluation::new(request, settings, cluster);
    let mut said = Said::default();
    let outcome = match Change::of(&eval) {
        Ok(change) => judge(&eval, &change, &mut said),
        Err(violation) => Err((DESCRIBE, violation)),
    };
    let mut verdict = match outcome {
        Ok(()) => Verdict::allow(),
        Err((row, violation)) => Verdict {
            rule: Some(row),
            ..Verdict::deny(violation.code, violation.message)
        },
    };
    verdict.warnings = said.warnings;
    verdict.warned_by = said.rows;
    verdict.waived_by = said.waived;
    verdict
}

/// The warnings the rows gave so far, each with the name of its row, and the rows that waived
/// a refusal.
#[derive(Default)]
struct Said {
    warnings: Vec<String>,
    rows: Vec<&'static str>,
    waived: Vec<&'static str>,
    /// The row running waived a refusal.
    waiving: bool,
}

/// A refusal, with the row of the table that made it ([`DESCRIBE`] before the table runs).
type Refusal = (&'static str, Violation);

/// Runs [`RULES`] over `change` in order, up to the first refusal.
fn judge(eval: &Evaluation, change: &Change, said: &mut Said) -> Result<(), Refusal> {
    let creates = eval.request.operation == Operation::Create;
    for rule in RULES {
        let before = said.warnings.len();
        said.waiving = false;
        let heard = match &rule.judge {
            Judge::Each(when, check) => apps(change, when.of)
                .iter()
                .filter(|app| when.takes(app, creates))
                .try_for_each(|app| match judge_app(eval, change, app, check) {
                    Some(outcome) => heed(eval, Some(app), outcome, said),
                    None => Ok(()),
                }),
            Judge::NewTenant(check) => (change.new_tenant.as_ref())
                .map_or(Ok(()), |tenant| heed(eval, None, check(eval, tenant), said)),
            Judge::Labels(check) => (change.labels.as_ref())
                .map_or(Ok(()), |labels| heed(eval, None, check(eval, labels), said)),
        };
        // Each warning this row gave, and its refusal, carry the row's name.
        said.rows
            .extend((before..said.warnings.len()).map(|_| rule.name));
        if said.waiving {
            said.waived.push(rule.name);
        }
        heard.map_err(|violation| (rule.name, violation))?;
    }
    Ok(())
}

/// The apps of `change` a per-app row of `of` reads (its `When` then takes some).
fn apps<'c>(change: &'c Change, of: Of) -> &'c [Entry] {
    match of {
        Of::Release => change.release.as_slice(),
        Of::Authored => change.authored().map_or(&[], std::slice::from_ref),
        Of::Entering(_) => &change.entering,
        Of::Leaving(_) => &change.leaving,
    }
}

/// What a row's check says of `app`, with what it needs resolved; `None` for a kind without
/// rules under a check that needs them. A failed lookup is heard.
fn judge_app(eval: &Evaluation, change: &Change, app: &Entry, check: &Check) -> Option<Outcome> {
    match check {
        Check::Any(check) => Some(check(eval, change, app)),
        Check::Ruled(check) => match app.known(eval) {
            Ok((subject, Some(rules))) => Some(check(
                eval,
                change,
                &Ruled {
                    entry: app,
                    subject,
                    rules,
                },
            )),
            Ok((_, None)) => None,
            Err(violation) => Some(Err(violation)),
        },
    }
}

/// Keeps a rule's warnings and waives a platform writer's waivable refusal, each told as what
/// the write does to `entry` (a module as the switch that renders it).
fn heed(
    eval: &Evaluation,
    entry: Option<&Entry>,
    outcome: Outcome,
    said: &mut Said,
) -> Result<(), Violation> {
    let told = |message: String| match entry {
        Some(entry) => entry.told(message),
        None => message,
    };
    let (found, outcome) = match outcome {
        Ok(said) => (said, Ok(())),
        Err(violation) => {
            let mut admitted = Vec::new();
            let outcome = eval.enforce(violation, &mut admitted);
            said.waiving |= outcome.is_ok();
            (admitted, outcome)
        }
    };
    said.warnings.extend(found.into_iter().map(told));
    outcome.map_err(|v| Violation {
        message: told(v.message),
        ..v
    })
}
