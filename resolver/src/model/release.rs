//! The Cozystack releases the policy supports: the support matrix of `resolver/stock-rules.yaml`
//! (`releases`), compiled in by `build.rs`. A release is judged as its own charts render it: the
//! ancestor labels its Tenant chart writes, the kinds it serves, what an off-slot instance does.
//! The setting `cozystackRelease` names one; without it the policy admits what any supported
//! release renders, so no release's platform writes are refused.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::model::builtin::{self, OffSlot};
use crate::model::tenant::AncestorLabels;

/// One row of the support matrix: what a release does where it differs from the built-in
/// rule set's `SOURCE`.
#[derive(Debug, PartialEq, Eq)]
pub struct ReleaseRow {
    pub name: &'static str,
    /// The tag's commit.
    pub commit: &'static str,
    /// `targetVersion` of `packages/core/platform/values.yaml`: what the migration hook writes
    /// into ConfigMap `cozy-system/cozystack-version` once the release is installed.
    pub version_stamp: u32,
    /// The ancestor labels its Tenant chart writes on a tenant Namespace.
    pub ancestor_labels: AncestorLabels,
    /// The kinds of the built-in set it serves no ApplicationDefinition of.
    pub lacks: &'static [&'static str],
    /// Kinds whose off-slot behaviour differs from the built-in row's.
    pub off_slot: &'static [(&'static str, OffSlot)],
    /// cozystack-api's validations that refuse an Application before admission.
    pub api_refuses: &'static [ApiValidation],
    /// What cozystack-api does with a dry-run write of an Application.
    pub api_dry_run: ApiDryRun,
}

/// Whether cozystack-api keeps a dry run a dry run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiDryRun {
    /// `Update` (server-side apply's path) creates and updates the release with fresh options:
    /// the dry run lands (cozystack#3971).
    Ignored,
    /// It passes the request's dryRun on.
    Honoured,
}

/// A validation cozystack-api runs on an Application before its admission chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiValidation {
    /// `validateTenantResourceQuotas`: a sub-tenant's `resourceQuotas` may not exceed what its
    /// parent has left (cozystack#3086, `pkg/registry/apps/application/quota.go`).
    TenantResourceQuotas,
}

include!(concat!(env!("OUT_DIR"), "/releases.rs"));

/// A supported Cozystack release, as the settings name it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Release(&'static ReleaseRow);

impl Release {
    /// The release of that name, when it is supported.
    pub fn named(name: &str) -> Option<Release> {
        RELEASES.iter().find(|r| r.name == name).map(Release)
    }

    /// The release of that name, or why there is none (naming the supported ones).
    pub fn parse(name: &str) -> Result<Release, String> {
        Release::named(name).ok_or_else(|| {
            format!("{name:?} is not a supported Cozystack release (supported: {SUPPORTED})")
        })
    }

    /// Every supported release, oldest first.
    pub fn all() -> impl Iterator<Item = Release> {
        RELEASES.iter().map(Release)
    }

    /// The supported releases whose migration hook writes `stamp`.
    pub fn stamped(stamp: u32) -> impl Iterator<Item = Release> {
        Release::all().filter(move |r| r.0.version_stamp == stamp)
    }

    pub fn row(&self) -> &'static ReleaseRow {
        self.0
    }

    pub fn name(&self) -> &'static str {
        self.0.name
    }
}

impl fmt::Debug for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.name)
    }
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.name)
    }
}

impl Serialize for Release {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.0.name)
    }
}

/// Read through a visitor, so a refused name is reported where it stands in the settings.
impl<'de> Deserialize<'de> for Release {
    fn deserialize<D: Deserializer<'de>>(name: D) -> Result<Self, D::Error> {
        struct Named;
        impl serde::de::Visitor<'_> for Named {
            type Value = Release;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a supported Cozystack release ({})", SUPPORTED)
            }
            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<Release, E> {
                Release::parse(name).map_err(E::custom)
            }
        }
        name.deserialize_str(Named)
    }
}

impl JsonSchema for Release {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "CozystackRelease".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names: Vec<&str> = RELEASES.iter().map(|r| r.name).collect();
        schemars::json_schema!({ "type": "string", "enum": names })
    }
}

/// What the settings' release (`None`: any supported release) makes of the facts that differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Judged(pub Option<Release>);

impl Judged {
    /// The ancestor-label chains a platform write of a tenant Namespace may carry: its
    /// release's, or every supported release's.
    pub fn ancestor_labels(&self) -> &'static [AncestorLabels] {
        match self.0.map(|r| r.0.ancestor_labels) {
            Some(AncestorLabels::Full) => &[AncestorLabels::Full],
            Some(AncestorLabels::ParentPrefixes) | None => AncestorLabels::ANY,
        }
    }

    /// The ancestor labels the release's Tenant chart writes (without a release, main's).
    pub fn chart_writes(&self) -> AncestorLabels {
        self.0.map_or(AncestorLabels::Full, |r| r.0.ancestor_labels)
    }

    /// Whether the release serves `kind` at all (without a release: whether any does).
    pub fn serves(&self, kind: &str) -> bool {
        self.0.is_none_or(|r| !r.0.lacks.contains(&kind))
    }

    /// What an instance of `kind` off its slot does under this release.
    pub fn off_slot(&self, kind: &str) -> Option<OffSlot> {
        let row = self.0.map_or(&[][..], |r| r.0.off_slot);
        match row.iter().find(|(k, _)| *k == kind) {
            Some((_, off_slot)) => Some(*off_slot),
            None => builtin::off_slot(kind),
        }
    }

    /// How a report names it.
    pub fn describe(&self) -> String {
        match self.0 {
            Some(release) => format!("Cozystack {release}"),
            None => format!("any supported Cozystack release ({})", SUPPORTED),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn the_matrix_holds_every_supported_release_once_oldest_first() {
        let names: Vec<&str> = Release::all().map(|r| r.name()).collect();
        assert_eq!(
            names,
            [
                "v1.5.0", "v1.5.1", "v1.5.2", "v1.5.3", "v1.5.4", "v1.6.0", "v1.6.1", "v1.6.2",
                "main"
            ]
        );
        let stamps: Vec<u32> = Release::all().map(|r| r.row().version_stamp).collect();
        assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "{stamps:?}");
    }

    #[test]
    fn releases_differ_where_their_charts_do() {
        let judged = |name| Judged(Release::named(name));
        assert_eq!(
            judged("v1.5.3").ancestor_labels(),
            [AncestorLabels::Full, AncestorLabels::ParentPrefixes]
        );
        assert_eq!(judged("v1.5.4").ancestor_labels(), [AncestorLabels::Full]);
        assert!(!judged("v1.6.2").serves("ComputePlane"));
        assert!(judged("main").serves("ComputePlane"));
        assert!(!judged("v1.5.0").serves("KubernetesNodes"));
        assert!(Judged(None).serves("ComputePlane"));
        assert_eq!(judged("v1.5.2").off_slot("SeaweedFS"), Some(OffSlot::Runs));
        assert_eq!(
            judged("v1.6.0").off_slot("SeaweedFS"),
            Some(OffSlot::DropsVolumes)
        );
        assert_eq!(
            Release::stamped(45).map(|r| r.name()).collect::<Vec<_>>(),
            ["v1.5.0", "v1.5.1", "v1.5.2", "v1.5.3"]
        );
    }

    #[test]
    fn an_unsupported_release_is_refused_naming_the_supported_ones() {
        let err = serde_json::from_str::<Release>("\"v1.4.6\"").unwrap_err();
        assert_eq!(
            err.to_string(),
            "\"v1.4.6\" is not a supported Cozystack release (supported: v1.5.0, v1.5.1, v1.5.2, v1.5.3, v1.5.4, v1.6.0, v1.6.1, v1.6.2, main) at line 1 column 8"
        );
        let name: Release = serde_json::from_str("\"main\"").unwrap();
        assert_eq!(serde_json::to_string(&name).unwrap(), "\"main\"");
    }
}
