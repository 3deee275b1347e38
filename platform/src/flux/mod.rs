//! Flux as this tool models it, from its source at the versions Cozystack pins
//! (`internal/fluxinstall/manifests/fluxcd.yaml`: kustomize-controller v1.8.0, which builds on
//! fluxcd/pkg `ssa` v0.67.1): what source-controller packs of a repository ([`sourceignore`]),
//! what kustomize-controller builds of a folder ([`build`], [`manifests`]) and substitutes after
//! the build ([`postbuild`]), several Kustomizations in `dependsOn` order ([`kustomizations`]),
//! and how it applies and prunes a change set ([`apply`]). Here: the stages and their order
//! (`ApplyAllStaged`, `sort.go`), what it leaves alone (`shouldSkipApply`, the prune's
//! inclusions and exclusions) and what a server-side apply leaves of the fields a manifest
//! omits (managed fields).

pub mod apply;
pub mod build;
pub mod kustomizations;
pub mod manifests;
pub mod postbuild;
pub mod sourceignore;
pub mod versions;

use std::cmp::Ordering;
use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::flux::manifests::Manifest;

/// kustomize-controller's API group: the prefix of every label and annotation it reads.
const GROUP: &str = "kustomize.toolkit.fluxcd.io";

/// The field manager kustomize-controller applies with (its controller name).
pub const MANAGER: &str = "kustomize-controller";

/// The stages of `ApplyAllStaged`: each is dry-run as a whole, then applied, before the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Stage {
    /// CustomResourceDefinitions, Namespaces and ClusterRoles (`IsClusterDefinition`), waited
    /// for before the next stage.
    Definitions,
    /// Kinds whose name ends in `Class` (`IsClassDefinition`).
    Classes,
    /// Every other object.
    Resources,
    /// What the change set no longer holds, deleted after a successful apply.
    Prune,
}

impl Stage {
    pub fn of(manifest: &Manifest) -> Stage {
        let (api_version, kind) = (manifest.api_version(), manifest.kind());
        let definition = (kind.eq_ignore_ascii_case("CustomResourceDefinition")
            && api_version.starts_with("apiextensions.k8s.io/"))
            || (kind.eq_ignore_ascii_case("Namespace") && api_version == "v1")
            || (kind.eq_ignore_ascii_case("ClusterRole")
                && api_version.starts_with("rbac.authorization.k8s.io/"));
        if definition {
            Stage::Definitions
        } else if kind.ends_with("Class") {
            Stage::Classes
        } else {
            Stage::Resources
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Stage::Definitions => {
                "stage 1, definitions: Namespaces, CustomResourceDefinitions and ClusterRoles, all dry-run before any is applied"
            }
            Stage::Classes => {
                "stage 2, classes: kinds named *Class, all dry-run before any is applied"
            }
            Stage::Resources => {
                "stage 3, resources: every other object, all dry-run before any is applied"
            }
            Stage::Prune => {
                "prune: what the change set no longer holds, in reverse apply order, once every stage has applied"
            }
        }
    }
}

/// ssa's `ReconcileOrder`: these kinds first, in this order; the webhooks last; every other
/// kind between them (`computeKind2index`).
const FIRST: [&str; 23] = [
    "CustomResourceDefinition",
    "Namespace",
    "ClusterRole",
    "ClusterClass",
    "RuntimeClass",
    "PriorityClass",
    "StorageClass",
    "VolumeSnapshotClass",
    "IngressClass",
    "GatewayClass",
    "ClusterRoleBinding",
    "ResourceQuota",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ConfigMap",
    "Secret",
    "Service",
    "LimitRange",
    "Deployment",
    "StatefulSet",
    "CronJob",
    "PodDisruptionBudget",
];
const LAST: [&str; 2] = [
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

fn kind_index(kind: &str) -> i64 {
    if let Some(i) = FIRST.iter().position(|k| *k == kind) {
        return i as i64 - FIRST.len() as i64;
    }
    LAST.iter()
        .position(|k| *k == kind)
        .map_or(0, |i| i as i64 + 1)
}

/// ssa's sort (`less`): the kind's place, then group, kind, namespace and name.
pub fn order(a: &Manifest, b: &Manifest) -> Ordering {
    fn group(m: &Manifest) -> &str {
        m.api_version().rsplit_once('/').map_or("", |(g, _)| g)
    }
    kind_index(a.kind())
        .cmp(&kind_index(b.kind()))
        .then_with(|| group(a).cmp(group(b)))
        .then_with(|| a.kind().cmp(b.kind()))
        .then_with(|| a.namespace().unwrap_or("").cmp(b.namespace().unwrap_or("")))
        .then_with(|| a.name().cmp(b.name()))
}

/// `utils.AnyInMetadata`: a label or an annotation `key` with `value`, in any case.
fn marked(object: &Value, key: &str, value: &str) -> bool {
    ["labels", "annotations"].iter().any(|map| {
        object["metadata"][map][key]
            .as_str()
            .is_some_and(|v| !v.is_empty() && v.eq_ignore_ascii_case(value))
    })
}

/// Why kustomize-controller leaves `desired` as it is and sends nothing, with `existing` the
/// live object (`shouldSkipApply` with kustomize-controller's selectors): either carries
/// `reconcile: disabled` or `ssa: Ignore`, or the object exists and the manifest carries
/// `ssa: IfNotPresent`. Such an object is also kept out of the prune.
pub fn skips_apply(desired: &Value, existing: Option<&Value>) -> Option<String> {
    let reconcile = format!("{GROUP}/reconcile");
    let ssa = format!("{GROUP}/ssa");
    let excluded = |object: &Value| {
        if marked(object, &reconcile, "disabled") {
            Some(format!("{reconcile}: disabled"))
        } else if marked(object, &ssa, "Ignore") {
            Some(format!("{ssa}: Ignore"))
        } else {
            None
        }
    };
    if let Some(mark) = excluded(desired) {
        return Some(format!(
            "left as it is: the manifest carries {mark}, so Flux applies nothing and sends no request"
        ));
    }
    let existing = existing?;
    if let Some(mark) = excluded(existing) {
        return Some(format!(
            "left as it is: the object in the cluster carries {mark}, so Flux applies nothing and sends no request"
        ));
    }
    marked(desired, &ssa, "IfNotPresent").then(|| {
        format!(
            "left as it is: the manifest carries {ssa}: IfNotPresent and the object exists, so Flux applies nothing and sends no request"
        )
    })
}

/// The first post-build variable (`${NAME}`, `${NAME:-default}`, `${NAME:=default}`) left in
/// `object`'s strings: kustomize-controller substitutes them (`spec.postBuild`) after the build
/// and before the apply, so a change set that still holds one is not what Flux applies. `$${`
/// is the escape for a literal `${`.
pub fn unsubstituted(object: &Value) -> Option<String> {
    match object {
        Value::String(text) => {
            let mut rest = text.as_str();
            while let Some(at) = rest.find("${") {
                let escaped = rest[..at].ends_with('$');
                let after = &rest[at + 2..];
                let name: String = after
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let starts = name
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
                if !escaped && starts && after.contains('}') {
                    return Some(format!("${{{name}}}"));
                }
                rest = after;
            }
            None
        }
        Value::Array(items) => items.iter().find_map(unsubstituted),
        Value::Object(map) => map.values().find_map(unsubstituted),
        _ => None,
    }
}

/// The Kustomization that applies the change set, whose owner labels Flux stamps on every
/// object it applies (`SetOwnerLabels`) and requires on every object it prunes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub name: String,
    pub namespace: String,
}

impl Owner {
    fn labels(&self) -> [(String, &str); 2] {
        [
            (format!("{GROUP}/name"), self.name.as_str()),
            (format!("{GROUP}/namespace"), self.namespace.as_str()),
        ]
    }

    /// The manifest as kustomize-controller applies it, with its owner labels.
    pub fn stamp(&self, object: &mut Value) {
        let labels = object["metadata"].as_object_mut().map(|meta| {
            meta.entry("labels")
                .or_insert_with(|| Value::Object(Map::new()))
        });
        if let Some(Value::Object(labels)) = labels {
            for (key, value) in self.labels() {
                labels.insert(key, value.into());
            }
        }
    }
}

/// Why the prune (`DeleteAll` with kustomize-controller's options) leaves `live` in place: it
/// carries `prune: disabled` or `reconcile: disabled`, or not the owner labels of the
/// Kustomization pruning it.
pub fn skips_prune(live: &Value, owner: Option<&Owner>) -> Option<String> {
    for key in ["prune", "reconcile"] {
        let key = format!("{GROUP}/{key}");
        if marked(live, &key, "disabled") {
            return Some(format!(
                "left in place: the object in the cluster carries {key}: disabled, so Flux's garbage collection skips it"
            ));
        }
    }
    let owner = owner?;
    let missing = owner
        .labels()
        .iter()
        .any(|(key, value)| live["metadata"]["labels"][key.as_str()] != *value);
    missing.then(|| {
        format!(
            "left in place: the object in the cluster does not carry the owner labels of Kustomization {}/{} ({GROUP}/name: {}, {GROUP}/namespace: {}), so Flux's garbage collection skips it",
            owner.namespace, owner.name, owner.name, owner.namespace
        )
    })
}

/// A field path in an object: map keys from the top.
type Path = Vec<String>;

/// The field paths a `fieldsV1` set owns: each `f:` key a map field; a list's items (`k:`,
/// `v:`, `i:`) own the list as a whole (the lists of an untyped or preserve-unknown-fields
/// value are atomic); `.` the map itself.
fn owned_paths(fields: &Value, prefix: &mut Path, out: &mut BTreeSet<Path>) {
    let Some(map) = fields.as_object() else {
        return;
    };
    let mut leaf = true;
    for (key, child) in map {
        if let Some(name) = key.strip_prefix("f:") {
            leaf = false;
            prefix.push(name.to_owned());
            owned_paths(child, prefix, out);
            prefix.pop();
        } else if key != "." {
            // An item of a list: the list is owned whole.
            out.insert(prefix.clone());
            return;
        }
    }
    if leaf && !prefix.is_empty() {
        out.insert(prefix.clone());
    }
}

/// The managers whose fields kustomize-controller takes over before it applies (its
/// `ApplyCleanupOptions.FieldManagers`, as `PatchReplaceFieldsManagers` merges them into its
/// own entry), unless the manifest or the object carries `ssa: Merge`.
const TAKEN_OVER: [(&str, &str); 4] = [
    ("kubectl", "Apply"),
    ("kubectl", "Update"),
    ("before-first-apply", "Update"),
    (MANAGER, "Update"),
];

/// Whose fields an object's are when the API server merges a server-side apply over it.
#[derive(Debug, Clone, Copy)]
pub enum Managed<'a> {
    /// Its `metadata.managedFields`, as the cluster holds them.
    Fields(&'a [Value]),
    /// Served by cozystack-api, which keeps no managed fields of an Application: the field
    /// manager gives every live field to `before-first-apply` before each apply
    /// (`skipNonAppliedManager`), so none is removed.
    Aggregated,
    /// Unknown (a dump made without `--show-managed-fields`): taken as this manager's own, as
    /// if it had applied all of the spec before, so the manifest's spec replaces the live one.
    Unknown,
}

/// The object a forced server-side apply of `manifest` by `manager` leaves of `live`. The
/// manifest's fields win and nested maps merge; a field the manifest omits goes only when
/// `manager` owned it and no other manager does.
pub fn applied(live: &Value, manifest: &Value, manager: &str, managed: Managed<'_>) -> Value {
    let mut out = live.clone();
    merge(&mut out, manifest, &[]);
    let (mut mine, mut others) = (BTreeSet::new(), BTreeSet::new());
    match managed {
        Managed::Aggregated => {}
        Managed::Unknown => {
            if let Some(spec) = manifest.get("spec") {
                out["spec"] = spec.clone();
            }
        }
        Managed::Fields(entries) => {
            let merging = marked(manifest, &format!("{GROUP}/ssa"), "Merge")
                || marked(live, &format!("{GROUP}/ssa"), "Merge");
            for entry in entries {
                let (who, operation) = (
                    entry["manager"].as_str().unwrap_or_default(),
                    entry["operation"].as_str().unwrap_or_default(),
                );
                let taken =
                    manager == MANAGER && !merging && TAKEN_OVER.contains(&(who, operation));
                let set = if (who == manager && operation == "Apply") || taken {
                    &mut mine
                } else {
                    &mut others
                };
                owned_paths(&entry["fieldsV1"], &mut Vec::new(), set);
            }
        }
    }
    for path in &mine {
        let shared = others
            .iter()
            .any(|other| other.starts_with(path) || path.starts_with(other));
        if !shared && !present(manifest, path) {
            remove(&mut out, path);
        }
    }
    out
}

/// What the API server owns is the live object's: the rest of the manifest is merged in.
fn merge(target: &mut Value, source: &Value, at: &[&str]) {
    const SERVER_OWNED: [&str; 6] = [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "generation",
        "managedFields",
        "deletionTimestamp",
    ];
    let (Some(target_map), Some(source_map)) = (target.as_object_mut(), source.as_object()) else {
        *target = source.clone();
        return;
    };
    for (key, value) in source_map {
        match (at, key.as_str()) {
            ([], "status") => continue,
            (["metadata"], k) if SERVER_OWNED.contains(&k) => continue,
            _ => {}
        }
        match target_map.get_mut(key) {
            Some(existing) if existing.is_object() && value.is_object() => {
                let mut path = at.to_vec();
                path.push(key);
                merge(existing, value, &path);
            }
            _ => {
                target_map.insert(key.clone(), value.clone());
            }
        }
    }
}

fn present(object: &Value, path: &[String]) -> bool {
    let mut at = object;
    for key in path {
        match at.get(key) {
            Some(next) => at = next,
            None => return false,
        }
    }
    true
}

fn remove(object: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut at = object;
    for key in parents {
        match at.get_mut(key) {
            Some(next) => at = next,
            None => return,
        }
    }
    if let Some(map) = at.as_object_mut() {
        map.remove(last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn manifest(kind: &str, api_version: &str, namespace: &str, name: &str) -> Manifest {
        Manifest {
            origin: String::new(),
            object: json!({"apiVersion": api_version, "kind": kind,
                "metadata": {"name": name, "namespace": namespace}}),
        }
    }

    #[test]
    fn objects_are_sorted_as_ssa_sorts_them() {
        let mut set = [
            manifest("Postgres", "apps.cozystack.io/v1alpha1", "b", "x"),
            manifest("HelmRelease", "helm.toolkit.fluxcd.io/v2", "a", "x"),
            manifest(
                "ValidatingWebhookConfiguration",
                "admissionregistration.k8s.io/v1",
                "",
                "w",
            ),
            manifest("Namespace", "v1", "", "n"),
            manifest("ConfigMap", "v1", "a", "c"),
            manifest("Monitoring", "apps.cozystack.io/v1alpha1", "b", "x"),
            manifest("Monitoring", "apps.cozystack.io/v1alpha1", "a", "y"),
        ];
        set.sort_by(order);
        let refs: Vec<String> = set.iter().map(Manifest::reference).collect();
        assert_eq!(
            refs,
            [
                "Namespace n",
                "ConfigMap a/c",
                "Monitoring a/y",
                "Monitoring b/x",
                "Postgres b/x",
                "HelmRelease a/x",
                "ValidatingWebhookConfiguration w",
            ]
        );
        assert_eq!(Stage::of(&set[0]), Stage::Definitions);
        assert_eq!(
            Stage::of(&manifest("StorageClass", "storage.k8s.io/v1", "", "s")),
            Stage::Classes
        );
        assert_eq!(Stage::of(&set[2]), Stage::Resources);
    }

    #[test]
    fn a_field_the_manifest_omits_goes_only_when_flux_alone_owned_it() {
        let fields = json!([
                {"manager": "kustomize-controller", "operation": "Apply",
                 "fieldsV1": {"f:spec": {"f:values": {"f:etcd": {}, "f:host": {}, "f:ingress": {}}}}},
                {"manager": "cozystack-api", "operation": "Update",
                 "fieldsV1": {"f:spec": {"f:values": {"f:ingress": {}, "f:monitoring": {}}}}}
        ]);
        let entries = fields.as_array().cloned().unwrap_or_default();
        let live = json!({"metadata": {"name": "root", "uid": "u"},
            "spec": {"values": {"etcd": true, "host": "example.org", "ingress": true, "monitoring": true}}
        });
        let manifest =
            json!({"metadata": {"name": "root"}, "spec": {"values": {"host": "example.com"}}});
        // etcd was Flux's alone: it goes; ingress is cozystack-api's too, monitoring only its.
        assert_eq!(
            applied(&live, &manifest, MANAGER, Managed::Fields(&entries))["spec"],
            json!({"values": {"host": "example.com", "ingress": true, "monitoring": true}})
        );
        // Applied by another manager, nothing of Flux's is removed.
        assert_eq!(
            applied(&live, &manifest, "kubectl", Managed::Fields(&entries))["spec"]["values"]["etcd"],
            true
        );
        // ssa: Merge stops the takeover of kubectl's fields, not Flux's own.
        let mut kubectl = entries.clone();
        kubectl[0]["manager"] = json!("kubectl");
        kubectl[0]["operation"] = json!("Update");
        let by_kubectl = Managed::Fields(&kubectl);
        assert!(applied(&live, &manifest, MANAGER, by_kubectl)["spec"]["values"]["etcd"].is_null());
        let mut merge = manifest.clone();
        merge["metadata"]["annotations"] = json!({"kustomize.toolkit.fluxcd.io/ssa": "merge"});
        assert_eq!(
            applied(&live, &merge, MANAGER, by_kubectl)["spec"]["values"]["etcd"],
            true
        );
    }

    #[test]
    fn without_managed_fields_an_aggregated_object_keeps_and_a_stored_one_is_replaced() {
        let live = json!({"metadata": {"name": "root", "uid": "u", "labels": {"a": "1"}},
            "spec": {"etcd": true, "host": "example.org", "values": {"size": 1}}, "status": {"phase": "Ready"}});
        let manifest = json!({"metadata": {"name": "root", "uid": "x", "labels": {"b": "2"}},
            "spec": {"host": "example.com"}, "status": {}});
        assert_eq!(
            applied(&live, &manifest, MANAGER, Managed::Aggregated),
            json!({"metadata": {"name": "root", "uid": "u", "labels": {"a": "1", "b": "2"}},
                "spec": {"etcd": true, "host": "example.com", "values": {"size": 1}}, "status": {"phase": "Ready"}})
        );
        assert_eq!(
            applied(&live, &manifest, MANAGER, Managed::Unknown)["spec"],
            json!({"host": "example.com"})
        );
    }

    #[test]
    fn a_post_build_variable_is_found_unless_escaped() {
        let object = json!({"metadata": {"name": "db", "namespace": "tenant-${tenant}"},
            "spec": {"host": "$${literal}", "size": "${size:-10Gi}"}});
        assert_eq!(unsubstituted(&object).as_deref(), Some("${tenant}"));
        let escaped = json!({"spec": {"host": "$${literal}", "cost": "$5 {x}", "n": "${1}"}});
        assert_eq!(unsubstituted(&escaped), None);
    }

    #[test]
    fn flux_leaves_alone_what_is_marked_in_any_case() {
        let ignore =
            json!({"metadata": {"annotations": {"kustomize.toolkit.fluxcd.io/ssa": "ignore"}}});
        assert_eq!(
            skips_apply(&ignore, None).as_deref(),
            Some(
                "left as it is: the manifest carries kustomize.toolkit.fluxcd.io/ssa: Ignore, so Flux applies nothing and sends no request"
            )
        );
        let plain = json!({"metadata": {}});
        assert_eq!(skips_apply(&plain, Some(&plain)), None);
        let owner = Owner {
            name: "apps".into(),
            namespace: "flux-system".into(),
        };
        let mut stamped = plain.clone();
        owner.stamp(&mut stamped);
        assert_eq!(skips_prune(&stamped, Some(&owner)), None);
        assert_eq!(
            skips_prune(&plain, Some(&owner)).as_deref(),
            Some(
                "left in place: the object in the cluster does not carry the owner labels of Kustomization flux-system/apps (kustomize.toolkit.fluxcd.io/name: apps, kustomize.toolkit.fluxcd.io/namespace: flux-system), so Flux's garbage collection skips it"
            )
        );
        stamped["metadata"]["labels"]["kustomize.toolkit.fluxcd.io/prune"] = json!("Disabled");
        assert!(skips_prune(&stamped, Some(&owner)).is_some());
    }
}
