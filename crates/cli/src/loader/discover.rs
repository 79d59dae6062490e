//! Finding scenario files and manifest files under the paths a user names.

use std::path::{Path, PathBuf};

use super::error::LoadError;

/// The scenario files named by `paths`: each file as given, and every `.yaml`/`.yml` file under
/// each folder, recursively and in name order, skipping `topologies/` (which hold shared objects,
/// not scenarios) and hidden folders.
pub fn scenario_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, LoadError> {
    files_under(paths, Walk::SCENARIOS)
}

/// The manifest files named by `paths`, as `kubectl apply -f -R` finds them: each file as given,
/// and every `.yaml`, `.yml` and `.json` file under each folder, recursively and in name order,
/// skipping hidden folders.
pub fn manifest_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, LoadError> {
    files_under(paths, Walk::MANIFESTS)
}

/// Which files a folder walk collects.
#[derive(Clone, Copy)]
struct Walk {
    extensions: &'static [&'static str],
    /// Whether `topologies/` folders are skipped (they hold shared objects, not scenarios).
    skip_topologies: bool,
}

impl Walk {
    const SCENARIOS: Walk = Walk {
        extensions: &["yaml", "yml"],
        skip_topologies: true,
    };
    const MANIFESTS: Walk = Walk {
        extensions: &["yaml", "yml", "json"],
        skip_topologies: false,
    };

    fn enters(self, folder_name: &str) -> bool {
        let hidden = folder_name.starts_with('.');
        let shared_objects = self.skip_topologies && folder_name == "topologies";
        !hidden && !shared_objects
    }

    fn collects(self, path: &Path) -> bool {
        path.extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| self.extensions.contains(&e))
    }
}

fn files_under(paths: &[PathBuf], how: Walk) -> Result<Vec<PathBuf>, LoadError> {
    let mut files = Vec::new();
    for path in paths {
        let metadata = std::fs::metadata(path).map_err(|source| LoadError::Read {
            file: path.clone(),
            source,
        })?;
        if metadata.is_dir() {
            walk(path, how, &mut files)?;
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

fn walk(dir: &Path, how: Walk, files: &mut Vec<PathBuf>) -> Result<(), LoadError> {
    let read_error = |source| LoadError::Read {
        file: dir.to_owned(),
        source,
    };
    let mut entries = std::fs::read_dir(dir)
        .map_err(read_error)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(read_error)?;
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if how.enters(name) {
                walk(&path, how, files)?;
            }
        } else if how.collects(&path) {
            files.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_folders_skipping_topologies_hidden_folders_and_other_files() {
        let root = std::env::temp_dir().join(format!("netpol-discover-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for dir in ["b", "topologies", ".git", "a/nested"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        for file in [
            "z.yaml",
            "README.md",
            "b/one.yml",
            "topologies/xyz.yaml",
            ".git/config.yaml",
            "a/nested/two.yaml",
        ] {
            std::fs::write(root.join(file), "").unwrap();
        }
        let found = scenario_files(&[root.clone(), root.join("README.md")]).unwrap();
        let relative: Vec<String> = found
            .iter()
            .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
            .collect();
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(
            relative,
            ["a/nested/two.yaml", "b/one.yml", "z.yaml", "README.md"]
        );
    }

    #[test]
    fn manifest_folders_include_json_and_topologies() {
        let root = std::env::temp_dir().join(format!("netpol-manifests-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for dir in ["topologies", ".hidden"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        for file in [
            "b.json",
            "a.yaml",
            "notes.txt",
            "topologies/t.yml",
            ".hidden/x.yaml",
        ] {
            std::fs::write(root.join(file), "").unwrap();
        }
        let found = manifest_files(std::slice::from_ref(&root)).unwrap();
        let relative: Vec<String> = found
            .iter()
            .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
            .collect();
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(relative, ["a.yaml", "b.json", "topologies/t.yml"]);
    }

    #[test]
    fn a_missing_path_is_an_error_naming_it() {
        let err = scenario_files(&[PathBuf::from("/no/such/scenarios")]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("/no/such/scenarios: cannot read"),
            "{err}"
        );
    }
}
