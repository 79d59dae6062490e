//! Which pods a synthetic cluster has and how they are labelled, by the controllers that make
//! them.
//!
//! Security identities follow label sets, so the controller decides what a pod costs: a
//! Deployment's replicas share their labels (one identity per app), a StatefulSet labels each pod
//! with its own name (`statefulset.kubernetes.io/pod-name`: one identity per pod), a Job with its
//! own uid (one identity per job), and a DaemonSet puts one pod on every node, all alike.

use serde_json::{json, Map, Value};

use super::Sizes;

/// The tier label of an app, by its index in its namespace.
pub(crate) const TIERS: [&str; 4] = ["web", "api", "db", "cache"];

/// Which controllers make the pods.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Workloads {
    /// Deployments only: replicas share their labels (`pod-template-hash`).
    #[default]
    Deployments,
    /// StatefulSets only: each pod carries its own name as a label.
    Statefulsets,
    /// DaemonSets only: one pod of each DaemonSet on every node.
    Daemonsets,
    /// Jobs of two pods each, labelled with the job's name and uid.
    Jobs,
    /// Four DaemonSets over every node, and apps made by Deployments (half), StatefulSets (a
    /// quarter) and Jobs.
    Mixed,
}

/// The controller of one app.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Controller {
    Deployment,
    StatefulSet,
    DaemonSet,
    Job,
}

/// Where pod `i` goes and what made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Placement {
    namespace: usize,
    app: usize,
    node: usize,
    controller: Controller,
    /// The pod's number within its app (its ordinal for a StatefulSet), or its DaemonSet's number.
    replica: usize,
}

/// Apps in namespace `ns`: one to four.
pub(crate) fn apps(ns: usize) -> usize {
    1 + (ns * 7 + ns / 4) % 4
}

/// DaemonSets of a mixed cluster: four, as a cluster runs a CNI, a log shipper, a metrics agent
/// and a DNS cache on every node, unless there are too few pods for them to be a tenth at most.
fn mixed_daemonsets(sizes: &Sizes) -> usize {
    (sizes.pods / (10 * sizes.nodes)).min(4)
}

fn place(workloads: Workloads, sizes: &Sizes, i: usize) -> Placement {
    let daemonset_pods = match workloads {
        Workloads::Daemonsets => sizes.pods,
        Workloads::Mixed => mixed_daemonsets(sizes) * sizes.nodes,
        _ => 0,
    };
    if i < daemonset_pods {
        let ds = i / sizes.nodes;
        let namespace = ds % sizes.namespaces;
        return Placement {
            namespace,
            app: (ds / sizes.namespaces) % apps(namespace),
            node: i % sizes.nodes,
            controller: Controller::DaemonSet,
            replica: ds,
        };
    }
    let j = i - daemonset_pods;
    let namespace = j % sizes.namespaces;
    let round = j / sizes.namespaces;
    let app = round % apps(namespace);
    let controller = match workloads {
        Workloads::Deployments | Workloads::Daemonsets => Controller::Deployment,
        Workloads::Statefulsets => Controller::StatefulSet,
        Workloads::Jobs => Controller::Job,
        Workloads::Mixed => match (namespace * 31 + app * 17) % 20 {
            0..=9 => Controller::Deployment,
            10..=14 => Controller::StatefulSet,
            15..=17 => Controller::Job,
            _ => Controller::Deployment,
        },
    };
    Placement {
        namespace,
        app,
        node: i % sizes.nodes,
        controller,
        replica: round / apps(namespace),
    }
}

/// A pod's address: 10.128.0.1 upwards, 65,536 per /16.
fn pod_ip(i: usize) -> String {
    let n = i + 1;
    format!("10.{}.{}.{}", 128 + n / 65_536, (n / 256) % 256, n % 256)
}

/// Ten hexadecimal digits standing for a hash kubernetes would compute (splitmix64 over the
/// parts, so that every digit varies).
fn hash(parts: &[usize]) -> String {
    format!("{:010x}", mix(parts) >> 24)
}

fn mix(parts: &[usize]) -> u64 {
    let mut h: u64 = 0x9e37_79b9_7f4a_7c15;
    for part in parts {
        let mut z = h ^ (*part as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h = z ^ (z >> 31);
    }
    h
}

/// Pod `i` of the cluster, as the API server returns it (lean: the fields netpol reads, the
/// controller's labels and an owner reference).
pub(crate) fn pod(workloads: Workloads, sizes: &Sizes, i: usize) -> Value {
    let at = place(workloads, sizes, i);
    let (ns, app) = (at.namespace, at.app);
    let tier = TIERS[app];
    let mut labels = Map::new();
    labels.insert("app".into(), format!("app-{app}").into());
    labels.insert("tier".into(), tier.into());
    let (name, owner_kind, owner_name) = match at.controller {
        Controller::Deployment => {
            labels.insert("pod-template-hash".into(), format!("h{ns}x{app}").into());
            (
                format!("app-{app}-{i}"),
                "ReplicaSet",
                format!("app-{app}-h{ns}x{app}"),
            )
        }
        Controller::StatefulSet => {
            let name = format!("app-{app}-{}", at.replica);
            let set = format!("app-{app}");
            labels.insert(
                "controller-revision-hash".into(),
                format!("{set}-{}", hash(&[ns, app])).into(),
            );
            labels.insert(
                "statefulset.kubernetes.io/pod-name".into(),
                name.clone().into(),
            );
            labels.insert(
                "apps.kubernetes.io/pod-index".into(),
                at.replica.to_string().into(),
            );
            (name, "StatefulSet", set)
        }
        Controller::DaemonSet => {
            let set = format!("app-{app}-ds{}", at.replica);
            labels.insert(
                "controller-revision-hash".into(),
                hash(&[ns, app, at.replica]).into(),
            );
            labels.insert("pod-template-generation".into(), "1".into());
            (format!("{set}-{}", &hash(&[i])[..5]), "DaemonSet", set)
        }
        Controller::Job => {
            // Two pods a job, as a Job with parallelism 2 runs them.
            let job = format!("app-{app}-job-{}", at.replica / 2);
            let uid = uid(&[ns, app, at.replica / 2]);
            for key in ["job-name", "batch.kubernetes.io/job-name"] {
                labels.insert(key.into(), job.clone().into());
            }
            for key in ["controller-uid", "batch.kubernetes.io/controller-uid"] {
                labels.insert(key.into(), uid.clone().into());
            }
            (format!("{job}-{}", &hash(&[i])[..5]), "Job", job)
        }
    };
    let mut ports = vec![
        json!({"containerPort": 8080, "name": "http", "protocol": "TCP"}),
        json!({"containerPort": 9090, "name": "metrics", "protocol": "TCP"}),
    ];
    if tier == "db" {
        ports.push(json!({"containerPort": 5432, "name": "db", "protocol": "TCP"}));
    }
    let ip = pod_ip(i);
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "labels": labels,
            "name": name,
            "namespace": format!("ns-{ns}"),
            "ownerReferences": [{
                "apiVersion": if owner_kind == "Job" { "batch/v1" } else { "apps/v1" },
                "controller": true,
                "kind": owner_kind,
                "name": owner_name,
                "uid": uid(&[ns, app, 7]),
            }],
            "uid": uid(&[i]),
        },
        "spec": {
            "containers": [{"image": format!("registry.example/{tier}:1.0"), "name": "main", "ports": ports}],
            "nodeName": format!("node-{}", at.node),
        },
        "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]},
    })
}

/// A uid in the API server's form.
fn uid(parts: &[usize]) -> String {
    let h = format!(
        "{:016x}{:016x}",
        mix(parts),
        mix(&[parts.len(), mix(parts) as usize])
    );
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The two monitoring pods that scrape the cluster.
pub(crate) fn prometheus(sizes: &Sizes, m: usize) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"labels": {"app": "prometheus"}, "name": format!("prometheus-{m}"), "namespace": "monitoring"},
        "spec": {"containers": [{"name": "main"}], "nodeName": format!("node-{}", m % sizes.nodes)},
        "status": {"phase": "Running", "podIP": format!("10.127.0.{}", m + 1)},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    fn sizes(pods: usize, nodes: usize) -> Sizes {
        Sizes {
            pods,
            namespaces: pods.div_ceil(20),
            nodes,
        }
    }

    fn label_sets(workloads: Workloads, sizes: &Sizes) -> BTreeSet<String> {
        (0..sizes.pods)
            .map(|i| {
                let pod = pod(workloads, sizes, i);
                format!(
                    "{}{}",
                    pod["metadata"]["namespace"], pod["metadata"]["labels"]
                )
            })
            .collect()
    }

    #[test]
    fn controllers_decide_how_many_label_sets_there_are() {
        let s = sizes(2_000, 20);
        let deployments = label_sets(Workloads::Deployments, &s).len();
        assert!(deployments <= 100 * 4, "one per app: {deployments}");
        assert_eq!(
            label_sets(Workloads::Statefulsets, &s).len(),
            2_000,
            "one per pod"
        );
        let jobs = label_sets(Workloads::Jobs, &s).len();
        assert!(
            (1_000..1_000 + 100 * 4).contains(&jobs),
            "one per job of two: {jobs}"
        );
        assert_eq!(
            label_sets(Workloads::Daemonsets, &s).len(),
            100,
            "one per DaemonSet"
        );
        let mixed = label_sets(Workloads::Mixed, &s).len();
        assert!(mixed > 2 * deployments && mixed < 1_500, "{mixed}");
    }

    #[test]
    fn a_daemonset_has_one_pod_on_every_node_and_names_are_unique() {
        for workloads in [
            Workloads::Daemonsets,
            Workloads::Mixed,
            Workloads::Statefulsets,
            Workloads::Jobs,
        ] {
            let s = sizes(2_000, 20);
            let mut per_set: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            let mut names = BTreeSet::new();
            for i in 0..s.pods {
                let pod = pod(workloads, &s, i);
                let meta = &pod["metadata"];
                assert!(
                    names.insert(format!("{}/{}", meta["namespace"], meta["name"])),
                    "{workloads:?}: {meta}"
                );
                if meta["ownerReferences"][0]["kind"] == "DaemonSet" {
                    per_set
                        .entry(
                            meta["ownerReferences"][0]["name"].to_string()
                                + &meta["namespace"].to_string(),
                        )
                        .or_default()
                        .insert(pod["spec"]["nodeName"].to_string());
                }
            }
            let expected = match workloads {
                Workloads::Daemonsets => 100,
                Workloads::Mixed => 4,
                _ => 0,
            };
            assert_eq!(per_set.len(), expected, "{workloads:?}");
            assert!(
                per_set.values().all(|nodes| nodes.len() == 20),
                "{workloads:?}"
            );
        }
    }
}
