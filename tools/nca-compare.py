#!/usr/bin/env python3
"""Compares netpol's verdicts with NCA's (IBM network-config-analyzer) flow by flow.

    tools/nca-compare.py NCA_TXT NETPOL_JSON...

NCA_TXT is what `nca --connectivity -r DIR --output_format txt_no_fw_rules --output_endpoints
pods` writes: one line per pair of endpoints with some allowed connection,
`SRC => DST : CONNECTIONS`, where CONNECTIONS is `All connections` or sets such as
`{protocols:TCP,dst_ports:8080},{protocols:UDP,dst_ports:53}`; a pair it does not list has no
allowed connection. NETPOL_JSON is what `netpol matrix -f DIR -o json` prints (repeatable:
several runs, e.g. every probe port and `--protocol TCP --port 80`, a port no policy names).

The flows compared are those both tools decide: between two distinct pods that both name, on
every protocol/port netpol probes. NCA shows the pods of one owner through one or two of them;
those are compared, and its simulated pods (`-livesim`) are not pods of the cluster. Flows with
addresses outside the cluster and with nodes are not compared (NCA reads no nodes, and names
address ranges where netpol names policy regions). Prints the counts and every disagreement
(at most 40 lines, then a count), and exits 1 when there is a disagreement, 2 on unreadable
input.
"""

import json
import re
import sys
from collections import defaultdict


def parse_ports(text):
    """A port set such as `80,8080-8090` as a list of (low, high) ranges."""
    ranges = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            low, high = part.split("-", 1)
            ranges.append((int(low), int(high)))
        else:
            ranges.append((int(part), int(part)))
    return ranges


FIELD = re.compile(r"(\w+):(.*?)(?=,\w+:|$)")


def parse_connections(text):
    """A function (protocol, port) -> allowed, from NCA's connection text."""
    text = text.strip()
    if text == "All connections":
        return lambda protocol, port: True
    if text in ("", "No connections"):
        return lambda protocol, port: False
    sets = []
    for group in re.findall(r"\{([^}]*)\}", text):
        fields = dict(FIELD.findall(group))
        unknown = set(fields) - {"protocols", "dst_ports"}
        if unknown:
            raise ValueError(f"connection fields netpol cannot probe: {sorted(unknown)} in {text}")
        protocols = {p.strip() for p in fields.get("protocols", "").split(",") if p.strip()}
        ports = parse_ports(fields["dst_ports"]) if "dst_ports" in fields else None
        sets.append((protocols, ports))
    if not sets:
        raise ValueError(f"unreadable connections: {text}")

    def allowed(protocol, port):
        for protocols, ports in sets:
            if protocols and protocol not in protocols:
                continue
            if ports is None or any(low <= port <= high for low, high in ports):
                return True
        return False

    return allowed


def read_nca(path):
    pods = set()
    allowed = {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if " => " not in line:
                continue
            pair, _, connections = line.partition(" : ")
            src, _, dst = pair.partition(" => ")
            src, dst = src.strip(), dst.strip()
            for end in (src, dst):
                if "/" in end and not end.endswith("-livesim"):
                    pods.add(end)
            allowed[(src, dst)] = parse_connections(connections)
    return pods, allowed


def read_netpol(path):
    """Per probe (protocol, port), a function (src pod, dst pod) -> "allow", "deny" or None
    (undefined), from `netpol matrix -o json` (groups, and per matrix its decisions and rows of
    runs `[first, last, decision]` over the parties; see docs/cli.md)."""
    with open(path) as f:
        document = json.load(f)
    group_of = {}
    for g, group in enumerate(document["groups"]):
        for pod in group["pods"]:
            group_of[pod] = g
    probes = []
    for matrix in document["matrices"]:
        verdicts = [d["verdict"] for d in matrix["decisions"]]
        rows = {row["from"]: row["to"] for row in matrix["rows"]}

        def cell(src, dst, rows=rows, verdicts=verdicts):
            if src == dst:
                return None
            to = group_of[dst]
            for first, last, decision in rows.get(group_of[src], []):
                if first <= to <= last:
                    return verdicts[decision]
            return None

        probes.append(((matrix["protocol"], matrix["port"]), cell))
    return set(group_of), probes


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        nca_pods, nca = read_nca(sys.argv[1])
        netpol_pods, probes = set(), []
        for path in sys.argv[2:]:
            pods, more = read_netpol(path)
            netpol_pods |= pods
            probes += more
    except (OSError, ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not probes:
        print("error: no matrix in the netpol output", file=sys.stderr)
        return 2
    missing = sorted(nca_pods - netpol_pods)
    if missing:
        print(f"error: pods NCA names that netpol does not: {missing[:10]}", file=sys.stderr)
        return 2
    pods = sorted(nca_pods)
    compared = agreed = 0
    allowed_both = denied_both = 0
    disagreements = defaultdict(list)
    for (protocol, port), cell in probes:
        for src in pods:
            for dst in pods:
                verdict = cell(src, dst)
                if verdict is None:
                    continue
                ours = verdict == "allow"
                decide = nca.get((src, dst))
                theirs = bool(decide and decide(protocol, port))
                compared += 1
                if ours == theirs:
                    agreed += 1
                    allowed_both += ours
                    denied_both += not ours
                else:
                    key = f"{protocol}/{port} netpol {'allow' if ours else 'deny'}, NCA {'allow' if theirs else 'deny'}"
                    disagreements[key].append(f"{src} -> {dst}")
    probes_text = ", ".join(f"{p}/{n}" for (p, n), _ in probes)
    print(
        f"{compared} flows compared between {len(pods)} pods NCA names, on {probes_text}: "
        f"{agreed} agree ({allowed_both} allowed, {denied_both} denied by both), "
        f"{compared - agreed} disagree"
    )
    shown = 0
    for key, flows in sorted(disagreements.items()):
        print(f"{key}: {len(flows)} flows")
        for flow in flows:
            if shown >= 40:
                break
            print(f"  {flow}")
            shown += 1
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
