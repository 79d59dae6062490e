//! netpol-agent's integration tests, one module per former test file, in one binary: each test
//! binary links every dependency again, so one binary per crate is what keeps the test build
//! short. Run one file's tests with `cargo test -p netpol-agent --test integration <module>::`.
//! `agent_live_cidr_size` and `agent_policy_size` stay binaries of their own: their global
//! allocator counts every thread's memory, so they must run alone.

mod agent_audit;
mod agent_budget_kinds;
mod agent_budgets;
mod agent_cluster;
mod agent_cluster_outages;
mod agent_cluster_reads;
mod agent_embedded;
mod agent_files;
mod agent_hns_restart;
mod agent_http;
mod agent_idle;
mod agent_indexes;
mod agent_manifests;
mod agent_nft_metrics;
mod agent_own_node;
mod agent_panics;
mod agent_patch;
mod agent_refusal_events;
mod agent_scale;
mod agent_slice_mode;
#[path = "../agent_support/mod.rs"]
mod agent_support;
mod controller_refusals;
mod controller_slices;
mod projection;
