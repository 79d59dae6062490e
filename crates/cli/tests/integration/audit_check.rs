//! Audit mode (`netpol.io/enforcement: audit`) through a scenario: `matrix -o scenario` writes
//! the enforced verdicts (a would-deny is allowed) and names each would-deny in a YAML comment;
//! the scenario made of those items passes `check` on every decider (the engines, the HCN
//! simulator, and real packets through nftables with audit chains), whose text, JSON and JUnit
//! reports list each would-deny with the rule that would deny it, and nothing else as one.

use crate::support;

use std::path::{Path, PathBuf};

use support::{example, netpol, scratch_dir, stderr, stdout};

/// x isolates its pods for ingress in audit mode; y does so enforced.
const POLICIES: &str = "\
- apiVersion: networking.k8s.io/v1
  kind: NetworkPolicy
  metadata: {name: deny-all, namespace: x, annotations: {netpol.io/enforcement: audit}}
  spec: {podSelector: {}, policyTypes: [Ingress]}
- apiVersion: networking.k8s.io/v1
  kind: NetworkPolicy
  metadata: {name: deny-all, namespace: y}
  spec: {podSelector: {}, policyTypes: [Ingress]}
";

/// What every decider names as denying x's ingress were the audited policy enforced.
const WOULD_DENY: &str = "would deny (audit): ingress: deny: no Normal-tier rule matched and \
                          NetworkPolicy x/deny-all isolates the pod";

/// A folder with the xyz topology and `name.yaml`: the policies and `expect`.
fn scenario(dir: &Path, name: &str, expect: &str) -> PathBuf {
    std::fs::create_dir_all(dir.join("topologies")).unwrap();
    std::fs::copy(
        example("scenarios/topologies/xyz.yaml"),
        dir.join("topologies/xyz.yaml"),
    )
    .unwrap();
    let file = dir.join(format!("{name}.yaml"));
    let text = format!("name: {name}\ntopology: xyz\nobjects:\n{POLICIES}expect:\n{expect}");
    std::fs::write(&file, text).unwrap();
    file
}

/// The scenario of `matrix -o scenario`'s items for TCP/80, and those items.
fn scenario_from_matrix(test: &str) -> (PathBuf, String) {
    let dir = scratch_dir(test);
    let seed = "- flows:\n  - {from: x/a, to: x/b, protocol: TCP, port: 80, verdict: allow}\n";
    let seed = scenario(&dir.join("seed"), "audit-seed", seed);
    let output = netpol(&[
        "matrix",
        seed.to_str().unwrap(),
        "--port",
        "80",
        "-o",
        "scenario",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let items = stdout(&output);
    (scenario(&dir, "audit-check", &items), items)
}

/// The would-denies of x's audited policy: every flow into x but a pod's to itself.
fn expected_would_denies() -> Vec<String> {
    let pods: Vec<String> = ["x", "y", "z"]
        .iter()
        .flat_map(|ns| ["a", "b", "c"].map(|p| format!("{ns}/{p}")))
        .collect();
    let mut flows = Vec::new();
    for from in &pods {
        for to in pods.iter().filter(|to| to.starts_with("x/") && *to != from) {
            flows.push(format!("{from} -> {to}"));
        }
    }
    flows.sort();
    flows
}

#[test]
fn matrix_scenario_items_expect_the_enforced_verdict_and_name_the_would_denies() {
    let (_, items) = scenario_from_matrix("audit-matrix-scenario");
    let mut named: Vec<String> = items
        .lines()
        .filter_map(|l| l.strip_prefix("#   would-deny: "))
        .map(String::from)
        .collect();
    named.sort();
    assert_eq!(named, expected_would_denies(), "{items}");
    // Allowed in the matrix (the enforced verdict; a pod to itself too, which no policy
    // decides); y's enforced isolation denies.
    let row = |pod: &str| {
        items
            .lines()
            .find(|l| l.trim_start().starts_with(pod))
            .unwrap_or_else(|| panic!("no row {pod}:\n{items}"))
            .split_whitespace()
            .skip(1)
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(row("y/a"), ". . . . X X . . .", "{items}");
    assert_eq!(row("z/a"), ". . . X X X . . .", "{items}");
    assert_eq!(row("x/b"), ". . . X X X . . .", "{items}");
}

/// `check ARGS FILE -o OUTPUT`, asserting it passed.
fn check(file: &Path, decider: &[&str], output: &str) -> String {
    let mut args = vec!["check", file.to_str().unwrap(), "-o", output];
    args.extend_from_slice(decider);
    let result = netpol(&args);
    assert_eq!(
        result.status.code(),
        Some(0),
        "{decider:?}: {}{}",
        stdout(&result),
        stderr(&result)
    );
    stdout(&result)
}

/// Each decider's reports of the scenario: passed, every would-deny listed with its rule.
fn assert_reports(file: &Path, decider: &[&str]) {
    let text = check(file, decider, "text");
    let mut listed = Vec::new();
    for line in text.lines().filter(|l| l.starts_with("would-deny: ")) {
        let (flow, why) = line.split_once(": allowed; ").expect(line);
        assert_eq!(why, WOULD_DENY, "{decider:?}: {line}");
        // `would-deny: FILE: FIELD: FROM -> TO TCP/80`
        let flow = flow.rsplit(": ").next().unwrap();
        listed.push(flow.strip_suffix(" TCP/80").expect(flow).to_owned());
    }
    listed.sort();
    assert_eq!(listed, expected_would_denies(), "{decider:?}:\n{text}");
    let summary: Vec<&str> = text.lines().rev().take(2).collect();
    assert_eq!(
        summary,
        [
            "checked 1 scenarios, 81 flows: 0 mismatches",
            "audit: 24 allowed flows a policy in audit mode (netpol.io/enforcement: audit) \
             would deny"
        ],
        "{decider:?}:\n{text}"
    );

    let json: serde_json::Value = serde_json::from_str(&check(file, decider, "json")).unwrap();
    assert_eq!(json["summary"]["would_deny"], 24, "{decider:?}: {json}");
    let expectations = json["scenarios"][0]["expectations"].as_array().unwrap();
    for e in expectations {
        let into_x = e["to"].as_str().unwrap().starts_with("x/") && e["from"] != e["to"];
        assert_eq!(e["passed"], true, "{e}");
        match into_x {
            true => {
                assert_eq!(e["verdict"], "allow", "{e}");
                assert_eq!(e["would_deny"], WOULD_DENY, "{decider:?}: {e}");
            }
            false => assert!(e.get("would_deny").is_none(), "{decider:?}: {e}"),
        }
    }

    let junit = check(file, decider, "junit");
    let marked = format!("<system-out>would-deny: {WOULD_DENY}</system-out>");
    assert_eq!(junit.matches(&marked).count(), 24, "{decider:?}:\n{junit}");
    assert!(junit.contains("failures=\"0\""), "{junit}");
}

#[test]
fn check_passes_an_audited_scenario_and_reports_its_would_denies_on_every_engine() {
    let (file, _) = scenario_from_matrix("audit-check-engines");
    for decider in [
        &["--engine", "reference"][..],
        &["--engine", "mapstate"],
        &["--datapath", "hcn-sim"],
    ] {
        assert_reports(&file, decider);
    }
}

/// On nftables the table carries audit chains, as the agent programs it: real packets pass
/// (the enforced verdict), and each would-deny is reported from the chains they went through.
#[cfg(target_os = "linux")]
#[test]
fn check_on_nftables_passes_would_denies_and_reports_them() {
    if netpol_testbed::netns::skip_kernel_test(
        "check_on_nftables_passes_would_denies_and_reports_them",
    ) {
        return;
    }
    let (file, _) = scenario_from_matrix("audit-check-nftables");
    assert_reports(&file, &["--datapath", "nftables"]);
}
