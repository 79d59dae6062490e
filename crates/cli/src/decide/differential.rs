//! Grouping never changes a verdict: every cell of a class-based matrix (pods, nodes and the
//! regions outside the cluster) equals the flow decided for that pair of parties on its own,
//! on every scenario of the project and the shared scenarios, with every decider.

use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::matrix::{compute_between, decide_between, node_parties, outside_parties};
use super::matrix::{pod_classes, pod_parties};
use super::{oracle, DatapathKind, EngineArgs, EngineKind};
use crate::probes::ProbeArgs;
use crate::scenario::{Input, ReadFlags, Scenario};

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "topologies") {
                yaml_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "yaml") {
            out.push(path);
        }
    }
}

/// Every cell of the class-based matrices of `scenario` against the per-pair decision.
fn assert_classes_decide_as_pods(scenario: &Scenario, name: &str) -> usize {
    let cluster = &scenario.cluster;
    let mut cells = 0;
    for args in [
        EngineArgs {
            engine: EngineKind::Mapstate,
            datapath: None,
        },
        EngineArgs {
            engine: EngineKind::Reference,
            datapath: None,
        },
        EngineArgs {
            engine: EngineKind::Mapstate,
            datapath: Some(DatapathKind::HcnSim),
        },
    ] {
        let Ok(oracle) = oracle(args, cluster) else {
            continue;
        };
        let mut parties = pod_parties(cluster);
        let classes = Rc::new(pod_classes(cluster, &parties));
        parties.extend(node_parties(cluster));
        parties.extend(outside_parties(&[cluster]));
        let probes = ProbeArgs::default().ports(&[cluster]);
        for (protocol, port) in probes {
            let matrix =
                compute_between(cluster, oracle.as_ref(), &parties, &classes, protocol, port);
            for (i, from) in parties.iter().enumerate() {
                for (j, to) in parties.iter().enumerate() {
                    let alone = decide_between(cluster, oracle.as_ref(), from, to, protocol, port);
                    assert_eq!(
                        matrix.cell(i, j),
                        alone.as_ref(),
                        "{name}: {from} -> {to} {protocol}/{port} with {args:?}: the class \
                         matrix and the pair decided alone differ"
                    );
                    cells += 1;
                }
            }
        }
    }
    cells
}

#[test]
fn class_matrices_decide_every_cell_as_the_pair_alone() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for dir in [
        "examples/scenarios",
        "../shared/scenarios",
        "crates/cli/tests/fixtures",
    ] {
        yaml_files(&root.join(dir), &mut files);
    }
    let mut checked = 0;
    let mut cells = 0;
    for file in &files {
        // Fixtures include files made not to load.
        let Ok(scenario) = Scenario::load(file, ReadFlags::default()) else {
            continue;
        };
        cells += assert_classes_decide_as_pods(&scenario, &file.display().to_string());
        checked += 1;
    }
    let manifests = Input::Manifests(vec![
        root.join("examples/manifests/cluster.yaml"),
        root.join("examples/manifests/policies-after"),
    ]);
    let scenario = manifests
        .load(&mut std::io::empty(), ReadFlags::default())
        .expect("the example manifests load");
    cells += assert_classes_decide_as_pods(&scenario, "examples/manifests");
    assert!(checked >= 10, "only {checked} scenarios loaded");
    assert!(cells > 1000, "only {cells} cells compared");
}
