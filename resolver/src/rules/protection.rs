//! `protection.deletion: protect`: no removal of a provider while consumers depend on it.
//!
//! A provider instance in namespace X is referenced by class C when a namespace of X's
//! subtree (X itself, plus descendants when the kind shares with children) resolves C to X
//! through `namespace.cozystack.io/capability.<C>` or the legacy `namespace.cozystack.io/<C>`,
//! and hosts an instance of a kind that consumes C. A removal is judged by one question: after
//! the write, does each such consumer still resolve to a provider that renders today? When the
//! labels stay (a DELETE), another live provider of C in X that renders keeps the class served:
//! for the whole subtree when it shares with children, for X alone otherwise. An instance its
//! chart never rendered (off its slot) serves nothing. When the write moves the labels (a Tenant
//! switch turned off), every consumer pointing at X moves up the tree, whatever else sits in X.

use std::collections::BTreeSet;
use std::rc::Rc;

use crate::change::{Change, Origin, Subject, renders};
use crate::model::collect::{StrSet, cmp_joined, front_positions, inserted, sorted_by};
use crate::model::definition_set::DefinitionSet;
use crate::model::evaluation::Evaluation;
use crate::model::facts::{InstanceRef, Instances, Namespace};
use crate::model::kinds::{Class, Deletion, KindRules, Role, Share};
use crate::model::lookup::{self, PointLookups};
use crate::model::providers::ProviderKeys;
use crate::model::tenant::{self, ANCESTOR_PREFIX};
use crate::model::verdict::{Violation, list_head};
use crate::rules::{Outcome, Ruled};

const SHOWN: usize = 5;

/// One class the removal would leave unserved somewhere, and who might be stranded.
struct AtStake<'d> {
    class: &'d Class,
    keys: ProviderKeys,
    /// Another provider stays in the namespace itself, so only descendants are at stake.
    namespace_still_served: bool,
    consumers: Vec<(&'d KindRules, std::rc::Rc<Instances>)>,
    /// Kinds whose rules cannot be read and that have instances: they might consume the class.
    unreadable: Vec<(
        &'d str,
        crate::model::error::RuleError,
        std::rc::Rc<Instances>,
    )>,
}

/// Tells the instances being removed apart from the others of their kinds.
type IsGone<'a> = dyn Fn(&str, &InstanceRef) -> bool + 'a;

impl AtStake<'_> {
    /// The consumers at stake but the instances being removed, each as the message shows it:
    /// `[namespace, app, kind, " terminating" or ""]`.
    fn consumers<'s>(&'s self, is_gone: &'s IsGone<'s>) -> impl Iterator<Item = [&'s str; 4]> {
        self.consumers
            .iter()
            .flat_map(move |(consumer, instances)| {
                instances
                    .iter()
                    .filter(move |i| !is_gone(&consumer.kind, i))
                    .map(move |i| {
                        let mark = if i.terminating { " terminating" } else { "" };
                        [i.namespace, i.app, consumer.kind.as_str(), mark]
                    })
            })
    }
}

/// The refusal: `classes` are provided to the consumers `list` shows.
fn protected(rules: &KindRules, subject: &Subject, classes: &str, list: &str) -> Violation {
    Violation::waivable(format!(
        "{kind} {namespace}/{app} is protected while it provides {classes} to consumers: {list}; delete or move those consumers first, or give their tenants another {classes} provider (protection.deletion: protect)",
        kind = rules.kind,
        namespace = subject.namespace,
        app = subject.app,
    ))
}

/// What a removal does to the provider labels consumers resolve by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// A DELETE (or a release leaving its kind): the namespaces keep their labels, so another
    /// provider that renders in the namespace serves the consumers that point at it.
    LabelsStay,
    /// A Tenant switch turned off: the chart writes the parent's provider into the tenant's
    /// namespace and, through its `cozystack-values`, every descendant's
    /// (`packages/apps/tenant/templates/namespace.yaml`), so every consumer pointing here moves
    /// to another provider, whatever else sits in the namespace.
    LabelsMoveUp,
}

/// Judges an instance the write removes.
pub fn judge(eval: &Evaluation, change: &Change, app: &Ruled) -> Outcome {
    let after = match app.entry.origin {
        Origin::Request => After::LabelsStay,
        Origin::Switch(_) => After::LabelsMoveUp,
    };
    // What the same write removes: the others are known, the instance itself was just read.
    let mut leaving = Vec::new();
    for entry in &change.leaving {
        leaving.push((entry.kind.as_str(), entry.known(eval)?.0));
    }
    check(eval, app.rules, app.subject, &leaving, after)?;
    Ok(Vec::new())
}

/// Denies removing `subject` (an instance of `rules.kind`) while it is referenced.
///
/// `leaving` are the instances the same write removes, this one among them: a Tenant turning
/// `ingress` and `seaweedfs` off at once uninstalls both, so neither is a consumer stranded by
/// the other, nor a provider that keeps the class served. `after` says whether the consumers'
/// labels stay on the namespace. Three questions, asked so that each reads as little as it can:
/// which classes lose their provider and who consumes them ([`at_stake`]), which namespaces
/// resolve them here ([`namespaces`]), and which consumers sit there (the refusal).
fn check(
    eval: &Evaluation,
    rules: &KindRules,
    subject: &Subject,
    leaving: &[(&str, &Subject)],
    after: After,
) -> Result<(), Violation> {
    if rules.deletion != Deletion::Protect || rules.capability.provides.is_empty() {
        return Ok(());
    }
    // An instance its chart never rendered (off its slot) provides nothing: removing it strands
    // no one, and is how the pre-flight's remedy moves it onto its slot.
    if !subject.renders(rules) {
        return Ok(());
    }
    let namespace = subject.namespace.as_str();
    let definitions = eval.definitions()?;
    // What this write removes, the subject included: it neither consumes nor serves afterwards.
    let is_gone = |kind: &str, instance: &InstanceRef| {
        leaving
            .iter()
            .any(|(k, subject)| *k == kind && subject.is(instance))
    };
    let at_stake = at_stake(eval, &definitions, rules, subject, &is_gone, after)?;
    if at_stake.is_empty() {
        return Ok(());
    }
    let shared = rules.capability.share == Share::Children;
    // Does `ns` resolve the stake's class here, and is it left unserved by what remains?
    // Membership in the subtree follows the naming rule, which cannot drift as labels can.
    let references = |stake: &AtStake, ns: &Namespace| {
        let own = ns.name == namespace;
        let descendant = !own && shared && tenant::is_within(&ns.name, &ns.labels, namespace);
        ((own && !stake.namespace_still_served) || descendant)
            && stake.keys.points_to(ns, namespace)
    };
    let facts = namespaces(eval, rules, subject, &at_stake, &references, &is_gone)?;
    // Per class, the namespaces that resolve it here and are not served by what remains.
    let referencing = |stake: &AtStake| -> StrSet {
        StrSet::of(
            facts
                .iter()
                .filter(|ns| references(stake, ns))
                .map(|ns| ns.name.as_str()),
        )
    };
    // Consumers are gathered borrowed and sorted; only the few shown are formatted.
    let mut consumers: Vec<[&str; 4]> = Vec::new();
    let mut served = Vec::new();
    for stake in &at_stake {
        let referencing = referencing(stake);
        if let Some((kind, err, instances)) = stake.unreadable.iter().find_map(|(k, e, list)| {
            list.iter()
                .find(|i| referencing.contains(i.namespace))
                .map(|i| (k, e, i.label_from("")))
        }) {
            return Err(Violation::rule(format!(
                "{err}; the rules of kind {kind} cannot be read, so the policy cannot tell whether {instances} consumes the {class} that {rkind} {namespace}/{app} provides — fix the ApplicationDefinition",
                class = stake.class,
                rkind = rules.kind,
                app = subject.app,
            )));
        }
        let before = consumers.len();
        consumers.extend(
            stake
                .consumers(&is_gone)
                .filter(|[namespace, ..]| referencing.contains(namespace)),
        );
        if consumers.len() > before {
            served.push(stake.class.as_str());
        }
    }
    if consumers.is_empty() {
        return Ok(());
    }
    let mut consumers = sorted_by(consumers, Ord::cmp);
    consumers.dedup();
    // The first few in the order the text reads, without sorting all of them by text.
    let mut order: Vec<usize> = (0..consumers.len()).collect();
    front_positions(&mut order, SHOWN, &|a, b| {
        by_text(&consumers[a], &consumers[b])
    });
    let shown: Vec<String> = order
        .iter()
        .take(SHOWN)
        .map(|&i| shown_text(&consumers[i]))
        .collect();
    Err(protected(
        rules,
        subject,
        &served.join(", "),
        &list_head(&shown, consumers.len()),
    ))
}

/// Per class `rules` provides that the removal leaves unserved somewhere, the instances of its
/// consumer kinds. The release lists come first: they are small, and without a consumer no
/// namespace is looked up at all.
fn at_stake<'d>(
    eval: &Evaluation,
    definitions: &'d DefinitionSet,
    rules: &'d KindRules,
    subject: &Subject,
    is_gone: &IsGone,
    after: After,
) -> Result<Vec<AtStake<'d>>, Violation> {
    let namespace = subject.namespace.as_str();
    let is_self = |kind: &str, instance: &InstanceRef| kind == rules.kind && subject.is(instance);
    let mut at_stake = Vec::new();
    for class in &rules.capability.provides {
        // The consumers first, in one list when their prefixes allow: without one, whether
        // another provider serves the class does not matter.
        let consumers = definitions.kinds_where(Role::Consumes, class);
        eval.preload_instances(&consumers.kinds)?;
        let mut consuming = Vec::new();
        for consumer in consumers.kinds {
            let instances = eval.instances(consumer)?;
            if instances.iter().any(|i| !is_gone(&consumer.kind, &i)) {
                consuming.push((consumer, instances));
            }
        }
        // A kind defined twice, or whose fields do not decode, may consume the class too; it
        // matters only when one of its instances sits where the class resolves here.
        let mut unreadable = Vec::new();
        for (kind, err) in consumers.unreadable {
            let instances = eval.instances_of(kind, None)?;
            if instances.iter().next().is_some() {
                unreadable.push((kind, err, instances));
            }
        }
        if consuming.is_empty() && unreadable.is_empty() {
            continue;
        }
        let providers = definitions.kinds_where(Role::Provides, class);
        let (mut serves_namespace, mut serves_children) = (false, false);
        let (mut self_listed, mut kin_serves) = (false, false);
        for provider in &providers.kinds {
            let shares = provider.capability.share == Share::Children;
            for i in eval.instances(provider)?.iter() {
                if is_self(&provider.kind, &i) {
                    // Already being deleted (a switch turned off over a module its DELETE left
                    // uninstalling): protection decided at that DELETE, as for an API DELETE.
                    if i.terminating {
                        return Ok(Vec::new());
                    }
                    self_listed = true;
                } else if after == After::LabelsStay
                    && i.namespace == namespace
                    && !i.terminating
                    && !is_gone(&provider.kind, &i)
                    && renders(provider, &i)
                {
                    serves_namespace = true;
                    serves_children |= shares;
                    kin_serves |= provider.kind == rules.kind;
                }
            }
        }
        // The instance being removed exists, so it is listed; when it is not, the release name
        // it was given is wrong, and it may be the "other provider" of its kind seen here.
        if kin_serves && !self_listed {
            return Err(unlisted_self(eval, rules, subject));
        }
        let shared = rules.capability.share == Share::Children;
        if serves_children || (serves_namespace && !shared) {
            continue;
        }
        at_stake.push(AtStake {
            class,
            keys: ProviderKeys::new(class, eval.settings),
            namespace_still_served: serves_namespace,
            consumers: consuming,
            unreadable,
        });
    }
    Ok(at_stake)
}

/// The namespaces that decide: those hosting an instance at stake, a few looked up one by one;
/// with many, probed in reading order until enough referencing consumers refuse the removal
/// (that refusal is the error), else every namespace carrying one of the labels that decide.
fn namespaces(
    eval: &Evaluation,
    rules: &KindRules,
    subject: &Subject,
    at_stake: &[AtStake],
    references: &dyn Fn(&AtStake, &Namespace) -> bool,
    is_gone: &IsGone,
) -> Result<Vec<Rc<Namespace>>, Violation> {
    let namespace = subject.namespace.as_str();
    // Only the namespaces that host an instance at stake decide.
    let hosts = at_stake.iter().flat_map(|stake| {
        let consumers = stake.consumers(is_gone).map(|[namespace, ..]| namespace);
        let unreadable = stake
            .unreadable
            .iter()
            .flat_map(|(_, _, instances)| instances.iter().map(|i| i.namespace));
        consumers.chain(unreadable)
    });
    let looked_up = match lookup::point_lookups(eval, hosts) {
        PointLookups::Read(hosts) => Some(hosts),
        PointLookups::TooMany if at_stake.iter().all(|s| s.unreadable.is_empty()) => {
            if let Some((class, list)) = sample(eval, at_stake, references, is_gone) {
                return Err(protected(rules, subject, class, &list));
            }
            None
        }
        PointLookups::TooMany | PointLookups::Unreadable => None,
    };
    Ok(match looked_up {
        Some(facts) => facts,
        None => {
            // Only these labels decide: subtree membership and the provider labels of each class.
            let keep: BTreeSet<String> = inserted(
                at_stake
                    .iter()
                    .flat_map(|s| s.keys.keys().map(str::to_owned))
                    .chain([format!("{ANCESTOR_PREFIX}{namespace}")]),
            );
            let mut listed: Vec<Rc<Namespace>> = eval
                .namespaces_with(&keep)?
                .into_iter()
                .map(Rc::new)
                .collect();
            // tenant-root resolves its classes through its values, not labels: the list holds
            // only namespaces carrying one of the keys, and tenant-root, whose provider is the
            // one removed, exists with none of them.
            if namespace == tenant::ROOT && listed.iter().all(|ns| ns.name != tenant::ROOT) {
                listed.push(Rc::new(Namespace {
                    name: tenant::ROOT.to_owned(),
                    labels: Default::default(),
                }));
            }
            listed
        }
    })
}

/// The refusal when the instance being removed is not among its kind's listed releases: the
/// release name the policy derives from the Application (`<prefix><name>`) is not the real one.
fn unlisted_self(eval: &Evaluation, rules: &KindRules, subject: &Subject) -> Violation {
    let release = subject.release.as_deref().unwrap_or(&subject.app);
    let prefix = rules.release_prefix.as_deref().unwrap_or_default();
    let source = eval.settings.definition_source;
    // Read from the definitions, the prefix is the cluster's: the list is behind.
    let fix = if source.reads_cluster() {
        "retry: the policy-server's list of releases may not hold it yet".to_owned()
    } else if source.builds_on_stock() {
        format!(
            "the built-in release prefix of {kind} (\"{prefix}\") is not this cluster's: set releasePrefixes.{kind} to the ApplicationDefinition's spec.release.prefix in the policy settings",
            kind = rules.kind
        )
    } else {
        format!(
            "check releasePrefixes.{kind} (\"{prefix}\") in the policy settings: it must equal the ApplicationDefinition's spec.release.prefix",
            kind = rules.kind
        )
    };
    Violation::rule(format!(
        "{kind} {namespace}/{app}: its release {namespace}/{release} is not among the listed {kind} releases, so the policy cannot tell it from the other providers in {namespace}; {fix}",
        kind = rules.kind,
        namespace = subject.namespace,
        app = subject.app,
    ))
}

/// With many consumer namespaces of one class at stake: probes them in the order the message
/// reads ([`lookup::probe`]), and once more referencing consumers than a message shows are
/// confirmed, gives the class and the list the refusal names. `None` when the probes do not
/// settle it (the caller then decides from the full namespace list).
fn sample<'s>(
    eval: &Evaluation,
    at_stake: &'s [AtStake],
    references: &dyn Fn(&AtStake, &Namespace) -> bool,
    is_gone: &IsGone,
) -> Option<(&'s str, String)> {
    let [stake] = at_stake else {
        return None;
    };
    let consumers: Vec<[&str; 4]> = stake.consumers(is_gone).collect();
    let candidates = lookup::Candidates {
        count: consumers.len(),
        namespace: &|at| consumers[at][0],
        reading_order: &|a, b| by_text(&consumers[a], &consumers[b]),
    };
    let confirmed = lookup::probe(eval, &candidates, &|ns| references(stake, ns), SHOWN + 1)?;
    let shown: Vec<String> = confirmed[..SHOWN]
        .iter()
        .map(|&at| shown_text(&consumers[at]))
        .collect();
    Some((
        stake.class.as_str(),
        format!("{} and more", shown.join(", ")),
    ))
}

/// Orders consumers as their text reads.
fn by_text(a: &[&str; 4], b: &[&str; 4]) -> std::cmp::Ordering {
    cmp_joined(&text(a), &text(b))
}

fn shown_text(consumer: &[&str; 4]) -> String {
    text(consumer).concat()
}

/// A consumer as shown, `namespace/app (Kind)[ terminating]`, in pieces: sorting by it orders
/// the list as the text reads without formatting every consumer.
fn text<'a>([ns, app, kind, mark]: &[&'a str; 4]) -> [&'a str; 7] {
    [*ns, "/", *app, " (", *kind, ")", *mark]
}
