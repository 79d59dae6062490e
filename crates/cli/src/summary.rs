//! The `--once` summary: the local endpoints, their rules, and the connectivity between the local
//! pods as the programmed rules decide it. It stays a screenful on a node with hundreds of pods:
//! counts of allowed and denied pairs per probe, the per-endpoint table only up to
//! [`LISTED_ENDPOINTS`] endpoints, and the full matrices only with `--matrix`.

use std::io::{self, Write};
use std::net::IpAddr;
use std::time::Duration;

use netpol_engine::flow::AddressOracle;
use netpol_engine::{Direction, Protocol};
use netpol_hcn::oracle::packet;
use netpol_hcn::schema::AclAction;
use netpol_hcn::sim::HcnSim;

use netpol_agent::reconciler::Pipeline;
use netpol_agent::usage::Usage;

use crate::output::matrix_text::render;

/// One line on what the initial sync cost and what it holds: time, CPU, peak memory, identities
/// and MapState entries.
pub fn write_sync_cost(out: &mut dyn Write, pipeline: &Pipeline, wall: Duration) -> io::Result<()> {
    let engine = pipeline.engine();
    let store = engine.identities();
    let entries: usize = engine.endpoints().map(|(_, map)| map.len()).sum();
    let usage = Usage::of_this_process().map_or(String::new(), |u| {
        format!(
            ", {:.2} s CPU, peak RSS {} MB",
            u.cpu.as_secs_f64(),
            u.peak_rss / 1_000_000
        )
    });
    writeln!(
        out,
        "synced in {:.2} s{usage}: {} identities for {} pod and node addresses, {entries} MapState entries",
        wall.as_secs_f64(),
        store.len(),
        store.address_count(),
    )
}

/// Up to this many local endpoints the summary lists each one without `--matrix`.
pub const LISTED_ENDPOINTS: usize = 20;

/// Writes the summary. With a simulator the flows are evaluated on the rules it holds; without
/// one (a real host) they are the engine's verdict. `full` lists every endpoint and prints each
/// probe's matrix.
pub fn write(
    out: &mut dyn Write,
    node: &str,
    pipeline: &Pipeline,
    sim: Option<&HcnSim>,
    probes: &[(Protocol, u16)],
    full: bool,
) -> io::Result<()> {
    let compiled = pipeline.compiled();
    let rules: usize = compiled.values().map(|c| c.rules.len()).sum();
    let counts = pipeline.indexes().policy_counts();
    let valid: usize = counts.values().map(|c| c.valid).sum();
    let invalid: usize = counts.values().map(|c| c.invalid).sum();
    writeln!(
        out,
        "node {node}: {} local endpoints, {rules} ACL rules, {valid} policies in force ({invalid} invalid, skipped)",
        compiled.len()
    )?;
    if compiled.is_empty() {
        // The usual cause is a --node that names no node the pods are scheduled on.
        writeln!(
            out,
            "no pod is scheduled on node {node}: check --node (or NODE_NAME)"
        )?;
    }
    writeln!(out)?;
    if full || compiled.len() <= LISTED_ENDPOINTS {
        write_endpoints(out, pipeline)?;
    } else {
        writeln!(
            out,
            "{} local endpoints (--matrix lists each with its rule counts)",
            compiled.len()
        )?;
    }
    let source = if sim.is_some() {
        "the programmed HCN rules decide"
    } else {
        "the engine decides"
    };
    for (protocol, port) in probes {
        let (pods, symbols) = matrix(pipeline, sim, *protocol, *port);
        let count = |symbol: char| symbols.iter().flatten().filter(|&&s| s == symbol).count();
        let (allowed, denied) = (count('.'), count('X'));
        writeln!(out)?;
        writeln!(
            out,
            "{protocol}/{port} between the {} local pods, as {source} it: \
             {allowed} of {} pairs allowed, {denied} denied",
            pods.len(),
            allowed + denied
        )?;
        if full {
            writeln!(out, "(. allowed, X denied)")?;
            let labels: Vec<String> = pods.iter().map(|p| elide(p, NAME_WIDTH)).collect();
            for line in render(&labels, &symbols) {
                writeln!(out, "  {line}")?;
            }
        }
    }
    if !full && !compiled.is_empty() {
        writeln!(out)?;
        writeln!(out, "--matrix prints every pair.")?;
    }
    Ok(())
}

/// The widest a pod's name is printed in the summary's tables: `namespace/name` can be 317
/// characters, which would make every row that wide.
pub const NAME_WIDTH: usize = 48;

/// `name`, or when longer than `width` characters its head and tail around `...`, so that the
/// namespace and the distinguishing suffix (a ReplicaSet's hash) both stay visible.
pub fn elide(name: &str, width: usize) -> String {
    let count = name.chars().count();
    if count <= width {
        return name.to_owned();
    }
    let keep = width.saturating_sub(3);
    let head = keep / 2;
    let tail = keep - head;
    let front: String = name.chars().take(head).collect();
    let back: String = name.chars().skip(count - tail).collect();
    format!("{front}...{back}")
}

/// One line per local endpoint: its pod, endpoint id and rule counts.
fn write_endpoints(out: &mut dyn Write, pipeline: &Pipeline) -> io::Result<()> {
    let compiled = pipeline.compiled();
    let width = compiled
        .keys()
        .map(|pod| elide(pod, NAME_WIDTH).chars().count())
        .max()
        .unwrap_or(3)
        .max(3);
    writeln!(
        out,
        "{:<width$}  {:<14}  ingress  egress",
        "pod", "endpoint"
    )?;
    for (pod, rules) in compiled {
        let endpoint = pipeline
            .endpoints()
            .iter()
            .find(|(_, owner)| owner.as_deref() == Some(pod))
            .map_or("(none yet)", |(e, _)| e.id.as_str());
        let pod = elide(pod, NAME_WIDTH);
        writeln!(
            out,
            "{pod:<width$}  {endpoint:<14}  {:>7}  {:>6}",
            rules.count().ingress,
            rules.count().egress
        )?;
    }
    Ok(())
}

/// The local pods, and one cell per ordered pair of them: the source's egress and the
/// destination's ingress (`.` allowed, `X` denied, `-` undefined).
fn matrix(
    pipeline: &Pipeline,
    sim: Option<&HcnSim>,
    protocol: Protocol,
    port: u16,
) -> (Vec<String>, Vec<Vec<char>>) {
    let engine = pipeline.engine();
    let pods: Vec<(&str, IpAddr)> = engine
        .endpoints()
        .filter_map(|(key, _)| Some((key, *engine.endpoint_pod(key)?.1.first()?)))
        .collect();
    let endpoint_of = |pod: &str| {
        pipeline
            .endpoints()
            .iter()
            .find(|(_, owner)| owner.as_deref() == Some(pod))
            .map(|(e, _)| e.id.clone())
    };
    let allows = |pod: &str, local: IpAddr, direction, remote: IpAddr| -> bool {
        match sim {
            // A pod without an endpoint has no rules to stop anything.
            Some(sim) => endpoint_of(pod).is_none_or(|endpoint| {
                sim.evaluate(&endpoint, &packet(direction, remote, protocol, port))
                    .is_ok_and(|e| e.action == AclAction::Allow)
            }),
            None => engine
                .decide_address(local, direction, remote, protocol, port)
                .allowed(),
        }
    };
    let cells = pods
        .iter()
        .map(|(from, src)| {
            pods.iter()
                .map(|(to, dst)| {
                    let same_family = src.is_ipv4() == dst.is_ipv4();
                    if from == to || !same_family {
                        '-'
                    } else if allows(from, *src, Direction::Egress, *dst)
                        && allows(to, *dst, Direction::Ingress, *src)
                    {
                        '.'
                    } else {
                        'X'
                    }
                })
                .collect()
        })
        .collect();
    (
        pods.iter().map(|(key, _)| (*key).to_owned()).collect(),
        cells,
    )
}

#[cfg(test)]
mod elide_tests {
    use super::elide;

    #[test]
    fn long_names_keep_their_head_and_tail_within_the_width() {
        let long = format!("shop/{}-7d9f8b6c5d-x2x4q", "a".repeat(240));
        let short = elide(&long, 48);
        assert_eq!(short.chars().count(), 48);
        assert!(short.starts_with("shop/aaaa"), "{short}");
        assert!(short.ends_with("-7d9f8b6c5d-x2x4q"), "{short}");
        assert!(short.contains("..."));
        assert_eq!(elide("shop/web", 48), "shop/web");
        assert_eq!(elide(&"b".repeat(48), 48), "b".repeat(48));
    }
}
