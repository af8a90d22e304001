#!/usr/bin/env bash
# Live migration's downtime against the number of QPs on the function (spec/migration.md §6;
# issue 32's goal: p50 ≤ 20 ms and max ≤ 50 ms with 64 QPs on veth). The setting of
# tests/verbs/migrate.sh: three namespaces on a bridge, a device process on host a and on host b,
# a peer with an in-process device; the guest runs `ib_write_bw -q N` (64 KiB) on VF 1 against
# the peer while the function moves a -> b -> a ... MOVES times (default 5), one every 1.5 s.
#
#   bench/migration.sh [BUILD_DIR] [QPS...]     (root; default build, QPS 1 64 512)
#
# Per move, from a capture on the bridge (the guest's frames only) and from each move's answer:
# downtime (the function's last frame through its source to its first through its destination),
# quiesce (the source stops taking frames from its rings), move (the offer held, the addresses
# moved, the commit answered) and resume (the commit answered to the first frame through the
# destination). Prints one JSON object per move and one summary per QP count on stdout;
# progress on stderr when it is a terminal.
set -euo pipefail
bench=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$bench/../build}" && pwd)
shift || true
qps=("$@")
[ ${#qps[@]} -gt 0 ] || qps=(1 64 512)
moves=${MOVES:-5}
say() { [ -t 2 ] && echo "migration bench: $*" >&2 || true; }
for p in ib_write_bw dumpcap tshark; do
  command -v $p >/dev/null || { echo "migration bench: $p missing (perftest, tshark)" >&2; exit 1; }
done
[ -x "$build/verbs/pushwire-rnicd" ] || { echo "migration bench: build $build first (libibverbs-dev)" >&2; exit 1; }
daemon_args=() peer_env=() failed=0
. "$bench/../tests/verbs/migrate_env.sh"
tests=$bench/../tests/verbs
for n in "${qps[@]}"; do
  say "$n QPs: ib_write_bw -q $n, $moves moves"
  : >"$work/moves.txt"
  ip netns exec $s-br dumpcap -q -i p-port -s 96 -f "udp port 4791 and src host $G" -w "$work/q$n.pcapng" 2>/dev/null & cap=$!
  pw_pids+=($cap)
  sleep 1
  secs=$(( moves * 3 / 2 + 8 ))  # the setup (2.5 s) and the moves, with room to spare
  peer "$work/bw-server-$n.log" ib_write_bw -d pw0 -x 0 -F -s 65536 -q "$n" -D "$secs"
  guest "$work/bw-client-$n.log" ib_write_bw -d pw0 -x 0 -F -s 65536 -q "$n" -D "$secs"
  sleep 2.5
  for k in $(seq "$moves"); do
    move
    say "$n QPs: move $k: $(tail -1 "$work/moves.txt" | sed 's/.*attachments: //')"
    sleep 1.5
  done
  crc=0 src=0
  wait $client || crc=$?
  wait $server || src=$?
  sleep 0.5; kill -INT $cap; wait $cap 2>/dev/null || true
  if [ $crc != 0 ] || [ $src != 0 ]; then
    # A count whose programs failed is a row of the report (with the guest's first error and the
    # moves done before it), not the end of the run; the script exits 1 after the other counts.
    why=$({ grep -m1 -oE 'Failed status [0-9]+|Failed to [a-z_ ]+|Unable [a-z/_ ]+' "$work/bw-client-$n.log" || true; })
    printf '{"qps": %d, "failed": "guest ib_write_bw exit %d, peer exit %d: %s", "moves_done": %d}\n' \
      "$n" "$crc" "$src" "${why:-no message}" "$(grep -c 'with [1-9][0-9]* attachments' "$work/moves.txt")"
    for f in "$work/bw-client-$n.log" "$work/bw-server-$n.log"; do echo "--- $f" >&2; { grep -v 'GID\|address' "$f" || true; } | tail -20 >&2; done
    failed=1
  else
    /usr/bin/python3 "$tests/downtime.py" "$work/q$n.pcapng" "$G" "$work/moves.txt" "$moves" --json "$n" >"$work/q$n.jsonl" ||
      fail "$n QPs: fewer than $moves moves in the capture"
    /usr/bin/python3 -c "import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l); r['qps'] = int(r.pop('label')); print(json.dumps(r))" "$work/q$n.jsonl"
  fi
  # the function is on a again for the next count
  [ $where = a ] || move
done
exit $failed
