//! `netpol check FILE` finds the scenario's topology from wherever it runs: from the file's own
//! folder (a bare file name), and in folders above the working directory.

use crate::support;

use std::path::Path;
use std::process::Command;

fn example(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(path)
}

fn check_in(dir: &Path, file: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_netpol"))
        .args(["check", file])
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn a_bare_file_name_finds_the_topology_next_to_it_and_above_the_working_directory() {
    let dir = support::scratch_dir("check-paths");
    let sub = dir.join("team/scenarios");
    std::fs::create_dir_all(dir.join("topologies")).unwrap();
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::copy(
        example("scenarios/topologies/xyz.yaml"),
        dir.join("topologies/xyz.yaml"),
    )
    .unwrap();
    std::fs::copy(
        example("scenarios/np-sctp-is-not-tcp.yaml"),
        sub.join("s.yaml"),
    )
    .unwrap();
    // Run from the scenario's own folder: the topology is two folders above it.
    let output = check_in(&sub, "s.yaml");
    let (out, err) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert_eq!(output.status.code(), Some(0), "{out}{err}");

    // Without any topology, the error names the folder the search started from.
    std::fs::remove_file(dir.join("topologies/xyz.yaml")).unwrap();
    let output = check_in(&sub, "s.yaml");
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{err}");
    let expected = format!(
        "in {} or any folder above it",
        sub.canonicalize().unwrap().display()
    );
    assert!(err.contains(&expected), "{err}\nwanted: {expected}");
    assert!(!err.contains("in  or"), "{err}");
}
