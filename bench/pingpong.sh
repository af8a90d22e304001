#!/usr/bin/env bash
# pushwire-rnic pingpong between two processes over UDP on loopback, against libfabric's
# fi_pingpong (Debian's libfabric-bin) with -p "udp;ofi_rxd" and -p "tcp;ofi_rxm" (RDM
# endpoints), in one run:
#
#   bench/pingpong.sh [BUILD_DIR]          (default: build)
#
# Sizes 64 B and 4 KiB (latency: usec/xfer) and 64 KiB and 1 MiB (bandwidth: MB/sec), each the
# median of RUNS (3) runs. Both tools report fi_pingpong's definitions (tools/pingpong.hpp).
# Prints one JSON object per (peer, size) on stdout; progress on stderr when it is a terminal.
# pushwire's two processes use 127.0.0.1 and 127.0.0.2 (UDP 4791 and 18515 on each).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
runs=${RUNS:-3}
pp="$build/tools/pushwire-rnic"
[ -x "$pp" ] || { echo "pingpong: build $build first" >&2; exit 1; }
command -v fi_pingpong >/dev/null || { echo "pingpong: fi_pingpong missing (apt-get install libfabric-bin)" >&2; exit 1; }
say() { [ -t 2 ] && echo "pingpong: $*" >&2 || true; }
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
iters() { case $1 in 64|4096) echo 5000;; 65536) echo 1000;; *) echo 100;; esac; }

one_pushwire() {  # SIZE -> "MB_per_s usec_per_xfer"
  local n; n=$(iters $1)
  "$pp" pingpong --server --local 127.0.0.2 --peer 127.0.0.1 --size $1 --iterations $n >/dev/null 2>&1 &
  local srv=$!
  sleep 0.1
  timeout 60 "$pp" pingpong --local 127.0.0.1 --peer 127.0.0.2 --size $1 --iterations $n | awk '{print $10, $12}'
  wait $srv
}
one_fabric() {  # PROVIDER SIZE -> "MB_per_s usec_per_xfer"
  local n port=$((47600 + RANDOM % 1000)); n=$(iters $2)
  fi_pingpong -p "$1" -e rdm -I $n -S $2 -B $port >/dev/null 2>&1 &
  local srv=$!
  sleep 0.3
  timeout 60 fi_pingpong -p "$1" -e rdm -I $n -S $2 -P $port 127.0.0.1 | awk 'NR == 2 {print $6, $7}'
  wait $srv || true
}
median() { sort -g | awk '{a[NR] = $0} END {print a[int((NR + 1) / 2)]}'; }
for size in 64 4096 65536 1048576; do
  for peer in pushwire "udp;ofi_rxd" "tcp;ofi_rxm"; do
    say "$peer, $size bytes, $runs runs"
    : >"$work/r"
    for _ in $(seq $runs); do
      if [ "$peer" = pushwire ]; then one_pushwire $size; else one_fabric "$peer" $size; fi >>"$work/r"
    done
    mbps=$(awk '{print $1}' "$work/r" | median)
    usec=$(awk '{print $2}' "$work/r" | median)
    printf '{"peer": "%s", "bytes": %s, "MB_per_s": %s, "usec_per_xfer": %s, "runs": %s}\n' "$peer" $size "$mbps" "$usec" $runs
  done
done
