//! The nftables datapath behind the neutral [`Enforcer`]: the whole ruleset in one table, one
//! transaction per change, and an endpoint whose chains the kernel refuses isolated alone.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use netpol_datapath::{
    ApplyReport, Backoff, CompileOptions, CompiledRules, DatapathError, Desired, EndpointInfo,
    Enforcer, Outcome, RemoteSet,
};

use netpol_engine::Direction;

use crate::counters::{RuleBook, SharedRuleBook};
use crate::droplog::DropLog;
use crate::isolate::{program_isolating, Programmed};
use crate::naming::endpoint_prefix;
use crate::programmer::{Known, NftBackend};
use crate::ruleset::{EndpointChains, Ruleset, SetCache};
use netpol_engine::{Shared, SharedId};

/// An endpoint whose chains the kernel refused: isolated until `retry_at`, or until its chains
/// change.
#[derive(Clone, Debug)]
struct Refusal {
    chains: EndpointChains,
    error: DatapathError,
    failures: u32,
    retry_at: Instant,
}

/// nftables: the whole ruleset in one table, one transaction per change.
///
/// A local pod's endpoint is the pod itself (matched by its addresses, as kube-network-policies
/// does, whatever CNI made its interface), so endpoints are keyed by pod key.
pub struct NftEnforcer {
    backend: Box<dyn NftBackend + Send>,
    backoff: Backoff,
    endpoints: Vec<(EndpointInfo, Option<String>)>,
    /// What the kernel holds, as last programmed; None when it must be read back (at start,
    /// after a failure, on a resync).
    programmed: Option<Ruleset>,
    /// Consecutive failures of whole transactions.
    failures: u32,
    retry_at: Option<Instant>,
    /// Endpoints whose chains the kernel refused, by pod key.
    refused: BTreeMap<String, Refusal>,
    /// The chains and sets the kernel holds, as the programmer knows them.
    known: Option<Known>,
    /// The sets the compiled lists in use name, kept by the change (see [`SetCache`]).
    cache: SetCache,
    /// The chains of each compiled list in use, by the list's id and whether it is a would-be list
    /// ([`Desired::audit`], built as audit chains): replicas share a list, and a list kept in
    /// use is not built again.
    lists: HashMap<ListKey, (Shared<CompiledRules>, EndpointChains)>,
    /// Which policy rule each programmed chain rule is, for counters and the drop log.
    book: SharedRuleBook,
    /// Where drop rules log, and how fast.
    drop_log: DropLog,
}

impl NftEnforcer {
    pub fn new(backend: Box<dyn NftBackend + Send>, backoff: Backoff) -> Self {
        NftEnforcer {
            backend,
            backoff,
            endpoints: Vec::new(),
            programmed: None,
            failures: 0,
            retry_at: None,
            refused: BTreeMap::new(),
            known: None,
            cache: SetCache::default(),
            lists: HashMap::new(),
            book: SharedRuleBook::default(),
            drop_log: DropLog::default(),
        }
    }

    /// Drop rules log to `drop_log`'s group at its rate (`--nflog-group`, `--drop-log-rate`)
    /// instead of the defaults.
    pub fn with_drop_log(mut self, drop_log: DropLog) -> Self {
        self.drop_log = drop_log;
        self
    }

    /// The book of the table programmed last, kept up to date as the table changes.
    pub fn rule_book(&self) -> SharedRuleBook {
        self.book.clone()
    }

    /// Records the chains of the table just programmed in the book.
    fn publish_book(&self, ruleset: &Ruleset) {
        if let Some(known) = &self.known {
            self.book
                .set(RuleBook::build(known.renders.chains(), ruleset.addresses()));
        }
    }

    /// The table the pods' compiled rules make. A pod whose rules never compiled is left out;
    /// an address two pods claim (a dying pod and its successor, briefly) goes to the first, as
    /// on HCN, since one packet cannot be matched to two chains. The sets of the lists that came
    /// into and went out of use are booked first, so that every set is named when chains are
    /// built; on a refresh every list is built again and every set resolved anew (names kept).
    fn ruleset(&mut self, desired: &Desired<'_>, refresh: bool) -> Ruleset {
        let store = desired.identities;
        let enforced = desired.compiled.values().map(|list| (list, false));
        let would_be = desired.audit.values().map(|list| (list, true));
        let live: HashMap<ListKey, &Shared<CompiledRules>> = enforced
            .chain(would_be)
            .map(|(list, audit)| ((list.id(), audit), list))
            .collect();
        let lost: Vec<Shared<CompiledRules>> = if refresh {
            self.lists.drain().map(|(_, (list, _))| list).collect()
        } else {
            let gone: Vec<ListKey> = self
                .lists
                .keys()
                .filter(|list| !live.contains_key(list))
                .copied()
                .collect();
            gone.iter()
                .filter_map(|list| self.lists.remove(list))
                .map(|(list, _)| list)
                .collect()
        };
        let gained: Vec<(ListKey, &Shared<CompiledRules>)> = live
            .iter()
            .filter(|(key, _)| !self.lists.contains_key(key))
            .map(|(key, list)| (*key, *list))
            .collect();
        self.cache.step(
            store,
            desired.changed,
            gained.iter().flat_map(|(_, list)| remote_sets(list)),
            lost.iter().flat_map(|list| remote_sets(list)),
        );
        if refresh {
            let corrected = self.cache.refresh(store);
            if corrected > 0 {
                tracing::warn!(
                    sets = corrected,
                    "address sets patched by the change differ from the sets resolved anew; using those"
                );
            }
        }
        for (key, list) in gained {
            let cache = &mut self.cache;
            let chains =
                EndpointChains::build(Vec::new(), &list.rules, |set| match cache.model(set) {
                    Some(model) => model.reference(),
                    None => cache.resolve(set, store).reference(),
                });
            // Would-be rules are audit chains: their denies are would-denies.
            let chains = if key.1 { chains.as_would_be() } else { chains };
            self.lists.insert(key, (list.clone(), chains));
        }
        let mut ruleset = Ruleset {
            sets: self.cache.by_name().clone(),
            drop_log: self.drop_log,
            ..Ruleset::default()
        };
        let mut claimed = HashSet::new();
        for (key, addresses) in desired.pods {
            let Some(rules) = desired.compiled.get(key) else {
                continue;
            };
            let own: Vec<_> = addresses
                .iter()
                .copied()
                .filter(|a| claimed.insert(*a))
                .collect();
            if !own.is_empty() {
                let (_, chains) = &self.lists[&(rules.id(), false)];
                let mut chains = chains.for_addresses(own);
                if let Some(would_be) = desired.audit.get(key) {
                    let (_, audit) = &self.lists[&(would_be.id(), true)];
                    chains = chains.with_audit(audit);
                }
                ruleset.insert(key.clone(), chains);
            }
        }
        ruleset
    }

    /// Isolates in `ruleset` the endpoints refused earlier whose retry is not due and whose
    /// chains did not change; returns them with their retry times.
    fn hold_refused(&mut self, ruleset: &mut Ruleset, now: Instant) -> BTreeMap<String, Instant> {
        self.refused
            .retain(|key, _| ruleset.endpoints.contains_key(key));
        let mut held = BTreeMap::new();
        for (key, refusal) in &self.refused {
            if now < refusal.retry_at && ruleset.endpoints.get(key) == Some(&refusal.chains) {
                ruleset.isolate(key);
                held.insert(key.clone(), refusal.retry_at);
            }
        }
        held
    }

    /// Records what the kernel refused in this transaction and isolates it in `ruleset`; every
    /// endpoint tried again and accepted is forgiven.
    fn note_refusals(
        &mut self,
        ruleset: &mut Ruleset,
        refused: BTreeMap<String, String>,
        held: &BTreeMap<String, Instant>,
        now: Instant,
    ) {
        self.refused
            .retain(|key, _| held.contains_key(key) || refused.contains_key(key));
        for (key, message) in refused {
            let Some(chains) = ruleset.endpoints.get(&key).cloned() else {
                continue;
            };
            let failures = self.refused.get(&key).map_or(0, |r| r.failures) + 1;
            let retry_at = now + self.backoff.delay(failures);
            let error = DatapathError::Call {
                call: "nft -f",
                endpoint: Some(key.clone()),
                message,
            };
            tracing::error!(
                endpoint = %key,
                failures,
                %error,
                "nftables refused this endpoint's chains: new flows to and from it are dropped \
                 until they load; every other endpoint is programmed"
            );
            ruleset.isolate(&key);
            self.refused.insert(
                key,
                Refusal {
                    chains,
                    error,
                    failures,
                    retry_at,
                },
            );
        }
    }

    /// The outcome of a refused endpoint: failed in this transaction, or still waiting.
    fn refusal_outcome(&self, key: &str, held: &BTreeMap<String, Instant>) -> Option<Outcome> {
        if let Some(retry_at) = held.get(key) {
            return Some(Outcome::Deferred {
                retry_at: *retry_at,
            });
        }
        self.refused.get(key).map(|r| Outcome::Failed {
            error: r.error.clone(),
            failures: r.failures,
            retry_at: r.retry_at,
        })
    }
}

/// The same kind of outcome for every endpoint of `ruleset`, programmed or isolated.
fn report(ruleset: &Ruleset, outcome: impl Fn(&str) -> Outcome) -> ApplyReport {
    ApplyReport {
        outcomes: ruleset
            .endpoints
            .keys()
            .chain(ruleset.isolated.keys())
            .map(|k| (k.clone(), outcome(k)))
            .collect(),
    }
}

impl Enforcer for NftEnforcer {
    fn enforce(
        &mut self,
        desired: &Desired<'_>,
        refresh: bool,
        now: Instant,
    ) -> Result<ApplyReport, DatapathError> {
        self.endpoints = desired
            .pods
            .iter()
            .map(|(key, addresses)| {
                let info = EndpointInfo {
                    id: key.clone(),
                    name: key.clone(),
                    addresses: addresses.clone(),
                };
                (info, Some(key.clone()))
            })
            .collect();
        if refresh {
            self.programmed = None;
            self.known = None;
            self.retry_at = None;
        }
        let mut ruleset = self.ruleset(desired, refresh);
        let held = self.hold_refused(&mut ruleset, now);
        if let Some(retry_at) = self.retry_at.filter(|at| now < *at) {
            return Ok(report(&ruleset, |_| Outcome::Deferred { retry_at }));
        }
        if self.programmed.as_ref() == Some(&ruleset) {
            return Ok(report(&ruleset, |k| {
                self.refusal_outcome(k, &held).unwrap_or(Outcome::Unchanged)
            }));
        }
        match program_isolating(self.backend.as_ref(), &mut self.known, &ruleset) {
            Ok(Programmed {
                report: done,
                refused,
            }) => {
                self.note_refusals(&mut ruleset, refused, &held, now);
                let before = self.programmed.take();
                self.failures = 0;
                self.retry_at = None;
                let outcomes = report(&ruleset, |key| {
                    if let Some(outcome) = self.refusal_outcome(key, &held) {
                        return outcome;
                    }
                    let old = before.as_ref().and_then(|r| r.endpoints.get(key));
                    let new = &ruleset.endpoints[key];
                    // Only a change of its chains counts: new set elements (a replica) update
                    // the sets, not the endpoints. After a read-back only the chain names are
                    // known: a pod counts as updated when one of its chains was added.
                    let changed = match &before {
                        Some(_) => !old.is_some_and(|old| old.same_chains(new)),
                        None => {
                            let prefixes = Direction::BOTH.map(|d| endpoint_prefix(key, d));
                            done.added
                                .iter()
                                .any(|n| prefixes.iter().any(|p| n.starts_with(p.as_str())))
                        }
                    };
                    if changed {
                        Outcome::Updated {
                            added: new.rules(),
                            removed: old.map_or(0, EndpointChains::rules),
                        }
                    } else {
                        Outcome::Unchanged
                    }
                });
                tracing::debug!(
                    added = done.added.len(),
                    deleted = done.deleted.len(),
                    sets_added = done.sets_added,
                    sets_deleted = done.sets_deleted,
                    elements_added = done.elements_added,
                    elements_deleted = done.elements_deleted,
                    bytes = done.script.as_ref().map_or(0, String::len),
                    unchanged = done.unchanged,
                    isolated = ruleset.isolated.len(),
                    "nftables table programmed"
                );
                if before.is_none() || !done.added.is_empty() || !done.deleted.is_empty() {
                    self.publish_book(&ruleset);
                }
                self.programmed = Some(ruleset);
                Ok(outcomes)
            }
            Err(error) => {
                // The transaction failed as a whole: the kernel still holds the previous table.
                self.failures += 1;
                let retry_at = now + self.backoff.delay(self.failures);
                self.retry_at = Some(retry_at);
                self.programmed = None;
                let error = DatapathError::Call {
                    call: "nft -f",
                    endpoint: None,
                    message: error.to_string(),
                };
                tracing::warn!(%error, failures = self.failures, "programming nftables failed");
                let failures = self.failures;
                Ok(report(&ruleset, |_| Outcome::Failed {
                    error: error.clone(),
                    failures,
                    retry_at,
                }))
            }
        }
    }

    fn endpoints(&self) -> &[(EndpointInfo, Option<String>)] {
        &self.endpoints
    }

    fn next_wakeup(&self) -> Option<Instant> {
        let refused = self.refused.values().map(|r| r.retry_at);
        self.retry_at.into_iter().chain(refused).min()
    }

    fn compile_options(&self) -> CompileOptions {
        CompileOptions::default()
    }

    /// Audit chains count and log what audited policies would deny (see [`EndpointChains`]).
    fn reports_would_deny(&self) -> bool {
        true
    }
}

/// A compiled list's id, and whether it holds would-be rules.
type ListKey = (SharedId, bool);

/// The remote sets of a list's rules, one per rule naming one.
fn remote_sets(list: &CompiledRules) -> impl Iterator<Item = &Shared<RemoteSet>> {
    list.rules.iter().filter_map(|r| r.remotes.as_ref())
}
