//! The sets one datapath's rules name, each with its datapath name, its addresses and how many
//! rules name it, kept by the change.
//!
//! Compiled rules name remote sets by their identities ([`RemoteSet`]). A replica joining an
//! identity changes the addresses behind the sets naming it, never the sets: each is patched by
//! the members that came and went. A pod of a new label set is different: every rule that
//! selects it now names a set with one identity more, a *new* set. Named by content, each such
//! set would be created in the datapath with all its addresses (thousands), every rule naming it
//! would change, and the set it replaces would be deleted: the cost of the cluster, not of the
//! change. So a set that comes into use in a step **takes over the name** (and the book slot) of
//! a set that goes out of use in the same step when the two differ only by identities the step
//! changed (that came, went or changed members), and may both hold ranges or neither: the
//! datapath's set keeps its name, its addresses change by those identities' members, and a rule
//! naming it renders exactly as before. The same holds for the pod's deletion, and for any number
//! of such changes coalesced into one step, and for world identities: a live CIDR policy joining
//! the rule that allows every such policy's addresses patches that set by its own addresses,
//! where a new set of every policy's addresses (250,000 for five of 50,000) made each policy
//! cost more than the one before. A world identity's prefixes may hold other members of the
//! set, so such a set is resolved anew and the datapath given the difference.
//!
//! Names are still content-derived where nothing is taken over (the datapath's namer gives a
//! set's canonical name), so a restarted agent finds sets it never renamed in place; a set that
//! took another's name over gets its canonical name back after a restart (one replacement then,
//! instead of one per change). A canonical name already held by a set that took it over is
//! salted, so two sets never share a name.
//!
//! Uses are counted per rule occurrence over the compiled lists in use ([`SetBook::step`] is
//! given the sets of the lists that came into and went out of use), so a step costs the lists
//! that changed, not every list.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use ipnet::IpNet;
use netpol_engine::{IdentityId, IdentityStore};

use super::{sorted_differences, SetAddresses, SetDelta};
use crate::ordered::{Family, RemoteSet};
use netpol_engine::{Shared, SharedId};

/// A set's place in the book: kept while the set, or a set that took its name over, is in use,
/// so a datapath keys what it keeps of a set by it.
pub type SlotId = u32;

/// How a datapath names a set that comes into use: its canonical name for salt 0, other names
/// for other salts (asked for when the canonical one is held by another set).
pub type Namer<'a> = dyn FnMut(&RemoteSet, &IdentityStore, u32) -> String + 'a;

/// Above this many changed identities a step takes no name over: pairing costs a look at each
/// changed identity per set coming or going.
const MAX_PAIRING: usize = 4096;

/// One set in use.
#[derive(Clone, Debug)]
pub struct BookedSet {
    pub set: Shared<RemoteSet>,
    pub name: Arc<str>,
    pub addresses: SetAddresses,
    /// Moves with every change of the addresses: a datapath that recorded the revision it
    /// programmed knows whether it holds them. Revisions are never reused, even across slots.
    pub revision: u64,
    /// Rule occurrences naming the set, over the compiled lists in use.
    uses: usize,
    /// [`identities_sum`] of `set`.
    sum: u64,
}

/// What one step did to the sets: what a datapath sends.
#[derive(Clone, Debug, Default)]
pub struct SetStep {
    /// Sets that came into use under a name of their own, their addresses resolved.
    pub created: Vec<SlotId>,
    /// Sets whose addresses changed under a name that stays: their identities' members came or
    /// went, or a new set took the name over. The delta is from the addresses of the slot's
    /// previous revision.
    pub changed: Vec<(SlotId, SetDelta)>,
    /// Sets no rule names any more, out of the book, with the slots they had (free after the
    /// step, so never also in `created`).
    pub dropped: Vec<(SlotId, BookedSet)>,
    /// How many sets took over the name of the set they replace.
    pub taken_over: usize,
}

impl SetStep {
    pub fn is_empty(&self) -> bool {
        self.created.is_empty() && self.changed.is_empty() && self.dropped.is_empty()
    }
}

/// Every set a datapath's rules name (see the module documentation).
#[derive(Debug, Default)]
pub struct SetBook {
    slots: Vec<Option<BookedSet>>,
    free: Vec<SlotId>,
    by_set: HashMap<Shared<RemoteSet>, SlotId>,
    by_name: HashMap<Arc<str>, SlotId>,
    /// The slots naming each identity, so a change finds its sets without a scan. Slots, not
    /// sets: a set taking another's slot over changes the lists of the identities that differ
    /// only.
    holders: HashMap<IdentityId, Vec<SlotId>>,
    /// Each named identity's members as the sets were last given them, sorted: what a change
    /// is measured against.
    given: HashMap<IdentityId, Vec<IpNet>>,
    /// The world identities among those, whose prefixes decide what else a set admits.
    worlds: HashSet<IdentityId>,
    revision: u64,
}

impl SetBook {
    /// The set in `slot`.
    ///
    /// # Panics
    /// If the slot is free: slots come from this book's steps.
    pub fn get(&self, slot: SlotId) -> &BookedSet {
        self.slots[slot as usize].as_ref().expect("a slot in use")
    }

    pub fn slot_of(&self, set: &RemoteSet) -> Option<SlotId> {
        self.by_set.get(set).copied()
    }

    pub fn by_name(&self, name: &str) -> Option<SlotId> {
        self.by_name.get(name).copied()
    }

    /// The name of `set`, if it is in the book.
    pub fn name_of(&self, set: &RemoteSet) -> Option<&Arc<str>> {
        self.slot_of(set).map(|slot| &self.get(slot).name)
    }

    pub fn iter(&self) -> impl Iterator<Item = (SlotId, &BookedSet)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(slot, booked)| Some((slot as SlotId, booked.as_ref()?)))
    }

    pub fn len(&self) -> usize {
        self.by_set.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_set.is_empty()
    }

    pub fn clear(&mut self) {
        *self = SetBook::default();
    }

    /// The slot of `set`, booked (named, resolved) if it is new, without counting a use: for
    /// callers that name sets one at a time rather than by step (the tools, the simulator's
    /// oracle). Returns whether it was booked now.
    pub fn adopt(
        &mut self,
        set: &RemoteSet,
        store: &IdentityStore,
        namer: &mut Namer<'_>,
    ) -> (SlotId, bool) {
        if let Some(slot) = self.slot_of(set) {
            return (slot, false);
        }
        let slot = self.create(Shared::new(set.clone()), 0, store, namer);
        (slot, true)
    }

    /// One step: the members of the `changed` identities brought up to date in every set
    /// naming them, then the sets of the compiled lists that came into use (`gained`, one item
    /// per rule naming a set) and went out of use (`lost`) counted. A set coming into use takes
    /// over the name of one going out of use that differs from it only by `changed` identities
    /// (of the same kind, see `differs_by_changed`); the others are named anew and resolved.
    /// Sets no rule names any more are dropped.
    pub fn step<'s>(
        &mut self,
        store: &IdentityStore,
        changed: &BTreeSet<IdentityId>,
        gained: impl IntoIterator<Item = &'s Shared<RemoteSet>>,
        lost: impl IntoIterator<Item = &'s Shared<RemoteSet>>,
        namer: &mut Namer<'_>,
    ) -> SetStep {
        let mut deltas: HashMap<SlotId, SetDelta> = HashMap::new();
        self.update_members(store, changed, &mut deltas);

        // Lists share their sets: each distinct one is looked up once.
        let mut seen: HashMap<SharedId, SlotId> = HashMap::new();
        let mut emptied: Vec<SlotId> = Vec::new();
        for set in lost {
            let slot = match seen.get(&set.id()) {
                Some(slot) => *slot,
                None => {
                    let Some(slot) = self.slot_of(set) else {
                        continue;
                    };
                    seen.insert(set.id(), slot);
                    slot
                }
            };
            let booked = self.slot_mut(slot);
            debug_assert!(booked.uses > 0, "a set lost more often than gained");
            booked.uses = booked.uses.saturating_sub(1);
            if booked.uses == 0 {
                emptied.push(slot);
            }
        }
        let mut appearing: Vec<(Shared<RemoteSet>, usize)> = Vec::new();
        let mut appearing_at: HashMap<Shared<RemoteSet>, usize> = HashMap::new();
        for set in gained {
            let known = match seen.get(&set.id()) {
                Some(slot) => Some(*slot),
                None => self.slot_of(set).inspect(|slot| {
                    seen.insert(set.id(), *slot);
                }),
            };
            match known {
                Some(slot) => self.slot_mut(slot).uses += 1,
                None => match appearing_at.get(&**set) {
                    Some(at) => appearing[*at].1 += 1,
                    None => {
                        appearing_at.insert(set.clone(), appearing.len());
                        appearing.push((set.clone(), 1));
                    }
                },
            }
        }
        emptied.sort_unstable();
        emptied.dedup();
        let mut vanished: Vec<SlotId> = emptied
            .into_iter()
            .filter(|slot| self.get(*slot).uses == 0)
            .collect();

        let mut step = SetStep::default();
        let mut fresh: Vec<(Shared<RemoteSet>, usize)> = Vec::new();
        if vanished.is_empty() || changed.len() > MAX_PAIRING {
            fresh = appearing;
        } else {
            let mut candidates: HashMap<(Family, u64), Vec<SlotId>> = HashMap::new();
            for slot in &vanished {
                let booked = self.get(*slot);
                let key = (
                    booked.set.family,
                    stable_sum(&booked.set, booked.sum, changed),
                );
                candidates.entry(key).or_default().push(*slot);
            }
            for (set, uses) in appearing {
                let sum = identities_sum(&set);
                let key = (set.family, stable_sum(&set, sum, changed));
                let taken = candidates.get_mut(&key).and_then(|slots| {
                    let at = slots
                        .iter()
                        .position(|slot| self.differs_by_changed(&set, *slot, changed, store))?;
                    Some(slots.remove(at))
                });
                match taken {
                    Some(slot) => {
                        let delta = self.take_over(slot, set, uses, sum, store);
                        let previous = deltas.remove(&slot).unwrap_or_default();
                        deltas.insert(slot, previous.then(delta));
                        vanished.retain(|s| *s != slot);
                        step.taken_over += 1;
                    }
                    None => fresh.push((set, uses)),
                }
            }
        }
        // Dropped before the new ones are named: a name the step frees can be given again.
        let mut freed = Vec::new();
        for slot in vanished {
            deltas.remove(&slot);
            step.dropped.push((slot, self.drop_slot(slot)));
            freed.push(slot);
        }
        for (set, uses) in fresh {
            step.created.push(self.create(set, uses, store, namer));
        }
        self.free.extend(freed);

        let mut changed_slots: Vec<(SlotId, SetDelta)> = deltas
            .into_iter()
            .filter(|(_, delta)| !delta.is_empty())
            .collect();
        changed_slots.sort_unstable_by_key(|(slot, _)| *slot);
        for (slot, _) in &changed_slots {
            let revision = self.next_revision();
            self.slot_mut(*slot).revision = revision;
        }
        step.changed = changed_slots;
        step
    }

    /// Every set resolved anew and compared with what the book holds, the members of every
    /// named identity taken again: what a resync does, in case a patch went wrong. Returns the
    /// sets whose addresses differed, with the delta that corrects them (and their new
    /// revision), which should be none.
    pub fn refresh(&mut self, store: &IdentityStore) -> Vec<(SlotId, SetDelta)> {
        for (id, members) in &mut self.given {
            *members = sorted_members(store, *id);
        }
        let mut corrected = Vec::new();
        for slot in 0..self.slots.len() as SlotId {
            let Some(booked) = self.slots[slot as usize].as_ref() else {
                continue;
            };
            let resolved = SetAddresses::resolve(&booked.set, store);
            if resolved == booked.addresses {
                continue;
            }
            let (removed, added) =
                sorted_differences(booked.addresses.nets().copied(), resolved.nets().copied());
            let revision = self.next_revision();
            let booked = self.slot_mut(slot);
            booked.addresses = resolved;
            booked.revision = revision;
            corrected.push((slot, SetDelta { added, removed }));
        }
        corrected
    }

    fn slot_mut(&mut self, slot: SlotId) -> &mut BookedSet {
        self.slots[slot as usize].as_mut().expect("a slot in use")
    }

    fn next_revision(&mut self) -> u64 {
        self.revision += 1;
        self.revision
    }

    /// Brings every set naming a `changed` identity up to date with its members now, at the
    /// cost of the members that came and went, not of the sets' sizes.
    fn update_members(
        &mut self,
        store: &IdentityStore,
        changed: &BTreeSet<IdentityId>,
        deltas: &mut HashMap<SlotId, SetDelta>,
    ) {
        for id in changed {
            let (Some(holders), Some(given)) = (self.holders.get(id), self.given.get_mut(id))
            else {
                continue;
            };
            let now = sorted_members(store, *id);
            let (removed, added) = sorted_differences(given.iter().copied(), now.iter().copied());
            *given = now;
            if added.is_empty() && removed.is_empty() {
                continue;
            }
            let world = self.worlds.contains(id);
            for slot in holders.clone() {
                let delta = if world {
                    // A world class gained or lost prefixes: they may hold, or stop holding, other
                    // members of the set, which a patch by the class's members alone cannot see.
                    self.resolve_again(slot, store)
                } else {
                    self.slot_mut(slot).addresses.patch(&added, &removed, world)
                };
                if !delta.is_empty() {
                    let previous = deltas.remove(&slot).unwrap_or_default();
                    deltas.insert(slot, previous.then(delta));
                }
            }
        }
    }

    /// The set in `slot` resolved anew; returns how its addresses changed.
    fn resolve_again(&mut self, slot: SlotId, store: &IdentityStore) -> SetDelta {
        let booked = self.slot_mut(slot);
        let resolved = SetAddresses::resolve(&booked.set, store);
        let (removed, added) =
            sorted_differences(booked.addresses.nets().copied(), resolved.nets().copied());
        booked.addresses = resolved;
        SetDelta { added, removed }
    }

    /// Whether `set` differs from the set in `slot` only by identities in `changed`, is of its
    /// family, and may hold ranges exactly when that set may ([`SetAddresses::holds_ranges`]: a
    /// datapath may declare the two kinds differently, under names of their own).
    fn differs_by_changed(
        &self,
        set: &RemoteSet,
        slot: SlotId,
        changed: &BTreeSet<IdentityId>,
        store: &IdentityStore,
    ) -> bool {
        let booked = self.get(slot);
        if booked.set.family != set.family
            || booked.addresses.holds_ranges() != super::holds_ranges(set, store)
        {
            return false;
        }
        let (gone, came) = sorted_differences(
            booked.set.identities.iter().copied(),
            set.identities.iter().copied(),
        );
        gone.iter().chain(&came).all(|id| changed.contains(id))
    }

    /// `set` takes the slot and name of the set in `slot` over; returns how its addresses
    /// differ from that set's.
    fn take_over(
        &mut self,
        slot: SlotId,
        set: Shared<RemoteSet>,
        uses: usize,
        sum: u64,
        store: &IdentityStore,
    ) -> SetDelta {
        let old = self.get(slot).set.clone();
        let (gone, came) = sorted_differences(
            old.identities.iter().copied(),
            set.identities.iter().copied(),
        );
        // A world identity's prefixes may hold other members of the set, which a patch by its
        // own members cannot see: then the set is resolved anew (the datapath still gets a
        // patch, the difference, not the whole set).
        let worlds_differ = gone
            .iter()
            .chain(&came)
            .any(|id| self.worlds.contains(id) || store.get(*id).is_some_and(|i| i.is_world()));
        let mut delta = SetDelta::default();
        for id in &gone {
            if !worlds_differ {
                let members = self.given.get(id).cloned().unwrap_or_default();
                let removed = self.slot_mut(slot).addresses.patch(&[], &members, false);
                delta = delta.then(removed);
            }
            self.unhold(*id, slot);
        }
        for id in &came {
            let members = self
                .given
                .entry(*id)
                .or_insert_with(|| sorted_members(store, *id))
                .clone();
            if store.get(*id).is_some_and(|i| i.is_world()) {
                self.worlds.insert(*id);
            }
            if !worlds_differ {
                let added = self.slot_mut(slot).addresses.patch(&members, &[], false);
                delta = delta.then(added);
            }
            self.holders.entry(*id).or_default().push(slot);
        }
        self.by_set.remove(&old);
        self.by_set.insert(set.clone(), slot);
        let booked = self.slot_mut(slot);
        booked.set = set;
        booked.uses = uses;
        booked.sum = sum;
        if worlds_differ {
            delta = self.resolve_again(slot, store);
        }
        delta
    }

    /// Books a new set under a name of its own.
    fn create(
        &mut self,
        set: Shared<RemoteSet>,
        uses: usize,
        store: &IdentityStore,
        namer: &mut Namer<'_>,
    ) -> SlotId {
        let mut salt = 0;
        let name: Arc<str> = loop {
            let name = namer(&set, store, salt);
            if !self.by_name.contains_key(name.as_str()) {
                break name.into();
            }
            salt += 1;
        };
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as SlotId
            }
        };
        for id in &set.identities {
            self.holders.entry(*id).or_default().push(slot);
            if !self.given.contains_key(id) {
                self.given.insert(*id, sorted_members(store, *id));
                if store.get(*id).is_some_and(|i| i.is_world()) {
                    self.worlds.insert(*id);
                }
            }
        }
        let revision = self.next_revision();
        let booked = BookedSet {
            addresses: SetAddresses::resolve(&set, store),
            sum: identities_sum(&set),
            set: set.clone(),
            name: name.clone(),
            revision,
            uses,
        };
        self.by_set.insert(set, slot);
        self.by_name.insert(name, slot);
        self.slots[slot as usize] = Some(booked);
        slot
    }

    /// Takes the set in `slot` out of the book (the slot is not yet free for reuse).
    fn drop_slot(&mut self, slot: SlotId) -> BookedSet {
        let booked = self.slots[slot as usize].take().expect("a slot in use");
        self.by_set.remove(&booked.set);
        self.by_name.remove(&booked.name);
        for id in &booked.set.identities {
            self.unhold(*id, slot);
        }
        booked
    }

    /// `slot` no longer names `id`; an identity no set names is forgotten.
    fn unhold(&mut self, id: IdentityId, slot: SlotId) {
        let Some(holders) = self.holders.get_mut(&id) else {
            return;
        };
        if let Some(at) = holders.iter().position(|s| *s == slot) {
            holders.swap_remove(at);
        }
        if holders.is_empty() {
            self.holders.remove(&id);
            self.given.remove(&id);
            self.worlds.remove(&id);
        }
    }
}

/// A well-mixed hash of one identity (SplitMix64's finaliser), summed over a set's identities.
fn identity_hash(id: IdentityId) -> u64 {
    let mut z = u64::from(id.0).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The sum of a set's identity hashes: two sets differing only by some identities have sums
/// differing by those identities' hashes, so they are found without comparing sets.
fn identities_sum(set: &RemoteSet) -> u64 {
    set.identities
        .iter()
        .fold(0u64, |sum, id| sum.wrapping_add(identity_hash(*id)))
}

/// The sum of `set`'s identities outside `changed`, from its whole sum: equal for two sets
/// that differ only by changed identities. Looks each changed identity up in the set, or each
/// identity of the set up in `changed`, whichever is fewer.
fn stable_sum(set: &RemoteSet, sum: u64, changed: &BTreeSet<IdentityId>) -> u64 {
    let inside: Box<dyn Iterator<Item = &IdentityId>> = if changed.len() < set.identities.len() {
        Box::new(changed.iter().filter(|id| set.contains(**id)))
    } else {
        Box::new(set.identities.iter().filter(|id| changed.contains(id)))
    };
    inside.fold(sum, |sum, id| sum.wrapping_sub(identity_hash(*id)))
}

fn sorted_members(store: &IdentityStore, id: IdentityId) -> Vec<IpNet> {
    let mut members = store.members(id).to_vec();
    // Stable: members come in sorted runs (see `SetAddresses::resolve`).
    members.sort();
    members.dedup();
    members
}

#[cfg(test)]
mod tests;
