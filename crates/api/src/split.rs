//! Splitting a large YAML stream into pieces that parse on their own, so that a 10,000-pod
//! `kubectl get pods -A -o yaml` (one `kind: List`) or a file of 10,000 `---`-separated documents
//! is parsed on every core rather than on one.
//!
//! YAML parsing is most of what loading a large cluster costs, and the parser is sequential.
//!
//! - **Several documents** ([`split_documents`]): a line that starts with `---` followed by a
//!   space, a tab or the line's end is a document start wherever it appears (YAML 1.2 forbids
//!   such a line inside any scalar or collection), so the stream can be cut before such lines and
//!   each run of whole documents parsed alone.
//! - **One `kind: List`** ([`split_list`]): the list kubectl prints has a plain shape: top-level
//!   keys at column 0, and under `items:` one entry per object, each starting with `- ` at column
//!   0 and everything inside it indented. A run of such entries is a block sequence by itself, so
//!   the items can be cut at entry starts.
//!
//! What could make a piece read differently alone is refused: directives (`%YAML`, `%TAG`), a
//! byte order mark past the start, and anything that looks like an anchor, an alias or a merge key
//! (the parser's limits on those count over the whole stream). Refused texts return `None` and are
//! parsed whole, and so is every text in which a piece fails to parse, so errors are reported
//! exactly as a sequential parse reports them.

use std::ops::Range;

/// Texts below this size are parsed whole: splitting would not pay for the threads.
pub(crate) const MIN_SPLIT_BYTES: usize = 1 << 20;

/// One `kind: List` document cut into its top-level fields (`head`, the document without its
/// items) and runs of whole items.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct SplitList<'a> {
    pub head: String,
    pub items: Vec<&'a str>,
}

/// Splits `text` into at most `pieces` runs of items, or `None` when its shape is not the plain
/// one described above.
pub(crate) fn split_list(text: &str, pieces: usize) -> Option<SplitList<'_>> {
    if may_depend_on_other_pieces(text) {
        return None;
    }
    let mut shape = ListShape::default();
    let mut item_starts: Vec<usize> = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        if shape.line(line, start, offset)? {
            item_starts.push(start);
        }
    }
    let (head, items) = shape.finish(text.len())?;
    Some(SplitList {
        head,
        items: runs(text, &item_starts, items.end, pieces.max(1)),
    })
}

/// The plain `kind: List` shape, judged one line at a time (see the module's documentation):
/// what [`split_list`] checks, for a text read in pieces as well as a whole one.
#[derive(Debug, Default)]
pub(crate) struct ListShape {
    /// The document without its items, `items: []` in their place.
    head: String,
    in_items: bool,
    seen_content: bool,
    /// Where the items block starts and (once it ended) ends.
    items: Option<Range<usize>>,
    /// Where the first item starts.
    first_item: Option<usize>,
}

impl ListShape {
    /// Takes the line that spans `start..end` of the text: `Some(true)` if it starts an item,
    /// `None` if the text is not of the plain shape.
    pub(crate) fn line(&mut self, line: &str, start: usize, end: usize) -> Option<bool> {
        let trimmed = line.trim_end();
        if trimmed.contains(['&', '*', '!']) && !self.in_items {
            // Anchors, aliases or tags in the head: not the plain shape.
            return None;
        }
        let top_level = !line.starts_with([' ', '\t', '\n', '\r', '#']) && !trimmed.is_empty();
        if !top_level {
            if !self.in_items {
                self.head.push_str(line);
            }
            return Some(false);
        }
        if trimmed == "---" && !self.seen_content {
            return Some(false);
        }
        self.seen_content = true;
        if trimmed.starts_with("---") || trimmed.starts_with("...") {
            // A second document: parse the stream whole.
            return None;
        }
        if let Some(rest) = trimmed.strip_prefix("- ") {
            if !self.in_items || rest.starts_with(['&', '*', '!', '[', '{']) {
                return None;
            }
            self.first_item.get_or_insert(start);
            return Some(true);
        }
        if trimmed == "-" {
            return None;
        }
        if self.in_items {
            // The first top-level key after the items ends them.
            self.in_items = false;
            self.items = Some(self.items.take()?.start..start);
        }
        if is_items_key(trimmed) {
            if self.items.is_some() {
                return None;
            }
            self.in_items = true;
            self.items = Some(end..end);
            self.head.push_str("items: []\n");
            return Some(false);
        }
        if !is_plain_key_line(trimmed) {
            return None;
        }
        self.head.push_str(line);
        Some(false)
    }

    /// The head and the span of the items block, once the text (`len` bytes) has been seen
    /// whole; `None` if it is not of the plain shape.
    pub(crate) fn finish(mut self, len: usize) -> Option<(String, Range<usize>)> {
        if self.in_items {
            self.items = Some(self.items?.start..len);
        }
        let items = self.items?;
        // Items must start right where the items block does, and nothing but items may be in it.
        if self.first_item != Some(items.start) {
            return None;
        }
        Some((self.head, items))
    }
}

/// Splits a stream of several documents before document-start lines into at most `pieces` runs
/// of whole documents, or `None` when it has fewer than two documents or something that could
/// read differently in pieces (see the module's documentation).
pub(crate) fn split_documents(text: &str, pieces: usize) -> Option<Vec<&str>> {
    if may_depend_on_other_pieces(text) {
        return None;
    }
    let mut starts = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if refuses_document_split(line) {
            return None;
        }
        if is_document_start(line) {
            starts.push(offset);
        }
        offset += line.len();
    }
    // What comes before the first document start (a byte order mark, comments, or a first
    // document without a start line) belongs to the first run.
    if starts.first() != Some(&0) {
        starts.insert(0, 0);
    }
    if starts.len() < 2 {
        return None;
    }
    Some(runs(text, &starts, text.len(), pieces.max(1)))
}

/// A directive line (`%YAML`, `%TAG`): a stream with one is never cut into documents.
pub(crate) fn refuses_document_split(line: &str) -> bool {
    line.starts_with('%')
}

/// `---` at column 0 followed by a space, a tab or the end of the line.
pub(crate) fn is_document_start(line: &str) -> bool {
    line.strip_prefix("---")
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r', '\n']))
}

/// Whether a piece of `text` might read differently from the whole: a byte order mark past the
/// start, or something that looks like an anchor (`&a`), an alias (`*a`) or a merge key (`<<`),
/// whose limits the parser counts over the whole stream. Looks may deceive (`"a &b"` is text):
/// such texts are only parsed whole, never misread.
fn may_depend_on_other_pieces(text: &str) -> bool {
    let mut hazards = PieceHazards::default();
    text.split_inclusive('\n').any(|line| hazards.line(line))
}

/// [`may_depend_on_other_pieces`] one line at a time, each line with its line end: a line's
/// first byte follows a line end (or starts the text), both of which the check accepts before
/// an anchor, and no pattern it looks for holds a line end, so the lines' verdicts give the
/// whole text's.
#[derive(Debug, Default)]
pub(crate) struct PieceHazards {
    /// Lines seen: only the first may start with a byte order mark.
    lines: usize,
}

impl PieceHazards {
    /// Whether `line`, the next line of the text, might make a piece read differently.
    pub(crate) fn line(&mut self, line: &str) -> bool {
        let body = if self.lines == 0 {
            line.strip_prefix('\u{feff}').unwrap_or(line)
        } else {
            line
        };
        self.lines += 1;
        let bytes = body.as_bytes();
        // One pass for the bytes that can start a hazard (each line of a 100 MB pod list goes
        // through here): a byte order mark starts with 0xEF, a merge key with `<`, an anchor or
        // an alias with `&` or `*`.
        const BOM: &[u8] = "\u{feff}".as_bytes();
        memchr::memchr(BOM[0], bytes).is_some_and(|_| body.contains('\u{feff}'))
            || memchr::memchr3_iter(b'&', b'*', b'<', bytes).any(|i| match bytes[i] {
                b'<' => bytes.get(i + 1) == Some(&b'<'),
                _ => {
                    bytes
                        .get(i + 1)
                        .is_some_and(|next| !next.is_ascii_whitespace())
                        && (i == 0
                            || matches!(
                                bytes[i - 1],
                                b' ' | b'\t' | b'\n' | b'[' | b'{' | b',' | b'-' | b':' | b'?'
                            ))
                }
            })
    }
}

/// `items:` with nothing after it but spaces or a comment.
fn is_items_key(line: &str) -> bool {
    line.strip_prefix("items:")
        .is_some_and(|rest| rest.trim().is_empty() || rest.trim_start().starts_with('#'))
}

/// `key: value` or `key:` with a plain key, as kubectl prints the head of a list.
fn is_plain_key_line(line: &str) -> bool {
    line.split_once(':').is_some_and(|(key, _)| {
        !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
    })
}

/// The items cut into `pieces` runs of about equal size, each a whole number of items.
fn runs<'a>(text: &'a str, starts: &[usize], end: usize, pieces: usize) -> Vec<&'a str> {
    let total = end - starts[0];
    let target = total.div_ceil(pieces);
    let mut out = Vec::with_capacity(pieces);
    let mut run_start = starts[0];
    for &start in &starts[1..] {
        if start - run_start >= target {
            out.push(&text[run_start..start]);
            run_start = start;
        }
    }
    out.push(&text[run_start..end]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST: &str =
        "apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: a\n\
                        - apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: b\n\
                        - apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: c\n\
                        kind: List\nmetadata:\n  resourceVersion: \"\"\n";

    #[test]
    fn a_kubectl_list_splits_at_item_starts() {
        let split = split_list(LIST, 2).unwrap();
        assert_eq!(
            split.head,
            "apiVersion: v1\nitems: []\nkind: List\nmetadata:\n  resourceVersion: \"\"\n"
        );
        assert_eq!(split.items.len(), 2);
        assert_eq!(
            split.items.concat(),
            LIST[LIST.find("- ").unwrap()..LIST.find("kind: List").unwrap()]
        );
        assert!(split
            .items
            .iter()
            .all(|run| run.starts_with("- apiVersion")));
    }

    #[test]
    fn more_pieces_than_items_gives_one_run_per_item() {
        assert_eq!(split_list(LIST, 10).unwrap().items.len(), 3);
    }

    #[test]
    fn other_shapes_are_not_split() {
        // Several documents, flow style, anchors, indented items, and no items at all.
        assert_eq!(split_list(&format!("{LIST}---\n{LIST}"), 2), None);
        assert_eq!(split_list("kind: List\nitems: [{a: 1}, {b: 2}]\n", 2), None);
        assert_eq!(
            split_list("kind: List\nitems:\n- &x {a: 1}\n- *x\n", 2),
            None
        );
        assert_eq!(
            split_list("kind: List\nitems:\n- a: &x 1\n- b: *x\n", 2),
            None
        );
        assert_eq!(
            split_list("kind: List\nitems:\n  - a: 1\n  - b: 2\n", 2),
            None
        );
        assert_eq!(split_list("kind: List\nmetadata: {}\n", 2), None);
        assert_eq!(split_list("- a: 1\n- b: 2\n", 2), None);
    }

    #[test]
    fn documents_split_before_their_start_lines() {
        let text =
            "# pods\napiVersion: v1\nkind: A\n---\nkind: B\n--- \nkind: C\n...\n---\r\nkind: D\n";
        let runs = split_documents(text, 10).unwrap();
        assert_eq!(
            runs,
            [
                "# pods\napiVersion: v1\nkind: A\n",
                "---\nkind: B\n",
                "--- \nkind: C\n...\n",
                "---\r\nkind: D\n"
            ]
        );
        assert_eq!(split_documents(text, 2).unwrap().concat(), text);
        // `---x`, `----` and an indented `---` start nothing.
        assert_eq!(split_documents("a: 1\n---x\n----\n  ---\n", 4), None);
    }

    #[test]
    fn documents_that_could_read_differently_alone_are_not_split() {
        let two = |extra: &str| format!("---\na: 1\n---\nb: {extra}\n");
        assert!(split_documents(&two("2"), 2).is_some());
        assert!(split_documents(&format!("\u{feff}{}", two("2")), 2).is_some());
        for refused in ["&x 2", "*x", "[*x]", "{<<: {}}", "\u{feff}2"] {
            assert_eq!(split_documents(&two(refused), 2), None, "{refused}");
        }
        assert_eq!(
            split_documents(&format!("%YAML 1.2\n{}", two("2")), 2),
            None
        );
        // Text that merely contains the characters is split.
        assert!(split_documents(&two("\"a&b*c\""), 2).is_some());
    }

    #[test]
    fn a_leading_document_marker_and_comments_are_allowed() {
        let text = format!("---\n# all namespaces\n{LIST}");
        assert_eq!(split_list(&text, 3).unwrap().items.len(), 3);
    }
}
