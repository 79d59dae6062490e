//! The stand-in's lists: a consistent snapshot read in pages (`limit`, `continue`), filtered by
//! the query's field selector.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};

use super::selector::FieldSelector;
use super::traffic::Traffic;
use super::{as_served, encoding, json_response, query_param, status, Resource, Shared};

pub(super) fn serve_list(
    shared: &Shared,
    resource: &Resource,
    query: &str,
    gzip: bool,
) -> Response {
    let mut store = shared.store.lock().unwrap();
    let limit = query_param(query, "limit").and_then(|l| l.parse::<usize>().ok());
    // A continue token is "resourceVersion-offset": the list is a consistent snapshot, so a
    // token older than the compaction is gone.
    let (version, offset) = match query_param(query, "continue") {
        Some(token) => {
            let (version, offset) = token.split_once('-').unwrap();
            let version: u64 = version.parse().unwrap();
            if version < store.compacted {
                return json_response(
                    StatusCode::GONE,
                    status(410, "Expired", "the continue token is too old"),
                );
            }
            (version, offset.parse::<usize>().unwrap())
        }
        None => (store.version, 0),
    };
    // Only the page's objects are copied: a list of 150,000 pods in pages of 500 would
    // otherwise copy every pod for every page.
    let selector = FieldSelector::of_query(query);
    let selected: Vec<&Value> = store
        .objects
        .get(resource.2)
        .into_iter()
        .flat_map(|o| o.values())
        .filter(|o| selector.matches(o))
        .collect();
    let total = selected.len();
    let end = limit.map_or(total, |l| (offset + l).min(total));
    let items: Vec<Value> = selected
        .into_iter()
        .skip(offset)
        .take(end.saturating_sub(offset))
        .map(|o| as_served(o, true))
        .collect();
    let mut metadata = json!({"resourceVersion": version.to_string()});
    if end < total {
        metadata["continue"] = json!(format!("{version}-{end}"));
    }
    store.version = store.version.max(version);
    let body = json!({
        "kind": format!("{}List", resource.0),
        "apiVersion": resource.1,
        "metadata": metadata,
        "items": items,
    })
    .to_string();
    let (response, sent) = encoding::json_body(StatusCode::OK, body, gzip);
    Traffic::count(&shared.traffic.list_bytes, sent);
    response
}

/// `response` with the first half of its body, then a broken connection.
pub(super) async fn cut_off(response: Response) -> Response {
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .expect("a body in memory");
    let half = bytes.slice(..bytes.len() / 2);
    let broken = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "cut off");
    let chunks = futures::stream::iter([Ok(half), Err(broken)]);
    let mut response = Response::from_parts(parts, axum::body::Body::from_stream(chunks));
    // The length of the whole body, of which half comes.
    response
        .headers_mut()
        .remove(axum::http::header::CONTENT_LENGTH);
    response
}
