//! `netpol crds [--include-upstream]`: the CustomResourceDefinitions of the policy kinds netpol
//! enforces, generated from the same types the agent deserializes, for clusters (and test
//! clusters) that lack them.
//!
//! By default only the kinds netpol is the enforcer for: the `policy.networking.k8s.io` kinds
//! (AdminNetworkPolicy, BaselineAdminNetworkPolicy, ClusterNetworkPolicy), which a cluster has
//! only once someone installs them. Cilium's kinds belong to Cilium: on a cluster running Cilium
//! its own CRDs (with their full schema and the versions Cilium serves) are installed, and
//! replacing them with netpol's narrower ones would break Cilium. They are printed only with
//! `--include-upstream`, with a warning.
//!
//! netpol's own kind is printed too: NetpolEndpointSlice (netpol.io/v1alpha1), the compact
//! record of the cluster's pods that `netpol controller` publishes for agents in slice mode.
//!
//! ClusterNetworkPolicy's CRD is the one network-policy-api v0.2.0 released, printed unchanged
//! (vendored in netpol-api), in the channel `--crd-channel` names: the standard CRD lacks the
//! experimental `nodes` and `domainNames` peers, the experimental one has them and one more CEL
//! rule. Tests in netpol-api hold netpol's own types to exactly the fields of that CRD.
//!
//! Print-only: netpol never writes a CRD to a cluster. The stream is meant for
//! `kubectl create -f -`, which refuses a CRD that already exists instead of replacing it
//! (`kubectl apply` would replace it); the header of the output says so.

use std::io::{self, Write};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use netpol_api::crd::{
    release, AdminNetworkPolicy, BaselineAdminNetworkPolicy, CiliumClusterwideNetworkPolicy,
    CiliumNetworkPolicy, NetpolEndpointSlice,
};
use netpol_api::CrdChannel;

use crate::outcome::Outcome;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Also print Cilium's CRDs (CiliumNetworkPolicy, CiliumClusterwideNetworkPolicy), for a
    /// test cluster without Cilium. Never install them where Cilium runs: its own CRDs are the
    /// ones it needs.
    #[arg(long)]
    pub include_upstream: bool,
    /// Which channel of the released ClusterNetworkPolicy CRD (network-policy-api v0.2.0) to
    /// print: `standard` or `experimental` (the default; it adds the `nodes` and `domainNames`
    /// egress peers, of which netpol enforces `nodes` and refuses `domainNames`).
    #[arg(long, value_name = "CHANNEL", default_value_t = CrdChannel::default())]
    pub crd_channel: CrdChannel,
}

/// The CRDs of the v1alpha1 kinds netpol enforces and a cluster may lack, and of netpol's own
/// NetpolEndpointSlice, generated from netpol's types (ClusterNetworkPolicy's is the released
/// one, see [`run`]).
pub fn netpol_crds() -> Vec<CustomResourceDefinition> {
    vec![
        AdminNetworkPolicy::crd(),
        BaselineAdminNetworkPolicy::crd(),
        NetpolEndpointSlice::crd(),
    ]
}

/// The CRDs another project (Cilium) owns, whose kinds netpol reads.
pub fn upstream_crds() -> Vec<CustomResourceDefinition> {
    vec![
        CiliumNetworkPolicy::crd(),
        CiliumClusterwideNetworkPolicy::crd(),
    ]
}

const HEADER: &str = "# CustomResourceDefinitions of the policy kinds netpol enforces (and of netpol's NetpolEndpointSlice), printed by `netpol crds`.\n\
# Install with `kubectl create -f -`, which refuses a CRD that already exists: never `kubectl apply`,\n\
# which would replace an installed CRD (and its full upstream schema) with this one.\n";

/// Writes the CRDs as one multi-document YAML stream.
pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<Outcome> {
    let mut crds = netpol_crds();
    if args.include_upstream {
        writeln!(
            err,
            "warning: --include-upstream prints Cilium's CRDs too: install them only on a cluster without Cilium (test clusters); where Cilium runs, its own CRDs must stay"
        )?;
        crds.extend(upstream_crds());
    }
    write!(out, "{HEADER}")?;
    let mut documents = Vec::with_capacity(crds.len() + 1);
    for crd in &crds {
        documents.push(serde_saphyr::to_string(crd).map_err(io::Error::other)?);
    }
    // After AdminNetworkPolicy and BaselineAdminNetworkPolicy, before Cilium's: the released
    // text, as upstream ships it.
    documents.insert(
        2,
        release::cluster_network_policy_crd(args.crd_channel).to_owned(),
    );
    for yaml in documents {
        writeln!(out, "---")?;
        write!(out, "{yaml}")?;
    }
    Ok(Outcome::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn printed(args: &Args) -> String {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        assert_eq!(run(args, &mut out, &mut err).unwrap(), Outcome::Success);
        String::from_utf8(out).unwrap()
    }

    /// The documents of the stream, parsed.
    fn documents(text: &str) -> Vec<serde_json::Value> {
        text.split("\n---\n")
            .skip(1)
            .map(|doc| serde_saphyr::from_str(doc).unwrap())
            .collect()
    }

    #[test]
    fn cluster_network_policy_is_the_released_crd_of_the_channel() {
        for channel in CrdChannel::ALL {
            let args = Args {
                include_upstream: true,
                crd_channel: channel,
            };
            let text = printed(&args);
            let docs = documents(&text);
            let names: Vec<&str> = docs
                .iter()
                .map(|d| d["metadata"]["name"].as_str().unwrap())
                .collect();
            assert_eq!(
                names,
                [
                    "adminnetworkpolicies.policy.networking.k8s.io",
                    "baselineadminnetworkpolicies.policy.networking.k8s.io",
                    "clusternetworkpolicies.policy.networking.k8s.io",
                    "netpolendpointslices.netpol.io",
                    "ciliumnetworkpolicies.cilium.io",
                    "ciliumclusterwidenetworkpolicies.cilium.io",
                ]
            );
            // Structurally identical to the vendored upstream file, and byte for byte in the
            // stream.
            let upstream: serde_json::Value =
                serde_saphyr::from_str(release::cluster_network_policy_crd(channel)).unwrap();
            assert_eq!(docs[2], upstream, "{channel}");
            assert!(text.contains(release::cluster_network_policy_crd(channel)));
            let peer = &docs[2]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
                ["spec"]["properties"]["egress"]["items"]["properties"]["to"]["items"]
                ["properties"];
            assert_eq!(
                peer.get("nodes").is_some(),
                channel == CrdChannel::Experimental
            );
        }
    }
}
