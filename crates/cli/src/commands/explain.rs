//! `netpol explain FILE FROM TO PROTO/PORT` (or `netpol explain -f PATH... FROM TO PROTO/PORT`):
//! the verdict of one flow and the whole chain behind each direction: every tier in order (Admin
//! rules matched or passed, the NetworkPolicy tier's allows and the policies that isolate,
//! baseline), the `except` that kept an address out of a rule, and notes where upstream leaves
//! the answer undefined. FROM and TO are pods, workloads (`ns/name`) or addresses; PORT is a
//! number or the name of a destination container port (`TCP/http-api`).

use std::io::{self, Write};
use std::path::PathBuf;

use netpol_engine::explain::{chain, Chain};
use netpol_engine::flow::decide_flow;
use netpol_engine::reference::{Decision, DirectedFlow};
use netpol_engine::{Direction, IdentityId, IdentityKind, Protocol, Verdict};
use serde::Serialize;

use crate::decide::outside::regions;
use crate::decide::{decider, EngineArgs};
use crate::input::{self, ManifestArgs};
use crate::loader::{parse_port, parse_protocol, ClusterModel, Endpoint};
use crate::outcome::Outcome;
use crate::output::chain::{self as chain_words, TierJson};
use crate::output::describe;
use crate::output::report::{write_json, DirectionJson, FlowJson, TextOrJson};

const USAGE: &str =
    "usage: netpol explain [FILE] FROM TO PROTO/PORT, or netpol explain -f PATH... \
                     FROM TO PROTO/PORT (e.g. netpol explain -f app/ shop/web shop/db TCP/5432)";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// `[FILE] FROM TO PROTO/PORT`. FILE is a scenario file or a manifest file or folder; leave
    /// it out when `-f` names the manifests. FROM and TO are `namespace/pod`, `namespace/workload`
    /// or an IP address; PROTO/PORT is e.g. `TCP/80` or `TCP/http` (a destination port's name).
    #[arg(value_name = "ARGS", num_args = 0..)]
    pub positional: Vec<String>,
    #[command(flatten)]
    pub manifests: ManifestArgs,
    /// `text` or `json`.
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: TextOrJson,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// A port as given: a number, or a container port's name.
#[derive(Clone, Debug, PartialEq, Eq)]
enum PortSpec {
    Number(u16),
    Name(String),
}

/// The positional arguments, read.
#[derive(Debug, PartialEq, Eq)]
struct Query {
    file: Option<PathBuf>,
    from: Party,
    to: Party,
    protocol: Protocol,
    port: PortSpec,
}

/// Reads `[FILE] FROM TO PROTO/PORT`: the FILE is there exactly when no `-f` was given.
fn parse_query(positional: &[String], has_manifests: bool) -> Result<Query, String> {
    let (file, rest) = match (positional, has_manifests) {
        ([from, to, port], true) => (None, [from, to, port]),
        ([file, from, to, port], false) => (Some(PathBuf::from(file)), [from, to, port]),
        (given, true) => {
            return Err(format!(
                "with -f or --cluster, give FROM TO PROTO/PORT ({} given: {})",
                given.len(),
                given.join(" ")
            ))
        }
        (given, false) => {
            return Err(format!(
                "give FILE FROM TO PROTO/PORT, or -f PATH with FROM TO PROTO/PORT ({} given{})",
                given.len(),
                if given.is_empty() {
                    String::new()
                } else {
                    format!(": {}", given.join(" "))
                }
            ))
        }
    };
    let [from, to, port] = rest;
    let (protocol, port) = parse_port_spec(port)?;
    Ok(Query {
        file,
        from: Party::parse(from)?,
        to: Party::parse(to)?,
        protocol,
        port,
    })
}

/// FROM or TO as given: a pod, workload or address, or a node by name (looked up once the
/// cluster is read).
#[derive(Debug, PartialEq, Eq)]
enum Party {
    Endpoint(Endpoint),
    Node(String),
}

impl Party {
    fn parse(s: &str) -> Result<Party, String> {
        match s.parse::<Endpoint>() {
            Ok(endpoint) => Ok(Party::Endpoint(endpoint)),
            Err(_) if is_node_name(s) => Ok(Party::Node(s.to_owned())),
            Err(_) => Err(format!(
                "`{s}` is neither `namespace/pod`, a node's name nor an IP address"
            )),
        }
    }

    /// The endpoint in `cluster`: a node stands for its first address.
    fn resolve(&self, cluster: &ClusterModel) -> Result<Endpoint, String> {
        match self {
            Party::Endpoint(endpoint) => cluster.resolve_endpoint(endpoint),
            Party::Node(name) => cluster.node_endpoint(name),
        }
    }
}

impl std::fmt::Display for Party {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Party::Endpoint(endpoint) => write!(f, "{endpoint}"),
            Party::Node(name) => f.write_str(name),
        }
    }
}

/// A node's name is a DNS subdomain: lowercase letters, digits, `-` and `.`.
fn is_node_name(s: &str) -> bool {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.');
    !s.is_empty() && s.chars().all(allowed) && !s.starts_with(['-', '.'])
}

fn parse_port_spec(s: &str) -> Result<(Protocol, PortSpec), String> {
    let (protocol, port) = s
        .split_once('/')
        .ok_or_else(|| format!("`{s}` is not PROTO/PORT, e.g. TCP/80 or TCP/http"))?;
    let protocol = parse_protocol(protocol)?;
    let port = match port.parse::<u32>() {
        Ok(number) => PortSpec::Number(parse_port(number)?),
        Err(_) if is_port_name(port) => PortSpec::Name(port.to_owned()),
        Err(_) => return Err(format!("`{port}` is not a port (1-65535) or a port name")),
    };
    Ok((protocol, port))
}

/// An IANA service name as container ports use them: lowercase letters, digits and `-`, with a
/// letter (at most 15 characters).
fn is_port_name(s: &str) -> bool {
    (1..=15).contains(&s.len())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && s.chars().any(|c| c.is_ascii_lowercase())
}

/// `explain --output json`: the flow, and per direction the chain of tiers.
#[derive(Debug, Serialize)]
struct ExplainJson {
    #[serde(flatten)]
    flow: FlowJson,
    /// The port's name, when it was given by name.
    #[serde(skip_serializing_if = "Option::is_none")]
    port_name: Option<String>,
    /// Per direction evaluated, every tier's part in order.
    chain: ChainJson,
    /// Per allowed direction, what policies in audit mode would deny it by
    /// (`netpol.io/enforcement: audit`); absent where they would deny nothing.
    #[serde(skip_serializing_if = "WouldDenyJson::is_empty")]
    would_deny: WouldDenyJson,
    /// What upstream leaves undefined here, and how netpol settles it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    notes: Vec<String>,
}

#[derive(Debug, Serialize)]
struct ChainJson {
    #[serde(skip_serializing_if = "Option::is_none")]
    egress: Option<Vec<TierJson>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ingress: Option<Vec<TierJson>>,
}

/// The would-denies of a flow's directions: the rule as a decision's JSON says it, with the
/// verdict `would-deny` and the text `explain` prints.
#[derive(Debug, Default, Serialize)]
struct WouldDenyJson {
    #[serde(skip_serializing_if = "Option::is_none")]
    egress: Option<DirectionJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ingress: Option<DirectionJson>,
}

impl WouldDenyJson {
    fn new(chains: &Chains<'_>) -> Self {
        let side = |chain: &Option<Chain<'_>>| {
            let reason = chain.as_ref()?.would_deny.as_ref()?;
            let decision = Decision {
                verdict: Verdict::Deny,
                auth: None,
                reason: reason.clone(),
            };
            Some(DirectionJson {
                verdict: "would-deny",
                text: describe::would_deny(reason),
                ..DirectionJson::from(&decision)
            })
        };
        WouldDenyJson {
            egress: side(&chains.egress),
            ingress: side(&chains.ingress),
        }
    }

    fn is_empty(&self) -> bool {
        self.egress.is_none() && self.ingress.is_none()
    }
}

pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<Outcome> {
    let has_manifests = !args.manifests.filenames.is_empty() || args.manifests.live.cluster;
    let query = match parse_query(&args.positional, has_manifests) {
        Ok(query) => query,
        Err(e) => {
            writeln!(err, "error: {e}\n{USAGE}")?;
            return Ok(Outcome::Invalid);
        }
    };
    let Some(input) = args.manifests.input(query.file.as_deref()) else {
        return Ok(Outcome::Invalid);
    };
    let Some(scenario) = input::load(&input, args.manifests.read.flags(), err)? else {
        return Ok(Outcome::Invalid);
    };
    let cluster = &scenario.cluster;
    let fail = |err: &mut dyn Write, e: String| -> io::Result<Outcome> {
        writeln!(err, "error: {}: {e}", scenario.file.display())?;
        Ok(Outcome::Invalid)
    };
    let (from, to) = match (query.from.resolve(cluster), query.to.resolve(cluster)) {
        (Ok(from), Ok(to)) => (from, to),
        (Err(e), _) | (_, Err(e)) => return fail(err, e),
    };
    let protocol = query.protocol;
    let port = match &query.port {
        PortSpec::Number(n) => *n,
        PortSpec::Name(name) => match cluster.named_port(&to, protocol, name) {
            Ok(port) => port,
            Err(e) => return fail(err, e),
        },
    };
    let (src, dst) = match cluster.flow_identities(&from, &to) {
        Ok(ids) => ids,
        Err(e) => return fail(err, e),
    };
    // The engine resolves the MapStates of the flow's two pods only.
    let endpoints = [src, dst]
        .iter()
        .filter_map(|&id| cluster.store().get(id)?.as_pod())
        .map(|pod| format!("{}/{}", pod.namespace, pod.name))
        .collect();
    let Some(oracle) = decider(args.engine, &scenario, Some(&endpoints), err)? else {
        return Ok(Outcome::Invalid);
    };
    let decision = decide_flow(oracle.as_ref(), cluster.store(), src, dst, protocol, port);
    let chains = Chains::new(cluster, src, dst, protocol, port);
    let mut notes = chains.notes();
    notes.extend(own_node_note(cluster, src, dst));
    for (direction, decided, walked) in [
        (Direction::Egress, &decision.egress, &chains.egress),
        (Direction::Ingress, &decision.ingress, &chains.ingress),
    ] {
        if let (Some(decided), Some(walked)) = (decided, walked) {
            if decided.verdict != walked.decision.verdict {
                notes.push(format!(
                    "the chain is the reference evaluator's reading; the {direction} decision of \
                     --engine/--datapath differs from it, which is a bug: please report it"
                ));
            }
        }
    }
    let source = describe_identity(cluster, src, &from);
    let destination = describe_identity(cluster, dst, &to);
    let port_text = match &query.port {
        PortSpec::Name(name) => format!("{protocol}/{port} ({name})"),
        PortSpec::Number(_) => format!("{protocol}/{port}"),
    };
    if args.output == TextOrJson::Json {
        let mut flow = FlowJson::new(&from, &to, protocol, port, decision.as_ref());
        flow.source = Some(source);
        flow.destination = Some(destination);
        let json = ExplainJson {
            flow,
            port_name: match &query.port {
                PortSpec::Name(name) => Some(name.clone()),
                PortSpec::Number(_) => None,
            },
            chain: ChainJson {
                egress: chains.egress.as_ref().map(chain_words::json),
                ingress: chains.ingress.as_ref().map(chain_words::json),
            },
            would_deny: WouldDenyJson::new(&chains),
            notes,
        };
        write_json(out, &json)?;
        return Ok(Outcome::Success);
    }
    writeln!(
        out,
        "{} -> {} {port_text}: {}",
        query.from,
        query.to,
        describe::verdict_word(decision.allowed())
    )?;
    writeln!(out, "  source:      {source}")?;
    writeln!(out, "  destination: {destination}")?;
    let side = |d: &Option<Decision>, whose: &str, described: &str| match d {
        Some(d) => describe::decision(d),
        None => format!("not evaluated: the {whose}, {described}, is not a pod"),
    };
    for (label, decided, walked, whose, described, remote) in [
        (
            "egress: ",
            &decision.egress,
            &chains.egress,
            "source",
            &source,
            &to,
        ),
        (
            "ingress:",
            &decision.ingress,
            &chains.ingress,
            "destination",
            &destination,
            &from,
        ),
    ] {
        writeln!(out, "  {label}     {}", side(decided, whose, described))?;
        if let Some(walked) = walked {
            for line in chain_words::lines(walked, &remote.to_string()) {
                writeln!(out, "    {line}")?;
            }
        }
    }
    for note in &notes {
        writeln!(out, "  note: {note}")?;
    }
    Ok(Outcome::Success)
}

/// The chain of each direction that is a pod's.
struct Chains<'a> {
    egress: Option<Chain<'a>>,
    ingress: Option<Chain<'a>>,
}

impl<'a> Chains<'a> {
    fn new(
        cluster: &'a ClusterModel,
        src: IdentityId,
        dst: IdentityId,
        protocol: Protocol,
        port: u16,
    ) -> Self {
        let store = cluster.store();
        let walk = |endpoint: IdentityId, direction: Direction, remote: IdentityId| {
            let pod = store.get(endpoint)?.as_pod()?;
            let remote = store.get(remote)?;
            Some(chain(
                cluster.entries(),
                &DirectedFlow {
                    endpoint: pod,
                    direction,
                    remote,
                    protocol,
                    port,
                },
            ))
        };
        Chains {
            egress: walk(src, Direction::Egress, dst),
            ingress: walk(dst, Direction::Ingress, src),
        }
    }

    fn notes(&self) -> Vec<String> {
        [&self.egress, &self.ingress]
            .into_iter()
            .flatten()
            .flat_map(chain_words::tie_notes)
            .collect()
    }
}

/// A pod and its own node: upstream and docs/scenarios.md leave their traffic undefined.
fn own_node_note(cluster: &ClusterModel, src: IdentityId, dst: IdentityId) -> Option<String> {
    let store = cluster.store();
    let (a, b) = (store.get(src)?, store.get(dst)?);
    let (pod, node) = match (&a.kind, &b.kind) {
        (IdentityKind::Pod(p), IdentityKind::Node(n))
        | (IdentityKind::Node(n), IdentityKind::Pod(p)) => (p, n),
        _ => return None,
    };
    (pod.node.as_deref() == Some(node.name.as_str())).then(|| {
        format!(
            "{} runs on node {}: Kubernetes (and the scenario format) leave traffic between a pod \
             and its own node undefined; netpol always admits ingress from it (kubelet probes) \
             and applies the pod's egress policies to traffic to it",
            pod.namespace.clone() + "/" + &pod.name,
            node.name
        )
    })
}

/// An endpoint as the user gave it and what it resolved to: a pod (with its workload, and
/// whether its address was assigned), a node, or an outside address with its region.
fn describe_identity(cluster: &ClusterModel, id: IdentityId, given: &Endpoint) -> String {
    let Some(identity) = cluster.store().get(id) else {
        return id.to_string();
    };
    match (&identity.kind, given) {
        (IdentityKind::World, Endpoint::Address(address)) => {
            let regions = regions(cluster.outside_prefixes(), &cluster.cluster_addresses());
            let region = regions.iter().find(|r| r.contains(*address));
            match region {
                Some(region) => format!("address {address}, outside the cluster (region {region})"),
                None => format!("address {address}, outside the cluster"),
            }
        }
        (IdentityKind::Pod(pod), _) => {
            let pod_ref = crate::loader::PodRef {
                namespace: pod.namespace.clone(),
                name: pod.name.clone(),
            };
            let address = identity.prefix.addr();
            let facts = cluster.facts(&pod_ref);
            let owner = facts.and_then(|f| f.owner.as_ref());
            match (facts.is_some_and(|f| f.derived), owner) {
                (true, Some(owner)) => format!(
                    "pod {pod_ref} ({address}, assigned), the pod of {} {}/{}",
                    owner.kind, pod_ref.namespace, owner.name
                ),
                (_, Some(owner)) => format!(
                    "pod {pod_ref} ({address}) of {} {}/{}",
                    owner.kind, pod_ref.namespace, owner.name
                ),
                _ => identity.to_string(),
            }
        }
        _ => identity.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_specs() {
        assert_eq!(
            parse_port_spec("SCTP/81"),
            Ok((Protocol::Sctp, PortSpec::Number(81)))
        );
        assert_eq!(
            parse_port_spec("TCP/http-api"),
            Ok((Protocol::Tcp, PortSpec::Name("http-api".into())))
        );
        assert!(parse_port_spec("TCP").is_err());
        assert!(parse_port_spec("TCP/0").is_err());
        assert!(parse_port_spec("ICMP/1").is_err());
        assert!(parse_port_spec("TCP/65536").is_err());
        assert!(parse_port_spec("TCP/Not_A_Name").is_err());
    }

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_file_is_given_exactly_when_no_manifests_are() {
        let query = parse_query(&words("s.yaml x/a 10.0.0.1 UDP/53"), false).unwrap();
        assert_eq!(query.file, Some(PathBuf::from("s.yaml")));
        assert_eq!(query.to, Party::Endpoint("10.0.0.1".parse().unwrap()));
        assert_eq!(
            (query.protocol, query.port),
            (Protocol::Udp, PortSpec::Number(53))
        );
        let query = parse_query(&words("x/a x/b TCP/80"), true).unwrap();
        assert_eq!(query.file, None);
        assert_eq!(
            parse_query(&words("x/a x/b TCP/80"), false).unwrap_err(),
            "give FILE FROM TO PROTO/PORT, or -f PATH with FROM TO PROTO/PORT (3 given: x/a x/b TCP/80)"
        );
        assert_eq!(
            parse_query(&words("s.yaml x/a x/b TCP/80"), true).unwrap_err(),
            "with -f or --cluster, give FROM TO PROTO/PORT (4 given: s.yaml x/a x/b TCP/80)"
        );
        let query = parse_query(&words("s.yaml x/a node-1 TCP/80"), false).unwrap();
        assert_eq!(query.to, Party::Node("node-1".into()));
        assert!(parse_query(&words("s.yaml x/a 10.0.0.0/8 TCP/80"), false).is_err());
    }
}
