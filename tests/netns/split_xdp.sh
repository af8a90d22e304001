#!/usr/bin/env bash
# The split-model driver with its fabric over AF_XDP (--xdp IF, spec/net.md §6): the topology of
# split_model.sh with the fabric veth at MTU 3000 (veth's native XDP takes up to about 3500), once
# in RoCEv2 framing and once in cells; each time ping through the driver and a 3 MB file through
# TCP each way (SHA-256 compared), both modules on native AF_XDP, and the CM's hellos (UDP 18515)
# passing the steering program to the kernel.
# usage: split_xdp.sh BUILD_DIR      (root; skips, visibly, without namespaces or AF_XDP)
set -euo pipefail
build=$(cd "$1" && pwd)
. "$(dirname "$0")/../../examples/split-model/netns.sh"
pw_require ping python3
work=$(mktemp -d)
trap 'pw_cleanup; rm -rf "$work"' EXIT
head -c 3000000 /dev/urandom >"$work/up.bin"; head -c 3000000 /dev/urandom >"$work/down.bin"
round() {  # NAME [module ARGS...]
  local name=$1; shift
  local s=px$$$name
  pw_split_topology $s
  ip -n $s-host link set $s-h mtu 3000; ip -n $s-iou link set $s-i mtu 3000
  pw_start_iou "$build" $s "$work/$name-iou.log" --fabric-mtu 3000 --xdp $s-i "$@"
  pw_start_host "$build" $s "$work/$name-host.log" --fabric-mtu 3000 --xdp $s-h "$@"
  show() { echo "--- host"; cat "$work/$name-host.log"; echo "--- iou"; cat "$work/$name-iou.log"; }
  if grep -q 'AF_XDP .*unavailable' "$work/$name-iou.log" "$work/$name-host.log"; then
    show; echo "SKIPPED: AF_XDP unavailable here"; exit 0
  fi
  ip netns exec $s-host ping -c 3 -i 0.2 -w 10 198.18.1.2 >"$work/$name-ping.log" || { cat "$work/$name-ping.log"; show; echo "FAIL: $name: ping through the driver"; exit 1; }
  pw_tcp_file $s-host $s-lan 198.18.1.2 "$work/up.bin" "$work" || { show; echo "FAIL: $name: host -> LAN over TCP"; exit 1; }
  pw_tcp_file $s-lan $s-host 198.18.1.1 "$work/down.bin" "$work" || { show; echo "FAIL: $name: LAN -> host over TCP"; exit 1; }
  ip -n $s-host -d link show $s-h | grep -q 'prog/xdp' && ip -n $s-iou -d link show $s-i | grep -q 'prog/xdp' ||
    { show; echo "FAIL: $name: no XDP program on the fabric"; exit 1; }
  # cells are addressed by MAC: each module found its peer's in the kernel's neighbour table
  if grep -q 'no neighbour entry' "$work/$name-host.log" "$work/$name-iou.log"; then show; echo "FAIL: $name: a module sent cells to the broadcast MAC"; exit 1; fi
  echo "ok: $name over AF_XDP: $(grep -E 'rtt' "$work/$name-ping.log"); 3000000 bytes each way over TCP intact"
  kill -TERM $pw_host $pw_iou; wait $pw_host $pw_iou 2>/dev/null || true
}
round roce
round cells --framing cell
echo "PASS: the split-model driver over AF_XDP, RoCEv2 and cells: ping and TCP both ways"
