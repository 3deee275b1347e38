//! What each verb computes, one module a verb (as cargo's `ops`): the verbs' argument parsing
//! and output are the binary's `commands/`.

pub mod check;
pub mod evaluate;
pub mod flux_sources;
pub mod footprint;
pub mod preflight;
