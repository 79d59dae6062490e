//! Set elements written as the kernel's own messages (`set_fill`), without libnftables: new
//! sets filled in batches, and patches of sets the kernel holds, each checked by reading the
//! set back from the kernel (`set_dump`).
#![cfg(target_os = "linux")]

use std::borrow::Cow;
use std::net::IpAddr;

use netpol_nft::programmer::NftBackend;
use netpol_nft::script;
use netpol_testbed::netns;

/// Elements written straight to the kernel (`set_fill`) land in the set whole, several batches'
/// worth; a batch the kernel refuses (the set does not exist) fails the call, not hangs it.
#[test]
fn elements_written_as_kernel_messages_are_the_set_and_a_refusal_is_an_error() {
    if netns::skip_kernel_test(
        "elements_written_as_kernel_messages_are_the_set_and_a_refusal_is_an_error",
    ) {
        return;
    }
    let namespace = netns::Netns::new().expect("a network namespace");
    // 120,000 prefixes, more than one batch (about 100,000 prefixes of an interval set each):
    // every other /32, and /30s, from 10.0.0.0 on.
    let nets: Vec<ipnet::IpNet> = (0..120_000u32)
        .map(|i| {
            let (address, len) = if i % 2 == 0 { (i * 8, 32) } else { (i * 8, 30) };
            ipnet::IpNet::new(
                IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + address)),
                len,
            )
            .unwrap()
        })
        .collect();
    let set = netpol_nft::ruleset::AddressSet {
        name: "a4i_written".into(),
        v6: false,
        interval: true,
        nets: netpol_datapath::sets::SortedNets::from_sorted(nets.clone()),
        revision: 0,
        patch: None,
    };
    namespace
        .nft(&script::render_set_fill(&set, 0, 0))
        .expect("the set is declared");
    namespace
        .add_to_new_set(&set, 0, nets.len())
        .expect("the kernel takes the elements");
    assert_eq!(namespace.set_contents(&set).unwrap(), Some(nets.clone()));

    let missing = netpol_nft::ruleset::AddressSet {
        name: "a4i_missing".into(),
        ..set.clone()
    };
    let refused = namespace.add_to_new_set(&missing, 0, nets.len());
    assert!(refused.is_err(), "{refused:?}");
    // The refused batch changed nothing of the other set.
    assert_eq!(namespace.set_contents(&set).unwrap(), Some(nets));
}

/// A patch written as kernel messages (`set_fill::patch_netpol_sets`) deletes and adds exactly
/// its elements, in an interval set and a hash set at once; one the kernel refuses (an element
/// that is not there) changes neither set.
#[test]
fn a_patch_written_as_kernel_messages_commits_whole_or_not_at_all() {
    if netns::skip_kernel_test("a_patch_written_as_kernel_messages_commits_whole_or_not_at_all") {
        return;
    }
    let namespace = netns::Netns::new().expect("a network namespace");
    let v4 = |a: u32, len: u8| {
        ipnet::IpNet::new(IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + a)), len).unwrap()
    };
    let set_of =
        |name: &str, interval: bool, nets: Vec<ipnet::IpNet>| netpol_nft::ruleset::AddressSet {
            name: name.into(),
            v6: false,
            interval,
            nets: netpol_datapath::sets::SortedNets::from_sorted(nets),
            revision: 0,
            patch: None,
        };
    // /30s every 8 addresses, and single addresses every 2.
    let ranges: Vec<ipnet::IpNet> = (0..30_000u32).map(|i| v4(i * 8, 30)).collect();
    let hosts: Vec<ipnet::IpNet> = (0..30_000u32).map(|i| v4(i * 2, 32)).collect();
    let interval = set_of("a4i_patched", true, ranges.clone());
    let hash = set_of("a4_patched", false, hosts.clone());
    for set in [&interval, &hash] {
        namespace
            .nft(&script::render_set_fill(set, 0, 0))
            .expect("the set is declared");
        namespace
            .add_to_new_set(set, 0, set.nets.len())
            .expect("the kernel takes the elements");
    }
    // Every other range goes; each gone range's first half comes back as a /31 (overlapping
    // what was deleted in the same transaction). Every other host goes, and new ones come.
    let gone_ranges: Vec<ipnet::IpNet> = ranges.iter().copied().step_by(2).collect();
    let new_ranges: Vec<ipnet::IpNet> = (0..30_000u32).step_by(2).map(|i| v4(i * 8, 31)).collect();
    let gone_hosts: Vec<ipnet::IpNet> = hosts.iter().copied().skip(1).step_by(2).collect();
    let new_hosts: Vec<ipnet::IpNet> = (0..20_000u32).map(|i| v4(0x10_0000 + i, 32)).collect();
    let patches: Vec<script::SetPatch<'_>> = vec![
        (
            &interval,
            gone_ranges.as_slice().into(),
            new_ranges.as_slice().into(),
        ),
        (
            &hash,
            gone_hosts.as_slice().into(),
            new_hosts.as_slice().into(),
        ),
    ];
    namespace
        .patch_sets(&patches)
        .expect("the kernel takes the patch");
    let mut want_ranges: Vec<ipnet::IpNet> = ranges.iter().copied().skip(1).step_by(2).collect();
    want_ranges.extend(&new_ranges);
    want_ranges.sort();
    let mut want_hosts: Vec<ipnet::IpNet> = hosts.iter().copied().step_by(2).collect();
    want_hosts.extend(&new_hosts);
    want_hosts.sort();
    assert_eq!(
        namespace.set_contents(&interval).unwrap(),
        Some(want_ranges.clone())
    );
    assert_eq!(
        namespace.set_contents(&hash).unwrap(),
        Some(want_hosts.clone())
    );

    // Deleting what is not there any more refuses the whole patch, the other set's part too.
    let more_hosts = [v4(0x20_0000, 32)];
    let refused = namespace.patch_sets(&[
        (
            &hash,
            Cow::Borrowed(&[][..]),
            Cow::Borrowed(&more_hosts[..]),
        ),
        (
            &interval,
            Cow::Borrowed(&gone_ranges[..1]),
            Cow::Borrowed(&[][..]),
        ),
    ]);
    let message = refused
        .expect_err("an element that is not there")
        .to_string();
    assert!(message.contains("a4i_patched"), "{message}");
    assert_eq!(
        namespace.set_contents(&interval).unwrap(),
        Some(want_ranges)
    );
    assert_eq!(namespace.set_contents(&hash).unwrap(), Some(want_hosts));
}
