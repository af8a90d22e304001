#!/usr/bin/env bash
# The verbs provider's datapath against one TCP stream, over UDP sockets and over AF_XDP, in one
# run, as root:
#
#   bench/line_rate.sh [BUILD_DIR] [SECONDS]          (default: build 10)
#
# Two namespaces joined by one veth (198.18.9.1 -> 198.18.9.2). For each of the provider's port
# transports, on that veth at that transport's MTU:
#   udp   UDP sockets (PUSHWIRE_VERBS=pw0:ADDR), veth MTU 9000: path MTU 4096
#   xdp   AF_XDP (PUSHWIRE_VERBS=pw0:ADDR/xdp=IF), veth MTU 9000: path MTU 4096 with multi-buffer
#         AF_XDP (Linux 6.6, spec/net.md §6), else 2048 (and veth's generic XDP hook)
# it measures, RUNS (3) times each, the median kept:
#   iperf3        one TCP stream for SECONDS over the same veth at the same MTU (the peer)
#   ib_write_bw   64 KiB, 5000 iterations, perftest's BW average
#   ib_write_lat  64 B, 20000 iterations, perftest's t_typical (half a round trip)
# Prints one JSON object per figure on stdout ({"transport", "mtu", then "iperf3_gbps" or
# "program", "bytes", "MB_per_s" / "t_typical_us"}); a transport that could not be had prints
# {"transport", "unavailable": REASON}. Progress on stderr when it is a terminal. Leaves nothing
# behind.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
secs=${2:-10}
runs=${RUNS:-3}
verbs=$build/verbs/pushwire-verbs
. "$here/../examples/split-model/netns.sh"
pw_require iperf3 ib_write_bw ib_write_lat python3
[ -x "$verbs" ] || { echo "line_rate: build $build first (libibverbs-dev)" >&2; exit 1; }
say() { [ -t 2 ] && echo "line_rate: $*" >&2 || true; }
s=pwl$$; work=$(mktemp -d)
trap 'pw_cleanup; rm -rf "$work"' EXIT
pw_veth_pair $s 198.18.9.1/24 198.18.9.2/24
a=$s-a b=$s-b
ip netns exec $b iperf3 -s >"$work/iperf3-server.log" 2>&1 & pw_pids+=($!)
median() { sort -g | awk '{v[NR] = $0} END {if (NR) print v[int((NR + 1) / 2)]}'; }
port=19800

perftest() {  # TRANSPORT PROGRAM SIZE ITERS COLUMN -> the column's value, or nothing
  local t=$1 prog=$2 size=$3 n=$4 col=$5 ea=pw0:198.18.9.1 eb=pw0:198.18.9.2
  [ "$t" = xdp ] && { ea=$ea/xdp=$a; eb=$eb/xdp=$b; }
  port=$((port + 1))
  ip netns exec $b env PUSHWIRE_VERBS=$eb timeout 120 "$verbs" run -- $prog -d pw0 -x 0 -F -s $size -n $n -p $port \
    >"$work/server.log" 2>&1 & local srv=$!
  for _ in $(seq 100); do ip netns exec $b ss -ltn "sport = :$port" | grep -q LISTEN && break; sleep 0.05; done
  ip netns exec $a env PUSHWIRE_VERBS=$ea timeout 120 "$verbs" run -- $prog -d pw0 -x 0 -F -s $size -n $n -p $port 198.18.9.2 \
    >"$work/client.log" 2>&1 || true
  wait $srv || true
  cat "$work/client.log" >>"$work/$t.log"
  awk -v s=$size -v c=$col '/#bytes/ {h = 1; next} h && $1 == s {print $c; exit}' "$work/client.log"
}

for t in udp xdp; do
  mtu=9000
  ip -n $a link set $a mtu $mtu; ip -n $b link set $b mtu $mtu
  ip netns exec $a ping -c 2 -i 0.2 -w 5 198.18.9.2 >/dev/null
  : >"$work/$t.log"
  perftest $t ib_write_lat 64 200 5 >/dev/null   # warms the neighbour tables; tells whether AF_XDP can be had
  if [ $t = xdp ] && grep -q 'AF_XDP on .* unavailable' "$work/$t.log"; then
    reason=$(grep -m1 'AF_XDP on .* unavailable' "$work/$t.log" | tr -d '"\\')
    printf '{"transport": "xdp", "mtu": %d, "unavailable": "%s"}\n' $mtu "$reason"
    continue
  fi
  say "$t (MTU $mtu): iperf3 ${secs} s x $runs"
  for _ in $(seq $runs); do
    ip netns exec $a iperf3 -c 198.18.9.2 -t $secs -J >"$work/iperf3.json"
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 1e9)' "$work/iperf3.json"
  done | median | awk -v t=$t -v m=$mtu '{printf "{\"transport\": \"%s\", \"mtu\": %d, \"iperf3_gbps\": %.3f}\n", t, m, $1}'
  say "$t: ib_write_bw 64 KiB x $runs"
  for _ in $(seq $runs); do perftest $t ib_write_bw 65536 5000 4; done | median |
    awk -v t=$t -v m=$mtu '{printf "{\"transport\": \"%s\", \"mtu\": %d, \"program\": \"ib_write_bw\", \"bytes\": 65536, \"MB_per_s\": %.2f}\n", t, m, $1}'
  say "$t: ib_write_lat 64 B x $runs"
  for _ in $(seq $runs); do perftest $t ib_write_lat 64 20000 5; done | median |
    awk -v t=$t -v m=$mtu '{printf "{\"transport\": \"%s\", \"mtu\": %d, \"program\": \"ib_write_lat\", \"bytes\": 64, \"t_typical_us\": %.2f}\n", t, m, $1}'
done
