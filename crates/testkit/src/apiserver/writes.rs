//! Writes of cluster-scoped custom resources ([`super::ENDPOINT_SLICES`]) with the API server's
//! semantics, into the same store lists and watches read, so that watches see them:
//! - `POST` to the collection creates (201, `ADDED`); a name taken is 409 `AlreadyExists`;
//! - `PUT` of a name replaces it (200, `MODIFIED`) only if the body's
//!   `metadata.resourceVersion` is the stored one (or absent): otherwise 409 `Conflict`;
//!   a missing object is 404;
//! - `DELETE` of a name removes it (200, `DELETED`), honouring
//!   `preconditions.resourceVersion` (409 on a mismatch); a missing object is 404.
//!
//! Every write stamps a new resourceVersion from the store's one sequence, as etcd's revision.

use axum::body::Bytes;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};

use super::traffic::Traffic;
use super::{identify, json_response, status, Change, Resource, Shared, ENDPOINT_SLICES};

/// The writable kinds.
const WRITABLE: [Resource; 1] = [ENDPOINT_SLICES];

/// A write's target: the kind, and the object's name (none for the collection).
pub(super) struct Target {
    resource: &'static Resource,
    name: Option<String>,
}

/// The writable collection or object `path` names, if any.
pub(super) fn route(path: &str) -> Option<Target> {
    WRITABLE.iter().find_map(|resource| {
        let rest = path.strip_prefix(resource.2)?;
        if rest.is_empty() {
            return Some(Target {
                resource,
                name: None,
            });
        }
        let name = rest.strip_prefix('/')?;
        (!name.is_empty() && !name.contains('/')).then(|| Target {
            resource,
            name: Some(name.to_owned()),
        })
    })
}

pub(super) fn handle(
    shared: &Shared,
    method: &Method,
    target: Target,
    path: &str,
    body: &Bytes,
) -> Response {
    Traffic::count(&shared.traffic.writable, 1);
    let mut store = shared.store.lock().unwrap();
    store
        .requests
        .push((std::time::Instant::now(), format!("{method} {path}")));
    let kind = target.resource.0;
    let collection = target.resource.2;
    let parsed: Result<Value, _> = serde_json::from_slice(body);
    let refuse = |code: u16, reason: &str, message: String| {
        let code_status = StatusCode::from_u16(code).unwrap();
        json_response(code_status, status(code, reason, &message))
    };
    let conflict = |name: &str| {
        refuse(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
                 please apply your changes to the latest version and try again",
                kind.to_lowercase()
            ),
        )
    };
    let not_found = |name: &str| {
        refuse(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", kind.to_lowercase()),
        )
    };
    match (method.clone(), target.name) {
        (Method::POST, None) | (Method::PUT, Some(_)) => {
            let Ok(mut object) = parsed else {
                return refuse(400, "BadRequest", "the body is not JSON".into());
            };
            let Some(name) = object["metadata"]["name"].as_str().map(str::to_owned) else {
                return refuse(422, "Invalid", "metadata.name: Required value".into());
            };
            let creating = *method == Method::POST;
            let stored = store.objects.get(collection).and_then(|o| o.get(&name));
            match (creating, stored) {
                (true, Some(_)) => {
                    return refuse(
                        409,
                        "AlreadyExists",
                        format!("{} \"{name}\" already exists", kind.to_lowercase()),
                    )
                }
                (false, None) => return not_found(&name),
                (false, Some(current)) => {
                    let given = object["metadata"]["resourceVersion"].as_str();
                    let held = current["metadata"]["resourceVersion"].as_str();
                    if given.is_some_and(|given| Some(given) != held) {
                        return conflict(&name);
                    }
                }
                (true, None) => {}
            }
            store.version += 1;
            let version = store.version;
            let previous = store.objects.get(collection).and_then(|o| o.get(&name));
            identify(&mut object, previous, version);
            let metadata = &mut object["metadata"];
            metadata["resourceVersion"] = json!(version.to_string());
            metadata["creationTimestamp"] = previous
                .map(|p| p["metadata"]["creationTimestamp"].clone())
                .unwrap_or_else(|| json!("2026-01-01T00:00:00Z"));
            object["apiVersion"] = json!(target.resource.1);
            object["kind"] = json!(kind);
            store
                .objects
                .entry(collection)
                .or_default()
                .insert(name, object.clone());
            let change = Change {
                version,
                path: collection,
                kind: if creating { "ADDED" } else { "MODIFIED" },
                object: object.clone(),
            };
            shared.record(&mut store, change);
            let code = if creating {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            json_response(code, object)
        }
        (Method::DELETE, Some(name)) => {
            let Some(current) = store.objects.get(collection).and_then(|o| o.get(&name)) else {
                return not_found(&name);
            };
            let wanted = parsed.ok().and_then(|b| {
                b["preconditions"]["resourceVersion"]
                    .as_str()
                    .map(str::to_owned)
            });
            if wanted.is_some_and(|w| {
                Some(w.as_str()) != current["metadata"]["resourceVersion"].as_str()
            }) {
                return conflict(&name);
            }
            let mut object = store
                .objects
                .get_mut(collection)
                .and_then(|o| o.remove(&name))
                .unwrap_or_default();
            store.version += 1;
            let version = store.version;
            object["metadata"]["resourceVersion"] = json!(version.to_string());
            let change = Change {
                version,
                path: collection,
                kind: "DELETED",
                object: object.clone(),
            };
            shared.record(&mut store, change);
            json_response(StatusCode::OK, object)
        }
        (method, _) => refuse(
            405,
            "MethodNotAllowed",
            format!("{method} is not served here"),
        ),
    }
}
