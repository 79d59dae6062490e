//! Sets of address prefixes that answer "which of them hold this prefix?" without a scan.
//!
//! A policy may list tens of thousands of prefixes where authors usually list a few: an
//! `ipBlock` of `0.0.0.0/0` with 70,000 `except`s fits in one 1.5 MB object. Tested one by one
//! against each of the 70,000 identities those `except`s create, that is 4.9 billion tests.
//! Here a query costs one lookup per distinct prefix length present (one or two in practice,
//! at most 33 or 129): the candidate holders of a prefix are its own truncations.

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

/// The prefixes that could hold `inner` at the given lengths: `inner` truncated to each length
/// not longer than its own, in the order of `lengths`.
pub fn truncations<'a>(
    inner: &'a IpNet,
    lengths: impl IntoIterator<Item = &'a u8> + 'a,
) -> impl Iterator<Item = IpNet> + 'a {
    lengths
        .into_iter()
        .filter(move |len| **len <= inner.prefix_len())
        .filter_map(move |len| IpNet::new(inner.addr(), *len).ok().map(|n| n.trunc()))
}

/// A set of prefixes (network addresses normalised, sorted, without duplicates) with the
/// distinct lengths they have. Equal sets compare, hash and order equal however they were listed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(from = "Vec<IpNet>", into = "Vec<IpNet>")]
pub struct PrefixSet {
    nets: Vec<IpNet>,
    /// The distinct lengths of `nets`, ascending (derived from `nets`).
    lengths: Vec<u8>,
}

impl PrefixSet {
    pub fn new(nets: impl IntoIterator<Item = IpNet>) -> PrefixSet {
        let mut nets: Vec<IpNet> = nets.into_iter().map(|n| n.trunc()).collect();
        nets.sort_unstable();
        nets.dedup();
        let mut lengths: Vec<u8> = nets.iter().map(IpNet::prefix_len).collect();
        lengths.sort_unstable();
        lengths.dedup();
        PrefixSet { nets, lengths }
    }

    pub fn iter(&self) -> std::slice::Iter<'_, IpNet> {
        self.nets.iter()
    }

    pub fn len(&self) -> usize {
        self.nets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nets.is_empty()
    }

    /// Keeps the prefixes `keep` accepts.
    pub fn retain(&mut self, keep: impl FnMut(&IpNet) -> bool) {
        let mut nets = std::mem::take(&mut self.nets);
        nets.retain(keep);
        *self = PrefixSet::new(nets);
    }

    /// Whether a prefix of the set no longer than `max_len` holds `inner` (contains all of it).
    pub fn holds(&self, inner: &IpNet, max_len: u8) -> bool {
        truncations(inner, self.lengths.iter().take_while(|l| **l <= max_len))
            .any(|outer| self.nets.binary_search(&outer).is_ok())
    }

    /// Whether any prefix of the set holds `inner`.
    pub fn contains(&self, inner: &IpNet) -> bool {
        self.holds(inner, inner.prefix_len())
    }
}

impl From<Vec<IpNet>> for PrefixSet {
    fn from(nets: Vec<IpNet>) -> PrefixSet {
        PrefixSet::new(nets)
    }
}

impl From<PrefixSet> for Vec<IpNet> {
    fn from(set: PrefixSet) -> Vec<IpNet> {
        set.nets
    }
}

impl<'a> IntoIterator for &'a PrefixSet {
    type Item = &'a IpNet;
    type IntoIter = std::slice::Iter<'a, IpNet>;
    fn into_iter(self) -> Self::IntoIter {
        self.nets.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn holds_by_containment_up_to_a_length() {
        let set = PrefixSet::new([net("10.1.0.0/16"), net("10.2.3.4/32"), net("fd00::/8")]);
        assert!(set.contains(&net("10.1.2.0/24")));
        assert!(set.contains(&net("10.1.0.0/16")));
        assert!(!set.holds(&net("10.1.0.0/16"), 15), "only shorter ones");
        assert!(!set.contains(&net("10.0.0.0/8")));
        assert!(set.contains(&net("10.2.3.4/32")));
        assert!(!set.contains(&net("10.2.3.5/32")));
        assert!(set.contains(&net("fd00:1::1/128")));
        assert!(!set.contains(&net("fe00::1/128")));
        // Not normalised on input, normalised in the set: 10.1.7.7/16 is 10.1.0.0/16.
        assert_eq!(
            PrefixSet::new([net("10.1.7.7/16")]),
            PrefixSet::new([net("10.1.0.0/16")])
        );
    }

    fn any_net() -> impl Strategy<Value = IpNet> {
        prop_oneof![
            (any::<u32>(), 0u8..=32).prop_map(|(a, l)| IpNet::new(
                std::net::Ipv4Addr::from(a & 0xff0f_00ff).into(),
                l
            )
            .unwrap()),
            (any::<u128>(), 0u8..=128).prop_map(|(a, l)| IpNet::new(
                std::net::Ipv6Addr::from(a & 0xff00_0000_0000_0000_0000_0000_0000_00ff).into(),
                l
            )
            .unwrap()),
        ]
    }

    proptest! {
        /// The same answer as testing every prefix of the set.
        #[test]
        fn equals_a_scan(nets in prop::collection::vec(any_net(), 0..24), inner in any_net(), max in 0u8..=128) {
            let set = PrefixSet::new(nets.clone());
            let scan = nets.iter().any(|n| n.prefix_len() <= max && n.contains(&inner));
            prop_assert_eq!(set.holds(&inner, max), scan);
        }
    }
}
