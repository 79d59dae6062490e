//! A Node as netpol reads it: its name, labels and addresses.
//!
//! `k8s_openapi`'s `Node` is 1.5 KB before any field is set and a real node's status lists every
//! image it holds; this type keeps only what node identities are built from, under the API's
//! names, and is a resource of its own so `kube`'s `Api<Node>` watches it directly (see
//! [`crate::Pod`] for the same choice).

use k8s_openapi::api::core::v1::NodeAddress;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// The node address types a node's identity is reached at; other types (`Hostname`, ...) are not
/// addresses a flow comes from.
pub(crate) const NODE_ADDRESS_TYPES: [&str; 2] = ["InternalIP", "ExternalIP"];

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct Node {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<NodeStatus>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct NodeStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addresses: Option<Vec<NodeAddress>>,
}

impl k8s_openapi::Resource for Node {
    const API_VERSION: &'static str = "v1";
    const GROUP: &'static str = "";
    const KIND: &'static str = "Node";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "nodes";
    type Scope = k8s_openapi::ClusterResourceScope;
}

impl k8s_openapi::ListableResource for Node {
    const LIST_KIND: &'static str = "NodeList";
}

impl k8s_openapi::Metadata for Node {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}
