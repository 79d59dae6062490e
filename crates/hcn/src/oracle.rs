//! Deciding flows through the simulator: every local endpoint's MapState is compiled, programmed
//! into an [`HcnSim`] through the same [`Programmer`] the agent uses, and each direction of a
//! flow is then evaluated on the endpoint's rules with HCN semantics. This is what
//! `netpol check --datapath hcn-sim` runs.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use ipnet::IpNet;
use netpol_engine::flow::DirectionOracle;
use netpol_engine::reference::{Decision, Reason};
use netpol_engine::{Direction, Engine, IdentityId, IdentityStore, Protocol, Verdict};

use crate::client::HcnDatapath;
use crate::compile::{compile_endpoint_with, CompileError, CompileOptions, CompiledAcls};
use crate::datapath::{Datapath, EndpointInfo};
use crate::matcher::Packet;
use crate::programmer::{Outcome, Programmer};
use crate::schema::{AclAction, AclDirection};
use crate::sim::{Evaluation, HcnSim};

/// The source port the simulator gives flows (netpol's rules never match source ports).
pub const EPHEMERAL_PORT: u16 = 49152;

/// Why the simulated cluster could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SimOracleError {
    #[error("endpoint {endpoint}: {error}")]
    Compile {
        endpoint: String,
        error: CompileError,
    },
    #[error("endpoint {endpoint}: programming the simulator failed: {outcome:?}")]
    Program { endpoint: String, outcome: Outcome },
}

/// The engine's endpoints, compiled and programmed into a simulator. Identity ids are the
/// engine's.
pub struct SimOracle {
    datapath: HcnDatapath<HcnSim>,
    /// The engine's identities (a copy, so the oracle does not borrow the engine).
    store: IdentityStore,
    /// Identity of each local pod address to the endpoint holding it.
    endpoints: HashMap<IdentityId, String>,
    compiled: BTreeMap<String, CompiledAcls>,
    representatives: HashMap<IdentityId, IpAddr>,
}

impl SimOracle {
    /// Compiles and programs every endpoint of `engine`.
    pub fn from_engine(engine: &Engine) -> Result<Self, SimOracleError> {
        Self::from_engine_with(engine, &CompileOptions::default())
    }

    pub fn from_engine_with(
        engine: &Engine,
        options: &CompileOptions,
    ) -> Result<Self, SimOracleError> {
        let store = engine.identities();
        let sim = HcnSim::new();
        let mut endpoints = HashMap::new();
        let mut compiled = BTreeMap::new();
        for (key, map) in engine.endpoints() {
            let acls = compile_endpoint_with(map, store, options).map_err(|error| {
                SimOracleError::Compile {
                    endpoint: key.to_string(),
                    error,
                }
            })?;
            let ids = engine
                .endpoint_pod(key)
                .map(|(_, ids)| ids)
                .unwrap_or_default();
            let addresses = ids
                .iter()
                .filter_map(|id| store.get(*id).map(|i| i.prefix.addr()))
                .collect();
            for id in ids {
                endpoints.insert(*id, key.to_string());
            }
            sim.add_endpoint(
                EndpointInfo {
                    id: key.to_string(),
                    name: key.to_string(),
                    addresses,
                },
                Vec::new(),
            );
            compiled.insert(key.to_string(), acls);
        }
        let datapath = HcnDatapath::new(sim);
        let desired = compiled
            .iter()
            .map(|(k, c)| (k.clone(), c.rules.clone()))
            .collect();
        let report = Programmer::default().apply(&datapath, &desired, Instant::now());
        if let Some((endpoint, outcome)) = report
            .outcomes
            .into_iter()
            .find(|(_, o)| !matches!(o, Outcome::Updated { .. } | Outcome::Unchanged))
        {
            return Err(SimOracleError::Program { endpoint, outcome });
        }
        Ok(SimOracle {
            representatives: representatives(store),
            datapath,
            store: store.clone(),
            endpoints,
            compiled,
        })
    }

    /// The compiled rules of each endpoint, by engine endpoint key.
    pub fn compiled(&self) -> &BTreeMap<String, CompiledAcls> {
        &self.compiled
    }

    pub fn sim(&self) -> &HcnSim {
        self.datapath.calls()
    }

    pub fn datapath(&self) -> &dyn Datapath {
        &self.datapath
    }

    /// An address whose identity is `id`: a pod's or node's own address, or for a world
    /// identity the first address of its prefix that no more specific identity owns.
    pub fn address_of(&self, id: IdentityId) -> Option<IpAddr> {
        self.representatives.get(&id).copied().or_else(|| {
            let identity = self.store.get(id)?;
            (!identity.is_world()).then(|| identity.prefix.addr())
        })
    }

    /// The HCN rule that decided one direction of a flow: (id, priority), if any matched.
    pub fn deciding_rule(
        &self,
        endpoint: IdentityId,
        direction: Direction,
        remote: IdentityId,
        protocol: Protocol,
        port: u16,
    ) -> Option<(String, u16)> {
        let (endpoint, packet) = self.packet(endpoint, direction, remote, protocol, port)?;
        self.sim().evaluate(&endpoint, &packet).ok()?.rule
    }

    /// Evaluates one direction of a flow with an explicit remote address on the endpoint that
    /// holds the `endpoint` identity. None if no endpoint holds it.
    pub fn evaluate_address(
        &self,
        endpoint: IdentityId,
        direction: Direction,
        remote: IpAddr,
        protocol: Protocol,
        port: u16,
    ) -> Option<Evaluation> {
        let endpoint = self.endpoints.get(&endpoint)?;
        self.sim()
            .evaluate(endpoint, &packet(direction, remote, protocol, port))
            .ok()
    }

    fn packet(
        &self,
        endpoint: IdentityId,
        direction: Direction,
        remote: IdentityId,
        protocol: Protocol,
        port: u16,
    ) -> Option<(String, Packet)> {
        let endpoint = self.endpoints.get(&endpoint)?.clone();
        let remote_address = self.address_of(remote)?;
        Some((endpoint, packet(direction, remote_address, protocol, port)))
    }
}

/// The packet of one direction of a flow, seen from the local endpoint.
pub fn packet(direction: Direction, remote: IpAddr, protocol: Protocol, port: u16) -> Packet {
    let (direction, local_port, remote_port) = match direction {
        Direction::Ingress => (AclDirection::In, port, EPHEMERAL_PORT),
        Direction::Egress => (AclDirection::Out, EPHEMERAL_PORT, port),
    };
    Packet {
        direction,
        remote_address: remote,
        protocol: protocol.number(),
        local_port,
        remote_port,
    }
}

impl DirectionOracle for SimOracle {
    fn decide_direction(
        &self,
        endpoint: IdentityId,
        direction: Direction,
        remote: IdentityId,
        protocol: Protocol,
        port: u16,
    ) -> Decision {
        let evaluation = self
            .packet(endpoint, direction, remote, protocol, port)
            .and_then(|(ep, packet)| Some((ep.clone(), self.sim().evaluate(&ep, &packet).ok()?)));
        // An endpoint without netpol rules (or an identity with no address) passes everything,
        // as an HCN endpoint without ACLs does.
        let Some((ep, evaluation)) = evaluation else {
            return Decision {
                verdict: Verdict::Allow,
                auth: None,
                reason: Reason::Default,
            };
        };
        let reason = evaluation
            .rule
            .as_ref()
            .and_then(|(id, _)| self.compiled.get(&ep)?.reasons.get(id))
            .map_or(Reason::Default, |r| Reason::clone(Arc::as_ref(r)));
        Decision {
            verdict: match evaluation.action {
                AclAction::Allow => Verdict::Allow,
                AclAction::Block => Verdict::Deny,
            },
            auth: None,
            reason,
        }
    }
}

/// For each world identity, the first address its prefix owns outright, by sweeping the prefix
/// past the prefixes of identities nested inside it.
pub fn representatives(store: &IdentityStore) -> HashMap<IdentityId, IpAddr> {
    let all: Vec<(IdentityId, IpNet, bool)> = store
        .iter()
        .map(|(id, i)| (id, i.prefix, i.is_world()))
        .collect();
    let mut out = HashMap::new();
    for (id, prefix, world) in &all {
        if !world {
            continue;
        }
        let mut holes: Vec<(u128, u128)> = all
            .iter()
            .filter(|(other, p, other_world)| {
                other != id
                    && prefix.contains(p)
                    && (p.prefix_len() > prefix.prefix_len() || !other_world)
            })
            .map(|(_, p, _)| span(p))
            .collect();
        holes.sort_unstable();
        let (start, end) = span(prefix);
        let mut candidate = start;
        for (lo, hi) in holes {
            if candidate < lo {
                break;
            }
            candidate = candidate.max(hi.saturating_add(1));
        }
        if candidate <= end {
            let address = match prefix {
                IpNet::V4(_) => IpAddr::from(std::net::Ipv4Addr::from(candidate as u32)),
                IpNet::V6(_) => IpAddr::from(std::net::Ipv6Addr::from(candidate)),
            };
            out.insert(*id, address);
        }
    }
    out
}

fn span(net: &IpNet) -> (u128, u128) {
    match net {
        IpNet::V4(n) => (
            u128::from(u32::from(n.network())),
            u128::from(u32::from(n.broadcast())),
        ),
        IpNet::V6(n) => (u128::from(n.network()), u128::from(n.broadcast())),
    }
}
