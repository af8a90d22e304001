#!/usr/bin/env bash
# TCP aggregation in the split-model driver's I/O unit (spec/split-model.md, TCP aggregation):
# the same topology as split_model.sh, twice: pushwire-iou with --tcp-aggregation and without.
# A 20 MB file goes from the LAN (its stack sending one segment at a time, as a wire carries
# them) to the host through TCP, SHA-256 compared. With aggregation the
# host's pw0 takes the LAN's segments joined: far fewer, larger packets than the LAN sent (its
# receive counters), the I/O unit's exit line counts the aggregates, and a file the other way
# and a ping still cross. Without it, pw0 takes about one packet per LAN segment.
# usage: tcp_agg.sh BUILD_DIR      (root; skips, visibly, without namespaces)
set -euo pipefail
build=$(cd "$1" && pwd)
. "$(dirname "$0")/../../examples/split-model/netns.sh"
pw_require ping python3
work=$(mktemp -d)
trap 'pw_cleanup; rm -rf "$work"' EXIT
head -c 20000000 /dev/urandom >"$work/down.bin"; head -c 3000000 /dev/urandom >"$work/up.bin"
rx_packets() { ip -n $1 -s link show $2 | awk '/RX:/ { getline; print $2; exit }'; }

run() {  # NAME [pushwire-iou ARGS...]: sets packets (pw0's received packets for the 20 MB)
  local name=$1 s=ta$$$1 before
  shift
  pw_split_topology $s
  pw_start_iou "$build" $s "$work/$name-iou.log" "$@"; local iou=$pw_iou
  # The LAN's stack hands lan0 one segment at a time, as a LAN NIC takes them from the wire
  # (a TAP otherwise takes its stack's 64 KiB TSO segments whole).
  ip -n $s-lan link set lan0 gso_max_segs 1
  pw_start_host "$build" $s "$work/$name-host.log"; local host=$pw_host
  show() { echo "--- host"; cat "$work/$name-host.log"; echo "--- iou"; cat "$work/$name-iou.log"; }
  ip netns exec $s-host ping -c 3 -i 0.2 -w 10 198.18.1.2 >/dev/null || { show; echo "FAIL ($name): ping"; exit 1; }
  before=$(rx_packets $s-host pw0)
  pw_tcp_file $s-lan $s-host 198.18.1.1 "$work/down.bin" "$work" || { show; echo "FAIL ($name): 20 MB LAN -> host"; exit 1; }
  packets=$(( $(rx_packets $s-host pw0) - before ))
  pw_tcp_file $s-host $s-lan 198.18.1.2 "$work/up.bin" "$work" || { show; echo "FAIL ($name): 3 MB host -> LAN"; exit 1; }
  kill -TERM $host $iou; wait $iou || true; wait $host || true
  echo "$name: 20000000 bytes LAN -> host intact, pw0 took $packets packets; $(grep -o 'TCP aggregation:.*' "$work/$name-iou.log" || echo 'no aggregation')"
}
run plain; plain=$packets
run agg --tcp-aggregation; agg=$packets
line=$(grep -o 'TCP aggregation:.*' "$work/agg-iou.log")
aggregates=$(echo "$line" | sed -n 's/.* into \([0-9]*\) aggregates.*/\1/p')
joined=$(echo "$line" | sed -n 's/.* \([0-9]*\) segments joined.*/\1/p')
bad=$(echo "$line" | sed -n 's/.* \([0-9]*\) bad checksums.*/\1/p')
# 20 MB in 1448-byte segments is 13812 of them: one packet each without aggregation
[ "$plain" -ge 13000 ] || { echo "FAIL: without aggregation pw0 took only $plain packets"; exit 1; }
[ "$agg" -le $(( plain / 3 )) ] || { echo "FAIL: with aggregation pw0 took $agg packets, without $plain"; exit 1; }
[ "${aggregates:-0}" -gt 0 ] && [ "$joined" -ge $(( 3 * aggregates )) ] || { echo "FAIL: $line"; exit 1; }
[ "${bad:-1}" = 0 ] || { echo "FAIL: $line"; exit 1; }
echo "PASS: with TCP aggregation pw0 took $agg packets for 20 MB, without $plain; $joined segments in $aggregates aggregates"
