//! The selector cache: for every distinct peer selector in use, the set of identities it selects.
//! Identity changes are applied to every selector first and returned as one batch of deltas, so
//! that no MapState is updated from a half-applied change (CFP-23380: transactional delivery).

use std::collections::{BTreeSet, HashMap};

use crate::identity::{Identity, IdentityId, IdentityStore};
use crate::selector::Peer;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SelectorId(pub u32);

#[derive(Debug)]
struct CachedSelector {
    peer: Peer,
    users: usize,
    selected: BTreeSet<IdentityId>,
}

/// What one identity change did to one selector.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SelectorDelta {
    pub added: Vec<IdentityId>,
    pub removed: Vec<IdentityId>,
}

#[derive(Debug, Default)]
pub struct SelectorCache {
    next: u32,
    by_peer: HashMap<Peer, SelectorId>,
    selectors: HashMap<SelectorId, CachedSelector>,
}

impl SelectorCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a user of `peer`, computing its selection on first use.
    pub fn acquire(&mut self, peer: &Peer, store: &IdentityStore) -> SelectorId {
        if let Some(id) = self.by_peer.get(peer) {
            self.selectors
                .get_mut(id)
                .expect("indexed selector exists")
                .users += 1;
            return *id;
        }
        let id = SelectorId(self.next);
        self.next += 1;
        let selected = store
            .iter()
            .filter(|(_, i)| peer.selects_ignoring_node(i))
            .map(|(id, _)| id)
            .collect();
        self.by_peer.insert(peer.clone(), id);
        self.selectors.insert(
            id,
            CachedSelector {
                peer: peer.clone(),
                users: 1,
                selected,
            },
        );
        id
    }

    /// Drops a user; the selector is forgotten when its last user goes.
    pub fn release(&mut self, id: SelectorId) {
        if let Some(sel) = self.selectors.get_mut(&id) {
            sel.users -= 1;
            if sel.users == 0 {
                let sel = self.selectors.remove(&id).expect("present");
                self.by_peer.remove(&sel.peer);
            }
        }
    }

    pub fn peer(&self, id: SelectorId) -> &Peer {
        &self.selectors[&id].peer
    }

    pub fn selected(&self, id: SelectorId) -> &BTreeSet<IdentityId> {
        &self.selectors[&id].selected
    }

    pub fn selects(&self, id: SelectorId, identity: IdentityId) -> bool {
        self.selectors[&id].selected.contains(&identity)
    }

    pub fn len(&self) -> usize {
        self.selectors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.selectors.is_empty()
    }

    /// Applies a batch of identity additions and removals to every selector, and only then
    /// returns the per-selector deltas.
    pub fn apply(
        &mut self,
        added: &[(IdentityId, &Identity)],
        removed: &[IdentityId],
    ) -> HashMap<SelectorId, SelectorDelta> {
        let mut deltas: HashMap<SelectorId, SelectorDelta> = HashMap::new();
        for (sid, sel) in &mut self.selectors {
            for id in removed {
                if sel.selected.remove(id) {
                    deltas.entry(*sid).or_default().removed.push(*id);
                }
            }
            for (id, identity) in added {
                if sel.peer.selects_ignoring_node(identity) && sel.selected.insert(*id) {
                    deltas.entry(*sid).or_default().added.push(*id);
                }
            }
        }
        deltas
    }
}

impl SelectorCache {
    /// The id of a selector already in use.
    pub fn id_of(&self, peer: &Peer) -> Option<SelectorId> {
        self.by_peer.get(peer).copied()
    }
}
