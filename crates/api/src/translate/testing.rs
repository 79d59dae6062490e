//! Test helpers: objects from YAML, small hand-made identities, and decisions of the engine's
//! reference evaluator over translated entries.

use netpol_engine::reference::{decide, DirectedFlow};
use netpol_engine::{
    Direction, Identity, Labels, NamedPort, NodeInfo, PodInfo, PolicyEntry, Protocol, Verdict,
    NAMESPACE_NAME_LABEL,
};

use super::{translate_for, CrdChannel, Translation};
use crate::error::{ValidationError, Warning};
use crate::object::Object;

pub fn translate_yaml(yaml: &str) -> Translation {
    translate_yaml_in(yaml, CrdChannel::default())
}

/// An object translated against one CRD channel.
pub fn translate_yaml_in(yaml: &str, channel: CrdChannel) -> Translation {
    let value: serde_json::Value =
        serde_saphyr::from_str_with_options(yaml, crate::parse::yaml_options())
            .expect("test YAML parses");
    let object = Object::from_value(value).expect("test object reads");
    translate_for(&object, channel)
}

/// The entries of an object that must translate without errors.
pub fn entries(yaml: &str) -> Vec<PolicyEntry> {
    let t = translate_yaml(yaml);
    assert!(t.errors.is_empty(), "unexpected errors: {:#?}", t.errors);
    t.entries
}

/// The errors of an object that must fail; checks that it gives no entries.
pub fn errors(yaml: &str) -> Vec<ValidationError> {
    let t = translate_yaml(yaml);
    assert!(
        !t.errors.is_empty(),
        "expected errors, got {:#?}",
        t.entries
    );
    assert!(
        t.entries.is_empty(),
        "an object with errors must give no entries"
    );
    t.errors
}

/// The single error of an object, as `field: message`.
pub fn error(yaml: &str) -> ValidationError {
    let errors = errors(yaml);
    assert_eq!(errors.len(), 1, "expected one error, got {errors:#?}");
    errors.into_iter().next().unwrap()
}

pub fn warnings(yaml: &str) -> Vec<Warning> {
    let t = translate_yaml(yaml);
    assert!(t.errors.is_empty(), "unexpected errors: {:#?}", t.errors);
    t.warnings
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A pod `ns/name` labelled `pod: <name>` in a namespace labelled `ns: <ns>`, on `node-1`,
/// serving `http` on TCP 8080 and `dns` on UDP 53.
pub fn pod(ns: &str, name: &str, ip: &str) -> Identity {
    pod_with(ns, name, &[("pod", name)], ip)
}

pub fn pod_with(ns: &str, name: &str, pod_labels: &[(&str, &str)], ip: &str) -> Identity {
    Identity::pod(
        PodInfo {
            namespace: ns.into(),
            name: name.into(),
            labels: labels(pod_labels).into(),
            namespace_labels: labels(&[("ns", ns), (NAMESPACE_NAME_LABEL, ns)]).into(),
            node: Some("node-1".into()),
            ports: vec![
                NamedPort {
                    name: "http".into(),
                    protocol: Protocol::Tcp,
                    port: 8080,
                },
                NamedPort {
                    name: "dns".into(),
                    protocol: Protocol::Udp,
                    port: 53,
                },
            ],
        },
        ip.parse().unwrap(),
    )
}

pub fn node(name: &str, zone: &str, ip: &str) -> Identity {
    Identity::node(
        NodeInfo {
            name: name.into(),
            labels: labels(&[("zone", zone)]).into(),
        },
        ip.parse().unwrap(),
    )
}

pub fn world(cidr: &str) -> Identity {
    Identity::world(cidr.parse().unwrap())
}

/// The reference evaluator's verdict for one direction of a flow seen from `endpoint`.
pub fn verdict(
    entries: &[PolicyEntry],
    endpoint: &Identity,
    direction: Direction,
    remote: &Identity,
    protocol: Protocol,
    port: u16,
) -> Verdict {
    let flow = DirectedFlow {
        endpoint: endpoint.as_pod().expect("endpoint is a pod"),
        direction,
        remote,
        protocol,
        port,
    };
    decide(entries, &flow).verdict
}

/// Whether `endpoint` admits ingress from `remote`.
pub fn ingress_allowed(
    entries: &[PolicyEntry],
    endpoint: &Identity,
    remote: &Identity,
    protocol: Protocol,
    port: u16,
) -> bool {
    verdict(
        entries,
        endpoint,
        Direction::Ingress,
        remote,
        protocol,
        port,
    ) == Verdict::Allow
}

/// Whether `endpoint` may send to `remote`.
pub fn egress_allowed(
    entries: &[PolicyEntry],
    endpoint: &Identity,
    remote: &Identity,
    protocol: Protocol,
    port: u16,
) -> bool {
    verdict(entries, endpoint, Direction::Egress, remote, protocol, port) == Verdict::Allow
}
