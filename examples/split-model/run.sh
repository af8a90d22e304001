#!/usr/bin/env bash
# The split-model driver end to end (spec/split-model.md), as root:
#   examples/split-model/run.sh [BUILD_DIR]        (default: build)
# Makes three namespaces (host, iou, lan; 198.18.0.0/15 only), starts pushwire-iou (which owns
# the LAN's interface) and pushwire-host (which gives the host's stack pw0), shows the fabric
# live in tshark with the pushwire plugin, pings the LAN through the driver, sets pw0's MAC with
# ip link (CfgUtil SetMacAddress), runs iperf3 TCP both ways (SECONDS_EACH, default 5; LAN ->
# host through TCP aggregation), then stops the host: a Flush each way, both exit 0 (their exit
# lines count carriers, pools, aggregates).
# Everything it made is removed on exit.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)
secs=${SECONDS_EACH:-5}
. "$here/netns.sh"
pw_require ping iperf3
s=pwx$$; work=$(mktemp -d)
trap 'pw_cleanup; rm -rf "$work"' EXIT
pw_split_topology $s
echo "== fabric: $s-host 198.18.0.1 <-> $s-iou 198.18.0.2 (veth, RoCEv2 over UDP 4791)"
pw_live_tshark "$build" $s-host $s-h 16
sleep 0.5  # (dumpcap listening before the first hello)
pw_start_iou "$build" $s "$work/iou.log"
pw_start_host "$build" $s "$work/host.log"
echo "== ping 198.18.1.2 (the LAN, behind the I/O unit) from the host namespace"
ip netns exec $s-host ping -c 5 -i 0.2 -w 10 198.18.1.2
wait $pw_tshark 2>/dev/null || true
echo "== the host's interface (MAC, MTU, carrier and speed from the I/O unit: CfgUtil InitializeNic)"
ip -n $s-host -br link show pw0
echo "== ip link set pw0 address 02:aa:00:00:00:01 on the host: SetMacAddress to the I/O unit's LAN NIC"
ip -n $s-host link set pw0 address 02:aa:00:00:00:01
sleep 0.2
grep -h "LAN NIC MAC set" "$work/iou.log" || true
ip netns exec $s-lan iperf3 -s -B 198.18.1.2 >"$work/iperf3.log" 2>&1 & pw_pids+=($!)
sleep 0.3
echo "== iperf3 TCP, host -> LAN, ${secs} s"
ip netns exec $s-host iperf3 -c 198.18.1.2 -t $secs -f m | grep -E 'sender|receiver'
echo "== iperf3 TCP, LAN -> host (-R), ${secs} s"
ip netns exec $s-host iperf3 -c 198.18.1.2 -t $secs -f m -R | grep -E 'sender|receiver'
echo "== SIGTERM: a Flush each way, then both modules leave"
kill -TERM $pw_host $pw_iou
rc_h=0 rc_i=0
wait $pw_host || rc_h=$?
wait $pw_iou || rc_i=$?
tail -n1 "$work/host.log"; tail -n1 "$work/iou.log"
echo "host exit $rc_h, I/O unit exit $rc_i"
[ $rc_h = 0 ] && [ $rc_i = 0 ]
