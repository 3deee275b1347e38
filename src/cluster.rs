//! The resolver's [`Cluster`] answered with Kubewarden context-aware host calls.
//!
//! Every list is cluster-wide with a selector fixed per kind, so the distinct list keys (each
//! a permanent watch in every policy-server replica) are bounded by the number of app kinds:
//! one for ApplicationDefinitions, one for Namespaces, one per app kind for HelmReleases.
//! Field masks keep each watch cache to the fields read here.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use cozystack_resolver::collect::inserted;
use cozystack_resolver::facts::{ByPrefix, ReleaseMeta};
use cozystack_resolver::request::{APPS_GROUP, GROUP_LABEL, KIND_LABEL, NAME_LABEL};
use cozystack_resolver::{Cluster, DefinitionList, Instances, LookupError, Namespace};
use kubewarden_policy_sdk::host_capabilities::kubernetes::{
    GetResourceRequest, ListAllResourcesRequest,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::definitions::{DEFINITION_API, DEFINITION_KIND, DEFINITION_MASKS, ListedDefinitions};
use crate::host::Host;
use crate::scan;

pub const RELEASE_API: &str = "helm.toolkit.fluxcd.io/v2";
pub const RELEASE_KIND: &str = "HelmRelease";

const NAMESPACE_MASKS: &[&str] = &["metadata.name", "metadata.labels"];
/// A release's labels are most of its bytes; they are read only for a kind whose
/// ApplicationDefinition states no release prefix to derive app names from.
const RELEASE_MASKS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.deletionTimestamp",
];
const RELEASE_MASKS_WITH_LABELS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.deletionTimestamp",
    "metadata.labels",
];

fn masks(paths: &[&str]) -> Option<BTreeSet<String>> {
    Some(inserted(paths.iter().map(|p| p.to_string())))
}

/// The label selector that lists the app HelmReleases of one kind.
pub fn release_selector(kind: &str) -> Result<String, LookupError> {
    check_kind_label(kind)?;
    Ok(format!("{KIND_LABEL}={kind},{GROUP_LABEL}={APPS_GROUP}"))
}

/// The label selector that lists the app HelmReleases of several kinds (in the order given,
/// which the resolver keeps sorted, so one set of kinds is one list key).
pub fn releases_selector(kinds: &[&str]) -> Result<String, LookupError> {
    for kind in kinds {
        check_kind_label(kind)?;
    }
    Ok(format!(
        "{KIND_LABEL} in ({}),{GROUP_LABEL}={APPS_GROUP}",
        kinds.join(",")
    ))
}

/// A label value cannot contain selector syntax; refuse rather than build a wrong query.
fn check_kind_label(kind: &str) -> Result<(), LookupError> {
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
    Ok(())
}

/// Reads what the policy needs of a listed HelmRelease's metadata.
fn release_metadata<'a>(item: &mut scan::Reader<'a>) -> Result<ListedRelease<'a>, scan::ScanError> {
    scan::metadata(item, |meta: &mut ListedRelease, r, key| {
        if key.is("name") {
            meta.name = scan::optional_text(r)?;
        } else if key.is("namespace") {
            meta.namespace = scan::optional_text(r)?;
        } else if key.is("deletionTimestamp") {
            meta.terminating = !r.null()?;
            if meta.terminating {
                r.skip()?;
            }
        } else if key.is("labels") {
            meta.app = None;
            // Only the application name; the other labels are skipped unread.
            scan::fields(r, |r, key| {
                let wanted = key.is(NAME_LABEL);
                if wanted {
                    meta.app = scan::optional_text(r)?;
                }
                Ok(wanted)
            })?;
        } else {
            return Ok(false);
        }
        Ok(true)
    })
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Meta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
    #[serde(default)]
    deletion_timestamp: Option<serde::de::IgnoredAny>,
}

/// An object with the spec `S` (`IgnoredAny` when only the metadata matters).
#[derive(Deserialize)]
struct Object<S> {
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    spec: Option<S>,
}

/// A HelmRelease's spec as far as the policy reads it: a Tenant's values hold its switches.
#[derive(Deserialize, Default)]
struct ReleaseSpec {
    #[serde(default)]
    values: serde_json::Value,
}

/// What a Namespace list item's metadata holds for the policy.
#[derive(Default)]
struct ListedNamespace {
    name: Option<String>,
    labels: BTreeMap<String, String>,
}

/// What a HelmRelease list item's metadata holds for the policy, borrowed from the response.
#[derive(Default)]
struct ListedRelease<'a> {
    name: Option<Cow<'a, str>>,
    namespace: Option<Cow<'a, str>>,
    app: Option<Cow<'a, str>>,
    terminating: bool,
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

    /// Lists with `request`: the answer as text, checked to be UTF-8.
    fn list_text(
        &self,
        what: &str,
        request: &ListAllResourcesRequest,
    ) -> Result<String, LookupError> {
        let response = self.call_raw(what, "list_resources_all", request)?;
        scan::text(response).map_err(|err| undecodable(what, err))
    }

    /// Lists with `request` and reads the answer with `read`, which borrows from it.
    fn scan_list<R>(
        &self,
        what: &str,
        request: &ListAllResourcesRequest,
        read: impl FnOnce(&str) -> Result<R, scan::ScanError>,
    ) -> Result<R, LookupError> {
        let text = self.list_text(what, request)?;
        read(&text).map_err(|err| undecodable(what, err))
    }
}

fn decode<'a, T: Deserialize<'a>>(what: &str, response: &'a [u8]) -> Result<T, LookupError> {
    serde_json::from_slice(response).map_err(|err| undecodable(what, err))
}

fn undecodable(what: &str, err: impl std::fmt::Display) -> LookupError {
    LookupError::new(what, format!("cannot decode the response: {err}"))
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
    fn definitions(&self) -> Result<Box<dyn DefinitionList>, LookupError> {
        let what = "list ApplicationDefinitions";
        let request = list_request(DEFINITION_API, DEFINITION_KIND, None, DEFINITION_MASKS);
        let text = self.list_text(what, &request)?;
        match ListedDefinitions::index(text) {
            Ok(listed) => Ok(Box::new(listed)),
            Err(err) => Err(undecodable(what, err)),
        }
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
        let keep: Vec<&str> = keep.iter().map(String::as_str).collect();
        self.scan_list(what, &request, |text| {
            let items = scan::list_items(text, |item| {
                scan::metadata(item, |meta: &mut ListedNamespace, r, key| {
                    if key.is("name") {
                        meta.name = scan::optional_text(r)?.map(Cow::into_owned);
                    } else if key.is("labels") {
                        meta.labels.clear();
                        // Matched as written: most keys are skipped undecoded.
                        scan::fields(r, |r, key| {
                            let Some(key) = key.which(&keep) else {
                                return Ok(false);
                            };
                            meta.labels
                                .insert(key.to_owned(), r.string()?.text()?.into_owned());
                            Ok(true)
                        })?;
                    } else {
                        return Ok(false);
                    }
                    Ok(true)
                })
            })?;
            Ok(items
                .into_iter()
                .filter(|meta| !meta.labels.is_empty())
                .map(|meta| Namespace {
                    name: meta.name.unwrap_or_default(),
                    labels: meta.labels,
                })
                .collect())
        })
    }

    fn release(&self, namespace: &str, release: &str) -> Result<Option<ReleaseMeta>, LookupError> {
        let request = GetResourceRequest {
            api_version: RELEASE_API.into(),
            kind: RELEASE_KIND.into(),
            name: release.to_owned(),
            namespace: Some(namespace.to_owned()),
            disable_cache: false,
            field_masks: masks(&[
                "metadata.labels",
                "metadata.annotations",
                "metadata.deletionTimestamp",
                "spec.values",
            ]),
        };
        let what = format!("get HelmRelease {namespace}/{release}");
        // The evaluator answers a GET of a missing object with this error and no other
        // (`callback_handler/kubernetes/client.rs`); every other failure stays a failure.
        let missing = format!("Cannot find {RELEASE_API}/{RELEASE_KIND} named '{release}' ");
        let object: Object<ReleaseSpec> = match self.call_raw(&what, "get_resource", &request) {
            Err(err) if err.reason.starts_with(&missing) => return Ok(None),
            Err(err) => return Err(err),
            Ok(response) => decode(&what, &response)?,
        };
        Ok(Some(ReleaseMeta {
            labels: object.metadata.labels.unwrap_or_default(),
            annotations: object.metadata.annotations.unwrap_or_default(),
            values: object.spec.map(|spec| spec.values).unwrap_or_default(),
            terminating: object.metadata.deletion_timestamp.is_some(),
        }))
    }

    fn instances_of_kinds(
        &self,
        kinds: &[(&str, &str)],
    ) -> Result<Option<Vec<Instances>>, LookupError> {
        let names: Vec<&str> = kinds.iter().map(|(kind, _)| *kind).collect();
        let what = format!("list HelmReleases of kinds {}", names.join(", "));
        let request = list_request(
            RELEASE_API,
            RELEASE_KIND,
            Some(releases_selector(&names)?),
            RELEASE_MASKS,
        );
        self.scan_list(&what, &request, |text| {
            let items = scan::list_items(text, release_metadata)?;
            let mut sorted = ByPrefix::new(kinds);
            for meta in &items {
                let release = meta.name.as_deref().unwrap_or_default();
                let namespace = meta.namespace.as_deref().unwrap_or_default();
                if !sorted.push(namespace, release, meta.terminating) {
                    return Ok(None);
                }
            }
            Ok(Some(sorted.into_lists()))
        })
    }

    fn instances(
        &self,
        kind: &str,
        release_prefix: Option<&str>,
    ) -> Result<Instances, LookupError> {
        let what = format!("list HelmReleases of kind {kind}");
        let request = list_request(
            RELEASE_API,
            RELEASE_KIND,
            Some(release_selector(kind)?),
            match release_prefix {
                Some(_) => RELEASE_MASKS,
                None => RELEASE_MASKS_WITH_LABELS,
            },
        );
        self.scan_list(&what, &request, |text| {
            let items = scan::list_items(text, release_metadata)?;
            let mut instances = Instances::new(kind);
            for meta in &items {
                let release = meta.name.as_deref().unwrap_or_default();
                // `<prefix><app>`; a name without the prefix is taken whole, as a missing label is.
                let app = match (release_prefix, meta.app.as_deref()) {
                    (Some(prefix), _) => release.strip_prefix(prefix).unwrap_or(release),
                    (None, Some(app)) if !app.is_empty() => app,
                    (None, _) => release,
                };
                instances.push(
                    meta.namespace.as_deref().unwrap_or_default(),
                    release,
                    app,
                    meta.terminating,
                );
            }
            Ok(instances)
        })
    }
}
