//! The top-level decision: normalise the request into one change, then judge it by the table
//! of rules.

use crate::change::{Change, Entry};
use crate::model::evaluation::Evaluation;
use crate::model::facts::Cluster;
use crate::model::request::Request;
use crate::model::settings::Settings;
use crate::model::verdict::{Verdict, Violation};
use crate::rules::{Judge, Outcome, RULES};

/// Decides one admission request. Pure: the only inputs are the request, the settings and
/// what `cluster` answers.
pub fn evaluate(request: &Request, settings: &Settings, cluster: &dyn Cluster) -> Verdict {
    let eval = Evaluation::new(request, settings, cluster);
    let mut warnings = Vec::new();
    let outcome = Change::of(&eval).and_then(|change| judge(&eval, &change, &mut warnings));
    match outcome {
        Ok(()) => Verdict::allow_with(warnings),
        Err(violation) => Verdict {
            warnings,
            ..Verdict::deny(violation.code, violation.message)
        },
    }
}

/// Runs [`RULES`] over `change` in order, up to the first refusal.
fn judge(eval: &Evaluation, change: &Change, warnings: &mut Vec<String>) -> Result<(), Violation> {
    for rule in RULES {
        let (entries, whose, check) = match &rule.judge {
            Judge::Entering(whose, check) => (&change.entering, whose, check),
            Judge::Leaving(whose, check) => (&change.leaving, whose, check),
            part => {
                if let Some(outcome) = judge_part(eval, change, part) {
                    heed(eval, None, outcome, warnings)?;
                }
                continue;
            }
        };
        for entry in entries.iter().filter(|e| whose.takes(e)) {
            heed(eval, Some(entry), check(eval, change, entry), warnings)?;
        }
    }
    Ok(())
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
    warnings: &mut Vec<String>,
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
    warnings.extend(found.into_iter().map(told));
    outcome.map_err(|v| Violation {
        message: told(v.message),
        ..v
    })
}
