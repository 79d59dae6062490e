//! World identities follow the live entries: which class each world prefix belongs to
//! ([`WorldClass`]: the prefixes the live entries' peers name, each pooled with the others that
//! the same live entries select), and the store brought up to date with it.
//!
//! Cost: one pass over the live entries' peers, a sort of them by network, then one walk beside
//! the sorted prefixes ([`CoveringWalk`]), not a test against every peer: one policy may name
//! 50,000 prefixes.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use ipnet::IpNet;

use super::identities::IdentityChanges;
use super::Engine;
use crate::identity::{EntryRef, IdentityId, IdentityStore, Leaves, WorldClass};
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
        let candidates = match self.touched_classes(&delta) {
            Some(touched) => touched,
            None => {
                // A change naming a whole address space is never a touched one, so the wholes
                // named change only here.
                let (classes, wholes_named) = classify(self);
                cidrs_changed |= wholes_named != self.wholes_named;
                self.wholes_named = wholes_named;
                join_existing(classes, self.store.world_prefixes())
            }
        };
        // A new prefix joins its class now, one whose class changed leaves its old one (and
        // joins the new one below).
        let mut moves = Moves::default();
        let mut stale: Vec<IpNet> = Vec::new();
        let mut rejoining: Vec<(IpNet, WorldClass)> = Vec::new();
        for Candidate { prefix, class, id } in candidates {
            match id {
                None => {
                    if let Some(class) = class {
                        moves.join(&mut self.store, prefix, &class);
                        moves.prefixes.push(prefix);
                        cidrs_changed = true;
                    }
                }
                Some(id) if class.as_ref() != self.store.world_class(id) => {
                    stale.push(prefix);
                    match class {
                        Some(class) => rejoining.push((prefix, class)),
                        None => cidrs_changed = true,
                    }
                }
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
        for (prefix, class) in &rejoining {
            moves.join(&mut self.store, *prefix, class);
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
        let (classes, _) = classify(self);
        let stored: Vec<(IpNet, WorldClass)> = self
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

/// A world prefix a sync looks at: its class after the change (None: it goes) and its identity
/// before it (None: it is new).
pub(super) struct Candidate {
    pub(super) prefix: IpNet,
    pub(super) class: Option<WorldClass>,
    pub(super) id: Option<IdentityId>,
}

/// Every prefix that is a world prefix now or has a class after the change, from both sorted
/// lists in one pass: a lookup in the world map per prefix was most of a sync's time.
fn join_existing(
    classes: Vec<(IpNet, WorldClass)>,
    existing: impl Iterator<Item = (IpNet, IdentityId)>,
) -> Vec<Candidate> {
    let mut out = Vec::with_capacity(classes.len());
    let mut existing = existing.peekable();
    for (prefix, class) in classes {
        while let Some((before, id)) = existing.next_if(|(p, _)| *p < prefix) {
            out.push(Candidate {
                prefix: before,
                class: None,
                id: Some(id),
            });
        }
        let id = existing.next_if(|(p, _)| *p == prefix).map(|(_, id)| id);
        out.push(Candidate {
            prefix,
            class: Some(class),
            id,
        });
    }
    out.extend(existing.map(|(prefix, id)| Candidate {
        prefix,
        class: None,
        id: Some(id),
    }));
    out
}

/// The live entries' CIDR peers, each with the entry it belongs to.
#[derive(Default)]
pub(super) struct CidrPeers<'a> {
    /// The live entries with CIDR peers, as classes name them; peers point into it.
    entries: Vec<EntryRef>,
    /// Every CIDR peer with its network (truncated) and the position of its entry in
    /// `entries`, in the order added: [`classify_prefixes`] sorts them by network once, then
    /// walks them beside the sorted prefixes. A hash map by network cost a random memory access
    /// per peer and per prefix, most of a sync's time for 50,000-prefix policies.
    peers: Vec<(IpNet, u32, &'a CidrSelector)>,
}

impl<'a> CidrPeers<'a> {
    pub(super) fn add(&mut self, entry: EntryRef, peers: &'a [Peer]) {
        let at = self.entries.len() as u32;
        let before = self.peers.len();
        self.peers
            .extend(peers.iter().filter_map(|peer| match peer {
                Peer::Cidr(cidr) => Some((cidr.net.trunc(), at, cidr)),
                _ => None,
            }));
        if self.peers.len() > before {
            self.entries.push(entry);
        }
    }
}

/// The CIDR peers covering each of a sorted run of prefixes, found in one walk beside them.
///
/// Networks are either nested or disjoint, and sort by first address then length, so a network
/// holding a prefix sorts before it. The walk keeps the peers met so far whose networks may
/// still hold what comes: a stack in which each network holds the ones above it. A network that
/// does not hold the next prefix (or the next network met) ends before it, and so before
/// everything after it: it leaves the stack for good.
struct CoveringWalk<'p, 'a> {
    peers: &'p [(IpNet, u32, &'a CidrSelector)],
    next: usize,
    open: Vec<usize>,
}

impl<'p, 'a> CoveringWalk<'p, 'a> {
    /// `peers` sorted by network.
    fn new(peers: &'p [(IpNet, u32, &'a CidrSelector)]) -> Self {
        debug_assert!(peers.is_sorted_by_key(|(net, ..)| *net));
        CoveringWalk {
            peers,
            next: 0,
            open: Vec::new(),
        }
    }

    /// The entries (positions in `CidrPeers::entries`) whose CIDR peers cover `prefix`,
    /// sorted, into `out`. Each prefix must sort after the one asked before.
    fn covering(&mut self, prefix: &IpNet, out: &mut Vec<u32>) {
        while let Some((net, ..)) = self.peers.get(self.next).filter(|(net, ..)| net <= prefix) {
            self.close_before(net);
            self.open.push(self.next);
            self.next += 1;
        }
        self.close_before(prefix);
        out.clear();
        out.extend(
            self.open
                .iter()
                .map(|i| &self.peers[*i])
                .filter(|(_, _, cidr)| cidr.covers(prefix))
                .map(|(_, at, _)| *at),
        );
        out.sort_unstable();
        out.dedup();
    }

    /// Drops the open networks that do not hold `net` (see the type).
    fn close_before(&mut self, net: &IpNet) {
        while let Some(top) = self.open.last() {
            if self.peers[*top].0.contains(net) {
                break;
            }
            self.open.pop();
        }
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

/// Every world prefix the engine needs (`0.0.0.0/0`, `::/0` and every prefix a live entry's
/// peer names, `except`s included) with its class, in order; and whether a live peer names the
/// whole IPv4 (`[0]`) or IPv6 (`[1]`) address space itself.
fn classify(engine: &Engine) -> (Vec<(IpNet, WorldClass)>, [bool; 2]) {
    let mut prefixes: Vec<IpNet> = Vec::new();
    let mut peers = CidrPeers::default();
    for (i, entry) in named_entries(engine) {
        if !engine.live.is_live(i) {
            continue;
        }
        let entry_peers = &engine.entries[i].peers;
        prefixes.extend(entry_peers.iter().flat_map(Peer::prefixes));
        peers.add(entry, entry_peers);
    }
    let mut wholes_named = [false; 2];
    for whole in prefixes.iter().filter(|p| p.prefix_len() == 0) {
        wholes_named[usize::from(matches!(whole, IpNet::V6(_)))] = true;
    }
    prefixes.extend(["0.0.0.0/0", "::/0"].map(|s| s.parse::<IpNet>().expect("valid")));
    prefixes.sort_unstable();
    prefixes.dedup();
    (classify_prefixes(&prefixes, peers), wholes_named)
}

/// The classes of `prefixes` (sorted, without duplicates), a set closed under what `peers`
/// name: a prefix holding another of them is one of its own, a leaf is in the class of the
/// peers' entries covering it. In the prefixes' order.
pub(super) fn classify_prefixes(
    prefixes: &[IpNet],
    mut peers: CidrPeers<'_>,
) -> Vec<(IpNet, WorldClass)> {
    peers.peers.sort_unstable_by_key(|(net, ..)| *net);
    let mut walk = CoveringWalk::new(&peers.peers);
    let mut interned: HashMap<Vec<u32>, Arc<[EntryRef]>> = HashMap::new();
    let mut out = Vec::with_capacity(prefixes.len());
    let mut covering = Vec::new();
    // The class of the last leaf: a policy's prefixes come in a run, mostly of one class.
    let mut last: Option<(Vec<u32>, Arc<[EntryRef]>)> = None;
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
            walk.covering(prefix, &mut covering);
            let entries = match &last {
                Some((before, entries)) if *before == covering => entries.clone(),
                _ => {
                    let entries = interned
                        .entry(covering.clone())
                        .or_insert_with_key(|covering| {
                            covering
                                .iter()
                                .map(|at| peers.entries[*at as usize].clone())
                                .collect()
                        })
                        .clone();
                    last = Some((covering.clone(), entries.clone()));
                    entries
                }
            };
            WorldClass::SelectedBy(entries, Leaves::of(prefix))
        };
        out.push((*prefix, class));
    }
    out
}
