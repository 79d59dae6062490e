//! What `diff` found, held compactly and written as text or JSON.
//!
//! A one-policy change at 10,000 pods changes hundreds of thousands of pod flows; held as
//! one JSON object each (names, workloads and both decisions in words, about 2 KB), they were
//! most of a diff's memory. A change is held as five numbers (probe, source and destination
//! party, decision before and after), each distinct decision once per probe and side, each
//! party's name and workload once; the text and JSON forms are written from them one change at
//! a time, as before.

use std::collections::{BTreeSet, HashMap};
use std::io::{self, Write};

use serde::ser::{SerializeStruct, Serializer};
use serde::Serialize;

use crate::output::report::DecisionJson;

/// One flow whose verdict changes: positions in the report's probes, parties and each side's
/// decisions of that probe.
#[derive(Clone, Copy, Debug)]
pub struct Change {
    pub probe: u32,
    pub from: u32,
    pub to: u32,
    pub before: u32,
    pub after: u32,
}

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
    /// Pods only BEFORE has, and only AFTER has (`namespace/pod`): their flows are not compared.
    pub pods_only_before: Vec<String>,
    pub pods_only_after: Vec<String>,
    /// Nodes both sides have: flows between them and the pods are compared.
    pub nodes_compared: usize,
    /// The regions outside the cluster that either side's policies tell apart.
    pub outside_regions: Vec<String>,
    /// Every party's name (`namespace/pod`, `node NAME`, a region) and kind.
    pub parties: Vec<(String, &'static str)>,
    /// Per party, the workload (`namespace/name`) of a pod, or the pod itself; `None` for others.
    pub workloads: Vec<Option<String>>,
    /// Per probe, each side's decisions, by the positions changes name.
    pub decisions: Vec<[Vec<DecisionJson>; 2]>,
    /// Every flow whose verdict changes, by protocol, port, source and destination.
    pub changes: Vec<Change>,
}

/// One change as `diff --output json` writes it.
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
        let decisions = &self.decisions[change.probe as usize];
        ChangeJson {
            from: &self.parties[from].0,
            to: &self.parties[to].0,
            from_kind: self.parties[from].1,
            to_kind: self.parties[to].1,
            from_workload: self.workloads[from].as_deref(),
            to_workload: self.workloads[to].as_deref(),
            protocol,
            port: *port,
            before: &decisions[0][change.before as usize],
            after: &decisions[1][change.after as usize],
        }
    }

    fn newly_denied(&self) -> usize {
        self.changes
            .iter()
            .filter(|c| !self.json(c).after.allowed())
            .count()
    }
}

/// Written field by field, the changes one at a time: the same document as a struct holding
/// every change whole.
impl Serialize for Report {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Changes<'a>(&'a Report);
        impl Serialize for Changes<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_seq(self.0.changes.iter().map(|c| self.0.json(c)))
            }
        }
        let mut out = serializer.serialize_struct("DiffJson", 7)?;
        out.serialize_field("probes", &self.probes)?;
        out.serialize_field("pods_compared", &self.pods_compared)?;
        out.serialize_field("pods_only_before", &self.pods_only_before)?;
        out.serialize_field("pods_only_after", &self.pods_only_after)?;
        out.serialize_field("nodes_compared", &self.nodes_compared)?;
        out.serialize_field("outside_regions", &self.outside_regions)?;
        out.serialize_field("changes", &Changes(self))?;
        out.end()
    }
}

/// Changes that read as one line: the same workloads (or other parties), probe, and deciding
/// rules before and after, each by an interned position.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct LineKey {
    probe: u32,
    from: u32,
    to: u32,
    before: u32,
    after: u32,
}

/// Strings by position, each once.
#[derive(Default)]
struct Strings<'a> {
    index: HashMap<&'a str, u32>,
}

impl<'a> Strings<'a> {
    fn id(&mut self, text: &'a str) -> u32 {
        let next = self.index.len() as u32;
        *self.index.entry(text).or_insert(next)
    }
}

pub fn write_text(out: &mut dyn Write, report: &Report) -> io::Result<()> {
    // One line per pair of workloads (or other parties): replicas decide alike. Lines keep the
    // order of their first change.
    type Line<'a> = (BTreeSet<&'a str>, BTreeSet<&'a str>, Change);
    let mut lines: Vec<Line> = Vec::new();
    let mut line_of: HashMap<LineKey, usize> = HashMap::new();
    let mut strings = Strings::default();
    let names: Vec<u32> = (0..report.parties.len())
        .map(|p| {
            let name = report.workloads[p]
                .as_deref()
                .unwrap_or(&report.parties[p].0);
            strings.id(name)
        })
        .collect();
    for change in &report.changes {
        let json = report.json(change);
        let key = LineKey {
            probe: change.probe,
            from: names[change.from as usize],
            to: names[change.to as usize],
            before: strings.id(&json.before.deciding_rule),
            after: strings.id(&json.after.deciding_rule),
        };
        match line_of.get(&key) {
            Some(&line) => {
                let (froms, tos, _) = &mut lines[line];
                froms.insert(json.from);
                tos.insert(json.to);
            }
            None => {
                line_of.insert(key, lines.len());
                lines.push((
                    BTreeSet::from([json.from]),
                    BTreeSet::from([json.to]),
                    *change,
                ));
            }
        }
    }
    let counted = |name: &str, members: &BTreeSet<&str>| {
        if members.len() > 1 {
            format!("{name} ({} pods)", members.len())
        } else {
            members.iter().next().map_or(name, |m| *m).to_owned()
        }
    };
    for (froms, tos, change) in &lines {
        let json = report.json(change);
        let from_name = json.from_workload.unwrap_or(json.from);
        let to_name = json.to_workload.unwrap_or(json.to);
        let (from, to) = (counted(from_name, froms), counted(to_name, tos));
        let probe = &report.probe_labels[change.probe as usize];
        let verdicts = format!("{} -> {}", json.before.verdict, json.after.verdict);
        match (json.from_kind, json.to_kind) {
            ("pod", "pod") => writeln!(out, "{from} -> {to} {probe}: {verdicts}")?,
            (_, "pod") => writeln!(out, "{probe} from {from} into {to}: {verdicts}")?,
            _ => writeln!(out, "{probe} from {from} to {to}: {verdicts}")?,
        }
        writeln!(out, "  before: {}", json.before.deciding_rule)?;
        writeln!(out, "  after:  {}", json.after.deciding_rule)?;
    }
    for (pods, side) in [
        (&report.pods_only_before, "BEFORE"),
        (&report.pods_only_after, "AFTER"),
    ] {
        if !pods.is_empty() {
            writeln!(out, "only in {side} (not compared): {}", pods.join(", "))?;
        }
    }
    let newly_denied = report.newly_denied();
    writeln!(
        out,
        "{} flows change ({newly_denied} newly denied, {} newly allowed) between {} pods, {} \
         nodes and {} regions outside the cluster on {}",
        report.changes.len(),
        report.changes.len() - newly_denied,
        report.pods_compared,
        report.nodes_compared,
        report.outside_regions.len(),
        report.probe_labels.join(", ")
    )
}
