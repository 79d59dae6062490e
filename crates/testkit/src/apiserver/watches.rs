//! The stand-in's watches: a replay of the history after the resourceVersion asked for, a
//! bookmark, then live changes; with bookmarks every [`super::ApiServer::bookmark_every`] when
//! the client asks for them (as the API server sends one about once a minute), and silent while
//! the kind's watches are stalled ([`super::ApiServer::stall_watches`]): the connection stays
//! open and nothing arrives, as over a half-open connection.
//!
//! A streaming list (`sendInitialEvents=true`) starts with every current object as `ADDED`,
//! then a bookmark annotated `k8s.io/initial-events-end`, then changes; unless streaming lists
//! are refused ([`super::ApiServer::refuse_streaming_lists`]: 422, as with the WatchList
//! feature off).

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::selector::FieldSelector;
use super::{as_served, query_param, status, Change, Shared};

/// A watch of the kind at `path` from the query's resourceVersion.
pub(super) fn serve_watch(shared: &Arc<Shared>, path: &'static str, query: &str) -> Response {
    let from: u64 = query_param(query, "resourceVersion")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let bookmarks = query_param(query, "allowWatchBookmarks") == Some("true");
    let selector = FieldSelector::of_query(query);
    let streaming = query_param(query, "sendInitialEvents") == Some("true");
    if streaming && shared.store.lock().unwrap().streaming_refused {
        let invalid = status(
            422,
            "Invalid",
            "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
        );
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            [(header::CONTENT_TYPE, "application/json")],
            invalid.to_string(),
        )
            .into_response();
    }
    let (lines, body) = tokio::sync::mpsc::channel::<Bytes>(256);
    // Subscribed under the lock, so that no change falls between the replay and the live feed.
    let (replay, initial, mut live, current, expired, bookmark_every) = {
        let store = shared.store.lock().unwrap();
        let replay: Vec<Change> = store
            .history
            .iter()
            .filter(|c| {
                c.path == path && c.version > from && !streaming && selector.matches(&c.object)
            })
            .cloned()
            .collect();
        // The keys only: each object is read (and copied) as it is sent.
        let initial: Vec<String> = store
            .objects
            .get(path)
            .filter(|_| streaming)
            .map(|objects| {
                objects
                    .iter()
                    .filter(|(_, o)| selector.matches(o))
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default();
        let expired = from < store.compacted && !streaming;
        (
            replay,
            initial,
            shared.changes.subscribe(),
            store.version,
            expired,
            store.bookmark_every.filter(|_| bookmarks),
        )
    };
    let mut sever = shared.sever.subscribe();
    sever.mark_unchanged();
    let shared = shared.clone();
    tokio::spawn(async move {
        let kind = super::served().find(|r| r.2 == path).unwrap();
        let bookmark = |version: u64| {
            json!({"type": "BOOKMARK", "object": {
                "kind": kind.0, "apiVersion": kind.1,
                "metadata": {"resourceVersion": version.to_string()},
            }})
        };
        // Sends one line unless the kind's watches are stalled; false once the client is gone.
        // A connection once stalled stays silent, as a half-open one does: what it should have
        // delivered is lost, and only a new watch from the client's last resourceVersion brings
        // it (a bookmark here after the stall could skip it).
        let silenced = Arc::new(AtomicBool::new(false));
        let send = |value: Value| {
            let lines = lines.clone();
            let shared = shared.clone();
            let silenced = silenced.clone();
            async move {
                if shared.store.lock().unwrap().stalled.contains(path) {
                    silenced.store(true, Ordering::Relaxed);
                }
                if silenced.load(Ordering::Relaxed) {
                    // Ends with the client's connection.
                    return !lines.is_closed();
                }
                // In kube-apiserver's field order (`metav1.WatchEvent`: type, then object),
                // which a client may rely on to read the object straight from the line.
                let line = Bytes::from(format!(
                    "{{\"type\":{},\"object\":{}}}\n",
                    value["type"], value["object"]
                ));
                shared
                    .traffic
                    .watch_bytes
                    .fetch_add(line.len() as u64, Ordering::Relaxed);
                lines.send(line).await.is_ok()
            }
        };
        if expired {
            let gone = status(410, "Expired", "too old resource version");
            send(json!({"type": "ERROR", "object": gone})).await;
            return;
        }
        let mut sent = from;
        if streaming {
            for key in initial {
                // An object changed since is sent as it is now (its change follows too); one
                // deleted since is skipped (its delete follows).
                let object = {
                    let store = shared.store.lock().unwrap();
                    store.objects.get(path).and_then(|o| o.get(&key)).cloned()
                };
                let Some(object) = object else { continue };
                let event = json!({"type": "ADDED", "object": as_served(&object, false)});
                if !send(event).await {
                    return;
                }
            }
            let mut end = bookmark(current);
            end["object"]["metadata"]["annotations"] = json!({"k8s.io/initial-events-end": "true"});
            if !send(end).await {
                return;
            }
            sent = current;
        }
        for change in replay {
            sent = change.version;
            let event = json!({"type": change.kind, "object": as_served(&change.object, false)});
            if !send(event).await {
                return;
            }
        }
        // Every change after `current` comes through `live` (subscribed under the lock), so a
        // bookmark at `marked` never runs ahead of a change still on its way here.
        let mut marked = current.max(sent);
        if bookmarks && !send(bookmark(marked)).await {
            return;
        }
        let mut tick = bookmark_every.map(|every| {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick
        });
        loop {
            tokio::select! {
                change = live.recv() => match change {
                    Ok(change) if change.path == path && change.version > sent && selector.matches(&change.object) => {
                        sent = change.version;
                        marked = marked.max(sent);
                        let event = json!({"type": change.kind, "object": as_served(&change.object, false)});
                        if !send(event).await {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(_) => return,
                },
                _ = async { tick.as_mut().unwrap().tick().await }, if tick.is_some() => {
                    if !send(bookmark(marked)).await {
                        return;
                    }
                }
                _ = sever.changed() => return,
            }
        }
    });
    let stream = futures::stream::unfold(body, |mut body| async move {
        body.recv()
            .await
            .map(|bytes| (Ok::<_, Infallible>(bytes), body))
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(stream),
    )
        .into_response()
}
