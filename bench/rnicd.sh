#!/usr/bin/env bash
# Programs attached to pushwire-rnicd against programs with devices of their own, in the same run
# (spec/rnicd.md; the goals are issue 31's). Two namespaces over a veth, as root: the device
# processes on 198.18.34.1 and .2, the in-process devices on 198.18.35.1 and .2.
#
#   bench/rnicd.sh [BUILD_DIR]          (default: build)
#
# - ib_write_lat 64 B (t_typical, µs) and ib_write_bw 64 KiB (MB/s), one pair, medians of RUNS (3),
#   on two topologies:
#   - two hosts: server in b, client in a; in-process (PUSHWIRE_VERBS=pw0:ADDRESS) against attached
#     (pw0@SOCKET, a device process per side);
#   - one host: both in a; in-process (a device each, two addresses) against attached (one device
#     process, the server on its PF and the client on VF 1: the switch carries their frames);
# - ib_write_bw 64 KiB with four pairs at once: two hosts (pair k on function k of both device
#   processes) and one host (the servers on the PF, the clients on VF 1..3 and the PF): their sum;
# - system calls per message in the client under load, `strace -f -c`: the calls of a run of N
#   messages less those of a run of N/5, over 4N/5 (start-up and teardown cancel out).
# Prints one JSON object per measurement on stdout; progress on stderr when it is a terminal.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
runs=${RUNS:-3}
verbs=$build/verbs/pushwire-verbs rnicd=$build/verbs/pushwire-rnicd
[ -x "$verbs" ] && [ -x "$rnicd" ] || { echo "rnicd bench: build $build first (libibverbs-dev)" >&2; exit 1; }
command -v ib_write_bw >/dev/null || { echo "rnicd bench: perftest missing" >&2; exit 1; }
. "$here/../examples/split-model/netns.sh"
say() { [ -t 2 ] && echo "rnicd bench: $*" >&2 || true; }
s=prb$$; work=$(mktemp -d)
trap 'pw_cleanup; rm -rf "$work"' EXIT
# 198.18.34.x: the device processes'; 198.18.35.x: the in-process devices' (an address has one owner of UDP port 4791)
pw_veth_pair $s "198.18.34.1/24 198.18.35.1/24 198.18.35.3/24" "198.18.34.2/24 198.18.35.2/24"
for side in a b; do
  addr=198.18.34.1; [ $side = b ] && addr=198.18.34.2
  ip netns exec $s-$side "$rnicd" --port pw0:$addr --functions 3 --control "$work/$side.sock" 2>>"$work/rnicd.log" &
  pw_pids+=($!)
  for _ in $(seq 100); do [ -S "$work/$side.sock" ] && break; sleep 0.05; done
done
port=19800
# pair MODE FUNCTION PROGRAM SIZE ITERS [WRAPPER...] -> the client's report line (background-able)
# MODE: inproc | attached (two hosts), host-inproc | host-attached (one host, namespace a)
pair() {
  local mode=$1 f=$2 prog=$3 size=$4 n=$5; shift 5
  local fa=$f fb=$f
  [ $mode = host-attached ] && fa=$f fb=pf
  local p=$((port += 1)) va vb sns=$s-b to=198.18.34.2
  case $mode in
    inproc) va=pw0:198.18.35.1 vb=pw0:198.18.35.2 to=198.18.35.2 ;;
    attached) va="pw0@$work/a.sock#$fa" vb="pw0@$work/b.sock#$fb" ;;
    host-inproc) va=pw0:198.18.35.3 vb=pw0:198.18.35.1 sns=$s-a to=198.18.35.1 ;;
    host-attached) va="pw0@$work/a.sock#$fa" vb="pw0@$work/a.sock#$fb" sns=$s-a to=198.18.34.1 ;;
  esac
  ip netns exec $sns env "PUSHWIRE_VERBS=$vb" "$verbs" run -- $prog -d pw0 -x 0 -F -s $size -n $n -p $p >/dev/null 2>&1 &
  local srv=$!
  for _ in $(seq 100); do ip netns exec $sns ss -ltn "sport = :$p" | grep -q LISTEN && break; sleep 0.05; done
  ip netns exec $s-a env "PUSHWIRE_VERBS=$va" timeout 300 "$@" "$verbs" run -- $prog -d pw0 -x 0 -F -s $size -n $n -p $p $to 2>/dev/null |
    awk -v s=$size '/#bytes/ {h = 1; next} h && $1 == s && !done {print; done = 1}' || true
  wait $srv || true
}
median() { sort -g | awk '{a[NR] = $0} END {print a[int((NR + 1) / 2)]}'; }
for prog in ib_write_lat ib_write_bw; do
  case $prog in *_lat) size=64 n=20000 col=5 unit=t_typical_us ;; *) size=65536 n=5000 col=4 unit=MB_per_s ;; esac
  for mode in inproc attached host-inproc host-attached; do
    say "$prog $size B, $mode, $runs runs"
    : >"$work/r"
    f=pf; [ $mode = host-attached ] && f=vf1
    for _ in $(seq $runs); do pair $mode $f $prog $size $n | awk -v c=$col '{print $c}' >>"$work/r"; done
    printf '{"program": "%s", "bytes": %s, "mode": "%s", "pairs": 1, "%s": %s, "runs": %s}\n' $prog $size $mode $unit "$(median <"$work/r")" $runs
  done
done
for mode in attached host-attached; do
  say "ib_write_bw 64 KiB, four $mode pairs at once"
  four=()
  fs="pf vf1 vf2 vf3"; [ $mode = host-attached ] && fs="vf1 vf2 vf3 pf"
  for f in $fs; do
    pair $mode $f ib_write_bw 65536 3000 >"$work/four-$f" &
    four+=($!)
  done
  for p in "${four[@]}"; do wait "$p"; done
  total=$(cat "$work"/four-* | awk '{s += $4} END {print s + 0}')
  printf '{"program": "ib_write_bw", "bytes": 65536, "mode": "%s", "pairs": 4, "MB_per_s": %s, "runs": 1}\n' $mode "$total"
done
if command -v strace >/dev/null; then
  calls() {  # calls MODE PROGRAM SIZE N -> the client's system calls
    local f=pf; [ $1 = host-attached ] && f=vf1
    pair $1 $f $2 $3 $4 strace -f -c -o "$work/strace" >/dev/null
    awk '$NF == "total" {print $(NF - 2)}' "$work/strace"
  }
  for prog in ib_write_bw ib_write_lat; do
    case $prog in *_lat) size=64 n=20000 ;; *) size=65536 n=5000 ;; esac
    for mode in inproc attached host-inproc host-attached; do
      say "$prog $mode under strace -c"
      small=$(calls $mode $prog $size $((n / 5))) big=$(calls $mode $prog $size $n)
      printf '{"program": "%s", "bytes": %s, "mode": "%s", "messages": %s, "syscalls": %s, "messages_less": %s, "syscalls_less": %s}\n' \
        $prog $size $mode $n "${big:-0}" $((n / 5)) "${small:-0}"
    done
  done
fi
