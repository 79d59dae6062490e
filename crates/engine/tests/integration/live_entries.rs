//! Memory follows what can match (issue 33): on a node, the prefixes of an entry whose subject
//! selects no local pod make no identity and hold no selector; they do once a local pod is
//! selected, and stop when it goes. Without a local node (the authoring tools) every entry counts.

use crate::common;

use common::*;
use netpol_engine::*;

/// An egress allow from `app` pods of ns0 to `count` /32s of 198.18.0.0/16.
fn cidr_policy(app: &str, count: u32) -> Vec<PolicyEntry> {
    let peers = (0..count)
        .map(|i| {
            Peer::Cidr(CidrSelector {
                net: format!("198.18.{}.{}/32", i / 256, i % 256)
                    .parse()
                    .unwrap(),
                except: PrefixSet::from(Vec::new()),
                scope: AddressScope::Any,
            })
        })
        .collect();
    vec![PolicyEntry {
        tier: Tier::Normal,
        priority: Priority::unordered(),
        verdict: Verdict::Allow,
        subject: PodSelector::in_namespace("ns0", LabelSelector::from_labels([("app", app)])),
        direction: Direction::Egress,
        peers,
        ports: Vec::new(),
        default_deny: true,
        enforcement: netpol_engine::Enforcement::Enforce,
        auth: None,
        provenance: Provenance::default(),
    }]
}

fn spec(app: &'static str, node: usize) -> PodSpec {
    PodSpec {
        namespace: 0,
        app,
        node,
        http_port: 80,
        ipv6: false,
    }
}

/// The local MapStates without precedence values: a new policy anywhere renumbers the global
/// precedence levels (rules keep their order), which is not a change of what any key decides.
fn decisions(engine: &Engine) -> Vec<(String, Vec<String>)> {
    canonical(engine)
        .into_iter()
        .map(|(key, rows)| {
            let rows = rows
                .iter()
                .map(|row| {
                    let (key, value) = row.split_once(" => ").expect("key => value");
                    let (_, value) = value.split_once(' ').expect("precedence, then the rest");
                    format!("{key} => {value}")
                })
                .collect();
            (key, rows)
        })
        .collect()
}

fn world_count(engine: &Engine) -> usize {
    engine.identities().world_prefixes().count()
}

fn on_node() -> Engine {
    let mut engine = Engine::new(EngineConfig {
        local_node: Some(NODES[0].0.into()),
        ..EngineConfig::default()
    });
    engine.set_node(NODES[0].0, node_identities(0));
    engine.set_pod("pod0", pod_identities(0, &spec("web", 0), false));
    // A db pod elsewhere: selected by the policy, but not local.
    engine.set_pod("pod1", pod_identities(1, &spec("db", 1), false));
    engine
}

#[test]
fn a_policy_selecting_no_local_pod_makes_no_identity_and_no_selector() {
    let mut engine = on_node();
    engine.commit();
    let (worlds, selectors) = (world_count(&engine), engine.selector_count());
    let before = decisions(&engine);

    engine.set_policy("db-egress", cidr_policy("db", 500));
    engine.commit();
    assert_eq!(
        world_count(&engine),
        worlds,
        "no world identity for 500 /32s"
    );
    assert_eq!(engine.selector_count(), selectors, "no selector either");
    assert_eq!(decisions(&engine), before, "no local decision changed");
}

#[test]
fn prefixes_follow_the_local_pods_their_entries_select() {
    let mut engine = on_node();
    engine.set_policy("db-egress", cidr_policy("db", 500));
    engine.commit();
    let worlds = world_count(&engine);

    // A db pod arrives on this node: the policy now selects a local endpoint, and its prefixes
    // become identities its MapState names.
    engine.set_pod("pod2", pod_identities(2, &spec("db", 0), false));
    engine.commit();
    assert_eq!(world_count(&engine), worlds + 500);
    let map = engine.endpoint("pod2").expect("pod2 is local");
    let remote = engine
        .identities()
        .resolve("198.18.1.3".parse().unwrap())
        .expect("a world identity");
    let allowed = map.lookup(Direction::Egress, remote, Protocol::Tcp, 443);
    assert_eq!(allowed.verdict, Verdict::Allow);
    assert!(
        first_disagreement(&engine).is_none(),
        "{:?}",
        first_disagreement(&engine)
    );
    assert!(engine.recompute_all().is_empty(), "incremental equals full");

    // It is relabelled away from the subject, then comes back, then goes: the identities follow.
    engine.set_pod("pod2", pod_identities(2, &spec("api", 0), false));
    engine.commit();
    assert_eq!(world_count(&engine), worlds);
    assert!(engine.recompute_all().is_empty(), "incremental equals full");
    engine.set_pod("pod2", pod_identities(2, &spec("db", 0), false));
    engine.commit();
    assert_eq!(world_count(&engine), worlds + 500);
    engine.set_pod("pod2", Vec::new());
    engine.commit();
    assert_eq!(world_count(&engine), worlds);
    assert!(engine.recompute_all().is_empty(), "incremental equals full");
}

#[test]
fn without_a_local_node_every_entry_makes_its_identities() {
    let mut engine = Engine::new(EngineConfig::default());
    engine.set_pod("pod1", pod_identities(1, &spec("db", 1), false));
    engine.commit();
    let worlds = world_count(&engine);
    // No pod is an endpoint, as for the what-if maps of `lint` and `diff`: the policy's prefixes
    // are still identities, since any pod may be asked about.
    engine.only_endpoints([]);
    engine.set_policy("db-egress", cidr_policy("db", 500));
    engine.commit();
    assert_eq!(world_count(&engine), worlds + 500);
}
