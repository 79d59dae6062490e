//! Rows of one workload collapsed into one: a matrix of 300 replicas is read by workload, not by
//! pod. Pods of one namespace with equal labels (less the labels every replica has its own value
//! of) are candidates; they collapse only when every matrix decides each of them alike, so a
//! collapsed row never hides a difference (an `ipBlock` naming one replica's address, a node
//! rule holding for some replicas only).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use netpol_engine::flow::FlowDecisionRef;

use super::class_matrix::{Matrix, Party, UNDEFINED};
use crate::loader::{ClusterModel, PodRef};

/// Labels that differ between the replicas of one workload by construction.
const PER_POD_LABELS: [&str; 5] = [
    "statefulset.kubernetes.io/pod-name",
    "apps.kubernetes.io/pod-index",
    "controller-revision-hash",
    "pod-template-hash",
    "batch.kubernetes.io/job-completion-index",
];

/// What pods must share to be one row: their namespace and labels (less per-replica ones), and
/// whether they are stand-ins (which never join a pod of the input).
type GroupKey = (String, Vec<(String, String)>, bool);

/// One row (and column) of a grouped matrix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// `shop/web (3 pods)`, `x/a`, `node node-1`, `0.0.0.0/0 except 10.0.0.0/8`.
    pub label: String,
    /// Positions of its parties in the ungrouped matrices.
    pub members: Vec<usize>,
    /// Its pods were derived from a workload template (addresses assigned).
    pub derived: bool,
    /// It is a stand-in for pods the input does not hold (`loader::add_stand_ins`).
    pub stand_in: bool,
}

/// Groups `parties` (pods first, as the matrices have them), given the matrices between them:
/// a workload whose pods do not all decide alike splits into parts that do (pods of one class
/// with the same flows to and from every node and outside region). With no matrices, every
/// workload is one group.
pub fn group(cluster: &ClusterModel, parties: &[Party], matrices: &[Matrix]) -> Vec<Group> {
    let mut candidates: BTreeMap<GroupKey, Vec<usize>> = BTreeMap::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, party) in parties.iter().enumerate() {
        match party {
            Party::Pod(pod) => candidates.entry(key(cluster, pod)).or_default().push(i),
            _ => groups.push(vec![i]),
        }
    }
    for members in candidates.into_values() {
        if members.len() == 1 || matrices.iter().all(|m| uniform(m, &members)) {
            groups.push(members);
            continue;
        }
        // Parts that decide alike by construction.
        let mut parts: BTreeMap<(u32, Vec<u32>), Vec<usize>> = BTreeMap::new();
        for &m in &members {
            let others: Vec<u32> = matrices
                .iter()
                .flat_map(|matrix| {
                    (matrix.pods..matrix.party_count)
                        .flat_map(move |o| [matrix.code(m, o), matrix.code(o, m)])
                })
                .collect();
            parts
                .entry((matrices[0].classes().of[m], others))
                .or_default()
                .push(m);
        }
        groups.extend(parts.into_values());
    }
    groups.sort();
    let mut groups: Vec<Group> = groups
        .into_iter()
        .map(|members| {
            let pods: Vec<&PodRef> = members
                .iter()
                .filter_map(|&i| match &parties[i] {
                    Party::Pod(pod) => Some(pod),
                    _ => None,
                })
                .collect();
            let derived = !pods.is_empty()
                && pods
                    .iter()
                    .all(|p| cluster.facts(p).is_some_and(|f| f.derived));
            let stand_in = pods
                .iter()
                .any(|p| cluster.facts(p).is_some_and(|f| f.stand_in));
            let label = if pods.is_empty() {
                parties[members[0]].to_string()
            } else {
                label(cluster, &pods)
            };
            Group {
                label,
                members,
                derived,
                stand_in,
            }
        })
        .collect();
    // Parts of one workload share its name: number them so that every label names one group.
    let mut seen: HashMap<String, usize> = HashMap::new();
    for g in &groups {
        *seen.entry(g.label.clone()).or_default() += 1;
    }
    let mut numbered: HashMap<String, usize> = HashMap::new();
    for g in &mut groups {
        if seen[&g.label] > 1 {
            let n = numbered.entry(g.label.clone()).or_default();
            *n += 1;
            g.label = format!("{} part {n}", g.label);
        }
    }
    groups
}

/// The cells between groups of one grouping: a group's cell is the one decision its members'
/// defined cells share (groups are made so that they share one), `None` where none is defined.
/// Decided per class: a group's pods come in a few classes, so a cell costs the classes of its
/// two groups, never their pods.
pub struct Grouped<'g> {
    pub groups: &'g [Group],
    /// Each group's pod classes.
    class_sets: Vec<Vec<usize>>,
}

impl<'g> Grouped<'g> {
    pub fn new(groups: &'g [Group], matrix: &Matrix) -> Self {
        let classes = matrix.classes();
        let class_sets = groups
            .iter()
            .map(|g| {
                let set: BTreeSet<usize> = g
                    .members
                    .iter()
                    .filter(|&&m| m < matrix.pods)
                    .map(|&m| classes.of[m] as usize)
                    .collect();
                set.into_iter().collect()
            })
            .collect();
        Grouped { groups, class_sets }
    }

    /// The decision between the pods (or party) of group `a` and those of group `b`.
    pub fn cell<'m>(&self, matrix: &'m Matrix, a: usize, b: usize) -> Option<FlowDecisionRef<'m>> {
        matrix.decisions.get(self.code(matrix, a, b))
    }

    /// The decision code (a position in `matrix.decisions`, or [`UNDEFINED`]) between the
    /// pods (or party) of group `a` and those of group `b`.
    pub fn code(&self, matrix: &Matrix, a: usize, b: usize) -> u32 {
        let (from, to) = (&self.groups[a], &self.groups[b]);
        if a == b && from.stand_in {
            // A stand-in is many pods in one: its own address says nothing of their flows
            // between each other, which it does not decide.
            return UNDEFINED;
        }
        if a == b && from.members.len() == 1 {
            // One party to itself: a pod reaching its own address, or no flow.
            let only = from.members[0];
            return matrix.code(only, only);
        }
        let code = match (self.class_sets[a].is_empty(), self.class_sets[b].is_empty()) {
            (false, false) => self.class_sets[a]
                .iter()
                .flat_map(|&c| {
                    self.class_sets[b]
                        .iter()
                        .map(move |&d| matrix.class_code(c, d))
                })
                .find(|&c| c != UNDEFINED),
            _ => from
                .members
                .iter()
                .flat_map(|&i| to.members.iter().map(move |&j| matrix.code(i, j)))
                .find(|&c| c != UNDEFINED),
        };
        code.unwrap_or(UNDEFINED)
    }

    /// One row of symbols.
    pub fn symbol_row(&self, matrix: &Matrix, a: usize) -> Vec<char> {
        (0..self.groups.len())
            .map(|b| Matrix::symbol(self.cell(matrix, a, b)))
            .collect()
    }
}

/// The grouped symbols of one matrix.
pub fn collapse(groups: &[Group], matrix: &Matrix) -> Vec<Vec<char>> {
    let grouped = Grouped::new(groups, matrix);
    (0..groups.len())
        .map(|a| grouped.symbol_row(matrix, a))
        .collect()
}

/// The candidate key of a pod: its namespace and labels, less the per-replica ones.
fn key(cluster: &ClusterModel, pod: &PodRef) -> GroupKey {
    let labels = cluster
        .pod_info(pod)
        .map(|info| {
            let labels = &info.labels;
            labels
                .iter()
                .filter(|(k, _)| !PER_POD_LABELS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    let stand_in = cluster.facts(pod).is_some_and(|f| f.stand_in);
    (pod.namespace.clone(), labels, stand_in)
}

/// Whether every member (pods) is decided alike (the same verdict by the same rules) towards
/// every other party, and within the group (an undefined cell agrees with anything). Pods are
/// compared by class: each class of the members against every class, and each member against
/// the nodes and outside regions.
fn uniform(matrix: &Matrix, members: &[usize]) -> bool {
    let agree = |cells: &mut dyn Iterator<Item = u32>| {
        let mut defined = cells.filter(|&c| c != UNDEFINED);
        match defined.next() {
            Some(first) => defined.all(|c| c == first),
            None => true,
        }
    };
    let classes = matrix.classes();
    let own: BTreeSet<usize> = members.iter().map(|&m| classes.of[m] as usize).collect();
    let pods_agree = (0..classes.len()).all(|other| {
        agree(&mut own.iter().map(|&c| matrix.class_code(c, other)))
            && agree(&mut own.iter().map(|&c| matrix.class_code(other, c)))
    });
    let others_agree = (matrix.pods..matrix.party_count).all(|o| {
        agree(&mut members.iter().map(|&m| matrix.code(m, o)))
            && agree(&mut members.iter().map(|&m| matrix.code(o, m)))
    });
    pods_agree
        && others_agree
        && agree(
            &mut own
                .iter()
                .flat_map(|&c| own.iter().map(move |&d| matrix.class_code(c, d))),
        )
}

/// `shop/web (3 pods)`: the workload the pods share, else the name they start with, else the
/// first pod's name and how many more.
fn label(cluster: &ClusterModel, pods: &[&PodRef]) -> String {
    let first = pods[0];
    if pods.len() == 1 {
        return first.to_string();
    }
    let owners: Vec<Option<&str>> = pods
        .iter()
        .map(|p| {
            cluster
                .facts(p)
                .and_then(|f| f.owner.as_ref())
                .map(|o| o.name.as_str())
        })
        .collect();
    let name = match owners[0] {
        Some(owner) if owners.iter().all(|o| *o == Some(owner)) => owner.to_owned(),
        _ => {
            let prefix = pods.iter().skip(1).fold(first.name.as_str(), |prefix, p| {
                let shared = prefix
                    .chars()
                    .zip(p.name.chars())
                    .take_while(|(a, b)| a == b)
                    .count();
                &prefix[..shared]
            });
            let prefix = prefix.trim_end_matches(['-', '.']);
            if prefix.is_empty() {
                format!("{} and others", first.name)
            } else {
                format!("{prefix}-*")
            }
        }
    };
    format!("{}/{name} ({} pods)", first.namespace, pods.len())
}
