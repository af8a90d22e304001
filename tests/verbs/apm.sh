#!/usr/bin/env bash
# Automatic path migration through the verbs provider (spec/qos.md §9): two namespaces joined by
# two veths, one carrying IPv4 (each device's GID 0) and one IPv6 (GID 1). pushwire-apm arms an
# RC QP pair with its path on IPv4 and its alternate on IPv6 and streams numbered SENDs; the IPv4
# veth is taken down mid-stream (ip link set down). Both QPs must move to IPv6 on their own (the
# path stops answering), raise IBV_EVENT_PATH_MIG, and every message arrive once, in order.
# usage: apm.sh BUILD     (root; skips, visibly, without namespaces)
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../examples/split-model/netns.sh"
pw_require
verbs=$build/verbs/pushwire-verbs apm=$build/tests/pushwire-apm
s=pm$$; work=$(mktemp -d)
trap 'pw_cleanup; rm -rf "$work"' EXIT
A=198.18.44.1 B=198.18.44.2 A6=fd44::1 B6=fd44::2
pw_veth_pair $s $A/30 $B/30
ip link add $s-a6 type veth peer name $s-b6
ip link set $s-a6 netns $s-a; ip link set $s-b6 netns $s-b
ip -n $s-a addr add $A6/64 dev $s-a6 nodad; ip -n $s-b addr add $B6/64 dev $s-b6 nodad
ip -n $s-a link set $s-a6 mtu 9000 up; ip -n $s-b link set $s-b6 mtu 9000 up
fail() { echo "FAIL: $*"; for f in "$work"/*.log; do echo "--- $f"; tail -20 "$f"; done; exit 1; }

ip netns exec $s-b env "PUSHWIRE_VERBS=pw0:$B@$B6" timeout 60 "$verbs" run -- "$apm" -p 19650 -n 6000 -r 2000 -T 12 >"$work/server.log" 2>&1 & srv=$!
pw_pids+=($srv)
ip netns exec $s-a env "PUSHWIRE_VERBS=pw0:$A@$A6" timeout 60 "$verbs" run -- "$apm" -p 19650 -n 6000 -r 2000 -T 12 $B >"$work/client.log" 2>&1 & cli=$!
pw_pids+=($cli)
for _ in $(seq 100); do grep -q armed "$work/client.log" 2>/dev/null && grep -q armed "$work/server.log" 2>/dev/null && break; sleep 0.05; done
grep -q armed "$work/client.log" || fail "the client did not arm its QP"
sleep 1
ip -n $s-a link set $s-a down  # the IPv4 path: gone mid-stream
echo "IPv4 veth down at $(date +%T.%N | cut -c1-12)"
wait $cli || fail "the client"
wait $srv || fail "the server"
grep "^ok:" "$work/client.log"
grep "^ok:" "$work/server.log"
echo "PASS: both QPs moved to their alternate path (IPv6) when the IPv4 veth went down; every message once, in order"
