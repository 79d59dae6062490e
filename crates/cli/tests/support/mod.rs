//! What the command's tests share: scratch folders, the example cluster, HTTP on loopback,
//! running the `netpol` binary.
#![allow(dead_code, unused_imports)] // each test binary uses a different part

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub use netpol_testkit::files::{copy_example_cluster, INVALID_POLICY};
pub use netpol_testkit::http::http_get;

/// The node the example cluster's local pods run on.
pub const NODE: &str = "node-1";

/// A fresh scratch directory for one test.
pub fn scratch_dir(test: &str) -> PathBuf {
    netpol_testkit::files::scratch_dir(Path::new(env!("CARGO_TARGET_TMPDIR")), test)
}

/// Runs the `netpol` binary with `args`, `stdin` on its standard input.
pub fn netpol_with_stdin(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_netpol"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the netpol binary runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// Runs the `netpol` binary with `args` and nothing on its standard input.
pub fn netpol(args: &[&str]) -> Output {
    netpol_with_stdin(args, "")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A file or folder of the repository's `examples/`.
pub fn example(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(path)
        .to_str()
        .unwrap()
        .to_owned()
}
