//! The table of rules (`rules::RULES`) as a person meets it: when several rules refuse one
//! write, the message names the one to clear first, never a remedy another rule refuses too.
//! Run on the stock rule set (`definitionSource: builtin`), which knows every kind's release.
mod common;
use common::Expect::{Allowed, Denied};
use common::*;
use cozystack_resolver::Settings;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

const ORDER: &[Case] = &[
    Case {
        name: "a hidden kind under a name Cozystack renders: who may write it comes first, no name would help",
        write: "CREATE Gateway tenant-a/info by alice tenant-a-admin",
        expect: Denied(
            "Gateway is a hidden kind: only the Cozystack platform may create it, and alice is not a platform identity; it is managed by the platform, so ask a platform administrator",
        ),
    },
    Case {
        name: "a module under a rendered name by a tenant's user: visibility first",
        write: "CREATE Monitoring tenant-a/info by bob tenant-a-use",
        expect: Denied(
            "Monitoring is a tenant module: only tenant administrators (members of tenant-a-admin, tenant-a-super-admin or of an ancestor tenant's admin groups) and the platform may create it in tenant-a, and bob is neither; ask a tenant administrator to create it from Administration → Modules",
        ),
    },
    Case {
        name: "a module under a rendered name where its tenant has one: the count, since no other name would be admitted",
        write: "CREATE Monitoring tenant-a/info by alice tenant-a-admin",
        expect: Denied(
            "Monitoring: at most 1 per tenant tenant-a; already present: monitoring; use or edit the existing Monitoring instead of creating another (cardinality tenant/1)",
        ),
    },
    Case {
        name: "an adminOnly kind over its count: only the platform may write it at all",
        write: "CREATE ComputePlane tenant-a/cp2 by alice tenant-a-admin",
        expect: Denied(
            "ComputePlane tenant-a/cp2: only the platform may create it (protection.edit: adminOnly), and alice is not a platform identity; ask a platform administrator to make the change",
        ),
    },
    Case {
        name: "a platform writer is told every refusal it is let through, the slot (a name that passes) before the name",
        write: "CREATE Gateway tenant-a/info by system:serviceaccount:cozy-fluxcd:flux",
        expect: Allowed(&[
            "Gateway tenant-a/info: Gateway is held to at most 1 per tenant by its name: create it as tenant-a/gateway (cardinality.slots) (admitted because system:serviceaccount:cozy-fluxcd:flux is a platform writer and platformWriters is warn)",
            "Gateway tenant-a/info: its release tenant-a/info takes the name under which Tenant tenant-root/a always renders its Info, and helm-controller adopts an existing object of the name it renders, so the Tenant's next reconcile would rewrite this Gateway into the Info; choose another name (admitted because system:serviceaccount:cozy-fluxcd:flux is a platform writer and platformWriters is warn)",
        ]),
    },
];

/// The rules that read nothing come before the rest: a refusal no later write can clear.
const TENANTS: &[Case] = &[
    Case {
        name: "the root Tenant is deleted by the platform only",
        write: "DELETE Tenant tenant-root/root by rita tenant-root-super-admin",
        expect: Denied(
            "Tenant tenant-root/root is the root tenant: deleting it uninstalls every tenant of the platform (its Helm release tenant-root/tenant-root renders them all), and rita is not a platform identity; delete the tenants you mean to remove one by one, or have a platform administrator uninstall Cozystack",
        ),
    },
    Case {
        name: "a Tenant whose groups would be an ancestor's, whoever asks",
        write: "CREATE Tenant tenant-a/super by alice tenant-a-admin",
        expect: Denied(
            "Tenant tenant-a/super would get namespace tenant-a-super, whose group tenant-a-super-admin is already tenant-a's super-admin group: members given one would hold the other; choose a tenant name that is not a group level (view, use, admin, super)",
        ),
    },
    Case {
        name: "the same name refused to the platform too: a flaw of the name, not of who asks",
        write: "CREATE Tenant tenant-a/super by system:serviceaccount:cozy-system:cozystack-api",
        expect: Denied(
            "Tenant tenant-a/super would get namespace tenant-a-super, whose group tenant-a-super-admin is already tenant-a's super-admin group: members given one would hold the other; choose a tenant name that is not a group level (view, use, admin, super)",
        ),
    },
    Case {
        name: "a Tenant of another name",
        write: "CREATE Tenant tenant-a/dev by alice tenant-a-admin",
        expect: Allowed(&[]),
    },
];

fn stock() -> Settings {
    serde_json::from_value(serde_json::json!({"definitionSource": "builtin"})).expect("settings")
}

#[test]
fn several_refusals_name_the_one_to_clear_first() {
    run_table(ORDER, &cluster(), &stock());
}

#[test]
fn tenants() {
    run_table(TENANTS, &cluster(), &stock());
}
