//! The rows of the grouped outputs: the pods of one workload within one class of pods alike.
//! Every pod of a group changes alike (its class does), and a workload is what a reader names,
//! so a class-level change is written once per pair of groups, not once per pair of pods.

use std::collections::HashMap;

use super::report::{ClassChange, End, Report};

/// The pods of one workload within one class.
pub struct Group<'a> {
    /// The workload (`namespace/name`), or the pod itself where it has none.
    pub workload: &'a str,
    /// Its pods, by position among the parties, ascending.
    pub pods: Vec<usize>,
}

/// One end of a group-level change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GroupEnd {
    Group(u32),
    Other(u32),
}

/// A change between two groups (or a group and another party): every pod of the one to every
/// pod of the other, a pod to itself excepted; with another party, every pod of the group that
/// does not run on it (a node).
#[derive(Clone, Copy, Debug)]
pub struct GroupChange {
    pub probe: u32,
    pub from: GroupEnd,
    pub to: GroupEnd,
    pub before: u32,
    pub after: u32,
    /// How many pod flows it stands for.
    pub flows: u64,
    /// Its first pod flow, as parties (source, destination): changes are written in the order
    /// of their first flow.
    pub first: (usize, usize),
}

/// The groups of the classes that changes name, numbered in the order of their first pod.
pub struct Groups<'a> {
    pub list: Vec<Group<'a>>,
    /// Per class, its groups.
    of_class: HashMap<u32, Vec<u32>>,
}

impl<'a> Groups<'a> {
    /// The groups of `report`'s changes. With `per_pod`, every pod is a group of its own.
    pub fn new(report: &'a Report, per_pod: bool) -> Groups<'a> {
        let mut classes: Vec<u32> = report
            .changes
            .iter()
            .flat_map(|c| [c.from, c.to])
            .filter_map(|end| match end {
                End::Class(a) => Some(a),
                End::Other(_) => None,
            })
            .collect();
        classes.sort_unstable();
        classes.dedup();
        let name = |pod: usize| -> &'a str {
            match (per_pod, &report.workloads[pod]) {
                (false, Some(workload)) => workload,
                _ => &report.parties[pod].0,
            }
        };
        let mut list: Vec<(u32, Group)> = Vec::new();
        for &class in &classes {
            let mut by_name: HashMap<&str, usize> = HashMap::new();
            let start = list.len();
            for &pod in report.members(class) {
                let workload = name(pod);
                let next = list.len();
                let at = *by_name.entry(workload).or_insert(next);
                if at == next {
                    list.push((
                        class,
                        Group {
                            workload,
                            pods: Vec::new(),
                        },
                    ));
                }
                list[at].1.pods.push(pod);
            }
            for (_, group) in &mut list[start..] {
                group.pods.sort_unstable();
            }
        }
        list.sort_by_key(|(_, group)| group.pods[0]);
        let mut of_class: HashMap<u32, Vec<u32>> = HashMap::new();
        for (g, (class, _)) in list.iter().enumerate() {
            of_class.entry(*class).or_default().push(g as u32);
        }
        Groups {
            list: list.into_iter().map(|(_, group)| group).collect(),
            of_class,
        }
    }

    fn ends(&self, end: End) -> Vec<GroupEnd> {
        match end {
            End::Class(a) => self.of_class[&a]
                .iter()
                .map(|&g| GroupEnd::Group(g))
                .collect(),
            End::Other(o) => vec![GroupEnd::Other(o)],
        }
    }

    /// The pods of `end` that have a flow with `other` (the other end, where it is another
    /// party): a pod and its own node have none.
    pub fn pods(&self, report: &Report, end: GroupEnd, other: GroupEnd) -> Vec<usize> {
        let GroupEnd::Group(g) = end else {
            return Vec::new();
        };
        let pods = self.list[g as usize].pods.iter().copied();
        match other {
            GroupEnd::Other(o) => pods.filter(|&p| report.with_other(p, o)).collect(),
            GroupEnd::Group(_) => pods.collect(),
        }
    }

    /// Every group-level change of `report`, with at least one flow, in the order of their
    /// first pod flow (by probe, source, destination).
    pub fn changes(&self, report: &Report) -> Vec<GroupChange> {
        let mut out = Vec::new();
        for change in &report.changes {
            for from in self.ends(change.from) {
                for to in self.ends(change.to) {
                    if let Some(c) = self.change(report, change, from, to) {
                        out.push(c);
                    }
                }
            }
        }
        out.sort_by_key(|c| (c.probe, c.first));
        out
    }

    fn change(
        &self,
        report: &Report,
        change: &ClassChange,
        from: GroupEnd,
        to: GroupEnd,
    ) -> Option<GroupChange> {
        let (sources, targets) = (self.pods(report, from, to), self.pods(report, to, from));
        let party = |end: GroupEnd, pods: &[usize]| match end {
            GroupEnd::Other(o) => Some(report.other_party(o)),
            GroupEnd::Group(_) => pods.first().copied(),
        };
        let (flows, first) = if from == to {
            let n = sources.len() as u64;
            (n * n.saturating_sub(1), (sources[0], *sources.get(1)?))
        } else {
            let (x, y) = match (from, to) {
                (GroupEnd::Other(_), _) => (1, targets.len() as u64),
                (_, GroupEnd::Other(_)) => (sources.len() as u64, 1),
                _ => (sources.len() as u64, targets.len() as u64),
            };
            (x * y, (party(from, &sources)?, party(to, &targets)?))
        };
        (flows > 0).then_some(GroupChange {
            probe: change.probe,
            from,
            to,
            before: change.before,
            after: change.after,
            flows,
            first,
        })
    }
}
