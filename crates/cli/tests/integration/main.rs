//! netpol-cli's integration tests, one module per former test file, in one binary: each test
//! binary links every dependency again, so one binary per crate is what keeps the test build
//! short. Run one file's tests with `cargo test -p netpol-cli --test integration <module>::`.
//! `agent_soak` stays a binary of its own: it asserts on the process's RSS, which concurrent
//! tests would move.

mod acls_cli;
mod acls_sets_cli;
mod agent_audit_nftables;
mod agent_cluster_daemon;
mod agent_nftables;
mod agent_once;
mod agent_summary;
mod audit_check;
mod audit_cli;
mod authoring_cli;
mod authoring_findings;
mod check_paths;
mod cluster_cli;
mod diff_coverage;
mod diff_outputs;
mod docs_run;
mod lint_cli;
mod lint_explain;
mod lint_gating;
mod lint_sarif;
mod matrix_html_browser;
mod nftables_cli;
mod one_loader;
mod overlays_render;
mod readme_picture;
mod scenarios_cli;
mod stand_ins;
#[path = "../support/mod.rs"]
mod support;
