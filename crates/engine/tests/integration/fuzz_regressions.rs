//! Differences between the engine and the reference evaluator that fuzzing found, each rebuilt
//! as a plain test from its decoded input (fuzz/artifacts/engine_equivalence/...).

use crate::common;

use common::*;
use netpol_engine::*;

fn engine_with(pods: &[PodSpec], entries: Vec<PolicyEntry>) -> Engine {
    let mut engine = Engine::new(EngineConfig::default());
    for (n, node) in NODES.iter().enumerate() {
        engine.set_node(node.0, node_identities(n));
    }
    for (i, spec) in pods.iter().enumerate() {
        engine.set_pod(format!("pod{i}"), pod_identities(i, spec, false));
    }
    engine.set_policy("policy0", entries);
    engine.commit();
    engine
}

/// `engine-vs-reference-v6-world-auth`: an Admin Allow requiring authentication, ingress from
/// every pod and from `::/0` except `::/1` and `8000::/1` (so from no outside address at all),
/// for dual-stack pods. The engine and the reference agreed; the comparison itself was wrong: the
/// world identity `::/0`, wholly covered by the two halves, was given the address
/// `ffff:...:ffff` (the search for an uncovered address saturated at the top of the address
/// space), which lies in `8000::/1`, so the engine was asked about the wrong address.
#[test]
fn ipv6_world_admin_allow_with_authentication() {
    let web = |_| PodSpec {
        namespace: 0,
        app: "web",
        node: 0,
        http_port: 80,
        ipv6: true,
    };
    let pods: Vec<PodSpec> = (0..2).map(web).collect();
    let entry = PolicyEntry {
        tier: Tier::Admin,
        priority: Priority::new(1, "p0".to_string(), 0),
        verdict: Verdict::Allow,
        subject: PodSelector {
            namespaces: LabelSelector {
                match_labels: Labels::new(),
                match_expressions: vec![Requirement::Exists(NAMESPACE_NAME_LABEL.into())],
            },
            pods: LabelSelector {
                match_labels: Labels::new(),
                match_expressions: vec![Requirement::Exists("app".into())],
            },
        },
        direction: Direction::Ingress,
        peers: vec![
            Peer::pods(PodSelector {
                namespaces: LabelSelector::everything(),
                pods: LabelSelector::everything(),
            }),
            Peer::Cidr(CidrSelector {
                net: "::/0".parse().unwrap(),
                except: vec!["::/1".parse().unwrap(), "8000::/1".parse().unwrap()].into(),
                scope: AddressScope::OutsideCluster,
            }),
        ],
        ports: Vec::new(),
        default_deny: false,
        enforcement: netpol_engine::Enforcement::Enforce,
        auth: Some(AuthMode::Required),
        provenance: Provenance {
            kind: "Fuzz".into(),
            namespace: None,
            name: "p0".into(),
            rule: "0".into(),
        },
    };
    let engine = engine_with(&pods, vec![entry]);
    if let Some(difference) = first_disagreement(&engine) {
        let map: Vec<String> = engine
            .endpoint("pod0")
            .into_iter()
            .flat_map(|m| m.iter())
            .map(|(k, v)| format!("{k:?} => {:?}/{:?}", v.verdict, v.auth))
            .collect();
        panic!("engine and reference disagree: {difference}; pod0's MapState: {map:#?}");
    }
}

fn assert_agree(engine: &Engine) {
    if let Some(difference) = first_disagreement(engine) {
        panic!("engine and reference disagree: {difference}");
    }
}

fn dual_stack_web(node: usize, http_port: u16, ipv6: bool) -> PodSpec {
    PodSpec {
        namespace: 0,
        app: "web",
        node,
        http_port,
        ipv6,
    }
}

fn selector(match_labels: &[(&str, &str)], match_expressions: Vec<Requirement>) -> LabelSelector {
    LabelSelector {
        match_labels: match_labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        match_expressions,
    }
}

fn pod_selector(namespaces: LabelSelector, pods: LabelSelector) -> PodSelector {
    PodSelector { namespaces, pods }
}

fn everyone() -> PodSelector {
    pod_selector(LabelSelector::everything(), LabelSelector::everything())
}

fn all_ipv4() -> Peer {
    Peer::Cidr(CidrSelector {
        net: "0.0.0.0/0".parse().unwrap(),
        except: Vec::new().into(),
        scope: AddressScope::Any,
    })
}

/// An Admin entry of the fuzz targets' shape: policy `name`, rule `index`.
fn admin(
    name: &str,
    value: u32,
    index: u32,
    verdict: Verdict,
    subject: PodSelector,
) -> PolicyEntry {
    PolicyEntry {
        tier: Tier::Admin,
        priority: Priority::new(value, name.to_string(), index),
        verdict,
        subject,
        direction: Direction::Ingress,
        peers: Vec::new(),
        ports: Vec::new(),
        default_deny: false,
        enforcement: netpol_engine::Enforcement::Enforce,
        auth: None,
        provenance: Provenance {
            kind: "Fuzz".into(),
            namespace: None,
            name: name.into(),
            rule: index.to_string(),
        },
    }
}

/// `minimized-from-dce572df66563f8f12da9ee4eb31c1377fef0857` (22 bytes): two dual-stack pods
/// with equal labels, and an Admin Allow of ingress from `0.0.0.0/0` (pods included) that
/// isolates every pod. The engine allowed pod0's IPv6 address to reach pod0; the reference,
/// rightly, did not: `0.0.0.0/0` holds no IPv6 address. The engine was wrong: addresses share an
/// identity when the policy CIDRs hold them alike, and `/0` prefixes were left out of that
/// comparison as if they held every address, so each pod's IPv4 and IPv6 addresses were one
/// identity, which the peer `0.0.0.0/0` selected. That the flow is pod0 to itself is chance: the
/// same held for pod1's IPv6 address, and does for any pod's.
#[test]
fn ipv4_everywhere_does_not_select_a_dual_stack_pods_ipv6_address() {
    let pods: Vec<PodSpec> = (0..2).map(|_| dual_stack_web(0, 80, true)).collect();
    let entry = PolicyEntry {
        peers: vec![all_ipv4()],
        default_deny: true,
        ..admin("p0", 0, 0, Verdict::Allow, everyone())
    };
    let engine = engine_with(&pods, vec![entry]);
    assert_agree(&engine);
    // Said outright: pod1's IPv6 address reaching pod0 is denied, its IPv4 one allowed.
    let to_pod0 = |from: &str| {
        engine
            .decide_address(
                "10.0.0.10".parse().unwrap(),
                Direction::Ingress,
                from.parse().unwrap(),
                Protocol::Tcp,
                80,
            )
            .verdict
    };
    assert_eq!(to_pod0("10.0.1.11"), Verdict::Allow);
    let v6 = engine
        .decide_address(
            "fd00::10".parse().unwrap(),
            Direction::Ingress,
            "fd00::11".parse().unwrap(),
            Protocol::Tcp,
            80,
        )
        .verdict;
    assert_eq!(v6, Verdict::Deny);
}

/// `crash-f26b1efbc66e216d0dbd83ab83c6dcf1c0b43c06` (136 bytes), the same fault found first: a
/// dual-stack pod and an IPv4-only one, and eight Admin entries, of which rule 4 (Allow ingress
/// from `0.0.0.0/0` on the named ports `dns` and `http`, isolating every pod) selected pod0's
/// IPv6 address.
#[test]
fn ipv4_everywhere_on_named_ports_among_other_admin_rules() {
    let pods = vec![dual_stack_web(1, 80, true), dual_stack_web(1, 8080, false)];
    let api_not_db = selector(
        &[("app", "api")],
        vec![Requirement::NotIn(
            "app".into(),
            vec!["db".into(), "db".into()],
        )],
    );
    let in_ns0 = selector(
        &[],
        vec![Requirement::In(
            NAMESPACE_NAME_LABEL.into(),
            vec!["ns0".into()],
        )],
    );
    let team_a_db = pods_of(&[("team", "a")], &[("app", "db")]);
    let entries = vec![
        PolicyEntry {
            direction: Direction::Egress,
            peers: vec![
                Peer::pods(pod_selector(
                    LabelSelector::everything(),
                    selector(&[], vec![Requirement::DoesNotExist("app".into())]),
                )),
                Peer::Entity(Entity::World),
                Peer::Entity(Entity::RemoteNode),
            ],
            ports: vec![
                PortRule::range(Protocol::Tcp, 53, 79),
                PortRule::protocol(Protocol::Tcp),
                PortRule::protocol(Protocol::Udp),
            ],
            auth: Some(AuthMode::Disabled),
            ..admin("p1", 1, 0, Verdict::Pass, pod_selector(in_ns0, api_not_db))
        },
        PolicyEntry {
            direction: Direction::Egress,
            ports: vec![PortRule::named(Some(Protocol::Tcp), "http")],
            auth: Some(AuthMode::Required),
            ..admin("p1", 0, 1, Verdict::Allow, team_a_db.clone())
        },
        PolicyEntry {
            direction: Direction::Egress,
            peers: vec![Peer::pods(team_a_db)],
            ports: vec![PortRule::protocol(Protocol::Sctp)],
            ..admin(
                "p1",
                0,
                2,
                Verdict::Allow,
                pod_selector(
                    selector(&[], vec![Requirement::Exists(NAMESPACE_NAME_LABEL.into())]),
                    selector(&[], vec![Requirement::Exists("app".into())]),
                ),
            )
        },
        PolicyEntry {
            direction: Direction::Egress,
            peers: vec![Peer::pods(pod_selector(
                selector(&[("team", "a")], Vec::new()),
                selector(
                    &[],
                    vec![Requirement::In(
                        "app".into(),
                        vec!["web".into(), "web".into(), "api".into()],
                    )],
                ),
            ))],
            ports: vec![
                PortRule::any(),
                PortRule::single(Protocol::Tcp, 1),
                PortRule::protocol(Protocol::Tcp),
            ],
            ..admin(
                "p1",
                0,
                3,
                Verdict::Allow,
                pod_selector(
                    LabelSelector::everything(),
                    selector(&[("app", "db")], Vec::new()),
                ),
            )
        },
        PolicyEntry {
            peers: vec![all_ipv4()],
            ports: vec![
                PortRule::named(Some(Protocol::Udp), "dns"),
                PortRule::named(Some(Protocol::Tcp), "http"),
            ],
            default_deny: true,
            ..admin("p1", 0, 4, Verdict::Allow, everyone())
        },
        PolicyEntry {
            default_deny: true,
            ..admin("p0", 0, 5, Verdict::Allow, everyone())
        },
        PolicyEntry {
            default_deny: true,
            ..admin("p0", 0, 6, Verdict::Allow, everyone())
        },
        PolicyEntry {
            default_deny: true,
            ..admin("p0", 0, 7, Verdict::Allow, everyone())
        },
    ];
    let engine = engine_with(&pods, entries);
    assert_agree(&engine);
}

fn pods_of(namespace_labels: &[(&str, &str)], pod_labels: &[(&str, &str)]) -> PodSelector {
    pod_selector(
        selector(namespace_labels, Vec::new()),
        selector(pod_labels, Vec::new()),
    )
}
