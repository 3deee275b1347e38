//! The model: what the rules read, with no rule in it. The naming rule of tenant namespaces,
//! identities, the admission request, each kind's rules and the settings they come from, the
//! facts of the cluster, what the Tenant chart renders, and the evaluation context that reads
//! the cluster at most once per request.

pub mod builtin;
pub mod chart;
pub mod collect;
pub mod definition;
pub mod definition_set;
pub mod error;
pub(crate) mod evaluation;
pub mod facts;
pub mod identity;
pub(crate) mod json_path;
pub mod kinds;
pub mod listing;
pub(crate) mod lookup;
pub mod providers;
pub mod release;
pub mod request;
pub mod settings;
pub mod tenant;
pub mod verdict;
