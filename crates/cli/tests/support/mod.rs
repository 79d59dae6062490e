//! What the command's tests share: scratch folders, the example cluster, HTTP on loopback,
//! running the `netpol` binary.
#![allow(dead_code, unused_imports)] // each test binary uses a different part

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

#[cfg(target_os = "linux")]
pub mod agent_netns;

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

/// Node `node-1` with six pods, each isolated for ingress by its namespace's policy, named at the
/// API's limits (63-character namespace, 253-character name, 63-character label value), with the
/// 201-character name that once turned the nftables datapath off, and with names only a file can
/// hold (quotes, newlines, semicolons, braces, non-ASCII). Label values are checked as the API
/// server checks them (a pod with a quote or a brace in one is refused as invalid), so the
/// longest value the API allows, with every character it allows, stands in for them. Returns
/// the manifests and the number of pods.
pub fn names_at_the_limits() -> (String, usize) {
    let namespace = "n".repeat(63);
    let longest_value = format!("a{}9z", "-_.Z".repeat(15));
    assert_eq!(longest_value.len(), 63);
    let mut docs = format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: node-1\nstatus:\n  addresses:\n  - {{type: InternalIP, address: 10.0.0.1}}\n---\n\
         apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {namespace}\n---\n\
         apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n---\n"
    );
    let pods = [
        ("p".repeat(253), namespace.as_str(), "web"),
        ("q".repeat(201), "shop", "web"),
        (r#""evil\"; flush ruleset; {""#.to_string(), "shop", "web"),
        (r#""new\nline\" drop""#.to_string(), "shop", "web"),
        (
            "\"ünïcødé-名前\"".to_string(),
            "shop",
            longest_value.as_str(),
        ),
        ("plain".to_string(), "shop", "web"),
    ];
    for (i, (name, namespace, app)) in pods.iter().enumerate() {
        docs.push_str(&format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {namespace}\n  labels: {{app: {app}}}\n\
             spec:\n  nodeName: node-1\n  containers:\n  - name: c\n    image: c\n\
             status:\n  phase: Running\n  podIP: 10.244.1.{}\n---\n",
            i + 1
        ));
    }
    for namespace in [namespace.as_str(), "shop"] {
        docs.push_str(&format!(
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: deny\n  namespace: {namespace}\n\
             spec:\n  podSelector: {{}}\n  policyTypes: [Ingress]\n---\n"
        ));
    }
    (docs, pods.len())
}

/// A NetworkPolicy at etcd's object size limit (about 1.4 MB of JSON): `shop`'s `app: web` pods
/// may reach `0.0.0.0/0` on TCP/443 except 60,000 single addresses (11.x.y.z). Each `except`
/// becomes a world identity of its own, so this is the shape that once cost a node 19.7 GB.
/// Returns the policy and an address excepted and one not.
pub fn policy_at_the_size_limit() -> (String, &'static str, &'static str) {
    let excepts: Vec<String> = (0u32..60_000)
        .map(|i| format!("\"11.{}.{}.{}/32\"", i >> 16, (i >> 8) & 255, i & 255))
        .collect();
    let policy = format!(
        r#"{{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
"metadata": {{"name": "egress-at-the-limit", "namespace": "shop"}},
"spec": {{"podSelector": {{"matchLabels": {{"app": "web"}}}}, "policyTypes": ["Egress"],
"egress": [{{"to": [{{"ipBlock": {{"cidr": "0.0.0.0/0", "except": [{}]}}}}],
"ports": [{{"protocol": "TCP", "port": 443}}]}}]}}}}"#,
        excepts.join(", ")
    );
    assert!(policy.len() > 1_000_000, "{} bytes", policy.len());
    // 11.0.234.95 is the last except (number 59,999); 11.0.234.96 the address right after it.
    (policy, "11.0.234.95", "11.0.234.96")
}
