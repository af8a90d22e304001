#!/usr/bin/env bash
# The split-model driver at rest and under ping, for builds compared in one run, as root:
#
#   bench/split_idle.sh BUILD_DIR [BUILD_DIR...]      (IDLE_SECONDS=10, ROUNDS=3)
#
# For each build in turn, ROUNDS times: pushwire-host and pushwire-iou in namespaces (the split
# model's topology, examples/split-model/netns.sh), connected; then IDLE_SECONDS with no traffic,
# the CPU time each module used in them (utime + stime from /proc/PID/stat); then 200 pings
# (0.01 s apart) through pw0, p50 and p99 of their RTTs. Builds alternate round by round, so
# each sees the machine as the others do. One JSON object per build and round on stdout:
# {build, round, idle_cpu_host_pct, idle_cpu_iou_pct, ping_p50_ms, ping_p99_ms}; progress on
# stderr when it is a terminal. Leaves nothing behind.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR [BUILD_DIR...]" >&2; exit 2; }
builds=()
for b in "$@"; do builds+=("$(cd "$b" && pwd)"); done
idle=${IDLE_SECONDS:-10}
rounds=${ROUNDS:-3}
. "$here/../examples/split-model/netns.sh"
pw_require ping python3
say() { [ -t 2 ] && echo "split_idle: $*" >&2 || true; }
work=$(mktemp -d)
trap 'pw_cleanup; rm -rf "$work"' EXIT
hz=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }  # utime + stime, clock ticks

for round in $(seq "$rounds"); do
  for build in "${builds[@]}"; do
    s=pwi$$r$round$((RANDOM % 1000))
    pw_split_topology $s
    pw_start_iou "$build" $s "$work/iou.log"
    pw_start_host "$build" $s "$work/host.log"
    ip netns exec $s-host ping -c 3 -i 0.2 -w 20 198.18.1.2 >/dev/null || { echo "split_idle: no ping through $build" >&2; exit 1; }
    sleep 1
    say "$build round $round: ${idle} s idle"
    h0=$(cpu $pw_host) i0=$(cpu $pw_iou)
    sleep "$idle"
    h1=$(cpu $pw_host) i1=$(cpu $pw_iou)
    say "$build round $round: 200 pings"
    ip netns exec $s-host ping -c 200 -i 0.01 198.18.1.2 >"$work/ping"
    python3 - "$build" "$round" "$work/ping" "$(( h1 - h0 ))" "$(( i1 - i0 ))" "$hz" "$idle" <<'PY'
import json, re, sys
build, rnd, ping, dh, di, hz, secs = sys.argv[1:]
rtts = sorted(float(m) for m in re.findall(r"time=([0-9.]+) ms", open(ping).read()))
def pct(p):
    return rtts[min(len(rtts) - 1, int(round(p / 100 * (len(rtts) - 1))))]
pct_cpu = lambda ticks: round(100.0 * int(ticks) / int(hz) / float(secs), 3)
print(json.dumps({"build": build, "round": int(rnd), "idle_cpu_host_pct": pct_cpu(dh), "idle_cpu_iou_pct": pct_cpu(di),
                  "pings": len(rtts), "ping_p50_ms": pct(50), "ping_p99_ms": pct(99)}))
PY
    kill -TERM $pw_host $pw_iou; wait $pw_host $pw_iou || true
    pw_cleanup; pw_namespaces=(); pw_pids=()
  done
done
