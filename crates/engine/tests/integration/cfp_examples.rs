//! The examples of CFP-23380, written as user-level policies with the verdicts they imply, and
//! checked both on the MapState's contents and on lookups.

use crate::common;

use common::*;
use std::net::IpAddr;

use netpol_engine::flow::AddressOracle;
use netpol_engine::*;

/// An admin-tier ingress entry of priority `value` for every pod, from `peer` over TCP `lo..=hi`
/// (or all TCP ports with None).
fn admin(value: u32, verdict: Verdict, peer: Peer, ports: Option<(u16, u16)>) -> PolicyEntry {
    PolicyEntry {
        tier: Tier::Admin,
        priority: Priority::new(value, format!("prio{value}"), 0),
        verdict,
        subject: PodSelector::all(),
        direction: Direction::Ingress,
        peers: vec![peer],
        ports: vec![match ports {
            Some((lo, hi)) => PortRule::range(Protocol::Tcp, lo, hi),
            None => PortRule::protocol(Protocol::Tcp),
        }],
        default_deny: false,
        enforcement: netpol_engine::Enforcement::Enforce,
        auth: None,
        provenance: Provenance {
            kind: "Test".into(),
            namespace: None,
            name: format!("prio{value}"),
            rule: String::new(),
        },
    }
}

fn pod5() -> Peer {
    Peer::pods(PodSelector {
        namespaces: LabelSelector::everything(),
        pods: LabelSelector::from_labels([("app", "five")]),
    })
}

fn all() -> Peer {
    Peer::Entity(Entity::All)
}

/// (identity, protocol, port, prefix length, verdict) of one ingress map entry.
type KeyRow = (Option<IdentityId>, Option<Protocol>, u16, u8, Verdict);

struct Fixture {
    engine: Engine,
    target: IpAddr,
    five: IpAddr,
    /// The engine identity of the `five` pod, as MapState keys name it.
    five_id: IdentityId,
}

/// A target pod and a remote pod ("identity 5"), both on node n0, with the given entries.
/// CFP priorities are "higher wins": here the lower admin priority value wins, so CFP prio 2
/// is written as value 1 and CFP prio 1 as value 2 (and prio 3 as value 0).
fn fixture(entries: Vec<PolicyEntry>) -> Fixture {
    let mut engine = Engine::new(EngineConfig {
        local_node: None,
        allow_node_probes: false,
    });
    let spec = |app| PodSpec {
        namespace: 0,
        app,
        node: 0,
        http_port: 80,
        ipv6: false,
    };
    let mut target = pod_identities(0, &spec("web"), false);
    let mut five = pod_identities(1, &spec("db"), false);
    for (ids, app) in [(&mut target, "target"), (&mut five, "five")] {
        if let IdentityKind::Pod(p) = &mut ids[0].kind {
            std::sync::Arc::make_mut(&mut p.labels).insert("app".into(), app.into());
        }
    }
    engine.set_pod("target", target.clone());
    engine.set_pod("five", five.clone());
    engine.set_policy("cfp", entries);
    engine.commit();
    let five_id = engine.identities().id_of(&five[0]).unwrap();
    let target = target[0].prefix.addr();
    let five = five[0].prefix.addr();
    assert!(
        first_disagreement(&engine).is_none(),
        "{:?}",
        first_disagreement(&engine)
    );
    Fixture {
        engine,
        target,
        five,
        five_id,
    }
}

impl Fixture {
    fn keys(&self) -> Vec<KeyRow> {
        let map = self.engine.endpoint("target").unwrap();
        let mut keys: Vec<_> = map
            .iter()
            .filter(|(k, _)| k.direction == Direction::Ingress && k.protocol.is_some())
            .map(|(k, v)| (k.identity, k.protocol, k.port, k.port_prefix_len, v.verdict))
            .collect();
        keys.sort();
        keys
    }
    fn verdict(&self, port: u16) -> Verdict {
        self.engine
            .decide_address(
                self.target,
                Direction::Ingress,
                self.five,
                Protocol::Tcp,
                port,
            )
            .verdict
    }
}

const TCP: Option<Protocol> = Some(Protocol::Tcp);

#[test]
fn example_1a_narrower_identity_of_lower_priority_is_not_inserted() {
    let f = fixture(vec![
        admin(1, Verdict::Allow, all(), Some((0, 1023))),
        admin(2, Verdict::Deny, pod5(), Some((0, 1023))),
    ]);
    assert_eq!(f.keys(), vec![(None, TCP, 0, 6, Verdict::Allow)]);
    assert_eq!(f.verdict(80), Verdict::Allow);
}

#[test]
fn example_1b_narrower_port_of_lower_priority_is_not_inserted() {
    let f = fixture(vec![
        admin(1, Verdict::Allow, all(), Some((0, 1023))),
        admin(2, Verdict::Deny, all(), Some((80, 80))),
    ]);
    assert_eq!(f.keys(), vec![(None, TCP, 0, 6, Verdict::Allow)]);
    assert_eq!(f.verdict(80), Verdict::Allow);
}

#[test]
fn example_1c_broader_lower_priority_entry_is_inserted_and_loses_where_they_overlap() {
    let f = fixture(vec![
        admin(1, Verdict::Allow, all(), Some((0, 1023))),
        admin(2, Verdict::Deny, pod5(), None),
    ]);
    assert_eq!(
        f.keys(),
        vec![
            (None, TCP, 0, 6, Verdict::Allow),
            (Some(f.five_id), TCP, 0, 0, Verdict::Deny)
        ]
    );
    assert_eq!(f.verdict(80), Verdict::Allow);
    assert_eq!(f.verdict(2000), Verdict::Deny);
}

#[test]
fn example_1d_disjoint_protocols_coexist() {
    let mut udp = admin(2, Verdict::Deny, pod5(), None);
    udp.ports = vec![PortRule::single(Protocol::Udp, 53)];
    let f = fixture(vec![admin(1, Verdict::Allow, all(), Some((0, 1023))), udp]);
    assert_eq!(
        f.keys(),
        vec![
            (None, TCP, 0, 6, Verdict::Allow),
            (Some(f.five_id), Some(Protocol::Udp), 53, 16, Verdict::Deny)
        ]
    );
    let udp_verdict = f
        .engine
        .decide_address(f.target, Direction::Ingress, f.five, Protocol::Udp, 53)
        .verdict;
    assert_eq!(udp_verdict, Verdict::Deny);
}

#[test]
fn example_1e_higher_priority_covering_entry_deletes_the_covered_one() {
    let f = fixture(vec![
        admin(1, Verdict::Allow, all(), Some((0, 1023))),
        admin(0, Verdict::Deny, all(), None),
    ]);
    assert_eq!(f.keys(), vec![(None, TCP, 0, 0, Verdict::Deny)]);
    assert_eq!(f.verdict(80), Verdict::Deny);
}

#[test]
fn example_2a_ancestor_wildcard_blocks_both_narrower_entries() {
    let f = fixture(vec![
        admin(1, Verdict::Deny, all(), None),
        admin(2, Verdict::Allow, all(), Some((80, 80))),
        admin(3, Verdict::Allow, pod5(), Some((80, 80))),
    ]);
    assert_eq!(f.keys(), vec![(None, TCP, 0, 0, Verdict::Deny)]);
    assert_eq!(f.verdict(80), Verdict::Deny);
}

#[test]
fn example_2b_descendant_wildcard_is_kept_and_precedence_decides_at_lookup() {
    let f = fixture(vec![
        admin(1, Verdict::Deny, pod5(), None),
        admin(2, Verdict::Allow, all(), Some((80, 80))),
    ]);
    assert_eq!(
        f.keys(),
        vec![
            (None, TCP, 80, 16, Verdict::Allow),
            (Some(f.five_id), TCP, 0, 0, Verdict::Deny)
        ]
    );
    // Identity 5 hits both; the exact-identity entry has the higher precedence.
    assert_eq!(f.verdict(80), Verdict::Deny);
}

fn cilium_allow(peer: Peer, ports: Vec<PortRule>, auth: Option<AuthMode>) -> PolicyEntry {
    PolicyEntry {
        tier: Tier::Normal,
        priority: Priority::unordered(),
        verdict: Verdict::Allow,
        subject: PodSelector::all(),
        direction: Direction::Ingress,
        peers: vec![peer],
        ports,
        default_deny: true,
        enforcement: netpol_engine::Enforcement::Enforce,
        auth,
        provenance: Provenance::default(),
    }
}

#[test]
fn auth_is_inherited_from_a_covering_entry_of_equal_precedence() {
    let f = fixture(vec![
        cilium_allow(pod5(), vec![], Some(AuthMode::Required)),
        cilium_allow(all(), vec![PortRule::single(Protocol::Tcp, 80)], None),
    ]);
    let d = f
        .engine
        .decide_address(f.target, Direction::Ingress, f.five, Protocol::Tcp, 80);
    assert_eq!(
        (d.verdict, d.auth),
        (Verdict::Allow, Some(AuthMode::Required))
    );
    // Another remote matching only the port rule needs no authentication.
    let world: IpAddr = "192.0.2.1".parse().unwrap();
    let d = f
        .engine
        .decide_address(f.target, Direction::Ingress, world, Protocol::Tcp, 80);
    assert_eq!((d.verdict, d.auth), (Verdict::Allow, None));
}

#[test]
fn auth_is_pushed_to_narrower_entries_of_the_same_identity() {
    let f = fixture(vec![
        cilium_allow(
            pod5(),
            vec![PortRule::protocol(Protocol::Tcp)],
            Some(AuthMode::Required),
        ),
        cilium_allow(pod5(), vec![PortRule::single(Protocol::Tcp, 80)], None),
    ]);
    let map = f.engine.endpoint("target").unwrap();
    let narrow = map
        .iter()
        .find(|(k, _)| k.identity == Some(f.five_id) && k.port == 80 && k.port_prefix_len == 16)
        .map(|(_, v)| v.auth);
    assert_eq!(narrow, Some(Some(AuthMode::Required)));
}

#[test]
fn pass_never_reaches_the_map_and_delegates_to_the_next_tier() {
    let mut isolate = cilium_allow(pod5(), vec![PortRule::single(Protocol::Tcp, 81)], None);
    isolate.default_deny = true;
    let f = fixture(vec![
        admin(1, Verdict::Pass, pod5(), Some((80, 81))),
        admin(2, Verdict::Deny, all(), None),
        isolate,
    ]);
    let map = f.engine.endpoint("target").unwrap();
    assert!(map.iter().all(|(_, v)| v.verdict != Verdict::Pass));
    assert_eq!(
        f.verdict(80),
        Verdict::Deny,
        "passed to the normal tier, which isolates"
    );
    assert_eq!(
        f.verdict(81),
        Verdict::Allow,
        "passed to the normal tier, which allows 81"
    );
    assert_eq!(
        f.verdict(82),
        Verdict::Deny,
        "not passed: the admin deny applies"
    );
}

/// A new replica of a label set that already has an identity joins that identity: no selector or
/// MapState work and no endpoint to compile again; the commit only reports the identity whose
/// addresses changed, so that datapaths update the address sets that name it.
#[test]
fn a_new_replica_changes_address_sets_only() {
    let f = fixture(vec![cilium_allow(
        pod5(),
        vec![PortRule::single(Protocol::Tcp, 80)],
        None,
    )]);
    let mut engine = f.engine;
    let identities = engine.identities().len();
    let before = engine.endpoint("target").unwrap().clone();
    let spec = PodSpec {
        namespace: 0,
        app: "db",
        node: 0,
        http_port: 80,
        ipv6: false,
    };
    let mut replica = pod_identities(7, &spec, false);
    if let IdentityKind::Pod(p) = &mut replica[0].kind {
        std::sync::Arc::make_mut(&mut p.labels).insert("app".into(), "five".into());
    }
    engine.set_pod("five-2", replica.clone());
    let changes = engine.commit();
    assert_eq!(engine.identities().len(), identities, "no new identity");
    assert_eq!(
        engine.identities().id_of(&replica[0]),
        Some(f.five_id),
        "the replica joined the identity of its label set"
    );
    assert_eq!(
        engine.endpoint("target").unwrap(),
        &before,
        "MapState untouched"
    );
    assert!(
        changes.iter().all(|c| c.endpoint != "target"),
        "no endpoint changes: {changes:?}"
    );
    assert_eq!(
        engine
            .changed_identities()
            .iter()
            .copied()
            .collect::<Vec<_>>(),
        vec![f.five_id],
        "only the replica's identity changed its addresses"
    );
    assert_eq!(engine.identities().members(f.five_id).len(), 2);
}
