//! Audit mode (`netpol.io/enforcement: audit`) in the authoring tools: a policy in audit mode
//! decides nothing, and `explain` names what it would deny; an unknown mode is refused naming
//! the annotation.

mod support;

use support::{example, netpol, scratch_dir, stderr, stdout};

/// The example shop's proposed `web-from-shop` policy, with `enforcement` as its mode.
fn web_from_shop(enforcement: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: web-from-shop\n  namespace: shop\n  annotations: {{netpol.io/enforcement: {enforcement}}}\nspec:\n  podSelector: {{matchLabels: {{app: web}}}}\n  policyTypes: [Ingress]\n  ingress:\n  - from: [{{namespaceSelector: {{matchLabels: {{team: shop}}}}}}]\n    ports: [{{port: 8080}}]\n"
    )
}

fn explain(test: &str, enforcement: &str, engine: &str) -> std::process::Output {
    let dir = scratch_dir(test);
    let policy = dir.join("policy.yaml");
    std::fs::write(&policy, web_from_shop(enforcement)).unwrap();
    netpol(&[
        "explain",
        "-f",
        &example("manifests/cluster.yaml"),
        "-f",
        policy.to_str().unwrap(),
        "--engine",
        engine,
        "ops/prober",
        "shop/web",
        "TCP/8080",
    ])
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
