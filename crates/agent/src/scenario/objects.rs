//! The Kubernetes objects of a scenario: its topology's objects, then its own, where an object of
//! the scenario replaces the topology object with the same kind, namespace and name.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::document::{read_yaml, TopologyDocument};
use super::error::LoadError;

/// An untyped object and where it was written, so that errors can point at it.
#[derive(Clone, Debug)]
pub struct SourcedObject {
    pub file: PathBuf,
    /// Position in the file's `objects` list.
    pub index: usize,
    pub value: Value,
}

/// What makes two objects the same object, as the API server sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ObjectKey<'a> {
    kind: Option<&'a str>,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
}

impl SourcedObject {
    fn key(&self) -> ObjectKey<'_> {
        let metadata = &self.value["metadata"];
        ObjectKey {
            kind: self.value["kind"].as_str(),
            namespace: metadata["namespace"].as_str(),
            name: metadata["name"].as_str(),
        }
    }

    /// Names the object for a message: `objects[3] (NetworkPolicy x/deny-all)`, with as much of
    /// the kind and name as the object has.
    pub fn describe(&self) -> String {
        let key = self.key();
        let mut label = key.kind.unwrap_or("object without kind").to_owned();
        match (key.namespace, key.name) {
            (Some(ns), Some(name)) => label.push_str(&format!(" {ns}/{name}")),
            (None, Some(name)) => label.push_str(&format!(" {name}")),
            _ => {}
        }
        format!("objects[{}] ({label})", self.index)
    }
}

impl fmt::Display for SourcedObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

pub fn sourced(file: &Path, values: Vec<Value>) -> Vec<SourcedObject> {
    values
        .into_iter()
        .enumerate()
        .map(|(index, value)| SourcedObject {
            file: file.to_owned(),
            index,
            value,
        })
        .collect()
}

/// Loads the objects of topology `name` for the scenario at `scenario`: `topologies/NAME.yaml` in
/// the scenario's folder or the nearest folder above it.
pub fn load_topology(scenario: &Path, name: &str) -> Result<Vec<SourcedObject>, LoadError> {
    let start = scenario.parent().unwrap_or(Path::new("."));
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
/// one with the same kind, namespace and name, or added after them.
pub fn overlay(base: Vec<SourcedObject>, overrides: Vec<SourcedObject>) -> Vec<SourcedObject> {
    let mut merged = base;
    for object in overrides {
        match merged.iter().position(|m| m.key() == object.key()) {
            Some(i) => merged[i] = object,
            None => merged.push(object),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(kind: &str, ns: &str, name: &str, marker: u32) -> Value {
        json!({"kind": kind, "metadata": {"namespace": ns, "name": name}, "marker": marker})
    }

    #[test]
    fn overlay_replaces_same_kind_namespace_and_name_only() {
        let base = sourced(
            Path::new("topo.yaml"),
            vec![object("Pod", "x", "a", 1), object("Pod", "x", "b", 1)],
        );
        let own = sourced(
            Path::new("s.yaml"),
            vec![
                object("Pod", "x", "a", 2),
                object("Pod", "y", "a", 2),
                object("NetworkPolicy", "x", "b", 2),
            ],
        );
        let merged = overlay(base, own);
        let summary: Vec<(String, u64)> = merged
            .iter()
            .map(|o| (o.describe(), o.value["marker"].as_u64().unwrap()))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("objects[0] (Pod x/a)".to_string(), 2),
                ("objects[1] (Pod x/b)".to_string(), 1),
                ("objects[1] (Pod y/a)".to_string(), 2),
                ("objects[2] (NetworkPolicy x/b)".to_string(), 2),
            ]
        );
        assert_eq!(merged[0].file, Path::new("s.yaml"));
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
