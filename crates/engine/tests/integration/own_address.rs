//! A pod reaching its own address (hairpin) is allowed by every decider whatever the policies,
//! while a twin pod with the same labels, which shares its identity in the engine, is not.

use crate::common;

use common::*;
use netpol_engine::flow::{decide_flow, ReferenceOracle};
use netpol_engine::reference::Reason;
use netpol_engine::*;

/// Two twin dual-stack pods in ns0 (pod0: 10.0.0.10 and fd00::10, pod1: 10.0.1.11 and
/// fd00::11) under an Admin Deny of everything both ways and a NetworkPolicy-tier isolation.
fn denied_everything() -> Engine {
    let mut engine = Engine::new(EngineConfig::default());
    for (n, node) in NODES.iter().enumerate() {
        engine.set_node(node.0, node_identities(n));
    }
    let twin = PodSpec {
        namespace: 0,
        app: "web",
        node: 0,
        http_port: 80,
        ipv6: true,
    };
    for i in 0..2 {
        engine.set_pod(format!("pod{i}"), pod_identities(i, &twin, false));
    }
    let everyone = PodSelector {
        namespaces: LabelSelector::everything(),
        pods: LabelSelector::everything(),
    };
    let entry = |tier, verdict, direction, peers: Vec<Peer>, default_deny| PolicyEntry {
        tier,
        priority: if tier == Tier::Normal {
            Priority::unordered()
        } else {
            Priority::new(0, "deny", 0)
        },
        verdict,
        subject: everyone.clone(),
        direction,
        peers,
        ports: Vec::new(),
        default_deny,
        enforcement: netpol_engine::Enforcement::Enforce,
        auth: None,
        provenance: Provenance {
            kind: "Test".into(),
            namespace: None,
            name: format!("{tier:?}"),
            rule: "0".into(),
        },
    };
    let mut entries = Vec::new();
    for direction in Direction::BOTH {
        entries.push(entry(
            Tier::Admin,
            Verdict::Deny,
            direction,
            vec![Peer::Entity(Entity::All)],
            false,
        ));
        entries.push(entry(
            Tier::Normal,
            Verdict::Allow,
            direction,
            Vec::new(),
            true,
        ));
    }
    engine.set_policy("deny", entries);
    engine.commit();
    engine
}

#[test]
fn the_engine_allows_a_pod_its_own_addresses_and_denies_its_twin() {
    let engine = denied_everything();
    let ask = |endpoint: &str, direction, remote: &str| {
        engine.decide_address(
            endpoint.parse().unwrap(),
            direction,
            remote.parse().unwrap(),
            Protocol::Tcp,
            80,
        )
    };
    for direction in Direction::BOTH {
        for own in ["10.0.0.10", "fd00::10"] {
            let decision = ask(own, direction, own);
            assert_eq!(decision.verdict, Verdict::Allow, "{own} {direction}");
            assert_eq!(decision.reason, Reason::OwnAddress);
        }
        assert_eq!(
            ask("10.0.0.10", direction, "10.0.1.11").verdict,
            Verdict::Deny,
            "the twin pod1 shares pod0's identity but is another pod"
        );
        assert_eq!(
            ask("fd00::10", direction, "fd00::11").verdict,
            Verdict::Deny
        );
    }
}

#[test]
fn the_reference_and_whole_flows_allow_a_pod_its_own_address() {
    let engine = denied_everything();
    let store = engine.per_address_store();
    let reference = ReferenceOracle {
        entries: engine.entries(),
        store: &store,
    };
    let id = |ip: &str| store.resolve(ip.parse().unwrap()).unwrap();
    let (pod0, pod1) = (id("10.0.0.10"), id("10.0.1.11"));
    for oracle in [
        &reference as &dyn DirectionOracle,
        &ByAddress::new(&store, &engine),
    ] {
        let own = decide_flow(oracle, &store, pod0, pod0, Protocol::Udp, 53);
        assert!(own.allowed());
        assert_eq!(own.egress.unwrap().reason, Reason::OwnAddress);
        assert_eq!(own.ingress.unwrap().reason, Reason::OwnAddress);
        assert!(!decide_flow(oracle, &store, pod0, pod1, Protocol::Udp, 53).allowed());
        // Asked one direction at a time, the deciders say the same.
        let ingress = oracle.decide_direction(pod0, Direction::Ingress, pod0, Protocol::Tcp, 80);
        assert_eq!(ingress, reference::Decision::own_address());
    }
    assert_eq!(first_disagreement(&engine), None);
}
