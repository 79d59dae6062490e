//! Random clusters and policies for the engine's property tests, and helpers that compare the
//! MapState engine with the reference evaluator.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::IpAddr;

use netpol_engine::flow::{AddressOracle, DirectionOracle, ReferenceOracle};
use netpol_engine::*;
use proptest::prelude::*;

pub const NAMESPACES: [&str; 3] = ["ns0", "ns1", "ns2"];
pub const NODES: [(&str, &str, &str); 2] =
    [("n0", "10.9.0.1", "zone-a"), ("n1", "10.9.0.2", "zone-b")];

#[derive(Clone, Debug)]
pub struct PodSpec {
    pub namespace: usize,
    pub app: &'static str,
    pub node: usize,
    pub http_port: u16,
    pub ipv6: bool,
}

pub fn namespace_labels(ns: usize, relabelled: bool) -> Labels {
    let mut l = Labels::new();
    l.insert(NAMESPACE_NAME_LABEL.into(), NAMESPACES[ns].into());
    let team = if (ns == 0) ^ relabelled { "a" } else { "b" };
    l.insert("team".into(), team.into());
    l
}

/// A label each pod carries with its own name, as StatefulSet pods do.
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";

pub fn pod_identities(index: usize, spec: &PodSpec, ns_relabelled: bool) -> Vec<Identity> {
    let v4: IpAddr = format!("10.0.{}.{}", index % 3, 10 + index)
        .parse()
        .unwrap();
    let mut addresses = vec![v4];
    if spec.ipv6 {
        addresses.push(format!("fd00::{}", 10 + index).parse().unwrap());
    }
    pod_identities_at(index, spec, ns_relabelled, &addresses)
}

/// The identities of pod `index` at the given addresses.
pub fn pod_identities_at(
    index: usize,
    spec: &PodSpec,
    ns_relabelled: bool,
    addresses: &[IpAddr],
) -> Vec<Identity> {
    let info = PodInfo {
        namespace: NAMESPACES[spec.namespace].into(),
        name: format!("pod{index}"),
        // Besides `app`, labels of their own that few selectors read (as a StatefulSet's pods
        // carry), so that identities that keep only the keys in use are exercised.
        labels: Labels::from([
            ("app".to_string(), spec.app.to_string()),
            (POD_NAME_LABEL.to_string(), format!("pod{index}")),
            ("pod-template-hash".to_string(), format!("h{}", index % 2)),
        ])
        .into(),
        namespace_labels: namespace_labels(spec.namespace, ns_relabelled).into(),
        node: Some(NODES[spec.node].0.into()),
        ports: vec![
            NamedPort {
                name: "http".into(),
                protocol: Protocol::Tcp,
                port: spec.http_port,
            },
            NamedPort {
                name: "dns".into(),
                protocol: Protocol::Udp,
                port: 53,
            },
        ],
    };
    addresses
        .iter()
        .map(|address| Identity::pod(info.clone(), *address))
        .collect()
}

pub fn node_identities(i: usize) -> Vec<Identity> {
    let (name, ip, zone) = NODES[i];
    let labels = Labels::from([("zone".to_string(), zone.to_string())]).into();
    vec![Identity::node(
        NodeInfo {
            name: name.into(),
            labels,
        },
        ip.parse().unwrap(),
    )]
}

pub fn pod_spec() -> impl Strategy<Value = PodSpec> {
    (
        0..3usize,
        prop::sample::select(vec!["web", "db", "api"]),
        0..2usize,
        prop::sample::select(vec![80u16, 8080]),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(namespace, app, node, http_port, ipv6)| PodSpec {
            namespace,
            app,
            node,
            http_port,
            ipv6,
        })
}

fn label_selector() -> impl Strategy<Value = LabelSelector> {
    prop_oneof![
        3 => Just(LabelSelector::everything()),
        2 => prop::sample::select(vec!["web", "db", "api"]).prop_map(|a| LabelSelector::from_labels([("app", a)])),
        1 => Just(LabelSelector { match_labels: Labels::new(), match_expressions: vec![Requirement::NotIn("app".into(), vec!["db".into()])] }),
        1 => Just(LabelSelector { match_labels: Labels::new(), match_expressions: vec![Requirement::Exists("app".into())] }),
        1 => (0..8usize).prop_map(|i| LabelSelector::from_labels([(POD_NAME_LABEL, format!("pod{i}"))])),
        // A per-pod label read every way a selector can (identities keep only the values
        // selectors name, and the key's presence where it is tested).
        1 => (0..8usize, 0..8usize).prop_map(|(i, j)| LabelSelector { match_labels: Labels::new(), match_expressions: vec![Requirement::In(POD_NAME_LABEL.into(), vec![format!("pod{i}"), format!("pod{j}")])] }),
        1 => (0..8usize).prop_map(|i| LabelSelector { match_labels: Labels::new(), match_expressions: vec![Requirement::NotIn(POD_NAME_LABEL.into(), vec![format!("pod{i}")])] }),
        1 => prop::bool::ANY.prop_map(|exists| LabelSelector { match_labels: Labels::new(), match_expressions: vec![if exists { Requirement::Exists(POD_NAME_LABEL.into()) } else { Requirement::DoesNotExist(POD_NAME_LABEL.into()) }] }),
    ]
}

fn namespace_selector() -> impl Strategy<Value = LabelSelector> {
    prop_oneof![
        3 => Just(LabelSelector::everything()),
        2 => prop::sample::select(vec!["a", "b"]).prop_map(|t| LabelSelector::from_labels([("team", t)])),
        2 => prop::sample::select(NAMESPACES.to_vec()).prop_map(|n| LabelSelector::from_labels([(NAMESPACE_NAME_LABEL, n)])),
    ]
}

fn pod_selector() -> impl Strategy<Value = PodSelector> {
    (namespace_selector(), label_selector())
        .prop_map(|(namespaces, pods)| PodSelector { namespaces, pods })
}

pub fn cidr(net: &str, except: &[&str], scope: AddressScope) -> Peer {
    Peer::Cidr(CidrSelector {
        net: net.parse().unwrap(),
        except: except
            .iter()
            .map(|e| e.parse().unwrap())
            .collect::<Vec<_>>()
            .into(),
        scope,
    })
}

fn peer() -> impl Strategy<Value = Peer> {
    prop_oneof![
        4 => pod_selector().prop_map(Peer::pods),
        1 => prop_oneof![Just(LabelSelector::everything()), Just(LabelSelector::from_labels([("zone", "zone-b")]))].prop_map(Peer::nodes),
        1 => Just(cidr("10.0.0.0/16", &["10.0.1.0/24"], AddressScope::Any)),
        1 => Just(cidr("192.0.2.0/24", &[], AddressScope::OutsideCluster)),
        1 => Just(cidr("192.0.2.0/28", &[], AddressScope::Any)),
        1 => Just(cidr("0.0.0.0/0", &["10.0.0.0/8"], AddressScope::OutsideCluster)),
        1 => Just(cidr("fd00::/64", &[], AddressScope::Any)),
        2 => prop::sample::select(vec![Entity::All, Entity::World, Entity::Cluster, Entity::Host, Entity::RemoteNode]).prop_map(Peer::Entity),
    ]
}

fn port_rule() -> impl Strategy<Value = PortRule> {
    prop_oneof![
        Just(PortRule::protocol(Protocol::Tcp)),
        Just(PortRule::single(Protocol::Tcp, 80)),
        Just(PortRule::range(Protocol::Tcp, 79, 81)),
        Just(PortRule::range(Protocol::Tcp, 64, 127)),
        Just(PortRule::single(Protocol::Udp, 53)),
        Just(PortRule::protocol(Protocol::Sctp)),
        Just(PortRule::named(Some(Protocol::Tcp), "http")),
        Just(PortRule::named(None, "dns")),
        Just(PortRule::any()),
    ]
}

pub fn entry(index: usize) -> impl Strategy<Value = PolicyEntry> {
    (
        prop::sample::select(Tier::ALL.to_vec()),
        0..3u32,
        0..2usize,
        prop::sample::select(vec![Verdict::Allow, Verdict::Deny, Verdict::Pass]),
        pod_selector(),
        prop::sample::select(Direction::BOTH.to_vec()),
        prop::collection::vec(peer(), 0..3),
        prop::collection::vec(port_rule(), 0..3),
        prop::bool::weighted(0.3),
        prop::sample::select(vec![
            None,
            None,
            Some(AuthMode::Required),
            Some(AuthMode::Disabled),
        ]),
        // Audited entries (`netpol.io/enforcement: audit`): engines of each view are compared
        // with the reference's verdict of that view.
        prop::bool::weighted(0.25),
    )
        .prop_map(
            move |(
                tier,
                value,
                name,
                verdict,
                subject,
                direction,
                peers,
                ports,
                default_deny,
                auth,
                audited,
            )| {
                // Unordered tiers share one priority, as translators make them.
                let priority = if tier == Tier::Normal {
                    Priority::unordered()
                } else {
                    Priority::new(value, format!("p{name}"), index as u32)
                };
                PolicyEntry {
                    tier,
                    priority,
                    verdict,
                    subject,
                    direction,
                    peers,
                    ports,
                    default_deny,
                    enforcement: if audited {
                        netpol_engine::Enforcement::Audit
                    } else {
                        netpol_engine::Enforcement::Enforce
                    },
                    auth,
                    provenance: Provenance {
                        kind: "Test".into(),
                        namespace: None,
                        name: format!("p{name}"),
                        rule: format!("{index}"),
                    },
                }
            },
        )
}

pub fn entries(max: usize) -> impl Strategy<Value = Vec<PolicyEntry>> {
    (1..=max).prop_flat_map(|n| (0..n).map(entry).collect::<Vec<_>>())
}

/// Addresses that are no pod or node: they resolve to world identities.
pub const OUTSIDE: [&str; 5] = [
    "192.0.2.7",
    "192.0.2.200",
    "8.8.8.8",
    "10.0.1.99",
    "fd00::99",
];
pub const PROBES: [(Protocol, u16); 8] = [
    (Protocol::Tcp, 80),
    (Protocol::Tcp, 81),
    (Protocol::Tcp, 8080),
    (Protocol::Tcp, 1000),
    (Protocol::Udp, 53),
    (Protocol::Udp, 80),
    (Protocol::Sctp, 80),
    (Protocol::Icmp, 0),
];

/// Compares engine lookups with the reference evaluator for every local endpoint address, every
/// remote address (every pod, node and world prefix, plus outside addresses) and every probe.
/// Returns the first disagreement.
pub fn first_disagreement(engine: &Engine) -> Option<String> {
    first_disagreement_in(engine, engine.entries(), engine.view())
}

/// [`first_disagreement`] against the reference's verdict of `view` over `entries`, every entry
/// of every policy with its audit mark (an engine of the enforced view holds none of the audited
/// ones; the reference leaves them out itself).
pub fn first_disagreement_in(
    engine: &Engine,
    entries: &[PolicyEntry],
    view: PolicyView,
) -> Option<String> {
    first_disagreement_of(engine, engine, entries, view)
}

/// [`first_disagreement_in`] with the verdicts of `oracle` (for the local endpoints of
/// `engine`).
pub fn first_disagreement_of(
    engine: &Engine,
    oracle: impl AddressOracle,
    entries: &[PolicyEntry],
    view: PolicyView,
) -> Option<String> {
    let mut store = engine.per_address_store();
    // Every prefix any entry names, whether or not the engine made it an identity (an engine on
    // a node makes identities only for entries selecting a local pod): the reference must decide
    // by the policies' meaning, and the remotes must include addresses of every named range.
    for prefix in entries
        .iter()
        .flat_map(|e| &e.peers)
        .flat_map(Peer::prefixes)
    {
        store.insert(Identity::world(prefix));
    }
    let reference = ReferenceOracle {
        entries,
        store: &store,
    };
    let by_address = ByAddress::new(&store, oracle);
    let mut remotes: Vec<IdentityId> = store.iter().map(|(id, _)| id).collect();
    remotes.extend(
        OUTSIDE
            .iter()
            .filter_map(|ip| store.resolve(ip.parse().unwrap())),
    );
    for (key, _) in engine.endpoints() {
        let (_, addresses) = engine.endpoint_pod(key).unwrap();
        for address in addresses {
            let endpoint = store.resolve(*address).unwrap();
            for &remote in &remotes {
                if by_address.address_of(remote).is_none() {
                    continue; // a prefix wholly covered by longer ones: no address resolves to it
                }
                for direction in Direction::BOTH {
                    for (protocol, port) in PROBES {
                        let got = by_address
                            .decide_direction(endpoint, direction, remote, protocol, port);
                        let audited =
                            reference.decide_audited(endpoint, direction, remote, protocol, port);
                        let want = audited.of(view);
                        if (got.verdict, got.auth) != (want.verdict, want.auth) {
                            return Some(format!(
                                "{view:?} view: {key} {direction} {} {protocol}/{port}: engine {:?}/{:?} ({}) reference {:?}/{:?} ({})",
                                store.get(remote).unwrap(),
                                got.verdict,
                                got.auth,
                                got.reason,
                                want.verdict,
                                want.auth,
                                want.reason
                            ));
                        }
                    }
                }
            }
        }
    }
    None
}

/// An engine that keeps audited entries ([`Engine::keep_audited`], as the agent's does), on
/// node n0 or cluster-wide, holding the nodes, `pods` and `entries`, committed.
pub fn engine_keeping_audited(
    pods: &[PodSpec],
    entries: Vec<PolicyEntry>,
    on_node: bool,
) -> Engine {
    let mut engine = Engine::new(EngineConfig {
        local_node: on_node.then(|| NODES[0].0.to_string()),
        ..EngineConfig::default()
    });
    engine.keep_audited();
    for (n, node) in NODES.iter().enumerate() {
        engine.set_node(node.0, node_identities(n));
    }
    for (i, spec) in pods.iter().enumerate() {
        engine.set_pod(format!("pod{i}"), pod_identities(i, spec, false));
    }
    engine.set_policy("random", entries);
    engine.commit();
    engine
}

/// The would-be verdicts of an engine that keeps audited entries ([`Engine::keep_audited`]),
/// by address: each local endpoint's [`Engine::would_be_map`], or its own map where no audited
/// entry selects it. Maps are computed once per endpoint.
pub struct WouldBeOracle<'a> {
    pub engine: &'a Engine,
    maps: BTreeMap<String, MapState>,
    endpoints: BTreeMap<IpAddr, String>,
}

impl<'a> WouldBeOracle<'a> {
    pub fn new(engine: &'a Engine) -> Self {
        let mut maps = BTreeMap::new();
        let mut endpoints = BTreeMap::new();
        for (key, map) in engine.endpoints() {
            let would_be = engine.would_be_map(key).unwrap_or_else(|| map.clone());
            maps.insert(key.to_string(), would_be);
            for address in engine.endpoint_pod(key).unwrap().1 {
                endpoints.insert(*address, key.to_string());
            }
        }
        WouldBeOracle {
            engine,
            maps,
            endpoints,
        }
    }
}

impl AddressOracle for WouldBeOracle<'_> {
    fn decide_address(
        &self,
        endpoint: IpAddr,
        direction: Direction,
        remote: IpAddr,
        protocol: Protocol,
        port: u16,
    ) -> reference::Decision {
        let own = self.endpoints.get(&endpoint);
        if own.is_some() && own == self.endpoints.get(&remote) {
            return reference::Decision::own_address();
        }
        let map = own.and_then(|key| self.maps.get(key));
        let value = match (map, self.engine.identities().resolve(remote)) {
            (Some(map), Some(remote)) => map.lookup(direction, remote, protocol, port),
            _ => MapState::default().lookup(direction, IdentityId(u32::MAX), protocol, port),
        };
        reference::Decision {
            verdict: value.verdict,
            auth: value.auth,
            reason: (*value.reason).clone(),
        }
    }
}

/// [`first_disagreement_in`] for the would-be view of an engine that keeps audited entries:
/// its would-be maps against the reference's would-be verdict.
pub fn first_would_be_disagreement(engine: &Engine, entries: &[PolicyEntry]) -> Option<String> {
    let oracle = WouldBeOracle::new(engine);
    first_disagreement_of(engine, &oracle, entries, PolicyView::WouldBe)
}

/// A MapState dump independent of identity numbering, to compare two engines.
pub fn canonical(engine: &Engine) -> BTreeMap<String, Vec<String>> {
    canonical_with(engine, |id| engine.identities().describe(id))
}

/// [`canonical`] naming identities by id rather than by their addresses: what changes only when
/// an endpoint's entries change.
pub fn canonical_by_id(engine: &Engine) -> BTreeMap<String, Vec<String>> {
    canonical_with(engine, |id| id.to_string())
}

/// Every identity with its description (kind and member addresses).
pub fn described_identities(engine: &Engine) -> BTreeMap<IdentityId, String> {
    let store = engine.identities();
    store
        .iter()
        .map(|(id, _)| (id, store.describe(id)))
        .collect()
}

fn canonical_with(
    engine: &Engine,
    name: impl Fn(IdentityId) -> String,
) -> BTreeMap<String, Vec<String>> {
    engine
        .endpoints()
        .map(|(key, map)| {
            let mut rows: Vec<String> = map
                .iter()
                .map(|(k, v)| {
                    let id = k.identity.map_or("*".to_string(), &name);
                    format!(
                        "{:?} {id} {:?}/{}/{} => {} {:?} {:?}",
                        k.direction,
                        k.protocol,
                        k.port,
                        k.port_prefix_len,
                        v.precedence,
                        v.verdict,
                        v.auth
                    )
                })
                .collect();
            rows.sort();
            (key.to_string(), rows)
        })
        .collect()
}
