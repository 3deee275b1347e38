//! Providers and consumers: which namespace a class resolves to, and the warning for a
//! consumer created where its class has no provider yet (Cozystack's `awaiting-*` beacon).

use crate::evaluation::Evaluation;
use crate::rules::{Class, KindRules};
use crate::settings::Settings;
use crate::tenant::Labels;
use crate::verdict::Violation;

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
