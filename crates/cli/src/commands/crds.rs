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
//! Print-only: netpol never writes a CRD to a cluster. The stream is meant for
//! `kubectl create -f -`, which refuses a CRD that already exists instead of replacing it
//! (`kubectl apply` would replace it); the header of the output says so.

use std::io::{self, Write};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use netpol_api::crd::{
    AdminNetworkPolicy, BaselineAdminNetworkPolicy, CiliumClusterwideNetworkPolicy,
    CiliumNetworkPolicy, ClusterNetworkPolicy,
};

use crate::outcome::Outcome;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Also print Cilium's CRDs (CiliumNetworkPolicy, CiliumClusterwideNetworkPolicy), for a
    /// test cluster without Cilium. Never install them where Cilium runs: its own CRDs are the
    /// ones it needs.
    #[arg(long)]
    pub include_upstream: bool,
}

/// The CRDs of the kinds netpol enforces and a cluster may lack.
pub fn netpol_crds() -> Vec<CustomResourceDefinition> {
    vec![
        AdminNetworkPolicy::crd(),
        BaselineAdminNetworkPolicy::crd(),
        ClusterNetworkPolicy::crd(),
    ]
}

/// The CRDs another project (Cilium) owns, whose kinds netpol reads.
pub fn upstream_crds() -> Vec<CustomResourceDefinition> {
    vec![
        CiliumNetworkPolicy::crd(),
        CiliumClusterwideNetworkPolicy::crd(),
    ]
}

const HEADER: &str = "# CustomResourceDefinitions of the policy kinds netpol enforces, printed by `netpol crds`.\n\
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
    for crd in &crds {
        let yaml = serde_saphyr::to_string(crd).map_err(io::Error::other)?;
        writeln!(out, "---")?;
        write!(out, "{yaml}")?;
    }
    Ok(Outcome::Success)
}
