#!/usr/bin/env bash
# rdma-core's pyverbs modules with the verbs provider's port over AF_XDP (spec/net.md §6,
# spec/verbs.md §2): device pw0 on 198.18.11.1 of a veth in a namespace of its own
# (PUSHWIRE_VERBS=pw0:198.18.11.1/xdp=IF). A module's two QPs are on the one device, so their
# traffic is addressed to the interface's own address and loops back inside the port, as a NIC's
# local loopback does: nothing RoCE reaches the veth's peer (counted by tcpdump there). Each module
# must pass as tests/verbs/pyverbs.sh requires (spec/verbs.md's minimums, no fallback to UDP).
# Then WRITEs built by scapy arrive off the wire from the peer's namespace: an RC or UC QP takes
# them from its peer's address only (tests/verbs/source_check.py).
# The veth runs at MTU 9000 (path MTU 4096, multi-buffer AF_XDP) where the kernel has it (6.6),
# else 3000.
# usage: xdp_verbs.sh BUILD MODULE...   (root; skips, visibly, without namespaces or AF_XDP)
set -euo pipefail
build=$(cd "$1" && pwd); shift
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../examples/split-model/netns.sh"
pw_require tcpdump /usr/bin/python3
[ -x "$build/verbs/pushwire-verbs" ] || { echo "SKIPPED: no verbs provider in this build"; exit 0; }
s=xv$$; work=$(mktemp -d)
trap 'pw_cleanup; rm -rf "$work"' EXIT
pw_veth_pair $s "198.18.11.1/24" "198.18.11.2/24"
mtu=$(pw_xdp_mtu)
for h in a b; do ip -n $s-$h link set $s-$h mtu $mtu; done
pw_wait_link $s-a $s-a
# Can this machine give the port AF_XDP at all? (the provider says so on stderr when it cannot)
probe=$(ip netns exec $s-a env PUSHWIRE_VERBS=pw0:198.18.11.1/xdp=$s-a "$build/verbs/pushwire-verbs" run -- ibv_devinfo -d pw0 2>&1 || true)
if grep -q 'AF_XDP on .* unavailable' <<<"$probe"; then echo "$probe" | grep 'AF_XDP'; echo "SKIPPED: AF_XDP unavailable here"; exit 0; fi
ip netns exec $s-b tcpdump -q -n -i $s-b -w "$work/peer.pcap" udp port 4791 2>/dev/null & td=$!; pw_pids+=($td)
sleep 0.3
for m in "$@"; do
  rc=0
  # (each within 100 s, inside ctest's 600: the trap must get to clean up)
  ip netns exec $s-a env PUSHWIRE_VERBS=pw0:198.18.11.1/xdp=$s-a timeout -k 5 100 "$here/../verbs/pyverbs.sh" "$build" "$here/../../spec/verbs.md" "$m" \
    >"$work/$m.log" 2>&1 || rc=$?
  if [ $rc = 77 ]; then cat "$work/$m.log"; echo "SKIPPED: rdma-core's pyverbs tests are not installed"; exit 0; fi
  [ $rc = 0 ] || { cat "$work/$m.log"; echo "FAIL: pyverbs $m over AF_XDP (exit $rc)"; exit 1; }
  echo "ok: $(grep '^PASS' "$work/$m.log") over AF_XDP"
done
sleep 0.2; kill -INT $td; wait $td 2>/dev/null || true
n=$(tcpdump -r "$work/peer.pcap" 2>/dev/null | wc -l)
[ "$n" = 0 ] || { echo "FAIL: $n RoCE frames reached the veth's peer: the device's own traffic must loop back"; exit 1; }
# Hostile frames off the wire (tests/verbs/source_check.py): scapy's WRITEs, sent onto the veth from
# the peer's namespace, reach an RC or UC QP through the steering program; from an address that
# is not the QP's peer they write nothing.
for kind in rc uc; do
  ip netns exec $s-a env PUSHWIRE_VERBS=pw0:198.18.11.1/xdp=$s-a "$here/../verbs/run.sh" "$build" /usr/bin/python3 \
    "$here/../verbs/source_check.py" $kind xdp $s-b $s-b >"$work/source-$kind.log" 2>&1 ||
    { cat "$work/source-$kind.log"; echo "FAIL: a ${kind^^} QP over AF_XDP took a WRITE from another address, or not its peer's"; exit 1; }
  grep -q 'AF_XDP on .* unavailable' "$work/source-$kind.log" && { cat "$work/source-$kind.log"; echo "FAIL: fell back to UDP"; exit 1; }
  echo "ok: ${kind^^} over AF_XDP: $(grep -c 'nothing written\|its 64 bytes' "$work/source-$kind.log")/2 source checks"
done
echo "PASS: pyverbs over AF_XDP: $# modules; the device's own traffic looped back in the port (0 frames on the wire); hostile frames off the wire dropped"
