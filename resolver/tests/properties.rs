#![cfg(not(target_arch = "wasm32"))]
//! Invariants of the resolver over generated clusters and requests.

mod common;
use common::*;
use cozystack_resolver::capability::nearest_provider;
use cozystack_resolver::{Instance, Operation, Settings, Snapshot};
use proptest::prelude::*;
use serde_json::json;

const NAMESPACES: [&str; 4] = ["tenant-root", "tenant-a", "tenant-a-b", "tenant-c"];

fn instances(max: usize) -> impl Strategy<Value = Vec<Instance>> {
    prop::collection::vec((0..4usize, 0..3usize, 0..6usize, any::<bool>()), 0..max).prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, (ns, kind, app, terminating))| Instance {
                kind: ["Monitoring", "Postgres", "Kubernetes"][kind].into(),
                namespace: NAMESPACES[ns].into(),
                release: format!("r{i}"),
                app: format!("app{app}"),
                terminating,
                rendered_by: None,
                values: serde_json::Value::Null,
            })
            .collect()
    })
}

fn with_instances(instances: Vec<Instance>, scope: &str, max: u32) -> Snapshot {
    let mut c = cluster();
    c.definitions[0] = definition(
        "monitoring",
        "Monitoring",
        json!({
        "cardinality": {"scope": scope, "max": max},
        "protection": {"deletion": "protect"},
        "capability": {"provides": ["monitoring"], "share": "children"}}),
    );
    c.instances = instances;
    c
}

proptest! {
    #[test]
    fn provider_resolution_is_the_nearest_ancestor_with_a_provider(
        depth in 1usize..6, providers in prop::collection::vec(any::<bool>(), 6)
    ) {
        let chain: Vec<String> = (0..depth).map(|i| format!("t{i}")).collect();
        let provides = |t: &str| providers[t[1..].parse::<usize>().unwrap()];
        match nearest_provider(&chain, provides) {
            Some(found) => {
                let at = chain.iter().position(|t| t == found).unwrap();
                prop_assert!(provides(found));
                prop_assert!(chain[at + 1..].iter().all(|t| !provides(t)), "a nearer provider exists");
            }
            None => prop_assert!(chain.iter().all(|t| !provides(t))),
        }
    }

    #[test]
    fn create_is_denied_exactly_when_the_count_in_scope_reaches_max(
        instances in instances(12), max in 1u32..4, ns in 0..4usize, scope in 0..3usize, app_index in 0..6usize
    ) {
        let scope_name = ["namespace", "tenant", "cluster"][scope];
        let c = with_instances(instances.clone(), scope_name, max);
        let namespace = NAMESPACES[ns];
        let name = format!("app{app_index}");
        // A platform writer in deny mode: visibility passes, cardinality decides.
        let settings = Settings { platform_writers: cozystack_resolver::PlatformWriters::Deny, ..common::listed() };
        let verdict = cozystack_resolver::evaluate(&app(Operation::Create, "Monitoring", namespace, &name, user(FLUX, &[])), &settings, &c);
        let in_scope = instances.iter().filter(|i| {
            i.kind == "Monitoring"
                && !(i.namespace == namespace && i.app == name)
                && (scope_name == "cluster" || i.namespace == namespace)
        }).count();
        prop_assert_eq!(verdict.allowed, in_scope < max as usize, "{:?}", verdict);
        if !verdict.allowed {
            let message = verdict.message.unwrap();
            let expected = format!("Monitoring: at most {max} per ");
            prop_assert!(message.starts_with(&expected), "{}", message);
        }
    }

    #[test]
    fn removing_instances_never_turns_an_allowed_create_into_a_denial(
        instances in instances(12), max in 1u32..3, ns in 0..4usize, drop in any::<prop::sample::Index>()
    ) {
        let request = app(Operation::Create, "Monitoring", NAMESPACES[ns], "new", user("root", &["tenant-root-admin"]));
        let before = decide(&request, &with_instances(instances.clone(), "tenant", max));
        if before.allowed && !instances.is_empty() {
            let mut fewer = instances.clone();
            fewer.remove(drop.index(instances.len()));
            let after = decide(&request, &with_instances(fewer, "tenant", max));
            prop_assert!(after.allowed, "{:?}", after);
        }
    }

    #[test]
    fn removing_consumers_never_turns_an_allowed_delete_into_a_denial(
        instances in instances(12), ns in 0..4usize, drop in any::<prop::sample::Index>()
    ) {
        let request = app(Operation::Delete, "Monitoring", NAMESPACES[ns], "app0", user("root", &["tenant-root-admin"]));
        let before = decide(&request, &with_instances(instances.clone(), "tenant", 0));
        let consumers: Vec<usize> = instances.iter().enumerate().filter(|(_, i)| i.kind != "Monitoring").map(|(i, _)| i).collect();
        if before.allowed && !consumers.is_empty() {
            let mut fewer = instances.clone();
            fewer.remove(consumers[drop.index(consumers.len())]);
            let after = decide(&request, &with_instances(fewer, "tenant", 0));
            prop_assert!(after.allowed, "{:?}", after);
        }
    }

    #[test]
    fn placing_arbitrary_labels_never_panics_and_errors_are_one_line(
        name in "[a-z-]{0,20}", keys in prop::collection::vec("[a-z-]{0,12}", 0..6), value in "[a-z]{0,2}"
    ) {
        let labels = keys.iter().map(|k| (format!("tenant.cozystack.io/{k}"), value.clone())).collect();
        use cozystack_resolver::tenant::AncestorLabels::*;
        for accepted in [&[Full][..], &[Full, ParentPrefixes][..]] {
            if let Err(err) = cozystack_resolver::tenant::place(&name, &labels, accepted) {
                prop_assert!(!err.to_string().contains('\n'));
            }
        }
    }
}
