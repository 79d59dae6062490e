//! What `diff` found, held as it was decided: per probe, the pairs of classes of pods alike (and
//! of a class and another party) whose verdict changes, not every pair of pods.
//!
//! A one-policy change at 150,000 pods changes 36 million pod flows, which at twenty bytes each
//! were most of a diff's memory; they are 18,000 pairs of classes. A class-level change holds
//! for every pod of the one class to every pod of the other (a pod to itself excepted), and
//! between a class and a node for every pod of the class that does not run on that node. The
//! outputs are written from these: text and JSON grouped by workload (`text.rs`, `json.rs`),
//! and per pod on request, expanded in the order the pods are listed ([`Report::expand`]).

use std::rc::Rc;

use serde::ser::{SerializeStruct, Serializer};
use serde::Serialize;

pub use crate::decide::before_after::{ClassChange, End};
use crate::decide::class_matrix::Classes;
use crate::output::report::DecisionJson;

/// One pod flow whose verdict changes: positions in the report's probes, parties and each
/// side's decisions of that probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Change {
    pub probe: u32,
    pub from: u32,
    pub to: u32,
    pub before: u32,
    pub after: u32,
}

/// The `format` of `diff -o json --per-pod`: its list of pod flows is `pod_changes`, not the
/// grouped document's `changes` (one shape per field name).
pub const PER_POD_FORMAT: &str = "netpol.diff-per-pod/v1";

/// `diff`'s findings.
pub struct Report {
    /// The protocol/port pairs probed, e.g. `TCP/80`.
    pub probes: Vec<String>,
    /// The same with the names pods give them, e.g. `TCP/8080 (http)`, for the text output.
    pub probe_labels: Vec<String>,
    /// Per probe: its protocol and port as written in a change.
    pub probe_ports: Vec<(String, u16)>,
    /// How many pods both sides have (flows between them are compared).
    pub pods_compared: usize,
    /// Pods only BEFORE has, and only AFTER has (`namespace/pod`), that could not be lent to the
    /// other side (an address of theirs is another party's there): their flows are not
    /// compared, and the diff is not "no change".
    pub pods_only_before: Vec<String>,
    pub pods_only_after: Vec<String>,
    /// Pods only BEFORE has (gone) and only AFTER has (new), each decided on the other side as
    /// if it ran there too: their flows are compared with the others'.
    pub pods_gone: Vec<String>,
    pub pods_new: Vec<String>,
    /// Of the pods compared, the stand-ins for pods the inputs do not hold that a policy's
    /// peer can select (`namespace/name`, see `loader::add_stand_ins`).
    pub stand_ins: Vec<String>,
    /// Nodes both sides have: flows between them and the pods are compared.
    pub nodes_compared: usize,
    /// The regions outside the cluster that either side's policies tell apart.
    pub outside_regions: Vec<String>,
    /// Every party's name (`namespace/pod`, `node NAME`, a region) and kind, pods first.
    pub parties: Vec<(String, &'static str)>,
    /// Per party, the workload (`namespace/name`) of a pod, or the pod itself; `None` for others.
    pub workloads: Vec<Option<String>>,
    /// Per probe, each side's decisions, by the positions changes name.
    pub decisions: Vec<[Vec<DecisionJson>; 2]>,
    /// The classes of the pods (positions among the parties).
    pub classes: Rc<Classes>,
    /// Per pod, its own node on each side, by position after the pods: a pod and its own node
    /// have no flow.
    pub own_nodes: Vec<[Option<u32>; 2]>,
    /// Every class-level change, by probe.
    pub changes: Vec<ClassChange>,
}

impl Report {
    /// Whether pod `pod` and the other party `other` have a flow on both sides.
    pub fn with_other(&self, pod: usize, other: u32) -> bool {
        !self.own_nodes[pod].contains(&Some(other))
    }

    /// The party position of the other party `other`.
    pub fn other_party(&self, other: u32) -> usize {
        self.pods_compared + other as usize
    }

    /// The pods of class `class`, by position.
    pub fn members(&self, class: u32) -> &[usize] {
        &self.classes.members[class as usize]
    }

    /// How many pods of the inputs both sides have (the pods compared less the stand-ins).
    pub fn input_pods(&self) -> usize {
        self.pods_compared - self.stand_ins.len()
    }

    /// Whether the sides differ in their pods: a pod new, gone, or not compared.
    pub fn pods_differ(&self) -> bool {
        [
            &self.pods_only_before,
            &self.pods_only_after,
            &self.pods_new,
            &self.pods_gone,
        ]
        .iter()
        .any(|pods| !pods.is_empty())
    }

    /// How many pod flows a class-level change stands for.
    pub fn flows(&self, change: &ClassChange) -> u64 {
        match (change.from, change.to) {
            (End::Class(a), End::Class(b)) => {
                let (x, y) = (self.members(a).len() as u64, self.members(b).len() as u64);
                if a == b {
                    x * (x - 1)
                } else {
                    x * y
                }
            }
            (End::Class(a), End::Other(o)) | (End::Other(o), End::Class(a)) => {
                self.members(a)
                    .iter()
                    .filter(|&&p| self.with_other(p, o))
                    .count() as u64
            }
            (End::Other(_), End::Other(_)) => 0,
        }
    }

    /// The decisions of a change, before and after.
    pub fn decisions_of(&self, probe: u32, before: u32, after: u32) -> [&DecisionJson; 2] {
        let decisions = &self.decisions[probe as usize];
        [
            &decisions[0][before as usize],
            &decisions[1][after as usize],
        ]
    }

    /// How many pod flows change, and how many of them are newly denied.
    pub fn counts(&self) -> (u64, u64) {
        let (mut all, mut denied) = (0, 0);
        for change in &self.changes {
            let flows = self.flows(change);
            all += flows;
            let [_, after] = self.decisions_of(change.probe, change.before, change.after);
            if !after.allowed() {
                denied += flows;
            }
        }
        (all, denied)
    }

    /// Every pod flow that changes, one at a time, by probe, then source, then destination
    /// (parties in their order: pods, then nodes and regions), as a diff per pod pair lists them.
    pub fn expand(&self, mut each: impl FnMut(Change)) {
        let n = self.pods_compared;
        let k = self.classes.len();
        let others = self.parties.len() - n;
        for probe in 0..self.probes.len() as u32 {
            // The changes of this probe by their source: a class or another party.
            let mut by_class: Vec<Vec<&ClassChange>> = vec![Vec::new(); k];
            let mut by_other: Vec<Vec<&ClassChange>> = vec![Vec::new(); others];
            for change in self.changes.iter().filter(|c| c.probe == probe) {
                match change.from {
                    End::Class(a) => by_class[a as usize].push(change),
                    End::Other(o) => by_other[o as usize].push(change),
                }
            }
            let mut targets: Vec<(u32, u32, u32)> = Vec::new();
            for from in 0..n + others {
                targets.clear();
                let changes = if from < n {
                    &by_class[self.classes.of[from] as usize]
                } else {
                    &by_other[from - n]
                };
                for change in changes {
                    match (change.from, change.to) {
                        (End::Class(_), End::Class(b)) => targets.extend(
                            self.members(b)
                                .iter()
                                .filter(|&&to| to != from)
                                .map(|&to| (to as u32, change.before, change.after)),
                        ),
                        (End::Class(_), End::Other(o)) => {
                            if self.with_other(from, o) {
                                let to = self.other_party(o) as u32;
                                targets.push((to, change.before, change.after));
                            }
                        }
                        (End::Other(o), End::Class(b)) => targets.extend(
                            self.members(b)
                                .iter()
                                .filter(|&&to| self.with_other(to, o))
                                .map(|&to| (to as u32, change.before, change.after)),
                        ),
                        (End::Other(_), End::Other(_)) => {}
                    }
                }
                targets.sort_unstable();
                for &(to, before, after) in &targets {
                    each(Change {
                        probe,
                        from: from as u32,
                        to,
                        before,
                        after,
                    });
                }
            }
        }
    }
}

/// One change as `diff --output json --per-pod` writes it.
#[derive(Serialize)]
struct ChangeJson<'a> {
    /// `namespace/pod`, `node NAME` or an outside region.
    from: &'a str,
    to: &'a str,
    /// `pod`, `node` or `outside`.
    from_kind: &'static str,
    to_kind: &'static str,
    /// The workload (`namespace/name`) of a pod, or the pod itself; absent for others. Text
    /// output prints one line per pair of these.
    #[serde(skip_serializing_if = "Option::is_none")]
    from_workload: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    to_workload: Option<&'a str>,
    protocol: &'a str,
    port: u16,
    before: &'a DecisionJson,
    after: &'a DecisionJson,
}

impl Report {
    fn json(&self, change: &Change) -> ChangeJson<'_> {
        let (from, to) = (change.from as usize, change.to as usize);
        let (protocol, port) = &self.probe_ports[change.probe as usize];
        let [before, after] = self.decisions_of(change.probe, change.before, change.after);
        ChangeJson {
            from: &self.parties[from].0,
            to: &self.parties[to].0,
            from_kind: self.parties[from].1,
            to_kind: self.parties[to].1,
            from_workload: self.workloads[from].as_deref(),
            to_workload: self.workloads[to].as_deref(),
            protocol,
            port: *port,
            before,
            after,
        }
    }
}

/// `diff -o json --per-pod`: every changed pod flow whole, written one at a time (the document
/// every `diff -o json` was before the grouped form).
pub struct PerPod<'a>(pub &'a Report);

impl Serialize for PerPod<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Changes<'a>(&'a Report);
        impl Serialize for Changes<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeSeq;
                let mut seq = serializer.serialize_seq(None)?;
                let mut failed = None;
                self.0.expand(|change| {
                    if failed.is_none() {
                        if let Err(e) = seq.serialize_element(&self.0.json(&change)) {
                            failed = Some(e);
                        }
                    }
                });
                match failed {
                    Some(e) => Err(e),
                    None => seq.end(),
                }
            }
        }
        let report = self.0;
        let mut out = serializer.serialize_struct("DiffJson", 12)?;
        out.serialize_field("format", PER_POD_FORMAT)?;
        out.serialize_field("probes", &report.probes)?;
        out.serialize_field("probe_labels", &report.probe_labels)?;
        out.serialize_field("pods_compared", &report.input_pods())?;
        out.serialize_field("stand_ins", &report.stand_ins)?;
        out.serialize_field("pods_only_before", &report.pods_only_before)?;
        out.serialize_field("pods_only_after", &report.pods_only_after)?;
        out.serialize_field("pods_new", &report.pods_new)?;
        out.serialize_field("pods_gone", &report.pods_gone)?;
        out.serialize_field("nodes_compared", &report.nodes_compared)?;
        out.serialize_field("outside_regions", &report.outside_regions)?;
        out.serialize_field("pod_changes", &Changes(report))?;
        out.end()
    }
}
