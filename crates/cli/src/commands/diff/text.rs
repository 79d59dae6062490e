//! `diff`'s text: one line per pair of workloads (or of a workload and another party), probe
//! and deciding rules before and after, with the pods of each side counted; with `--per-pod`,
//! one line per pair of pods.

use std::collections::{BTreeSet, HashMap};
use std::io::{self, Write};

use super::report::Report;
use super::workload_groups::{GroupEnd, Groups};

/// Changes that read as one line: the same workloads (or other parties), probe, and deciding
/// rules before and after.
#[derive(Clone, PartialEq, Eq, Hash)]
struct LineKey<'a> {
    probe: u32,
    from: &'a str,
    to: &'a str,
    before: &'a str,
    after: &'a str,
}

/// One line: its changes' groups on either side (each once), and the change it was made from.
struct Line {
    froms: BTreeSet<GroupEnd>,
    tos: BTreeSet<GroupEnd>,
    probe: u32,
    ends: (GroupEnd, GroupEnd),
    decisions: (u32, u32),
}

pub fn write_text(out: &mut dyn Write, report: &Report, per_pod: bool) -> io::Result<()> {
    let groups = Groups::new(report, per_pod);
    let name = |end: GroupEnd| match end {
        GroupEnd::Group(g) => groups.list[g as usize].workload,
        GroupEnd::Other(o) => report.parties[report.other_party(o)].0.as_str(),
    };
    // Lines keep the order of their first change (changes come in that order).
    let mut lines: Vec<Line> = Vec::new();
    let mut line_of: HashMap<LineKey, usize> = HashMap::new();
    for change in groups.changes(report) {
        let [before, after] = report.decisions_of(change.probe, change.before, change.after);
        let key = LineKey {
            probe: change.probe,
            from: name(change.from),
            to: name(change.to),
            before: &before.deciding_rule,
            after: &after.deciding_rule,
        };
        let line = *line_of.entry(key).or_insert_with(|| {
            lines.push(Line {
                froms: BTreeSet::new(),
                tos: BTreeSet::new(),
                probe: change.probe,
                ends: (change.from, change.to),
                decisions: (change.before, change.after),
            });
            lines.len() - 1
        });
        lines[line].froms.insert(change.from);
        lines[line].tos.insert(change.to);
    }
    let kind = |end: GroupEnd| match end {
        GroupEnd::Group(_) => "pod",
        GroupEnd::Other(o) => report.parties[report.other_party(o)].1,
    };
    for line in &lines {
        let (from, to) = line.ends;
        // A side's pods: those of its groups that have a flow with the line's other end.
        let counted = |ends: &BTreeSet<GroupEnd>, other: GroupEnd| {
            let pods: Vec<usize> = ends
                .iter()
                .flat_map(|&end| groups.pods(report, end, other))
                .collect();
            match pods.as_slice() {
                [] => name(*ends.first().expect("a line has an end")).to_owned(),
                [pod] => report.parties[*pod].0.clone(),
                _ => format!("{} ({} pods)", name(*ends.first().unwrap()), pods.len()),
            }
        };
        let (from_name, to_name) = (counted(&line.froms, to), counted(&line.tos, from));
        let probe = &report.probe_labels[line.probe as usize];
        let [before, after] = report.decisions_of(line.probe, line.decisions.0, line.decisions.1);
        let verdicts = format!("{} -> {}", before.verdict, after.verdict);
        match (kind(from), kind(to)) {
            ("pod", "pod") => writeln!(out, "{from_name} -> {to_name} {probe}: {verdicts}")?,
            (_, "pod") => writeln!(out, "{probe} from {from_name} into {to_name}: {verdicts}")?,
            _ => writeln!(out, "{probe} from {from_name} to {to_name}: {verdicts}")?,
        }
        writeln!(out, "  before: {}", before.deciding_rule)?;
        writeln!(out, "  after:  {}", after.deciding_rule)?;
    }
    for (pods, what) in [
        (
            &report.pods_new,
            "new in AFTER (its flows compared as if it ran BEFORE too)",
        ),
        (
            &report.pods_gone,
            "gone from AFTER (its flows compared as if it still ran)",
        ),
        (
            &report.pods_only_before,
            "only in BEFORE (not compared: an address of it is another's in AFTER)",
        ),
        (
            &report.pods_only_after,
            "only in AFTER (not compared: an address of it is another's in BEFORE)",
        ),
    ] {
        if !pods.is_empty() {
            writeln!(out, "{what}: {}", pods.join(", "))?;
        }
    }
    if !report.stand_ins.is_empty() {
        writeln!(
            out,
            "stand-ins (for pods the inputs do not hold that a policy's peer can select), \
             compared as pods: {}",
            report.stand_ins.join(", ")
        )?;
    }
    let (flows, newly_denied) = report.counts();
    let stand_ins = match report.stand_ins.len() {
        0 => String::new(),
        n => format!(", {n} stand-ins"),
    };
    writeln!(
        out,
        "{flows} flows change ({newly_denied} newly denied, {} newly allowed) between {} \
         pods{stand_ins}, {} nodes and {} regions outside the cluster on {}",
        flows - newly_denied,
        report.input_pods(),
        report.nodes_compared,
        report.outside_regions.len(),
        report.probe_labels.join(", ")
    )
}
