//! proptest: HCN first match over the compiled rules equals the MapState lookup.
//!
//! - Random MapStates over nested CIDR identities, pods inside them, wildcard and exact entries,
//!   overlapping port prefixes, ties and authentication, respecting the MapState invariant.
//! - Random policies through the real engine (the engine's own generators), every local
//!   endpoint programmed into the simulator through the programmer, every flow compared.
//!
//! Case counts come from PROPTEST_CASES (default 256).

mod common;
#[path = "../../engine/tests/common/mod.rs"]
#[allow(clippy::all)]
mod engine_common;

use std::collections::HashMap;
use std::net::IpAddr;

use common::*;
use netpol_engine::flow::AddressOracle;
use netpol_engine::mapstate::{MapValue, PortKey};
use netpol_engine::*;
use netpol_hcn::schema::AclAction;
use netpol_hcn::{CompileOptions, SimOracle};
use proptest::prelude::*;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(256),
        ..ProptestConfig::default()
    }
}

const WORLDS: [&str; 7] = [
    "10.0.0.0/8",
    "10.1.0.0/16",
    "10.1.2.0/24",
    "10.1.2.3/32",
    "192.168.0.0/16",
    "fd00::/16",
    "fd00:1::/32",
];
const HOSTS: [&str; 6] = [
    "10.1.2.3",
    "10.1.2.4",
    "10.2.0.5",
    "192.168.1.1",
    "172.16.0.1",
    "fd00:1::5",
];

#[derive(Clone, Debug)]
struct RandomEntry {
    direction: Direction,
    /// Index into the identity list, or None for the wildcard.
    class: Option<usize>,
    key: PortKey,
    precedence: u128,
    verdict: Verdict,
    auth: Option<AuthMode>,
}

fn port_key() -> impl Strategy<Value = PortKey> {
    prop_oneof![
        1 => Just(PortKey::ANY),
        4 => (
            prop::sample::select(vec![Protocol::Tcp, Protocol::Udp, Protocol::Sctp]),
            prop::sample::select(vec![0u16, 53, 80, 81, 82, 443, 1000]),
            prop::sample::select(vec![0u8, 6, 14, 15, 16]),
        )
            .prop_map(|(p, port, len)| key(Some(p), port, len)),
        1 => Just(key(Some(Protocol::Icmp), 0, 0)),
    ]
}

fn random_entry() -> impl Strategy<Value = RandomEntry> {
    (
        prop::sample::select(Direction::BOTH.to_vec()),
        prop::option::weighted(0.75, 0..WORLDS.len() + HOSTS.len() + 2),
        port_key(),
        0..6u128,
        prop::sample::select(vec![Verdict::Allow, Verdict::Deny]),
        prop::sample::select(vec![
            None,
            None,
            None,
            Some(AuthMode::Required),
            Some(AuthMode::Disabled),
        ]),
    )
        .prop_map(
            |(direction, class, key, precedence, verdict, auth)| RandomEntry {
                direction,
                class,
                key,
                precedence,
                verdict,
                auth: if verdict == Verdict::Allow {
                    auth
                } else {
                    None
                },
            },
        )
}

/// Whether `outer` covers `inner` within one class.
fn covers(outer: &PortKey, inner: &PortKey) -> bool {
    match (outer.protocol, inner.protocol) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(a), Some(b)) => {
            a == b
                && outer.len <= inner.len
                && netpol_engine::portprefix::mask(inner.port, outer.len) == outer.port
        }
    }
}

fn build(entries: &[RandomEntry], roots: [(u128, Verdict); 2]) -> (MapState, IdentityStore) {
    let (store, ids) = store_with(&WORLDS, &HOSTS);
    let order: Vec<IdentityId> = ["0.0.0.0/0", "::/0"]
        .iter()
        .chain(WORLDS.iter())
        .chain(HOSTS.iter())
        .map(|n| ids[*n])
        .collect();
    let mut classes: HashMap<(Direction, Option<IdentityId>), HashMap<PortKey, MapValue>> =
        HashMap::new();
    for (d, (precedence, verdict)) in Direction::BOTH.into_iter().zip(roots) {
        classes
            .entry((d, None))
            .or_default()
            .insert(PortKey::ANY, value(precedence, verdict, None));
    }
    for e in entries {
        let class = (e.direction, e.class.map(|i| order[i]));
        let slot = classes.entry(class).or_default();
        if class.1.is_none() && e.key == PortKey::ANY {
            continue; // keep the root
        }
        slot.insert(e.key, value(e.precedence, e.verdict, e.auth));
    }
    // The MapState invariant: no entry has a lower precedence than one covering it in its class.
    for entries in classes.values_mut() {
        let snapshot: Vec<(PortKey, u128)> =
            entries.iter().map(|(k, v)| (*k, v.precedence)).collect();
        entries.retain(|k, v| {
            !snapshot
                .iter()
                .any(|(o, p)| o != k && covers(o, k) && *p > v.precedence)
        });
    }
    let mut b = MapBuilder::default();
    for ((d, id), entries) in classes {
        for (k, v) in entries {
            b.set(d, id, k, v);
        }
    }
    (b.build(), store)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn simulator_equals_lookup_on_random_mapstates(
        entries in prop::collection::vec(random_entry(), 0..24),
        roots in prop::array::uniform2((0..3u128, prop::sample::select(vec![Verdict::Allow, Verdict::Deny]))),
    ) {
        let (map, store) = build(&entries, roots);
        if let Some(m) = first_mismatch(&map, &store, &CompileOptions::default()) {
            prop_assert!(false, "{}", m);
        }
    }

    #[test]
    fn simulator_equals_engine_on_random_policies(
        pods in prop::collection::vec(engine_common::pod_spec(), 1..6),
        entries in engine_common::entries(8),
    ) {
        let engine = engine_with(&pods, entries);
        if let Some(m) = first_engine_mismatch(&engine) {
            prop_assert!(false, "{}", m);
        }
    }
}

/// A synthetic cluster of every policy kind the engine's generator makes, all pods local.
#[test]
fn simulator_equals_engine_on_a_synthetic_cluster() {
    use netpol_engine::synthetic::{ClusterSize, SyntheticCluster};
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
    assert_eq!(first_engine_mismatch(&engine), None);
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
/// the engine tests' outside addresses), both directions, every probe port.
fn first_engine_mismatch(engine: &Engine) -> Option<String> {
    let store = engine.identities();
    let oracle = match SimOracle::from_engine(engine) {
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
