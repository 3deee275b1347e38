//! Providers and consumers: which namespace a class resolves to, and the warning for a
//! consumer created where its class has no provider yet (Cozystack's `awaiting-*` beacon).

use std::collections::BTreeMap;

use crate::evaluation::Evaluation;
use crate::rules::{Class, KindRules, Share};
use crate::settings::Settings;
use crate::tenant::Labels;
use crate::verdict::{Violation, list_some};

pub const LABEL_PREFIX: &str = "namespace.cozystack.io/";
pub const CAPABILITY_PREFIX: &str = "namespace.cozystack.io/capability.";

fn capability_key(class: &str) -> String {
    format!("{CAPABILITY_PREFIX}{class}")
}

fn legacy_key(class: &str) -> String {
    format!("{LABEL_PREFIX}{class}")
}

fn is_legacy(class: &str, settings: &Settings) -> bool {
    settings.legacy_provider_classes.iter().any(|c| c == class)
}

/// The label keys that name the provider of one class: the capability key, and the legacy
/// key for a legacy class. Built once per class, then read against many namespaces.
pub struct ProviderKeys {
    capability: String,
    legacy: Option<String>,
}

impl ProviderKeys {
    pub fn new(class: &Class, settings: &Settings) -> Self {
        ProviderKeys {
            capability: capability_key(class.as_str()),
            legacy: is_legacy(class.as_str(), settings).then(|| legacy_key(class.as_str())),
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

    /// The provider namespace `labels` resolve the class to: the capability label when set,
    /// else the legacy label. Empty values mean "no provider".
    pub fn provider<'l>(&self, labels: &'l Labels) -> Option<&'l str> {
        self.keys().find_map(|key| {
            labels
                .get(key)
                .map(String::as_str)
                .filter(|v| !v.is_empty())
        })
    }

    /// True when either key names `tenant`. Deliberately wider than [`Self::provider`]: during
    /// the migration window both writers exist, and deleting a provider that either of them
    /// points at strands a consumer.
    pub fn points_to(&self, labels: &Labels, tenant: &str) -> bool {
        self.keys()
            .any(|key| labels.get(key).map(String::as_str) == Some(tenant))
    }
}

/// True for a label key the platform alone may write on a namespace.
pub fn is_provider_key(key: &str, settings: &Settings) -> bool {
    key.starts_with(CAPABILITY_PREFIX)
        || key
            .strip_prefix(LABEL_PREFIX)
            .is_some_and(|class| is_legacy(class, settings))
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
    let providers = definitions.kinds_where(|r| r.provides(&class));
    // The live providers in each tenant of the chain: (label, shares with children).
    let mut live: BTreeMap<&str, Vec<(String, bool)>> = BTreeMap::new();
    for provider in &providers.kinds {
        let shares = provider.capability.share == Share::Children;
        for i in eval.instances(provider)?.iter() {
            if let Some(tenant) = chain.iter().find(|t| *t == i.namespace)
                && !i.terminating
            {
                let label = format!("{} {}/{}", provider.kind, i.namespace, i.app);
                live.entry(tenant.as_str())
                    .or_default()
                    .push((label, shares));
            }
        }
    }
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
        live.get(tenant)
            .is_some_and(|ps| tenant == namespace || ps.iter().any(|(_, shares)| *shares))
    };
    let expected = chain.iter().rev().map(String::as_str).find(|t| serves(t));
    if expected == Some(value) {
        return Ok(());
    }
    let names = |tenant: &str| -> Vec<String> {
        live.get(tenant)
            .map(|ps| ps.iter().map(|(label, _)| label.clone()).collect())
            .unwrap_or_default()
    };
    let reason = match live.get(value) {
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

/// Warnings for each consumed class that has no provider in the request's namespace.
pub fn awaiting_warnings(eval: &Evaluation, rules: &KindRules) -> Result<Vec<String>, Violation> {
    if rules.capability.consumes.is_empty() {
        return Ok(Vec::new());
    }
    let namespace = &eval.request.namespace;
    let ns = eval.namespace(namespace)?;
    Ok(rules
        .capability
        .consumes
        .iter()
        .map(|class| (class, ProviderKeys::new(class, eval.settings)))
        .filter(|(_, keys)| keys.provider(&ns.labels).is_none())
        .map(|(class, keys)| {
            format!(
                "{kind} consumes {class}, but namespace {namespace} has no {class} provider ({key} is empty): the app will wait (awaiting-{class}) until this tenant or an ancestor provides {class}",
                kind = rules.kind,
                key = keys.written(),
            )
        })
        .collect())
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
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn capability_label_wins_over_legacy() {
        let settings = Settings::default();
        let monitoring = Class::parse("monitoring").unwrap();
        let keys = ProviderKeys::new(&monitoring, &settings);
        let l = labels(&[
            ("namespace.cozystack.io/monitoring", "tenant-root"),
            ("namespace.cozystack.io/capability.monitoring", "tenant-a"),
        ]);
        assert_eq!(keys.provider(&l), Some("tenant-a"));
        assert!(keys.points_to(&l, "tenant-root"));
        assert!(keys.points_to(&l, "tenant-a"));
        let l = labels(&[("namespace.cozystack.io/monitoring", "")]);
        assert_eq!(keys.provider(&l), None);
        let l = labels(&[
            ("namespace.cozystack.io/monitoring", "tenant-root"),
            ("namespace.cozystack.io/capability.monitoring", ""),
        ]);
        assert_eq!(keys.provider(&l), Some("tenant-root"), "empty means unset");
        let custom = ProviderKeys::new(&Class::parse("backup").unwrap(), &settings);
        let l = labels(&[("namespace.cozystack.io/backup", "tenant-a")]);
        assert_eq!(custom.provider(&l), None, "not a legacy class");
        assert!(!custom.points_to(&l, "tenant-a"));
        assert_eq!(custom.written(), "namespace.cozystack.io/capability.backup");
        assert_eq!(keys.written(), "namespace.cozystack.io/monitoring");
    }

    #[test]
    fn provider_keys() {
        let settings = Settings::default();
        assert!(is_provider_key("namespace.cozystack.io/etcd", &settings));
        assert!(is_provider_key(
            "namespace.cozystack.io/capability.anything",
            &settings
        ));
        assert!(!is_provider_key("namespace.cozystack.io/host", &settings));
    }
}
