#!/usr/bin/env python3
"""Writes network-policy-api's ClusterNetworkPolicy conformance tests (tag v0.2.0) as netpol
scenarios, one file per subtest, under examples/scenarios/conformance-v0.2.0/.

Usage: tools/conformance-scenarios.py GIT_DIR [TAG]
  GIT_DIR: a clone (bare or not) of kubernetes-sigs/network-policy-api.

Each upstream test (conformance/tests/*.go) is read statement by statement, the way the suite
runs it: `GetPod` names the server, `PokeServer` is one flow with its expected verdict, and the
rule swaps (`x := mutate.Spec.Ingress[0]`, `mutate.Spec.Ingress[0] = mutate.Spec.Ingress[1]`, ...)
patch the policy, the patch staying in force for the later subtests as it does upstream. A
subtest becomes a scenario holding the test's manifest as patched at that point and its flows.
A test using any other statement (computed CIDRs, host-network pods, new rules built in Go) is
not guessed at: it is listed as not expressed, with the statement, and written by hand if at
all (see docs/scenarios.md).
"""

import copy
import os
import re
import subprocess
import sys

import yaml  # PyYAML

OUT = os.path.join(os.path.dirname(__file__), "..", "examples", "scenarios", "conformance-v0.2.0")
PREFIX = "network-policy-conformance-"
HOUSES = {
    "gryffindor": "harry-potter",
    "slytherin": "draco-malfoy",
    "hufflepuff": "cedric-diggory",
    "ravenclaw": "luna-lovegood",
}


def git_show(git_dir, tag, path):
    return subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{tag}:{path}"],
        check=True, capture_output=True, text=True,
    ).stdout


def git_ls(git_dir, tag, path):
    out = subprocess.run(
        ["git", "--git-dir", git_dir, "ls-tree", "-r", "--name-only", tag, path],
        check=True, capture_output=True, text=True,
    ).stdout
    return [line for line in out.splitlines() if line.endswith(".go")]


def topology():
    """base/manifests.yaml's four houses, two StatefulSet pods each, as pods with addresses.
    (The fifth namespace, forbidden-forrest, holds host-network pods only.)"""
    objects = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"},
         "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}},
    ]
    for h, (house, pod) in enumerate(HOUSES.items()):
        ns = PREFIX + house
        objects.append({"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": ns, "labels": {"conformance-house": house}}})
        for i in range(2):
            name = f"{pod}-{i}"
            objects.append({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": ns, "labels": {
                    "conformance-house": house,
                    "statefulset.kubernetes.io/pod-name": name,
                    "apps.kubernetes.io/pod-index": str(i),
                }},
                "spec": {"nodeName": "node-1", "containers": [
                    {"name": f"{pod}-80", "ports": [
                        {"containerPort": 80, "protocol": "TCP", "name": "web"}]},
                    {"name": f"{pod}-53", "ports": [
                        {"containerPort": 53, "protocol": "UDP", "name": "dns"}]},
                ]},
                "status": {"podIP": f"10.2.{h}.{10 + i}"},
            })
    return {"objects": objects}


GET_POD = re.compile(r'(\w+)\s*:?=\s*kubernetes\.GetPod\(t, s\.Client, "([^"]+)", "([^"]+)"')
POKE = re.compile(
    r'kubernetes\.PokeServer\(t, s\.ClientSet, &s\.KubeConfig, "([^"]+)", "([^"]+)", "(\w+)",\s*'
    r'(\w+)\.Status\.PodIP, int32\((\d+)\), s\.TimeoutConfig, (true|false)\)')
GET_CNP = re.compile(r'cnp := kubernetes\.GetClusterNetworkPolicy\(t, s\.Client, "([^"]+)"')
SAVE = re.compile(r'(\w+) := mutate(?:\.DeepCopy\(\))?\.Spec\.(Ingress|Egress)\[(\d+)\]$')
STRING = re.compile(r'(\w+) := "([\w-]+)"$')
NAMED_PORT = re.compile(
    r'(\w+)\.Protocols = \[\]api\.ClusterNetworkPolicyProtocol\{ \{ DestinationNamedPort: (\w+), \}, \}$')
COPY = re.compile(r'mutate\.Spec\.(Ingress|Egress)\[(\d+)\] = mutate\.Spec\.(Ingress|Egress)\[(\d+)\]$')
RESTORE = re.compile(r'mutate\.Spec\.(Ingress|Egress)\[(\d+)\] = (\w+)$')
PRIORITY = re.compile(r'mutate\.Spec\.Priority = (\d+)$')
ACTION = re.compile(
    r'mutate\.Spec\.(Ingress|Egress)\[(\d+)\]\.Action = api\.ClusterNetworkPolicyRuleAction(\w+)$')
MASK = re.compile(
    r'if net\.IsIPv4String\(\w+\.Status\.PodIP\) \{ mask = "(/\d+)" \} else \{ mask = "(/\d+)" \}$')
NEW_CIDR_RULE = re.compile(
    r'(\w+) := \[\]api\.ClusterNetworkPolicy(Ingress|Egress)Rule\{ \{ Name: +"([\w-]+)", '
    r'Action: +"(\w+)", To: \[\]api\.ClusterNetworkPolicyEgressPeer\{ \{ Networks: \[\]api\.CIDR\{ '
    r'((?:api\.CIDR\(\w+\.Status\.PodIP \+ mask\), )+)\}, \}, \}, \}, \}$')
CIDR_OF_POD = re.compile(r'api\.CIDR\((\w+)\.Status\.PodIP \+ mask\)')
PREPEND = re.compile(r'mutate\.Spec\.(Ingress|Egress) = append\((\w+), mutate\.Spec\.(Ingress|Egress)\.\.\.\)$')
FETCH = re.compile(
    r'err := s\.Client\.Get\(ctx, client\.ObjectKey\{ Namespace: +"([\w-]+)", Name: +"([\w-]+)", \}, (\w+)\)$')
DELETE = re.compile(r'err = s\.Client\.Delete\(ctx, (\w+)\)$')
IGNORED = re.compile(
    r'^(mutate := cnp\.DeepCopy\(\)|kubernetes\.PatchClusterNetworkPolicy\(.*\)|\}\)|\},?|\{|'
    r'//.*|/\*.*\*/|var mask string|ctx, cancel := context\.WithTimeout\(.*\)|defer cancel\(\)|'
    r'\w+ := &networkingv1\.NetworkPolicy\{\}|require\.NoErrorf\(.*\)|)$')


def statements(body):
    """The statements of a Go function body, one spanning lines (a call, a composite literal)
    joined."""
    joined, depth = [], 0
    for line in body.splitlines():
        line = line.strip()
        if joined and depth > 0:
            joined[-1] += " " + line
        else:
            joined.append(line)
        depth += sum(line.count(c) for c in "({") - sum(line.count(c) for c in ")}")
        depth = max(depth, 0)
    return joined


def subtests(source):
    """(ShortName, manifest, [(title, [statements])])."""
    short = re.search(r'ShortName:\s*"(\w+)"', source).group(1)
    manifest = re.search(r'Manifests:\s*\[\]string\{"([^"]+)"\}', source).group(1)
    parts = re.split(r't\.Run\("([^"]+)", func\(t \*testing\.T\) \{', source)
    runs = [(parts[i], statements(parts[i + 1])) for i in range(1, len(parts), 2)]
    return short, manifest, runs


def kebab(name):
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", name).lower()


def run_test(short, policies, runs):
    """Scenarios of one test, or the statement it cannot express."""
    by_name = {p["metadata"]["name"]: p for p in policies}
    addresses = {
        f'{o["metadata"]["namespace"]}/{o["metadata"]["name"]}': o["status"]["podIP"]
        for o in topology()["objects"] if o["kind"] == "Pod"}
    pods, scenarios, mask, new_rules, fetched = {}, [], None, {}, {}
    for n, (title, stmts) in enumerate(runs, start=1):
        flows, saved, strings = [], {}, {}
        for st in stmts:
            if m := GET_POD.search(st):
                pods[m.group(1)] = f"{m.group(2)}/{m.group(3)}"
            elif m := POKE.search(st):
                if m.group(4) not in pods:
                    return None, st
                flows.append({
                    "from": f"{m.group(1)}/{m.group(2)}", "to": pods[m.group(4)],
                    "protocol": m.group(3).upper(), "port": int(m.group(5)),
                    "verdict": "allow" if m.group(6) == "true" else "deny"})
            elif m := GET_CNP.search(st):
                current = by_name[m.group(1)]
            elif m := SAVE.match(st):
                saved[m.group(1)] = copy.deepcopy(current["spec"][m.group(2).lower()][int(m.group(3))])
            elif m := STRING.match(st):
                strings[m.group(1)] = m.group(2)
            elif m := NAMED_PORT.match(st):
                if m.group(1) not in saved or m.group(2) not in strings:
                    return None, st
                saved[m.group(1)]["protocols"] = [{"destinationNamedPort": strings[m.group(2)]}]
            elif m := COPY.match(st):
                rules = current["spec"]
                rules[m.group(1).lower()][int(m.group(2))] = copy.deepcopy(
                    rules[m.group(3).lower()][int(m.group(4))])
            elif m := RESTORE.match(st):
                if m.group(3) not in saved:
                    return None, st
                current["spec"][m.group(1).lower()][int(m.group(2))] = copy.deepcopy(saved[m.group(3)])
            elif m := FETCH.match(st):
                fetched[m.group(3)] = (m.group(1), m.group(2))
            elif m := DELETE.match(st):
                if m.group(1) not in fetched:
                    return None, st
                namespace, name = fetched[m.group(1)]
                policies[:] = [p for p in policies if (p["metadata"].get("namespace"), p["metadata"]["name"]) != (namespace, name)]
            elif m := MASK.match(st):
                mask = m.group(1)  # the topology is IPv4
            elif m := NEW_CIDR_RULE.match(st):
                if mask is None or any(v not in pods for v in CIDR_OF_POD.findall(m.group(5))):
                    return None, st
                new_rules[m.group(1)] = [{
                    "name": m.group(3), "action": m.group(4),
                    "to": [{"networks": [addresses[pods[v]] + mask
                                         for v in CIDR_OF_POD.findall(m.group(5))]}]}]
            elif m := PREPEND.match(st):
                if m.group(2) not in new_rules or m.group(1) != m.group(3):
                    return None, st
                direction = m.group(1).lower()
                current["spec"][direction] = copy.deepcopy(new_rules[m.group(2)]) + current["spec"][direction]
            elif m := PRIORITY.match(st):
                current["spec"]["priority"] = int(m.group(1))
            elif m := ACTION.match(st):
                current["spec"][m.group(1).lower()][int(m.group(2))]["action"] = m.group(3)
            elif not IGNORED.match(st) and not st.startswith(("serverPod", "clientPod")):
                return None, st
        scenarios.append({
            "name": f"{kebab(short)}-{n}",
            "description": f"network-policy-api v0.2.0 conformance test {short}, subtest {n}: {title}",
            "topology": "conformance",
            "objects": yaml.safe_load(yaml.safe_dump(policies)),
            "expect": [{"flows": flows}],
        })
    return scenarios, None


def main():
    git_dir = sys.argv[1]
    tag = sys.argv[2] if len(sys.argv) > 2 else "v0.2.0"
    os.makedirs(os.path.join(OUT, "topologies"), exist_ok=True)
    with open(os.path.join(OUT, "topologies", "conformance.yaml"), "w") as f:
        f.write("# base/manifests.yaml of network-policy-api's conformance suite: four namespaces\n"
                "# (houses) of two StatefulSet pods each. Written by tools/conformance-scenarios.py.\n")
        yaml.safe_dump(topology(), f, sort_keys=False)
    skipped = []
    for path in sorted(git_ls(git_dir, tag, "conformance/tests/")):
        source = git_show(git_dir, tag, path)
        if "ShortName" not in source:
            continue
        # A file may hold more than one test.
        for chunk in re.split(r'(?=var \w+ = suite\.ConformanceTest\{)', source)[1:]:
            short, manifest, runs = subtests(chunk)
            text = git_show(git_dir, tag, "conformance/" + manifest)
            if "{{" in text:
                # Ports of host-network pods, chosen by the suite at run time.
                skipped.append((short, f"{manifest} is a template (host-network ports)"))
                continue
            policies = [d for d in yaml.safe_load_all(text) if d]
            scenarios, problem = run_test(short, policies, runs)
            if scenarios is None:
                skipped.append((short, problem))
                continue
            for s in scenarios:
                with open(os.path.join(OUT, s["name"] + ".yaml"), "w") as f:
                    f.write(f"# Generated by tools/conformance-scenarios.py from {path} ({tag}).\n")
                    yaml.safe_dump(s, f, sort_keys=False, width=100)
    for short, problem in skipped:
        print(f"not expressed: {short}: {problem}")


if __name__ == "__main__":
    main()
