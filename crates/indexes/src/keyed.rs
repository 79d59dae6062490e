//! The watch protocol, once for every kind: a keyed map of derived values that turns
//! `Apply`/`Delete` events and whole relists (`Init`, `InitApply`..., `InitDone`) into the minimal
//! list of changes.
//!
//! A relist is buffered and compared with the current contents when it completes, as kube's
//! reflector does: objects missing from the relist were deleted while the watch was down, and
//! objects that come back unchanged produce no change at all. So a watch that reconnects, or a
//! file source that re-reads everything, costs nothing downstream when nothing changed.

use std::collections::BTreeMap;

/// One effective change of a keyed value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change<V> {
    /// The key is new or its value changed; `old` is the previous value.
    Set {
        key: String,
        old: Option<V>,
        new: V,
    },
    Removed {
        key: String,
        old: V,
    },
}

#[derive(Debug)]
pub struct Keyed<V> {
    current: BTreeMap<String, V>,
    relist: Option<BTreeMap<String, V>>,
    synced: bool,
}

impl<V> Default for Keyed<V> {
    fn default() -> Self {
        Keyed {
            current: BTreeMap::new(),
            relist: None,
            synced: false,
        }
    }
}

impl<V: PartialEq + Clone> Keyed<V> {
    /// Whether a complete list has been seen at least once.
    pub fn is_synced(&self) -> bool {
        self.synced
    }

    pub fn get(&self, key: &str) -> Option<&V> {
        self.current.get(key)
    }

    /// The value the relist in progress holds for `key`, if a relist is in progress and lists it.
    pub fn listing(&self, key: &str) -> Option<&V> {
        self.relist.as_ref()?.get(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.current.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn len(&self) -> usize {
        self.current.len()
    }

    pub fn is_empty(&self) -> bool {
        self.current.is_empty()
    }

    /// An object was added or modified (`Apply`).
    pub fn set(&mut self, key: String, new: V) -> Option<Change<V>> {
        match self.current.get(&key) {
            Some(old) if *old == new => None,
            _ => {
                let old = self.current.insert(key.clone(), new.clone());
                Some(Change::Set { key, old, new })
            }
        }
    }

    /// An object was deleted (`Delete`). Deleting an unknown key changes nothing.
    pub fn remove(&mut self, key: &str) -> Option<Change<V>> {
        let old = self.current.remove(key)?;
        Some(Change::Removed {
            key: key.to_owned(),
            old,
        })
    }

    /// A relist starts (`Init`). A relist already in progress is abandoned: the watch restarted.
    pub fn begin_relist(&mut self) {
        self.relist = Some(BTreeMap::new());
    }

    /// One object of the relist (`InitApply`). Tolerates a missing `Init` by starting one.
    pub fn relisted(&mut self, key: String, value: V) {
        self.relist
            .get_or_insert_with(BTreeMap::new)
            .insert(key, value);
    }

    /// The relist is complete (`InitDone`): everything not listed is gone.
    pub fn end_relist(&mut self) -> Vec<Change<V>> {
        let listed = self.relist.take().unwrap_or_default();
        self.synced = true;
        let mut changes: Vec<Change<V>> = Vec::new();
        let gone: Vec<String> = self
            .current
            .keys()
            .filter(|k| !listed.contains_key(*k))
            .cloned()
            .collect();
        for key in gone {
            changes.extend(self.remove(&key));
        }
        for (key, value) in listed {
            changes.extend(self.set(key, value));
        }
        changes
    }

    /// Recomputes the value of every key starting with `prefix` with `derive`, returning what
    /// changed. Values buffered in a relist in progress are recomputed too, so that the relist does
    /// not bring back a stale value when it completes.
    pub fn rederive_prefix(&mut self, prefix: &str, derive: impl Fn(&V) -> V) -> Vec<Change<V>> {
        if let Some(relist) = &mut self.relist {
            for (_, value) in with_prefix(relist, prefix) {
                *value = derive(value);
            }
        }
        let updated: Vec<(String, V)> = with_prefix(&mut self.current, prefix)
            .map(|(key, value)| (key.clone(), derive(value)))
            .collect();
        updated
            .into_iter()
            .filter_map(|(key, value)| self.set(key, value))
            .collect()
    }
}

fn with_prefix<'a, V>(
    map: &'a mut BTreeMap<String, V>,
    prefix: &'a str,
) -> impl Iterator<Item = (&'a String, &'a mut V)> {
    map.range_mut(prefix.to_owned()..)
        .take_while(move |(key, _)| key.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(key: &str, old: Option<u32>, new: u32) -> Change<u32> {
        Change::Set {
            key: key.into(),
            old,
            new,
        }
    }

    #[test]
    fn apply_reports_only_real_changes() {
        let mut keyed = Keyed::default();
        assert_eq!(keyed.set("a".into(), 1), Some(set("a", None, 1)));
        assert_eq!(keyed.set("a".into(), 1), None);
        assert_eq!(keyed.set("a".into(), 2), Some(set("a", Some(1), 2)));
        assert_eq!(
            keyed.remove("a"),
            Some(Change::Removed {
                key: "a".into(),
                old: 2
            })
        );
        assert_eq!(
            keyed.remove("a"),
            None,
            "deleting an unknown key changes nothing"
        );
    }

    #[test]
    fn relist_removes_the_unlisted_and_ignores_the_unchanged() {
        let mut keyed = Keyed::default();
        keyed.begin_relist();
        keyed.relisted("a".into(), 1);
        keyed.relisted("b".into(), 1);
        assert!(!keyed.is_synced());
        assert_eq!(keyed.end_relist().len(), 2);
        assert!(keyed.is_synced());

        keyed.begin_relist();
        keyed.relisted("b".into(), 1);
        keyed.relisted("c".into(), 3);
        // Nothing is applied until the relist completes.
        assert_eq!(keyed.get("a"), Some(&1));
        assert_eq!(
            keyed.end_relist(),
            vec![
                Change::Removed {
                    key: "a".into(),
                    old: 1
                },
                set("c", None, 3)
            ]
        );
    }

    #[test]
    fn rederive_updates_current_and_buffered_values_under_the_prefix() {
        let mut keyed = Keyed::default();
        keyed.set("x/a".into(), 1);
        keyed.set("xy/a".into(), 1);
        keyed.set("y/a".into(), 1);
        keyed.begin_relist();
        keyed.relisted("x/a".into(), 1);
        keyed.relisted("x/b".into(), 2);
        keyed.relisted("y/a".into(), 1);
        let changes = keyed.rederive_prefix("x/", |v| v + 10);
        assert_eq!(changes, vec![set("x/a", Some(1), 11)]);
        assert_eq!(
            keyed.end_relist(),
            vec![
                Change::Removed {
                    key: "xy/a".into(),
                    old: 1
                },
                set("x/b", None, 12)
            ],
            "the relist carries the rederived values"
        );
    }
}
