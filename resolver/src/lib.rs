//! The Cozystack capabilities resolver: every admission decision of the capabilities policy
//! as pure functions of (request, facts, settings) → verdict.
//!
//! No I/O lives here. The Kubewarden policy answers [`Cluster`] with host calls; the
//! dashboard build and the tests answer it with a [`Snapshot`].

pub mod access;
pub mod capability;
pub mod cardinality;
pub mod catalog;
pub(crate) mod decide;
pub mod error;
mod evaluation;
pub mod facts;
pub mod identity;
#[cfg(feature = "js")]
pub mod js;
pub mod namespace;
pub mod protection;
pub mod request;
pub mod rules;
pub mod settings;
pub mod tenant;
pub mod tenant_chart;
pub mod verdict;
pub mod visibility;

pub use decide::evaluate;
pub use error::{LookupError, RuleError};
pub use facts::{Cluster, Instance, InstanceRef, Instances, Namespace, Snapshot};
pub use identity::User;
pub use request::{ObjectState, Operation, Request, Surface};
pub use rules::{Definition, DefinitionSet, KindRules};
pub use settings::{DefinitionSource, PlatformWriters, Settings};
pub use verdict::Verdict;
