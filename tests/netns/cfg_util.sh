#!/usr/bin/env bash
# CfgUtil through the split-model driver, driven by the real `ip` commands (spec/split-model.md,
# CfgUtil). Namespaces host, iou, lan as in split_model.sh. Checks, each within 1 s:
#  - InitializeNic at connection: pw0 takes the LAN NIC's MAC (--mac), and the speed lan0 reports;
#  - GetLinkState: lan0's speed set through SIOCETHTOOL reaches pw0; `ip link set lan0 down` takes
#    pw0's carrier down, `up` brings it back;
#  - the NIC's receive filter: unicast frames for another MAC do not reach pw0 (tcpdump -p);
#  - `ip link set pw0 promisc on` (SetPromiscuous) lets them through; `off` filters them again;
#  - `ip link set pw0 address` (SetMacAddress): the NIC takes the MAC (ARP from the LAN learns it,
#    frames to the old MAC are filtered);
#  - `ip link set pw0 mtu` (SetMtu): lan0 takes it; an MTU the NIC refuses is undone on pw0;
#  - a new I/O unit is initialized with the MAC and MTU the user set on pw0 (InitializeNic).
# usage: cfg_util.sh BUILD_DIR      (root; skips, visibly, without namespaces)
set -euo pipefail
build=$(cd "$1" && pwd)
. "$(dirname "$0")/../../examples/split-model/netns.sh"
pw_require ping python3 tcpdump timeout
s=pw$$; work=$(mktemp -d)
h=$s-host i=$s-iou l=$s-lan
trap 'pw_cleanup; rm -rf "$work"' EXIT
pw_split_topology $s
pw_start_iou "$build" $s "$work/iou.log" --mac 02:50:57:00:00:0a; iou=$pw_iou
pw_start_host "$build" $s "$work/host.log"; host=$pw_host
show_logs() { echo "--- host"; cat "$work/host.log"; echo "--- iou"; cat "$work/iou"*.log; }
fail() { show_logs; [ -s "$work/seen.log" ] && { echo "--- frames tcpdump saw on pw0"; cat "$work/seen.log"; }; echo "FAIL: $*"; exit 1; }
# within MS COMMAND...: COMMAND succeeds within MS milliseconds (polled every 20 ms); prints the ms taken
within() {
  local limit=$1 t0; shift; t0=$(date +%s%N)
  while ! "$@" >/dev/null 2>&1; do
    [ $(( ($(date +%s%N) - t0) / 1000000 )) -le $limit ] || return 1
    sleep 0.02
  done
  echo $(( ($(date +%s%N) - t0) / 1000000 ))
}
hsys() { ip netns exec $h cat /sys/class/net/pw0/$1 2>/dev/null; }
is() { [ "$($1 "${@:2:$#-2}")" = "${@: -1}" ]; }   # is FUNCTION ARGS... VALUE
mac_of() { ip -n $1 link show $2 | sed -n 's/.*link\/ether \([0-9a-f:]*\) .*/\1/p'; }
mtu_of() { ip -n $1 link show $2 | sed -n 's/.* mtu \([0-9]*\) .*/\1/p'; }
# lan0's speed as ethtool reports it, read or set (SIOCETHTOOL, ETHTOOL_GSET / ETHTOOL_SSET)
cat >"$work/speed.py" <<'PY'
import array, fcntl, socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
def ethtool(cmd):
    addr, _ = cmd.buffer_info()
    fcntl.ioctl(s.fileno(), 0x8946, struct.pack("16sP", b"lan0", addr) + bytes(16))
cmd = array.array("B", bytes(44)); struct.pack_into("I", cmd, 0, 1); ethtool(cmd)
if len(sys.argv) > 1:
    v = int(sys.argv[1]); struct.pack_into("I", cmd, 0, 2); struct.pack_into("H", cmd, 12, v & 0xFFFF); struct.pack_into("H", cmd, 28, v >> 16)
    ethtool(cmd)
else:
    print(struct.unpack_from("H", cmd, 12)[0] | struct.unpack_from("H", cmd, 28)[0] << 16)
PY
lan_speed() { ip netns exec $l python3 "$work/speed.py" "$@"; }

ip netns exec $h ping -c 2 -i 0.2 -w 10 198.18.1.2 >/dev/null || fail "ping through the driver"
# InitializeNic: the NIC's MAC and the LAN's speed (a TAP reports what it was last told, 10000 Mb/s at first on Linux 6.x)
ms=$(within 1000 is mac_of $h pw0 02:50:57:00:00:0a) || fail "pw0's MAC is $(mac_of $h pw0), the NIC's is 02:50:57:00:00:0a"
[ "$(hsys speed)" = "$(lan_speed)" ] || fail "pw0's speed $(hsys speed) is not lan0's $(lan_speed)"
echo "InitializeNic: pw0 took the NIC's MAC 02:50:57:00:00:0a and lan0's speed $(lan_speed) Mb/s"
# GetLinkState: speed and carrier
lan_speed 25000
ms=$(within 1000 is hsys speed 25000) || fail "pw0's speed $(hsys speed) 1 s after lan0's became 25000"
echo "lan0's speed set to 25000 Mb/s: pw0 reports it after $ms ms"
ip -n $l link set lan0 down
ms=$(within 1000 is hsys carrier 0) || fail "pw0's carrier still $(hsys carrier) 1 s after lan0 went down"
kill -0 $host $iou || fail "a module died when the LAN went down"
ip -n $l link set lan0 up
ms2=$(within 1000 is hsys carrier 1) || fail "pw0's carrier still $(hsys carrier) 1 s after lan0 came up"
ip netns exec $h ping -c 2 -i 0.2 -w 10 198.18.1.2 >/dev/null || fail "ping after the LAN came back"
echo "ip link set lan0 down: pw0's carrier down after $ms ms; up: back after $ms2 ms, ping answered"

# The receive filter and promiscuous mode: frames the LAN sends to another unicast MAC (a
# permanent neighbour entry on lan0) reach pw0 only while it is promiscuous. tcpdump -p does not
# make pw0 promiscuous itself.
ip -n $l neigh replace 198.18.1.77 lladdr 02:00:00:00:00:77 dev lan0 nud permanent
ip -n $l neigh replace 198.18.1.78 lladdr 02:50:57:00:00:0a dev lan0 nud permanent   # the NIC's first MAC
seen() {  # DST_MAC DST_IP: frames to DST_MAC seen on pw0 while the LAN pings DST_IP 5 times
  local f=$work/seen.$RANDOM
  ip netns exec $h timeout 3 tcpdump -p -n -l -i pw0 ether dst $1 >"$f" 2>/dev/null &
  local td=$!
  sleep 0.5
  ip netns exec $l ping -c 5 -i 0.1 -W 1 $2 >/dev/null 2>&1 || true
  wait $td 2>/dev/null || true
  grep . "$f" >>"$work/seen.log" || true
  grep -c . "$f" || true   # (tcpdump ends with an empty line when stopped)
}
n=$(seen 02:00:00:00:00:77 198.18.1.77)
[ "$n" = 0 ] || fail "$n frames for another MAC reached pw0 through the NIC's filter"
ip -n $h link set pw0 promisc on
within 1000 grep -q "LAN NIC promiscuous" "$work/iou.log" >/dev/null || fail "the NIC did not become promiscuous"
n=$(seen 02:00:00:00:00:77 198.18.1.77)
[ "$n" -ge 5 ] || fail "promiscuous: $n of 5 frames for another MAC reached pw0"
ip -n $h link set pw0 promisc off
within 1000 grep -q "LAN NIC not promiscuous" "$work/iou.log" >/dev/null || fail "the NIC stayed promiscuous"
n2=$(seen 02:00:00:00:00:77 198.18.1.77)
[ "$n2" = 0 ] || fail "promiscuous off: $n2 frames for another MAC still reached pw0"
echo "ip link set pw0 promisc on: $n frames for another MAC reach pw0 (0 before); off: 0 again"

# SetMacAddress
ip -n $h link set pw0 address 02:aa:bb:cc:dd:01
ms=$(within 1000 grep -q "LAN NIC MAC set to 02:aa:bb:cc:dd:01" "$work/iou.log") || fail "the NIC did not take pw0's new MAC"
ip -n $l neigh flush dev lan0 nud reachable nud stale nud delay nud probe 2>/dev/null || true
ip -n $l neigh del 198.18.1.1 dev lan0 2>/dev/null || true
ip netns exec $l ping -c 2 -i 0.2 -w 10 198.18.1.1 >/dev/null || fail "the LAN cannot reach pw0 at its new MAC"
[ "$(ip -n $l neigh show 198.18.1.1 | sed -n 's/.*lladdr \([0-9a-f:]*\).*/\1/p')" = 02:aa:bb:cc:dd:01 ] ||
  fail "the LAN's ARP entry for pw0: $(ip -n $l neigh show 198.18.1.1)"
n=$(seen 02:50:57:00:00:0a 198.18.1.78)
[ "$n" = 0 ] || fail "$n frames to the NIC's old MAC still reached pw0"
echo "ip link set pw0 address 02:aa:bb:cc:dd:01: the NIC took it after $ms ms; the LAN's ARP learns it; the old MAC is filtered"

# SetMtu, and one the NIC refuses (above 65471)
ip -n $h link set pw0 mtu 3000
ms=$(within 1000 is mtu_of $l lan0 3000) || fail "lan0's MTU is $(mtu_of $l lan0) 1 s after pw0's became 3000"
ip -n $h link set pw0 mtu 65500
within 1000 is mtu_of $h pw0 3000 >/dev/null || fail "pw0 kept MTU $(mtu_of $h pw0), which the NIC refused"
[ "$(mtu_of $l lan0)" = 3000 ] || fail "lan0's MTU became $(mtu_of $l lan0)"
ip netns exec $h ping -c 2 -i 0.2 -s 2900 -M do -w 10 198.18.1.2 >/dev/null || fail "ping of 2928 bytes at MTU 3000"
echo "ip link set pw0 mtu 3000: lan0 took it after $ms ms; mtu 65500 refused by the NIC and undone on pw0"

# A new I/O unit gets the user's MAC and MTU through InitializeNic.
kill -TERM $iou; wait $iou || true
pw_start_iou "$build" $s "$work/iou2.log" --mac 02:50:57:00:00:0b; iou=$pw_iou
within 5000 grep -q "LAN NIC MAC set to 02:aa:bb:cc:dd:01" "$work/iou2.log" >/dev/null || fail "the new I/O unit's NIC did not take the user's MAC"
within 2000 is mtu_of $l lan0 3000 >/dev/null || fail "the new I/O unit's lan0 has MTU $(mtu_of $l lan0), not the user's 3000"
[ "$(mac_of $h pw0)" = 02:aa:bb:cc:dd:01 ] || fail "pw0's MAC became $(mac_of $h pw0)"
ip netns exec $h ping -c 2 -i 0.2 -w 10 198.18.1.2 >/dev/null || fail "ping through the new I/O unit"
echo "a new I/O unit: InitializeNic gave its NIC the user's MAC and MTU 3000; ping answered"

kill -TERM $host $iou
rc_h=0; rc_i=0; wait $host || rc_h=$?; wait $iou || rc_i=$?; pw_pids=()
[ $rc_h = 0 ] && [ $rc_i = 0 ] || fail "teardown (host $rc_h, iou $rc_i)"
tail -n1 "$work/iou2.log" | grep -q "LAN NIC: MAC 02:aa:bb:cc:dd:01, MTU 3000, not promiscuous" || fail "the I/O unit's exit line"
tail -n1 "$work/iou.log" | grep -q "not promiscuous, [1-9][0-9]* frames filtered" || fail "the first I/O unit filtered no frame"
tail -n1 "$work/iou.log"
echo "PASS: InitializeNic, GetLinkState (carrier, speed), SetPromiscuous, SetMacAddress, SetMtu from ip link"
