#!/usr/bin/env bash
# TCP aggregation in the split-model driver's I/O unit, measured against the same driver
# without it, in one run, as root:
#
#   bench/tcp_agg.sh [BUILD_DIR] [SECONDS]       (default: build 10)
#
# The split-model topology (examples/split-model/netns.sh), the LAN's stack handing lan0 one
# segment at a time (gso_max_segs 1, as a LAN NIC takes them from a wire), MTU 1500 on the LAN.
# One iperf3 TCP stream from the LAN to the host (iperf3 -R) for SECONDS, and the packets pw0
# took, with pushwire-iou --tcp-aggregation and without. Prints one JSON object per case on
# stdout (case, iperf3_gbps, pw0_packets, retransmits) and the ratio; progress on stderr when it
# is a terminal. Leaves nothing behind.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
secs=${2:-10}
. "$here/../examples/split-model/netns.sh"
pw_require iperf3 python3
say() { [ -t 2 ] && echo "tcp_agg: $*" >&2 || true; }
work=$(mktemp -d)
trap 'pw_cleanup; rm -rf "$work"' EXIT
rx_packets() { ip -n $1 -s link show $2 | awk '/RX:/ { getline; print $2; exit }'; }
measure() {  # CASE [pushwire-iou ARGS...]
  local name=$1 s=tb$$${1:0:1} before
  shift
  pw_split_topology $s
  pw_start_iou "$build" $s "$work/$name-iou.log" "$@"
  ip -n $s-lan link set lan0 gso_max_segs 1
  pw_start_host "$build" $s "$work/$name-host.log"
  ip netns exec $s-lan iperf3 -s -1 >/dev/null 2>&1 & pw_pids+=($!)
  ip netns exec $s-host ping -c 3 -i 0.2 -w 10 198.18.1.2 >/dev/null
  say "$name: iperf3 -R ${secs} s"
  before=$(rx_packets $s-host pw0)
  ip netns exec $s-host iperf3 -c 198.18.1.2 -R -t $secs -J >"$work/$name.json"
  python3 - "$name" "$work/$name.json" $(( $(rx_packets $s-host pw0) - before )) <<'PY'
import json, sys
name, path, packets = sys.argv[1], sys.argv[2], int(sys.argv[3])
r = json.load(open(path))["end"]
print(json.dumps({"case": name, "iperf3_gbps": round(r["sum_received"]["bits_per_second"] / 1e9, 3),
                  "pw0_packets": packets, "retransmits": r["sum_sent"].get("retransmits", 0)}))
PY
}
measure plain >"$work/out"
measure aggregation --tcp-aggregation >>"$work/out"
cat "$work/out"
python3 - "$work/out" <<'PY'
import json, sys
r = {j["case"]: j for j in map(json.loads, open(sys.argv[1]))}
print(json.dumps({"aggregation_over_plain": round(r["aggregation"]["iperf3_gbps"] / r["plain"]["iperf3_gbps"], 2)}))
PY
