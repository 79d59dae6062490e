//! Response compression as kube-apiserver does it: a response whose body reaches 128 KiB is
//! gzipped (level 1) when the request accepts gzip; smaller ones, and watch streams, go out as
//! they are (k8s.io/apiserver `responsewriters.deferredResponseWriter`). The stand-in counts what
//! goes over the wire, so a client that accepts gzip is seen to cost what it costs.

use std::io::Write;

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use flate2::write::GzEncoder;
use flate2::Compression;

/// The API server's threshold: smaller bodies are never compressed.
const GZIP_THRESHOLD_BYTES: usize = 128 * 1024;

/// Whether the request's `Accept-Encoding` names gzip.
pub(crate) fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| coding.split(';').next().unwrap_or_default().trim() == "gzip")
}

/// A JSON response of `body`, gzipped where the API server would; returns it with the number of
/// bytes it puts on the wire.
pub(crate) fn json_body(code: StatusCode, body: String, gzip: bool) -> (Response, usize) {
    let json = [(header::CONTENT_TYPE, "application/json")];
    if !gzip || body.len() < GZIP_THRESHOLD_BYTES {
        let sent = body.len();
        return ((code, json, body).into_response(), sent);
    }
    let mut encoder = GzEncoder::new(Vec::with_capacity(body.len() / 4), Compression::new(1));
    encoder
        .write_all(body.as_bytes())
        .expect("writing to memory");
    let compressed = encoder.finish().expect("writing to memory");
    let sent = compressed.len();
    let headers = [
        (header::CONTENT_TYPE, "application/json"),
        (header::CONTENT_ENCODING, "gzip"),
        (header::VARY, "Accept-Encoding"),
    ];
    ((code, headers, compressed).into_response(), sent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn gzip_is_accepted_only_when_named() {
        let mut headers = HeaderMap::new();
        assert!(!accepts_gzip(&headers));
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("br, gzip;q=0.8"),
        );
        assert!(accepts_gzip(&headers));
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("gzipx, deflate"),
        );
        assert!(!accepts_gzip(&headers));
    }

    #[test]
    fn only_bodies_from_128_kib_are_compressed() {
        let small = "{}".repeat(1000);
        let (response, sent) = json_body(StatusCode::OK, small.clone(), true);
        assert_eq!(sent, small.len());
        assert!(response.headers().get(header::CONTENT_ENCODING).is_none());

        let large = format!("[{}]", "{\"a\":1},".repeat(40_000));
        let (response, sent) = json_body(StatusCode::OK, large.clone(), true);
        assert_eq!(response.headers()[header::CONTENT_ENCODING], "gzip");
        assert!(sent * 10 < large.len(), "{sent} of {} bytes", large.len());
        let (_, sent) = json_body(StatusCode::OK, large.clone(), false);
        assert_eq!(sent, large.len());
    }
}
