//! Who is asking: platform identities, teardown identities and tenant administrators.

use serde::{Deserialize, Serialize};

use crate::settings::Settings;

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

impl User {
    /// A platform identity: listed username (pattern) or member of a listed group.
    pub fn is_platform(&self, settings: &Settings) -> bool {
        settings
            .platform_users
            .iter()
            .any(|p| glob_match(p, &self.username))
            || self
                .groups
                .iter()
                .any(|g| settings.platform_groups.contains(g))
    }

    /// An identity that deletes everything of a tenant while the tenant is torn down.
    pub fn is_teardown(&self, settings: &Settings) -> bool {
        settings
            .teardown_users
            .iter()
            .any(|p| glob_match(p, &self.username))
    }

    /// The first administrator group of `chain` (a tenant and its ancestors) this user is in.
    pub fn admin_group_in(&self, chain: &[String], settings: &Settings) -> Option<String> {
        self.groups
            .iter()
            .find(|group| admin_groups(chain, settings).any(|g| &g == *group))
            .cloned()
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
        assert!(user("bob", &["cozystack-cluster-admin"]).is_platform(&settings));
        assert!(!user("bob", &["tenant-a-admin"]).is_platform(&settings));
        assert!(
            user(
                "system:serviceaccount:kube-system:namespace-controller",
                &[]
            )
            .is_teardown(&settings)
        );
        let chain = vec!["tenant-root".to_string(), "tenant-a".to_string()];
        assert_eq!(
            user("bob", &["x", "tenant-root-super-admin"]).admin_group_in(&chain, &settings),
            Some("tenant-root-super-admin".into())
        );
        assert_eq!(
            user("bob", &["tenant-a-use"]).admin_group_in(&chain, &settings),
            None
        );
    }
}
