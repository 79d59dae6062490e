//! Each identity's part of a set's name, computed once: an identity's content never changes
//! under its id, and a pod of a new label set makes sets of thousands of identities, where
//! serialising and hashing each identity again for every new set was most of what the change
//! cost. Both datapaths name a set by the sum of its identities' digests (each datapath hashes
//! an identity its own way), summed rather than hashed in order so that no set's identities are
//! sorted: a sum of 128-bit digests, hashed again, is as unlikely to collide as the name itself.

use std::collections::HashMap;

use netpol_engine::{IdentityId, IdentityStore};

use crate::ordered::RemoteSet;

/// One identity's digest, as a datapath computes it.
pub type IdentityDigest = fn(IdentityId, &IdentityStore) -> u128;

/// The digests of identities the store knows, kept by id.
#[derive(Debug, Default)]
pub struct IdentityDigests {
    kept: HashMap<IdentityId, u128>,
}

impl IdentityDigests {
    /// The wrapping sum of the digests of `set`'s identities, in any order. An identity unknown
    /// to the store is digested but not kept, so that its part follows once the store knows it.
    pub fn sum(&mut self, set: &RemoteSet, store: &IdentityStore, digest: IdentityDigest) -> u128 {
        set.identities
            .iter()
            .map(|&id| match self.kept.get(&id) {
                Some(kept) => *kept,
                None if store.get(id).is_some() => {
                    *self.kept.entry(id).or_insert(digest(id, store))
                }
                None => digest(id, store),
            })
            .fold(0u128, u128::wrapping_add)
    }

    /// Forgets the digests of identities gone from the store once they outnumber those it
    /// holds: digests outlive their sets (a set replaced by one with a new identity keeps most
    /// of its identities), so they are not forgotten with them.
    pub fn prune(&mut self, store: &IdentityStore) {
        if self.kept.len() > 2 * store.len() {
            self.kept.retain(|id, _| store.get(*id).is_some());
        }
    }

    pub fn clear(&mut self) {
        self.kept.clear();
    }
}
