//! Elements added to a new set, and large patches of sets the kernel holds, straight through
//! the kernel (`NFT_MSG_NEWSETELEM`, `NFT_MSG_DELSETELEM`), without libnftables.
//!
//! *Why:* libnftables parses each element of a script at about 10 µs (2.1 s for a set of
//! 200,000; docs/performance.md): five live CIDR policies of 50,000 prefixes cost an nftables
//! agent 3.2 s of CPU, against 0.8 s on HCN. A new set that no chain references yet is filled in
//! transactions of its own ([`crate::staging`]); past its declaration (libnftables, so that its
//! type and flags are written as every other set's), its elements are written here as the
//! kernel's own element messages, a few bytes each.
//!
//! An interval set holds each prefix as two elements, as libnftables writes them and
//! [`crate::set_dump`] reads them back: its first address, and the address after its last
//! flagged as an interval end (none for a prefix that reaches the top of the address space).
//!
//! A message's element list is one netlink attribute, at most 64 KB, so elements go in messages
//! of [`LIST_BYTES`]; a batch (one transaction, one `sendto`, the socket's send buffer grown to
//! hold it) carries [`MESSAGES_PER_BATCH`] of them, about 4 MB, 50,000 prefixes of an interval
//! set. Not smaller: Linux 6.18 rebuilds an interval set's lookup array from its whole tree at
//! each commit, so 150 KB batches (within the default send buffer) made filling 250,000
//! prefixes cost 2 s of system time. Not one batch whatever the size: the buffer is the agent's
//! memory while it is sent. A hash set (single addresses) goes in smaller batches
//! ([`HASH_MESSAGES_PER_BATCH`]), which let its table grow between them.
//!
//! A patch of sets that chains may reference ([`patch_netpol_sets_through`]) is one batch
//! whatever its size: it must commit whole, as libnftables would have committed it.

use std::io;

use ipnet::IpNet;

use crate::netlink::{put_attribute, BatchMessage, NetfilterSocket};
use crate::programmer::NftError;
use crate::script::SetPatch;
use crate::set_dump::{
    netpol_table, nul_terminated, DATA_VALUE, DELSETELEM, ELEM_FLAGS, ELEM_KEY, INET, INTERVAL_END,
    LIST_ELEM, LIST_ELEMENTS, LIST_SET, LIST_TABLE, NEWSETELEM,
};
use crate::sets::AddressSet;

/// The most bytes of elements one message carries (the list attribute's length is 16 bits).
const LIST_BYTES: usize = 48 << 10;
/// Messages per batch of an interval set: about 4 MB.
const MESSAGES_PER_BATCH: usize = 85;
/// Messages per batch of a hash set: about 12,000 addresses (200 KB). The kernel's hash table
/// starts at a few buckets and doubles in the background (a work item) once it is three
/// quarters full; inserts meanwhile go down ever longer chains (`rhashtable_insert_slow`).
/// 50,000 addresses in one transaction spent 0.2 s there; batches this size leave the table
/// time to grow between them, and cost a commit each, which a hash set makes cheap.
const HASH_MESSAGES_PER_BATCH: usize = 4;
/// `NLA_F_NESTED`.
const NESTED: u16 = 0x8000;
/// `NLM_F_CREATE`: an element already there is not an error.
const CREATE: u16 = 0x400;

/// Adds `nets` (of `set`'s family, sorted, disjoint) to `set` of table `inet <table>`, which the
/// kernel holds. Each batch is a transaction: on an error, the batches before it stay added.
pub fn add_elements<'a>(
    socket: &mut NetfilterSocket,
    table: &'a str,
    set: &'a AddressSet,
    nets: impl Iterator<Item = &'a IpNet> + 'a,
) -> io::Result<()> {
    let per_batch = if set.interval {
        MESSAGES_PER_BATCH
    } else {
        HASH_MESSAGES_PER_BATCH
    };
    let mut messages = element_messages(NEWSETELEM, CREATE, table, set, nets).peekable();
    while messages.peek().is_some() {
        let batch: Vec<BatchMessage> = messages.by_ref().take(per_batch).collect();
        socket.batch(&batch)?;
    }
    Ok(())
}

/// [`add_elements`] of `count` of `set`'s elements from the `from`th, to netpol's table,
/// through a socket opened for it in the calling thread's network namespace: what a backend
/// that writes elements directly does for [`NftBackend::add_to_new_set`].
///
/// [`NftBackend::add_to_new_set`]: crate::programmer::NftBackend::add_to_new_set
pub fn add_to_netpol_set(set: &AddressSet, from: usize, count: usize) -> Result<(), NftError> {
    let mut socket = NetfilterSocket::open().map_err(NftError::Unavailable)?;
    add_to_netpol_set_through(&mut socket, set, from, count)
}

/// [`add_to_netpol_set`] through `socket`. The kernel's refusal names the set.
pub fn add_to_netpol_set_through(
    socket: &mut NetfilterSocket,
    set: &AddressSet,
    from: usize,
    count: usize,
) -> Result<(), NftError> {
    let nets = set.nets.iter().skip(from).take(count);
    add_elements(socket, netpol_table(), set, nets).map_err(|error| {
        NftError::refused(&format!(
            "the kernel refused elements of set {}: {error}",
            set.name
        ))
    })
}

/// [`patch_netpol_sets_through`] a socket opened for it in the calling thread's network
/// namespace.
pub fn patch_netpol_sets(patches: &[SetPatch<'_>]) -> Result<(), NftError> {
    let mut socket = NetfilterSocket::open().map_err(NftError::Unavailable)?;
    patch_netpol_sets_through(&mut socket, patches)
}

/// Applies `patches` to sets of netpol's table that the kernel holds, through `socket`, as one
/// transaction: every set's deletions, then every set's additions, in the order
/// [`crate::script::render_changes`] gives them (an interval set may replace a prefix by an
/// overlapping one). All of it commits, or none.
pub fn patch_netpol_sets_through(
    socket: &mut NetfilterSocket,
    patches: &[SetPatch<'_>],
) -> Result<(), NftError> {
    let table = netpol_table();
    let mut batch: Vec<BatchMessage> = Vec::new();
    for (set, deleted, _) in patches {
        batch.extend(element_messages(DELSETELEM, 0, table, set, deleted.iter()));
    }
    for (set, _, added) in patches {
        batch.extend(element_messages(
            NEWSETELEM,
            CREATE,
            table,
            set,
            added.iter(),
        ));
    }
    socket.batch(&batch).map_err(|error| {
        let names: Vec<&str> = patches.iter().map(|(set, ..)| &*set.name).collect();
        NftError::refused(&format!(
            "the kernel refused a patch of sets {}: {error}",
            names.join(", ")
        ))
    })
}

/// The `kind` messages (`NEWSETELEM` or `DELSETELEM`) that carry `nets` for `set` of table
/// `inet <table>`, each with an element list of at most [`LIST_BYTES`].
fn element_messages<'a>(
    kind: u16,
    flags: u16,
    table: &'a str,
    set: &'a AddressSet,
    nets: impl Iterator<Item = &'a IpNet> + 'a,
) -> impl Iterator<Item = BatchMessage> + 'a {
    element_lists(set.interval, nets).map(move |list| BatchMessage {
        kind,
        flags,
        family: INET,
        attributes: message(table, &set.name, &list),
    })
}

/// The attributes of one element message: the table, the set and the element list.
fn message(table: &str, set: &str, list: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(list.len() + 64);
    put_attribute(&mut out, LIST_TABLE, &nul_terminated(table));
    put_attribute(&mut out, LIST_SET, &nul_terminated(set));
    put_attribute(&mut out, LIST_ELEMENTS | NESTED, list);
    out
}

/// The elements of `nets`, as element lists of at most [`LIST_BYTES`] each.
fn element_lists<'a>(
    interval: bool,
    nets: impl Iterator<Item = &'a IpNet> + 'a,
) -> impl Iterator<Item = Vec<u8>> + 'a {
    let mut elements = nets.flat_map(move |net| elements_of(net, interval));
    std::iter::from_fn(move || {
        let mut list = Vec::new();
        for (key, width, end) in elements.by_ref() {
            put_element(&mut list, key, width, end);
            if list.len() >= LIST_BYTES {
                break;
            }
        }
        (!list.is_empty()).then_some(list)
    })
}

/// The elements (key, its width in bytes, interval end) that hold `net`: its address alone in
/// a set of hosts; its first address and the one after its last in an interval set.
fn elements_of(net: &IpNet, interval: bool) -> impl Iterator<Item = (u128, usize, bool)> {
    let (first, after, width) = match net {
        IpNet::V4(net) => (
            u128::from(u32::from(net.network())),
            u32::from(net.broadcast()).checked_add(1).map(u128::from),
            4,
        ),
        IpNet::V6(net) => (
            u128::from(net.network()),
            u128::from(net.broadcast()).checked_add(1),
            16,
        ),
    };
    let end = if interval { after } else { None };
    std::iter::once((first, width, false)).chain(end.map(|key| (key, width, true)))
}

fn put_element(list: &mut Vec<u8>, key: u128, width: usize, end: bool) {
    let mut value = Vec::with_capacity(4 + width);
    put_attribute(&mut value, DATA_VALUE, &key.to_be_bytes()[16 - width..]);
    let mut element = Vec::with_capacity(value.len() + 16);
    put_attribute(&mut element, ELEM_KEY | NESTED, &value);
    if end {
        put_attribute(&mut element, ELEM_FLAGS, &INTERVAL_END.to_be_bytes());
    }
    put_attribute(list, LIST_ELEM | NESTED, &element);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::set_dump::{elements_of as read_elements, prefixes_of_intervals, Element};

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|n| n.parse().unwrap()).collect()
    }

    /// What the reader of a dump makes of the lists written for `nets`.
    fn read_back(written: &[IpNet], interval: bool, v6: bool) -> Vec<Element> {
        let mut out = Vec::new();
        for list in element_lists(interval, written.iter()) {
            let mut attributes = Vec::new();
            put_attribute(&mut attributes, LIST_ELEMENTS, &list);
            read_elements(&attributes, if v6 { 16 } else { 4 }, &mut out).unwrap();
        }
        out
    }

    #[test]
    fn interval_elements_read_back_as_the_prefixes_written() {
        let written = nets(&[
            "10.0.0.1/32",
            "10.0.0.2/32",
            "10.1.0.0/16",
            "255.255.255.255/32",
        ]);
        let elements = read_back(&written, true, false);
        // A start each, an end each but for the prefix at the top of the space.
        assert_eq!(elements.len(), 7);
        assert_eq!(prefixes_of_intervals(elements, false), Some(written));
        let v6 = nets(&["fd00::/64", "fd00:0:0:1::1/128"]);
        assert_eq!(
            prefixes_of_intervals(read_back(&v6, true, true), true),
            Some(v6)
        );
    }

    #[test]
    fn a_host_set_has_one_element_a_host() {
        let written = nets(&["10.0.0.1/32", "10.0.0.9/32"]);
        let elements = read_back(&written, false, false);
        assert_eq!(
            elements,
            vec![
                Element {
                    key: 0x0a00_0001,
                    end: false
                },
                Element {
                    key: 0x0a00_0009,
                    end: false
                },
            ]
        );
    }

    #[test]
    fn lists_stay_within_one_attribute_and_lose_no_element() {
        let written: Vec<IpNet> = (0..20_000u32)
            .map(|i| IpNet::from(std::net::IpAddr::from(std::net::Ipv4Addr::from(i << 1))))
            .collect();
        let lists: Vec<Vec<u8>> = element_lists(true, written.iter()).collect();
        assert!(lists.len() > 1);
        assert!(lists.iter().all(|list| list.len() + 64 < u16::MAX as usize));
        let elements = read_back(&written, true, false);
        assert_eq!(elements.len(), 2 * written.len());
        assert_eq!(prefixes_of_intervals(elements, false), Some(written));
    }
}
