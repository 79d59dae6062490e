//! YAML streams and JSON values into objects: the entry points of reading.
//!
//! A stream holds documents (`---`), a document holds one object, a sequence of objects or a
//! `kind: List`, and each object is read by [`Object::read`] on its own, so one malformed
//! object never hides the others; the caller's [`FieldValidation`] then decides what becomes of
//! fields a policy kind does not have. Documents are read as the parser produces them (see
//! `stream.rs`); a large stream of documents or a large `kind: List` is cut into pieces parsed on
//! every core (see `split.rs`), and JSON is read by a JSON parser (see `json.rs`).

use serde_json::Value;

use crate::block::{read_documents, single_mapping_as_json};
use crate::error::ValidationError;
use crate::fields::FieldValidation;
use crate::json::parse_json;
use crate::large_json::{read_policy, LARGE_ITEM_BYTES};
use crate::object::{Object, Read};
use crate::split::{split_documents, split_list, MIN_SPLIT_BYTES};
use crate::stream::{is_list_kind, value_objects, Document};

/// YAML that could not be read at all: nothing in it is usable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid YAML: {0}")]
pub struct YamlError(pub String);

/// Reads a YAML stream of objects, ignoring fields a kind does not have (as from the API server;
/// see [`parse_yaml_each`] to refuse them): several `---`-separated documents, each an object, a list of
/// objects or a `kind: List` with `items`. Empty documents are skipped. Each object is read on its
/// own, so one malformed object does not hide the others; only broken YAML syntax fails the
/// whole stream.
pub fn parse_yaml(text: &str) -> Result<Vec<Result<Object, ValidationError>>, YamlError> {
    let mut objects = Vec::new();
    parse_yaml_each(
        text,
        FieldValidation::Ignore,
        |object| object,
        &mut |object| objects.push(object),
    )?;
    Ok(objects)
}

/// Reads a YAML stream as [`parse_yaml`] does and hands each object, after `validation` and
/// `prepare`, to `sink` in stream order. `prepare` runs on the threads that parse, so work done per object (a digest,
/// a conversion) is spread over the cores too. A large stream is parsed a few pieces at a time
/// and each piece's objects are handed on before the next pieces are parsed, so its objects
/// never all exist at once.
///
/// On an error, `sink` may already have received objects of the stream, which is broken as a
/// whole: the caller must discard them (as a sequential parse would have given none).
pub fn parse_yaml_each<T: Send>(
    text: &str,
    validation: FieldValidation,
    prepare: impl Fn(Result<Object, ValidationError>) -> T + Sync,
    sink: &mut dyn FnMut(T),
) -> Result<(), YamlError> {
    let prepare = |read: Read| prepare(validation.apply(read));
    parse_each_with(text, Cutting::for_this_machine(), prepare, sink)
}

/// When and how finely a stream is cut into pieces parsed in parallel.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cutting {
    /// Texts below this size are parsed whole: splitting would not pay for the threads.
    pub(crate) min_bytes: usize,
    /// The most text one piece holds, so that what a piece's objects hold while they wait to be
    /// handed on stays small whatever the size of the stream.
    pub(crate) max_piece_bytes: usize,
    pub(crate) workers: usize,
}

impl Cutting {
    pub(crate) fn for_this_machine() -> Cutting {
        Cutting {
            min_bytes: MIN_SPLIT_BYTES,
            max_piece_bytes: 1 << 20,
            workers: std::thread::available_parallelism().map_or(1, usize::from),
        }
    }
}

pub(crate) fn parse_each_with<T: Send>(
    text: &str,
    cutting: Cutting,
    prepare: impl Fn(Read) -> T + Sync,
    sink: &mut dyn FnMut(T),
) -> Result<(), YamlError> {
    if let Some(objects) = parse_json(text) {
        objects.into_iter().map(&prepare).for_each(sink);
        return Ok(());
    }
    let mut delivered = 0;
    if let Some(pieces) = pieces_of(text, cutting) {
        let complete = parse_pieces(&pieces, &prepare, &mut |object| {
            delivered += 1;
            sink(object);
        });
        if complete {
            return Ok(());
        }
    }
    if delivered == 0 {
        if let Some(objects) = parse_block(text) {
            objects.into_iter().map(&prepare).for_each(sink);
            return Ok(());
        }
    }
    // The sequential parse decides; the objects of the pieces already handed on are the first
    // ones it gives (pieces are cut where the stream parses the same in parts), so they are not
    // handed on again.
    for object in read_whole(text)?.into_iter().skip(delivered) {
        sink(prepare(object));
    }
    Ok(())
}

/// The sequential parse: what every other way of reading must equal.
pub(crate) fn read_whole(text: &str) -> Result<Vec<Read>, YamlError> {
    let documents: Vec<Document> =
        serde_saphyr::from_multiple_with_options(text, yaml_options_for(text.len()))
            .map_err(|e| YamlError(e.to_string()))?;
    Ok(documents.into_iter().flat_map(|d| d.0).collect())
}

/// The sequential parse as [`parse_yaml`] gives it, for tests to compare against.
#[cfg(test)]
fn parse_whole(text: &str) -> Result<Vec<Result<Object, ValidationError>>, YamlError> {
    let reads = read_whole(text)?.into_iter();
    Ok(reads.map(|r| FieldValidation::Ignore.apply(r)).collect())
}

/// Pieces per core: more pieces than cores keep every core busy when pieces parse at different
/// speeds.
pub(crate) const PIECES_PER_CORE: usize = 4;

/// A stream cut into pieces that parse on their own, and how each piece is parsed.
struct Pieces<'a> {
    runs: Vec<&'a str>,
    /// Runs of whole documents, or runs of the items of one `kind: List`.
    documents: bool,
    workers: usize,
}

/// A large stream of several documents, or a large `kind: List`, cut into pieces (see
/// [`crate::split`]); `None` when the text is small or has another shape.
fn pieces_of(text: &str, cutting: Cutting) -> Option<Pieces<'_>> {
    let cores = cutting.workers;
    if text.len() < cutting.min_bytes || cores < 2 {
        return None;
    }
    let count = (cores * PIECES_PER_CORE).max(text.len() / cutting.max_piece_bytes);
    if let Some(runs) = split_documents(text, count) {
        return Some(Pieces {
            runs,
            documents: true,
            workers: cores,
        });
    }
    let split = split_list(text, count)?;
    let head: Value =
        serde_saphyr::from_str_with_options(&split.head, yaml_options_for(split.head.len()))
            .ok()?;
    let is_list = head
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(is_list_kind);
    is_list.then_some(Pieces {
        runs: split.items,
        documents: false,
        workers: cores,
    })
}

/// The objects of a text in the plain block style kubectl prints, read by the block reader (see
/// `block.rs`); `None` when the text uses any other YAML.
fn parse_block(text: &str) -> Option<Vec<Read>> {
    // A large policy alone (a reader's run of one document or one list item, or a file of one
    // document) is read without its tree; anything else through the tree.
    if text.len() >= LARGE_ITEM_BYTES && may_be_one_node(text) {
        let large = single_mapping_as_json(text).and_then(|json| read_policy(&json, 0));
        if let Some(read) = large {
            return Some(vec![Ok(read)]);
        }
    }
    let mut objects = Vec::new();
    for document in read_documents(text)? {
        value_objects(document, &mut objects);
    }
    Some(objects)
}

/// Whether `text` may hold a single document or list item (a cheap test before the exact one,
/// [`single_mapping_as_json`]): no second document start, no second item at column 0.
fn may_be_one_node(text: &str) -> bool {
    let bytes = text.as_bytes();
    let items =
        memchr::memmem::find_iter(bytes, b"\n- ").count() + usize::from(text.starts_with("- "));
    let starts = memchr::memmem::find_iter(bytes, b"\n---").count();
    items <= 1 && starts <= 1
}

/// The objects of one piece, or `None` if it does not parse alone.
pub(crate) fn parse_piece(run: &str, documents: bool) -> Option<Vec<Read>> {
    if let Some(objects) = parse_block(run) {
        return Some(objects);
    }
    let options = yaml_options_for(run.len());
    if documents {
        let documents: Vec<Document> =
            serde_saphyr::from_multiple_with_options(run, options).ok()?;
        Some(documents.into_iter().flat_map(|d| d.0).collect())
    } else {
        serde_saphyr::from_str_with_options::<Document>(run, options)
            .ok()
            .map(|d| d.0)
    }
}

/// Parses the pieces a wave of `workers` at a time, one thread each, and hands each wave's
/// objects to `sink` in order before the next wave starts. Returns whether every piece parsed;
/// it stops at the first wave with a piece that did not.
fn parse_pieces<T: Send>(
    pieces: &Pieces,
    prepare: &(impl Fn(Read) -> T + Sync),
    sink: &mut dyn FnMut(T),
) -> bool {
    let parse = |run: &str| parse_piece(run, pieces.documents);
    pieces
        .runs
        .chunks(pieces.workers)
        .all(|wave| parse_wave(wave, &parse, prepare, sink))
}

/// Parses the runs of one wave with `parse`, one thread each, and hands their objects (after
/// `prepare`, on the parsing threads) to `sink` in order. Returns false, having handed on
/// nothing, if a run does not parse.
pub(crate) fn parse_wave<T: Send, S: AsRef<str> + Sync>(
    wave: &[S],
    parse: &(impl Fn(&str) -> Option<Vec<Read>> + Sync),
    prepare: &(impl Fn(Read) -> T + Sync),
    sink: &mut dyn FnMut(T),
) -> bool {
    let Some((first, rest)) = wave.split_first() else {
        return true;
    };
    let run = |run: &S| -> Option<Vec<T>> {
        Some(parse(run.as_ref())?.into_iter().map(prepare).collect())
    };
    let parsed: Vec<Option<Vec<T>>> = std::thread::scope(|scope| {
        let others: Vec<_> = rest.iter().map(|r| scope.spawn(|| run(r))).collect();
        let mut parsed = vec![run(first)];
        parsed.extend(others.into_iter().map(|h| h.join().ok().flatten()));
        parsed
    });
    if parsed.iter().any(Option::is_none) {
        return false;
    }
    parsed.into_iter().flatten().flatten().for_each(sink);
    true
}

/// How netpol reads YAML. Booleans follow YAML 1.2 (`true`/`false` only): under YAML 1.1 rules
/// the label value `y` in `{ns: y}` would become `true`, while Kubernetes users mean the string.
pub fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        strict_booleans: true,
        // One-line messages: callers print one line per problem.
        with_snippet: false,
    }
}

/// [`yaml_options`] with limits that grow with the text. serde-saphyr's default budget refuses
/// more than 1,024 documents or 250,000 nodes in a stream, which ordinary files exceed (10,000 pods
/// in one `kubectl get pods -A -o yaml`). Documents, nodes and events cannot outnumber the bytes that
/// write them, so limits of the text's length refuse nothing that is really there, while the
/// alias and anchor limits that stop expansion bombs stay at their defaults.
pub fn yaml_options_for(text_len: usize) -> serde_saphyr::Options {
    let linear = text_len.saturating_add(1024);
    let mut options = yaml_options();
    options.budget = serde_saphyr::budget! {
        max_documents: linear,
        max_nodes: linear,
        max_events: linear,
        max_total_scalar_bytes: linear,
        max_total_comment_bytes: linear,
    };
    options
}

/// Reads objects from JSON values, unpacking lists and `kind: List` objects, skipping nulls.
pub fn parse_values(
    values: impl IntoIterator<Item = Value>,
) -> Vec<Result<Object, ValidationError>> {
    values
        .into_iter()
        .flat_map(|value| unpack_lists(value, String::new()))
        .map(|(_, value)| Object::from_value(value))
        .collect()
}

/// The objects a value holds, each with its path below `at` so that an error can point at it:
/// the value itself, or the items of a YAML sequence (`at[2]`) or of a `kind: List` or typed list
/// such as `PodList` (`at.items[2]`), recursively, as `kubectl apply` unpacks them. Nulls hold
/// nothing.
pub fn unpack_lists(value: Value, at: String) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    unpack_into(value, at, &mut out);
    out
}

fn unpack_into(value: Value, at: String, out: &mut Vec<(String, Value)>) {
    match value {
        Value::Null => {}
        Value::Array(items) => {
            for (i, item) in items.into_iter().enumerate() {
                unpack_into(item, format!("{at}[{i}]"), out);
            }
        }
        Value::Object(mut map) if is_list_object(&map) => {
            if let Some(Value::Array(items)) = map.remove("items") {
                for (i, item) in items.into_iter().enumerate() {
                    unpack_into(item, format!("{at}.items[{i}]"), out);
                }
            }
        }
        other => out.push((at, other)),
    }
}

/// Whether an object is a list of objects: a list kind with an `items` sequence.
fn is_list_object(map: &serde_json::Map<String, Value>) -> bool {
    map.get("kind")
        .and_then(Value::as_str)
        .is_some_and(is_list_kind)
        && map.get("items").is_some_and(Value::is_array)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ObjectRef;
    use serde_json::json;

    #[test]
    fn dispatches_on_api_version_and_kind() {
        let objects = parse_yaml(
            r#"
apiVersion: v1
kind: Namespace
metadata: {name: x, labels: {ns: x}}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-all, namespace: x}
spec: {podSelector: {}}
---
- apiVersion: policy.networking.k8s.io/v1alpha1
  kind: AdminNetworkPolicy
  metadata: {name: anp}
  spec: {priority: 1, subject: {namespaces: {}}}
- apiVersion: cilium.io/v2
  kind: CiliumNetworkPolicy
  metadata: {name: cnp, namespace: y}
  spec: {endpointSelector: {}}
---
"#,
        )
        .unwrap();
        let kinds: Vec<ObjectRef> = objects
            .into_iter()
            .map(|o| o.unwrap().object_ref())
            .collect();
        assert_eq!(
            kinds,
            vec![
                ObjectRef::new("Namespace", None, "x"),
                ObjectRef::new("NetworkPolicy", Some("x"), "deny-all"),
                ObjectRef::new("AdminNetworkPolicy", None, "anp"),
                ObjectRef::new("CiliumNetworkPolicy", Some("y"), "cnp"),
            ]
        );
    }

    /// A `kind: List` over the split threshold, as kubectl prints it, with one invalid item.
    fn large_list() -> String {
        let mut text = String::from("apiVersion: v1\nitems:\n");
        for i in 0..12_000 {
            if i == 7_777 {
                text.push_str("- apiVersion: v1\n  kind: Namespace\n  metadata:\n    labels: {}\n");
                continue;
            }
            text.push_str(&format!(
                "- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: ns-{i}\n    labels:\n      team: t-{}\n",
                i % 7
            ));
        }
        text.push_str("kind: List\nmetadata:\n  resourceVersion: \"\"\n");
        assert!(text.len() > crate::split::MIN_SPLIT_BYTES);
        text
    }

    #[test]
    fn a_large_list_parsed_in_parallel_equals_the_whole_parse() {
        let text = large_list();
        if std::thread::available_parallelism().map_or(1, usize::from) > 1 {
            let cutting = Cutting::for_this_machine();
            assert!(
                pieces_of(&text, cutting).is_some_and(|p| !p.documents),
                "not split"
            );
        }
        let parallel = parse_yaml(&text).unwrap();
        let whole = parse_whole(&text).unwrap();
        assert_eq!(parallel.len(), 12_000);
        assert_eq!(parallel, whole);
        assert_eq!(parallel.iter().filter(|o| o.is_err()).count(), 1);
    }

    #[test]
    fn a_list_whose_piece_fails_is_parsed_whole_and_reports_the_error() {
        // An alias to an anchor of another piece parses only whole; a syntax error fails both.
        let mut text = large_list().replacen("team: t-0", "team: &t0 t-0", 1);
        let last = text.rfind("team: t-3").unwrap();
        text.replace_range(last..last + "team: t-3".len(), "team: *t0");
        let objects = parse_yaml(&text).unwrap();
        assert_eq!(objects, parse_whole(&text).unwrap());
        // The last namespace of team t-3 is ns-11994; its team is now the alias.
        let aliased = objects
            .iter()
            .flatten()
            .find(|o| o.metadata().name.as_deref() == Some("ns-11994"))
            .unwrap();
        let labels = aliased.metadata().labels.as_ref().unwrap();
        assert_eq!(labels["team"], "t-0", "the alias resolved across pieces");
        let broken = large_list().replacen("  kind: Namespace\n", "  kind: [Namespace\n", 1);
        assert_eq!(parse_yaml(&broken), parse_whole(&broken));
        assert!(parse_yaml(&broken).is_err());
    }

    #[test]
    fn unpacked_lists_name_each_item_by_its_path() {
        let unpacked = unpack_lists(
            json!([
                {"kind": "List", "items": [{"kind": "Namespace"}, null,
                    {"kind": "NetworkPolicyList", "items": [{"kind": "NetworkPolicy"}]}]},
                {"kind": "Node"}
            ]),
            "objects".into(),
        );
        let paths: Vec<&str> = unpacked.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "objects[0].items[0]",
                "objects[0].items[2].items[0]",
                "objects[1]"
            ]
        );
        assert_eq!(unpacked[1].1["kind"], "NetworkPolicy");
        // A list kind without items is an object like any other.
        assert_eq!(
            unpack_lists(json!({"kind": "List"}), String::new()).len(),
            1
        );
    }

    #[test]
    fn kind_list_items_are_flattened() {
        let objects = parse_values([json!({
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}},
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "b"}},
            ]
        })]);
        assert_eq!(objects.len(), 2);
        assert!(objects.iter().all(Result::is_ok));
    }

    #[test]
    fn one_malformed_object_does_not_hide_the_others() {
        let objects = parse_yaml(
            r#"
apiVersion: v1
kind: Namespace
metadata: {name: a}
---
apiVersion: v1
kind: Namespace
metadata: {name: b, labels: [not, a, map]}
---
apiVersion: v1
kind: Namespace
metadata: {name: c}
"#,
        )
        .unwrap();
        assert_eq!(objects.len(), 3);
        assert!(objects[0].is_ok());
        let err = objects[1].as_ref().unwrap_err();
        assert_eq!(err.object, ObjectRef::new("Namespace", None, "b"));
        assert_eq!(err.field, "metadata.labels");
        assert!(objects[2].is_ok());
    }

    #[test]
    fn yaml_1_1_boolean_spellings_stay_strings() {
        let objects = parse_yaml(
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: y, labels: {ns: y, on: yes, env: no}}",
        )
        .unwrap();
        let Ok(Object::Namespace(ns)) = &objects[0] else {
            panic!("{objects:?}");
        };
        let labels = ns.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["ns"], "y");
        assert_eq!(labels["on"], "yes");
        assert_eq!(labels["env"], "no");
    }

    #[test]
    fn broken_yaml_syntax_fails_the_stream() {
        assert!(parse_yaml("kind: [unclosed").is_err());
    }

    /// `count` namespaces as `---`-separated documents, over the split threshold.
    fn many_documents(count: usize) -> String {
        let mut text = String::new();
        for i in 0..count {
            text.push_str(&format!(
                "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns-{i}\n  labels:\n    team: t-{}\n",
                i % 7
            ));
        }
        assert!(text.len() > crate::split::MIN_SPLIT_BYTES);
        text
    }

    #[test]
    fn many_documents_parsed_in_parallel_equal_the_whole_parse() {
        let mut text = many_documents(14_000);
        // An invalid object, and a document that is a list, among them.
        text = text.replacen("  name: ns-4321\n", "  name: [ns-4321]\n", 1);
        text.push_str("---\n- {apiVersion: v1, kind: Namespace, metadata: {name: last}}\n...\n");
        if std::thread::available_parallelism().map_or(1, usize::from) > 1 {
            let cutting = Cutting::for_this_machine();
            assert!(
                pieces_of(&text, cutting).is_some_and(|p| p.documents),
                "not split"
            );
        }
        let parallel = parse_yaml(&text).unwrap();
        assert_eq!(parallel.len(), 14_001);
        assert_eq!(parallel, parse_whole(&text).unwrap());
        assert_eq!(parallel.iter().filter(|o| o.is_err()).count(), 1);
        // A syntax error in one document fails the stream with the whole parse's message.
        let broken = text.replacen(
            "kind: Namespace\nmetadata:\n  name: ns-9000",
            "kind: [Namespace\nmetadata:\n  name: ns-9000",
            1,
        );
        assert_eq!(parse_yaml(&broken), parse_whole(&broken));
        assert!(parse_yaml(&broken).is_err());
    }
}

#[cfg(test)]
#[path = "parse_equivalence.rs"]
mod equivalence;
