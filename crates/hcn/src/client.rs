//! The HCN client logic shared by the Windows client and the simulator: JSON requests in, JSON
//! responses out, over a raw call layer ([`HcnCalls`]). On Windows the raw layer is the FFI in
//! `crate::windows`; in tests it is [`crate::sim::HcnSim`]. Everything above the raw calls
//! (building queries and requests, parsing properties, classifying errors) lives here and is
//! tested through the simulator.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Mutex;

use serde_json::Value;

use netpol_datapath::{DatapathError, EndpointInfo};

use crate::api::{EndpointListing, HcnApi};
use crate::conventions::IngressSetField;
use crate::resync::ResyncSignal;
use crate::schema::{
    EndpointPolicy, EndpointProperties, HostComputeQuery, ModifyEndpointRequest,
    ModifyNetworkRequest, NetworkProperties, RequestType, SetPolicySetting,
};
use crate::version::{Capabilities, IpSetMode};

/// A raw HCN call failure.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RawError {
    /// `HCN_E_ENDPOINT_NOT_FOUND` or `ERROR_NOT_FOUND`.
    #[error("not found")]
    NotFound,
    /// HNS is not answering (stopped, restarting, its RPC server gone), or the handle the call
    /// went through belongs to an HNS instance that is gone: the client must be re-created once
    /// HNS answers, and everything read again.
    #[error("HNS is not answering or restarted: the client must reconnect")]
    Disconnected,
    /// HNS refused a policy request for a reason it named (an `HCN_E_POLICY_*` code).
    #[error("{message}")]
    Refused {
        refusal: netpol_datapath::Refusal,
        message: String,
    },
    /// Any other failure, with HCN's error record where it gave one.
    #[error("{message}")]
    Failed { message: String },
}

/// The HCN calls netpol makes, at the JSON level. Each blocks.
pub trait HcnCalls: Send + Sync {
    /// `HcnEnumerateEndpoints`: a JSON array of endpoint ids.
    fn enumerate_endpoints(&self, query: &str) -> Result<String, RawError>;
    /// `HcnOpenEndpoint`, `HcnQueryEndpointProperties`, `HcnCloseEndpoint`: the properties JSON.
    fn query_endpoint(&self, endpoint: &str, query: &str) -> Result<String, RawError>;
    /// `HcnOpenEndpoint`, `HcnModifyEndpoint`, `HcnCloseEndpoint`.
    fn modify_endpoint(&self, endpoint: &str, request: &str) -> Result<(), RawError>;
    /// `HcnOpenNetwork`, `HcnQueryNetworkProperties`, `HcnCloseNetwork` on `network` (the
    /// endpoints' network, by id; None when no endpoint has named one yet): the properties JSON.
    /// Clients without network calls keep the default.
    fn query_network(&self, network: Option<&str>, query: &str) -> Result<String, RawError> {
        let _ = (network, query);
        Err(RawError::Failed {
            message: "this HCN client makes no network calls".into(),
        })
    }
    /// `HcnOpenNetwork`, `HcnModifyNetwork`, `HcnCloseNetwork` on `network`.
    fn modify_network(&self, network: Option<&str>, request: &str) -> Result<(), RawError> {
        let _ = (network, request);
        Err(RawError::Failed {
            message: "this HCN client makes no network calls".into(),
        })
    }
    /// Whether network calls need the network's id (a real host may have several networks; the
    /// simulator has one).
    fn needs_network_id(&self) -> bool {
        false
    }
    /// What the HNS supports; [`Capabilities::ip_sets`] when its version has IP sets and this
    /// client makes network calls (whether they are used is [`IpSetMode`]'s, in [`HcnDatapath`]).
    fn capabilities(&self) -> Capabilities;
    fn resync_signal(&self) -> &ResyncSignal;
}

/// The [`HcnApi`] over raw HCN calls.
#[derive(Debug)]
pub struct HcnDatapath<C> {
    calls: C,
    /// Whether ACLs name IP sets where the HNS has them.
    ip_sets: IpSetMode,
    /// The network IP sets go on: the configured one, or the network of the most endpoints in
    /// the last listing.
    network: Mutex<Option<String>>,
    /// The network configured (`--hcn-network`), by id or name.
    configured_network: Option<String>,
    /// Networks' names and types by id, as queried (a network keeps both for its life).
    network_props: Mutex<BTreeMap<String, (String, String)>>,
    /// Overrides the HNS version's ingress set convention (`--hcn-ingress-set-field`).
    ingress_set_field: Option<IngressSetField>,
}

impl<C: HcnCalls> HcnDatapath<C> {
    /// The datapath over `calls`, using IP sets where the HNS has them ([`IpSetMode::Auto`]).
    pub fn new(calls: C) -> Self {
        HcnDatapath::with_ip_sets(calls, IpSetMode::Auto)
    }

    /// The datapath over `calls`, using IP sets as `mode` says (never where the HNS lacks them).
    pub fn with_ip_sets(calls: C, mode: IpSetMode) -> Self {
        HcnDatapath {
            calls,
            ip_sets: mode,
            network: Mutex::new(None),
            configured_network: None,
            network_props: Mutex::new(BTreeMap::new()),
            ingress_set_field: None,
        }
    }

    /// netpol's endpoints are those on the network with this id or name (endpoints of other
    /// networks are left alone), and IP sets go on it, rather than on the one most endpoints are
    /// on.
    pub fn with_network(self, network: Option<String>) -> Self {
        HcnDatapath {
            configured_network: network.filter(|n| !n.is_empty()),
            ..self
        }
    }

    /// Ingress ACLs name a peer's set in this field, whatever the HNS version's convention.
    pub fn with_ingress_set_field(self, field: Option<IngressSetField>) -> Self {
        HcnDatapath {
            ingress_set_field: field,
            ..self
        }
    }

    /// A network's name and type, queried once.
    fn network_props(&self, id: &str) -> Result<(String, String), DatapathError> {
        if let Some(props) = self.network_props.lock().expect("props lock").get(id) {
            return Ok(props.clone());
        }
        let props = self.query_network(Some(id))?;
        let kind = match props.other.get("Type") {
            Some(Value::String(kind)) => kind.clone(),
            _ => String::new(),
        };
        let entry = (props.name, kind);
        self.network_props
            .lock()
            .expect("props lock")
            .insert(id.to_string(), entry.clone());
        Ok(entry)
    }

    fn query_network(&self, network: Option<&str>) -> Result<NetworkProperties, DatapathError> {
        let query = serde_json::to_string(&HostComputeQuery::default())
            .expect("an HCN query serializes to JSON");
        let text = self
            .calls
            .query_network(network, &query)
            .map_err(|e| classify("HcnQueryNetworkProperties", None, e))?;
        serde_json::from_str(&text).map_err(|e| DatapathError::BadResponse {
            call: "HcnQueryNetworkProperties",
            endpoint: None,
            message: e.to_string(),
        })
    }

    /// The network IP sets go on, as the last endpoint listing found it.
    pub fn network(&self) -> Option<String> {
        self.network.lock().expect("network lock").clone()
    }

    /// Remembers the network IP sets go on: the configured one, or the one most listed
    /// endpoints are on (with a warning when they are on several).
    fn note_networks(&self, networks: &BTreeMap<String, usize>) {
        if let Some(wanted) = &self.configured_network {
            let found = networks.keys().find(|id| {
                id.eq_ignore_ascii_case(wanted)
                    || self
                        .network_props(id)
                        .is_ok_and(|(name, _)| name.eq_ignore_ascii_case(wanted))
            });
            if found.is_none() && !networks.is_empty() {
                tracing::warn!(network = %wanted, listed_networks = ?networks.keys().collect::<Vec<_>>(), "no listed endpoint is on the configured HNS network (--hcn-network), so netpol programs no endpoint: check the name or id against Get-HnsNetwork");
            }
            *self.network.lock().expect("network lock") = found.cloned();
            return;
        }
        let Some((network, _)) = networks
            .iter()
            .max_by_key(|(id, n)| (**n, std::cmp::Reverse(*id)))
        else {
            return;
        };
        if networks.len() > 1 {
            tracing::warn!(
                networks = networks.len(),
                chosen = %network,
                "endpoints are on several HNS networks; netpol's IP sets go on the network of the most endpoints, and ACLs of endpoints elsewhere that name them will be refused (name the pods' network with --hcn-network, or use --hcn-ip-sets off on such a host)"
            );
        }
        *self.network.lock().expect("network lock") = Some(network.clone());
    }

    /// The raw call layer (the simulator, in tests).
    pub fn calls(&self) -> &C {
        &self.calls
    }

    fn properties(&self, endpoint: &str) -> Result<EndpointProperties, DatapathError> {
        let query = serde_json::to_string(&HostComputeQuery::default())
            .expect("an HCN query serializes to JSON");
        let text = self
            .calls
            .query_endpoint(endpoint, &query)
            .map_err(|e| classify("HcnQueryEndpointProperties", Some(endpoint), e))?;
        serde_json::from_str(&text).map_err(|e| DatapathError::BadResponse {
            call: "HcnQueryEndpointProperties",
            endpoint: Some(endpoint.to_string()),
            message: e.to_string(),
        })
    }
}

fn classify(call: &'static str, endpoint: Option<&str>, error: RawError) -> DatapathError {
    match (error, endpoint) {
        (RawError::NotFound, Some(endpoint)) => DatapathError::NotFound {
            endpoint: endpoint.to_string(),
        },
        (RawError::Disconnected, _) => DatapathError::Disconnected { call },
        (RawError::Refused { refusal, message }, endpoint) => DatapathError::Refused {
            call,
            endpoint: endpoint.map(str::to_string),
            refusal,
            message,
        },
        (error, endpoint) => DatapathError::Call {
            call,
            endpoint: endpoint.map(str::to_string),
            message: error.to_string(),
        },
    }
}

fn addresses(props: &EndpointProperties) -> Vec<IpAddr> {
    props
        .ip_configurations
        .iter()
        .filter_map(|c| match c.ip_address.parse() {
            Ok(ip) => Some(ip),
            Err(_) => {
                tracing::warn!(
                    endpoint = %props.id,
                    address = %c.ip_address,
                    "ignoring an unreadable IpConfigurations.IpAddress"
                );
                None
            }
        })
        .collect()
}

impl<C: HcnCalls> HcnApi for HcnDatapath<C> {
    fn list_endpoints(&self) -> Result<EndpointListing, DatapathError> {
        let query = serde_json::to_string(&HostComputeQuery::default())
            .expect("an HCN query serializes to JSON");
        let text = self
            .calls
            .enumerate_endpoints(&query)
            .map_err(|e| classify("HcnEnumerateEndpoints", None, e))?;
        let ids: Vec<String> =
            serde_json::from_str(&text).map_err(|e| DatapathError::BadResponse {
                call: "HcnEnumerateEndpoints",
                endpoint: None,
                message: e.to_string(),
            })?;
        let mut out = EndpointListing {
            endpoints: Vec::with_capacity(ids.len()),
            unreadable: Vec::new(),
        };
        let mut networks: BTreeMap<String, usize> = BTreeMap::new();
        // Each listed endpoint's network, in listing order.
        let mut on: Vec<Option<String>> = Vec::with_capacity(ids.len());
        for id in ids {
            match self.properties(&id) {
                Ok(props) => {
                    let network = match props.other.get("HostComputeNetwork") {
                        Some(Value::String(network)) => Some(network.to_lowercase()),
                        _ => None,
                    };
                    if let Some(network) = &network {
                        *networks.entry(network.clone()).or_default() += 1;
                    }
                    on.push(network);
                    out.endpoints.push(EndpointInfo {
                        addresses: addresses(&props),
                        id,
                        name: props.name,
                    });
                }
                // Deleted between the enumeration and the query: it is simply gone.
                Err(DatapathError::NotFound { .. }) => {}
                // HNS itself is gone: no listing at all, the caller reconnects.
                Err(e) if e.is_disconnected() => return Err(e),
                // This endpoint alone: the others are still listed (and programmed).
                Err(e) => {
                    tracing::warn!(endpoint = %id, error = %e, "skipping an endpoint that cannot be read");
                    out.unreadable.push((id, e));
                }
            }
        }
        self.note_networks(&networks);
        if self.configured_network.is_some() {
            let chosen = self.network();
            // A configured network: endpoints of every other network are not netpol's (the
            // host's own vNIC, another CNI's pods). One that names no network is kept.
            let mut networks = on.into_iter();
            let before = out.endpoints.len();
            out.endpoints.retain(|_| match networks.next().flatten() {
                Some(network) => chosen.as_deref() == Some(network.as_str()),
                None => true,
            });
            if out.endpoints.len() < before {
                tracing::debug!(
                    excluded = before - out.endpoints.len(),
                    "endpoints on other HNS networks than --hcn-network left alone"
                );
            }
        }
        Ok(out)
    }

    fn read_policies(&self, endpoint: &str) -> Result<Vec<EndpointPolicy>, DatapathError> {
        Ok(self.properties(endpoint)?.policies)
    }

    fn modify_policies(
        &self,
        endpoint: &str,
        request: RequestType,
        policies: Vec<EndpointPolicy>,
    ) -> Result<(), DatapathError> {
        let request = serde_json::to_string(&ModifyEndpointRequest::new(request, policies))
            .expect("an HCN request serializes to JSON");
        self.calls
            .modify_endpoint(endpoint, &request)
            .map_err(|e| classify("HcnModifyEndpoint", Some(endpoint), e))
    }

    fn list_sets(&self) -> Result<Vec<SetPolicySetting>, DatapathError> {
        let network = self.network();
        if network.is_none() && self.calls.needs_network_id() {
            // No endpoint listed names a network: no ACL can name a set, none is netpol's to read.
            return Ok(Vec::new());
        }
        let props = self.query_network(network.as_deref())?;
        // Another owner's set netpol cannot read is not netpol's business: skipped, not fatal.
        Ok(props
            .policies
            .iter()
            .filter_map(EndpointPolicy::as_set)
            .filter_map(|s| {
                s.map_err(|e| tracing::warn!(error = %e, "skipping an unreadable SetPolicy"))
                    .ok()
            })
            .collect())
    }

    fn modify_sets(
        &self,
        request: RequestType,
        sets: Vec<SetPolicySetting>,
    ) -> Result<(), DatapathError> {
        let policies = sets.iter().map(EndpointPolicy::set).collect();
        let request = serde_json::to_string(&ModifyNetworkRequest::new(request, policies))
            .expect("an HCN request serializes to JSON");
        let network = self.network();
        if network.is_none() && self.calls.needs_network_id() {
            return Err(DatapathError::Call {
                call: "HcnModifyNetwork",
                endpoint: None,
                message:
                    "no endpoint listed names its HNS network, so there is none to hold IP sets"
                        .into(),
            });
        }
        self.calls
            .modify_network(network.as_deref(), &request)
            .map_err(|e| classify("HcnModifyNetwork", None, e))
    }

    fn network_type(&self) -> Result<Option<String>, DatapathError> {
        // No listed endpoint names a network: there is nothing to program on one.
        match self.network() {
            Some(id) => Ok(Some(self.network_props(&id)?.1).filter(|t| !t.is_empty())),
            None => Ok(None),
        }
    }

    fn capabilities(&self) -> Capabilities {
        let mut capabilities = self.calls.capabilities();
        if let Some(field) = self.ingress_set_field {
            capabilities.ingress_set_field = field;
        }
        match self.ip_sets {
            IpSetMode::Off => capabilities.with_ip_sets(false),
            IpSetMode::Auto | IpSetMode::On => capabilities,
        }
    }

    fn resync_signal(&self) -> &ResyncSignal {
        self.calls.resync_signal()
    }
}
