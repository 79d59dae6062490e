//! `netpol-dev cidr`: CIDR-heavy policies of every kind that can hold addresses, for the memory
//! benchmarks of issue 33 and for trying the agent's budgets.
//!
//! Each policy names `--prefixes` distinct `/32`s (every policy its own, from 64.0.0.0 up, far
//! from the synthetic cluster's pod addresses in 10.128.0.0/9) in one rule. Its subject selects
//! either nothing (a label no pod carries: the policy costs a node its parsed form only) or the
//! pods of one namespace (`ns-1`, whose pods all run on `node-1` in a synthetic cluster of the
//! usual proportions). The file is one compact JSON `kind: List`, so its size is the objects' own.

use std::fs;
use std::io::{self, BufWriter, Write};
use std::net::Ipv4Addr;
use std::path::PathBuf;

use serde_json::{json, Value};

/// The kinds of policy that can hold addresses, and the field each uses here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// NetworkPolicy `ipBlock` peers, one per prefix.
    NetworkPolicy,
    /// AdminNetworkPolicy egress `networks`.
    Admin,
    /// BaselineAdminNetworkPolicy egress `networks` (there is one, named `default`).
    Baseline,
    /// ClusterNetworkPolicy (policy.networking.k8s.io/v1alpha2) egress `networks`, tier Admin.
    ClusterNetworkPolicy,
    /// CiliumNetworkPolicy egress `toCIDR` (ingress: `fromCIDR`).
    Cilium,
    /// CiliumNetworkPolicy egress `toCIDRSet` (ingress: `fromCIDRSet`), one entry per prefix.
    CiliumCidrSet,
    /// CiliumClusterwideNetworkPolicy egress `toCIDR`.
    CiliumClusterwide,
}

/// Which pods the policies select.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Selects {
    /// No pod at all (a label no pod carries).
    None,
    /// Every pod of namespace `ns-1` (all on `node-1` in a synthetic cluster).
    Local,
}

/// Which way the rule points.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Way {
    Egress,
    /// Only the namespaced NetworkPolicy and Cilium kinds have address peers for ingress.
    Ingress,
}

#[derive(Clone, Debug, clap::Args)]
pub struct Args {
    #[arg(long, value_enum, default_value_t = Kind::Cilium)]
    pub kind: Kind,
    /// Policies to write (a BaselineAdminNetworkPolicy is a singleton: at most 1).
    #[arg(long, default_value_t = 5)]
    pub count: usize,
    /// Distinct /32 prefixes each policy names.
    #[arg(long, default_value_t = 50_000)]
    pub prefixes: u32,
    #[arg(long, value_enum, default_value_t = Selects::None)]
    pub selects: Selects,
    #[arg(long, value_enum, default_value_t = Way::Egress)]
    pub direction: Way,
    /// The namespace of namespaced kinds' objects.
    #[arg(long, default_value = "ns-0")]
    pub namespace: String,
    /// The file to write (JSON).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

/// The policies as `Args` describes them, one at a time.
pub fn policies(args: &Args) -> anyhow::Result<impl Iterator<Item = Value> + '_> {
    if args.kind == Kind::Baseline && args.count > 1 {
        anyhow::bail!("there is one BaselineAdminNetworkPolicy (named default): --count 1");
    }
    let namespaced = matches!(
        args.kind,
        Kind::NetworkPolicy | Kind::Cilium | Kind::CiliumCidrSet
    );
    if args.direction == Way::Ingress && !namespaced && args.kind != Kind::CiliumClusterwide {
        anyhow::bail!("{:?} has address peers for egress only", args.kind);
    }
    let admin = matches!(
        args.kind,
        Kind::Admin | Kind::Baseline | Kind::ClusterNetworkPolicy
    );
    if admin && args.prefixes > admin_max_prefixes(args.kind) {
        anyhow::bail!(
            "{:?} holds at most {} prefixes",
            args.kind,
            admin_max_prefixes(args.kind)
        );
    }
    Ok((0..args.count).map(move |k| policy(args, k)))
}

/// The `/32`s of policy `k`, as strings.
fn prefixes(args: &Args, k: usize) -> impl Iterator<Item = String> {
    let first = 0x4000_0000u32 + (k as u32) * args.prefixes;
    (first..first + args.prefixes).map(|a| format!("{}/32", Ipv4Addr::from(a)))
}

fn policy(args: &Args, k: usize) -> Value {
    let name = format!("cidr-heavy-{k}");
    let nets: Vec<String> = prefixes(args, k).collect();
    let ingress = args.direction == Way::Ingress;
    // Pods: matchLabels in the objects' namespace; namespaces: the namespace's name label.
    let pods = match args.selects {
        Selects::None => json!({"matchLabels": {"netpol.example/selected": "never"}}),
        Selects::Local => json!({}),
    };
    let namespace_name = match args.selects {
        Selects::None => "no-such-namespace",
        Selects::Local => "ns-1",
    };
    let namespace = match args.selects {
        Selects::None => args.namespace.as_str(),
        Selects::Local => "ns-1",
    };
    let admin_subject = json!({"namespaces": {"matchLabels": {
        "kubernetes.io/metadata.name": namespace_name}}});
    let meta_namespaced = json!({"name": name, "namespace": namespace});
    let meta_cluster = json!({"name": name});
    match args.kind {
        Kind::NetworkPolicy => {
            let peers: Vec<Value> = nets
                .into_iter()
                .map(|cidr| json!({"ipBlock": {"cidr": cidr}}))
                .collect();
            let (types, rules) = if ingress {
                ("Ingress", json!({"ingress": [{"from": peers}]}))
            } else {
                ("Egress", json!({"egress": [{"to": peers}]}))
            };
            let mut spec = json!({"podSelector": pods, "policyTypes": [types]});
            merge(&mut spec, rules);
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                   "metadata": meta_namespaced, "spec": spec})
        }
        Kind::Admin => json!({
            "apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "AdminNetworkPolicy",
            "metadata": meta_cluster,
            "spec": {"priority": 100 + k % 900, "subject": admin_subject,
                     "egress": admin_rules(nets, "Allow", ADMIN_PEERS_PER_RULE)}}),
        Kind::Baseline => json!({
            "apiVersion": "policy.networking.k8s.io/v1alpha1",
            "kind": "BaselineAdminNetworkPolicy",
            "metadata": {"name": "default"},
            "spec": {"subject": admin_subject,
                     "egress": admin_rules(nets, "Allow", ADMIN_PEERS_PER_RULE)}}),
        Kind::ClusterNetworkPolicy => json!({
            "apiVersion": "policy.networking.k8s.io/v1alpha2", "kind": "ClusterNetworkPolicy",
            "metadata": meta_cluster,
            "spec": {"tier": "Admin", "priority": 100 + k % 900, "subject": admin_subject,
                     "egress": admin_rules(nets, "Accept", CLUSTER_PEERS_PER_RULE)}}),
        Kind::Cilium | Kind::CiliumCidrSet | Kind::CiliumClusterwide => {
            let set = args.kind == Kind::CiliumCidrSet;
            let field = match (ingress, set) {
                (false, false) => "toCIDR",
                (false, true) => "toCIDRSet",
                (true, false) => "fromCIDR",
                (true, true) => "fromCIDRSet",
            };
            let list: Vec<Value> = if set {
                nets.into_iter().map(|cidr| json!({"cidr": cidr})).collect()
            } else {
                nets.into_iter().map(Value::String).collect()
            };
            let rule = json!({ field: list });
            let way = if ingress { "ingress" } else { "egress" };
            let selector = match (args.kind, args.selects) {
                (Kind::CiliumClusterwide, Selects::Local) => json!({"matchLabels": {
                    "k8s:io.kubernetes.pod.namespace": "ns-1"}}),
                _ => pods,
            };
            let (kind, metadata) = if args.kind == Kind::CiliumClusterwide {
                ("CiliumClusterwideNetworkPolicy", meta_cluster)
            } else {
                ("CiliumNetworkPolicy", meta_namespaced)
            };
            json!({"apiVersion": "cilium.io/v2", "kind": kind, "metadata": metadata,
                   "spec": {"endpointSelector": selector, way: [rule]}})
        }
    }
}

/// The admin kinds' schemas allow 25 `networks` a peer, 100 peers a rule and 100 rules a direction
/// (ClusterNetworkPolicy: 25 and 25): the prefixes are spread over as many rules as they need.
fn admin_rules(nets: Vec<String>, action: &str, peers_per_rule: usize) -> Vec<Value> {
    let peers: Vec<Value> = nets
        .chunks(ADMIN_NETWORKS_PER_PEER)
        .map(|chunk| json!({"networks": chunk}))
        .collect();
    peers
        .chunks(peers_per_rule)
        .enumerate()
        .map(|(r, chunk)| json!({"name": format!("to-addresses-{r}"), "action": action, "to": chunk}))
        .collect()
}

const ADMIN_NETWORKS_PER_PEER: usize = 25;
const ADMIN_PEERS_PER_RULE: usize = 100;
const CLUSTER_PEERS_PER_RULE: usize = 25;
/// The most prefixes an egress of an admin kind holds.
fn admin_max_prefixes(kind: Kind) -> u32 {
    let (rules, peers) = match kind {
        Kind::ClusterNetworkPolicy => (25, CLUSTER_PEERS_PER_RULE),
        _ => (100, ADMIN_PEERS_PER_RULE),
    };
    (rules * peers * ADMIN_NETWORKS_PER_PEER) as u32
}

fn merge(into: &mut Value, from: Value) {
    if let (Value::Object(into), Value::Object(from)) = (into, from) {
        into.extend(from);
    }
}

/// Writes the policies as one compact JSON `kind: List`; returns how many and the bytes written.
pub fn write(args: &Args) -> anyhow::Result<(usize, u64)> {
    let mut out = BufWriter::new(fs::File::create(&args.out)?);
    out.write_all(br#"{"apiVersion":"v1","kind":"List","items":["#)?;
    let mut count = 0;
    for policy in policies(args)? {
        if count > 0 {
            out.write_all(b",")?;
        }
        serde_json::to_writer(&mut out, &policy)?;
        out.write_all(b"\n")?;
        count += 1;
    }
    out.write_all(b"]}\n")?;
    out.into_inner().map_err(io::IntoInnerError::into_error)?;
    Ok((count, fs::metadata(&args.out)?.len()))
}

/// Writes to `out` the policies a benchmark's `KIND:COUNT[:SELECTS]` names (`cilium:400`,
/// `network-policy:5:local`), with every other argument at its default; returns the bytes written.
pub fn write_spec(spec: &str, out: &std::path::Path) -> anyhow::Result<u64> {
    use clap::ValueEnum;
    let mut parts = spec.split(':');
    let value = |text: &str| anyhow::anyhow!("{spec}: {text} is not KIND:COUNT[:SELECTS]");
    let kind = parts.next().unwrap_or_default();
    let args = Args {
        kind: Kind::from_str(kind, true).map_err(|_| value(kind))?,
        count: parts.next().unwrap_or("1").parse()?,
        selects: match parts.next() {
            Some(selects) => Selects::from_str(selects, true).map_err(|_| value(selects))?,
            None => Selects::None,
        },
        prefixes: 50_000,
        direction: Way::Egress,
        namespace: "ns-0".into(),
        out: out.to_owned(),
    };
    Ok(write(&args)?.1)
}

pub fn run(args: &Args, out: &mut dyn Write) -> anyhow::Result<()> {
    let (count, bytes) = write(args)?;
    writeln!(
        out,
        "wrote {count} {:?} policies of {} prefixes each, {bytes} bytes, to {}",
        args.kind,
        args.prefixes,
        args.out.display()
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    fn args(kind: Kind, selects: Selects, direction: Way) -> Args {
        Args {
            kind,
            count: 1,
            prefixes: 2_600,
            selects,
            direction,
            namespace: "ns-0".into(),
            out: PathBuf::new(),
        }
    }

    #[test]
    fn every_kind_translates_to_entries_naming_each_prefix() {
        for kind in Kind::value_variants() {
            for selects in [Selects::None, Selects::Local] {
                for direction in [Way::Egress, Way::Ingress] {
                    let args = args(*kind, selects, direction);
                    let Ok(policies) = policies(&args) else {
                        continue;
                    };
                    for policy in policies {
                        // Read as the agent reads a file: the schema's limits are checked too.
                        let text = serde_json::to_string(&policy).unwrap();
                        let mut read = netpol_api::parse_yaml(&text).unwrap();
                        let object = read
                            .remove(0)
                            .unwrap_or_else(|e| panic!("{kind:?} {direction:?}: {e}"));
                        let translation = netpol_api::translate(&object);
                        assert!(translation.is_ok(), "{kind:?}: {:?}", translation.errors);
                        let prefixes: usize = translation
                            .entries
                            .iter()
                            .flat_map(|e| &e.peers)
                            .filter(|p| matches!(p, netpol_engine::Peer::Cidr(_)))
                            .count();
                        assert_eq!(prefixes, 2_600, "{kind:?} {selects:?} {direction:?}");
                    }
                }
            }
        }
    }
}
