#!/usr/bin/env bash
# Automatic path migration through the verbs provider (spec/qos.md §9), twice:
# - two ports: two namespaces joined by two IPv4 veths, each device with a port on each
#   (PUSHWIRE_VERBS=pw0:A+A2); the path is on port 1, the alternate on port 2;
# - one port with two GIDs: an IPv4 veth (GID 0) and an IPv6 veth (GID 1) (pw0:A@A6).
# pushwire-apm arms an RC QP pair and streams numbered SENDs; the path's veth is taken down
# mid-stream (ip link set down). Both QPs must move to their alternate on their own (the path
# stops answering), raise IBV_EVENT_PATH_MIG, and every message arrive once, in order.
# usage: apm.sh BUILD     (root; skips, visibly, without namespaces)
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../examples/split-model/netns.sh"
pw_require
verbs=$build/verbs/pushwire-verbs apm=$build/tests/pushwire-apm
s=pm$$; work=$(mktemp -d)
trap 'pw_cleanup; rm -rf "$work"' EXIT
A=198.18.44.1 B=198.18.44.2 A2=198.18.45.1 B2=198.18.45.2 A6=fd44::1 B6=fd44::2
pw_veth_pair $s $A/30 $B/30
for v in 2 6; do  # the second IPv4 veth, and the IPv6 one
  ip link add $s-a$v type veth peer name $s-b$v
  ip link set $s-a$v netns $s-a; ip link set $s-b$v netns $s-b
  ip -n $s-a link set $s-a$v mtu 9000 up; ip -n $s-b link set $s-b$v mtu 9000 up
done
ip -n $s-a addr add $A2/30 dev $s-a2; ip -n $s-b addr add $B2/30 dev $s-b2
ip -n $s-a addr add $A6/64 dev $s-a6 nodad; ip -n $s-b addr add $B6/64 dev $s-b6 nodad
fail() { echo "FAIL: $*"; for f in "$work"/*.log; do echo "--- $f"; tail -20 "$f"; done; exit 1; }

run() {  # WHAT A_DEVICE B_DEVICE TCP_PORT
  local what=$1 da=$2 db=$3 port=$4 srv cli
  rm -f "$work"/*.log
  ip -n $s-a link set $s-a up
  ip netns exec $s-b env "PUSHWIRE_VERBS=$db" timeout 60 "$verbs" run -- "$apm" -p $port -n 6000 -r 2000 -T 12 >"$work/server.log" 2>&1 & srv=$!
  pw_pids+=($srv)
  ip netns exec $s-a env "PUSHWIRE_VERBS=$da" timeout 60 "$verbs" run -- "$apm" -p $port -n 6000 -r 2000 -T 12 $B >"$work/client.log" 2>&1 & cli=$!
  pw_pids+=($cli)
  for _ in $(seq 100); do grep -q armed "$work/client.log" 2>/dev/null && grep -q armed "$work/server.log" 2>/dev/null && break; sleep 0.05; done
  grep -q armed "$work/client.log" || fail "$what: the client did not arm its QP"
  sleep 1
  ip -n $s-a link set $s-a down  # the path: gone mid-stream
  echo "$what: the path's veth down at $(date +%T.%N | cut -c1-12)"
  wait $cli || fail "$what: the client"
  wait $srv || fail "$what: the server"
  grep "^ok:" "$work/client.log"
  grep "^ok:" "$work/server.log"
  grep -q "port 2 GID 0" "$work/client.log" || [ "$what" != "two ports" ] || fail "$what: not on port 2"
  echo "PASS ($what): both QPs moved to their alternate path when the path's veth went down; every message once, in order"
}
run "two ports" "pw0:$A+$A2" "pw0:$B+$B2" 19650
run "two GIDs" "pw0:$A@$A6" "pw0:$B@$B6" 19651
