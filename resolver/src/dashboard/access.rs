//! The RBAC half of "may this user create one here": what the dashboard learned from the API
//! server (a SelfSubjectRulesReview, or SelfSubjectAccessReviews kind by kind). The policy never
//! sees RBAC, and the API server checks it before admission, so a dashboard that shows only the
//! policy's half offers buttons RBAC refuses.

use std::collections::BTreeMap;

use serde::Deserialize;

/// The API group every Cozystack application kind is served in.
const APPS_GROUP: &str = "apps.cozystack.io";

/// What the user may do in one namespace.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum Access {
    /// The `status` of a SelfSubjectRulesReview for the namespace.
    Review(RulesReview),
    /// Verbs per resource (the kind's plural) or kind: the answers of SelfSubjectAccessReviews.
    Verbs(BTreeMap<String, Vec<String>>),
}

/// `SelfSubjectRulesReviewStatus` (authorization.k8s.io/v1).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RulesReview {
    #[serde(default)]
    pub resource_rules: Vec<ResourceRule>,
    #[serde(default)]
    pub non_resource_rules: Vec<serde_json::Value>,
    /// The authorizer could not list every rule: a rule that is not listed may still allow.
    #[serde(default)]
    pub incomplete: bool,
    #[serde(default)]
    pub evaluation_error: Option<String>,
}

/// `ResourceRule` (authorization.k8s.io/v1).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRule {
    pub verbs: Vec<String>,
    #[serde(default)]
    pub api_groups: Vec<String>,
    #[serde(default)]
    pub resources: Vec<String>,
    /// A rule limited to names never grants `create`: the name of a new object is not known
    /// when RBAC is asked.
    #[serde(default)]
    pub resource_names: Vec<String>,
}

/// RBAC's answer for one kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rbac {
    Allowed,
    /// Refused, or not known to be allowed: the reason says which.
    Refused(String),
}

fn any(items: &[String], wanted: &str) -> bool {
    items.iter().any(|i| i == "*" || i == wanted)
}

impl Access {
    /// Whether `user` may `create` `apps.cozystack.io/<plural>` (kind `kind`) in `namespace`.
    pub fn create(&self, user: &str, kind: &str, plural: &str, namespace: &str) -> Rbac {
        let refused = |why: &str| {
            Rbac::Refused(format!(
                "RBAC: {user} may not create {plural}.{APPS_GROUP} in {namespace} ({why}); ask an administrator of the tenant for a role that grants it"
            ))
        };
        match self {
            Access::Verbs(verbs) => {
                let listed = verbs.get(plural).or_else(|| verbs.get(kind));
                if listed.is_some_and(|v| any(v, "create")) {
                    Rbac::Allowed
                } else {
                    refused("no role grants it")
                }
            }
            Access::Review(review) => {
                let grants = review.resource_rules.iter().any(|rule| {
                    rule.resource_names.is_empty()
                        && any(&rule.verbs, "create")
                        && any(&rule.api_groups, APPS_GROUP)
                        && any(&rule.resources, plural)
                });
                match (grants, review.incomplete) {
                    (true, _) => Rbac::Allowed,
                    (false, false) => refused("no role grants it"),
                    (false, true) => refused(&format!(
                        "no listed rule grants it, and the rules review is incomplete{}: ask the API server with a SelfSubjectAccessReview",
                        review
                            .evaluation_error
                            .as_deref()
                            .map(|e| format!(" ({e})"))
                            .unwrap_or_default()
                    )),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn access(json: serde_json::Value) -> Access {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_rules_review_grants_create_by_group_resource_and_verb() {
        // cozy:tenant:admin (packages/system/cozystack-basics/templates/clusterroles.yaml):
        // read on every kind, writes on a list that leaves out the modules but Info and SeaweedFS.
        let admin = access(serde_json::json!({
            "resourceRules": [
                {"verbs": ["get", "list", "watch"], "apiGroups": ["apps.cozystack.io"], "resources": ["*"]},
                {"verbs": ["create", "update", "patch", "delete"], "apiGroups": ["apps.cozystack.io"], "resources": ["postgreses", "seaweedfses", "infos"]},
                {"verbs": ["create"], "apiGroups": ["apps.cozystack.io"], "resources": ["monitorings"], "resourceNames": ["monitoring"]}
            ],
            "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/api"]}],
            "incomplete": false
        }));
        assert_eq!(
            admin.create("carol", "Postgres", "postgreses", "tenant-acme"),
            Rbac::Allowed
        );
        assert_eq!(
            admin.create("carol", "Monitoring", "monitorings", "tenant-acme"),
            Rbac::Refused("RBAC: carol may not create monitorings.apps.cozystack.io in tenant-acme (no role grants it); ask an administrator of the tenant for a role that grants it".into())
        );
        let everything = access(serde_json::json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]
        }));
        assert_eq!(
            everything.create("root", "Monitoring", "monitorings", "tenant-root"),
            Rbac::Allowed
        );
        let incomplete = access(serde_json::json!({
            "resourceRules": [], "incomplete": true, "evaluationError": "webhook authorizer does not list rules"
        }));
        assert_eq!(
            incomplete.create("dave", "Redis", "redises", "tenant-acme"),
            Rbac::Refused("RBAC: dave may not create redises.apps.cozystack.io in tenant-acme (no listed rule grants it, and the rules review is incomplete (webhook authorizer does not list rules): ask the API server with a SelfSubjectAccessReview); ask an administrator of the tenant for a role that grants it".into())
        );
    }

    #[test]
    fn verbs_are_read_by_plural_or_kind() {
        let verbs = access(
            serde_json::json!({"redises": ["get", "create"], "Postgres": ["*"], "Etcd": ["get"]}),
        );
        assert_eq!(verbs.create("u", "Redis", "redises", "ns"), Rbac::Allowed);
        assert_eq!(
            verbs.create("u", "Postgres", "postgreses", "ns"),
            Rbac::Allowed
        );
        assert!(matches!(
            verbs.create("u", "Etcd", "etcds", "ns"),
            Rbac::Refused(_)
        ));
        assert!(matches!(
            verbs.create("u", "Kafka", "kafkas", "ns"),
            Rbac::Refused(_)
        ));
    }
}
