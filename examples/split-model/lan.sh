#!/usr/bin/env bash
# LAN emulation among three hosts (spec/split-model.md, "LAN emulation"), as root:
#   examples/split-model/lan.sh [BUILD_DIR]        (default: build)
# Three namespaces on one fabric (a bridge; 198.18.0.1-3), each running
# pushwire-host --lan-emulation: pw0 (198.18.2.1-3) has a MAC that embeds the member's LID and UD
# QPN. Shows the fabric live in tshark, pings between members, shows the ARP tables the kernel
# built (the LID MACs), pings the broadcast address, runs iperf3 TCP between two members
# (SECONDS_EACH, default 5), and lets every member leave. Everything it made is removed on exit.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)
secs=${SECONDS_EACH:-5}
. "$here/netns.sh"
pw_require ping iperf3
s=pwy$$; work=$(mktemp -d)
trap 'pw_cleanup; rm -rf "$work"' EXIT
pw_lan_topology $s 3
pw_live_tshark "$build" $s-m1 $s-v1 12
sleep 0.5
for i in 1 2 3; do pw_start_member "$build" $s $i 3 "$work/m$i.log"; head -n1 "$work/m$i.log"; done
echo "== m1 pings m2 and m3"
ip netns exec $s-m1 ping -c 3 -i 0.2 -w 10 198.18.2.2 | tail -n2
ip netns exec $s-m1 ping -c 3 -i 0.2 -w 10 198.18.2.3 | tail -n2
wait $pw_tshark 2>/dev/null || true
echo "== m1's ARP table: each member's MAC is a2:<LID>:<UD QPN>"
ip -n $s-m1 neigh show dev pw0
echo "== a broadcast ping from m2: both other members answer"
ip netns exec $s-m2 ping -b -c 2 -i 0.2 -w 5 198.18.2.255 2>/dev/null | grep 'bytes from' || true
ip netns exec $s-m3 iperf3 -s -B 198.18.2.3 >"$work/iperf3.log" 2>&1 & pw_pids+=($!)
sleep 0.3
echo "== iperf3 TCP, m2 -> m3, ${secs} s"
ip netns exec $s-m2 iperf3 -c 198.18.2.3 -t $secs -f m | grep -E 'sender|receiver'
for i in 1 2 3; do kill -TERM ${pw_member[$i]}; done
for i in 1 2 3; do wait ${pw_member[$i]} || true; tail -n1 "$work/m$i.log"; done
