#!/usr/bin/env bash
# RoCEv2 over AF_XDP (spec/net.md §6): two namespaces joined by a veth (MTU 3000, the most veth's
# native XDP takes), pushwire-rnic pingpong between them, 64-byte RC SENDs, first through UDP
# sockets and then over AF_XDP (--xdp IF), side by side; the XDP program on the interface while it
# runs, and ping working beside it. Root; says why and exits 0 when it cannot run.
# usage: examples/xdp/run.sh BUILD_DIR [ITERATIONS]
set -euo pipefail
build=$(cd "$1" && pwd)
n=${2:-20000}
. "$(dirname "$0")/../split-model/netns.sh"
pw_require ping
rnic=$build/tools/pushwire-rnic
s=pxd$$ err=$(mktemp)
trap 'pw_cleanup; rm -f "$err"' EXIT
pw_veth_pair $s 198.18.7.1/24 198.18.7.2/24
ip -n $s-a link set $s-a mtu 3000; ip -n $s-b link set $s-b mtu 3000
pair() {  # LABEL [--xdp]
  local label=$1 xa=() xb=()
  [ "${2:-}" = --xdp ] && xa=(--xdp $s-a) xb=(--xdp $s-b)
  ip netns exec $s-b "$rnic" pingpong --local 198.18.7.2 --peer 198.18.7.1 --server --iterations $n "${xb[@]}" 2>/dev/null >/dev/null & local sp=$!
  pw_pids+=($sp)
  local line
  line=$(ip netns exec $s-a "$rnic" pingpong --local 198.18.7.1 --peer 198.18.7.2 --iterations $n "${xa[@]}" 2>"$err") || { cat "$err"; return 1; }
  wait $sp || true
  grep -h 'AF_XDP' "$err" | sed 's/^/    /' || true
  printf '%-8s %s\n' "$label" "$line"
}
pair udp
pair af_xdp --xdp
ip netns exec $s-b "$rnic" pingpong --local 198.18.7.2 --peer 198.18.7.1 --server --iterations 100000000 --xdp $s-b >/dev/null 2>&1 & pw_pids+=($!)
ip netns exec $s-a "$rnic" pingpong --local 198.18.7.1 --peer 198.18.7.2 --iterations 100000000 --xdp $s-a >/dev/null 2>&1 & pw_pids+=($!)
sleep 1
echo "while RDMA runs over AF_XDP, $s-a carries: $(ip -n $s-a -d link show $s-a | grep -o 'prog/xdp id [0-9]* name [a-z_]*')"
ip netns exec $s-a ping -c 3 -i 0.2 198.18.7.2 | grep -E 'packets transmitted'
