#!/usr/bin/env bash
# Unmodified RDMA programs on pushwire's software RNIC (spec/verbs.md), as root:
#   examples/verbs/run.sh [BUILD_DIR]        (default: build)
# ibverbs-utils and perftest, run through libpushwire-verbs.so (pushwire-verbs run): the device
# they see, ibv_rc_pingpong between two network namespaces (198.18.3.1 <-> 198.18.3.2 over a
# veth) with its RoCEv2 frames live in tshark and the pushwire plugin, then perftest's write
# bandwidth and latency between two processes over loopback. Everything it made is removed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)
verbs=$build/verbs/pushwire-verbs
[ -x "$verbs" ] || { echo "no $verbs (libibverbs-dev missing when built?)"; exit 1; }
. "$here/../split-model/netns.sh"
pw_require ibv_rc_pingpong ib_write_bw
s=pvd$$
trap 'pw_cleanup' EXIT
pw_netns $s-a; pw_netns $s-b
ip link add $s-a type veth peer name $s-b
ip link set $s-a netns $s-a; ip link set $s-b netns $s-b
ip -n $s-a addr add 198.18.3.1/30 dev $s-a; ip -n $s-a link set $s-a up
ip -n $s-b addr add 198.18.3.2/30 dev $s-b; ip -n $s-b link set $s-b up
echo "== the device a verbs program sees in $s-a: PUSHWIRE_VERBS=pw0:198.18.3.1 pushwire-verbs run -- ibv_devinfo -v"
ip netns exec $s-a env PUSHWIRE_VERBS=pw0:198.18.3.1 "$verbs" run -- ibv_devinfo -v |
  grep -E 'hca_id|fw_ver|node_guid|max_qp:|atomic_cap|state:|active_mtu|link_layer|GID\['
echo "== ibv_rc_pingpong between namespaces $s-a (198.18.3.1) and $s-b (198.18.3.2); the veth live in tshark"
pw_live_tshark "$build" $s-a $s-a 6 -Y infiniband
sleep 0.5
ip netns exec $s-b env PUSHWIRE_VERBS=pw0:198.18.3.2 "$verbs" run -- ibv_rc_pingpong -d pw0 -g 0 -c -n 1000 -p 19601 &
srv=$!; pw_pids+=($srv)
for _ in $(seq 100); do ip netns exec $s-b ss -ltn "sport = :19601" | grep -q LISTEN && break; sleep 0.05; done
ip netns exec $s-a env PUSHWIRE_VERBS=pw0:198.18.3.1 "$verbs" run -- ibv_rc_pingpong -d pw0 -g 0 -c -n 1000 -p 19601 198.18.3.2
wait $srv
wait $pw_tshark 2>/dev/null || true
for prog in "ib_write_bw -s 65536 -n 5000" "ib_write_lat -s 64 -n 5000"; do
  echo "== perftest $prog, two processes over loopback (each device on its own 127.0.0.N)"
  "$verbs" run -- $prog -d pw0 -x 0 -F -p 19602 >/dev/null 2>&1 &
  srv=$!; pw_pids+=($srv)
  for _ in $(seq 100); do ss -ltn "sport = :19602" | grep -q LISTEN && break; sleep 0.05; done
  "$verbs" run -- $prog -d pw0 -x 0 -F -p 19602 127.0.0.1 | grep -A1 '#bytes'
  wait $srv
done
