//! The enforcer over a fake kernel that refuses scripts holding a marker: a refusal stays with
//! the endpoint it belongs to, is reported by name, isolates that endpoint alone, and is retried.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use netpol_datapath::{
    ApplyReport, Backoff, CompiledPods, CompiledRules, DatapathError, Desired, Enforcer, LocalPods,
    OrderedRule, Outcome, RuleAction, ALL_PORTS,
};
use netpol_engine::reference::Reason;
use netpol_engine::{Direction, IdentityStore, Shared};
use netpol_nft::fake::FakeNft;
use netpol_nft::NftEnforcer;

fn pods(n: usize) -> (LocalPods, CompiledPods) {
    let mut pods = LocalPods::new();
    let mut compiled = CompiledPods::new();
    for i in 0..n {
        let key = if i == 1 {
            "x/evil".to_string()
        } else {
            format!("x/p{i}")
        };
        pods.insert(
            key.clone(),
            vec![format!("10.0.0.{}", i + 1).parse().unwrap()],
        );
        compiled.insert(
            key,
            Shared::new(CompiledRules {
                rules: Vec::new(),
                warnings: Vec::new(),
            }),
        );
    }
    (pods, compiled)
}

/// Enforces `compiled` on `pods` (rules without remote sets need no identities).
fn enforce(
    enforcer: &mut NftEnforcer,
    pods: &LocalPods,
    compiled: &CompiledPods,
    refresh: bool,
    now: Instant,
) -> Result<ApplyReport, DatapathError> {
    let desired = Desired {
        pods,
        compiled,
        identities: &IdentityStore::default(),
        changed: &BTreeSet::new(),
        audit: &Default::default(),
    };
    enforcer.enforce(&desired, refresh, now)
}

fn backoff() -> Backoff {
    Backoff {
        initial: Duration::from_secs(10),
        max: Duration::from_secs(60),
    }
}

#[test]
fn a_refused_endpoint_is_isolated_alone_reported_by_name_and_retried() {
    let kernel = FakeNft::new();
    kernel.poison("of x/evil\"");
    let mut enforcer = NftEnforcer::new(Box::new(kernel.clone()), backoff());
    let (pods, compiled) = pods(30);
    let start = Instant::now();

    let report = enforce(&mut enforcer, &pods, &compiled, false, start).unwrap();
    let Outcome::Failed {
        error, failures, ..
    } = &report.outcomes["x/evil"]
    else {
        panic!("{:?}", report.outcomes["x/evil"]);
    };
    assert_eq!(*failures, 1);
    let DatapathError::Call {
        endpoint, message, ..
    } = error
    else {
        panic!("{error:?}");
    };
    assert_eq!(endpoint.as_deref(), Some("x/evil"));
    assert!(message.contains("poison"), "{message}");
    let updated = report
        .outcomes
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Updated { .. }))
        .count();
    assert_eq!(updated, 29, "{:?}", report.outcomes);
    // Every other endpoint's two chains, the dispatch chain and three base chains.
    assert_eq!(kernel.chain_names().unwrap().len(), 2 * 29 + 4);
    let wakeup = enforcer.next_wakeup().expect("a retry is due");
    assert_eq!(wakeup, start + Duration::from_secs(10));

    // Before the retry is due another pod changes: it is programmed, the refused one waits.
    let (mut more, mut more_compiled) = (pods.clone(), compiled.clone());
    more.insert("x/new".into(), vec!["10.0.1.1".parse().unwrap()]);
    more_compiled.insert("x/new".into(), compiled["x/p0"].clone());
    let (_, _, refused_before) = kernel.counts();
    let report = enforce(
        &mut enforcer,
        &more,
        &more_compiled,
        false,
        start + Duration::from_secs(1),
    )
    .unwrap();
    assert!(matches!(report.outcomes["x/new"], Outcome::Updated { .. }));
    assert!(matches!(
        report.outcomes["x/evil"],
        Outcome::Deferred { .. }
    ));
    assert_eq!(
        kernel.counts().2,
        refused_before,
        "nothing refused meanwhile"
    );
    assert_eq!(kernel.chain_names().unwrap().len(), 2 * 30 + 4);

    // Still refused at the retry: the backoff doubles.
    let report = enforce(
        &mut enforcer,
        &more,
        &more_compiled,
        false,
        start + Duration::from_secs(11),
    )
    .unwrap();
    assert!(matches!(
        report.outcomes["x/evil"],
        Outcome::Failed { failures: 2, .. }
    ));
    assert_eq!(
        enforcer.next_wakeup(),
        Some(start + Duration::from_secs(31))
    );

    // Once the kernel takes it, it is programmed like any other.
    kernel.heal();
    let report = enforce(
        &mut enforcer,
        &more,
        &more_compiled,
        false,
        start + Duration::from_secs(31),
    )
    .unwrap();
    assert!(matches!(report.outcomes["x/evil"], Outcome::Updated { .. }));
    assert_eq!(report.failed(), 0);
    assert_eq!(enforcer.next_wakeup(), None);
    assert_eq!(kernel.chain_names().unwrap().len(), 2 * 31 + 4);
}

#[test]
fn an_nft_that_cannot_run_fails_the_whole_change_without_a_search() {
    let kernel = FakeNft::new();
    kernel.set_unavailable(true);
    let mut enforcer = NftEnforcer::new(Box::new(kernel.clone()), backoff());
    let (pods, compiled) = pods(5);
    let report = enforce(&mut enforcer, &pods, &compiled, false, Instant::now()).unwrap();
    assert_eq!(report.failed(), 5);
    assert_eq!(kernel.counts(), (0, 0, 0), "no transaction, no check");
    assert_eq!(kernel.chain_names(), None);
}

#[test]
fn an_endpoint_whose_rules_change_is_tried_again_at_once() {
    let kernel = FakeNft::new();
    kernel.poison("of x/evil\"");
    let mut enforcer = NftEnforcer::new(Box::new(kernel.clone()), backoff());
    let (pods, compiled) = pods(3);
    let start = Instant::now();
    enforce(&mut enforcer, &pods, &compiled, false, start).unwrap();
    // New rules for the refused endpoint (now loadable): no waiting for the backoff.
    kernel.heal();
    let mut changed = compiled.clone();
    let rules = CompiledRules {
        rules: vec![OrderedRule {
            direction: Direction::Ingress,
            action: RuleAction::Block,
            priority: 1,
            protocol: None,
            ports: vec![ALL_PORTS],
            remotes: None,
            reason: Arc::new(Reason::Default),
        }],
        warnings: Vec::new(),
    };
    changed.insert("x/evil".into(), Shared::new(rules));
    let report = enforce(
        &mut enforcer,
        &pods,
        &changed,
        false,
        start + Duration::from_secs(1),
    )
    .unwrap();
    assert!(matches!(report.outcomes["x/evil"], Outcome::Updated { .. }));
}
