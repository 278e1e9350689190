//! Dense tables keyed by handle: a [`PrimaryMap`] owns entities and hands out their handles (a
//! function's value table: the one way an IR value is minted), a [`SecondaryMap`] holds
//! a side fact for some of them (the op defining each value, a value's canonical name) in a
//! vector indexed by handle, not a hash map.

use std::marker::PhantomData;

/// A handle: an index into the table that minted it.
pub trait EntityRef: Copy + Eq {
    /// The handle of index `i`.
    fn new(i: usize) -> Self;
    /// Its index.
    fn index(self) -> usize;
}

/// A table that owns its entities: [`PrimaryMap::push`] is the only way to mint a handle.
#[derive(Debug, Clone, PartialEq)]
pub struct PrimaryMap<K, V> {
    elems: Vec<V>,
    key: PhantomData<K>,
}

impl<K, V> Default for PrimaryMap<K, V> {
    fn default() -> Self {
        PrimaryMap {
            elems: Vec::new(),
            key: PhantomData,
        }
    }
}

impl<K: EntityRef, V> PrimaryMap<K, V> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds `v`; returns its new handle.
    pub fn push(&mut self, v: V) -> K {
        self.elems.push(v);
        K::new(self.elems.len() - 1)
    }
    /// The handle the next [`PrimaryMap::push`] returns.
    pub fn next_key(&self) -> K {
        K::new(self.elems.len())
    }
    /// The entity of `k`, if this table minted it.
    pub fn get(&self, k: K) -> Option<&V> {
        self.elems.get(k.index())
    }
    /// Whether this table minted `k`.
    pub fn is_valid(&self, k: K) -> bool {
        k.index() < self.elems.len()
    }
    /// Every handle and its entity, mutable, in minting order.
    pub fn entries_mut(&mut self) -> impl Iterator<Item = (K, &mut V)> {
        self.elems
            .iter_mut()
            .enumerate()
            .map(|(i, v)| (K::new(i), v))
    }
    /// Removes every entity (handles minted before are no longer valid).
    pub fn clear(&mut self) {
        self.elems.clear();
    }
    /// Every handle and its entity, in minting order.
    pub fn entries(&self) -> impl Iterator<Item = (K, &V)> {
        self.elems.iter().enumerate().map(|(i, v)| (K::new(i), v))
    }
}

impl<K, V> From<Vec<V>> for PrimaryMap<K, V> {
    fn from(elems: Vec<V>) -> Self {
        PrimaryMap {
            elems,
            key: PhantomData,
        }
    }
}

impl<'a, K, V> IntoIterator for &'a PrimaryMap<K, V> {
    type Item = &'a V;
    type IntoIter = std::slice::Iter<'a, V>;
    fn into_iter(self) -> Self::IntoIter {
        self.elems.iter()
    }
}

/// Read as a slice in minting order (`len`, `iter`, indexing by position).
impl<K, V> std::ops::Deref for PrimaryMap<K, V> {
    type Target = [V];
    fn deref(&self) -> &[V] {
        &self.elems
    }
}

impl<K, V> std::ops::DerefMut for PrimaryMap<K, V> {
    fn deref_mut(&mut self) -> &mut [V] {
        &mut self.elems
    }
}

impl<K: EntityRef, V> std::ops::Index<K> for PrimaryMap<K, V> {
    type Output = V;
    fn index(&self, k: K) -> &V {
        &self.elems[k.index()]
    }
}

impl<K: EntityRef, V> std::ops::IndexMut<K> for PrimaryMap<K, V> {
    fn index_mut(&mut self, k: K) -> &mut V {
        &mut self.elems[k.index()]
    }
}

/// A side table: a fact for some handles, in a vector indexed by handle (a lookup is one
/// bounds check, not a hash). Two tables are equal when they hold the same facts, however
/// far each has grown.
#[derive(Debug, Clone)]
pub struct SecondaryMap<K, V> {
    elems: Vec<Option<V>>,
    len: usize,
    key: PhantomData<K>,
}

impl<K: EntityRef, V> std::ops::Index<K> for SecondaryMap<K, V> {
    type Output = V;
    /// The fact of `k`.
    ///
    /// # Panics
    /// If `k` has none (an internal error: use [`SecondaryMap::get`] where it may not).
    fn index(&self, k: K) -> &V {
        self.get(k)
            .expect("a handle without a fact in this side table")
    }
}

impl<K: EntityRef, V: PartialEq> PartialEq for SecondaryMap<K, V> {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl<K: EntityRef, V> FromIterator<(K, V)> for SecondaryMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut m = SecondaryMap::new();
        for (k, v) in iter {
            m.insert(k, v);
        }
        m
    }
}

impl<K, V> Default for SecondaryMap<K, V> {
    fn default() -> Self {
        SecondaryMap {
            elems: Vec::new(),
            len: 0,
            key: PhantomData,
        }
    }
}

impl<K: EntityRef, V> SecondaryMap<K, V> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }
    /// An empty table with room for handles below `n`.
    pub fn with_capacity(n: usize) -> Self {
        let mut elems = Vec::with_capacity(n);
        elems.resize_with(n, || None);
        SecondaryMap {
            elems,
            len: 0,
            key: PhantomData,
        }
    }
    /// The fact of `k`.
    pub fn get(&self, k: K) -> Option<&V> {
        self.elems.get(k.index()).and_then(Option::as_ref)
    }
    /// The fact of `k`, mutable.
    pub fn get_mut(&mut self, k: K) -> Option<&mut V> {
        self.elems.get_mut(k.index()).and_then(Option::as_mut)
    }
    /// Whether `k` has a fact.
    pub fn contains_key(&self, k: K) -> bool {
        self.get(k).is_some()
    }
    /// Sets the fact of `k`; returns the one it replaces.
    pub fn insert(&mut self, k: K, v: V) -> Option<V> {
        let i = k.index();
        if i >= self.elems.len() {
            self.elems.resize_with(i + 1, || None);
        }
        let old = self.elems[i].replace(v);
        if old.is_none() {
            self.len += 1;
        }
        old
    }
    /// Removes the fact of `k`.
    pub fn remove(&mut self, k: K) -> Option<V> {
        let old = self.elems.get_mut(k.index()).and_then(Option::take);
        if old.is_some() {
            self.len -= 1;
        }
        old
    }
    /// How many handles have a fact.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether no handle has a fact.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Every handle with a fact, and the fact, in handle order.
    pub fn iter(&self) -> impl Iterator<Item = (K, &V)> {
        self.elems
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.as_ref().map(|v| (K::new(i), v)))
    }
    /// Every fact, in handle order.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }
    /// Every handle with a fact, in handle order.
    pub fn keys(&self) -> impl Iterator<Item = K> + '_ {
        self.iter().map(|(k, _)| k)
    }
    /// The fact of `k`, set to `make()` first when it has none.
    pub fn get_or_insert_with(&mut self, k: K, make: impl FnOnce() -> V) -> &mut V {
        if !self.contains_key(k) {
            self.insert(k, make());
        }
        self.get_mut(k).expect("inserted above")
    }
}

impl<K: EntityRef, V> IntoIterator for SecondaryMap<K, V> {
    type Item = (K, V);
    type IntoIter = std::iter::FilterMap<
        std::iter::Enumerate<std::vec::IntoIter<Option<V>>>,
        fn((usize, Option<V>)) -> Option<(K, V)>,
    >;
    /// Every handle with a fact, and the fact, in handle order.
    fn into_iter(self) -> Self::IntoIter {
        self.elems
            .into_iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| (K::new(i), v)))
    }
}

impl<K: EntityRef, V> Extend<(K, V)> for SecondaryMap<K, V> {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}

/// A set of handles, dense: one bit per handle below the largest inserted.
#[derive(Debug, Clone, PartialEq)]
pub struct EntitySet<K> {
    bits: Vec<bool>,
    key: PhantomData<K>,
}

impl<K> Default for EntitySet<K> {
    fn default() -> Self {
        EntitySet {
            bits: Vec::new(),
            key: PhantomData,
        }
    }
}

impl<K: EntityRef> EntitySet<K> {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds `k`; whether it was absent.
    pub fn insert(&mut self, k: K) -> bool {
        let i = k.index();
        if i >= self.bits.len() {
            self.bits.resize(i + 1, false);
        }
        !std::mem::replace(&mut self.bits[i], true)
    }
    /// Whether `k` is in the set.
    pub fn contains(&self, k: K) -> bool {
        self.bits.get(k.index()).copied().unwrap_or(false)
    }
    /// Every handle in the set, in handle order.
    pub fn iter(&self) -> impl Iterator<Item = K> + '_ {
        self.bits
            .iter()
            .enumerate()
            .filter(|(_, &b)| b)
            .map(|(i, _)| K::new(i))
    }
}

impl<K: EntityRef> IntoIterator for EntitySet<K> {
    type Item = K;
    type IntoIter = std::vec::IntoIter<K>;
    /// Every handle in the set, in handle order.
    fn into_iter(self) -> Self::IntoIter {
        self.iter().collect::<Vec<_>>().into_iter()
    }
}

impl<K: EntityRef> Extend<K> for EntitySet<K> {
    fn extend<I: IntoIterator<Item = K>>(&mut self, iter: I) {
        for k in iter {
            self.insert(k);
        }
    }
}

impl<K: EntityRef> FromIterator<K> for EntitySet<K> {
    fn from_iter<I: IntoIterator<Item = K>>(iter: I) -> Self {
        let mut s = EntitySet::new();
        s.extend(iter);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct Value(u32);

    impl EntityRef for Value {
        fn new(i: usize) -> Value {
            Value(i as u32)
        }
        fn index(self) -> usize {
            self.0 as usize
        }
    }

    #[test]
    fn a_primary_map_mints_handles_and_a_secondary_map_keys_by_them() {
        let mut p: PrimaryMap<Value, &str> = PrimaryMap::new();
        let (a, b) = (p.push("a"), p.push("b"));
        assert_eq!((a, b, p.next_key()), (Value(0), Value(1), Value(2)));
        assert_eq!((p[b], p.len(), p.is_valid(Value(2))), ("b", 2, false));
        let mut s: SecondaryMap<Value, u8> = SecondaryMap::new();
        assert_eq!(s.insert(Value(5), 1), None);
        assert_eq!(s.insert(Value(5), 2), Some(1));
        assert_eq!(
            (s.get(Value(5)), s.get(Value(4)), s.get(Value(99))),
            (Some(&2), None, None)
        );
        assert_eq!(s.len(), 1);
        assert_eq!(s.iter().collect::<Vec<_>>(), [(Value(5), &2)]);
        assert_eq!((s.remove(Value(5)), s.is_empty()), (Some(2), true));
        // Equal facts are equal tables, however far each grew.
        let grown: SecondaryMap<Value, u8> = [(Value(1), 7)].into_iter().collect();
        let mut other = SecondaryMap::with_capacity(50);
        other.insert(Value(1), 7);
        assert_eq!(grown, other);
        other.insert(Value(40), 1);
        assert_ne!(grown, other);
    }

    #[test]
    fn an_entity_set_holds_each_handle_once() {
        let mut s: EntitySet<Value> = [Value(3), Value(0)].into_iter().collect();
        assert!(!s.insert(Value(3)));
        assert!(s.insert(Value(7)));
        assert_eq!(
            (
                s.contains(Value(0)),
                s.contains(Value(1)),
                s.contains(Value(99))
            ),
            (true, false, false)
        );
        assert_eq!(s.iter().collect::<Vec<_>>(), [Value(0), Value(3), Value(7)]);
        let mut m: SecondaryMap<Value, Vec<u8>> = SecondaryMap::new();
        m.get_or_insert_with(Value(2), Vec::new).push(1);
        m.get_or_insert_with(Value(2), Vec::new).push(2);
        m.extend([(Value(4), vec![])]);
        assert_eq!(m.keys().collect::<Vec<_>>(), [Value(2), Value(4)]);
        assert_eq!(m[Value(2)], [1, 2]);
    }
}
