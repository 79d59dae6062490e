//! What an input held, counted, and what it lacks, said: no pods, no policies, a policy that
//! selects no pod, objects of kinds netpol does not read. Silence there reads as "safe" (an
//! empty diff, an empty matrix), so each becomes a warning, and the commands refuse an input
//! with nothing to decide.

use std::collections::{BTreeMap, HashSet};
use std::ops::Range;

use netpol_api::ObjectRef;
use netpol_engine::resolve::SubjectIndex;
use netpol_engine::{PodInfo, PodSelector};

use super::cluster_model::ClusterModel;
use super::prepared::Origin;

/// What an input held.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inventory {
    /// Pods with an address: running ones, and those derived from workloads.
    pub pods: usize,
    /// Of `pods`, those derived from workloads' templates (addresses assigned).
    pub derived_pods: usize,
    /// Workloads whose pods the input already holds (so none was derived).
    pub running_workloads: usize,
    pub nodes: usize,
    /// Policy objects read, skipped ones included.
    pub policies: usize,
    /// Policies skipped for a feature netpol does not implement (L7, FQDN).
    pub skipped_policies: usize,
    /// Objects of kinds netpol does not read, by kind.
    pub skipped_kinds: BTreeMap<String, usize>,
}

impl Inventory {
    pub(super) fn count(&mut self, cluster: &ClusterModel) {
        self.pods = cluster.addressed_pods().count();
        self.nodes = cluster.nodes().count();
    }

    /// The warnings about what the input lacks or holds in vain.
    pub(super) fn warnings(
        &self,
        cluster: &ClusterModel,
        policies: &[(Origin, ObjectRef, Range<usize>)],
        input: &str,
    ) -> Vec<String> {
        let mut warnings = Vec::new();
        if let Some(skipped) = netpol_api::object::skipped_kinds_summary(&self.skipped_kinds) {
            warnings.push(format!("{skipped} (--strict-kinds refuses them)"));
        }
        if self.pods == 0 {
            warnings.push(format!(
                "no pods in {input}: no flow can be decided; add the cluster's pods (kubectl get \
                 pods,namespaces,nodes -A -o yaml) or the workloads that run them"
            ));
        } else {
            let selecting = selecting_policies(cluster, policies);
            for ((source, object, entries), selects) in policies.iter().zip(selecting) {
                if !entries.is_empty() && !selects {
                    warnings.push(format!(
                        "{}: {}: {object} selects no pod of {input}",
                        source.file.display(),
                        source.describe()
                    ));
                }
            }
        }
        if self.policies == 0 {
            warnings.push(format!("no policies in {input}: every flow is allowed"));
        }
        warnings
    }

    /// One line: what was read, e.g. `12 pods (4 from workloads, addresses assigned), 3 nodes,
    /// 17 policies`.
    pub fn summary(&self) -> String {
        let derived = if self.derived_pods > 0 {
            format!(
                " ({} from workloads, addresses assigned)",
                self.derived_pods
            )
        } else {
            String::new()
        };
        let skipped = if self.skipped_policies > 0 {
            format!(" ({} skipped)", self.skipped_policies)
        } else {
            String::new()
        };
        format!(
            "{} pods{derived}, {} nodes, {} policies{skipped}",
            self.pods, self.nodes, self.policies
        )
    }
}

/// The pods of the cluster, once per namespace and label set (what a subject reads).
fn distinct_pods(cluster: &ClusterModel) -> Vec<&PodInfo> {
    let mut seen = HashSet::new();
    cluster
        .pods()
        .flat_map(|(_, identities)| identities.into_iter().filter_map(|i| i.as_pod()))
        .filter(|pod| seen.insert((&pod.namespace_labels, &pod.labels)))
        .collect()
}

/// Per policy, whether some entry's subject selects a pod. Pods are asked for the entries that
/// may select them (most subjects name their namespace), not every policy for every pod: at
/// 40,000 pods that was a fifth of loading.
fn selecting_policies(
    cluster: &ClusterModel,
    policies: &[(Origin, ObjectRef, Range<usize>)],
) -> Vec<bool> {
    let subjects: Vec<(usize, &PodSelector)> = policies
        .iter()
        .enumerate()
        .flat_map(|(p, (_, _, entries))| {
            cluster.entries()[entries.clone()]
                .iter()
                .map(move |e| (p, &e.subject))
        })
        .collect();
    let index = SubjectIndex::of_subjects(subjects.iter().map(|(_, s)| *s));
    let mut selects = vec![false; policies.len()];
    for pod in distinct_pods(cluster) {
        for candidate in index.candidates(pod) {
            let (policy, subject) = subjects[candidate];
            if !selects[policy] && subject.matches(pod) {
                selects[policy] = true;
            }
        }
    }
    selects
}
