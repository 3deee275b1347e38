//! The rules that compose other rules.

pub mod tenant_modules;
