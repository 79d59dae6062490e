//! What a follower hands the reconcile loop: each object decoded on its own and sent as its
//! kind's event, and the markers that open and close a list.
//!
//! NetpolEndpointSlices (slice mode) go on their own path ([`Input::Slice`]): they are not
//! [`netpol_api::Object`]s. An unreadable slice is logged once, with the field, and changes
//! nothing (the endpoints it listed at its last valid version stay); its deletion still removes
//! them.

use std::sync::mpsc::TrySendError;
use std::sync::Arc;

use kube::api::ApiResource;
use netpol_api::crd::NetpolEndpointSlice;
use netpol_api::large_json::LARGE_ITEM_BYTES;
use netpol_api::ValidationError;
use netpol_indexes::Event;
use serde::de::IgnoredAny;
use serde_json::Value;
use tokio::sync::OwnedSemaphorePermit;

use super::{Follower, Stopped, FULL_CHANNEL_RETRY};
use crate::driver::{Deferred, Input};
use crate::indexes::SourceEvent;
use crate::kind::SourceKind;
use crate::sources::decode::{decode, skeleton, Decoded};
use crate::sources::kube_api::WatchObject;
use crate::sources::projection::{self, Shape};

/// What happened to one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Change {
    /// Listed (a list or a streaming list's initial events).
    InitApply,
    /// Added or modified (a watch event).
    Apply,
    Delete,
}

impl Change {
    fn event<K>(self, object: K) -> Event<K> {
        match self {
            Change::InitApply => Event::InitApply(object),
            Change::Apply => Event::Apply(object),
            Change::Delete => Event::Delete(object),
        }
    }
}

/// One object of a kind, read as far as it is before it is sent: a policy, pod, node or
/// namespace decoded (its JSON tree gone), a NetpolEndpointSlice still a tree (read as it is
/// sent, on its own path).
pub(super) enum Item {
    Slice(Value),
    Object(Decoded),
}

/// Reads one object of `kind` (see [`Item`]).
pub(super) fn read_item(kind: SourceKind, resource: &ApiResource, value: Value) -> Item {
    if kind == SourceKind::NetpolEndpointSlice {
        Item::Slice(value)
    } else {
        Item::Object(decode(kind, resource, value))
    }
}

/// A large policy of `kind` read from its JSON text without a tree (`netpol_api::large_json`),
/// or `None` for the tree reader to read it (and name what is wrong with it).
fn read_large_policy(kind: SourceKind, resource: &ApiResource, text: &str) -> Option<Item> {
    let object =
        netpol_api::large_json::read_listed_policy(text, &resource.kind, &resource.api_version)?;
    (SourceKind::of(&object) == kind).then(|| Item::Object(Decoded::Valid(Box::new(object))))
}

/// A policy's event; an invalid one is sent as rejected (the reconcile loop logs and counts it
/// once per change, as it does any invalid policy).
fn policy_input(kind: SourceKind, change: Change, decoded: Decoded) -> Input {
    match decoded {
        Decoded::Valid(object) => {
            Input::Event(Box::new(SourceEvent::new(kind, change.event(*object))))
        }
        Decoded::Invalid(error) => Input::Rejected(kind, Box::new(change.event(error))),
    }
}

/// A listed or watched policy of at least [`LARGE_ITEM_BYTES`] as its JSON `text`, to be read (see
/// [`read_large_policy`]) by the thread that takes it ([`Deferred`]), or `None` if the text is
/// not JSON (checked here, without building anything, so that the page fails as it would
/// have).
pub(super) fn deferred_policy(
    kind: SourceKind,
    resource: &ApiResource,
    shape: &'static Shape,
    text: Vec<u8>,
    change: Change,
    held: OwnedSemaphorePermit,
) -> Option<Input> {
    debug_assert!(kind.is_policy() && text.len() >= LARGE_ITEM_BYTES);
    std::str::from_utf8(&text).ok()?;
    serde_json::from_slice::<IgnoredAny>(&text).ok()?;
    let resource = resource.clone();
    Some(Input::Deferred(Deferred::holding(held, move || {
        let item = projection::read_item(
            &text,
            shape,
            |value| read_item(kind, &resource, value),
            |text| read_large_policy(kind, &resource, text),
        );
        match item {
            Ok(Item::Object(decoded)) => Some(policy_input(kind, change, decoded)),
            // A slice is not a policy, and the text was checked as JSON.
            Ok(Item::Slice(_)) | Err(_) => {
                tracing::error!(%kind, bytes = text.len(), "a listed policy checked as JSON did not read: skipped");
                None
            }
        }
    })))
}

/// A list begins (`Init`) or is complete (`InitDone`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Marker {
    Init,
    InitDone,
}

impl Marker {
    fn event<K>(self) -> Event<K> {
        match self {
            Marker::Init => Event::Init,
            Marker::InitDone => Event::InitDone,
        }
    }
}

impl Follower {
    /// Sends a list's start or end.
    pub(super) async fn send_marker(&self, marker: Marker) -> Result<(), Stopped> {
        let input = if self.kind == SourceKind::NetpolEndpointSlice {
            Input::Slice(Box::new(marker.event()))
        } else {
            Input::Event(Box::new(SourceEvent::new(self.kind, marker.event())))
        };
        self.send(input).await
    }

    /// Sends one watched object's event; an object that cannot be read is sent as rejected
    /// (policies) or as absent (other kinds). A large policy kept as its text goes to the
    /// reconcile loop as such ([`deferred_policy`]).
    pub(super) async fn send_object(
        &mut self,
        object: WatchObject,
        change: Change,
    ) -> Result<(), Stopped> {
        let value = match object {
            WatchObject::Tree(value) => value,
            WatchObject::Text(text) => {
                let text = Box::<str>::from(text).into_boxed_bytes().into_vec();
                // Read as JSON by the watch already: always sent.
                return self.send_large_policy(text, change).await.map(|_| ());
            }
        };
        let item = read_item(self.kind, &self.api.resource, value);
        self.send_item(item, change).await
    }

    /// Sends a large policy as its JSON text, for the thread that takes it to read
    /// ([`deferred_policy`]), once the texts in flight leave room for it
    /// ([`super::LARGE_IN_FLIGHT_BYTES`]). False, having sent nothing, if it is not JSON.
    pub(super) async fn send_large_policy(
        &mut self,
        text: Vec<u8>,
        change: Change,
    ) -> Result<bool, Stopped> {
        let weight = u32::try_from(text.len())
            .unwrap_or(u32::MAX)
            .min(super::LARGE_IN_FLIGHT_BYTES);
        let held = Arc::clone(&self.sinks.large_in_flight)
            .acquire_many_owned(weight)
            .await
            .map_err(|_| Stopped)?;
        let (kind, shape) = (self.kind, self.api.shape());
        match deferred_policy(kind, &self.api.resource, shape, text, change, held) {
            Some(input) => self.send(input).await.map(|()| true),
            None => Ok(false),
        }
    }

    /// Sends one object's event, the object read by [`read_item`].
    pub(super) async fn send_item(&mut self, item: Item, change: Change) -> Result<(), Stopped> {
        let decoded = match item {
            Item::Slice(value) => return self.send_slice(value, change).await,
            Item::Object(decoded) => decoded,
        };
        if self.kind.is_policy() {
            return self.send(policy_input(self.kind, change, decoded)).await;
        }
        match decoded {
            Decoded::Valid(object) => {
                self.logged_invalid.remove(&object.object_ref());
                self.send(Input::Event(Box::new(SourceEvent::new(
                    self.kind,
                    change.event(*object),
                ))))
                .await
            }
            Decoded::Invalid(error) => {
                self.log_invalid(&error);
                if change == Change::InitApply {
                    return Ok(()); // not in a list: absent
                }
                match skeleton(&self.api.resource, &error) {
                    Some(object) => {
                        self.send(Input::Event(Box::new(SourceEvent::new(
                            self.kind,
                            Event::Delete(object),
                        ))))
                        .await
                    }
                    None => Ok(()),
                }
            }
        }
    }

    /// One NetpolEndpointSlice's event, read and checked.
    async fn send_slice(&mut self, mut value: Value, change: Change) -> Result<(), Stopped> {
        if let Some(map) = value.as_object_mut() {
            map.entry("apiVersion")
                .or_insert_with(|| Value::String(self.api.resource.api_version.clone()));
            map.entry("kind")
                .or_insert_with(|| Value::String(self.api.resource.kind.clone()));
        }
        let name = value["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        match NetpolEndpointSlice::from_value(value) {
            Ok(slice) => {
                self.logged_invalid.remove(&slice.object_ref());
                self.send(Input::Slice(Box::new(change.event(slice)))).await
            }
            Err(error) => {
                self.log_invalid(&error);
                if change != Change::Delete {
                    return Ok(()); // its last valid endpoints stay
                }
                let gone = NetpolEndpointSlice::new(&name, Default::default());
                self.send(Input::Slice(Box::new(Event::Delete(gone)))).await
            }
        }
    }

    /// Logs an unreadable object once (until it is read again).
    fn log_invalid(&mut self, error: &ValidationError) {
        if self.logged_invalid.insert(error.object.clone()) {
            tracing::warn!(
                object = %error.object,
                field = %error.field,
                "unreadable object treated as absent: {}",
                crate::logline::bounded(&error.message)
            );
        }
    }

    /// Hands `input` to the reconcile loop, waiting while its channel is full: the runtime
    /// thread stays free for the other kinds and for HTTP meanwhile.
    pub(super) async fn send(&self, mut input: Input) -> Result<(), Stopped> {
        loop {
            match self.sinks.inputs.try_send(input) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Disconnected(_)) => return Err(Stopped),
                Err(TrySendError::Full(back)) => {
                    input = back;
                    tokio::time::sleep(FULL_CHANNEL_RETRY).await;
                }
            }
        }
    }
}
