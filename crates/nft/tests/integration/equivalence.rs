//! proptest: nftables first match over the compiled chains equals the MapState lookup.
//!
//! Random MapStates (the HCN equivalence test's generator) are compiled to ordered rules, built
//! into netpol's nftables model for one endpoint, and every probe flow's first packet is run
//! through the model with nftables semantics. Case counts come from PROPTEST_CASES (default 256).

use std::net::IpAddr;

use netpol_datapath::testing::*;
use netpol_datapath::{compile_entries, CompileOptions, RuleAction};
use netpol_engine::*;
use netpol_nft::eval::{evaluate, Packet};
use netpol_nft::{script, Ruleset};
use proptest::prelude::*;

const ENDPOINT_V4: &str = "10.99.0.1";
const ENDPOINT_V6: &str = "fd99::1";

/// The first flow where the nftables model and the lookup disagree.
fn first_mismatch(map: &MapState, store: &IdentityStore) -> Option<String> {
    let compiled = match compile_entries(map.iter(), store, &CompileOptions::default()) {
        Ok(a) => a,
        Err(e) => return Some(format!("compile failed: {e}")),
    };
    let local: [IpAddr; 2] = [ENDPOINT_V4.parse().unwrap(), ENDPOINT_V6.parse().unwrap()];
    let mut ruleset = Ruleset::default();
    ruleset.add("ep", local.to_vec(), &compiled.rules, store);
    let script = script::render(&ruleset).expect("one endpoint shares no address");
    for address in probe_addresses(store) {
        let Some(remote) = store.resolve(address) else {
            continue;
        };
        let endpoint = local[usize::from(address.is_ipv6())];
        for direction in Direction::BOTH {
            for protocol in Protocol::ALL {
                for port in PROBE_PORTS {
                    let want = expected(&map.lookup(direction, remote, protocol, port));
                    let (source, destination) = match direction {
                        Direction::Ingress => (address, endpoint),
                        Direction::Egress => (endpoint, address),
                    };
                    let packet = Packet {
                        source,
                        destination,
                        protocol,
                        dport: port,
                    };
                    let got = evaluate(&ruleset, &packet);
                    if got.accepted != (want == RuleAction::Allow) {
                        return Some(format!(
                            "{direction} {address} ({}) {protocol}/{port}: nft accepted={} by {:?}, lookup {want:?}\n{script}",
                            store.get(remote).unwrap(),
                            got.accepted,
                            got.chains,
                        ));
                    }
                }
            }
        }
    }
    None
}

proptest! {
    #![proptest_config(proptest_config())]

    #[test]
    fn nftables_equals_lookup_on_random_mapstates(
        entries in prop::collection::vec(random_entry(), 0..24),
        roots in prop::array::uniform2((0..3u128, prop::sample::select(vec![Verdict::Allow, Verdict::Deny]))),
    ) {
        let (map, store) = build(&entries, roots);
        if let Some(m) = first_mismatch(&map, &store) {
            prop_assert!(false, "{}", m);
        }
    }
}

/// A fixed case the generator may not hit: nested CIDRs with an `except` hole and a pod inside.
#[test]
fn an_except_hole_and_a_pod_inside_a_cidr_keep_their_own_decisions() {
    let (store, ids) = store_with(&["10.0.0.0/8", "10.1.0.0/16"], &["10.1.2.3", "10.2.0.1"]);
    let mut b = MapBuilder::new(Verdict::Deny);
    let allow = value(1, Verdict::Allow, None);
    b.set(
        Direction::Ingress,
        Some(ids["10.0.0.0/8"]),
        key(Some(Protocol::Tcp), 80, 16),
        allow.clone(),
    );
    b.set(
        Direction::Ingress,
        Some(ids["10.1.2.3"]),
        key(Some(Protocol::Tcp), 80, 16),
        allow,
    );
    let map = b.build();
    assert_eq!(first_mismatch(&map, &store), None);
}
