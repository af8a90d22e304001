#!/usr/bin/env bash
# RoCEv2 over AF_XDP through a router (spec/net.md §6, "Addresses"): namespaces a and b on
# different subnets, each with a veth to a third, r, that forwards between them; a's and b's
# routes to each other go through r. pushwire-rnic pingpong over AF_XDP from a to b completes:
# each port sends to the gateway's MAC (the kernel's route, then the gateway's neighbour entry),
# r forwards the frames with their TTL decremented, and captures on both of r's links decode as
# InfiniBand in stock tshark with every ICRC good by scapy (the ICRC leaves the TTL and the
# checksum out). Without the routes, a cannot reach b and the pingpong fails. At MTU 9000 (path
# MTU 4096, frames over one UMEM frame) where the kernel has multi-buffer AF_XDP (6.6), else 3000.
# usage: xdp_routed.sh BUILD      (root; skips, visibly, without namespaces or AF_XDP)
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../examples/split-model/netns.sh"
pw_require dumpcap tshark /usr/bin/python3
rnic=$build/tools/pushwire-rnic
s=pr$$; work=$(mktemp -d)
trap 'pw_cleanup; rm -rf "$work"' EXIT
A=198.18.60.1 RA=198.18.60.254 B=198.18.61.1 RB=198.18.61.254
mtu=$(pw_xdp_mtu); if [ $mtu = 9000 ]; then size=4096; else size=2048; fi
pw_netns $s-a; pw_netns $s-b; pw_netns $s-r
for h in a b; do
  ip link add $s-$h type veth peer name r-$h
  ip link set $s-$h netns $s-$h; ip link set r-$h netns $s-r
  # veth's native XDP takes an MTU (its own and its peer's) up to about 3500, or any with
  # multi-buffer XDP
  ip -n $s-$h link set $s-$h mtu $mtu up; ip -n $s-r link set r-$h mtu $mtu up
done
ip -n $s-a addr add $A/24 dev $s-a; ip -n $s-r addr add $RA/24 dev r-a
ip -n $s-b addr add $B/24 dev $s-b; ip -n $s-r addr add $RB/24 dev r-b
ip netns exec $s-r sysctl -qw net.ipv4.ip_forward=1
for h in a b; do
  ip netns exec $s-r dumpcap -q -i r-$h -f "udp port 4791" -w "$work/$h.pcapng" 2>/dev/null & pw_pids+=($!)
  eval "cap_$h=$!"
done
sleep 0.5

pingpong() {  # LOG SECONDS ARGS...: server in b, client in a, each over AF_XDP; 0 when both succeed
  local log=$1 secs=$2; shift 2
  ip netns exec $s-b timeout $secs "$rnic" pingpong --local $B --peer $A --server --xdp $s-b "$@" >"$work/$log.server" 2>&1 & local spid=$!
  pw_pids+=($spid)
  local crc=0 src=0
  ip netns exec $s-a timeout $secs "$rnic" pingpong --local $A --peer $B --xdp $s-a "$@" >"$work/$log.client" 2>&1 || crc=$?
  if [ $crc != 0 ]; then kill $spid 2>/dev/null || true; fi
  wait $spid || src=$?
  [ $crc = 0 ] && [ $src = 0 ]
}

# No route from a to b's subnet: nothing to send to.
if pingpong none 4 --size 256 --iterations 10; then
  cat "$work/none.client"; echo "FAIL: the pingpong completed with no route"; exit 1
fi
if grep -q 'AF_XDP on .* unavailable' "$work/none.client"; then
  cat "$work/none.client"; echo "SKIPPED: AF_XDP unavailable here"; exit 0
fi
echo "ok: without the routes the pingpong fails ($(tail -1 "$work/none.client" | cut -c1-100))"

ip -n $s-a route add 198.18.61.0/24 via $RA
ip -n $s-b route add 198.18.60.0/24 via $RB
pingpong routed 30 --size $size --iterations 2000 || {
  cat "$work/routed.server" "$work/routed.client"; echo "FAIL: pingpong through the router"; exit 1; }
grep -q "AF_XDP on $s-a (native XDP" "$work/routed.client" || { cat "$work/routed.client"; echo "FAIL: not over AF_XDP"; exit 1; }
echo "ok: pingpong $size B over AF_XDP through a router at MTU $mtu | $(grep '^bytes' "$work/routed.client")"
ip -n $s-a neigh show $RA | grep -q lladdr || { echo "FAIL: a never resolved its gateway"; exit 1; }
ip -n $s-a neigh show $B | grep -q lladdr && { echo "FAIL: a resolved $B, which is not on its link"; exit 1; }

sleep 0.3
kill -INT $cap_a $cap_b; wait $cap_a $cap_b 2>/dev/null || true
for h in a b; do
  frames=$(tshark -r "$work/$h.pcapng" 2>/dev/null | wc -l)
  ib=$(tshark -r "$work/$h.pcapng" -Y infiniband 2>/dev/null | wc -l)
  malformed=$(tshark -r "$work/$h.pcapng" -Y "_ws.malformed" 2>/dev/null | wc -l)
  big=$(tshark -r "$work/$h.pcapng" -Y "frame.len > 4096" 2>/dev/null | wc -l)
  echo "r-$h: stock tshark: $frames frames, $ib decoded as InfiniBand, $malformed malformed, $big over 4096 bytes"
  [ "$frames" -gt 2000 ] && [ "$ib" = "$frames" ] && [ "$malformed" = 0 ] || { echo "FAIL: tshark's decode on r-$h"; exit 1; }
  # at MTU 9000 each 4096-byte message is one frame of more than one UMEM frame, both ways
  [ $mtu = 3000 ] || [ "$big" -ge 2000 ] || { echo "FAIL: $big frames over 4096 bytes on r-$h at MTU $mtu"; exit 1; }
  /usr/bin/python3 "$here/../verbs/icrc_check.py" "$work/$h.pcapng" 1000 2 >"$work/icrc-$h.txt" || { cat "$work/icrc-$h.txt"; echo "FAIL: ICRC on r-$h"; exit 1; }
  echo "ok: r-$h: $(head -1 "$work/icrc-$h.txt")"
done
# Frames a sent reach b's link with a TTL one less: they were routed, not bridged.
ttl_a=$(tshark -r "$work/a.pcapng" -Y "ip.src == $A" -T fields -e ip.ttl -c 1 2>/dev/null)
ttl_b=$(tshark -r "$work/b.pcapng" -Y "ip.src == $A" -T fields -e ip.ttl -c 1 2>/dev/null)
[ -n "$ttl_a" ] && [ "$ttl_b" = $((ttl_a - 1)) ] || { echo "FAIL: TTL $ttl_a on r-a, $ttl_b on r-b"; exit 1; }
echo "ok: TTL $ttl_a on a's link, $ttl_b on b's"
echo "PASS: RoCEv2 over AF_XDP through a router: the gateway's MAC, every ICRC good on both links"
