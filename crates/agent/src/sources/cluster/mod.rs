//! The cluster mode's source: one list-then-watch loop per kind, on raw JSON, forwarding each
//! kind's events to the reconcile loop.
//!
//! Per kind:
//! - **List** as a streaming list where the server offers it (see [`streaming`]): served from
//!   the watch cache, one object at a time, never a page in memory. Otherwise, or if the
//!   server refuses or ignores it, in pages of [`WatchConfig::page_size`] objects
//!   (for the policy kinds, whose objects may be 1.5 MB each, pages of about
//!   [`WatchConfig::policy_page_bytes`] and at most [`WatchConfig::policy_page_size`] objects:
//!   see [`PageSize`]), each page within
//!   [`WatchConfig::page_timeout`] (a large list takes as many pages as it needs); each object is
//!   read on its own ([`super::decode`]), so an object that does not fit its kind is rejected
//!   alone (a policy counts as invalid, logged once with object and field) and every other
//!   object of the kind is enforced.
//!   A page that fails after the first is asked for again from its continue token (after the
//!   backoff), not the whole list: only a 410 Gone (an expired token) starts the list afresh.
//! - **Watch** from the list's resourceVersion, with bookmarks. A watch that ends (the server's
//!   time-out, a dropped connection) is resumed from the last resourceVersion seen, without a
//!   list; a 410 Gone lists again, and the new list's end removes what was deleted meanwhile.
//! - **A stalled watch** (a half-open connection: open, but no event and no bookmark for
//!   [`WatchConfig::stall_timeout`], while the server sends a bookmark about once a minute) is
//!   ended and resumed from the last resourceVersion seen; the kind reads as not in sync
//!   (`netpol_kind_synced` 0, `/readyz` 503 naming it, `netpol_watch_stalls_total`) until a
//!   watch delivers again.
//! - **Failures** (403, 500, time-outs, refused connections) are retried with a growing, capped
//!   backoff, counted in `netpol_watch_errors_total`, shown in `netpol_kind_synced` and in
//!   `/readyz`. A 429's Retry-After is honoured (the delay is the longer of the two). Every
//!   delay is stretched by a per-follower random part, and each watch asks for its own time-out
//!   (see [`super::jitter`]), so that agents started together do not call together. A complete list, or a watch that delivers (an event or a bookmark), shows the
//!   server healthy again and resets the backoff: an outage's delays never carry over to the
//!   next one, so an event made during a short watch outage arrives within seconds of its end.
//!   A server that answers every watch with 410 is relisted at the backoff too, not in a loop.
//! - **A kind never listed** holds all programming back (the datapath keeps what it has, e.g.
//!   what a previous agent programmed). Pods, namespaces and nodes hold it back until they list:
//!   counting them empty would program every local endpoint as podless. A policy kind holds it
//!   back for [`WatchConfig::initial_wait`] only, then is sent as an empty list so that the
//!   other kinds get enforced, while readiness stays false until it lists. A kind listed before
//!   keeps its last good objects however long its lists fail.
//! - **A CRD not installed** (a plain-text 404) counts as listed and empty, with a warning; the
//!   list is retried at the capped backoff, and once the CRD appears its objects arrive like any
//!   others. Should a CRD be deleted, its objects go with it.

use std::collections::BTreeSet;
use std::pin::pin;
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::ApiResource;
use kube::Client;
use netpol_api::crd::NetpolEndpointSlice;
use netpol_api::large_json::LARGE_ITEM_BYTES;
use netpol_api::ObjectRef;
pub use netpol_indexes::decode::resources;
use tokio::sync::Semaphore;
use tokio::time::Instant;

mod emit;
mod streaming;

use super::jitter::Jitter;
use super::kube_api::{CallError, KindApi, PageSize, Pages, WatchItem, WatchObject};
use super::projection;
use crate::driver::Input;
use crate::health::{fatal_if_task_panics, Health};
use crate::kind::SourceKind;
use crate::metrics::Metrics;
use emit::{Change, Marker};
use netpol_datapath::Backoff;
use streaming::StreamFailed;

/// How the watches list, watch and retry.
#[derive(Clone, Copy, Debug)]
pub struct WatchConfig {
    /// Objects per list page (`limit`) of pods, namespaces and nodes.
    pub page_size: u32,
    /// The most objects per list page of the policy kinds, whose objects can be far larger (a
    /// Cilium policy near etcd's 1.5 MB limit): the API server builds each page whole (the agent
    /// reads it as it arrives).
    pub policy_page_size: u32,
    /// The bytes of JSON a list page of a policy kind should hold: the first page asks for as
    /// many objects at etcd's limit as fit, later pages as many as fit at the largest average
    /// object size seen (see [`PageSize`]).
    pub policy_page_bytes: usize,
    /// List as a streaming list (a watch with `sendInitialEvents`, from the watch cache, one
    /// object at a time) where the server offers it; paged lists otherwise. Off by default:
    /// kube-apiserver gzips list responses (from 128 KiB) but never a watch, so a streaming
    /// list of realistic pods costs several times the bytes of gzipped pages, which are read
    /// from the watch cache too on Kubernetes 1.31 and later (consistent reads from the cache).
    pub streaming_lists: bool,
    /// The longest one list page may take.
    pub page_timeout: Duration,
    /// The server ends each watch call after about this many seconds (each watch draws its
    /// own, between three quarters of it and all of it); it is then resumed.
    pub watch_timeout_s: u32,
    /// A watch that delivers nothing (no event, no bookmark) for this long is taken as stalled,
    /// ended and resumed. Above the API server's bookmark interval (about a minute).
    pub stall_timeout: Duration,
    /// Delays between failed calls: doubling from `initial` up to `max`.
    pub backoff: Backoff,
    /// How long a policy kind never listed holds programming back (pods, namespaces and nodes
    /// hold it back until they list).
    pub initial_wait: Duration,
}

impl Default for WatchConfig {
    fn default() -> Self {
        WatchConfig {
            page_size: 500,
            policy_page_size: 50,
            // 5 objects at etcd's limit; 8 of 1 MB; 50 of anything under 160 KB.
            policy_page_bytes: 8 << 20,
            streaming_lists: false,
            page_timeout: Duration::from_secs(60),
            watch_timeout_s: 290,
            stall_timeout: Duration::from_secs(90),
            backoff: Backoff {
                initial: Duration::from_millis(500),
                max: Duration::from_secs(30),
            },
            initial_wait: Duration::from_secs(30),
        }
    }
}

/// Where a follower reports. `inputs` is bounded: a follower whose objects the reconcile loop has
/// not taken yet waits (without holding a runtime thread) before it decodes more.
#[derive(Clone)]
pub struct Sinks {
    pub inputs: SyncSender<Input>,
    pub metrics: Metrics,
    pub health: Arc<Health>,
    /// The bytes of large policies' texts sent to the reconcile loop and not read yet
    /// ([`LARGE_IN_FLIGHT_BYTES`] in all): `inputs` is bounded by count, and a thousand
    /// 1.5 MB texts waiting in it would be 1.5 GB.
    large_in_flight: Arc<Semaphore>,
}

/// How many bytes of large policies' JSON texts may wait for the reconcile loop at once, all
/// followers together: five at etcd's limit. A text larger than this waits until none is in
/// flight.
pub const LARGE_IN_FLIGHT_BYTES: u32 = 8 << 20;

impl Sinks {
    pub fn new(inputs: SyncSender<Input>, metrics: Metrics, health: Arc<Health>) -> Sinks {
        Sinks {
            inputs,
            metrics,
            health,
            large_in_flight: Arc::new(Semaphore::new(LARGE_IN_FLIGHT_BYTES as usize)),
        }
    }
}

/// Where remote pods come from: every Pod (direct mode), or NetpolEndpointSlices with this
/// node's own Pods alone (slice mode).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodSource {
    Pods,
    Slices { node: String },
}

/// Starts one follower per kind on the current tokio runtime. A follower that panics fails
/// liveness. In slice mode the pod watch carries `spec.nodeName=NODE` and NetpolEndpointSlices
/// are followed too.
pub fn spawn_watches(
    client: &Client,
    sinks: &Sinks,
    config: WatchConfig,
    pods: &PodSource,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut followed: Vec<(SourceKind, KindApi)> = resources()
        .into_iter()
        .map(|(kind, resource)| {
            let api = KindApi::new(client.clone(), resource);
            match pods {
                PodSource::Slices { node } if kind == SourceKind::Pod => (
                    kind,
                    api.with_field_selector(format!("spec.nodeName={node}")),
                ),
                _ => (kind, api),
            }
        })
        .collect();
    if matches!(pods, PodSource::Slices { .. }) {
        let slices = ApiResource::erase::<NetpolEndpointSlice>(&());
        followed.push((
            SourceKind::NetpolEndpointSlice,
            KindApi::new(client.clone(), slices),
        ));
    }
    followed
        .into_iter()
        .map(|(kind, api)| spawn_follower(api, kind, sinks, config))
        .collect()
}

/// Starts one kind's follower; its panic fails liveness.
pub fn spawn_follower(
    api: KindApi,
    kind: SourceKind,
    sinks: &Sinks,
    config: WatchConfig,
) -> tokio::task::JoinHandle<()> {
    // A policy's watch keeps a large one as its text, for the reconcile loop to read.
    let api = if kind.is_policy() {
        api.with_large_objects_as_text()
    } else {
        api
    };
    let follower = Follower::new(api, kind, sinks, config);
    let task = tokio::spawn(follower.run());
    // A follower that panicked would leave its kind silently stale.
    tokio::spawn(fatal_if_task_panics(
        sinks.health.clone(),
        format!("the {kind} watch"),
        task,
    ))
}

/// The receiver went away: the agent is stopping.
struct Stopped;

/// Why a list did not complete.
enum ListFailed {
    Call(CallError),
    Stopped,
}

impl From<Stopped> for ListFailed {
    fn from(_: Stopped) -> Self {
        ListFailed::Stopped
    }
}

/// A list item that does not read as JSON fails its page.
fn not_json(bytes: usize, error: &dyn std::fmt::Display) -> CallError {
    CallError::Failed(format!(
        "an item of the list is not JSON ({bytes} bytes): {error}"
    ))
}

/// How many failures in a row one page of a list may meet before the list starts afresh.
const PAGE_RETRIES: u32 = 8;

/// How long a follower waits before offering an input again to a full channel.
const FULL_CHANNEL_RETRY: Duration = Duration::from_millis(2);

/// Why a watch loop ended: a list is needed again (410 Gone, or the CRD went away).
struct Relist {
    /// Whether any watch since the list delivered something.
    delivered: bool,
}

struct Follower {
    api: KindApi,
    kind: SourceKind,
    sinks: Sinks,
    config: WatchConfig,
    deadline: Instant,
    /// Consecutive failed calls; reset by a complete list and by a watch that delivers. A kind
    /// whose lists succeed and watches fail still backs off: its watches are retried without a
    /// list.
    failures: u32,
    /// Consecutive lists whose watches all ended in 410 without delivering anything.
    fruitless_lists: u32,
    /// A complete list (or, for a policy kind, the empty stand-in after the initial wait) was
    /// sent.
    listed: bool,
    /// The wait for a never-listed pod, namespace or node kind was reported as over.
    held_back_reported: bool,
    /// Lists since start that succeeded.
    lists: u64,
    /// The CRD is not installed; an empty list was sent for it.
    absent: bool,
    /// Invalid objects of a kind without invalid state (pods...), logged once each.
    logged_invalid: BTreeSet<ObjectRef>,
    /// The last watch stalled, and no watch has delivered since: the kind is not in sync.
    stalled: bool,
    /// The server refused or ignored a streaming list: this follower lists in pages.
    no_streaming: bool,
    jitter: Jitter,
}

impl Follower {
    fn new(api: KindApi, kind: SourceKind, sinks: &Sinks, config: WatchConfig) -> Follower {
        sinks.metrics.set_kind_synced(kind, false);
        Follower {
            api,
            kind,
            sinks: sinks.clone(),
            config,
            deadline: Instant::now() + config.initial_wait,
            failures: 0,
            fruitless_lists: 0,
            listed: false,
            held_back_reported: false,
            lists: 0,
            absent: false,
            logged_invalid: BTreeSet::new(),
            stalled: false,
            no_streaming: false,
            jitter: Jitter::default(),
        }
    }

    async fn run(mut self) {
        let _ = self.follow().await;
    }

    async fn follow(&mut self) -> Result<(), Stopped> {
        loop {
            match self.list().await {
                Ok(resource_version) => {
                    if self.absent {
                        tracing::info!(kind = %self.kind, "the kind's CRD is installed now; following it");
                        self.absent = false;
                    }
                    let relist = self.watch(resource_version).await?;
                    self.sinks.metrics.count_relist(self.kind);
                    if relist.delivered {
                        self.fruitless_lists = 0;
                    } else {
                        // Listed, then 410 before anything arrived: a server whose history is
                        // too short for this watch. Relist, but not in a tight loop.
                        self.fruitless_lists = self.fruitless_lists.saturating_add(1);
                        self.pause(self.fruitless_lists, None).await;
                    }
                }
                Err(ListFailed::Stopped) => return Err(Stopped),
                // Slice mode without the CRD has no remote pods to go by: never counted empty
                // (that would program every rule naming a remote pod as matching none).
                Err(ListFailed::Call(CallError::NotInstalled))
                    if self.kind != SourceKind::NetpolEndpointSlice =>
                {
                    if !self.absent {
                        tracing::warn!(kind = %self.kind, "CRD not installed: skipping this kind until it appears");
                        self.absent = true;
                        // No objects of a kind that does not exist: an empty, complete list.
                        self.send_marker(Marker::Init).await?;
                        self.end_list(0).await?;
                    }
                    self.failures = self.failures.saturating_add(1);
                    self.pause(self.failures, None).await;
                }
                Err(ListFailed::Call(error)) => {
                    self.failed("list", &error);
                    self.stand_in_if_due().await?;
                    let mut delay = self.delay(self.failures, &error);
                    let now = Instant::now();
                    if !self.listed && now < self.deadline {
                        // Wake at the deadline, so that the stand-in (or the report that the
                        // wait is over) is not late.
                        delay = delay.min(self.deadline - now);
                    }
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    /// Lists the kind: as a streaming list where the server offers one and the configuration
    /// asks for it ([`streaming`]), else a page at a time.
    async fn list(&mut self) -> Result<String, ListFailed> {
        if self.config.streaming_lists && !self.no_streaming {
            match self.stream_list().await {
                Ok(resource_version) => return Ok(resource_version),
                Err(StreamFailed::Unsupported(why)) => {
                    tracing::info!(kind = %self.kind, "no streaming lists ({why}): listing in pages");
                    self.no_streaming = true;
                }
                Err(StreamFailed::List(failed)) => return Err(failed),
            }
        }
        self.list_pages().await
    }

    /// Lists the kind a page at a time, each page's objects decoded and sent before the next
    /// page is asked for, so that a list of 150,000 pods never exists whole; returns the
    /// resourceVersion to watch from. `Init` goes out before the first page's objects: a list
    /// that fails later is left without its `InitDone` (it changes nothing) and the next list's
    /// `Init` abandons it.
    async fn list_pages(&mut self) -> Result<String, ListFailed> {
        let mut pages = self.api.pages(self.page_size(), self.config.page_timeout);
        let mut objects = 0;
        let mut resource_version = String::new();
        loop {
            let first = pages.pages == 0;
            let page = if self.streams_pages() {
                self.stream_page(&mut pages).await
            } else {
                self.read_page(&mut pages).await
            };
            match page {
                Ok(Some((version, items))) => {
                    objects += items;
                    resource_version = version;
                }
                Ok(None) => break,
                // A page after the first failed: ask for it again from its continue token,
                // keeping the pages sent (and what the failed one sent: sent again, each
                // object's event replaces the last). An expired token (410) or a hopeless run
                // of failures starts the list afresh.
                Err(ListFailed::Call(error))
                    if !first && error != CallError::Expired && self.failures < PAGE_RETRIES =>
                {
                    self.failed("list", &error);
                    self.pause(self.failures, Some(&error)).await;
                }
                Err(failed) => return Err(failed),
            }
        }
        self.end_list(objects).await?;
        Ok(resource_version)
    }

    /// Whether the kind's list pages are read as they arrive ([`Self::stream_page`]): the
    /// kinds whose objects may be megabytes each, the policies and the NetpolEndpointSlices
    /// (see [`Self::page_size`]). The others' pages (at most 500 pods, a few MB) are read
    /// whole, each object in its kind's projection straight from the page, which parses each
    /// byte once.
    fn streams_pages(&self) -> bool {
        self.kind.is_policy() || self.kind == SourceKind::NetpolEndpointSlice
    }

    /// Reads the next page whole, decodes each object as it is read and sends them: the page's
    /// resourceVersion and its number of objects, or `None` after the last page.
    async fn read_page(
        &mut self,
        pages: &mut Pages,
    ) -> Result<Option<(String, usize)>, ListFailed> {
        let (kind, resource) = (self.kind, self.api.resource.clone());
        let Some(page) = pages
            .next_each(|value| emit::read_item(kind, &resource, value))
            .await
            .map_err(ListFailed::Call)?
        else {
            return Ok(None);
        };
        if pages.pages == 1 {
            self.send_marker(Marker::Init).await?;
        }
        let objects = page.items.len();
        for item in page.items {
            self.send_item(item, Change::InitApply).await?;
        }
        Ok(Some((page.resource_version, objects)))
    }

    /// Reads the next page as it arrives, each object decoded (a large policy straight from
    /// its text, never a JSON tree) and sent before more of the page is read: a page of large
    /// policies is never held whole, as text or decoded (issue 33). The page's
    /// resourceVersion and its number of objects, or `None` after the last page.
    async fn stream_page(
        &mut self,
        pages: &mut Pages,
    ) -> Result<Option<(String, usize)>, ListFailed> {
        let first = pages.pages == 0;
        let Some(mut page) = pages.next_streamed().await.map_err(ListFailed::Call)? else {
            return Ok(None);
        };
        if first {
            self.send_marker(Marker::Init).await?;
        }
        let (kind, resource) = (self.kind, self.api.resource.clone());
        let mut objects = 0;
        while let Some(text) = page.next().await.map_err(ListFailed::Call)? {
            if kind.is_policy() && text.len() >= LARGE_ITEM_BYTES {
                let bytes = text.len();
                if !self.send_large_policy(text, Change::InitApply).await? {
                    return Err(ListFailed::Call(not_json(bytes, &"not JSON")));
                }
                objects += 1;
                continue;
            }
            // Large policies went above; anything else is read in its projection.
            let item = projection::read_item(
                &text,
                self.api.shape(),
                |value| emit::read_item(kind, &resource, value),
                |_| None,
            )
            .map_err(|e| ListFailed::Call(not_json(text.len(), &e)))?;
            drop(text);
            self.send_item(item, Change::InitApply).await?;
            objects += 1;
        }
        let resource_version = page.finish().map_err(ListFailed::Call)?;
        Ok(Some((resource_version, objects)))
    }

    /// Watches from `resource_version` until a list is needed again.
    async fn watch(&mut self, mut resource_version: String) -> Result<Relist, Stopped> {
        // Consecutive watches that ended without delivering anything: resumed with a backoff so
        // that a server closing every watch at once is not hammered.
        let mut quiet = 0;
        let mut ever_delivered = false;
        loop {
            let events = match self
                .api
                .watch(
                    &resource_version,
                    self.jitter.watch_timeout(self.config.watch_timeout_s),
                )
                .await
            {
                Ok(events) => events,
                Err(CallError::Expired | CallError::NotInstalled) => {
                    return Ok(Relist {
                        delivered: ever_delivered,
                    })
                }
                Err(error) => {
                    self.failed("watch", &error);
                    self.pause(self.failures, Some(&error)).await;
                    continue;
                }
            };
            // A watch that opens after a stall proves nothing yet: a half-open path may open
            // and stall again. It counts once it delivers.
            if !self.stalled {
                self.working();
            }
            let mut delivered = false;
            let mut broke = None;
            let mut events = pin!(events);
            loop {
                let Ok(next) = tokio::time::timeout(self.config.stall_timeout, events.next()).await
                else {
                    self.stalled(&resource_version);
                    break;
                };
                let Some(item) = next else { break };
                match item {
                    Ok(WatchItem::Bookmark(version) | WatchItem::InitialEventsEnd(version)) => {
                        resource_version = version;
                    }
                    Ok(WatchItem::Added(object) | WatchItem::Modified(object)) => {
                        resource_version = version_of(&object, resource_version);
                        self.send_object(object, Change::Apply).await?;
                    }
                    Ok(WatchItem::Deleted(object)) => {
                        resource_version = version_of(&object, resource_version);
                        self.send_object(object, Change::Delete).await?;
                    }
                    Err(CallError::Expired) => {
                        return Ok(Relist {
                            delivered: ever_delivered,
                        })
                    }
                    Err(error) => {
                        self.failed("watch", &error);
                        broke = Some(error);
                        break;
                    }
                }
                // The watch works (an event or a bookmark came through): the server is healthy
                // again, and the next failure starts the backoff afresh.
                delivered = true;
                ever_delivered = true;
                self.failures = 0;
                if std::mem::take(&mut self.stalled) {
                    tracing::info!(kind = %self.kind, "the watch delivers again after a stall");
                    self.working();
                }
            }
            // The connection ended (or stalled): resume from the last resourceVersion seen,
            // after a pause if it broke or brought nothing (a server closing every watch at
            // once). A stall has waited long enough already.
            if let Some(error) = broke {
                self.pause(self.failures, Some(&error)).await;
            } else if delivered || self.stalled {
                quiet = 0;
            } else {
                quiet += 1;
                self.pause(quiet, None).await;
            }
        }
    }

    fn page_size(&self) -> PageSize {
        // Slices are large too: 1,000 endpoints, about 300 KB each.
        if self.kind.is_policy() || self.kind == SourceKind::NetpolEndpointSlice {
            PageSize {
                objects: self.config.policy_page_size,
                bytes: self.config.policy_page_bytes,
            }
        } else {
            PageSize::objects(self.config.page_size)
        }
    }

    /// Ends a list of `objects` objects, every one sent: the kind is listed.
    async fn end_list(&mut self, objects: usize) -> Result<(), Stopped> {
        if self.lists > 0 || self.listed {
            tracing::info!(kind = %self.kind, objects, "listed again");
        }
        self.send_marker(Marker::InitDone).await?;
        self.listed = true;
        self.lists += 1;
        // A complete list shows the server healthy: the failures before it say nothing about
        // the watch that follows.
        self.failures = 0;
        self.stalled = false;
        self.working();
        Ok(())
    }

    /// A call failed: count it, back off, and say the kind is not in sync.
    fn failed(&mut self, call: &str, error: &CallError) {
        self.failures = self.failures.saturating_add(1);
        let retry_in = self.config.backoff.delay(self.failures);
        tracing::warn!(
            kind = %self.kind,
            call,
            failures = self.failures,
            retry_in_ms = retry_in.as_millis(),
            "{error}"
        );
        let metrics = &self.sinks.metrics;
        metrics.count_watch_error(self.kind);
        metrics.set_kind_synced(self.kind, false);
        let state = if self.listed {
            "last good objects kept"
        } else if self.kind.is_policy() {
            "never listed"
        } else {
            "never listed: nothing is programmed until it lists"
        };
        self.sinks.health.set_source_problem(
            &format!("kind {}", self.kind),
            Some(format!("{call} failing ({state}): {error}")),
        );
    }

    /// The delay before the next call after `failures` failed ones: the backoff's, stretched by
    /// this follower's jitter, and at least what a 429 asked for.
    fn delay(&mut self, failures: u32, error: &CallError) -> Duration {
        let delay = self.jitter.stretch(self.config.backoff.delay(failures));
        match error {
            CallError::Throttled(Some(retry_after)) => delay.max(*retry_after),
            _ => delay,
        }
    }

    /// Waits [`Follower::delay`] (`error` None: a pause that is not a failure's).
    async fn pause(&mut self, failures: u32, error: Option<&CallError>) {
        let delay = match error {
            Some(error) => self.delay(failures, error),
            None => self.jitter.stretch(self.config.backoff.delay(failures)),
        };
        tokio::time::sleep(delay).await;
    }

    /// The watch delivered nothing, not even a bookmark, for the stall time-out: it is ended
    /// and resumed from `resource_version`, and the kind is not in sync until a watch delivers.
    fn stalled(&mut self, resource_version: &str) {
        let waited = self.config.stall_timeout;
        tracing::warn!(
            kind = %self.kind,
            waited_ms = waited.as_millis(),
            resource_version,
            "the watch delivered nothing, not even a bookmark: taken as stalled, resuming it"
        );
        self.stalled = true;
        let metrics = &self.sinks.metrics;
        metrics.count_watch_stall(self.kind);
        metrics.set_kind_synced(self.kind, false);
        self.sinks.health.set_source_problem(
            &format!("kind {}", self.kind),
            Some(format!(
                "watch stalled (nothing for {} ms; last good objects kept): resuming from resourceVersion {resource_version}",
                waited.as_millis()
            )),
        );
    }

    /// The kind is listed and watched: in sync.
    fn working(&mut self) {
        self.sinks.metrics.set_kind_synced(self.kind, true);
        self.sinks
            .health
            .set_source_problem(&format!("kind {}", self.kind), None);
    }

    /// After the initial wait, a policy kind never listed is sent as an empty list so that the
    /// other kinds get enforced; its failure stays visible in readiness and metrics. Pods,
    /// namespaces and nodes are never assumed empty: the datapath keeps what it has until they
    /// list.
    async fn stand_in_if_due(&mut self) -> Result<(), Stopped> {
        if self.listed || Instant::now() < self.deadline {
            return Ok(());
        }
        if !self.kind.is_policy() {
            if !self.held_back_reported {
                self.held_back_reported = true;
                tracing::error!(
                    kind = %self.kind,
                    waited_s = self.config.initial_wait.as_secs(),
                    "the kind cannot be listed: nothing is programmed until it lists (the datapath keeps what it has)"
                );
            }
            return Ok(());
        }
        tracing::warn!(
            kind = %self.kind,
            waited_s = self.config.initial_wait.as_secs(),
            "the kind cannot be listed: enforcing the other kinds without it meanwhile"
        );
        self.send_marker(Marker::Init).await?;
        self.send_marker(Marker::InitDone).await?;
        self.listed = true;
        Ok(())
    }
}

fn version_of(object: &WatchObject, current: String) -> String {
    object.resource_version().unwrap_or(current)
}
