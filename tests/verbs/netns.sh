#!/usr/bin/env bash
# The provider between two network namespaces over a veth (spec/verbs.md §6): each side's
# device is named by PUSHWIRE_VERBS (pw0:198.18.3.1:1024@fd00:198:18:3::1 and
# pw0:198.18.3.2@fd00:198:18:3::2: GID 0 IPv4-mapped, GID 1 IPv6), ibv_rc_pingpong,
# ibv_ud_pingpong and perftest's write, read and atomic bandwidth run between them over GID 0,
# and ibv_rc_pingpong, ibv_ud_pingpong and ib_write_bw over GID 1, while dumpcap records the
# veth; stock tshark decodes every frame as InfiniBand, and scapy recomputes every ICRC
# (tests/verbs/icrc_check.py), IPv4 and IPv6.
# usage: netns.sh BUILD      (root; skips, visibly, without namespaces)
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../examples/split-model/netns.sh"
pw_require ibv_rc_pingpong ib_write_bw dumpcap tshark /usr/bin/python3
verbs=$build/verbs/pushwire-verbs
s=pv$$; work=$(mktemp -d)
trap 'pw_cleanup; rm -rf "$work"' EXIT
pw_netns $s-a; pw_netns $s-b
ip link add $s-a type veth peer name $s-b
ip link set $s-a netns $s-a; ip link set $s-b netns $s-b
ip -n $s-a addr add 198.18.3.1/30 dev $s-a; ip -n $s-a addr add fd00:198:18:3::1/64 dev $s-a nodad; ip -n $s-a link set $s-a up
ip -n $s-b addr add 198.18.3.2/30 dev $s-b; ip -n $s-b addr add fd00:198:18:3::2/64 dev $s-b nodad; ip -n $s-b link set $s-b up
dev_a=pw0:198.18.3.1:1024@fd00:198:18:3::1 dev_b=pw0:198.18.3.2@fd00:198:18:3::2
ip netns exec $s-a dumpcap -q -i $s-a -f "udp port 4791" -w "$work/verbs.pcapng" 2>/dev/null & cap=$!; pw_pids+=($cap)
sleep 0.5
run_pair() {  # PORT PROGRAM ARGS...: server in b, client in a
  local port=$1; shift
  ip netns exec $s-b env PUSHWIRE_VERBS=$dev_b timeout 60 "$verbs" run -- "$@" -p $port >"$work/server.log" 2>&1 & local spid=$!
  for _ in $(seq 100); do ip netns exec $s-b ss -ltn "sport = :$port" | grep -q LISTEN && break; sleep 0.05; done
  local crc=0 src=0
  ip netns exec $s-a env PUSHWIRE_VERBS=$dev_a timeout 60 "$verbs" run -- "$@" -p $port 198.18.3.2 >"$work/client.log" 2>&1 || crc=$?
  wait $spid || src=$?
  if [ $crc != 0 ] || [ $src != 0 ]; then
    cat "$work/server.log" "$work/client.log"; echo "FAIL: $* (server $src, client $crc)"; exit 1
  fi
  echo "ok: $* | $(grep -E 'iters in|^ *[0-9]+ +[0-9]+ ' "$work/client.log" | tail -1 | tr -s ' ')"
}
run_pair 19401 ibv_rc_pingpong -d pw0 -g 0 -c -n 100
run_pair 19402 ibv_ud_pingpong -d pw0 -g 0 -c -n 100 -s 512
run_pair 19403 ib_write_bw -d pw0 -x 0 -F -n 200 -s 65536
run_pair 19404 ib_read_bw -d pw0 -x 0 -F -n 200 -s 65536
run_pair 19405 ib_atomic_bw -d pw0 -x 0 -F -n 200
run_pair 19406 ibv_rc_pingpong -d pw0 -g 1 -c -n 100
run_pair 19407 ibv_ud_pingpong -d pw0 -g 1 -c -n 100 -s 512
run_pair 19408 ib_write_bw -d pw0 -x 1 -F -n 200 -s 65536
sleep 0.3; kill -INT $cap; wait $cap 2>/dev/null || true
frames=$(tshark -r "$work/verbs.pcapng" 2>/dev/null | wc -l)
ib=$(tshark -r "$work/verbs.pcapng" -Y infiniband 2>/dev/null | wc -l)
malformed=$(tshark -r "$work/verbs.pcapng" -Y "_ws.malformed" 2>/dev/null | wc -l)
echo "stock tshark: $frames frames, $ib decoded as InfiniBand, $malformed malformed"
[ "$frames" -gt 1000 ] && [ "$ib" = "$frames" ] && [ "$malformed" = 0 ] || { echo "FAIL: tshark's decode"; exit 1; }
/usr/bin/python3 "$here/icrc_check.py" "$work/verbs.pcapng" 1000 | tee "$work/icrc.txt" || { echo "FAIL: ICRC"; exit 1; }
grep -qE 'IPv4 [0-9]+, IPv6 [0-9]+' "$work/icrc.txt" || { echo "FAIL: both families"; exit 1; }
echo "PASS: pingpongs and perftest between namespaces; every frame decoded, every ICRC good"
