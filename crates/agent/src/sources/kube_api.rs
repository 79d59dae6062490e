//! The API server calls of the cluster mode, on raw JSON: a paged list and a watch from a
//! resourceVersion. Objects stay `serde_json::Value`s here, so that no object's spec can make a
//! whole list or watch fail to decode; each object is then read on its own (see
//! [`super::decode`]). Each object is read from the response in its kind's
//! [`super::projection`], so what netpol does not read of it (a pod's managedFields, container
//! spec and most of its status) is skipped as the bytes are parsed.
//!
//! kube's typed calls log a body that fails to decode at WARN (a whole list, megabytes in a
//! large cluster); these calls never ask kube to decode a body into a type that can fail, and
//! errors are cut to a bounded size before anyone logs them.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::time::Duration;

use futures::{Stream, StreamExt};
use http_body_util::BodyExt;
use kube::api::{ApiResource, DynamicObject, ListParams, WatchEvent, WatchParams};
use kube::core::Request;
use kube::{Api, Client};
use netpol_api::large_json::LARGE_ITEM_BYTES;
use netpol_api::list_items::ListItems;
use serde::de::{DeserializeOwned, DeserializeSeed};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use tokio::time::Instant;

use super::projection::{self, NodeShape, OtherShape, PodShape, Projected, Shape, ShapeOf};
use crate::logline::bounded;

/// One kind's endpoint on the API server.
#[derive(Clone)]
pub struct KindApi {
    client: Client,
    request: Request,
    pub resource: ApiResource,
    /// What is read of each object.
    shape: &'static Shape,
    /// Only the objects this field selector selects (`spec.nodeName=NODE`), in lists and watches.
    field_selector: Option<String>,
    /// Whether a watched object of at least [`LARGE_ITEM_BYTES`] is kept as its JSON text
    /// ([`WatchObject::Text`]): for the policy kinds, which read such a policy without a tree.
    large_as_text: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawListMeta {
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default, rename = "continue")]
    continue_token: Option<String>,
}

/// A complete list: every page's items and the resourceVersion to watch from.
#[derive(Debug)]
pub struct Listing {
    pub items: Vec<Value>,
    pub resource_version: String,
    pub pages: usize,
}

/// One page of a list: its objects as JSON trees, or as the caller made each of them.
#[derive(Debug)]
pub struct Page<T = Value> {
    pub items: Vec<T>,
    /// The list's resourceVersion as of this page; the last page's is the one to watch from.
    pub resource_version: String,
}

/// How many objects each page of a list asks for (`limit`).
///
/// The API server builds a page whole, and a page read whole ([`Pages::next_each`]) costs its
/// bytes in memory (one read as it arrives, [`Pages::next_streamed`], does not). Objects of the
/// policy kinds range from a few hundred bytes to etcd's limit (1.5 MiB), so for
/// them a page is sized in bytes too: the first page as if every object were at etcd's limit,
/// each later one by the largest average object size the list has shown so far, never more
/// than `objects`. A list of 1 MB policies is read about `bytes` at a time; a list of small ones
/// `objects` at a time. (Kubernetes has no byte limit for a page: it is reached through
/// `limit`, and a page whose objects are far larger than those before it can still hold up to
/// `objects` of them.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageSize {
    /// The most objects one page asks for.
    pub objects: u32,
    /// The bytes of JSON one page should hold (`usize::MAX`: `objects` a page, whatever size).
    pub bytes: usize,
}

/// The largest object etcd stores by default (`--max-request-bytes`, 1.5 MiB).
pub const MAX_OBJECT_BYTES: usize = 3 << 19;

impl PageSize {
    /// Always `objects` a page.
    pub fn objects(objects: u32) -> PageSize {
        PageSize {
            objects,
            bytes: usize::MAX,
        }
    }

    /// The `limit` of a page when objects average `object_bytes` (the first page: etcd's
    /// largest).
    pub fn limit(&self, object_bytes: usize) -> u32 {
        let fit = self.bytes / object_bytes.max(1);
        u32::try_from(fit)
            .unwrap_or(u32::MAX)
            .clamp(1, self.objects.max(1))
    }
}

impl From<u32> for PageSize {
    fn from(objects: u32) -> PageSize {
        PageSize::objects(objects)
    }
}

/// A list read a page at a time ([`KindApi::pages`]).
pub struct Pages {
    api: KindApi,
    page_size: PageSize,
    /// The largest average object size of a page read so far (before the first page: etcd's
    /// limit).
    object_bytes: usize,
    page_timeout: Duration,
    continue_token: Option<String>,
    done: bool,
    /// Pages read so far.
    pub pages: usize,
}

impl Pages {
    /// The next page, or `None` after the last one.
    pub async fn next(&mut self) -> Result<Option<Page>, CallError> {
        self.next_each(|value| value).await
    }

    /// The next page, each of its objects handed to `each` as soon as it is read (so that a
    /// page's objects never exist as JSON trees all at once), or `None` after the last one.
    pub async fn next_each<T>(
        &mut self,
        mut each: impl FnMut(Value) -> T,
    ) -> Result<Option<Page<T>>, CallError> {
        if self.done {
            return Ok(None);
        }
        let request = self.page_request()?;
        let text = tokio::time::timeout(self.page_timeout, request_body(&self.api.client, request))
            .await
            .map_err(|_| CallError::TimedOut)?
            .map_err(|e| CallError::of(&e))?;
        let (metadata, items) =
            projection::list_page_each::<RawListMeta, T>(&text, self.api.shape, &mut each)
                .map_err(|e| not_a_list(text.len(), &e))?;
        let resource_version = self.page_read(text.len(), items.len(), metadata);
        Ok(Some(Page {
            items,
            resource_version,
        }))
    }

    /// The next page, read as it arrives (see [`PageStream`]), or `None` after the last one.
    pub async fn next_streamed(&mut self) -> Result<Option<PageStream<'_>>, CallError> {
        if self.done {
            return Ok(None);
        }
        let request = self.page_request()?;
        let asked = Instant::now();
        let body = tokio::time::timeout(self.page_timeout, send_checked(&self.api.client, request))
            .await
            .map_err(|_| CallError::TimedOut)?
            .map_err(|e| CallError::of(&e))?;
        Ok(Some(PageStream {
            waited: asked.elapsed(),
            pages: self,
            body,
            items: ListItems::default(),
            ready: VecDeque::new(),
            bytes: 0,
            ended: false,
        }))
    }

    /// The request for the next page. The continue token stays until the page has been read:
    /// a failed page is asked for again from it.
    fn page_request(&self) -> Result<http::Request<Vec<u8>>, CallError> {
        let params = ListParams {
            limit: Some(self.page_size.limit(self.object_bytes)),
            continue_token: self.continue_token.clone(),
            field_selector: self.api.field_selector.clone(),
            ..ListParams::default()
        };
        self.api
            .request
            .list(&params)
            .map_err(|e| CallError::Failed(e.to_string()))
    }

    /// A page of `bytes` holding `items` objects has been read: the next is sized by it and
    /// asked for from its continue token. Returns its resourceVersion.
    fn page_read(&mut self, bytes: usize, items: usize, metadata: RawListMeta) -> String {
        if items > 0 {
            let average = bytes.div_ceil(items);
            self.object_bytes = if self.pages == 0 {
                average
            } else {
                self.object_bytes.max(average)
            };
        }
        self.pages += 1;
        self.continue_token = metadata.continue_token.filter(|t| !t.is_empty());
        self.done = self.continue_token.is_none();
        metadata.resource_version.unwrap_or_default()
    }
}

/// A page of a list read as its body arrives, one item's JSON text at a time
/// ([`PageStream::next`]): its text is never held whole, and the caller hands each object on
/// before more of the page is read, so what a page of large policies holds at once is one of
/// them, not the page (issue 33). The time spent waiting for the server, not for the caller,
/// counts against the page's time-out.
pub struct PageStream<'p> {
    pages: &'p mut Pages,
    body: kube::client::Body,
    items: ListItems,
    /// Items cut from the bytes read so far, not taken yet.
    ready: VecDeque<Vec<u8>>,
    bytes: usize,
    waited: Duration,
    ended: bool,
}

impl PageStream<'_> {
    /// The next item's JSON text, or `None` once the page's body has ended.
    pub async fn next(&mut self) -> Result<Option<Vec<u8>>, CallError> {
        loop {
            if let Some(item) = self.ready.pop_front() {
                return Ok(Some(item));
            }
            if self.ended {
                return Ok(None);
            }
            let left = self.pages.page_timeout.saturating_sub(self.waited);
            let asked = Instant::now();
            let frame = tokio::time::timeout(left, self.body.frame())
                .await
                .map_err(|_| CallError::TimedOut)?;
            self.waited += asked.elapsed();
            let Some(frame) = frame else {
                self.ended = true;
                continue;
            };
            let Ok(data) = frame.map_err(|e| CallError::of(&e))?.into_data() else {
                continue; // trailers
            };
            self.bytes += data.len();
            let ready = &mut self.ready;
            let _: Result<(), Infallible> = self.items.feed(&data, &mut |item| {
                ready.push_back(item);
                Ok(())
            });
        }
    }

    /// Ends the page, once [`PageStream::next`] has given `None`: returns its resourceVersion,
    /// and the next page is asked for from its continue token.
    pub fn finish(self) -> Result<String, CallError> {
        let items = self.items.handed();
        let head = self
            .items
            .finish()
            .ok_or_else(|| not_a_list(self.bytes, &"not one JSON object with an items array"))?;
        let head: ListHead = serde_json::from_str(&head).map_err(|e| not_a_list(self.bytes, &e))?;
        Ok(self
            .pages
            .page_read(self.bytes, items, head.metadata.unwrap_or_default()))
    }
}

/// What a list holds besides its items.
#[derive(Deserialize)]
struct ListHead {
    #[serde(default)]
    metadata: Option<RawListMeta>,
}

fn not_a_list(bytes: usize, error: &dyn std::fmt::Display) -> CallError {
    CallError::Failed(format!(
        "the list is not a JSON list ({bytes} bytes): {error}"
    ))
}

/// A response's body, read once into one buffer, or the API's error as kube's `request_text`
/// gives it. `request_text` copies the body a second time into a `String`: at 150,000 realistic
/// pods that copy (and the pages it faults in) was about 7% of the controller's CPU.
async fn request_body(
    client: &Client,
    request: http::Request<Vec<u8>>,
) -> Result<bytes::Bytes, kube::Error> {
    let body = send_checked(client, request).await?;
    Ok(body.collect().await?.to_bytes())
}

/// A response's body, still to be read, or the API's error (its body read).
async fn send_checked(
    client: &Client,
    request: http::Request<Vec<u8>>,
) -> Result<kube::client::Body, kube::Error> {
    let response = client.send(request.map(kube::client::Body::from)).await?;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return Ok(response.into_body());
    }
    let body = response.into_body().collect().await?.to_bytes();
    // Not every error is a JSON Status: a proxy's, or the plain-text 404 of a resource the
    // server does not serve, keeps its code.
    let status = serde_json::from_slice::<kube::core::Status>(&body).unwrap_or_else(|_| {
        kube::core::Status::failure(
            String::from_utf8_lossy(&body).trim(),
            "Failed to parse error data",
        )
        .with_code(status.as_u16())
    });
    Err(kube::Error::Api(status.boxed()))
}

/// Why a call failed, as the follower needs to tell it apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// The API server does not serve the resource (a CRD not installed): 404.
    NotInstalled,
    /// The resourceVersion (or continue token) is too old: 410 Gone. List again.
    Expired,
    /// A list page took longer than allowed.
    TimedOut,
    /// 429 Too Many Requests, with the Retry-After the server asked for (the Status's
    /// `details.retryAfterSeconds`, which the API server sets with the header).
    Throttled(Option<Duration>),
    /// 400 or 422: the request itself is refused (for a streaming list: the server has the
    /// WatchList feature off).
    Invalid(String),
    /// Anything else (403, 500, a refused connection, a body that is not JSON), bounded in size.
    Failed(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::NotInstalled => {
                f.write_str("the resource is not served (CRD not installed)")
            }
            CallError::Expired => f.write_str("410 Gone: the resourceVersion is too old"),
            CallError::TimedOut => f.write_str("a list page timed out"),
            CallError::Throttled(Some(after)) => write!(
                f,
                "429 Too Many Requests: retry after {} s",
                after.as_secs()
            ),
            CallError::Throttled(None) => f.write_str("429 Too Many Requests"),
            CallError::Failed(message) | CallError::Invalid(message) => f.write_str(message),
        }
    }
}

impl CallError {
    fn of(error: &kube::Error) -> CallError {
        match error {
            kube::Error::Api(status) => Self::of_status(status),
            other => CallError::Failed(bounded(&other.to_string()).into_owned()),
        }
    }

    /// An API `Status`. A plain-text 404 (the API server's answer for a resource type it does
    /// not serve) arrives with the code but not the `NotFound` reason, so the code is what counts.
    fn of_status(status: &kube::core::Status) -> CallError {
        match status.code {
            404 => CallError::NotInstalled,
            410 => CallError::Expired,
            400 | 422 => CallError::Invalid(format!(
                "{} {}: {}",
                status.code,
                bounded(&status.reason),
                bounded(&status.message)
            )),
            429 => CallError::Throttled(
                status
                    .details
                    .as_ref()
                    .map(|d| d.retry_after_seconds)
                    .filter(|s| *s > 0)
                    .map(|s| Duration::from_secs(u64::from(s))),
            ),
            code => CallError::Failed(format!(
                "{code} {}: {}",
                bounded(&status.reason),
                bounded(&status.message)
            )),
        }
    }
}

/// What one watch call delivered.
#[derive(Debug)]
pub enum WatchItem {
    Added(WatchObject),
    Modified(WatchObject),
    Deleted(WatchObject),
    /// A bookmark: nothing changed up to this resourceVersion.
    Bookmark(String),
    /// The bookmark that ends a streaming list's initial events (annotated
    /// `k8s.io/initial-events-end`): every object up to this resourceVersion was sent.
    InitialEventsEnd(String),
}

/// An object a watch delivered: read in its kind's projection, or (a policy of at least
/// [`LARGE_ITEM_BYTES`], from a [`KindApi::with_large_objects_as_text`]) kept as its JSON text,
/// for the reconcile loop to read without a JSON tree: a 1.9 MB NetworkPolicy of `ipBlock`
/// peers is 60-80 MB as a tree, which a running agent would otherwise build for each change of
/// it (issue 33).
#[derive(Clone, Debug)]
pub enum WatchObject {
    Tree(Value),
    Text(Box<RawValue>),
}

impl WatchObject {
    /// Its resourceVersion, if it has one.
    pub fn resource_version(&self) -> Option<String> {
        match self {
            WatchObject::Tree(value) => resource_version(value).map(str::to_owned),
            WatchObject::Text(text) => {
                #[derive(Deserialize)]
                struct Versioned {
                    metadata: Option<Metadata>,
                }
                #[derive(Deserialize)]
                #[serde(rename_all = "camelCase")]
                struct Metadata {
                    resource_version: Option<String>,
                }
                let versioned: Versioned = serde_json::from_str(text.get()).ok()?;
                versioned.metadata?.resource_version
            }
        }
    }
}

impl<S> From<Projected<S>> for WatchObject {
    fn from(object: Projected<S>) -> WatchObject {
        WatchObject::Tree(object.0)
    }
}

/// A watched object of [`OTHER`](projection::OTHER) shape, kept as its text when large (see
/// [`WatchObject`]). kube-apiserver writes each event's `type` before its `object`
/// (`metav1.WatchEvent`), so the object is read straight from the event's line. (A line with
/// its object first, which no API server writes, does not read: the watch fails, is retried
/// and shows the kind out of sync, never silently.)
#[derive(Clone)]
struct LargeAsText(WatchObject);

impl<'de> Deserialize<'de> for LargeAsText {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = Box::<RawValue>::deserialize(deserializer)?;
        if text.get().len() >= LARGE_ITEM_BYTES {
            return Ok(LargeAsText(WatchObject::Text(text)));
        }
        let mut object = serde_json::Deserializer::from_str(text.get());
        let value = OtherShape::SHAPE
            .deserialize(&mut object)
            .map_err(serde::de::Error::custom)?;
        Ok(LargeAsText(WatchObject::Tree(value)))
    }
}

impl From<LargeAsText> for WatchObject {
    fn from(object: LargeAsText) -> WatchObject {
        object.0
    }
}

/// The annotation of the bookmark that ends a streaming list's initial events.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

impl KindApi {
    pub fn new(client: Client, resource: ApiResource) -> KindApi {
        let url = Api::<DynamicObject>::all_with(client.clone(), &resource)
            .resource_url()
            .to_owned();
        KindApi {
            client,
            request: Request::new(url),
            shape: projection::shape_of(&resource.kind),
            resource,
            field_selector: None,
            large_as_text: false,
        }
    }

    /// The same endpoint, its watches keeping a large object as its JSON text (see
    /// [`WatchObject`]).
    pub fn with_large_objects_as_text(mut self) -> KindApi {
        self.large_as_text = true;
        self
    }

    /// What is read of each object.
    pub fn shape(&self) -> &'static Shape {
        self.shape
    }

    /// The same endpoint, listing and watching only the objects `selector` selects.
    pub fn with_field_selector(mut self, selector: String) -> KindApi {
        self.field_selector = Some(selector);
        self
    }

    /// Lists every object, `page_size` at a time, each page within `page_timeout`: a list of
    /// 150,000 pods takes as many pages as it needs, but one page that hangs fails the list. A
    /// continue token that expires mid-way (410) fails the list with [`CallError::Expired`]; the
    /// caller lists again from the start. Holds every page; [`KindApi::pages`] reads one at a
    /// time.
    pub async fn list(
        &self,
        page_size: impl Into<PageSize>,
        page_timeout: Duration,
    ) -> Result<Listing, CallError> {
        let mut listing = Listing {
            items: Vec::new(),
            resource_version: String::new(),
            pages: 0,
        };
        let mut pages = self.pages(page_size, page_timeout);
        while let Some(page) = pages.next().await? {
            listing.items.extend(page.items);
            listing.resource_version = page.resource_version;
        }
        listing.pages = pages.pages;
        Ok(listing)
    }

    /// The list of every object, read a page at a time (see [`KindApi::list`]), so that a
    /// caller can hand each page on before the next arrives.
    pub fn pages(&self, page_size: impl Into<PageSize>, page_timeout: Duration) -> Pages {
        Pages {
            api: self.clone(),
            page_size: page_size.into(),
            object_bytes: MAX_OBJECT_BYTES,
            page_timeout,
            continue_token: None,
            done: false,
            pages: 0,
        }
    }

    /// Watches from `resource_version`, with bookmarks; the server ends the call after
    /// `timeout_s` seconds at the latest. The stream ends when the connection does; an error
    /// event or a broken line ends it with an error.
    pub async fn watch(
        &self,
        resource_version: &str,
        timeout_s: u32,
    ) -> Result<impl Stream<Item = Result<WatchItem, CallError>> + use<>, CallError> {
        let params = WatchParams {
            bookmarks: true,
            timeout: Some(timeout_s),
            field_selector: self.field_selector.clone(),
            ..WatchParams::default()
        };
        self.watch_with(&params, resource_version).await
    }

    /// A streaming list: a watch that starts with every current object as an `Added` event,
    /// served from the API server's watch cache (`sendInitialEvents=true`,
    /// `resourceVersionMatch=NotOlderThan`), one object at a time, ended by
    /// [`WatchItem::InitialEventsEnd`]; then changes as any watch. A server without streaming
    /// lists refuses it (the WatchList feature off: 422) or ignores it (no end bookmark).
    pub async fn watch_list(
        &self,
        timeout_s: u32,
    ) -> Result<impl Stream<Item = Result<WatchItem, CallError>> + use<>, CallError> {
        let params = WatchParams {
            timeout: Some(timeout_s),
            field_selector: self.field_selector.clone(),
            ..WatchParams::streaming_lists()
        };
        self.watch_with(&params, "").await
    }

    async fn watch_with(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<impl Stream<Item = Result<WatchItem, CallError>> + use<>, CallError> {
        // kube decodes each event into a type: the shape is chosen by the type.
        if self.large_as_text {
            return self.events::<LargeAsText>(params, resource_version).await;
        }
        match self.shape {
            shape if std::ptr::eq(shape, PodShape::SHAPE) => {
                self.events::<Projected<PodShape>>(params, resource_version)
                    .await
            }
            shape if std::ptr::eq(shape, NodeShape::SHAPE) => {
                self.events::<Projected<NodeShape>>(params, resource_version)
                    .await
            }
            _ => {
                self.events::<Projected<OtherShape>>(params, resource_version)
                    .await
            }
        }
    }

    async fn events<T: DeserializeOwned + Into<WatchObject> + Clone + Send + 'static>(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchItems, CallError> {
        let request = self
            .request
            .watch(params, resource_version)
            .map_err(|e| CallError::Failed(e.to_string()))?;
        let events = self
            .client
            .request_events::<T>(request)
            .await
            .map_err(|e| CallError::of(&e))?;
        Ok(Box::pin(StreamExt::map(
            events,
            |item: kube::Result<WatchEvent<T>>| match item {
                Ok(WatchEvent::Added(object)) => Ok(WatchItem::Added(object.into())),
                Ok(WatchEvent::Modified(object)) => Ok(WatchItem::Modified(object.into())),
                Ok(WatchEvent::Deleted(object)) => Ok(WatchItem::Deleted(object.into())),
                Ok(WatchEvent::Bookmark(bookmark)) => {
                    let metadata = bookmark.metadata;
                    let end = metadata
                        .annotations
                        .get(INITIAL_EVENTS_END)
                        .is_some_and(|v| v == "true");
                    Ok(if end {
                        WatchItem::InitialEventsEnd(metadata.resource_version)
                    } else {
                        WatchItem::Bookmark(metadata.resource_version)
                    })
                }
                Ok(WatchEvent::Error(status)) => Err(CallError::of_status(&status)),
                Err(error) => Err(CallError::of(&error)),
            },
        )))
    }
}

/// A watch's items, whatever shape its objects are read in.
type WatchItems = Pin<Box<dyn Stream<Item = Result<WatchItem, CallError>> + Send>>;

/// An object's resourceVersion, if it has one.
pub fn resource_version(object: &Value) -> Option<&str> {
    object.get("metadata")?.get("resourceVersion")?.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    #[test]
    fn statuses_are_told_apart_and_bounded() {
        let status = |code: u16, message: &str| {
            Status::failure(message, "Failed to parse error data").with_code(code)
        };
        assert_eq!(
            CallError::of_status(&status(404, "404 page not found")),
            CallError::NotInstalled
        );
        assert_eq!(
            CallError::of_status(&status(410, "too old")),
            CallError::Expired
        );
        let huge = "x".repeat(100_000);
        match CallError::of_status(&status(500, &huge)) {
            CallError::Failed(message) => {
                assert!(message.starts_with("500 "));
                assert!(message.len() < 1200, "{}", message.len());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn policy_pages_hold_about_their_bytes_within_their_object_count() {
        let config = crate::sources::cluster::WatchConfig::default();
        let policies = PageSize {
            objects: config.policy_page_size,
            bytes: config.policy_page_bytes,
        };
        // The first page: as many objects at etcd's limit as fit in 8 MiB.
        assert_eq!(policies.limit(MAX_OBJECT_BYTES), 5);
        assert_eq!(policies.limit(1_000_000), 8);
        assert_eq!(policies.limit(20_000_000), 1, "never less than one object");
        assert_eq!(
            policies.limit(2_000),
            50,
            "never more than the object count"
        );
        assert_eq!(PageSize::objects(500).limit(MAX_OBJECT_BYTES), 500);
    }
}
