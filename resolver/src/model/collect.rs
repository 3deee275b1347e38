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
    order.sort_by(|&a, &b| cmp(a, b).then(a.cmp(&b)));
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

/// `a.concat()` against `b.concat()`, without joining either: a slice at a time, as far as
/// both have bytes left in their current pieces.
pub fn cmp_joined(a: &[&str], b: &[&str]) -> Ordering {
    let (mut a, mut b) = (Pieces::new(a), Pieces::new(b));
    loop {
        match (a.rest(), b.rest()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => {
                let n = x.len().min(y.len());
                match x[..n].cmp(&y[..n]) {
                    Ordering::Equal => {
                        a.advance(n);
                        b.advance(n);
                    }
                    unequal => return unequal,
                }
            }
        }
    }
}

/// A read position in the concatenation of `pieces`.
struct Pieces<'p, 's> {
    pieces: &'p [&'s str],
    offset: usize,
}

impl<'p, 's> Pieces<'p, 's> {
    fn new(pieces: &'p [&'s str]) -> Self {
        Pieces { pieces, offset: 0 }
    }

    /// What is left of the current piece, skipping empty ones; `None` at the end.
    fn rest(&mut self) -> Option<&'s [u8]> {
        while let Some((first, others)) = self.pieces.split_first() {
            if self.offset < first.len() {
                return Some(&first.as_bytes()[self.offset..]);
            }
            (self.pieces, self.offset) = (others, 0);
        }
        None
    }

    fn advance(&mut self, n: usize) {
        self.offset += n;
    }
}

/// A set of borrowed names, sorted and without repeats: what a `BTreeSet<&str>` would hold,
/// sorted by position (one sort in the module for every caller) and searched by halves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StrSet<'a>(Vec<&'a str>);

impl<'a> StrSet<'a> {
    pub fn of(items: impl IntoIterator<Item = &'a str>) -> Self {
        let mut names: Vec<&str> = items.into_iter().collect();
        // Often sorted already (label keys come from a sorted map): then no sort at all.
        if !names.is_sorted() {
            names = sorted_by(names, |a: &&str, b: &&str| a.cmp(b));
        }
        names.dedup();
        StrSet(names)
    }

    /// The distinct `items`, or `None` as soon as there are more than `n` of them: deciding
    /// that a long list is long costs no sort of it.
    pub fn at_most(items: impl IntoIterator<Item = &'a str>, n: usize) -> Option<Self> {
        let mut names: Vec<&str> = Vec::new();
        for item in items {
            if !names.contains(&item) {
                if names.len() == n {
                    return None;
                }
                names.push(item);
            }
        }
        Some(StrSet::of(names))
    }

    pub fn contains(&self, name: &str) -> bool {
        self.0.binary_search(&name).is_ok()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// In order.
    pub fn iter(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.0.iter().copied()
    }

    /// The names of this set that `other` lacks, in order.
    pub fn difference<'s>(&'s self, other: &'s StrSet) -> impl Iterator<Item = &'a str> + 's {
        self.iter().filter(|name| !other.contains(name))
    }
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

    #[test]
    fn joined_pieces_compare_as_their_concatenation() {
        let pieces: [&[&str]; 9] = [
            &[],
            &[""],
            &["tenant-a", "/", "db"],
            &["tenant-a-b", "/", "db"],
            &["tenant-a", "/db"],
            &["tenant-", "a", "", "/", "db", " (Postgres)"],
            &["tenant-a/db (Postgres)", ""],
            &["tenant-a/d"],
            &["z"],
        ];
        for a in pieces {
            for b in pieces {
                assert_eq!(
                    cmp_joined(a, b),
                    a.concat().cmp(&b.concat()),
                    "{a:?} against {b:?}"
                );
            }
        }
    }

    #[test]
    fn a_name_set_is_sorted_without_repeats() {
        let set = StrSet::of(["tenant-b", "tenant-a", "tenant-b", "tenant-root"]);
        assert_eq!(
            set.iter().collect::<Vec<_>>(),
            ["tenant-a", "tenant-b", "tenant-root"]
        );
        assert!(set.contains("tenant-a") && !set.contains("tenant-c"));
        assert_eq!((set.len(), set.is_empty()), (3, false));
        let other = StrSet::of(["tenant-root", "tenant-c"]);
        assert_eq!(
            set.difference(&other).collect::<Vec<_>>(),
            ["tenant-a", "tenant-b"]
        );
        assert_eq!(StrSet::of(["b", "a"]), StrSet::of(["a", "b", "a"]));
        let repeated = ["tenant-b", "tenant-a", "tenant-b", "tenant-a", "tenant-c"];
        assert_eq!(StrSet::at_most(repeated, 3), Some(StrSet::of(repeated)));
        assert_eq!(StrSet::at_most(repeated, 2), None);
        assert_eq!(
            StrSet::at_most(repeated[..4].iter().copied(), 2),
            Some(StrSet::of(["tenant-a", "tenant-b"]))
        );
        assert_eq!(StrSet::at_most([], 0), Some(StrSet::default()));
        assert!(StrSet::of([]).is_empty());
    }
}
