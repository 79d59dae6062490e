//! The YAML documents as written: a scenario file and a topology file. Only their shape is checked
//! here; the meaning of objects and expectations is checked by the modules that use them.

use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

use super::error::LoadError;

/// A scenario file, as docs/scenarios.md describes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioDocument {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub topology: Option<String>,
    /// Kubernetes objects, kept untyped until the API layer validates them.
    #[serde(default)]
    pub objects: Vec<Value>,
    #[serde(default)]
    pub expect: Vec<ExpectationDocument>,
}

/// One item of `expect`: a matrix for one protocol and port, a list of single flows, or both.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectationDocument {
    pub protocol: Option<String>,
    pub port: Option<PortField>,
    pub matrix: Option<String>,
    pub flows: Option<Vec<FlowDocument>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowDocument {
    pub from: String,
    pub to: String,
    /// Absent: the item's.
    pub protocol: Option<String>,
    /// Absent: the item's.
    pub port: Option<PortField>,
    pub verdict: String,
}

/// A port as written. Scenarios give ports by number; a name is read too, so that the error
/// can say so rather than where the YAML parser gave up.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum PortField {
    Number(i64),
    Name(String),
}

/// `topologies/NAME.yaml`: a mapping with one key, `objects`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologyDocument {
    pub objects: Vec<Value>,
}

/// Reads and parses one YAML file into `T`, reading YAML exactly as netpol-api does (YAML 1.2
/// booleans, so that the label value `y` stays the string it looks like).
pub fn read_yaml<T: DeserializeOwned>(file: &Path) -> Result<T, LoadError> {
    let text = std::fs::read_to_string(file).map_err(|source| LoadError::Read {
        file: file.to_owned(),
        source,
    })?;
    parse_yaml(file, &text)
}

pub fn parse_yaml<T: DeserializeOwned>(file: &Path, text: &str) -> Result<T, LoadError> {
    serde_saphyr::from_str_with_options(text, netpol_api::yaml_options_for(text.len()))
        .map_err(|e| LoadError::syntax(file, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_1_1_boolean_spellings_stay_strings() {
        let doc: TopologyDocument = parse_yaml(
            Path::new("t.yaml"),
            "objects: [{metadata: {labels: {ns: y, env: no, on: yes}}}]",
        )
        .unwrap();
        let labels = &doc.objects[0]["metadata"]["labels"];
        assert_eq!(labels["ns"], "y");
        assert_eq!(labels["env"], "no");
        assert_eq!(labels["on"], "yes");
    }

    #[test]
    fn unknown_and_missing_fields_are_named_with_the_file() {
        let err = parse_yaml::<ScenarioDocument>(Path::new("s.yaml"), "name: a\nexpct: []\n")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("s.yaml: "), "{err}");
        assert!(err.contains("expct"), "{err}");
        let err = parse_yaml::<ScenarioDocument>(Path::new("s.yaml"), "objects: []\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing field `name`"), "{err}");
    }
}
