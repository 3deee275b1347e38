//! Collecting into the maps and sets of the model.

/// `items` in a map or set, inserted one by one. `collect()` into a `BTreeMap` or `BTreeSet`
/// sorts first, with a stable sort compiled anew for every element type (about 4 KB of the
/// policy module each), for what are mostly a handful of keys.
pub fn inserted<C: Default + Extend<T>, T>(items: impl IntoIterator<Item = T>) -> C {
    let mut out = C::default();
    out.extend(items);
    out
}
