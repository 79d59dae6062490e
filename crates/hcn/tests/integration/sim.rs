//! The simulator's HCN semantics, validation and call log.

use netpol_datapath::EndpointInfo;
use netpol_hcn::client::HcnCalls;
use netpol_hcn::matcher::Packet;
use netpol_hcn::schema::{
    AclAction, AclDirection, AclPolicySetting, EndpointPolicy, ModifyEndpointRequest, RequestType,
};
use netpol_hcn::sim::{Call, CallKind, Fault};
use netpol_hcn::HcnSim;

fn acl(
    id: &str,
    priority: u16,
    action: AclAction,
    protocols: &str,
    remote: &str,
    ports: &str,
) -> AclPolicySetting {
    AclPolicySetting {
        id: id.into(),
        protocols: protocols.into(),
        action,
        direction: AclDirection::In,
        local_addresses: String::new(),
        remote_addresses: remote.into(),
        local_ports: ports.into(),
        remote_ports: String::new(),
        rule_type: None,
        priority,
    }
}

fn sim_with(policies: &[AclPolicySetting]) -> HcnSim {
    let sim = HcnSim::new();
    sim.add_endpoint(
        EndpointInfo {
            id: "ep".into(),
            name: "ep".into(),
            addresses: vec!["10.1.0.11".parse().unwrap()],
        },
        policies.iter().map(EndpointPolicy::acl).collect(),
    );
    sim
}

fn inbound(remote: &str, protocol: u8, port: u16) -> Packet {
    Packet {
        direction: AclDirection::In,
        remote_address: remote.parse().unwrap(),
        protocol,
        local_port: port,
        remote_port: 40000,
    }
}

fn update(policies: &[AclPolicySetting]) -> String {
    serde_json::to_string(&ModifyEndpointRequest::update(
        policies.iter().map(EndpointPolicy::acl).collect(),
    ))
    .unwrap()
}

#[test]
fn no_acl_passes_everything_and_any_acl_makes_the_endpoint_default_deny() {
    let sim = sim_with(&[]);
    let e = sim.evaluate("ep", &inbound("192.0.2.1", 6, 80)).unwrap();
    assert_eq!((e.action, e.rule), (AclAction::Allow, None));

    let sim = sim_with(&[acl("a", 10, AclAction::Allow, "6", "", "80")]);
    assert_eq!(
        sim.evaluate("ep", &inbound("192.0.2.1", 6, 80))
            .unwrap()
            .action,
        AclAction::Allow
    );
    let e = sim.evaluate("ep", &inbound("192.0.2.1", 6, 81)).unwrap();
    assert_eq!((e.action, e.rule), (AclAction::Block, None));
    // Direction matters: an In rule does not match Out traffic.
    let out = Packet {
        direction: AclDirection::Out,
        ..inbound("192.0.2.1", 6, 80)
    };
    assert_eq!(sim.evaluate("ep", &out).unwrap().rule, None);
}

#[test]
fn lowest_priority_first_match_decides_whatever_the_list_order() {
    let sim = sim_with(&[
        acl("allow-all", 20, AclAction::Allow, "256", "", ""),
        acl(
            "block-web",
            10,
            AclAction::Block,
            "6",
            "10.0.0.0/8",
            "80-90",
        ),
    ]);
    let e = sim.evaluate("ep", &inbound("10.2.3.4", 6, 85)).unwrap();
    assert_eq!(
        (e.action, e.rule),
        (AclAction::Block, Some(("block-web".into(), 10)))
    );
    assert_eq!(
        sim.evaluate("ep", &inbound("10.2.3.4", 17, 85))
            .unwrap()
            .action,
        AclAction::Allow
    );
    assert_eq!(
        sim.evaluate("ep", &inbound("11.2.3.4", 6, 85))
            .unwrap()
            .action,
        AclAction::Allow
    );
}

#[test]
fn overlapping_rules_of_different_actions_may_not_share_a_priority() {
    let sim = sim_with(&[]);
    let conflicting = [
        acl("a", 10, AclAction::Allow, "6", "10.0.0.0/8", "80"),
        acl("b", 10, AclAction::Block, "256", "10.1.0.11", ""),
    ];
    let err = sim
        .modify_endpoint("ep", &update(&conflicting))
        .unwrap_err();
    assert!(err.to_string().contains("same priority 10"), "{err}");
    assert!(
        sim.endpoint("ep").unwrap().policies.is_empty(),
        "a refused modify changes nothing"
    );

    // Disjoint rules, or rules with the same action, may share one.
    let fine = [
        acl("a", 10, AclAction::Allow, "6", "10.0.0.0/8", "80"),
        acl("b", 10, AclAction::Block, "17", "10.1.0.11", ""),
        acl("c", 10, AclAction::Allow, "6", "", "80-90"),
    ];
    sim.modify_endpoint("ep", &update(&fine)).unwrap();
    assert_eq!(sim.endpoint("ep").unwrap().policies.len(), 3);
}

#[test]
fn malformed_acls_are_refused_naming_the_field() {
    let sim = sim_with(&[]);
    let err = sim
        .modify_endpoint(
            "ep",
            &update(&[acl("a", 1, AclAction::Allow, "6", "Any", "")]),
        )
        .unwrap_err();
    assert!(err.to_string().contains("RemoteAddresses"), "{err}");
    let err = sim.modify_endpoint("ep", "{not json").unwrap_err();
    assert!(err.to_string().contains("invalid modify request"), "{err}");
}

#[test]
fn add_and_remove_requests_edit_the_list() {
    let a = acl("a", 10, AclAction::Allow, "6", "", "80");
    let b = acl("b", 11, AclAction::Allow, "6", "", "81");
    let sim = sim_with(std::slice::from_ref(&a));
    let mut add = ModifyEndpointRequest::update(vec![EndpointPolicy::acl(&b)]);
    add.request_type = RequestType::Add;
    sim.modify_endpoint("ep", &serde_json::to_string(&add).unwrap())
        .unwrap();
    assert_eq!(sim.endpoint("ep").unwrap().policies.len(), 2);
    let mut remove = ModifyEndpointRequest::update(vec![EndpointPolicy::acl(&a)]);
    remove.request_type = RequestType::Remove;
    sim.modify_endpoint("ep", &serde_json::to_string(&remove).unwrap())
        .unwrap();
    assert_eq!(
        sim.endpoint("ep").unwrap().policies,
        vec![EndpointPolicy::acl(&b)]
    );
}

#[test]
fn every_call_is_recorded_and_faults_fire_once() {
    let sim = sim_with(&[]);
    let query = r#"{"SchemaVersion":{"Major":2,"Minor":0},"Flags":0}"#;
    sim.inject(Fault::Fail {
        kind: CallKind::Query,
        endpoint: Some("ep".into()),
    });
    assert!(sim.query_endpoint("ep", query).is_err());
    assert!(sim.query_endpoint("ep", query).is_ok());
    assert!(sim.query_endpoint("missing", query).is_err());
    assert_eq!(
        sim.calls(),
        vec![
            Call::Query {
                endpoint: "ep".into()
            },
            Call::Query {
                endpoint: "ep".into()
            },
            Call::Query {
                endpoint: "missing".into()
            },
        ]
    );
}

#[test]
fn a_restart_drops_every_policy_and_raises_the_resync_signal() {
    let sim = sim_with(&[acl("a", 10, AclAction::Allow, "6", "", "80")]);
    let before = sim.resync_signal().generation();
    let woken = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = woken.clone();
    sim.resync_signal()
        .subscribe(move || flag.store(true, std::sync::atomic::Ordering::SeqCst));
    sim.restart();
    assert!(sim.endpoint("ep").unwrap().policies.is_empty());
    assert_eq!(sim.resync_signal().generation(), before + 1);
    assert!(woken.load(std::sync::atomic::Ordering::SeqCst));
}

#[test]
fn the_call_log_stays_bounded_in_a_long_run_and_counts_every_call() {
    let sim = sim_with(&[]).with_call_log_limits(100, 20_000);
    let rules = [acl("a", 100, AclAction::Allow, "6", "10.1.0.0/16", "80")];
    let request = update(&rules);
    let query = r#"{"SchemaVersion":{"Major":2,"Minor":0},"Flags":0}"#;
    for _ in 0..10_000 {
        sim.modify_endpoint("ep", &request).unwrap();
        sim.query_endpoint("ep", query).unwrap();
    }
    let counts = sim.call_counts();
    assert_eq!((counts.modify, counts.query), (10_000, 10_000));
    let kept = sim.calls();
    // Within both bounds: at most 100 calls, and modify requests of at most 20,000 bytes.
    assert!(kept.len() <= 100, "{}", kept.len());
    let bytes: usize = kept
        .iter()
        .map(|c| match c {
            Call::Modify { request, .. } => request.len(),
            _ => 0,
        })
        .sum();
    assert!(bytes <= 20_000, "{bytes}");
    assert_eq!(counts.forgotten, 20_000 - kept.len() as u64);
    // The most recent calls are the ones kept.
    assert_eq!(
        kept.last(),
        Some(&Call::Query {
            endpoint: "ep".into()
        })
    );
    // Taking the log empties it; the counts stay.
    assert_eq!(sim.take_calls().len(), kept.len());
    assert!(sim.calls().is_empty());
    assert_eq!(sim.call_counts().modify, 10_000);
}

#[test]
fn a_restart_invalidates_every_session_and_forgets_its_registration() {
    use netpol_hcn::client::RawError;
    use netpol_hcn::sim::SimSession;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    let rules = [acl("a", 100, AclAction::Allow, "6", "10.1.0.0/16", "80")];
    let sim = Arc::new(netpol_hcn::HcnDatapath::new(sim_with(&rules)));
    let query = r#"{"SchemaVersion":{"Major":2,"Minor":0},"Flags":0}"#;
    let old = SimSession::connect(&sim);
    let heard = Arc::new(AtomicUsize::new(0));
    {
        let heard = heard.clone();
        old.resync_signal()
            .subscribe(move || _ = heard.fetch_add(1, Ordering::SeqCst));
    }
    assert!(old.query_endpoint("ep", query).is_ok());

    sim.calls().restart();
    assert_eq!(heard.load(Ordering::SeqCst), 1, "the callback fires once");
    assert_eq!(old.query_endpoint("ep", query), Err(RawError::Disconnected));
    assert_eq!(
        old.modify_endpoint("ep", &update(&rules)),
        Err(RawError::Disconnected)
    );
    // The restarted service lost every policy and knows nothing of the old session.
    assert!(sim.calls().endpoint("ep").unwrap().policies.is_empty());
    sim.calls().restart();
    assert_eq!(
        heard.load(Ordering::SeqCst),
        1,
        "a forgotten registration stays silent"
    );

    let new = SimSession::connect(&sim);
    assert!(new.modify_endpoint("ep", &update(&rules)).is_ok());
    assert_eq!(sim.calls().endpoint("ep").unwrap().policies.len(), 1);
}
