//! A reader for the plain block YAML that `kubectl` and `netpol-dev synth` print, many times faster
//! than the general parser, used only where it reads exactly what the general parser reads.
//!
//! YAML parsing was most of what loading a large cluster cost (serde-saphyr reads about 13 MB/s
//! here). Dumps of clusters use a small part of YAML: block mappings and sequences indented with
//! spaces, one-line plain, single- and double-quoted scalars, `{}` and `[]`, comments and `---`
//! between documents. This reader reads that part into the `serde_json::Value`s the general
//! parser would give, resolving plain scalars as it does (YAML 1.2 core schema, strict booleans),
//! and gives up (`None`) on anything else: flow collections with content, block scalars (`|`,
//! `>`), multi-line scalars, anchors, aliases, tags, directives, complex or quoted keys, tabs,
//! unusual characters, duplicate keys, deep nesting, and every spelling whose resolution it does
//! not know for certain (a plain scalar that starts with a digit, a sign or a dot and is not a
//! plain decimal integer, for one). The caller then uses the general parser, so whatever this
//! reader accepts reads the same, and errors are always the general parser's.

use serde_json::{Map, Number, Value};

/// Nesting accepted: well inside the general parser's depth limit (64).
const MAX_DEPTH: usize = 48;

/// The documents of `text` (a stream of documents, or a block sequence of items), or `None` when
/// the text uses YAML this reader does not read.
pub(crate) fn read_documents(text: &str) -> Option<Vec<Value>> {
    let mut reader = Reader::of(text)?;
    let mut documents = Vec::new();
    loop {
        // Document starts between documents; a document is one node at column 0.
        while reader.peek().is_some_and(|l| l.document_start) {
            reader.at += 1;
        }
        let Some(line) = reader.peek() else {
            return Some(documents);
        };
        if line.indent != 0 {
            return None;
        }
        documents.push(reader.node(&mut Tree, 0, 0)?);
        match reader.peek() {
            None => return Some(documents),
            Some(line) if line.document_start => {}
            // Anything left over at the document's level is not a block this reader knows.
            Some(_) => return None,
        }
    }
}

/// A text of one document that is one mapping, or a block sequence of one mapping (a run of one
/// list item), as the JSON text of that mapping: what [`read_documents`] would read as its
/// tree, for a large policy to be read without one (`large_json.rs`). `None` for anything else,
/// or YAML this reader does not read.
pub(crate) fn single_mapping_as_json(text: &str) -> Option<String> {
    let mut reader = Reader::of(text)?;
    let capacity = reader.lines.iter().map(|l| l.text.len()).sum::<usize>() + 16;
    while reader.peek().is_some_and(|l| l.document_start) {
        reader.at += 1;
    }
    let first = reader.peek().filter(|l| l.indent == 0)?;
    let mut json = Json(String::with_capacity(capacity));
    reader.node(&mut json, 0, 0)?;
    while reader.peek().is_some_and(|l| l.document_start) {
        reader.at += 1;
    }
    if reader.peek().is_some() {
        return None; // another document
    }
    if !is_sequence_entry(first.text) {
        return Some(json.0);
    }
    match serde_json::from_str::<Vec<&serde_json::value::RawValue>>(&json.0).ok()?[..] {
        [item] if item.get().starts_with('{') => Some(item.get().to_owned()),
        _ => None,
    }
}

/// One line with content: its indentation and its text without indentation, line break or
/// trailing spaces.
#[derive(Clone, Copy)]
struct Line<'a> {
    indent: usize,
    text: &'a str,
    /// `---` alone (or followed by a comment).
    document_start: bool,
}

/// The lines of `text` that hold content (blank and comment lines dropped), or `None` for a
/// directive, a document end marker, a `---` with content after it, or a tab.
fn lines(text: &str) -> Option<Vec<Line<'_>>> {
    let mut out = Vec::new();
    for raw in text.split('\n') {
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        if raw.contains(['\t', '\r']) {
            return None;
        }
        let body = raw.trim_start_matches(' ');
        let body = body.trim_end_matches(' ');
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        let indent = raw.len() - raw.trim_start_matches(' ').len();
        if indent == 0 && (raw.starts_with('%') || raw.starts_with("...")) {
            return None;
        }
        let document_start = indent == 0 && raw.starts_with("---");
        if document_start {
            let rest = body[3..].trim_start_matches(' ');
            if !(rest.is_empty() || (rest.starts_with('#') && body[3..].starts_with(' '))) {
                // `---x` is text, `--- value` a document on the marker's line: not read here.
                return None;
            }
        }
        out.push(Line {
            indent,
            text: body,
            document_start,
        });
    }
    Some(out)
}

struct Reader<'a> {
    lines: Vec<Line<'a>>,
    at: usize,
}

/// What a block is read into: a `serde_json::Value` tree ([`Tree`]), or JSON text ([`Json`],
/// for a large policy read without a tree: `large_json.rs`). Keys come before their values, so
/// that text can be written as it is read.
trait Build {
    type Node;
    type Seq;
    type Map;
    fn scalar(&mut self, value: Value) -> Self::Node;
    fn start_seq(&mut self) -> Self::Seq;
    /// Before each item.
    fn next_item(&mut self, seq: &mut Self::Seq);
    fn push(&mut self, seq: &mut Self::Seq, item: Self::Node);
    fn end_seq(&mut self, seq: Self::Seq) -> Self::Node;
    fn start_map(&mut self) -> Self::Map;
    /// Before the key's value; false for a key the map already has (where that is known now).
    fn key(&mut self, map: &mut Self::Map, key: &str) -> bool;
    /// The value of the last key; false for a key the map already had.
    fn insert(&mut self, map: &mut Self::Map, value: Self::Node) -> bool;
    fn end_map(&mut self, map: Self::Map) -> Self::Node;
}

/// Reads blocks into `serde_json::Value`s.
struct Tree;

impl Build for Tree {
    type Node = Value;
    type Seq = Vec<Value>;
    /// The map, and the key whose value is being read.
    type Map = (Map<String, Value>, String);

    fn scalar(&mut self, value: Value) -> Value {
        value
    }

    fn start_seq(&mut self) -> Vec<Value> {
        Vec::new()
    }

    fn next_item(&mut self, _: &mut Vec<Value>) {}

    fn push(&mut self, seq: &mut Vec<Value>, item: Value) {
        seq.push(item);
    }

    fn end_seq(&mut self, seq: Vec<Value>) -> Value {
        Value::Array(seq)
    }

    fn start_map(&mut self) -> Self::Map {
        (Map::new(), String::new())
    }

    fn key(&mut self, (_, pending): &mut Self::Map, key: &str) -> bool {
        *pending = key.to_owned();
        true
    }

    fn insert(&mut self, (map, pending): &mut Self::Map, value: Value) -> bool {
        // One lookup: the insert says whether the key was there.
        map.insert(std::mem::take(pending), value).is_none()
    }

    fn end_map(&mut self, (map, _): Self::Map) -> Value {
        Value::Object(map)
    }
}

/// Writes blocks as JSON text, which reads back as the [`Tree`] of the same blocks.
struct Json(String);

impl Build for Json {
    type Node = ();
    /// Items written so far.
    type Seq = usize;
    /// The keys written so far.
    type Map = std::collections::HashSet<String>;

    fn scalar(&mut self, value: Value) {
        // A scalar (or `{}`, `[]`) always serializes.
        self.0.push_str(&value.to_string());
    }

    fn start_seq(&mut self) -> usize {
        self.0.push('[');
        0
    }

    fn next_item(&mut self, written: &mut usize) {
        if *written > 0 {
            self.0.push(',');
        }
        *written += 1;
    }

    fn push(&mut self, _: &mut usize, _: ()) {}

    fn end_seq(&mut self, _: usize) {
        self.0.push(']');
    }

    fn start_map(&mut self) -> Self::Map {
        self.0.push('{');
        Default::default()
    }

    fn key(&mut self, keys: &mut Self::Map, key: &str) -> bool {
        if !keys.is_empty() {
            self.0.push(',');
        }
        // Keys are plain (`is_plain_key`): nothing to escape.
        self.0.push('"');
        self.0.push_str(key);
        self.0.push_str("\":");
        keys.insert(key.to_owned())
    }

    fn insert(&mut self, _: &mut Self::Map, _: ()) -> bool {
        true
    }

    fn end_map(&mut self, _: Self::Map) {
        self.0.push('}');
    }
}

impl<'a> Reader<'a> {
    /// A reader of `text`, or `None` if it holds characters or lines this reader does not read.
    fn of(text: &'a str) -> Option<Reader<'a>> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        if has_unusual_characters(text) {
            return None;
        }
        Some(Reader {
            lines: lines(text)?,
            at: 0,
        })
    }

    fn peek(&self) -> Option<Line<'a>> {
        self.lines.get(self.at).copied()
    }

    /// The line at `at` if it belongs to a block at `indent` (not a document start).
    fn peek_at(&self, indent: usize) -> Option<Line<'a>> {
        self.peek()
            .filter(|l| !l.document_start && l.indent == indent)
    }

    /// The block node whose first line is the current one, at `indent`.
    fn node<B: Build>(&mut self, out: &mut B, indent: usize, depth: usize) -> Option<B::Node> {
        if depth > MAX_DEPTH {
            return None;
        }
        let line = self.peek_at(indent)?;
        if is_sequence_entry(line.text) {
            self.sequence(out, indent, depth)
        } else {
            self.mapping(out, indent, depth)
        }
    }

    /// A block sequence: entries `- ...` at `indent`.
    fn sequence<B: Build>(&mut self, out: &mut B, indent: usize, depth: usize) -> Option<B::Node> {
        let mut items = out.start_seq();
        while let Some(line) = self.peek_at(indent) {
            if !is_sequence_entry(line.text) {
                break;
            }
            let inner = line.text[1..].trim_start_matches(' ');
            if inner.is_empty() {
                // `-` alone, its item on the next lines: not printed by kubectl.
                return None;
            }
            out.next_item(&mut items);
            let inner_indent = indent + (line.text.len() - inner.len());
            let item = if is_sequence_entry(inner) || split_key(inner).is_some() {
                // A block node that starts on the entry's line: read it as if its first line
                // began at the column it starts at.
                self.lines[self.at] = Line {
                    indent: inner_indent,
                    text: inner,
                    document_start: false,
                };
                self.node(out, inner_indent, depth + 1)?
            } else {
                let item = out.scalar(scalar(inner)?);
                self.at += 1;
                self.no_continuation(indent)?;
                item
            };
            out.push(&mut items, item);
        }
        self.no_deeper(indent)?;
        Some(out.end_seq(items))
    }

    /// A block mapping: entries `key: value` or `key:` at `indent`.
    fn mapping<B: Build>(&mut self, out: &mut B, indent: usize, depth: usize) -> Option<B::Node> {
        let mut map = out.start_map();
        while let Some(line) = self.peek_at(indent) {
            if is_sequence_entry(line.text) {
                return None;
            }
            let (key, rest) = split_key(line.text)?;
            // A duplicate key (found by `key` or `insert`): the general parser refuses it.
            if !out.key(&mut map, key) {
                return None;
            }
            self.at += 1;
            let value = if rest.is_empty() || rest.starts_with('#') {
                match self.peek() {
                    Some(next) if !next.document_start && next.indent > indent => {
                        self.node(out, next.indent, depth + 1)?
                    }
                    // A sequence may sit at its key's indentation, as kubectl prints it.
                    Some(next)
                        if !next.document_start
                            && next.indent == indent
                            && is_sequence_entry(next.text) =>
                    {
                        self.sequence(out, indent, depth + 1)?
                    }
                    _ => out.scalar(Value::Null),
                }
            } else {
                let value = out.scalar(scalar(rest)?);
                self.no_continuation(indent)?;
                value
            };
            if !out.insert(&mut map, value) {
                return None;
            }
        }
        self.no_deeper(indent)?;
        Some(out.end_map(map))
    }

    /// After a scalar on a line of a block at `indent`: a deeper line would continue the scalar
    /// over several lines (or be an error), which this reader does not read.
    fn no_continuation(&self, indent: usize) -> Option<()> {
        match self.peek() {
            Some(next) if !next.document_start && next.indent > indent => None,
            _ => Some(()),
        }
    }

    /// After a block at `indent`: the next line must belong to an enclosing block (or be a
    /// sequence entry at the same indentation ending a mapping held by a sequence's entry, which
    /// the enclosing sequence reads).
    fn no_deeper(&self, indent: usize) -> Option<()> {
        match self.peek() {
            Some(next) if !next.document_start && next.indent > indent => None,
            _ => Some(()),
        }
    }
}

/// `- item` or `-` alone.
fn is_sequence_entry(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

/// `key: rest` or `key:` with a plain key this reader resolves as the general parser does (a
/// string): the key and what follows the `: `.
fn split_key(text: &str) -> Option<(&str, &str)> {
    let colon = text.find(':')?;
    let key = &text[..colon];
    let after = &text[colon + 1..];
    if !(after.is_empty() || after.starts_with(' ')) || !is_plain_key(key) {
        return None;
    }
    Some((key, after.trim_start_matches(' ')))
}

/// Letters, digits and `-._/`, starting with a letter, and not a word YAML reads as a boolean or
/// null.
fn is_plain_key(key: &str) -> bool {
    key.starts_with(|c: char| c.is_ascii_alphabetic())
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'/'))
        && !is_reserved_word(key)
}

/// Words some YAML reader takes for a boolean or null (YAML 1.2 core schema and YAML 1.1):
/// keys and plain scalars spelled so are left to the general parser.
fn is_reserved_word(word: &str) -> bool {
    const WORDS: [&str; 11] = [
        "true", "false", "null", "yes", "no", "on", "off", "y", "n", "nan", "inf",
    ];
    WORDS.iter().any(|w| w.eq_ignore_ascii_case(word)) || word.eq_ignore_ascii_case("infinity")
}

/// A one-line scalar after `key: ` or `- ` (comments allowed after it), or `{}` / `[]`.
fn scalar(text: &str) -> Option<Value> {
    let (value, rest) = match text.as_bytes()[0] {
        b'"' => double_quoted(text)?,
        b'\'' => single_quoted(text)?,
        b'{' | b'[' => {
            let (value, rest) = match text.get(..2) {
                Some("{}") => (Value::Object(Map::new()), &text[2..]),
                Some("[]") => (Value::Array(Vec::new()), &text[2..]),
                _ => return None,
            };
            (value, rest)
        }
        _ => {
            // A plain scalar ends at ` #`, where a comment starts.
            let plain = match text.find(" #") {
                Some(at) => text[..at].trim_end_matches(' '),
                None => text,
            };
            return plain_scalar(plain);
        }
    };
    // Only a comment may follow, and a comment starts after a space.
    let comment = rest.trim_start_matches(' ');
    (rest.is_empty() || (rest.starts_with(' ') && (comment.is_empty() || comment.starts_with('#'))))
        .then_some(value)
}

/// A plain scalar, resolved as the general parser resolves it, or `None` when this reader does
/// not know for certain how it resolves.
fn plain_scalar(text: &str) -> Option<Value> {
    let first = text.as_bytes()[0];
    if first.is_ascii_digit() {
        return numberlike(text);
    }
    match text {
        "true" => return Some(Value::Bool(true)),
        "false" => return Some(Value::Bool(false)),
        "null" => return Some(Value::Null),
        _ => {}
    }
    if !(first.is_ascii_alphabetic() || first == b'/') || is_reserved_word(text) {
        return None;
    }
    plain_text(text)
}

/// Plain text made only of characters that cannot start or end something else inside a plain
/// scalar (`: ` and ` #` were ruled out by the caller's split; a `:` at the end would be a key).
fn plain_text(text: &str) -> Option<Value> {
    let safe = text.bytes().all(|b| {
        b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'-' | b'.' | b'_' | b'/' | b':' | b'+' | b'=' | b'@' | b' ' | b','
            )
            || b >= 0x80
    });
    if !safe || text.ends_with(':') || text.contains(": ") {
        return None;
    }
    Some(Value::String(text.to_owned()))
}

/// A plain scalar starting with a digit. The general parser tries an integer (decimal without
/// leading zeros, `0x`/`0o`/`0b`, underscores allowed) and then a float (Rust's grammar: digits,
/// a dot, an exponent) before taking the text. A decimal integer without leading zeros is a
/// number; text holding a character no number has (a uid, `100m`, `2024-01-01`) or digits with
/// two or more dots (an address) is text; anything else is left to the general parser.
fn numberlike(text: &str) -> Option<Value> {
    let bytes = text.as_bytes();
    if bytes.iter().all(u8::is_ascii_digit) {
        if text.len() > 1 && text.starts_with('0') {
            return None;
        }
        return text
            .parse::<u64>()
            .ok()
            .map(|n| Value::Number(Number::from(n)));
    }
    if bytes.len() > 1
        && bytes[0] == b'0'
        && matches!(bytes[1], b'x' | b'X' | b'o' | b'O' | b'b' | b'B')
    {
        return None;
    }
    let dots = bytes.iter().filter(|b| **b == b'.').count();
    let address = dots >= 2 && bytes.iter().all(|b| b.is_ascii_digit() || *b == b'.');
    let no_number_has_it = bytes
        .iter()
        .any(|b| !(b.is_ascii_digit() || matches!(b, b'_' | b'.' | b'e' | b'E' | b'+' | b'-')));
    (address || no_number_has_it)
        .then(|| plain_text(text))
        .flatten()
}

/// `"..."` on one line: its text and what follows the closing quote. Only the escapes JSON has
/// are read (the rest of YAML's are left to the general parser), and no escaped surrogate.
fn double_quoted(text: &str) -> Option<(Value, &str)> {
    let mut out = String::new();
    let mut chars = text[1..].char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((Value::String(out), &text[i + 2..])),
            '\\' => {
                let (_, escape) = chars.next()?;
                out.push(match escape {
                    '"' => '"',
                    '\\' => '\\',
                    '/' => '/',
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    'u' => {
                        let mut code = 0u32;
                        for _ in 0..4 {
                            code = code * 16 + chars.next()?.1.to_digit(16)?;
                        }
                        // Surrogates and unprintables are left to the general parser.
                        char::from_u32(code).filter(|c| !c.is_control() || *c == '\n')?
                    }
                    _ => return None,
                });
            }
            _ => out.push(c),
        }
    }
    None
}

/// `'...'` on one line (`''` is a quote): its text and what follows the closing quote.
fn single_quoted(text: &str) -> Option<(Value, &str)> {
    let mut out = String::new();
    let body = &text[1..];
    let mut i = 0;
    while let Some(at) = body[i..].find('\'') {
        out.push_str(&body[i..i + at]);
        let quote = i + at;
        if body[quote + 1..].starts_with('\'') {
            out.push('\'');
            i = quote + 2;
        } else {
            return Some((Value::String(out), &body[quote + 1..]));
        }
    }
    None
}

/// Characters the general parser treats specially or refuses: controls (tabs and carriage
/// returns are looked at line by line), DEL, C1 controls (NEL is a YAML 1.1 line break), line
/// and paragraph separators, a byte order mark inside the text, U+FFFE and U+FFFF.
fn has_unusual_characters(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes
        .iter()
        .any(|&b| (b < 0x20 && !matches!(b, b'\n' | b'\r' | b'\t')) || b == 0x7f)
        || memchr::memchr3_iter(0xc2, 0xe2, 0xef, bytes).any(|i| match bytes[i] {
            0xc2 => bytes.get(i + 1).is_some_and(|b| (0x80..=0x9f).contains(b)),
            0xe2 => matches!(bytes.get(i + 1..i + 3), Some([0x80, 0xa8 | 0xa9])),
            _ => matches!(
                bytes.get(i + 1..i + 3),
                Some([0xbb, 0xbf] | [0xbf, 0xbe | 0xbf])
            ),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn saphyr(text: &str) -> Vec<Value> {
        serde_saphyr::from_multiple_with_options(text, crate::parse::yaml_options_for(text.len()))
            .unwrap()
    }

    /// What this reader reads equals what the general parser reads (documents that are only
    /// comments are nothing to both).
    fn same(text: &str) {
        let ours = read_documents(text).unwrap_or_else(|| panic!("not read: {text:?}"));
        let theirs: Vec<Value> = saphyr(text).into_iter().filter(|v| !v.is_null()).collect();
        assert_eq!(ours, theirs, "{text:?}");
    }

    /// The JSON text of a single mapping reads back as the tree of the same YAML.
    #[test]
    fn a_single_mapping_as_json_is_its_tree() {
        let mapping = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: a\n  labels: {}\nspec:\n  podSelector:\n    matchLabels:\n      app: \"web\"\n  egress:\n  - to:\n    - ipBlock:\n        cidr: 10.0.0.0/8\n        except:\n        - 10.1.0.0/16\n    - podSelector: {}\n    ports:\n    - port: 443\n      protocol: TCP\n    - port: 'dns # not a comment'\n    - port: 53 # a comment\n  empty:\n  list: []\n  yes_: true\n  no_: null\n";
        let tree = read_documents(mapping).unwrap();
        let json = single_mapping_as_json(mapping).unwrap();
        assert_eq!(vec![serde_json::from_str::<Value>(&json).unwrap()], tree);
        // A run of one list item: its mapping.
        let item = format!("- {}", mapping.trim_end().replace('\n', "\n  "));
        let json = single_mapping_as_json(&item).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&json).unwrap(), tree[0]);
        // Anything else is not one mapping.
        for other in [
            format!("{mapping}---\n{mapping}"),
            format!("{item}\n{item}"),
            "- a\n".to_owned(),
            "just text\n".to_owned(),
            mapping.replacen("kind:", "apiVersion: again\nkind:", 1),
        ] {
            assert_eq!(single_mapping_as_json(&other), None, "{other}");
        }
    }

    #[test]
    fn reads_what_kubectl_prints_as_the_general_parser_does() {
        same("apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata:\n    labels:\n      app: web\n      version: \"2\"\n    name: web-1\n  spec:\n    containers:\n    - image: nginx:1.25\n      name: main\n      ports:\n      - containerPort: 8080\n        protocol: TCP\n    tolerations: []\n  status:\n    podIP: 10.0.0.1\n    conditions: {}\nkind: List\nmetadata:\n  resourceVersion: \"\"\n");
        same("---\na: 1\n---\n# only a comment\n---\nb: 'it''s'\nc: \"tab\\tand \\u00e9\"\nd: hello world  # a comment\ne:\nf: null\ng: true\nh: /path/x\n");
        same("\u{feff}a:\r\n  - x\r\n  - - w\r\n    - z\r\n  - k: v\r\n    l: w\r\n");
        same("- 0\n- 10\n- 18446744073709551615\n- 1.2.3\n- \"\"\n- ''\n- a,b\n- x=y\n");
        same("uid: 4c8601b7-df40-7b84-e88c-c44c8601b7aa\nhash: 186c0f2fb7\ncpu: 100m\nt: 12:30\ne: 1e5x\n");
    }

    #[test]
    fn leaves_everything_else_to_the_general_parser() {
        for text in [
            "a: [1]\n",
            "a: {b: 1}\n",
            "a: |\n  x\n",
            "a: >\n  x\n",
            "a: &x 1\nb: *x\n",
            "a: !!str 1\n",
            "%YAML 1.2\n---\na: 1\n",
            "a: 1\n...\n",
            "--- a\n",
            "a: 1\na: 2\n",
            "a: b\n  c\n",
            "a:\tb\n",
            "\"a\": 1\n",
            "1: a\n",
            "true: a\n",
            "a: 1.5\n",
            "a: 012\n",
            "a: 1_000\n",
            "a: 0x1f\n",
            "a: -1\n",
            "a: .inf\n",
            "a: yes\n",
            "a: True\n",
            "a: ~\n",
            "a: \"\\ud83d\"\n",
            "a: \"\\x41\"\n",
            "a: \"open\n",
            "a: b: c\n",
            "-\n  a: 1\n",
            "a: 1\n- b\n",
            "  a: 1\n",
            "a: x\u{85}y\n",
            "a: \u{feff}\n",
            "? a\n: b\n",
            "a: @x\n",
            "a: `x\n",
            "a: 'x' y\n",
        ] {
            assert_eq!(read_documents(text), None, "{text:?}");
        }
    }

    #[test]
    fn strings_that_look_like_other_things_are_refused_not_misread() {
        // Each of these is read by the general parser as something other than the text, or is
        // close enough to such a spelling that this reader does not guess.
        for word in [
            "Null", "NULL", "True", "FALSE", "on", "Off", "Y", "nan", "Infinity",
        ] {
            assert_eq!(read_documents(&format!("a: {word}\n")), None, "{word}");
        }
        same("a: true\nb: false\nc: null\n");
        assert_eq!(
            read_documents("a: true\nb: false\nc: null\n").unwrap()[0],
            json!({"a": true, "b": false, "c": null})
        );
    }
}
