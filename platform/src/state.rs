//! The cluster a change set is judged on, as its writes leave it: the objects, and the host's
//! caches over them, kept current by every write as a policy-server's are by its watches: the
//! objects' positions by apiVersion, kind and name (neither the writes nor the policy's GETs
//! scan thousands of objects per manifest), and the reflectors' lists, each updated with the
//! object a write changes.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use cozystack_policy_runtime::cluster::{ClusterObjects, ObjectIndex, ObjectKey, index_key};
use cozystack_policy_runtime::host::HostCache;
use serde_json::Value;

fn meta<'v>(object: &'v Value, key: &str) -> &'v str {
    object["metadata"][key].as_str().unwrap_or_default()
}

pub struct State {
    cluster: Arc<ClusterObjects>,
    /// The reflectors, the GET cache and the index; lent to each evaluation.
    cache: HostCache,
    /// The objects' positions by namespace ("" for cluster-scoped ones).
    namespaces: HashMap<String, BTreeSet<usize>>,
}

fn by_namespace(cluster: &ClusterObjects) -> HashMap<String, BTreeSet<usize>> {
    let mut namespaces: HashMap<String, BTreeSet<usize>> = HashMap::new();
    for (at, (_, _, namespace, _)) in cluster.keys().enumerate() {
        namespaces.entry(namespace.clone()).or_default().insert(at);
    }
    namespaces
}

impl State {
    pub fn new(cluster: ClusterObjects) -> State {
        let cache = HostCache::indexed(cluster.index());
        State {
            namespaces: by_namespace(&cluster),
            cluster: Arc::new(cluster),
            cache,
        }
    }

    fn index(&self) -> &ObjectIndex {
        static EMPTY: std::sync::OnceLock<ObjectIndex> = std::sync::OnceLock::new();
        self.cache
            .index()
            .unwrap_or_else(|| EMPTY.get_or_init(ObjectIndex::default))
    }

    /// Hands a write to the host caches, as a watch event reaches the reflectors: the object
    /// as it was (if it exists) and as it is now (`None` when removed).
    fn written(&mut self, object: &Value, removed: bool) {
        let old = self.position(object).and_then(|at| self.cluster.value(at));
        self.cache
            .written(old.as_ref(), (!removed).then_some(object));
    }

    pub fn cluster(&self) -> &ClusterObjects {
        &self.cluster
    }

    /// The object, by apiVersion, kind, name and (for a namespaced one) namespace.
    pub fn get(
        &self,
        api_version: &str,
        kind: &str,
        name: &str,
        namespace: Option<&str>,
    ) -> Option<Value> {
        self.cluster
            .get_indexed(self.index(), api_version, kind, name, namespace)
    }

    fn position(&self, object: &Value) -> Option<usize> {
        self.index().get(&index_key(object))?.first().copied()
    }

    /// The objects of one namespace (a Tenant's sub-tenants are re-rendered when it changes).
    pub fn in_namespace(&self, namespace: &str) -> Vec<Value> {
        self.namespaces
            .get(namespace)
            .into_iter()
            .flatten()
            .filter_map(|&at| self.cluster.value(at))
            .collect()
    }

    /// Replaces the object of the same apiVersion, kind, namespace and name, or adds it.
    pub fn put(&mut self, object: Value) {
        self.written(&object, false);
        match self.position(&object) {
            Some(at) => Arc::make_mut(&mut self.cluster).set(at, &object),
            None => {
                let objects = Arc::make_mut(&mut self.cluster);
                let at = objects.len();
                let key = index_key(&object);
                self.namespaces
                    .entry(meta(&object, "namespace").to_owned())
                    .or_default()
                    .insert(at);
                objects.push(object);
                self.cache.index_mut().entry(key).or_default().push(at);
            }
        }
    }

    /// Removes the object with `object`'s apiVersion, kind, namespace and name, if there is one.
    pub fn remove(&mut self, object: &Value) {
        let Some(at) = self.position(object) else {
            return;
        };
        self.written(object, true);
        let objects = Arc::make_mut(&mut self.cluster);
        let last = objects.len() - 1;
        let (Some(moved), Some(gone)) = (objects.key(last).cloned(), objects.key(at)) else {
            return;
        };
        let (gone, moved_namespace) = (gone.2.clone(), moved.2.clone());
        objects.swap_remove(at);
        if let Some(positions) = self.namespaces.get_mut(&gone) {
            positions.remove(&at);
        }
        if at != last
            && let Some(positions) = self.namespaces.get_mut(&moved_namespace)
        {
            positions.remove(&last);
            positions.insert(at);
        }
        let index = self.cache.index_mut();
        if let Some(positions) = index.get_mut(&index_key(object)) {
            positions.retain(|&p| p != at);
        }
        if at != last
            && let Some(positions) = index.get_mut(&moved)
        {
            for p in positions.iter_mut().filter(|p| **p == last) {
                *p = at;
            }
        }
    }

    /// Keeps the objects whose identity (apiVersion, kind, namespace, name) `keep` accepts (a
    /// namespace torn down: rare, so the caches start afresh).
    pub fn retain(&mut self, keep: impl FnMut(&ObjectKey) -> bool) {
        let cluster = Arc::make_mut(&mut self.cluster);
        cluster.retain(keep);
        self.cache = HostCache::indexed(cluster.index());
        self.namespaces = by_namespace(cluster);
    }

    /// The objects and the host's caches, for one evaluation; hand the caches back with
    /// [`State::restore`].
    pub fn lend(&mut self) -> (Arc<ClusterObjects>, Arc<HostCache>) {
        let cache = std::mem::take(&mut self.cache);
        (self.cluster.clone(), Arc::new(cache))
    }

    /// Takes the caches back from [`State::lend`] (afresh if the evaluation still holds them).
    pub fn restore(&mut self, cache: Arc<HostCache>) {
        self.cache =
            Arc::try_unwrap(cache).unwrap_or_else(|_| HostCache::indexed(self.cluster.index()));
    }
}

/// What a render reads and writes: a [`State`], or a [`Draft`] over one.
pub trait Objects {
    /// The object of an identity (`cluster::object_key` makes one).
    fn object(&self, key: &ObjectKey) -> Option<Value>;
    /// The objects of one namespace.
    fn in_namespace(&self, namespace: &str) -> Vec<Value>;
    /// Replaces the object of the same identity, or adds it.
    fn put(&mut self, object: Value);
    /// Removes the object of `object`'s identity, if there is one.
    fn remove(&mut self, object: &Value);
}

impl Objects for State {
    fn object(&self, key: &ObjectKey) -> Option<Value> {
        self.cluster.get_keyed(self.index(), key)
    }

    fn in_namespace(&self, namespace: &str) -> Vec<Value> {
        State::in_namespace(self, namespace)
    }

    fn put(&mut self, object: Value) {
        State::put(self, object)
    }

    fn remove(&mut self, object: &Value) {
        State::remove(self, object)
    }
}

/// Writes drafted over a state that does not change: each object put (`Some`) or removed
/// (`None`), by identity. What helm-controller's render would write is read off it and then
/// judged write by write, without copying a cluster of thousands for every render.
pub struct Draft<'s> {
    base: &'s State,
    written: std::collections::BTreeMap<ObjectKey, Option<Value>>,
}

impl<'s> Draft<'s> {
    pub fn over(base: &'s State) -> Draft<'s> {
        Draft {
            base,
            written: Default::default(),
        }
    }

    /// Each object the draft changed: what the state holds, and what the draft makes of it
    /// (`None`: absent), those it left as they were skipped.
    pub fn changes(self) -> Vec<(ObjectKey, Option<Value>, Option<Value>)> {
        let base = self.base;
        (self.written.into_iter())
            .filter_map(|(key, new)| {
                let old = base.object(&key);
                (old != new).then_some((key, old, new))
            })
            .collect()
    }
}

impl Objects for Draft<'_> {
    fn object(&self, key: &ObjectKey) -> Option<Value> {
        match self.written.get(key) {
            Some(written) => written.clone(),
            None => self.base.object(key),
        }
    }

    fn in_namespace(&self, namespace: &str) -> Vec<Value> {
        let mut objects: Vec<Value> = (self.base.in_namespace(namespace).into_iter())
            .filter(|o| !self.written.contains_key(&index_key(o)))
            .collect();
        objects.extend(
            (self.written.iter())
                .filter(|((.., ns, _), _)| ns == namespace)
                .filter_map(|(_, written)| written.clone()),
        );
        objects
    }

    fn put(&mut self, object: Value) {
        self.written.insert(index_key(&object), Some(object));
    }

    fn remove(&mut self, object: &Value) {
        self.written.insert(index_key(object), None);
    }
}
