//! Names a user types, looked up in a cluster: `ns/name` as a pod or a workload, a port by its
//! name (`TCP/http-api`), and, for a name that matches nothing, the names that come closest.

use std::collections::BTreeSet;

use netpol_engine::{NamedPort, Protocol};

use super::cluster_model::ClusterModel;
use super::expect::{Endpoint, PodRef};

/// How many suggestions a message lists at most.
const MAX_SUGGESTIONS: usize = 5;

impl ClusterModel {
    /// `ns/name` as the user means it: the pod of that name, else the first pod (by name) of the
    /// workload of that name in `ns`. An address stays as it is.
    pub fn resolve_endpoint(&self, endpoint: &Endpoint) -> Result<Endpoint, String> {
        let Endpoint::Pod(wanted) = endpoint else {
            return Ok(endpoint.clone());
        };
        if self.has_pod(wanted) {
            return Ok(endpoint.clone());
        }
        if let Some(first) = self.workload_pods(wanted).first() {
            return Ok(Endpoint::Pod((*first).clone()));
        }
        Err(self.unknown_pod(wanted))
    }

    /// The node `name` as an endpoint: its first address (a node's addresses are one party).
    pub fn node_endpoint(&self, name: &str) -> Result<Endpoint, String> {
        let known: Vec<&str> = self.nodes().map(|(node, _)| node).collect();
        match self.nodes().find(|(node, _)| *node == name) {
            Some((_, identities)) => identities
                .first()
                .map(|identity| Endpoint::Address(identity.prefix.addr()))
                .ok_or_else(|| format!("node {name} has no address (status.addresses)")),
            None if known.is_empty() => Err(format!("no node {name}: the input has no nodes")),
            None => Err(format!("no node {name} (nodes: {})", known.join(", "))),
        }
    }

    /// The pods of the workload `ns/name`, by name.
    pub fn workload_pods(&self, workload: &PodRef) -> Vec<&PodRef> {
        self.pods()
            .map(|(pod, _)| pod)
            .filter(|pod| {
                pod.namespace == workload.namespace
                    && self
                        .facts(pod)
                        .and_then(|f| f.owner.as_ref())
                        .is_some_and(|o| o.name == workload.name)
            })
            .collect()
    }

    /// The message for a pod that is not there, with the closest names that are.
    pub fn unknown_pod(&self, wanted: &PodRef) -> String {
        let known: BTreeSet<String> = self
            .pods()
            .flat_map(|(pod, _)| {
                let owner = self.facts(pod).and_then(|f| f.owner.as_ref());
                let workload = owner.map(|o| format!("{}/{}", pod.namespace, o.name));
                [Some(pod.to_string()), workload]
            })
            .flatten()
            .collect();
        let base = format!("no pod or workload {wanted} in {}", self.input_name());
        if known.is_empty() {
            return format!("{base}, which has no pods");
        }
        // Within the namespace typed, names are compared; across namespaces, whole names.
        let wanted_text = wanted.to_string();
        let score = |known: &str| match known.split_once('/') {
            Some((ns, name)) if ns == wanted.namespace => {
                strsim::normalized_damerau_levenshtein(&wanted.name, name)
            }
            _ => strsim::normalized_damerau_levenshtein(&wanted_text, known),
        };
        let mut close: Vec<(f64, &String)> = known
            .iter()
            .map(|k| (score(k), k))
            .filter(|(score, _)| *score >= 0.5)
            .collect();
        close.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
        let best = close.first().map_or(0.0, |c| c.0);
        close.retain(|c| c.0 >= best - 0.1);
        if !close.is_empty() {
            let names: Vec<&str> = close
                .iter()
                .take(MAX_SUGGESTIONS)
                .map(|(_, k)| k.as_str())
                .collect();
            return format!("{base}; did you mean {}?", names.join(", "));
        }
        let same_namespace: Vec<&str> = known
            .iter()
            .filter(|k| k.split('/').next() == Some(wanted.namespace.as_str()))
            .map(String::as_str)
            .collect();
        if same_namespace.is_empty() {
            let namespaces: BTreeSet<&str> =
                known.iter().filter_map(|k| k.split('/').next()).collect();
            let namespaces: Vec<&str> = namespaces.into_iter().collect();
            return format!(
                "{base}: namespace {} has no pods; these do: {}",
                wanted.namespace,
                namespaces.join(", ")
            );
        }
        format!(
            "{base}; {} has {}",
            wanted.namespace,
            listing(&same_namespace)
        )
    }

    /// The number of the port named `name` that the destination declares for `protocol`.
    pub fn named_port(
        &self,
        destination: &Endpoint,
        protocol: Protocol,
        name: &str,
    ) -> Result<u16, String> {
        let Endpoint::Pod(pod) = destination else {
            return Err(format!(
                "port `{name}` is a name; only a pod's container ports have names, and {destination} is an address"
            ));
        };
        let declared: Vec<NamedPort> = self
            .pod_info(pod)
            .map(|info| info.ports.clone())
            .unwrap_or_default();
        if let Some(port) = declared
            .iter()
            .find(|p| p.name == name && p.protocol == protocol)
        {
            return Ok(port.port);
        }
        let names: Vec<String> = declared
            .iter()
            .map(|p| format!("{}/{} ({})", p.protocol, p.name, p.port))
            .collect();
        Err(if names.is_empty() {
            format!("{pod} declares no named ports, so {protocol}/{name} names nothing")
        } else {
            format!(
                "{pod} declares no {protocol} port named `{name}`; it declares {}",
                names.join(", ")
            )
        })
    }
}

/// `a, b, c` or `a, b, c, d, e and 3 more`.
fn listing(names: &[&str]) -> String {
    let shown = names
        .iter()
        .take(MAX_SUGGESTIONS)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    match names.len().checked_sub(MAX_SUGGESTIONS) {
        Some(more) if more > 0 => format!("{shown} and {more} more"),
        _ => shown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::cluster_model::PodFacts;
    use netpol_api::workloads::Owner;
    use netpol_engine::{Identity, PodInfo};

    fn cluster() -> ClusterModel {
        let mut c = ClusterModel::new();
        c.set_input_name("the manifests");
        for (ns, name, ip, owner) in [
            ("shop", "web-7d9f-a", "10.1.0.1", Some("web")),
            ("shop", "web-7d9f-b", "10.1.0.2", Some("web")),
            ("shop", "db-0", "10.1.0.3", Some("db")),
            ("ops", "prober", "10.1.0.4", None),
        ] {
            let info = PodInfo {
                namespace: ns.into(),
                name: name.into(),
                labels: Default::default(),
                namespace_labels: Default::default(),
                node: None,
                ports: vec![NamedPort {
                    name: "http".into(),
                    protocol: Protocol::Tcp,
                    port: 8080,
                }],
            };
            let pod = PodRef {
                namespace: ns.into(),
                name: name.into(),
            };
            c.add_pod(pod.clone(), vec![Identity::pod(info, ip.parse().unwrap())]);
            let owner = owner.map(|o| Owner {
                kind: "Deployment".into(),
                name: o.into(),
            });
            c.set_facts(
                pod,
                PodFacts {
                    owner,
                    ..Default::default()
                },
            );
        }
        c
    }

    #[test]
    fn a_workload_name_stands_for_its_first_pod() {
        let c = cluster();
        let resolved = c.resolve_endpoint(&"shop/web".parse().unwrap()).unwrap();
        assert_eq!(resolved.to_string(), "shop/web-7d9f-a");
        let pod = c.resolve_endpoint(&"ops/prober".parse().unwrap()).unwrap();
        assert_eq!(pod.to_string(), "ops/prober");
    }

    #[test]
    fn unknown_names_get_the_closest_known_ones() {
        let c = cluster();
        let err = |s: &str| c.resolve_endpoint(&s.parse().unwrap()).unwrap_err();
        assert_eq!(
            err("shop/wbe"),
            "no pod or workload shop/wbe in the manifests; did you mean shop/web?"
        );
        assert_eq!(
            err("shop/zzz"),
            "no pod or workload shop/zzz in the manifests; shop has shop/db, shop/db-0, \
             shop/web, shop/web-7d9f-a, shop/web-7d9f-b"
        );
        assert_eq!(
            err("nope/zzz"),
            "no pod or workload nope/zzz in the manifests: namespace nope has no pods; these \
             do: ops, shop"
        );
    }

    #[test]
    fn named_ports_are_looked_up_on_the_destination() {
        let c = cluster();
        let web: Endpoint = "shop/web-7d9f-a".parse().unwrap();
        assert_eq!(c.named_port(&web, Protocol::Tcp, "http"), Ok(8080));
        assert_eq!(
            c.named_port(&web, Protocol::Tcp, "https").unwrap_err(),
            "shop/web-7d9f-a declares no TCP port named `https`; it declares TCP/http (8080)"
        );
        assert!(c
            .named_port(&"192.0.2.1".parse().unwrap(), Protocol::Tcp, "http")
            .is_err());
    }
}
