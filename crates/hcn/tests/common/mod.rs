//! The check that the simulator, fed the compiled rules, decides every flow as the MapState
//! lookup does. The MapState fixtures come from `netpol_datapath::testing`.
#![allow(dead_code)]

use std::net::IpAddr;

use netpol_datapath::testing::*;
use netpol_datapath::{CompileOptions, EndpointInfo};
use netpol_engine::mapstate::MapState;
use netpol_engine::*;
use netpol_hcn::oracle::packet;
use netpol_hcn::schema::AclAction;
use netpol_hcn::sim::check_priorities;
use netpol_hcn::{HcnAcls, HcnSim};

/// Loads compiled rules into a fresh simulator endpoint, checking HCN's priority rule.
pub fn simulate(acls: &HcnAcls, local: &[IpAddr]) -> HcnSim {
    let policies = acls.policies();
    check_priorities(&policies)
        .expect("no overlapping rules of different actions share a priority");
    let sim = HcnSim::new();
    sim.add_endpoint(
        EndpointInfo {
            id: "ep".into(),
            name: "ep".into(),
            addresses: local.to_vec(),
        },
        policies,
    );
    sim
}

/// The first flow where the simulator and the lookup disagree.
pub fn first_mismatch(
    map: &MapState,
    store: &IdentityStore,
    options: &CompileOptions,
) -> Option<String> {
    let acls = match netpol_hcn::compile_entries_acls(map.iter(), store, options) {
        Ok(a) => a,
        Err(e) => return Some(format!("compile failed: {e}")),
    };
    let sim = simulate(&acls, &["10.99.0.1".parse().unwrap()]);
    for address in probe_addresses(store) {
        let Some(remote) = store.resolve(address) else {
            continue;
        };
        for direction in Direction::BOTH {
            for protocol in Protocol::ALL {
                for port in PROBE_PORTS {
                    let want =
                        AclAction::from(expected(&map.lookup(direction, remote, protocol, port)));
                    let got = sim
                        .evaluate("ep", &packet(direction, address, protocol, port))
                        .unwrap();
                    if got.action != want {
                        return Some(format!(
                            "{direction} {address} ({}) {protocol}/{port}: sim {:?} by {:?}, lookup {want:?}\nrules: {}",
                            store.get(remote).unwrap(),
                            got.action,
                            got.rule,
                            acls.update_request_json()
                        ));
                    }
                }
            }
        }
    }
    None
}

/// An endpoint's MapState isolated for ingress except TCP `port` from 10.1.0.11, and its store.
pub fn isolated_but_tcp_from_one_host(port: u16) -> (MapState, IdentityStore) {
    let (store, ids) = store_with(&[], &["10.1.0.11"]);
    let mut b = MapBuilder::new(Verdict::Allow);
    b.set(
        Direction::Ingress,
        None,
        key(None, 0, 0),
        value(2, Verdict::Deny, None),
    );
    b.set(
        Direction::Ingress,
        Some(ids["10.1.0.11"]),
        key(Some(Protocol::Tcp), port, 16),
        value(5, Verdict::Allow, None),
    );
    (b.build(), store)
}
