//! What the Tenant chart (`packages/apps/tenant`) renders, as plain knowledge with no rule in it:
//! the kind and release names of tenants, the group levels every tenant gets, and which module
//! switches of a Tenant's values are on (Go templates' truth).

use serde_json::Value;

use crate::model::tenant;

/// The application kind of tenants (hard-wired in cozystack-api as well).
pub const TENANT_KIND: &str = "Tenant";

/// The group levels Cozystack creates for every tenant: `<ns>-view`, `-use`, `-admin`,
/// `-super-admin` (`cozy-lib.rbac`, Keycloak groups).
pub const GROUP_LEVELS: &[&str] = &["-view", "-use", "-admin", "-super-admin"];

/// The Tenant HelmRelease whose chart renders `namespace`'s modules: its namespace and name.
/// `tenant-<word>` in the parent namespace; the root's is `tenant-root` in `tenant-root`
/// (`packages/system/cozystack-basics/templates/tenant-root.yaml`), which is the same rule
/// with the root Tenant's name, `root`.
pub fn tenant_release(namespace: &str) -> Option<(String, String)> {
    let (parent, name) = tenant::tenant_application(namespace)?;
    Some((parent, format!("{TENANT_RELEASE_PREFIX}{name}")))
}

/// Tenant releases are `tenant-<name>` (the Tenant chart's `tenant.name` refuses any other).
pub const TENANT_RELEASE_PREFIX: &str = "tenant-";

/// Whether the Tenant chart renders `key` for these values: Go templates' truth (`{{ if
/// .Values.monitoring }}`), under which `false`, `0`, `""`, `null`, `[]` and `{}` are off and
/// anything else is on. The key absent is off as well (`tenant.gatewayEffective`).
pub fn switched_on(values: Option<&Value>, key: &str) -> bool {
    match values.and_then(|v| v.get(key)) {
        None | Some(Value::Null) => false,
        Some(Value::Bool(on)) => *on,
        Some(Value::Number(n)) => n.as_f64() != Some(0.0),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(items)) => !items.is_empty(),
        Some(Value::Object(map)) => !map.is_empty(),
    }
}
