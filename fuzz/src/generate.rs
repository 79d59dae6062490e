//! Policies, clusters and changes from fuzzer bytes. The shapes follow the engine's property
//! tests (`crates/engine/tests/common`, whose pods, nodes and comparisons are reused), widened
//! where the probes still tell results apart: CIDRs of any prefix length with exceptions inside
//! them, port ranges whose ends sit on and beside the probed ports, every selector operator.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use arbitrary::{Result, Unstructured};
use ipnet::IpNet;
use netpol_engine::*;

#[path = "../../crates/engine/tests/common/mod.rs"]
pub mod common;

pub use common::{PodSpec, NAMESPACES, NODES};

pub const APPS: [&str; 3] = ["web", "db", "api"];

/// Port range ends: the probed ports (80, 81, 1000, 8080, 53) and their neighbours.
const PORT_EDGES: [u16; 10] = [1, 53, 79, 80, 81, 999, 1000, 8079, 8080, 8081];

/// Addresses CIDRs are cut around: pods, nodes, and the outside addresses the probes use.
const V4_ANCHORS: [[u8; 4]; 8] = [
    [10, 0, 0, 10],
    [10, 0, 1, 11],
    [10, 0, 2, 12],
    [10, 0, 1, 99],
    [10, 9, 0, 1],
    [10, 9, 0, 2],
    [192, 0, 2, 7],
    [8, 8, 8, 8],
];

pub fn pod_spec(u: &mut Unstructured) -> Result<PodSpec> {
    Ok(PodSpec {
        namespace: u.choose_index(NAMESPACES.len())?,
        app: *u.choose(&APPS)?,
        node: u.choose_index(NODES.len())?,
        http_port: *u.choose(&[80, 8080])?,
        ipv6: u.ratio(1, 5)?,
    })
}

fn values(u: &mut Unstructured, menu: &[&str]) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for _ in 0..=u.choose_index(menu.len())? {
        out.push((*u.choose(menu)?).to_string());
    }
    Ok(out)
}

fn requirement(u: &mut Unstructured, key: &str, menu: &[&str]) -> Result<Requirement> {
    Ok(match u.choose_index(4)? {
        0 => Requirement::In(key.into(), values(u, menu)?),
        1 => Requirement::NotIn(key.into(), values(u, menu)?),
        2 => Requirement::Exists(key.into()),
        _ => Requirement::DoesNotExist(key.into()),
    })
}

fn selector(u: &mut Unstructured, key: &str, menu: &[&str]) -> Result<LabelSelector> {
    Ok(match u.choose_index(4)? {
        0 => LabelSelector::everything(),
        1 => LabelSelector::from_labels([(key, *u.choose(menu)?)]),
        2 => LabelSelector {
            match_labels: Labels::new(),
            match_expressions: vec![requirement(u, key, menu)?],
        },
        _ => {
            let mut selector = LabelSelector::from_labels([(key, *u.choose(menu)?)]);
            selector.match_expressions.push(requirement(u, key, menu)?);
            selector
        }
    })
}

fn namespace_selector(u: &mut Unstructured) -> Result<LabelSelector> {
    if u.arbitrary()? {
        selector(u, "team", &["a", "b", "c"])
    } else {
        selector(u, NAMESPACE_NAME_LABEL, &NAMESPACES)
    }
}

pub fn pod_selector(u: &mut Unstructured) -> Result<PodSelector> {
    Ok(PodSelector {
        namespaces: namespace_selector(u)?,
        pods: selector(u, "app", &["web", "db", "api", "other"])?,
    })
}

/// A prefix of `length` bits around `address`.
fn prefix(address: IpAddr, length: u8) -> IpNet {
    IpNet::new(address, length)
        .map(|n| n.trunc())
        .unwrap_or_else(|_| IpNet::from(address))
}

/// An address inside `net`: its network address with random host bits.
fn inside(u: &mut Unstructured, net: &IpNet) -> Result<IpAddr> {
    let host: u128 = u.arbitrary()?;
    Ok(match net {
        IpNet::V4(n) => {
            let mask = u32::MAX.checked_shr(n.prefix_len().into()).unwrap_or(0);
            let bits = u32::from(n.network()) | (host as u32 & mask);
            IpAddr::V4(Ipv4Addr::from(bits))
        }
        IpNet::V6(n) => {
            let mask = u128::MAX.checked_shr(n.prefix_len().into()).unwrap_or(0);
            let bits = u128::from(n.network()) | (host & mask);
            IpAddr::V6(Ipv6Addr::from(bits))
        }
    })
}

fn cidr(u: &mut Unstructured) -> Result<Peer> {
    let (anchor, max): (IpAddr, u8) = if u.ratio(1, 5)? {
        let last = *u.choose(&[0x10u16, 0x11, 0x12, 0x99])?;
        (
            IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, last)),
            128,
        )
    } else {
        (IpAddr::from(*u.choose(&V4_ANCHORS)?), 32)
    };
    let net = prefix(anchor, u.int_in_range(0..=max)?);
    let mut except = Vec::new();
    for _ in 0..u.choose_index(3)? {
        if net.prefix_len() == max {
            break;
        }
        let length = u.int_in_range(net.prefix_len() + 1..=max)?;
        let hole = prefix(inside(u, &net)?, length);
        except.push(hole);
    }
    let scope = if u.arbitrary()? {
        AddressScope::Any
    } else {
        AddressScope::OutsideCluster
    };
    Ok(Peer::Cidr(CidrSelector {
        net,
        except: except.into(),
        scope,
    }))
}

fn peer(u: &mut Unstructured) -> Result<Peer> {
    Ok(match u.choose_index(8)? {
        0..=2 => Peer::pods(pod_selector(u)?),
        3 => Peer::nodes(selector(u, "zone", &["zone-a", "zone-b"])?),
        4 | 5 => cidr(u)?,
        _ => Peer::Entity(*u.choose(&[
            Entity::All,
            Entity::World,
            Entity::Cluster,
            Entity::Host,
            Entity::RemoteNode,
        ])?),
    })
}

fn port_rule(u: &mut Unstructured) -> Result<PortRule> {
    let protocol = *u.choose(&[Protocol::Tcp, Protocol::Tcp, Protocol::Udp, Protocol::Sctp])?;
    Ok(match u.choose_index(6)? {
        0 => PortRule::protocol(protocol),
        1 => PortRule::single(protocol, *u.choose(&PORT_EDGES)?),
        2 => {
            let (a, b) = (*u.choose(&PORT_EDGES)?, *u.choose(&PORT_EDGES)?);
            PortRule::range(protocol, a.min(b), a.max(b))
        }
        3 => PortRule::named(
            *u.choose(&[Some(Protocol::Tcp), Some(Protocol::Udp), None])?,
            *u.choose(&["http", "dns", "none"])?,
        ),
        _ => PortRule::any(),
    })
}

/// Entry `index` of a policy.
pub fn entry(u: &mut Unstructured, index: usize) -> Result<PolicyEntry> {
    let tier = *u.choose(&Tier::ALL)?;
    let name = format!("p{}", u.choose_index(2)?);
    // Unordered tiers share one priority, as translators make them.
    let priority = if tier == Tier::Normal {
        Priority::unordered()
    } else {
        Priority::new(u.int_in_range(0..=2)?, name.clone(), index as u32)
    };
    let mut peers = Vec::new();
    for _ in 0..u.choose_index(4)? {
        peers.push(peer(u)?);
    }
    let mut ports = Vec::new();
    for _ in 0..u.choose_index(4)? {
        ports.push(port_rule(u)?);
    }
    Ok(PolicyEntry {
        tier,
        priority,
        verdict: *u.choose(&[Verdict::Allow, Verdict::Deny, Verdict::Pass])?,
        subject: pod_selector(u)?,
        direction: *u.choose(&Direction::BOTH)?,
        peers,
        ports,
        default_deny: u.ratio(3, 10)?,
        // Enforced: a byte drawn for the audit mark would change what every committed corpus
        // input decodes to. Audit marks are covered by the engine's equivalence proptest.
        enforcement: Enforcement::Enforce,
        auth: *u.choose(&[
            None,
            None,
            Some(AuthMode::Required),
            Some(AuthMode::Disabled),
        ])?,
        provenance: Provenance {
            kind: "Fuzz".into(),
            namespace: None,
            name,
            rule: index.to_string(),
        },
    })
}

/// One to `max` entries.
pub fn entries(u: &mut Unstructured, max: usize) -> Result<Vec<PolicyEntry>> {
    let n = u.int_in_range(1..=max)?;
    (0..n).map(|i| entry(u, i)).collect()
}

/// One change to a cluster of [`PodSpec`] pods and numbered policies.
#[derive(Clone, Debug)]
pub enum Step {
    AddPod(PodSpec),
    RemovePod(usize),
    RelabelPod(usize, &'static str),
    RelabelNamespace(usize),
    SetPolicy(usize, Vec<PolicyEntry>),
    RemovePolicy(usize),
}

pub fn step(u: &mut Unstructured) -> Result<Step> {
    Ok(match u.choose_index(10)? {
        0..=2 => Step::AddPod(pod_spec(u)?),
        3 | 4 => Step::RemovePod(u.choose_index(8)?),
        5 | 6 => Step::RelabelPod(u.choose_index(8)?, *u.choose(&APPS)?),
        7 => Step::RelabelNamespace(u.choose_index(NAMESPACES.len())?),
        8 => Step::SetPolicy(u.choose_index(3)?, entries(u, 3)?),
        _ => Step::RemovePolicy(u.choose_index(3)?),
    })
}

/// A string for a name: usually one a cluster would hold, often anything at all (quotes,
/// newlines, backslashes, braces, hundreds of characters), since the embedded mode reads names
/// from files nobody validated.
pub fn name(u: &mut Unstructured, usual: &str) -> Result<String> {
    Ok(match u.choose_index(3)? {
        0 => usual.to_string(),
        1 => {
            let text: String = u.arbitrary()?;
            text.chars().take(400).collect()
        }
        _ => {
            let repeat = u.int_in_range(1..=300)?;
            let piece = *u.choose(&["a", "\"", "\\", "\n", "}", ";", "é", "-", "#", " "])?;
            piece.repeat(repeat)
        }
    })
}
