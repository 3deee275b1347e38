//! Who is asking: platform identities, teardown identities and tenant administrators.

use serde::{Deserialize, Serialize};

use crate::model::settings::Settings;

/// `request.userInfo` as far as the decisions read it. Under impersonation this is the
/// impersonated user: the rules are only as strong as RBAC on the `impersonate` verb.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub username: String,
    #[serde(default)]
    pub groups: Vec<String>,
}

/// `*` matches any run of characters; everything else matches itself.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";
const SERVICE_ACCOUNT_GROUP_PREFIX: &str = "system:serviceaccounts:";

impl User {
    /// `(namespace, name)` of a ServiceAccount identity.
    pub fn service_account(&self) -> Option<(&str, &str)> {
        self.username
            .strip_prefix(SERVICE_ACCOUNT_PREFIX)?
            .split_once(':')
            .filter(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains(':'))
    }

    /// A controller or other component rather than a person (`system:` names are reserved
    /// for them): its denials name the setting that governs the rule, not someone to ask.
    pub fn is_machine(&self) -> bool {
        self.username.starts_with("system:")
    }

    /// A platform identity: a listed username (pattern), a member of a listed group, or a
    /// ServiceAccount of a platform namespace. The namespace is read from the username as
    /// well as from the group the API server derives from it, so the two cannot disagree.
    pub fn is_platform(&self, settings: &Settings) -> bool {
        let platform_namespace = |ns: &str| {
            settings
                .platform_service_account_namespaces
                .iter()
                .any(|p| p == ns)
        };
        settings
            .platform_users
            .iter()
            .any(|p| glob_match(p, &self.username))
            || self.groups.iter().any(|g| {
                settings.platform_groups.iter().any(|p| p == g)
                    || g.strip_prefix(SERVICE_ACCOUNT_GROUP_PREFIX)
                        .is_some_and(platform_namespace)
            })
            || self
                .service_account()
                .is_some_and(|(ns, _)| platform_namespace(ns))
    }

    /// Kubewarden's audit scanner, which replays existing objects as CREATEs: the scanner's
    /// username and no groups. The API server never sends such a user, as every real user has a
    /// group.
    pub fn is_audit_scanner(&self, settings: &Settings) -> bool {
        self.groups.is_empty() && self.username == settings.audit_scanner_username
    }

    /// An identity that deletes everything of a tenant while the tenant is torn down.
    pub fn is_teardown(&self, settings: &Settings) -> bool {
        settings
            .teardown_users
            .iter()
            .any(|p| glob_match(p, &self.username))
    }

    /// Whether this user administers a tenant of `chain` (a tenant and its ancestors): a
    /// member of one of its administrator groups, or, as `cozy:tenant` binds it, the tenant's
    /// own ServiceAccount `system:serviceaccount:<ns>:<ns>`.
    pub fn administers(&self, chain: &[String], settings: &Settings) -> bool {
        let own_account = settings.tenant_service_accounts_are_admins
            && self
                .service_account()
                .is_some_and(|(ns, name)| ns == name && chain.iter().any(|t| t == ns));
        own_account
            || self
                .groups
                .iter()
                .any(|group| admin_groups(chain, settings).any(|g| &g == group))
    }
}

/// The groups that administer any tenant of `chain`: `<prefix><ns><suffix>`.
pub fn admin_groups<'a>(
    chain: &'a [String],
    settings: &'a Settings,
) -> impl Iterator<Item = String> + 'a {
    chain.iter().flat_map(move |ns| {
        settings
            .tenant_admin_group_suffixes
            .iter()
            .map(move |suffix| format!("{}{ns}{suffix}", settings.tenant_group_prefix))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn glob() {
        assert!(glob_match("a", "a"));
        assert!(!glob_match("a", "ab"));
        let cleanup = "system:serviceaccount:cozy-system:tenant-*-cleanup";
        assert!(glob_match(
            cleanup,
            "system:serviceaccount:cozy-system:tenant-a-b-cleanup"
        ));
        assert!(!glob_match(
            cleanup,
            "system:serviceaccount:cozy-system:tenant-a-b"
        ));
        assert!(!glob_match(
            cleanup,
            "system:serviceaccount:tenant-a:tenant-x-cleanup"
        ));
        assert!(glob_match("*", ""));
        assert!(glob_match("a*b*c", "aXbYc"));
        assert!(!glob_match("a*b*c", "aXcYb"));
        assert!(!glob_match("ab*ba", "aba"));
    }

    #[test]
    fn identities() {
        let settings = Settings::default();
        let user = |name: &str, groups: &[&str]| User {
            username: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        };
        assert!(user("system:serviceaccount:cozy-fluxcd:flux", &[]).is_platform(&settings));
        assert!(
            user(
                "system:serviceaccount:cozy-system:cozystack-migration-hook",
                &[
                    "system:serviceaccounts",
                    "system:serviceaccounts:cozy-system"
                ]
            )
            .is_platform(&settings)
        );
        assert!(user("robot", &["system:serviceaccounts:cozy-velero"]).is_platform(&settings));
        assert!(user("bob", &["cozystack-cluster-admin"]).is_platform(&settings));
        assert!(!user("bob", &["tenant-a-admin"]).is_platform(&settings));
        assert!(
            !user(
                "system:serviceaccount:tenant-a:tenant-a",
                &["system:serviceaccounts", "system:serviceaccounts:tenant-a"]
            )
            .is_platform(&settings)
        );
        assert!(!user("system:serviceaccount:cozy-systemx:x", &[]).is_platform(&settings));
        assert!(!user("system:serviceaccount:cozy-system", &[]).is_platform(&settings));
        assert!(
            user(
                "system:serviceaccount:kube-system:namespace-controller",
                &[]
            )
            .is_teardown(&settings)
        );
        let chain = vec!["tenant-root".to_string(), "tenant-a".to_string()];
        assert!(user("bob", &["x", "tenant-root-super-admin"]).administers(&chain, &settings));
        assert!(!user("bob", &["tenant-a-use"]).administers(&chain, &settings));
        let own = user("system:serviceaccount:tenant-root:tenant-root", &[]);
        assert!(own.administers(&chain, &settings));
        assert!(!own.administers(
            &chain,
            &Settings {
                tenant_service_accounts_are_admins: false,
                ..Settings::default()
            }
        ));
        let child = user("system:serviceaccount:tenant-a-b:tenant-a-b", &[]);
        assert!(
            !child.administers(&chain, &settings),
            "a child administers no ancestor"
        );
        let other = user("system:serviceaccount:tenant-a:builder", &[]);
        assert!(
            !other.administers(&chain, &settings),
            "only the tenant's own account"
        );
    }
}
