//! `netpol lint -o sarif`: every log validates against the SARIF 2.1.0 JSON schema (the OASIS
//! standard's, vendored in tests/fixtures/sarif with its source and licence), results point at
//! the object's file and the field's line with stable fingerprints, `helpUri`s resolve, and bad
//! input is still a valid log with the error as a tool execution notification.

use crate::support;

use std::path::Path;

use serde_json::Value;
use support::{netpol, stdout};

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/lint")
        .join(name)
        .to_str()
        .unwrap()
        .to_owned()
}

/// The SARIF 2.1.0 schema's validator.
fn sarif_schema() -> jsonschema::Validator {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sarif/sarif-schema-2.1.0.json");
    let schema: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    jsonschema::draft4::new(&schema).expect("the SARIF schema compiles")
}

/// What the schema says is wrong with `log`, one line per error with where.
fn schema_errors(log: &Value) -> Vec<String> {
    sarif_schema()
        .iter_errors(log)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// The schema finds a log that breaks it: the validation above could fail.
#[test]
fn the_schema_refuses_a_log_that_breaks_it() {
    let good = serde_json::json!({"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}},
        "results": [{"message": {"text": "m"}, "level": "warning"}]}]});
    assert_eq!(schema_errors(&good), Vec::<String>::new());
    let mut bad_level = good.clone();
    bad_level["runs"][0]["results"][0]["level"] = "fatal".into();
    assert_eq!(schema_errors(&bad_level).len(), 1, "{bad_level}");
    let mut no_message = good.clone();
    no_message["runs"][0]["results"][0]
        .as_object_mut()
        .unwrap()
        .remove("message");
    assert!(!schema_errors(&no_message).is_empty());
    let mut line_zero = good;
    line_zero["runs"][0]["results"][0]["locations"] = serde_json::json!([{"physicalLocation":
        {"artifactLocation": {"uri": "a.yaml"}, "region": {"startLine": 0}}}]);
    assert!(!schema_errors(&line_zero).is_empty());
}

/// A valid SARIF 2.1.0 log, by the standard's schema, and what netpol promises beyond it: every
/// rule with a short description and a default level, each result's `ruleIndex` naming its
/// `ruleId`, fingerprints, and a physical location's lines from 1 (`startLine` where given).
fn assert_sarif_2_1_0(log: &Value) {
    assert_eq!(schema_errors(log), Vec::<String>::new(), "{log:#}");
    let levels = ["none", "note", "warning", "error"];
    assert_eq!(log["version"], "2.1.0");
    assert!(log["$schema"].as_str().unwrap().contains("sarif-2.1.0"));
    for run in log["runs"].as_array().expect("runs") {
        let driver = &run["tool"]["driver"];
        assert!(driver["name"].as_str().is_some_and(|n| !n.is_empty()));
        let rules = driver["rules"].as_array().expect("rules");
        for rule in rules {
            assert!(rule["id"].is_string(), "{rule}");
            assert!(rule["shortDescription"]["text"].is_string(), "{rule}");
            let level = rule["defaultConfiguration"]["level"].as_str().unwrap();
            assert!(levels.contains(&level), "{rule}");
        }
        for invocation in run["invocations"].as_array().expect("invocations") {
            assert!(
                invocation["executionSuccessful"].is_boolean(),
                "{invocation}"
            );
            for n in invocation["toolExecutionNotifications"]
                .as_array()
                .into_iter()
                .flatten()
            {
                assert!(n["message"]["text"].as_str().is_some_and(|t| !t.is_empty()));
                assert!(levels.contains(&n["level"].as_str().unwrap()), "{n}");
            }
        }
        for result in run["results"].as_array().expect("results") {
            assert!(result["message"]["text"]
                .as_str()
                .is_some_and(|t| !t.is_empty()));
            let index = result["ruleIndex"].as_u64().unwrap() as usize;
            assert_eq!(rules[index]["id"], result["ruleId"]);
            assert!(levels.contains(&result["level"].as_str().unwrap()));
            for (_, print) in result["partialFingerprints"]
                .as_object()
                .expect("fingerprints")
            {
                assert!(print.is_string());
            }
            for location in result["locations"].as_array().unwrap() {
                let Some(physical) = location.get("physicalLocation") else {
                    continue;
                };
                assert!(
                    physical["artifactLocation"]["uri"].is_string(),
                    "{physical}"
                );
                for region in ["region", "contextRegion"] {
                    if let Some(region) = physical.get(region) {
                        assert!(region["startLine"].as_u64().unwrap() >= 1, "{physical}");
                    }
                }
            }
        }
    }
}

/// Each result points at its object's file (relative to the working directory), the line of its
/// field and of its object, with a fingerprint that does not change from run to run.
#[test]
fn sarif_results_have_physical_locations_and_stable_fingerprints() {
    let cluster = fixture("cluster.yaml");
    let set = fixture("shadowed-rule.yaml");
    let run = || {
        let output = netpol(&["lint", "-f", &cluster, "-f", &set, "-o", "sarif"]);
        assert_eq!(output.status.code(), Some(1));
        serde_json::from_slice::<Value>(&output.stdout).unwrap()
    };
    let log = run();
    assert_sarif_2_1_0(&log);
    let results = log["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    let places: Vec<(String, u64, u64)> = results
        .iter()
        .map(|r| {
            let physical = &r["locations"][0]["physicalLocation"];
            (
                physical["artifactLocation"]["uri"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                physical["region"]["startLine"].as_u64().unwrap(),
                physical["contextRegion"]["startLine"].as_u64().unwrap(),
            )
        })
        .collect();
    // Tests run in the crate's folder: the fixture is named below it. allow-y-http starts at
    // line 14, its `spec` is line 17 and its `ingress[0]` line 21.
    let uri = "tests/fixtures/lint/shadowed-rule.yaml".to_owned();
    assert_eq!(places, [(uri.clone(), 17, 14), (uri, 21, 14)]);
    let prints = |log: &Value| -> Vec<Value> {
        log["runs"][0]["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["partialFingerprints"].clone())
            .collect()
    };
    assert_eq!(prints(&log), prints(&run()));
    assert_ne!(prints(&log)[0], prints(&log)[1]);
}

/// On bad input the SARIF log is still a valid log: no results, the run not successful, each
/// error a tool execution notification naming the object and field; exit 2.
#[test]
fn sarif_on_bad_input_is_a_valid_log_with_the_error() {
    let dir = support::scratch_dir("lint-sarif-bad-input");
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p, namespace: x}\n\
         spec:\n  podSelector: {}\n  ingress:\n  - ports: [{port: 0}]\n",
    )
    .unwrap();
    let output = netpol(&["lint", "-f", bad.to_str().unwrap(), "-o", "sarif"]);
    assert_eq!(output.status.code(), Some(2));
    let log: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(&output)));
    assert_sarif_2_1_0(&log);
    let run = &log["runs"][0];
    assert_eq!(run["results"], serde_json::json!([]));
    assert_eq!(run["invocations"][0]["executionSuccessful"], false);
    let text = run["invocations"][0]["toolExecutionNotifications"][0]["message"]["text"]
        .as_str()
        .unwrap();
    assert!(text.contains("x/p") && text.contains("ports"), "{text}");
    // An unknown rule id is bad input too.
    let output = netpol(&[
        "lint",
        "-f",
        bad.to_str().unwrap(),
        "-o",
        "sarif",
        "--disable",
        "nope",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let log: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_sarif_2_1_0(&log);
}

/// Every rule's `helpUri` names a section of docs/cli.md: a heading whose GitHub anchor (lower
/// case, punctuation but `-` dropped, spaces as `-`) is the fragment.
#[test]
fn sarif_help_uris_resolve_in_docs_cli_md() {
    let docs =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cli.md"))
            .unwrap();
    let anchors: Vec<String> = docs
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| {
            l.trim_start_matches('#')
                .trim()
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || *c == '-' || *c == ' ' || *c == '_')
                .map(|c| if c == ' ' { '-' } else { c })
                .collect()
        })
        .collect();
    let output = netpol(&[
        "lint",
        "-f",
        &fixture("cluster.yaml"),
        "-f",
        &fixture("clean.yaml"),
        "-o",
        "sarif",
    ]);
    let log: Value = serde_json::from_slice(&output.stdout).unwrap();
    let rules = log["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .unwrap();
    assert!(rules.len() >= 12);
    for rule in rules {
        let uri = rule["helpUri"].as_str().unwrap();
        let (page, anchor) = uri.split_once('#').unwrap();
        assert!(page.ends_with("docs/cli.md"), "{uri}");
        assert!(
            anchors.iter().any(|a| a == anchor),
            "{uri}: no such heading"
        );
    }
}
