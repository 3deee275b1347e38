//! Providers and consumers: which namespace a class resolves to, and the warning for a
//! consumer created where its class has no provider yet (Cozystack's `awaiting-*` beacon).

use crate::change::{Change, Entry};
use crate::model::chart;
use crate::model::evaluation::Evaluation;
use crate::model::facts::Namespace;
use crate::model::kinds::{Class, KindRules, Role, Share};
use crate::model::request::Operation;
use crate::model::settings::Settings;
use crate::model::tenant::{CAPABILITY_PREFIX, LABEL_PREFIX, ROOT};
use crate::model::verdict::{Violation, list_some};
use crate::rules::Outcome;

fn capability_key(class: &str) -> String {
    format!("{CAPABILITY_PREFIX}{class}")
}

fn legacy_key(class: &str) -> String {
    format!("{LABEL_PREFIX}{class}")
}

/// The classes tenant-root resolves to itself without a label: cozystack-basics writes
/// `_namespace.{etcd,ingress,monitoring,seaweedfs}: tenant-root` unconditionally into
/// tenant-root's `cozystack-values` (`templates/cozystack-values-secret.yaml`), which its apps
/// read, while the Namespace carries no provider label for them (`templates/tenant-root.yaml`;
/// the Tenant chart skips tenant-root's Namespace). `gateway` is written to both only when the
/// platform gateway is enabled, so the label tells for it.
pub const ROOT_VALUE_CLASSES: &[&str] = &["etcd", "ingress", "monitoring", "seaweedfs"];

/// The label keys that name the provider of one class: the capability key, and the legacy
/// key for a legacy class. Built once per class, then read against many namespaces.
pub struct ProviderKeys {
    capability: String,
    legacy: Option<String>,
    /// tenant-root resolves the class to itself through its values.
    root_valued: bool,
}

impl ProviderKeys {
    pub fn new(class: &Class, settings: &Settings) -> Self {
        let legacy = settings.is_legacy(class.as_str());
        ProviderKeys {
            capability: capability_key(class.as_str()),
            legacy: legacy.then(|| legacy_key(class.as_str())),
            root_valued: legacy && ROOT_VALUE_CLASSES.contains(&class.as_str()),
        }
    }

    /// Both keys, the capability key first.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.capability.as_str()).chain(self.legacy.as_deref())
    }

    /// The key the reconciler writes: the legacy one for a legacy class.
    pub fn written(&self) -> &str {
        self.legacy.as_deref().unwrap_or(&self.capability)
    }

    /// Where the provider name of `ns` comes from, for messages: the key, or tenant-root's
    /// values.
    pub fn source(&self, ns: &Namespace) -> String {
        if self.root_valued && ns.name == ROOT {
            let class = self.written().trim_start_matches(LABEL_PREFIX);
            format!("_namespace.{class} of its cozystack-values")
        } else {
            self.written().to_owned()
        }
    }

    /// The provider namespace `ns` resolves the class to: the capability label when set, else
    /// tenant-root's values, else the legacy label. Empty values mean "no provider".
    pub fn provider<'n>(&self, ns: &'n Namespace) -> Option<&'n str> {
        self.capability(ns)
            .or_else(|| (self.root_valued && ns.name == ROOT).then_some(ROOT))
            .or_else(|| self.legacy(ns))
    }

    /// What the capability label of `ns` names, if it names anything.
    pub fn capability<'n>(&self, ns: &'n Namespace) -> Option<&'n str> {
        label(ns, &self.capability)
    }

    /// What the legacy label of `ns` names, if it names anything.
    pub fn legacy<'n>(&self, ns: &'n Namespace) -> Option<&'n str> {
        label(ns, self.legacy.as_deref()?)
    }

    /// True when either key, or tenant-root's values, name `tenant`. Deliberately wider than
    /// [`Self::provider`]: during the migration window both writers exist, and deleting a
    /// provider that either of them points at strands a consumer.
    pub fn points_to(&self, ns: &Namespace, tenant: &str) -> bool {
        (self.root_valued && ns.name == ROOT && tenant == ROOT)
            || self
                .keys()
                .any(|key| ns.labels.get(key).map(String::as_str) == Some(tenant))
    }
}

/// A label's value, when not empty (empty means "no provider").
fn label<'n>(ns: &'n Namespace, key: &str) -> Option<&'n str> {
    ns.labels
        .get(key)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

/// The class a provider label key names, and whether it is a capability key (`true`) or a
/// legacy one.
pub fn provider_class(key: &str) -> Option<(&str, bool)> {
    match key.strip_prefix(CAPABILITY_PREFIX) {
        Some(class) => Some((class, true)),
        None => key.strip_prefix(LABEL_PREFIX).map(|class| (class, false)),
    }
}

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
pub fn judge(eval: &Evaluation, _: &Change, entry: &Entry) -> Outcome {
    if eval.request.operation != Operation::Create {
        return Ok(Vec::new());
    }
    match entry.known(eval)? {
        (_, Some(rules)) => awaiting_warnings(eval, rules),
        (_, None) => Ok(Vec::new()),
    }
}

/// Warnings for each consumed class the request's namespace resolves to no live provider:
/// to none at all (the chart renders Cozystack's `awaiting-<class>` beacon), or to a
/// namespace that runs no live provider of the class serving this one. The second is what a
/// child of tenant-root sees: the Tenant chart copies the parent's `_namespace.<class>` into
/// the child's labels whether or not the parent runs a provider, and the chart then points
/// the app at a provider that is not there.
fn awaiting_warnings(eval: &Evaluation, rules: &KindRules) -> Result<Vec<String>, Violation> {
    if rules.capability.consumes.is_empty() {
        return Ok(Vec::new());
    }
    let namespace = &eval.request.namespace;
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
/// serves `ns`. What says so without listing instances comes first: a capability label names
/// only a live provider (the reconciler writes it so, and this policy's Namespace rule checks it
/// on every write); a tenant's own legacy label names itself only while its Tenant switch is on,
/// and the chart then renders the provider; tenant-root's values name tenant-root whatever runs
/// there, so for it the root Tenant's own switches tell (one cached GET of its release). Where
/// none of these does, the live instances decide: one that serves `ns` (its own namespace
/// always, a descendant only when it shares with children). A kind whose rules cannot be read
/// but has an instance there may be one: no warning is better than a wrong one.
fn serves(
    eval: &Evaluation,
    class: &Class,
    keys: &ProviderKeys,
    ns: &Namespace,
    provider: &str,
) -> Result<bool, Violation> {
    if keys.capability(ns).is_some() {
        return Ok(true);
    }
    if provider != ROOT {
        let own = if provider == ns.name {
            keys.legacy(ns) == Some(provider)
        } else {
            keys.legacy(&*eval.namespace(provider)?) == Some(provider)
        };
        if own {
            return Ok(true);
        }
    }
    let definitions = eval.definitions()?;
    let providers = definitions.kinds_where(Role::Provides, class);
    if provider == ROOT && root_switch_on(eval, &providers.kinds)? {
        return Ok(true);
    }
    for kind in &providers.kinds {
        let shares = provider == ns.name || kind.capability.share == Share::Children;
        if shares
            && eval
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

/// Whether the root Tenant switches on a module of one of `providers` (its release,
/// `tenant-root/tenant-root`, carries the values `tenants/root` was given): the Tenant chart
/// then renders that module in tenant-root.
fn root_switch_on(eval: &Evaluation, providers: &[&KindRules]) -> Result<bool, Violation> {
    let keys: Vec<&str> = providers
        .iter()
        .filter_map(|kind| eval.settings.tenant_module_key(&kind.kind))
        .collect();
    if keys.is_empty() {
        return Ok(false);
    }
    let Some((namespace, name)) = chart::tenant_release(ROOT) else {
        return Ok(false);
    };
    let release = eval.release(&namespace, &name)?;
    let values = release.as_ref().as_ref().map(|meta| &meta.values);
    Ok(keys.iter().any(|key| chart::switched_on(values, key)))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tenant::Labels;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn ns(name: &str, pairs: &[(&str, &str)]) -> Namespace {
        Namespace {
            name: name.into(),
            labels: labels(pairs),
        }
    }

    #[test]
    fn tenant_root_resolves_its_value_classes_without_labels() {
        let settings = Settings::default();
        let keys = |class: &str| ProviderKeys::new(&Class::parse(class).unwrap(), &settings);
        let root = ns(ROOT, &[("namespace.cozystack.io/host", "example.org")]);
        for class in ["etcd", "ingress", "monitoring", "seaweedfs"] {
            assert_eq!(keys(class).provider(&root), Some(ROOT), "{class}");
            assert!(keys(class).points_to(&root, ROOT), "{class}");
        }
        assert_eq!(
            keys("etcd").source(&root),
            "_namespace.etcd of its cozystack-values"
        );
        // gateway only when enabled, and then labelled.
        assert_eq!(keys("gateway").provider(&root), None);
        let gateway = ns(ROOT, &[("namespace.cozystack.io/gateway", ROOT)]);
        assert_eq!(keys("gateway").provider(&gateway), Some(ROOT));
        // Another namespace without labels resolves nothing.
        let child = ns("tenant-a", &[]);
        assert_eq!(keys("etcd").provider(&child), None);
        assert!(!keys("etcd").points_to(&child, ROOT));
    }

    #[test]
    fn capability_label_wins_over_legacy() {
        let settings = Settings::default();
        let monitoring = Class::parse("monitoring").unwrap();
        let keys = ProviderKeys::new(&monitoring, &settings);
        let l = ns(
            "tenant-a",
            &[
                ("namespace.cozystack.io/monitoring", "tenant-root"),
                ("namespace.cozystack.io/capability.monitoring", "tenant-a"),
            ],
        );
        assert_eq!(keys.provider(&l), Some("tenant-a"));
        assert!(keys.points_to(&l, "tenant-root"));
        assert!(keys.points_to(&l, "tenant-a"));
        let l = ns("tenant-a", &[("namespace.cozystack.io/monitoring", "")]);
        assert_eq!(keys.provider(&l), None);
        let l = ns(
            "tenant-a",
            &[
                ("namespace.cozystack.io/monitoring", "tenant-root"),
                ("namespace.cozystack.io/capability.monitoring", ""),
            ],
        );
        assert_eq!(keys.provider(&l), Some("tenant-root"), "empty means unset");
        let custom = ProviderKeys::new(&Class::parse("backup").unwrap(), &settings);
        let l = ns("tenant-a", &[("namespace.cozystack.io/backup", "tenant-a")]);
        assert_eq!(custom.provider(&l), None, "not a legacy class");
        assert!(!custom.points_to(&l, "tenant-a"));
        assert_eq!(custom.written(), "namespace.cozystack.io/capability.backup");
        assert_eq!(keys.written(), "namespace.cozystack.io/monitoring");
    }

    #[test]
    fn provider_keys() {
        let settings = Settings::default();
        assert!(settings.is_provider_key("namespace.cozystack.io/etcd"));
        assert!(settings.is_provider_key("namespace.cozystack.io/capability.anything"));
        assert!(!settings.is_provider_key("namespace.cozystack.io/host"));
    }
}
