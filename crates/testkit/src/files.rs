//! Scratch folders, the bundled example cluster, and objects tests need again and again.

use std::path::{Path, PathBuf};

/// A fresh scratch directory for one test, under `root` (a test's `CARGO_TARGET_TMPDIR`).
pub fn scratch_dir(root: &Path, test: &str) -> PathBuf {
    let dir = root.join("agent").join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The bundled example cluster (`examples/cluster`).
pub fn example_cluster() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/cluster")
}

/// Copies the bundled example cluster into `dir`.
pub fn copy_example_cluster(dir: &Path) {
    copy_tree(&example_cluster(), dir);
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A NetworkPolicy that fails validation: its CIDR has a /33 prefix.
pub const INVALID_POLICY: &str = "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: broken, namespace: shop}
spec:
  podSelector: {}
  ingress:
  - from:
    - ipBlock: {cidr: 10.0.0.0/33}
";
