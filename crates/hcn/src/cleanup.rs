//! `netpol cleanup --datapath hcn`: takes off a host everything netpol programmed there, and
//! nothing else. What is netpol's is decided exactly as the programmer decides it, by `Id`
//! prefix: ACLs whose `Id` starts with [`crate::schema::NETPOL_ID_PREFIX`] on every endpoint, then the network
//! IP sets whose `Id` starts with [`crate::schema::NETPOL_SET_PREFIX`]. Every other policy (the CNI plugin's
//! `OutBoundNAT` and ACLs, kube-proxy's, another enforcer's ACLs and sets) stays as it is.
//!
//! Each endpoint's netpol ACLs go as the agent takes stale rules away ([`crate::writes`]): by
//! default one `Update` of the endpoint's list as read, less netpol's ACLs (every other owner's
//! policy byte for byte and in its place), then read again to confirm; `Remove` requests only
//! where [`WriteOptions::removal`] says so (a build where `Remove` is verified). The sets go
//! last, and only when every endpoint lost its netpol ACLs: a set an endpoint still names is in
//! use (the simulator refuses its removal; what a real HNS does is not documented), so a failed
//! endpoint keeps the sets and the run reports it.
//!
//! Run it only once the agent is gone from the node: an agent still running would program its
//! rules again at its next change or resync.

use netpol_datapath::DatapathError;

use crate::api::HcnApi;
use crate::conventions::WriteOptions;
use crate::schema::RequestType;
use crate::writes::EndpointWriter;

/// What one cleanup removed, left alone, and could not remove.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CleanupReport {
    /// Endpoints listed.
    pub endpoints: usize,
    /// Endpoints that held netpol ACLs and no longer do.
    pub endpoints_cleaned: usize,
    /// netpol ACLs removed, over all endpoints.
    pub acls_removed: usize,
    /// netpol IP sets removed from the network.
    pub sets_removed: usize,
    /// Other owners' policies on the endpoints, left as they were.
    pub other_policies_kept: usize,
    /// Other owners' IP sets on the network, left as they were.
    pub other_sets_kept: usize,
    /// netpol sets kept because some endpoint could not be cleaned (it may still name them).
    pub sets_kept: usize,
    /// Endpoints that could not be read, or whose netpol ACLs could not all be removed.
    pub failures: Vec<(String, String)>,
}

impl CleanupReport {
    /// Whether nothing of netpol's is left.
    pub fn complete(&self) -> bool {
        self.failures.is_empty() && self.sets_kept == 0
    }
}

/// Removes netpol's ACLs from every endpoint of `api`, then netpol's IP sets. Fails as a whole
/// only when the endpoints cannot be listed; one endpoint that fails is reported, the others
/// are cleaned.
pub fn remove_netpol_state(
    api: &dyn HcnApi,
    writes: WriteOptions,
) -> Result<CleanupReport, DatapathError> {
    let listing = api.list_endpoints()?;
    let mut report = CleanupReport {
        endpoints: listing.endpoints.len() + listing.unreadable.len(),
        ..CleanupReport::default()
    };
    for (id, error) in &listing.unreadable {
        report.failures.push((id.clone(), error.to_string()));
    }
    for endpoint in &listing.endpoints {
        match clean_endpoint(api, &endpoint.id, writes) {
            Ok(Cleaned::Nothing { kept }) => report.other_policies_kept += kept,
            Ok(Cleaned::Removed { removed, kept }) => {
                report.endpoints_cleaned += 1;
                report.acls_removed += removed;
                report.other_policies_kept += kept;
            }
            // Deleted since the listing: nothing of it is left anywhere.
            Err(DatapathError::NotFound { .. }) => {}
            Err(error) => report
                .failures
                .push((endpoint.id.clone(), error.to_string())),
        }
    }
    if !api.capabilities().ip_sets {
        return Ok(report);
    }
    let sets = api.list_sets()?;
    let (netpol, other): (Vec<_>, Vec<_>) = sets.into_iter().partition(|s| s.is_netpol_owned());
    report.other_sets_kept = other.len();
    if netpol.is_empty() {
        return Ok(report);
    }
    if !report.failures.is_empty() {
        report.sets_kept = netpol.len();
        return Ok(report);
    }
    let count = netpol.len();
    api.modify_sets(RequestType::Remove, netpol)?;
    report.sets_removed = count;
    Ok(report)
}

enum Cleaned {
    Nothing { kept: usize },
    Removed { removed: usize, kept: usize },
}

fn clean_endpoint(
    api: &dyn HcnApi,
    endpoint: &str,
    writes: WriteOptions,
) -> Result<Cleaned, DatapathError> {
    let policies = api.read_policies(endpoint)?;
    let netpol = policies.iter().filter(|p| p.netpol_id().is_some()).count();
    let kept = policies.len() - netpol;
    if netpol == 0 {
        return Ok(Cleaned::Nothing { kept });
    }
    // No rule wanted: the writer takes every netpol ACL away and reads back to confirm.
    let writer = EndpointWriter {
        datapath: api,
        endpoint,
        options: writes,
    };
    writer.sync(&[])?;
    Ok(Cleaned::Removed {
        removed: netpol,
        kept,
    })
}
