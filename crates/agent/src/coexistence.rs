//! At start, on HCN: the other owners' ACLs (Azure NPM's, Calico's, the CNI plugin's) that HCN
//! evaluates before netpol's rules on this node's endpoints, each endpoint's logged as a warning
//! and their number in `netpol_hcn_foreign_acls_evaluated_first`. Such an ACL decides the
//! packets it matches before any netpol rule sees them, and netpol never touches another
//! owner's policy, so an operator must hear of it (docs/operations.md: migration).
//!
//! An endpoint that already holds netpol's rules (a restart, an upgrade) is judged against
//! them; one that holds none yet against netpol's band, a rule matching everything at its first
//! priority in each direction, which every programmed endpoint ends up below. Reading only:
//! a failure is logged and the agent starts anyway.

use std::collections::HashMap;

use ipnet::IpNet;
use netpol_hcn::coexistence::{catch_all, evaluated_first};
use netpol_hcn::HcnApi;

use crate::metrics::{gauge_value, Metrics};

/// Reads every endpoint once, warns per endpoint, sets the gauge; returns the count.
pub fn report_at_start(api: &dyn HcnApi, metrics: &Metrics) -> usize {
    match find(api) {
        Ok(count) => {
            metrics.foreign_acls_evaluated_first.set(gauge_value(count));
            count
        }
        Err(error) => {
            tracing::warn!(%error, "could not look for other owners' ACLs evaluated before netpol's");
            0
        }
    }
}

fn find(api: &dyn HcnApi) -> Result<usize, netpol_datapath::DatapathError> {
    let listing = api.list_endpoints()?;
    let sets: HashMap<String, Vec<IpNet>> = if api.capabilities().ip_sets {
        // A set whose values do not read is left out: a rule naming it is then taken to match
        // any address, which may warn too often but never too little.
        api.list_sets()?
            .into_iter()
            .filter_map(|s| s.members().ok().map(|members| (s.id, members)))
            .collect()
    } else {
        HashMap::new()
    };
    let band = catch_all(netpol_datapath::CompileOptions::default().base_priority);
    let mut total = 0;
    for endpoint in &listing.endpoints {
        let policies = match api.read_policies(&endpoint.id) {
            Ok(policies) => policies,
            Err(netpol_datapath::DatapathError::NotFound { .. }) => continue,
            Err(e) => return Err(e),
        };
        let netpol: Vec<_> = policies
            .iter()
            .filter(|p| p.netpol_id().is_some())
            .filter_map(|p| p.as_acl()?.ok())
            .collect();
        let judged = if netpol.is_empty() { &band } else { &netpol };
        let first = evaluated_first(&policies, judged, &|id| sets.get(id).cloned());
        if first.is_empty() {
            continue;
        }
        total += first.len();
        let acls: Vec<String> = first
            .iter()
            .map(|f| {
                format!(
                    "{} (priority {}, {:?} {:?})",
                    f.acl.id, f.acl.priority, f.acl.direction, f.acl.action
                )
            })
            .collect();
        tracing::warn!(
            endpoint = %endpoint.id,
            name = %endpoint.name,
            count = first.len(),
            acls = %acls.join(", "),
            "other owners' ACLs are evaluated before netpol's rules on this endpoint and decide the traffic they match: netpol's rules never see it"
        );
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use netpol_datapath::EndpointInfo;
    use netpol_hcn::schema::{AclAction, AclDirection, AclPolicySetting, EndpointPolicy, RuleType};
    use netpol_hcn::{HcnDatapath, HcnSim};
    use prometheus_client::registry::Registry;

    fn acl(id: &str, priority: u16) -> EndpointPolicy {
        EndpointPolicy::acl(&AclPolicySetting {
            id: id.into(),
            protocols: "6".into(),
            action: AclAction::Block,
            direction: AclDirection::Out,
            local_addresses: String::new(),
            remote_addresses: "168.63.129.16".into(),
            local_ports: String::new(),
            remote_ports: "80".into(),
            rule_type: Some(RuleType::Switch),
            priority,
        })
    }

    #[test]
    fn earlier_acls_of_other_owners_are_counted_and_later_ones_are_not() {
        let dp = HcnDatapath::new(HcnSim::new());
        for (id, policies) in [
            ("ep-1", vec![acl("cni-wireserver", 200)]),
            ("ep-2", vec![acl("cni-late", 5000)]),
            ("ep-3", vec![]),
        ] {
            dp.calls().add_endpoint(
                EndpointInfo {
                    id: id.into(),
                    name: id.into(),
                    addresses: vec![],
                },
                policies,
            );
        }
        let metrics = Metrics::register(&mut Registry::default());
        assert_eq!(report_at_start(&dp, &metrics), 1);
        assert_eq!(metrics.foreign_acls_evaluated_first.get(), 1);
    }
}
