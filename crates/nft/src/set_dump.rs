//! A set's elements read straight from the kernel (`NFT_MSG_GETSETELEM`), without libnftables.
//!
//! *Why:* after a restart the programmer knows the names of the sets the kernel holds but not
//! their contents, and a set it cannot compare must be flushed and filled again in the same
//! transaction as the chains that use it: one transaction holding every element. With CIDR
//! policies of 500,000 prefixes that transaction took a restarting agent to 933 MB. Listing the
//! set through libnftables costs as much (it parses every element into its cache); the kernel's
//! own dump costs the addresses (20 bytes each here), after which the set is patched by its
//! difference, usually nothing.
//!
//! An interval set holds each prefix as two elements: its first address, and the address after
//! its last flagged as an interval end (none for a prefix that reaches the top of the address
//! space). A set whose elements do not pair into whole prefixes is reported as unreadable, and
//! is then refilled as before.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

use crate::netlink::{attributes, put_attribute, NetfilterSocket, NFTABLES};

/// `NFT_MSG_GETSETELEM`, `NFT_MSG_NEWSETELEM`.
const GETSETELEM: u16 = NFTABLES | 13;
pub(crate) const NEWSETELEM: u16 = NFTABLES | 12;
/// `NFT_MSG_DELSETELEM`.
pub(crate) const DELSETELEM: u16 = NFTABLES | 14;
/// `NLM_F_DUMP`.
const DUMP: u16 = 0x300;
/// `NFPROTO_INET`.
pub(crate) const INET: u8 = 1;
/// `NFTA_SET_ELEM_LIST_TABLE`, `_SET`, `_ELEMENTS`.
pub(crate) const LIST_TABLE: u16 = 1;
pub(crate) const LIST_SET: u16 = 2;
pub(crate) const LIST_ELEMENTS: u16 = 3;
/// `NFTA_LIST_ELEM`; inside it `NFTA_SET_ELEM_KEY` (holding `NFTA_DATA_VALUE`) and
/// `NFTA_SET_ELEM_FLAGS`.
pub(crate) const LIST_ELEM: u16 = 1;
pub(crate) const ELEM_KEY: u16 = 1;
pub(crate) const DATA_VALUE: u16 = 1;
pub(crate) const ELEM_FLAGS: u16 = 3;
/// `NFT_SET_ELEM_INTERVAL_END`.
pub(crate) const INTERVAL_END: u32 = 1;

/// One element as the kernel holds it: its key, and whether it ends an interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Element {
    pub(crate) key: u128,
    pub(crate) end: bool,
}

/// The prefixes set `set` of table `inet <table>` holds, sorted; None if they do not read as
/// whole prefixes.
pub fn read_set(
    socket: &mut NetfilterSocket,
    table: &str,
    set: &str,
    v6: bool,
    interval: bool,
) -> io::Result<Option<Vec<IpNet>>> {
    let mut request = Vec::new();
    put_attribute(&mut request, LIST_TABLE, &nul_terminated(table));
    put_attribute(&mut request, LIST_SET, &nul_terminated(set));
    let width = if v6 { 16 } else { 4 };
    let mut elements = Vec::new();
    socket.request(GETSETELEM, DUMP, INET, &request, |message| {
        if message.kind == NEWSETELEM {
            elements_of(message.attributes, width, &mut elements)?;
        }
        Ok(())
    })?;
    Ok(if interval {
        prefixes_of_intervals(elements, v6)
    } else {
        hosts_of(&elements, v6)
    })
}

/// The addresses of a hash set's elements, sorted, each once; None if one ends an interval.
///
/// Each once: a hash set that the kernel grows or shrinks while it is read (its rhashtable
/// resizes in the background after many changes) may report an element twice, or not at all,
/// as the dump walks the table anew for each message and skips as many as it sent. Twice must
/// not read as two elements, of which a patch would delete "the other"; one missed is added
/// again, which changes nothing.
fn hosts_of(elements: &[Element], v6: bool) -> Option<Vec<IpNet>> {
    let mut nets = elements
        .iter()
        .map(|e| (!e.end).then(|| host(e.key, v6)))
        .collect::<Option<Vec<IpNet>>>()?;
    nets.sort_unstable();
    nets.dedup();
    Some(nets)
}

/// [`read_set`] of netpol's table, through a socket opened for it in the calling thread's
/// network namespace.
pub fn read_netpol_set(
    set: &crate::ruleset::AddressSet,
) -> Result<Option<Vec<IpNet>>, crate::programmer::NftError> {
    NetfilterSocket::open()
        .map_err(crate::programmer::NftError::Unavailable)
        .and_then(|mut socket| read_netpol_set_through(&mut socket, set))
}

/// [`read_set`] of netpol's table, through `socket`.
pub fn read_netpol_set_through(
    socket: &mut NetfilterSocket,
    set: &crate::ruleset::AddressSet,
) -> Result<Option<Vec<IpNet>>, crate::programmer::NftError> {
    read_set(socket, netpol_table(), &set.name, set.v6, set.interval)
        .map_err(crate::programmer::NftError::Unavailable)
}

/// The name of netpol's table (of family `inet`), as netlink messages name it.
pub(crate) fn netpol_table() -> &'static str {
    crate::script::TABLE
        .strip_prefix("inet ")
        .expect("netpol's table is inet")
}

pub(crate) fn nul_terminated(name: &str) -> Vec<u8> {
    let mut bytes = name.as_bytes().to_vec();
    bytes.push(0);
    bytes
}

/// Appends the elements of one `NEWSETELEM` message.
pub(crate) fn elements_of(message: &[u8], width: usize, out: &mut Vec<Element>) -> io::Result<()> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "a set element without its key");
    for (kind, list) in attributes(message) {
        if kind != LIST_ELEMENTS {
            continue;
        }
        for (kind, element) in attributes(list) {
            if kind != LIST_ELEM {
                continue;
            }
            let mut key = None;
            let mut end = false;
            for (kind, payload) in attributes(element) {
                match kind {
                    ELEM_KEY => {
                        key = attributes(payload)
                            .find(|(kind, value)| *kind == DATA_VALUE && value.len() == width)
                            .map(|(_, value)| {
                                value
                                    .iter()
                                    .fold(0u128, |k, byte| (k << 8) | u128::from(*byte))
                            });
                    }
                    ELEM_FLAGS if payload.len() >= 4 => {
                        let flags = u32::from_be_bytes(payload[..4].try_into().unwrap());
                        end = flags & INTERVAL_END != 0;
                    }
                    _ => {}
                }
            }
            out.push(Element {
                key: key.ok_or_else(bad)?,
                end,
            });
        }
    }
    Ok(())
}

fn host(key: u128, v6: bool) -> IpNet {
    IpNet::from(address(key, v6))
}

fn address(key: u128, v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::from(key))
    } else {
        IpAddr::V4(Ipv4Addr::from(key as u32))
    }
}

/// The prefixes of an interval set's elements: each start paired with the next end (an end at
/// the same key as a start closes the interval before it); a start left open reaches the top of
/// the address space; an end with nothing open (nft's leading end at address 0) is passed over.
pub(crate) fn prefixes_of_intervals(mut elements: Vec<Element>, v6: bool) -> Option<Vec<IpNet>> {
    // Ends first at a key: they close what comes before it.
    elements.sort_unstable_by_key(|e| (e.key, !e.end));
    let top: u128 = if v6 { u128::MAX } else { u128::from(u32::MAX) };
    let mut open: Option<u128> = None;
    let mut out = Vec::new();
    for element in elements {
        match (element.end, open) {
            (false, None) => open = Some(element.key),
            (false, Some(_)) => return None,
            (true, Some(start)) => {
                out.push(prefix(start, element.key.checked_sub(1)?, v6)?);
                open = None;
            }
            (true, None) => {}
        }
    }
    if let Some(start) = open {
        out.push(prefix(start, top, v6)?);
    }
    Some(out)
}

/// The prefix covering exactly `first..=last`, if there is one.
fn prefix(first: u128, last: u128, v6: bool) -> Option<IpNet> {
    let bits: u32 = if v6 { 128 } else { 32 };
    let size = last.checked_sub(first)?.checked_add(1);
    // The whole IPv6 space has 2^128 addresses: one more than u128 holds.
    let host_bits = match size {
        None => 128,
        Some(size) if size.is_power_of_two() => size.trailing_zeros(),
        Some(_) => return None,
    };
    if host_bits > bits || (host_bits < 128 && first & ((1u128 << host_bits) - 1) != 0) {
        return None;
    }
    IpNet::new(address(first, v6), (bits - host_bits) as u8).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(key: u128) -> Element {
        Element { key, end: false }
    }

    fn end(key: u128) -> Element {
        Element { key, end: true }
    }

    fn v4(s: &str) -> u128 {
        u128::from(u32::from(s.parse::<Ipv4Addr>().unwrap()))
    }

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|n| n.parse().unwrap()).collect()
    }

    #[test]
    fn a_host_read_twice_is_one_and_an_interval_end_is_no_host() {
        let twice = [
            start(v4("10.0.0.2")),
            start(v4("10.0.0.1")),
            start(v4("10.0.0.2")),
        ];
        let hosts = hosts_of(&twice, false).unwrap();
        assert_eq!(
            hosts,
            [
                "10.0.0.1/32".parse().unwrap(),
                "10.0.0.2/32".parse().unwrap()
            ]
        );
        assert_eq!(hosts_of(&[start(1), end(2)], false), None);
    }

    #[test]
    fn intervals_pair_into_prefixes_adjacent_ones_too() {
        // 10.0.0.1/32 and 10.0.0.2/32 share a boundary; 10.1.0.0/16; nft's leading end at 0;
        // the dump's order is the kernel's (descending), not ours.
        let elements = vec![
            end(v4("10.2.0.0")),
            start(v4("10.1.0.0")),
            end(v4("10.0.0.3")),
            start(v4("10.0.0.2")),
            end(v4("10.0.0.2")),
            start(v4("10.0.0.1")),
            end(0),
        ];
        assert_eq!(
            prefixes_of_intervals(elements, false),
            Some(nets(&["10.0.0.1/32", "10.0.0.2/32", "10.1.0.0/16"]))
        );
    }

    #[test]
    fn an_interval_open_at_the_top_reaches_the_last_address() {
        let elements = vec![
            start(v4("255.255.255.255")),
            start(v4("0.0.0.0")),
            end(v4("128.0.0.0")),
        ];
        assert_eq!(
            prefixes_of_intervals(elements, false),
            Some(nets(&["0.0.0.0/1", "255.255.255.255/32"]))
        );
        assert_eq!(
            prefixes_of_intervals(vec![start(0)], true),
            Some(nets(&["::/0"]))
        );
    }

    #[test]
    fn what_is_not_a_whole_prefix_is_unreadable() {
        // 10.0.0.1 to 10.0.0.3: three addresses.
        assert_eq!(
            prefixes_of_intervals(vec![start(v4("10.0.0.1")), end(v4("10.0.0.4"))], false),
            None
        );
        // Two starts in a row.
        assert_eq!(
            prefixes_of_intervals(vec![start(1), start(2), end(3)], false),
            None
        );
    }

    #[test]
    fn elements_are_read_from_a_message() {
        let mut key = Vec::new();
        put_attribute(&mut key, DATA_VALUE, &[10, 0, 0, 1]);
        let mut element = Vec::new();
        put_attribute(&mut element, ELEM_KEY, &key);
        put_attribute(&mut element, ELEM_FLAGS, &INTERVAL_END.to_be_bytes());
        let mut list = Vec::new();
        put_attribute(&mut list, LIST_ELEM, &element);
        let mut message = Vec::new();
        put_attribute(&mut message, LIST_TABLE, b"netpol\0");
        put_attribute(&mut message, LIST_ELEMENTS, &list);
        let mut out = Vec::new();
        elements_of(&message, 4, &mut out).unwrap();
        assert_eq!(out, vec![end(v4("10.0.0.1"))]);
        // A key of the wrong width is no key.
        assert!(elements_of(&message, 16, &mut Vec::new()).is_err());
    }
}
