//! What a dashboard shows, from the same decision admission makes: the catalog, with RBAC's
//! half beside the policy's.

pub mod access;
pub mod catalog;
#[cfg(feature = "js")]
pub mod js;
