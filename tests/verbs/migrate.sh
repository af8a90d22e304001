#!/usr/bin/env bash
# Moving a function between device processes (spec/migration.md). Three namespaces on one bridge:
# host a and host b, each with a device process, and a peer with an in-process device. The guest
# function is a's VF 1 on an address of its own, 198.18.42.11; its program runs in namespace a
# and knows nothing of the moves.
# usage: migrate.sh BUILD unmodified | data | data-loss | refused | dst-dies | src-dies
#        (root; skips without namespaces)
#   unmodified  ibv_rc_pingpong -c, then ib_write_bw, against the peer while the function moves
#               a -> b -> a ... five times, then once more: both pass; the bridge's capture of
#               the pingpong decodes in stock
#               tshark, every ICRC is good, pushwire-conform finds no violation; each move's
#               downtime (the function's last frame through a to its first through b, on the
#               bridge) is printed
#   data        pushwire-datacheck (RC WRITE with immediate, SEND/RECV, READ, atomics; every byte
#               and atomic result checked; no error completion; the QP RTS at the end) while
#               the function moves a -> b -> a -> b -> a -> b, every 1-2 s; the bridge's capture:
#               every ICRC good (one in 20), pushwire-conform finds no violation, downtime printed
#   data-loss   the same with 2% loss on what every device sends: both device processes
#               (--faults) and the peer (PUSHWIRE_VERBS_FAULTS)
#   refused     b refuses (a QPN block taken there, then the function attached there): the
#               function stays on a and its pingpong passes
#   dst-dies    b is killed (-9) holding the offer: a rolls back, the pingpong passes
#   src-dies    a is killed (-9) after offering: b drops what it held; the program's QPs fail
#               (it exits with an error, it does not hang) and b serves nothing of it
set -euo pipefail
build=$(cd "$1" && pwd); what=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../examples/split-model/netns.sh"
need=(/usr/bin/python3 ibv_rc_pingpong)
[ "$what" = unmodified ] && need+=(ib_write_bw)
case $what in unmodified|data*) need+=(dumpcap tshark) ;; esac
pw_require "${need[@]}"
daemon_args=() peer_env=() daemon_faults=
if [ "$what" = data-loss ]; then
  daemon_faults=loss=0.02 peer_env=("PUSHWIRE_VERBS_FAULTS=loss=0.02,seed=$(( $$ + 7 ))")
fi
. "$here/migrate_env.sh"

case $what in
unmodified)
  ip netns exec $s-br dumpcap -q -i p-port -f "udp port 4791 or arp" -w "$work/moves.pcapng" 2>/dev/null & cap=$!; pw_pids+=($cap)
  sleep 1
  peer "$work/pp-server.log" ibv_rc_pingpong -d pw0 -g 0 -c -s 256 -n 70000
  guest "$work/pp-client.log" ibv_rc_pingpong -d pw0 -g 0 -c -s 256 -n 70000
  sleep 0.5
  for k in 1 2 3 4 5; do
    sleep 1
    [ "$(attached_on $where)" = 1 ] || fail "the guest is not attached on $where before move $k"
    move
  done
  wait $client || fail "ibv_rc_pingpong -c across five moves (client)"
  wait $server || fail "ibv_rc_pingpong -c across five moves (server)"
  echo "ok: ibv_rc_pingpong -c, 70000 iterations of 256 bytes across five moves: $(grep iters "$work/pp-client.log")"
  sleep 0.5; kill -INT $cap; wait $cap 2>/dev/null || true
  peer "$work/bw-server.log" ib_write_bw -d pw0 -x 0 -F -s 65536 -D 4
  guest "$work/bw-client.log" ib_write_bw -d pw0 -x 0 -F -s 65536 -D 4
  sleep 2.5; move
  wait $client || fail "ib_write_bw across a move (client)"
  wait $server || fail "ib_write_bw across a move (server)"
  echo "ok: ib_write_bw across a move: $(awk '/#bytes/ {getline; print $4 " MB/s"; exit}' "$work/bw-client.log")"
  [ "$(attached_on $where)" = 0 ] || fail "programs still attached on $where after they ended"
  cat "$work/moves.txt"
  frames=$(tshark -r "$work/moves.pcapng" -Y "udp.port == 4791" 2>/dev/null | wc -l)
  malformed=$(tshark -r "$work/moves.pcapng" -Y "_ws.malformed" 2>/dev/null | wc -l)
  echo "stock tshark: $frames RoCEv2 frames, $malformed malformed"
  [ "$frames" -gt 1000 ] && [ "$malformed" = 0 ] || fail "tshark's decode"
  /usr/bin/python3 "$here/icrc_check.py" "$work/moves.pcapng" 1000 20 || fail "ICRC"
  "$build/tools/pushwire-conform" "$work/moves.pcapng" >"$work/conform.txt" || { cat "$work/conform.txt"; fail "pushwire-conform"; }
  tail -1 "$work/conform.txt"
  # Downtime per move: the guest's frames change source MAC (a's interface, then b's) on the bridge.
  /usr/bin/python3 "$here/downtime.py" "$work/moves.pcapng" "$G" "$work/moves.txt" 5 --naks || fail "five moves, each with the engines' NAK, in the capture"
  echo "PASS: unmodified programs across six moves; the capture of the first five is clean"
  ;;

data|data-loss)
  check=$build/tests/pushwire-datacheck
  [ -x "$check" ] || fail "$check is not built"
  ip netns exec $s-br dumpcap -q -i p-port -f "udp port 4791" -w "$work/data.pcapng" 2>/dev/null & cap=$!; pw_pids+=($cap)
  sleep 1
  peer "$work/dc-server.log" "$check" -d pw0
  ip netns exec $s-a env "PUSHWIRE_VERBS=pw0@$work/a.sock#vf1" timeout 200 "$verbs" run -- "$check" -d pw0 -t 14 -p $port $P >"$work/dc-client.log" 2>&1 &
  client=$!
  sleep 1
  for k in 1 2 3 4 5; do
    [ "$(attached_on $where)" = 1 ] || fail "the guest is not attached on $where before move $k"
    move
    sleep "1.$((RANDOM % 10))"
  done
  wait $client || fail "pushwire-datacheck across five moves (guest)"
  wait $server || fail "pushwire-datacheck across five moves (peer)"
  cat "$work/moves.txt"
  echo "guest: $(cat "$work/dc-client.log")"
  echo "peer:  $(cat "$work/dc-server.log")"
  grep -q '^ok: .* every byte checked' "$work/dc-client.log" && grep -q '^ok: .* every byte checked' "$work/dc-server.log" || fail "a side did not check its iterations"
  sleep 0.5; kill -INT $cap; wait $cap 2>/dev/null || true
  /usr/bin/python3 "$here/icrc_check.py" "$work/data.pcapng" 1000 20 || fail "ICRC"
  "$build/tools/pushwire-conform" "$work/data.pcapng" >"$work/conform.txt" || { tail -20 "$work/conform.txt"; fail "pushwire-conform"; }
  tail -1 "$work/conform.txt"
  # Each move shows the engines' resume (a NAK at the expected PSN), unless loss may have taken it.
  naks=--naks; [ "$what" = data-loss ] && naks=
  /usr/bin/python3 "$here/downtime.py" "$work/data.pcapng" "$G" "$work/moves.txt" 5 $naks || fail "five moves in the capture"
  if [ "$what" = data-loss ]; then  # the loss was there: the device processes dropped frames
    kill -TERM $daemon_a $daemon_b; wait $daemon_a $daemon_b 2>/dev/null || true
    lost=$(grep -ho 'faults injected: lost [0-9]*' "$work"/rnicd-*.log | awk '{s += $4} END {print s + 0}')
    echo "frames the device processes' --faults lost: $lost"
    [ "$lost" -gt 100 ] || fail "the device processes lost only $lost frames"
  fi
  echo "PASS: WRITE with immediate, SEND/RECV, READ and atomics checked across five moves${daemon_args[*]:+ with 2% loss}"
  ;;

refused)
  # A program on b's PF takes QPN block 1, the guest's.
  ip netns exec $s-b env "PUSHWIRE_VERBS=pw0@$work/b.sock#pf" "$verbs" run -- ibv_rc_pingpong -d pw0 -g 0 -p 19599 >/dev/null 2>&1 & holder=$!
  pw_pids+=($holder)
  for _ in $(seq 100); do [ "$(ctl b show --json | /usr/bin/python3 -c "import json,sys; print(len(json.load(sys.stdin)['attachments']))")" = 1 ] && break; sleep 0.05; done
  peer "$work/pp-server.log" ibv_rc_pingpong -d pw0 -g 0 -c -n 20000
  guest "$work/pp-client.log" ibv_rc_pingpong -d pw0 -g 0 -c -n 20000
  sleep 1
  if ctl a migrate 1 --to "$work/b.sock" 2>"$work/refused.txt"; then fail "b took a function whose QPN block it uses"; fi
  grep -q qpn_block_taken "$work/refused.txt" || fail "not refused with qpn_block_taken: $(cat "$work/refused.txt")"
  echo "ok: $(cat "$work/refused.txt")"
  kill $holder; wait $holder 2>/dev/null || true
  # The function number is taken there by a program.
  ctl b vf add 1 >/dev/null
  ip netns exec $s-b env "PUSHWIRE_VERBS=pw0@$work/b.sock#vf1" "$verbs" run -- ibv_rc_pingpong -d pw0 -g 0 -p 19598 >/dev/null 2>&1 & holder=$!
  pw_pids+=($holder)
  for _ in $(seq 100); do [ "$(attached_on b)" = 1 ] && break; sleep 0.05; done
  if ctl a migrate 1 --to "$work/b.sock" 2>"$work/refused.txt"; then fail "b took a function onto a VF with programs"; fi
  grep -q function_busy "$work/refused.txt" || fail "not refused with function_busy: $(cat "$work/refused.txt")"
  echo "ok: $(cat "$work/refused.txt")"
  wait $client || fail "the pingpong after two refusals"
  wait $server || fail "the peer's pingpong after two refusals"
  [ "$(attached_on b)" = 1 ] || fail "b's own VF 1 program lost"
  echo "ok: the function stayed on a: $(grep iters "$work/pp-client.log")"
  echo "PASS: refusals leave the function where it was"
  ;;

dst-dies)
  peer "$work/pp-server.log" ibv_rc_pingpong -d pw0 -g 0 -c -n 20000
  guest "$work/pp-client.log" ibv_rc_pingpong -d pw0 -g 0 -c -n 20000
  sleep 1
  kill -STOP $daemon_b  # b takes the offer into its socket but does not answer
  ctl a migrate 1 --to "$work/b.sock" 2>"$work/rollback.txt" & m=$!
  sleep 0.5
  kill -9 $daemon_b
  kill -CONT $daemon_b 2>/dev/null || true
  if wait $m; then fail "a migration to a killed device succeeded"; fi
  grep -q migration_failed "$work/rollback.txt" || fail "not migration_failed: $(cat "$work/rollback.txt")"
  echo "ok: $(cat "$work/rollback.txt")"
  wait $client || fail "the pingpong after the rollback"
  wait $server || fail "the peer's pingpong after the rollback"
  echo "ok: the function stayed on a: $(grep iters "$work/pp-client.log")"
  echo "PASS: a destination killed mid-transfer leaves the function on its source"
  ;;

src-dies)
  peer "$work/pp-server.log" ibv_rc_pingpong -d pw0 -g 0 -n 1000000
  guest "$work/pp-client.log" ibv_rc_pingpong -d pw0 -g 0 -n 1000000
  sleep 1
  kill -STOP $daemon_b
  ctl a migrate 1 --to "$work/b.sock" >/dev/null 2>&1 & m=$!
  sleep 0.5
  kill -9 $daemon_a
  kill -CONT $daemon_b
  wait $m 2>/dev/null || true
  t0=$(date +%s%N)
  if wait $client; then fail "the guest's pingpong passed with its function on no device"; fi
  echo "ok: the guest's program failed in $(( ($(date +%s%N) - t0) / 1000000 )) ms: $(grep -i -m1 "fail\|error\|status" "$work/pp-client.log")"
  [ "$(attached_on b)" = 0 ] || fail "b serves a function it was never committed"
  ctl b show | grep -q "^vf1" && fail "b has VF 1"
  kill $server 2>/dev/null || true
  echo "PASS: a source killed mid-transfer: the destination drops the offer and the program fails"
  ;;
*) echo "usage: migrate.sh BUILD unmodified | data | data-loss | refused | dst-dies | src-dies"; exit 64 ;;
esac
