//! The resolver's [`Cluster`] answered with Kubewarden context-aware host calls.
//!
//! Every list is cluster-wide with a selector fixed per kind, so the distinct list keys (each
//! a permanent watch in every policy-server replica) are bounded by the number of app kinds:
//! one for ApplicationDefinitions, one for Namespaces, one per app kind for HelmReleases.
//! Field masks keep each watch cache to the fields read here.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use cozystack_resolver::request::{APPS_GROUP, GROUP_LABEL, KIND_LABEL};
use cozystack_resolver::{Cluster, Definition, Instance, LookupError, Namespace};
use kubewarden_policy_sdk::host_capabilities::kubernetes::{
    GetResourceRequest, ListAllResourcesRequest,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::host::Host;

pub const DEFINITION_API: &str = "cozystack.io/v1alpha1";
pub const DEFINITION_KIND: &str = "ApplicationDefinition";
pub const RELEASE_API: &str = "helm.toolkit.fluxcd.io/v2";
pub const RELEASE_KIND: &str = "HelmRelease";

const DEFINITION_MASKS: &[&str] = &[
    "metadata.name",
    "spec.application.kind",
    "spec.dashboard.visibility",
    "spec.dashboard.module",
    "spec.cardinality",
    "spec.protection",
    "spec.capability",
];
const NAMESPACE_MASKS: &[&str] = &["metadata.name", "metadata.labels"];
const RELEASE_MASKS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.labels",
    "metadata.deletionTimestamp",
];

fn masks(paths: &[&str]) -> Option<BTreeSet<String>> {
    Some(paths.iter().map(|p| p.to_string()).collect())
}

/// The label selector that lists the app HelmReleases of one kind.
pub fn release_selector(kind: &str) -> Result<String, LookupError> {
    // A label value cannot contain selector syntax; refuse rather than build a wrong query.
    let valid = !kind.is_empty()
        && kind.len() <= 63
        && kind
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if !valid {
        return Err(LookupError::new(
            format!("list HelmReleases of kind {kind:?}"),
            "the kind is not a valid label value",
        ));
    }
    Ok(format!("{KIND_LABEL}={kind},{GROUP_LABEL}={APPS_GROUP}"))
}

#[derive(Deserialize)]
struct List<T> {
    #[serde(default = "Vec::new")]
    items: Vec<T>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Meta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
}

/// The one label of an app HelmRelease the policy reads; the others are skipped unparsed.
/// (serde needs the literal; a test keeps it equal to `request::NAME_LABEL`.)
#[derive(Deserialize, Default)]
struct ReleaseLabels {
    #[serde(rename = "apps.cozystack.io/application.name", default)]
    app: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReleaseMeta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    labels: Option<ReleaseLabels>,
    #[serde(default)]
    deletion_timestamp: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct Release {
    metadata: ReleaseMeta,
}

/// A label value borrowed from the response when it has no escapes.
#[derive(Deserialize)]
struct Text<'a>(#[serde(borrow)] Cow<'a, str>);

/// A namespace list item with its labels borrowed, so filtering them allocates nothing.
#[derive(Deserialize)]
struct NamespaceItem<'a> {
    #[serde(borrow)]
    metadata: NamespaceMeta<'a>,
}

#[derive(Deserialize)]
struct NamespaceMeta<'a> {
    #[serde(borrow)]
    name: Text<'a>,
    #[serde(borrow, default)]
    labels: Option<Pairs<'a>>,
}

/// A JSON object read as borrowed key/value pairs: no map, no owned strings.
struct Pairs<'a>(Vec<(Text<'a>, Text<'a>)>);

impl<'de: 'a, 'a> Deserialize<'de> for Pairs<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visitor<'a> {
            type Value = Pairs<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of labels")
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(
                self,
                mut map: M,
            ) -> Result<Pairs<'a>, M::Error> {
                let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(pair) = map.next_entry::<Text<'a>, Text<'a>>()? {
                    pairs.push(pair);
                }
                Ok(Pairs(pairs))
            }
        }
        deserializer.deserialize_map(Visitor(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
struct BorrowedList<'a> {
    #[serde(borrow, default = "Vec::new")]
    items: Vec<NamespaceItem<'a>>,
}

#[derive(Deserialize)]
struct Object<S> {
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    spec: Option<S>,
}

#[derive(Deserialize, Default)]
struct DefinitionSpec {
    #[serde(default)]
    application: Option<ApplicationSpec>,
    #[serde(default)]
    dashboard: Option<serde_json::Value>,
    #[serde(default)]
    cardinality: Option<serde_json::Value>,
    #[serde(default)]
    protection: Option<serde_json::Value>,
    #[serde(default)]
    capability: Option<serde_json::Value>,
}

#[derive(Deserialize, Default)]
struct ApplicationSpec {
    #[serde(default)]
    kind: String,
}

/// Answers lookups through `host`; every call is logged in `calls` for tests and benches.
pub struct HostCluster<'h> {
    host: &'h dyn Host,
}

impl<'h> HostCluster<'h> {
    pub fn new(host: &'h dyn Host) -> Self {
        HostCluster { host }
    }

    fn call_raw(
        &self,
        what: &str,
        operation: &str,
        request: &impl serde::Serialize,
    ) -> Result<Vec<u8>, LookupError> {
        let body =
            serde_json::to_vec(request).map_err(|err| LookupError::new(what, err.to_string()))?;
        self.host
            .kubernetes(operation, &body)
            .map_err(|err| LookupError::new(what, err))
    }

    fn call<T: DeserializeOwned>(
        &self,
        what: &str,
        operation: &str,
        request: &impl serde::Serialize,
    ) -> Result<T, LookupError> {
        let response = self.call_raw(what, operation, request)?;
        decode(what, &response)
    }

    fn list_all<T: DeserializeOwned>(
        &self,
        what: &str,
        api_version: &str,
        kind: &str,
        label_selector: Option<String>,
        field_masks: &[&str],
    ) -> Result<Vec<T>, LookupError> {
        let request = list_request(api_version, kind, label_selector, field_masks);
        let list: List<T> = self.call(what, "list_resources_all", &request)?;
        Ok(list.items)
    }
}

fn decode<'a, T: Deserialize<'a>>(what: &str, response: &'a [u8]) -> Result<T, LookupError> {
    serde_json::from_slice(response)
        .map_err(|err| LookupError::new(what, format!("cannot decode the response: {err}")))
}

fn list_request(
    api_version: &str,
    kind: &str,
    label_selector: Option<String>,
    field_masks: &[&str],
) -> ListAllResourcesRequest {
    ListAllResourcesRequest {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        label_selector,
        field_selector: None,
        field_masks: masks(field_masks),
    }
}

fn namespace_of(object: Object<serde::de::IgnoredAny>) -> Namespace {
    Namespace {
        name: object.metadata.name,
        labels: object.metadata.labels.unwrap_or_default(),
    }
}

impl Cluster for HostCluster<'_> {
    fn definitions(&self) -> Result<Vec<Definition>, LookupError> {
        let items: Vec<Object<DefinitionSpec>> = self.list_all(
            "list ApplicationDefinitions",
            DEFINITION_API,
            DEFINITION_KIND,
            None,
            DEFINITION_MASKS,
        )?;
        Ok(items
            .into_iter()
            .filter_map(|item| {
                let spec = item.spec.unwrap_or_default();
                let kind = spec.application.map(|a| a.kind).filter(|k| !k.is_empty())?;
                Some(Definition {
                    name: item.metadata.name,
                    kind,
                    dashboard: spec.dashboard,
                    cardinality: spec.cardinality,
                    protection: spec.protection,
                    capability: spec.capability,
                })
            })
            .collect())
    }

    fn namespace(&self, name: &str) -> Result<Namespace, LookupError> {
        let request = GetResourceRequest {
            api_version: "v1".into(),
            kind: "Namespace".into(),
            name: name.to_owned(),
            namespace: None,
            disable_cache: false,
            field_masks: masks(NAMESPACE_MASKS),
        };
        let object: Object<serde::de::IgnoredAny> =
            self.call(&format!("get Namespace {name}"), "get_resource", &request)?;
        Ok(namespace_of(object))
    }

    fn namespaces(&self, keep: &BTreeSet<String>) -> Result<Vec<Namespace>, LookupError> {
        let what = "list Namespaces";
        let request = list_request("v1", "Namespace", None, NAMESPACE_MASKS);
        let response = self.call_raw(what, "list_resources_all", &request)?;
        let list: BorrowedList = decode(what, &response)?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|item| {
                let labels: BTreeMap<String, String> = item
                    .metadata
                    .labels
                    .map(|pairs| pairs.0)
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|(k, _)| keep.contains(k.0.as_ref()))
                    .map(|(k, v)| (k.0.into_owned(), v.0.into_owned()))
                    .collect();
                (!labels.is_empty()).then(|| Namespace {
                    name: item.metadata.name.0.into_owned(),
                    labels,
                })
            })
            .collect())
    }

    fn instances(&self, kind: &str) -> Result<Vec<Instance>, LookupError> {
        let selector = release_selector(kind)?;
        let items: Vec<Release> = self.list_all(
            &format!("list HelmReleases of kind {kind}"),
            RELEASE_API,
            RELEASE_KIND,
            Some(selector),
            RELEASE_MASKS,
        )?;
        Ok(items
            .into_iter()
            .map(|item| {
                let meta = item.metadata;
                let app = meta
                    .labels
                    .and_then(|l| l.app)
                    .filter(|n| !n.is_empty())
                    .unwrap_or_else(|| meta.name.clone());
                Instance {
                    kind: kind.to_owned(),
                    namespace: meta.namespace,
                    release: meta.name,
                    app,
                    terminating: meta.deletion_timestamp.is_some(),
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_release_label_field_is_the_name_label() {
        let labels: ReleaseLabels = serde_json::from_value(
            serde_json::json!({cozystack_resolver::request::NAME_LABEL: "db", "x": "y"}),
        )
        .unwrap();
        assert_eq!(labels.app.as_deref(), Some("db"));
    }
}
