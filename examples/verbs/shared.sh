#!/usr/bin/env bash
# One software RNIC shared by many programs (spec/rnicd.md), as root:
#   examples/verbs/shared.sh [BUILD_DIR]        (default: build)
# Two namespaces with one address each (198.18.32.1, 198.18.32.2) and one pushwire-rnicd each,
# with two VFs. Two ibv_rc_pingpong pairs run at once through the two shared addresses, one on
# the PF and one on VF 1 (PUSHWIRE_VERBS=pw0@SOCKET#vf1); then `ctl show` counts what each
# function sent and received. Everything it made is removed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)
verbs=$build/verbs/pushwire-verbs rnicd=$build/verbs/pushwire-rnicd
[ -x "$verbs" ] || { echo "no $verbs (libibverbs-dev missing when built?)"; exit 1; }
. "$here/../split-model/netns.sh"
pw_require ibv_rc_pingpong
s=prd$$; work=$(mktemp -d)
trap 'pw_cleanup; rm -rf "$work"' EXIT
pw_veth_pair $s 198.18.32.1/30 198.18.32.2/30
for side in a b; do
  addr=198.18.32.1; [ $side = b ] && addr=198.18.32.2
  echo "== $s-$side: pushwire-rnicd --port pw0:$addr --functions 2 --control $work/$side.sock"
  ip netns exec $s-$side "$rnicd" --port pw0:$addr --functions 2 --control "$work/$side.sock" 2>&1 | sed "s/^/   [$side] /" &
  pw_pids+=($!)
  for _ in $(seq 100); do [ -S "$work/$side.sock" ] && break; sleep 0.05; done
done
sleep 0.2
echo "== two ibv_rc_pingpong pairs at once through the two addresses: pw0@$work/X.sock#pf and #vf1"
pids=()
for f in pf vf1; do
  port=19611; [ $f = vf1 ] && port=19612
  ip netns exec $s-b env "PUSHWIRE_VERBS=pw0@$work/b.sock#$f" "$verbs" run -- ibv_rc_pingpong -d pw0 -g 0 -c -n 300 -p $port >"$work/$f-server.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do ip netns exec $s-b ss -ltn "sport = :$port" | grep -q LISTEN && break; sleep 0.05; done
  ip netns exec $s-a env "PUSHWIRE_VERBS=pw0@$work/a.sock#$f" "$verbs" run -- ibv_rc_pingpong -d pw0 -g 0 -c -n 300 -p $port 198.18.32.2 >"$work/$f-client.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
for f in pf vf1; do echo "   $f: $(grep -h 'local address' "$work/$f-client.log") | $(grep -h 'iters in' "$work/$f-client.log")"; done
echo "== pushwire-rnicd ctl $work/a.sock show"
ip netns exec $s-a "$rnicd" ctl "$work/a.sock" show | grep -E '^(pf|vf[12]):|attached|^port'
