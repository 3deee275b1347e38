//! `protection`: deletion of a provider while consumers depend on it, and admin-only edits.
//!
//! A provider instance in namespace X is referenced by class C when a namespace of X's
//! subtree (X itself, plus descendants when the kind shares with children) resolves C to X
//! through `namespace.cozystack.io/capability.<C>` or the legacy `namespace.cozystack.io/<C>`,
//! and hosts an instance of a kind that consumes C. Another live provider of C in X keeps the
//! class served, so deleting one of two is not blocked.

use std::collections::BTreeSet;

use crate::capability::ProviderKeys;
use crate::evaluation::Evaluation;
use crate::facts::InstanceRef;
use crate::rules::{Class, Deletion, Edit, KindRules, Share};
use crate::tenant::ANCESTOR_PREFIX;
use crate::verdict::{Violation, list_head};

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
    let classes: Vec<(&Class, ProviderKeys)> = rules
        .capability
        .provides
        .iter()
        .map(|class| (class, ProviderKeys::new(class, eval.settings)))
        .collect();
    let is_self = |consumer: &KindRules, instance: &InstanceRef| {
        consumer.kind == rules.kind && instance.namespace == namespace && instance.app == app
    };
    // Per class still at stake, the instances of its consumer kinds. The release lists come
    // first: they are small, and without a consumer the namespace list is not needed at all.
    let mut at_stake = Vec::new();
    for (class, keys) in &classes {
        // Another live provider of the class in the same namespace keeps it served.
        let mut still_served = false;
        for provider in definitions
            .kinds_where(|r| r.provides(class))
            .map_err(definitions_error)?
        {
            still_served |= eval
                .instances(provider)?
                .iter()
                .any(|i| i.namespace == namespace && !i.terminating && !is_self(provider, &i));
        }
        if still_served {
            continue;
        }
        let mut lists = Vec::new();
        for consumer in definitions
            .kinds_where(|r| r.consumes(class))
            .map_err(definitions_error)?
        {
            let instances = eval.instances(consumer)?;
            if instances.iter().any(|i| !is_self(consumer, &i)) {
                lists.push((consumer, instances));
            }
        }
        if !lists.is_empty() {
            at_stake.push((class, keys, lists));
        }
    }
    if at_stake.is_empty() {
        return Ok(());
    }
    let keep: BTreeSet<String> = at_stake
        .iter()
        .flat_map(|(_, keys, _)| keys.keys().map(str::to_owned))
        .chain([subtree_key.clone()])
        .collect();
    let all = eval.namespaces_with(&keep)?;
    // Consumers are gathered borrowed and sorted; only the few shown are formatted.
    let mut consumers: Vec<[&str; 4]> = Vec::new();
    let mut served = Vec::new();
    for (class, keys, lists) in &at_stake {
        // The namespaces that resolve the class here.
        let referencing: BTreeSet<&str> = all
            .iter()
            .filter(|ns| in_subtree(ns) && keys.points_to(&ns.labels, namespace))
            .map(|ns| ns.name.as_str())
            .collect();
        let before = consumers.len();
        for (consumer, instances) in lists {
            consumers.extend(
                instances
                    .iter()
                    .filter(|i| referencing.contains(i.namespace) && !is_self(consumer, i))
                    .map(|i| {
                        let mark = if i.terminating { " terminating" } else { "" };
                        [i.namespace, i.app, consumer.kind.as_str(), mark]
                    }),
            );
        }
        if consumers.len() > before {
            served.push(class.as_str());
        }
    }
    if consumers.is_empty() {
        return Ok(());
    }
    consumers.sort_unstable();
    consumers.dedup();
    // The first few in the order the text reads, without sorting all of them by text.
    let by_text = |a: &[&str; 4], b: &[&str; 4]| text(a).cmp(text(b));
    if consumers.len() > SHOWN {
        consumers.select_nth_unstable_by(SHOWN, by_text);
    }
    let head = SHOWN.min(consumers.len());
    consumers[..head].sort_unstable_by(by_text);
    let shown: Vec<String> = consumers[..head]
        .iter()
        .map(|c| String::from_utf8_lossy(&text(c).collect::<Vec<u8>>()).into_owned())
        .collect();
    let list = list_head(&shown, consumers.len());
    Err(Violation::waivable(format!(
        "{kind} {namespace}/{app} is protected while it provides {classes} to consumers: {list}; delete or move those consumers first, or give their tenants another {classes} provider (protection.deletion: protect)",
        kind = rules.kind,
        classes = served.join(", "),
    )))
}

/// A consumer as shown, `namespace/app (Kind)[ terminating]`, byte by byte: sorting by it
/// orders the list as the text reads without formatting every consumer.
fn text<'a>([ns, app, kind, mark]: &[&'a str; 4]) -> impl Iterator<Item = u8> + 'a {
    [*ns, "/", *app, " (", *kind, ")", *mark]
        .into_iter()
        .flat_map(str::bytes)
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
