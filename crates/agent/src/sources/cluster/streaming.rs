//! Streaming lists (`sendInitialEvents`, beta since Kubernetes 1.32): the list as a watch that
//! starts with every current object as an `ADDED` event, then a bookmark annotated
//! `k8s.io/initial-events-end` at the list's resourceVersion. The API server serves it from its
//! watch cache, never from etcd, and the agent decodes one object at a time: no page is ever
//! held whole, however large the objects.
//!
//! The fallback is the paged list, for the rest of the follower's life, when the server
//! refuses the request (400 or 422: the WatchList feature is off) or ignores it (a plain
//! bookmark comes before the end of the initial events: a server that does not know the
//! parameter). The stream is then dropped; what it sent is abandoned by the paged list's `Init`.

use std::pin::pin;

use futures::StreamExt;

use super::emit::{Change, Marker};
use super::{Follower, ListFailed};
use crate::sources::kube_api::{CallError, WatchItem};

/// Why a streaming list did not complete.
pub(super) enum StreamFailed {
    /// The server has no streaming lists: list in pages.
    Unsupported(String),
    /// It failed as any list may (retried as a list is).
    List(ListFailed),
}

impl From<super::Stopped> for StreamFailed {
    fn from(stopped: super::Stopped) -> Self {
        StreamFailed::List(stopped.into())
    }
}

fn call(error: CallError) -> StreamFailed {
    StreamFailed::List(ListFailed::Call(error))
}

impl Follower {
    /// Lists the kind as a streaming list; returns the resourceVersion to watch from. Each
    /// object is decoded and sent as it arrives; the end bookmark ends the list. The stream is
    /// then closed and the watch opened from that resourceVersion, as after a paged list: one
    /// more request per list, and the watch loop stays one.
    pub(super) async fn stream_list(&mut self) -> Result<String, StreamFailed> {
        let timeout = self.jitter.watch_timeout(self.config.watch_timeout_s);
        let events = match self.api.watch_list(timeout).await {
            Ok(events) => events,
            Err(CallError::Invalid(why)) => return Err(StreamFailed::Unsupported(why)),
            Err(error) => return Err(call(error)),
        };
        self.send_marker(Marker::Init).await?;
        let mut objects = 0;
        let mut events = pin!(events);
        loop {
            // A list that stalls is a failed list: the time-out bounds each object's wait.
            let Ok(next) = tokio::time::timeout(self.config.stall_timeout, events.next()).await
            else {
                return Err(call(CallError::TimedOut));
            };
            match next {
                None => {
                    return Err(call(CallError::Failed(
                        "the streaming list ended before its last object".into(),
                    )))
                }
                Some(Ok(WatchItem::Added(object) | WatchItem::Modified(object))) => {
                    objects += 1;
                    self.send_object(object, Change::InitApply).await?;
                }
                // Not part of the initial events; the relist's end removes what is gone.
                Some(Ok(WatchItem::Deleted(_))) => {}
                Some(Ok(WatchItem::Bookmark(_))) => {
                    return Err(StreamFailed::Unsupported(
                        "the server ignored sendInitialEvents".into(),
                    ))
                }
                Some(Ok(WatchItem::InitialEventsEnd(resource_version))) => {
                    self.end_list(objects).await?;
                    return Ok(resource_version);
                }
                Some(Err(error)) => return Err(call(error)),
            }
        }
    }
}
