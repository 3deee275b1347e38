//! What the API servers refuse before any admission webhook, so that `check` does not report a
//! write the policy would admit but the cluster never takes: cozystack-api's own validation of a
//! new Application (`pkg/registry/apps/application/rest.go`, `Create`: the name's format and
//! length, a Tenant's namespace, reserved values keys, checked before it runs the admission
//! chain), the versions and kinds the cluster serves while Flux applies (a definition in the
//! same change set serves nothing yet), and NamespaceLifecycle, which kube-apiserver and
//! cozystack-api (the generic apiserver's default plugins, `pkg/cmd/server/start.go`) both run.
//! Cozystack 3c780acd.

use std::collections::{BTreeMap, BTreeSet};

use cozystack_policy_runtime::cluster::ClusterObjects;
use cozystack_resolver::tenant;
use serde_json::{Value, json};

use crate::flux::manifests::Manifest;

/// Who writes: the user and groups the API server authenticates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub username: String,
    pub groups: Vec<String>,
}

impl Identity {
    /// `--as` and `--as-group` as the API server's impersonation filter turns them into a user
    /// (k8s.io/apiserver `filters/impersonation.go` `WithImpersonation`): a ServiceAccount
    /// without groups given gets its own (`system:serviceaccounts`,
    /// `system:serviceaccounts:<ns>`); every user but `system:anonymous` gets
    /// `system:authenticated` unless `system:authenticated` or `system:unauthenticated` was
    /// given; `system:anonymous` gets `system:unauthenticated`.
    pub fn impersonated(username: &str, groups: &[String]) -> Identity {
        const AUTHENTICATED: &str = "system:authenticated";
        const UNAUTHENTICATED: &str = "system:unauthenticated";
        let mut all: Vec<String> = groups.to_vec();
        if groups.is_empty()
            && let Some((namespace, _)) = service_account(username)
        {
            all.push("system:serviceaccounts".into());
            all.push(format!("system:serviceaccounts:{namespace}"));
        }
        let has = |group: &str| all.iter().any(|g| g == group);
        let added = match username {
            "system:anonymous" => (!has(UNAUTHENTICATED)).then_some(UNAUTHENTICATED),
            _ => (!has(AUTHENTICATED) && !has(UNAUTHENTICATED)).then_some(AUTHENTICATED),
        };
        all.extend(added.map(str::to_owned));
        Identity {
            username: username.to_owned(),
            groups: all,
        }
    }

    pub fn describe(&self) -> String {
        format!("{} (groups {})", self.username, self.groups.join(", "))
    }
}

/// `system:serviceaccount:<namespace>:<name>` split as the API server splits it
/// (`serviceaccount.SplitUsername`): exactly two parts, each a DNS label.
fn service_account(username: &str) -> Option<(&str, &str)> {
    let rest = username.strip_prefix("system:serviceaccount:")?;
    let (namespace, name) = rest.split_once(':')?;
    let label = |part: &str| {
        !part.is_empty()
            && part.len() <= 253
            && part
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
            && !part.starts_with(['-', '.'])
            && !part.ends_with(['-', '.'])
    };
    (label(namespace) && label(name) && namespace.len() <= 63).then_some((namespace, name))
}

/// A user name as `--as` takes it: not empty (an unset variable), no surrounding space, and a
/// ServiceAccount's well formed — the policy would otherwise judge a user nobody is.
pub fn parse_user(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        return Err(
            "is empty (an unset variable?): name the user who applies the change set".into(),
        );
    }
    if text.trim() != text {
        return Err(format!("{text:?} has surrounding space"));
    }
    if text.starts_with("system:serviceaccount:") && service_account(text).is_none() {
        return Err(format!(
            "{text:?} is no ServiceAccount: write system:serviceaccount:NAMESPACE:NAME"
        ));
    }
    Ok(text.to_owned())
}

/// A resource as an AdmissionRequest names it: its group, version and kind, and its plural.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource<'a> {
    pub group: &'a str,
    pub version: &'a str,
    pub kind: &'a str,
    pub plural: &'a str,
}

/// The resource the policy's webhook rules match for app and module releases.
pub const HELM_RELEASES: Resource<'static> = Resource {
    group: "helm.toolkit.fluxcd.io",
    version: "v2",
    kind: "HelmRelease",
    plural: "helmreleases",
};

/// Namespaces, whose labels the policy guards.
pub const NAMESPACES: Resource<'static> = Resource {
    group: "",
    version: "v1",
    kind: "Namespace",
    plural: "namespaces",
};

/// One write as the API server sends it to admission.
#[derive(Debug, Clone, Copy)]
pub struct Admission<'a> {
    pub operation: &'a str,
    pub resource: Resource<'a>,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    pub object: Option<&'a Value>,
    pub old: Option<&'a Value>,
}

impl<'a> Admission<'a> {
    /// An update of Namespace `name` from `old` to `new` (a label write).
    pub fn namespace_update(name: &'a str, old: &'a Value, new: &'a Value) -> Admission<'a> {
        Admission {
            operation: "UPDATE",
            resource: NAMESPACES,
            namespace: None,
            name,
            object: Some(new),
            old: Some(old),
        }
    }

    /// The AdmissionRequest, numbered `uid`, `identity` sends through a client writing as field
    /// manager `manager` (a dry run when `dry_run`).
    pub fn request(&self, identity: &Identity, manager: &str, uid: usize, dry_run: bool) -> Value {
        let Resource {
            group,
            version,
            kind,
            plural,
        } = self.resource;
        let gvk = json!({"group": group, "version": version, "kind": kind});
        let gvr = json!({"group": group, "version": version, "resource": plural});
        // A server-side apply is admitted as a create or an update with its field manager; a
        // prune deletes in the background (`patchToCreateOptions`, `patchToUpdateOptions`).
        let mut options = match self.operation {
            "CREATE" => json!({"kind": "CreateOptions", "fieldManager": manager}),
            "UPDATE" => json!({"kind": "UpdateOptions", "fieldManager": manager}),
            _ => json!({"kind": "DeleteOptions", "propagationPolicy": "Background"}),
        };
        options["apiVersion"] = json!("meta.k8s.io/v1");
        if dry_run {
            options["dryRun"] = json!(["All"]);
        }
        let mut request = json!({
            "uid": format!("check-{uid:04}"),
            "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
            "name": self.name, "operation": self.operation,
            "userInfo": {"username": identity.username, "groups": identity.groups},
            "object": self.object.cloned().unwrap_or(Value::Null),
            "oldObject": self.old.cloned().unwrap_or(Value::Null),
            "dryRun": dry_run,
            "options": options,
        });
        if let Some(ns) = self.namespace {
            request["namespace"] = json!(ns);
        }
        request
    }
}

/// Helm's release name limit, which cozystack-api holds `<prefix><name>` to.
const MAX_RELEASE_NAME: usize = 53;
/// A namespace name's limit (a DNS-1123 label), which a Tenant's computed namespace must fit.
const MAX_NAMESPACE_NAME: usize = 63;
/// `k8s.io/apimachinery` `IsDNS1035Label`'s message, as the API server returns it.
const DNS1035: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

/// The versions the cluster serves of the groups the policy guards: Cozystack's Flux serves
/// HelmRelease in `v2` only (`internal/fluxinstall/manifests/fluxcd.yaml`, the CRD's one
/// version), and cozystack-api its applications in `v1alpha1`.
const SERVED: [(&str, &str, &str); 2] = [
    (
        "helm.toolkit.fluxcd.io",
        "v2",
        "the Flux Cozystack installs, internal/fluxinstall/manifests/fluxcd.yaml",
    ),
    ("apps.cozystack.io", "v1alpha1", "cozystack-api"),
];

/// Why the API server has no such resource for `manifest`: a version of a guarded group it
/// does not serve (`kubectl apply` and Flux's dry-run fail with "no matches for kind").
pub fn unserved_version(manifest: &Manifest) -> Option<String> {
    let (group, version) = manifest.api_version().rsplit_once('/')?;
    let (_, served, by) = SERVED.iter().find(|(g, ..)| *g == group)?;
    if version == *served {
        return None;
    }
    let kind = manifest.kind();
    Some(format!(
        "the API server refuses it before admission: no matches for kind \"{kind}\" in version \"{group}/{version}\" ({by} serves {group}/{served} only); write apiVersion: {group}/{served}"
    ))
}

/// Why cozystack-api refuses creating Application `name` of `kind` (release prefix `prefix`)
/// in `namespace` with `spec`, before admission; `None` when it takes it.
pub fn application_refusal(
    kind: &str,
    prefix: &str,
    namespace: &str,
    name: &str,
    spec: &Value,
) -> Option<String> {
    let invalid = |message: String| {
        format!(
            "cozystack-api refuses it before admission: {kind}.apps.cozystack.io \"{name}\" is invalid: metadata.name: Invalid value: \"{name}\": {message}"
        )
    };
    let tenant = kind == "Tenant";
    let lower_alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let starts_with_letter = name.starts_with(|c: char| c.is_ascii_lowercase());
    if tenant && !(starts_with_letter && name.chars().all(lower_alnum)) {
        return Some(invalid(
            "tenant names must start with a lowercase letter and contain only lowercase letters and digits; dashes are not allowed".into(),
        ));
    }
    let mut dns = Vec::new();
    if name.len() > MAX_NAMESPACE_NAME {
        dns.push(format!(
            "must be no more than {MAX_NAMESPACE_NAME} characters"
        ));
    }
    if !(starts_with_letter
        && name.chars().all(|c| lower_alnum(c) || c == '-')
        && name.ends_with(lower_alnum))
    {
        dns.push(DNS1035.to_owned());
    }
    if !dns.is_empty() {
        return Some(invalid(dns.join(", ")));
    }
    let limit = MAX_RELEASE_NAME.saturating_sub(prefix.len());
    if name.len() > limit {
        return Some(invalid(format!(
            "must be no more than {limit} characters (release prefix \"{prefix}\")"
        )));
    }
    if tenant
        && let Some(child) = tenant::tenant_namespace(namespace, name)
        && child.len() > MAX_NAMESPACE_NAME
    {
        return Some(invalid(format!(
            "computed tenant namespace \"{child}\" would be {} characters, which exceeds the {MAX_NAMESPACE_NAME}-character Kubernetes namespace limit; shorten the tenant name or reduce ancestor nesting depth",
            child.len()
        )));
    }
    let reserved = spec
        .as_object()
        .and_then(|values| values.keys().find(|key| key.starts_with('_')))?;
    Some(format!(
        "cozystack-api refuses it before admission: values key \"{reserved}\" is reserved (keys starting with '_' are not allowed)"
    ))
}

/// What the cluster offers a change set's objects while Flux applies it: the namespaces they
/// can land in, and the kinds served.
pub struct Landing {
    /// Those the cluster holds before the change set, and those it applies: kustomize-controller
    /// applies Namespaces in its first stage, before anything namespaced (fluxcd/pkg `ssa`,
    /// `ApplyAllStaged`). A namespace a Tenant's release renders comes later: helm-controller
    /// reconciles the release after Flux has applied the whole change set.
    made: BTreeSet<String>,
    /// A tenant namespace and the Tenant of the change set whose release makes it.
    tenants: BTreeMap<String, String>,
    /// The kinds the change set's ApplicationDefinitions define, and where. cozystack-api reads
    /// the definitions when it starts, and cozystack-controller restarts it once they settle
    /// (`internal/controller/applicationdefinition_controller.go`: a debounced rollout on their
    /// hash): none of them is served while Flux applies the change set.
    defined: BTreeMap<String, String>,
}

impl Landing {
    pub fn of(applies: &[Manifest], cluster: &ClusterObjects) -> Landing {
        let live = cluster
            .keys()
            .filter(|(api, kind, ..)| api == "v1" && kind == "Namespace")
            .map(|(.., name)| name.clone());
        let made = applies
            .iter()
            .filter(|m| m.kind() == "Namespace")
            .map(|m| m.name().to_owned())
            .chain(live)
            .collect();
        let tenants = applies
            .iter()
            .filter(|m| m.kind() == "Tenant" && m.api_version().starts_with("apps.cozystack.io/"))
            .filter_map(|m| {
                let child = tenant::tenant_namespace(m.namespace()?, m.name())?;
                Some((
                    child,
                    format!(
                        "Tenant {} ({})",
                        m.reference().trim_start_matches("Tenant "),
                        m.origin
                    ),
                ))
            })
            .collect();
        let defined = applies
            .iter()
            .filter(|m| m.kind() == "ApplicationDefinition")
            .filter_map(|m| {
                let kind = m.object.pointer("/spec/application/kind")?.as_str()?;
                Some((kind.to_owned(), m.origin.clone()))
            })
            .collect();
        Landing {
            made,
            tenants,
            defined,
        }
    }

    /// Why an Application of `kind`, which the cluster does not serve, is refused when its
    /// definition is in the change set: the kind is not served yet.
    pub fn not_served_yet(&self, kind: &str) -> Option<String> {
        let origin = self.defined.get(kind)?;
        Some(format!(
            "the API server refuses it before admission: cozystack-api does not serve {kind} yet when Flux applies this (no matches for kind \"{kind}\"); its ApplicationDefinition ({origin}) is in this change set, and cozystack-api serves a new kind only once cozystack-controller has restarted it; apply the definition from a Flux Kustomization this one names in spec.dependsOn"
        ))
    }

    /// Why an object in `namespace` is refused before admission, if it is: the namespace is
    /// not in the cluster and the change set does not make it. The API servers' own admission
    /// refuses it (NamespaceLifecycle: kube-apiserver's, and cozystack-api's, which keeps the
    /// generic apiserver's default plugins, `pkg/cmd/server/start.go`). A Tenant's namespace is
    /// made by the Tenant chart once its release reconciles, after the change set is applied.
    pub fn missing(&self, namespace: &str) -> Option<String> {
        if self.made.contains(namespace) {
            return None;
        }
        let refused = format!(
            "namespace {namespace} does not exist when Flux applies this, so the API server refuses it before admission (namespaces \"{namespace}\" not found)"
        );
        Some(match self.tenants.get(namespace) {
            Some(tenant) => format!(
                "{refused}: {tenant} makes it only once its release reconciles; apply this from a second Flux Kustomization with spec.dependsOn naming the one that applies the Tenant (and spec.wait: true there), or after the Tenant is Ready"
            ),
            None => format!(
                "{refused}: create the namespace first (for a tenant's, its Tenant), or apply this from a Flux Kustomization that dependsOn the one that makes it"
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impersonation_adds_the_groups_the_api_server_adds() {
        let flux = Identity::impersonated("system:serviceaccount:cozy-fluxcd:flux", &[]);
        assert_eq!(
            flux.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:cozy-fluxcd",
                "system:authenticated"
            ]
        );
        let user = Identity::impersonated("alice", &["tenant-a-admin".into()]);
        assert_eq!(user.groups, ["tenant-a-admin", "system:authenticated"]);
        assert_eq!(
            Identity::impersonated("system:anonymous", &[]).groups,
            ["system:unauthenticated"]
        );
        // Given system:unauthenticated, no system:authenticated is added.
        let unauthenticated = Identity::impersonated("bob", &["system:unauthenticated".into()]);
        assert_eq!(unauthenticated.groups, ["system:unauthenticated"]);
        // Groups given: a ServiceAccount gets only those (and system:authenticated).
        let sa = Identity::impersonated("system:serviceaccount:a:b", &["g".into()]);
        assert_eq!(sa.groups, ["g", "system:authenticated"]);
    }

    #[test]
    fn as_refuses_what_names_nobody() {
        assert_eq!(parse_user("alice").as_deref(), Ok("alice"));
        assert_eq!(
            parse_user("system:serviceaccount:cozy-fluxcd:flux").as_deref(),
            Ok("system:serviceaccount:cozy-fluxcd:flux")
        );
        for bad in [
            "",
            " ",
            "system:serviceaccount::",
            "system:serviceaccount:a",
            "system:serviceaccount:a:b:c",
            "system:serviceaccount:A:b",
            " alice",
        ] {
            assert!(parse_user(bad).is_err(), "{bad:?} was taken");
        }
        assert_eq!(
            parse_user(""),
            Err(
                "is empty (an unset variable?): name the user who applies the change set"
                    .to_owned()
            )
        );
    }
    use serde_json::json;

    #[test]
    fn only_the_served_versions_exist() {
        let manifest = |api: &str, kind: &str| Manifest {
            origin: "set.yaml, document 1".into(),
            object: json!({"apiVersion": api, "kind": kind, "metadata": {"name": "x"}}),
        };
        assert_eq!(
            unserved_version(&manifest("helm.toolkit.fluxcd.io/v2", "HelmRelease")),
            None
        );
        assert_eq!(
            unserved_version(&manifest("apps.cozystack.io/v1alpha1", "Redis")),
            None
        );
        assert_eq!(unserved_version(&manifest("v1", "ConfigMap")), None);
        assert_eq!(
            unserved_version(&manifest("helm.toolkit.fluxcd.io/v2beta2", "HelmRelease")).as_deref(),
            Some(
                "the API server refuses it before admission: no matches for kind \"HelmRelease\" in version \"helm.toolkit.fluxcd.io/v2beta2\" (the Flux Cozystack installs, internal/fluxinstall/manifests/fluxcd.yaml serves helm.toolkit.fluxcd.io/v2 only); write apiVersion: helm.toolkit.fluxcd.io/v2"
            )
        );
        assert_eq!(
            unserved_version(&manifest("apps.cozystack.io/v1", "Redis")).as_deref(),
            Some(
                "the API server refuses it before admission: no matches for kind \"Redis\" in version \"apps.cozystack.io/v1\" (cozystack-api serves apps.cozystack.io/v1alpha1 only); write apiVersion: apps.cozystack.io/v1alpha1"
            )
        );
    }

    #[test]
    fn cozystack_api_s_name_rules() {
        let refusal = |kind, prefix, namespace, name| {
            application_refusal(kind, prefix, namespace, name, &json!({}))
        };
        assert_eq!(refusal("Postgres", "postgres-", "tenant-acme", "db"), None);
        assert_eq!(
            refusal("Tenant", "tenant-", "tenant-root", "my-shop").as_deref(),
            Some(
                "cozystack-api refuses it before admission: Tenant.apps.cozystack.io \"my-shop\" is invalid: metadata.name: Invalid value: \"my-shop\": tenant names must start with a lowercase letter and contain only lowercase letters and digits; dashes are not allowed"
            )
        );
        assert_eq!(
            refusal("Postgres", "postgres-", "tenant-acme", "Db").as_deref(),
            Some(format!("cozystack-api refuses it before admission: Postgres.apps.cozystack.io \"Db\" is invalid: metadata.name: Invalid value: \"Db\": {DNS1035}").as_str())
        );
        // 44 characters and the prefix make 53: the most Helm takes.
        let longest = "a".repeat(44);
        assert_eq!(
            refusal("Postgres", "postgres-", "tenant-acme", &longest),
            None
        );
        let long = "a".repeat(45);
        assert_eq!(
            refusal("Postgres", "postgres-", "tenant-acme", &long),
            Some(format!(
                "cozystack-api refuses it before admission: Postgres.apps.cozystack.io \"{long}\" is invalid: metadata.name: Invalid value: \"{long}\": must be no more than 44 characters (release prefix \"postgres-\")"
            ))
        );
        // A Tenant deep in the tree: its namespace is the chain of its ancestors' names.
        let parent = format!("tenant-{}", "b".repeat(40));
        let name = "c".repeat(30);
        assert_eq!(
            refusal("Tenant", "tenant-", &parent, &name),
            Some(format!(
                "cozystack-api refuses it before admission: Tenant.apps.cozystack.io \"{name}\" is invalid: metadata.name: Invalid value: \"{name}\": computed tenant namespace \"{parent}-{name}\" would be 78 characters, which exceeds the 63-character Kubernetes namespace limit; shorten the tenant name or reduce ancestor nesting depth"
            ))
        );
        assert_eq!(
            application_refusal(
                "Redis",
                "redis-",
                "tenant-acme",
                "cache",
                &json!({"_cluster": {}})
            )
            .as_deref(),
            Some(
                "cozystack-api refuses it before admission: values key \"_cluster\" is reserved (keys starting with '_' are not allowed)"
            )
        );
    }
}
