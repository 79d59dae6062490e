//! The nftables datapath's metrics, as the HCN datapath's: every `nft` call counted, failed ones
//! too, and timed; the rules in force; what an endpoint the kernel refuses costs and says; and
//! health knowing an `nft` that refuses a script (it answered) from one that cannot run. The kernel
//! is the in-memory fake of `netpol_nft::fake`.

use crate::agent_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_support::*;
use netpol_agent::health::Health;
use netpol_agent::instrumented::InstrumentedNft;
use netpol_agent::metrics::Metrics;
use netpol_agent::reconciler::Pipeline;
use netpol_agent::sources::files::FileSource;
use netpol_datapath::Backoff;
use netpol_nft::fake::FakeNft;
use netpol_nft::{NftBackend, NftEnforcer};
use prometheus_client::registry::Registry;

fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn nft_calls_errors_durations_and_rules_are_measured() {
    let dir = scratch_dir("nft-metrics");
    copy_example_cluster(&dir);
    let kernel = FakeNft::new();
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let health = Arc::new(Health::default());
    health.heartbeat();
    let backend =
        InstrumentedNft::new(Box::new(kernel.clone()), metrics.clone()).with_health(health.clone());
    let backoff = Backoff {
        initial: Duration::from_secs(1),
        max: Duration::from_secs(8),
    };
    let enforcer = NftEnforcer::new(Box::new(backend), backoff);
    let mut pipeline = Pipeline::with_enforcer(NODE, Box::new(enforcer), metrics.clone());
    let mut source = FileSource::new(&dir);
    for event in settled_scan(&mut source).events {
        pipeline.ingest(event);
    }
    let now = Instant::now();
    let text = |registry: &Registry| {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        text
    };

    let report = pipeline.reconcile(now).unwrap();
    assert!(report.complete(), "{:?}", report.apply);
    let first = text(&registry);
    let call = |text: &str, family: &str, call: &str| {
        metric(text, &format!("netpol_{family}{{call=\"{call}\"}}")).unwrap_or(0.0)
    };
    assert_eq!(call(&first, "datapath_calls_total", "nft_apply"), 1.0);
    assert_eq!(
        call(&first, "datapath_calls_total", "nft_list"),
        1.0,
        "only `list tables`: no table yet"
    );
    assert_eq!(call(&first, "datapath_errors_total", "nft_apply"), 0.0);
    assert_eq!(
        call(&first, "datapath_call_duration_seconds_count", "nft_apply"),
        1.0
    );
    let rules: usize = pipeline.compiled().values().map(|r| r.rules.len()).sum();
    assert!(rules > 0);
    assert_eq!(metric(&first, "netpol_acl_rules"), Some(rules as f64));
    assert_eq!(
        metric(
            &first,
            "netpol_endpoint_programs_total{outcome=\"updated\"}"
        ),
        Some(pipeline.compiled().len() as f64)
    );
    assert!(health
        .readiness()
        .is_err_and(|r| r.contains("first full sync")));

    // The table is lost (someone flushed the ruleset) and, rebuilding it, the kernel refuses one
    // endpoint's chains: found with check-only calls, counted as failed, the others programmed,
    // and nft still answers.
    let victim = pipeline.compiled().keys().next().unwrap().clone();
    kernel.apply("delete table inet netpol\n").unwrap();
    kernel.poison(&format!(" of {victim}\""));
    pipeline.request_resync();
    let report = pipeline.reconcile(now + Duration::from_secs(1)).unwrap();
    assert!(!report.complete());
    assert_eq!(report.apply.failed(), 1, "{:?}", report.apply);
    let second = text(&registry);
    assert!(
        call(&second, "datapath_errors_total", "nft_apply") >= 1.0,
        "{second}"
    );
    assert!(
        call(&second, "datapath_calls_total", "nft_check") >= 2.0,
        "{second}"
    );
    assert_eq!(
        metric(
            &second,
            "netpol_endpoint_programs_total{outcome=\"failed\"}"
        ),
        Some(1.0)
    );
    let victim_rules = pipeline.compiled()[&victim].rules.len();
    assert_eq!(
        metric(&second, "netpol_acl_rules"),
        Some((rules - victim_rules) as f64),
        "the refused endpoint's rules are not in force"
    );
    health.set_synced();
    assert_eq!(health.readiness(), Ok(()), "a refusal is an answer");

    // An nft that cannot run is no answer.
    kernel.set_unavailable(true);
    pipeline.request_resync();
    pipeline.reconcile(now + Duration::from_secs(60)).unwrap();
    assert_eq!(
        health.readiness(),
        Err("the datapath does not answer".to_string())
    );
}
