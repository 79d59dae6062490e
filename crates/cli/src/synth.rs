//! `netpol synth`: writes a synthetic cluster of the usual shape as YAML files, for scale
//! benchmarks and for trying the agent on a cluster of any size.
//!
//! The shape follows what platform teams run: namespaces of one to four apps (web, api, db,
//! cache tiers), replicas of each app sharing their labels, about a hundred pods per node, and
//! per namespace a default deny, app-internal allows on named ports, a monitoring scrape allow and
//! for every third namespace an egress limit to a CIDR. Eight AdminNetworkPolicies (Allow, Deny
//! and Pass) and the BaselineAdminNetworkPolicy cover the cluster. Output is deterministic for
//! given sizes; pods go into one `pods.yaml` stream, as `kubectl get pods -A -o yaml` gives them.

use std::fmt::Write as _;
use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// The tier label of an app, by its index in its namespace.
const TIERS: [&str; 4] = ["web", "api", "db", "cache"];

#[derive(Clone, Debug, clap::Args)]
pub struct Args {
    /// Pods, spread round-robin over namespaces and nodes.
    #[arg(long, default_value_t = 10_000)]
    pub pods: usize,
    /// Namespaces (default: one per 20 pods).
    #[arg(long)]
    pub namespaces: Option<usize>,
    /// Nodes (default: one per 100 pods).
    #[arg(long)]
    pub nodes: Option<usize>,
    /// The folder to write; created if missing, its YAML files replaced.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// The sizes of a synthetic cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub pods: usize,
    pub namespaces: usize,
    pub nodes: usize,
}

impl Shape {
    /// The usual proportions: 20 pods per namespace, 100 per node.
    pub fn for_pods(pods: usize) -> Shape {
        Shape {
            pods,
            namespaces: pods.div_ceil(20).max(1),
            nodes: pods.div_ceil(100).max(1),
        }
    }

    /// Apps in namespace `ns`: one to four.
    fn apps(ns: usize) -> usize {
        1 + (ns * 7 + ns / 4) % 4
    }
}

/// What was written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub pods: usize,
    pub namespaces: usize,
    pub nodes: usize,
    pub policies: usize,
}

pub fn run(args: &Args, out: &mut dyn Write) -> anyhow::Result<()> {
    let default = Shape::for_pods(args.pods);
    let shape = Shape {
        pods: args.pods,
        namespaces: args.namespaces.unwrap_or(default.namespaces).max(1),
        nodes: args.nodes.unwrap_or(default.nodes).max(1),
    };
    let written = write_cluster(&shape, &args.out)?;
    writeln!(
        out,
        "wrote {} pods, {} namespaces, {} nodes, {} policies to {}",
        written.pods,
        written.namespaces,
        written.nodes,
        written.policies,
        args.out.display()
    )?;
    Ok(())
}

/// Writes the cluster's YAML files into `dir`.
pub fn write_cluster(shape: &Shape, dir: &Path) -> io::Result<Written> {
    fs::create_dir_all(dir)?;
    let mut written = Written {
        namespaces: shape.namespaces + 1,
        nodes: shape.nodes,
        ..Written::default()
    };
    write_file(&dir.join("namespaces.yaml"), |w| namespaces(shape, w))?;
    write_file(&dir.join("nodes.yaml"), |w| nodes(shape, w))?;
    write_file(&dir.join("pods.yaml"), |w| {
        written.pods = pods(shape, w)?;
        Ok(())
    })?;
    write_file(&dir.join("networkpolicies.yaml"), |w| {
        written.policies += network_policies(shape, w)?;
        Ok(())
    })?;
    write_file(&dir.join("admin.yaml"), |w| {
        written.policies += admin_policies(w)?;
        Ok(())
    })?;
    Ok(written)
}

/// Writes through a temporary file and renames it into place, so a reader never sees half a file.
fn write_file(path: &Path, body: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
    let partial = path.with_extension("yaml.partial");
    let mut w = BufWriter::new(fs::File::create(&partial)?);
    body(&mut w)?;
    w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    fs::rename(partial, path)
}

fn namespaces(shape: &Shape, w: &mut dyn Write) -> io::Result<()> {
    let names = (0..shape.namespaces).map(|ns| {
        let env = if ns % 3 == 0 { "prod" } else { "dev" };
        (format!("ns-{ns}"), format!("team-{}", ns % 20), env)
    });
    let monitoring = ("monitoring".to_string(), "team-ops".to_string(), "prod");
    for (name, team, env) in names.chain([monitoring]) {
        writeln!(
            w,
            "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n  labels:\n    \
             kubernetes.io/metadata.name: {name}\n    team: {team}\n    env: {env}"
        )?;
    }
    Ok(())
}

fn nodes(shape: &Shape, w: &mut dyn Write) -> io::Result<()> {
    for n in 0..shape.nodes {
        writeln!(
            w,
            "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: node-{n}\n  labels:\n    \
             topology.kubernetes.io/zone: zone-{}\nstatus:\n  addresses:\n  - type: InternalIP\n    \
             address: 10.0.{}.{}",
            n % 3,
            (n + 1) / 256,
            (n + 1) % 256
        )?;
    }
    Ok(())
}

/// A pod's address: 10.128.0.1 upwards, 65,536 per /16.
fn pod_ip(i: usize) -> String {
    let n = i + 1;
    format!("10.{}.{}.{}", 128 + n / 65_536, (n / 256) % 256, n % 256)
}

/// Pods as one `kind: List`, the form `kubectl get pods -A -o yaml` prints. Pod `i` goes to
/// namespace `i % namespaces`, to app `(i / namespaces) % apps` there, and to node `i % nodes`.
/// Two monitoring pods scrape the cluster.
fn pods(shape: &Shape, w: &mut dyn Write) -> io::Result<usize> {
    writeln!(w, "apiVersion: v1\nkind: List\nitems:")?;
    let mut item = String::new();
    for i in 0..shape.pods {
        let ns = i % shape.namespaces;
        let app = (i / shape.namespaces) % Shape::apps(ns);
        let tier = TIERS[app];
        item.clear();
        let _ = write!(
            item,
            "- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: app-{app}-{i}\n    namespace: ns-{ns}\n    \
             labels:\n      app: app-{app}\n      tier: {tier}\n      pod-template-hash: h{ns}x{app}\n  \
             spec:\n    nodeName: node-{}\n    containers:\n    - name: main\n      ports:\n      \
             - name: http\n        containerPort: 8080\n      - name: metrics\n        containerPort: 9090\n",
            i % shape.nodes
        );
        if tier == "db" {
            item.push_str("      - name: db\n        containerPort: 5432\n");
        }
        let _ = writeln!(
            item,
            "  status:\n    phase: Running\n    podIP: {ip}\n    podIPs:\n    - ip: {ip}",
            ip = pod_ip(i)
        );
        w.write_all(item.as_bytes())?;
    }
    for m in 0..2 {
        writeln!(
            w,
            "- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: prometheus-{m}\n    namespace: monitoring\n    \
             labels:\n      app: prometheus\n  spec:\n    nodeName: node-{}\n    containers:\n    - name: main\n  \
             status:\n    phase: Running\n    podIP: 10.127.0.{}",
            m % shape.nodes,
            m + 1
        )?;
    }
    Ok(shape.pods + 2)
}

/// Per namespace: default deny, one allow per app, a monitoring allow, and for every third
/// namespace an egress limit. Returns the number written.
fn network_policies(shape: &Shape, w: &mut dyn Write) -> io::Result<usize> {
    let mut count = 0;
    for ns in 0..shape.namespaces {
        let head = |name: &str| {
            format!("---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: {name}\n  namespace: ns-{ns}\nspec:\n")
        };
        write!(
            w,
            "{}  podSelector: {{}}\n  policyTypes: [Ingress]\n",
            head("default-deny")
        )?;
        for (app, tier) in TIERS.iter().enumerate().take(Shape::apps(ns)) {
            // The front app takes traffic from every namespace; each further app only from the
            // app in front of it, on its named port.
            let (from, port) = match app {
                0 => ("  - namespaceSelector: {}\n".to_string(), "http"),
                _ => (
                    format!(
                        "  - podSelector:\n        matchLabels:\n          app: app-{}\n",
                        app - 1
                    ),
                    if *tier == "db" { "db" } else { "http" },
                ),
            };
            write!(
                w,
                "{}  podSelector:\n    matchLabels:\n      app: app-{app}\n  ingress:\n  - from:\n  {from}    ports:\n    - port: {port}\n",
                head(&format!("allow-app-{app}"))
            )?;
            count += 1;
        }
        write!(
            w,
            "{}  podSelector: {{}}\n  ingress:\n  - from:\n    - namespaceSelector:\n        matchLabels:\n          \
             kubernetes.io/metadata.name: monitoring\n      podSelector:\n        matchLabels:\n          app: prometheus\n    \
             ports:\n    - port: metrics\n",
            head("allow-monitoring")
        )?;
        count += 2;
        if ns % 3 == 0 {
            write!(
                w,
                "{}  podSelector:\n    matchLabels:\n      app: app-0\n  policyTypes: [Egress]\n  egress:\n  - to:\n    \
                 - ipBlock:\n        cidr: 192.168.0.0/16\n        except: [192.168.1.0/24]\n    ports:\n    - port: 443\n  \
                 - to:\n    - podSelector: {{}}\n  - to:\n    - namespaceSelector:\n        matchLabels:\n          \
                 kubernetes.io/metadata.name: kube-system\n    ports:\n    - port: 53\n      protocol: UDP\n",
                head("limit-egress")
            )?;
            count += 1;
        }
    }
    Ok(count)
}

/// Eight AdminNetworkPolicies and the BaselineAdminNetworkPolicy.
fn admin_policies(w: &mut dyn Write) -> io::Result<usize> {
    let anp = |name: &str, priority: u32, subject: &str, rules: &str| {
        format!(
            "---\napiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\nmetadata:\n  name: {name}\nspec:\n  \
             priority: {priority}\n  subject:\n{subject}{rules}"
        )
    };
    let all_namespaces = "    namespaces: {}\n";
    let mut text = String::new();
    text += &anp(
        "allow-monitoring",
        5,
        all_namespaces,
        "  ingress:\n  - name: scrape\n    action: Allow\n    from:\n    - namespaces:\n        matchLabels:\n          \
         kubernetes.io/metadata.name: monitoring\n    ports:\n    - portNumber:\n        protocol: TCP\n        port: 9090\n",
    );
    text += &anp(
        "deny-dev-to-prod",
        10,
        "    namespaces:\n      matchLabels:\n        env: prod\n",
        "  ingress:\n  - name: from-dev\n    action: Deny\n    from:\n    - namespaces:\n        matchLabels:\n          env: dev\n",
    );
    text += &anp(
        "pass-kube-system",
        15,
        all_namespaces,
        "  egress:\n  - name: dns\n    action: Pass\n    to:\n    - namespaces:\n        matchLabels:\n          \
         kubernetes.io/metadata.name: kube-system\n",
    );
    text += &anp(
        "deny-metadata-service",
        20,
        all_namespaces,
        "  egress:\n  - name: imds\n    action: Deny\n    to:\n    - networks: [169.254.169.254/32]\n",
    );
    for team in 0..4 {
        text += &anp(
            &format!("pass-team-{team}"),
            30 + team,
            &format!("    namespaces:\n      matchLabels:\n        team: team-{team}\n"),
            &format!(
                "  ingress:\n  - name: same-team\n    action: Pass\n    from:\n    - namespaces:\n        matchLabels:\n          \
                 team: team-{team}\n"
            ),
        );
    }
    text += "---\napiVersion: policy.networking.k8s.io/v1alpha1\nkind: BaselineAdminNetworkPolicy\nmetadata:\n  name: default\n\
             spec:\n  subject:\n    namespaces: {}\n  ingress:\n  - name: deny-other-namespaces\n    action: Deny\n    from:\n    \
             - namespaces: {}\n";
    w.write_all(text.as_bytes())?;
    Ok(9)
}

#[cfg(test)]
mod tests {
    use super::*;
    use netpol_api::{parse_yaml, Object};

    fn objects(dir: &Path) -> Vec<Object> {
        let mut out = Vec::new();
        for entry in fs::read_dir(dir).unwrap() {
            let text = fs::read_to_string(entry.unwrap().path()).unwrap();
            for object in parse_yaml(&text).unwrap() {
                out.push(object.unwrap());
            }
        }
        out
    }

    #[test]
    fn every_object_written_is_valid_and_counted() {
        let dir = std::env::temp_dir().join(format!("netpol-synth-{}", std::process::id()));
        let shape = Shape::for_pods(400);
        let written = write_cluster(&shape, &dir).unwrap();
        let objects = objects(&dir);
        let count = |kind: &str| objects.iter().filter(|o| o.kind() == kind).count();
        assert_eq!(count("Pod"), written.pods);
        assert_eq!(count("Namespace"), written.namespaces);
        assert_eq!(count("Node"), written.nodes);
        let policies = count("NetworkPolicy")
            + count("AdminNetworkPolicy")
            + count("BaselineAdminNetworkPolicy");
        assert_eq!(policies, written.policies);
        assert_eq!(
            (written.pods, written.namespaces, written.nodes),
            (402, 21, 4)
        );
        let mut entries = 0;
        for object in &objects {
            let translation = netpol_api::translate(object);
            assert!(translation.errors.is_empty(), "{:?}", translation.errors);
            assert!(
                translation.warnings.is_empty(),
                "{:?}",
                translation.warnings
            );
            entries += translation.entries.len();
        }
        assert!(entries >= written.policies, "every policy yields entries");
        fs::remove_dir_all(dir).unwrap();
    }
}
