#!/usr/bin/env bash
# The RNIC soak over AF_XDP between two namespaces (spec/rnic.md §10, spec/net.md §6-7): devices
# A and B in one process, each port an AF_XDP socket on an interface of its own namespace, the two
# joined by a bridge in a third. First without faults, captured on the bridge: every message
# intact, stock tshark decodes every frame as InfiniBand with nothing malformed, and scapy finds
# every ICRC good (tests/verbs/icrc_check.py) across SEND, WRITE, READ, the atomics and DC. Then
# with 5% of each fault (loss, duplication, reordering, corruption) in both directions, RoCEv2
# and cells: 0 lost, duplicated and misplaced bytes. At MTU 9000 (Linux 6.6 and later) full packets
# span two UMEM frames (multi-buffer AF_XDP).
# usage: xdp_soak.sh BUILD [ROCE_MESSAGES [CELL_MESSAGES]]   (root; skips, visibly, without
# namespaces or AF_XDP)
set -euo pipefail
build=$(cd "$1" && pwd)
roce_n=${2:-20000} cell_n=${3:-1000}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../examples/split-model/netns.sh"
pw_require dumpcap tshark /usr/bin/python3
rnic=$build/tools/pushwire-rnic
s=xk$$; work=$(mktemp -d)
trap 'pw_cleanup; [ -n "${KEEP:-}" ] && cp -r "$work" "$KEEP"; rm -rf "$work"' EXIT
pw_bridge $s a=198.18.9.1/24 b=198.18.9.2/24
# Multi-buffer AF_XDP (Linux 6.6): MTU 9000, a path MTU of 4096, frames over one UMEM frame. Before
# it, veth's native XDP takes an MTU up to about 3500: 3000, a path MTU of 2048 (spec/net.md §6).
mtu=$(pw_xdp_mtu)
for h in a b; do ip -n $s-br link set $h-port mtu $mtu; ip -n $s-$h link set $s-$h mtu $mtu; done
pw_wait_link $s-a $s-a; pw_wait_link $s-b $s-b
faults="--loss 0.05 --dup 0.05 --reorder 0.05 --corrupt 0.05"

first=1
soak() {  # NAME ARGS...: the soak over AF_XDP; its JSON in $work/NAME.json, stderr in $work/NAME.log
  local name=$1; shift
  local rc=0
  # (each within 90 s, the three inside ctest's 300: the trap must get to clean up)
  timeout 90 "$rnic" soak --xdp $s-a@$s-a,$s-b@$s-b --json "$@" >"$work/$name.json" 2>"$work/$name.log" || rc=$?
  # AF_XDP unavailable: the first soak skips; a later one that cannot open its ports fails
  if [ $rc = 3 ] && [ $first = 1 ]; then cat "$work/$name.log"; echo "SKIPPED: AF_XDP unavailable here"; exit 0; fi
  first=0
  grep -q "device A on AF_XDP on $s-a in namespace $s-a (native XDP" "$work/$name.log" ||
    { cat "$work/$name.log"; echo "FAIL: $name: not over native AF_XDP"; exit 1; }
  # Independently of the exit status: every message completed, none lost or duplicated, no byte misplaced.
  if [ $rc != 0 ] || ! /usr/bin/python3 - "$work/$name.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if r["completed"] == r["messages"] and r["lost"] == r["duplicated"] == r["misplaced_bytes"] == 0 else 1)
EOF
  then
    cat "$work/$name.log" "$work/$name.json"; echo "FAIL: $name (exit $rc)"; exit 1
  fi
  echo "ok: $name over AF_XDP | $(cat "$work/$name.json")"
}

ip netns exec $s-br dumpcap -q -i br0 -f "udp port 4791" -w "$work/soak.pcapng" 2>/dev/null & cap=$!; pw_pids+=($cap)
sleep 0.5
soak clean --messages 600 --seed 3
sleep 0.3; kill -INT $cap; wait $cap 2>/dev/null || true
# Wireshark's RPC-over-RDMA heuristic claims any SEND payload and throws on short random ones
# (a 3-byte SEND shows as "Malformed Packet: RPCoRDMA"): the soak's payloads are not RPC.
ts() { tshark -r "$work/soak.pcapng" --disable-heuristic rpcrdma_infiniband "$@" 2>/dev/null; }
frames=$(ts | wc -l)
ib=$(ts -Y infiniband | wc -l)
malformed=$(ts -Y "_ws.malformed" | wc -l)
echo "stock tshark: $frames frames, $ib decoded as InfiniBand, $malformed malformed"
[ "$frames" -gt 1000 ] && [ "$ib" = "$frames" ] && [ "$malformed" = 0 ] || { echo "FAIL: tshark's decode"; exit 1; }
if [ $mtu = 9000 ]; then  # packets of 4096 bytes of payload: frames over one UMEM frame
  big=$(ts -Y "frame.len > 4096" | wc -l)
  echo "stock tshark: $big frames over 4096 bytes (multi-buffer AF_XDP)"
  [ "$big" -gt 100 ] || { echo "FAIL: no frames over one UMEM frame at MTU 9000"; exit 1; }
fi
/usr/bin/python3 "$here/../verbs/icrc_check.py" "$work/soak.pcapng" 1000 >"$work/icrc.txt" || { cat "$work/icrc.txt"; echo "FAIL: ICRC"; exit 1; }
echo "ok: $(head -1 "$work/icrc.txt")"
# RC SEND only, WRITE first, READ request, COMPARE_SWAP, FETCH_ADD; DC connect and DC (RD) READ request
for op in 0x04 0x06 0x0c 0x13 0x14 0x55 0x4c; do
  grep -q "$op x" "$work/icrc.txt" || { cat "$work/icrc.txt"; echo "FAIL: no opcode $op in the capture"; exit 1; }
done

soak roce-faults --messages "$roce_n" $faults
soak cell-faults --framing cell --messages "$cell_n" $faults
echo "PASS: the soak over AF_XDP, RoCEv2 and cells, 5% of each fault: 0 lost, duplicated and misplaced bytes; every ICRC good"
