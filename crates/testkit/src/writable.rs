//! The stand-in's writable resources, as an agent writes them: coordination.k8s.io/v1 Leases and
//! core/v1 Events, namespaced, with the API server's create/get/update/list semantics:
//! - `POST` to the collection creates (201); a name already taken is 409 `AlreadyExists`;
//! - `GET` of a name is the object, or 404 `NotFound`; `GET` of the collection lists them;
//! - `PUT` of a name replaces it (200) only if the body's `metadata.resourceVersion` is the
//!   stored one: otherwise 409 `Conflict` (optimistic concurrency, what leader election needs);
//!   a missing object is 404.
//!
//! Every write stamps a new `resourceVersion` (and, on create, a `uid` and `creationTimestamp`).

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::http::{header, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// The writable collections: path prefix before the namespace, and after it.
const COLLECTIONS: [(&str, &str, &str); 2] = [
    (
        "/apis/coordination.k8s.io/v1/namespaces/",
        "leases",
        "Lease",
    ),
    ("/api/v1/namespaces/", "events", "Event"),
];

#[derive(Default)]
pub(crate) struct Writable {
    version: u64,
    /// By `(kind, namespace)`, then by name.
    objects: BTreeMap<(&'static str, String), BTreeMap<String, Value>>,
    /// Updates refused with 409 Conflict, and creates refused with 409 AlreadyExists.
    pub conflicts: u64,
}

/// The request's target: kind, namespace and name (none for the collection).
pub(crate) struct Target {
    kind: &'static str,
    namespace: String,
    name: Option<String>,
}

/// The writable collection or object `path` names, if any.
pub(crate) fn route(path: &str) -> Option<Target> {
    COLLECTIONS.iter().find_map(|(prefix, plural, kind)| {
        let rest = path.strip_prefix(prefix)?;
        let mut parts = rest.split('/');
        let namespace = parts.next().filter(|n| !n.is_empty())?;
        if parts.next()? != *plural {
            return None;
        }
        let name = parts.next().map(str::to_owned);
        if parts.next().is_some() || name.as_deref() == Some("") {
            return None;
        }
        Some(Target {
            kind,
            namespace: namespace.to_owned(),
            name,
        })
    })
}

fn status(code: StatusCode, reason: &str, message: String) -> Response {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16(),
    });
    respond(code, body)
}

fn respond(code: StatusCode, body: Value) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

impl Writable {
    pub(crate) fn handle(&mut self, method: &Method, target: Target, body: &Bytes) -> Response {
        let key = (target.kind, target.namespace.clone());
        let parse = || -> Result<Value, Box<Response>> {
            let value: Value = serde_json::from_slice(body).map_err(|e| {
                Box::new(status(
                    StatusCode::BAD_REQUEST,
                    "BadRequest",
                    format!("not JSON: {e}"),
                ))
            })?;
            if value["metadata"]["name"].as_str().is_none_or(str::is_empty) {
                return Err(Box::new(status(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Invalid",
                    "metadata.name: Required value".into(),
                )));
            }
            Ok(value)
        };
        match (method.clone(), target.name) {
            (Method::GET, None) => {
                let items: Vec<Value> = self
                    .objects
                    .get(&key)
                    .map(|o| o.values().cloned().collect())
                    .unwrap_or_default();
                respond(
                    StatusCode::OK,
                    json!({"kind": format!("{}List", target.kind), "apiVersion": "v1",
                           "metadata": {"resourceVersion": self.version.to_string()},
                           "items": items}),
                )
            }
            (Method::GET, Some(name)) => match self.objects.get(&key).and_then(|o| o.get(&name)) {
                Some(object) => respond(StatusCode::OK, object.clone()),
                None => not_found(target.kind, &name),
            },
            (Method::POST, None) => {
                let mut object = match parse() {
                    Ok(object) => object,
                    Err(response) => return *response,
                };
                let name = object["metadata"]["name"].as_str().unwrap().to_owned();
                let stored = self.objects.entry(key).or_default();
                if stored.contains_key(&name) {
                    self.conflicts += 1;
                    return status(
                        StatusCode::CONFLICT,
                        "AlreadyExists",
                        format!("{} \"{name}\" already exists", target.kind.to_lowercase()),
                    );
                }
                self.version += 1;
                let metadata = &mut object["metadata"];
                metadata["namespace"] = json!(target.namespace);
                metadata["resourceVersion"] = json!(self.version.to_string());
                metadata["uid"] = json!(format!("uid-{}", self.version));
                metadata["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
                stored.insert(name, object.clone());
                respond(StatusCode::CREATED, object)
            }
            (Method::PUT, Some(name)) => {
                let mut object = match parse() {
                    Ok(object) => object,
                    Err(response) => return *response,
                };
                let Some(current) = self.objects.get_mut(&key).and_then(|o| o.get_mut(&name))
                else {
                    return not_found(target.kind, &name);
                };
                let given = object["metadata"]["resourceVersion"].as_str();
                let held = current["metadata"]["resourceVersion"].as_str();
                if given.is_some_and(|given| Some(given) != held) {
                    self.conflicts += 1;
                    return status(
                        StatusCode::CONFLICT,
                        "Conflict",
                        format!(
                            "Operation cannot be fulfilled on {} \"{name}\": the object has been \
                             modified; please apply your changes to the latest version and try \
                             again",
                            target.kind.to_lowercase()
                        ),
                    );
                }
                self.version += 1;
                let metadata = &mut object["metadata"];
                metadata["namespace"] = json!(target.namespace);
                metadata["resourceVersion"] = json!(self.version.to_string());
                metadata["uid"] = current["metadata"]["uid"].clone();
                metadata["creationTimestamp"] = current["metadata"]["creationTimestamp"].clone();
                *current = object.clone();
                respond(StatusCode::OK, object)
            }
            (method, _) => status(
                StatusCode::METHOD_NOT_ALLOWED,
                "MethodNotAllowed",
                format!("{method} is not served here"),
            ),
        }
    }

    /// Every stored object of `kind` (`Lease`, `Event`), by namespace and name.
    pub(crate) fn all(&self, kind: &str) -> Vec<Value> {
        self.objects
            .iter()
            .filter(|((k, _), _)| *k == kind)
            .flat_map(|(_, objects)| objects.values().cloned())
            .collect()
    }
}

fn not_found(kind: &str, name: &str) -> Response {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("{} \"{name}\" not found", kind.to_lowercase()),
    )
}
