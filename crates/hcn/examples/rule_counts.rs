//! Rule counts for a large synthetic cluster: every endpoint on one node compiled to HCN ACLs,
//! against the plan's naive expansion (one rule per peer and port, every port of a range a rule).
//!
//! `cargo run -p netpol-hcn --example rule_counts [pods namespaces policies nodes]`

use std::time::Instant;

use netpol_dev::synth::engine_terms::{ClusterSize, SyntheticCluster};
use netpol_engine::{Engine, EngineConfig};
use netpol_hcn::compile_acls;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let arg = |i: usize, default: usize| args.get(i).copied().unwrap_or(default);
    let size = ClusterSize {
        pods: arg(0, 10_000),
        namespaces: arg(1, 500),
        policies: arg(2, 2_000),
        nodes: arg(3, 100),
    };
    let cluster = SyntheticCluster::new(size.clone());
    let mut engine = Engine::new(EngineConfig {
        local_node: Some(cluster.node_name(0)),
        allow_node_probes: true,
    });
    cluster.stage_into(&mut engine);
    engine.commit();

    let started = Instant::now();
    let mut rows = Vec::new();
    for (key, map) in engine.endpoints() {
        match compile_acls(map, engine.identities()) {
            Ok(acls) => rows.push((
                key.to_string(),
                map.len(),
                acls.count.total(),
                netpol_hcn::naive::naive_rule_counts(map).total(),
            )),
            Err(e) => eprintln!("{key}: {e}"),
        }
    }
    let elapsed = started.elapsed();
    let stats = |f: fn(&(String, usize, usize, usize)) -> usize| {
        let mut v: Vec<usize> = rows.iter().map(f).collect();
        v.sort_unstable();
        let total: usize = v.iter().sum();
        (
            v.first().copied().unwrap_or(0),
            v.get(v.len() / 2).copied().unwrap_or(0),
            v.last().copied().unwrap_or(0),
            total,
        )
    };
    println!(
        "{} pods, {} namespaces, {} policies, {} nodes: {} local endpoints compiled in {:.1} ms",
        size.pods,
        size.namespaces,
        size.policies,
        size.nodes,
        rows.len(),
        elapsed.as_secs_f64() * 1000.0
    );
    for (name, f) in [
        (
            "MapState entries",
            (|r: &(String, usize, usize, usize)| r.1) as fn(&_) -> usize,
        ),
        ("HCN rules (compiled)", |r| r.2),
        ("HCN rules (naive)", |r| r.3),
    ] {
        let (min, median, max, total) = stats(f);
        println!("{name:>22}: min {min:>6}  median {median:>6}  max {max:>6}  total {total:>8}");
    }
}
