//! World identities are classes of prefixes (issue 33, "memory follows what can match"): the
//! prefixes that the same live entries select share one identity, split when another entry
//! selects some of them, merge back when it goes, and every address resolves and decides as it
//! did with an identity per prefix (the reference evaluator decides per prefix).

use crate::common;

use common::*;
use netpol_engine::*;

/// A CIDR peer that selects pods and nodes too (`ipBlock`).
fn any(net: &str, except: &[&str]) -> Peer {
    cidr(net, except, AddressScope::Any)
}

/// `count` /32 peers from `198.18.<third>.0` on.
fn hosts(third: u32, count: u32) -> Vec<Peer> {
    (0..count)
        .map(|i| {
            let n = third * 256 + i;
            any(&format!("198.18.{}.{}/32", n / 256, n % 256), &[])
        })
        .collect()
}

/// An egress `verdict` from the local `web` pods of ns0 to `peers` on `ports` (none: any).
fn egress(verdict: Verdict, peers: Vec<Peer>, ports: Vec<PortRule>) -> Vec<PolicyEntry> {
    vec![PolicyEntry {
        tier: Tier::Normal,
        priority: Priority::unordered(),
        verdict,
        subject: PodSelector::in_namespace("ns0", LabelSelector::from_labels([("app", "web")])),
        direction: Direction::Egress,
        peers,
        ports,
        default_deny: true,
        enforcement: Enforcement::Enforce,
        auth: None,
        provenance: Provenance::default(),
    }]
}

/// An engine on node 0 with one local `web` pod (`pod0`) and one `db` pod elsewhere.
fn on_node() -> Engine {
    let mut engine = Engine::new(EngineConfig {
        local_node: Some(NODES[0].0.into()),
        ..EngineConfig::default()
    });
    engine.set_node(NODES[0].0, node_identities(0));
    let spec = |app, node| PodSpec {
        namespace: 0,
        app,
        node,
        http_port: 80,
        ipv6: false,
    };
    engine.set_pod("pod0", pod_identities(0, &spec("web", 0), false));
    engine.set_pod("pod1", pod_identities(1, &spec("db", 1), false));
    engine
}

fn world_identities(engine: &Engine) -> usize {
    let store = engine.identities();
    store.iter().filter(|(_, i)| i.is_world()).count()
}

fn class_of(engine: &Engine, address: &str) -> IdentityId {
    engine
        .identities()
        .resolve(address.parse().unwrap())
        .expect("a world identity")
}

/// The MapState is exact and the incremental path agrees with a full recompute.
fn assert_exact(engine: &mut Engine) {
    if let Some(disagreement) = first_disagreement(engine) {
        panic!("{disagreement}");
    }
    assert!(engine.recompute_all().is_empty(), "incremental equals full");
}

#[test]
fn the_prefixes_of_one_peer_list_are_one_identity_and_one_map_entry() {
    let mut engine = on_node();
    engine.commit();
    let before = world_identities(&engine);
    let classes_before = engine.endpoint("pod0").unwrap().class_keys().count();
    engine.set_policy("web-egress", egress(Verdict::Allow, hosts(0, 1000), vec![]));
    engine.commit();
    // 1,000 prefixes, one identity (besides 0.0.0.0/0 and ::/0).
    assert_eq!(engine.identities().world_prefixes().count(), 1002);
    assert_eq!(world_identities(&engine), before + 1);
    let class = class_of(&engine, "198.18.3.231");
    assert_eq!(class_of(&engine, "198.18.0.0"), class);
    assert_eq!(engine.identities().members(class).len(), 1000);
    assert_eq!(
        engine.identities().summary(class),
        "world 198.18.0.0/32 (+999 prefixes)"
    );
    // One class for it in the MapState, not 1,000.
    let map = engine.endpoint("pod0").unwrap();
    assert_eq!(map.class_keys().count(), classes_before + 1);
    let worlds_named = map
        .class_keys()
        .filter_map(|(_, id)| engine.identities().get(id?))
        .filter(|identity| identity.is_world())
        .count();
    assert_eq!(worlds_named, 1);
    let allowed = map.lookup(Direction::Egress, class, Protocol::Tcp, 443);
    assert_eq!(allowed.verdict, Verdict::Allow);
    // An address next to them is not allowed.
    let outside = class_of(&engine, "198.18.3.232");
    assert_ne!(outside, class);
    let map = engine.endpoint("pod0").unwrap();
    assert_eq!(
        map.lookup(Direction::Egress, outside, Protocol::Tcp, 443)
            .verdict,
        Verdict::Deny
    );
    assert_exact(&mut engine);
}

#[test]
fn a_second_entry_splits_a_class_and_its_removal_merges_it_back() {
    let mut engine = on_node();
    engine.set_policy("a-web", egress(Verdict::Allow, hosts(0, 1000), vec![]));
    // Prefixes elsewhere, which no later change touches.
    engine.set_policy("c-web", egress(Verdict::Allow, hosts(8, 10), vec![]));
    engine.commit();
    let whole = class_of(&engine, "198.18.0.5");
    let untouched = class_of(&engine, "198.18.8.1");
    assert_ne!(whole, untouched);

    // A deny for 100 of the 1,000 (its own policy, between the two by key): they are selected
    // by other entries now, so they move to a class of their own.
    engine.set_policy(
        "b-web",
        egress(
            Verdict::Deny,
            hosts(0, 100),
            vec![PortRule::single(Protocol::Tcp, 22)],
        ),
    );
    engine.commit();
    let split = class_of(&engine, "198.18.0.5");
    assert_ne!(split, whole);
    assert_eq!(class_of(&engine, "198.18.0.99"), split);
    assert_eq!(
        class_of(&engine, "198.18.0.100"),
        whole,
        "the rest keep their id"
    );
    assert_eq!(engine.identities().members(split).len(), 100);
    assert_eq!(engine.identities().members(whole).len(), 900);
    assert_eq!(class_of(&engine, "198.18.8.1"), untouched);
    let map = engine.endpoint("pod0").unwrap();
    let ssh = |id| map.lookup(Direction::Egress, id, Protocol::Tcp, 22).verdict;
    assert_eq!((ssh(split), ssh(whole)), (Verdict::Deny, Verdict::Allow));
    assert_exact(&mut engine);

    // The deny goes: the 100 merge back into the class they left, which kept its id.
    engine.remove_policy("b-web");
    engine.commit();
    assert_eq!(class_of(&engine, "198.18.0.5"), whole);
    assert_eq!(engine.identities().members(whole).len(), 1000);
    assert!(
        engine.identities().get(split).is_none(),
        "the split class is gone"
    );
    assert_eq!(class_of(&engine, "198.18.8.1"), untouched);
    assert_exact(&mut engine);
}

#[test]
fn classes_follow_the_local_pods_their_entries_select() {
    let mut engine = on_node();
    engine.set_policy("a-web", egress(Verdict::Allow, hosts(0, 300), vec![]));
    engine.commit();
    let whole = class_of(&engine, "198.18.0.5");
    // The deny selects db pods, none local: it splits nothing.
    let mut deny = egress(Verdict::Deny, hosts(0, 30), vec![]);
    deny[0].subject = PodSelector::in_namespace("ns0", LabelSelector::from_labels([("app", "db")]));
    engine.set_policy("b-db", deny);
    engine.commit();
    assert_eq!(engine.identities().members(whole).len(), 300);
    // A db pod arrives on this node: the deny is live, its prefixes a class of their own, and
    // the web pod's map follows without a policy change.
    let db = PodSpec {
        namespace: 0,
        app: "db",
        node: 0,
        http_port: 80,
        ipv6: false,
    };
    engine.set_pod("pod2", pod_identities(2, &db, false));
    engine.commit();
    let split = class_of(&engine, "198.18.0.5");
    assert_ne!(split, whole);
    assert_eq!(engine.identities().members(whole).len(), 270);
    assert_exact(&mut engine);
    engine.set_pod("pod2", Vec::new());
    engine.commit();
    assert_eq!(class_of(&engine, "198.18.0.5"), whole);
    assert_eq!(engine.identities().members(whole).len(), 300);
    assert_exact(&mut engine);
}

#[test]
fn addresses_resolve_by_longest_prefix_through_excepts() {
    let mut engine = on_node();
    let peers = vec![
        any("198.18.0.0/16", &["198.18.1.0/24"]),
        any("198.18.1.5/32", &[]),
        any("198.18.2.7/32", &[]),
        any("203.0.113.0/24", &[]),
    ];
    engine.set_policy("web", egress(Verdict::Allow, peers, vec![]));
    engine.commit();
    let wide = class_of(&engine, "198.18.3.3");
    let hole = class_of(&engine, "198.18.1.9");
    let leaves = class_of(&engine, "198.18.1.5");
    let range = class_of(&engine, "203.0.113.200");
    // Prefixes that hold others keep identities of their own; the leaves the entry selects
    // are one for the single addresses and one for the ranges.
    let store = engine.identities();
    assert_eq!(store.members(wide), ["198.18.0.0/16".parse().unwrap()]);
    assert_eq!(store.members(hole), ["198.18.1.0/24".parse().unwrap()]);
    assert_eq!(class_of(&engine, "198.18.2.7"), leaves);
    assert_eq!(store.members(leaves).len(), 2);
    assert_eq!(store.members(range), ["203.0.113.0/24".parse().unwrap()]);
    assert!(!store.world_holds_ranges(leaves) && store.world_holds_ranges(range));
    let map = engine.endpoint("pod0").unwrap();
    let verdict = |id| map.lookup(Direction::Egress, id, Protocol::Tcp, 80).verdict;
    assert_eq!(verdict(wide), Verdict::Allow);
    assert_eq!(verdict(hole), Verdict::Deny);
    assert_eq!(verdict(leaves), Verdict::Allow);
    assert_eq!(verdict(range), Verdict::Allow);
    assert_eq!(verdict(class_of(&engine, "8.8.8.8")), Verdict::Deny);
    assert_exact(&mut engine);
}
