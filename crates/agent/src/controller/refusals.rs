//! Refusal Events from the controller: its replicas watch every policy kind and hold each
//! object to the checks and budgets agents apply (`indexes::Policies`, the same code); the
//! leader posts a Kubernetes Event on each refused object. One writer for the cluster: agents
//! beside a controller (slice mode) post only their node's own refusals
//! ([`crate::refusals::Posting::ByController`]) and read no Lease for it.
//!
//! Every replica keeps the index, so that a new leader knows at once what is refused: on each
//! new term it hands the reporter every refusal standing. Events are named from the object's
//! uid, reason and generation ([`crate::refusals`]), so what the previous leader posted already
//! is refused as AlreadyExists and counted as posted, not posted twice.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use netpol_indexes::{Applied, Policies, PolicyBudgets};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;

use super::{Leadership, THREAD_NAME};
use crate::daemon::INPUT_CAPACITY;
use crate::driver::Input;
use crate::health::{FatalOnUnwind, Health};
use crate::metrics::Metrics;
use crate::refusals::{refusals_of, Refusal, Reporter, ReporterConfig};
use crate::sources::cluster::{resources, spawn_follower, Sinks, WatchConfig};
use crate::sources::kube_api::KindApi;

/// How soon a replica that became the leader hands over the refusals standing, when no policy
/// event wakes it first.
const LEADERSHIP_CHECK: Duration = Duration::from_millis(500);

/// What the policy side of the controller is told.
pub(super) struct RefusalConfig {
    pub budgets: PolicyBudgets,
    pub watch: WatchConfig,
    /// The Lease's namespace and this replica's name, as its Events name it.
    pub namespace: String,
    pub identity: String,
}

/// Follows every policy kind on the current runtime, indexes them on a thread of its own and
/// posts the refusals while this replica leads.
pub(super) fn spawn(
    client: &Client,
    config: RefusalConfig,
    leadership: watch::Receiver<Leadership>,
    metrics: Metrics,
    health: Arc<Health>,
) -> std::io::Result<()> {
    let (inputs, receiver) = mpsc::sync_channel(INPUT_CAPACITY);
    let sinks = Sinks::new(inputs, metrics.clone(), health.clone());
    let kinds: Vec<_> = resources()
        .into_iter()
        .filter(|(kind, _)| kind.is_policy())
        .collect();
    for (kind, resource) in &kinds {
        let api = KindApi::new(client.clone(), resource.clone());
        spawn_follower(api, *kind, &sinks, config.watch);
    }
    let (refusals, refused) = tokio::sync::mpsc::unbounded_channel();
    let reporter = Reporter::new(
        client.clone(),
        ReporterConfig::for_controller(&config.namespace, &config.identity),
        kinds.into_iter().map(|(_, resource)| resource).collect(),
    );
    tokio::spawn(reporter.run(refused));
    let index = PolicyIndex {
        policies: Policies::with_budgets(config.budgets),
        leadership,
        term_handed_over: 0,
        refusals,
        metrics,
    };
    std::thread::Builder::new()
        .name(format!("{THREAD_NAME}-policies"))
        .spawn(move || {
            let _guard = FatalOnUnwind::new(&health, "the policy index");
            index.run(&receiver);
        })
        .map(|_| ())
}

struct PolicyIndex {
    policies: Policies,
    leadership: watch::Receiver<Leadership>,
    /// The last term whose standing refusals were handed to the reporter.
    term_handed_over: u64,
    refusals: UnboundedSender<Refusal>,
    metrics: Metrics,
}

impl PolicyIndex {
    fn run(mut self, receiver: &mpsc::Receiver<Input>) {
        loop {
            let applied = match receiver.recv_timeout(LEADERSHIP_CHECK).map(Input::made) {
                Ok(Some(Input::Event(source))) => self.policies.apply(source.kind, source.event),
                Ok(Some(Input::Rejected(kind, event))) => {
                    self.policies.apply_rejected(kind, *event)
                }
                Ok(_) | Err(RecvTimeoutError::Timeout) => Applied::default(),
                Err(RecvTimeoutError::Disconnected) => return,
            };
            // Logged and counted by every replica; posted by the leader.
            let new: Vec<Refusal> = applied
                .rejections
                .iter()
                .flat_map(|rejection| refusals_of(rejection, &self.metrics))
                .collect();
            self.hand_over(new);
        }
    }

    /// Hands `new` refusals to the reporter while this replica leads; in a new term, every
    /// refusal standing instead (`new` among them).
    fn hand_over(&mut self, new: Vec<Refusal>) {
        let Leadership { leader, term } = *self.leadership.borrow();
        if !leader {
            return;
        }
        let refusals: Vec<Refusal> = if term == self.term_handed_over {
            new
        } else {
            self.term_handed_over = term;
            self.policies.refused().map(Refusal::of).collect()
        };
        for refusal in refusals {
            // The reporter goes only with the runtime: the controller is stopping.
            let _ = self.refusals.send(refusal);
        }
    }
}
