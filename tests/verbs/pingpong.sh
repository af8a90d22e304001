#!/usr/bin/env bash
# ibverbs-utils' pingpongs between two processes through the provider, over loopback, with
# their own data checks (-c), and each side's address a RoCEv2 GID (-g 0).
# usage: pingpong.sh BUILD TCP_PORT rc|uc|ud|srq [events] [faults]
#  events: completion channel mode (-e); faults: PUSHWIRE_VERBS_FAULTS with 5% loss and 5%
#  reordering for RC and SRQ (one QP: below), 5% reordering for UC and UD, which have no duplicate
#  detection (a duplicated message is delivered twice, as IBTA has it) and whose
#  lost messages no one resends (IBTA): a pingpong would wait for one forever (spec/verbs.md §6).
build=$(cd "$1" && pwd); pw_port=$2; kind=$3; shift 3
. "$(dirname "$0")/common.sh"
args=(-d pw0 -g 0 -p "$pw_port" -c)
iters=500
for opt in "$@"; do
  case $opt in
    events) args+=(-e) ;;
    faults)
      iters=200
      case $kind in
        rc|srq) export PUSHWIRE_VERBS_FAULTS="loss=0.05,reorder=0.05,seed=$pw_port" ;;
        *) export PUSHWIRE_VERBS_FAULTS="reorder=0.05,seed=$pw_port" ;;
      esac ;;
    *) echo "unknown option $opt"; exit 2 ;;
  esac
done
# UC: messages of one packet, since UC drops a message with a packet out of order.
[ $kind = uc ] && args+=(-s 1024 -m 1024)
# SRQ under loss: one QP. With its 16, ibv_srq_pingpong counts messages across QPs, so a side
# may finish while a message of one QP is still being resent to it; its QPs gone, that message
# is never acknowledged and the other side fails with "transport retry counter exceeded" (a
# destroyed QP takes no new request, on hardware as here).
[ $kind = srq ] && [ -n "${PUSHWIRE_VERBS_FAULTS:-}" ] && args+=(-q 1)
args+=(-n $iters)
# Each side's device counters, appended to one file when it closes the device (spec/verbs.md §2).
export PUSHWIRE_VERBS_STATS="$pw_work/stats"
pw_pair 60 ibv_${kind}_pingpong "${args[@]}" -- ibv_${kind}_pingpong "${args[@]}" 127.0.0.1
# both sides report the iterations they made
for f in server client; do
  grep -q "^$iters iters in" "$pw_work/$f.log" || { echo "FAIL: $f did not report $iters iterations"; exit 1; }
done
# The counters: one line per side; each side completed a send and a receive per iteration at
# least; under loss, some side resent.
echo "--- counters"; cat "$pw_work/stats"
[ "$(grep -c ': pw0 counters: ' "$pw_work/stats")" = 2 ] || { echo "FAIL: not one counters line per side"; exit 1; }
counter() { { grep -o " $1=[0-9]*" <<<"$2" || true; } | cut -d= -f2; }  # nothing for a counter at 0
resent=0
while read -r line; do
  c=$(counter completions "$line"); [ "${c:-0}" -ge $((2 * iters)) ] || { echo "FAIL: completions ${c:-0} < $((2 * iters))"; exit 1; }
  o=$(counter frames_out "$line"); [ "${o:-0}" -ge "$iters" ] || { echo "FAIL: frames_out ${o:-0} < $iters"; exit 1; }
  r=$(counter retransmits "$line"); resent=$((resent + ${r:-0}))
done <"$pw_work/stats"
case "${PUSHWIRE_VERBS_FAULTS:-}" in
  *loss*) [ $resent -gt 0 ] || { echo "FAIL: frames were lost, and no side counted a retransmission"; exit 1; } ;;
esac
echo "PASS: ibv_${kind}_pingpong $* ($iters iterations, data checked, counters: $resent retransmits)"
