//! Manifests as input: the objects of YAML or JSON files, of folders of them, and of stdin, read
//! as `kubectl apply -f` reads them (`---` streams, `kind: List` unpacked), so that the commands
//! that work on a scenario's cluster also work on what a platform engineer has: a folder of
//! policies, or what `kubectl get pods,namespaces,nodes,networkpolicies -A -o yaml` prints.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};

use super::discover::manifest_files;
use super::error::{LoadError, LoadErrors};
use super::prepared::ReadOne;
use super::stream::read_objects;

/// The path that names stdin.
pub const STDIN: &str = "-";

/// How stdin is named in messages.
const STDIN_NAME: &str = "<stdin>";

/// Every object of the manifests at `paths`: files, folders (recursively) and `-` for `stdin`.
/// All files are read even when one fails, so that one run reports every file to fix; any
/// failure fails the whole load (a cluster missing a file's objects would decide flows wrongly).
/// Each object is read as the parser produces it (see `stream.rs`): no file's objects exist as
/// value trees all at once.
pub fn load_objects(paths: &[PathBuf], stdin: &mut dyn Read) -> Result<Vec<ReadOne>, LoadErrors> {
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
fn collect(file: &Path, text: &str, objects: &mut Vec<ReadOne>, errors: &mut Vec<LoadError>) {
    match read_objects(file, text) {
        Ok(read) => objects.extend(read),
        Err(e) => errors.push(LoadError::syntax(file, e)),
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
    let documents: Result<Vec<Kinded>, _> =
        serde_saphyr::from_multiple_with_options(&text, netpol_api::yaml_options_for(text.len()));
    match documents {
        Ok(documents) => documents.first() == Some(&Kinded::MappingWithoutKind),
        Err(_) => true,
    }
}

/// Whether a document is a mapping with a `kind`, read without keeping anything of it (a
/// manifest file of 150,000 pods is parsed, not held).
#[derive(Debug, PartialEq, Eq)]
enum Kinded {
    MappingWithoutKind,
    Other,
}

impl<'de> Deserialize<'de> for Kinded {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KindedVisitor;
        impl<'de> Visitor<'de> for KindedVisitor {
            type Value = Kinded;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any document")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Kinded, A::Error> {
                let mut kind = false;
                while let Some(key) = map.next_key::<String>()? {
                    kind |= key == "kind";
                    map.next_value::<IgnoredAny>()?;
                }
                Ok(if kind {
                    Kinded::Other
                } else {
                    Kinded::MappingWithoutKind
                })
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Kinded, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Kinded::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Kinded, E> {
                Ok(Kinded::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Kinded, E> {
                Ok(Kinded::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Kinded, E> {
                Ok(Kinded::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Kinded, E> {
                Ok(Kinded::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<Kinded, E> {
                Ok(Kinded::Other)
            }
            fn visit_unit<E>(self) -> Result<Kinded, E> {
                Ok(Kinded::Other)
            }
            fn visit_none<E>(self) -> Result<Kinded, E> {
                Ok(Kinded::Other)
            }
        }
        deserializer.deserialize_any(KindedVisitor)
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
                    o.origin.file.file_name().unwrap().to_string_lossy(),
                    o.origin.describe()
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
