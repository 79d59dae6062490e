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

use super::datapath_refusals::DatapathRefusals;
use super::indexes::{Applied, Indexes, OwnNode, PolicyBudgets, SourceEvent};
use super::kind::SourceKind;
use super::metrics::{gauge_value, Metrics, ProgramOutcome};
use super::refusals::{refusals_of, Refusal};
use super::would_be::WouldBeRules;
use netpol_api::ValidationError;
use netpol_datapath::{
    compile_endpoint_indexed, ApplyReport, Backoff, CompileIndex, CompileOptions, CompiledPods,
    CompiledRules, DatapathError, Desired, EndpointInfo, Enforcer, LocalPods, Outcome, PatchMemo,
};
use netpol_engine::mapstate::ClassChange;
use netpol_engine::{EndpointChanges, Engine, EngineConfig, IdentityId, Shared, SharedId};
use netpol_hcn::discovery::EndpointDiscovery;
use netpol_hcn::{HcnApi, HcnEnforcer};
use netpol_indexes::Event;

/// What one reconcile did.
#[derive(Debug, Default)]
pub struct ReconcileReport {
    /// Local endpoints (pod keys) whose MapState changed in this reconcile.
    pub changed_pods: Vec<String>,
    /// How many distinct compiled lists this reconcile patched by the change, and how many it
    /// compiled in full (twins share one; see [`netpol_datapath::compile::patch`]).
    pub patched: usize,
    pub compiled: usize,
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
    /// This node's name.
    node: String,
    /// Where the own Node object stood after the last event, to log and count its changes.
    own_node: Option<OwnNode>,
    engine: Engine,
    /// Compiled rules of each local pod.
    compiled: CompiledPods,
    /// How each local pod's rules were compiled, so that a change can patch them.
    compile_indexes: HashMap<String, Arc<CompileIndex>>,
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
    /// What each endpoint's rules were last reported refused by the datapath for.
    datapath_refusals: DatapathRefusals,
    /// A policy event came in since the policy gauges were last set: counting every policy
    /// for each pod's change cost a tenth of a replica at 40,000 pods.
    policies_touched: bool,
    /// The would-be rules of audited pods, where the datapath reports would-denies (None
    /// elsewhere: the engine then drops audited entries).
    would_be: Option<WouldBeRules>,
    /// The would-be rules of a datapath that reports none.
    no_audit: CompiledPods,
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
        let mut engine = Engine::new(EngineConfig {
            local_node: Some(node.to_owned()),
            ..EngineConfig::default()
        });
        let would_be = enforcer.reports_would_deny().then(|| {
            engine.keep_audited();
            WouldBeRules::default()
        });
        Pipeline {
            indexes: Indexes::for_node(node),
            node: node.to_owned(),
            own_node: None,
            engine,
            compiled: BTreeMap::new(),
            compile_indexes: HashMap::new(),
            changed_identities: BTreeSet::new(),
            unacknowledged_since: None,
            enforcer,
            metrics,
            options,
            staged: false,
            resync_due: false,
            synced: false,
            refusals: None,
            datapath_refusals: DatapathRefusals::default(),
            policies_touched: true,
            would_be,
            no_audit: CompiledPods::new(),
        }
    }

    /// Holds every endpoint to `limit` MapState entries from the next commit on: an endpoint
    /// whose policy needs more is isolated (see `netpol_engine::engine::OverBudget`).
    pub fn set_max_policy_entries(&mut self, limit: usize) {
        self.engine.set_max_entries(limit);
    }

    /// Holds every policy to `budgets` (`PolicyBudgets`, per object and per namespace). Call it
    /// before the first event is ingested: the index is replaced.
    pub fn set_policy_budgets(&mut self, budgets: PolicyBudgets) {
        debug_assert!(
            !self.synced && !self.staged,
            "budgets are set before any event"
        );
        self.indexes.set_policy_budgets(budgets);
    }

    /// Audits every policy (`--audit`): what it would deny is passed. Call it before the first
    /// event is ingested, as the policy index is replaced by [`Pipeline::set_policy_budgets`].
    pub fn audit_all(&mut self) {
        debug_assert!(
            !self.synced && !self.staged,
            "audit is set before any event"
        );
        self.indexes.audit_all();
    }

    /// Sends every object refused from now on to `refusals` as well as to the log.
    pub fn report_refusals(&mut self, refusals: tokio::sync::mpsc::UnboundedSender<Refusal>) {
        self.refusals = Some(refusals);
    }

    /// Feeds one watch event: updates the indexes and stages the resulting engine updates.
    pub fn ingest(&mut self, event: SourceEvent) {
        self.note_received(event.received);
        self.policies_touched |= event.kind.is_policy();
        let applied = self.indexes.apply(event);
        self.stage(applied);
        self.note_own_node();
    }

    /// Logs and counts a change of where the own Node object stands.
    fn note_own_node(&mut self) {
        let now = self.indexes.own_node();
        if now == self.own_node {
            return;
        }
        self.own_node = now;
        let missing = matches!(now, Some(OwnNode::MissingKept | OwnNode::MissingNeverSeen));
        self.metrics.own_node_missing.set(i64::from(missing));
        match now {
            Some(OwnNode::Present) => {
                tracing::info!(node = %self.node, "this node's Node object is present");
            }
            Some(_) => {
                tracing::warn!(node = %self.node, "{}", self.own_node_problem().unwrap_or_default())
            }
            None => {}
        }
    }

    /// Why the own Node object makes the agent not ready, if it does: it is missing, and
    /// either its last known addresses stand in for it or none are known.
    pub fn own_node_problem(&self) -> Option<String> {
        let node = &self.node;
        match self.indexes.own_node()? {
            OwnNode::Present => None,
            OwnNode::MissingKept => Some(format!(
                "this node's Node object {node} is missing (deleted or not readable): its last known addresses keep admitting kubelet probes"
            )),
            OwnNode::MissingNeverSeen => Some(format!(
                "this node's Node object {node} is missing (not yet created or not readable) and its addresses were never known: kubelet probes to pods under ingress isolation are denied"
            )),
        }
    }

    /// Why refused policies make the agent not ready, if any is: each is left out (invalid) or
    /// keeps only its isolation (over budget), so the node does not enforce what was written.
    pub fn refused_policies_problem(&self) -> Option<String> {
        const SHOWN: usize = 3;
        let refused: Vec<String> = self
            .indexes
            .refused_policies()
            .map(|error| crate::logline::bounded(&error.to_string()).into_owned())
            .collect();
        if refused.is_empty() {
            return None;
        }
        let more = refused.len().saturating_sub(SHOWN);
        Some(format!(
            "{} policy object(s) refused: {}{}",
            refused.len(),
            refused[..refused.len().min(SHOWN)].join("; "),
            if more > 0 {
                format!("; and {more} more")
            } else {
                String::new()
            }
        ))
    }

    /// Slice mode: the pods of other nodes come from NetpolEndpointSlices
    /// ([`Pipeline::ingest_slice`]), the pod watch carries this node's own pods alone. Call it
    /// before the first event is ingested.
    pub fn read_remote_pods_from_slices(&mut self) {
        debug_assert!(!self.synced && !self.staged, "set before any event");
        self.indexes.read_remote_pods_from_slices(&self.node);
    }

    /// Feeds one NetpolEndpointSlice event (slice mode) and stages what it changes.
    pub fn ingest_slice(&mut self, event: Event<netpol_api::crd::NetpolEndpointSlice>) {
        self.note_received(Instant::now());
        let applied = self.indexes.apply_slices(event);
        self.stage(applied);
    }

    /// Feeds the event of a policy its source could not read: it counts as invalid and replaces
    /// what its key held.
    pub fn ingest_rejected(&mut self, kind: SourceKind, event: Event<ValidationError>) {
        self.note_received(Instant::now());
        self.policies_touched = true;
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
            for refusal in refusals_of(rejection, &self.metrics) {
                if let Some(refusals) = &self.refusals {
                    let _ = refusals.send(refusal);
                }
            }
        }
        // Once per policy as it becomes audited, not per sync: the datapath enforces none of
        // its entries; what it says of its would-be denies depends on the datapath
        // (docs/semantics.md).
        for policy in &applied.audited {
            if self.would_be.is_some() {
                tracing::warn!(
                    policy = %policy,
                    "policy in audit mode: not enforced; what it would deny passes, counted and \
                     logged as would-deny (netpol_rule_packets_total{{verdict=\"would-deny\"}}, \
                     /flows)"
                );
            } else {
                tracing::warn!(
                    policy = %policy,
                    "policy in audit mode: not enforced; its denies are not programmed and what \
                     it would deny passes unreported: this datapath cannot count or log \
                     (netpol_audited_policies)"
                );
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
            self.commit(&mut report);
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
            // Fields, not `would_be_rules()`: the enforcer is borrowed mutably beside them.
            audit: self
                .would_be
                .as_ref()
                .map_or(&self.no_audit, WouldBeRules::compiled),
        };
        match self.enforcer.enforce(&desired, refresh, now) {
            Ok(apply) => {
                report.apply = apply;
                self.changed_identities.clear();
            }
            // The identities whose addresses changed are given again next time: the datapath
            // may not have taken them in (bringing a set up to date again is harmless).
            Err(error) => {
                self.resync_due = refresh;
                report.discovery_error = Some(error);
            }
        }
        self.report_datapath_refusals(&report.apply);
        self.record(&report, started);
        self.policies_touched = false;
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

    /// Commits the engine and brings the compiled rules of the endpoints that changed up to date;
    /// records the changed pods in `report`. An endpoint the engine updated class by class (a pod
    /// came or went elsewhere) has its rules patched by those classes where that is exact, else
    /// compiled anew; each distinct MapState (twins share one) is compiled once. Addresses that
    /// joined or left identities change no compiled rule: the enforcer hears of the identities
    /// and updates the address sets that name them.
    fn commit(&mut self, report: &mut ReconcileReport) {
        let changes = self.engine.commit_classes();
        self.changed_identities
            .extend(self.engine.changed_identities().iter().copied());
        let mut memo = CompileMemo::default();
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
                self.compile_indexes.remove(&change.endpoint);
            } else {
                self.compile(&change.endpoint, Some(&change), &mut memo);
            }
            report.changed_pods.push(change.endpoint);
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
            self.compile(&key, None, &mut memo);
        }
        report.patched += memo.patched;
        report.compiled += memo.compiled;
        if let Some(would_be) = &mut self.would_be {
            would_be.update(&self.engine, &self.options);
        }
    }

    /// The full recomputation must agree with the incremental one, and rules compiled in full
    /// with the rules patched by the changes; any difference is a bug worth a warning, and what
    /// was computed in full wins.
    fn check_engine_drift(&mut self) -> Vec<String> {
        let drifted = self.engine.recompute_all();
        let mut keys = Vec::new();
        for change in drifted {
            tracing::warn!(
                endpoint = %change.endpoint,
                classes = change.changes.len(),
                "full recomputation differs from the incremental MapState; using it"
            );
            self.compile(&change.endpoint, None, &mut CompileMemo::default());
            keys.push(change.endpoint);
        }
        let mut memo = CompileMemo::default();
        let held: Vec<(String, Shared<CompiledRules>)> = self
            .compiled
            .iter()
            .map(|(key, rules)| (key.clone(), rules.clone()))
            .collect();
        for (key, rules) in held {
            self.compile(&key, None, &mut memo);
            if self.compiled.get(&key) != Some(&rules) {
                tracing::warn!(
                    endpoint = %key,
                    "rules patched by the change differ from the rules compiled anew; using those"
                );
                keys.push(key);
            }
        }
        keys
    }

    /// Brings endpoint `key`'s compiled rules up to its MapState: patched by `change` where it
    /// lists the classes that changed, else compiled anew.
    fn compile(&mut self, key: &str, change: Option<&EndpointChanges>, memo: &mut CompileMemo) {
        let Some(map) = self.engine.endpoint_shared(key).cloned() else {
            self.compiled.remove(key);
            self.compile_indexes.remove(key);
            return;
        };
        if let Some((rules, index)) = memo.done.get(&map.id()) {
            self.compiled.insert(key.to_owned(), rules.clone());
            self.compile_indexes.insert(key.to_owned(), index.clone());
            return;
        }
        let patched = match (
            change,
            self.compiled.get(key),
            self.compile_indexes.get(key),
        ) {
            (Some(change), Some(rules), Some(index)) if !change.readdressed && !change.unlisted => {
                patch_rules(rules, index, &change.changes, &self.engine, &mut memo.sets)
            }
            _ => None,
        };
        let result = match patched {
            Some(done) => {
                memo.patched += 1;
                Ok(done)
            }
            None => {
                memo.compiled += 1;
                compile_endpoint_indexed(&map, self.engine.identities(), &self.options)
            }
        };
        match result {
            Ok((rules, index)) => {
                for warning in &rules.warnings {
                    tracing::warn!(endpoint = %key, "{warning}");
                }
                let done = (Shared::new(rules), Arc::new(index));
                self.compiled.insert(key.to_owned(), done.0.clone());
                self.compile_indexes.insert(key.to_owned(), done.1.clone());
                memo.done.insert(map.id(), done);
            }
            // The previous rules, if any, stay in force: better than none at all.
            Err(error) => tracing::error!(endpoint = %key, %error, "compiling rules failed"),
        }
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

    /// Counts each new refusal of an endpoint's rules by the datapath once, and reports it as an
    /// Event on the endpoint's pod ([`crate::datapath_refusals`]).
    fn report_datapath_refusals(&mut self, apply: &ApplyReport) {
        let endpoints = self.enforcer.endpoints();
        let pod_of = |endpoint: &str| {
            endpoints
                .iter()
                .find(|(info, _)| info.id == endpoint)
                .and_then(|(_, pod)| pod.as_deref())
        };
        for new in self.datapath_refusals.update(apply, pod_of) {
            tracing::warn!(endpoint = %new.endpoint, pod = ?new.pod, "the datapath refuses rules of the pod: {}", new.why);
            self.metrics
                .endpoint_programs
                .get_or_create(&super::metrics::OutcomeLabels {
                    outcome: ProgramOutcome::Refused,
                })
                .inc();
            let refusal = new
                .pod
                .as_deref()
                .and_then(|pod| Refusal::datapath(pod, &new.why));
            if let (Some(refusals), Some(refusal)) = (&self.refusals, refusal) {
                let _ = refusals.send(refusal);
            }
        }
    }

    fn record(&self, report: &ReconcileReport, started: Instant) {
        let metrics = &self.metrics;
        if self.policies_touched {
            metrics.set_policy_counts(&self.indexes.policy_counts());
        }
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
                // Counted once each, by `report_datapath_refusals`.
                Outcome::Refused { .. } | Outcome::Unchanged | Outcome::Deferred { .. } => continue,
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

    /// What the compiler may use on this pipeline's datapath.
    pub fn compile_options(&self) -> &CompileOptions {
        &self.options
    }

    /// The would-be rules of the local pods audited policies select, by pod key (none where
    /// the datapath cannot report would-denies).
    pub fn would_be_rules(&self) -> &CompiledPods {
        self.would_be
            .as_ref()
            .map_or(&self.no_audit, WouldBeRules::compiled)
    }

    /// Compiled rules by local pod key.
    pub fn compiled(&self) -> &CompiledPods {
        &self.compiled
    }

    /// The host's endpoints as last discovered, with their pods.
    pub fn endpoints(&self) -> &[(EndpointInfo, Option<String>)] {
        self.enforcer.endpoints()
    }
}

/// `rules` patched by a commit's class `changes` of their endpoint, with the identities the
/// commit changed; None where a patch does not apply.
fn patch_rules(
    rules: &CompiledRules,
    index: &CompileIndex,
    changes: &[ClassChange],
    engine: &Engine,
    sets: &mut PatchMemo,
) -> Option<(CompiledRules, CompileIndex)> {
    netpol_datapath::compile::patch(
        rules,
        index,
        changes,
        engine.changed_identities(),
        engine.identities(),
        sets,
    )
}

/// What one commit compiled. Replicas on one node share a security identity and so a MapState
/// (one allocation, which the engine shares between twins): within one commit each distinct
/// MapState is compiled (or patched) once and its rules shared, as Cilium shares one selector
/// policy per identity. Keyed by the map's id, so sharing can never change what is
/// programmed: the same id is the same map.
#[derive(Debug, Default)]
struct CompileMemo {
    done: HashMap<SharedId, (Shared<CompiledRules>, Arc<CompileIndex>)>,
    /// Remote sets patched in this commit, shared between the endpoints naming them.
    sets: PatchMemo,
    patched: usize,
    compiled: usize,
}
