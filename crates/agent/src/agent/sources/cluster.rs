//! The cluster mode's source: one `kube::runtime::watcher` per kind, with the default backoff, each
//! forwarding its events to the reconcile loop.
//!
//! A custom resource kind whose CRD is not installed answers 404. The kind then counts as listed
//! and empty (so that the agent does not wait for it forever), a warning says it is skipped, and
//! the watcher keeps retrying with its backoff: once the CRD appears, the next list succeeds and
//! its objects arrive like any others. Should a CRD be deleted, its objects go with it.

use std::fmt::Debug;
use std::sync::mpsc::Sender;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource};
use netpol_api::crd::{
    AdminNetworkPolicy, BaselineAdminNetworkPolicy, CiliumClusterwideNetworkPolicy,
    CiliumNetworkPolicy, ClusterNetworkPolicy,
};
use netpol_api::Object;
use netpol_api::{Node, Pod};
use serde::de::DeserializeOwned;

use crate::agent::driver::Input;
use crate::agent::indexes::SourceEvent;
use crate::agent::kind::SourceKind;

/// Starts one watch task per kind on the current tokio runtime.
pub fn spawn_watches(client: &Client, inputs: &Sender<Input>) {
    spawn::<Namespace>(client, inputs, SourceKind::Namespace, Object::Namespace);
    spawn::<Pod>(client, inputs, SourceKind::Pod, Object::Pod);
    spawn::<Node>(client, inputs, SourceKind::Node, Object::Node);
    spawn::<NetworkPolicy>(
        client,
        inputs,
        SourceKind::NetworkPolicy,
        Object::NetworkPolicy,
    );
    spawn::<AdminNetworkPolicy>(
        client,
        inputs,
        SourceKind::AdminNetworkPolicy,
        Object::AdminNetworkPolicy,
    );
    spawn::<BaselineAdminNetworkPolicy>(
        client,
        inputs,
        SourceKind::BaselineAdminNetworkPolicy,
        Object::BaselineAdminNetworkPolicy,
    );
    spawn::<ClusterNetworkPolicy>(
        client,
        inputs,
        SourceKind::ClusterNetworkPolicy,
        Object::ClusterNetworkPolicy,
    );
    spawn::<CiliumNetworkPolicy>(
        client,
        inputs,
        SourceKind::CiliumNetworkPolicy,
        Object::CiliumNetworkPolicy,
    );
    spawn::<CiliumClusterwideNetworkPolicy>(
        client,
        inputs,
        SourceKind::CiliumClusterwideNetworkPolicy,
        Object::CiliumClusterwideNetworkPolicy,
    );
}

fn spawn<K>(client: &Client, inputs: &Sender<Input>, kind: SourceKind, wrap: fn(K) -> Object)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::all(client.clone());
    let inputs = inputs.clone();
    tokio::spawn(async move { watch(api, kind, wrap, inputs).await });
}

/// Forwards one kind's events until the loop goes away.
async fn watch<K>(api: Api<K>, kind: SourceKind, wrap: fn(K) -> Object, inputs: Sender<Input>)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
{
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut absent = false;
    while let Some(result) = stream.next().await {
        let events = match result {
            Ok(event) => {
                if absent && matches!(event, Event::InitDone) {
                    tracing::info!(%kind, "the kind's CRD is installed now; following it");
                    absent = false;
                }
                vec![map_event(event, wrap)]
            }
            Err(error) if is_not_installed(&error) => {
                if absent {
                    continue;
                }
                absent = true;
                tracing::warn!(%kind, "CRD not installed: skipping this kind until it appears");
                // No objects of a kind that does not exist: an empty, complete list.
                vec![Event::Init, Event::InitDone]
            }
            Err(error) => {
                tracing::warn!(%kind, %error, "watch failed; retrying with backoff");
                continue;
            }
        };
        for event in events {
            if inputs
                .send(Input::Event(Box::new(SourceEvent::new(kind, event))))
                .is_err()
            {
                return;
            }
        }
    }
}

fn map_event<K>(event: Event<K>, wrap: fn(K) -> Object) -> Event<Object> {
    match event {
        Event::Apply(o) => Event::Apply(wrap(o)),
        Event::Delete(o) => Event::Delete(wrap(o)),
        Event::InitApply(o) => Event::InitApply(wrap(o)),
        Event::Init => Event::Init,
        Event::InitDone => Event::InitDone,
    }
}

/// Whether the API server answered that the resource does not exist. For a resource type it
/// does not serve (a CRD not installed) it answers a plain-text 404, which kube turns into a
/// `Status` with the code but not the `NotFound` reason, so the code is what counts.
fn is_not_installed(error: &watcher::Error) -> bool {
    let not_found = |status: &kube::core::Status| status.code == 404 || status.is_not_found();
    match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => {
            matches!(e, kube::Error::Api(status) if not_found(status))
        }
        watcher::Error::WatchError(status) => not_found(status),
        watcher::Error::NoResourceVersion => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    /// An error as kube builds it from a plain-text answer, such as the API server's
    /// `404 page not found` for a resource type it does not serve.
    fn api_error(code: u16) -> kube::Error {
        let status = Status::failure("404 page not found", "Failed to parse error data");
        kube::Error::Api(status.with_code(code).boxed())
    }

    #[test]
    fn a_missing_crd_is_told_apart_from_other_failures() {
        assert!(is_not_installed(&watcher::Error::InitialListFailed(
            api_error(404)
        )));
        assert!(is_not_installed(&watcher::Error::WatchStartFailed(
            api_error(404)
        )));
        assert!(is_not_installed(&watcher::Error::WatchError(
            Status::failure("gone", "NotFound").with_code(404).boxed()
        )));
        // Forbidden (missing RBAC) and server errors are not "not installed": they are retried
        // without pretending the kind is empty.
        assert!(!is_not_installed(&watcher::Error::InitialListFailed(
            api_error(403)
        )));
        assert!(!is_not_installed(&watcher::Error::WatchFailed(api_error(
            500
        ))));
        assert!(!is_not_installed(&watcher::Error::NoResourceVersion));
    }

    #[test]
    fn events_keep_their_shape_when_wrapped() {
        let ns = Namespace::default();
        assert!(matches!(
            map_event(Event::InitApply(ns.clone()), Object::Namespace),
            Event::InitApply(Object::Namespace(_))
        ));
        assert!(matches!(
            map_event(Event::<Namespace>::InitDone, Object::Namespace),
            Event::InitDone
        ));
        assert!(matches!(
            map_event(Event::Delete(ns), Object::Namespace),
            Event::Delete(Object::Namespace(_))
        ));
    }
}
