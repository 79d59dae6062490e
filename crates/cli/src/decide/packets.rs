//! `netpol check --datapath nftables`: a scenario decided by real packets. The scenario's pods,
//! nodes and the outside addresses its flows name become hosts of a routed network of private
//! network namespaces; every endpoint's MapState is compiled to nftables and loaded on the router
//! in one `nft -f` transaction; each flow is a real TCP connection or UDP exchange.
//!
//! The explanation of a flow's fate comes from evaluating the same rules in process; if the kernel
//! and that evaluation disagree, the line says so.

#[cfg(target_os = "linux")]
use std::collections::{BTreeMap, HashSet};
#[cfg(target_os = "linux")]
use std::net::IpAddr;
use std::time::Duration;

#[cfg(target_os = "linux")]
use netpol_engine::flow::FlowDecision;
#[cfg(target_os = "linux")]
use netpol_engine::reference::{Decision, Reason};
#[cfg(target_os = "linux")]
use netpol_engine::{Direction, IdentityId, Protocol, Verdict};
#[cfg(target_os = "linux")]
use netpol_nft::eval::{evaluate, Evaluation, Packet};
use netpol_nft::Ruleset;

use super::load_engine_keeping_audited;
use crate::checked::Fate;
use crate::loader::Scenario;
#[cfg(target_os = "linux")]
use crate::loader::{Endpoint, ExpectedFlow};
#[cfg(target_os = "linux")]
use crate::output::describe;
#[cfg(target_os = "linux")]
use crate::output::report::DecisionJson;

/// How long a silent probe waits before it counts as dropped, and how many run at once.
#[derive(Clone, Copy, Debug)]
pub struct ProbeSettings {
    pub timeout: Duration,
    pub parallel: usize,
}

/// Why a scenario could not be run on nftables at all.
#[derive(Debug, thiserror::Error)]
pub enum NftCheckError {
    #[error("endpoint {endpoint}: {error}")]
    Compile {
        endpoint: String,
        error: netpol_datapath::CompileError,
    },
    #[error("the nftables script: {0}")]
    Script(#[from] netpol_nft::script::ScriptError),
    #[error("{0}")]
    Network(String),
}

/// The scenario's rules in netpol's nftables model. An endpoint a policy in audit mode selects
/// also gets audit chains from its would-be rules, as the agent programs it: what they would
/// deny passes, counted as a would-deny. Would-be rules that do not compile refuse the
/// scenario (a would-deny lost without a word would read as plainly allowed).
pub fn ruleset(scenario: &Scenario) -> Result<Ruleset, NftCheckError> {
    let engine = load_engine_keeping_audited(&scenario.cluster);
    let options = Default::default();
    let compiled = netpol_datapath::compile_engine(&engine, &options)
        .map_err(|(endpoint, error)| NftCheckError::Compile { endpoint, error })?;
    let store = engine.identities();
    let mut ruleset = Ruleset::default();
    for endpoint in compiled {
        let Some(would_be) = engine.would_be_map(endpoint.key) else {
            ruleset.add(
                endpoint.key,
                endpoint.addresses,
                &endpoint.rules.rules,
                store,
            );
            continue;
        };
        let would_be = netpol_datapath::compile_entries(would_be.iter(), store, &options).map_err(
            |error| NftCheckError::Compile {
                endpoint: format!("{} (the would-be rules of audited policies)", endpoint.key),
                error,
            },
        )?;
        ruleset.add_audited(
            endpoint.key,
            endpoint.addresses,
            &endpoint.rules.rules,
            &would_be.rules,
            store,
        );
    }
    Ok(ruleset)
}

/// A flow as packets: addresses, and what keeps it from being probed, if anything.
#[cfg(target_os = "linux")]
struct FlowAddresses {
    from: IpAddr,
    to: IpAddr,
    unprobeable: Option<String>,
}

/// Each host of the scenario's network by name, with its addresses: every pod and node, then
/// one host per other address a flow names.
#[cfg(target_os = "linux")]
fn hosts(scenario: &Scenario, flows: &[FlowAddresses]) -> Vec<(String, Vec<IpAddr>)> {
    let store = scenario.cluster.store();
    let pods = scenario
        .cluster
        .pods()
        .map(|(pod, ids)| (pod.to_string(), ids));
    let nodes = scenario
        .cluster
        .nodes()
        .map(|(node, ids)| (format!("node {node}"), ids));
    let mut hosts: Vec<(String, Vec<IpAddr>)> = pods
        .chain(nodes)
        .map(|(name, identities)| {
            let addresses = identities
                .into_iter()
                .filter_map(|i| store.id_of(i))
                .flat_map(|id| store.members(id).iter().map(|net| net.addr()))
                .collect();
            (name, addresses)
        })
        .collect();
    // An address belongs to the first host that has it (a host-network pod shares its node's).
    let mut taken: HashSet<IpAddr> = HashSet::new();
    for (_, addresses) in &mut hosts {
        addresses.retain(|a| taken.insert(*a));
    }
    hosts.retain(|(_, addresses)| !addresses.is_empty());
    for flow in flows.iter().filter(|f| f.unprobeable.is_none()) {
        for address in [flow.from, flow.to] {
            if taken.insert(address) {
                hosts.push((format!("outside {address}"), vec![address]));
            }
        }
    }
    hosts
}

/// Why a flow cannot be decided by a packet here, if it cannot.
#[cfg(target_os = "linux")]
fn unprobeable(flow: &ExpectedFlow, from: IpAddr, to: IpAddr) -> Option<String> {
    let e = &flow.expectation;
    let usable = |a: IpAddr| !(a.is_unspecified() || a.is_loopback() || a.is_multicast());
    match e.protocol {
        Protocol::Tcp | Protocol::Udp => {}
        Protocol::Sctp => return Some("SCTP: this kernel has no SCTP sockets".into()),
        other => return Some(format!("{other}: probes are TCP or UDP")),
    }
    if e.port == 0 {
        return Some("port 0 cannot be listened on".into());
    }
    if !usable(from) || !usable(to) {
        return Some(format!("{from} -> {to}: not an address a host can hold"));
    }
    None
}

/// The fate of every flow of `scenario`, in order, decided by packets through the kernel.
#[cfg(target_os = "linux")]
pub fn decide(scenario: &Scenario, options: ProbeSettings) -> Result<Vec<Fate>, NftCheckError> {
    use netpol_testbed::probe::{self, Probe, ProbeOptions, ProbeResult, Transport};
    use netpol_testbed::topology::{Host, Topology};

    let ruleset = ruleset(scenario)?;
    let script = netpol_nft::script::render(&ruleset)?;
    let addresses = flow_addresses(scenario);
    let hosts: Vec<Host> = hosts(scenario, &addresses)
        .into_iter()
        .map(|(name, addresses)| Host { name, addresses })
        .collect();
    // Two hosts that share an address (a pod at its node's address) make the flows between them
    // unroutable: reported as a network error, never decided.
    let topology = Topology::build(hosts).map_err(|e| NftCheckError::Network(e.to_string()))?;
    topology
        .router()
        .nft(&script)
        .map_err(|e| NftCheckError::Network(format!("loading the rules: {e}")))?;

    let mut probes = Vec::new();
    let mut probed = Vec::new();
    for (i, (flow, a)) in scenario.flows.iter().zip(&addresses).enumerate() {
        if a.unprobeable.is_some() {
            continue;
        }
        let transport = match flow.expectation.protocol {
            Protocol::Udp => Transport::Udp,
            _ => Transport::Tcp,
        };
        probes.push(Probe {
            from: a.from,
            to: a.to,
            transport,
            port: flow.expectation.port,
        });
        probed.push(i);
    }
    let options = ProbeOptions {
        timeout: options.timeout,
        parallel: options.parallel,
    };
    let results = probe::run(&topology, &probes, options);
    let mut fates: Vec<Fate> = addresses
        .iter()
        .map(|a| Fate::Unprobed(a.unprobeable.clone().unwrap_or_default()))
        .collect();
    for ((i, probe), result) in probed.into_iter().zip(&probes).zip(results) {
        let flow = &scenario.flows[i];
        fates[i] = match result {
            ProbeResult::Failed(why) => Fate::Failed(why),
            ProbeResult::Passed | ProbeResult::Dropped => {
                let passed = result == ProbeResult::Passed;
                let packet = Packet {
                    source: probe.from,
                    destination: probe.to,
                    protocol: flow.expectation.protocol,
                    dport: probe.port,
                };
                // A pod's packets to its own address stay in its network namespace: no rule
                // on the router sees them.
                let (deciding_rule, would_deny) = if probe.from == probe.to {
                    let own = FlowDecision::own_address();
                    (describe::deciding_rules(own.as_ref()), None)
                } else {
                    let model = evaluate(&ruleset, &packet);
                    let would_deny = passed.then(|| would_deny(&model)).flatten();
                    (explain(scenario, flow, &model, passed), would_deny)
                };
                Fate::Decided(Box::new(DecisionJson {
                    verdict: describe::verdict_word(passed),
                    egress: None,
                    ingress: None,
                    deciding_rule,
                    would_deny,
                }))
            }
        };
    }
    Ok(fates)
}

/// On other systems there are no network namespaces to probe in.
#[cfg(not(target_os = "linux"))]
pub fn decide(scenario: &Scenario, _options: ProbeSettings) -> Result<Vec<Fate>, NftCheckError> {
    let _ = ruleset(scenario)?;
    Err(NftCheckError::Network(
        "--datapath nftables probes through Linux network namespaces; this is not Linux".into(),
    ))
}

/// The addresses a flow's packets carry: the address the flow names, else the pod's own address
/// of the flow's family (its identity's representative address).
#[cfg(target_os = "linux")]
fn flow_addresses(scenario: &Scenario) -> Vec<FlowAddresses> {
    let representative = scenario.cluster.store().representative_addresses();
    let address = |endpoint: &Endpoint, id: IdentityId| match endpoint {
        Endpoint::Address(ip) => Some(*ip),
        Endpoint::Pod(_) => representative.get(&id).copied(),
    };
    scenario
        .flows
        .iter()
        .map(|flow| {
            let e = &flow.expectation;
            match (address(&e.from, flow.src), address(&e.to, flow.dst)) {
                (Some(from), Some(to)) => FlowAddresses {
                    from,
                    to,
                    unprobeable: unprobeable(flow, from, to),
                },
                _ => FlowAddresses {
                    from: IpAddr::from([0, 0, 0, 0]),
                    to: IpAddr::from([0, 0, 0, 0]),
                    unprobeable: Some("an endpoint of the flow has no address of its own".into()),
                },
            }
        })
        .collect()
}

/// What the audit chains a passed packet went through would deny of it, in `check`'s words for
/// any decider ([`describe::would_deny_flow`]), from the in-process evaluation of the loaded
/// rules (the kernel counts the same rules' packets; see `docs/semantics.md`).
#[cfg(target_os = "linux")]
fn would_deny(model: &Evaluation<'_>) -> Option<String> {
    let side = |wanted: Direction| {
        model
            .would_deny
            .iter()
            .find(|(_, direction, _)| *direction == wanted)
            .map(|(_, _, rule)| Decision {
                verdict: Verdict::Deny,
                auth: None,
                reason: Reason::clone(&rule.reason),
            })
    };
    let would_be = FlowDecision {
        egress: side(Direction::Egress),
        ingress: side(Direction::Ingress),
    };
    would_be
        .as_ref()
        .denying()
        .is_some()
        .then(|| describe::would_deny_flow(would_be.as_ref()))
}

/// The rules behind a packet's fate, from the in-process evaluation of the loaded rules.
#[cfg(target_os = "linux")]
fn explain(
    scenario: &Scenario,
    flow: &ExpectedFlow,
    model: &Evaluation<'_>,
    passed: bool,
) -> String {
    if model.accepted != passed {
        return format!(
            "the kernel {} it, but the loaded rules evaluated in process {} it",
            if passed { "forwarded" } else { "dropped" },
            if model.accepted { "accept" } else { "drop" },
        );
    }
    let store = scenario.cluster.store();
    let is_pod = |id| store.get(id).and_then(|i| i.as_pod()).is_some();
    let mut sides: BTreeMap<Direction, Decision> = BTreeMap::new();
    for (_, direction, rule) in &model.chains {
        let verdict = match rule {
            Some(r) if r.verdict == netpol_nft::ChainVerdict::Drop => Verdict::Deny,
            _ => Verdict::Allow,
        };
        let reason = rule.map_or(Reason::Default, |r| Reason::clone(&r.reason));
        sides.insert(
            *direction,
            Decision {
                verdict,
                auth: None,
                reason,
            },
        );
    }
    let side = |direction, id| {
        is_pod(id).then(|| {
            sides.get(&direction).cloned().unwrap_or(Decision {
                verdict: Verdict::Allow,
                auth: None,
                reason: Reason::Default,
            })
        })
    };
    let decision = FlowDecision {
        egress: side(Direction::Egress, flow.src),
        ingress: side(Direction::Ingress, flow.dst),
    };
    describe::deciding_rules(decision.as_ref())
}
