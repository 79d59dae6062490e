//! proptest: addresses reused under churn. Pods and nodes draw their addresses from a pool of
//! four, so an address is given to a new pod while the old one still lists it, deletes arrive
//! late, and a pod or a node can claim a node's address. Events arrive in random order relative
//! to the objects' creation times. After every step:
//! - each address belongs to the newest live object that lists it (by creation time), whatever
//!   order the events came in;
//! - the local endpoints are exactly the pods that own an address;
//! - MapState lookups equal the reference evaluator over those owners;
//! - the incremental state equals a full recompute and an engine built afresh from the same
//!   objects.
//!
//! `PROPTEST_CASES` sets the case count; a failure prints the minimal sequence and proptest's
//! seed (replay with `PROPTEST_RNG_SEED`), and is kept in `address_reuse.proptest-regressions`.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use common::*;
use netpol_engine::*;
use proptest::prelude::*;

/// The pool: two pod-range addresses (one inside a CIDR the random policies name), node n0's
/// own address, and an IPv6 address.
const POOL: [&str; 4] = ["10.0.0.10", "10.0.1.11", "10.9.0.1", "fd00::10"];
const PODS: usize = 5;
const NODE_NAMES: [&str; 2] = ["n0", "n1"];

fn address(i: usize) -> IpAddr {
    POOL[i].parse().unwrap()
}

#[derive(Clone, Debug)]
enum Step {
    /// Creates or replaces pod `0` with a spec, an address from the pool and a creation time.
    SetPod(usize, PodSpec, usize, u8),
    /// The pod is given another address of the pool.
    MovePod(usize, usize),
    RelabelPod(usize, &'static str),
    DeletePod(usize),
    /// Creates or replaces a node with addresses from the pool and a creation time.
    SetNode(usize, Vec<usize>, u8),
    DeleteNode(usize),
    SetPolicy(Vec<PolicyEntry>),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..PODS, pod_spec(), 0..POOL.len(), any::<u8>())
            .prop_map(|(i, spec, a, created)| Step::SetPod(i, spec, a, created)),
        2 => (0..PODS, 0..POOL.len()).prop_map(|(i, a)| Step::MovePod(i, a)),
        1 => (0..PODS, prop::sample::select(vec!["web", "db", "api"]))
            .prop_map(|(i, app)| Step::RelabelPod(i, app)),
        3 => (0..PODS).prop_map(Step::DeletePod),
        1 => (0..2usize, prop::collection::btree_set(0..POOL.len(), 1..3), any::<u8>())
            .prop_map(|(n, a, created)| Step::SetNode(n, a.into_iter().collect(), created)),
        1 => (0..2usize).prop_map(Step::DeleteNode),
        1 => entries(4).prop_map(Step::SetPolicy),
    ]
}

#[derive(Clone, Debug)]
struct LivePod {
    spec: PodSpec,
    address: usize,
    /// Unique per object (the object's number breaks ties), so the newest claim is defined by
    /// time alone and an engine built afresh must agree with the incremental one.
    created: i64,
}

#[derive(Clone, Debug, Default)]
struct World {
    pods: BTreeMap<usize, LivePod>,
    nodes: BTreeMap<usize, (Vec<usize>, i64)>,
    policy: Vec<PolicyEntry>,
}

impl World {
    fn pod_identities(&self, i: usize) -> Vec<Identity> {
        let pod = &self.pods[&i];
        pod_identities_at(i, &pod.spec, false, &[address(pod.address)])
    }

    fn node_identities(&self, n: usize) -> Vec<Identity> {
        let (addresses, _) = &self.nodes[&n];
        let labels: SharedLabels = Labels::from([("zone".to_string(), format!("z{n}"))]).into();
        addresses
            .iter()
            .map(|a| {
                Identity::node(
                    NodeInfo {
                        name: NODE_NAMES[n].into(),
                        labels: labels.clone(),
                    },
                    address(*a),
                )
            })
            .collect()
    }

    fn stage_pod(&self, engine: &mut Engine, i: usize) {
        match self.pods.get(&i) {
            Some(pod) => engine.set_pod_created(
                format!("pod{i}"),
                self.pod_identities(i).into(),
                Some(pod.created),
            ),
            None => engine.set_pod(format!("pod{i}"), vec![]),
        }
    }

    fn stage_node(&self, engine: &mut Engine, n: usize) {
        match self.nodes.get(&n) {
            Some((_, created)) => {
                engine.set_node_created(NODE_NAMES[n], self.node_identities(n), Some(*created))
            }
            None => engine.set_node(NODE_NAMES[n], vec![]),
        }
    }

    /// The owner each pool address must have: the newest live object listing it.
    fn expected_owners(&self) -> BTreeMap<usize, String> {
        let mut claims: BTreeMap<usize, (i64, String)> = BTreeMap::new();
        let pods = self
            .pods
            .iter()
            .map(|(i, p)| (p.created, format!("pod pod{i}"), vec![p.address]));
        let nodes = self
            .nodes
            .iter()
            .map(|(n, (a, created))| (*created, format!("node {}", NODE_NAMES[*n]), a.clone()));
        for (created, name, addresses) in pods.chain(nodes) {
            for a in addresses {
                let newer = claims.get(&a).is_none_or(|(c, _)| created > *c);
                if newer {
                    claims.insert(a, (created, name.clone()));
                }
            }
        }
        claims.into_iter().map(|(a, (_, name))| (a, name)).collect()
    }

    /// An engine built from scratch with the world's objects, staged in a shuffled order.
    fn fresh(&self) -> Engine {
        let mut engine = Engine::new(EngineConfig::default());
        for n in self.nodes.keys().rev() {
            self.stage_node(&mut engine, *n);
        }
        for i in self.pods.keys().rev() {
            self.stage_pod(&mut engine, *i);
        }
        engine.set_policy("random", self.policy.clone());
        engine.commit();
        engine
    }
}

/// Who holds a pool address in the engine's per-address store: "pod NAME", "node NAME", or
/// nothing (the address resolves to a world prefix).
fn owner_in(store: &IdentityStore, a: usize) -> Option<String> {
    let identity = store.get(store.resolve(address(a))?)?;
    match &identity.kind {
        IdentityKind::Pod(p) => Some(format!("pod {}", p.name)),
        IdentityKind::Node(n) => Some(format!("node {}", n.name)),
        IdentityKind::World => None,
    }
}

fn check(engine: &mut Engine, world: &World) -> Result<(), TestCaseError> {
    let owners = world.expected_owners();
    let store = engine.per_address_store();
    for (a, text) in POOL.iter().enumerate() {
        prop_assert_eq!(
            owner_in(&store, a),
            owners.get(&a).cloned(),
            "owner of {}",
            text
        );
    }
    let endpoints: BTreeSet<String> = engine.endpoints().map(|(k, _)| k.to_owned()).collect();
    let owning: BTreeSet<String> = owners
        .values()
        .filter_map(|o| o.strip_prefix("pod ").map(str::to_owned))
        .collect();
    prop_assert_eq!(
        endpoints,
        owning,
        "the endpoints are the pods that own an address"
    );
    for (key, _) in engine.endpoints() {
        let (_, addresses) = engine.endpoint_pod(key).unwrap();
        for a in addresses {
            prop_assert_eq!(engine.endpoint_at(*a), Some(key), "endpoint at {}", a);
        }
    }
    if let Some(d) = first_disagreement(engine) {
        prop_assert!(false, "{}", d);
    }
    let drift = engine.recompute_all();
    prop_assert!(
        drift.is_empty(),
        "incremental differs from a recompute: {:?}",
        drift
    );
    prop_assert_eq!(canonical(engine), canonical(&world.fresh()));
    Ok(())
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(256),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn an_address_belongs_to_its_newest_claimant(
        policy in entries(4),
        steps in prop::collection::vec(step(), 1..16),
    ) {
        let mut engine = Engine::new(EngineConfig::default());
        let mut world = World { policy: policy.clone(), ..World::default() };
        engine.set_policy("random", policy);
        engine.commit();
        for step in steps {
            match step {
                Step::SetPod(i, spec, a, created) => {
                    let created = i64::from(created) * 16 + i as i64;
                    world.pods.insert(i, LivePod { spec, address: a, created });
                    world.stage_pod(&mut engine, i);
                }
                Step::MovePod(i, a) => {
                    if let Some(pod) = world.pods.get_mut(&i) {
                        pod.address = a;
                        world.stage_pod(&mut engine, i);
                    }
                }
                Step::RelabelPod(i, app) => {
                    if let Some(pod) = world.pods.get_mut(&i) {
                        pod.spec.app = app;
                        world.stage_pod(&mut engine, i);
                    }
                }
                Step::DeletePod(i) => {
                    if world.pods.remove(&i).is_some() {
                        world.stage_pod(&mut engine, i);
                    }
                }
                Step::SetNode(n, addresses, created) => {
                    let created = i64::from(created) * 16 + 8 + n as i64;
                    world.nodes.insert(n, (addresses, created));
                    world.stage_node(&mut engine, n);
                }
                Step::DeleteNode(n) => {
                    if world.nodes.remove(&n).is_some() {
                        world.stage_node(&mut engine, n);
                    }
                }
                Step::SetPolicy(entries) => {
                    world.policy = entries.clone();
                    engine.set_policy("random", entries);
                }
            }
            engine.commit();
            check(&mut engine, &world)?;
        }
    }
}

/// The race of issue 34, step by step: y/new is given y/old's address before y/old's delete
/// arrives; the late delete leaves the address with y/new.
#[test]
fn a_late_delete_keeps_the_reused_address_with_its_new_pod() {
    let spec = |app| PodSpec {
        namespace: 1,
        app,
        node: 0,
        http_port: 80,
        ipv6: false,
    };
    let reused: IpAddr = "10.1.2.5".parse().unwrap();
    let mut engine = Engine::new(EngineConfig::default());
    engine.set_pod_created(
        "y/old",
        pod_identities_at(1, &spec("db"), false, &[reused]).into(),
        Some(100),
    );
    engine.commit();
    engine.set_pod_created(
        "y/new",
        pod_identities_at(2, &spec("web"), false, &[reused]).into(),
        Some(200),
    );
    engine.commit();
    let holder = |engine: &Engine| {
        assert!(
            engine.identities().host(reused).is_some(),
            "the address is held"
        );
        let store = engine.per_address_store();
        let identity = store.get(store.resolve(reused)?)?;
        identity.as_pod().map(|p| p.name.clone())
    };
    assert_eq!(holder(&engine).as_deref(), Some("pod2"));
    assert_eq!(engine.endpoint_at(reused), Some("y/new"));
    assert!(engine.endpoint("y/old").is_none(), "y/old owns no address");
    engine.set_pod("y/old", vec![]);
    engine.commit();
    assert_eq!(holder(&engine).as_deref(), Some("pod2"));
    assert_eq!(engine.endpoint_at(reused), Some("y/new"));
}
