#!/usr/bin/env bash
# perftest over pushwire (spec/verbs.md): its programs between two processes over loopback,
# each through libpushwire-verbs.so with its own device (127.0.0.N):
#
#   bench/perftest.sh [BUILD_DIR]          (default: build)
#
# Bandwidth programs at 64 KiB (MB/s average), latency programs at 64 B (t_typical, µs: perftest
# reports half a round trip), each the median of RUNS (3) runs; then one more run of
# ib_write_bw and ib_write_lat with the client under strace -c: system calls per message.
# Prints one JSON object per measurement on stdout; progress on stderr when it is a terminal.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
runs=${RUNS:-3}
verbs="$build/verbs/pushwire-verbs"
[ -x "$verbs" ] || { echo "perftest: build $build first (libibverbs-dev)" >&2; exit 1; }
command -v ib_write_bw >/dev/null || { echo "perftest: perftest missing (apt-get install perftest)" >&2; exit 1; }
say() { [ -t 2 ] && echo "perftest: $*" >&2 || true; }
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
port=19700
one() {  # PROGRAM SIZE ITERS [WRAPPER...] -> the client's report line
  local prog=$1 size=$2 n=$3; shift 3
  port=$((port + 1))
  "$verbs" run -- $prog -d pw0 -x 0 -F -s $size -n $n -p $port >/dev/null 2>&1 &
  local srv=$!
  for _ in $(seq 100); do ss -ltn "sport = :$port" | grep -q LISTEN && break; sleep 0.05; done
  timeout 120 "$@" "$verbs" run -- $prog -d pw0 -x 0 -F -s $size -n $n -p $port 127.0.0.1 2>/dev/null |
    awk -v s=$size '/#bytes/ {h = 1; next} h && $1 == s {print; exit}'
  wait $srv
}
median() { sort -g | awk '{a[NR] = $0} END {print a[int((NR + 1) / 2)]}'; }
for prog in ib_write_bw ib_read_bw ib_send_bw ib_atomic_bw ib_write_lat ib_read_lat ib_send_lat; do
  case $prog in
    *_lat) size=64 n=20000 col=5 unit=t_typical_us ;;   # t_typical
    ib_atomic_bw) size=8 n=20000 col=4 unit=MB_per_s ;;
    *) size=65536 n=5000 col=4 unit=MB_per_s ;;           # BW average
  esac
  say "$prog, $size bytes, $runs runs"
  : >"$work/r"
  for _ in $(seq $runs); do one $prog $size $n | awk -v c=$col '{print $c}' >>"$work/r"; done
  v=$(median <"$work/r")
  printf '{"program": "%s", "bytes": %s, "%s": %s, "runs": %s}\n' $prog $size $unit "$v" $runs
done
if command -v strace >/dev/null; then
  for prog in ib_write_bw ib_write_lat; do
    case $prog in *_lat) size=64 n=20000 ;; *) size=65536 n=5000 ;; esac
    say "$prog under strace -c"
    one $prog $size $n strace -f -c -o "$work/strace" >/dev/null
    calls=$(awk '$NF ~ /^(sendmmsg|recvmmsg|ppoll|poll|futex|sendmsg|recvmsg|read|write)$/ {printf "%s=%s ", $NF, $4}' "$work/strace")
    printf '{"program": "%s", "bytes": %s, "messages": %s, "syscalls": "%s"}\n' $prog $size $n "$calls"
  done
fi
