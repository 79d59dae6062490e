//! World classes after a change, from what it touched: the prefixes of the entries that came,
//! went or changed liveness, not every prefix of every live entry (issue 33: the fifth policy of
//! 50,000 `/32`s re-classified all 250,000 prefixes, and the hundredth five million).
//!
//! Exact only where the change stays among its own prefixes: no prefix it names is named by,
//! holds or lies in a prefix of an entry it leaves alone (a `/0` aside, which stays an identity
//! of its own; entries with a `/0` peer, which cover every prefix, are consulted). Then no other
//! prefix changes class, and the touched ones are classified among the changed entries alone.
//! Otherwise [`Engine::touched_classes`] says so and the caller classifies everything.

use std::collections::HashSet;
use std::sync::Arc;

use ipnet::IpNet;

use super::world_classes::{classify_prefixes, named_entries, Candidate, CidrPeers};
use super::Engine;
use crate::identity::{EntryRef, IdentityId, WorldClass};
use crate::prefixes::is_single_address;
use crate::selector::Peer;

/// What a policy change did that the world classes follow, noted when the policies are applied.
#[derive(Debug, Default)]
pub(super) struct PolicyDelta {
    /// The keys of the policies staged: every entry of theirs counts as changed.
    pub(super) staged: HashSet<Arc<str>>,
    /// The prefixes the old entries of those policies named, where they were live.
    pub(super) lost: Vec<IpNet>,
}

impl Engine {
    /// The prefixes `delta` and the liveness flips touched, each with its class after the change
    /// and its identity before it, or None where the change reaches prefixes it does not name
    /// (see the module).
    pub(super) fn touched_classes(&self, delta: &PolicyDelta) -> Option<Vec<Candidate>> {
        // The whole address spaces are there from the first sync on, which is a full one.
        let whole: IpNet = "0.0.0.0/0".parse().expect("valid");
        self.store.world_of(&whole)?;
        let mut lost: foldhash::HashSet<IpNet> = delta.lost.iter().copied().collect();
        let mut gained: Vec<IpNet> = Vec::new();
        let mut peers = CidrPeers::default();
        let mut flipped: HashSet<EntryRef> = HashSet::new();
        for (i, entry) in named_entries(self) {
            let entry_peers = &self.entries[i].peers;
            let (live, held) = (self.live.is_live(i), self.live.was_held(i));
            let staged = delta.staged.contains(&entry.0);
            if live && (staged || !held) {
                gained.extend(entry_peers.iter().flat_map(Peer::prefixes));
                flipped.insert(entry.clone());
                peers.add(entry, entry_peers);
            } else if !staged && held && !live {
                lost.extend(entry_peers.iter().flat_map(Peer::prefixes));
                flipped.insert(entry);
            } else if live && covers_everything(entry_peers) {
                peers.add(entry, entry_peers);
            }
        }
        gained.sort_unstable();
        gained.dedup();
        let changed = |r: &EntryRef| delta.staged.contains(&r.0) || flipped.contains(r);
        let mut touched: Vec<IpNet> = lost.iter().copied().collect();
        touched.extend(&gained);
        touched.sort_unstable();
        touched.dedup();
        let mine = |p: &IpNet| touched.binary_search(p).is_ok();
        // Each touched prefix's identity before the change, looked up once.
        let mut before: foldhash::HashMap<IpNet, IdentityId> = Default::default();
        for prefix in &touched {
            if prefix.prefix_len() == 0 {
                return None;
            }
            if let Some(id) = self.store.world_of(prefix) {
                // Named before: by the changed entries alone, or the change is not its own.
                let alone = match self.store.world_class(id)? {
                    WorldClass::SelectedBy(refs, _) => refs.iter().all(changed),
                    WorldClass::Prefix(_) => false,
                };
                if !alone || !lost.contains(prefix) {
                    return None;
                }
                before.insert(*prefix, id);
            }
            // A single address holds nothing but itself: not looked up again.
            let related_inside = !is_single_address(prefix)
                && self
                    .store
                    .worlds_within(*prefix)
                    .any(|(inner, _)| inner != *prefix && !mine(&inner));
            if related_inside {
                return None;
            }
        }
        let mut related_outside = false;
        self.store
            .world_prefixes_holding_each_strictly(&touched, |outer| {
                related_outside |= !mine(&outer);
            });
        if related_outside {
            return None;
        }
        let classes = classify_prefixes(&gained, peers);
        // The prefixes that go, then those that stay or come, each in address order, so that the
        // sync's lookups and removals walk the world map in order. Only the lost prefixes can
        // go: a policy added loses none, and is not searched for them.
        let mut out: Vec<Candidate> = lost
            .into_iter()
            .filter(|p| gained.binary_search(p).is_err())
            .map(|prefix| Candidate {
                prefix,
                class: None,
                id: before.get(&prefix).copied(),
            })
            .collect();
        out.sort_unstable_by_key(|c| c.prefix);
        out.extend(classes.into_iter().map(|(prefix, class)| Candidate {
            prefix,
            class: Some(class),
            id: before.get(&prefix).copied(),
        }));
        Some(out)
    }
}

/// Whether some CIDR peer is a whole address space, which covers every prefix of its family.
fn covers_everything(peers: &[Peer]) -> bool {
    peers
        .iter()
        .any(|p| matches!(p, Peer::Cidr(c) if c.net.prefix_len() == 0))
}
