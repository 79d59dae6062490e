//! Rows of one workload collapsed into one: a matrix of 300 replicas is read by workload, not by
//! pod. Pods of one namespace with equal labels (less the labels every replica has its own value
//! of) are candidates; they collapse only when every matrix decides each of them alike, so a
//! collapsed row never hides a difference (an `ipBlock` naming one replica's address, a node
//! rule holding for some replicas only).

use std::collections::BTreeMap;

use super::matrix::Party;
use crate::scenario::{Cluster, PodRef};

/// Labels that differ between the replicas of one workload by construction.
const PER_POD_LABELS: [&str; 5] = [
    "statefulset.kubernetes.io/pod-name",
    "apps.kubernetes.io/pod-index",
    "controller-revision-hash",
    "pod-template-hash",
    "batch.kubernetes.io/job-completion-index",
];

/// What pods must share to be one row: their namespace and labels (less per-replica ones).
type GroupKey = (String, Vec<(String, String)>);

/// One row (and column) of a grouped matrix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// `shop/web (3 pods)`, `x/a`, `node node-1`, `0.0.0.0/0 except 10.0.0.0/8`.
    pub label: String,
    /// Positions of its parties in the ungrouped matrices.
    pub members: Vec<usize>,
    /// Its pods were derived from a workload template (addresses assigned).
    pub derived: bool,
}

/// Groups `parties`, given each matrix's symbols (`.`, `X`, `-`) between them.
pub fn group(cluster: &Cluster, parties: &[Party], matrices: &[Vec<Vec<char>>]) -> Vec<Group> {
    let mut candidates: BTreeMap<GroupKey, Vec<usize>> = BTreeMap::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, party) in parties.iter().enumerate() {
        match party {
            Party::Pod(pod) => candidates.entry(key(cluster, pod)).or_default().push(i),
            _ => groups.push(vec![i]),
        }
    }
    for members in candidates.into_values() {
        if members.len() > 1 && matrices.iter().all(|m| uniform(m, &members)) {
            groups.push(members);
        } else {
            groups.extend(members.into_iter().map(|m| vec![m]));
        }
    }
    groups.sort();
    groups
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
            let label = if pods.is_empty() {
                parties[members[0]].to_string()
            } else {
                label(cluster, &pods)
            };
            Group {
                label,
                members,
                derived,
            }
        })
        .collect()
}

/// The grouped symbols of one matrix: a group's cell is the one symbol its members' defined
/// cells share, `-` where none is defined.
pub fn collapse(groups: &[Group], symbols: &[Vec<char>]) -> Vec<Vec<char>> {
    groups
        .iter()
        .map(|from| {
            groups
                .iter()
                .map(|to| {
                    from.members
                        .iter()
                        .flat_map(|&i| to.members.iter().map(move |&j| symbols[i][j]))
                        .find(|&c| c != '-')
                        .unwrap_or('-')
                })
                .collect()
        })
        .collect()
}

/// The candidate key of a pod: its namespace and labels, less the per-replica ones.
fn key(cluster: &Cluster, pod: &PodRef) -> GroupKey {
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
    (pod.namespace.clone(), labels)
}

/// Whether every member decides alike towards every other party, and within the group (an
/// undefined cell agrees with anything).
fn uniform(symbols: &[Vec<char>], members: &[usize]) -> bool {
    let agree = |cells: &mut dyn Iterator<Item = char>| {
        let mut defined = cells.filter(|&c| c != '-');
        match defined.next() {
            Some(first) => defined.all(|c| c == first),
            None => true,
        }
    };
    let outside = (0..symbols.len()).filter(|j| !members.contains(j));
    let rows_and_columns_agree = outside.clone().all(|j| {
        agree(&mut members.iter().map(|&m| symbols[m][j]))
            && agree(&mut members.iter().map(|&m| symbols[j][m]))
    });
    rows_and_columns_agree
        && agree(
            &mut members
                .iter()
                .flat_map(|&m| members.iter().map(move |&n| symbols[m][n])),
        )
}

/// `shop/web (3 pods)`: the workload the pods share, else the name they start with, else the
/// first pod's name and how many more.
fn label(cluster: &Cluster, pods: &[&PodRef]) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_members_collapse_and_undefined_cells_agree_with_anything() {
        // Parties 0 and 1 are replicas; 2 is another pod; 3 a node that is 1's own ('-').
        let symbols = vec![
            vec!['-', '.', 'X', '.'],
            vec!['.', '-', 'X', '-'],
            vec!['.', '.', '-', '.'],
            vec!['.', '-', '.', '-'],
        ];
        assert!(uniform(&symbols, &[0, 1]));
        let groups = [
            Group {
                label: "a".into(),
                members: vec![0, 1],
                derived: false,
            },
            Group {
                label: "b".into(),
                members: vec![2],
                derived: false,
            },
            Group {
                label: "n".into(),
                members: vec![3],
                derived: false,
            },
        ];
        assert_eq!(
            collapse(&groups, &symbols),
            [
                vec!['.', 'X', '.'],
                vec!['.', '-', '.'],
                vec!['.', '.', '-']
            ]
        );
        let mut differs = symbols.clone();
        differs[1][2] = '.';
        assert!(!uniform(&differs, &[0, 1]), "one replica reaches party 2");
    }
}
