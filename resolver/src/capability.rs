//! Providers and consumers: which namespace a class resolves to, and the warning for a
//! consumer created where its class has no provider yet (Cozystack's `awaiting-*` beacon).

use crate::evaluation::Evaluation;
use crate::rules::{Class, KindRules};
use crate::settings::Settings;
use crate::tenant::Labels;
use crate::verdict::Violation;

pub const LABEL_PREFIX: &str = "namespace.cozystack.io/";
pub const CAPABILITY_PREFIX: &str = "namespace.cozystack.io/capability.";

pub fn capability_key(class: &str) -> String {
    format!("{CAPABILITY_PREFIX}{class}")
}

pub fn legacy_key(class: &str) -> String {
    format!("{LABEL_PREFIX}{class}")
}

fn is_legacy(class: &str, settings: &Settings) -> bool {
    settings.legacy_provider_classes.iter().any(|c| c == class)
}

/// The provider namespace `labels` resolve `class` to: the capability label when set, else the
/// legacy label of a legacy class. Empty values mean "no provider".
pub fn provider<'l>(labels: &'l Labels, class: &Class, settings: &Settings) -> Option<&'l str> {
    let non_empty = |key: String| {
        labels
            .get(&key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    };
    non_empty(capability_key(class.as_str())).or_else(|| {
        is_legacy(class.as_str(), settings)
            .then(|| non_empty(legacy_key(class.as_str())))
            .flatten()
    })
}

/// True when either provider label of `class` names `tenant`. Deliberately wider than
/// [`provider`]: during the migration window both writers exist, and deleting a provider that
/// either of them points at strands a consumer.
pub fn points_to(labels: &Labels, class: &Class, tenant: &str, settings: &Settings) -> bool {
    labels
        .get(&capability_key(class.as_str()))
        .map(String::as_str)
        == Some(tenant)
        || (is_legacy(class.as_str(), settings)
            && labels.get(&legacy_key(class.as_str())).map(String::as_str) == Some(tenant))
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
        .filter(|class| provider(&ns.labels, class, eval.settings).is_none())
        .map(|class| {
            format!(
                "{kind} consumes {class}, but namespace {namespace} has no {class} provider ({key} is empty): the app will wait (awaiting-{class}) until this tenant or an ancestor provides {class}",
                kind = rules.kind,
                key = if is_legacy(class.as_str(), eval.settings) {
                    legacy_key(class.as_str())
                } else {
                    capability_key(class.as_str())
                },
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
        let l = labels(&[
            ("namespace.cozystack.io/monitoring", "tenant-root"),
            ("namespace.cozystack.io/capability.monitoring", "tenant-a"),
        ]);
        assert_eq!(provider(&l, &monitoring, &settings), Some("tenant-a"));
        assert!(points_to(&l, &monitoring, "tenant-root", &settings));
        assert!(points_to(&l, &monitoring, "tenant-a", &settings));
        let l = labels(&[("namespace.cozystack.io/monitoring", "")]);
        assert_eq!(provider(&l, &monitoring, &settings), None);
        let custom = Class::parse("backup").unwrap();
        let l = labels(&[("namespace.cozystack.io/backup", "tenant-a")]);
        assert_eq!(provider(&l, &custom, &settings), None, "not a legacy class");
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
