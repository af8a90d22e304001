#!/usr/bin/env bash
# LAN emulation among three hosts (spec/split-model.md, "LAN emulation"): namespaces m1, m2, m3
# on one fabric (veths on a bridge in a fourth namespace, 198.18.0.1-3, RoCEv2 over UDP); each
# runs pushwire-host --lan-emulation, whose pw0 (198.18.2.1-3/24) has a MAC embedding its LID
# and UD QPN. Checks: ping between every pair; the kernel's ARP learned exactly those MACs;
# a broadcast ping is answered by both others; a file through TCP with its checksum compared;
# a member killed with -9 and restarted (a new incarnation) is reached again;
# SIGTERM: each member leaves with status 0.
# usage: lan_emulation.sh BUILD_DIR      (root; skips, visibly, without namespaces)
set -euo pipefail
build=$(cd "$1" && pwd)
. "$(dirname "$0")/../../examples/split-model/netns.sh"
pw_require ping python3
s=pwl$$; work=$(mktemp -d)
trap 'pw_cleanup; rm -rf "$work"' EXIT
pw_lan_topology $s 3
start() { pw_start_member "$build" $s $1 3 "$work/m$1.log"; }
show_logs() { for i in 1 2 3; do echo "--- m$i"; cat "$work/m$i.log"; done; }
fail() { show_logs; echo "FAIL: $*"; exit 1; }
for i in 1 2 3; do start $i; done
# every pair, both ways (the first ping of a pair waits for the members to hear each other, and ARP)
for pair in "1 2" "1 3" "2 3" "3 1"; do
  set -- $pair
  ip netns exec $s-m$1 ping -c 2 -i 0.2 -w 10 198.18.2.$2 >"$work/ping" || { cat "$work/ping"; fail "ping m$1 -> m$2"; }
done
echo "ping between every pair of the three members"
# the kernel's ARP entry for each member is the MAC that member announced: a2:<LID>:<UD QPN>
for i in 2 3; do
  mac=$(sed -n 's/.*interface pw0 MAC \([0-9a-f:]*\),.*/\1/p' "$work/m$i.log" | tail -n1)
  lid=$(sed -n 's/.*LID 0x\([0-9a-f]*\),.*/\1/p' "$work/m$i.log" | tail -n1)
  got=$(ip -n $s-m1 neigh show 198.18.2.$i dev pw0 | awk '{print $3}')
  [ "$got" = "$mac" ] || fail "m1's ARP has $got for 198.18.2.$i, the member announced $mac"
  [ "${mac:0:2}" = a2 ] && [ "$((16#${mac:3:2}${mac:6:2}))" = "$((16#$lid))" ] || fail "$mac does not embed LID 0x$lid"
done
echo "ARP resolved each member to its LID/QPN MAC: $(ip -n $s-m1 neigh show dev pw0 | awk '{printf "%s=%s ", $1, $3}')"
# a broadcast ping reaches both other members once
ip netns exec $s-m1 ping -b -c 3 -i 0.2 -w 5 198.18.2.255 >"$work/bping" 2>&1 || true
grep -q 'from 198.18.2.2' "$work/bping" && grep -q 'from 198.18.2.3' "$work/bping" || { cat "$work/bping"; fail "broadcast ping"; }
echo "broadcast ping from m1 answered by m2 and m3"
# a file through TCP between m2 and m3, checksum compared
head -c 2000000 /dev/urandom >"$work/f.bin"
pw_tcp_file $s-m2 $s-m3 198.18.2.3 "$work/f.bin" "$work" || fail "the file m2 -> m3 did not arrive intact over TCP"
echo "2000000 bytes m2 -> m3 over TCP: sha256 matches"
# kill -9 member 3; the others go on; restarted, it is reached again
kill -9 ${pw_member[3]}; wait ${pw_member[3]} 2>/dev/null || true; 
ip netns exec $s-m1 ping -c 2 -i 0.2 -w 5 198.18.2.2 >/dev/null || fail "m1 -> m2 after m3 died"
start 3
ip netns exec $s-m3 ping -c 2 -i 0.2 -w 10 198.18.2.1 >/dev/null || fail "the restarted m3 -> m1"
ip netns exec $s-m1 ping -c 2 -i 0.2 -w 10 198.18.2.3 >/dev/null || fail "m1 -> the restarted m3"
grep -q 'member 198.18.0.3 restarted\|member 198.18.0.3 joined' "$work/m1.log" || fail "m1 did not see m3 come back"
echo "m3 killed with -9 and restarted: m1 and m2 went on, and reach the new m3"
for i in 1 2 3; do kill -TERM ${pw_member[$i]}; done
for i in 1 2 3; do rc=0; wait ${pw_member[$i]} || rc=$?; [ $rc = 0 ] || fail "m$i left with status $rc"; done
pw_pids=()
tail -n1 "$work/m1.log"
grep -q 'broadcasts [1-9]' "$work/m1.log" || fail "m1 sent no broadcast"
echo "PASS: ping every pair, ARP to LID MACs, broadcast, TCP, member restart, clean leave"
