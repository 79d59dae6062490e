//! Which protocol/port pairs to probe when no single one is asked for: every port the policies
//! mention, so that a matrix or a diff shows each port some rule treats differently. A port a
//! rule does not name is decided like every other unnamed port, so probing one stands for all.

use std::collections::{BTreeSet, HashMap};

use netpol_engine::{PortMatch, Protocol};

use crate::scenario::{parse_protocol, Cluster};

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
    pub fn ports(self, clusters: &[&Cluster]) -> Vec<(Protocol, u16)> {
        probe_ports(clusters, self.protocol, self.port)
    }
}

/// The protocols that have ports.
const PORT_PROTOCOLS: [Protocol; 3] = [Protocol::Tcp, Protocol::Udp, Protocol::Sctp];

/// The port every matrix probes when the policies name none (and the one a rule that names no
/// port stands for).
pub const FALLBACK_PORT: (Protocol, u16) = (Protocol::Tcp, 80);

/// The probe ports of `clusters`, narrowed to `protocol` and `port` where given (both given: just
/// that pair), in protocol then port order. Numbered ports and both ends of ranges are taken as written; a rule without a
/// protocol stands for TCP, UDP and SCTP; a named port is every number some pod declares under
/// that name. When nothing is left, the user's port (TCP if no protocol) or [`FALLBACK_PORT`].
pub fn probe_ports(
    clusters: &[&Cluster],
    protocol: Option<Protocol>,
    port: Option<u16>,
) -> Vec<(Protocol, u16)> {
    if let (Some(protocol), Some(port)) = (protocol, port) {
        return vec![(protocol, port)];
    }
    let mut found = BTreeSet::new();
    for cluster in clusters {
        collect(cluster, &mut found);
    }
    let narrowed: Vec<(Protocol, u16)> = found
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

fn collect(cluster: &Cluster, found: &mut BTreeSet<(Protocol, u16)>) {
    let protocols = |p: Option<Protocol>| -> Vec<Protocol> {
        match p {
            Some(p) if p.has_ports() => vec![p],
            Some(_) => vec![],
            None => PORT_PROTOCOLS.to_vec(),
        }
    };
    // Every named port some pod declares, each once, by name: a rule's named port is looked up
    // here instead of scanning every pod per rule (rules times pods: 2,400 named-port rules of
    // 10,000 pods were most of a diff on every probe port).
    let mut declared: Option<HashMap<&str, BTreeSet<(Protocol, u16)>>> = None;
    for rule in cluster.policy_entries().iter().flat_map(|e| &e.ports) {
        match &rule.port {
            PortMatch::Any => {}
            PortMatch::Range(low, high) => {
                for p in protocols(rule.protocol) {
                    found.insert((p, *low));
                    found.insert((p, *high));
                }
            }
            PortMatch::Named(name) => {
                let declared = declared.get_or_insert_with(|| declared_ports(cluster));
                let numbers = declared.get(name.as_str()).into_iter().flatten();
                found.extend(
                    numbers
                        .filter(|(p, _)| rule.protocol.is_none_or(|w| w == *p))
                        .copied(),
                );
            }
        }
    }
}

/// The protocol/port pairs pods of `cluster` declare, per port name.
fn declared_ports(cluster: &Cluster) -> HashMap<&str, BTreeSet<(Protocol, u16)>> {
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
pub fn port_names(clusters: &[&Cluster], protocol: Protocol, port: u16) -> Vec<String> {
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

/// `TCP/8080`, or `TCP/8080 (http)` where pods name the port.
pub fn probe_label(clusters: &[&Cluster], protocol: Protocol, port: u16) -> String {
    let names = port_names(clusters, protocol, port);
    if names.is_empty() {
        format!("{protocol}/{port}")
    } else {
        format!("{protocol}/{port} ({})", names.join(", "))
    }
}
