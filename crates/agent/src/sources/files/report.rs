//! What the files' problems make known: logs, metrics and readiness.

use std::collections::BTreeMap;

use super::{FileProblem, FileSource};
use crate::health::Health;
use crate::kind::SourceKind;
use crate::metrics::{gauge_value, Metrics};

/// How many refused objects `/readyz` names.
const REFUSED_SHOWN: usize = 3;

/// Publishes the files' state: the unreadable-files gauge, readiness held back while any file is
/// unreadable, and the objects refused named by `/readyz`.
pub fn publish_state(source: &FileSource, metrics: &Metrics, health: &Health) {
    let unreadable = source.unreadable();
    metrics.unreadable_files.set(gauge_value(unreadable.len()));
    let problem = (!unreadable.is_empty()).then(|| {
        let names: Vec<String> = unreadable
            .keys()
            .take(3)
            .map(|p| p.display().to_string())
            .collect();
        let more = unreadable.len().saturating_sub(names.len());
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        format!(
            "{} unreadable file(s), previous objects kept: {}{more}",
            unreadable.len(),
            names.join(", ")
        )
    });
    // A refused object is left out: what it would have allowed is denied, what it would have
    // denied is allowed. Readiness names it until the file no longer holds it.
    let refused: Vec<String> = source
        .refused()
        .map(|(path, error)| {
            crate::logline::bounded(&format!("{}: {error}", path.display())).into_owned()
        })
        .collect();
    let mut by_kind: BTreeMap<SourceKind, usize> = BTreeMap::new();
    for (_, error) in source.refused() {
        if let Some(kind) = SourceKind::POLICIES
            .into_iter()
            .find(|k| k.as_str() == error.object.kind)
        {
            *by_kind.entry(kind).or_default() += 1;
        }
    }
    metrics.set_refused_by_source(by_kind);
    let refused = (!refused.is_empty()).then(|| {
        let more = refused.len().saturating_sub(REFUSED_SHOWN);
        let more = if more > 0 {
            format!("; and {more} more")
        } else {
            String::new()
        };
        format!(
            "{} invalid object(s) refused, left out: {}{more}",
            refused.len(),
            refused[..refused.len().min(REFUSED_SHOWN)].join("; ")
        )
    });
    // An unreadable file holds readiness back (what it holds now is unknown); an invalid object
    // of a readable file is a refused object, named without failing readiness as the others are.
    health.set_source_problem("files", problem);
    health.set_notice("refused objects in files", refused);
}

/// Logs each problem of a scan (bounded, never an object's body) and counts invalid policies.
pub fn report_file_problems(problems: &[FileProblem], metrics: &Metrics) {
    // Skipped kinds are told in one line, as the authoring tools tell them.
    let mut skipped: BTreeMap<String, usize> = BTreeMap::new();
    for problem in problems {
        if let FileProblem::OtherKind { object, .. } = problem {
            *skipped.entry(object.kind.clone()).or_default() += 1;
            continue;
        }
        if let FileProblem::InvalidObject { error, .. } = problem {
            if let Some(kind) = SourceKind::ALL
                .into_iter()
                .find(|k| k.as_str() == error.object.kind)
            {
                if kind.is_policy() {
                    metrics.count_rejection(kind);
                }
            }
        }
        tracing::warn!("{}", crate::logline::bounded(&problem.to_string()));
    }
    if let Some(summary) = netpol_api::object::skipped_kinds_summary(&skipped) {
        tracing::info!("{summary}");
    }
}
