//! Local endpoints: the HCN endpoints of this host and the pods they belong to.
//!
//! On Windows the CNI plugin creates an endpoint per pod; the agent finds them by listing the
//! host's endpoints and matches them to pods by address. In the simulator nothing creates
//! endpoints, so [`SimulatedCni`] plays the CNI plugin: one endpoint per local pod, created when
//! the pod gets its address and deleted when it goes.
//!
//! Either side may come first. An endpoint without a pod gets no netpol rules (and loses any it
//! had); a pod without an endpoint makes discovery look again shortly. An endpoint whose
//! properties cannot be read is passed on as unreadable (the enforcer reports it and asks for
//! a new listing after backoff); the others are listed and programmed as usual.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use netpol_datapath::{DatapathError, EndpointInfo, LocalPods};

use crate::api::{EndpointListing, HcnApi};
use crate::client::HcnDatapath;
use crate::sim::HcnSim;

/// How long to wait before listing again while some pod has no endpoint.
pub const RELIST_FOR_MISSING: Duration = Duration::from_secs(2);

/// Finds the host's endpoints.
pub trait EndpointDiscovery: Send {
    /// The host's endpoints. `refresh` demands a fresh listing (a full resync, or another try at
    /// endpoints that could not be read).
    fn endpoints(
        &mut self,
        datapath: &dyn HcnApi,
        pods: &LocalPods,
        refresh: bool,
        now: Instant,
    ) -> Result<EndpointListing, DatapathError>;

    /// When discovery wants to look again, if it does.
    fn next_look(&self) -> Option<Instant>;
}

/// Each endpoint's pod, matched by address. An endpoint no pod claims maps to `None`. Should two
/// pods claim one address (a dying pod and its successor, briefly), the first key wins.
pub fn match_pods(
    endpoints: &[EndpointInfo],
    pods: &LocalPods,
) -> BTreeMap<String, Option<String>> {
    let mut owner: HashMap<IpAddr, &str> = HashMap::new();
    for (key, addresses) in pods {
        for address in addresses {
            owner.entry(*address).or_insert(key.as_str());
        }
    }
    endpoints
        .iter()
        .map(|endpoint| {
            let pod = endpoint
                .addresses
                .iter()
                .find_map(|a| owner.get(a))
                .map(|key| (*key).to_owned());
            (endpoint.id.clone(), pod)
        })
        .collect()
}

/// The pods no endpoint holds an address of.
fn unmatched<'a>(endpoints: &[EndpointInfo], pods: &'a LocalPods) -> Vec<&'a str> {
    let held: BTreeSet<IpAddr> = endpoints
        .iter()
        .flat_map(|e| e.addresses.iter().copied())
        .collect();
    pods.iter()
        .filter(|(_, addresses)| !addresses.iter().any(|a| held.contains(a)))
        .map(|(key, _)| key.as_str())
        .collect()
}

/// The real host: endpoints come and go with the CNI plugin, and are listed from HCN.
#[derive(Debug, Default)]
pub struct HostEndpoints {
    listing: Option<EndpointListing>,
    listed_at: Option<Instant>,
    waiting_for_endpoints: bool,
}

impl EndpointDiscovery for HostEndpoints {
    fn endpoints(
        &mut self,
        datapath: &dyn HcnApi,
        pods: &LocalPods,
        refresh: bool,
        now: Instant,
    ) -> Result<EndpointListing, DatapathError> {
        let stale = match (&self.listing, self.listed_at) {
            (Some(listing), Some(at)) => {
                !unmatched(&listing.endpoints, pods).is_empty() && now >= at + RELIST_FOR_MISSING
            }
            _ => true,
        };
        if refresh || stale {
            self.listing = Some(datapath.list_endpoints()?);
            self.listed_at = Some(now);
        }
        let listing = self.listing.clone().unwrap_or_default();
        let missing = unmatched(&listing.endpoints, pods);
        if !missing.is_empty() {
            tracing::debug!(pods = ?missing, "local pods without an HCN endpoint yet");
        }
        self.waiting_for_endpoints = !missing.is_empty();
        Ok(listing)
    }

    fn next_look(&self) -> Option<Instant> {
        self.waiting_for_endpoints
            .then(|| self.listed_at.map(|at| at + RELIST_FOR_MISSING))
            .flatten()
    }
}

/// The id prefix of the endpoints [`SimulatedCni`] creates.
pub const SIM_ENDPOINT_PREFIX: &str = "sim-ep-";

/// Plays the CNI plugin on a simulator: one endpoint per local pod, named after the pod.
/// Endpoints it did not create (no [`SIM_ENDPOINT_PREFIX`]) are listed but never touched.
pub struct SimulatedCni {
    sim: Arc<HcnDatapath<HcnSim>>,
    /// The endpoints it manages, by pod key; found again by name after a restart.
    managed: BTreeMap<String, EndpointInfo>,
    /// Endpoints of others, as last listed.
    foreign: Vec<EndpointInfo>,
    /// Endpoints the last listing could not read.
    unreadable: Vec<(String, DatapathError)>,
    next_id: u64,
    listed: bool,
}

impl SimulatedCni {
    pub fn new(sim: Arc<HcnDatapath<HcnSim>>) -> Self {
        SimulatedCni {
            sim,
            managed: BTreeMap::new(),
            foreign: Vec::new(),
            unreadable: Vec::new(),
            next_id: 0,
            listed: false,
        }
    }

    /// Takes over what a listing shows. An endpoint of its own that could not be read is kept
    /// as it was known (so that no second one is created for its pod) but not passed on.
    fn adopt(&mut self, listing: EndpointListing) {
        let unreadable: BTreeSet<&str> = listing
            .unreadable
            .iter()
            .map(|(id, _)| id.as_str())
            .collect();
        self.managed
            .retain(|_, endpoint| unreadable.contains(endpoint.id.as_str()));
        self.foreign.clear();
        for endpoint in listing.endpoints {
            match endpoint.id.strip_prefix(SIM_ENDPOINT_PREFIX) {
                Some(number) => {
                    if let Ok(n) = number.parse::<u64>() {
                        self.next_id = self.next_id.max(n + 1);
                    }
                    self.managed.insert(endpoint.name.clone(), endpoint);
                }
                None => self.foreign.push(endpoint),
            }
        }
    }

    /// Creates and deletes endpoints so that each local pod has exactly one, with its addresses.
    fn mirror(&mut self, pods: &LocalPods) {
        let sim = self.sim.calls();
        let gone: Vec<String> = self
            .managed
            .iter()
            .filter(|(pod, endpoint)| pods.get(*pod) != Some(&endpoint.addresses))
            .map(|(pod, _)| pod.clone())
            .collect();
        for pod in gone {
            if let Some(endpoint) = self.managed.remove(&pod) {
                sim.remove_endpoint(&endpoint.id);
            }
        }
        for (pod, addresses) in pods {
            if self.managed.contains_key(pod) || addresses.is_empty() {
                continue;
            }
            let endpoint = EndpointInfo {
                id: format!("{SIM_ENDPOINT_PREFIX}{:06}", self.next_id),
                name: pod.clone(),
                addresses: addresses.clone(),
            };
            self.next_id += 1;
            sim.add_endpoint(endpoint.clone(), Vec::new());
            self.managed.insert(pod.clone(), endpoint);
        }
    }
}

impl EndpointDiscovery for SimulatedCni {
    fn endpoints(
        &mut self,
        datapath: &dyn HcnApi,
        pods: &LocalPods,
        refresh: bool,
        _now: Instant,
    ) -> Result<EndpointListing, DatapathError> {
        if refresh || !self.listed {
            let listing = datapath.list_endpoints()?;
            self.unreadable = listing.unreadable.clone();
            self.adopt(listing);
            self.listed = true;
        }
        self.mirror(pods);
        let unreadable = self.unreadable.clone();
        let skipped: BTreeSet<&str> = unreadable.iter().map(|(id, _)| id.as_str()).collect();
        let mut endpoints: Vec<EndpointInfo> = self
            .managed
            .values()
            .filter(|e| !skipped.contains(e.id.as_str()))
            .cloned()
            .collect();
        endpoints.extend(self.foreign.iter().cloned());
        Ok(EndpointListing {
            endpoints,
            unreadable,
        })
    }

    fn next_look(&self) -> Option<Instant> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(id: &str, addresses: &[&str]) -> EndpointInfo {
        EndpointInfo {
            id: id.into(),
            name: id.into(),
            addresses: addresses.iter().map(|a| a.parse().unwrap()).collect(),
        }
    }

    fn pods(list: &[(&str, &[&str])]) -> LocalPods {
        list.iter()
            .map(|(k, a)| {
                (
                    k.to_string(),
                    a.iter().map(|a| a.parse().unwrap()).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn endpoints_match_pods_by_any_address() {
        let endpoints = [
            endpoint("e1", &["10.0.0.1"]),
            endpoint("e2", &["fd00::2", "10.0.0.2"]),
            endpoint("e3", &["10.0.0.3"]),
        ];
        let pods = pods(&[
            ("x/a", &["10.0.0.1"]),
            ("x/b", &["10.0.0.2"]),
            ("x/c", &["10.0.0.9"]),
        ]);
        let matched = match_pods(&endpoints, &pods);
        assert_eq!(matched["e1"].as_deref(), Some("x/a"));
        assert_eq!(matched["e2"].as_deref(), Some("x/b"));
        assert_eq!(matched["e3"], None);
        assert_eq!(unmatched(&endpoints, &pods), ["x/c"]);
    }

    #[test]
    fn simulated_cni_follows_pods_and_leaves_foreign_endpoints_alone() {
        let datapath = Arc::new(HcnDatapath::new(HcnSim::new()));
        datapath
            .calls()
            .add_endpoint(endpoint("host-vnic", &["10.0.0.100"]), Vec::new());
        let mut cni = SimulatedCni::new(datapath.clone());
        let now = Instant::now();
        let first = pods(&[("x/a", &["10.0.0.1"]), ("x/b", &["10.0.0.2"])]);
        let listed = cni
            .endpoints(datapath.as_ref(), &first, false, now)
            .unwrap()
            .endpoints;
        assert_eq!(listed.len(), 3);

        // x/a is gone and x/b changed address: one endpoint deleted, one replaced.
        let second = pods(&[("x/b", &["10.0.0.3"])]);
        let listed = cni
            .endpoints(datapath.as_ref(), &second, false, now)
            .unwrap()
            .endpoints;
        let ids: Vec<&str> = listed.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["sim-ep-000002", "host-vnic"]);
        assert!(datapath.calls().endpoint("sim-ep-000000").is_none());
        assert!(datapath.calls().endpoint("host-vnic").is_some());

        // A new CNI over the same simulator (an agent restart) adopts what exists.
        let mut restarted = SimulatedCni::new(datapath.clone());
        let listed = restarted
            .endpoints(datapath.as_ref(), &second, false, now)
            .unwrap()
            .endpoints;
        let ids: Vec<&str> = listed.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["sim-ep-000002", "host-vnic"]);
        let third = pods(&[("x/b", &["10.0.0.3"]), ("x/d", &["10.0.0.4"])]);
        let listed = restarted
            .endpoints(datapath.as_ref(), &third, false, now)
            .unwrap()
            .endpoints;
        assert!(
            listed.iter().any(|e| e.id == "sim-ep-000003"),
            "ids are never reused"
        );
    }
}
