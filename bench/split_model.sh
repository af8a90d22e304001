#!/usr/bin/env bash
# The split-model driver against what a user would pick instead, in one run, as root:
#
#   bench/split_model.sh [BUILD_DIR] [SECONDS]       (default: build 10)
#
# Two namespaces, A and B, joined by one veth (MTU 9000). Between them, over each path in turn:
# one iperf3 TCP stream for SECONDS, then 200 pings (0.01 s apart), p50 and p99 of their RTTs.
#   veth      A 198.18.0.1 -> B 198.18.0.2 on the veth itself: the limit
#   vxlan     a kernel VXLAN (VNI 42, UDP 4789) over the veth, 198.18.3.1 -> 198.18.3.2, MTU 8950
#   pushwire  pushwire-host in A, pushwire-iou in B (its LAN TAP lan0 stays in B), RoCEv2 over
#             UDP 4791 on the veth, pw0 198.18.1.1 -> lan0 198.18.1.2, MTU 8950 like VXLAN's;
#             the fabric sockets with UDP GRO (the default), then without (pushwire-nogro), then
#             with GSO and GRO (pushwire-gso: pushwire peers only, spec/net.md)
#   cells     the driver with cells over AF_PACKET on the veth (--framing cell --af-packet), no UDP
#   pushwire-xdp, cells-xdp   the driver's fabric over AF_XDP (--xdp), RoCEv2 and cells: at MTU
#             9000 where the kernel has multi-buffer AF_XDP (6.6, spec/net.md §6), else with the
#             veth at MTU 3000 (the most veth's native XDP takes with one buffer a frame)
# Then LAN -> host (iperf3 -R: B sends), B's stack handing its interface one TCP segment at a
# time, as a wire carries them (gso_max_segs 1):
#   vxlan-rx, pushwire-rx   VXLAN, and the driver without TCP aggregation (--no-tcp-aggregation)
#   pushwire-agg-rx         the driver with it (the default)
# Prints one JSON object per path on stdout (path, iperf3_gbps, ping_p50_ms, ping_p99_ms,
# retransmits), progress on stderr when it is a terminal. Leaves nothing behind.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
secs=${2:-10}
. "$here/../examples/split-model/netns.sh"
pw_require ping iperf3 python3
say() { [ -t 2 ] && echo "split_model: $*" >&2 || true; }
s=pwb$$; work=$(mktemp -d)
trap 'pw_cleanup; rm -rf "$work"' EXIT
a=$s-host b=$s-iou
pw_netns $a; pw_netns $b
ip link add $s-h type veth peer name $s-i
ip link set $s-h netns $a; ip link set $s-i netns $b
ip -n $a addr add 198.18.0.1/24 dev $s-h; ip -n $a link set $s-h mtu 9000 up
ip -n $b addr add 198.18.0.2/24 dev $s-i; ip -n $b link set $s-i mtu 9000 up
# (b) VXLAN over the veth
ip -n $a link add vx0 type vxlan id 42 local 198.18.0.1 remote 198.18.0.2 dstport 4789 dev $s-h
ip -n $b link add vx0 type vxlan id 42 local 198.18.0.2 remote 198.18.0.1 dstport 4789 dev $s-i
ip -n $a addr add 198.18.3.1/24 dev vx0; ip -n $a link set vx0 mtu 8950 up
ip -n $b addr add 198.18.3.2/24 dev vx0; ip -n $b link set vx0 mtu 8950 up
# (c) the split-model driver; lan0 stays in B. start_pushwire ARGS / stop_pushwire
start_pushwire() {  # [--cells] ARGS...
  local ci=() ch=()
  if [ "${1:-}" = --cells ]; then shift; ci=(--framing cell --interface $s-i); ch=(--framing cell --interface $s-h); fi
  if [ "${3:-}" = --xdp ]; then ci+=("$1" "$2" --xdp $s-i); ch+=("$1" "$2" --xdp $s-h); shift 3  # --fabric-mtu N --xdp
  elif [ ${#ci[@]} -gt 0 ]; then ci+=(--af-packet); ch+=(--af-packet); fi  # (cells' default is AF_XDP where it opens)
  # shellcheck disable=SC2086  # IOU_ARGS: the I/O unit's own flags, word-split
  ip netns exec $b "$build/tools/pushwire-iou" --local 198.18.0.2 --peer 198.18.0.1 --tap lan0 --fabric-mtu 9000 --mtu 8950 "${ci[@]}" ${IOU_ARGS:-} "$@" \
    >"$work/iou.log" 2>&1 &
  iou=$!; pw_pids+=($iou)
  pw_wait_link $b lan0
  ip -n $b addr add 198.18.1.2/24 dev lan0; ip -n $b link set lan0 up
  pw_start_host "$build" $s "$work/host.log" --mtu 8950 "${ch[@]}" "$@"
}
stop_pushwire() { kill -TERM $pw_host $iou; wait $pw_host $iou || true; }
ip netns exec $b iperf3 -s >"$work/iperf3-server.log" 2>&1 & pw_pids+=($!)
sleep 0.5

measure() {  # PATH DST [IPERF3 ARGS...]
  local path=$1 dst=$2
  shift 2
  ip netns exec $a ping -c 3 -i 0.2 -w 10 $dst >/dev/null || { echo "split_model: $path: no ping to $dst" >&2; return 1; }
  say "$path: iperf3 ${secs} s"
  ip netns exec $a iperf3 -c $dst -t $secs -J "$@" >"$work/$path.json"
  say "$path: 200 pings"
  ip netns exec $a ping -c 200 -i 0.01 $dst >"$work/$path.ping"
  python3 - "$path" "$work/$path.json" "$work/$path.ping" <<'PY'
import json, re, statistics, sys
path, ip, pg = sys.argv[1:]
j = json.load(open(ip))
rtts = sorted(float(m) for m in re.findall(r"time=([0-9.]+) ms", open(pg).read()))
def pct(p):
    return rtts[min(len(rtts) - 1, int(round(p / 100 * (len(rtts) - 1))))]
print(json.dumps({"path": path, "iperf3_gbps": round(j["end"]["sum_received"]["bits_per_second"] / 1e9, 3),
                  "retransmits": j["end"]["sum_sent"].get("retransmits", 0), "pings": len(rtts),
                  "ping_p50_ms": pct(50), "ping_p99_ms": pct(99)}))
PY
}
measure veth 198.18.0.2
measure vxlan 198.18.3.2
start_pushwire; measure pushwire 198.18.1.2; stop_pushwire
start_pushwire --no-gro; measure pushwire-nogro 198.18.1.2; stop_pushwire
start_pushwire --gso; measure pushwire-gso 198.18.1.2; stop_pushwire
start_pushwire --cells; measure cells 198.18.1.2; stop_pushwire
# Over AF_XDP (spec/net.md §6): without multi-buffer XDP, veth's native XDP takes an MTU up to
# about 3500 on both ends.
xmtu=$(pw_xdp_mtu)
ip -n $a link set $s-h mtu $xmtu; ip -n $b link set $s-i mtu $xmtu
start_pushwire --fabric-mtu $xmtu --xdp; measure pushwire-xdp 198.18.1.2; stop_pushwire
start_pushwire --cells --fabric-mtu $xmtu --xdp; measure cells-xdp 198.18.1.2; stop_pushwire
ip -n $a link set $s-h mtu 9000; ip -n $b link set $s-i mtu 9000
ip -n $b link set vx0 gso_max_segs 1; measure vxlan-rx 198.18.3.2 -R
IOU_ARGS=--no-tcp-aggregation start_pushwire; ip -n $b link set lan0 gso_max_segs 1; measure pushwire-rx 198.18.1.2 -R; stop_pushwire
start_pushwire; ip -n $b link set lan0 gso_max_segs 1; measure pushwire-agg-rx 198.18.1.2 -R; stop_pushwire
