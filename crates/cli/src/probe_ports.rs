//! Which protocol/port pairs to probe when no single one is asked for: every port the policies
//! mention, so that a matrix or a diff shows each port some rule treats differently. A port a
//! rule does not name is decided like every other unnamed port, so probing one stands for all.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use netpol_engine::{PortMatch, Protocol};

use crate::loader::{parse_protocol, ClusterModel};

/// `--protocol` and `--port`, which narrow the probe ports.
#[derive(Clone, Copy, Debug, Default, clap::Args)]
pub struct ProbeArgs {
    /// Only this protocol: TCP, UDP or SCTP.
    #[arg(long, value_parser = parse_protocol)]
    pub protocol: Option<Protocol>,
    /// Only this destination port. Without `--protocol` and `--port`, every port the policies
    /// mention.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub port: Option<u16>,
}

impl ProbeArgs {
    /// The probe ports of `clusters`, narrowed as the user asked.
    pub fn ports(self, clusters: &[&ClusterModel]) -> Vec<(Protocol, u16)> {
        probe_ports(clusters, self.protocol, self.port)
    }
}

/// The protocols that have ports.
const PORT_PROTOCOLS: [Protocol; 3] = [Protocol::Tcp, Protocol::Udp, Protocol::Sctp];

/// The port every matrix probes when the policies name none (and the one a rule that names no
/// port stands for).
pub const FALLBACK_PORT: (Protocol, u16) = (Protocol::Tcp, 80);

/// The probe ports of `clusters`, narrowed to `protocol` and `port` where given (both given: just
/// that pair), in protocol then port order: every port some rule or named port writes, one port
/// of each span of ports the written ones cut out that none of them stands for, and one port for
/// "every other port" of each protocol a rule names, and one for every protocol none names (see
/// [`PortPlan`]). When nothing is left, the user's port (TCP if no protocol).
pub fn probe_ports(
    clusters: &[&ClusterModel],
    protocol: Option<Protocol>,
    port: Option<u16>,
) -> Vec<(Protocol, u16)> {
    if let (Some(protocol), Some(port)) = (protocol, port) {
        return vec![(protocol, port)];
    }
    let narrowed: Vec<(Protocol, u16)> = PortPlan::new(clusters)
        .probes()
        .into_iter()
        .filter(|(p, n)| protocol.is_none_or(|w| w == *p) && port.is_none_or(|w| w == *n))
        .collect();
    if !narrowed.is_empty() {
        return narrowed;
    }
    match (protocol, port) {
        (p, Some(n)) => vec![(p.unwrap_or(Protocol::Tcp), n)],
        (Some(p), None) => vec![(p, FALLBACK_PORT.1)],
        (None, None) => vec![FALLBACK_PORT],
    }
}

/// What one probe port stands for, beyond itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stands {
    /// A port some rule writes (a number, an end of a range, a named port's number).
    Written,
    /// Every port of `low..=high`, a span between written ports that rules decide alike.
    Span(u16, u16),
    /// Every port of the protocol no rule writes (rules without ports still match them).
    OtherPorts,
    /// Every port of these protocols, which no rule names.
    UnnamedProtocols(Vec<Protocol>),
}

/// The ports of each protocol the rules of some clusters tell apart.
///
/// A rule matches `protocol/port` by a range (a single port is one), by a named port (every
/// number some pod declares under that name), by the whole protocol, or by no ports at all. So
/// the set of rules matching a port changes only where a range starts or ends past its last
/// port, or at a named port's number: between two such cuts every port is decided alike, and one
/// probe stands for the span. Ports no range or named port covers are matched only by rules of
/// the whole protocol or without ports: one probe stands for all of them ("every other port").
/// A protocol no rule names is matched only by rules without ports, as every other such protocol
/// is: one probe stands for all of them.
pub struct PortPlan {
    /// Per protocol some rule names: the ranges rules write (a number, or a named port's number,
    /// is a range of one port).
    named: BTreeMap<Protocol, BTreeSet<(u16, u16)>>,
    /// Ports pods declare (every protocol), so "every other port" avoids one a pod names.
    declared: BTreeSet<(Protocol, u16)>,
}

impl PortPlan {
    pub fn new(clusters: &[&ClusterModel]) -> PortPlan {
        let mut plan = PortPlan {
            named: BTreeMap::new(),
            declared: BTreeSet::new(),
        };
        for cluster in clusters {
            plan.collect(cluster);
        }
        plan
    }

    fn collect(&mut self, cluster: &ClusterModel) {
        // Every named port some pod declares, each once, by name: a rule's named port is looked
        // up here instead of scanning every pod per rule (rules times pods: 2,400 named-port
        // rules of 10,000 pods were most of a diff on every probe port).
        let declared = declared_ports(cluster);
        self.declared.extend(declared.values().flatten().copied());
        for rule in cluster.policy_entries().iter().flat_map(|e| &e.ports) {
            let mut write = |p: Protocol, low: u16, high: u16| {
                self.named.entry(p).or_default().insert((low, high));
            };
            match (&rule.port, rule.protocol) {
                (PortMatch::Any, Some(p)) if p.has_ports() => {
                    self.named.entry(p).or_default();
                }
                (PortMatch::Any, _) => {}
                (PortMatch::Range(low, high), Some(p)) if p.has_ports() => write(p, *low, *high),
                (PortMatch::Range(..), _) => {}
                (PortMatch::Named(name), want) => {
                    let numbers = declared.get(name.as_str()).into_iter().flatten();
                    for &(p, n) in numbers.filter(|(p, _)| want.is_none_or(|w| w == *p)) {
                        write(p, n, n);
                    }
                }
            }
        }
    }

    /// Every probe, in protocol then port order.
    pub fn probes(&self) -> Vec<(Protocol, u16)> {
        let mut probes = BTreeSet::new();
        for (&protocol, ranges) in &self.named {
            let written = written(ranges);
            probes.extend(written.iter().map(|&n| (protocol, n)));
            for (low, high, covered) in spans(ranges) {
                let unprobed = written.range(low..=high).next().is_none();
                if unprobed && covered {
                    probes.insert((protocol, low));
                }
            }
            if let Some(n) = self.other_port(protocol) {
                probes.insert((protocol, n));
            }
        }
        if let Some(&first) = self.unnamed_protocols().first() {
            probes.insert((first, FALLBACK_PORT.1));
        }
        probes.into_iter().collect()
    }

    /// What `protocol/port` stands for when probed.
    pub fn stands_for(&self, protocol: Protocol, port: u16) -> Stands {
        let Some(ranges) = self.named.get(&protocol) else {
            let unnamed = self.unnamed_protocols();
            return match unnamed.first() == Some(&protocol) {
                true => Stands::UnnamedProtocols(unnamed),
                false => Stands::Written,
            };
        };
        if written(ranges).contains(&port) {
            return Stands::Written;
        }
        let span = spans(ranges).find(|(low, high, _)| (*low..=*high).contains(&port));
        match span {
            Some((low, high, true)) => Stands::Span(low, high),
            _ => Stands::OtherPorts,
        }
    }

    /// Protocols with ports that no rule names, in TCP, UDP, SCTP order.
    fn unnamed_protocols(&self) -> Vec<Protocol> {
        PORT_PROTOCOLS
            .into_iter()
            .filter(|p| !self.named.contains_key(p))
            .collect()
    }

    /// The port that stands for every port of `protocol` no rule writes: 80 when no range or
    /// named port covers it (as before), else the first such port no pod declares either (a
    /// declared one would show a name), else the first such port; `None` when rules cover every
    /// port.
    fn other_port(&self, protocol: Protocol) -> Option<u16> {
        let ranges = self.named.get(&protocol)?;
        let uncovered: Vec<(u16, u16)> = spans(ranges)
            .filter(|(_, _, covered)| !covered)
            .map(|(low, high, _)| (low, high))
            .collect();
        let free = |n: u16| uncovered.iter().any(|(l, h)| (*l..=*h).contains(&n));
        if free(FALLBACK_PORT.1) {
            return Some(FALLBACK_PORT.1);
        }
        let undeclared = uncovered
            .iter()
            .flat_map(|&(l, h)| l..=h)
            .find(|&n| !self.declared.contains(&(protocol, n)));
        undeclared.or_else(|| uncovered.first().map(|(l, _)| *l))
    }
}

/// Both ends of every range: the ports as rules write them.
fn written(ranges: &BTreeSet<(u16, u16)>) -> BTreeSet<u16> {
    ranges.iter().flat_map(|&(low, high)| [low, high]).collect()
}

/// The spans `ranges` cut ports 1 to 65535 into, in order, each `(first, last, covered)`: every
/// port of a span is held by the same ranges, and `covered` when that is at least one.
fn spans(ranges: &BTreeSet<(u16, u16)>) -> impl Iterator<Item = (u16, u16, bool)> {
    // How many ranges start (+1) and end past their last port (-1) at each cut.
    let mut deltas: BTreeMap<u32, i64> = BTreeMap::from([(1, 0), (65536, 0)]);
    for &(low, high) in ranges {
        *deltas.entry(u32::from(low)).or_default() += 1;
        *deltas.entry(u32::from(high) + 1).or_default() -= 1;
    }
    let cuts: Vec<(u32, i64)> = deltas.into_iter().collect();
    let mut held = 0;
    let mut spans = Vec::with_capacity(cuts.len());
    for pair in cuts.windows(2) {
        let ((first, delta), (next, _)) = (pair[0], pair[1]);
        held += delta;
        if first >= 1 && first < next {
            spans.push((first as u16, (next - 1) as u16, held > 0));
        }
    }
    spans.into_iter()
}

/// The protocol/port pairs pods of `cluster` declare, per port name.
fn declared_ports(cluster: &ClusterModel) -> HashMap<&str, BTreeSet<(Protocol, u16)>> {
    let mut declared: HashMap<&str, BTreeSet<(Protocol, u16)>> = HashMap::new();
    for (_, identities) in cluster.pods() {
        for pod in identities.into_iter().filter_map(|i| i.as_pod()) {
            for port in &pod.ports {
                declared
                    .entry(port.name.as_str())
                    .or_default()
                    .insert((port.protocol, port.port));
            }
        }
    }
    declared
}

/// The names pods of `clusters` give `protocol`/`port` (`http`), sorted, each once: a matrix or
/// a diff shows a named port by name and number.
pub fn port_names(clusters: &[&ClusterModel], protocol: Protocol, port: u16) -> Vec<String> {
    let names: BTreeSet<String> = clusters
        .iter()
        .flat_map(|c| c.pods().flat_map(|(_, ids)| ids))
        .filter_map(|identity| identity.as_pod())
        .flat_map(|pod| &pod.ports)
        .filter(|p| p.protocol == protocol && p.port == port)
        .map(|p| p.name.clone())
        .collect();
    names.into_iter().collect()
}

/// `TCP/8080`, `TCP/8080 (http)` where pods name the port, and what a probe stands for beyond
/// itself: `TCP/80 (every other port)`, `TCP/11 (ports 11-19)`, `UDP/80 (every UDP and SCTP
/// port)`; per probe of `probes`.
pub fn probe_labels(clusters: &[&ClusterModel], probes: &[(Protocol, u16)]) -> Vec<String> {
    let plan = PortPlan::new(clusters);
    probes
        .iter()
        .map(|&(protocol, port)| {
            let mut notes = port_names(clusters, protocol, port);
            notes.extend(plan.stands_for(protocol, port).describe());
            match notes.is_empty() {
                true => format!("{protocol}/{port}"),
                false => format!("{protocol}/{port} ({})", notes.join(", ")),
            }
        })
        .collect()
}

impl Stands {
    /// What the probe stands for in words, beyond itself; `None` for a written port.
    pub fn describe(&self) -> Option<String> {
        match self {
            Stands::Written => None,
            Stands::Span(low, high) => Some(format!("ports {low}-{high}")),
            Stands::OtherPorts => Some("every other port".to_string()),
            Stands::UnnamedProtocols(protocols) => {
                let names: Vec<String> = protocols.iter().map(ToString::to_string).collect();
                Some(match names.as_slice() {
                    [one] => format!("every {one} port"),
                    [rest @ .., last] => format!("every {} and {last} port", rest.join(", ")),
                    [] => return None,
                })
            }
        }
    }
}
