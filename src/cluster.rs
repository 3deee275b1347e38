//! The resolver's [`Cluster`] answered with Kubewarden context-aware host calls.
//!
//! Every list is cluster-wide with a selector fixed per kind, so the distinct list keys (each
//! a permanent watch in every policy-server replica) are bounded by the number of app kinds:
//! one for ApplicationDefinitions, one for Namespaces, one per app kind for HelmReleases.
//! Field masks prune what each watch cache holds of an object's data (`spec`, `status`) to the
//! fields read here; its metadata is held and answered whole whatever the masks say, since the
//! policy-server prunes a `DynamicObject`'s data alone (kubewarden-controller v1.36.0-beta.1,
//! `kubernetes/reflector.rs` `modify_object`).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use cozystack_resolver::collect::inserted;
use cozystack_resolver::facts::{ByPrefix, ReleaseMeta};
use cozystack_resolver::request::{APPS_GROUP, GROUP_LABEL, KIND_LABEL, NAME_LABEL};
use cozystack_resolver::{Cluster, DefinitionList, Instances, LookupError, Namespace};
use kubewarden_policy_sdk::host_capabilities::kubernetes::{
    GetResourceRequest, ListAllResourcesRequest,
};

use crate::definitions::{DEFINITION_API, DEFINITION_KIND, DEFINITION_MASKS, ListedDefinitions};
use crate::host::Host;
use crate::scan;

pub const RELEASE_API: &str = "helm.toolkit.fluxcd.io/v2";
pub const RELEASE_KIND: &str = "HelmRelease";

const NAMESPACE_MASKS: &[&str] = &["metadata.name", "metadata.labels"];
/// Metadata only: the masks drop a release's spec and status (its values are most of a live
/// release), and the host answers its metadata whole. The scanner reads the name label only for
/// a kind whose ApplicationDefinition states no release prefix to derive app names from; that
/// kind's list asks for `metadata.labels` too, which keeps nothing more (a mask never trims
/// metadata) and makes a list key of its own.
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
            meta.terminating = scan::present(r)?;
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

/// What a HelmRelease GET answers for the policy: a Tenant's values hold its switches.
#[derive(Default)]
struct FetchedRelease<'a> {
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    terminating: bool,
    values: Option<&'a str>,
}

/// Reads a fetched HelmRelease: its metadata and, raw, its `spec.values`. As serde_json reads
/// an object, of a key given twice the last counts.
fn fetched_release(text: &str) -> Result<FetchedRelease<'_>, scan::ScanError> {
    let mut release = FetchedRelease::default();
    let mut reader = scan::Reader::new(text);
    reader.object_last_wins(|r, key| {
        if key.is("metadata") {
            release.labels.clear();
            release.annotations.clear();
            release.terminating = false;
            scan::fields(r, |r, key| {
                if key.is("labels") {
                    release.labels = scan::string_map(r)?;
                } else if key.is("annotations") {
                    release.annotations = scan::string_map(r)?;
                } else if key.is("deletionTimestamp") {
                    release.terminating = scan::present(r)?;
                } else {
                    return Ok(false);
                }
                Ok(true)
            })
        } else if key.is("spec") {
            release.values = None;
            scan::fields(r, |r, key| {
                let wanted = key.is("values");
                if wanted {
                    release.values = Some(r.raw_value()?);
                }
                Ok(wanted)
            })
        } else {
            r.skip()
        }
    })?;
    reader.end()?;
    Ok(release)
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

    /// Calls `operation` with `request`: the answer as text, checked to be UTF-8 (every answer
    /// is JSON, read by the scanner).
    fn call(
        &self,
        what: &str,
        operation: &str,
        request: &impl serde::Serialize,
    ) -> Result<String, LookupError> {
        let body =
            serde_json::to_vec(request).map_err(|err| LookupError::new(what, err.to_string()))?;
        let response = self
            .host
            .kubernetes(operation, &body)
            .map_err(|err| LookupError::new(what, err))?;
        scan::text(response).map_err(|err| undecodable(what, err))
    }

    /// Calls `operation` with `request` and reads the answer with `read`, which borrows from it.
    fn scan<R>(
        &self,
        what: &str,
        operation: &str,
        request: &impl serde::Serialize,
        read: impl FnOnce(&str) -> Result<R, scan::ScanError>,
    ) -> Result<R, LookupError> {
        let text = self.call(what, operation, request)?;
        read(&text).map_err(|err| undecodable(what, err))
    }
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

impl Cluster for HostCluster<'_> {
    fn definitions(&self) -> Result<Box<dyn DefinitionList>, LookupError> {
        let what = "list ApplicationDefinitions";
        let request = list_request(DEFINITION_API, DEFINITION_KIND, None, &DEFINITION_MASKS);
        let text = self.call(what, "list_resources_all", &request)?;
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
        let what = format!("get Namespace {name}");
        self.scan(&what, "get_resource", &request, |text| {
            let mut reader = scan::Reader::new(text);
            let namespace = scan::metadata(&mut reader, |ns: &mut Namespace, r, key| {
                if key.is("name") {
                    ns.name = scan::optional_text(r)?.unwrap_or_default().into_owned();
                } else if key.is("labels") {
                    ns.labels = scan::string_map(r)?;
                } else {
                    return Ok(false);
                }
                Ok(true)
            })?;
            reader.end()?;
            Ok(namespace)
        })
    }

    fn namespaces(&self, keep: &BTreeSet<String>) -> Result<Vec<Namespace>, LookupError> {
        let what = "list Namespaces";
        let request = list_request("v1", "Namespace", None, NAMESPACE_MASKS);
        let keep: Vec<&str> = keep.iter().map(String::as_str).collect();
        self.scan(what, "list_resources_all", &request, |text| {
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
        let text = match self.call(&what, "get_resource", &request) {
            Err(err) if err.reason.starts_with(&missing) => return Ok(None),
            result => result?,
        };
        let release = fetched_release(&text).map_err(|err| undecodable(&what, err))?;
        let values = match release.values {
            Some(values) => serde_json::from_str(values).map_err(|err| undecodable(&what, err))?,
            None => serde_json::Value::Null,
        };
        Ok(Some(ReleaseMeta {
            labels: release.labels,
            annotations: release.annotations,
            values,
            terminating: release.terminating,
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
        self.scan(&what, "list_resources_all", &request, |text| {
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
        self.scan(&what, "list_resources_all", &request, |text| {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers every call with `body`.
    struct Answer<'a>(&'a str);

    impl Host for Answer<'_> {
        fn kubernetes(&self, _: &str, _: &[u8]) -> Result<Vec<u8>, String> {
            Ok(self.0.as_bytes().to_vec())
        }
    }

    const RELEASE: &str = r#"{"apiVersion":"helm.toolkit.fluxcd.io/v2","kind":"HelmRelease","metadata":{"name":"tenant-a","labels":{"k":"old","k":"v\u00e9"},"annotations":{"meta.helm.sh/release-name":"tenant-root"},"deletionTimestamp":"2026-01-01T00:00:00Z"},"spec":{"chart":{"spec":{"chart":"tenant"}},"values":{"monitoring":true,"n":[1,2.5,null]}},"status":{"conditions":[]}}"#;

    #[test]
    fn a_fetched_release_reads_its_metadata_and_values() {
        let release = HostCluster::new(&Answer(RELEASE))
            .release("tenant-root", "tenant-a")
            .unwrap()
            .unwrap();
        assert_eq!(release.labels["k"], "vé", "the last of two equal keys");
        assert_eq!(
            release.annotations["meta.helm.sh/release-name"],
            "tenant-root"
        );
        assert!(release.terminating);
        assert_eq!(
            release.values,
            serde_json::json!({"monitoring": true, "n": [1, 2.5, null]})
        );
        let bare = HostCluster::new(&Answer(r#"{"metadata":null,"spec":{"values":null}}"#))
            .release("tenant-root", "tenant-a")
            .unwrap()
            .unwrap();
        assert!(bare.labels.is_empty() && !bare.terminating && bare.values.is_null());
    }

    #[test]
    fn a_fetched_namespace_reads_its_name_and_labels() {
        let body = r#"{"metadata":{"name":"tenant-a","labels":{"namespace.cozystack.io/monitoring":"tenant-root"}},"spec":{"finalizers":["kubernetes"]}}"#;
        let namespace = HostCluster::new(&Answer(body))
            .namespace("tenant-a")
            .unwrap();
        assert_eq!(namespace.name, "tenant-a");
        assert_eq!(
            namespace.labels["namespace.cozystack.io/monitoring"],
            "tenant-root"
        );
    }

    #[test]
    fn every_truncated_or_mistyped_answer_is_a_failed_lookup() {
        for cut in 0..RELEASE.len() {
            let err = HostCluster::new(&Answer(&RELEASE[..cut]))
                .release("tenant-root", "tenant-a")
                .unwrap_err();
            assert!(
                err.to_string().starts_with(
                    "lookup failed: get HelmRelease tenant-root/tenant-a: cannot decode the response: "
                ),
                "{err}"
            );
        }
        let err = HostCluster::new(&Answer(r#"{"metadata":{"labels":{"k":1}}}"#))
            .namespace("tenant-a")
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "lookup failed: get Namespace tenant-a: cannot decode the response: expected a string at byte 27"
        );
    }
}
