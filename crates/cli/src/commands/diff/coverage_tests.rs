//! `diff` reports every flow whose verdict changes on any port, not only on the ports rules
//! write: random BEFORE and AFTER policy sets with numbered ports, ranges, whole protocols,
//! named ports and rules without ports are decided by brute force (the reference evaluator, on
//! a sample of ports of every protocol), and every pod flow that differs must be among the
//! changes `diff` reports, on a probe that both sides decide as that port.

use netpol_engine::{
    Direction, Identity, LabelSelector, Labels, NamedPort, PodInfo, PodSelector, PolicyEntry,
    PortRule, Priority, Protocol, Provenance, Tier, Verdict,
};
use proptest::prelude::*;

use super::compare;
use crate::decide::class_matrix::{decide_between, Party};
use crate::decide::{oracle, EngineArgs, EngineKind, HcnIpSets};
use crate::loader::{ClusterModel, PodRef, Scenario};
use crate::probe_ports::{probe_ports, PortPlan, ProbeArgs, Stands};

/// A random pod: `app` label and whether it declares `web` as TCP/3 (else UDP/5).
type RandomPod = (u8, bool);

/// A random rule: egress, subject app, peer app (or every pod), port clause.
type RandomRule = (bool, u8, Option<u8>, u8);

/// Ports the brute force tries: the ones rules write, their neighbours, and far ones.
const SAMPLE: [u16; 12] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 80, 1000, 65535];

fn port_clause(choice: u8) -> Vec<PortRule> {
    let protocol = [Protocol::Tcp, Protocol::Udp, Protocol::Sctp][choice as usize % 3];
    match choice / 3 {
        0 => vec![],
        1 => vec![PortRule::single(protocol, 3)],
        2 => vec![PortRule::range(protocol, 2, 6)],
        3 => vec![
            PortRule::range(protocol, 4, 8),
            PortRule::single(protocol, 2),
        ],
        4 => vec![PortRule::protocol(protocol)],
        _ => vec![PortRule::named(None, "web")],
    }
}

fn cluster(pods: &[RandomPod], rules: &[RandomRule]) -> ClusterModel {
    let mut cluster = ClusterModel::new();
    let labels = |app: u8| Labels::from([("app".to_string(), format!("a{app}"))]);
    for (i, &(app, tcp)) in pods.iter().enumerate() {
        let name = format!("p{i}");
        let web = match tcp {
            true => (Protocol::Tcp, 3),
            false => (Protocol::Udp, 5),
        };
        let info = PodInfo {
            namespace: "x".into(),
            name: name.clone(),
            labels: labels(app).into(),
            namespace_labels: Labels::from([(
                netpol_engine::NAMESPACE_NAME_LABEL.to_string(),
                "x".to_string(),
            )])
            .into(),
            node: None,
            ports: vec![NamedPort {
                name: "web".into(),
                protocol: web.0,
                port: web.1,
            }],
        };
        let address = format!("10.1.0.{}", i + 1).parse().expect("an address");
        let pod = PodRef {
            namespace: "x".into(),
            name,
        };
        cluster.add_pod(pod, vec![Identity::pod(info, address)]);
    }
    let selector = |app: Option<u8>| match app {
        Some(app) => LabelSelector::from_labels([("app", format!("a{app}").as_str())]),
        None => LabelSelector::default(),
    };
    let entries = rules
        .iter()
        .map(|&(egress, subject, peer, ports)| PolicyEntry {
            tier: Tier::Normal,
            priority: Priority::unordered(),
            verdict: Verdict::Allow,
            subject: PodSelector::in_namespace("x", selector(Some(subject))),
            direction: match egress {
                true => Direction::Egress,
                false => Direction::Ingress,
            },
            peers: vec![netpol_engine::Peer::pods(PodSelector::in_namespace(
                "x",
                selector(peer),
            ))],
            ports: port_clause(ports),
            default_deny: true,
            enforcement: netpol_engine::Enforcement::Enforce,
            auth: None,
            provenance: Provenance::default(),
        })
        .collect::<Vec<_>>();
    cluster.add_entries(entries);
    cluster
}

fn scenario(cluster: ClusterModel) -> Scenario {
    Scenario {
        file: "random".into(),
        name: "random".into(),
        description: String::new(),
        cluster,
        flows: Vec::new(),
        warnings: Vec::new(),
        inventory: Default::default(),
    }
}

fn arb_rule() -> impl Strategy<Value = RandomRule> {
    (any::<bool>(), 0..2u8, prop::option::of(0..2u8), 0..18u8)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn diff_reports_every_flow_that_changes_on_any_port(
        pods in prop::collection::vec((0..2u8, any::<bool>()), 2..5),
        before in prop::collection::vec(arb_rule(), 0..4),
        after in prop::collection::vec(arb_rule(), 0..4),
    ) {
        let sides = [cluster(&pods, &before), cluster(&pods, &after)];
        let plan = PortPlan::new(&[&sides[0], &sides[1]]);
        let reference = EngineArgs {
            engine: EngineKind::Reference,
            datapath: None,
            hcn_ip_sets: HcnIpSets::Auto,
            hcn_sim_mode: netpol_hcn::sim::SimMode::Ideal,
        };
        // What brute force finds, before the clusters go to `diff`.
        let parties: Vec<Party> = (0..pods.len())
            .map(|i| Party::Pod(PodRef { namespace: "x".into(), name: format!("p{i}") }))
            .collect();
        let mut differing = Vec::new();
        {
            let oracles = sides.each_ref().map(|c| oracle(reference, c).expect("a decider"));
            for from in &parties {
                for to in &parties {
                    for protocol in [Protocol::Tcp, Protocol::Udp, Protocol::Sctp] {
                        for port in SAMPLE {
                            let [was, now] = [0, 1].map(|i| {
                                decide_between(&sides[i], oracles[i].as_ref(), from, to, protocol, port)
                                    .map(|d| d.allowed())
                            });
                            if was != now {
                                differing.push((from.to_string(), to.to_string(), protocol, port, was, now));
                            }
                        }
                    }
                }
            }
        }
        let probes = probe_ports(&[&sides[0], &sides[1]], None, None);
        // The protocols each probe stands for: its own, and with "every UDP and SCTP port" those.
        let stands: Vec<Vec<String>> = probes
            .iter()
            .map(|&(protocol, port)| match plan.stands_for(protocol, port) {
                Stands::UnnamedProtocols(all) => all.iter().map(ToString::to_string).collect(),
                _ => vec![protocol.to_string()],
            })
            .collect();
        let mapstate = EngineArgs { engine: EngineKind::Mapstate, ..reference };
        let report = compare(sides.map(scenario), mapstate, ProbeArgs::default(), &mut std::io::sink())
            .expect("no output fails")
            .expect("the sides are decided");
        let mut reported = Vec::new();
        report.expand(|change| {
            let protocols = &stands[change.probe as usize];
            let [was, now] = report.decisions_of(change.probe, change.before, change.after);
            reported.push((
                report.parties[change.from as usize].0.clone(),
                report.parties[change.to as usize].0.clone(),
                protocols.clone(),
                was.allowed(),
                now.allowed(),
            ));
        });
        for (from, to, protocol, port, was, now) in differing {
            let found = reported.iter().any(|(f, t, p, w, n)| {
                *f == from && *t == to && p.contains(&protocol.to_string())
                    && Some(*w) == was && Some(*n) == now
            });
            prop_assert!(
                found,
                "{from} -> {to} {protocol}/{port} changes {was:?} -> {now:?}, but diff reports \
                 only {reported:?} on probes {:?}",
                report.probe_labels
            );
        }
    }
}
