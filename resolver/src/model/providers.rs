//! The provider label vocabulary: the keys of a tenant Namespace that name which namespace
//! provides a class (`capability.<class>`, and the legacy `<class>` for a legacy class), and
//! how a namespace resolves a class through them. A model of the labels, read by the rules that
//! judge consumers (`capability`), removals (`protection`) and label writes (`namespace`).

use crate::model::facts::Namespace;
use crate::model::kinds::Class;
use crate::model::settings::Settings;
use crate::model::tenant::{CAPABILITY_PREFIX, LABEL_PREFIX, ROOT};

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
