//! What helm-controller (fluxcd/helm-controller v1.5.0, the version Cozystack pins) does to a
//! release it meets: its finalizer, and the deletion it holds while it uninstalls.

use serde_json::Value;

/// Every Flux controller, helm-controller rendering a Tenant's chart among them.
pub const FLUX: &str = "system:serviceaccount:cozy-fluxcd:flux";
/// helm-controller's finalizer on every release it has reconciled.
pub const FINALIZER: &str = "finalizers.fluxcd.io";
/// The deletion time a deleted release shows while helm-controller uninstalls it.
pub const DELETION_TIMESTAMP: &str = "2026-01-01T00:00:00Z";

/// Whether the API server shows `object` deleted and held by a finalizer.
pub fn terminating(object: &Value) -> bool {
    object["metadata"].get("deletionTimestamp").is_some()
}

/// Who holds a release's deletion: read once from its finalizers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// No finalizer: a DELETE removes it at once.
    Free,
    /// Another controller's finalizer only: helm-controller adds its own when it meets it.
    ByOther,
    /// helm-controller's: it uninstalls the release before the deletion ends.
    ByFlux,
}

impl Held {
    pub fn of(release: &Value) -> Held {
        let finalizers = release
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        match finalizers {
            [] => Held::Free,
            f if f.iter().any(|f| f == FINALIZER) => Held::ByFlux,
            _ => Held::ByOther,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_release_is_held_by_whoever_finalizes_it() {
        let with = |f: Value| json!({"metadata": {"finalizers": f}});
        assert_eq!(Held::of(&json!({"metadata": {}})), Held::Free);
        assert_eq!(Held::of(&with(json!([]))), Held::Free);
        assert_eq!(Held::of(&with(json!(["other.io/x"]))), Held::ByOther);
        assert_eq!(
            Held::of(&with(json!(["other.io/x", FINALIZER]))),
            Held::ByFlux
        );
        assert!(terminating(
            &json!({"metadata": {"deletionTimestamp": DELETION_TIMESTAMP}})
        ));
        assert!(!terminating(&json!({"metadata": {}})));
    }
}
