//! Which class each world prefix belongs to ([`WorldClass`]): the prefixes the live entries'
//! peers name, each pooled with the others that the same live entries select.
//!
//! Cost: one pass over the live entries' peers, then per prefix one lookup per distinct length
//! of the CIDR peers' prefixes (the peers that may hold it are among its own truncations), not a
//! test against every peer: one policy may name 50,000 prefixes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use ipnet::IpNet;

use super::Engine;
use crate::identity::{EntryRef, WorldClass};
use crate::prefixes::truncations;
use crate::selector::{CidrSelector, Peer};

/// The live entries' CIDR peers by prefix, each with the entry it belongs to.
#[derive(Default)]
struct CidrPeers<'a> {
    /// The live entries with CIDR peers, as classes name them; peers point into it.
    entries: Vec<EntryRef>,
    by_net: HashMap<IpNet, Vec<(u32, &'a CidrSelector)>>,
    lengths: BTreeSet<u8>,
}

impl<'a> CidrPeers<'a> {
    fn add(&mut self, entry: EntryRef, peers: &'a [Peer]) {
        let at = self.entries.len() as u32;
        let mut any = false;
        for peer in peers {
            if let Peer::Cidr(cidr) = peer {
                any = true;
                self.by_net.entry(cidr.net.trunc()).or_default().push((at, cidr));
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

/// Every world prefix the engine needs (`0.0.0.0/0`, `::/0` and every prefix a live entry's
/// peer names, `except`s included) with its class.
pub(super) fn classify(engine: &Engine) -> BTreeMap<IpNet, WorldClass> {
    let mut prefixes: BTreeSet<IpNet> = ["0.0.0.0/0", "::/0"]
        .iter()
        .map(|s| s.parse().expect("valid"))
        .collect();
    let mut peers = CidrPeers::default();
    // The engine's own entries first, then each policy's, in the entry list's order.
    let own = engine.entries.len() - engine.policies.values().sum::<usize>();
    let mut named: Vec<(usize, EntryRef)> = (0..own).map(|i| (i, (Arc::from(""), i as u32))).collect();
    let mut start = own;
    for (key, count) in &engine.policies {
        let key: Arc<str> = Arc::from(key.as_str());
        named.extend((0..*count).map(|j| (start + j, (key.clone(), j as u32))));
        start += count;
    }
    for (i, entry) in named {
        if !engine.live.is_live(i) {
            continue;
        }
        let entry_peers = &engine.entries[i].peers;
        prefixes.extend(entry_peers.iter().flat_map(Peer::prefixes));
        peers.add(entry, entry_peers);
    }
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
