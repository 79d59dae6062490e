//! Pods that workloads will run, so that a repository's manifests (Deployments and the like,
//! what `helm template` prints) can be checked before anything runs. Each workload gives one
//! representative pod: its template's labels and container ports (named ports included), in
//! the workload's namespace, named as the workload. Its address and node are given by a
//! [`Placement`], the same way by every command (the agent's files and the authoring tools),
//! and shown as assigned wherever the pod is named.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use ipnet::IpNet;
use serde_json::{json, Map, Value};

use crate::Pod;

/// The kinds whose pod template gives a pod, and where the template is.
const WORKLOAD_KINDS: [(&str, &[&str]); 6] = [
    ("Deployment", &["spec", "template"]),
    ("StatefulSet", &["spec", "template"]),
    ("DaemonSet", &["spec", "template"]),
    ("ReplicaSet", &["spec", "template"]),
    ("Job", &["spec", "template"]),
    ("CronJob", &["spec", "jobTemplate", "spec", "template"]),
];

/// Where assigned pod addresses come from unless `--pod-cidr` says: the pod network `kubeadm`
/// and flannel use by default.
pub const DEFAULT_POD_CIDR: &str = "10.244.0.0/16";

/// The annotation marking a pod read from a workload's template ([`Object::read`] of a workload
/// kind): `KIND/NAME` of the workload. Such a pod has no address and no node until a
/// [`Placement`] gives them.
///
/// [`Object::read`]: crate::Object::read
pub const TEMPLATE_ANNOTATION: &str = "netpol.io/template-of";

/// Where the pods of workload templates go: an address of the pod network and a node. Both are
/// chosen from the workload's namespace and name (a stable hash), so that a workload keeps its
/// address and node whatever else the input holds or in which order; an address already taken
/// moves to the next free one, in the order templates are placed (the input's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// `--pod-cidr`: where addresses come from.
    pub pod_cidr: IpNet,
    /// `--assign-nodes`: the nodes template pods are spread over (by the same hash); none leaves
    /// the choice to the command (the agent: its own node; the tools: the input's nodes).
    pub nodes: Vec<String>,
    /// Addresses given so far, and those the caller said are taken.
    taken: BTreeSet<IpAddr>,
}

impl Default for Placement {
    fn default() -> Self {
        Placement::new(
            DEFAULT_POD_CIDR.parse().expect("a valid prefix literal"),
            Vec::new(),
        )
    }
}

impl Placement {
    /// Places in `pod_cidr`, whose first host is left to the gateway (a bridge CNI's, where the
    /// node's probes come from), on `nodes`.
    pub fn new(pod_cidr: IpNet, nodes: Vec<String>) -> Placement {
        let taken = pod_cidr.hosts().next().into_iter().collect();
        Placement {
            pod_cidr,
            nodes,
            taken,
        }
    }

    /// Reserves `address` (a pod's or a node's): it is never given to a template pod.
    pub fn reserve(&mut self, address: IpAddr) {
        self.taken.insert(address);
    }

    /// The address for the template pod of `namespace`/`name`: the pool's host at the name's
    /// hash (among its first [`PLACEMENT_WINDOW`] hosts), or the next free one after it. None
    /// when every host of that window is taken.
    pub fn address(&mut self, namespace: &str, name: &str) -> Option<IpAddr> {
        let window = self.pod_cidr.hosts().take(PLACEMENT_WINDOW).count();
        if window == 0 {
            return None;
        }
        let start = (stable_hash(namespace, name) % window as u64) as usize;
        let free = self
            .pod_cidr
            .hosts()
            .skip(start)
            .take(window - start)
            .chain(self.pod_cidr.hosts().take(start))
            .find(|a| !self.taken.contains(a))?;
        self.taken.insert(free);
        Some(free)
    }

    /// The node of `nodes` (sorted) for the template pod of `namespace`/`name`, by the same hash.
    pub fn node_among<'a>(nodes: &'a [String], namespace: &str, name: &str) -> Option<&'a str> {
        if nodes.is_empty() {
            return None;
        }
        let index = (stable_hash(namespace, name) % nodes.len() as u64) as usize;
        Some(nodes[index].as_str())
    }

    /// The node `--assign-nodes` gives the template pod of `namespace`/`name`, if any was named.
    pub fn node(&self, namespace: &str, name: &str) -> Option<&str> {
        Placement::node_among(&self.nodes, namespace, name)
    }
}

/// How many of the pod network's first hosts template pods are placed among (a /16's).
pub const PLACEMENT_WINDOW: usize = 65_534;

/// FNV-1a of `namespace/name`: the same in every build and on every platform, unlike std's
/// hasher, so that the agent and the tools place a workload alike.
fn stable_hash(namespace: &str, name: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in namespace.bytes().chain([b'/']).chain(name.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The pod `value` (a template pod, [`TemplatePod::pod`]) given `address` and, if any, `node`:
/// running, as the workload's pods will be.
pub fn placed_pod(mut value: Value, address: IpAddr, node: Option<&str>) -> Value {
    value["status"] = json!({"phase": "Running", "podIP": address.to_string()});
    if let Some(node) = node {
        value["spec"]["nodeName"] = json!(node);
    }
    value
}

/// Whether `kind` is a workload whose template gives a pod.
pub fn is_workload_kind(kind: &str) -> bool {
    WORKLOAD_KINDS.iter().any(|(k, _)| *k == kind)
}

/// The workload a pod stands for, or belongs to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Owner {
    /// `Deployment`, `StatefulSet`, ...
    pub kind: String,
    pub name: String,
}

/// The pod a workload's template describes, not yet addressed.
#[derive(Debug)]
pub struct TemplatePod {
    pub owner: Owner,
    pub namespace: String,
    /// The labels the workload's pods carry; a running pod with all of them is one of its pods.
    pub labels: Map<String, Value>,
    /// A Pod object (without status), read like any pod once it has an address.
    pub pod: Value,
    /// Where the template is in the workload, e.g. `spec.template`, for messages.
    pub template_path: String,
}

/// The pod of a workload object, or why there is none (a message naming the field).
pub fn template_pod(value: &Value) -> Result<TemplatePod, (String, String)> {
    let kind = value["kind"].as_str().unwrap_or_default();
    let (_, path) = WORKLOAD_KINDS
        .iter()
        .find(|(k, _)| *k == kind)
        .ok_or_else(|| {
            (
                "kind".to_owned(),
                format!("{kind:?} is not a workload kind"),
            )
        })?;
    let name = value["metadata"]["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ("metadata.name".to_owned(), "required".to_owned()))?;
    let namespace = value["metadata"]["namespace"]
        .as_str()
        .unwrap_or(crate::DEFAULT_NAMESPACE);
    let template_path = path.join(".");
    let template = path
        .iter()
        .try_fold(value, |v, key| v.get(key))
        .filter(|t| t.is_object())
        .ok_or_else(|| {
            (
                template_path.clone(),
                "required: the pod template".to_owned(),
            )
        })?;
    let labels = match &template["metadata"]["labels"] {
        Value::Object(labels) => labels.clone(),
        Value::Null => Map::new(),
        _ => {
            return Err((
                format!("{template_path}.metadata.labels"),
                "must be a map of strings".to_owned(),
            ))
        }
    };
    let spec = &template["spec"];
    let containers: Vec<Value> = spec["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| json!({"name": c["name"], "ports": c["ports"]}))
        .map(drop_nulls)
        .collect();
    let pod = drop_nulls(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"containers": containers, "hostNetwork": spec["hostNetwork"]},
    }));
    Ok(TemplatePod {
        owner: Owner {
            kind: kind.to_owned(),
            name: name.to_owned(),
        },
        namespace: namespace.to_owned(),
        labels,
        pod,
        template_path,
    })
}

/// The workload a pod was read from ([`TEMPLATE_ANNOTATION`]), if it was.
pub fn template_owner(pod: &Pod) -> Option<Owner> {
    let text = pod
        .metadata
        .annotations
        .as_ref()?
        .get(TEMPLATE_ANNOTATION)?;
    let (kind, name) = text.split_once('/')?;
    Some(Owner {
        kind: kind.to_owned(),
        name: name.to_owned(),
    })
}

/// `value` without null fields (a template leaves out what it does not set).
fn drop_nulls(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, drop_nulls(v)))
                .collect(),
        ),
        other => other,
    }
}

/// The workload a running pod belongs to, from its owner reference: a ReplicaSet's pods
/// belong to its Deployment (the ReplicaSet's name less the `pod-template-hash` suffix).
pub fn owner_of(value: &Value) -> Option<Owner> {
    let owner = value["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|o| o["controller"].as_bool() != Some(false))?;
    let kind = owner["kind"].as_str()?;
    let name = owner["name"].as_str()?;
    let hash = value["metadata"]["labels"]["pod-template-hash"].as_str();
    let deployment = hash.and_then(|h| name.strip_suffix(&format!("-{h}")));
    Some(match (kind, deployment) {
        ("ReplicaSet", Some(deployment)) => Owner {
            kind: "Deployment".into(),
            name: deployment.into(),
        },
        _ => Owner {
            kind: kind.into(),
            name: name.into(),
        },
    })
}

/// Whether a running pod with `labels` is one of the template's pods.
pub fn runs(template: &TemplatePod, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
    namespace == template.namespace
        && template
            .labels
            .iter()
            .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sourced(value: Value) -> Value {
        value
    }

    #[test]
    fn a_deployment_and_a_cronjob_give_their_template_pods() {
        let deployment = sourced(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
                "metadata": {"labels": {"app": "web", "tier": "front"}},
                "spec": {"containers": [{"name": "main", "image": "web:1",
                          "ports": [{"name": "http", "containerPort": 8080}]}]}}}
        }));
        let pod = template_pod(&deployment).unwrap();
        assert_eq!(pod.owner.kind, "Deployment");
        assert_eq!(pod.namespace, "shop");
        assert_eq!(pod.template_path, "spec.template");
        assert_eq!(
            pod.pod,
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "web", "namespace": "shop",
                                "labels": {"app": "web", "tier": "front"}},
                   "spec": {"containers": [{"name": "main",
                            "ports": [{"name": "http", "containerPort": 8080}]}]}})
        );
        let labels = BTreeMap::from([
            ("app".to_string(), "web".to_string()),
            ("tier".to_string(), "front".to_string()),
            ("pod-template-hash".to_string(), "7d9f".to_string()),
        ]);
        assert!(runs(&pod, "shop", &labels));
        assert!(!runs(&pod, "other", &labels));

        let cron = sourced(json!({
            "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "backup"},
            "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}}}
        }));
        let pod = template_pod(&cron).unwrap();
        assert_eq!(pod.namespace, "default");
        assert_eq!(pod.template_path, "spec.jobTemplate.spec.template");
        let broken = sourced(json!({"kind": "Job", "metadata": {"name": "j"}, "spec": {}}));
        assert_eq!(
            template_pod(&broken).err().unwrap(),
            (
                "spec.template".to_string(),
                "required: the pod template".to_string()
            )
        );
    }

    #[test]
    fn placement_is_stable_moves_past_taken_addresses_and_leaves_the_gateway() {
        let pool: IpNet = "10.9.0.0/24".parse().unwrap();
        let mut alone = Placement::new(pool, Vec::new());
        let web = alone.address("shop", "web").unwrap();
        // Others placed first, in any order, do not move it (unless they hash to it).
        let mut crowded = Placement::new(pool, Vec::new());
        for i in 0..50 {
            crowded.address("shop", &format!("other-{i}"));
        }
        let web_was_free = !crowded.taken.contains(&web);
        let again = crowded.address("shop", "web").unwrap();
        assert_eq!(again == web, web_was_free, "{web} {again}");
        // Taken: the next free host.
        let mut taken = Placement::new(pool, Vec::new());
        taken.reserve(web);
        let moved = taken.address("shop", "web").unwrap();
        assert_ne!(moved, web);
        assert!(pool.contains(&moved));
        // Every host but the gateway is given, then none.
        let mut full = Placement::new(pool, Vec::new());
        let given: BTreeSet<IpAddr> = (0..253)
            .map(|i| full.address("ns", &format!("w{i}")).unwrap())
            .collect();
        assert_eq!(given.len(), 253);
        assert!(!given.contains(&"10.9.0.1".parse::<IpAddr>().unwrap()));
        assert_eq!(full.address("ns", "one-too-many"), None);
        // Nodes by the same hash, the same for the same name.
        let nodes = vec!["a".to_string(), "b".to_string(), "c".to_string()];
        let placed = Placement::new(pool, nodes.clone());
        assert_eq!(
            placed.node("shop", "web"),
            Placement::node_among(&nodes, "shop", "web")
        );
        assert!(nodes
            .iter()
            .any(|n| Some(n.as_str()) == placed.node("shop", "web")));
        assert_eq!(Placement::new(pool, Vec::new()).node("shop", "web"), None);
    }

    #[test]
    fn a_workload_is_read_as_its_pod_marked_with_its_owner() {
        let deployment = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "main", "image": "web:1"}]}}}
        });
        let read = crate::Object::read(deployment).unwrap();
        let crate::Object::Pod(pod) = read.object else {
            panic!("a pod")
        };
        assert_eq!(pod.metadata.name.as_deref(), Some("web"));
        assert_eq!(
            template_owner(&pod),
            Some(Owner {
                kind: "Deployment".into(),
                name: "web".into()
            })
        );
        assert_eq!(pod.status, None, "no address until placed");
        let broken = json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "x"}, "spec": {}});
        let error = crate::Object::read(broken).unwrap_err();
        assert_eq!(error.object.to_string(), "Job x/j");
        assert_eq!(error.field, "spec.template");
    }

    #[test]
    fn a_replicaset_pod_belongs_to_its_deployment() {
        let pod = json!({"metadata": {"name": "web-7d9f-x2k", "labels": {"pod-template-hash": "7d9f"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web-7d9f", "controller": true}]}});
        assert_eq!(
            owner_of(&pod),
            Some(Owner {
                kind: "Deployment".into(),
                name: "web".into()
            })
        );
        let stateful =
            json!({"metadata": {"ownerReferences": [{"kind": "StatefulSet", "name": "db"}]}});
        assert_eq!(owner_of(&stateful).unwrap().name, "db");
        assert_eq!(owner_of(&json!({"metadata": {}})), None);
    }
}
