//! Reading the per-rule counters of one node of a cluster at Kubernetes' published limits
//! (150,000 pods, 5,000 nodes, 36,000 policies; issue 41): what the agent does at each scrape of
//! `/metrics` after `nft -j -t list ruleset` (no set elements) returned. The listing
//! is parsed, each counted rule labelled through the [`RuleBook`] of the table netpol programs
//! for node-0, and the counts summed by policy rule ([`CounterTotals`]). The listing is made in
//! the kernel's JSON shape from that table: every endpoint chain rule with a set match, its
//! counter and its verdict, the log chains' and dispatch chain's rules beside them. Figures are
//! reported in docs/performance.md. (What `nft` itself takes to list the table, and the kernel's
//! counting, are not in this process and not measured here.)

use criterion::{criterion_group, criterion_main, Criterion};
use netpol_datapath::{compile_engine, CompileOptions};
use netpol_dev::synth::engine_terms::{ClusterSize, SyntheticCluster};
use netpol_engine::{Engine, EngineConfig};
use netpol_nft::counters::{parse_counters, CounterTotals, RuleBook};
use netpol_nft::script::RenderMemo;
use netpol_nft::{Ruleset, Table};

/// The table node-0 of the 150,000-pod synthetic cluster gets, with the book of its rules.
fn node_table() -> (Table, RuleBook) {
    let cluster = SyntheticCluster::new(ClusterSize {
        namespaces: 7_500,
        pods: 150_000,
        nodes: 5_000,
        policies: 36_000,
    });
    let mut engine = Engine::new(EngineConfig {
        local_node: Some(cluster.node_name(0)),
        allow_node_probes: true,
    });
    cluster.stage_into(&mut engine);
    engine.commit();
    let compiled = compile_engine(&engine, &CompileOptions::default()).expect("compiles");
    let mut ruleset = Ruleset::default();
    for endpoint in &compiled {
        ruleset.add(
            endpoint.key,
            endpoint.addresses.clone(),
            &endpoint.rules.rules,
            engine.identities(),
        );
    }
    let mut memo = RenderMemo::default();
    let table = Table::with_memo(&ruleset, &mut memo).expect("renders");
    let book = RuleBook::build(memo.chains(), ruleset.addresses());
    (table, book)
}

/// netpol's part of `nft -j -t list ruleset` as the kernel would answer it for `table`: one
/// object per rule of every chain, endpoint rules with a set match and a counter.
fn listing(table: &Table) -> (String, usize) {
    let mut items = vec![r#"{"metainfo": {"version": "1.0.6"}}"#.to_string()];
    let mut counted = 0;
    let mut handle = 0u64;
    let chains = table
        .chains
        .iter()
        .chain(std::iter::once((&table.dispatch.0, &table.dispatch.1)));
    for (name, lines) in chains {
        items.push(format!(
            r#"{{"chain": {{"family": "inet", "table": "netpol", "name": "{name}", "handle": {handle}}}}}"#
        ));
        // The first line of an endpoint chain is its comment, not a rule.
        for line in lines.iter().filter(|l| !l.starts_with("comment")) {
            handle += 1;
            let expr = if line.contains("counter") {
                counted += 1;
                format!(
                    r#"{{"match": {{"op": "==", "left": {{"payload": {{"protocol": "ip", "field": "saddr"}}}}, "right": "@s_{handle:x}"}}}}, {{"counter": {{"packets": {}, "bytes": {}}}}}, {{"return": null}}"#,
                    handle * 7,
                    handle * 700
                )
            } else {
                r#"{"jump": {"target": "elsewhere"}}"#.to_string()
            };
            items.push(format!(
                r#"{{"rule": {{"family": "inet", "table": "netpol", "chain": "{name}", "handle": {handle}, "expr": [{expr}]}}}}"#
            ));
        }
    }
    (
        format!(r#"{{"nftables": [{}]}}"#, items.join(", ")),
        counted,
    )
}

fn bench_reading_counters_150k(c: &mut Criterion) {
    let started = std::time::Instant::now();
    let (table, book) = node_table();
    let (listing, counted) = listing(&table);
    let counts = parse_counters(&listing).expect("the listing parses");
    assert_eq!(counts.len(), counted);
    let mut totals = CounterTotals::default();
    let series = totals.update(&counts, &book).len();
    assert!(
        series > 0,
        "every counted rule is a policy rule of the book"
    );
    eprintln!(
        "150k pods, node-0: built in {:.1} s; {} chains, {counted} counted rules, listing {:.1} KB, {series} series",
        started.elapsed().as_secs_f64(),
        table.chains.len() + 1,
        listing.len() as f64 / 1024.0,
    );
    c.bench_function("reading_counters_150k/parse_listing", |b| {
        b.iter(|| parse_counters(&listing).unwrap())
    });
    c.bench_function("reading_counters_150k/parse_label_and_sum", |b| {
        b.iter(|| {
            let counts = parse_counters(&listing).unwrap();
            totals.update(&counts, &book)
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench_reading_counters_150k
}
criterion_main!(benches);
