#!/usr/bin/env bash
# pushwire-rnic pingpong over AF_XDP (spec/net.md §6) between two namespaces on a bridge in a
# third: RC SENDs of 4096 bytes complete over AF_XDP on both sides; ibv_rc_pingpong, ib_write_bw
# and ib_write_lat through the verbs provider with its ports over AF_XDP, ib_write_bw through a
# pushwire-rnicd on each side with --xdp; while a second pingpong runs,
# ping, ARP (the neighbour entries are flushed first) and a TCP transfer (iperf3) work on the same
# interfaces; a capture on the bridge decodes as InfiniBand in stock tshark with nothing
# malformed and every ICRC good by scapy (tests/verbs/icrc_check.py); a pingpong killed with -9
# leaves no XDP program on its interface.
# At MTU 9000 (Linux 6.6 and later) the frames span two UMEM frames (multi-buffer AF_XDP).
# usage: xdp.sh BUILD      (root; skips, visibly, without namespaces or AF_XDP)
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../examples/split-model/netns.sh"
pw_require ping iperf3 dumpcap tshark /usr/bin/python3
rnic=$build/tools/pushwire-rnic
s=px$$; work=$(mktemp -d)
trap 'pw_cleanup; rm -rf "$work"' EXIT
pw_bridge $s a=198.18.7.1/24 b=198.18.7.2/24
# Multi-buffer AF_XDP (Linux 6.6): MTU 9000, a path MTU of 4096, frames over one UMEM frame. Before
# it, veth's native XDP takes an MTU up to about 3500: 3000, a path MTU of 2048 (spec/net.md §6).
mtu=$(pw_xdp_mtu); if [ $mtu = 9000 ]; then path=4096; else path=2048; fi
for h in a b; do ip -n $s-br link set $h-port mtu $mtu; ip -n $s-$h link set $s-$h mtu $mtu; done
ip netns exec $s-br dumpcap -q -i br0 -f "udp port 4791" -w "$work/xdp.pcapng" 2>/dev/null & cap=$!; pw_pids+=($cap)
sleep 0.5
xdp_on() { ip -n "$1" -d link show "$2" | grep -q 'prog/xdp'; }

pingpong() {  # LOGPREFIX ARGS...: server in b, client in a; both logs in $work/LOGPREFIX.{server,client}
  local log=$1; shift
  ip netns exec $s-b timeout 60 "$rnic" pingpong --local 198.18.7.2 --peer 198.18.7.1 --server --xdp $s-b "$@" >"$work/$log.server" 2>&1 & local spid=$!
  pw_pids+=($spid)
  local crc=0 src=0
  ip netns exec $s-a timeout 60 "$rnic" pingpong --local 198.18.7.1 --peer 198.18.7.2 --xdp $s-a "$@" >"$work/$log.client" 2>&1 || crc=$?
  wait $spid || src=$?
  if [ $crc != 0 ] || [ $src != 0 ]; then cat "$work/$log.server" "$work/$log.client"; echo "FAIL: pingpong $* (server $src, client $crc)"; exit 1; fi
}
pingpong first --size 4096 --iterations 2000
if grep -q 'AF_XDP on .* unavailable' "$work/first.client"; then
  cat "$work/first.client"; echo "SKIPPED: AF_XDP unavailable here"; exit 0
fi
grep -q "AF_XDP on $s-a (native XDP, copy mode)" "$work/first.client" || { cat "$work/first.client"; echo "FAIL: not over native AF_XDP"; exit 1; }
grep -q "AF_XDP on $s-b (native XDP, copy mode)" "$work/first.server" || { cat "$work/first.server"; echo "FAIL: server not over native AF_XDP"; exit 1; }
echo "ok: pingpong 4096 B over AF_XDP | $(grep '^bytes' "$work/first.client")"
xdp_on $s-a $s-a && { echo "FAIL: the program stayed on $s-a after the pingpong ended"; exit 1; }

# The verbs provider's ports over AF_XDP (PUSHWIRE_VERBS ... /xdp=IF, spec/verbs.md §2).
verbs=$build/verbs/pushwire-verbs
if [ -x "$verbs" ] && command -v ib_write_bw >/dev/null && command -v ibv_rc_pingpong >/dev/null; then
  run_verbs() {  # PORT PROGRAM ARGS...: server in b, client in a, each device's port over AF_XDP
    local port=$1; shift
    ip netns exec $s-b env PUSHWIRE_VERBS=pw0:198.18.7.2/xdp=$s-b timeout 60 "$verbs" run -- "$@" -p $port >"$work/vs.log" 2>&1 & local spid=$!
    for _ in $(seq 100); do ip netns exec $s-b ss -ltn "sport = :$port" | grep -q LISTEN && break; sleep 0.05; done
    local crc=0 src=0
    ip netns exec $s-a env PUSHWIRE_VERBS=pw0:198.18.7.1/xdp=$s-a timeout 60 "$verbs" run -- "$@" -p $port 198.18.7.2 >"$work/vc.log" 2>&1 || crc=$?
    wait $spid || src=$?
    if [ $crc != 0 ] || [ $src != 0 ] || grep -q 'unavailable' "$work/vs.log" "$work/vc.log"; then
      cat "$work/vs.log" "$work/vc.log"; echo "FAIL: $* over AF_XDP (server $src, client $crc)"; exit 1
    fi
    echo "ok: $* over AF_XDP | $(grep -E 'iters in|^ *[0-9]+ +[0-9]+ ' "$work/vc.log" | tail -1 | tr -s ' ')"
  }
  run_verbs 19411 ibv_rc_pingpong -d pw0 -g 0 -c -n 200
  run_verbs 19412 ib_write_bw -d pw0 -x 0 -F -n 2000 -s 65536
  run_verbs 19413 ib_write_lat -d pw0 -x 0 -F -n 2000 -s 64
  # The same through a device process on each side whose port is over AF_XDP (pushwire-rnicd --xdp).
  rnicd=$build/verbs/pushwire-rnicd
  for side in a b; do
    [ $side = a ] && addr=198.18.7.1 || addr=198.18.7.2
    ip netns exec $s-$side "$rnicd" --port pw0:$addr --xdp $s-$side --control "$work/$side.sock" 2>"$work/rnicd-$side.log" &
    eval "rnicd_$side=$!"; pw_pids+=($!)
    for _ in $(seq 100); do [ -S "$work/$side.sock" ] && break; sleep 0.05; done
    grep -q "AF_XDP on $s-$side (native XDP, copy mode), MTU $path" "$work/rnicd-$side.log" || { cat "$work/rnicd-$side.log"; echo "FAIL: pushwire-rnicd not over AF_XDP"; exit 1; }
  done
  ip netns exec $s-b env PUSHWIRE_VERBS=pw0@$work/b.sock timeout 60 "$verbs" run -- ib_write_bw -d pw0 -x 0 -F -n 2000 -s 65536 -p 19414 >"$work/ds.log" 2>&1 & dsp=$!
  for _ in $(seq 100); do ip netns exec $s-b ss -ltn "sport = :19414" | grep -q LISTEN && break; sleep 0.05; done
  ip netns exec $s-a env PUSHWIRE_VERBS=pw0@$work/a.sock timeout 60 "$verbs" run -- ib_write_bw -d pw0 -x 0 -F -n 2000 -s 65536 -p 19414 198.18.7.2 >"$work/dc.log" 2>&1 ||
    { cat "$work/dc.log" "$work/rnicd-a.log"; echo "FAIL: ib_write_bw through pushwire-rnicd over AF_XDP"; exit 1; }
  wait $dsp || { cat "$work/ds.log"; echo "FAIL: ib_write_bw's server through pushwire-rnicd over AF_XDP"; exit 1; }
  echo "ok: ib_write_bw through pushwire-rnicd --xdp on each side | $(grep -E '^ *[0-9]+ +[0-9]+ ' "$work/dc.log" | tail -1 | tr -s ' ')"
  kill -9 $rnicd_a; wait $rnicd_a 2>/dev/null || true
  for _ in $(seq 40); do xdp_on $s-a $s-a || break; sleep 0.05; done
  xdp_on $s-a $s-a && { echo "FAIL: pushwire-rnicd's program stayed on $s-a after kill -9"; exit 1; }
  kill $rnicd_b; wait $rnicd_b 2>/dev/null || true
  echo "ok: pushwire-rnicd killed with -9: its XDP program went with it"
fi

# The kernel's own traffic while the programs steer RoCE: ARP from scratch, ping, TCP.
ip -n $s-a neigh flush dev $s-a; ip -n $s-b neigh flush dev $s-b
# (no timeout(1) in front: the signals below must reach the programs; each gives up after 30 s)
ip netns exec $s-b "$rnic" pingpong --local 198.18.7.2 --peer 198.18.7.1 --server --xdp $s-b --iterations 100000000 >"$work/long.server" 2>&1 & sp=$!
ip netns exec $s-a "$rnic" pingpong --local 198.18.7.1 --peer 198.18.7.2 --xdp $s-a --iterations 100000000 >"$work/long.client" 2>&1 & cp=$!
pw_pids+=($sp $cp)
for _ in $(seq 100); do xdp_on $s-a $s-a && xdp_on $s-b $s-b && break; sleep 0.05; done
xdp_on $s-a $s-a && xdp_on $s-b $s-b || { echo "FAIL: no XDP program attached"; exit 1; }
ip netns exec $s-b iperf3 -s -1 -p 5201 >"$work/iperf.server" 2>&1 & ip_s=$!; pw_pids+=($ip_s)
sleep 0.3
ip netns exec $s-a ping -c 20 -i 0.05 -W 1 198.18.7.2 >"$work/ping.txt" || { cat "$work/ping.txt"; echo "FAIL: ping while AF_XDP runs"; exit 1; }
ip netns exec $s-a iperf3 -c 198.18.7.2 -p 5201 -n 20M >"$work/iperf.txt" 2>&1 || { cat "$work/iperf.txt"; echo "FAIL: TCP while AF_XDP runs"; exit 1; }
ip -n $s-a neigh show 198.18.7.2 | grep -qE 'lladdr' || { echo "FAIL: no ARP entry"; exit 1; }
kill -0 $cp 2>/dev/null && kill -0 $sp 2>/dev/null || { cat "$work/long.client" "$work/long.server"; echo "FAIL: the pingpong stopped while ping and TCP ran"; exit 1; }
echo "ok: while RDMA ran: ARP resolved, $(grep -o '[0-9]* received' "$work/ping.txt")/20 pings, TCP $(grep -E 'sender' "$work/iperf.txt" | tr -s ' ' | cut -d' ' -f5-8)"
# Killed with -9: the BPF link goes with the process, and the program with it.
kill -9 $cp; wait $cp 2>/dev/null || true
for _ in $(seq 40); do xdp_on $s-a $s-a || break; sleep 0.05; done
xdp_on $s-a $s-a && { echo "FAIL: the program stayed on $s-a after kill -9"; exit 1; }
kill $sp; wait $sp 2>/dev/null || true
for _ in $(seq 40); do xdp_on $s-b $s-b || break; sleep 0.05; done
xdp_on $s-b $s-b && { echo "FAIL: the program stayed on $s-b after SIGTERM"; exit 1; }
echo "ok: killed with -9 and with TERM, no XDP program left on either interface"

sleep 0.3; kill -INT $cap; wait $cap 2>/dev/null || true
frames=$(tshark -r "$work/xdp.pcapng" 2>/dev/null | wc -l)
ib=$(tshark -r "$work/xdp.pcapng" -Y infiniband 2>/dev/null | wc -l)
malformed=$(tshark -r "$work/xdp.pcapng" -Y "_ws.malformed" 2>/dev/null | wc -l)
echo "stock tshark: $frames frames, $ib decoded as InfiniBand, $malformed malformed"
[ "$frames" -gt 4000 ] && [ "$ib" = "$frames" ] && [ "$malformed" = 0 ] || { echo "FAIL: tshark's decode"; exit 1; }
# At MTU 9000, packets of 4096 bytes of payload: frames over one 4096-byte UMEM frame, both ways.
if [ $path = 4096 ]; then
  big=$(tshark -r "$work/xdp.pcapng" -Y "frame.len > 4096" 2>/dev/null | wc -l)
  echo "stock tshark: $big frames over 4096 bytes (multi-buffer AF_XDP)"
  [ "$big" -gt 1000 ] || { echo "FAIL: no frames over one UMEM frame at MTU 9000"; exit 1; }
fi
/usr/bin/python3 "$here/../verbs/icrc_check.py" "$work/xdp.pcapng" 1000 10 >"$work/icrc.txt" || { cat "$work/icrc.txt"; echo "FAIL: ICRC"; exit 1; }
echo "ok: $(head -1 "$work/icrc.txt")"
echo "PASS: pingpong over AF_XDP, the verbs provider over AF_XDP; ping, ARP and TCP beside it; every ICRC good; no program left behind"
