//! `netpol lint` as a CI gate: the exposure rules, default-deny redundancy as information,
//! findings consistent with `explain`, rules switched off, findings acknowledged by annotation
//! or a baseline, and the severity that fails.

use crate::support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::{netpol, stderr, stdout};

fn cluster() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/lint/cluster.yaml")
        .to_str()
        .unwrap()
        .to_owned()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path: PathBuf = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

fn findings(args: &[&str]) -> (Option<i32>, Vec<Value>) {
    let mut all = vec!["lint", "-o", "json"];
    all.extend_from_slice(args);
    let output = netpol(&all);
    let json: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}{}", stdout(&output), stderr(&output)));
    (
        output.status.code(),
        json["findings"].as_array().unwrap().clone(),
    )
}

fn rules_of(findings: &[Value]) -> Vec<(String, String, String)> {
    findings
        .iter()
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap().to_owned();
            (s("rule"), s("object"), s("field"))
        })
        .collect()
}

const OPEN: &str = "\
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: db-from-everyone, namespace: x}
spec:
  podSelector: {matchLabels: {app: db}}
  ingress:
  - from:
    - podSelector: {matchLabels: {app: web}}
    - namespaceSelector: {}
    ports: [{port: 5432}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web-public, namespace: x}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress:
  - ports: [{port: 8080}]
  egress:
  - to: [{ipBlock: {cidr: 0.0.0.0/0}}]
";

#[test]
fn open_rules_name_the_object_and_field() {
    let dir = support::scratch_dir("lint-open");
    let open = write(&dir, "open.yaml", OPEN);
    let (code, found) = findings(&["-f", &cluster(), "-f", &open]);
    assert_eq!(code, Some(1));
    let found = rules_of(&found);
    let expected = [
        (
            "open-to-all-pods",
            "NetworkPolicy x/db-from-everyone",
            "spec.ingress[0]",
        ),
        (
            "egress-open-to-world",
            "NetworkPolicy x/web-public",
            "spec.egress[0]",
        ),
        (
            "open-to-world",
            "NetworkPolicy x/web-public",
            "spec.ingress[0]",
        ),
    ];
    for (rule, object, field) in expected {
        let wanted = (rule.to_owned(), object.to_owned(), field.to_owned());
        assert!(found.contains(&wanted), "{wanted:?} not in {found:?}");
    }
}

#[test]
fn rules_are_switched_off_acknowledged_or_baselined() {
    let dir = support::scratch_dir("lint-gating");
    let open = write(&dir, "open.yaml", OPEN);
    let (_, all) = findings(&["-f", &cluster(), "-f", &open]);
    assert!(all.len() >= 3, "{all:#?}");

    // --disable: the rule's findings are gone, the others stay.
    let (_, some) = findings(&["-f", &cluster(), "-f", &open, "--disable", "open-to-world"]);
    assert!(
        some.iter().all(|f| f["rule"] != "open-to-world"),
        "{some:#?}"
    );
    assert_eq!(some.len(), all.len() - 1);

    // The annotation acknowledges findings of its own object only.
    let annotated = OPEN.replace(
        "metadata: {name: web-public, namespace: x}",
        "metadata:\n  name: web-public\n  namespace: x\n  annotations: {netpol.io/lint-ignore: \"open-to-world, egress-open-to-world\"}",
    );
    let annotated = write(&dir, "annotated.yaml", &annotated);
    let (code, left) = findings(&["-f", &cluster(), "-f", &annotated]);
    assert_eq!(code, Some(1));
    assert_eq!(
        rules_of(&left)
            .iter()
            .filter(|(rule, object, _)| object == "NetworkPolicy x/web-public"
                && rule.contains("open-to-world"))
            .count(),
        0,
        "{left:#?}"
    );
    assert!(left.iter().any(|f| f["rule"] == "open-to-all-pods"));
    // Its other findings stay.
    assert!(left.iter().any(|f| f["rule"] == "ipblock-covers-pods"));

    // A baseline of every finding: nothing new, exit 0.
    let output = netpol(&["lint", "-f", &cluster(), "-f", &open, "-o", "json"]);
    let baseline = write(&dir, "baseline.json", &stdout(&output));
    let (code, left) = findings(&["-f", &cluster(), "-f", &open, "--baseline", &baseline]);
    assert_eq!((code, left.len()), (Some(0), 0), "{left:#?}");
    let output = netpol(&["lint", "-f", &cluster(), "-f", &open, "--baseline", &open]);
    assert_eq!(
        output.status.code(),
        Some(2),
        "a baseline that is not JSON is bad input"
    );
    assert!(
        stderr(&output).contains("--baseline"),
        "{}",
        stderr(&output)
    );

    // --fail-on: warnings fail by default; `error` fails on bad input only.
    let (code, _) = findings(&["-f", &cluster(), "-f", &open, "--fail-on", "error"]);
    assert_eq!(code, Some(0));
}

const COVERED_DEFAULT_DENY: &str = "\
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: default-deny, namespace: x}
spec:
  podSelector: {}
  policyTypes: [Ingress]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-x, namespace: x}
spec:
  podSelector: {}
  ingress:
  - from: [{podSelector: {}}]
";

#[test]
fn a_covered_default_deny_is_a_note_that_says_keep_it() {
    let dir = support::scratch_dir("lint-default-deny");
    let set = write(&dir, "set.yaml", COVERED_DEFAULT_DENY);
    let (code, found) = findings(&["-f", &cluster(), "-f", &set]);
    let finding = found
        .iter()
        .find(|f| f["object"] == "NetworkPolicy x/default-deny")
        .unwrap_or_else(|| panic!("{found:#?}"));
    assert_eq!(finding["rule"], "default-deny-covered");
    assert_eq!(finding["severity"], "note");
    let advice = format!("{} {}", finding["message"], finding["hint"]);
    assert!(!advice.contains("delete"), "{advice}");
    assert!(advice.contains("keep it"), "{advice}");
    // A note alone does not fail by default; with --fail-on note it does.
    assert_eq!(code, Some(0), "{found:#?}");
    let (code, _) = findings(&["-f", &cluster(), "-f", &set, "--fail-on", "note"]);
    assert_eq!(code, Some(1));
}

const DENY_OVER_ISOLATION: &str = "\
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: default-deny, namespace: x}
spec:
  podSelector: {}
  policyTypes: [Ingress]
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: deny-y}
spec:
  priority: 10
  subject: {namespaces: {matchLabels: {ns: x}}}
  ingress:
  - name: deny-from-y
    action: Deny
    from: [{namespaces: {matchLabels: {ns: y}}}]
";

/// A Deny rule over a default deny: `explain` names the rule as deciding y -> x, so lint must
/// not say it never decides; what lint says decides without it is what `explain` names once it
/// is gone.
#[test]
fn lint_agrees_with_explain_on_a_shadowed_rule() {
    let dir = support::scratch_dir("lint-explain");
    let with = write(&dir, "with.yaml", DENY_OVER_ISOLATION);
    let without = write(
        &dir,
        "without.yaml",
        DENY_OVER_ISOLATION.split("---").next().unwrap(),
    );
    let (_, found) = findings(&["-f", &cluster(), "-f", &with]);
    let shadowed = found
        .iter()
        .find(|f| f["rule"] == "shadowed-rule")
        .unwrap_or_else(|| panic!("{found:#?}"));
    assert_eq!(shadowed["object"], "AdminNetworkPolicy deny-y");
    let message = shadowed["message"].as_str().unwrap();
    let explain = |policies: &str| -> Value {
        let output = netpol(&[
            "explain",
            "-f",
            &cluster(),
            "-f",
            policies,
            "y/client",
            "x/web",
            "TCP/8080",
            "-o",
            "json",
        ]);
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let decided = explain(&with);
    assert_eq!(decided["ingress"]["policy"]["name"], "deny-y");
    assert!(!message.contains("never decides"), "{message}");
    let alone = explain(&without);
    assert_eq!(alone["verdict"], decided["verdict"]);
    let policy = &alone["ingress"]["policy"];
    let named = format!(
        "{} {}/{}",
        policy["kind"].as_str().unwrap(),
        policy["namespace"].as_str().unwrap(),
        policy["name"].as_str().unwrap()
    );
    assert!(
        message.contains(&format!("without it, {named}")) || message.contains(&named),
        "lint says {message:?}; explain without the rule names {named}"
    );
}
