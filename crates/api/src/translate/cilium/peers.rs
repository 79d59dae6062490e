//! The peer fields of a Cilium rule: endpoints, CIDRs, CIDR sets, entities and nodes.
//!
//! As in Cilium, CIDR peers (`from/toCIDR`, `from/toCIDRSet`, and the `world-ipv4` and
//! `world-ipv6` entities) select only addresses outside the cluster; pods and nodes are selected
//! by their labels or by entities, never by an address range.

use ipnet::IpNet;
use netpol_engine::{AddressScope, CidrSelector, Entity, Peer};

use super::rule_view::RuleView;
use super::selectors::{endpoint_peer, node_selector};
use crate::crd::cilium::CidrRule;
use crate::error::{Diagnostics, FieldError, FieldPath};
use crate::translate::cidr::{cidr_selector, parse_cidr, Notation};

/// The union of the rule's peer fields. `namespace` is a namespaced policy's namespace, which
/// confines its endpoint peers.
pub(super) fn rule_peers(
    view: &RuleView,
    namespace: Option<&str>,
    path: &FieldPath,
    diags: &mut Diagnostics,
) -> Result<Vec<Peer>, FieldError> {
    let mut peers = Vec::new();
    let (name, endpoints) = view.endpoints;
    for (i, selector) in endpoints.into_iter().flatten().enumerate() {
        peers.push(endpoint_peer(
            selector,
            namespace,
            &path.field(name).index(i),
        )?);
    }
    let (name, cidrs) = view.cidr;
    for (i, text) in cidrs.into_iter().flatten().enumerate() {
        let path = || path.field(name).index(i);
        let net = parse_cidr(text, Notation::CidrOrAddress, path, diags)?;
        peers.push(outside_cluster(net));
    }
    let (name, sets) = view.cidr_set;
    for (i, set) in sets.into_iter().flatten().enumerate() {
        peers.push(cidr_set(set, &path.field(name).index(i), diags)?);
    }
    let (name, entities) = view.entities;
    for (i, entity_name) in entities.into_iter().flatten().enumerate() {
        peers.push(entity(entity_name, &path.field(name).index(i))?);
    }
    let (name, nodes) = view.nodes;
    for (i, selector) in nodes.into_iter().flatten().enumerate() {
        peers.push(Peer::nodes(node_selector(
            selector,
            &path.field(name).index(i),
        )?));
    }
    Ok(peers)
}

/// Cilium CIDR peers select only addresses outside the cluster.
fn outside_cluster(net: IpNet) -> Peer {
    Peer::Cidr(CidrSelector {
        net,
        except: Default::default(),
        scope: AddressScope::OutsideCluster,
    })
}

fn cidr_set(set: &CidrRule, path: &FieldPath, diags: &mut Diagnostics) -> Result<Peer, FieldError> {
    if set.cidr_group_ref.is_some() {
        return Err(path
            .field("cidrGroupRef")
            .unsupported("CIDR groups are not supported"));
    }
    if set.cidr_group_selector.is_some() {
        return Err(path
            .field("cidrGroupSelector")
            .unsupported("CIDR groups are not supported"));
    }
    let Some(cidr) = &set.cidr else {
        return Err(path.field("cidr").error("required"));
    };
    cidr_selector(
        (cidr, || path.field("cidr")),
        (set.except.as_deref().unwrap_or_default(), || {
            path.field("except")
        }),
        Notation::CidrOrAddress,
        AddressScope::OutsideCluster,
        diags,
    )
    .map(Peer::Cidr)
}

fn entity(name: &str, path: &FieldPath) -> Result<Peer, FieldError> {
    // The default prefixes are 0.0.0.0/0 and ::/0.
    let world_v4 = || outside_cluster(IpNet::V4(Default::default()));
    let world_v6 = || outside_cluster(IpNet::V6(Default::default()));
    Ok(match name {
        "all" => Peer::Entity(Entity::All),
        "world" => Peer::Entity(Entity::World),
        "world-ipv4" => world_v4(),
        "world-ipv6" => world_v6(),
        "cluster" => Peer::Entity(Entity::Cluster),
        "host" => Peer::Entity(Entity::Host),
        "remote-node" => Peer::Entity(Entity::RemoteNode),
        other => {
            return Err(path.error(format!(
                "unsupported entity {other:?} (supported: all, world, world-ipv4, world-ipv6, \
                 cluster, host, remote-node)"
            )))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::translate::testing::*;
    use netpol_engine::{Identity, PolicyEntry, Protocol::*};

    #[test]
    fn cidr_peers_select_only_outside_addresses() {
        let e = entries(&cnp(
            "x",
            r#"
spec:
  endpointSelector: {}
  egress:
  - toCIDR: [10.0.0.0/8, 192.0.2.7]
  - toCIDRSet: [{cidr: 198.51.100.0/24, except: [198.51.100.128/25]}]
"#,
        ));
        let a = xa();
        assert!(!egress_allowed(&e, &a, &ya(), Tcp, 80));
        assert!(!egress_allowed(
            &e,
            &a,
            &node("node-1", "a", "10.0.0.1"),
            Tcp,
            80
        ));
        assert!(egress_allowed(&e, &a, &world("10.200.0.0/16"), Tcp, 80));
        assert!(egress_allowed(&e, &a, &world("192.0.2.7/32"), Tcp, 80));
        assert!(egress_allowed(&e, &a, &world("198.51.100.0/25"), Tcp, 80));
        assert!(!egress_allowed(
            &e,
            &a,
            &world("198.51.100.128/25"),
            Tcp,
            80
        ));
    }

    #[test]
    fn entities() {
        let e = |entity: &str| {
            entries(&cnp(
                "x",
                &format!("spec:\n  endpointSelector: {{}}\n  egress: [{{toEntities: [{entity}]}}]"),
            ))
        };
        let a = xa();
        let own_node = node("node-1", "a", "10.0.0.1");
        let other_node = node("node-2", "b", "10.0.0.2");
        let outside = world("0.0.0.0/0");
        let outside6 = world("::/0");
        let reach = |entries: &[PolicyEntry], remote: &Identity| {
            egress_allowed(entries, &a, remote, Tcp, 80)
        };
        let all = e("all");
        assert!([&ya(), &own_node, &outside].iter().all(|r| reach(&all, r)));
        let w = e("world");
        assert!(reach(&w, &outside) && !reach(&w, &ya()) && !reach(&w, &own_node));
        let c = e("cluster");
        assert!(reach(&c, &ya()) && reach(&c, &other_node) && !reach(&c, &outside));
        let h = e("host");
        assert!(reach(&h, &own_node) && !reach(&h, &other_node) && !reach(&h, &ya()));
        let r = e("remote-node");
        assert!(!reach(&r, &own_node) && reach(&r, &other_node));
        let w4 = e("world-ipv4");
        assert!(reach(&w4, &outside) && !reach(&w4, &outside6) && !reach(&w4, &ya()));
    }
}
