#!/usr/bin/env bash
# netpol and NCA (IBM network-config-analyzer) side by side on the same generated clusters.
#
#   tools/bench-nca.sh [PODS...]        (default: 500 2000 10000)
#
# For each size: `netpol-dev synth --workloads mixed` writes a cluster, its AdminNetworkPolicies
# (admin.yaml) are removed so that both tools read NetworkPolicy only, and each tool computes
# the cluster's connectivity once, timed with /usr/bin/time (wall seconds, peak RSS):
#   netpol matrix -f DIR -o json   (every port the policies mention, as NCA covers every port)
#   nca --connectivity -r DIR --output_format txt_no_fw_rules --output_endpoints pods
# Then their verdicts are compared flow by flow (tools/nca-compare.py): between every two pods
# NCA names, on every port netpol probes plus TCP/80, a port no policy names (an untimed second
# netpol run). The last column counts the flows compared and those that disagree; the
# disagreements are in $WORK/compare-PODS.txt.
# NCA is installed from PyPI into a virtual environment under $WORK (default
# /tmp/netpol-bench-nca); where it cannot be installed, its column says so and netpol still runs.
# The release binary is taken from $NETPOL (default: target/release/netpol, built if missing).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
work=${WORK:-/tmp/netpol-bench-nca}
target=${CARGO_TARGET_DIR:-$root/target}
netpol=${NETPOL:-$target/release/netpol}
netpol_dev=${NETPOL_DEV:-$target/release/netpol-dev}
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(500 2000 10000)
mkdir -p "$work"

if [ ! -x "$netpol" ] || [ ! -x "$netpol_dev" ]; then
    (cd "$root" && cargo build --release -p netpol-cli -p netpol-dev)
fi

nca=""
if [ -x "$work/venv/bin/nca" ]; then
    nca="$work/venv/bin/nca"
elif python3 -m venv "$work/venv" >/dev/null 2>&1 &&
    "$work/venv/bin/pip" install --quiet network-config-analyzer >"$work/pip.log" 2>&1; then
    nca="$work/venv/bin/nca"
else
    echo "NCA could not be installed (python3 -m venv, pip install network-config-analyzer;" \
        "see $work/pip.log): netpol only" >&2
fi

# Runs a command, prints "SECONDS s, PEAK MB" (or "failed").
measure() {
    local log=$1
    shift
    if /usr/bin/time -f "%e %M" -o "$log.time" "$@" >"$log.out" 2>"$log.err"; then
        awk '{printf "%.2f s, %.0f MB", $1, $2 / 1024}' "$log.time"
    else
        echo "failed (see $log.err)"
    fi
}

echo "| pods | netpol matrix -o json (every port) | NCA --connectivity | time ratio (NCA/netpol) | memory ratio | verdicts |"
echo "|---|---|---|---|---|---|"
for pods in "${sizes[@]}"; do
    dir="$work/np-$pods"
    rm -rf "$dir"
    "$netpol_dev" synth --pods "$pods" --workloads mixed --out "$dir" >/dev/null
    rm -f "$dir/admin.yaml"
    ours=$(measure "$work/netpol-$pods" "$netpol" matrix -f "$dir" -o json)
    theirs="not installed"
    ratio="-"
    memory="-"
    verdicts="-"
    if [ -n "$nca" ]; then
        theirs=$(measure "$work/nca-$pods" "$nca" --connectivity -r "$dir" \
            --output_format txt_no_fw_rules --output_endpoints pods -f "$work/nca-$pods.txt")
        if [[ $ours != failed* && $theirs != failed* ]]; then
            ratio=$(awk '{print $1}' "$work/nca-$pods.time" "$work/netpol-$pods.time" |
                paste -sd' ' | awk '{ if ($2 > 0) printf "%.1fx", $1 / $2; else print "-" }')
            memory=$(awk '{print $2}' "$work/nca-$pods.time" "$work/netpol-$pods.time" |
                paste -sd' ' | awk '{ if ($2 > 0) printf "%.1fx", $1 / $2; else print "-" }')
            "$netpol" matrix -f "$dir" --protocol TCP --port 80 -o json \
                >"$work/netpol80-$pods.out" 2>/dev/null
            python3 "$root/tools/nca-compare.py" "$work/nca-$pods.txt" \
                "$work/netpol-$pods.out" "$work/netpol80-$pods.out" >"$work/compare-$pods.txt" || true
            verdicts=$(head -1 "$work/compare-$pods.txt" |
                sed -E 's/^([0-9]+) flows compared between ([0-9]+) pods.*, ([0-9]+) disagree$/\1 flows (\2 pods), \3 disagree/')
        fi
    fi
    echo "| $pods | $ours | $theirs | $ratio | $memory | $verdicts |"
done
