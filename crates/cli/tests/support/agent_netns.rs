//! Running the agent inside private network namespaces (`netpol_testbed`): the cluster files it
//! reads, HTTP to its listener inside a namespace, `netpol flows`, counters from `/metrics`.

use std::path::Path;

/// Log text without its ANSI colour sequences.
pub fn without_colours(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|c| *c == 'm');
        } else {
            out.push(c);
        }
    }
    out
}

/// Writes `files` (name, text) under `dir/cluster`.
pub fn cluster(dir: &Path, files: &[(&str, String)]) {
    let root = dir.join("cluster");
    std::fs::create_dir_all(&root).unwrap();
    for (name, text) in files {
        std::fs::write(root.join(name), text).unwrap();
    }
}

pub fn pod(name: &str, node: &str, app: &str, ip: &str, host_network: bool) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: shop\n  labels: {{app: {app}}}\n\
         spec:\n  nodeName: {node}\n  hostNetwork: {host_network}\n  containers:\n  - name: c\n    image: c\n\
         status:\n  phase: Running\n  podIP: {ip}\n---\n"
    )
}

pub const NODES: &str = "apiVersion: v1\nkind: Node\nmetadata:\n  name: node-1\nstatus:\n  addresses:\n  - {type: InternalIP, address: 10.0.0.1}\n---\n\
apiVersion: v1\nkind: Node\nmetadata:\n  name: node-2\nstatus:\n  addresses:\n  - {type: InternalIP, address: 10.0.0.2}\n---\n\
apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n  labels: {team: shop}\n";

/// web admits TCP 80 from app=client pods and may send only to them, on TCP 80.
pub const WEB_POLICY: &str = r"apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: web
  namespace: shop
spec:
  podSelector: {matchLabels: {app: web}}
  policyTypes: [Ingress, Egress]
  ingress:
  - from: [{podSelector: {matchLabels: {app: client}}}]
    ports: [{protocol: TCP, port: 80}]
  egress:
  - to: [{podSelector: {matchLabels: {app: client}}}]
    ports: [{protocol: TCP, port: 80}]
";

/// `GET path` from the agent listening on `port` inside `netns`, through bash's `/dev/tcp`.
pub fn try_get(
    netns: &netpol_testbed::netns::Netns,
    port: u16,
    path: &str,
) -> std::io::Result<String> {
    let script = format!(
        "exec 3<>/dev/tcp/127.0.0.1/{port}; printf 'GET {path} HTTP/1.0\\r\\n\\r\\n' >&3; cat <&3"
    );
    netns.run("bash", &["-c", &script], "")
}

pub fn http_get(netns: &netpol_testbed::netns::Netns, port: u16, path: &str) -> String {
    try_get(netns, port, path).unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

/// A child process killed when the test ends, however it ends.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `netpol flows --once --json` against the agent on `port` inside `netns`: its records.
pub fn flows(netns: &netpol_testbed::netns::Netns, port: u16) -> Vec<serde_json::Value> {
    let output = netns
        .command(env!("CARGO_BIN_EXE_netpol"))
        .args(["flows", "--once", "--json", "--node"])
        .arg(format!("127.0.0.1:{port}"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The value of the `netpol_rule_packets_total` series whose labels include every one of
/// `labels` (`name="value"`), in a /metrics answer.
pub fn rule_packets(metrics: &str, labels: &[&str]) -> u64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("netpol_rule_packets_total{"))
        .filter(|l| labels.iter().all(|label| l.contains(label)))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

/// Waits (up to `limit` tries, 100 ms apart) for `check`.
pub fn eventually<T>(limit: usize, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    for _ in 0..limit {
        if let Some(found) = check() {
            return Some(found);
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    None
}

/// The agent, running in `router` (a node's namespace) on the cluster folder `dir/cluster` as
/// node-1 on nftables, with `args` besides, listening on `port`, and ready; killed when dropped.
pub struct RunningAgent {
    _process: KillOnDrop,
    log: std::path::PathBuf,
}

impl RunningAgent {
    /// What it logged so far, without colours.
    pub fn log(&self) -> String {
        without_colours(&std::fs::read_to_string(&self.log).unwrap())
    }
}

/// Starts [`RunningAgent`] and waits until `/readyz` answers 200 (panicking with its log if it
/// never does).
pub fn spawn_agent(
    router: &netpol_testbed::netns::Netns,
    dir: &Path,
    port: u16,
    args: &[&str],
) -> RunningAgent {
    let log = dir.join("agent.log");
    let agent = router
        .command(env!("CARGO_BIN_EXE_netpol"))
        .args([
            "agent",
            "--from-dir",
            "cluster",
            "--node",
            "node-1",
            "--datapath",
            "nftables",
        ])
        .args(args)
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .current_dir(dir)
        .env("RUST_LOG", "netpol_agent=info,netpol::flows=info")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let agent = RunningAgent {
        _process: KillOnDrop(agent),
        log,
    };
    let ready = eventually(300, || {
        try_get(router, port, "/readyz")
            .is_ok_and(|answer| answer.starts_with("HTTP/1.0 200"))
            .then_some(())
    });
    if ready.is_none() {
        panic!("the agent never became ready:\n{}", agent.log());
    }
    agent
}

/// The cluster files of `dir/cluster` (node-1 and node-2, pods `shop/web` 10.244.1.10 and
/// `shop/client` 10.244.1.11 on node-1, `shop/remote` 10.244.2.10 on node-2, and `policy`, a
/// file name and its text), and the network of node-1 (10.0.0.1) routing to the three.
pub fn web_client_remote(dir: &Path, policy: (&str, &str)) -> netpol_testbed::topology::Topology {
    use netpol_testbed::topology::{Host, Topology};
    let pods = [
        pod("web", "node-1", "web", "10.244.1.10", false),
        pod("client", "node-1", "client", "10.244.1.11", false),
        pod("remote", "node-2", "other", "10.244.2.10", false),
    ]
    .concat();
    cluster(
        dir,
        &[
            ("cluster.yaml", NODES.to_string()),
            ("pods.yaml", pods),
            (policy.0, policy.1.to_string()),
        ],
    );
    let host = |name: &str, address: &str| Host {
        name: name.into(),
        addresses: vec![address.parse().unwrap()],
    };
    Topology::build_node(
        vec!["10.0.0.1".parse().unwrap()],
        vec![
            host("web", "10.244.1.10"),
            host("client", "10.244.1.11"),
            host("remote", "10.244.2.10"),
        ],
    )
    .expect("the network builds")
}

/// TCP probes to `shop/web` (10.244.1.10) of [`web_client_remote`]: (from address, port) each.
pub fn probe_web<const N: usize>(
    topology: &netpol_testbed::topology::Topology,
    probes: [(&str, u16); N],
) -> Vec<netpol_testbed::probe::ProbeResult> {
    use netpol_testbed::probe::{self, Probe, ProbeOptions, Transport};
    let options = ProbeOptions {
        timeout: std::time::Duration::from_millis(1000),
        parallel: 2,
    };
    let probes = probes.map(|(from, port)| Probe {
        from: from.parse().unwrap(),
        to: "10.244.1.10".parse().unwrap(),
        transport: Transport::Tcp,
        port,
    });
    probe::run(topology, &probes, options)
}

/// `netpol explain -f cluster shop/remote shop/web TCP/PORT` in `dir`: its text.
pub fn explain_remote_to_web(dir: &Path, port: u16) -> String {
    let explain = std::process::Command::new(env!("CARGO_BIN_EXE_netpol"))
        .args(["explain", "-f", "cluster", "shop/remote", "shop/web"])
        .arg(format!("TCP/{port}"))
        .current_dir(dir)
        .output()
        .unwrap();
    String::from_utf8_lossy(&explain.stdout).into_owned()
}
