//! YAML streams and JSON values into objects: the entry points of reading.
//!
//! A stream holds documents (`---`), a document holds one object, a sequence of objects or a
//! `kind: List`, and each object is read by [`Object::from_value`] on its own, so one malformed
//! object never hides the others. Documents are read as the parser produces them (see
//! `stream.rs`), and a large `kind: List` is cut into pieces parsed on every core (see
//! `split.rs`).

use serde_json::Value;

use crate::error::ValidationError;
use crate::fields::FieldValidation;
use crate::object::Object;
use crate::split::{split_list, MIN_SPLIT_BYTES};
use crate::stream::{is_list_kind, is_strict, Document};

/// YAML that could not be read at all: nothing in it is usable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid YAML: {0}")]
pub struct YamlError(pub String);

/// Reads a YAML stream of objects: several `---`-separated documents, each an object, a list of
/// objects or a `kind: List` with `items`. Empty documents are skipped. Each object is read on its
/// own, so one malformed object does not hide the others; only broken YAML syntax fails the
/// whole stream. Unknown fields are ignored, as for objects the API server has pruned.
pub fn parse_yaml(text: &str) -> Result<Vec<Result<Object, ValidationError>>, YamlError> {
    parse_yaml_with(text, FieldValidation::Ignore)
}

/// [`parse_yaml`], with unknown fields of policies treated as `validation` says: under
/// [`FieldValidation::Strict`] (files a person wrote) such an object is an error on its own,
/// and the others still load.
pub fn parse_yaml_with(
    text: &str,
    validation: FieldValidation,
) -> Result<Vec<Result<Object, ValidationError>>, YamlError> {
    if is_strict(validation) {
        parse::<true>(text)
    } else {
        parse::<false>(text)
    }
}

fn parse<const STRICT: bool>(
    text: &str,
) -> Result<Vec<Result<Object, ValidationError>>, YamlError> {
    match parse_list_in_parallel::<STRICT>(text) {
        Some(objects) => Ok(objects),
        None => parse_whole::<STRICT>(text),
    }
}

fn parse_whole<const STRICT: bool>(
    text: &str,
) -> Result<Vec<Result<Object, ValidationError>>, YamlError> {
    let documents: Vec<Document<STRICT>> =
        serde_saphyr::from_multiple_with_options(text, yaml_options_for(text.len()))
            .map_err(|e| YamlError(e.to_string()))?;
    Ok(documents.into_iter().flat_map(|d| d.0).collect())
}

/// A large `kind: List` parsed on every core (see [`crate::split`]); `None` when the text is
/// small, has another shape, or any piece fails, and is then parsed whole.
fn parse_list_in_parallel<const STRICT: bool>(
    text: &str,
) -> Option<Vec<Result<Object, ValidationError>>> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    if text.len() < MIN_SPLIT_BYTES || cores < 2 {
        return None;
    }
    let split = split_list(text, cores)?;
    let head: Value =
        serde_saphyr::from_str_with_options(&split.head, yaml_options_for(split.head.len()))
            .ok()?;
    if !head
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(is_list_kind)
    {
        return None;
    }
    let parsed: Vec<Option<Document<STRICT>>> = std::thread::scope(|scope| {
        let workers: Vec<_> = split
            .items
            .iter()
            .map(|run| {
                scope.spawn(move || {
                    serde_saphyr::from_str_with_options::<Document<STRICT>>(
                        run,
                        yaml_options_for(run.len()),
                    )
                    .ok()
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().ok().flatten())
            .collect()
    });
    let mut objects = Vec::new();
    for document in parsed {
        objects.extend(document?.0);
    }
    Some(objects)
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
            assert!(
                parse_list_in_parallel::<false>(&text).is_some(),
                "not split"
            );
        }
        let parallel = parse_yaml(&text).unwrap();
        let whole = parse_whole::<false>(&text).unwrap();
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
        assert_eq!(objects, parse_whole::<false>(&text).unwrap());
        // The last namespace of team t-3 is ns-11994; its team is now the alias.
        let aliased = objects
            .iter()
            .flatten()
            .find(|o| o.metadata().name.as_deref() == Some("ns-11994"))
            .unwrap();
        let labels = aliased.metadata().labels.as_ref().unwrap();
        assert_eq!(labels["team"], "t-0", "the alias resolved across pieces");
        let broken = large_list().replacen("  kind: Namespace\n", "  kind: [Namespace\n", 1);
        assert_eq!(parse_yaml(&broken), parse_whole::<false>(&broken));
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
}
