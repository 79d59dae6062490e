//! The check that the simulator, fed the compiled rules, decides every flow as the MapState
//! lookup does. The MapState fixtures come from `netpol_datapath::testing`.
#![allow(dead_code)]

use std::net::IpAddr;

use netpol_datapath::testing::*;
use netpol_datapath::{CompileOptions, EndpointInfo};
use netpol_engine::mapstate::MapState;
use netpol_engine::*;
use netpol_hcn::api::HcnApi;
use netpol_hcn::ipsets::SetTable;
use netpol_hcn::oracle::packet;
use netpol_hcn::schema::AclAction;
use netpol_hcn::schema::{RequestType, SetPolicySetting};
use netpol_hcn::sim::{check_priorities, SimMode, SimQuirks};
use netpol_hcn::{HcnAcls, HcnDatapath, HcnSim, Remotes};

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

/// Loads compiled rules that name network IP sets into a fresh simulator: the sets first, then
/// the endpoint's list through a modify request, which the simulator checks (HCN's priority
/// rule, judged with the sets resolved, and every named set present).
pub fn simulate_with_sets(
    acls: &HcnAcls,
    table: &SetTable,
    local: &[IpAddr],
) -> HcnDatapath<HcnSim> {
    simulate_with_sets_in(acls, table, local, SimMode::Ideal)
}

/// [`simulate_with_sets`] on a simulator reading sets as `mode`'s build does (its ingress set
/// convention, IPv6 sets refused). The list goes in one request and holds no host-scope rule, so
/// the mode's request bound and host layer are left out: these tests are about set conventions.
pub fn simulate_with_sets_in(
    acls: &HcnAcls,
    table: &SetTable,
    local: &[IpAddr],
    mode: SimMode,
) -> HcnDatapath<HcnSim> {
    let sim = HcnSim::with_mode(mode).with_quirks(SimQuirks {
        max_new_acls_per_request: None,
        host_layer_default_deny: false,
        ..mode.quirks()
    });
    sim.add_endpoint(
        EndpointInfo {
            id: "ep".into(),
            name: "ep".into(),
            addresses: local.to_vec(),
        },
        Vec::new(),
    );
    let all = table.all();
    let datapath = HcnDatapath::new(sim);
    let sets: Vec<SetPolicySetting> = acls
        .sets
        .iter()
        .map(|id| (*all[id.as_str()]).clone())
        .collect();
    if !sets.is_empty() {
        datapath
            .modify_sets(RequestType::Add, sets)
            .expect("the simulator takes the sets");
    }
    datapath
        .modify_policies("ep", RequestType::Update, acls.policies())
        .expect("no overlapping rules of different actions share a priority");
    datapath
}

/// The first flow where the simulator and the lookup disagree, addresses inlined in the ACLs.
pub fn first_mismatch(
    map: &MapState,
    store: &IdentityStore,
    options: &CompileOptions,
) -> Option<String> {
    first_mismatch_with(map, store, options, false)
}

/// The first flow where the simulator and the lookup disagree, with ACLs naming network IP sets
/// (`ip_sets`) or inlining addresses.
pub fn first_mismatch_with(
    map: &MapState,
    store: &IdentityStore,
    options: &CompileOptions,
    ip_sets: bool,
) -> Option<String> {
    // With sets, both ingress set conventions: the plain reading, and Windows Server 2022's
    // (ingress sets in LocalAddresses, IPv6 members inlined).
    let modes: &[SimMode] = if ip_sets {
        &[SimMode::Ideal, SimMode::Ws2022]
    } else {
        &[SimMode::Ideal]
    };
    modes.iter().find_map(|mode| {
        first_mismatch_in(map, store, options, ip_sets, *mode).map(|m| format!("{mode}: {m}"))
    })
}

fn first_mismatch_in(
    map: &MapState,
    store: &IdentityStore,
    options: &CompileOptions,
    ip_sets: bool,
    mode: SimMode,
) -> Option<String> {
    let compiled = match netpol_datapath::compile_entries(map.iter(), store, options) {
        Ok(c) => c,
        Err(e) => return Some(format!("compile failed: {e}")),
    };
    let local: [IpAddr; 1] = ["10.99.0.1".parse().unwrap()];
    let mut table = SetTable::with_conventions(mode.capabilities().set_conventions());
    let (acls, datapath) = if ip_sets {
        let acls = HcnAcls::render_with(&compiled, store, &mut Remotes::Sets(&mut table));
        let datapath = simulate_with_sets_in(&acls, &table, &local, mode);
        (acls, datapath)
    } else {
        let acls = HcnAcls::render(&compiled, store);
        let datapath = HcnDatapath::new(simulate(&acls, &local));
        (acls, datapath)
    };
    let sim = datapath.calls();
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
