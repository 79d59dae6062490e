//! `--once`: read the files, sync once (retrying failed endpoints a few times) and hand back what
//! was programmed, for the caller to summarize.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use netpol_hcn::sim::HcnSim;
use netpol_hcn::HcnDatapath;
use prometheus_client::registry::Registry;

use crate::config::{DatapathKind, DatapathOptions};
use crate::datapaths::{self, Datapaths};
use crate::health::Health;
use crate::indexes::SourceEvent;
use crate::metrics::Metrics;
use crate::reconciler::{Pipeline, ReconcileReport};
use crate::sources::files::report::report_file_problems;
use crate::sources::files::{FileProblem, FileSource, TemplatePlacement, SETTLE_AGE};
use netpol_datapath::Outcome;

/// How many reconciles `--once` tries before it reports endpoints it could not program.
pub const ATTEMPTS: usize = 5;

/// What one sync did.
pub struct Synced {
    pub pipeline: Pipeline,
    /// The simulator the rules went to, if the datapath is simulated.
    pub sim: Option<Arc<HcnDatapath<HcnSim>>>,
    /// Whether every endpoint was programmed.
    pub complete: bool,
    /// The endpoints the last attempt left unprogrammed, each with why.
    pub failed: Vec<(String, String)>,
    /// Files that could not be read (their objects are missing).
    pub unreadable_files: usize,
    /// Objects that could not be read or were refused.
    pub invalid_objects: usize,
    /// From the start of the run to the end of the sync.
    pub took: Duration,
}

impl Synced {
    /// Whether everything was read and programmed.
    pub fn is_clean(&self) -> bool {
        self.complete && self.unreadable_files == 0 && self.invalid_objects == 0
    }
}

/// Reads the files under `dir` and syncs `node`'s endpoints once on `datapath`.
pub fn sync(
    dir: &Path,
    node: &str,
    datapath: DatapathKind,
    options: DatapathOptions,
    poll: Duration,
    templates: netpol_api::workloads::Placement,
) -> anyhow::Result<Synced> {
    let started = Instant::now();
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let health = Arc::new(Health::default());
    let Datapaths { enforcer, sim, .. } =
        datapaths::build(datapath, options.clone(), &metrics, &health)?;
    let mut pipeline = Pipeline::with_enforcer(node, enforcer, metrics.clone());
    if let Some(limit) = options.max_policy_entries {
        pipeline.set_max_policy_entries(limit);
    }
    pipeline.set_policy_budgets(options.policy_budgets);
    if options.audit_all {
        pipeline.audit_all();
    }
    let mut source = FileSource::new(dir)
        .with_templates(TemplatePlacement::new(templates, Some(node.to_owned())));
    // Each object goes into the pipeline as it is parsed: the list never exists as a whole.
    let problems = read_first_list(&mut source, poll, &mut |event| pipeline.ingest(event))?;
    report_file_problems(&problems, &metrics);
    let unreadable_files = source.unreadable().len();
    drop(source);
    let mut complete = false;
    let mut failed = Vec::new();
    for _ in 0..ATTEMPTS {
        let report = pipeline
            .reconcile(Instant::now())
            .context("the files did not list every kind")?;
        if report.complete() {
            complete = true;
            failed.clear();
            break;
        }
        failed = unprogrammed(&report);
        if let Some(at) = pipeline.next_wakeup() {
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
        }
    }
    let invalid_objects = problems
        .iter()
        .filter(|p| matches!(p, FileProblem::InvalidObject { .. }))
        .count()
        + invalid_policies(&pipeline);
    Ok(Synced {
        pipeline,
        sim,
        complete,
        failed,
        unreadable_files,
        invalid_objects,
        took: started.elapsed(),
    })
}

/// The first list: waits (boundedly) for files still being written, then lists what could be
/// read into `sink`. Returns every problem met.
fn read_first_list(
    source: &mut FileSource,
    poll: Duration,
    sink: &mut dyn FnMut(SourceEvent),
) -> anyhow::Result<Vec<FileProblem>> {
    let started = Instant::now();
    let mut problems = Vec::new();
    loop {
        let scan = source
            .scan_into(sink)
            .with_context(|| format!("reading {}", source.root().display()))?;
        problems.extend(scan.problems);
        if source.is_listed() {
            return Ok(problems);
        }
        // Only files still changing are worth waiting for, and not for long; unreadable ones
        // are reported and the rest is listed.
        if scan.settling == 0 || started.elapsed() > 2 * SETTLE_AGE {
            source.accept_partial();
        } else {
            std::thread::sleep(poll);
        }
    }
}

/// The endpoints a reconcile left unprogrammed, with why.
fn unprogrammed(report: &ReconcileReport) -> Vec<(String, String)> {
    if let Some(error) = &report.discovery_error {
        return vec![("(every endpoint)".to_string(), error.to_string())];
    }
    report
        .apply
        .outcomes
        .iter()
        .filter_map(|(endpoint, outcome)| {
            let why = match outcome {
                Outcome::Failed { error, .. } => error.to_string(),
                Outcome::Deferred { .. } => "still backing off from a failure".to_string(),
                _ => return None,
            };
            Some((endpoint.clone(), why))
        })
        .collect()
}

/// Policies read but refused by translation (their errors were logged).
fn invalid_policies(pipeline: &Pipeline) -> usize {
    let counts = pipeline.indexes().policy_counts();
    counts.values().map(|c| c.invalid).sum()
}
