//! How deep a JSON document may nest and still be read as JSON, shared by the tree reader
//! (`stream.rs`) and the reader of large policies (`large_json.rs`).

/// Nesting a JSON document may have and still be read as JSON: well inside the YAML parser's
/// depth limit (64), so that JSON never reads what YAML would refuse.
pub(crate) const MAX_JSON_DEPTH: usize = 48;

/// The depth the JSON reader gives an item of a list's `items` read in runs: the run's array
/// is at 1.
pub(crate) const LIST_ITEM_DEPTH: usize = 2;
