//! The compiler on hand-built MapStates: rule shapes, and the simulator agreeing with the lookup.

use crate::common;

use common::*;
use netpol_datapath::testing::*;
use netpol_datapath::{CompileOptions, CompileWarning};
use netpol_engine::*;
use netpol_hcn::schema::{AclAction, AclDirection};
use netpol_hcn::{compile_acls, compile_acls_with};

const ALLOW: Verdict = Verdict::Allow;
const DENY: Verdict = Verdict::Deny;

#[test]
fn isolated_ingress_with_one_allowed_peer_and_a_port_range() {
    let (store, ids) = store_with(&[], &["10.1.0.11", "10.1.0.12", "fd00::11"]);
    let mut b = MapBuilder::new(ALLOW);
    b.set(
        Direction::Ingress,
        None,
        key(None, 0, 0),
        value(2, DENY, None),
    );
    for peer in ["10.1.0.11", "10.1.0.12", "fd00::11"] {
        b.range(
            Direction::Ingress,
            Some(ids[peer]),
            Protocol::Tcp,
            80,
            90,
            value(5, ALLOW, None),
        );
        b.set(
            Direction::Ingress,
            Some(ids[peer]),
            key(Some(Protocol::Tcp), 443, 16),
            value(5, ALLOW, None),
        );
    }
    let map = b.build();
    let acls = compile_acls(&map, &store).unwrap();

    let ingress: Vec<_> = acls
        .rules
        .iter()
        .filter(|r| r.direction == AclDirection::In)
        .collect();
    // One IPv4 allow, one IPv6 allow, the final block.
    assert_eq!(ingress.len(), 3, "{}", acls.update_request_json());
    let v4 = ingress
        .iter()
        .find(|r| r.remote_addresses.starts_with("10."))
        .unwrap();
    assert_eq!(v4.remote_addresses, "10.1.0.11,10.1.0.12");
    assert_eq!(v4.local_ports, "80-90,443");
    assert_eq!(v4.protocols, "6");
    assert!(v4.remote_ports.is_empty());
    let v6 = ingress
        .iter()
        .find(|r| r.remote_addresses.contains(':'))
        .unwrap();
    assert_eq!(v6.remote_addresses, "fd00::11");
    assert_eq!(v4.priority, v6.priority);
    let last = ingress.last().unwrap();
    assert_eq!(
        (
            last.action,
            last.protocols.as_str(),
            last.remote_addresses.as_str()
        ),
        (AclAction::Block, "256", "")
    );
    assert!(last.priority > v4.priority);
    // Egress is not isolated: a single explicit allow.
    let egress: Vec<_> = acls
        .rules
        .iter()
        .filter(|r| r.direction == AclDirection::Out)
        .collect();
    assert_eq!(egress.len(), 1);
    assert_eq!(
        (egress[0].action, egress[0].protocols.as_str()),
        (AclAction::Allow, "256")
    );

    assert_eq!(acls.count.ingress, 3);
    assert_eq!(acls.count.egress, 1);
    // Naive: 3 peers x (11 ports + 1), plus the two roots.
    assert_eq!(
        netpol_hcn::naive::naive_rule_counts(&map).total(),
        3 * 12 + 2
    );
    assert!(acls
        .rules
        .iter()
        .all(|r| r.id.starts_with("netpol-") && r.id.len() == 23));
    assert_eq!(
        first_mismatch(&map, &store, &CompileOptions::default()),
        None
    );
}

#[test]
fn egress_rules_put_ports_on_the_remote_side() {
    let (store, ids) = store_with(&["192.0.2.0/24"], &[]);
    let mut b = MapBuilder::new(ALLOW);
    b.set(
        Direction::Egress,
        None,
        key(None, 0, 0),
        value(2, DENY, None),
    );
    b.set(
        Direction::Egress,
        Some(ids["192.0.2.0/24"]),
        key(Some(Protocol::Udp), 53, 16),
        value(5, ALLOW, None),
    );
    let map = b.build();
    let acls = compile_acls(&map, &store).unwrap();
    let rule = acls
        .rules
        .iter()
        .find(|r| r.direction == AclDirection::Out && r.action == AclAction::Allow)
        .unwrap();
    assert_eq!(
        (
            rule.remote_addresses.as_str(),
            rule.remote_ports.as_str(),
            rule.protocols.as_str()
        ),
        ("192.0.2.0/24", "53", "17")
    );
    assert!(rule.local_ports.is_empty());
    assert_eq!(
        first_mismatch(&map, &store, &CompileOptions::default()),
        None
    );
}

#[test]
fn a_cidr_rule_does_not_leak_onto_an_except_hole_or_pods_inside_it() {
    // Allow 10.0.0.0/8 except 10.1.0.0/16: the hole is its own world identity, and the pod
    // 10.1.0.11 inside it is not allowed either; the pod 10.2.0.5 outside the hole is.
    let (store, ids) = store_with(&["10.0.0.0/8", "10.1.0.0/16"], &["10.1.0.11", "10.2.0.5"]);
    let mut b = MapBuilder::new(ALLOW);
    b.set(
        Direction::Egress,
        None,
        key(None, 0, 0),
        value(2, DENY, None),
    );
    b.set(
        Direction::Egress,
        Some(ids["10.0.0.0/8"]),
        key(None, 0, 0),
        value(5, ALLOW, None),
    );
    b.set(
        Direction::Egress,
        Some(ids["10.2.0.5"]),
        key(None, 0, 0),
        value(5, ALLOW, None),
    );
    let map = b.build();
    let acls = compile_acls(&map, &store).unwrap();
    assert_eq!(
        first_mismatch(&map, &store, &CompileOptions::default()),
        None
    );
    // The hole gets a block ahead of the /8 allow; nothing else is needed.
    let out: Vec<_> = acls
        .rules
        .iter()
        .filter(|r| r.direction == AclDirection::Out)
        .collect();
    assert_eq!(out.len(), 3, "{}", acls.update_request_json());
    assert_eq!(
        (out[0].action, out[0].remote_addresses.as_str()),
        (AclAction::Block, "10.1.0.0/16")
    );
    assert_eq!(
        (out[1].action, out[1].remote_addresses.as_str()),
        (AclAction::Allow, "10.0.0.0/8")
    );
}

#[test]
fn world_entity_rules_do_not_catch_pods() {
    // Cilium `toEntities: [world]`: only the any-address world identity is allowed; pods, whose
    // addresses lie inside 0.0.0.0/0, keep the wildcard decision (deny) except the one allowed
    // on TCP/80.
    let (store, ids) = store_with(&[], &["10.1.0.11", "10.1.0.12"]);
    let mut b = MapBuilder::new(ALLOW);
    b.set(
        Direction::Egress,
        None,
        key(None, 0, 0),
        value(2, DENY, None),
    );
    b.set(
        Direction::Egress,
        Some(ids["0.0.0.0/0"]),
        key(None, 0, 0),
        value(5, ALLOW, None),
    );
    b.set(
        Direction::Egress,
        Some(ids["10.1.0.12"]),
        key(Some(Protocol::Tcp), 80, 16),
        value(5, ALLOW, None),
    );
    let map = b.build();
    assert_eq!(
        first_mismatch(&map, &store, &CompileOptions::default()),
        None
    );
}

#[test]
fn authentication_required_allows_fail_closed() {
    let (store, ids) = store_with(&[], &["10.1.0.11"]);
    let mut b = MapBuilder::new(ALLOW);
    b.set(
        Direction::Ingress,
        Some(ids["10.1.0.11"]),
        key(Some(Protocol::Tcp), 80, 16),
        value(5, ALLOW, Some(AuthMode::Required)),
    );
    // An equal-precedence wildcard allow needing authentication makes the exact allow need it too.
    b.set(
        Direction::Ingress,
        Some(ids["10.1.0.11"]),
        key(Some(Protocol::Udp), 0, 0),
        value(6, ALLOW, None),
    );
    b.set(
        Direction::Ingress,
        None,
        key(Some(Protocol::Udp), 53, 16),
        value(6, ALLOW, Some(AuthMode::Required)),
    );
    let map = b.build();
    let acls = compile_acls(&map, &store).unwrap();
    assert!(acls.warnings.iter().any(|w| matches!(
        w,
        CompileWarning::AuthenticationUnsupported {
            direction: Direction::Ingress,
            ..
        }
    )));
    assert_eq!(
        first_mismatch(&map, &store, &CompileOptions::default()),
        None
    );
    let first = &acls.rules[0];
    assert_eq!(first.action, AclAction::Block);
}

#[test]
fn addresses_are_chunked_at_4000() {
    // Every other address, so that aggregation cannot fold them into prefixes.
    let hosts: Vec<String> = (0..4500u32)
        .map(|i| format!("10.1.{}.{}", (2 * i) / 256, (2 * i) % 256))
        .collect();
    let host_refs: Vec<&str> = hosts.iter().map(String::as_str).collect();
    let (store, ids) = store_with(&[], &host_refs);
    let mut b = MapBuilder::new(ALLOW);
    b.set(
        Direction::Ingress,
        None,
        key(None, 0, 0),
        value(2, DENY, None),
    );
    for h in &host_refs {
        b.set(
            Direction::Ingress,
            Some(ids[*h]),
            key(Some(Protocol::Tcp), 80, 16),
            value(5, ALLOW, None),
        );
    }
    let map = b.build();
    let acls = compile_acls(&map, &store).unwrap();
    let allows: Vec<_> = acls
        .rules
        .iter()
        .filter(|r| r.action == AclAction::Allow && r.direction == AclDirection::In)
        .collect();
    let sizes: Vec<usize> = allows
        .iter()
        .map(|r| r.remote_addresses.split(',').count())
        .collect();
    assert_eq!(sizes, vec![4000, 500]);
    assert_eq!(allows.len(), 2);
    assert_eq!(allows[0].priority, allows[1].priority);
    assert_ne!(allows[0].id, allows[1].id);
}

#[test]
fn adjacent_hosts_aggregate_into_prefixes() {
    let (store, ids) = store_with(
        &[],
        &["10.1.0.0", "10.1.0.1", "10.1.0.2", "10.1.0.3", "10.1.0.9"],
    );
    let mut b = MapBuilder::new(ALLOW);
    for h in ["10.1.0.0", "10.1.0.1", "10.1.0.2", "10.1.0.3", "10.1.0.9"] {
        b.set(
            Direction::Ingress,
            Some(ids[h]),
            key(Some(Protocol::Tcp), 80, 16),
            value(5, DENY, None),
        );
    }
    let acls = compile_acls(&b.build(), &store).unwrap();
    assert_eq!(acls.rules[0].remote_addresses, "10.1.0.0/30,10.1.0.9");
}

#[test]
fn compiling_is_deterministic_whatever_the_map_order() {
    let (store, ids) = store_with(&["10.0.0.0/8"], &["10.1.0.11", "10.1.0.12", "10.1.0.13"]);
    let build = |order: &[&str]| {
        let mut b = MapBuilder::new(DENY);
        for h in order {
            b.set(
                Direction::Ingress,
                Some(ids[*h]),
                key(Some(Protocol::Tcp), 80, 16),
                value(5, ALLOW, None),
            );
            b.set(
                Direction::Egress,
                Some(ids[*h]),
                key(Some(Protocol::Udp), 53, 16),
                value(5, ALLOW, None),
            );
        }
        compile_acls(&b.build(), &store).unwrap()
    };
    let a = build(&["10.1.0.11", "10.1.0.12", "10.1.0.13"]);
    let b = build(&["10.1.0.13", "10.1.0.11", "10.1.0.12"]);
    assert_eq!(a.rules, b.rules);
}

#[test]
fn without_dual_stack_ipv6_rules_are_left_out_with_a_warning() {
    let (store, ids) = store_with(&[], &["10.1.0.11", "fd00::11"]);
    let mut b = MapBuilder::new(DENY);
    for h in ["10.1.0.11", "fd00::11"] {
        b.set(
            Direction::Ingress,
            Some(ids[h]),
            key(None, 0, 0),
            value(5, ALLOW, None),
        );
    }
    let options = CompileOptions {
        dual_stack: false,
        ..CompileOptions::default()
    };
    let acls = compile_acls_with(&b.build(), &store, &options).unwrap();
    assert!(acls.rules.iter().all(|r| !r.remote_addresses.contains(':')));
    assert_eq!(
        acls.warnings,
        vec![CompileWarning::Ipv6Unsupported {
            direction: Direction::Ingress,
            rules: 1
        }]
    );
}

#[test]
fn keys_hcn_cannot_express_are_errors_naming_the_field() {
    let (store, _) = store_with(&[], &[]);
    let mut b = MapBuilder::new(ALLOW);
    b.set(
        Direction::Ingress,
        None,
        key(Some(Protocol::Icmp), 8, 16),
        value(5, DENY, None),
    );
    let err = compile_acls(&b.build(), &store).unwrap_err();
    assert!(err.to_string().contains("port_prefix_len"), "{err}");

    let mut b = MapBuilder::new(ALLOW);
    b.set(
        Direction::Ingress,
        Some(IdentityId(999)),
        key(None, 0, 0),
        value(5, DENY, None),
    );
    let err = compile_acls(&b.build(), &store).unwrap_err();
    assert!(err.to_string().contains("#999"), "{err}");
}

#[test]
fn a_map_without_roots_still_ends_in_explicit_rules() {
    let (store, _) = store_with(&[], &[]);
    let acls = compile_acls(&MapBuilder::default().build(), &store).unwrap();
    // Nothing to compile: no rules; the lookup default (allow) is HCN's no-ACL behaviour.
    assert!(acls.rules.is_empty());
}
