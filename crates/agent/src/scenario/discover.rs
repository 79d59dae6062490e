//! Finding scenario files under the paths a user names.

use std::path::{Path, PathBuf};

use super::error::LoadError;

/// The scenario files named by `paths`: each file as given, and every `.yaml`/`.yml` file under
/// each folder, recursively and in name order, skipping `topologies/` (which hold shared objects,
/// not scenarios) and hidden folders.
pub fn scenario_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, LoadError> {
    let mut files = Vec::new();
    for path in paths {
        let metadata = std::fs::metadata(path).map_err(|source| LoadError::Read {
            file: path.clone(),
            source,
        })?;
        if metadata.is_dir() {
            walk(path, &mut files)?;
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), LoadError> {
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
            if name != "topologies" && !name.starts_with('.') {
                walk(&path, files)?;
            }
        } else if is_yaml(&path) {
            files.push(path);
        }
    }
    Ok(())
}

fn is_yaml(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e == "yaml" || e == "yml")
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
    fn a_missing_path_is_an_error_naming_it() {
        let err = scenario_files(&[PathBuf::from("/no/such/scenarios")]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("/no/such/scenarios: cannot read"),
            "{err}"
        );
    }
}
