//! The addresses outside the cluster that policies tell apart: one region per piece of the
//! address space cut by every prefix a policy names (`ipBlock` and its `except`, admin
//! `networks`, Cilium CIDR peers), with the whole IPv4 and IPv6 spaces (the `world` entity) as
//! the outermost ones. Every address of a region is decided alike by every policy, so one
//! representative address stands for all of it: `diff`, `matrix` (and a future `lint`) decide
//! flows to and from each region once, not per address.

use std::collections::BTreeSet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// A piece of the address space: a prefix minus the longer prefixes inside it that policies
/// also name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Region {
    pub prefix: IpNet,
    /// The longest prefixes cut out of `prefix`, in address order (each is a region of its own).
    pub except: Vec<IpNet>,
    /// An address of the region that no pod or node has, deciding for the whole region.
    pub representative: IpAddr,
}

impl fmt::Display for Region {
    /// `0.0.0.0/0 except 10.0.0.0/8, 192.168.0.0/16`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.prefix)?;
        for (i, except) in self.except.iter().enumerate() {
            let joint = if i == 0 { " except " } else { ", " };
            write!(f, "{joint}{except}")?;
        }
        Ok(())
    }
}

impl Region {
    /// Whether `address` lies in this region.
    pub fn contains(&self, address: IpAddr) -> bool {
        self.prefix.contains(&address) && !self.except.iter().any(|e| e.contains(&address))
    }
}

/// The whole address space of each family: the outermost regions.
fn everything() -> [IpNet; 2] {
    [
        IpNet::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0).expect("length 0 is valid"),
        IpNet::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0).expect("length 0 is valid"),
    ]
}

/// The regions cut by `prefixes` (each read as its network) and the whole address spaces, in
/// address order, each with a representative that is not in `taken` (the pods' and nodes'
/// addresses). A region that `taken` and its exceptions fill entirely has nothing outside the
/// cluster and is left out.
pub fn regions(prefixes: impl IntoIterator<Item = IpNet>, taken: &BTreeSet<IpAddr>) -> Vec<Region> {
    let all: BTreeSet<IpNet> = prefixes
        .into_iter()
        .map(|p| p.trunc())
        .chain(everything())
        .collect();
    // Prefixes nest or are disjoint, so they form a forest; in address order (a prefix before
    // the longer ones starting at its address) each prefix's parent is the nearest enclosing one
    // still on a stack. Its cut-outs are its children: the longest prefixes inside it (one
    // inside another cut-out is that one's business). Linear after the sort, where testing
    // every prefix against every other was quadratic (cubic for the cut-outs): one policy can
    // name 70,000 `except`s.
    let order: Vec<IpNet> = all.into_iter().collect();
    let mut children: Vec<Vec<IpNet>> = vec![Vec::new(); order.len()];
    let mut stack: Vec<usize> = Vec::new();
    for (i, prefix) in order.iter().enumerate() {
        while let Some(&top) = stack.last() {
            if order[top].contains(prefix) {
                break;
            }
            stack.pop();
        }
        if let Some(&parent) = stack.last() {
            children[parent].push(*prefix);
        }
        stack.push(i);
    }
    order
        .into_iter()
        .zip(children)
        .filter_map(|(prefix, except)| {
            let representative = first_free(&prefix, &except, taken)?;
            Some(Region {
                prefix,
                except,
                representative,
            })
        })
        .collect()
}

/// The first address of `prefix` (after its network address, when it has others) outside
/// `except` (disjoint, in address order) and not in `taken`.
fn first_free(prefix: &IpNet, except: &[IpNet], taken: &BTreeSet<IpAddr>) -> Option<IpAddr> {
    let (start, end) = (number(prefix.network()), number(prefix.broadcast()));
    let mut at = if end - start >= 2 { start + 1 } else { start };
    let mut cut_outs = except
        .iter()
        .map(|e| (number(e.network()), number(e.broadcast())));
    let mut next_cut = cut_outs.next();
    while at <= end {
        match next_cut {
            Some((low, high)) if at >= low => {
                if at <= high {
                    at = high.checked_add(1)?;
                }
                next_cut = cut_outs.next();
            }
            _ => {
                let candidate = address(prefix, at);
                if !taken.contains(&candidate) {
                    return Some(candidate);
                }
                at = at.checked_add(1)?;
            }
        }
    }
    None
}

fn number(address: IpAddr) -> u128 {
    match address {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// The address numbered `n` in the family of `prefix`.
fn address(prefix: &IpNet, n: u128) -> IpAddr {
    match prefix {
        IpNet::V4(_) => IpAddr::V4(Ipv4Addr::from(
            u32::try_from(n).expect("an address of an IPv4 prefix"),
        )),
        IpNet::V6(_) => IpAddr::V6(Ipv6Addr::from(n)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nets(texts: &[&str]) -> Vec<IpNet> {
        texts.iter().map(|t| t.parse().unwrap()).collect()
    }

    fn described(prefixes: &[&str], taken: &[&str]) -> Vec<String> {
        let taken = taken.iter().map(|t| t.parse().unwrap()).collect();
        regions(nets(prefixes), &taken)
            .iter()
            .map(|r| format!("{r} @ {}", r.representative))
            .collect()
    }

    #[test]
    fn prefixes_and_their_exceptions_cut_the_space_into_regions() {
        assert_eq!(
            described(&["10.0.0.0/8", "10.1.0.0/16", "192.168.0.0/16"], &[]),
            [
                "0.0.0.0/0 except 10.0.0.0/8, 192.168.0.0/16 @ 0.0.0.1",
                "10.0.0.0/8 except 10.1.0.0/16 @ 10.0.0.1",
                "10.1.0.0/16 @ 10.1.0.1",
                "192.168.0.0/16 @ 192.168.0.1",
                "::/0 @ ::1",
            ]
        );
    }

    #[test]
    fn representatives_skip_cut_outs_and_cluster_addresses() {
        // 0.0.0.0/1 cuts out the first half; the node at 128.0.0.0 takes the next candidate.
        assert_eq!(
            described(&["0.0.0.0/1", "10.1.2.3/16"], &["128.0.0.0", "10.1.0.1"]),
            [
                "0.0.0.0/0 except 0.0.0.0/1 @ 128.0.0.1",
                "0.0.0.0/1 except 10.1.0.0/16 @ 0.0.0.1",
                "10.1.0.0/16 @ 10.1.0.2",
                "::/0 @ ::1",
            ]
        );
    }

    #[test]
    fn a_region_filled_by_cluster_addresses_or_cut_outs_is_left_out() {
        assert_eq!(
            described(&["10.0.0.0/31", "10.0.0.0/32", "10.0.0.1/32"], &[]),
            [
                "0.0.0.0/0 except 10.0.0.0/31 @ 0.0.0.1",
                "10.0.0.0/32 @ 10.0.0.0",
                "10.0.0.1/32 @ 10.0.0.1",
                "::/0 @ ::1",
            ]
        );
        assert_eq!(described(&["10.9.9.9/32"], &["10.9.9.9"]).len(), 2);
    }

    #[test]
    fn a_region_contains_what_it_says() {
        let region = &regions(nets(&["10.0.0.0/8"]), &BTreeSet::new())[0];
        assert!(region.contains("192.0.2.1".parse().unwrap()));
        assert!(!region.contains("10.2.3.4".parse().unwrap()));
        assert!(!region.contains("::1".parse().unwrap()));
    }
}
