#!/usr/bin/env bash
# Moving a running RDMA program's function to another device process (spec/migration.md), as root:
#   examples/verbs/migrate.sh [BUILD_DIR]        (default: build)
# Three namespaces on a bridge: hosts a (198.18.43.1) and b (198.18.43.2), each with a
# pushwire-rnicd, and a peer (198.18.43.3) with a device of its own. a's VF 1 has an address of
# its own, 198.18.43.11. An ibv_rc_pingpong on that VF runs against the peer while the VF moves to
# b, address and all; the program is not told, and its pingpong checks every byte. Everything it
# made is removed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)
verbs=$build/verbs/pushwire-verbs rnicd=$build/verbs/pushwire-rnicd
[ -x "$verbs" ] || { echo "no $verbs (libibverbs-dev missing when built?)"; exit 1; }
. "$here/../split-model/netns.sh"
pw_require ibv_rc_pingpong
s=pmd$$; work=$(mktemp -d); chmod 755 "$work"
trap 'pw_cleanup; rm -rf "$work"' EXIT
pw_bridge $s "a=198.18.43.1/24 198.18.43.11/24" "b=198.18.43.2/24" "p=198.18.43.3/24"
for side in a b; do
  addr=198.18.43.1; [ $side = b ] && addr=198.18.43.2
  echo "== $s-$side: pushwire-rnicd --port pw0:$addr --functions 1 --control $work/$side.sock"
  ip netns exec $s-$side "$rnicd" --port pw0:$addr --functions 1 --control "$work/$side.sock" 2>&1 | sed "s/^/   [$side] /" &
  pw_pids+=($!)
  for _ in $(seq 100); do [ -S "$work/$side.sock" ] && break; sleep 0.05; done
done
echo "== a: ctl vf set 1 gid 198.18.43.11 (its own address); b: ctl vf del 1 (it arrives)"
"$rnicd" ctl "$work/a.sock" vf set 1 gid 198.18.43.11 >/dev/null
"$rnicd" ctl "$work/b.sock" vf del 1 >/dev/null
echo "== ibv_rc_pingpong -c: the peer's device against a's VF 1"
ip netns exec $s-p env PUSHWIRE_VERBS=pw0:198.18.43.3 "$verbs" run -- ibv_rc_pingpong -d pw0 -g 0 -c -s 256 -n 20000 -p 19631 >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 100); do ip netns exec $s-p ss -ltn "sport = :19631" | grep -q LISTEN && break; sleep 0.05; done
ip netns exec $s-a env "PUSHWIRE_VERBS=pw0@$work/a.sock#vf1" "$verbs" run -- ibv_rc_pingpong -d pw0 -g 0 -c -s 256 -n 20000 -p 19631 198.18.43.3 >"$work/client.log" 2>&1 &
client=$!
sleep 1
echo "== pushwire-rnicd ctl $work/a.sock migrate 1 --to $work/b.sock   (while it runs)"
"$rnicd" ctl "$work/a.sock" migrate 1 --to "$work/b.sock" | sed 's/^/   /'
ip netns exec $s-b ip -br addr show dev $s-b | sed 's/^/   b now has: /'
wait $client
wait $server
echo "   the program: $(grep -h 'iters in' "$work/client.log") (every byte checked)"
