//! Refusals where users look: an object the agent refuses (a policy that does not validate) gets
//! a Kubernetes Event on it, which `kubectl describe` shows, naming the field.
//!
//! Every agent watches every policy, so every agent sees every refusal; one writer per cluster
//! reports them, or thousands of nodes would post thousands of copies. In slice mode that writer
//! is `netpol controller` ([`Posting`]; `controller::refusals`) and agents post only their
//! node's own. In direct mode the reporter is an agent elected with a coordination.k8s.io Lease
//! (`netpol-refusals` in the agent's namespace): an agent holds it while it renews it, another
//! takes it over only once it has expired, and every write carries the resourceVersion read, so
//! two agents racing for it cannot both win (the API server answers the loser 409 Conflict).
//!
//! No polling in steady state: an agent reads the Lease only when it has refusals to report
//! ([`Reporter::run`]), and the holder renews it only while it has Events left to post. An agent
//! that finds the Lease held (and fresh) by another hands its refusals over: the holder sees the
//! same refusals (every agent watches every policy) and posts them. So an idle cluster costs no
//! request, and a refusal costs each agent one read of the Lease. Should the holder stop before
//! posting, the Event waits for the next refusal of that object (a new generation, an agent's
//! restart); the refusal is in every agent's log and `netpol_policy_rejections_total` meanwhile.
//!
//! Deduplication: one Event per object, reason and generation. The holder reads the refused
//! object once before posting (its uid, which `kubectl describe` matches Events by, and its
//! generation); the Event's name is derived from those (`NAME.netpol-HASH`), so a second post of the same refusal (by a new holder after a
//! takeover, or after a restart) is refused by the API server as AlreadyExists and counts as
//! posted; a new generation of the object that is still refused gets a new Event.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::{Api, Client};
use netpol_api::ValidationError;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::indexes::{is_over_budget, Rejection};
use crate::lease::{elect, LeaseConfig};
use crate::metrics::Metrics;

/// The reason of a refused policy's Event.
pub const INVALID_POLICY: &str = "InvalidPolicy";

/// The reason of the Event of a policy refused for a budget (`indexes::PolicyBudgets`).
pub const POLICY_OVER_BUDGET: &str = "PolicyOverBudget";

/// The reason of the Event on a pod some of whose rules this node's datapath refuses (HNS
/// answering `HCN_E_INVALID_POLICY`, [`crate::datapath_refusals`]). Only this node sees it, so
/// its agent posts it without holding the Lease.
pub const HNS_REFUSED_RULE: &str = "HnsRefusedRule";

/// One refused object, as the Event names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    pub reason: &'static str,
    /// The field at fault (`spec.ingress[0].ports[0].endPort`).
    pub field: String,
    pub message: String,
}

/// The object as the holder read it before posting: what `kubectl describe` matches Events by.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Found {
    api_version: String,
    uid: String,
    generation: i64,
}

impl Refusal {
    /// A policy that does not validate.
    pub fn invalid(error: &ValidationError) -> Refusal {
        Refusal {
            kind: error.object.kind.clone(),
            namespace: error.object.namespace.clone(),
            name: error.object.name.clone(),
            reason: INVALID_POLICY,
            field: error.field.clone(),
            message: error.message.clone(),
        }
    }

    /// The refusal the policy index's `error` stands for: over a budget (its message says so,
    /// `indexes::is_over_budget`) or invalid.
    pub fn of(error: &ValidationError) -> Refusal {
        if is_over_budget(error) {
            Refusal::over_budget(error)
        } else {
            Refusal::invalid(error)
        }
    }

    /// A valid policy over a budget: refused, its subject pods keeping only its isolation.
    pub fn over_budget(error: &ValidationError) -> Refusal {
        Refusal {
            reason: POLICY_OVER_BUDGET,
            ..Refusal::invalid(error)
        }
    }

    /// Rules of the pod `pod_key` (`namespace/name`) this node's datapath refuses, saying why.
    pub fn datapath(pod_key: &str, why: &str) -> Option<Refusal> {
        let (namespace, name) = pod_key.split_once('/')?;
        Some(Refusal {
            kind: "Pod".into(),
            namespace: Some(namespace.to_owned()),
            name: name.to_owned(),
            reason: HNS_REFUSED_RULE,
            field: String::new(),
            message: why.to_owned(),
        })
    }

    /// Whether only this node sees the refusal (its datapath's), so that it posts it itself.
    pub fn is_local(&self) -> bool {
        self.reason == HNS_REFUSED_RULE
    }

    /// What is remembered until posted: the object, the reason and what it says.
    fn pending_key(&self) -> String {
        format!(
            "{}/{}/{}/{}/{}/{}",
            self.kind,
            self.namespace.as_deref().unwrap_or_default(),
            self.name,
            self.reason,
            self.field,
            self.message
        )
    }

    /// What deduplicates Events: the object (by uid), the reason and the generation; for a
    /// datapath's refusal also what it says (a pod's rules change without a new generation).
    fn key(&self, found: &Found) -> String {
        let key = format!(
            "{}/{}/{}/{}/{}",
            self.kind, self.name, found.uid, self.reason, found.generation
        );
        if self.is_local() {
            format!("{key}/{}", self.message)
        } else {
            key
        }
    }

    /// The Event's name: the object's (cut to fit) and a hash of [`Self::key`].
    fn event_name(&self, found: &Found) -> String {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.key(found).hash(&mut hasher);
        let name: String = self.name.chars().take(200).collect();
        format!("{name}.netpol-{:016x}", hasher.finish())
    }

    /// The Event's text: the field, then why, then what the agent does.
    pub fn text(&self) -> String {
        let field = if self.field.is_empty() {
            String::new()
        } else {
            format!("{}: ", self.field)
        };
        let message: String = self.message.chars().take(512).collect();
        if self.reason == POLICY_OVER_BUDGET || self.is_local() {
            return format!("{field}{message}");
        }
        format!(
            "{field}{message}; netpol does not enforce this {}",
            self.kind
        )
    }

    fn event(&self, found: &Found, component: &str, reporter: &str) -> Event {
        let now = Timestamp::now();
        Event {
            metadata: ObjectMeta {
                name: Some(self.event_name(found)),
                // Events of cluster-scoped objects go to `default`, as kubectl looks there.
                namespace: Some(self.namespace.clone().unwrap_or_else(|| "default".into())),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                api_version: Some(found.api_version.clone()),
                kind: Some(self.kind.clone()),
                namespace: self.namespace.clone(),
                name: Some(self.name.clone()),
                uid: Some(found.uid.clone()),
                field_path: (!self.field.is_empty()).then(|| self.field.clone()),
                ..ObjectReference::default()
            },
            reason: Some(self.reason.to_owned()),
            message: Some(self.text()),
            type_: Some("Warning".into()),
            source: Some(EventSource {
                component: Some(component.to_owned()),
                host: Some(reporter.to_owned()),
            }),
            reporting_component: Some(component.to_owned()),
            reporting_instance: Some(reporter.to_owned()),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            count: Some(1),
            ..Event::default()
        }
    }
}

/// Logs and counts one refusal of a policy by the policy index; gives what to report of it,
/// an Event per error.
pub fn refusals_of(rejection: &Rejection, metrics: &Metrics) -> Vec<Refusal> {
    metrics.count_rejection(rejection.kind);
    if rejection.over_budget {
        metrics.count_over_budget(rejection.kind);
    }
    rejection
        .errors
        .iter()
        .map(|error| {
            let message = crate::logline::bounded(&error.message);
            let refusal = Refusal::of(error);
            if refusal.reason == POLICY_OVER_BUDGET {
                tracing::warn!(object = %error.object, "policy refused: {message}");
            } else {
                tracing::warn!(
                    object = %error.object,
                    field = %error.field,
                    "invalid policy skipped: {message}"
                );
            }
            refusal
        })
        .collect()
}

/// Who posts the refusals of policies, which every agent sees alike. A node's own refusals
/// ([`Refusal::is_local`]) are always posted by its agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Posting {
    /// Direct mode: the agent holding the Lease posts them.
    Elected,
    /// Slice mode: `netpol controller` posts them (one writer, no Lease between agents); the
    /// agent posts only its node's own.
    ByController,
    /// The controller's leader: it posts every refusal it is handed (the controller hands them
    /// over only while it leads, `controller::refusals`).
    Everything,
}

/// Where the Lease is, and who this reporter is.
#[derive(Clone, Debug)]
pub struct ReporterConfig {
    /// The agent's namespace (the Lease's).
    pub namespace: String,
    pub lease_name: String,
    /// This reporter's name: in the Lease (its node) and in its Events.
    pub identity: String,
    /// How long a holder that stopped renewing keeps the Lease.
    pub lease_duration: Duration,
    /// The Events' reporting component.
    pub component: &'static str,
    pub posting: Posting,
}

impl ReporterConfig {
    /// The defaults for the agent on `node` in direct mode: Lease `netpol-refusals` in
    /// `namespace`, 15 s.
    pub fn for_node(namespace: &str, node: &str) -> ReporterConfig {
        ReporterConfig {
            namespace: namespace.to_owned(),
            lease_name: "netpol-refusals".into(),
            identity: node.to_owned(),
            lease_duration: Duration::from_secs(15),
            component: AGENT,
            posting: Posting::Elected,
        }
    }

    /// The agent on `node` in slice mode: the controller posts what every agent sees.
    pub fn for_node_beside_controller(namespace: &str, node: &str) -> ReporterConfig {
        ReporterConfig {
            posting: Posting::ByController,
            ..ReporterConfig::for_node(namespace, node)
        }
    }

    /// The controller replica `identity`, posting what it is handed.
    pub fn for_controller(namespace: &str, identity: &str) -> ReporterConfig {
        ReporterConfig {
            component: CONTROLLER,
            posting: Posting::Everything,
            ..ReporterConfig::for_node(namespace, identity)
        }
    }
}

/// The Events' reporting components.
const AGENT: &str = "netpol-agent";
const CONTROLLER: &str = "netpol-controller";

/// Posts the refusals it is told of: as [`Posting`] says, while it holds the Lease, always (the
/// controller's), or only its node's own.
pub struct Reporter {
    client: Client,
    config: ReporterConfig,
    /// The kinds whose objects can be refused, to read them back by.
    kinds: Vec<ApiResource>,
    pending: BTreeMap<String, Refusal>,
    posted: BTreeSet<String>,
    holder: bool,
}

impl Reporter {
    /// A reporter through `client`, reading refused objects back as `kinds` serve them (the
    /// agent's watched kinds, `sources::cluster::resources`).
    pub fn new(client: Client, config: ReporterConfig, kinds: Vec<ApiResource>) -> Reporter {
        Reporter {
            client,
            holder: config.posting == Posting::Everything,
            config,
            kinds,
            pending: BTreeMap::new(),
            posted: BTreeSet::new(),
        }
    }

    /// Whether this reporter posts every refusal: it held the Lease at its last election, or
    /// it is the controller's.
    pub fn is_holder(&self) -> bool {
        self.holder
    }

    /// Remembers a refusal until it is posted.
    pub fn refused(&mut self, refusal: Refusal) {
        self.pending.insert(refusal.pending_key(), refusal);
    }

    /// The refused object as the API server holds it now; None when it is gone, or of a kind
    /// the agent does not watch.
    async fn find(&self, refusal: &Refusal) -> Result<Option<Found>, kube::Error> {
        let Some(resource) = self.kinds.iter().find(|r| r.kind == refusal.kind) else {
            return Ok(None);
        };
        let api: Api<DynamicObject> = match &refusal.namespace {
            Some(namespace) => Api::namespaced_with(self.client.clone(), namespace, resource),
            None => Api::all_with(self.client.clone(), resource),
        };
        Ok(api.get_opt(&refusal.name).await?.map(|object| Found {
            api_version: resource.api_version.clone(),
            uid: object.metadata.uid.unwrap_or_default(),
            generation: object.metadata.generation.unwrap_or_default(),
        }))
    }

    /// Takes or renews the Lease: creates it if there is none, renews it if this agent holds
    /// it, takes it over if its holder let it expire. A 409 (another agent wrote it first) is
    /// losing, not an error.
    pub async fn elect(&mut self) -> Result<bool, kube::Error> {
        let lease = LeaseConfig {
            namespace: self.config.namespace.clone(),
            name: self.config.lease_name.clone(),
            identity: self.config.identity.clone(),
            duration: self.config.lease_duration,
        };
        let result = elect(&self.client, &lease).await;
        self.holder = matches!(result, Ok(true));
        result
    }

    /// Posts every remembered refusal if this agent holds the Lease, and this node's own
    /// ([`Refusal::is_local`]) whether it does or not; returns how many Events it created. An Event that exists already (posted by an earlier holder) counts as posted;
    /// one that fails otherwise stays remembered for the next turn.
    pub async fn post(&mut self) -> usize {
        let mut created = 0;
        for (pending, refusal) in std::mem::take(&mut self.pending) {
            // This node's own refusals need no Lease: no other agent sees them.
            if !self.holder && !refusal.is_local() {
                self.pending.insert(pending, refusal);
                continue;
            }
            let found = match self.find(&refusal).await {
                Ok(Some(found)) => found,
                Ok(None) => continue, // gone: nothing to describe
                Err(error) => {
                    tracing::warn!(object = %refusal.name, "reading a refused object: {error}");
                    self.pending.insert(pending, refusal);
                    continue;
                }
            };
            let key = refusal.key(&found);
            if self.posted.contains(&key) {
                continue;
            }
            let namespace = refusal.namespace.as_deref().unwrap_or("default");
            let events: Api<Event> = Api::namespaced(self.client.clone(), namespace);
            match events
                .create(
                    &PostParams::default(),
                    &refusal.event(&found, self.config.component, &self.config.identity),
                )
                .await
            {
                Ok(_) => {
                    created += 1;
                    self.posted.insert(key);
                }
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    self.posted.insert(key);
                }
                Err(error) => {
                    tracing::warn!(object = %refusal.name, "posting a refusal Event: {error}");
                    self.pending.insert(pending, refusal);
                }
            }
        }
        created
    }

    /// Forgets the remembered refusals the Lease's holder posts (every one but this node's own).
    pub fn hand_over(&mut self) -> usize {
        let before = self.pending.len();
        self.pending.retain(|_, refusal| refusal.is_local());
        before - self.pending.len()
    }

    /// Runs until `refusals` closes. Idle, it makes no request. A burst of refusals is taken
    /// whole, then the Lease is read: the holder (this agent, if the Lease is free, expired or
    /// its own) posts them; otherwise they are handed over. This node's own refusals are posted
    /// either way, with no read of the Lease when they are all there is. Posts that failed are retried every
    /// third of the Lease's duration, renewing it, until none is left.
    pub async fn run(mut self, mut refusals: UnboundedReceiver<Refusal>) {
        let retry = self.config.lease_duration / 3;
        loop {
            let received = if self.pending.is_empty() {
                match refusals.recv().await {
                    Some(refusal) => Some(refusal),
                    None => return,
                }
            } else {
                match tokio::time::timeout(retry, refusals.recv()).await {
                    Ok(Some(refusal)) => Some(refusal),
                    Ok(None) => return,
                    Err(_) => None, // time to retry what is left
                }
            };
            if let Some(refusal) = received {
                self.refused(refusal);
            }
            while let Ok(refusal) = refusals.try_recv() {
                self.refused(refusal);
            }
            // This node's own refusals alone need no Lease (nor a read of it).
            let others = self.pending.values().any(|refusal| !refusal.is_local());
            match self.config.posting {
                Posting::Elected if others => match self.elect().await {
                    Ok(true) => {}
                    Ok(false) => {
                        self.hand_over();
                    }
                    // Kept for the next turn; this node's own are posted all the same.
                    Err(error) => tracing::warn!("the refusal reporter's Lease: {error}"),
                },
                Posting::ByController => {
                    self.hand_over();
                }
                Posting::Elected | Posting::Everything => {}
            }
            self.post().await;
        }
    }
}
