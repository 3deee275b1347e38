//! Shrinking: a sequence that breaks a guarantee cut to the shortest that still breaks it the
//! same way, and written out as an e2e scenario.

use crate::*;
use cozystack_platform::error::Error;
use cozystack_policy_runtime::cluster::index_key;
use serde_json::{Value, json};
use world::Action;

impl Run<'_> {
    /// Plays `actions` from the start: the index and the violation of the first step that
    /// breaks `invariant`.
    pub(crate) fn replay(
        &self,
        actions: &[Action],
        target: &Violation,
    ) -> Result<Option<(usize, Violation)>, Error> {
        let mut player = self.player()?;
        for (i, action) in actions.iter().enumerate() {
            if let Some(violation) = player.step(action)?.violation
                && target.same_cause(&violation)
            {
                return Ok(Some((i, violation)));
            }
        }
        match player.audit_agrees()? {
            Some(violation) if target.same_cause(&violation) && !actions.is_empty() => {
                Ok(Some((actions.len() - 1, violation)))
            }
            _ => Ok(None),
        }
    }

    /// The shortest sequence found (removing chunks, then single actions, as delta debugging
    /// does) that still breaks the same guarantee on the same write ([`Violation::same_cause`]),
    /// with its violation.
    pub fn shrink(
        &self,
        actions: Vec<Action>,
        violation: Violation,
    ) -> Result<(Vec<Action>, Violation), Error> {
        let mut current = actions;
        let mut found = violation;
        loop {
            let mut shrunk = false;
            let mut size = current.len().div_ceil(2);
            while size >= 1 {
                let mut at = 0;
                while at < current.len() {
                    let mut candidate = current.clone();
                    candidate.drain(at..(at + size).min(current.len()));
                    match self.replay(&candidate, &found)? {
                        Some((end, violation)) => {
                            candidate.truncate(end + 1);
                            current = candidate;
                            found = violation;
                            shrunk = true;
                        }
                        None => at += size,
                    }
                }
                size /= 2;
            }
            if !shrunk {
                return Ok((current, found));
            }
        }
    }
}

/// The counterexample as an e2e scenario: the cluster the request was judged on, as what it
/// adds to and removes from the starting one, the settings it ran under, the request, and the
/// verdict the rules require.
pub fn scenario(
    run: &Run<'_>,
    actions: &[Action],
    violation: &Violation,
    seed: u64,
) -> Result<String, Error> {
    let start = &run.cluster;
    let before: std::collections::HashMap<_, Value> =
        start.values().map(|o| (index_key(&o), o)).collect();
    let after: std::collections::HashMap<_, Value> = violation
        .cluster
        .values()
        .map(|o| (index_key(&o), o))
        .collect();
    let mut apply: Vec<Value> = after
        .iter()
        .filter(|(key, object)| before.get(*key) != Some(*object))
        .map(|(_, object)| object.clone())
        .collect();
    apply.sort_by_key(index_key);
    let mut remove: Vec<String> = before
        .keys()
        .filter(|key| !after.contains_key(*key))
        .map(|(_, kind, ns, name)| match ns.is_empty() {
            true => format!("{kind}/{name}"),
            false => format!("{kind}/{ns}/{name}"),
        })
        .collect();
    remove.sort();
    let steps: Vec<String> = actions.iter().map(Action::describe).collect();
    /// The scenario's fields in the order the scenario files write them.
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Scenario {
        name: String,
        description: String,
        apply: Vec<Value>,
        remove: Vec<String>,
        settings: Value,
        admission_request: Value,
        expect: Value,
    }
    let scenario = Scenario {
        name: format!("simulate-seed-{seed}"),
        description: format!(
            "Found by the lifecycle simulator (seed {seed}), shrunk to {} steps: {}. Broken: {} ({}).",
            steps.len(),
            steps.join("; then "),
            violation.invariant,
            violation.what
        ),
        apply,
        remove,
        settings: run.settings_after(actions),
        admission_request: violation.request.clone(),
        expect: match violation.expect_allowed {
            // Admitted with no waiver's warning.
            true if violation.invariant == PLATFORM_INVARIANT => {
                json!({"allowed": true, "warnings": []})
            }
            // A missing warning: the row that must give it (its wording is the module's).
            true if violation.invariant == AWAITING_INVARIANT => {
                json!({"allowed": true, "warnedBy": [violation.rule]})
            }
            true => json!({"allowed": true}),
            // One of the rows the statement says refuse it.
            false if !violation.rows.is_empty() => {
                json!({"allowed": false, "code": 403, "ruleIn": violation.rows})
            }
            // The rule the denial must come from, or a row before it.
            false => {
                json!({"allowed": false, "code": 403, "ruleIn": rows_through(violation.rule)})
            }
        },
    };
    serde_yaml::to_string(&[scenario]).map_err(|e| Error::Encode {
        what: "the counterexample",
        reason: e.to_string(),
    })
}
