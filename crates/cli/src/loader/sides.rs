//! Two clusters that differ only in policies, built from one reading of what they share:
//! `diff`'s BEFORE and AFTER when both are the shared manifests (`-f`) with other policies, or
//! the live cluster before and after policies are applied or deleted. The shared objects are
//! read once (not once per side), and both clusters hold one copy of the pods, namespaces and
//! nodes ([`ClusterModel`] shares them between clones): at 150,000 pods each copy is about 300 MB.
//!
//! Each side is what [`super::api::build_cluster`] builds from the base objects with its own
//! objects applied on top (same kind, namespace and name replaces), with the same warnings and
//! errors in the same order; only the identity numbers of the prefixes policies name differ
//! (both sides hold the prefixes of both, which decides nothing differently: a prefix no policy
//! of a side names is a finer cut of the space that side's policies treat alike).

use std::ops::Range;

use netpol_api::ObjectRef;

use super::api::{
    add_pods_and_nodes, finish, is_policy, read, translate_policy, Built, NamespaceLabels, Placed,
    ReadRules, Reading, Translated,
};
use super::cluster_model::ClusterModel;
use super::error::LoadErrors;
use super::objects::overlay;
use super::prepared::{Content, Origin, ReadOne};

/// One side: which base objects it does not have (by position in the base; none where
/// shorter), and its own objects, applied over the base as `kubectl apply` would.
#[derive(Debug, Default)]
pub struct SideObjects {
    pub deleted: Vec<bool>,
    pub own: Vec<ReadOne>,
}

impl SideObjects {
    fn deletes(&self, position: usize) -> bool {
        self.deleted.get(position).copied().unwrap_or(false)
    }
}

/// Whether the sides differ from the base only in policies: every object of their own is a
/// policy that was read (its fields may still be reported), and every base object one deletes
/// is a policy read without remark. Then every pod, namespace, node and workload is the base's
/// on both sides, and [`build_sides`] applies.
pub fn differ_in_policies_only(base: &[ReadOne], sides: &[SideObjects]) -> bool {
    let read_policy = |one: &ReadOne, clean: bool| match &one.content {
        Content::Object { read: Ok(read), .. } => {
            is_policy(&read.object) && (!clean || read.unknown_fields.is_empty())
        }
        _ => false,
    };
    sides.iter().all(|side| {
        side.own.iter().all(|one| read_policy(one, false))
            && base
                .iter()
                .enumerate()
                .all(|(position, one)| !side.deletes(position) || read_policy(one, true))
    })
}

/// Both sides' clusters, each as [`super::api::build_cluster`] would build it from the base
/// objects (an object given twice is the last one given) with the side's objects applied.
/// The sides must [`differ_in_policies_only`].
pub fn build_sides(
    base: Vec<ReadOne>,
    sides: [SideObjects; 2],
    rules: ReadRules,
) -> [Result<Built, LoadErrors>; 2] {
    let mut base_reading = Reading::default();
    let base = read(base, &rules, &mut base_reading);
    let base = overlay(Vec::new(), base, Placed::key);
    let (policies, others): (Vec<Placed>, Vec<Placed>) =
        base.into_iter().partition(Placed::is_policy);
    let namespaces = NamespaceLabels::of(&others);
    let mut cluster = ClusterModel::new();
    cluster.set_input_name(rules.input_name);
    let mut templates = Reading {
        templates: std::mem::take(&mut base_reading.templates),
        ..Reading::default()
    };
    add_pods_and_nodes(
        &mut cluster,
        others,
        &namespaces,
        &mut templates,
        &rules.placement,
    );
    // Each side's policies: the base's it keeps, replaced or joined by its own.
    let translated = sides.map(|mut side| {
        let mut reading = base_reading.copy();
        let own = read(std::mem::take(&mut side.own), &rules, &mut reading);
        let kept = policies.iter().filter(|p| !side.deletes(p.position));
        let objects = overlay(kept.collect(), own.iter().collect(), |p: &&Placed| p.key());
        let translated: Vec<(Origin, ObjectRef, Translated)> = objects
            .into_iter()
            .filter_map(|placed| {
                let translated = translate_policy(placed, &rules, &mut reading)?;
                Some((placed.origin.clone(), placed.key(), translated))
            })
            .collect();
        (reading, translated)
    });
    drop(policies);
    // Both sides' prefixes before the clusters are told apart, so that they stay shared.
    for (_, policies) in &translated {
        for entry in policies.iter().flat_map(|(_, _, t)| &t.entries) {
            cluster.add_prefixes_of(entry);
        }
    }
    translated.map(|(reading, translated)| {
        let mut side = cluster.clone();
        let mut policies: Vec<(Origin, ObjectRef, Range<usize>)> = Vec::new();
        for (origin, object, translated) in translated {
            let start = side.entries().len();
            side.add_entries(translated.entries);
            if !translated.failed {
                policies.push((origin, object, start..side.entries().len()));
            }
        }
        debug_assert!(side.shares_pods_with(&cluster));
        finish(side, reading, templates.copy(), &policies, &rules)
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::decide::class_matrix::{
        compute_between, node_parties, outside_parties, pod_parties, Party,
    };
    use crate::decide::{oracle, EngineArgs, EngineKind, HcnIpSets};
    use crate::loader::api::build_cluster;
    use crate::loader::stream::read_objects;

    /// Namespaces, two pods and a Deployment (which gives a third), a node, a Service (skipped),
    /// and policies: one isolating `x`, one with an `ipBlock` and its `except`, one selecting
    /// nothing, one with L7 rules (skipped).
    const BASE: &str = "\
apiVersion: v1
kind: Namespace
metadata: {name: x, labels: {team: a}}
---
apiVersion: v1
kind: Namespace
metadata: {name: y}
---
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {addresses: [{type: InternalIP, address: 10.0.0.1}]}
---
apiVersion: v1
kind: Pod
metadata: {namespace: x, name: a-1, labels: {app: a}}
spec: {nodeName: n1, containers: [{name: c, ports: [{name: http, containerPort: 8080}]}]}
status: {phase: Running, podIP: 10.1.0.1}
---
apiVersion: v1
kind: Pod
metadata: {namespace: y, name: b-1, labels: {app: b}}
spec: {nodeName: n1, containers: [{name: c}]}
status: {phase: Running, podIP: 10.2.0.1}
---
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: y, name: c}
spec: {template: {metadata: {labels: {app: c}}, spec: {containers: [{name: c}]}}}
---
apiVersion: v1
kind: Service
metadata: {namespace: y, name: s}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {namespace: x, name: isolate}
spec: {podSelector: {}, policyTypes: [Ingress]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {namespace: y, name: out}
spec:
  podSelector: {matchLabels: {app: b}}
  policyTypes: [Egress]
  egress: [{to: [{ipBlock: {cidr: 10.0.0.0/8, except: [10.1.0.0/16]}}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {namespace: y, name: nobody}
spec: {podSelector: {matchLabels: {app: none}}, policyTypes: [Ingress]}
---
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {namespace: y, name: l7}
spec:
  endpointSelector: {matchLabels: {app: b}}
  ingress: [{toPorts: [{ports: [{port: '80', protocol: TCP}], rules: {http: [{method: GET}]}}]}]
";

    /// BEFORE adds a policy naming another prefix; AFTER deletes `isolate` (position 7), replaces
    /// `out` with another prefix and adds a policy with an unknown field (read: --lenient).
    const BEFORE: &str = "\
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {namespace: y, name: world}
spec:
  podSelector: {}
  policyTypes: [Egress]
  egress: [{to: [{ipBlock: {cidr: 192.168.0.0/16}}]}]
";
    const AFTER: &str = "\
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {namespace: y, name: out}
spec:
  podSelector: {matchLabels: {app: b}}
  policyTypes: [Egress]
  egress: [{to: [{ipBlock: {cidr: 10.1.0.0/16}}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {namespace: x, name: from-y}
spec:
  podSelector: {}
  ingress: [{from: [{namespaceSelector: {}}], port: [80]}]
";

    fn objects(name: &str, text: &str) -> Vec<ReadOne> {
        read_objects(Path::new(name), text).expect("the test's YAML reads")
    }

    fn sides() -> [SideObjects; 2] {
        let mut deleted = vec![false; 8];
        deleted[7] = true;
        [
            SideObjects {
                deleted: Vec::new(),
                own: objects("before.yaml", BEFORE),
            },
            SideObjects {
                deleted,
                own: objects("after.yaml", AFTER),
            },
        ]
    }

    /// Every cell of every probe of `cluster`'s full matrix, by party name, with the regions
    /// outside the cluster `outside` (as `diff` cuts them, by both sides' prefixes).
    fn decisions(cluster: &ClusterModel, outside: &[Party]) -> Vec<(String, Option<String>)> {
        let mut parties = pod_parties(cluster);
        parties.extend(node_parties(cluster));
        parties.extend(outside.iter().cloned());
        let args = EngineArgs {
            engine: EngineKind::Mapstate,
            datapath: None,
            hcn_ip_sets: HcnIpSets::Auto,
            hcn_sim_mode: netpol_hcn::sim::SimMode::Ideal,
        };
        let oracle = oracle(args, cluster).expect("the engine decides");
        let classes = std::rc::Rc::new(crate::decide::class_matrix::pod_classes(
            cluster,
            &parties[..cluster.addressed_pods().count()],
        ));
        let mut cells = Vec::new();
        for (protocol, port) in crate::probe_ports::probe_ports(&[cluster], None, None) {
            let matrix =
                compute_between(cluster, oracle.as_ref(), &parties, &classes, protocol, port);
            for (i, from) in parties.iter().enumerate() {
                for (j, to) in parties.iter().enumerate() {
                    let cell = matrix.cell(i, j).map(|d| format!("{d:?}"));
                    cells.push((format!("{from} -> {to} {protocol}/{port}"), cell));
                }
            }
        }
        cells
    }

    #[test]
    fn each_side_is_what_its_own_build_would_be_and_the_pods_are_held_once() {
        let rules = ReadRules::manifests(true, false, Default::default());
        let [before, after] = build_sides(objects("base.yaml", BASE), sides(), rules.clone());
        let (before, after) = (before.expect("BEFORE loads"), after.expect("AFTER loads"));
        assert!(before.cluster.shares_pods_with(&after.cluster));
        let alone = sides().map(|side| {
            let base: Vec<ReadOne> = objects("base.yaml", BASE)
                .into_iter()
                .enumerate()
                .filter(|(i, _)| !side.deletes(*i))
                .map(|(_, one)| one)
                .collect();
            build_cluster(
                Vec::new(),
                base.into_iter().chain(side.own).collect(),
                rules.clone(),
            )
            .expect("the side loads alone")
        });
        let outside = outside_parties(&[&alone[0].cluster, &alone[1].cluster]);
        assert_eq!(outside.len(), 4, "{outside:?}");
        for (built, alone) in [&before, &after].into_iter().zip(&alone) {
            assert_eq!(built.warnings, alone.warnings);
            assert_eq!(built.inventory, alone.inventory);
            assert_eq!(built.cluster.entries(), alone.cluster.entries());
            let pods = |c: &ClusterModel| {
                c.pods()
                    .map(|(pod, ids)| (pod.clone(), ids.into_iter().cloned().collect::<Vec<_>>()))
                    .collect::<Vec<_>>()
            };
            assert_eq!(pods(&built.cluster), pods(&alone.cluster));
            assert_eq!(
                decisions(&built.cluster, &outside),
                decisions(&alone.cluster, &outside)
            );
        }
        // The sides differ: BEFORE adds `world`, AFTER has no `isolate` and adds `from-y`.
        assert_eq!(before.inventory.policies, 5);
        assert_eq!(after.inventory.policies, 4);
        assert_eq!(before.inventory.derived_pods, 1);
        assert_ne!(before.cluster.entries(), after.cluster.entries());
        let warnings = before.warnings.join("\n");
        for expected in ["Service (1)", "selects no pod", "the policy is skipped"] {
            assert!(warnings.contains(expected), "{expected}: {warnings}");
        }
        assert!(
            after.warnings.iter().any(|w| w.contains("read anyway")),
            "{:?}",
            after.warnings
        );
    }

    #[test]
    fn sides_with_other_objects_than_policies_are_built_alone() {
        let base = objects("base.yaml", BASE);
        assert!(differ_in_policies_only(&base, &sides()));
        let pod = objects("pod.yaml", BASE.split("---\n").nth(3).unwrap());
        let mut with_pod = sides();
        with_pod[1].own.extend(pod);
        assert!(!differ_in_policies_only(&base, &with_pod));
        let mut deleting_a_pod = sides();
        deleting_a_pod[0].deleted = vec![false, false, false, true];
        assert!(!differ_in_policies_only(&base, &deleting_a_pod));
    }
}
