//! netpol-api: typed Kubernetes and Cilium policy objects, and their translation into the
//! engine's flat [`netpol_engine::PolicyEntry`] list.
//!
//! # Pipeline
//!
//! 1. [`parse_yaml`] / [`parse_values`] / [`Object::from_value`] read objects (`---` streams,
//!    YAML lists and `kind: List` included). Each object is read on its own: one malformed object
//!    is reported and the others still load. YAML is read with 1.2 booleans, so `{ns: y}` is the
//!    string `y`. A namespaced object without a namespace goes to `default`, as with
//!    `kubectl apply`.
//! 2. [`translate()`] turns one policy object into entries, warnings and errors. An object with any
//!    error gives no entries at all; the caller reports it and keeps the others.
//! 3. [`cluster`] turns pods, nodes and namespaces into engine identities.
//!
//! Every error and warning is a [`Diagnostic`] naming the object and the JSON path of the field,
//! e.g. `NetworkPolicy x/foo: spec.ingress[0].ports[1].endPort: endPort 70 is below port 80`.
//!
//! # Supported
//!
//! - **NetworkPolicy** (networking.k8s.io/v1), in the unordered Normal tier: `policyTypes`
//!   (inferred when absent: Ingress, plus Egress when there are egress rules), per-direction
//!   isolation (`ingress: []` isolates and allows nothing), `from`/`to` absent or empty meaning
//!   every peer, `podSelector` (own namespace), `namespaceSelector` (pods only, never outside
//!   addresses), both ANDed, `ipBlock` with `except` (matching pod and node addresses too), IPv4
//!   and IPv6, ports with protocol TCP (default), UDP or SCTP, a single port, `endPort` ranges,
//!   named ports, and all selector operators (In, NotIn, Exists, DoesNotExist).
//! - **AdminNetworkPolicy** and **BaselineAdminNetworkPolicy**
//!   (policy.networking.k8s.io/v1alpha1), in the Admin and Baseline tiers: priority 0-1000,
//!   ordered by (priority, policy name, rule index), the documented deterministic tie-break
//!   between policies of equal priority; subjects `namespaces` or `pods`; actions
//!   Allow/Deny/Pass (Allow/Deny for the baseline); peers `namespaces`, `pods`, and for egress
//!   `nodes` and `networks` (CIDRs that match pod and node addresses too); ports `portNumber`,
//!   `namedPort` (the protocol is the container port's) and `portRange`.
//! - **ClusterNetworkPolicy** (policy.networking.k8s.io/v1alpha2): `tier` Admin or Baseline,
//!   priority 0-1000, the same subjects and peers, actions Accept/Deny/Pass, and `protocols`
//!   (`tcp`/`udp`/`sctp` with an optional `destinationPort` number or range, or
//!   `destinationNamedPort`).
//! - **CiliumNetworkPolicy** and **CiliumClusterwideNetworkPolicy** (cilium.io/v2), at L3/L4 in the
//!   Normal tier, where a matching deny wins over every allow: `spec` and `specs`,
//!   `endpointSelector` (pinned to the policy's namespace for the namespaced kind), `ingress`,
//!   `ingressDeny`, `egress`, `egressDeny`; peers `from/toEndpoints` (confined to the policy's
//!   namespace unless they name `io.kubernetes.pod.namespace`; `io.cilium.k8s.namespace.labels.*`
//!   keys select namespace labels; `k8s:`/`any:` prefixes are dropped), `from/toCIDR` and
//!   `from/toCIDRSet` with `except` (outside the cluster only, as in Cilium), `from/toEntities`
//!   `all`, `world`, `world-ipv4`, `world-ipv6`, `cluster`, `host`, `remote-node`, and
//!   `from/toNodes`; `toPorts` ports with `endPort`, protocol TCP, UDP, SCTP or ANY (the
//!   default; a port under ANY means that port over TCP, UDP and SCTP), port `"0"` meaning every
//!   port, and named ports; isolation of each direction a rule has rules for (deny rules
//!   included, an empty rule `{}` only isolates), overridden by `enableDefaultDeny`; and
//!   `authentication.mode` `required` or `disabled`.
//!
//! # Rejected, and why
//!
//! Rejected objects are reported and skipped; they never half-apply.
//!
//! - **Malformed values**, as the API server would reject them: invalid CIDRs, an `except` not
//!   strictly inside its CIDR or of another address family, ports outside 1-65535, `endPort`
//!   below `port`, `endPort` without a numeric port, invalid port names, unknown protocols,
//!   unknown selector operators, In/NotIn without values, Exists/DoesNotExist with values,
//!   unknown actions, tiers, policy types and entities, priorities outside 0-1000, a
//!   BaselineAdminNetworkPolicy not named `default`, more rules than the API allows (100 per
//!   direction for ANP/BANP, 25 for ClusterNetworkPolicy), a NetworkPolicy peer with no field or
//!   with `ipBlock` beside a selector, subjects and peers that set more than one field, and
//!   admin rules without peers.
//! - **FQDN peers** (`domainNames`, `toFQDNs`): they need DNS interception, which netpol's
//!   datapaths do not have.
//! - **Cilium L7 and TLS** (`toPorts[].rules`, `serverNames`, `listener`, `originatingTLS`,
//!   `terminatingTLS`): they need a proxy; enforcing only their L4 part would allow more than
//!   the policy says.
//! - **Other Cilium features** with no counterpart in netpol's identity model: `toServices`,
//!   `from/toGroups`, `from/toRequires`, CIDR groups (`cidrGroupRef`, `cidrGroupSelector`),
//!   `icmps` and ICMP/VRRP/IGMP protocols, host policies (`nodeSelector`), `reserved:` labels in
//!   selectors (use entities), label sources other than `k8s`/`any`, `io.cilium.k8s.policy.*`
//!   labels (service account, cluster), entities other than those listed above, and the
//!   `test-always-fail` authentication mode.
//!
//! # Warnings (the object still applies)
//!
//! - An admin or ClusterNetworkPolicy peer that sets no known field (written for a newer API
//!   version) fails closed, as the API prescribes: it matches nothing in an Allow/Accept rule and
//!   everything in a Deny/Pass rule.
//! - NetworkPolicy rules of a direction that `policyTypes` does not list are ignored.
//! - A CIDR with host bits set (`10.1.2.3/16`) is read as its network (`10.1.0.0/16`).
//! - A CiliumNetworkPolicy `endpointSelector` naming another namespace is pinned to its own.

pub mod annotations;
mod block;
pub mod cluster;
pub mod crd;
pub mod error;
pub mod fields;
mod json;
mod json_depth;
mod json_scan;
pub mod label_syntax;
pub mod large_json;
pub mod list_items;
pub mod node;
pub mod object;
pub mod parse;
pub mod pod;
mod prune;
pub mod reader;
pub mod selector;
pub mod slices;
mod split;
mod stream;
pub mod translate;
mod validate;
pub mod workloads;

pub use error::{Diagnostic, FieldError, FieldPath, ObjectRef, ValidationError, Warning};
pub use fields::FieldValidation;
pub use node::Node;
pub use object::{is_supported_kind, Object, ReadObject, DEFAULT_NAMESPACE};
pub use parse::{
    parse_values, parse_yaml, parse_yaml_each, unpack_lists, yaml_options, yaml_options_for,
    YamlError,
};
pub use pod::Pod;
pub use reader::{digest_hasher, digest_of, parse_reader_each, text_digest, ReadError};
pub use translate::{translate, translate_for, CrdChannel, Translation};
