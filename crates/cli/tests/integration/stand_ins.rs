//! Peers that can select pods the manifests do not hold (`namespaceSelector: {}`, a selector on
//! labels no manifest carries, a namespace not held) are shown by stand-ins in `diff` and
//! `matrix`, as outside addresses are by regions, and `lint` names the widest of them: a CI gate
//! on a GitOps repository sees that a rule admits every namespace of the cluster.

use crate::support;

use std::path::Path;

use support::{netpol, stderr, stdout};

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/stand-ins")
        .join(name)
        .to_str()
        .unwrap()
        .to_owned()
}

const ISOLATED: &str = "ingress: deny: no Normal-tier rule matched and NetworkPolicy \
                        data/postgres-from-orders isolates the pod";
const ADMITTED: &str = "egress: allow: no rule matched and nothing isolates the pod: default \
                        allow; ingress: allow by NetworkPolicy data/postgres-from-orders rule \
                        ingress[0] (Normal tier)";

/// The example: `- namespaceSelector: {}` added as its own peer to a database policy.
#[test]
fn diff_shows_a_peer_of_every_namespace_as_the_stand_ins_it_admits() {
    let (app, before, after) = (fixture("app"), fixture("before"), fixture("after"));
    let output = netpol(&["diff", "-f", &app, &before, &after, "--port", "5432"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let flow = |from: &str| {
        format!(
            "{from} -> data/postgres TCP/5432 (pg): deny -> allow\n  before: {ISOLATED}\n  \
             after:  {ADMITTED}\n"
        )
    };
    assert_eq!(
        stdout(&output),
        format!(
            "{}{}{}stand-ins (for pods the inputs do not hold that a policy's peer can select), \
             compared as pods: (other namespaces)/(any pod), data/(other pods), orders/(other \
             pods)\n3 flows change (0 newly denied, 3 newly allowed) between 2 pods, 3 \
             stand-ins, 1 nodes and 1 regions outside the cluster on TCP/5432 (pg)\n",
            flow("(other namespaces)/(any pod)"),
            flow("data/(other pods)"),
            flow("orders/(other pods)"),
        )
    );

    // The JSON names the stand-ins apart from the pods of the manifests.
    let output = netpol(&["diff", "-f", &app, &before, &after, "-o", "json"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["pods_compared"], 2);
    assert_eq!(
        json["stand_ins"],
        serde_json::json!([
            "(other namespaces)/(any pod)",
            "data/(other pods)",
            "orders/(other pods)"
        ])
    );
    assert_eq!(json["newly_allowed"], 3);

    // Peers naming only the pods the manifests hold add no stand-in: no change is no change.
    let output = netpol(&["diff", "-f", &app, &before, &before]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    assert!(!stdout(&output).contains("stand-in"), "{}", stdout(&output));
}

#[test]
fn lint_names_the_peer_of_every_namespace() {
    let output = netpol(&["lint", "-f", &fixture("app"), "-f", &fixture("after")]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stdout(&output).starts_with(
            "warning: open-to-all-pods NetworkPolicy data/postgres-from-orders spec.ingress[0]: \
             admits every pod of every namespace of the cluster on TCP/5432"
        ),
        "{}",
        stdout(&output)
    );
    let output = netpol(&["lint", "-f", &fixture("app"), "-f", &fixture("before")]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
}

#[test]
fn matrix_has_a_row_and_column_per_stand_in() {
    let (app, after) = (fixture("app"), fixture("after"));
    let output = netpol(&["matrix", "-f", &app, "-f", &after, "--port", "5432"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "\
TCP/5432 (pg): 29 of 30 flows allowed
  from \\ to                         1  2  3  4  5  6  7
  1 (other namespaces)/(any pod) ~  -  .  .  .  .  -  .
  2 data/(other pods) ~             .  -  .  .  .  -  .
  3 data/postgres *                 .  .  .  .  .  -  .
  4 orders/(other pods) ~           .  .  .  -  .  -  .
  5 orders/api *                    .  .  .  .  .  -  .
  6 node assigned-node              -  -  -  -  -  -  -
  7 0.0.0.0/0                       .  .  X  .  .  -  -

. allowed (a pod to itself always: it is not subject to policy), X denied, - no flow (a node or outside address to itself; between nodes and outside addresses; a pod and its own node)
* the pod of a workload's template, its address and node assigned (--pod-cidr, --assign-nodes)
~ a stand-in for the pods a policy's peer can select that the input does not hold (other pods of a namespace, pods of any other namespace, pods labelled as a selector asks): placed as a workload's pod; its flows among the pods it stands for are not shown
"
    );
    // Before, the database admits orders/api alone: every stand-in row is denied into it, so
    // none is shown (no peer selects one).
    let output = netpol(&[
        "matrix",
        "-f",
        &app,
        "-f",
        &fixture("before"),
        "--port",
        "5432",
    ]);
    assert!(!stdout(&output).contains('~'), "{}", stdout(&output));
    // `-o scenario` writes expectations for a scenario, which holds no stand-in.
    let output = netpol(&[
        "matrix", "-f", &app, "-f", &after, "--port", "5432", "-o", "scenario",
    ]);
    assert!(!stdout(&output).contains("(other"), "{}", stdout(&output));
    // The JSON marks them.
    let output = netpol(&[
        "matrix", "-f", &app, "-f", &after, "--port", "5432", "-o", "json",
    ]);
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let stand_ins: Vec<&str> = json["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["stand_in"] == true)
        .map(|g| g["label"].as_str().unwrap())
        .collect();
    assert_eq!(
        stand_ins,
        [
            "(other namespaces)/(any pod)",
            "data/(other pods)",
            "orders/(other pods)"
        ]
    );
}

/// A selector on labels no manifest carries, a namespace labelled as none here is, a namespace
/// named but not held: each gets a stand-in labelled as its peer asks.
#[test]
fn peers_that_select_no_held_pod_get_a_stand_in_labelled_as_they_ask() {
    let output = netpol(&[
        "diff",
        "-f",
        &fixture("app"),
        &fixture("before"),
        &fixture("unheld"),
        "--port",
        "5432",
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let out = stdout(&output);
    for from in [
        "(namespaces {team=ops})/(any pod)",
        "billing/(pods {tier})",
        "data/(pods {role=admin})",
    ] {
        assert!(
            out.contains(&format!(
                "{from} -> data/postgres TCP/5432 (pg): deny -> allow\n  before: {ISOLATED}\n"
            )),
            "{from}: {out}"
        );
    }
    // The held pods' flows do not change, and no unlabelled stand-in is admitted.
    assert!(
        out.contains(
            "3 flows change (0 newly denied, 3 newly allowed) between 2 pods, 3 stand-ins"
        ),
        "{out}"
    );
}
