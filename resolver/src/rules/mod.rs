//! The rules, one module each, reading the model through the evaluation context.

pub mod capability;
pub mod cardinality;
pub mod groups;
pub mod namespace;
pub mod protection;
pub mod visibility;
