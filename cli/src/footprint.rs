//! What the policy-server holds and waits for on this policy's behalf at a cluster's size: the
//! objects its lookups list, kept by the reflectors, and the initial LIST the first evaluation
//! that opens a list waits for inside its time budget. Fitted to the real policy-server
//! 1.36.0-beta.1 on 4,000 and 40,000 live-sized tenants (../shared/reference/kwctl-measurements.md,
//! "The real policy-server"; docs/benchmarks.md#the-policy-servers-memory-and-first-evaluation).

use cozystack_policy_runtime::cluster::ClusterObjects;
use cozystack_policy_runtime::selector::Selector;
use serde_json::Value;

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

/// What the lookups list of one cluster, and the estimate made from it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Footprint {
    /// App HelmReleases (every kind's instance list together) and their bytes as JSON.
    pub releases: (usize, usize),
    /// Namespaces: listed only when the point lookups cannot decide a protected DELETE.
    pub namespaces: (usize, usize),
    /// ApplicationDefinitions (`definitionSource: applicationDefinitions`).
    pub definitions: (usize, usize),
}

impl Footprint {
    /// The objects of `cluster` the policy's lists select (docs/host-calls.md), each measured as
    /// a reflector keeps it: whole, its managed fields cleared.
    pub fn of(cluster: &ClusterObjects) -> Footprint {
        let measure = |api_version: &str, kind: &str, selector: &str| {
            let selector = Selector::parse(selector).unwrap_or_default();
            cluster.list(api_version, kind, None, &selector).fold(
                (0, 0),
                |(n, bytes), mut object| {
                    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                        meta.remove("managedFields");
                    }
                    (n + 1, bytes + object.to_string().len())
                },
            )
        };
        Footprint {
            releases: measure(
                "helm.toolkit.fluxcd.io/v2",
                "HelmRelease",
                "apps.cozystack.io/application.kind,apps.cozystack.io/application.group=apps.cozystack.io",
            ),
            namespaces: measure("v1", "Namespace", ""),
            definitions: measure("cozystack.io/v1alpha1", "ApplicationDefinition", ""),
        }
    }

    /// Resident memory once the release lists are filled, and once the Namespace list is too.
    pub fn memory_mib(&self) -> (f64, f64) {
        let resident =
            |bytes: usize| AT_REST_MIB + FIXED_MIB + MIB_PER_LISTED_MIB * bytes as f64 / MIB;
        let releases = self.releases.1 + self.definitions.1;
        (resident(releases), resident(releases + self.namespaces.1))
    }

    /// The first evaluation that lists every app release (the DELETE of a provider every kind
    /// consumes), in milliseconds: its initial LIST.
    pub fn first_fill_ms(&self) -> f64 {
        FILL_MS + FILL_MS_PER_LISTED_MIB * self.releases.1 as f64 / MIB
    }

    /// One line for an operator.
    pub fn line(&self) -> String {
        let (releases, with_namespaces) = self.memory_mib();
        let fill = self.first_fill_ms();
        let verdict = if fill / 1000.0 < DEPLOYED_TIMEOUT_EVAL_SECONDS {
            "within"
        } else {
            "OVER"
        };
        format!(
            "policy-server estimate for this cluster: {} app releases ({:.1} MB) and {} Namespaces ({:.1} MB) listed: about {releases:.0} MiB resident with the release lists filled, {with_namespaces:.0} MiB with the Namespace list too; the first evaluation to list every app release waits about {:.1} s for its initial LIST, {verdict} the deployed timeoutEvalSeconds ({DEPLOYED_TIMEOUT_EVAL_SECONDS:.0} s; deploy/README.md#sizing)",
            self.releases.0,
            self.releases.1 as f64 / 1e6,
            self.namespaces.0,
            self.namespaces.1 as f64 / 1e6,
            fill / 1000.0,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        let small = Footprint {
            releases: (4000, 4000 * 2640),
            namespaces: (4001, 4001 * 1150),
            definitions: (0, 0),
        };
        let line = small.line();
        assert!(line.contains("4000 app releases (10.6 MB)"), "{line}");
        assert!(
            line.contains(
                "about 1.0 s for its initial LIST, within the deployed timeoutEvalSeconds (5 s"
            ),
            "{line}"
        );
        let large = Footprint {
            releases: (40_000, 40_000 * 2640),
            ..small
        };
        assert!(
            large
                .line()
                .contains("about 6.8 s for its initial LIST, OVER the deployed timeoutEvalSeconds"),
            "{}",
            large.line()
        );
    }
}
