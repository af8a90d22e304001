#!/usr/bin/env bash
# The split-model driver's other message paths on a real fabric (spec/split-model.md), with the
# fabric captured and read back by scapy's pcap reader (the BTH and push-push headers parsed
# here by hand, not by pushwire):
#  1. pool growth: a burst host -> LAN (four TCP streams, the I/O unit paused for 250 ms in it)
#     takes the host's free elements below low water: BufferRecvPoolGet goes host -> I/O unit on
#     the wire and a BufferRecvPool with a new pool answers it;
#  2. BufferRDMAIndicate: both modules' pools numbered above 255 (--pool-ref 0x200 / 0x100), so
#     no write can carry its indication in idata: a file through TCP each way, SHA-256 compared,
#     no WRITE with immediate on the wire, and BufferRDMAIndicate entries naming those pools for
#     at least the file's bytes each way;
#  3. UC channels (--uc on both): a file through TCP each way intact on a clean fabric, every
#     packet on the wire a UC opcode, and no ACK.
# usage: split_variants.sh BUILD_DIR      (root; skips, visibly, without namespaces)
set -euo pipefail
build=$(cd "$1" && pwd)
. "$(dirname "$0")/../../examples/split-model/netns.sh"
pw_require python3 tcpdump
/usr/bin/python3 -c 'import scapy.all' 2>/dev/null || { echo "SKIPPED: python3-scapy missing"; exit 0; }
s=pw$$; work=$(mktemp -d)
h=$s-host i=$s-iou l=$s-lan
trap 'pw_cleanup; rm -rf "$work"' EXIT
pw_split_topology $s
show_logs() { for f in "$work"/*.log; do echo "--- $f"; cat "$f"; done; }
fail() { show_logs; echo "FAIL: $*"; exit 1; }
# The push-push messages on the fabric, from a capture: "function src dst pool_refs..." per line
# (retransmitted packets once), then the count of WRITE packets by opcode.
cat >"$work/messages.py" <<'PY'
import struct, sys
from scapy.all import rdpcap, IP, UDP
names = {0x0101: "BufferRecvPool", 0x0102: "BufferRecvPoolGet", 0x0103: "BufferRecvPoolUpdate", 0x0104: "BufferPoolFlushRequest",
         0x0105: "BufferPoolFlushReply", 0x0201: "SendData", 0x0202: "BufferRDMAIndicate", 0x0301: "CfgUtilRequest", 0x0302: "CfgUtilReply"}
writes, ops = {}, {}
seen = set()   # (source, destination QP, PSN, opcode): a packet the transport sent again counts once
for p in rdpcap(sys.argv[1]):
    if UDP not in p or p[UDP].dport != 4791: continue
    b = bytes(p[UDP].payload)
    if len(b) < 16: continue
    op = b[0]
    key = (p[IP].src, b[5:8], b[9:12], op)   # (an ACK carries the PSN it acknowledges)
    if key in seen: continue
    seen.add(key)
    ops[op] = ops.get(op, 0) + 1
    if 6 <= op <= 11:  # RDMA WRITE First, Middle, Last, Last with immediate, Only, Only with immediate
        writes[op] = writes.get(op, 0) + 1
    if op not in (4, 0x24): continue   # RC or UC SEND Only: one whole message
    m = b[12:-4]
    if len(m) < 12: continue
    f = struct.unpack(">H", m[:2])[0]
    refs = []
    if f == 0x0101:   # pools: pool_count at 12, then 32-byte entries whose first field is pool_ref
        n = struct.unpack(">I", m[12:16])[0]
        refs = [struct.unpack(">I", m[16 + 32 * k:20 + 32 * k])[0] for k in range(n)]
    elif f == 0x0202:  # entries: entry_count at 12, then 12-byte (pool_ref, element, bytes): a line each
        n = struct.unpack(">I", m[12:16])[0]
        for k in range(n):
            ref, el, nbytes = struct.unpack(">III", m[16 + 12 * k:28 + 12 * k])
            print("BufferRDMAIndicate", p[IP].src, p[IP].dst, hex(ref), el, nbytes)
        continue
    elif f == 0x0102:  # element_size, element_count
        refs = list(struct.unpack(">II", m[12:20]))
    print(names.get(f, hex(f)), p[IP].src, p[IP].dst, " ".join(hex(r) for r in refs))
for op, n in sorted(writes.items()): print("WRITE opcode", op, n)
for op, n in sorted(ops.items()): print("OPCODE 0x%02x %d" % (op, n))
PY
# capture FILE [FILTER]: RoCEv2 on the I/O unit's fabric veth (the first 200 bytes of each
# packet; a 64 MB buffer, so that the kernel drops none at these rates)
capture() { ip netns exec $i tcpdump -p -n --immediate-mode -i $s-i -s 200 -B 65536 -w "$1" "udp port 4791 ${2:-}" 2>/dev/null & pw_pids+=($!); cap=$!; sleep 0.5; }
uncapture() { sleep 1; kill -INT $cap; wait $cap 2>/dev/null || true; }
stop_modules() {  # SIGTERM; each module has its close (Flush) time and 10 s more to exit
  kill -TERM $host $iou
  local rc_h=0 rc_i=0 p _
  for p in $host $iou; do
    for _ in $(seq 100); do kill -0 $p 2>/dev/null || break; sleep 0.1; done
    if kill -0 $p 2>/dev/null; then
      echo "--- $p still running 10 s after SIGTERM: $(tr '\0' ' ' </proc/$p/cmdline) state $(awk '/^State/ {print $2}' /proc/$p/status)"
      cat /proc/$p/stack 2>/dev/null || true
      kill -9 $p
      fail "a module did not exit after SIGTERM"
    fi
  done
  wait $host || rc_h=$?; wait $iou || rc_i=$?
  [ $rc_h = 0 ] && [ $rc_i = 0 ] || fail "teardown (host $rc_h, iou $rc_i)"
}
sink() {  # PORT: a TCP server in the LAN namespace that takes everything
  ip netns exec $l python3 -c 'import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("198.18.1.2", int(sys.argv[1]))); s.listen(8)
def take(c):
    while c.recv(1 << 16): pass
while True:
    c, _ = s.accept(); threading.Thread(target=take, args=(c,), daemon=True).start()' $1 >/dev/null 2>&1 &
  pw_pids+=($!)
}

# 1. Pool growth
pw_start_iou "$build" $s "$work/iou1.log"; iou=$pw_iou
pw_start_host "$build" $s "$work/host1.log"; host=$pw_host
ip netns exec $h ping -c 2 -i 0.2 -w 10 198.18.1.2 >/dev/null || fail "ping through the driver"
sink 5003
sleep 0.3
capture "$work/growth.pcap" "and udp[8] == 4"   # SEND Only: the messages, not the WRITEs
clients=()  # their PIDs (`jobs -p` would also name the sink and tcpdump once a sender is done)
for k in 1 2 3 4; do
  ip netns exec $h python3 -c 'import socket; c = socket.create_connection(("198.18.1.2", 5003), timeout=30); c.sendall(bytes(32 << 20)); c.close()' &
  clients+=($!)
done
# The I/O unit pauses for 250 ms (well inside the CM's 600 ms) once the burst has begun, and
# before it can have ended (128 MB): what the host writes meanwhile stays unacknowledged, so its
# free elements surely fall below low water.
for _ in $(seq 100); do [ "$(ip netns exec $h ss -tnH state established dst 198.18.1.2 | wc -l)" -ge 4 ] && break; sleep 0.01; done
sleep 0.05; kill -STOP $iou; sleep 0.25; kill -CONT $iou
running() { local p; for p in "${clients[@]}"; do kill -0 $p 2>/dev/null && return 0; done; return 1; }
for _ in $(seq 600); do running || break; sleep 0.1; done  # each has a 30 s socket timeout
if running; then  # the modules' exit lines (their counters) go with the failure
  kill -9 "${clients[@]}" 2>/dev/null; kill -TERM $host $iou; sleep 3
  fail "the four TCP senders still ran after 60 s"
fi
wait "${clients[@]}" 2>/dev/null || true
uncapture
stop_modules
/usr/bin/python3 "$work/messages.py" "$work/growth.pcap" >"$work/growth.txt"
get=$(grep -c '^BufferRecvPoolGet 198.18.0.1 198.18.0.2 0x10000 0x40$' "$work/growth.txt" || true)
[ "$get" -ge 1 ] || { cat "$work/growth.txt" | sort | uniq -c; fail "no BufferRecvPoolGet (64 elements of 65536 bytes) host -> I/O unit on the wire"; }
grep -q '^BufferRecvPool 198.18.0.2 198.18.0.1 0x82$' "$work/growth.txt" || fail "no new pool 0x82 from the I/O unit on the wire"
tail -n1 "$work/host1.log" | grep -q 'pools asked for [1-9]' || fail "the host's exit line shows no Get"
tail -n1 "$work/iou1.log" | grep -q 'granted [1-9]' || fail "the I/O unit's exit line shows no pool granted"
echo "pool growth: 128 MB in four TCP streams host -> LAN: $get BufferRecvPoolGet on the wire, answered by pool 0x82 ($(grep -c '^BufferRecvPool 198.18.0.2' "$work/growth.txt") BufferRecvPool from the I/O unit)"

# both_ways N WHAT "IOU ARGS" "HOST ARGS": both modules started with those arguments, ping, 3 MB
# through TCP each way (SHA-256 compared) with the fabric captured, both stopped; the capture's
# messages in $work/N.txt, the exit lines in $work/{iou,host}N.log
head -c 3000000 /dev/urandom >"$work/up.bin"; head -c 3000000 /dev/urandom >"$work/down.bin"
both_ways() {
  local n=$1 what=$2
  # shellcheck disable=SC2086  # the argument lists, word-split
  pw_start_iou "$build" $s "$work/iou$n.log" $3; iou=$pw_iou
  # shellcheck disable=SC2086
  pw_start_host "$build" $s "$work/host$n.log" $4; host=$pw_host
  ip netns exec $h ping -c 2 -i 0.2 -w 10 198.18.1.2 >/dev/null || fail "ping $what"
  capture "$work/$n.pcap"
  pw_tcp_file $h $l 198.18.1.2 "$work/up.bin" "$work" || fail "3 MB host -> LAN $what did not arrive intact"
  pw_tcp_file $l $h 198.18.1.1 "$work/down.bin" "$work" || fail "3 MB LAN -> host $what did not arrive intact"
  uncapture
  stop_modules
  /usr/bin/python3 "$work/messages.py" "$work/$n.pcap" >"$work/$n.txt"
}

# 2. BufferRDMAIndicate: every pool above 255
both_ways 2 "with pools above 255" "--pool-ref 0x100" "--pool-ref 0x200"
# bytes indicated each way, into pools 0x100.. (the I/O unit's) and 0x200.. (the host's)
indicated() { awk -v src=$1 -v pre=$2 '$1 == "BufferRDMAIndicate" && $2 == src && index($4, pre) == 1 { n += $6 } END { print n + 0 }' "$work/2.txt"; }
up=$(indicated 198.18.0.1 0x10) down=$(indicated 198.18.0.2 0x20)
[ "$up" -ge 3000000 ] && [ "$down" -ge 3000000 ] || { sort "$work/2.txt" | uniq -c | sort -rn | head; fail "BufferRDMAIndicate on the wire: $up bytes host -> I/O unit, $down back (3 MB each way)"; }
! grep -q '^WRITE opcode \(9\|11\) ' "$work/2.txt" || fail "a WRITE with immediate into a pool above 255: $(grep '^WRITE opcode' "$work/2.txt")"
for f in host2 iou2; do
  tail -n1 "$work/$f.log" | grep -q 'WRITE+idata 0, WRITE+BufferRDMAIndicate [1-9]' || fail "$f's exit line: $(tail -n1 "$work/$f.log")"
done
echo "pools 0x100 and 0x200: 3 MB through TCP each way intact, no idata: BufferRDMAIndicate on the wire for $up bytes host -> I/O unit, $down back"

# 3. UC channels
both_ways 3 "over UC channels" --uc --uc
all=$(awk '$1 == "OPCODE" { n += $3 } END { print n + 0 }' "$work/3.txt")
uc=$(awk '$1 == "OPCODE" && $2 >= "0x20" && $2 <= "0x3f" { n += $3 } END { print n + 0 }' "$work/3.txt")
[ "$all" -gt 1000 ] && [ "$uc" = "$all" ] || { grep OPCODE "$work/3.txt"; fail "UC channels: $uc of $all packets on the wire are UC"; }
echo "UC channels: 3 MB through TCP each way intact; all $all packets on the wire UC opcodes, no ACK"
echo "PASS: pool growth on the wire, BufferRDMAIndicate for pools above 255, UC channels"
