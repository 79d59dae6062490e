//! Splitting one large `kind: List` document into pieces that parse on their own, so that a
//! 10,000-pod `kubectl get pods -A -o yaml` is parsed on every core rather than on one.
//!
//! YAML parsing is most of what loading a large cluster costs, and the parser is sequential. The
//! list kubectl prints has a plain shape: top-level keys at column 0, and under `items:` one entry
//! per object, each starting with `- ` at column 0 and everything inside it indented. A run of
//! such entries is a block sequence by itself, so the items can be cut at entry starts and the
//! runs parsed in parallel. Only that shape is split; anything else (several documents, flow
//! style, anchors, a list kind that cannot be confirmed) returns `None` and is parsed whole, and
//! so does every text in which a piece fails to parse, so errors are reported exactly as a
//! sequential parse reports them.

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
    let mut head = String::new();
    let mut item_starts: Vec<usize> = Vec::new();
    let mut items: Option<Range<usize>> = None;
    let mut in_items = false;
    let mut seen_content = false;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let trimmed = line.trim_end();
        if trimmed.contains(['&', '*', '!']) && !in_items {
            // Anchors, aliases or tags in the head: not the plain shape.
            return None;
        }
        let top_level = !line.starts_with([' ', '\t', '\n', '\r', '#']) && !trimmed.is_empty();
        if !top_level {
            if !in_items {
                head.push_str(line);
            }
            continue;
        }
        if trimmed == "---" && !seen_content {
            continue;
        }
        seen_content = true;
        if trimmed.starts_with("---") || trimmed.starts_with("...") {
            // A second document: parse the stream whole.
            return None;
        }
        if let Some(rest) = trimmed.strip_prefix("- ") {
            if !in_items || rest.starts_with(['&', '*', '!', '[', '{']) {
                return None;
            }
            item_starts.push(start);
            continue;
        }
        if trimmed == "-" {
            return None;
        }
        if in_items {
            // The first top-level key after the items ends them.
            in_items = false;
            items = Some(items.take()?.start..start);
        }
        if is_items_key(trimmed) {
            if items.is_some() {
                return None;
            }
            in_items = true;
            items = Some(offset..offset);
            head.push_str("items: []\n");
            continue;
        }
        if !is_plain_key_line(trimmed) {
            return None;
        }
        head.push_str(line);
    }
    if in_items {
        items = Some(items?.start..text.len());
    }
    let items = items?;
    // Items must start right where the items block does, and nothing but items may be in it.
    if item_starts.first() != Some(&items.start) {
        return None;
    }
    Some(SplitList {
        head,
        items: runs(text, &item_starts, items.end, pieces.max(1)),
    })
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
            split_list("kind: List\nitems:\n  - a: 1\n  - b: 2\n", 2),
            None
        );
        assert_eq!(split_list("kind: List\nmetadata: {}\n", 2), None);
        assert_eq!(split_list("- a: 1\n- b: 2\n", 2), None);
    }

    #[test]
    fn a_leading_document_marker_and_comments_are_allowed() {
        let text = format!("---\n# all namespaces\n{LIST}");
        assert_eq!(split_list(&text, 3).unwrap().items.len(), 3);
    }
}
