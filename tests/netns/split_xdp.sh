#!/usr/bin/env bash
# The split-model driver with its fabric over AF_XDP (spec/net.md §6): the topology of
# split_model.sh with the fabric veth at MTU 9000 where the kernel has multi-buffer AF_XDP (6.6),
# else 3000 (veth's native XDP takes up to about 3500 with one buffer a frame). Three rounds, each
# with ping through the driver and a 3 MB file through TCP each way (SHA-256 compared):
#   r  RoCEv2 over AF_XDP (--xdp IF), the CM's hellos (UDP 18515) passing the steering program
#      to the kernel;
#   c  cells, --framing cell --interface IF: over AF_XDP by default, each module saying so on
#      stderr; a capture on the host's fabric interface sees none of them;
#   p  the same with --af-packet: AF_PACKET, no XDP program on the interfaces, and the capture
#      sees the cells (EtherType 0x88B5).
# Then cells on an interface whose MTU is below --fabric-mtu go over AF_PACKET, saying why; and
# --af-packet anywhere but beside --framing cell --interface IF is a usage error.
# usage: split_xdp.sh BUILD_DIR      (root; skips, visibly, without namespaces or AF_XDP)
set -euo pipefail
build=$(cd "$1" && pwd)
. "$(dirname "$0")/../../examples/split-model/netns.sh"
pw_require ping python3 tcpdump
work=$(mktemp -d)
trap 'pw_cleanup; rm -rf "$work"' EXIT
head -c 3000000 /dev/urandom >"$work/up.bin"; head -c 3000000 /dev/urandom >"$work/down.bin"
mtu=$(pw_xdp_mtu)
round() {  # NAME xdp|cells|packet [module ARGS...]
  local name=$1 how=$2; shift 2
  local s=px$$$name hi=() ii=()
  pw_split_topology $s
  ip -n $s-host link set $s-h mtu $mtu; ip -n $s-iou link set $s-i mtu $mtu
  case $how in
    xdp) hi=(--xdp $s-h); ii=(--xdp $s-i) ;;
    cells) hi=(--framing cell --interface $s-h); ii=(--framing cell --interface $s-i) ;;
    packet) hi=(--framing cell --interface $s-h --af-packet); ii=(--framing cell --interface $s-i --af-packet) ;;
  esac
  ip netns exec $s-host tcpdump -q -n -i $s-h -w "$work/$name.pcap" ether proto 0x88b5 2>/dev/null & local td=$!; pw_pids+=($td)
  sleep 0.3
  kill -0 $td 2>/dev/null || { echo "FAIL: $name: tcpdump did not start"; exit 1; }
  pw_start_iou "$build" $s "$work/$name-iou.log" --fabric-mtu $mtu "${ii[@]}" "$@"
  pw_start_host "$build" $s "$work/$name-host.log" --fabric-mtu $mtu "${hi[@]}" "$@"
  show() { echo "--- host"; cat "$work/$name-host.log"; echo "--- iou"; cat "$work/$name-iou.log"; }
  if [ $how != packet ] && grep -q 'AF_XDP .*unavailable' "$work/$name-iou.log" "$work/$name-host.log"; then
    show; echo "SKIPPED: AF_XDP unavailable here"; exit 0
  fi
  ip netns exec $s-host ping -c 3 -i 0.2 -w 10 198.18.1.2 >"$work/$name-ping.log" || { cat "$work/$name-ping.log"; show; echo "FAIL: $name: ping through the driver"; exit 1; }
  pw_tcp_file $s-host $s-lan 198.18.1.2 "$work/up.bin" "$work" || { show; echo "FAIL: $name: host -> LAN over TCP"; exit 1; }
  pw_tcp_file $s-lan $s-host 198.18.1.1 "$work/down.bin" "$work" || { show; echo "FAIL: $name: LAN -> host over TCP"; exit 1; }
  local progs=0
  ip -n $s-host -d link show $s-h | grep -q 'prog/xdp' && progs=$((progs + 1))
  ip -n $s-iou -d link show $s-i | grep -q 'prog/xdp' && progs=$((progs + 1))
  # cells are addressed by MAC: each module found its peer's in the kernel's neighbour table
  if grep -q 'no neighbour entry' "$work/$name-host.log" "$work/$name-iou.log"; then show; echo "FAIL: $name: a module sent cells to the broadcast MAC"; exit 1; fi
  kill -TERM $pw_host $pw_iou; wait $pw_host $pw_iou 2>/dev/null || true
  sleep 0.2; kill -INT $td 2>/dev/null || true; wait $td 2>/dev/null || true
  [ -s "$work/$name.pcap" ] || { echo "FAIL: $name: the capture on the interface wrote nothing"; exit 1; }
  local cells; cells=$(tcpdump -n -r "$work/$name.pcap" 2>/dev/null | grep -c "^[0-9]" || true)
  case $how in
    xdp|cells)
      [ $progs = 2 ] || { show; echo "FAIL: $name: an XDP program on $progs of the 2 fabric interfaces"; exit 1; }
      if [ $how = cells ]; then
        grep -q "cells over AF_XDP on $s-h" "$work/$name-host.log" && grep -q "cells over AF_XDP on $s-i" "$work/$name-iou.log" ||
          { show; echo "FAIL: $name: cells did not go over AF_XDP by default"; exit 1; }
        # frames over AF_XDP pass neither way through the interface's packet taps (spec/net.md §6)
        [ "$cells" = 0 ] || { echo "FAIL: $name: a capture on the interface saw $cells cells over AF_XDP"; exit 1; }
      fi
      local seen=""; [ $how = cells ] && seen="; a capture on the interface saw $cells cells"
      echo "ok: $name over AF_XDP at MTU $mtu: $(grep -E 'rtt' "$work/$name-ping.log"); 3000000 bytes each way over TCP intact$seen" ;;
    packet)
      [ $progs = 0 ] || { show; echo "FAIL: $name: an XDP program with --af-packet"; exit 1; }
      ! grep -q 'AF_XDP' "$work/$name-host.log" "$work/$name-iou.log" || { show; echo "FAIL: $name: AF_XDP with --af-packet"; exit 1; }
      [ "$cells" -gt 1000 ] || { show; echo "FAIL: $name: a capture on the interface saw $cells cells"; exit 1; }
      echo "ok: $name over AF_PACKET at MTU $mtu: $(grep -E 'rtt' "$work/$name-ping.log"); 3000000 bytes each way over TCP intact; a capture on the interface saw $cells cells" ;;
  esac
}
# --af-packet is for cells on an interface only: refused (usage, exit 2) without them or beside --xdp
for args in "--af-packet" "--framing cell --interface lo --xdp lo --af-packet" "--xdp lo --af-packet"; do
  rc=0
  # shellcheck disable=SC2086  # the flags, word-split
  "$build/tools/pushwire-host" --local 198.18.0.1 --peer 198.18.0.2 $args >/dev/null 2>&1 || rc=$?
  [ $rc = 2 ] || { echo "FAIL: pushwire-host $args exited $rc, not 2"; exit 1; }
done
echo "ok: --af-packet without cells on an interface, or beside --xdp: usage, exit 2"
round r xdp
round c cells
round p packet
# Cells where AF_XDP cannot take the fabric MTU (the interface's is smaller): AF_PACKET, and one
# line says why.
s=px$$p
ip -n $s-host link set $s-h mtu 3000
pw_start_host "$build" $s "$work/mtu-host.log" --fabric-mtu 9000 --framing cell --interface $s-h
for _ in $(seq 50); do grep -q 'using AF_PACKET' "$work/mtu-host.log" && break; sleep 0.1; done
grep -q "AF_XDP on $s-h takes an MTU of 3000, below --fabric-mtu 9000; using AF_PACKET" "$work/mtu-host.log" ||
  { cat "$work/mtu-host.log"; echo "FAIL: cells took AF_XDP below the fabric MTU, or did not say why not"; exit 1; }
! ip -n $s-host -d link show $s-h | grep -q 'prog/xdp' || { echo "FAIL: an XDP program left on $s-h"; exit 1; }
kill -TERM $pw_host; wait $pw_host 2>/dev/null || true
echo "ok: cells on an interface whose MTU is below --fabric-mtu: AF_PACKET, and the reason on stderr"
echo "PASS: the split-model driver over AF_XDP, RoCEv2 and cells (AF_XDP by default, AF_PACKET with --af-packet): ping and TCP both ways"
