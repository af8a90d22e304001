#!/usr/bin/env bash
# pushwire-datacheck between two processes through the provider over loopback: RC WRITE with
# immediate, SEND, READ and atomics with every byte and every atomic result checked, for 5 s
# with 2% loss and 2% reordering on what both send (PUSHWIRE_VERBS_FAULTS).
# usage: datacheck.sh BUILD TCP_PORT
build=$(cd "$1" && pwd); pw_port=$2
. "$(dirname "$0")/common.sh"
check=$build/tests/pushwire-datacheck
faults="loss=0.02,reorder=0.02,seed"  # each side its own seed: the two directions lose differently
pw_pair 60 env "PUSHWIRE_VERBS_FAULTS=$faults=$pw_port" "$check" -d pw0 -p "$pw_port" -- \
  env "PUSHWIRE_VERBS_FAULTS=$faults=$((pw_port + 1))" "$check" -d pw0 -p "$pw_port" -t 5 127.0.0.1
for f in server client; do
  grep -q '^ok: .* every byte checked' "$pw_work/$f.log" || { echo "FAIL: $f did not check its iterations"; exit 1; }
done
echo "PASS: pushwire-datacheck under 2% loss and 2% reordering"
