//! The named address sets of netpol's table: each compiled remote set ([`RemoteSet`]) as an
//! nftables set, named and kept up to date by the neutral set book
//! ([`netpol_datapath::sets::SetBook`]).
//!
//! A set's canonical name is a hash of its identities' contents, not of their ids (a restarted
//! agent numbers identities in another order and must find the same sets, and chains, in
//! place): `a4_<hash>` / `a6_<hash>`, with `i` after the family for an interval set (one naming
//! a world identity that may hold ranges). A replica changes a set's elements only, never its
//! name; a set replaced by one that differs by identities a change brought (a pod of a new label
//! set) keeps the name of the set it replaces, so chains naming it stay as they are and the
//! kernel is sent the new identity's elements only. Neither changes whether a set is an interval
//! set: a world class holds single addresses or ranges for good
//! ([`netpol_engine::Leaves`]), and a set takes over only the name of a set of its own kind.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use netpol_datapath::sets::{
    BookedSet, IdentityDigests, SetBook, SetDelta, SetStep, SlotId, SortedNets,
};
use netpol_datapath::{Family, RemoteSet};
use netpol_engine::{IdentityId, IdentityStore};

use crate::naming::hash;
use netpol_engine::Shared;

/// A named set's contents, as the table declares them: what one [`RemoteSet`] (identities, one
/// family) holds now. Its name is stable for the identities, not for their addresses: when a
/// replica comes or goes only the set's elements change, never the chains that name it (`@name`,
/// [`SetRef`]).
#[derive(Clone, Debug)]
pub struct AddressSet {
    /// `a4_<hash>` or `a6_<hash>` (`i` after the family for an interval set).
    pub name: Arc<str>,
    pub v6: bool,
    /// Whether the set holds prefixes (`flags interval`): a world identity that may hold ranges
    /// is in it. A set of single addresses, pods' and `/32` classes' alike, is a hash set.
    pub interval: bool,
    /// Disjoint prefixes, sorted (host prefixes for single addresses); may be empty. Shared
    /// with the set book, chunk by chunk.
    pub nets: SortedNets,
    /// The revision of these contents in the set book that keeps them; 0 for a set built
    /// alone, whose contents are then compared instead.
    pub revision: u64,
    /// How these contents differ from those of revision `.0`: what a kernel holding that
    /// revision is sent.
    pub patch: Option<Arc<(u64, SetDelta)>>,
}

/// Sets are equal by what the kernel would hold; revisions and patches are how to get there.
impl PartialEq for AddressSet {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.v6 == other.v6
            && self.interval == other.interval
            && ((self.revision != 0 && self.revision == other.revision) || self.nets == other.nets)
    }
}

impl Eq for AddressSet {}

impl AddressSet {
    /// The set of `set`, its addresses resolved through `store`, under its canonical name.
    pub fn resolve(set: &RemoteSet, store: &IdentityStore) -> Arc<AddressSet> {
        SetCache::default().resolve(set, store)
    }

    /// How the chain rules name this set.
    pub fn reference(&self) -> SetRef {
        SetRef {
            name: self.name.clone(),
            v6: self.v6,
        }
    }
}

/// A named set as a chain rule names it: `ip saddr @name` (`ip6` for an IPv6 set).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SetRef {
    pub name: Arc<str>,
    pub v6: bool,
}

/// Every set in use with its model (name, contents, revision), kept across calls.
#[derive(Debug, Default)]
pub struct SetCache {
    book: SetBook,
    models: HashMap<SlotId, Arc<AddressSet>>,
    /// The same models by name: what a table's sets are.
    by_name: BTreeMap<Arc<str>, Arc<AddressSet>>,
    /// Each known identity's part of the canonical names ([`identity_digest`]).
    identity_digests: IdentityDigests,
}

impl SetCache {
    /// The model of `set`, booked on first use: for callers that build chains one endpoint at a
    /// time (the scenario checker, tests). The enforcer books sets by [`SetCache::step`].
    pub fn resolve(&mut self, set: &RemoteSet, store: &IdentityStore) -> Arc<AddressSet> {
        let slot = match self.book.slot_of(set) {
            Some(slot) => slot,
            None => {
                let digests = &mut self.identity_digests;
                let (slot, _) = self.book.adopt(set, store, &mut |set, store, salt| {
                    canonical_name(digests, set, store, salt)
                });
                self.insert(slot, model(self.book.get(slot), None));
                slot
            }
        };
        self.models[&slot].clone()
    }

    /// The model of a booked set.
    pub fn model(&self, set: &RemoteSet) -> Option<&Arc<AddressSet>> {
        self.models.get(&self.book.slot_of(set)?)
    }

    /// One step of the book (see [`SetBook::step`]): the sets of the compiled lists that came
    /// into use (`gained`) and went out of use (`lost`), and the identities whose members
    /// changed. The models of changed sets carry the patch from their previous revision.
    pub fn step<'s>(
        &mut self,
        store: &IdentityStore,
        changed: &BTreeSet<IdentityId>,
        gained: impl IntoIterator<Item = &'s Shared<RemoteSet>>,
        lost: impl IntoIterator<Item = &'s Shared<RemoteSet>>,
    ) -> SetStep {
        self.identity_digests.prune(store);
        let digests = &mut self.identity_digests;
        let step = self
            .book
            .step(store, changed, gained, lost, &mut |set, store, salt| {
                canonical_name(digests, set, store, salt)
            });
        for (slot, _) in &step.dropped {
            if let Some(model) = self.models.remove(slot) {
                self.by_name.remove(&model.name);
            }
        }
        for slot in &step.created {
            self.insert(*slot, model(self.book.get(*slot), None));
        }
        for (slot, delta) in &step.changed {
            let from = self.models.get(slot).map(|m| m.revision);
            let patch = from.map(|from| (from, delta.clone()));
            self.insert(*slot, model(self.book.get(*slot), patch));
        }
        step
    }

    /// The members of the `changed` identities brought up to date in every booked set: for
    /// callers that book sets one at a time ([`SetCache::resolve`]).
    pub fn update(&mut self, store: &IdentityStore, changed: &BTreeSet<IdentityId>) {
        self.step(store, changed, [], []);
    }

    /// Every set resolved anew (a resync), correcting any a patch got wrong; returns how many.
    pub fn refresh(&mut self, store: &IdentityStore) -> usize {
        let corrected = self.book.refresh(store);
        for (slot, _) in &corrected {
            self.insert(*slot, model(self.book.get(*slot), None));
        }
        corrected.len()
    }

    /// The model of every booked set, by name.
    pub fn by_name(&self) -> &BTreeMap<Arc<str>, Arc<AddressSet>> {
        &self.by_name
    }

    fn insert(&mut self, slot: SlotId, model: Arc<AddressSet>) {
        self.by_name.insert(model.name.clone(), model.clone());
        if let Some(old) = self.models.insert(slot, model) {
            // A slot keeps its name, even when another set took it over.
            debug_assert!(self.by_name.contains_key(&old.name));
        }
    }

    pub fn clear(&mut self) {
        *self = SetCache::default();
    }
}

/// The model of a booked set, with the patch that made it from an earlier revision.
fn model(booked: &BookedSet, patch: Option<(u64, SetDelta)>) -> Arc<AddressSet> {
    Arc::new(AddressSet {
        name: booked.name.clone(),
        v6: booked.set.family == Family::V6,
        interval: booked.addresses.holds_ranges(),
        nets: booked.addresses.shared(),
        revision: booked.revision,
        patch: patch.map(Arc::new),
    })
}

/// A set's canonical name (salted when another set holds it): `a4_`/`a6_` (`a4i_`/`a6i_` for an
/// interval set) and a hash of its identities' contents. The identities' parts are summed, not
/// sorted and hashed in order: a set of thousands of identities costs one addition each.
fn canonical_name(
    digests: &mut IdentityDigests,
    set: &RemoteSet,
    store: &IdentityStore,
    salt: u32,
) -> String {
    let sum = digests.sum(set, store, identity_digest);
    let interval = netpol_datapath::sets::holds_ranges(set, store);
    let digest = if salt == 0 {
        hash([format!("{sum:032x}").as_str()])
    } else {
        hash([format!("{sum:032x}").as_str(), &salt.to_string()])
    };
    format!(
        "a{}{}_{digest}",
        if set.family == Family::V6 { 6 } else { 4 },
        if interval { "i" } else { "" },
    )
}

/// One identity's part of a set's name: 128 bits of a SHA-256 of its content digest (of its id
/// while the store does not know it).
fn identity_digest(id: IdentityId, store: &IdentityStore) -> u128 {
    use sha2::{Digest, Sha256};
    let content = store
        .content_digest(id)
        .map_or_else(|| format!("#{}", id.0), |d| format!("{d:016x}"));
    let digest = Sha256::digest(content.as_bytes());
    u128::from_le_bytes(digest[..16].try_into().expect("SHA-256 has 32 bytes"))
}
