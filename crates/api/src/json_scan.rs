//! Byte scanners for a JSON text read in pieces: where a top-level object's `items` array is and
//! where its elements end, and whether the text holds anything YAML could read differently.
//!
//! They do not validate JSON: whatever they find is checked by parsing (the document without its
//! items, and each run of items), and a text they misjudge fails that parse and is read whole.

use std::ops::Range;

/// The structure of a JSON text whose top-level value is an object, scanned byte by byte.
#[derive(Debug)]
pub(crate) struct JsonShape {
    /// Bytes seen so far (the offset of the next byte).
    offset: usize,
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// At depth 1: whether the next string is a key.
    expect_key: bool,
    /// The depth-1 key being read (its first bytes), and the last one read.
    key: Vec<u8>,
    last_key_is_items: bool,
    /// The `items` value: where its `[` is, and where its `]` is once seen.
    items_open: Option<usize>,
    items: Option<Range<usize>>,
    /// The text without the items' elements, `[]` in their place.
    head: Vec<u8>,
    started: bool,
    refused: bool,
}

/// The longest head (the document without its items) kept: a larger one is read whole.
const MAX_HEAD: usize = 1 << 20;

impl JsonShape {
    pub(crate) fn new() -> Self {
        JsonShape {
            offset: 0,
            depth: 0,
            in_string: false,
            escaped: false,
            expect_key: false,
            key: Vec::new(),
            last_key_is_items: false,
            items_open: None,
            items: None,
            head: Vec::new(),
            started: false,
            refused: false,
        }
    }

    /// Takes the next bytes of the text (after a leading byte order mark).
    pub(crate) fn feed(&mut self, mut bytes: &[u8]) {
        while let Some((&b, rest)) = bytes.split_first() {
            if self.refused {
                return;
            }
            // Inside a string of an item nothing is kept, and only a quote or a backslash
            // matters: skipped to at once, as most of a CIDR-heavy policy is its strings.
            if self.in_string && !self.escaped && self.in_items() && self.depth >= 2 {
                let plain = string_run(bytes);
                if plain > 0 {
                    self.offset += plain;
                    bytes = &bytes[plain..];
                    continue;
                }
            }
            self.byte(b);
            self.offset += 1;
            bytes = rest;
        }
    }

    fn in_items(&self) -> bool {
        self.items_open.is_some() && self.items.is_none()
    }

    fn byte(&mut self, b: u8) {
        let inside_items = self.in_items() && self.depth >= 2;
        if !inside_items {
            self.head.push(b);
            if self.head.len() > MAX_HEAD {
                self.refused = true;
                return;
            }
        }
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
                if self.depth == 1 && self.expect_key {
                    self.expect_key = false;
                    self.last_key_is_items = self.key == b"items";
                }
            } else if self.depth == 1 && self.expect_key && self.key.len() <= 5 {
                self.key.push(b);
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.expect_key {
                    self.key.clear();
                }
            }
            b'{' | b'[' => {
                if self.depth == 0 {
                    if self.started || b != b'{' {
                        self.refused = true;
                        return;
                    }
                    self.started = true;
                    self.expect_key = true;
                } else if self.depth == 1 && b == b'[' && self.last_key_is_items {
                    if self.items_open.is_some() {
                        // `items` twice: the JSON reader refuses it; read whole.
                        self.refused = true;
                        return;
                    }
                    self.items_open = Some(self.offset + 1);
                }
                self.depth += 1;
            }
            b'}' | b']' => {
                if self.depth == 0 {
                    self.refused = true;
                    return;
                }
                self.depth -= 1;
                if self.depth == 1 && self.in_items() {
                    let open = self.items_open.expect("in items");
                    self.items = Some(open..self.offset);
                    // The head holds the `[`; the elements were left out.
                    self.head.push(b']');
                }
            }
            b',' if self.depth == 1 => {
                self.expect_key = true;
                self.last_key_is_items = false;
            }
            b' ' | b'\t' | b'\r' | b'\n' | b':' | b',' => {}
            _ if self.depth == 0 => self.refused = true,
            _ => {}
        }
    }

    /// Where the items' elements start (after their `[`), once it has been seen.
    pub(crate) fn items_start(&self) -> Option<usize> {
        self.items_open
    }

    /// Where the items' elements end (at their `]`), once it has been seen.
    pub(crate) fn items_end(&self) -> Option<usize> {
        self.items.as_ref().map(|items| items.end)
    }

    /// The head and the span of the items' elements, if the text is an object with one `items`
    /// array; `None` when it must be read whole.
    pub(crate) fn finish(self) -> Option<(String, Range<usize>)> {
        let items = self.items.clone()?;
        Some((self.into_head()?, items))
    }

    /// The text without the items' elements, if it is one complete JSON object (with or without
    /// an `items` array).
    pub(crate) fn into_head(self) -> Option<String> {
        if self.refused || self.depth != 0 || self.in_string || !self.started {
            return None;
        }
        String::from_utf8(self.head).ok()
    }
}

/// Where the elements of a JSON array end: fed the bytes between its `[` and `]`, it finds the
/// commas that separate its elements.
#[derive(Debug, Default)]
pub(crate) struct ElementEnds {
    depth: usize,
    in_string: bool,
    escaped: bool,
}

impl ElementEnds {
    /// The offset in `bytes` of the first separating comma, if any (scanning state carries over
    /// from the bytes given before).
    pub(crate) fn next_separator(&mut self, bytes: &[u8]) -> Option<usize> {
        let mut i = 0;
        while let Some(&b) = bytes.get(i) {
            i += 1;
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                } else {
                    // Past the string's plain bytes at once (see `JsonShape::feed`).
                    i += string_run(&bytes[i..]);
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => self.depth = self.depth.saturating_sub(1),
                b',' if self.depth == 0 => return Some(i - 1),
                _ => {}
            }
        }
        None
    }
}

/// How many bytes at the start of `bytes`, inside a string, neither end it nor escape.
fn string_run(bytes: &[u8]) -> usize {
    memchr::memchr2(b'"', b'\\', bytes).unwrap_or(bytes.len())
}

/// Whether a JSON text holds what YAML could read differently (see `json.rs`), fed in pieces:
/// escaped surrogates, and characters outside YAML's printable set.
#[derive(Debug, Default)]
pub(crate) struct YamlHazards {
    /// The last bytes of the previous piece, for patterns that span two pieces.
    tail: Vec<u8>,
    found: bool,
}

impl YamlHazards {
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        if self.found || bytes.is_empty() {
            return;
        }
        let carried = self.tail.len();
        let mut window = std::mem::take(&mut self.tail);
        window.extend_from_slice(&bytes[..bytes.len().min(3)]);
        // Patterns starting in the carried tail (completed by this piece's first bytes), and
        // patterns inside this piece.
        self.found = (0..carried).any(|i| hazard_at(&window, i))
            || crate::json::may_read_differently_as_yaml_bytes(bytes);
        // The stream's last three bytes: a pattern not complete yet starts among them.
        window.truncate(carried);
        window.extend_from_slice(&bytes[bytes.len().saturating_sub(3)..]);
        let excess = window.len().saturating_sub(3);
        window.drain(..excess);
        self.tail = window;
    }

    pub(crate) fn found(&self) -> bool {
        self.found
    }
}

/// Whether a hazardous pattern starts at `bytes[i]` and is complete within `bytes`.
fn hazard_at(bytes: &[u8], i: usize) -> bool {
    match bytes[i] {
        b'\\' => matches!(
            bytes.get(i + 1..i + 4),
            Some([b'u', b'd' | b'D', b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F'])
        ),
        0x7f => true,
        0xc2 => bytes.get(i + 1).is_some_and(|b| (0x80..=0x9f).contains(b)),
        0xef => matches!(
            bytes.get(i + 1..i + 3),
            Some([0xbb, 0xbf] | [0xbf, 0xbe | 0xbf])
        ),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(text: &str) -> Option<(String, Range<usize>)> {
        let mut shape = JsonShape::new();
        // Fed in odd pieces: the result must not depend on where pieces end.
        for piece in text.as_bytes().chunks(3) {
            shape.feed(piece);
        }
        shape.finish()
    }

    #[test]
    fn finds_the_items_of_a_list_and_leaves_the_rest_as_head() {
        let text = r#"{"apiVersion": "v1", "items": [{"a": "],\"["}, {"b": [1, {"c": 2}]}], "kind": "List"}"#;
        let (head, items) = shape(text).unwrap();
        assert_eq!(head, r#"{"apiVersion": "v1", "items": [], "kind": "List"}"#);
        assert_eq!(
            &text[items.clone()],
            r#"{"a": "],\"["}, {"b": [1, {"c": 2}]}"#
        );
        let mut ends = ElementEnds::default();
        let elements = &text.as_bytes()[items];
        let comma = ends.next_separator(elements).unwrap();
        assert_eq!(&elements[..comma], br#"{"a": "],\"["}"#);
        assert_eq!(ends.next_separator(&elements[comma + 1..]), None);
    }

    #[test]
    fn other_shapes_are_read_whole() {
        for text in [
            r#"[{"kind": "Namespace"}]"#,
            r#"{"kind": "List", "items": {}}"#,
            r#"{"kind": "List"}"#,
            r#"{"items": [], "items": []}"#,
            r#"{"items": [] } x"#,
            r#"{"items": [{"a": 1}]"#,
            r#"{"a": "items", "b": [1]}"#,
        ] {
            assert_eq!(shape(text), None, "{text}");
        }
        // A key other than `items` holding an array is head.
        let (head, items) = shape(r#"{"itemsx": [1], "items": [2]}"#).unwrap();
        assert_eq!(head, r#"{"itemsx": [1], "items": []}"#);
        assert_eq!(items.len(), 1);
    }

    #[test]
    fn hazards_are_found_across_pieces() {
        let text = "{\"a\": \"\\ud83d\\ude00\"}";
        for split in 0..text.len() {
            let mut hazards = YamlHazards::default();
            hazards.feed(&text.as_bytes()[..split]);
            hazards.feed(&text.as_bytes()[split..]);
            assert!(hazards.found(), "split at {split}");
        }
        let mut hazards = YamlHazards::default();
        hazards.feed(b"{\"a\": \"\\u00e9\"}");
        assert!(!hazards.found());
        let nel = "\u{85}".as_bytes();
        let mut hazards = YamlHazards::default();
        hazards.feed(&nel[..1]);
        hazards.feed(&nel[1..]);
        assert!(hazards.found());
        // One byte at a time.
        let mut hazards = YamlHazards::default();
        for byte in text.as_bytes() {
            hazards.feed(std::slice::from_ref(byte));
        }
        assert!(hazards.found());
    }
}
