//! At most `max` instances of a kind per scope.
//!
//! Scopes: `cluster` counts everywhere; `namespace` counts in the request's namespace;
//! `tenant` counts in every namespace owned by the same tenant as the request's namespace
//! (a tenant namespace owns itself; another namespace is owned by the deepest tenant of its
//! ancestor labels). In today's Cozystack every tenant is one namespace, so the two agree
//! there; they differ for namespaces a tenant owns through labels, and a namespace owned by no
//! tenant is counted on its own.
//!
//! The object under review never counts against itself (UPDATE, background audit, or a
//! CREATE that will fail with AlreadyExists anyway). Terminating instances count: they exist
//! until their finalizers finish, and not counting them would let a replacement overlap.

use crate::evaluation::Evaluation;
use crate::facts::InstanceRef;
use crate::rules::{Cardinality, KindRules, Scope};
use crate::verdict::{Violation, list_some};

/// How many existing instances a message names before "and N more".
const SHOWN: usize = 5;

/// The instance a request is about. An instance is its HelmRelease: the namespace and the
/// release name, the same on every path. The release name is known on the HelmRelease path
/// and, on the Application path, whenever the kind's definition states its release prefix;
/// only without one is the application name compared.
pub struct Subject<'s> {
    pub namespace: &'s str,
    pub app: &'s str,
    pub release: Option<String>,
}

impl<'s> Subject<'s> {
    /// The Application `app` of `rules.kind` in `namespace`.
    pub fn application(rules: &KindRules, namespace: &'s str, app: &'s str) -> Self {
        Subject {
            namespace,
            app,
            release: rules.release_prefix.as_ref().map(|p| format!("{p}{app}")),
        }
    }

    pub fn is(&self, instance: &InstanceRef) -> bool {
        instance.namespace == self.namespace
            && match &self.release {
                Some(release) => instance.release == release,
                None => instance.app == self.app,
            }
    }
}

pub fn check(eval: &Evaluation, rules: &KindRules, subject: &Subject) -> Result<(), Violation> {
    let Some(Cardinality { scope, max }) = rules.cardinality else {
        return Ok(());
    };
    let namespace = subject.namespace;
    let instances = eval.instances(rules)?;
    let (scope_name, owner) = match scope {
        Scope::Cluster => ("cluster".to_owned(), None),
        Scope::Namespace => (format!("namespace {namespace}"), None),
        Scope::Tenant => match eval.owner_of(namespace)? {
            Some(owner) => (format!("tenant {owner}"), Some(owner)),
            None => (
                format!("namespace {namespace} (it belongs to no tenant)"),
                None,
            ),
        },
    };
    let mut present = Vec::new();
    for instance in instances.iter().filter(|i| !subject.is(i)) {
        let in_scope = match (scope, &owner) {
            (Scope::Cluster, _) => true,
            (Scope::Tenant, Some(owner)) => {
                instance.namespace == namespace || eval.is_owned_by(instance.namespace, owner)?
            }
            (Scope::Namespace | Scope::Tenant, _) => instance.namespace == namespace,
        };
        if in_scope {
            present.push(instance.label_from(namespace));
        }
    }
    if (present.len() as u64) < u64::from(max) {
        return Ok(());
    }
    present.sort();
    // A background audit replays an instance that exists already: it is one of the surplus.
    let remedy = if eval.is_audit() {
        format!("keep {max} and delete the others")
    } else {
        format!(
            "use or edit the existing {} instead of creating another",
            rules.kind
        )
    };
    Err(Violation::waivable(format!(
        "{kind}: at most {max} per {scope_name}; already present: {list}; {remedy} (cardinality {scope}/{max})",
        kind = rules.kind,
        list = list_some(&present, SHOWN),
    )))
}
