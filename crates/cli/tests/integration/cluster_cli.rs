//! `--cluster` on `matrix`, `explain`, `diff` and `lint`, against the testkit's API-server
//! stand-in over real HTTP: the live cluster is listed in pages (`limit`/`continue`, one object
//! a page here), manifests are applied on top as `kubectl apply` would, `--delete` takes objects
//! out, and the decisions printed are those the same objects give as files.

use crate::support;

use std::path::{Path, PathBuf};

use netpol_testkit::apiserver::ApiServer;
use serde_json::Value;
use support::{example, netpol, netpol_with_stdin, scratch_dir, stderr, stdout};

/// A stand-in serving the example manifests' cluster (`examples/manifests/cluster.yaml`) with
/// the shop's policies of today (`policies-before`), and a kubeconfig naming it.
struct Live {
    server: ApiServer,
    kubeconfig: PathBuf,
}

fn apply_file(server: &ApiServer, file: &Path) {
    let text = std::fs::read_to_string(file).unwrap();
    let documents: Vec<Value> =
        serde_saphyr::from_multiple_with_options(&text, serde_saphyr::Options::default()).unwrap();
    for document in documents.into_iter().filter(|d| !d.is_null()) {
        match document["items"].as_array() {
            Some(items) => items.iter().for_each(|i| server.apply(i.clone())),
            None => server.apply(document),
        }
    }
}

fn live(test: &str) -> Live {
    let server = ApiServer::start();
    apply_file(&server, Path::new(&example("manifests/cluster.yaml")));
    apply_file(
        &server,
        Path::new(&example("manifests/policies-before/shop.yaml")),
    );
    let kubeconfig = scratch_dir(test).join("kubeconfig");
    server.write_kubeconfig(&kubeconfig);
    Live { server, kubeconfig }
}

impl Live {
    /// `netpol ARGS --cluster --kubeconfig FILE --chunk-size 1`.
    fn run(&self, args: &[&str]) -> std::process::Output {
        let mut all: Vec<&str> = args.to_vec();
        all.extend([
            "--cluster",
            "--kubeconfig",
            self.kubeconfig.to_str().unwrap(),
            "--chunk-size",
            "1",
        ]);
        netpol(&all)
    }

    /// Every kind was listed, read-only, and the pods took one page each.
    fn assert_paged_reads(&self) {
        let requests = self.server.requests();
        assert!(
            requests
                .iter()
                .all(|r| r.contains("limit=1") && !r.contains("watch")),
            "{requests:#?}"
        );
        let pods = self.server.lists_of("Pod");
        assert_eq!(pods.len(), 3, "3 pods, one a page: {pods:#?}");
        assert!(pods[1].contains("continue="), "{pods:#?}");
        for kind in netpol_testkit::apiserver::RESOURCES.map(|r| r.0) {
            assert!(!self.server.lists_of(kind).is_empty(), "{kind} not listed");
        }
    }
}

fn files(args: &[&str]) -> std::process::Output {
    netpol(args)
}

#[test]
fn matrix_of_the_live_cluster_is_the_matrix_of_its_objects() {
    let live = live("cluster-matrix");
    let output = live.run(&["matrix", "--port", "5432"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    // Today's policies: only the web pod reaches the database.
    assert!(text.contains("TCP/5432 (pg): "), "{text}");
    let row = |name: &str| {
        text.lines()
            .find(|l| l.contains(name) && !l.contains("from"))
            .unwrap_or_else(|| panic!("no row {name}:\n{text}"))
            .to_owned()
    };
    assert!(row("ops/prober").contains('X'), "{text}");
    let cluster = example("manifests/cluster.yaml");
    let before = example("manifests/policies-before");
    let expected = files(&["matrix", "-f", &cluster, "-f", &before, "--port", "5432"]);
    assert_eq!(text, stdout(&expected));
    live.assert_paged_reads();

    // With manifests: the live cluster with them applied.
    let after = example("manifests/policies-after");
    let output = live.run(&["matrix", "-f", &after, "--port", "8080"]);
    let expected = files(&["matrix", "-f", &cluster, "-f", &after, "--port", "8080"]);
    assert_eq!(stdout(&output), stdout(&expected));
}

#[test]
fn explain_decides_a_live_flow() {
    let live = live("cluster-explain");
    let output = live.run(&["explain", "ops/prober", "shop/db", "TCP/pg"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.starts_with("ops/prober -> shop/db TCP/5432 (pg): deny"),
        "{text}"
    );
    assert!(text.contains("NetworkPolicy shop/db-from-web"), "{text}");
    live.assert_paged_reads();
    let output = live.run(&["explain", "shop/web", "shop/db", "TCP/5432"]);
    assert!(
        stdout(&output).starts_with("shop/web -> shop/db TCP/5432: allow"),
        "{}",
        stdout(&output)
    );
    // What if db-from-web were gone.
    let output = live.run(&[
        "explain",
        "ops/prober",
        "shop/db",
        "TCP/pg",
        "--delete",
        "networkpolicy/shop/db-from-web",
    ]);
    assert!(
        stdout(&output).starts_with("ops/prober -> shop/db TCP/5432 (pg): allow"),
        "{}{}",
        stdout(&output),
        stderr(&output)
    );
}

#[test]
fn diff_against_the_live_cluster_equals_the_diff_of_files() {
    let live = live("cluster-diff");
    let after = example("manifests/policies-after");
    let output = live.run(&["diff", &after]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let expected = files(&[
        "diff",
        "-f",
        &example("manifests/cluster.yaml"),
        &example("manifests/policies-before"),
        &after,
    ]);
    assert_eq!(expected.status.code(), Some(1));
    assert_eq!(stdout(&output), stdout(&expected));
    assert!(
        stdout(&output).contains("ops/prober -> shop/web TCP/8080 (http): allow -> deny"),
        "{}",
        stdout(&output)
    );
    live.assert_paged_reads();

    // Applying what the cluster already holds changes nothing.
    let output = live.run(&["diff", &example("manifests/policies-before")]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
}

#[test]
fn diff_applies_as_kubectl_apply_replacing_an_object_of_the_same_name() {
    let live = live("cluster-diff-replace");
    // db-from-web, replaced by a version without rules: the database is closed to the web pod
    // too. Added beside the old one instead, the old rule would still admit the web pod.
    let closed = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n\
        metadata: {name: db-from-web, namespace: shop}\n\
        spec: {podSelector: {matchLabels: {app: db}}, policyTypes: [Ingress]}\n";
    let kubeconfig = live.kubeconfig.to_str().unwrap();
    let output = netpol_with_stdin(
        &[
            "diff",
            "--cluster",
            "--kubeconfig",
            kubeconfig,
            "-",
            "--port",
            "5432",
        ],
        closed,
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let text = stdout(&output);
    let changes: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with(' ') && l.contains(" -> "))
        .collect();
    assert_eq!(
        changes,
        ["shop/web -> shop/db TCP/5432 (pg): allow -> deny"],
        "{text}"
    );
}

#[test]
fn diff_delete_removes_live_objects_and_names_a_missing_one() {
    let live = live("cluster-diff-delete");
    let output = live.run(&[
        "diff",
        "--delete",
        "NetworkPolicy/shop/db-from-web",
        "--port",
        "5432",
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.contains("ops/prober -> shop/db TCP/5432 (pg): deny -> allow"),
        "{text}"
    );
    assert!(!text.contains("shop/web -> shop/db"), "{text}");
    live.assert_paged_reads();

    let output = live.run(&["diff", "--delete", "networkpolicy/shop/nothing"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output)
            .contains("--delete networkpolicy/shop/nothing: no such object in the cluster"),
        "{}",
        stderr(&output)
    );
    // Nothing to compare against the live cluster.
    let output = live.run(&["diff"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("give the AFTER manifests"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn lint_reads_the_live_cluster() {
    let live = live("cluster-lint");
    // A policy whose peer selects nothing (a typo in the label).
    live.server.apply(serde_json::json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "web-from-prober", "namespace": "shop"},
        "spec": {"podSelector": {"matchLabels": {"app": "web"}}, "policyTypes": ["Ingress"],
                 "ingress": [{"from": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "probr"}}}]}]},
    }));
    let output = live.run(&["lint", "-o", "json"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let findings: Value = serde_json::from_slice(&output.stdout).unwrap();
    let found: Vec<(String, String, String)> = findings["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap().to_owned();
            (s("rule"), s("object"), s("field"))
        })
        .collect();
    assert!(
        found.contains(&(
            "peer-selects-nothing".into(),
            "NetworkPolicy shop/web-from-prober".into(),
            "spec.ingress[0]".into()
        )),
        "{found:?}"
    );
    live.assert_paged_reads();
}

#[test]
fn an_unknown_context_or_an_unreachable_cluster_is_bad_input() {
    let live = live("cluster-errors");
    let output = netpol(&[
        "matrix",
        "--cluster",
        "--kubeconfig",
        live.kubeconfig.to_str().unwrap(),
        "--context",
        "prod",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("--context prod: no such context"),
        "{}",
        stderr(&output)
    );
    let kubeconfig = live.kubeconfig.clone();
    drop(live);
    let output = netpol(&[
        "explain",
        "--cluster",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "shop/web",
        "shop/db",
        "TCP/80",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("<cluster context stand-in>: listing"),
        "{}",
        stderr(&output)
    );
}
