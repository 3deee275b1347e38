//! Collecting into the maps and sets of the model, and ordering lists.
//!
//! Every generic collection routine is compiled anew for each element type and comparator it
//! is called with; in the policy module each copy of std's sort is ~6 KB. So the model orders
//! *positions* with one comparator type, and the callers reorder their items by them.

use std::cmp::Ordering;

/// `items` in a map or set, inserted one by one. `collect()` into a `BTreeMap` or `BTreeSet`
/// sorts first, with a stable sort compiled anew for every element type (about 4 KB of the
/// policy module each), for what are mostly a handful of keys.
pub fn inserted<C: Default + Extend<T>, T>(items: impl IntoIterator<Item = T>) -> C {
    let mut out = C::default();
    out.extend(items);
    out
}

/// A comparison of two positions in the caller's list.
pub type ByPosition<'a> = &'a dyn Fn(usize, usize) -> Ordering;

/// Sorts `order`, positions in the caller's list, by `cmp`; equal items keep their order
/// (positions break ties), so the result is a stable sort's.
pub fn sort_positions(order: &mut [usize], cmp: ByPosition) {
    order.sort_unstable_by(|&a, &b| cmp(a, b).then(a.cmp(&b)));
}

/// Brings the first `n` of `order` by `cmp` to its front, in order, without sorting the rest.
pub fn front_positions(order: &mut [usize], n: usize, cmp: ByPosition) {
    let n = n.min(order.len());
    if n < order.len() {
        order.select_nth_unstable_by(n, |&a, &b| cmp(a, b).then(a.cmp(&b)));
    }
    sort_positions(&mut order[..n], cmp);
}

/// `0..len`, sorted by `cmp`.
pub fn sorted_positions(len: usize, cmp: ByPosition) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    sort_positions(&mut order, cmp);
    order
}

/// `items` sorted by `cmp`, equal items in their order.
pub fn sorted_by<T>(items: Vec<T>, cmp: impl Fn(&T, &T) -> Ordering) -> Vec<T> {
    let order = sorted_positions(items.len(), &|a, b| cmp(&items[a], &items[b]));
    let mut slots: Vec<Option<T>> = items.into_iter().map(Some).collect();
    // Each position appears once in `order`, so every slot is taken exactly once.
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_sort_as_a_stable_sort_does() {
        let words = ["pear", "fig", "apple", "fig", "kiwi", "apple", "date"];
        let by_len = |a: &&str, b: &&str| a.len().cmp(&b.len());
        let mut stable = words.to_vec();
        stable.sort_by(by_len);
        assert_eq!(sorted_by(words.to_vec(), by_len), stable);
        let mut natural = words.to_vec();
        natural.sort();
        assert_eq!(sorted_by(words.to_vec(), |a, b| a.cmp(b)), natural);
        for n in 0..=words.len() + 1 {
            let mut order: Vec<usize> = (0..words.len()).collect();
            front_positions(&mut order, n, &|a, b| words[a].cmp(words[b]));
            let front: Vec<&str> = order.iter().take(n).map(|&i| words[i]).collect();
            assert_eq!(front, natural[..n.min(words.len())], "n = {n}");
            let mut all = order.clone();
            all.sort_unstable();
            assert_eq!(all, (0..words.len()).collect::<Vec<_>>(), "a permutation");
        }
        assert!(sorted_by(Vec::<u8>::new(), u8::cmp).is_empty());
    }
}
