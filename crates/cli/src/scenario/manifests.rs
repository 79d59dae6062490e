//! Manifests as input: the objects of YAML or JSON files, of folders of them, and of stdin, read
//! as `kubectl apply -f` reads them (`---` streams, `kind: List` unpacked), so that the commands
//! that work on a scenario's cluster also work on what a platform engineer has: a folder of
//! policies, or what `kubectl get pods,namespaces,nodes,networkpolicies -A -o yaml` prints.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::discover::manifest_files;
use super::error::{LoadError, LoadErrors};
use super::objects::{sourced_at, SourcedObject};

/// The path that names stdin.
pub const STDIN: &str = "-";

/// How stdin is named in messages.
const STDIN_NAME: &str = "<stdin>";

/// Every object of the manifests at `paths`: files, folders (recursively) and `-` for `stdin`.
/// All files are read even when one fails, so that one run reports every file to fix; any
/// failure fails the whole load (a cluster missing a file's objects would decide flows wrongly).
pub fn load_objects(
    paths: &[PathBuf],
    stdin: &mut dyn Read,
) -> Result<Vec<SourcedObject>, LoadErrors> {
    let mut objects = Vec::new();
    let mut errors = Vec::new();
    let mut stdin_read = false;
    for path in paths {
        if path.as_os_str() == STDIN {
            if std::mem::replace(&mut stdin_read, true) {
                errors.push(LoadError::syntax(
                    Path::new(STDIN_NAME),
                    "`-f -` is given twice; stdin can be read once",
                ));
                continue;
            }
            let mut text = String::new();
            match stdin.read_to_string(&mut text) {
                Ok(_) => collect(Path::new(STDIN_NAME), &text, &mut objects, &mut errors),
                Err(source) => errors.push(LoadError::Read {
                    file: STDIN_NAME.into(),
                    source,
                }),
            }
            continue;
        }
        let files = match manifest_files(std::slice::from_ref(path)) {
            Ok(files) => files,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        for file in files {
            match std::fs::read_to_string(&file) {
                Ok(text) => collect(&file, &text, &mut objects, &mut errors),
                Err(source) => errors.push(LoadError::Read { file, source }),
            }
        }
    }
    if errors.is_empty() {
        Ok(objects)
    } else {
        Err(LoadErrors(errors))
    }
}

/// Adds the objects of one file's text, each named by its document and list position
/// (`documents[1].items[3]`).
fn collect(file: &Path, text: &str, objects: &mut Vec<SourcedObject>, errors: &mut Vec<LoadError>) {
    let documents: Result<Vec<Value>, _> =
        serde_saphyr::from_multiple_with_options(text, netpol_api::yaml_options_for(text.len()));
    match documents {
        Ok(documents) => objects.extend(sourced_at(file, Value::Array(documents), "documents")),
        Err(e) => errors.push(LoadError::syntax(file, format!("invalid YAML: {e}"))),
    }
}

/// Whether the file at `path` is a scenario file rather than manifests: its first document is a
/// mapping without `kind`, which every Kubernetes object and list has. A file that does not parse
/// counts as a scenario, whose loader then reports why.
pub fn is_scenario_file(path: &Path) -> bool {
    if path.as_os_str() == STDIN || path.is_dir() {
        return false;
    }
    let Ok(text) = std::fs::read_to_string(path) else {
        return true;
    };
    let documents: Result<Vec<Value>, _> =
        serde_saphyr::from_multiple_with_options(&text, netpol_api::yaml_options_for(text.len()));
    match documents {
        Ok(documents) => match documents.first() {
            Some(Value::Object(map)) => !map.contains_key("kind"),
            _ => false,
        },
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("netpol-manifests-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn files_folders_and_stdin_are_read_with_lists_unpacked() {
        let dir = temp("read");
        std::fs::write(
            dir.join("a.yaml"),
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n---\n\
             apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Namespace, metadata: {name: y}}\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("b.json"),
            r#"{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "z"}}"#,
        )
        .unwrap();
        let mut stdin = "apiVersion: v1\nkind: Namespace\nmetadata: {name: w}\n".as_bytes();
        let objects = load_objects(&[dir.clone(), PathBuf::from("-")], &mut stdin).unwrap();
        let described: Vec<String> = objects
            .iter()
            .map(|o| {
                format!(
                    "{}: {}",
                    o.file.file_name().unwrap().to_string_lossy(),
                    o.describe()
                )
            })
            .collect();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            described,
            [
                "a.yaml: documents[0] (Namespace x)",
                "a.yaml: documents[1].items[0] (Namespace y)",
                "b.json: documents[0] (Namespace z)",
                "<stdin>: documents[0] (Namespace w)",
            ]
        );
    }

    #[test]
    fn every_broken_file_is_reported() {
        let dir = temp("broken");
        std::fs::write(dir.join("a.yaml"), "kind: [Namespace\n").unwrap();
        std::fs::write(dir.join("b.yaml"), "kind: Namespace\n").unwrap();
        let missing = dir.join("missing.yaml");
        let err = load_objects(&[dir.clone(), missing], &mut "".as_bytes()).unwrap_err();
        std::fs::remove_dir_all(&dir).unwrap();
        let messages: Vec<String> = err.0.iter().map(ToString::to_string).collect();
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert!(
            messages[0].contains("a.yaml: invalid YAML"),
            "{}",
            messages[0]
        );
        assert!(
            messages[1].contains("missing.yaml: cannot read"),
            "{}",
            messages[1]
        );
    }

    #[test]
    fn scenario_files_are_told_from_manifests() {
        let dir = temp("detect");
        std::fs::write(dir.join("s.yaml"), "name: s\nobjects: []\n").unwrap();
        std::fs::write(
            dir.join("m.yaml"),
            "apiVersion: v1\nkind: List\nitems: []\n",
        )
        .unwrap();
        assert!(is_scenario_file(&dir.join("s.yaml")));
        assert!(!is_scenario_file(&dir.join("m.yaml")));
        assert!(!is_scenario_file(&dir));
        assert!(!is_scenario_file(Path::new("-")));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
