//! What the policy-server holds and waits for on this policy's behalf at a cluster's size: the
//! objects its lookups list, kept by the reflectors, and the initial LIST the first evaluation
//! that opens a list waits for inside its time budget. Fitted to the real policy-server
//! 1.36.0-beta.1 on 4,000 and 40,000 live-sized tenants (../shared/reference/kwctl-measurements.md,
//! "The real policy-server"; docs/benchmarks.md#the-policy-servers-memory-and-first-evaluation).

use std::collections::BTreeMap;

use cozystack_policy_runtime::cluster::ClusterObjects;
use cozystack_policy_runtime::selector::Selector;

/// The policy-server's resident memory before any lookup: 60–61 MiB measured.
const AT_REST_MIB: f64 = 61.0;
/// The reflectors hold each listed object whole but its managed fields, whatever the masks say,
/// and the allocator keeps what the initial LIST took: resident memory grew by 93 MiB for
/// 4,000 live-sized releases (2,640 bytes each as JSON) and by 725 MiB for 40,000, so 6.97 MiB
/// per MiB of JSON listed, over 22.8 MiB once any list is filled.
const FIXED_MIB: f64 = 22.8;
const MIB_PER_LISTED_MIB: f64 = 6.97;
/// The first evaluation to open a list waits for its initial LIST: 1,036 ms for those 4,000
/// releases and 7,040 ms for the 40,000 (278 ms warm), from a Kubernetes API on loopback that
/// serves slower than a real one: 374 ms plus 63.4 ms per MiB listed.
const FILL_MS: f64 = 374.0;
const FILL_MS_PER_LISTED_MIB: f64 = 63.4;

/// The deployed evaluation budget (`timeoutEvalSeconds` in `deploy/policy-*.yaml`).
pub const DEPLOYED_TIMEOUT_EVAL_SECONDS: f64 = 5.0;

const MIB: f64 = 1024.0 * 1024.0;

/// The label every app release carries, which the lists select by.
const KIND_LABEL: &str = "apps.cozystack.io/application.kind";

/// What the lookups list of one cluster, and the estimate made from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Footprint {
    /// App HelmReleases (every kind's instance list together) and their bytes as JSON.
    pub releases: (usize, usize),
    /// The kind with the most release bytes, its releases and bytes: the largest list of one kind.
    pub largest_kind: (String, usize, usize),
    /// Namespaces: listed only when the point lookups cannot decide a protected DELETE.
    pub namespaces: (usize, usize),
    /// ApplicationDefinitions (`definitionSource: applicationDefinitions`).
    pub definitions: (usize, usize),
}

impl Footprint {
    /// The objects of `cluster` the policy's lists select (docs/host-calls.md), each measured as
    /// a reflector keeps it: whole, its managed fields cleared.
    pub fn of(cluster: &ClusterObjects) -> Footprint {
        // Each object's app kind (its label) and its size as a reflector keeps it (the
        // snapshot's text: stripped of its managed fields as a reflector strips them).
        let measure = |api_version: &str, kind: &str, selector: &str| {
            let selector = Selector::parse(selector).unwrap_or_default();
            cluster
                .sized(api_version, kind, &selector)
                .map(|(mut labels, bytes)| (labels.remove(KIND_LABEL).unwrap_or_default(), bytes))
                .collect::<Vec<_>>()
        };
        let total = |sized: &[(String, usize)]| (sized.len(), sized.iter().map(|s| s.1).sum());
        let releases = measure(
            "helm.toolkit.fluxcd.io/v2",
            "HelmRelease",
            &format!("{KIND_LABEL},apps.cozystack.io/application.group=apps.cozystack.io"),
        );
        let mut by_kind: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for (kind, bytes) in &releases {
            let entry = by_kind.entry(kind).or_default();
            *entry = (entry.0 + 1, entry.1 + bytes);
        }
        let largest_kind = by_kind
            .into_iter()
            .max_by_key(|(_, (_, bytes))| *bytes)
            .map_or((String::new(), 0, 0), |(kind, (n, bytes))| {
                (kind.to_owned(), n, bytes)
            });
        Footprint {
            releases: total(&releases),
            largest_kind,
            namespaces: total(&measure("v1", "Namespace", "")),
            definitions: total(&measure(
                "cozystack.io/v1alpha1",
                "ApplicationDefinition",
                "",
            )),
        }
    }

    /// Resident memory once the release lists are filled, and once the Namespace list is too.
    pub fn memory_mib(&self) -> (f64, f64) {
        let resident =
            |bytes: usize| AT_REST_MIB + FIXED_MIB + MIB_PER_LISTED_MIB * bytes as f64 / MIB;
        let releases = self.releases.1 + self.definitions.1;
        (resident(releases), resident(releases + self.namespaces.1))
    }

    /// The first evaluation that opens a list of `bytes`, in milliseconds: its initial LIST.
    fn fill_ms(bytes: usize) -> f64 {
        FILL_MS + FILL_MS_PER_LISTED_MIB * bytes as f64 / MIB
    }

    /// The first evaluation to list the largest kind's releases (a counted CREATE of it, or the
    /// DELETE of a provider it alone consumes); a class whose consumers are several kinds lists
    /// them together, up to [`Footprint::every_release_fill_ms`].
    pub fn first_fill_ms(&self) -> f64 {
        Self::fill_ms(self.largest_kind.2)
    }

    /// The bound: one list of every app release.
    pub fn every_release_fill_ms(&self) -> f64 {
        Self::fill_ms(self.releases.1)
    }

    /// One line for an operator.
    pub fn line(&self) -> String {
        let (releases, with_namespaces) = self.memory_mib();
        let verdict = |ms: f64| match ms / 1000.0 < DEPLOYED_TIMEOUT_EVAL_SECONDS {
            true => "within",
            false => "OVER",
        };
        let (fill, bound) = (self.first_fill_ms(), self.every_release_fill_ms());
        let (kind, n, bytes) = &self.largest_kind;
        format!(
            "policy-server estimate for this cluster: {} app releases ({:.1} MB) and {} Namespaces ({:.1} MB) listed: about {releases:.0} MiB resident with the release lists filled, {with_namespaces:.0} MiB with the Namespace list too; the first evaluation to list the largest kind's releases ({kind}: {n}, {:.1} MB) waits about {:.1} s for its initial LIST, {} the deployed timeoutEvalSeconds ({DEPLOYED_TIMEOUT_EVAL_SECONDS:.0} s), one listing every app release {:.1} s, {} it (deploy/README.md#sizing)",
            self.releases.0,
            self.releases.1 as f64 / 1e6,
            self.namespaces.0,
            self.namespaces.1 as f64 / 1e6,
            *bytes as f64 / 1e6,
            fill / 1000.0,
            verdict(fill),
            bound / 1000.0,
            verdict(bound),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn release(ns: &str, name: &str, values: usize) -> Value {
        json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": name, "namespace": ns,
                "labels": {"apps.cozystack.io/application.kind": "Kubernetes",
                    "apps.cozystack.io/application.group": "apps.cozystack.io"},
                "managedFields": [{"manager": "cozystack-api", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"values": {"blob": "x".repeat(values)}}})
    }

    #[test]
    fn counts_what_the_lists_select_as_a_reflector_keeps_it() {
        let platform = json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "cozystack-api", "namespace": "cozy-system"}});
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenant-a"}});
        let a = release("tenant-a", "kubernetes-a", 100);
        let mut kept = a.clone();
        kept["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        let cluster: ClusterObjects = [a, platform, ns.clone()].into_iter().collect();
        let footprint = Footprint::of(&cluster);
        // The platform's own release carries no app label: no list selects it.
        assert_eq!(footprint.releases, (1, kept.to_string().len()));
        assert_eq!(
            footprint.largest_kind,
            ("Kubernetes".to_owned(), 1, kept.to_string().len())
        );
        assert_eq!(footprint.namespaces, (1, ns.to_string().len()));
        assert_eq!(footprint.definitions, (0, 0));
    }

    #[test]
    fn reproduces_the_policy_server_measurements_it_is_fitted_to() {
        // 4,000 and 40,000 releases of 2,640 bytes: 153 and 786 MiB resident, 1,036 and
        // 7,040 ms for the first evaluation (minus the warm 18-278 ms).
        for (n, resident, fill) in [
            (4000, 153.0, 1036.0 - 23.0),
            (40_000, 786.0, 7040.0 - 278.0),
        ] {
            let footprint = Footprint {
                releases: (n, n * 2640),
                largest_kind: ("Kubernetes".to_owned(), n, n * 2640),
                namespaces: (0, 0),
                definitions: (0, 0),
            };
            let (mib, _) = footprint.memory_mib();
            assert!((mib - resident).abs() / resident < 0.02, "{n}: {mib} MiB");
            let ms = footprint.first_fill_ms();
            assert!((ms - fill).abs() / fill < 0.02, "{n}: {ms} ms");
        }
    }

    #[test]
    fn says_when_the_first_fill_outlasts_the_deployed_budget() {
        // One Kubernetes cluster and one Info release per tenant.
        let small = Footprint {
            releases: (8000, 8000 * 2640),
            largest_kind: ("Kubernetes".to_owned(), 4000, 4000 * 2640),
            namespaces: (4001, 4001 * 1150),
            definitions: (0, 0),
        };
        let line = small.line();
        assert!(line.contains("8000 app releases (21.1 MB)"), "{line}");
        assert!(
            line.contains("the largest kind's releases (Kubernetes: 4000, 10.6 MB) waits about 1.0 s for its initial LIST, within the deployed timeoutEvalSeconds (5 s), one listing every app release 1.7 s, within it"),
            "{line}"
        );
        let large = Footprint {
            releases: (80_000, 80_000 * 2640),
            largest_kind: ("Kubernetes".to_owned(), 40_000, 40_000 * 2640),
            ..small.clone()
        };
        let line = large.line();
        assert!(
            line.contains("waits about 6.8 s for its initial LIST, OVER the deployed timeoutEvalSeconds (5 s), one listing every app release 13.1 s, OVER it"),
            "{line}"
        );
    }
}
