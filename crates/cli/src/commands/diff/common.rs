//! `diff BEFORE AFTER` given two whole folders (two checkouts of a manifests repository, two
//! `kubectl get -o yaml` dumps saved side by side) that differ in policies only: the files
//! both hold byte for byte are read once and both clusters share their pods, as with `-f
//! SHARED` ([`Scenario::from_sides`]). *Why:* at 150,000 pods each side's reading and pods
//! cost about 400 MB, and reading the second while holding the first took `diff` past a
//! gigabyte for what `-f` answers in 700 MB.
//!
//! The result is exactly what loading each folder alone gives, or this path is not taken: a
//! side's own objects (in files that differ) must all be policies (checked by
//! [`differ_in_policies_only`]) and none may name an object a shared file also holds (loading
//! alone, the later file in path order would win; here the side's own file always would).

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use netpol_api::ObjectRef;

use crate::loader::{
    differ_in_policies_only, load_objects, manifest_files, LoadErrors, ReadFlags, ReadOne,
    Scenario, SideObjects,
};

/// Both sides' scenarios when BEFORE and AFTER are folders sharing identical files and
/// differing in policies only; `None` where that does not apply (then each is loaded alone).
pub fn load_common(
    before: &Path,
    after: &Path,
    flags: ReadFlags,
) -> Option<[Result<Scenario, LoadErrors>; 2]> {
    if !(before.is_dir() && after.is_dir()) {
        return None;
    }
    let files = [before, after].map(|root| {
        let files = manifest_files(&[root.to_path_buf()]).ok()?;
        files
            .into_iter()
            .map(|f| Some((f.strip_prefix(root).ok()?.to_path_buf(), f)))
            .collect::<Option<BTreeMap<PathBuf, PathBuf>>>()
    });
    let [Some(before_files), Some(after_files)] = files else {
        return None;
    };
    // Files at the same place in both folders holding the same bytes are shared (read from
    // BEFORE); every other file is its side's own.
    let mut shared = Vec::new();
    let mut own: [Vec<PathBuf>; 2] = Default::default();
    for (relative, path) in &before_files {
        match after_files.get(relative) {
            Some(other) if same_bytes(path, other).ok()? => shared.push(relative),
            _ => own[0].push(path.clone()),
        }
    }
    own[1].extend(
        after_files
            .iter()
            .filter(|(relative, _)| !shared.contains(relative))
            .map(|(_, path)| path.clone()),
    );
    if shared.is_empty() {
        return None;
    }
    let shared: Vec<PathBuf> = shared
        .into_iter()
        .map(|r| before_files[r].clone())
        .collect();
    // The shared objects first: read after the sides' own, 150,000 pods peaked 140 MB higher.
    let base = load_objects(&shared, &mut std::io::empty()).ok()?;
    let sides = own.map(|paths| {
        load_objects(&paths, &mut std::io::empty())
            .ok()
            .map(|own| SideObjects {
                deleted: Vec::new(),
                own,
            })
    });
    let [Some(before_side), Some(after_side)] = sides else {
        return None;
    };
    let sides = [before_side, after_side];
    if !differ_in_policies_only(&base, &sides) || names_a_shared_object(&base, &sides) {
        return None;
    }
    let names = [before, after].map(|p| p.display().to_string());
    Some(Scenario::from_sides(base, sides, names, flags))
}

/// Whether two files hold the same bytes, read a block at a time (a pods file is 100 MB).
fn same_bytes(a: &Path, b: &Path) -> std::io::Result<bool> {
    if std::fs::metadata(a)?.len() != std::fs::metadata(b)?.len() {
        return Ok(false);
    }
    let (mut a, mut b) = (
        BufReader::new(File::open(a)?),
        BufReader::new(File::open(b)?),
    );
    let (mut left, mut right) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let n = a.read(&mut left)?;
        if n == 0 {
            // Equal lengths: the other is at its end too, unless it grew meanwhile.
            return Ok(b.read(&mut right[..1])? == 0);
        }
        b.read_exact(&mut right[..n])?;
        if left[..n] != right[..n] {
            return Ok(false);
        }
    }
}

/// Whether an object of a side's own files has the kind, namespace and name of an object in
/// the shared files.
fn names_a_shared_object(base: &[ReadOne], sides: &[SideObjects]) -> bool {
    let key = |one: &ReadOne| one.object_ref();
    let shared: HashSet<ObjectRef> = base.iter().filter_map(key).collect();
    sides
        .iter()
        .flat_map(|side| &side.own)
        .filter_map(key)
        .any(|own| shared.contains(&own))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::ClusterModel;

    const PODS: &str = "\
apiVersion: v1
kind: Namespace
metadata: {name: x}
---
apiVersion: v1
kind: Pod
metadata: {namespace: x, name: a, labels: {app: a}}
spec: {nodeName: n1, containers: [{name: c}]}
status: {phase: Running, podIP: 10.1.0.1}
---
apiVersion: v1
kind: Pod
metadata: {namespace: x, name: b, labels: {app: b}}
spec: {nodeName: n1, containers: [{name: c}]}
status: {phase: Running, podIP: 10.1.0.2}
";
    const ISOLATE_A: &str = "\
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {namespace: x, name: isolate}
spec: {podSelector: {matchLabels: {app: a}}, policyTypes: [Ingress]}
";
    const ISOLATE_B: &str = "\
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {namespace: x, name: isolate}
spec: {podSelector: {matchLabels: {app: b}}, policyTypes: [Ingress]}
";

    /// Two folders under a fresh scratch folder, each file given as (name, text).
    fn folders(test: &str, before: &[(&str, &str)], after: &[(&str, &str)]) -> [PathBuf; 2] {
        let root =
            std::env::temp_dir().join(format!("netpol-common-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        [("before", before), ("after", after)].map(|(side, files)| {
            let dir = root.join(side);
            std::fs::create_dir_all(&dir).unwrap();
            for (name, text) in files {
                std::fs::write(dir.join(name), text).unwrap();
            }
            dir
        })
    }

    fn flags() -> ReadFlags {
        ReadFlags::default()
    }

    fn loaded(paths: &[PathBuf; 2]) -> Option<[Scenario; 2]> {
        let [before, after] = load_common(&paths[0], &paths[1], flags())?;
        Some([before.expect("BEFORE loads"), after.expect("AFTER loads")])
    }

    fn alone(path: &Path) -> ClusterModel {
        Scenario::from_manifests(&[path.to_path_buf()], &mut std::io::empty(), flags())
            .expect("the folder loads alone")
            .cluster
    }

    #[test]
    fn folders_that_differ_in_a_policy_share_their_pods_and_load_as_each_alone() {
        let paths = folders(
            "policy",
            &[("pods.yaml", PODS), ("policies.yaml", ISOLATE_A)],
            &[("pods.yaml", PODS), ("policies.yaml", ISOLATE_B)],
        );
        let [before, after] = loaded(&paths).expect("the shared path applies");
        assert!(before.cluster.shares_pods_with(&after.cluster));
        for (side, path) in [&before, &after].into_iter().zip(&paths) {
            let alone = alone(path);
            assert_eq!(side.cluster.entries(), alone.entries());
            let pods = |c: &ClusterModel| c.pods().map(|(pod, _)| pod.clone()).collect::<Vec<_>>();
            assert_eq!(pods(&side.cluster), pods(&alone));
            assert_eq!(side.name, path.display().to_string());
        }
        assert_ne!(before.cluster.entries(), after.cluster.entries());
    }

    #[test]
    fn folders_that_differ_in_more_than_policies_or_overlap_load_alone() {
        let moved_pod = PODS.replace("10.1.0.2", "10.1.0.3");
        let pod_changed = folders(
            "pod",
            &[("pods.yaml", PODS), ("policies.yaml", ISOLATE_A)],
            &[("pods.yaml", &moved_pod), ("policies.yaml", ISOLATE_A)],
        );
        assert!(loaded(&pod_changed).is_none(), "a pod differs");
        // `isolate` is in a shared file and in AFTER's own: alone, the later file wins.
        let overlapping = folders(
            "overlap",
            &[("a.yaml", ISOLATE_A), ("pods.yaml", PODS)],
            &[
                ("a.yaml", ISOLATE_A),
                ("pods.yaml", PODS),
                ("z.yaml", ISOLATE_B),
            ],
        );
        assert!(
            loaded(&overlapping).is_none(),
            "an own object names a shared one"
        );
        let nothing_shared = folders("none", &[("pods.yaml", PODS)], &[("pods.yaml", &moved_pod)]);
        assert!(loaded(&nothing_shared).is_none(), "no file is shared");
    }
}
