#!/usr/bin/env bash
# TCP aggregation in the split-model driver's I/O unit (spec/split-model.md, TCP aggregation):
# the same topology as split_model.sh, three times: pushwire-iou with --no-tcp-aggregation, with
# aggregation (the default), and with it behind a LAN that loses 2% of its frames and holds back 2% (--lan-loss,
# --lan-reorder: the aggregator sees gaps and late segments, TCP retransmits). A 100 MB file
# goes from the LAN (its stack sending one segment at a time, as a wire carries them) to the
# host through TCP, SHA-256 compared, then 3 MB the other way. Checked: the RDMA WRITEs per MB
# LAN -> host (the I/O unit's exit line) are at least 5x fewer with aggregation (3x in a
# sanitizer build); pw0 takes
# fewer, larger packets; the host's GetStatistics shows the aggregates; no bad checksum.
# usage: tcp_agg.sh BUILD_DIR      (root; skips, visibly, without namespaces)
set -euo pipefail
build=$(cd "$1" && pwd)
. "$(dirname "$0")/../../examples/split-model/netns.sh"
pw_require ping python3
work=$(mktemp -d)
trap 'pw_cleanup; rm -rf "$work"' EXIT
head -c 100000000 /dev/urandom >"$work/down.bin"; head -c 3000000 /dev/urandom >"$work/up.bin"
rx_packets() { ip -n $1 -s link show $2 | awk '/RX:/ { getline; print $2; exit }'; }

run() {  # NAME [pushwire-iou ARGS...]: sets packets (pw0's received packets for the 100 MB) and writes (the I/O unit's WRITEs)
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
  local t0=$(date +%s%N)
  pw_tcp_file $s-lan $s-host 198.18.1.1 "$work/down.bin" "$work" || { show; echo "FAIL ($name): 100 MB LAN -> host"; exit 1; }
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  packets=$(( $(rx_packets $s-host pw0) - before ))
  pw_tcp_file $s-host $s-lan 198.18.1.2 "$work/up.bin" "$work" || { show; echo "FAIL ($name): 3 MB host -> LAN"; exit 1; }
  sleep 1.2   # the host's next GetStatistics
  kill -TERM $host $iou; wait $iou || true; wait $host || true
  writes=$(tail -n1 "$work/$name-iou.log" | sed -n 's/.*WRITE+idata \([0-9]*\).*/\1/p')
  echo "$name: 100000000 bytes LAN -> host intact in $ms ms, $writes RDMA WRITEs ($(( writes / 100 )) per MB), pw0 took $packets packets; $(grep -o 'TCP aggregation:.*' "$work/$name-iou.log" || echo 'no aggregation')"
  grep -o 'LAN faults:[^;]*' "$work/$name-iou.log" || true
}
run plain --no-tcp-aggregation; plain=$packets plain_writes=$writes
run lossy --lan-loss 0.02 --lan-reorder 0.02 --seed 7; lossy_writes=$writes
grep -q 'LAN faults: [1-9][0-9]* frames lost, [1-9][0-9]* held back' "$work/lossy-iou.log" || { echo "FAIL: no LAN fault was injected"; exit 1; }
grep -q 'TCP aggregation:.* 0 bad checksums' "$work/lossy-iou.log" || { echo "FAIL: $(grep -o 'TCP aggregation:.*' "$work/lossy-iou.log")"; exit 1; }
run agg; agg=$packets agg_writes=$writes
line=$(grep -o 'TCP aggregation:.*' "$work/agg-iou.log")
aggregates=$(echo "$line" | sed -n 's/.* into \([0-9]*\) aggregates.*/\1/p')
joined=$(echo "$line" | sed -n 's/.* \([0-9]*\) segments joined.*/\1/p')
bad=$(echo "$line" | sed -n 's/.* \([0-9]*\) bad checksums.*/\1/p')
# 100 MB in 1448-byte segments is 69061 of them: one packet each without aggregation
[ "$plain" -ge 65000 ] || { echo "FAIL: without aggregation pw0 took only $plain packets"; exit 1; }
# An aggregate ends where a segment's ACK or options change (GRO's rules), and the senders' TCP timestamps
# tick each millisecond: the fewer segments a millisecond brings, the shorter the aggregates. A
# sanitizer build's modules are several times slower, so there 3x fewer is asked, 5x elsewhere.
factor=5
grep -q '^PUSHWIRE_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null && factor=3
[ "$agg" -le $(( plain / factor )) ] || { echo "FAIL: with aggregation pw0 took $agg packets, without $plain (${factor}x fewer wanted)"; exit 1; }
[ "$agg_writes" -gt 0 ] && [ $(( agg_writes * factor )) -le "$plain_writes" ] || { echo "FAIL: RDMA WRITEs LAN -> host: $agg_writes with aggregation, $plain_writes without (${factor}x fewer wanted)"; exit 1; }
[ "${aggregates:-0}" -gt 0 ] && [ "$joined" -ge $(( 3 * aggregates )) ] || { echo "FAIL: $line"; exit 1; }
[ "${bad:-1}" = 0 ] || { echo "FAIL: $line"; exit 1; }
tail -n1 "$work/agg-host.log" | grep -q '[1-9][0-9]* segments in [1-9][0-9]* aggregates' || { echo "FAIL: the host's GetStatistics has no aggregates: $(tail -n1 "$work/agg-host.log")"; exit 1; }
echo "PASS: with TCP aggregation $(( agg_writes / 100 )) RDMA WRITEs per MB LAN -> host, without $(( plain_writes / 100 )) ($(( plain_writes / agg_writes ))x fewer); pw0 took $agg packets for 100 MB, without $plain; $joined segments in $aggregates aggregates; intact through 2% loss and 2% reordering"
