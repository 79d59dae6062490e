//! The per-endpoint entry budget: an endpoint whose policy would exceed it is isolated (deny both
//! ways, node probes still admitted) and named with the policy responsible; other endpoints are
//! unaffected, and the endpoint returns to its policy once it fits again.

use crate::common;

use common::*;
use std::net::IpAddr;

use netpol_engine::engine::OverBudget;
use netpol_engine::flow::AddressOracle;
use netpol_engine::*;

/// Ingress to `app` pods in ns0 from `cidrs` distinct /32s, each on its own TCP port: nothing
/// shares, so the endpoint needs one class with one entry per CIDR.
fn wide(app: &str, cidrs: u32) -> Vec<PolicyEntry> {
    (0..cidrs)
        .map(|i| PolicyEntry {
            tier: Tier::Normal,
            priority: Priority::unordered(),
            verdict: Verdict::Allow,
            subject: PodSelector {
                namespaces: LabelSelector::from_labels([(NAMESPACE_NAME_LABEL, "ns0")]),
                pods: LabelSelector::from_labels([("app", app)]),
            },
            direction: Direction::Ingress,
            peers: vec![Peer::Cidr(CidrSelector {
                net: format!("192.168.{}.{}/32", i / 256, i % 256)
                    .parse()
                    .unwrap(),
                except: Default::default(),
                scope: AddressScope::Any,
            })],
            ports: vec![PortRule::single(Protocol::Tcp, 1000 + i as u16)],
            default_deny: true,
            enforcement: netpol_engine::Enforcement::Enforce,
            auth: None,
            provenance: Provenance {
                kind: "NetworkPolicy".into(),
                namespace: Some("ns0".into()),
                name: format!("wide-{app}"),
                rule: format!("ingress[{i}]"),
            },
        })
        .collect()
}

struct Cluster {
    engine: Engine,
    web: IpAddr,
    db: IpAddr,
    node: IpAddr,
}

fn cluster(limit: usize) -> Cluster {
    let mut engine = Engine::new(EngineConfig::default());
    engine.set_max_entries(limit);
    for (n, node) in NODES.iter().enumerate() {
        engine.set_node(node.0, node_identities(n));
    }
    let spec = |app| PodSpec {
        namespace: 0,
        app,
        node: 0,
        http_port: 80,
        ipv6: false,
    };
    let web = pod_identities(0, &spec("web"), false);
    let db = pod_identities(1, &spec("db"), false);
    let addresses = (web[0].prefix.addr(), db[0].prefix.addr());
    engine.set_pod("ns0/web", web);
    engine.set_pod("ns0/db", db);
    engine.commit();
    Cluster {
        engine,
        web: addresses.0,
        db: addresses.1,
        node: NODES[0].1.parse().unwrap(),
    }
}

fn verdict(c: &Cluster, endpoint: IpAddr, dir: Direction, remote: &str, port: u16) -> Verdict {
    c.engine
        .decide_address(endpoint, dir, remote.parse().unwrap(), Protocol::Tcp, port)
        .verdict
}

#[test]
fn an_endpoint_over_budget_is_isolated_alone_and_named() {
    let mut c = cluster(100);
    c.engine
        .set_policy("NetworkPolicy/ns0/wide-web", wide("web", 150));
    c.engine
        .set_policy("NetworkPolicy/ns0/wide-db", wide("db", 20));
    let changes = c.engine.commit();
    assert!(changes.iter().any(|e| e.endpoint == "ns0/web"));

    let over: Vec<(&str, &OverBudget)> = c.engine.over_budget().collect();
    assert_eq!(over.len(), 1, "{over:?}");
    let (key, why) = over[0];
    assert_eq!(key, "ns0/web");
    assert_eq!(why.limit, 100);
    assert!(why.entries > 100, "{why:?}");
    assert_eq!(why.policies, vec!["NetworkPolicy ns0/wide-web".to_string()]);

    // Fail closed: what the policy allows is denied too, both ways; the node still probes.
    let web = c.web;
    assert_eq!(
        verdict(&c, web, Direction::Ingress, "192.168.0.1", 1001),
        Verdict::Deny
    );
    assert_eq!(
        verdict(&c, web, Direction::Egress, "8.8.8.8", 53),
        Verdict::Deny
    );
    let node = c.node.to_string();
    assert_eq!(
        verdict(&c, web, Direction::Ingress, &node, 8080),
        Verdict::Allow
    );
    let reason = c
        .engine
        .decide_address(
            web,
            Direction::Ingress,
            "192.168.0.1".parse().unwrap(),
            Protocol::Tcp,
            1001,
        )
        .reason;
    assert!(reason.to_string().contains("entry-budget"), "{reason}");

    // The other endpoint keeps its own policy.
    let db = c.db;
    assert_eq!(
        verdict(&c, db, Direction::Ingress, "192.168.0.1", 1001),
        Verdict::Allow
    );
    assert_eq!(
        verdict(&c, db, Direction::Ingress, "192.168.0.1", 1002),
        Verdict::Deny
    );
    assert_eq!(
        verdict(&c, db, Direction::Egress, "8.8.8.8", 53),
        Verdict::Allow
    );
}

#[test]
fn an_endpoint_back_under_budget_gets_its_policy_and_the_change_is_reported() {
    let mut c = cluster(100);
    c.engine
        .set_policy("NetworkPolicy/ns0/wide-web", wide("web", 150));
    c.engine.commit();
    assert_eq!(c.engine.over_budget().count(), 1);

    c.engine
        .set_policy("NetworkPolicy/ns0/wide-web", wide("web", 30));
    let changes = c.engine.commit();
    assert!(changes
        .iter()
        .any(|e| e.endpoint == "ns0/web" && !e.is_empty()));
    assert_eq!(c.engine.over_budget().count(), 0);
    let web = c.web;
    assert_eq!(
        verdict(&c, web, Direction::Ingress, "192.168.0.1", 1001),
        Verdict::Allow
    );
    assert_eq!(
        verdict(&c, web, Direction::Egress, "8.8.8.8", 53),
        Verdict::Allow
    );
    assert!(c.engine.recompute_all().is_empty());
}

#[test]
fn an_identity_change_can_push_an_endpoint_over_budget_and_back() {
    // The class of each pod identity costs entries; a budget between the sizes with one and
    // with two remote pods is crossed by a pod arriving, not by a policy change.
    let mut c = cluster(0);
    let peers = PolicyEntry {
        tier: Tier::Normal,
        priority: Priority::unordered(),
        verdict: Verdict::Allow,
        subject: PodSelector {
            namespaces: LabelSelector::everything(),
            pods: LabelSelector::from_labels([("app", "web")]),
        },
        direction: Direction::Ingress,
        // The second peer selects nothing but makes selectors read the namespace's name, so
        // that db pods of different namespaces are different identities.
        peers: vec![
            Peer::pods(PodSelector {
                namespaces: LabelSelector::everything(),
                pods: LabelSelector::from_labels([("app", "db")]),
            }),
            Peer::pods(PodSelector {
                namespaces: LabelSelector::from_labels([(NAMESPACE_NAME_LABEL, "ns2")]),
                pods: LabelSelector::everything(),
            }),
        ],
        ports: (0..10)
            .map(|i| PortRule::single(Protocol::Tcp, 2000 + i * 7))
            .collect(),
        default_deny: true,
        enforcement: netpol_engine::Enforcement::Enforce,
        auth: None,
        provenance: Provenance {
            kind: "NetworkPolicy".into(),
            namespace: Some("ns0".into()),
            name: "from-db".into(),
            rule: "ingress[0]".into(),
        },
    };
    c.engine.set_max_entries(usize::MAX);
    c.engine
        .set_policy("NetworkPolicy/ns0/from-db", vec![peers]);
    c.engine.commit();
    let size = c.engine.endpoint("ns0/web").unwrap().footprint();
    c.engine.set_max_entries(size);

    // A db pod in another namespace is another identity: one more class (sharing the first
    // one's entries), over the budget.
    let other = PodSpec {
        namespace: 1,
        app: "db",
        node: 1,
        http_port: 80,
        ipv6: false,
    };
    c.engine.set_pod("ns1/db", pod_identities(5, &other, false));
    let changes = c.engine.commit();
    assert!(changes.iter().any(|e| e.endpoint == "ns0/web"));
    assert_eq!(
        c.engine.over_budget().map(|(k, _)| k).collect::<Vec<_>>(),
        ["ns0/web"]
    );
    let db = c.db.to_string();
    assert_eq!(
        verdict(&c, c.web, Direction::Ingress, &db, 2000),
        Verdict::Deny
    );
    assert!(c.engine.recompute_all().is_empty());

    c.engine.set_pod("ns1/db", Vec::new());
    c.engine.commit();
    assert_eq!(c.engine.over_budget().count(), 0);
    assert_eq!(
        verdict(&c, c.web, Direction::Ingress, &db, 2000),
        Verdict::Allow
    );
    assert!(c.engine.recompute_all().is_empty());
}
