//! Pods of workload templates (Deployments, StatefulSets, ...) in the files: read as pods without
//! address or node (`netpol_api::workloads`), they are given both here, as the authoring tools
//! give them (`Placement`), so that the agent and `netpol matrix` or `explain` read one folder
//! alike. A workload keeps the address it was given for as long as the agent runs.

use std::collections::HashMap;
use std::net::IpAddr;

use netpol_api::pod::{PodSpec, PodStatus};
use netpol_api::workloads::{template_owner, Placement};
use netpol_api::Object;
use netpol_indexes::Event;

use crate::indexes::SourceEvent;

/// Gives template pods their address and node.
#[derive(Debug, Default)]
pub struct TemplatePlacement {
    placement: Placement,
    /// Where template pods go when `placement` names no node: the agent's own node.
    default_node: Option<String>,
    /// The address each workload (namespace, name) was given.
    given: HashMap<(String, String), IpAddr>,
}

impl TemplatePlacement {
    pub fn new(placement: Placement, default_node: Option<String>) -> Self {
        TemplatePlacement {
            placement,
            default_node,
            given: HashMap::new(),
        }
    }

    /// `event` with its template pod (if it carries one) placed. A template pod for which no
    /// address is left stays without one: like a pod not yet running, it takes part in no flow.
    pub fn place(&mut self, mut event: SourceEvent) -> SourceEvent {
        let (Event::Apply(Object::Pod(pod)) | Event::InitApply(Object::Pod(pod))) =
            &mut event.event
        else {
            return event;
        };
        if template_owner(pod).is_none() {
            return event;
        }
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let key = (namespace, name);
        let address = match self.given.get(&key) {
            Some(address) => Some(*address),
            None => {
                let address = self.placement.address(&key.0, &key.1);
                if let Some(address) = address {
                    self.given.insert(key.clone(), address);
                } else {
                    tracing::warn!(pod = %format!("{}/{}", key.0, key.1),
                        pod_cidr = %self.placement.pod_cidr,
                        "no address left in the pod network for a workload's pod");
                }
                address
            }
        };
        let node = self
            .placement
            .node(&key.0, &key.1)
            .map(str::to_owned)
            .or_else(|| self.default_node.clone());
        let spec = pod.spec.get_or_insert_with(PodSpec::default);
        spec.node_name = node;
        if let Some(address) = address {
            pod.status = Some(PodStatus {
                phase: Some("Running".into()),
                pod_ip: Some(address.to_string()),
                pod_ips: None,
            });
        }
        event
    }
}
