//! Differences between the engine and the reference evaluator that fuzzing found, each rebuilt
//! as a plain test from its decoded input (fuzz/artifacts/engine_equivalence/...).

mod common;

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
            Peer::Pods(PodSelector {
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
