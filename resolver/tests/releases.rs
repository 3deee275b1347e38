mod common;
use common::*;
use cozystack_resolver::Operation::*;
use cozystack_resolver::request::KIND_LABEL;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

#[test]
fn app_helmreleases_are_written_by_the_platform_only() {
    let verdict = decide(
        &release(
            Create,
            "tenant-a",
            "monitoring2",
            release_labels("Monitoring", "monitoring2"),
            user("alice", &["tenant-a-super-admin"]),
        ),
        &cluster(),
    );
    assert_denied(
        &verdict,
        403,
        "HelmRelease tenant-a/monitoring2 is the release of Monitoring tenant-a/monitoring2; app HelmReleases are written only by the Cozystack platform, and alice is not a platform identity; create the Monitoring through the apps.cozystack.io API instead",
    );
    // Whatever the kind, even one without rules.
    let verdict = decide(
        &release(
            Delete,
            "tenant-a",
            "cache",
            release_labels("Redis", "cache"),
            user("alice", &[]),
        ),
        &cluster(),
    );
    assert!(
        verdict
            .message
            .unwrap()
            .starts_with("HelmRelease tenant-a/cache is the release of Redis tenant-a/cache")
    );
}

#[test]
fn other_helmreleases_are_untouched() {
    let verdict = decide(
        &release(
            Create,
            "cozy-system",
            "cilium",
            labels(&[]),
            user("anyone", &[]),
        ),
        &cluster(),
    );
    assert_allowed(&verdict, &[]);
}

#[test]
fn tenant_chart_singleton_beyond_max_warns_by_default() {
    let request = release(
        Create,
        "tenant-a",
        "monitoring-2",
        release_labels("Monitoring", "monitoring-2"),
        user(FLUX, &[]),
    );
    let message = "Monitoring: at most 1 per tenant tenant-a; already present: monitoring; use or edit the existing Monitoring instead of creating another (cardinality tenant/1)";
    assert_allowed(
        &decide(&request, &cluster()),
        &[&format!(
            "{message} (admitted because {FLUX} is a platform writer and platformWriters is warn)"
        )],
    );
    let settings = deny_writers();
    assert_denied(
        &cozystack_resolver::evaluate(&request, &settings, &cluster()),
        403,
        &format!(
            "{message} (refused although {FLUX} is a platform writer, because platformWriters is deny)"
        ),
    );
}

#[test]
fn the_release_itself_does_not_count_on_update() {
    let request = release(
        Update,
        "tenant-a",
        "monitoring",
        release_labels("Monitoring", "monitoring"),
        user(API, &[]),
    );
    assert_allowed(&decide(&request, &cluster()), &[]);
}

#[test]
fn relabelling_into_a_counted_kind_is_counted_and_out_of_a_protected_one_is_a_removal() {
    let settings = deny_writers();
    // Into: a Redis release relabelled as a second Monitoring of tenant-a.
    let mut request = release(
        Update,
        "tenant-a",
        "cache",
        release_labels("Redis", "cache"),
        user(FLUX, &[]),
    );
    request.object.as_mut().unwrap().labels = release_labels("Monitoring", "cache");
    let verdict = cozystack_resolver::evaluate(&request, &settings, &cluster());
    assert_denied(
        &verdict,
        403,
        "Monitoring: at most 1 per tenant tenant-a; already present: monitoring; use or edit the existing Monitoring instead of creating another (cardinality tenant/1) (refused although system:serviceaccount:cozy-fluxcd:flux is a platform writer, because platformWriters is deny)",
    );
    // Out: dropping the kind label of a referenced provider would hide it from protection.
    let mut request = release(
        Update,
        "tenant-a",
        "monitoring",
        release_labels("Monitoring", "monitoring"),
        user(FLUX, &[]),
    );
    request.object.as_mut().unwrap().labels.remove(KIND_LABEL);
    let verdict = cozystack_resolver::evaluate(&request, &settings, &cluster());
    assert_denied(
        &verdict,
        403,
        "Monitoring tenant-a/monitoring is protected while it provides monitoring to consumers: tenant-a-b/db (Postgres), tenant-a-b/dev (Kubernetes); delete or move those consumers first, or give their tenants another monitoring provider (protection.deletion: protect) (refused although system:serviceaccount:cozy-fluxcd:flux is a platform writer, because platformWriters is deny)",
    );
}

#[test]
fn finalizer_removal_on_a_terminating_release_is_admitted() {
    let mut request = release(
        Update,
        "tenant-a",
        "monitoring",
        release_labels("Monitoring", "monitoring"),
        user(FLUX, &[]),
    );
    request.old_object.as_mut().unwrap().terminating = true;
    request.object.as_mut().unwrap().terminating = true;
    request.object.as_mut().unwrap().labels.remove(KIND_LABEL);
    let settings = deny_writers();
    assert_allowed(
        &cozystack_resolver::evaluate(&request, &settings, &cluster()),
        &[],
    );
}

#[test]
fn teardown_deletes_of_releases_pass() {
    let request = release(
        Delete,
        "tenant-a",
        "monitoring",
        release_labels("Monitoring", "monitoring"),
        user("system:serviceaccount:cozy-system:tenant-a-cleanup", &[]),
    );
    let settings = deny_writers();
    assert_allowed(
        &cozystack_resolver::evaluate(&request, &settings, &cluster()),
        &[],
    );
}

#[test]
fn group_label_is_required_for_an_app_release() {
    let l = labels(&[
        (KIND_LABEL, "Monitoring"),
        ("apps.cozystack.io/application.group", "other.io"),
    ]);
    let verdict = decide(
        &release(Create, "tenant-a", "m", l, user("alice", &[])),
        &cluster(),
    );
    assert_allowed(&verdict, &[]);
}
