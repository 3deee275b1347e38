//! The Cozystack capabilities resolver: every admission decision of the capabilities policy
//! as pure functions of (request, facts, settings) → verdict.
//!
//! No I/O lives here. The Kubewarden policy answers [`Cluster`] with host calls; the
//! dashboard build and the tests answer it with a [`Snapshot`].
//!
//! The modules form layers, each importing only the ones below it (a test keeps the graph
//! acyclic, `tests/layers.rs`):
//! 1. [`model`]: the naming rule, identities, the request, each kind's rules and the settings,
//!    the facts of the cluster, what the Tenant chart renders, and the evaluation context that
//!    reads them once per request;
//! 2. [`change`]: every surface normalised into one change — the instances that enter and
//!    leave kinds (a Tenant's switches as the modules its chart renders), as whom;
//! 3. [`rules`]: one rule each, and the one table ([`rules::RULES`]) that orders them;
//! 4. [`decide`]: normalises a request and runs the table over it;
//! 5. [`dashboard`]: the catalog a dashboard shows, from the same decision.
//!
//! Inside the crate each module is named by its own path (`crate::model::facts`); the short
//! paths below are for users of the crate.

pub mod change;
pub mod dashboard;
pub mod decide;
pub mod model;
pub mod rules;

#[cfg(feature = "js")]
pub use dashboard::js;
pub use dashboard::{access, catalog};
pub use decide::evaluate;
pub use model::definition::{Definition, RawField, RuleField};
pub use model::definition_set::DefinitionSet;
pub use model::error::{LookupError, RuleError};
pub use model::facts::{Cluster, Instance, InstanceRef, Instances, Namespace, Snapshot};
pub use model::identity::User;
pub use model::kinds::KindRules;
pub use model::listing::DefinitionList;
pub use model::request::{ObjectState, Operation, Request, Surface};
pub use model::settings::{DefinitionSource, PlatformWriters, Settings};
pub use model::verdict::Verdict;
pub use model::{
    chart, collect, definition, definition_set, error, facts, identity, kinds, listing, providers,
    release, request, settings, tenant, verdict,
};
pub use rules::{capability, cardinality, groups, namespace, protection, slots, visibility};
