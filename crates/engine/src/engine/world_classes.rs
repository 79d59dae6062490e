//! World identities follow the live entries: which class each world prefix belongs to
//! ([`WorldClass`]: the prefixes the live entries' peers name, each pooled with the others that
//! the same live entries select), and the store brought up to date with it.
//!
//! Cost: one pass over the live entries' peers, then per prefix one lookup per distinct length
//! of the CIDR peers' prefixes (the peers that may hold it are among its own truncations), not a
//! test against every peer: one policy may name 50,000 prefixes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use ipnet::IpNet;

use super::identities::IdentityChanges;
use super::Engine;
use crate::identity::{EntryRef, IdentityId, IdentityStore, WorldClass};
use crate::prefixes::truncations;
use crate::selector::{CidrSelector, Peer};

impl Engine {
    /// World identities: 0.0.0.0/0, ::/0 and every prefix a peer of a live entry names (see
    /// `live`: a prefix only entries selecting no local pod name decides nothing here), pooled
    /// into classes. A prefix whose class changed moves to its new class's identity; classes that
    /// neither gain nor lose a prefix keep their ids. New prefixes join first, then stale ones
    /// leave, then those that changed class join their new one, so a class that loses some
    /// prefixes and gains others lives on.
    ///
    /// A change that stays among its own prefixes re-classifies those only
    /// ([`Engine::touched_classes`]); any other, every prefix.
    ///
    /// Returns whether the cluster CIDRs changed: a world prefix came or went, or a whole
    /// address space became or stopped being named (see `Engine::cidrs_holding`).
    pub(super) fn sync_world_identities(&mut self, changes: &mut IdentityChanges) -> bool {
        let delta = std::mem::take(&mut self.policy_delta);
        let mut cidrs_changed = false;
        let (classes, candidates): (BTreeMap<IpNet, WorldClass>, Vec<IpNet>) =
            match self.touched_classes(&delta) {
                Some(touched) => {
                    let mut candidates = touched.gone;
                    candidates.extend(touched.classes.keys().copied());
                    (touched.classes, candidates)
                }
                None => {
                    // A change naming a whole address space is never a touched one, so the
                    // wholes named change only here.
                    let wholes_named = wholes_named(self);
                    cidrs_changed |= wholes_named != self.wholes_named;
                    self.wholes_named = wholes_named;
                    let classes = classify(self);
                    let mut all: Vec<IpNet> = self.store.world_prefixes().map(|(p, _)| p).collect();
                    all.extend(classes.keys().copied());
                    all.sort_unstable();
                    all.dedup();
                    (classes, all)
                }
            };
        // One lookup a prefix: a new one joins its class now, one whose class changed leaves
        // its old one (and joins the new one below).
        let mut moves = Moves::default();
        let mut stale: Vec<IpNet> = Vec::new();
        for prefix in candidates {
            let class = classes.get(&prefix);
            match self.store.world_of(&prefix) {
                None => {
                    if let Some(class) = class {
                        moves.join(&mut self.store, prefix, class);
                        moves.prefixes.push(prefix);
                        cidrs_changed = true;
                    }
                }
                Some(id) if class != self.store.world_class(id) => stale.push(prefix),
                Some(_) => {}
            }
        }
        for (id, gone) in self.store.remove_world_members(&stale) {
            match gone {
                Some(identity) => changes.removed.push((id, identity)),
                None => {
                    moves.readdressed.insert(id);
                }
            }
        }
        for prefix in &stale {
            match classes.get(prefix) {
                Some(class) => moves.join(&mut self.store, *prefix, class),
                None => cidrs_changed = true,
            }
        }
        moves.prefixes.extend(stale);
        for id in moves.added.union(&moves.readdressed) {
            self.store.trim_world_members(*id);
        }
        // In id order: identities are numbered in the order they were made, which is the order
        // of their prefixes.
        changes.added.extend(moves.added.iter().copied());
        for id in moves.readdressed.difference(&moves.added) {
            changes.readdressed.insert(*id);
            changes.worlds_readdressed.push(*id);
        }
        changes.worlds_moved.extend(moves.prefixes);
        #[cfg(debug_assertions)]
        self.assert_classes_exact();
        cidrs_changed
    }

    /// Every world prefix in the class a full classification gives it (debug builds: the tests
    /// check the incremental path against the whole one at every commit).
    #[cfg(debug_assertions)]
    fn assert_classes_exact(&self) {
        let classes = classify(self);
        let stored: BTreeMap<IpNet, WorldClass> = self
            .store
            .world_prefixes()
            .map(|(p, id)| (p, self.store.world_class(id).expect("world").clone()))
            .collect();
        assert_eq!(stored, classes, "incremental world classes");
    }
}

/// What one sync did to the world identities.
#[derive(Default)]
struct Moves {
    /// The class a prefix joined last, with its identity: prefixes come in address order, and
    /// a policy's prefixes are mostly one class, whose key need not be hashed again for each.
    last: Option<(WorldClass, IdentityId)>,
    added: BTreeSet<IdentityId>,
    /// Identities that gained or lost prefixes (and, for those also in `added`, are new).
    readdressed: BTreeSet<IdentityId>,
    /// Prefixes that came, went or changed class.
    prefixes: Vec<IpNet>,
}

impl Moves {
    fn join(&mut self, store: &mut IdentityStore, prefix: IpNet, class: &WorldClass) {
        let (id, new) = match &self.last {
            Some((last, id)) if last == class && store.get(*id).is_some() => {
                store.add_world_member(*id, prefix);
                (*id, false)
            }
            _ => store.insert_world_member(prefix, class.clone()),
        };
        self.last = Some((class.clone(), id));
        if new {
            self.added.insert(id);
        } else {
            self.readdressed.insert(id);
        }
    }
}

/// The live entries' CIDR peers by prefix, each with the entry it belongs to.
#[derive(Default)]
pub(super) struct CidrPeers<'a> {
    /// The live entries with CIDR peers, as classes name them; peers point into it.
    entries: Vec<EntryRef>,
    by_net: HashMap<IpNet, Vec<(u32, &'a CidrSelector)>>,
    lengths: BTreeSet<u8>,
}

impl<'a> CidrPeers<'a> {
    pub(super) fn add(&mut self, entry: EntryRef, peers: &'a [Peer]) {
        let at = self.entries.len() as u32;
        let mut any = false;
        for peer in peers {
            if let Peer::Cidr(cidr) = peer {
                any = true;
                self.by_net
                    .entry(cidr.net.trunc())
                    .or_default()
                    .push((at, cidr));
                self.lengths.insert(cidr.net.prefix_len());
            }
        }
        if any {
            self.entries.push(entry);
        }
    }

    /// The entries (positions in `entries`) whose CIDR peers cover `prefix`, sorted.
    fn covering(&self, prefix: &IpNet) -> Vec<u32> {
        let mut out: Vec<u32> = truncations(prefix, &self.lengths)
            .filter_map(|net| self.by_net.get(&net))
            .flatten()
            .filter(|(_, cidr)| cidr.covers(prefix))
            .map(|(at, _)| *at)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// Every entry of the engine with its name as classes hold it: the engine's own entries first,
/// then each policy's, in the entry list's order (which is the names' order).
pub(super) fn named_entries(engine: &Engine) -> Vec<(usize, EntryRef)> {
    let own = engine.entries.len() - engine.policies.values().sum::<usize>();
    let mut named: Vec<(usize, EntryRef)> =
        (0..own).map(|i| (i, (Arc::from(""), i as u32))).collect();
    let mut start = own;
    for (key, count) in &engine.policies {
        let key: Arc<str> = Arc::from(key.as_str());
        named.extend((0..*count).map(|j| (start + j, (key.clone(), j as u32))));
        start += count;
    }
    named
}

/// Whether a CIDR peer of a live entry names the whole IPv4 (`[0]`) or IPv6 (`[1]`) address
/// space.
fn wholes_named(engine: &Engine) -> [bool; 2] {
    let mut named = [false; 2];
    let prefixes = engine
        .live_entries()
        .flat_map(|e| &e.peers)
        .flat_map(Peer::prefixes);
    for prefix in prefixes.filter(|p| p.prefix_len() == 0) {
        named[usize::from(matches!(prefix, IpNet::V6(_)))] = true;
    }
    named
}

/// Every world prefix the engine needs (`0.0.0.0/0`, `::/0` and every prefix a live entry's
/// peer names, `except`s included) with its class.
fn classify(engine: &Engine) -> BTreeMap<IpNet, WorldClass> {
    let mut prefixes: BTreeSet<IpNet> = ["0.0.0.0/0", "::/0"]
        .iter()
        .map(|s| s.parse().expect("valid"))
        .collect();
    let mut peers = CidrPeers::default();
    for (i, entry) in named_entries(engine) {
        if !engine.live.is_live(i) {
            continue;
        }
        let entry_peers = &engine.entries[i].peers;
        prefixes.extend(entry_peers.iter().flat_map(Peer::prefixes));
        peers.add(entry, entry_peers);
    }
    classify_prefixes(&prefixes, &peers)
}

/// The classes of `prefixes`, a set closed under what `peers` name: a prefix holding another of
/// them is one of its own, a leaf is in the class of the peers' entries covering it.
pub(super) fn classify_prefixes(
    prefixes: &BTreeSet<IpNet>,
    peers: &CidrPeers<'_>,
) -> BTreeMap<IpNet, WorldClass> {
    let mut interned: HashMap<Vec<u32>, Arc<[EntryRef]>> = HashMap::new();
    let mut out = BTreeMap::new();
    let mut ordered = prefixes.iter().peekable();
    while let Some(prefix) = ordered.next() {
        // Prefixes are sorted by first address, then length: one holding others is followed by
        // the first of them.
        let holds_others = ordered.peek().is_some_and(|next| {
            next.addr().is_ipv4() == prefix.addr().is_ipv4() && prefix.contains(&next.addr())
        });
        // The whole address spaces stay identities of their own, whatever they hold: the
        // outside addresses no policy names, which explanations name as such.
        let class = if holds_others || prefix.prefix_len() == 0 {
            WorldClass::Prefix(*prefix)
        } else {
            let covering = peers.covering(prefix);
            let entries = interned.entry(covering).or_insert_with_key(|covering| {
                covering
                    .iter()
                    .map(|at| peers.entries[*at as usize].clone())
                    .collect()
            });
            WorldClass::SelectedBy(entries.clone())
        };
        out.insert(*prefix, class);
    }
    out
}
