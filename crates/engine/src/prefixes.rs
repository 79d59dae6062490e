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

/// Whether `net` is a single address (a `/32` or `/128`), which holds no prefix but itself.
pub fn is_single_address(net: &IpNet) -> bool {
    net.prefix_len() == net.max_prefix_len()
}

/// A set of prefixes (network addresses normalised, sorted, without duplicates) with the
/// distinct lengths they have. Equal sets compare, hash and order equal however they were listed.
///
/// One pointer inline, and none allocated when empty: every CIDR peer holds one for its
/// exceptions, most of them empty, and a policy may hold tens of thousands of CIDR peers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(from = "Vec<IpNet>", into = "Vec<IpNet>")]
pub struct PrefixSet(Option<Box<Sorted>>);

/// The prefixes of a non-empty set and their distinct lengths, ascending (derived from `nets`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Sorted {
    nets: Box<[IpNet]>,
    lengths: Box<[u8]>,
}

impl PrefixSet {
    pub fn new(nets: impl IntoIterator<Item = IpNet>) -> PrefixSet {
        let mut nets: Vec<IpNet> = nets.into_iter().map(|n| n.trunc()).collect();
        if nets.is_empty() {
            return PrefixSet(None);
        }
        // Stable: it merges sorted runs (a class's prefixes come in address order) instead of
        // sorting them again.
        nets.sort();
        nets.dedup();
        let mut lengths: Vec<u8> = nets.iter().map(IpNet::prefix_len).collect();
        lengths.sort_unstable();
        lengths.dedup();
        PrefixSet(Some(Box::new(Sorted {
            nets: nets.into_boxed_slice(),
            lengths: lengths.into_boxed_slice(),
        })))
    }

    fn nets(&self) -> &[IpNet] {
        self.0.as_ref().map_or(&[], |s| &s.nets)
    }

    fn lengths(&self) -> &[u8] {
        self.0.as_ref().map_or(&[], |s| &s.lengths)
    }

    pub fn iter(&self) -> std::slice::Iter<'_, IpNet> {
        self.nets().iter()
    }

    pub fn len(&self) -> usize {
        self.nets().len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// Keeps the prefixes `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&IpNet) -> bool) {
        let kept: Vec<IpNet> = self.iter().copied().filter(|n| keep(n)).collect();
        *self = PrefixSet::new(kept);
    }

    /// Whether a prefix of the set no longer than `max_len` holds `inner` (contains all of it).
    pub fn holds(&self, inner: &IpNet, max_len: u8) -> bool {
        let nets = self.nets();
        truncations(inner, self.lengths().iter().take_while(|l| **l <= max_len))
            .any(|outer| nets.binary_search(&outer).is_ok())
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
        set.0.map_or_else(Vec::new, |s| s.nets.into_vec())
    }
}

impl<'a> IntoIterator for &'a PrefixSet {
    type Item = &'a IpNet;
    type IntoIter = std::slice::Iter<'a, IpNet>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
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

    /// However a set became empty it is the one empty set (no allocation, equal and ordered
    /// first), and its serde form is still the list of prefixes.
    #[test]
    fn empty_sets_are_one_and_the_form_is_a_list() {
        let mut emptied = PrefixSet::new([net("10.1.0.0/16")]);
        emptied.retain(|_| false);
        assert_eq!(emptied, PrefixSet::default());
        assert_eq!(PrefixSet::new([]), PrefixSet::default());
        assert!(emptied.is_empty());
        assert_eq!(emptied.len(), 0);
        assert!(PrefixSet::default() < PrefixSet::new([net("0.0.0.0/0")]));
        let set = PrefixSet::new([net("10.2.0.0/16"), net("10.1.0.0/16")]);
        let json = serde_json::to_string(&set).unwrap();
        assert_eq!(json, r#"["10.1.0.0/16","10.2.0.0/16"]"#);
        assert_eq!(serde_json::from_str::<PrefixSet>(&json).unwrap(), set);
        assert_eq!(serde_json::to_string(&PrefixSet::default()).unwrap(), "[]");
        assert_eq!(std::mem::size_of::<PrefixSet>(), 8);
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
