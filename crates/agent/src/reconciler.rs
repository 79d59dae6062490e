//! The pipeline: indexes → engine → compiler → enforcer (HCN or nftables), driven one step at a
//! time.
//!
//! [`Pipeline::ingest`] stages the engine updates of one watch event; [`Pipeline::reconcile`]
//! commits them, recompiles the endpoints whose MapState changed and hands every local pod's
//! compiled rules to the [`Enforcer`], which changes the datapath only where its rules differ
//! from what it knows (or reads back) to be there. The caller decides when to reconcile (after a
//! debounce) and when to resync, so the pipeline itself needs no clock and no thread, and tests
//! drive it step by step.
//!
//! Nothing is programmed before every kind has been listed once: enforcing a partial policy set,
//! even briefly, could cut connections the complete set allows.
//!
//! The datapath is the only persistent state. At start-up the programmer knows nothing, so its
//! first apply reads every endpoint back: endpoints whose netpol rules are already right cost no
//! modify call, stale rules (of policies deleted or pods gone while the agent was down) are
//! replaced, and endpoints no pod claims lose their netpol rules.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use super::indexes::{Applied, Indexes, SourceEvent};
use super::kind::SourceKind;
use super::metrics::{gauge_value, Metrics, ProgramOutcome};
use super::refusals::Refusal;
use kube::runtime::watcher::Event;
use netpol_api::ValidationError;
use netpol_datapath::{
    compile_endpoint_with, ApplyReport, Backoff, CompileOptions, CompiledPods, CompiledRules,
    DatapathError, Desired, EndpointInfo, Enforcer, LocalPods, Outcome,
};
use netpol_engine::{Engine, EngineConfig, IdentityId};
use netpol_hcn::discovery::EndpointDiscovery;
use netpol_hcn::{HcnApi, HcnEnforcer};

/// What one reconcile did.
#[derive(Debug, Default)]
pub struct ReconcileReport {
    /// Local endpoints (pod keys) whose MapState changed in this reconcile.
    pub changed_pods: Vec<String>,
    /// The enforcer's per-endpoint outcomes (by HCN endpoint id, or pod key on nftables).
    pub apply: ApplyReport,
    /// Set when the endpoints could not be listed; nothing was programmed.
    pub discovery_error: Option<DatapathError>,
}

impl ReconcileReport {
    /// Whether every endpoint now holds its desired rules.
    pub fn complete(&self) -> bool {
        self.discovery_error.is_none() && self.apply.failed() == 0
    }
}

pub struct Pipeline {
    indexes: Indexes,
    engine: Engine,
    /// Compiled rules of each local pod.
    compiled: CompiledPods,
    enforcer: Box<dyn Enforcer>,
    metrics: Metrics,
    options: CompileOptions,
    /// Identities whose addresses changed in commits the enforcer has not been given yet.
    changed_identities: BTreeSet<IdentityId>,
    /// When the oldest event not yet acknowledged by the datapath arrived (kept across
    /// reconciles that leave an endpoint unprogrammed).
    unacknowledged_since: Option<Instant>,
    /// Engine updates are staged and not yet committed.
    staged: bool,
    /// A full resync is due: re-read every endpoint and list them afresh.
    resync_due: bool,
    synced: bool,
    /// Where refused objects go to be reported as Events ([`crate::refusals`]), if anywhere.
    refusals: Option<tokio::sync::mpsc::UnboundedSender<Refusal>>,
}

impl Pipeline {
    /// A pipeline for the pods of `node`, programming HCN through `datapath` (already
    /// instrumented).
    pub fn new(
        node: &str,
        datapath: Arc<dyn HcnApi>,
        discovery: Box<dyn EndpointDiscovery>,
        backoff: Backoff,
        metrics: Metrics,
    ) -> Self {
        let enforcer = HcnEnforcer::new(datapath, discovery, backoff);
        Self::with_enforcer(node, Box::new(enforcer), metrics)
    }

    /// A pipeline for the pods of `node`, enforcing through `enforcer`.
    pub fn with_enforcer(node: &str, enforcer: Box<dyn Enforcer>, metrics: Metrics) -> Self {
        let options = enforcer.compile_options();
        Pipeline {
            indexes: Indexes::new(),
            engine: Engine::new(EngineConfig {
                local_node: Some(node.to_owned()),
                ..EngineConfig::default()
            }),
            compiled: BTreeMap::new(),
            changed_identities: BTreeSet::new(),
            unacknowledged_since: None,
            enforcer,
            metrics,
            options,
            staged: false,
            resync_due: false,
            synced: false,
            refusals: None,
        }
    }

    /// Holds every endpoint to `limit` MapState entries from the next commit on: an endpoint
    /// whose policy needs more is isolated (see `netpol_engine::engine::OverBudget`).
    pub fn set_max_policy_entries(&mut self, limit: usize) {
        self.engine.set_max_entries(limit);
    }

    /// Sends every object refused from now on to `refusals` as well as to the log.
    pub fn report_refusals(&mut self, refusals: tokio::sync::mpsc::UnboundedSender<Refusal>) {
        self.refusals = Some(refusals);
    }

    /// Feeds one watch event: updates the indexes and stages the resulting engine updates.
    pub fn ingest(&mut self, event: SourceEvent) {
        self.note_received(event.received);
        let applied = self.indexes.apply(event);
        self.stage(applied);
    }

    /// Feeds the event of a policy its source could not read: it counts as invalid and replaces
    /// what its key held.
    pub fn ingest_rejected(&mut self, kind: SourceKind, event: Event<ValidationError>) {
        self.note_received(Instant::now());
        let applied = self.indexes.apply_rejected(kind, event);
        self.stage(applied);
    }

    /// Keeps the arrival of the oldest event the datapath has not acknowledged yet.
    fn note_received(&mut self, received: Instant) {
        let oldest = self.unacknowledged_since.get_or_insert(received);
        *oldest = (*oldest).min(received);
    }

    fn stage(&mut self, applied: Applied) {
        if let Some(mismatch) = applied.mismatched {
            tracing::warn!("{mismatch}");
        }
        for rejection in &applied.rejections {
            self.metrics.count_rejection(rejection.kind);
            for error in &rejection.errors {
                tracing::warn!(
                    object = %error.object,
                    field = %error.field,
                    "invalid policy skipped: {}",
                    super::logline::bounded(&error.message)
                );
                if let Some(refusals) = &self.refusals {
                    let _ = refusals.send(Refusal::invalid(error));
                }
            }
        }
        for warning in &applied.warnings {
            tracing::warn!(object = %warning.object, field = %warning.field, "{}", warning.message);
        }
        if !applied.updates.is_empty() {
            self.staged = true;
        }
        for update in applied.updates {
            update.stage(&mut self.engine);
        }
    }

    /// Whether every kind has been listed once, so that reconciling is meaningful.
    pub fn sources_synced(&self) -> bool {
        self.indexes.is_synced()
    }

    /// Whether a reconcile completed with every endpoint programmed at least once.
    pub fn synced(&self) -> bool {
        self.synced
    }

    /// Whether staged changes await a reconcile.
    pub fn has_pending_changes(&self) -> bool {
        self.staged || self.resync_due
    }

    /// Asks the next reconcile to re-read every endpoint and list endpoints afresh, catching
    /// drift made behind the agent's back.
    pub fn request_resync(&mut self) {
        self.resync_due = true;
    }

    /// When the pipeline wants to run again on its own: a retry after a failure, or a look for
    /// endpoints still missing.
    pub fn next_wakeup(&self) -> Option<Instant> {
        self.enforcer.next_wakeup()
    }

    /// Commits staged changes and programs every endpoint whose rules differ. Returns None while
    /// some kind has not been listed yet.
    pub fn reconcile(&mut self, now: Instant) -> Option<ReconcileReport> {
        if !self.indexes.is_synced() {
            let waiting = self.indexes.unsynced();
            tracing::debug!(?waiting, "not reconciling before every kind is listed");
            return None;
        }
        let started = Instant::now();
        let mut report = ReconcileReport::default();
        let refresh = std::mem::take(&mut self.resync_due);
        if std::mem::take(&mut self.staged) || !self.synced {
            report.changed_pods = self.commit();
        }
        if refresh {
            report.changed_pods.extend(self.check_engine_drift());
        }

        let pods = self.local_pods();
        let desired = Desired {
            pods: &pods,
            compiled: &self.compiled,
            identities: self.engine.identities(),
            changed: &self.changed_identities,
        };
        match self.enforcer.enforce(&desired, refresh, now) {
            Ok(apply) => report.apply = apply,
            Err(error) => {
                self.resync_due = refresh;
                report.discovery_error = Some(error);
            }
        }
        self.changed_identities.clear();
        self.record(&report, started);
        if report.complete() {
            self.synced = true;
            self.metrics.record_sync(SystemTime::now());
            // Every event received so far is now in the datapath. One observation per
            // reconcile, of its oldest event: the latency a change waited at worst.
            if let Some(received) = self.unacknowledged_since.take() {
                self.metrics
                    .change_latency_seconds
                    .observe(received.elapsed().as_secs_f64());
            }
        }
        Some(report)
    }

    /// Commits the engine and recompiles what changed; returns the changed pods. Addresses that
    /// joined or left identities change no compiled rule: the enforcer hears of the identities
    /// and updates the address sets that name them.
    fn commit(&mut self) -> Vec<String> {
        // Endpoints are compiled whole: which changed matters, not what changed in them.
        let changes = self.engine.commit_endpoints();
        self.changed_identities
            .extend(self.engine.changed_identities().iter().copied());
        let mut memo = CompileMemo::default();
        let mut changed = Vec::new();
        for change in changes {
            if let Some((_, over)) = self
                .engine
                .over_budget()
                .find(|(key, _)| *key == change.endpoint)
            {
                tracing::error!(endpoint = %change.endpoint, "endpoint isolated: {over}");
            }
            if change.removed {
                self.compiled.remove(&change.endpoint);
            } else {
                self.compile(&change.endpoint, &mut memo);
            }
            changed.push(change.endpoint);
        }
        // Endpoints whose MapState happens to be unchanged by their arrival still need rules.
        let missing: Vec<String> = self
            .engine
            .endpoints()
            .map(|(key, _)| key)
            .filter(|key| !self.compiled.contains_key(*key))
            .map(str::to_owned)
            .collect();
        for key in missing {
            self.compile(&key, &mut memo);
        }
        changed
    }

    /// The full recomputation must agree with the incremental one; any difference is a bug
    /// worth a warning, and the recomputed state wins.
    fn check_engine_drift(&mut self) -> Vec<String> {
        let drifted = self.engine.recompute_all();
        let mut keys = Vec::new();
        for change in drifted {
            tracing::warn!(
                endpoint = %change.endpoint,
                classes = change.changes.len(),
                "full recomputation differs from the incremental MapState; using it"
            );
            self.compile(&change.endpoint, &mut CompileMemo::default());
            keys.push(change.endpoint);
        }
        keys
    }

    fn compile(&mut self, key: &str, memo: &mut CompileMemo) {
        let Some(map) = self.engine.endpoint(key) else {
            self.compiled.remove(key);
            return;
        };
        let identities = self.endpoint_identities(key);
        if let Some(twin) = memo.compiled_for(&identities) {
            let same_map = self.engine.endpoint(twin).is_some_and(|m| m == map);
            if let Some(rules) = self.compiled.get(twin).filter(|_| same_map).cloned() {
                self.compiled.insert(key.to_owned(), rules);
                return;
            }
        }
        match compile_endpoint_with(map, self.engine.identities(), &self.options) {
            Ok(rules) => {
                for warning in &rules.warnings {
                    tracing::warn!(endpoint = %key, "{warning}");
                }
                self.compiled.insert(key.to_owned(), Arc::new(rules));
                memo.remember(identities, key);
            }
            // The previous rules, if any, stay in force: better than none at all.
            Err(error) => tracing::error!(endpoint = %key, %error, "compiling rules failed"),
        }
    }

    /// The security identities of the endpoint's pod addresses.
    fn endpoint_identities(&self, key: &str) -> Vec<Option<IdentityId>> {
        let store = self.engine.identities();
        self.engine
            .endpoint_pod(key)
            .map(|(_, addresses)| addresses.iter().map(|a| store.resolve(*a)).collect())
            .unwrap_or_default()
    }

    fn local_pods(&self) -> LocalPods {
        self.engine
            .endpoints()
            .filter_map(|(key, _)| {
                let (_, addresses) = self.engine.endpoint_pod(key)?;
                Some((key.to_owned(), addresses.to_vec()))
            })
            .collect()
    }

    fn record(&self, report: &ReconcileReport, started: Instant) {
        let metrics = &self.metrics;
        metrics.set_policy_counts(&self.indexes.policy_counts());
        metrics
            .identities
            .set(gauge_value(self.engine.identities().len()));
        metrics.endpoints.set(gauge_value(self.compiled.len()));
        // Only a change of some MapState changes their sum: counting every class of every local
        // endpoint again for each replica cost 6% of it at 40,000 pods.
        if !report.changed_pods.is_empty() || !self.synced {
            let entries: usize = self.engine.endpoints().map(|(_, map)| map.len()).sum();
            metrics.mapstate_entries.set(gauge_value(entries));
        }
        let over_budget = self.engine.over_budget().count();
        metrics.endpoints_over_budget.set(gauge_value(over_budget));
        let programmed: usize = self
            .enforcer
            .endpoints()
            .iter()
            .filter_map(|(endpoint, pod)| {
                let outcome = report.apply.outcomes.get(&endpoint.id)?;
                let in_place = matches!(outcome, Outcome::Updated { .. } | Outcome::Unchanged);
                in_place.then(|| pod.as_ref().and_then(|p| self.compiled.get(p)))?
            })
            .map(|rules| rules.rules.len())
            .sum();
        if report.discovery_error.is_none() {
            metrics.acl_rules.set(gauge_value(programmed));
        }
        for outcome in report.apply.outcomes.values() {
            let label = match outcome {
                Outcome::Updated { .. } => ProgramOutcome::Updated,
                Outcome::Failed { .. } => ProgramOutcome::Failed,
                Outcome::Gone => ProgramOutcome::Gone,
                Outcome::Refused { .. } => ProgramOutcome::Refused,
                Outcome::Unchanged | Outcome::Deferred { .. } => continue,
            };
            metrics
                .endpoint_programs
                .get_or_create(&super::metrics::OutcomeLabels { outcome: label })
                .inc();
        }
        metrics
            .reconcile_seconds
            .observe(started.elapsed().as_secs_f64());
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn indexes(&self) -> &Indexes {
        &self.indexes
    }

    /// Compiled rules by local pod key.
    pub fn compiled(&self) -> &BTreeMap<String, Arc<CompiledRules>> {
        &self.compiled
    }

    /// The host's endpoints as last discovered, with their pods.
    pub fn endpoints(&self) -> &[(EndpointInfo, Option<String>)] {
        self.enforcer.endpoints()
    }
}

/// Replicas on one node share a security identity and so a MapState: within one commit each
/// distinct MapState is compiled once and its rules shared, as Cilium shares one selector policy
/// per identity. A twin is reused only when the MapStates are equal, so sharing can never change
/// what is programmed.
#[derive(Debug, Default)]
struct CompileMemo {
    by_identities: HashMap<Vec<Option<IdentityId>>, String>,
}

impl CompileMemo {
    fn compiled_for(&self, identities: &[Option<IdentityId>]) -> Option<&str> {
        self.by_identities.get(identities).map(String::as_str)
    }

    fn remember(&mut self, identities: Vec<Option<IdentityId>>, key: &str) {
        if !identities.is_empty() {
            self.by_identities
                .entry(identities)
                .or_insert_with(|| key.to_owned());
        }
    }
}
