//! JSON read by a JSON parser: `kubectl get -A -o json` and the API server's lists.
//!
//! JSON is YAML 1.2, so the YAML reader reads it too, but a JSON parser is many times faster. A
//! text that starts with `{` or `[` is read by `serde_json`, each object of a list converted as
//! soon as it has been parsed (no value tree of the whole list), and the result is used only
//! where it must equal the YAML reader's: anything the JSON parser refuses, and anything YAML
//! could read differently (duplicate keys, numbers that are not integers, escaped surrogate
//! pairs, characters YAML does not print, deep nesting), is left to the YAML reader, so errors
//! are reported exactly as before.

use serde::Deserialize;

use crate::object::Read;
use crate::stream::JsonDocument;

/// The objects of a JSON text, or `None` when it is not JSON or must be read as YAML.
pub(crate) fn parse_json(text: &str) -> Option<Vec<Read>> {
    let body = text.strip_prefix('\u{feff}').unwrap_or(text);
    let first = body.trim_start_matches([' ', '\t', '\r', '\n']);
    if !first.starts_with(['{', '[']) || may_read_differently_as_yaml(body) {
        return None;
    }
    let mut deserializer = serde_json::Deserializer::from_str(body);
    let document = JsonDocument::deserialize(&mut deserializer).ok()?;
    deserializer.end().ok()?;
    Some(document.0)
}

/// Escaped surrogates (`\ud83d\ude00`), which JSON pairs into one character and YAML may not,
/// and characters outside YAML's printable set (DEL, C1 controls, a byte order mark inside the
/// text, U+FFFE and U+FFFF), which JSON strings may hold raw.
fn may_read_differently_as_yaml(text: &str) -> bool {
    may_read_differently_as_yaml_bytes(text.as_bytes())
}

/// [`may_read_differently_as_yaml`] on bytes (patterns that run past their end do not count).
pub(crate) fn may_read_differently_as_yaml_bytes(bytes: &[u8]) -> bool {
    let surrogate_escape = memchr::memchr_iter(b'\\', bytes).any(|i| {
        matches!(
            bytes.get(i + 1..i + 4),
            Some([b'u', b'd' | b'D', b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F'])
        )
    });
    let unprintable = memchr::memchr3_iter(0x7f, 0xc2, 0xef, bytes).any(|i| match bytes[i] {
        0x7f => true,
        // U+0080..U+009F
        0xc2 => bytes.get(i + 1).is_some_and(|b| (0x80..=0x9f).contains(b)),
        // U+FEFF, U+FFFE, U+FFFF
        _ => matches!(
            bytes.get(i + 1..i + 3),
            Some([0xbb, 0xbf] | [0xbf, 0xbe | 0xbf])
        ),
    });
    surrogate_escape || unprintable
}
