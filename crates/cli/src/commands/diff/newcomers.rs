//! Pods only one side of a diff has (a workload added or removed): each is lent to the other
//! side, as if it ran there too, so that its flows in and out are decided by both sides'
//! policies and compared like any other pod's. A pod only AFTER has is then decided by BEFORE's
//! policies, which is what "what does this change let the new workload do?" asks; its arrival
//! itself is a change, which the report lists and the exit status counts.

use crate::loader::ClusterModel;

/// The pods `from` has and `to` lacks, by name: `lent` were added to `to` (with their
/// identities and what is known of them); `kept_out` were not, because an address of theirs is
/// another pod's or node's in `to` (workload addresses are assigned per side), so deciding
/// them there would confuse two parties.
#[derive(Debug, Default)]
pub struct Lent {
    pub lent: Vec<String>,
    pub kept_out: Vec<String>,
}

/// Lends `to` every addressed pod of `from` it does not have. Sides that share their pods have
/// none to lend and are left shared.
pub fn lend_missing_pods(to: &mut ClusterModel, from: &ClusterModel) -> Lent {
    let mut result = Lent::default();
    if to.shares_pods_with(from) {
        return result;
    }
    // Pods with an address only: one without takes part in no flow.
    let missing: Vec<_> = from
        .pods()
        .filter(|(pod, ids)| !ids.is_empty() && !to.has_pod(pod))
        .map(|(pod, ids)| (pod.clone(), ids.into_iter().cloned().collect::<Vec<_>>()))
        .collect();
    if missing.is_empty() {
        return result;
    }
    let mut taken = to.cluster_addresses();
    for (pod, identities) in missing {
        let addresses: Vec<_> = identities.iter().map(|i| i.prefix.addr()).collect();
        if addresses.iter().any(|a| taken.contains(a)) {
            result.kept_out.push(pod.to_string());
            continue;
        }
        taken.extend(addresses);
        if let Some(facts) = from.facts(&pod) {
            to.set_facts(pod.clone(), facts.clone());
        }
        result.lent.push(pod.to_string());
        to.add_pod(pod, identities);
    }
    result
}
