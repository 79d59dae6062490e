//! The ipcache's world prefixes: each prefix's identity, sorted so that the prefixes inside one
//! are a range, with a count of the prefix lengths present.
//!
//! Looking up the prefixes that hold an address tries each length the map holds, not every
//! length there is: a cluster's world prefixes come in a few lengths (the whole address spaces,
//! the cluster CIDRs, the `/32`s of a CIDR-heavy policy), while an IPv6 address has 129. The
//! fuzzing harness and the datapath's nesting resolve addresses by the hundred thousand.
//! The prefixes themselves are kept compactly ([`PrefixMap`]).

use std::net::IpAddr;
use std::ops::RangeInclusive;

use ipnet::IpNet;

use super::IdentityId;
use crate::prefix_map::PrefixMap;

/// The last truncation [`WorldMap::holding_each`] looked up at one length, with what it found.
type LastLookup = Option<(IpNet, Option<IdentityId>)>;

#[derive(Clone, Debug)]
pub(super) struct WorldMap {
    by_prefix: PrefixMap<IdentityId>,
    /// How many prefixes of each length: `[0]` IPv4 (lengths 0-32), `[1]` IPv6 (0-128).
    lengths: [Vec<u32>; 2],
}

impl Default for WorldMap {
    fn default() -> Self {
        WorldMap {
            by_prefix: PrefixMap::default(),
            lengths: [vec![0; 33], vec![0; 129]],
        }
    }
}

fn family(net: &IpNet) -> usize {
    usize::from(matches!(net, IpNet::V6(_)))
}

impl WorldMap {
    /// Maps `prefix` to `id`, returning the identity it had.
    pub fn insert(&mut self, prefix: IpNet, id: IdentityId) -> Option<IdentityId> {
        let old = self.by_prefix.insert(prefix, id);
        if old.is_none() {
            self.lengths[family(&prefix)][usize::from(prefix.prefix_len())] += 1;
        }
        old
    }

    pub fn remove(&mut self, prefix: &IpNet) -> Option<IdentityId> {
        let old = self.by_prefix.remove(prefix);
        if old.is_some() {
            self.lengths[family(prefix)][usize::from(prefix.prefix_len())] -= 1;
        }
        old
    }

    pub fn get(&self, prefix: &IpNet) -> Option<IdentityId> {
        self.by_prefix.get(prefix).copied()
    }

    /// Every prefix with its identity, in order.
    pub fn iter(&self) -> impl Iterator<Item = (IpNet, IdentityId)> + '_ {
        self.by_prefix.iter().map(|(net, id)| (net, *id))
    }

    /// The prefixes whose address lies in `addresses` (both of one family), in order.
    pub fn starting_in(
        &self,
        addresses: RangeInclusive<IpAddr>,
    ) -> impl Iterator<Item = (IpNet, IdentityId)> + '_ {
        self.by_prefix
            .starting_in(addresses)
            .map(|(net, id)| (net, *id))
    }

    /// The prefixes of the map holding `net` (itself included), shortest first.
    pub fn holding<'a>(&'a self, net: &'a IpNet) -> impl Iterator<Item = (IpNet, IdentityId)> + 'a {
        let counts = &self.lengths[family(net)];
        (0..=net.prefix_len())
            .filter(move |len| counts[usize::from(*len)] > 0)
            .filter_map(move |len| {
                let outer = IpNet::new(net.addr(), len).ok()?.trunc();
                self.get(&outer).map(|id| (outer, id))
            })
    }

    /// The prefixes of the map holding each of `nets`, given in order, with `lengths` picking
    /// which lengths to look at for each: `f` gets each net with each prefix holding it.
    ///
    /// A shorter prefix holding one of a run of sorted prefixes mostly holds the next too, so a
    /// length is looked up again only when the net's truncation to it differs from the last
    /// net's: a CIDR-heavy policy's 50,000 `/32`s cost one lookup each at their own length, not
    /// one at every length present (issue 33).
    pub fn holding_each<'n>(
        &self,
        nets: impl IntoIterator<Item = &'n IpNet>,
        lengths: impl Fn(&IpNet) -> std::ops::Range<u8>,
        mut f: impl FnMut(&IpNet, IpNet, IdentityId),
    ) {
        let mut last: [Vec<LastLookup>; 2] = [vec![None; 33], vec![None; 129]];
        for net in nets {
            let family = family(net);
            let counts = &self.lengths[family];
            for len in lengths(net).filter(|len| counts[usize::from(*len)] > 0) {
                let Ok(outer) = IpNet::new(net.addr(), len).map(|n| n.trunc()) else {
                    continue;
                };
                let memo = &mut last[family][usize::from(len)];
                let found = match memo {
                    Some((before, found)) if *before == outer => *found,
                    _ => {
                        let found = self.get(&outer);
                        *memo = Some((outer, found));
                        found
                    }
                };
                if let Some(id) = found {
                    f(net, outer, id);
                }
            }
        }
    }

    /// The longest prefix of the map holding `ip`.
    pub fn longest_holding(&self, ip: IpAddr) -> Option<IdentityId> {
        let host = IpNet::from(ip);
        let counts = &self.lengths[family(&host)];
        (0..=host.prefix_len())
            .rev()
            .filter(|len| counts[usize::from(*len)] > 0)
            .find_map(|len| self.get(&IpNet::new(ip, len).ok()?.trunc()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn lookups_find_every_length_present_and_forget_removed_ones() {
        let mut map = WorldMap::default();
        map.insert(net("0.0.0.0/0"), IdentityId(0));
        map.insert(net("10.0.0.0/8"), IdentityId(1));
        map.insert(net("10.1.2.3/32"), IdentityId(2));
        map.insert(net("::/0"), IdentityId(3));
        let held: Vec<IdentityId> = map.holding(&net("10.1.2.3/32")).map(|(_, id)| id).collect();
        assert_eq!(held, [IdentityId(0), IdentityId(1), IdentityId(2)]);
        // In a run, the shared holders are found for each net, remembered or not.
        let run = [net("10.1.2.3/32"), net("10.1.2.4/32"), net("10.2.0.0/16")];
        let mut found = Vec::new();
        map.holding_each(
            &run,
            |n| 0..n.prefix_len() + 1,
            |n, outer, id| found.push((*n, outer, id)),
        );
        assert_eq!(
            found,
            [
                (run[0], net("0.0.0.0/0"), IdentityId(0)),
                (run[0], net("10.0.0.0/8"), IdentityId(1)),
                (run[0], run[0], IdentityId(2)),
                (run[1], net("0.0.0.0/0"), IdentityId(0)),
                (run[1], net("10.0.0.0/8"), IdentityId(1)),
                (run[2], net("0.0.0.0/0"), IdentityId(0)),
                (run[2], net("10.0.0.0/8"), IdentityId(1)),
            ]
        );
        assert_eq!(
            map.longest_holding("10.1.2.3".parse().unwrap()),
            Some(IdentityId(2))
        );
        assert_eq!(
            map.longest_holding("10.9.9.9".parse().unwrap()),
            Some(IdentityId(1))
        );
        assert_eq!(
            map.longest_holding("2001:db8::1".parse().unwrap()),
            Some(IdentityId(3))
        );
        // Replacing a prefix's identity keeps one count; removing it drops the length.
        map.insert(net("10.0.0.0/8"), IdentityId(4));
        map.remove(&net("10.0.0.0/8"));
        assert_eq!(map.lengths[0][8], 0);
        assert_eq!(
            map.longest_holding("10.9.9.9".parse().unwrap()),
            Some(IdentityId(0))
        );
        assert_eq!(map.remove(&net("10.0.0.0/8")), None);
        assert_eq!(map.lengths[0][8], 0);
    }
}
