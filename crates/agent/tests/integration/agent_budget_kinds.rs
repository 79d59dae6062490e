//! Budgets hold for every kind that can hold addresses (issue 33): NetworkPolicy `ipBlock`,
//! AdminNetworkPolicy and BaselineAdminNetworkPolicy `networks`, ClusterNetworkPolicy
//! `networks`, Cilium `toCIDR` and `toCIDRSet`, CiliumClusterwideNetworkPolicy `toCIDR`. Each
//! case selects local pods (namespace `ns-1` of a synthetic cluster, all on `node-1`): an object
//! over its budget is refused alone, naming itself and the budget; the pods it selects fail
//! closed where it isolates them (they lose what it allowed); a policy of another namespace
//! within its budget is enforced meanwhile.

use crate::agent_support;

use agent_support::*;
use netpol_agent::indexes::PolicyBudgets;
use netpol_dev::cidr::{self, Kind, Selects, Way};
use netpol_engine::{Direction, Protocol};
use netpol_hcn::oracle::packet;
use netpol_hcn::schema::AclAction;
use serde_json::Value;

const BUDGET: usize = 1_000;

/// An address no policy here names.
const OUTSIDE: &str = "64.0.200.1";

fn budgets() -> PolicyBudgets {
    PolicyBudgets {
        prefixes_per_object: BUDGET,
        ..PolicyBudgets::default()
    }
}

/// The policies of `kind`, `prefixes` /32s each (policy `k` from 64.0.0.0 + k * prefixes),
/// selecting the pods of `ns-1`.
fn policies(kind: Kind, count: usize, prefixes: u32) -> Vec<Value> {
    let args = cidr::Args {
        kind,
        count,
        prefixes,
        selects: Selects::Local,
        direction: Way::Egress,
        namespace: "ns-1".into(),
        out: Default::default(),
    };
    cidr::policies(&args).unwrap().collect()
}

fn list(objects: &[Value]) -> String {
    serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string()
}

/// Whether the first local pod of `namespace` may open TCP/443 to `address`.
fn egress_allowed(
    agent: &Agent,
    sim: &netpol_hcn::HcnDatapath<netpol_hcn::sim::HcnSim>,
    namespace: &str,
    address: &str,
) -> bool {
    let (endpoint, _) = agent
        .pipeline
        .endpoints()
        .iter()
        .find(|(_, pod)| {
            pod.as_deref()
                .is_some_and(|p| p.starts_with(&format!("{namespace}/")))
        })
        .unwrap_or_else(|| panic!("a local pod in {namespace}"));
    let packet = packet(Direction::Egress, ip(address), Protocol::Tcp, 443);
    sim.calls().evaluate(&endpoint.id, &packet).unwrap().action == AclAction::Allow
}

#[test]
fn an_object_over_budget_is_refused_alone_for_every_kind_that_holds_addresses() {
    for kind in [
        Kind::NetworkPolicy,
        Kind::Admin,
        Kind::Baseline,
        Kind::ClusterNetworkPolicy,
        Kind::Cilium,
        Kind::CiliumCidrSet,
        Kind::CiliumClusterwide,
    ] {
        let dir = scratch_dir(&format!("budget-kinds-{kind:?}"));
        synth_cluster(&dir, 200);
        let sim = new_sim();
        let mut agent = Agent::start(&dir, &sim);
        agent.pipeline.set_policy_budgets(budgets());
        assert!(agent.sync().complete());
        // Nothing isolates ns-1's or ns-5's egress in the synthetic cluster.
        for (namespace, address) in [
            ("ns-1", "64.0.0.7"),
            ("ns-1", OUTSIDE),
            ("ns-5", "64.0.4.7"),
        ] {
            assert!(egress_allowed(&agent, &sim, namespace, address), "{kind:?}");
        }

        // One object of the kind over the budget, selecting ns-1's pods; a NetworkPolicy of
        // ns-5 within it, allowing egress to 1,000 other addresses (64.0.3.233 and on).
        let big = policies(kind, 1, BUDGET as u32 + 1);
        let mut small = policies(Kind::NetworkPolicy, 2, BUDGET as u32).remove(1);
        small["metadata"]["namespace"] = "ns-5".into();
        // First in path order, so that a BaselineAdminNetworkPolicy `default` is this one.
        agent.write("0-big.json", &list(&big));
        agent.write("small.json", &list(&[small]));
        agent.sync();
        let refused: Vec<String> = agent
            .pipeline
            .indexes()
            .refused_policies()
            .map(|error| error.to_string())
            .collect();
        assert_eq!(refused.len(), 1, "{kind:?}: {refused:?}");
        let name = big[0]["metadata"]["name"].as_str().unwrap();
        assert!(refused[0].contains(name), "{kind:?}: {refused:?}");
        assert!(
            refused[0].contains("1001 CIDR prefixes")
                && refused[0].contains("--max-policy-prefixes"),
            "{kind:?}: {refused:?}"
        );
        // The other namespace's policy is enforced: its egress isolation and its allows.
        assert!(egress_allowed(&agent, &sim, "ns-5", "64.0.4.7"), "{kind:?}");
        assert!(
            !egress_allowed(&agent, &sim, "ns-5", "64.0.0.7"),
            "{kind:?}"
        );
        // What the refused object allowed is not allowed by it. Where it isolates (the
        // NetworkPolicy and Cilium kinds), its pods fail closed: egress is denied. The admin
        // kinds isolate nothing, so their pods fall through to the tiers below, which allow.
        let isolates = matches!(
            kind,
            Kind::NetworkPolicy | Kind::Cilium | Kind::CiliumCidrSet | Kind::CiliumClusterwide
        );
        assert_eq!(
            egress_allowed(&agent, &sim, "ns-1", "64.0.0.7"),
            !isolates,
            "{kind:?}"
        );
        assert_eq!(
            egress_allowed(&agent, &sim, "ns-1", OUTSIDE),
            !isolates,
            "{kind:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
