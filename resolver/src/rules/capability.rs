//! Providers and consumers: which namespace a class resolves to, and the warning for a
//! consumer created where its class has no provider yet (Cozystack's `awaiting-*` beacon).

use crate::change::Change;
use crate::model::chart;
use crate::model::evaluation::Evaluation;
use crate::model::facts::Namespace;
use crate::model::kinds::{Class, KindRules, Role, Share};
use crate::model::providers::ProviderKeys;
use crate::model::request::KIND_LABEL;
use crate::model::tenant::ROOT;
use crate::model::verdict::{Violation, list_some};
use crate::rules::{Outcome, Ruled};

/// A capability label must name what the capability reconciler resolves: the nearest tenant
/// of the namespace's chain (itself included) with a live provider of the class that serves
/// it — its own namespace always, descendants only when it shares with children.
/// Terminating providers are not live. Read on a platform write of `capability.<class>`.
pub fn check_resolution(
    eval: &Evaluation,
    namespace: &str,
    chain: &[String],
    key: &str,
    class: &str,
    value: &str,
) -> Result<(), Violation> {
    let class = Class::parse(class)
        .map_err(|reason| Violation::rule(format!("Namespace {namespace}: {key}: {reason}")))?;
    let definitions = eval.definitions()?;
    let providers = definitions.kinds_where(Role::Provides, &class);
    // The live providers in each tenant of the chain, by its position: (label, shares with
    // children).
    let mut live: Vec<Vec<(String, bool)>> = chain.iter().map(|_| Vec::new()).collect();
    for provider in &providers.kinds {
        let shares = provider.capability.share == Share::Children;
        for i in eval.instances(provider)?.iter() {
            if let Some(at) = chain.iter().position(|t| *t == i.namespace)
                && !i.terminating
            {
                let label = format!("{} {}/{}", provider.kind, i.namespace, i.app);
                live[at].push((label, shares));
            }
        }
    }
    // The live providers of a tenant; `None` for one without any, or outside the chain.
    let live_in = |tenant: &str| {
        chain
            .iter()
            .position(|t| t == tenant)
            .map(|at| &live[at])
            .filter(|ps| !ps.is_empty())
    };
    for (kind, err) in &providers.unreadable {
        let instances = eval.instances_of(kind, None)?;
        if let Some(i) = instances
            .iter()
            .find(|i| !i.terminating && chain.iter().any(|t| t == i.namespace))
        {
            return Err(Violation::rule(format!(
                "{err}; the rules of kind {kind} cannot be read, so the policy cannot tell whether {}/{} provides {class} to {namespace} — fix the ApplicationDefinition",
                i.namespace, i.app
            )));
        }
    }
    let serves = |tenant: &str| {
        live_in(tenant)
            .is_some_and(|ps| tenant == namespace || ps.iter().any(|(_, shares)| *shares))
    };
    let expected = chain.iter().rev().map(String::as_str).find(|t| serves(t));
    if expected == Some(value) {
        return Ok(());
    }
    let names = |tenant: &str| -> Vec<String> {
        live_in(tenant)
            .map(|ps| ps.iter().map(|(label, _)| label.clone()).collect())
            .unwrap_or_default()
    };
    let reason = match live_in(value) {
        None => format!("{value} has no live {class} provider"),
        Some(_) if !serves(value) => format!(
            "{value}'s {class} provider ({}) serves only its own namespace (share: none)",
            list_some(&names(value), 3)
        ),
        Some(_) => format!(
            "it skips {} (a nearer live {class} provider)",
            expected.unwrap_or_default()
        ),
    };
    let should = match expected {
        Some(tenant) => format!(
            "the nearest live provider is {} in {tenant}, so the label must be {tenant}",
            list_some(&names(tenant), 3)
        ),
        None => format!(
            "no live {class} provider serves {namespace}, so the label must be empty until one exists"
        ),
    };
    Err(Violation::rule(format!(
        "Namespace {namespace}: {key}={value} does not resolve: {reason}; {should}"
    )))
}

/// Warns about an app the request creates where a class it consumes has no provider yet.
pub fn judge(eval: &Evaluation, _: &Change, app: &Ruled) -> Outcome {
    awaiting_warnings(eval, &app.entry.namespace, app.rules)
}

/// Warnings for each consumed class the request's namespace resolves to no live provider:
/// to none at all (the chart renders Cozystack's `awaiting-<class>` beacon), or to a
/// namespace that runs no live provider of the class serving this one. The second is what a
/// child of tenant-root sees: the Tenant chart copies the parent's `_namespace.<class>` into
/// the child's labels whether or not the parent runs a provider, and the chart then points
/// the app at a provider that is not there.
fn awaiting_warnings(
    eval: &Evaluation,
    namespace: &str,
    rules: &KindRules,
) -> Result<Vec<String>, Violation> {
    if rules.capability.consumes.is_empty() {
        return Ok(Vec::new());
    }
    let ns = eval.namespace(namespace)?;
    let mut warnings = Vec::new();
    for class in &rules.capability.consumes {
        let keys = ProviderKeys::new(class, eval.settings);
        let kind = &rules.kind;
        match keys.provider(&ns) {
            None => warnings.push(format!(
                "{kind} consumes {class}, but namespace {namespace} has no {class} provider ({key} is empty): the app will wait (awaiting-{class}) until this tenant or an ancestor provides {class}",
                key = keys.written(),
            )),
            Some(provider) if !serves(eval, class, &keys, &ns, provider)? => warnings.push(format!(
                "{kind} consumes {class}, and namespace {namespace} resolves it to {provider} ({source}), but {provider} runs no live {class} provider that serves {namespace}: the app gets no {class} until {provider} provides {class} or this tenant gets its own",
                source = keys.source(&ns),
            )),
            Some(_) => {}
        }
    }
    Ok(warnings)
}

/// Whether `provider`, the namespace `ns` resolves `class` to, runs a live provider of it that
/// serves `ns` (its own namespace always, a descendant only when the kind shares with
/// children). A module the Tenant chart renders is one release named after its switch, so one
/// GET tells first: live, or being uninstalled. Where none is there, what says so without
/// listing instances: a capability label names only a live provider (the reconciler writes it
/// so, and this policy's Namespace rule checks it); a tenant's own legacy label names itself only
/// while its Tenant switch is on; tenant-root's values name tenant-root whatever runs there, so
/// for it the root Tenant's switches tell. In both the chart renders the provider (a consumer it
/// renders beside it comes first). No label outweighs a release being uninstalled: the listed
/// instances decide then, and wherever nothing else does. A kind whose rules cannot be read but
/// has a live instance there may be one: no warning is better than a wrong one.
fn serves(
    eval: &Evaluation,
    class: &Class,
    keys: &ProviderKeys,
    ns: &Namespace,
    provider: &str,
) -> Result<bool, Violation> {
    let definitions = eval.definitions()?;
    let providers = definitions.kinds_where(Role::Provides, class);
    let serving: Vec<&KindRules> = providers
        .kinds
        .iter()
        .copied()
        .filter(|kind| provider == ns.name || kind.capability.share == Share::Children)
        .collect();
    let mut uninstalling = false;
    for kind in &serving {
        let Some(key) = eval.settings.tenant_module_key(&kind.kind) else {
            continue;
        };
        let release = eval.release(provider, key)?;
        match release.as_ref() {
            Some(meta) if meta.labels.get(KIND_LABEL) == Some(&kind.kind) => {
                if !meta.terminating {
                    return Ok(true);
                }
                uninstalling = true;
            }
            _ => {}
        }
    }
    // The labels speak for the kinds that serve `ns`: where none shares with it (a provider of
    // an ancestor, every kind `share: none`), no label of the ancestor's says it is served.
    if !uninstalling
        && !serving.is_empty()
        && labels_say_served(eval, keys, ns, provider, &serving)?
    {
        return Ok(true);
    }
    for kind in &serving {
        if eval
            .instances(kind)?
            .iter()
            .any(|i| i.namespace == provider && !i.terminating)
        {
            return Ok(true);
        }
    }
    for (kind, _) in &providers.unreadable {
        if eval
            .instances_of(kind, None)?
            .iter()
            .any(|i| i.namespace == provider && !i.terminating)
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether the labels say `provider` serves `ns` with none of its module releases there yet: a
/// capability label, the provider's own legacy label naming itself, or (for tenant-root) a root
/// Tenant switch of one of the `serving` kinds.
fn labels_say_served(
    eval: &Evaluation,
    keys: &ProviderKeys,
    ns: &Namespace,
    provider: &str,
    serving: &[&KindRules],
) -> Result<bool, Violation> {
    if keys.capability(ns).is_some() {
        return Ok(true);
    }
    if provider != ROOT {
        return Ok(if provider == ns.name {
            keys.legacy(ns) == Some(provider)
        } else {
            keys.legacy(&*eval.namespace(provider)?) == Some(provider)
        });
    }
    let switches: Vec<&str> = serving
        .iter()
        .filter_map(|kind| eval.settings.tenant_module_key(&kind.kind))
        .collect();
    let Some((namespace, name)) = chart::tenant_release(ROOT).filter(|_| !switches.is_empty())
    else {
        return Ok(false);
    };
    let release = eval.release(&namespace, &name)?;
    let values = release.as_ref().as_ref().map(|meta| &meta.values);
    Ok(switches.iter().any(|key| chart::switched_on(values, key)))
}

/// The tenant whose provider serves `chain` (root first, the namespace's own tenant last):
/// the nearest one, itself included, for which `provides` holds. This is the resolution the
/// capability reconciler writes into `namespace.cozystack.io/capability.<class>`.
pub fn nearest_provider(chain: &[String], provides: impl Fn(&str) -> bool) -> Option<&str> {
    chain
        .iter()
        .rev()
        .map(String::as_str)
        .find(|tenant| provides(tenant))
}
