//! The top-level decision: normalise the request into one change, then judge it by the table
//! of rules.

use crate::change::{Change, Entry};
use crate::model::evaluation::Evaluation;
use crate::model::facts::Cluster;
use crate::model::request::Request;
use crate::model::settings::Settings;
use crate::model::verdict::{Verdict, Violation};
use crate::rules::{Judge, Outcome, RULES, Whose};

/// Decides one admission request. Pure: the only inputs are the request, the settings and
/// what `cluster` answers.
pub fn evaluate(request: &Request, settings: &Settings, cluster: &dyn Cluster) -> Verdict {
    let eval = Evaluation::new(request, settings, cluster);
    let mut said = Said::default();
    let outcome = match Change::of(&eval) {
        Ok(change) => judge(&eval, &change, &mut said),
        Err(violation) => Err((None, violation)),
    };
    let mut verdict = match outcome {
        Ok(()) => Verdict::allow(),
        Err((row, violation)) => Verdict {
            rule: row,
            ..Verdict::deny(violation.code, violation.message)
        },
    };
    verdict.warnings = said.warnings;
    verdict.warned_by = said.rows;
    verdict
}

/// The warnings the rows gave so far, each with the name of its row.
#[derive(Default)]
struct Said {
    warnings: Vec<String>,
    rows: Vec<&'static str>,
}

/// A refusal, with the row of the table that made it (none before the table runs).
type Refusal = (Option<&'static str>, Violation);

/// Runs [`RULES`] over `change` in order, up to the first refusal.
fn judge(eval: &Evaluation, change: &Change, said: &mut Said) -> Result<(), Refusal> {
    for rule in RULES {
        let before = said.warnings.len();
        let heard = match &rule.judge {
            Judge::Entering(whose, check) => {
                each(eval, change, &change.entering, *whose, *check, said)
            }
            Judge::Leaving(whose, check) => {
                each(eval, change, &change.leaving, *whose, *check, said)
            }
            part => judge_part(eval, change, part)
                .map_or(Ok(()), |outcome| heed(eval, None, outcome, said)),
        };
        // Each warning this row gave, and its refusal, carry the row's name.
        said.rows
            .extend((before..said.warnings.len()).map(|_| rule.name));
        heard.map_err(|violation| (Some(rule.name), violation))?;
    }
    Ok(())
}

/// A per-instance row over `entries`, those `whose` takes, up to the first refusal.
fn each(
    eval: &Evaluation,
    change: &Change,
    entries: &[Entry],
    whose: Whose,
    check: fn(&Evaluation, &Change, &Entry) -> Outcome,
    said: &mut Said,
) -> Result<(), Violation> {
    entries
        .iter()
        .filter(|e| whose.takes(e))
        .try_for_each(|entry| heed(eval, Some(entry), check(eval, change, entry), said))
}

/// What a row that judges one part of `change` says; `None` when the change has no such part.
fn judge_part(eval: &Evaluation, change: &Change, judge: &Judge) -> Option<Outcome> {
    match judge {
        Judge::Release(check) => change.release.as_ref().map(|app| check(eval, app)),
        // A kind without rules has nothing to say of its author; a failed lookup is heard.
        Judge::Authored(check) => change.authored().and_then(|app| match app.known(eval) {
            Ok((_, Some(rules))) => Some(check(eval, change, app, rules)),
            Ok((_, None)) => None,
            Err(violation) => Some(Err(violation)),
        }),
        Judge::NewTenant(check) => change.new_tenant.as_ref().map(|t| check(eval, t)),
        Judge::Labels(check) => change.labels.as_ref().map(|l| check(eval, l)),
        Judge::Entering(..) | Judge::Leaving(..) => None,
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
            (admitted, outcome)
        }
    };
    said.warnings.extend(found.into_iter().map(told));
    outcome.map_err(|v| Violation {
        message: told(v.message),
        ..v
    })
}
