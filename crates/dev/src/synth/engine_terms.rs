//! The synthetic cluster in engine terms, for the engine's and the datapaths' benchmarks, which
//! stage identities and policy entries straight into an engine (they cannot read files: the
//! translator depends on the engine). Its namespaces are the files' ([`super::namespace_labels`]);
//! its pods are simpler (one Deployment-like label set per app and tier) and its policies are
//! entries of every tier, not API objects. Deterministic for a given size.

use std::net::{IpAddr, Ipv4Addr};

use netpol_engine::prefixes::PrefixSet;
use netpol_engine::{
    AddressScope, CidrSelector, Direction, Enforcement, Engine, Identity, LabelSelector, Labels,
    NamedPort, NodeInfo, Peer, PodInfo, PodSelector, PolicyEntry, PortRule, Priority, Protocol,
    Provenance, Tier, Verdict,
};

#[derive(Clone, Debug)]
pub struct ClusterSize {
    pub namespaces: usize,
    pub pods: usize,
    pub nodes: usize,
    pub policies: usize,
}

/// Pods and nodes of a synthetic cluster, as engine identities.
pub struct SyntheticCluster {
    pub size: ClusterSize,
}

pub const APPS: usize = 50;

impl SyntheticCluster {
    pub fn new(size: ClusterSize) -> Self {
        SyntheticCluster { size }
    }

    /// Stages every node, pod and policy of the cluster into `engine` (the caller commits).
    pub fn stage_into(&self, engine: &mut Engine) {
        for i in 0..self.size.nodes {
            let (name, id) = self.node(i);
            engine.set_node(name, vec![id]);
        }
        for i in 0..self.size.pods {
            let (key, id) = self.pod(i);
            engine.set_pod(key, vec![id]);
        }
        for i in 0..self.size.policies {
            let (key, entries) = self.policy(i);
            engine.set_policy(key, entries);
        }
    }

    pub fn namespace_labels(&self, ns: usize) -> Labels {
        super::namespace_labels(ns)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }

    /// The node of the `i`th pod: consecutive pods share a node, so every node hosts a spread
    /// of namespaces and apps.
    pub fn node_of_pod(&self, i: usize) -> String {
        let per_node = (self.size.pods / self.size.nodes.max(1)).max(1);
        self.node_name(i / per_node)
    }

    pub fn node_name(&self, i: usize) -> String {
        format!("node-{}", i % self.size.nodes.max(1))
    }

    /// The `i`th pod: its key (`ns/name`) and identity.
    pub fn pod(&self, i: usize) -> (String, Identity) {
        let ns = i % self.size.namespaces;
        let info = PodInfo {
            namespace: format!("ns-{ns}"),
            name: format!("pod-{i}"),
            labels: [
                ("app".to_string(), format!("app-{}", i % APPS)),
                (
                    "tier".to_string(),
                    if i.is_multiple_of(2) { "front" } else { "back" }.to_string(),
                ),
            ]
            .into_iter()
            .collect::<Labels>()
            .into(),
            namespace_labels: self.namespace_labels(ns).into(),
            node: Some(self.node_of_pod(i)),
            ports: vec![NamedPort {
                name: "http".into(),
                protocol: Protocol::Tcp,
                port: 8080,
            }],
        };
        let ip = IpAddr::V4(Ipv4Addr::from(0x0a00_0000u32 + i as u32 + 1));
        (format!("ns-{ns}/pod-{i}"), Identity::pod(info, ip))
    }

    pub fn node(&self, i: usize) -> (String, Identity) {
        let labels = Labels::from([("zone".to_string(), format!("zone-{}", i % 3))]).into();
        let name = self.node_name(i);
        let ip = IpAddr::V4(Ipv4Addr::from(0xac10_0000u32 + i as u32 + 1));
        (name.clone(), Identity::node(NodeInfo { name, labels }, ip))
    }

    /// The `i`th policy: a mix of namespace-scoped allows (with isolation and named ports),
    /// admin denies and passes, CIDR egress rules and baseline rules.
    pub fn policy(&self, i: usize) -> (String, Vec<PolicyEntry>) {
        let ns = format!("ns-{}", i % self.size.namespaces);
        let app = |k: usize| LabelSelector::from_labels([("app", format!("app-{}", k % APPS))]);
        let provenance = |kind: &str| Provenance {
            kind: kind.into(),
            namespace: None,
            name: format!("policy-{i}"),
            rule: "0".into(),
        };
        let base = PolicyEntry {
            tier: Tier::Normal,
            priority: Priority::unordered(),
            verdict: Verdict::Allow,
            subject: PodSelector::in_namespace(&ns, app(i)),
            direction: Direction::Ingress,
            peers: vec![Peer::pods(PodSelector::in_namespace(&ns, app(i + 1)))],
            ports: vec![PortRule::single(Protocol::Tcp, 80)],
            default_deny: true,
            enforcement: Enforcement::Enforce,
            auth: None,
            provenance: provenance("NetworkPolicy"),
        };
        let entries = match i % 10 {
            0..=5 => vec![
                base.clone(),
                PolicyEntry {
                    ports: vec![PortRule::named(Some(Protocol::Tcp), "http")],
                    ..base.clone()
                },
            ],
            6 => vec![PolicyEntry {
                direction: Direction::Egress,
                peers: vec![Peer::Cidr(CidrSelector {
                    net: format!("192.168.{}.0/24", i % 256).parse().expect("valid"),
                    except: vec![format!("192.168.{}.128/25", i % 256)
                        .parse()
                        .expect("valid")]
                    .into(),
                    scope: AddressScope::Any,
                })],
                ports: vec![PortRule::range(Protocol::Tcp, 443, 445)],
                ..base.clone()
            }],
            7 | 8 => vec![PolicyEntry {
                tier: Tier::Admin,
                priority: Priority::new((i % 1000) as u32, format!("policy-{i}"), 0),
                verdict: if i % 10 == 7 {
                    Verdict::Deny
                } else {
                    Verdict::Pass
                },
                subject: PodSelector {
                    namespaces: LabelSelector::from_labels([("team", format!("team-{}", i % 20))]),
                    pods: LabelSelector::everything(),
                },
                peers: vec![Peer::pods(PodSelector {
                    namespaces: LabelSelector::from_labels([("env", "dev")]),
                    pods: app(i + 7),
                })],
                ports: vec![PortRule::range(Protocol::Tcp, 1000, 2000)],
                default_deny: false,
                provenance: provenance("AdminNetworkPolicy"),
                ..base.clone()
            }],
            _ => vec![PolicyEntry {
                tier: Tier::Baseline,
                priority: Priority::new(0, "default", i as u32),
                verdict: Verdict::Deny,
                subject: PodSelector {
                    namespaces: LabelSelector::from_labels([("env", "prod")]),
                    pods: app(i),
                },
                peers: vec![Peer::pods(PodSelector {
                    namespaces: LabelSelector::from_labels([(
                        "team",
                        format!("team-{}", (i + 1) % 20),
                    )]),
                    pods: LabelSelector::everything(),
                })],
                ports: vec![],
                default_deny: false,
                provenance: provenance("BaselineAdminNetworkPolicy"),
                ..base
            }],
        };
        (format!("policy-{i}"), entries)
    }
}

/// Cilium's CIDR benchmark workload: 1000 egress allows over CIDRs whose prefix lengths cycle
/// /8, /16, /24, /28, /32, on TCP port 80+i%97, and the same again as denies, all for `subject`.
pub fn cidr_workload(subject: &PodSelector) -> Vec<PolicyEntry> {
    let lens = [8u8, 16, 24, 28, 32];
    let mut entries = Vec::new();
    for verdict in [Verdict::Allow, Verdict::Deny] {
        for i in 0..1000u32 {
            let len = lens[i as usize % lens.len()];
            let addr = Ipv4Addr::from(0x0b00_0000u32.wrapping_add(i.wrapping_mul(0x0101_0711)));
            let net = ipnet::IpNet::new(addr.into(), len)
                .expect("valid length")
                .trunc();
            entries.push(PolicyEntry {
                tier: Tier::Normal,
                priority: Priority::unordered(),
                verdict,
                subject: subject.clone(),
                direction: Direction::Egress,
                peers: vec![Peer::Cidr(CidrSelector {
                    net,
                    except: PrefixSet::default(),
                    scope: AddressScope::Any,
                })],
                ports: vec![PortRule::single(Protocol::Tcp, 80 + (i % 97) as u16)],
                default_deny: true,
                enforcement: Enforcement::Enforce,
                auth: None,
                provenance: Provenance {
                    kind: "Bench".into(),
                    namespace: None,
                    name: format!("cidr-{i}"),
                    rule: String::new(),
                },
            });
        }
    }
    entries
}
