//! proptest: HCN first match over the compiled rules equals the MapState lookup.
//!
//! - Random MapStates over nested CIDR identities, pods inside them, wildcard and exact entries,
//!   overlapping port prefixes, ties and authentication, respecting the MapState invariant.
//! - Random policies through the real engine (the engine's own generators), every local
//!   endpoint programmed into the simulator through the programmer, every flow compared.
//!
//! Case counts come from PROPTEST_CASES (default 256).

use crate::common;
use crate::engine_common;

use std::net::IpAddr;

use common::*;
use netpol_datapath::testing::*;
use netpol_datapath::CompileOptions;
use netpol_engine::flow::AddressOracle;
use netpol_engine::*;
use netpol_hcn::schema::AclAction;
use netpol_hcn::sim::SimMode;
use netpol_hcn::SimOracle;
use proptest::prelude::*;

proptest! {
    #![proptest_config(proptest_config())]

    #[test]
    fn simulator_equals_lookup_on_random_mapstates(
        entries in prop::collection::vec(random_entry(), 0..24),
        roots in prop::array::uniform2((0..3u128, prop::sample::select(vec![Verdict::Allow, Verdict::Deny]))),
    ) {
        let (map, store) = build(&entries, roots);
        for ip_sets in [false, true] {
            if let Some(m) = first_mismatch_with(&map, &store, &CompileOptions::default(), ip_sets) {
                prop_assert!(false, "ip_sets {}: {}", ip_sets, m);
            }
        }
    }

    #[test]
    fn simulator_equals_engine_on_random_policies(
        pods in prop::collection::vec(engine_common::pod_spec(), 1..6),
        entries in engine_common::entries(8),
    ) {
        let engine = engine_with(&pods, entries);
        for (ip_sets, mode) in [(false, SimMode::Ideal), (true, SimMode::Ideal), (true, SimMode::Ws2022)] {
            if let Some(m) = first_engine_mismatch_in(&engine, ip_sets, mode) {
                prop_assert!(false, "ip_sets {} {}: {}", ip_sets, mode, m);
            }
        }
    }
}

/// A synthetic cluster of every policy kind the engine's generator makes, all pods local.
#[test]
fn simulator_equals_engine_on_a_synthetic_cluster() {
    use netpol_dev::synth::engine_terms::{ClusterSize, SyntheticCluster};
    let size = ClusterSize {
        namespaces: 12,
        pods: 120,
        nodes: 4,
        policies: 120,
    };
    let cluster = SyntheticCluster::new(size.clone());
    let mut engine = Engine::new(EngineConfig {
        local_node: Some(cluster.node_name(0)),
        allow_node_probes: true,
    });
    cluster.stage_into(&mut engine);
    engine.commit();
    assert!(engine.endpoints().count() >= 20);
    // Under every Windows Server build the simulator models, with sets and inline.
    for mode in SimMode::ALL {
        for ip_sets in [false, true] {
            assert_eq!(
                first_engine_mismatch_in(&engine, ip_sets, mode),
                None,
                "{mode}"
            );
        }
    }
    // With sets on, the ACLs do name sets (the comparison above is not vacuous).
    let oracle = SimOracle::build(&engine, &CompileOptions::default(), true).unwrap();
    assert!(oracle.compiled().values().any(|acls| !acls.sets.is_empty()));
    // On Windows Server 2022's l2bridge, the ingress peer sets are in LocalAddresses and the
    // endpoints hold host-scope allows (without which its host layer blocks everything).
    let oracle =
        SimOracle::build_in(&engine, &CompileOptions::default(), true, SimMode::Ws2022).unwrap();
    assert!(oracle.compiled().values().any(|acls| acls
        .rules
        .iter()
        .any(|r| r.local_addresses.starts_with("netpol-set-"))));
    let (key, acls) = oracle
        .compiled()
        .iter()
        .find(|(_, acls)| !acls.rules.is_empty())
        .unwrap();
    let held = oracle.sim().endpoint(key).unwrap().policies;
    assert!(
        held.len() > acls.rules.len(),
        "host-scope rules are held too"
    );
}

fn engine_with(pods: &[engine_common::PodSpec], entries: Vec<PolicyEntry>) -> Engine {
    let mut engine = Engine::new(EngineConfig::default());
    for n in 0..engine_common::NODES.len() {
        engine.set_node(engine_common::NODES[n].0, engine_common::node_identities(n));
    }
    for (i, spec) in pods.iter().enumerate() {
        engine.set_pod(
            format!("pod{i}"),
            engine_common::pod_identities(i, spec, false),
        );
    }
    engine.set_policy("random", entries);
    engine.commit();
    engine
}

/// Every local endpoint, every probe address (each identity's own, both ends of every prefix,
/// the engine tests' outside addresses), both directions, every probe port; ACLs naming network
/// IP sets (`ip_sets`) or inlining addresses.
/// On a simulator of the build `mode` models.
fn first_engine_mismatch_in(engine: &Engine, ip_sets: bool, mode: SimMode) -> Option<String> {
    let store = engine.identities();
    let oracle = match SimOracle::build_in(engine, &CompileOptions::default(), ip_sets, mode) {
        Ok(o) => o,
        Err(e) => return Some(e.to_string()),
    };
    let mut addresses = probe_addresses(store);
    addresses.extend(
        engine_common::OUTSIDE
            .iter()
            .map(|a| a.parse::<IpAddr>().unwrap()),
    );
    for (key, _) in engine.endpoints() {
        let (_, endpoint_addresses) = engine.endpoint_pod(key).unwrap();
        for &endpoint in endpoint_addresses {
            for &address in &addresses {
                let Some(remote) = store.resolve(address) else {
                    continue;
                };
                for direction in Direction::BOTH {
                    for (protocol, port) in engine_common::PROBES {
                        let want =
                            engine.decide_address(endpoint, direction, address, protocol, port);
                        // A pod's packets to one of its own addresses stay in its compartment
                        // and never meet the port's ACLs: the simulator's decider allows them
                        // before any ACL, as the engine does.
                        if endpoint_addresses.contains(&address) {
                            let got =
                                oracle.decide_address(endpoint, direction, address, protocol, port);
                            let own = reference::Decision::own_address();
                            if got != own || want != own {
                                return Some(format!(
                                    "{key} {direction} {address} (own address) {protocol}/{port}: sim {got:?}, engine {want:?}"
                                ));
                            }
                            continue;
                        }
                        let want = if want.verdict == Verdict::Allow
                            && want.auth != Some(AuthMode::Required)
                        {
                            AclAction::Allow
                        } else {
                            AclAction::Block
                        };
                        let (_, got) = oracle
                            .evaluate(endpoint, direction, address, protocol, port)
                            .unwrap();
                        if got.action != want {
                            return Some(format!(
                                "{key} {direction} {address} ({}) {protocol}/{port}: sim {:?} by {:?}, engine {want:?}\n{}",
                                store.describe(remote),
                                got.action,
                                got.rule,
                                oracle.compiled()[key].update_request_json()
                            ));
                        }
                    }
                }
            }
        }
    }
    None
}
