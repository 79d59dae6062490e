//! `--hcn-network`: on a host whose endpoints are on several HNS networks, the configured one
//! (by name or id) holds netpol's endpoints and sets, and every other network's endpoints are
//! left alone; without it, every endpoint is listed and sets go on the network most are on.

use std::collections::BTreeSet;

use netpol_datapath::EndpointInfo;
use netpol_hcn::client::RawError;
use netpol_hcn::resync::ResyncSignal;
use netpol_hcn::sim::{HcnSim, SIM_NETWORK_ID};
use netpol_hcn::version::Capabilities;
use netpol_hcn::{HcnApi, HcnCalls, HcnDatapath};
use serde_json::{json, Value};

/// A second network beside the simulator's: the host's own (a `Transparent` network of the
/// node's vNIC, say).
const OTHER_ID: &str = "0ff1ce00-0000-4000-8000-000000000000";
const OTHER_NAME: &str = "ext";

/// The simulator with some endpoints on [`OTHER_ID`].
struct TwoNetworks {
    sim: HcnSim,
    on_other: BTreeSet<String>,
}

impl HcnCalls for TwoNetworks {
    fn enumerate_endpoints(&self, query: &str) -> Result<String, RawError> {
        self.sim.enumerate_endpoints(query)
    }

    fn query_endpoint(&self, endpoint: &str, query: &str) -> Result<String, RawError> {
        let text = self.sim.query_endpoint(endpoint, query)?;
        if !self.on_other.contains(endpoint) {
            return Ok(text);
        }
        let mut props: Value = serde_json::from_str(&text).unwrap();
        // HNS spells ids in upper case at times: matched without regard to case.
        props["HostComputeNetwork"] = json!(OTHER_ID.to_uppercase());
        Ok(props.to_string())
    }

    fn modify_endpoint(&self, endpoint: &str, request: &str) -> Result<(), RawError> {
        self.sim.modify_endpoint(endpoint, request)
    }

    fn query_network(&self, network: Option<&str>, query: &str) -> Result<String, RawError> {
        match network {
            Some(id) if id.eq_ignore_ascii_case(OTHER_ID) => Ok(json!({
                "ID": OTHER_ID, "Name": OTHER_NAME, "Type": "Transparent", "Policies": []
            })
            .to_string()),
            _ => self.sim.query_network(network, query),
        }
    }

    fn modify_network(&self, network: Option<&str>, request: &str) -> Result<(), RawError> {
        self.sim.modify_network(network, request)
    }

    fn needs_network_id(&self) -> bool {
        true
    }

    fn capabilities(&self) -> Capabilities {
        self.sim.capabilities()
    }

    fn resync_signal(&self) -> &ResyncSignal {
        self.sim.resync_signal()
    }
}

/// Two pods' endpoints on the simulator's network and the host's own on the other.
fn host(network: Option<&str>) -> HcnDatapath<TwoNetworks> {
    let sim = HcnSim::new();
    for (id, address) in [
        ("pod-a", "10.1.0.2"),
        ("pod-b", "10.1.0.3"),
        ("host", "10.0.0.4"),
    ] {
        sim.add_endpoint(
            EndpointInfo {
                id: id.into(),
                name: id.into(),
                addresses: vec![address.parse().unwrap()],
            },
            Vec::new(),
        );
    }
    let calls = TwoNetworks {
        sim,
        on_other: BTreeSet::from(["host".to_string()]),
    };
    HcnDatapath::new(calls).with_network(network.map(str::to_string))
}

fn listed(dp: &HcnDatapath<TwoNetworks>) -> Vec<String> {
    let listing = dp.list_endpoints().unwrap();
    assert!(listing.unreadable.is_empty());
    listing.endpoints.into_iter().map(|e| e.id).collect()
}

#[test]
fn the_configured_network_by_name_or_id_holds_netpols_endpoints_and_no_other_does() {
    for configured in [
        "netpol-sim",
        "NETPOL-SIM",
        SIM_NETWORK_ID,
        &SIM_NETWORK_ID.to_uppercase(),
    ] {
        let dp = host(Some(configured));
        assert_eq!(listed(&dp), ["pod-a", "pod-b"], "{configured}");
        assert_eq!(
            dp.network().as_deref(),
            Some(SIM_NETWORK_ID),
            "{configured}"
        );
        assert_eq!(dp.network_type().unwrap().as_deref(), Some("NAT"));
    }
    // The other network, named: only its endpoint is netpol's, and its type decides.
    let dp = host(Some(OTHER_NAME));
    assert_eq!(listed(&dp), ["host"]);
    assert_eq!(dp.network().as_deref(), Some(OTHER_ID));
    assert_eq!(dp.network_type().unwrap().as_deref(), Some("Transparent"));
}

#[test]
fn a_configured_network_no_endpoint_is_on_lists_none_and_holds_no_set() {
    let dp = host(Some("azure"));
    assert_eq!(listed(&dp), Vec::<String>::new());
    assert_eq!(dp.network(), None);
    // No network to hold sets: a set request says so rather than land elsewhere.
    assert!(dp
        .modify_sets(netpol_hcn::schema::RequestType::Add, Vec::new())
        .is_err());
}

#[test]
fn by_default_every_endpoint_is_listed_and_sets_go_where_most_are() {
    let dp = host(None);
    assert_eq!(listed(&dp), ["host", "pod-a", "pod-b"]);
    assert_eq!(dp.network().as_deref(), Some(SIM_NETWORK_ID));
}
