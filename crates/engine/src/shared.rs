//! A shared value with an explicit id, for caches that do work once per shared value.
//!
//! Replicas share one MapState and one compiled rule list, and every stage after the engine does
//! its work once per shared value (compile, render, count sets). Such caches used to be keyed
//! by the `Arc`'s address, which is right only while something keeps the value alive: a value
//! dropped and another allocated at the same address would hit the old entry. A [`Shared`]
//! carries an id drawn once per value from a process-wide counter, so a key can never name a
//! value other than the one it was taken from, whatever was dropped in between.

use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The id of one [`Shared`] value: equal for clones of it, never reused within the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SharedId(u64);

impl SharedId {
    fn fresh() -> SharedId {
        // Relaxed: only uniqueness matters, not an order between threads.
        static NEXT: AtomicU64 = AtomicU64::new(0);
        SharedId(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// An immutable value shared by reference count, with the [`SharedId`] of this value. Clones
/// share the value and its id; a change ([`Shared::make_mut`]) makes it another value, with a
/// new id.
#[derive(Debug)]
pub struct Shared<T> {
    id: SharedId,
    value: Arc<T>,
}

impl<T> Shared<T> {
    pub fn new(value: T) -> Shared<T> {
        Shared {
            id: SharedId::fresh(),
            value: Arc::new(value),
        }
    }

    /// The id of this value, the key for work done once per shared value.
    pub fn id(&self) -> SharedId {
        self.id
    }

    /// The value, unwrapped if this is its only holder, else cloned.
    pub fn unwrap_or_clone(self) -> T
    where
        T: Clone,
    {
        Arc::unwrap_or_clone(self.value)
    }

    /// The value to change, copied first if others hold it. Either way it becomes another
    /// value with a new id: a cache keyed by the old id must not see the changed one.
    pub fn make_mut(&mut self) -> &mut T
    where
        T: Clone,
    {
        self.id = SharedId::fresh();
        Arc::make_mut(&mut self.value)
    }
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared {
            id: self.id,
            value: Arc::clone(&self.value),
        }
    }
}

impl<T: Default> Default for Shared<T> {
    fn default() -> Self {
        Shared::new(T::default())
    }
}

impl<T> Deref for Shared<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> From<T> for Shared<T> {
    fn from(value: T) -> Self {
        Shared::new(value)
    }
}

/// Equal by value, as `Arc` is: two separately made equal values are equal, with other ids.
impl<T: PartialEq> PartialEq for Shared<T> {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id || *self.value == *other.value
    }
}

impl<T: Eq> Eq for Shared<T> {}

/// Hashed by value, agreeing with `PartialEq` (and with `Borrow<T>`, so a map keyed by shared
/// values can be looked up with a plain one).
impl<T: std::hash::Hash> std::hash::Hash for Shared<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.value.hash(state)
    }
}

impl<T> std::borrow::Borrow<T> for Shared<T> {
    fn borrow(&self) -> &T {
        &self.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn clones_share_an_id_and_separate_values_do_not() {
        let a = Shared::new(vec![1, 2, 3]);
        let b = a.clone();
        let c = Shared::new(vec![1, 2, 3]);
        assert_eq!(a.id(), b.id());
        assert_ne!(a.id(), c.id());
        assert_eq!(a, c, "equal by value");
    }

    #[test]
    fn a_change_is_a_new_value_even_for_the_only_holder() {
        let mut a = Shared::new(vec![1]);
        let before = a.id();
        a.make_mut().push(2);
        assert_ne!(a.id(), before);
        assert_eq!(*a, vec![1, 2]);
    }

    /// The failure an address key allows: a value dropped, another made (the allocator may well
    /// put it at the same address), and a cache keyed by the first still answering. Ids are never
    /// reused, so the cache misses whatever the allocator did; and a value re-made equal to a
    /// dropped one is computed again, not confused with anything.
    #[test]
    fn a_cache_keyed_by_id_survives_drop_and_recreation() {
        let mut cache: HashMap<SharedId, usize> = HashMap::new();
        let mut reused_address = false;
        for round in 0..1_000usize {
            let value = Shared::new([round; 4]);
            let address = Arc::as_ptr(&value.value) as usize;
            if let Some(cached) = cache.get(&value.id()) {
                panic!("round {round}: a new value hit the entry of round {cached}");
            }
            cache.insert(value.id(), round);
            drop(value);
            let again = Shared::new([round; 4]);
            reused_address |= Arc::as_ptr(&again.value) as usize == address;
            assert!(!cache.contains_key(&again.id()));
        }
        // The premise of the test: the allocator did hand out a freed address again, which an
        // address-keyed cache would have taken for the dropped value.
        assert!(
            reused_address,
            "no address was reused: the test proved nothing"
        );
    }
}
