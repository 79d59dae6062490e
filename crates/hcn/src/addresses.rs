//! The addresses one ACL field or one IP set holds, as HCN matches them: a set of addresses, kept
//! as sorted, merged ranges.
//!
//! Why ranges and not the listed prefixes: the simulator evaluates packets on every local
//! endpoint's rules, and on a large cluster one rule may name tens of thousands of pod addresses
//! (a namespace selector over every namespace). Scanning such a list per packet made the `--once`
//! summary of a 150,000-pod node cost more than a second, and holding each endpoint's copy of it
//! made it cost 190 MB. Ranges answer a lookup by binary search, take 8 bytes an IPv4 range
//! (a prefix is 18), and two spellings of the same addresses (`10.0.0.0/31` against `10.0.0.0,
//! 10.0.0.1`) compare equal, as HCN reads them alike.

use std::net::IpAddr;

use ipnet::IpNet;

/// Addresses as sorted, disjoint, non-adjacent inclusive ranges, one list per family.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AddressRanges {
    v4: Box<[(u32, u32)]>,
    v6: Box<[(u128, u128)]>,
}

impl AddressRanges {
    /// The addresses of `nets`, in any order, overlapping or not.
    pub fn from_nets<'a>(nets: impl IntoIterator<Item = &'a IpNet>) -> AddressRanges {
        let (mut v4, mut v6) = (Vec::new(), Vec::new());
        for net in nets {
            match net {
                IpNet::V4(n) => v4.push((u32::from(n.network()), u32::from(n.broadcast()))),
                IpNet::V6(n) => v6.push((u128::from(n.network()), u128::from(n.broadcast()))),
            }
        }
        AddressRanges {
            v4: merged(v4),
            v6: merged(v6),
        }
    }

    /// A comma-separated list of addresses and CIDRs (host bits are ignored, as HCN ignores
    /// them); an error names the first item that is neither, an empty item included.
    pub fn parse(field: &str) -> Result<AddressRanges, String> {
        if field.is_empty() {
            return Ok(AddressRanges::default());
        }
        let nets = field
            .split(',')
            .map(str::trim)
            .map(parse_item)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(AddressRanges::from_nets(&nets))
    }

    /// The addresses of every part.
    pub fn union<'a>(parts: impl IntoIterator<Item = &'a AddressRanges>) -> AddressRanges {
        let (mut v4, mut v6) = (Vec::new(), Vec::new());
        for part in parts {
            v4.extend_from_slice(&part.v4);
            v6.extend_from_slice(&part.v6);
        }
        AddressRanges {
            v4: merged(v4),
            v6: merged(v6),
        }
    }

    pub fn contains(&self, address: &IpAddr) -> bool {
        match address {
            IpAddr::V4(a) => holds(&self.v4, u32::from(*a)),
            IpAddr::V6(a) => holds(&self.v6, u128::from(*a)),
        }
    }

    /// Whether some address is in both.
    pub fn overlaps(&self, other: &AddressRanges) -> bool {
        intersect(&self.v4, &other.v4) || intersect(&self.v6, &other.v6)
    }

    pub fn has_ipv6(&self) -> bool {
        !self.v6.is_empty()
    }

    pub fn is_empty(&self) -> bool {
        self.v4.is_empty() && self.v6.is_empty()
    }
}

/// One item of an HCN address list: an address or a CIDR (host bits cleared); an error names it.
pub fn parse_item(item: &str) -> Result<IpNet, String> {
    item.parse::<IpNet>()
        .map(|n| n.trunc())
        .or_else(|_| item.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| format!("{item:?} is not an address or CIDR"))
}

/// `ranges` sorted, with overlapping and adjacent ones joined.
fn merged<T: Copy + Ord + Successor>(mut ranges: Vec<(T, T)>) -> Box<[(T, T)]> {
    ranges.sort_unstable();
    let mut out: Vec<(T, T)> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        match out.last_mut() {
            Some(last) if last.1 >= start || last.1.next() == Some(start) => {
                last.1 = last.1.max(end);
            }
            _ => out.push((start, end)),
        }
    }
    out.into_boxed_slice()
}

fn holds<T: Copy + Ord>(ranges: &[(T, T)], address: T) -> bool {
    // The last range starting at or before the address is the only one that can hold it.
    let after = ranges.partition_point(|(start, _)| *start <= address);
    after > 0 && ranges[after - 1].1 >= address
}

fn intersect<T: Copy + Ord>(a: &[(T, T)], b: &[(T, T)]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].0 <= b[j].1 && b[j].0 <= a[i].1 {
            return true;
        }
        // The range that ends first cannot meet anything later in the other list.
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    false
}

/// The next address, if any: adjacent ranges are joined.
trait Successor: Sized {
    fn next(self) -> Option<Self>;
}

impl Successor for u32 {
    fn next(self) -> Option<u32> {
        self.checked_add(1)
    }
}

impl Successor for u128 {
    fn next(self) -> Option<u128> {
        self.checked_add(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(field: &str) -> AddressRanges {
        AddressRanges::parse(field).unwrap()
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn lookups_find_addresses_in_any_range_and_nothing_between() {
        let r = ranges("10.0.0.5,10.1.0.0/16,192.0.2.1/32,fd00::/120,0.0.0.0/32");
        for inside in [
            "10.0.0.5",
            "10.1.0.0",
            "10.1.255.255",
            "192.0.2.1",
            "fd00::ff",
            "0.0.0.0",
        ] {
            assert!(r.contains(&ip(inside)), "{inside}");
        }
        for outside in [
            "10.0.0.4",
            "10.0.0.6",
            "10.2.0.0",
            "192.0.2.2",
            "fd00::100",
            "::",
        ] {
            assert!(!r.contains(&ip(outside)), "{outside}");
        }
        assert!(!AddressRanges::default().contains(&ip("10.0.0.1")));
        assert!(ranges("0.0.0.0/0").contains(&ip("255.255.255.255")));
        assert!(ranges("::/0").contains(&ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")));
    }

    #[test]
    fn spellings_of_the_same_addresses_are_equal() {
        assert_eq!(ranges("10.0.0.0/31"), ranges("10.0.0.1,10.0.0.0"));
        assert_eq!(ranges("10.0.0.9/24"), ranges("10.0.0.0/25,10.0.0.128/25"));
        assert_eq!(ranges("10.0.0.0/24,10.0.0.7"), ranges("10.0.0.0/24"));
        assert_ne!(ranges("10.0.0.0/31"), ranges("10.0.0.0"));
        assert_eq!(
            AddressRanges::union([&ranges("10.0.0.0"), &ranges("10.0.0.1,fd00::1")]),
            ranges("fd00::1/128,10.0.0.0/31")
        );
    }

    #[test]
    fn overlap_needs_a_shared_address() {
        let a = ranges("10.0.0.0/24,10.0.2.0/24");
        assert!(a.overlaps(&ranges("10.0.2.7")));
        assert!(a.overlaps(&ranges("10.0.0.0/8")));
        assert!(!a.overlaps(&ranges("10.0.1.0/24,10.0.3.0/24")));
        assert!(!a.overlaps(&ranges("fd00::/8")));
        assert!(!a.overlaps(&AddressRanges::default()));
    }

    #[test]
    fn unreadable_items_are_named() {
        assert!(AddressRanges::parse("10.0.0.1,Any")
            .unwrap_err()
            .contains("\"Any\""));
        assert!(AddressRanges::parse("10.0.0.0/33").is_err());
        assert!(AddressRanges::parse("10.0.0.1,")
            .unwrap_err()
            .contains("\"\""));
        assert!(ranges("").is_empty());
        assert!(ranges("fd00::1").has_ipv6());
    }

    proptest::proptest! {
        /// A lookup agrees with asking each listed prefix.
        #[test]
        fn lookups_agree_with_the_prefixes(
            nets in proptest::collection::vec((0u32..64, 26u8..=32), 0..12),
            probes in proptest::collection::vec(0u32..64, 1..20),
        ) {
            let base = 0x0a00_0000u32;
            let nets: Vec<IpNet> = nets
                .into_iter()
                .map(|(a, len)| IpNet::new(std::net::Ipv4Addr::from(base + a).into(), len).unwrap().trunc())
                .collect();
            let r = AddressRanges::from_nets(&nets);
            for p in probes {
                let address: IpAddr = std::net::Ipv4Addr::from(base + p).into();
                proptest::prop_assert_eq!(r.contains(&address), nets.iter().any(|n| n.contains(&address)));
            }
        }
    }
}
