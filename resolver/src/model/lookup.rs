//! How a rule reads the many namespaces that may decide it, cheapest first: a few point lookups
//! (a cached GET each); with many, probes in the order a message reads until enough confirm;
//! else the one list of every namespace carrying the labels that decide
//! ([`Evaluation::namespaces_with`]). The rules say what decides; this says how it is fetched,
//! and the bounds that keep a request within Kubewarden's timeout (docs/host-calls.md).

use std::cmp::Ordering;
use std::rc::Rc;

use crate::model::collect::{StrSet, front_positions};
use crate::model::evaluation::Evaluation;
use crate::model::facts::Namespace;

/// Namespaces looked up one by one (a cached GET each) before they are listed all at once.
pub const POINT_LOOKUPS: usize = 8;
/// Namespaces probed, in reading order, to find enough confirming ones.
pub const PROBES: usize = 24;

/// What point lookups of a few namespaces came to.
pub enum PointLookups {
    /// Each namespace's labels, one cached GET each.
    Read(Vec<Rc<Namespace>>),
    /// More than [`POINT_LOOKUPS`] namespaces: none was read.
    TooMany,
    /// One could not be read (the caller then lists every namespace, which needs no namespace
    /// to exist).
    Unreadable,
}

/// The labels of the distinct `names`, one cached GET each, when they are at most
/// [`POINT_LOOKUPS`].
pub fn point_lookups<'n>(
    eval: &Evaluation,
    names: impl IntoIterator<Item = &'n str>,
) -> PointLookups {
    let Some(names) = StrSet::at_most(names, POINT_LOOKUPS) else {
        return PointLookups::TooMany;
    };
    let read: Option<Vec<_>> = names.iter().map(|name| eval.namespace(name).ok()).collect();
    read.map_or(PointLookups::Unreadable, PointLookups::Read)
}

/// Candidates to probe: how many, the namespace of each, and the order a message reads them.
pub struct Candidates<'c> {
    pub count: usize,
    pub namespace: &'c dyn Fn(usize) -> &'c str,
    pub reading_order: &'c dyn Fn(usize, usize) -> Ordering,
}

/// Probes the candidates' namespaces in reading order, one GET per namespace and at most
/// [`PROBES`], and gives the first `enough` candidates whose namespace `confirms`, in that
/// order. `None` when the probes do not settle it. The order is brought to the front a chunk
/// at a time: thousands of candidates are never sorted whole.
pub fn probe(
    eval: &Evaluation,
    candidates: &Candidates,
    confirms: &dyn Fn(&Namespace) -> bool,
    enough: usize,
) -> Option<Vec<usize>> {
    let mut order: Vec<usize> = (0..candidates.count).collect();
    let mut probed: Vec<(&str, bool)> = Vec::new();
    let mut confirmed = Vec::new();
    let mut start = 0;
    while start < order.len() {
        let rest = &mut order[start..];
        let chunk = PROBES.min(rest.len());
        front_positions(rest, chunk, candidates.reading_order);
        for &at in &rest[..chunk] {
            let namespace = (candidates.namespace)(at);
            let confirming = match probed.iter().find(|(ns, _)| *ns == namespace) {
                Some((_, confirming)) => *confirming,
                None if probed.len() == PROBES => return None,
                None => {
                    let confirming = confirms(&*eval.namespace(namespace).ok()?);
                    probed.push((namespace, confirming));
                    confirming
                }
            };
            if confirming {
                confirmed.push(at);
                if confirmed.len() == enough {
                    return Some(confirmed);
                }
            }
        }
        start += chunk;
    }
    None
}
