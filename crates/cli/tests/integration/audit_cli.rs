//! Audit mode (`netpol.io/enforcement: audit`) in the authoring tools: a policy in audit mode
//! decides nothing, `explain` names what it would deny (text and JSON), `matrix` marks it, `diff` shows
//! what it would change apart; an
//! unknown mode is refused naming the annotation.

use crate::support;

use support::{example, netpol, scratch_dir, stderr, stdout};

/// The example shop's proposed `web-from-shop` policy, with `enforcement` as its mode.
fn web_from_shop(enforcement: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: web-from-shop\n  namespace: shop\n  annotations: {{netpol.io/enforcement: {enforcement}}}\nspec:\n  podSelector: {{matchLabels: {{app: web}}}}\n  policyTypes: [Ingress]\n  ingress:\n  - from: [{{namespaceSelector: {{matchLabels: {{team: shop}}}}}}]\n    ports: [{{port: 8080}}]\n"
    )
}

fn explain(test: &str, enforcement: &str, engine: &str) -> std::process::Output {
    explain_with(test, enforcement, engine, &[])
}

/// [`explain`] with `extra` arguments.
fn explain_with(
    test: &str,
    enforcement: &str,
    engine: &str,
    extra: &[&str],
) -> std::process::Output {
    let dir = scratch_dir(test);
    let policy = dir.join("policy.yaml");
    std::fs::write(&policy, web_from_shop(enforcement)).unwrap();
    let cluster = example("manifests/cluster.yaml");
    let mut args = vec![
        "explain",
        "-f",
        &cluster,
        "-f",
        policy.to_str().unwrap(),
        "--engine",
        engine,
        "ops/prober",
        "shop/web",
        "TCP/8080",
    ];
    args.extend_from_slice(extra);
    netpol(&args)
}

#[test]
fn explain_allows_what_an_audited_policy_would_deny_and_names_it() {
    for engine in ["reference", "mapstate"] {
        let output = explain(&format!("audit-explain-{engine}"), "audit", engine);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let out = stdout(&output);
        assert!(
            out.starts_with("ops/prober -> shop/web TCP/8080: allow\n"),
            "{out}"
        );
        assert!(
            out.contains(
                "would deny (audit): no Normal-tier rule matched and NetworkPolicy \
                 shop/web-from-shop isolates the pod"
            ),
            "{out}"
        );
        assert!(!out.contains("which is a bug"), "{out}");
    }
    // Enforced, the same policy denies, and nothing is reported as audited.
    let output = explain("audit-explain-enforced", "enforce", "mapstate");
    let out = stdout(&output);
    assert!(
        out.starts_with("ops/prober -> shop/web TCP/8080: deny\n"),
        "{out}"
    );
    assert!(!out.contains("would deny"), "{out}");
}

/// `explain -o json` carries the would-deny of each direction, in the words of a decision.
#[test]
fn explain_json_carries_the_would_deny() {
    let output = explain_with("audit-explain-json", "audit", "mapstate", &["-o", "json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(json["verdict"], "allow", "{json}");
    let ingress = &json["would_deny"]["ingress"];
    assert_eq!(ingress["verdict"], "would-deny", "{json}");
    assert_eq!(ingress["reason"], "isolated", "{json}");
    assert_eq!(ingress["policy"]["name"], "web-from-shop", "{json}");
    assert!(
        ingress["text"]
            .as_str()
            .unwrap()
            .starts_with("would deny (audit): "),
        "{json}"
    );
    assert!(json["would_deny"].get("egress").is_none(), "{json}");
    // Enforced: no would-deny at all.
    let output = explain_with(
        "audit-explain-json-enforced",
        "enforce",
        "mapstate",
        &["-o", "json"],
    );
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert!(json.get("would_deny").is_none(), "{json}");
}

/// `matrix -f cluster -f policy --port 8080` with the policy in `enforcement` mode.
fn matrix(test: &str, enforcement: &str, output: &str) -> std::process::Output {
    let dir = scratch_dir(test);
    let policy = dir.join("policy.yaml");
    std::fs::write(&policy, web_from_shop(enforcement)).unwrap();
    netpol(&[
        "matrix",
        "-f",
        &example("manifests/cluster.yaml"),
        "-f",
        policy.to_str().unwrap(),
        "--port",
        "8080",
        "-o",
        output,
    ])
}

/// `matrix` marks the allowed flows an audited policy would deny (`a` in text, `would_deny`
/// in JSON): the flows `explain` says it would deny, and no others.
#[test]
fn matrix_marks_what_an_audited_policy_would_deny() {
    let output = matrix("audit-matrix-text", "audit", "text");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let out = stdout(&output);
    let row = |label: &str| -> String {
        out.lines()
            .find(|l| l.contains(label))
            .unwrap_or_else(|| panic!("no row {label}:\n{out}"))
            .to_string()
    };
    // Columns: ops/prober, the stand-in for shop's other pods, shop/db, shop/web, the node,
    // outside.
    assert!(row("1 ops/prober").ends_with(".  .  .  a  -  ."), "{out}");
    assert!(row("3 shop/db").ends_with(".  .  .  .  -  ."), "{out}");
    assert!(
        out.contains("a allowed, and a policy in audit mode"),
        "{out}"
    );

    let output = matrix("audit-matrix-json", "audit", "json");
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    let would_deny = &json["matrices"][0]["would_deny"];
    assert_eq!(
        would_deny,
        &serde_json::json!([
            {"from": "ops/prober", "to": "shop/web"},
            {"from": "0.0.0.0/0", "to": "shop/web"}
        ]),
        "{json}"
    );

    // Enforced, the same flows are denied and nothing is marked.
    let output = matrix("audit-matrix-enforced", "enforce", "text");
    let out = stdout(&output);
    let prober = out.lines().find(|l| l.contains("1 ops/prober")).unwrap();
    assert!(prober.ends_with(".  .  .  X  -  ."), "{out}");
    assert!(!out.contains("audit mode"), "{out}");
    let output = matrix("audit-matrix-enforced-json", "enforce", "json");
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert!(json["matrices"][0].get("would_deny").is_none(), "{json}");
}

/// `diff` of a rollout in audit mode: no enforced flow changes (exit 0), and the audit section
/// (text) and `audit` object (JSON) list what would change were the policy enforced.
#[test]
fn diff_shows_what_an_audited_policy_would_change_apart() {
    let dir = scratch_dir("audit-diff");
    let (before, after) = (dir.join("before"), dir.join("after"));
    std::fs::create_dir_all(&before).unwrap();
    std::fs::create_dir_all(&after).unwrap();
    std::fs::write(before.join("none.yaml"), "").unwrap();
    std::fs::write(after.join("policy.yaml"), web_from_shop("audit")).unwrap();
    let cluster = example("manifests/cluster.yaml");
    let diff = |output: &str| {
        netpol(&[
            "diff",
            "-f",
            &cluster,
            before.to_str().unwrap(),
            after.to_str().unwrap(),
            "--port",
            "8080",
            "-o",
            output,
        ])
    };
    let output = diff("text");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let out = stdout(&output);
    let (enforced, audit) = out
        .split_once("audit: were the policies in audit mode")
        .unwrap_or_else(|| panic!("no audit section:\n{out}"));
    // After the line naming the stand-ins (shop's other pods), which the policy's peer selects.
    let summary = enforced.lines().find(|l| !l.starts_with("stand-ins"));
    assert!(
        summary.is_some_and(|l| l.starts_with("0 flows change")),
        "{out}"
    );
    assert!(
        audit.contains("ops/prober -> shop/web TCP/8080 (http): allow -> deny"),
        "{out}"
    );
    assert!(audit.contains("2 flows change (2 newly denied"), "{out}");

    let output = diff("json");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(json["flows_changed"], 0, "{json}");
    assert_eq!(json["audit"]["flows_changed"], 2, "{json}");
    assert_eq!(json["audit"]["newly_denied"], 2, "{json}");

    // Enforced, the change is the diff itself, and there is no audit section.
    std::fs::write(after.join("policy.yaml"), web_from_shop("enforce")).unwrap();
    let output = diff("text");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(!stdout(&output).contains("audit"), "{}", stdout(&output));
}

#[test]
fn an_unknown_enforcement_mode_is_refused_naming_the_annotation() {
    let output = explain("audit-unknown-mode", "log-only", "mapstate");
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    let err = stderr(&output);
    assert!(
        err.contains("NetworkPolicy shop/web-from-shop")
            && err.contains("metadata.annotations[\"netpol.io/enforcement\"]")
            && err.contains("\"log-only\""),
        "{err}"
    );
}
