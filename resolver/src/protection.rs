//! `protection`: deletion of a provider while consumers depend on it, and admin-only edits.
//!
//! A provider instance in namespace X is referenced by class C when a namespace of X's
//! subtree (X itself, plus descendants when the kind shares with children) resolves C to X
//! through `namespace.cozystack.io/capability.<C>` or the legacy `namespace.cozystack.io/<C>`,
//! and hosts an instance of a kind that consumes C. Another live provider of C in X keeps the
//! class served, so deleting one of two is not blocked.

use std::collections::BTreeSet;

use crate::capability::{capability_key, legacy_key, points_to};
use crate::evaluation::Evaluation;
use crate::rules::{Deletion, Edit, KindRules, Share};
use crate::tenant::ANCESTOR_PREFIX;
use crate::verdict::{Violation, list_some};

const SHOWN: usize = 5;

/// Denies removing the instance `app` of `rules.kind` in `namespace` while it is referenced.
pub fn check_removal(
    eval: &Evaluation,
    rules: &KindRules,
    namespace: &str,
    app: &str,
) -> Result<(), Violation> {
    if rules.deletion != Deletion::Protect || rules.capability.provides.is_empty() {
        return Ok(());
    }
    let definitions = eval.definitions()?;
    let definitions_error = |err: crate::error::RuleError| {
        Violation::rule(format!(
            "{err}; cannot tell which kinds consume what {kind} provides — fix the ApplicationDefinition",
            kind = rules.kind
        ))
    };
    // Only these labels decide: subtree membership and the provider labels of each class.
    let subtree_key = format!("{ANCESTOR_PREFIX}{namespace}");
    let in_subtree = |ns: &crate::facts::Namespace| {
        ns.name == namespace
            || (rules.capability.share == Share::Children && ns.labels.contains_key(&subtree_key))
    };
    let keep: BTreeSet<String> = rules
        .capability
        .provides
        .iter()
        .flat_map(|c| [capability_key(c.as_str()), legacy_key(c.as_str())])
        .chain([subtree_key.clone()])
        .collect();
    let all = eval.namespaces_with(&keep)?;
    let mut consumers = Vec::new();
    let mut classes = Vec::new();
    for class in &rules.capability.provides {
        let referencing: BTreeSet<&str> = all
            .iter()
            .filter(|ns| in_subtree(ns) && points_to(&ns.labels, class, namespace, eval.settings))
            .map(|ns| ns.name.as_str())
            .collect();
        if referencing.is_empty() {
            continue;
        }
        // Another live provider of the class in the same namespace keeps it served.
        let mut still_served = false;
        for provider in definitions
            .kinds_where(|r| r.provides(class))
            .map_err(definitions_error)?
        {
            still_served |= eval.instances(&provider.kind)?.iter().any(|i| {
                i.namespace == namespace
                    && !i.terminating
                    && !(provider.kind == rules.kind && i.app == app)
            });
        }
        if still_served {
            continue;
        }
        let before = consumers.len();
        for consumer in definitions
            .kinds_where(|r| r.consumes(class))
            .map_err(definitions_error)?
        {
            for instance in eval.instances(&consumer.kind)?.iter() {
                let is_self = consumer.kind == rules.kind
                    && instance.namespace == namespace
                    && instance.app == app;
                if referencing.contains(instance.namespace.as_str()) && !is_self {
                    let mut label = format!(
                        "{}/{} ({})",
                        instance.namespace, instance.app, consumer.kind
                    );
                    if instance.terminating {
                        label.push_str(" terminating");
                    }
                    consumers.push(label);
                }
            }
        }
        if consumers.len() > before {
            classes.push(class.to_string());
        }
    }
    if consumers.is_empty() {
        return Ok(());
    }
    consumers.sort();
    consumers.dedup();
    Err(Violation::waivable(format!(
        "{kind} {namespace}/{app} is protected while it provides {classes} to consumers: {list}; delete or move those consumers first, or give their tenants another {classes} provider (protection.deletion: protect)",
        kind = rules.kind,
        classes = classes.join(", "),
        list = list_some(&consumers, SHOWN),
    )))
}

/// Denies a spec change of an `adminOnly` kind by anyone but the platform.
pub fn check_edit(eval: &Evaluation, rules: &KindRules) -> Result<(), Violation> {
    if rules.edit != Edit::AdminOnly || eval.is_platform() {
        return Ok(());
    }
    let request = eval.request;
    let (Some(new), Some(old)) = (&request.object, &request.old_object) else {
        return Ok(());
    };
    if new.spec == old.spec {
        return Ok(());
    }
    Err(Violation::rule(format!(
        "{kind} {namespace}/{name}: only the platform may change its spec (protection.edit: adminOnly), and {user} is not a platform identity; ask a platform administrator to make the change",
        kind = rules.kind,
        namespace = request.namespace,
        name = request.name,
        user = request.user.username,
    )))
}
