#!/usr/bin/env bash
# tshark with and without the pushwire plugin on a 100,000-frame RoCEv2 capture (spec/wireshark.md).
#
#   [RUNS=7] bench/tshark_plugin.sh [BUILD_DIR] [FRAMES]     (default: build 100000)
#
# Needs BUILD_DIR/tools/pushwire-gen and BUILD_DIR/plugins/4.0/epan/pushwire.so. Two cases, each
# the least CPU time (user + sys, steadier than wall time on a shared machine) of RUNS runs, with
# and without the plugin interleaved: `-T fields` on three stock InfiniBand fields (the plugin's
# postdissector still verifies every ICRC), and `-V` to /dev/null (every tree built). "without"
# is stock tshark with an empty personal plugin directory. As root, tshark runs as uid 65534
# (tshark 4.0 ignores personal plugins for root).
set -euo pipefail
build=${1:-build}
frames=${2:-100000}
runs=${RUNS:-7}
so="$build/plugins/4.0/epan/pushwire.so"
[[ -f "$so" && -x "$build/tools/pushwire-gen" ]] || { echo "build $build first (make test or cmake --build)" >&2; exit 1; }
work=$(mktemp -d /tmp/pushwire-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/with/.local/lib/wireshark/plugins/4.0/epan" "$work/without"
cp "$so" "$work/with/.local/lib/wireshark/plugins/4.0/epan/"
"$build/tools/pushwire-gen" --framing roce --frames "$frames" --out "$work/capture.pcap"
chmod -R a+rX "$work"
as_user=()
[[ $(id -u) -eq 0 ]] && as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)

once() {  # once HOME ARGS...: appends "user sys real" of one tshark run to $work/times.<home>
  local home=$1
  shift
  local TIMEFORMAT='%U %S %R'
  { time "${as_user[@]}" env HOME="$home" tshark -r "$work/capture.pcap" "$@" >/dev/null 2>"$work/err"; } \
    2>>"$work/times.$(basename "$home")"
  [[ -s "$work/err" ]] && { cat "$work/err" >&2; exit 1; }
  return 0
}

best() {  # best FILE -> "cpu wall": the least CPU time (user + sys) and the least wall time
  awk '{c = $1 + $2; if (NR == 1 || c < bc) bc = c; if (NR == 1 || $3 < bw) bw = $3} END {print bc, bw}' "$1"
  rm -f "$1"
}

"${as_user[@]}" env HOME="$work/with" tshark -G plugins | grep -q pushwire.so || { echo "plugin does not load" >&2; exit 1; }
echo "tshark $(tshark -v 2>/dev/null | head -1 | awk '{print $3}'), $frames frames ($(du -h "$work/capture.pcap" | cut -f1)), $(nproc) CPUs"
for mode in fields verbose; do
  if [[ $mode == fields ]]; then args=(-T fields -e frame.number -e infiniband.bth.opcode -e infiniband.bth.psn)
  else args=(-V); fi
  # Interleaved, so that a slow spell of a shared machine hits both cases alike.
  for _ in $(seq "$runs"); do
    once "$work/without" "${args[@]}"
    once "$work/with" "${args[@]}"
  done
  read -r a aw < <(best "$work/times.without")
  read -r b bw < <(best "$work/times.with")
  awk -v m="$mode" -v a="$a" -v b="$b" -v aw="$aw" -v bw="$bw" -v n="$frames" 'BEGIN {
    printf "tshark_plugin/%-7s CPU without %5.2f s (%4.1f us/frame), with %5.2f s (%4.1f us/frame): overhead %+5.1f%%",
           m, a, a * 1e6 / n, b, b * 1e6 / n, (b / a - 1) * 100
    printf "   (wall %5.2f s -> %5.2f s)\n", aw, bw }'
done
