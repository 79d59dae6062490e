//! An in-process HCN: endpoints with policy lists, HCN's ACL evaluation, a log of every call,
//! and injectable faults. It implements [`HcnCalls`], so the whole client path above the FFI runs
//! against it unchanged.
//!
//! Evaluation semantics, as HCN documents or behaves:
//! - ACLs are evaluated by ascending `Priority`; the first matching rule decides.
//! - `Protocols` 256 (or absent) matches every protocol; lists are comma-separated; ports may be
//!   `a-b` ranges; an absent address or port field matches anything.
//! - An endpoint with no ACL at all passes everything. Once any ACL is present the endpoint is
//!   default deny (the 2026 Windows Server behaviour), so traffic no rule matches is dropped.
//! - Equal priorities with different actions have undefined order in HCN. The simulator refuses
//!   a request that brings such a pair itself (an `Update` whose list holds one, an `Add` among
//!   its own rules). A pair of a rule already there and one an `Add` brings is the transient of
//!   a make-before-break change and allowed; the rule already there is evaluated first.
//! - `Add` appends, `Remove` takes away the policies equal to the given ones, `Update` replaces
//!   the whole list: other owners' policies survive `Add` and `Remove` whatever happens between
//!   a client's read and its write.
//! - What real builds may do otherwise are quirks ([`SimQuirks`], one [`SimMode`] per Windows
//!   Server build): a loose or ignored `Remove`, the field an ingress set is matched in, an
//!   l2bridge host layer denying by default (`RuleType: Host` rules are evaluated there only),
//!   a bound on new ACLs per request, IPv6 sets and duplicate ids refused, a missing set matching
//!   nothing.
//! - The network holds IP sets (`SetPolicy` of type `IPSET`, by `Id`). A network `Add` creates
//!   sets and refuses an `Id` already there; `Update` replaces the values of existing sets and
//!   refuses a missing one; `Remove` deletes sets and refuses one an endpoint's ACL still names.
//!   An endpoint request whose ACLs name a set the network lacks is refused. ACLs are evaluated
//!   with each named set resolved to its values at the time of the packet, so a set update
//!   changes every endpoint naming it at once. (Whether a real HNS refuses the dangling
//!   reference or the busy removal is not documented; refusing both is the strict reading, and
//!   netpol's ordering never needs either.)

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::addresses::AddressRanges;
use crate::client::{HcnCalls, RawError};
use netpol_datapath::EndpointInfo;

use crate::matcher::{AclMatcher, Packet};
use crate::resync::ResyncSignal;
use crate::schema::{
    AclAction, EndpointPolicy, EndpointProperties, IpConfig, ModifyEndpointRequest,
    ModifyNetworkRequest, NetworkProperties, RequestType, SetPolicySetting, IPSET,
};
use crate::version::Capabilities;

mod log;
mod policies;
mod quirks;
mod session;

use log::CallLog;
use policies::{apply_request, resolve_sets, MatcherCache, SimSet};
pub use policies::{check_priorities, PolicyError};
pub use quirks::{MissingSetQuirk, RemoveQuirk, SimMode, SimQuirks};
pub use session::SimSession;

pub use log::{Call, CallCounts, CallKind, DEFAULT_LOG_BYTES, DEFAULT_LOG_CALLS};

/// A fault to inject. Each fires once, on the first call it applies to.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// The next call of `kind` (on `endpoint`, if given) fails without effect.
    Fail {
        kind: CallKind,
        endpoint: Option<String>,
    },
    /// Like `Fail`, for the call of `kind` on `endpoint` that follows `skip` calls of that kind
    /// on it (the `Remove` after an `Add`, say).
    FailLater {
        kind: CallKind,
        endpoint: String,
        skip: u32,
    },
    /// The endpoint is deleted while the next modify of it is in flight: the modify fails with
    /// not-found and the endpoint is gone.
    VanishDuringModify { endpoint: String },
    /// Another writer's `request` lands on the endpoint just before the next modify of it (a CNI
    /// adding its policy between netpol's read and its write) or, with `after`, just after it (a
    /// writer replacing the list from a read older than netpol's write).
    Interleave {
        endpoint: String,
        request: ModifyEndpointRequest,
        after: bool,
    },
}

/// An endpoint in the simulator.
#[derive(Clone, Debug, PartialEq)]
pub struct SimEndpoint {
    pub info: EndpointInfo,
    pub policies: Vec<EndpointPolicy>,
}

/// The outcome of evaluating one packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evaluation {
    pub action: AclAction,
    /// The deciding rule: (id, priority). None when no rule matched.
    pub rule: Option<(String, u16)>,
}

/// The id of the simulator's one network (every endpoint's `HostComputeNetwork`).
pub const SIM_NETWORK_ID: &str = "c0ffee00-0000-4000-8000-000000000000";

/// A network call names the simulator's network or, before any endpoint named it, none.
fn check_network(network: Option<&str>) -> Result<(), RawError> {
    match network {
        Some(id) if !id.eq_ignore_ascii_case(SIM_NETWORK_ID) => Err(RawError::NotFound),
        _ => Ok(()),
    }
}

#[derive(Debug)]
struct State {
    endpoints: BTreeMap<String, SimEndpoint>,
    /// The network's IP sets by id, with their parsed values.
    sets: BTreeMap<String, SimSet>,
    /// Parsed and sorted ACLs per endpoint, filled on first evaluation and dropped whenever the
    /// endpoint's policies change.
    parsed: HashMap<String, Arc<Vec<AclMatcher>>>,
    /// Every ACL parsed lately, by its settings text: an update that resends a list mostly
    /// unchanged parses only what is new (as HNS, in process, would not re-read its own state).
    matchers: MatcherCache,
    calls: CallLog,
    faults: Vec<Fault>,
    /// Which instance of the HNS service runs: bumped by each restart, which invalidates the
    /// handles of every [`SimSession`] opened before.
    service: u64,
    /// The sessions' service-callback registrations; a restart notifies and forgets them.
    registrations: Vec<Weak<ResyncSignal>>,
    /// Sessions connect without a callback registration (as when registering fails).
    refuse_registrations: bool,
    quirks: SimQuirks,
}

impl Default for State {
    fn default() -> Self {
        State {
            endpoints: BTreeMap::new(),
            sets: BTreeMap::new(),
            parsed: HashMap::new(),
            matchers: MatcherCache::default(),
            calls: CallLog::new(DEFAULT_LOG_CALLS, DEFAULT_LOG_BYTES),
            faults: Vec::new(),
            service: 0,
            registrations: Vec::new(),
            refuse_registrations: false,
            quirks: SimQuirks::default(),
        }
    }
}

impl State {
    /// Applies a modify request to an endpoint's policy list.
    fn apply(&mut self, endpoint: &str, request: &ModifyEndpointRequest) -> Result<(), RawError> {
        let ep = self.endpoints.get_mut(endpoint).ok_or(RawError::NotFound)?;
        ep.policies = apply_request(
            &ep.policies,
            request,
            &mut self.matchers,
            &self.sets,
            &self.quirks,
        )?;
        self.parsed.remove(endpoint);
        Ok(())
    }

    /// Applies a set request to the network.
    fn apply_sets(&mut self, request: &ModifyNetworkRequest) -> Result<(), RawError> {
        let failed = |message: String| RawError::Failed { message };
        let mut given = Vec::new();
        for policy in &request.settings.policies {
            match policy.as_set() {
                Some(Ok(set)) => given.push(set),
                Some(Err(e)) => {
                    return Err(failed(format!("SetPolicy settings do not parse: {e}")))
                }
                None => {
                    return Err(failed(format!(
                        "network policy type {:?} is not simulated",
                        policy.policy_type
                    )))
                }
            }
        }
        // The request applies whole or not at all, as HNS's does: its changes are gathered
        // over the sets as they are (a copy of every set per request would make the simulator,
        // not the agent, the cost of a set update), then applied.
        let mut changes: BTreeMap<String, Option<SimSet>> = BTreeMap::new();
        for set in given {
            let exists = match changes.get(&set.id) {
                Some(change) => change.is_some(),
                None => self.sets.contains_key(&set.id),
            };
            match request.request_type {
                RequestType::Add | RequestType::Update => {
                    if set.policy_type != IPSET {
                        return Err(failed(format!(
                            "set {:?}: PolicyType {:?} is not simulated (only IPSET)",
                            set.id, set.policy_type
                        )));
                    }
                    if request.request_type == RequestType::Add && exists {
                        return Err(failed(format!("set {:?} already exists", set.id)));
                    }
                    if request.request_type == RequestType::Update && !exists {
                        return Err(failed(format!("set {:?} does not exist", set.id)));
                    }
                    let values = crate::schema::set_members(&set.values)
                        .map_err(|e| failed(format!("set {:?}: {e}", set.id)))?;
                    let values = AddressRanges::from_nets(&values);
                    if self.quirks.ipv6_sets_refused && values.has_ipv6() {
                        return Err(RawError::Refused {
                            refusal: netpol_datapath::Refusal::InvalidPolicy,
                            message: format!(
                                "HCN_E_INVALID_POLICY: set {:?} holds an IPv6 member",
                                set.id
                            ),
                        });
                    }
                    changes.insert(set.id.clone(), Some((set, Arc::new(values))));
                }
                RequestType::Remove => {
                    if !exists {
                        return Err(failed(format!("set {:?} does not exist", set.id)));
                    }
                    if let Some(user) = self.user_of(&set.id) {
                        return Err(failed(format!(
                            "set {:?} is still named by an ACL of endpoint {user}",
                            set.id
                        )));
                    }
                    changes.insert(set.id.clone(), None);
                }
                RequestType::Refresh => {}
            }
        }
        for (id, change) in changes {
            match change {
                Some(set) => {
                    self.sets.insert(id, set);
                }
                None => {
                    self.sets.remove(&id);
                }
            }
        }
        // Every endpoint's evaluation resolves sets afresh.
        self.parsed.clear();
        Ok(())
    }

    /// An endpoint whose ACLs name the set.
    fn user_of(&mut self, set: &str) -> Option<String> {
        let State {
            endpoints,
            matchers,
            ..
        } = self;
        endpoints.iter().find_map(|(id, ep)| {
            let rules = matchers.parse_acls(&ep.policies).ok()?;
            rules
                .iter()
                .any(|r| r.named_sets().any(|s| s == set))
                .then(|| id.clone())
        })
    }

    fn rules(&mut self, endpoint: &str) -> Result<Arc<Vec<AclMatcher>>, RawError> {
        if let Some(rules) = self.parsed.get(endpoint) {
            return Ok(rules.clone());
        }
        let ep = self.endpoints.get(endpoint).ok_or(RawError::NotFound)?;
        // Lists are validated on the way in, but an endpoint created with policies skips that.
        let rules = self
            .matchers
            .parse_acls(&ep.policies)
            .map_err(|e| e.to_string())
            .and_then(|rules| resolve_sets(&rules, &self.sets, &self.quirks))
            .map_err(|message| RawError::Failed { message })?;
        let rules = Arc::new(rules);
        self.parsed.insert(endpoint.to_string(), rules.clone());
        Ok(rules)
    }
}

/// The simulator.
#[derive(Debug)]
pub struct HcnSim {
    state: Mutex<State>,
    capabilities: Capabilities,
    resync: ResyncSignal,
}

impl Default for HcnSim {
    fn default() -> Self {
        HcnSim::new()
    }
}

impl HcnSim {
    /// A simulator of a current HNS (15.0, every feature) reading the schema plainly
    /// ([`SimMode::Ideal`]).
    pub fn new() -> Self {
        HcnSim::with_mode(SimMode::Ideal)
    }

    /// A simulator of the Windows Server build `mode` models: its HNS version and quirks.
    pub fn with_mode(mode: SimMode) -> Self {
        HcnSim::with_capabilities(mode.capabilities()).with_quirks(mode.quirks())
    }

    /// The simulator with these quirks.
    pub fn with_quirks(self, quirks: SimQuirks) -> Self {
        let mut state = self.lock();
        state.quirks = quirks;
        state.parsed.clear();
        drop(state);
        self
    }

    pub fn quirks(&self) -> SimQuirks {
        self.lock().quirks
    }

    /// A simulator reporting `capabilities`, whose sets behave as they say (the ingress set
    /// convention, IPv6 members refused where they are not taken), otherwise
    /// [`SimMode::Ideal`]. [`HcnSim::with_quirks`] makes it behave otherwise.
    pub fn with_capabilities(capabilities: Capabilities) -> Self {
        let sim = HcnSim {
            state: Mutex::default(),
            capabilities,
            resync: ResyncSignal::default(),
        };
        sim.with_quirks(SimQuirks {
            ingress_set_field: capabilities.ingress_set_field,
            ipv6_sets_refused: !capabilities.ipv6_sets,
            ..SimMode::Ideal.quirks()
        })
    }

    /// Keeps at most `calls` calls, and modify requests of at most `bytes` bytes, in the log
    /// (the most recent ones); counts stay complete.
    pub fn with_call_log_limits(self, calls: usize, bytes: usize) -> Self {
        let mut state = self.lock();
        let counts = state.calls.counts;
        state.calls = CallLog::new(calls, bytes);
        state.calls.counts = counts;
        drop(state);
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Creates an endpoint (as the CNI plugin would), with `policies` already on it.
    pub fn add_endpoint(&self, info: EndpointInfo, policies: Vec<EndpointPolicy>) {
        let mut state = self.lock();
        state.parsed.remove(&info.id);
        state
            .endpoints
            .insert(info.id.clone(), SimEndpoint { info, policies });
    }

    pub fn remove_endpoint(&self, id: &str) -> Option<SimEndpoint> {
        let mut state = self.lock();
        state.parsed.remove(id);
        state.endpoints.remove(id)
    }

    pub fn endpoint(&self, id: &str) -> Option<SimEndpoint> {
        self.lock().endpoints.get(id).cloned()
    }

    /// The network's IP sets, by id.
    pub fn sets(&self) -> BTreeMap<String, SetPolicySetting> {
        self.lock()
            .sets
            .iter()
            .map(|(id, (set, _))| (id.clone(), set.clone()))
            .collect()
    }

    /// Creates a set directly (as another owner would).
    pub fn add_set(&self, set: SetPolicySetting) -> Result<(), RawError> {
        self.lock().apply_sets(&ModifyNetworkRequest::new(
            RequestType::Add,
            vec![EndpointPolicy::set(&set)],
        ))
    }

    pub fn inject(&self, fault: Fault) {
        self.lock().faults.push(fault);
    }

    /// An HNS restart: every policy is dropped, every [`SimSession`]'s handles become invalid
    /// and its service callback fires once and is forgotten (as a restarted HNS forgets
    /// registrations), and session-less users are told to resync.
    pub fn restart(&self) {
        let registrations = {
            let mut state = self.lock();
            state.parsed.clear();
            for endpoint in state.endpoints.values_mut() {
                endpoint.policies.clear();
            }
            state.sets.clear();
            state.service += 1;
            std::mem::take(&mut state.registrations)
        };
        // Outside the lock: a listener may call back into the simulator.
        for registration in registrations.iter().filter_map(Weak::upgrade) {
            registration.raise();
        }
        self.resync.raise();
    }

    /// Makes new sessions connect without a service-callback registration (HNS refusing it), so
    /// that they learn of a restart only from their failing calls.
    pub fn refuse_registrations(&self, refuse: bool) {
        self.lock().refuse_registrations = refuse;
    }

    /// The running HNS service instance (bumped by each restart).
    pub fn service_instance(&self) -> u64 {
        self.lock().service
    }

    /// How many service-callback registrations the running instance holds.
    pub fn registrations(&self) -> usize {
        let mut state = self.lock();
        state.registrations.retain(|r| r.strong_count() > 0);
        state.registrations.len()
    }

    /// The calls in the log (every call, unless the log's bounds made it forget the oldest).
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.recent.iter().cloned().collect()
    }

    /// The calls in the log, clearing it.
    pub fn take_calls(&self) -> Vec<Call> {
        self.lock().calls.take()
    }

    /// How many calls of each kind were ever made.
    pub fn call_counts(&self) -> CallCounts {
        self.lock().calls.counts
    }

    /// Evaluates `packet` on an endpoint with HCN semantics.
    ///
    /// A packet crosses the switch port, where every rule but `RuleType: Host` ones is
    /// evaluated. With [`SimQuirks::host_layer_default_deny`] it then crosses the host layer,
    /// where only `Host` rules are, and which blocks what none allows once the endpoint holds
    /// any ACL. Without it `Host` rules decide nothing.
    pub fn evaluate(&self, endpoint: &str, packet: &Packet) -> Result<Evaluation, RawError> {
        let mut state = self.lock();
        let rules = state.rules(endpoint)?;
        let host_layer = state.quirks.host_layer_default_deny;
        let local = &state.endpoints[endpoint].info.addresses;
        if rules.is_empty() {
            return Ok(Evaluation {
                action: AclAction::Allow,
                rule: None,
            });
        }
        let first_match = |host_scope: bool| {
            rules
                .iter()
                .filter(|r| r.host_scope == host_scope)
                .find(|r| r.matches(packet, local))
                .map_or(
                    Evaluation {
                        action: AclAction::Block,
                        rule: None,
                    },
                    |r| Evaluation {
                        action: r.action,
                        rule: Some((r.id.clone(), r.priority)),
                    },
                )
        };
        let switch = if rules.iter().any(|r| !r.host_scope) {
            first_match(false)
        } else {
            Evaluation {
                action: AclAction::Allow,
                rule: None,
            }
        };
        if host_layer && switch.action == AclAction::Allow {
            let host = first_match(true);
            if host.action == AclAction::Block {
                return Ok(host);
            }
        }
        Ok(switch)
    }

    /// Checks a fault matching the call, consuming it.
    fn take_fault(state: &mut State, kind: CallKind, endpoint: Option<&str>) -> Option<Fault> {
        let index = state.faults.iter_mut().position(|f| match f {
            Fault::Fail {
                kind: k,
                endpoint: e,
            } => *k == kind && (e.is_none() || e.as_deref() == endpoint),
            Fault::FailLater {
                kind: k,
                endpoint: e,
                skip,
            } => {
                let applies = *k == kind && Some(e.as_str()) == endpoint;
                if applies && *skip > 0 {
                    *skip -= 1;
                    return false;
                }
                applies
            }
            Fault::VanishDuringModify { endpoint: e } | Fault::Interleave { endpoint: e, .. } => {
                kind == CallKind::Modify && Some(e.as_str()) == endpoint
            }
        })?;
        Some(state.faults.remove(index))
    }

    fn injected(kind: CallKind) -> RawError {
        RawError::Failed {
            message: format!("injected {kind:?} failure"),
        }
    }
}

impl HcnCalls for HcnSim {
    fn enumerate_endpoints(&self, query: &str) -> Result<String, RawError> {
        let mut state = self.lock();
        state.calls.push(Call::Enumerate);
        if HcnSim::take_fault(&mut state, CallKind::Enumerate, None).is_some() {
            return Err(HcnSim::injected(CallKind::Enumerate));
        }
        serde_json::from_str::<crate::schema::HostComputeQuery>(query).map_err(|e| {
            RawError::Failed {
                message: format!("invalid query: {e}"),
            }
        })?;
        let ids: Vec<&String> = state.endpoints.keys().collect();
        Ok(serde_json::to_string(&ids).expect("a list of ids serializes"))
    }

    fn query_endpoint(&self, endpoint: &str, query: &str) -> Result<String, RawError> {
        let mut state = self.lock();
        state.calls.push(Call::Query {
            endpoint: endpoint.to_string(),
        });
        if HcnSim::take_fault(&mut state, CallKind::Query, Some(endpoint)).is_some() {
            return Err(HcnSim::injected(CallKind::Query));
        }
        serde_json::from_str::<crate::schema::HostComputeQuery>(query).map_err(|e| {
            RawError::Failed {
                message: format!("invalid query: {e}"),
            }
        })?;
        let ep = state.endpoints.get(endpoint).ok_or(RawError::NotFound)?;
        let props = EndpointProperties {
            id: ep.info.id.clone(),
            name: ep.info.name.clone(),
            ip_configurations: ep
                .info
                .addresses
                .iter()
                .map(|a: &IpAddr| IpConfig {
                    ip_address: a.to_string(),
                    prefix_length: None,
                })
                .collect(),
            policies: ep.policies.clone(),
            other: serde_json::Map::from_iter([(
                "HostComputeNetwork".to_string(),
                SIM_NETWORK_ID.into(),
            )]),
        };
        Ok(serde_json::to_string(&props).expect("endpoint properties serialize"))
    }

    fn modify_endpoint(&self, endpoint: &str, request: &str) -> Result<(), RawError> {
        let mut state = self.lock();
        state.calls.push(Call::Modify {
            endpoint: endpoint.to_string(),
            request: request.to_string(),
        });
        let mut after = None;
        match HcnSim::take_fault(&mut state, CallKind::Modify, Some(endpoint)) {
            Some(Fault::VanishDuringModify { .. }) => {
                state.endpoints.remove(endpoint);
                state.parsed.remove(endpoint);
                return Err(RawError::NotFound);
            }
            Some(Fault::Fail { .. } | Fault::FailLater { .. }) => {
                return Err(HcnSim::injected(CallKind::Modify))
            }
            Some(Fault::Interleave {
                request,
                after: false,
                ..
            }) => state.apply(endpoint, &request)?,
            Some(Fault::Interleave { request, .. }) => after = Some(request),
            None => {}
        }
        let request: ModifyEndpointRequest =
            serde_json::from_str(request).map_err(|e| RawError::Failed {
                message: format!("invalid modify request: {e}"),
            })?;
        state.apply(endpoint, &request)?;
        if let Some(other) = after {
            state.apply(endpoint, &other)?;
        }
        Ok(())
    }

    fn query_network(&self, network: Option<&str>, query: &str) -> Result<String, RawError> {
        let mut state = self.lock();
        state.calls.push(Call::QueryNetwork);
        check_network(network)?;
        if HcnSim::take_fault(&mut state, CallKind::QueryNetwork, None).is_some() {
            return Err(HcnSim::injected(CallKind::QueryNetwork));
        }
        serde_json::from_str::<crate::schema::HostComputeQuery>(query).map_err(|e| {
            RawError::Failed {
                message: format!("invalid query: {e}"),
            }
        })?;
        let props = NetworkProperties {
            id: SIM_NETWORK_ID.to_string(),
            name: "netpol-sim".to_string(),
            other: serde_json::Map::from_iter([(
                "Type".to_string(),
                state.quirks.network_type.into(),
            )]),
            policies: state
                .sets
                .values()
                .map(|(set, _)| EndpointPolicy::set(set))
                .collect(),
        };
        Ok(serde_json::to_string(&props).expect("network properties serialize"))
    }

    fn modify_network(&self, network: Option<&str>, request: &str) -> Result<(), RawError> {
        let mut state = self.lock();
        state.calls.push(Call::ModifyNetwork {
            request: request.to_string(),
        });
        check_network(network)?;
        if HcnSim::take_fault(&mut state, CallKind::ModifyNetwork, None).is_some() {
            return Err(HcnSim::injected(CallKind::ModifyNetwork));
        }
        let request: ModifyNetworkRequest =
            serde_json::from_str(request).map_err(|e| RawError::Failed {
                message: format!("invalid network modify request: {e}"),
            })?;
        state.apply_sets(&request)
    }

    fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    fn resync_signal(&self) -> &ResyncSignal {
        &self.resync
    }
}
