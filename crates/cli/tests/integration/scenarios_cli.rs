//! The `netpol` binary on scenario files: exit codes, report lines and error messages, run as a
//! user runs it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/scenarios")
        .join(name)
}

fn netpol(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_netpol"))
        .args(args)
        .output()
        .expect("the netpol binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The counts of the summary line, which must be the last line of stdout.
fn summary(output: &Output) -> (usize, usize, usize) {
    let out = stdout(output);
    let last = out.lines().last().unwrap_or_default();
    let parse = || -> Option<(usize, usize, usize)> {
        let rest = last.strip_prefix("checked ")?;
        let (scenarios, rest) = rest.split_once(" scenarios, ")?;
        let (flows, rest) = rest.split_once(" flows: ")?;
        let mismatches = rest.strip_suffix(" mismatches")?;
        Some((
            scenarios.parse().ok()?,
            flows.parse().ok()?,
            mismatches.parse().ok()?,
        ))
    };
    parse().unwrap_or_else(|| panic!("the last line is not the summary:\n{out}"))
}

fn yaml_files_outside_topologies(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            if p.is_dir() {
                if p.ends_with("topologies") {
                    0
                } else {
                    yaml_files_outside_topologies(&p)
                }
            } else {
                usize::from(p.extension().is_some_and(|e| e == "yaml"))
            }
        })
        .sum()
}

/// Every way of deciding flows `check` offers: both engines, and the simulator under every
/// Windows Server build it models (`--hcn-sim-mode`), with IP sets where the build has them and
/// every address inline.
fn deciders() -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = [["--engine", "reference"], ["--engine", "mapstate"]]
        .iter()
        .map(|d| d.iter().map(|a| a.to_string()).collect())
        .collect();
    for mode in netpol_hcn::sim::SimMode::ALL {
        for ip_sets in ["auto", "off"] {
            out.push(
                [
                    "--datapath",
                    "hcn-sim",
                    "--hcn-sim-mode",
                    mode.name(),
                    "--hcn-ip-sets",
                    ip_sets,
                ]
                .map(String::from)
                .to_vec(),
            );
        }
    }
    out
}

fn check_passes(dir: &Path) {
    let scenarios = yaml_files_outside_topologies(dir);
    for decider in deciders() {
        let mut args = vec!["check", dir.to_str().unwrap()];
        args.extend(decider.iter().map(String::as_str));
        let output = netpol(&args);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{decider:?}: {}{}",
            stdout(&output),
            stderr(&output)
        );
        let (checked, flows, mismatches) = summary(&output);
        assert_eq!(
            checked, scenarios,
            "{decider:?}: every scenario file is checked"
        );
        assert!(
            flows >= scenarios,
            "{decider:?}: every scenario expects something"
        );
        assert_eq!(mismatches, 0);
    }
}

#[test]
fn the_projects_examples_pass_with_every_decider() {
    check_passes(&repo_root().join("examples/scenarios"));
}

#[test]
fn the_shared_acceptance_scenarios_pass_with_every_decider() {
    let shared = repo_root().join("../shared/scenarios");
    if !shared.is_dir() {
        // Absent data must not pass as checked: skip only when asked to.
        assert!(
            std::env::var_os("NETPOL_SKIP_SHARED_SCENARIOS").is_some(),
            "the acceptance scenarios are missing at {}: put ../shared beside the repository, \
             or set NETPOL_SKIP_SHARED_SCENARIOS=1 to skip them knowingly",
            shared.display()
        );
        eprintln!(
            "SKIPPED: {} (NETPOL_SKIP_SHARED_SCENARIOS)",
            shared.display()
        );
        return;
    }
    check_passes(&shared);
}

#[test]
fn a_mismatch_is_reported_with_its_rule_and_exits_1() {
    let file = fixture("mismatch.yaml");
    let output = netpol(&["check", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let out = stdout(&output);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with(&format!("{}: expect[0].matrix: ", file.display())));
    assert!(
        lines[0].contains(
            "x/a -> x/b TCP/80: expected allow, decided deny (ingress: deny: no Normal-tier rule \
             matched and NetworkPolicy x/isolate-b"
        ),
        "{}",
        lines[0]
    );
    assert_eq!(summary(&output), (1, 2, 1));
}

#[test]
fn a_malformed_object_exits_2_naming_file_object_and_field() {
    let file = fixture("malformed-object.yaml");
    let output = netpol(&["check", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(err.contains(&file.display().to_string()), "{err}");
    assert!(
        err.contains("objects[1] (NetworkPolicy x/bad-port)"),
        "{err}"
    );
    assert!(err.contains("spec.ingress[0].ports[0].port"), "{err}");
    assert_eq!(
        summary(&output),
        (0, 0, 0),
        "an invalid scenario is not counted"
    );
}

#[test]
fn a_malformed_expectation_exits_2_naming_the_field() {
    let file = fixture("malformed-expectation.yaml");
    let output = netpol(&["check", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(
        err.contains(&format!(
            "{}: expect[0].flows[0]: no pod x/ghost in the scenario",
            file.display()
        )),
        "{err}"
    );
}

#[test]
fn an_invalid_file_wins_over_mismatches_in_a_folder() {
    let output = netpol(&["check", fixture("").to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    // mismatch.yaml (2 flows, 1 mismatch) and warning.yaml (2 flows) load; the rest do not.
    assert_eq!(summary(&output), (2, 4, 1));
}

#[test]
fn a_missing_path_exits_2() {
    let output = netpol(&["check", "/no/such/scenarios"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("/no/such/scenarios"));
}

#[test]
fn matrix_prints_the_computed_matrix_as_an_expect_item_on_request() {
    let file = fixture("mismatch.yaml");
    let output = netpol(&[
        "matrix",
        file.to_str().unwrap(),
        "--protocol",
        "TCP",
        "--port",
        "80",
        "--output",
        "scenario",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "- protocol: TCP\n  port: 80\n  matrix: |\n    -    x/a  x/b\n    x/a  .    X\n    x/b  .    .\n"
    );
}

#[test]
fn explain_names_the_deciding_rule_of_each_direction() {
    let file = repo_root().join("examples/scenarios/anp-named-port-and-banp-rule-order.yaml");
    let output = netpol(&["explain", file.to_str().unwrap(), "x/a", "z/b", "SCTP/80"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(out.starts_with("x/a -> z/b SCTP/80: allow\n"), "{out}");
    assert!(
        out.contains(
            "ingress:     allow by AdminNetworkPolicy z-from-x-sctp-only rule allow-named-sctp \
             (Admin tier, priority 20)"
        ),
        "{out}"
    );
    assert!(
        out.contains("egress:      allow: no rule matched and nothing isolates the pod"),
        "{out}"
    );

    let output = netpol(&[
        "explain",
        file.to_str().unwrap(),
        "192.0.2.1",
        "z/a",
        "TCP/80",
    ]);
    let out = stdout(&output);
    assert!(out.starts_with("192.0.2.1 -> z/a TCP/80: deny\n"), "{out}");
    assert!(
        out.contains(
            "egress:      not evaluated: the source, address 192.0.2.1, outside the cluster \
             (region 0.0.0.0/0), is not a pod"
        ),
        "{out}"
    );
}

#[test]
fn explain_rejects_unknown_endpoints() {
    let file = fixture("mismatch.yaml");
    let output = netpol(&["explain", file.to_str().unwrap(), "x/a", "y/zz", "TCP/80"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("no pod or workload y/zz in the scenario"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_reused_scenario_name_is_a_warning_not_a_failure() {
    let file = fixture("mismatch.yaml");
    let path = file.to_str().unwrap();
    let output = netpol(&["check", path, path]);
    assert_eq!(output.status.code(), Some(1), "only the mismatches fail");
    assert!(
        stderr(&output).contains(&format!(
            "warning: {path}: scenario name `fixture-mismatch` is already used by {path}"
        )),
        "{}",
        stderr(&output)
    );
    assert_eq!(summary(&output), (2, 4, 2));
}

#[test]
fn a_translation_warning_goes_to_stderr_without_failing() {
    let file = fixture("warning.yaml");
    let path = file.to_str().unwrap();
    let output = netpol(&["check", path]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stderr(&output),
        format!(
            "warning: {path}: objects[1] (NetworkPolicy x/host-bits): \
             spec.ingress[0].from[0].ipBlock.cidr: CIDR 192.0.2.7/24 has host bits set; it is \
             read as 192.0.2.0/24\n"
        )
    );
    assert_eq!(summary(&output), (1, 2, 0));
}

#[test]
fn experimental_crd_fields_only_in_the_experimental_channel() {
    let file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/channels/cnp-nodes-peer.yaml");
    for args in [
        vec!["check", file.to_str().unwrap()],
        vec![
            "check",
            "--crd-channel",
            "experimental",
            file.to_str().unwrap(),
        ],
    ] {
        let output = netpol(&args);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    }
    let output = netpol(&["check", "--crd-channel", "standard", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(
        err.contains(
            "(ClusterNetworkPolicy to-nodes): spec.egress[0].to[0].nodes: nodes is a field of the \
             experimental channel"
        ),
        "{err}"
    );
    let output = netpol(&["check", "--crd-channel", "beta", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("unknown CRD channel \"beta\""));
}
