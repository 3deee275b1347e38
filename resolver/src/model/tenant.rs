//! Tenant tree: Cozystack's naming rule and the `tenant.cozystack.io/<ancestor>` labels.
//!
//! `tenant-root` → `tenant-a` → `tenant-a-b`: a tenant namespace is `tenant-<word>` under the
//! root and `<parent>-<word>` deeper, words have no dashes. Every non-root tenant namespace
//! carries `tenant.cozystack.io/<ns>: ""` for the root, each ancestor and itself; `tenant-root`
//! carries none. The labels are trusted only because the policy also guards who writes them,
//! and are cross-checked with the naming rule whenever they are read.

use std::collections::BTreeMap;

use thiserror::Error;

use crate::model::collect::StrSet;

pub const ROOT: &str = "tenant-root";
/// The root Tenant's application name: `tenants/root` in tenant-root, whose release is
/// `tenant-root` (`packages/system/cozystack-basics/templates/tenant-root.yaml`).
pub const ROOT_TENANT: &str = "root";
pub const ANCESTOR_PREFIX: &str = "tenant.cozystack.io/";
/// Provider labels: `namespace.cozystack.io/<class>` (legacy) and the capability key.
pub const LABEL_PREFIX: &str = "namespace.cozystack.io/";
pub const CAPABILITY_PREFIX: &str = "namespace.cozystack.io/capability.";
const TENANT_NS_PREFIX: &str = "tenant-";

pub type Labels = BTreeMap<String, String>;

/// The ancestor labels a release's Tenant chart writes on a tenant Namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AncestorLabels {
    /// `tenant.ancestorTenantLabels` (`_helpers.tpl`, v1.5.4 and v1.6.0 on): tenant-root and every
    /// dash-prefix of the name, itself included.
    Full,
    /// `splitList "-" .Release.Namespace` (`namespace.yaml`, v1.5.3 and before): itself and the
    /// dash-prefixes of its parent's name, so below the root's children tenant-root is missing.
    ParentPrefixes,
}

impl AncestorLabels {
    /// Either chain: what some supported release's chart writes.
    pub const ANY: &'static [AncestorLabels] =
        &[AncestorLabels::Full, AncestorLabels::ParentPrefixes];
}

/// A namespace's place in the tenant tree: its chain of tenant namespaces, root first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub namespace: String,
    /// `tenant-root`, …, the owning tenant. Empty for a namespace outside every tenant.
    pub chain: Vec<String>,
}

impl Placement {
    /// The tenant namespace that owns this namespace: the deepest ancestor.
    pub fn owner(&self) -> Option<&str> {
        self.chain.last().map(String::as_str)
    }

    /// True when `tenant` is this namespace's owner or one of the owner's ancestors.
    pub fn is_within(&self, tenant: &str) -> bool {
        self.chain.iter().any(|t| t == tenant)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TenantError {
    #[error(
        "namespace {namespace}: {name:?} is not a valid tenant namespace name (tenant-<word>[-<word>…], words of lower-case letters and digits)"
    )]
    InvalidName { namespace: String, name: String },
    #[error("namespace {namespace}: ancestor label {key} must have an empty value, not {value:?}")]
    NonEmptyValue {
        namespace: String,
        key: String,
        value: String,
    },
    #[error(
        "namespace {namespace}: tenant ancestor labels disagree with the tenant naming rule ({details})"
    )]
    Mismatch { namespace: String, details: String },
}

/// The chain of tenant namespaces a tenant namespace name implies, root first, itself last.
/// `None` when the name is not a tenant namespace name.
pub fn chain_from_name(name: &str) -> Option<Vec<String>> {
    if !is_tenant_name(name) {
        return None;
    }
    if name == ROOT {
        return Some(vec![ROOT.to_owned()]);
    }
    let mut chain = vec![ROOT.to_owned()];
    let mut current = TENANT_NS_PREFIX.trim_end_matches('-').to_owned();
    for word in name[TENANT_NS_PREFIX.len()..].split('-') {
        current = format!("{current}-{word}");
        chain.push(current.clone());
    }
    Some(chain)
}

/// The tenants whose `tenant.cozystack.io/<tenant>` labels a release's Tenant chart writes on
/// tenant namespace `name`, root first: its chain in full, or without tenant-root below the
/// root's children for the older chart. tenant-root itself carries none. `None` when the name is
/// not a tenant namespace name.
pub fn chart_labels(name: &str, form: AncestorLabels) -> Option<Vec<String>> {
    let chain = chain_from_name(name)?;
    let depth = chain.len();
    Some(
        chain
            .into_iter()
            .filter(|t| match form {
                _ if name == ROOT => false,
                AncestorLabels::Full => true,
                AncestorLabels::ParentPrefixes => t != ROOT || depth <= 2,
            })
            .collect(),
    )
}

/// The namespace a Tenant application named `name` in `parent` creates, as cozystack-api
/// computes it: `tenant-<name>` under the root, `<parent>-<name>` deeper; the root Tenant
/// (`root` in `tenant-root`) is the root namespace itself. `None` for no valid tenant name.
pub fn tenant_namespace(parent: &str, name: &str) -> Option<String> {
    if parent == ROOT && name == "root" {
        return Some(ROOT.to_owned());
    }
    // Tenant names are one word (cozystack-api: `^[a-z][a-z0-9]*$`).
    if !is_tenant_name(parent) || name.contains('-') {
        return None;
    }
    let child = if parent == ROOT {
        format!("{TENANT_NS_PREFIX}{name}")
    } else {
        format!("{parent}-{name}")
    };
    is_tenant_name(&child).then_some(child)
}

/// The Tenant application that creates a tenant namespace: its parent namespace and name.
pub fn tenant_application(namespace: &str) -> Option<(String, String)> {
    let chain = chain_from_name(namespace)?;
    let Some(parent) = chain.len().checked_sub(2).map(|i| chain[i].clone()) else {
        return Some((ROOT.to_owned(), ROOT_TENANT.to_owned()));
    };
    let name = match parent.as_str() {
        ROOT => &namespace[TENANT_NS_PREFIX.len()..],
        _ => &namespace[parent.len() + 1..],
    };
    Some((parent.clone(), name.to_owned()))
}

/// Whether namespace `name` is `tenant` or lies below it. A tenant namespace answers by the
/// naming rule: its ancestor labels may have drifted (the Tenant chart once wrote chains
/// without the root; migration 49 backfills them), its name cannot. Any other namespace
/// belongs to a tenant only through the `tenant.cozystack.io/<tenant>` label.
pub fn is_within(name: &str, labels: &Labels, tenant: &str) -> bool {
    match chain_from_name(name) {
        Some(chain) => chain.iter().any(|t| t == tenant),
        None => labels.contains_key(&format!("{ANCESTOR_PREFIX}{tenant}")),
    }
}

/// True for names that claim to be tenant namespaces (`tenant-…`), valid or not.
pub fn looks_like_tenant(name: &str) -> bool {
    name.starts_with(TENANT_NS_PREFIX)
}

/// Places `namespace` in the tenant tree from its labels, cross-checked with the naming rule.
///
/// - a tenant namespace (`tenant-…`) must carry exactly the chain its name implies, in one of
///   the `accepted` forms (a release's Tenant chart writes one; see [`AncestorLabels`]);
/// - any other namespace may carry a chain (it then belongs to the deepest tenant in it), or
///   none (it belongs to no tenant); the chain must be one the naming rule can produce, in full
///   (no chart writes it, so no release shortens it).
///
/// Every Namespace write by the platform is placed: the sets borrow the labels and the chain.
pub fn place(
    namespace: &str,
    labels: &Labels,
    accepted: &[AncestorLabels],
) -> Result<Placement, TenantError> {
    let mut claimed = Vec::new();
    for (key, value) in labels {
        if let Some(ancestor) = key.strip_prefix(ANCESTOR_PREFIX) {
            if !value.is_empty() {
                return Err(TenantError::NonEmptyValue {
                    namespace: namespace.to_owned(),
                    key: key.clone(),
                    value: value.clone(),
                });
            }
            claimed.push(ancestor);
        }
    }
    let claimed = StrSet::of(claimed);
    let chain = if looks_like_tenant(namespace) {
        chain_from_name(namespace).ok_or_else(|| TenantError::InvalidName {
            namespace: namespace.to_owned(),
            name: namespace.to_owned(),
        })?
    } else if claimed.is_empty() {
        Vec::new()
    } else {
        // The deepest claimed tenant decides; an invalid name sorts deepest and fails below.
        let deepest = claimed
            .iter()
            .max_by_key(|t| chain_from_name(t).map_or(usize::MAX, |chain| chain.len()))
            .unwrap_or_default();
        chain_from_name(deepest).ok_or_else(|| TenantError::InvalidName {
            namespace: namespace.to_owned(),
            name: deepest.to_owned(),
        })?
    };
    // The ancestor labels `chain` calls for: tenant-root carries none, while a namespace owned
    // by tenant-root (not a tenant itself) carries the root label.
    let owned_by_root = !looks_like_tenant(namespace) && !chain.is_empty();
    let expected = StrSet::of(
        chain
            .iter()
            .map(String::as_str)
            .filter(|t| *t != ROOT || chain.len() > 1)
            .chain(owned_by_root.then_some(ROOT)),
    );
    // The older chart's set ([`chart_labels`], `ParentPrefixes`): the full one less tenant-root,
    // below the root's children; compared in place, without building it.
    let shorter = accepted.contains(&AncestorLabels::ParentPrefixes)
        && looks_like_tenant(namespace)
        && chain.len() > 2
        && !claimed.contains(ROOT)
        && claimed.len() + 1 == expected.len()
        && claimed.iter().all(|t| expected.contains(t));
    if claimed != expected && !shorter {
        let labelled = |set: &mut dyn Iterator<Item = &str>| {
            set.map(|t| format!("{ANCESTOR_PREFIX}{t}"))
                .collect::<Vec<_>>()
        };
        let missing = labelled(&mut expected.difference(&claimed));
        let unexpected = labelled(&mut claimed.difference(&expected));
        let mut details = Vec::new();
        if !missing.is_empty() {
            details.push(format!("missing {}", missing.join(", ")));
        }
        if !unexpected.is_empty() {
            details.push(format!("unexpected {}", unexpected.join(", ")));
        }
        return Err(TenantError::Mismatch {
            namespace: namespace.to_owned(),
            details: details.join("; "),
        });
    }
    Ok(Placement {
        namespace: namespace.to_owned(),
        chain,
    })
}

/// True for a valid tenant namespace name: `tenant-root`, or `tenant-` and dash-separated words
/// of lower-case letters and digits, each starting with a letter. The one statement of the
/// naming rule; [`chain_from_name`] builds on it. Allocates nothing (it runs per listed instance).
pub fn is_tenant_name(name: &str) -> bool {
    if name == ROOT {
        return true;
    }
    let Some(rest) = name.strip_prefix(TENANT_NS_PREFIX) else {
        return false;
    };
    // A child of the root called "root" would collide with tenant-root itself.
    !rest.starts_with("root-")
        && rest != "root"
        && rest.split('-').all(|w| {
            w.starts_with(|c: char| c.is_ascii_lowercase())
                && w.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

/// A DNS-1123 label: namespace names and release names.
pub fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    const FULL: &[AncestorLabels] = &[AncestorLabels::Full];
    const EITHER: &[AncestorLabels] = AncestorLabels::ANY;

    fn labels(keys: &[&str]) -> Labels {
        keys.iter()
            .map(|k| (format!("{ANCESTOR_PREFIX}{k}"), String::new()))
            .collect()
    }

    #[test]
    fn chain_follows_the_naming_rule() {
        assert_eq!(chain_from_name("tenant-root").unwrap(), vec!["tenant-root"]);
        assert_eq!(
            chain_from_name("tenant-ktj-htdev").unwrap(),
            vec!["tenant-root", "tenant-ktj", "tenant-ktj-htdev"]
        );
        assert_eq!(chain_from_name("tenant-a--b"), None);
        assert_eq!(chain_from_name("tenant-A"), None);
        assert_eq!(chain_from_name("tenant-1a"), None);
        assert_eq!(chain_from_name("tenant-root-x"), None);
        assert_eq!(chain_from_name("cozy-system"), None);
    }

    #[test]
    fn tenant_namespace_must_carry_its_chain() {
        let placed = place(
            "tenant-a-b",
            &labels(&["tenant-root", "tenant-a", "tenant-a-b"]),
            FULL,
        )
        .unwrap();
        assert_eq!(placed.owner(), Some("tenant-a-b"));
        assert!(placed.is_within("tenant-a"));

        let err = place("tenant-a-b", &labels(&["tenant-root", "tenant-a-b"]), FULL).unwrap_err();
        assert_eq!(
            err.to_string(),
            "namespace tenant-a-b: tenant ancestor labels disagree with the tenant naming rule (missing tenant.cozystack.io/tenant-a)"
        );
        let err = place(
            "tenant-a",
            &labels(&["tenant-root", "tenant-a", "tenant-c"]),
            FULL,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "namespace tenant-a: tenant ancestor labels disagree with the tenant naming rule (unexpected tenant.cozystack.io/tenant-c)"
        );
    }

    #[test]
    fn the_older_chart_s_shorter_chain_is_accepted_where_its_release_writes_it() {
        // v1.5.3's Tenant chart: tenant-ktj-htdev carries tenant-ktj and itself.
        let short = labels(&["tenant-ktj", "tenant-ktj-htdev"]);
        let placed = place("tenant-ktj-htdev", &short, EITHER).unwrap();
        assert_eq!(
            placed.chain,
            vec!["tenant-root", "tenant-ktj", "tenant-ktj-htdev"]
        );
        assert_eq!(
            place("tenant-ktj-htdev", &short, FULL)
                .unwrap_err()
                .to_string(),
            "namespace tenant-ktj-htdev: tenant ancestor labels disagree with the tenant naming rule (missing tenant.cozystack.io/tenant-root)"
        );
        // Only tenant-root may be missing, and only below the root's children.
        for (name, keys) in [
            ("tenant-ktj-htdev", &["tenant-root", "tenant-ktj-htdev"][..]),
            ("tenant-ktj-htdev", &["tenant-ktj"][..]),
            ("tenant-ktj", &["tenant-ktj"][..]),
            ("tenant-a-b-c", &["tenant-a-b", "tenant-a-b-c"][..]),
        ] {
            assert!(
                place(name, &labels(keys), EITHER).is_err(),
                "{name} {keys:?}"
            );
        }
        assert!(
            place(
                "tenant-a-b-c",
                &labels(&["tenant-a", "tenant-a-b", "tenant-a-b-c"]),
                EITHER
            )
            .is_ok()
        );
    }

    #[test]
    fn each_chart_labels_a_tenant_namespace_as_its_template_does() {
        use AncestorLabels::*;
        let labels = |name, form| chart_labels(name, form).unwrap();
        assert_eq!(
            labels("tenant-ktj-htdev", Full),
            ["tenant-root", "tenant-ktj", "tenant-ktj-htdev"]
        );
        assert_eq!(
            labels("tenant-ktj-htdev", ParentPrefixes),
            ["tenant-ktj", "tenant-ktj-htdev"]
        );
        assert_eq!(
            labels("tenant-ktj", ParentPrefixes),
            ["tenant-root", "tenant-ktj"]
        );
        assert!(labels("tenant-root", Full).is_empty());
        assert_eq!(chart_labels("cozy-system", Full), None);
    }

    #[test]
    fn place_accepts_exactly_what_each_chart_writes() {
        use AncestorLabels::*;
        for name in ["tenant-a", "tenant-a-b", "tenant-a-b-c", "tenant-ktj-htdev"] {
            for form in [Full, ParentPrefixes] {
                let written = chart_labels(name, form).unwrap();
                let keys: Vec<&str> = written.iter().map(String::as_str).collect();
                assert!(
                    place(name, &labels(&keys), &[form]).is_ok(),
                    "{name} {form:?}"
                );
                // One label less is no chart's chain, unless it is the older chart's.
                let older = chart_labels(name, ParentPrefixes).unwrap();
                for drop in &keys {
                    let fewer: Vec<&str> = keys.iter().copied().filter(|k| k != drop).collect();
                    assert_eq!(
                        place(name, &labels(&fewer), EITHER).is_ok(),
                        fewer == older,
                        "{name} without {drop}"
                    );
                }
            }
        }
    }

    #[test]
    fn root_carries_no_ancestor_label() {
        assert_eq!(place(ROOT, &Labels::new(), FULL).unwrap().chain, vec![ROOT]);
        let err = place(ROOT, &labels(&["tenant-root"]), FULL).unwrap_err();
        assert!(
            err.to_string()
                .contains("unexpected tenant.cozystack.io/tenant-root")
        );
    }

    #[test]
    fn ancestor_values_must_be_empty() {
        let mut l = labels(&["tenant-root", "tenant-a"]);
        l.insert("tenant.cozystack.io/tenant-a".into(), "x".into());
        assert_eq!(
            place("tenant-a", &l, FULL).unwrap_err().to_string(),
            "namespace tenant-a: ancestor label tenant.cozystack.io/tenant-a must have an empty value, not \"x\""
        );
    }

    #[test]
    fn other_namespaces_belong_to_their_deepest_labelled_tenant() {
        assert_eq!(
            place("cozy-system", &Labels::new(), FULL).unwrap().owner(),
            None
        );
        let placed = place("vm-disks", &labels(&["tenant-root", "tenant-a"]), FULL).unwrap();
        assert_eq!(placed.owner(), Some("tenant-a"));
        let err = place("vm-disks", &labels(&["tenant-a"]), EITHER).unwrap_err();
        assert!(
            err.to_string()
                .contains("missing tenant.cozystack.io/tenant-root")
        );
        let placed = place("shared", &labels(&["tenant-root"]), FULL).unwrap();
        assert_eq!(placed.owner(), Some("tenant-root"));
    }

    #[test]
    fn is_tenant_name_agrees_with_the_chain() {
        for name in [
            "tenant-root",
            "tenant-a",
            "tenant-a-b1",
            "tenant-root-x",
            "tenant-",
            "tenant-a--b",
            "tenant-A",
            "cozy",
            "tenant-1",
        ] {
            assert_eq!(
                is_tenant_name(name),
                chain_from_name(name).is_some(),
                "{name}"
            );
        }
    }

    #[test]
    fn tenant_applications_and_their_namespaces() {
        for (parent, name, namespace) in [
            ("tenant-root", "root", "tenant-root"),
            ("tenant-root", "ktj", "tenant-ktj"),
            ("tenant-ktj", "htdev", "tenant-ktj-htdev"),
        ] {
            assert_eq!(tenant_namespace(parent, name).as_deref(), Some(namespace));
            assert_eq!(
                tenant_application(namespace),
                Some((parent.to_owned(), name.to_owned()))
            );
        }
        assert_eq!(tenant_namespace("tenant-root", "bad-name"), None);
        assert_eq!(tenant_namespace("cozy-system", "a"), None);
        assert_eq!(tenant_namespace("tenant-a", "B"), None);
        assert_eq!(tenant_application("cozy-system"), None);
    }

    #[test]
    fn subtree_membership_follows_the_name_of_a_tenant_namespace() {
        // A drifted chain (no tenant-a label) does not take tenant-a-b out of tenant-a.
        let drifted = labels(&["tenant-root", "tenant-a-b"]);
        assert!(is_within("tenant-a-b", &drifted, "tenant-a"));
        assert!(is_within("tenant-a-b", &drifted, ROOT));
        assert!(is_within("tenant-a", &Labels::new(), "tenant-a"));
        assert!(!is_within("tenant-c", &labels(&["tenant-a"]), "tenant-a"));
        // Other namespaces belong through their labels alone.
        assert!(is_within(
            "vm-disks",
            &labels(&["tenant-root", "tenant-a"]),
            "tenant-a"
        ));
        assert!(!is_within("vm-disks", &Labels::new(), "tenant-a"));
    }

    #[test]
    fn invalid_tenant_names_are_rejected() {
        let err = place("tenant-Bad", &Labels::new(), FULL).unwrap_err();
        assert!(matches!(err, TenantError::InvalidName { .. }));
    }
}
