//! What the command's tests share: scratch folders, the example cluster, HTTP on loopback.
#![allow(dead_code, unused_imports)] // each test binary uses a different part

use std::path::{Path, PathBuf};

pub use netpol_testkit::files::{copy_example_cluster, INVALID_POLICY};
pub use netpol_testkit::http::http_get;

/// The node the example cluster's local pods run on.
pub const NODE: &str = "node-1";

/// A fresh scratch directory for one test.
pub fn scratch_dir(test: &str) -> PathBuf {
    netpol_testkit::files::scratch_dir(Path::new(env!("CARGO_TARGET_TMPDIR")), test)
}
