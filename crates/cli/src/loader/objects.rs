//! The Kubernetes objects of a scenario: its topology's objects, then its own, where an object of
//! the scenario replaces the topology object with the same kind, namespace and name.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::document::{read_yaml, TopologyDocument};
use super::error::LoadError;

/// An untyped object and where it was written, so that errors can point at it.
#[derive(Clone, Debug)]
pub struct SourcedObject {
    pub file: PathBuf,
    /// Where in the file: `objects[3]`, or `objects[2].items[0]` for an item of a `kind: List`.
    pub at: String,
    pub value: Value,
}

impl SourcedObject {
    /// Names the object for a message: `objects[3] (NetworkPolicy x/deny-all)`, with as much of
    /// the kind and name as the object has.
    pub fn describe(&self) -> String {
        format!("{} {}", self.at, what(&self.value))
    }
}

/// How an object is named after its position: `(Kind namespace/name)`, with as much of the kind
/// and name as `value` has.
pub fn what(value: &Value) -> String {
    let text = |v: &Value| v.as_str().map(str::to_owned);
    let metadata = &value["metadata"];
    let kind = text(&value["kind"]).unwrap_or_else(|| "object without kind".into());
    let name = match (text(&metadata["namespace"]), text(&metadata["name"])) {
        (Some(ns), Some(name)) => format!(" {ns}/{name}"),
        (None, Some(name)) => format!(" {name}"),
        _ => String::new(),
    };
    format!("({kind}{name})")
}

/// The objects of a file's `objects` list, with the items of `kind: List` objects unpacked as
/// kubectl does.
pub fn sourced(file: &Path, values: Vec<Value>) -> Vec<SourcedObject> {
    sourced_at(file, Value::Array(values), "objects")
}

/// The objects in `value`, a document of `file` found at `at`, lists unpacked.
pub fn sourced_at(file: &Path, value: Value, at: &str) -> Vec<SourcedObject> {
    netpol_api::unpack_lists(value, at.to_owned())
        .into_iter()
        .map(|(at, value)| SourcedObject {
            file: file.to_owned(),
            at,
            value,
        })
        .collect()
}

/// Loads the objects of topology `name` for the scenario at `scenario`: `topologies/NAME.yaml` in
/// the scenario's folder or the nearest folder above it.
pub fn load_topology(scenario: &Path, name: &str) -> Result<Vec<SourcedObject>, LoadError> {
    // A bare file name has the empty path as its parent: search from the working directory,
    // made absolute so that the search walks above it too.
    let start = match scenario.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(parent) => std::path::absolute(parent).unwrap_or_else(|_| parent.to_owned()),
        None => std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
    };
    let start = start.as_path();
    let is_plain_name = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with('.');
    if !is_plain_name {
        return Err(LoadError::syntax(
            scenario,
            format!("topology: `{name}` is not a plain file name"),
        ));
    }
    let found = start
        .ancestors()
        .map(|dir| dir.join("topologies").join(format!("{name}.yaml")))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| LoadError::TopologyNotFound {
            file: scenario.to_owned(),
            name: name.to_owned(),
            searched_from: start.to_owned(),
        })?;
    let document: TopologyDocument = read_yaml(&found)?;
    Ok(sourced(&found, document.objects))
}

/// The objects the API server would hold: `base` with each object of `overrides` replacing the
/// one with the same key (kind, namespace and name), or added after them.
/// Linear in the objects: each key is computed once and found through a hash index.
pub fn overlay<T, K: Eq + std::hash::Hash>(
    base: Vec<T>,
    overrides: Vec<T>,
    key: impl Fn(&T) -> K,
) -> Vec<T> {
    let mut merged = base;
    let mut index: std::collections::HashMap<K, usize> = std::collections::HashMap::new();
    for (i, object) in merged.iter().enumerate() {
        index.entry(key(object)).or_insert(i);
    }
    for object in overrides {
        match index.entry(key(&object)) {
            std::collections::hash_map::Entry::Occupied(at) => merged[*at.get()] = object,
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(merged.len());
                merged.push(object);
            }
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn overlay_replaces_objects_with_the_same_key_in_place() {
        let base = vec![("Pod/x/a", 1), ("Pod/x/b", 1)];
        let own = vec![("Pod/x/a", 2), ("Pod/y/a", 2), ("Pod/x/a", 3)];
        assert_eq!(
            overlay(base, own, |o| o.0),
            [("Pod/x/a", 3), ("Pod/x/b", 1), ("Pod/y/a", 2)]
        );
    }

    #[test]
    fn describe_names_position_kind_and_name() {
        let o = sourced(
            Path::new("s.yaml"),
            vec![
                json!({"kind": "Pod", "metadata": {"namespace": "x", "name": "a"}}),
                json!({"kind": "Node", "metadata": {"name": "n1"}}),
            ],
        );
        assert_eq!(o[0].describe(), "objects[0] (Pod x/a)");
        assert_eq!(o[1].describe(), "objects[1] (Node n1)");
    }

    #[test]
    fn list_items_are_unpacked_and_named_by_their_path() {
        let o = sourced(
            Path::new("s.yaml"),
            vec![
                json!({"kind": "Namespace", "metadata": {"name": "x"}}),
                json!({"apiVersion": "v1", "kind": "List", "items": [
                    {"kind": "Pod", "metadata": {"namespace": "x", "name": "a"}},
                    {"kind": "Pod", "metadata": {"namespace": "x", "name": "b"}},
                ]}),
            ],
        );
        let described: Vec<String> = o.iter().map(SourcedObject::describe).collect();
        assert_eq!(
            described,
            [
                "objects[0] (Namespace x)",
                "objects[1].items[0] (Pod x/a)",
                "objects[1].items[1] (Pod x/b)"
            ]
        );
    }

    #[test]
    fn describe_copes_with_objects_missing_their_names() {
        let o = sourced(Path::new("s.yaml"), vec![json!({"spec": {}})]);
        assert_eq!(o[0].describe(), "objects[0] (object without kind)");
    }

    #[test]
    fn topology_names_cannot_escape_the_topologies_folder() {
        let err = load_topology(Path::new("s.yaml"), "../secret").unwrap_err();
        assert!(err.to_string().contains("not a plain file name"), "{err}");
    }
}
