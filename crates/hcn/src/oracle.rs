//! Deciding flows through the simulator: every local endpoint's MapState is compiled, programmed
//! into an [`HcnSim`] through the same [`Programmer`] the agent uses, and each direction of a
//! flow is then evaluated on the endpoint's rules with HCN semantics. This is what
//! `netpol check --datapath hcn-sim` runs.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use netpol_engine::flow::AddressOracle;
use netpol_engine::reference::{Decision, Reason};
use netpol_engine::{Direction, Engine, Protocol, Verdict};

use netpol_datapath::{
    compile_engine, CompileError, CompileOptions, CompiledEndpoint, EndpointInfo, Outcome,
};

use crate::api::HcnApi;
use crate::client::HcnDatapath;
use crate::host_rules::HostRules;
use crate::ipsets::{SetSync, SetTable};
use crate::matcher::Packet;
use crate::programmer::Programmer;
use crate::render::{HcnAcls, Remotes};
use crate::schema::{AclAction, AclDirection};
use crate::sim::{Evaluation, HcnSim, SimMode};
use crate::version::IpSetMode;

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
    #[error("programming the simulator's IP sets failed: {0}")]
    Sets(netpol_datapath::DatapathError),
}

/// The engine's endpoints, compiled and programmed into a simulator, deciding flows by address.
pub struct SimOracle {
    datapath: HcnDatapath<HcnSim>,
    /// Each local pod address to the endpoint holding it.
    endpoints: HashMap<IpAddr, String>,
    compiled: BTreeMap<String, HcnAcls>,
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
        Self::build(engine, options, true)
    }

    /// Like [`SimOracle::from_engine_with`], with ACLs naming IP sets (`ip_sets`) or inlining
    /// every address.
    pub fn build(
        engine: &Engine,
        options: &CompileOptions,
        ip_sets: bool,
    ) -> Result<Self, SimOracleError> {
        Self::build_in(engine, options, ip_sets, SimMode::Ideal)
    }

    /// Like [`SimOracle::build`], on a simulator of the Windows Server build `mode` models:
    /// rules rendered and written as the agent does there (its HNS version's set conventions,
    /// IP sets only where it has them, host-scope rules where its network needs them).
    pub fn build_in(
        engine: &Engine,
        options: &CompileOptions,
        ip_sets: bool,
        mode: SimMode,
    ) -> Result<Self, SimOracleError> {
        let set_mode = if ip_sets {
            IpSetMode::Auto
        } else {
            IpSetMode::Off
        };
        let datapath = HcnDatapath::with_ip_sets(HcnSim::with_mode(mode), set_mode);
        let sim = datapath.calls();
        let capabilities = datapath.capabilities();
        let ip_sets = capabilities.ip_sets;
        let mut table = SetTable::with_conventions(capabilities.set_conventions());
        let mut endpoints = HashMap::new();
        let mut compiled = BTreeMap::new();
        let all = compile_engine(engine, options)
            .map_err(|(endpoint, error)| SimOracleError::Compile { endpoint, error })?;
        for CompiledEndpoint {
            key,
            addresses,
            rules,
        } in all
        {
            for address in &addresses {
                endpoints.insert(*address, key.to_string());
            }
            sim.add_endpoint(
                EndpointInfo {
                    id: key.to_string(),
                    name: key.to_string(),
                    addresses,
                },
                Vec::new(),
            );
            let mut remotes = if ip_sets {
                Remotes::Sets(&mut table)
            } else {
                Remotes::Inline
            };
            compiled.insert(
                key.to_string(),
                HcnAcls::render_with(&rules, engine.identities(), &mut remotes),
            );
        }
        // The network the endpoints are on, and so its type.
        datapath.list_endpoints().map_err(SimOracleError::Sets)?;
        if ip_sets {
            let wanted = compiled
                .values()
                .flat_map(|acls| acls.sets.iter())
                .filter_map(|id| table.wanted(id).map(|s| (s.setting.id.as_str(), s)))
                .collect();
            let mut sync = SetSync::default();
            sync.add_and_update(&datapath, &wanted)
                .map_err(SimOracleError::Sets)?;
            let refused = sync
                .refused()
                .next()
                .map(|(set, why)| format!("set {set} refused: {why}"));
            if let Some(message) = refused {
                return Err(SimOracleError::Sets(netpol_datapath::DatapathError::Call {
                    call: "HcnModifyNetwork",
                    endpoint: None,
                    message,
                }));
            }
        }
        let desired = compiled
            .iter()
            .map(|(k, c)| (k.clone(), c.rules.clone()))
            .collect();
        let mut programmer = Programmer::default();
        let network_type = datapath.network_type().map_err(SimOracleError::Sets)?;
        programmer.set_host_rules(HostRules::Auto.rules_for(network_type.as_deref()));
        let report = programmer.apply(&datapath, &desired, Instant::now());
        if let Some((endpoint, outcome)) = report
            .outcomes
            .into_iter()
            .find(|(_, o)| !matches!(o, Outcome::Updated { .. } | Outcome::Unchanged))
        {
            return Err(SimOracleError::Program { endpoint, outcome });
        }
        Ok(SimOracle {
            datapath,
            endpoints,
            compiled,
        })
    }

    /// The compiled rules of each endpoint, by engine endpoint key.
    pub fn compiled(&self) -> &BTreeMap<String, HcnAcls> {
        &self.compiled
    }

    pub fn sim(&self) -> &HcnSim {
        self.datapath.calls()
    }

    pub fn datapath(&self) -> &dyn HcnApi {
        &self.datapath
    }

    /// Evaluates one direction of a flow on the endpoint holding the `endpoint` address, with
    /// the endpoint key. None if no endpoint holds the address.
    pub fn evaluate(
        &self,
        endpoint: IpAddr,
        direction: Direction,
        remote: IpAddr,
        protocol: Protocol,
        port: u16,
    ) -> Option<(&str, Evaluation)> {
        let key = self.endpoints.get(&endpoint)?;
        let evaluation = self
            .sim()
            .evaluate(key, &packet(direction, remote, protocol, port))
            .ok()?;
        Some((key, evaluation))
    }

    /// The HCN rule that decided one direction of a flow: (id, priority), if any matched.
    pub fn deciding_rule(
        &self,
        endpoint: IpAddr,
        direction: Direction,
        remote: IpAddr,
        protocol: Protocol,
        port: u16,
    ) -> Option<(String, u16)> {
        self.evaluate(endpoint, direction, remote, protocol, port)?
            .1
            .rule
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

impl AddressOracle for SimOracle {
    fn decide_address(
        &self,
        endpoint: IpAddr,
        direction: Direction,
        remote: IpAddr,
        protocol: Protocol,
        port: u16,
    ) -> Decision {
        // A container's packets to one of its own addresses stay in its network compartment and
        // never reach the vSwitch port whose ACLs the simulator evaluates.
        if self
            .endpoints
            .get(&endpoint)
            .is_some_and(|key| self.endpoints.get(&remote) == Some(key))
        {
            return Decision::own_address();
        }
        let evaluation = self.evaluate(endpoint, direction, remote, protocol, port);
        // An endpoint without netpol rules passes everything, as an HCN endpoint without ACLs does.
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
            .and_then(|(id, _)| self.compiled.get(ep)?.reasons.get(id))
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
