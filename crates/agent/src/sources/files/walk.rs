//! Which files of the folder are read.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

/// Every `*.yaml`, `*.yml` and `*.json` file under `root`, in path order. Hidden files and
/// directories (editor swap files, a ConfigMap volume's `..data`) are skipped; symbolic links are
/// followed, so the files of a mounted ConfigMap are found through their visible links.
pub(super) fn yaml_files(root: &Path) -> io::Result<BTreeSet<PathBuf>> {
    let mut out = BTreeSet::new();
    let mut pending = vec![root.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') {
                continue;
            }
            let path = entry.path();
            let Ok(metadata) = std::fs::metadata(&path) else {
                continue; // a dangling link
            };
            if metadata.is_dir() {
                pending.push(path);
            } else if [".yaml", ".yml", ".json"]
                .iter()
                .any(|ext| name.ends_with(ext))
            {
                out.insert(path);
            }
        }
    }
    Ok(out)
}
