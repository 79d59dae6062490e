//! `diff` where policies are in audit mode (`netpol.io/enforcement: audit`): the changes are the
//! enforced verdicts' (audited policies decide nothing), and the same diff is made again between
//! the sides' would-be views (every policy enforced, audited ones included) and shown apart,
//! marked as audit: what would change were the audited policies enforced. The exit status is
//! the enforced diff's.

use std::io::{self, Write};

use super::report::{PerPod, Report};
use super::{json, text};
use crate::loader::Scenario;

/// Both sides in their would-be views; None where neither side has a policy in audit mode.
pub fn would_be_sides(before: &Scenario, after: &Scenario) -> Option<[Scenario; 2]> {
    let (b, a) = (before.cluster.would_be(), after.cluster.would_be());
    if b.is_none() && a.is_none() {
        return None;
    }
    let side = |scenario: &Scenario, would_be: Option<crate::loader::ClusterModel>| Scenario {
        file: scenario.file.clone(),
        name: scenario.name.clone(),
        description: scenario.description.clone(),
        cluster: would_be.unwrap_or_else(|| scenario.cluster.clone()),
        flows: Vec::new(),
        warnings: Vec::new(),
        inventory: scenario.inventory.clone(),
    };
    Some([side(before, b), side(after, a)])
}

/// The text of the would-be diff, after the enforced one: a header, then its lines.
pub fn write_text(out: &mut dyn Write, audit: &Report, per_pod: bool) -> io::Result<()> {
    writeln!(
        out,
        "\naudit: were the policies in audit mode (netpol.io/enforcement: audit) enforced:"
    )?;
    if audit.counts().0 == 0 {
        writeln!(out, "  no flow would change")?;
        return Ok(());
    }
    text::write_text(out, audit, per_pod)
}

/// The JSON of the enforced diff with the would-be diff as its `audit` field (the same shape).
pub fn write_json(
    out: &mut dyn Write,
    report: &Report,
    audit: &Report,
    per_pod: bool,
) -> io::Result<()> {
    let value = |report: &Report| -> io::Result<serde_json::Value> {
        let mut bytes = Vec::new();
        if per_pod {
            serde_json::to_writer(&mut bytes, &PerPod(report))?;
        } else {
            json::write_json(&mut bytes, report)?;
        }
        Ok(serde_json::from_slice(&bytes)?)
    };
    let mut enforced = value(report)?;
    if let Some(object) = enforced.as_object_mut() {
        object.insert("audit".into(), value(audit)?);
    }
    serde_json::to_writer(&mut *out, &enforced)?;
    writeln!(out)
}
