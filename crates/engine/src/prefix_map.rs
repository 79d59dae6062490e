//! Maps keyed by address prefix, each family's prefixes as integers (address, length).
//!
//! A CIDR-heavy policy puts hundreds of thousands of prefixes into the engine's indexes. Keyed
//! by `IpNet` (an 18-byte enum over byte arrays), a prefix cost a 24-byte slot of a hash table
//! kept under seven-eighths full, and comparing two meant comparing byte arrays: a fifth of
//! such a policy's CPU went to those comparisons. An IPv4 prefix is 8 bytes here, compared as
//! integers, in a B-tree that never doubles. The order is `IpNet`'s: IPv4 first, each family by
//! address, then length, so the prefixes inside one are a range.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::RangeInclusive;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

#[derive(Clone, Debug)]
pub struct PrefixMap<V> {
    v4: BTreeMap<(u32, u8), V>,
    v6: BTreeMap<(u128, u8), V>,
}

impl<V> Default for PrefixMap<V> {
    fn default() -> Self {
        PrefixMap {
            v4: BTreeMap::new(),
            v6: BTreeMap::new(),
        }
    }
}

fn v4_net(&(addr, len): &(u32, u8)) -> IpNet {
    IpNet::V4(Ipv4Net::new(Ipv4Addr::from(addr), len).expect("a stored length"))
}

fn v6_net(&(addr, len): &(u128, u8)) -> IpNet {
    IpNet::V6(Ipv6Net::new(Ipv6Addr::from(addr), len).expect("a stored length"))
}

impl<V> PrefixMap<V> {
    /// Maps `prefix` to `value`, returning the value it had.
    pub fn insert(&mut self, prefix: IpNet, value: V) -> Option<V> {
        match prefix {
            IpNet::V4(net) => self.v4.insert((net.addr().into(), net.prefix_len()), value),
            IpNet::V6(net) => self.v6.insert((net.addr().into(), net.prefix_len()), value),
        }
    }

    pub fn remove(&mut self, prefix: &IpNet) -> Option<V> {
        match prefix {
            IpNet::V4(net) => self.v4.remove(&(net.addr().into(), net.prefix_len())),
            IpNet::V6(net) => self.v6.remove(&(net.addr().into(), net.prefix_len())),
        }
    }

    pub fn get(&self, prefix: &IpNet) -> Option<&V> {
        match prefix {
            IpNet::V4(net) => self.v4.get(&(net.addr().into(), net.prefix_len())),
            IpNet::V6(net) => self.v6.get(&(net.addr().into(), net.prefix_len())),
        }
    }

    pub fn get_mut(&mut self, prefix: &IpNet) -> Option<&mut V> {
        match prefix {
            IpNet::V4(net) => self.v4.get_mut(&(net.addr().into(), net.prefix_len())),
            IpNet::V6(net) => self.v6.get_mut(&(net.addr().into(), net.prefix_len())),
        }
    }

    pub fn len(&self) -> usize {
        self.v4.len() + self.v6.len()
    }

    pub fn is_empty(&self) -> bool {
        self.v4.is_empty() && self.v6.is_empty()
    }

    /// Every prefix with its value, in order.
    pub fn iter(&self) -> impl Iterator<Item = (IpNet, &V)> {
        let v4 = self.v4.iter().map(|(key, value)| (v4_net(key), value));
        let v6 = self.v6.iter().map(|(key, value)| (v6_net(key), value));
        v4.chain(v6)
    }

    /// The prefixes whose address lies in `addresses` (both ends of one family), in order.
    pub fn starting_in(
        &self,
        addresses: RangeInclusive<IpAddr>,
    ) -> Box<dyn Iterator<Item = (IpNet, &V)> + '_> {
        match (*addresses.start(), *addresses.end()) {
            (IpAddr::V4(first), IpAddr::V4(last)) => Box::new(
                self.v4
                    .range((u32::from(first), 0)..=(u32::from(last), 32))
                    .map(|(key, value)| (v4_net(key), value)),
            ),
            (IpAddr::V6(first), IpAddr::V6(last)) => Box::new(
                self.v6
                    .range((u128::from(first), 0)..=(u128::from(last), 128))
                    .map(|(key, value)| (v6_net(key), value)),
            ),
            _ => Box::new(std::iter::empty()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn orders_as_ipnet_does_and_finds_what_starts_in_a_range() {
        let nets = [
            "::/0",
            "10.0.0.0/8",
            "0.0.0.0/0",
            "10.1.0.0/16",
            "10.0.0.0/16",
        ]
        .map(net);
        let mut map = PrefixMap::default();
        for (i, n) in nets.iter().enumerate() {
            assert_eq!(map.insert(*n, i), None);
        }
        let mut sorted = nets.to_vec();
        sorted.sort();
        assert_eq!(map.iter().map(|(n, _)| n).collect::<Vec<_>>(), sorted);
        let ten = net("10.0.0.0/8");
        let inside: Vec<IpNet> = map
            .starting_in(ten.network()..=ten.broadcast())
            .map(|(n, _)| n)
            .collect();
        assert_eq!(
            inside,
            ["10.0.0.0/8", "10.0.0.0/16", "10.1.0.0/16"].map(net)
        );
        assert_eq!(map.get(&net("10.1.0.0/16")), Some(&3));
        *map.get_mut(&net("::/0")).unwrap() = 9;
        assert_eq!(map.remove(&net("::/0")), Some(9));
        assert_eq!(map.len(), 4);
    }
}
