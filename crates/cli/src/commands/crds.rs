//! `netpol crds`: the CustomResourceDefinitions of the policy kinds netpol reads, generated from
//! the same types the agent deserializes, for clusters (and test clusters) that lack them.
//! Production clusters should install the upstream CRDs, which carry the full validation schema.

use std::io::{self, Write};

use kube::CustomResourceExt;
use netpol_api::crd::{
    AdminNetworkPolicy, BaselineAdminNetworkPolicy, CiliumClusterwideNetworkPolicy,
    CiliumNetworkPolicy, ClusterNetworkPolicy,
};

use crate::outcome::Outcome;

/// Writes every CRD as one multi-document YAML stream.
pub fn run(out: &mut dyn Write) -> io::Result<Outcome> {
    let crds = [
        AdminNetworkPolicy::crd(),
        BaselineAdminNetworkPolicy::crd(),
        ClusterNetworkPolicy::crd(),
        CiliumNetworkPolicy::crd(),
        CiliumClusterwideNetworkPolicy::crd(),
    ];
    for crd in &crds {
        let yaml = serde_saphyr::to_string(crd).map_err(io::Error::other)?;
        writeln!(out, "---")?;
        write!(out, "{yaml}")?;
    }
    Ok(Outcome::Success)
}
