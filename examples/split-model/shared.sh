#!/usr/bin/env bash
# One I/O unit shared by two hosts (spec/split-model.md, "Sharing"), as root:
#   examples/split-model/shared.sh [BUILD_DIR]        (default: build)
# Namespaces h1 and h2 (fabric 198.18.0.1 and .3) and iou (198.18.0.2) on a bridge, and lan
# (lan0, 198.18.1.2). pushwire-iou serves both hosts; each host's pw0 (198.18.1.1, .3) is its
# own function of the LAN NIC, with its own MAC. Pings the LAN from each host and h2 from h1,
# shows the LAN's ARP table (two MACs behind one NIC), runs iperf3 TCP from both hosts to the
# LAN at once (SECONDS_EACH, default 5), and stops everything (the I/O unit's exit line per
# host). Everything it made is removed on exit.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)
secs=${SECONDS_EACH:-5}
. "$here/netns.sh"
pw_require ping iperf3
s=pwz$$; work=$(mktemp -d)
trap 'pw_cleanup; rm -rf "$work"' EXIT
pw_bridge $s "h1=198.18.0.1/24" "h2=198.18.0.3/24" "iou=198.18.0.2/24"
pw_netns $s-lan
ip netns exec $s-iou "$build/tools/pushwire-iou" --local 198.18.0.2 --peer 198.18.0.1 --peer 198.18.0.3 --tap lan0 --fabric-mtu 9000 \
  >"$work/iou.log" 2>&1 &
iou=$!; pw_pids+=($iou)
pw_wait_link $s-iou lan0
ip -n $s-iou link set lan0 netns $s-lan
ip -n $s-lan addr add 198.18.1.2/24 dev lan0; ip -n $s-lan link set lan0 up
head -n1 "$work/iou.log"
hosts=()
for n in 1 2; do
  ip netns exec $s-h$n "$build/tools/pushwire-host" --local 198.18.0.$((2 * n - 1)) --peer 198.18.0.2 --tap pw0 --fabric-mtu 9000 \
    >"$work/h$n.log" 2>&1 &
  hosts+=($!); pw_pids+=($!)
  pw_wait_link $s-h$n pw0
  ip -n $s-h$n addr add 198.18.1.$((2 * n - 1))/24 dev pw0; ip -n $s-h$n link set pw0 up
done
for n in 1 2; do
  echo "== h$n pings the LAN"
  ip netns exec $s-h$n ping -c 3 -i 0.2 -w 10 198.18.1.2 | tail -n2
done
echo "== h1 pings h2 (the frames stay inside the NIC)"
ip netns exec $s-h1 ping -c 3 -i 0.2 -w 10 198.18.1.3 | tail -n2
echo "== the LAN's ARP table: each host behind the one NIC has its own MAC"
ip -n $s-lan neigh show dev lan0
for p in 5201 5202; do ip netns exec $s-lan iperf3 -s -B 198.18.1.2 -p $p >/dev/null 2>&1 & pw_pids+=($!); done
sleep 0.3
echo "== iperf3 TCP from h1 and h2 to the LAN at once, ${secs} s"
ip netns exec $s-h1 iperf3 -c 198.18.1.2 -p 5201 -t $secs -f m >"$work/i1.txt" & c1=$!
ip netns exec $s-h2 iperf3 -c 198.18.1.2 -p 5202 -t $secs -f m >"$work/i2.txt" & c2=$!
wait $c1 $c2 || true
for n in 1 2; do echo "h$n: $(grep receiver "$work/i$n.txt" | tr -s ' ')"; done
kill -TERM "${hosts[@]}"; wait "${hosts[@]}" || true
kill -TERM $iou; wait $iou || true
grep '^pushwire-iou (host' "$work/iou.log" | sed 's/; datagrams.*LAN NIC:/; ... LAN NIC:/'
