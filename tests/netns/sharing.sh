#!/usr/bin/env bash
# One I/O unit shared by two hosts (spec/split-model.md, Sharing): namespaces h1 (fabric
# 198.18.0.1), h2 (198.18.0.3) and iou (198.18.0.2) on a bridge, lan (lan0, 198.18.1.2). Each
# host's pw0 (198.18.1.1 and .3) is its own function of the LAN NIC. Checks: each host's MAC
# is the I/O unit's --mac plus its index, and the LAN's ARP table holds both; ping from each
# host to the LAN and between the hosts (inside the NIC); TCP files LAN <- h1 and LAN -> h2 at
# once, sha256 compared; scapy-built frames from the LAN steered by destination MAC (200 to h1's
# reach h1 and not h2, 200 to an unknown MAC reach neither and are counted), then with h2
# promiscuous they reach h2 too; h2 cannot take h1's MAC (its pw0 is put back); kill -9 of h1
# leaves h2 working, and h1 restarted is served again; SIGTERM: every module exits 0 after its
# Flush, the I/O unit with one exit line per host. Bad host lists are refused (exit 2).
# usage: sharing.sh BUILD_DIR      (root; skips, visibly, without namespaces)
set -euo pipefail
build=$(cd "$1" && pwd)
. "$(dirname "$0")/../../examples/split-model/netns.sh"
pw_require ping /usr/bin/python3
s=pw$$; work=$(mktemp -d)
trap 'pw_cleanup; rm -rf "$work"' EXIT
pw_bridge $s "h1=198.18.0.1/24" "h2=198.18.0.3/24" "iou=198.18.0.2/24"
pw_netns $s-lan
for n in lan h1 h2; do ip netns exec $s-$n sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1; done
show_logs() { for f in "$work"/*.log; do echo "--- $f"; tail -30 "$f"; done; }
fail() { echo "FAIL: $*"; show_logs; exit 1; }

# Refused at once (usage, exit 2): a host twice, 17 hosts, MACs that would wrap, a host with two peers.
refused() {  # PROGRAM ARGS...
  local st=0; "$build/tools/$@" >/dev/null 2>&1 || st=$?
  [ $st = 2 ] || fail "$* exited $st, not 2"
}
refused pushwire-iou --local 198.18.0.2 --peer 198.18.0.1 --peer 198.18.0.1
refused pushwire-iou --local 198.18.0.2 $(for i in $(seq 17); do echo --peer 198.18.0.$((i + 2)); done)
refused pushwire-iou --local 198.18.0.2 --peer 198.18.0.1 --peer 198.18.0.3 --mac 02:50:57:00:00:ff
refused pushwire-host --local 198.18.0.1 --peer 198.18.0.2 --peer 198.18.0.3
echo "refused: a host twice, 17 hosts, MACs past :ff, a host module with two peers"

ip netns exec $s-iou "$build/tools/pushwire-iou" --local 198.18.0.2 --peer 198.18.0.1 --peer 198.18.0.3 --tap lan0 --fabric-mtu 9000 \
  --mac 02:50:57:00:00:10 -v >"$work/iou.log" 2>&1 &
iou=$!; pw_pids+=($iou)
pw_wait_link $s-iou lan0
ip -n $s-iou link set lan0 netns $s-lan
ip -n $s-lan addr add 198.18.1.2/24 dev lan0; ip -n $s-lan link set lan0 up
start_host() {  # N FABRIC_ADDRESS PW0_ADDRESS: sets host_N
  ip netns exec $s-h$1 "$build/tools/pushwire-host" --local $2 --peer 198.18.0.2 --tap pw0 --fabric-mtu 9000 -v >>"$work/h$1.log" 2>&1 &
  local pid=$!; pw_pids+=($pid); eval "host_$1=$pid"
  pw_wait_link $s-h$1 pw0
  ip -n $s-h$1 addr add $3/24 dev pw0 2>/dev/null || true; ip -n $s-h$1 link set pw0 up
}
start_host 1 198.18.0.1 198.18.1.1
start_host 2 198.18.0.3 198.18.1.3
pw0_mac() { ip netns exec $s-h$1 cat /sys/class/net/pw0/address; }
pw0_rx() { ip netns exec $s-h$1 cat /sys/class/net/pw0/statistics/rx_packets; }
wait_mac() {  # N MAC: pw0 of host N has MAC within 2 s
  for _ in $(seq 40); do [ "$(pw0_mac $1)" = "$2" ] && return 0; sleep 0.05; done
  return 1
}

# Each host's function: the I/O unit's --mac plus the host's index (InitializeNic's answer).
wait_mac 1 02:50:57:00:00:10 || fail "h1's pw0 has $(pw0_mac 1), not 02:50:57:00:00:10"
wait_mac 2 02:50:57:00:00:11 || fail "h2's pw0 has $(pw0_mac 2), not 02:50:57:00:00:11"
echo "h1's pw0 is 02:50:57:00:00:10, h2's 02:50:57:00:00:11 (InitializeNic)"

for n in 1 2; do
  ip netns exec $s-h$n ping -c 3 -i 0.2 -w 10 198.18.1.2 >"$work/ping$n.txt" || { cat "$work/ping$n.txt"; fail "ping from h$n to the LAN"; }
  echo "h$n -> LAN: $(grep -E 'packets transmitted' "$work/ping$n.txt")"
done
neigh() { ip -n $s-lan neigh show 198.18.1.$1 | awk '{print $5}'; }
[ "$(neigh 1)" = 02:50:57:00:00:10 ] && [ "$(neigh 3)" = 02:50:57:00:00:11 ] ||
  fail "the LAN's ARP table: 198.18.1.1 $(neigh 1), 198.18.1.3 $(neigh 3)"
echo "the LAN's ARP table: 198.18.1.1 at 02:50:57:00:00:10, 198.18.1.3 at 02:50:57:00:00:11"
ip netns exec $s-h1 ping -c 3 -i 0.2 -w 10 198.18.1.3 >"$work/ping12.txt" || { cat "$work/ping12.txt"; fail "ping from h1 to h2"; }
echo "h1 -> h2 inside the NIC: $(grep -E 'packets transmitted' "$work/ping12.txt")"

# TCP: h1 -> LAN and LAN -> h2 at once.
head -c 4000000 /dev/urandom >"$work/up.bin"; head -c 4000000 /dev/urandom >"$work/down.bin"
mkdir "$work/t1" "$work/t2"
pw_tcp_file $s-h1 $s-lan 198.18.1.2 "$work/up.bin" "$work/t1" & up=$!
pw_tcp_file $s-lan $s-h2 198.18.1.3 "$work/down.bin" "$work/t2" & down=$!
wait $up || fail "4 MB h1 -> LAN did not arrive intact"
wait $down || fail "4 MB LAN -> h2 did not arrive intact"
echo "4000000 bytes h1 -> LAN and 4000000 bytes LAN -> h2 over TCP at once: sha256 match"

# Steering by destination MAC: frames the LAN sends to h1's MAC, then to a MAC no host has.
cat >"$work/frames.py" <<'PY'
import sys
from scapy.all import Ether, IP, UDP, Raw, sendp
dst, ip, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
f = Ether(src="02:99:00:00:00:02", dst=dst) / IP(src="198.18.1.2", dst=ip) / UDP(sport=7777, dport=7777) / Raw(b"steer" * 20)
sendp(f, iface="lan0", count=n, inter=0.001, verbose=False)
PY
steer() {  # MAC: sends 200 frames to MAC; prints "h1's delta h2's delta"
  local a1 a2
  a1=$(pw0_rx 1) a2=$(pw0_rx 2)
  ip netns exec $s-lan /usr/bin/python3 "$work/frames.py" $1 198.18.1.1 200
  sleep 0.5
  echo "$(( $(pw0_rx 1) - a1 )) $(( $(pw0_rx 2) - a2 ))"
}
read -r d1 d2 <<<"$(steer 02:50:57:00:00:10)"
[ "$d1" -ge 200 ] && [ "$d2" -lt 5 ] || fail "200 frames to h1's MAC: h1's pw0 got $d1, h2's $d2"
echo "200 frames to h1's MAC: h1's pw0 received $d1, h2's $d2"
read -r d1 d2 <<<"$(steer 02:50:57:00:00:33)"
[ "$d1" -lt 5 ] && [ "$d2" -lt 5 ] || fail "200 frames to an unknown MAC: h1's pw0 got $d1, h2's $d2"
echo "200 frames to an unknown MAC: h1's pw0 received $d1, h2's $d2"
ip -n $s-h2 link set pw0 promisc on
sleep 0.5
read -r d1 d2 <<<"$(steer 02:50:57:00:00:10)"
[ "$d1" -ge 200 ] && [ "$d2" -ge 200 ] || fail "with h2 promiscuous, 200 frames to h1's MAC: h1's pw0 got $d1, h2's $d2"
echo "h2 promiscuous (SetPromiscuous), 200 frames to h1's MAC: h1's pw0 received $d1, h2's $d2"
ip -n $s-h2 link set pw0 promisc off

# h2 cannot take h1's MAC: SetMacAddress is refused, and pw0 takes its own back.
ip -n $s-h2 link set pw0 address 02:50:57:00:00:10
sleep 0.3
wait_mac 2 02:50:57:00:00:11 || fail "h2's pw0 kept h1's MAC ($(pw0_mac 2))"
echo "h2 asked for h1's MAC: refused, pw0 back to 02:50:57:00:00:11"

# kill -9 of h1: h2 works on; h1 restarted is served again.
kill -9 $host_1; wait $host_1 2>/dev/null || true
ip netns exec $s-h2 ping -c 3 -i 0.2 -w 10 198.18.1.2 >"$work/ping2b.txt" || { cat "$work/ping2b.txt"; fail "h2 after h1 was killed"; }
echo "h1 killed (-9): h2 -> LAN $(grep -E 'packets transmitted' "$work/ping2b.txt")"
start_host 1 198.18.0.1 198.18.1.1
ip netns exec $s-h1 ping -c 3 -i 0.2 -w 15 198.18.1.2 >"$work/ping1b.txt" || { cat "$work/ping1b.txt"; fail "h1 restarted"; }
echo "h1 restarted: h1 -> LAN $(grep -E 'packets transmitted' "$work/ping1b.txt")"

# SIGTERM: each module flushes and exits 0; the I/O unit's exit lines name each host.
kill -TERM $host_1 $host_2
st=0; wait $host_1 || st=$?; [ $st = 0 ] || fail "h1 exited $st"
st=0; wait $host_2 || st=$?; [ $st = 0 ] || fail "h2 exited $st"
kill -TERM $iou
st=0; wait $iou || st=$?
grep -q '^pushwire-iou (host 198.18.0.1): closed;.* MAC 02:50:57:00:00:10' "$work/iou.log" &&
  grep -q '^pushwire-iou (host 198.18.0.3): closed;.* MAC 02:50:57:00:00:11' "$work/iou.log" || fail "the I/O unit's exit lines"
grep -q 'frames no host took [1-9]' "$work/iou.log" || fail "the I/O unit counted no frame that no host took"
[ $st = 0 ] || fail "the I/O unit exited $st"
grep '^pushwire-iou (host' "$work/iou.log" | sed 's/; datagrams.*LAN NIC:/; ... LAN NIC:/'
echo "PASS: one I/O unit shared by two hosts: own MACs, ping, TCP, steering by MAC, kill -9 and restart of one host, clean exits"
