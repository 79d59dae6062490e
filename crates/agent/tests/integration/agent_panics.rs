//! A panic anywhere must not leave the agent looking alive while it enforces nothing (issue 18):
//! the daemon's hook ends the process with an error, and without it a panicking reconcile loop
//! fails `/healthz` at once.

use crate::agent_support;

use std::process::Command;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_support::*;
use netpol_agent::daemon::{exit_on_panic, PANIC_EXIT_CODE};
use netpol_agent::driver::{self, Input, LoopConfig};
use netpol_agent::health::Health;
use netpol_agent::metrics::Metrics;
use netpol_agent::reconciler::Pipeline;
use netpol_agent::sources::files::FileSource;
use netpol_datapath::{
    ApplyReport, CompileOptions, DatapathError, Desired, EndpointInfo, Enforcer,
};
use prometheus_client::registry::Registry;

/// A datapath with a bug: its first apply panics.
struct Panicking;

impl Enforcer for Panicking {
    fn enforce(
        &mut self,
        _: &Desired<'_>,
        _: bool,
        _: Instant,
    ) -> Result<ApplyReport, DatapathError> {
        panic!("a datapath bug");
    }

    fn endpoints(&self) -> &[(EndpointInfo, Option<String>)] {
        &[]
    }

    fn next_wakeup(&self) -> Option<Instant> {
        None
    }

    fn compile_options(&self) -> CompileOptions {
        CompileOptions::default()
    }
}

#[test]
fn a_panic_in_the_reconcile_loop_fails_liveness_at_once() {
    let dir = scratch_dir("panic-loop");
    copy_example_cluster(&dir);
    let metrics = Metrics::register(&mut Registry::default());
    let pipeline = Pipeline::with_enforcer(NODE, Box::new(Panicking), metrics);
    let health = Arc::new(Health::default());
    health.heartbeat();
    let (inputs, receiver) = mpsc::channel();
    let config = LoopConfig {
        debounce: Duration::from_millis(10),
        max_batch_delay: Duration::from_millis(100),
        resync_period: Duration::from_secs(600),
    };
    let reconcile = {
        let health = health.clone();
        std::thread::spawn(move || driver::run(pipeline, receiver, health, config))
    };
    assert_eq!(health.liveness(), Ok(()));

    // The cluster arrives; the first reconcile reaches the datapath, which panics.
    for event in settled_scan(&mut FileSource::new(&dir)).events {
        inputs.send(Input::Event(Box::new(event))).unwrap();
    }
    assert!(reconcile.join().is_err(), "the loop panicked");
    let reason = health.liveness().unwrap_err();
    assert!(reason.contains("the reconcile loop panicked"), "{reason}");
}

/// Set in the child process this test starts: where to panic.
const CHILD: &str = "NETPOL_PANIC_CHILD";
/// This test's full name in the test binary, which the child runs alone (`--exact`).
const TEST: &str = "agent_panics::a_panic_on_any_thread_ends_the_process_with_an_error";

/// In the child: the daemon's hook, then a panic on a thread or in a tokio task (which tokio
/// would otherwise catch and keep to itself). Exits 0 if the process survives the panic.
fn panic_in(place: &str) -> ! {
    exit_on_panic(Arc::new(Health::default()));
    match place {
        "thread" => {
            let worker = std::thread::Builder::new()
                .name("worker".into())
                .spawn(|| panic!("a deliberate panic on a thread"))
                .unwrap();
            let _ = worker.join();
        }
        _ => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let task = tokio::spawn(async { panic!("a deliberate panic in a task") });
                let _ = task.await;
            });
        }
    }
    std::process::exit(0);
}

#[test]
fn a_panic_on_any_thread_ends_the_process_with_an_error() {
    if let Ok(place) = std::env::var(CHILD) {
        panic_in(&place);
    }
    for (place, message) in [
        ("thread", "a deliberate panic on a thread"),
        ("task", "a deliberate panic in a task"),
    ] {
        let output = Command::new(std::env::current_exe().unwrap())
            .args([TEST, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD, place)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(PANIC_EXIT_CODE),
            "a panic in a {place}:\n{stderr}"
        );
        // The panic itself is printed, then why the process ends.
        assert!(stderr.contains(message), "{stderr}");
        assert!(
            stderr.contains(&format!("exiting with code {PANIC_EXIT_CODE}")),
            "{stderr}"
        );
    }
}
