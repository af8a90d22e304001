#!/usr/bin/env bash
# perftest between two processes through the provider, over loopback (spec/verbs.md §6): the
# program exchanges its QPs' addresses over TCP, runs, and prints its report; both sides must
# exit 0 and the client's report hold the size asked for.
# usage: perftest.sh BUILD TCP_PORT PROGRAM [ARGS...]    e.g. perftest.sh build 19100 ib_write_bw -s 65536
build=$(cd "$1" && pwd); pw_port=$2; prog=$3; shift 3
. "$(dirname "$0")/common.sh"
args=(-d pw0 -x 0 -p "$pw_port" -F "$@")
pw_pair 120 "$prog" "${args[@]}" -- "$prog" "${args[@]}" 127.0.0.1
size=65536
case $prog in *_lat|ib_atomic_bw) size=2 ;; esac
[ $prog = ib_atomic_bw ] && size=8
while [ $# -gt 0 ]; do [ "$1" = -s ] && size=$2; shift; done
# the report line: "#bytes #iterations ..." then one line per size
awk -v s="$size" '/#bytes/ {hdr = 1; next} hdr && $1 == s {found = 1} END {exit !found}' "$pw_work/client.log" ||
  { echo "FAIL: no report line for $size bytes"; exit 1; }
echo "PASS: $prog (${size} B): $(awk -v s="$size" '/#bytes/ {getline; print; exit}' "$pw_work/client.log" | tr -s ' ')"
