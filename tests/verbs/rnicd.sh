#!/usr/bin/env bash
# pushwire-rnicd between two network namespaces (spec/rnicd.md §7, §9). Each namespace has one
# address and one device process with four VFs; programs attach to its functions through the
# provider (PUSHWIRE_VERBS=pw0@SOCKET#vfN). The veth carries 9000 bytes: the ports' MTU is 4096.
# usage: rnicd.sh BUILD share | faults | isolation | isolation-xdp | limits | classes   (root; skips, visibly, without
# namespaces; on a failure PW_KEEP=DIR keeps the logs and the capture in DIR)
#   share      four ib_write_bw pairs, two ibv_rc_pingpong -c pairs and one ib_send_bw -c UD pair at
#              once, all through the two shared addresses, while dumpcap records the veth: stock
#              tshark decodes every frame, scapy finds every ICRC good, pushwire-conform no violation
#   faults     kill -9 of a program mid-transfer: its attachment is reclaimed within 1 s, a pair
#              beside it runs on, its peer fails with retry exceeded and does not hang; kill -9 and
#              SIGTERM of a device process: its program gets IBV_EVENT_DEVICE_FATAL and error
#              completions
#   isolation  spoofed frames written straight into a tx ring are dropped and counted, the good
#              one leaves; a ring index past the end and a slot of length 0 detach with their named
#              error; garbage on the control socket is refused and the device lives; random
#              traffic to two VFs reaches only the ring it is addressed to
#   isolation-xdp  the same with a's device process's port over AF_XDP (--xdp, spec/net.md §6;
#              the veth at MTU 3000, which veth's native XDP takes)
#   limits     a function's QP, MR and CQ limits hold across two programs (ENOMEM past them); its
#              registered bytes too; a rate limit holds within 5% over 5 s (ib_write_bw)
#   classes    the port's egress at 800 Mb/s with ETS classes 1 and 2 weighted 75/25 (spec/qos.md
#              §5): two ib_write_bw, DSCP 8 (class 1) and DSCP 16 (class 2), share it 75/25 within
#              5% over 5 s; the capture shows their DSCPs on the wire, and the ECT(0) that
#              PUSHWIRE_VERBS_QOS gives the other side's frames
set -euo pipefail
build=$(cd "$1" && pwd); what=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../examples/split-model/netns.sh"
need=(/usr/bin/python3)
case $what in
  share) need+=(ib_write_bw ib_send_bw ibv_rc_pingpong dumpcap tshark) ;;
  faults) need+=(ibv_rc_pingpong) ;;
  limits) need+=(ib_write_bw) ;;
  classes) need+=(ib_write_bw dumpcap tshark) ;;
esac
pw_require "${need[@]}"
verbs=$build/verbs/pushwire-verbs rnicd=$build/verbs/pushwire-rnicd client=$build/tests/pushwire-rnicd-client
s=pr$$; work=$(mktemp -d); chmod 755 "$work"  # (a test connects as another user)
trap 'pw_cleanup; rm -rf "$work"' EXIT
pw_veth_pair $s 198.18.31.1/30 198.18.31.2/30
A=198.18.31.1 B=198.18.31.2

start_daemon() {  # SIDE [ARGS...]: pushwire-rnicd in namespace SIDE (a or b), socket $work/SIDE.sock
  local side=$1 addr; shift
  [ $side = a ] && addr=$A || addr=$B
  rm -f "$work/$side.sock"  # (one left by a device process killed before)
  ip netns exec $s-$side "$rnicd" --port pw0:$addr --functions 4 --control "$work/$side.sock" "$@" 2>>"$work/rnicd-$side.log" &
  local pid=$!; pw_pids+=($pid); eval "daemon_$side=$pid"
  for _ in $(seq 100); do [ -S "$work/$side.sock" ] && return 0; sleep 0.05; done
  cat "$work/rnicd-$side.log"; echo "FAIL: pushwire-rnicd did not start in $side"; exit 1
}
ctl() { local side=$1; shift; ip netns exec $s-$side "$rnicd" ctl "$work/$side.sock" "$@"; }
# run SIDE FUNCTION LOG CMD...: CMD under the provider, attached to FUNCTION (pf, vf1..) of SIDE's device
run() {
  local side=$1 f=$2 log=$3; shift 3
  ip netns exec $s-$side env "PUSHWIRE_VERBS=pw0@$work/$side.sock#$f" ${qos:+"PUSHWIRE_VERBS_QOS=$qos"} timeout 150 "$verbs" run -- "$@" >"$log" 2>&1
}
wait_listen() {  # SIDE PORT
  for _ in $(seq 200); do ip netns exec $s-$1 ss -ltn "sport = :$2" | grep -q LISTEN && return 0; sleep 0.05; done
  echo "FAIL: nothing listens on $1:$2"; return 1
}
json() {  # SIDE PYTHON-EXPRESSION on j (ctl show --json)
  ctl "$1" show --json | /usr/bin/python3 -c "import json,sys; j=json.load(sys.stdin); print($2)"
}
fail() {
  # (40 lines: a program's stderr, unbuffered, lands above its buffered stdout in the log)
  echo "FAIL: $*"; for f in "$work"/*.log; do echo "--- $f"; tail -40 "$f"; done
  for side in a b; do [ -S "$work/$side.sock" ] && { echo "--- ctl $side show"; ctl $side show 2>&1 | tail -40; }; done
  for side in a b; do echo "--- $side: $(ip netns exec $s-$side nstat -az 2>/dev/null | grep -E 'Udp(InErrors|RcvbufErrors|SndbufErrors|InDatagrams)' | tr -s ' ' | tr '\n' ' ')"; done
  [ -n "${PW_KEEP:-}" ] && cp -r "$work" "$PW_KEEP"
  exit 1
}

case $what in
share)
  start_daemon a; start_daemon b
  ip netns exec $s-a dumpcap -q -i $s-a -f "udp port 4791" -w "$work/share.pcapng" 2>/dev/null & cap=$!; pw_pids+=($cap)
  sleep 0.5
  pairs=()
  pair() {  # NAME FUNCTION PORT PROGRAM ARGS...: server in b, client in a, both on FUNCTION
    local name=$1 f=$2 port=$3; shift 3
    run b $f "$work/$name-server.log" "$@" -p $port & local sp=$!
    wait_listen b $port
    run a $f "$work/$name-client.log" "$@" -p $port $B & local cp=$!
    pairs+=("$name:$sp:$cp")
  }
  pair write-pf pf 19501 ib_write_bw -d pw0 -x 0 -F -s 65536 -n 600
  pair write-vf1 vf1 19502 ib_write_bw -d pw0 -x 0 -F -s 65536 -n 600
  pair write-vf2 vf2 19503 ib_write_bw -d pw0 -x 0 -F -s 65536 -n 600
  pair write-vf3 vf3 19504 ib_write_bw -d pw0 -x 0 -F -s 65536 -n 600
  pair ping-vf4 vf4 19505 ibv_rc_pingpong -d pw0 -g 0 -c -n 100
  pair ping-pf pf 19506 ibv_rc_pingpong -d pw0 -g 0 -c -n 100
  pair send-ud vf1 19507 ib_send_bw -d pw0 -x 0 -F -c UD -n 1000
  echo "attached at once: a $(json a "len(j['attachments'])"), b $(json b "len(j['attachments'])")"
  for p in "${pairs[@]}"; do
    IFS=: read -r name sp cp <<<"$p"
    src=0 crc=0; wait $sp || src=$?; wait $cp || crc=$?
    [ $src = 0 ] && [ $crc = 0 ] || fail "$name: server $src, client $crc"
    echo "ok: $name | $(grep -E 'iters in|^ *[0-9]+ +[0-9]+ ' "$work/$name-client.log" | tail -1 | tr -s ' ')"
  done
  sleep 0.3; kill -INT $cap; wait $cap 2>/dev/null || true
  frames=$(tshark -r "$work/share.pcapng" 2>/dev/null | wc -l)
  ib=$(tshark -r "$work/share.pcapng" -Y infiniband 2>/dev/null | wc -l)
  malformed=$(tshark -r "$work/share.pcapng" -Y "_ws.malformed" 2>/dev/null | wc -l)
  echo "stock tshark: $frames frames, $ib decoded as InfiniBand, $malformed malformed"
  [ "$frames" -gt 10000 ] && [ "$ib" = "$frames" ] && [ "$malformed" = 0 ] || fail "tshark's decode"
  /usr/bin/python3 "$here/icrc_check.py" "$work/share.pcapng" 10000 || fail "ICRC"
  "$build/tools/pushwire-conform" "$work/share.pcapng" >"$work/conform.txt" || { cat "$work/conform.txt"; fail "pushwire-conform"; }
  tail -1 "$work/conform.txt"
  echo "PASS: seven pairs through two shared addresses; every frame decoded, every ICRC good, no violation"
  ;;

faults)
  start_daemon a; start_daemon b
  # A pair beside the one that dies must run on.
  run b vf2 "$work/beside-server.log" ibv_rc_pingpong -d pw0 -g 0 -c -n 4000 -p 19511 & beside_s=$!
  wait_listen b 19511
  run a vf2 "$work/beside-client.log" ibv_rc_pingpong -d pw0 -g 0 -c -n 4000 -p 19511 $B & beside_c=$!
  # The pair whose server is killed: its client keeps sending into a QP that is gone.
  run b vf1 "$work/victim-server.log" ibv_rc_pingpong -d pw0 -g 0 -n 100000000 -p 19512 & victim_s=$!
  wait_listen b 19512
  run a vf1 "$work/victim-client.log" ibv_rc_pingpong -d pw0 -g 0 -n 100000000 -p 19512 $B & victim_c=$!
  sleep 2
  before=$(json b "len(j['attachments'])")
  victim_pid=$(json b "[a['pid'] for a in j['attachments'] if a['function'] == 1][0]")
  kill -9 "$victim_pid"; t0=$(date +%s%N)
  reclaimed=
  while [ $(( ($(date +%s%N) - t0) / 1000000 )) -lt 1000 ]; do
    [ "$(json b "len(j['attachments'])")" -lt "$before" ] && { reclaimed=$(( ($(date +%s%N) - t0) / 1000000 )); break; }
    sleep 0.02
  done
  [ -n "$reclaimed" ] || fail "the killed program's attachment was not reclaimed within 1 s"
  [ "$(json b "j['functions'][1]['qps']")" = 0 ] || fail "the killed program's QPs still count against vf1"
  echo "ok: kill -9 of a program (pid $victim_pid): its attachment, QPN block and limits reclaimed in ${reclaimed} ms"
  t1=$(date +%s)
  vc=0; wait $victim_c || vc=$?
  waited=$(( $(date +%s) - t1 ))
  [ $vc != 0 ] && [ $vc != 124 ] || fail "the dead program's peer: exit $vc (124: it hung)"
  grep -qi "retry" "$work/victim-client.log" || fail "the peer did not fail with retry exceeded"
  echo "ok: its peer failed in ${waited} s: $(grep -i retry "$work/victim-client.log" | head -1)"
  bs=0 bc=0; wait $beside_s || bs=$?; wait $beside_c || bc=$?
  [ $bs = 0 ] && [ $bc = 0 ] || fail "the pair beside it: server $bs, client $bc"
  echo "ok: the pair beside it ran on: $(grep 'iters in' "$work/beside-client.log" | tr -s ' ')"
  # The device process dies (kill -9), then stops (SIGTERM): a program mid-transfer learns of it.
  for sig in KILL TERM; do
    run a vf3 "$work/fatal-$sig.log" "$client" fatal & fp=$!
    for _ in $(seq 400); do grep -q ready "$work/fatal-$sig.log" && break; sleep 0.05; done
    grep -q ready "$work/fatal-$sig.log" || fail "the fatal client did not start"
    kill -$sig $daemon_a
    fr=0; wait $fp || fr=$?
    dr=0; wait $daemon_a || dr=$?
    [ $fr = 0 ] || fail "kill -$sig of the device process: the program exited $fr"
    echo "ok: $sig of the device process (exit $dr): $(grep PASS "$work/fatal-$sig.log")"
    if [ $sig = TERM ]; then
      [ $dr = 0 ] || fail "SIGTERM: the device process exited $dr"
      [ ! -e "$work/a.sock" ] || fail "SIGTERM: the control socket was left"
    else
      start_daemon a
    fi
  done
  echo "PASS: kill -9 of a program and of the device process, SIGTERM: reclaimed, failed cleanly, nothing hung"
  ;;

isolation|isolation-xdp)
  if [ $what = isolation-xdp ]; then
    ip -n $s-a link set $s-a mtu 3000; ip -n $s-b link set $s-b mtu 3000
    start_daemon a --xdp $s-a
    if grep -q 'AF_XDP on .* unavailable' "$work/rnicd-a.log"; then cat "$work/rnicd-a.log"; echo "SKIPPED: AF_XDP unavailable here"; exit 0; fi
    grep -q "AF_XDP on $s-a (native XDP" "$work/rnicd-a.log" || { cat "$work/rnicd-a.log"; fail "a's port is not over native AF_XDP"; }
  else
    start_daemon a
  fi
  # A function is a device of its own to an unmodified program: its GID and node GUID (EUI-64 of
  # its MAC, 02:01:c6:12:1f:01 for VF 1 of 198.18.31.1).
  run a vf1 "$work/devinfo.log" ibv_devinfo -v || fail "ibv_devinfo attached to vf1"
  grep -q "node_guid:.*0001:c6ff:fe12:1f01" "$work/devinfo.log" && grep -q "GID\[  0\]:.*198.18.31.1" "$work/devinfo.log" ||
    fail "ibv_devinfo: $(grep -E 'node_guid|GID' "$work/devinfo.log")"
  echo "ok: ibv_devinfo attached to vf1: $(grep -E 'node_guid' "$work/devinfo.log" | tr -s ' \t' ' ')"
  # A plain UDP socket in b counts what leaves a's device.
  ip netns exec $s-b /usr/bin/python3 -c "
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('$B', 4791)); s.settimeout(3)
n = 0
try:
    while True:
        s.recv(9000); n += 1
except socket.timeout:
    pass
print(n)" >"$work/peer.txt" & peer=$!
  sleep 0.3
  ip netns exec $s-a "$client" frames "$work/a.sock" 1 $B || fail "the hostile program"
  wait $peer
  [ "$(cat "$work/peer.txt")" = 1 ] || fail "$(cat "$work/peer.txt") frames left the device, not 1"
  counts=$(json a "' '.join(str(j['functions'][1][k]) for k in ['tx_frames','not_roce','spoofed_mac','spoofed_ip','spoofed_port','spoofed_pkey','spoofed_qpn'])")
  [ "$counts" = "1 1 1 1 1 1 1" ] || fail "vf1's counters (sent, not_roce, mac, ip, port, pkey, qpn): $counts"
  echo "ok: 1 good frame left, each spoof dropped and counted: $counts"
  ip netns exec $s-a "$client" ring "$work/a.sock" 2 || fail "a ring index past the end"
  ip netns exec $s-a "$client" slot "$work/a.sock" 2 || fail "a slot of length 0"
  grep -q "ring_index_out_of_range; detached" "$work/rnicd-a.log" && grep -q "slot_length_out_of_range; detached" "$work/rnicd-a.log" ||
    fail "the device process's log names neither"
  echo "ok: a ring index past the end and a slot of length 0: detached with their named errors"
  ip netns exec $s-a /usr/bin/python3 "$here/rnicd_garbage.py" "$work/a.sock" || fail "garbage on the control socket"
  kill -0 $daemon_a || fail "the device process died"
  # Random traffic to two VFs: each ring holds only its own.
  ip netns exec $s-a "$client" rx "$work/a.sock" 1 4 >"$work/rx1.log" 2>&1 & r1=$!
  ip netns exec $s-a "$client" rx "$work/a.sock" 2 4 >"$work/rx2.log" 2>&1 & r2=$!
  for _ in $(seq 100); do grep -q ready "$work/rx1.log" && grep -q ready "$work/rx2.log" && break; sleep 0.05; done
  q1=$(sed -n 's/ready: QPNs \(0x[0-9a-f]*\)\.\..*/\1/p' "$work/rx1.log"); q2=$(sed -n 's/ready: QPNs \(0x[0-9a-f]*\)\.\..*/\1/p' "$work/rx2.log")
  ip netns exec $s-b /usr/bin/python3 - "$A" "$q1" "$q2" <<'EOF'
import random, socket, struct, sys, time
dst, q1, q2 = sys.argv[1], int(sys.argv[2], 16), int(sys.argv[3], 16)
rng = random.Random(31)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 4791))
for i in range(6000):
    base = rng.choice([q1, q2, rng.randrange(0, 1 << 24) & ~0x3FFF])
    qpn = base + rng.randrange(0, 1 << 14)
    # UD SEND only: BTH (opcode 0x64, P_Key 0xFFFF, dest QP, PSN), DETH, 32 bytes, ICRC
    bth = struct.pack(">BBHII", 0x64, 0, 0xFFFF, qpn, i & 0xFFFFFF)
    deth = struct.pack(">II", 0x11111111, 0x000123)
    s.sendto(bth + deth + bytes(32) + b"\0\0\0\0", (dst, 4791))
    if i % 200 == 0:
        time.sleep(0.01)
EOF
  wait $r1 || fail "vf1's ring: $(cat "$work/rx1.log")"
  wait $r2 || fail "vf2's ring: $(cat "$work/rx2.log")"
  n1=$(sed -n 's/PASS: \([0-9]*\) frames.*/\1/p' "$work/rx1.log"); n2=$(sed -n 's/PASS: \([0-9]*\) frames.*/\1/p' "$work/rx2.log")
  [ "${n1:-0}" -gt 500 ] && [ "${n2:-0}" -gt 500 ] || fail "too few frames reached the rings ($n1, $n2)"
  echo "ok: 6000 random frames: vf1's ring took $n1, vf2's $n2, each only its own; $(json a "j['rx_drops']['no_attachment']") to no attachment dropped"
  echo "PASS: spoofed frames dropped and counted, broken rings detached, garbage refused, no frame in another's ring"
  ;;

limits)
  start_daemon a; start_daemon b
  ctl a vf set 1 max_qps 4 max_mrs 5 max_cqs 3 >/dev/null
  ctl a vf set 2 max_bytes 1048576 >/dev/null
  # Two programs share vf1's limits: the first holds one of each.
  run a vf1 "$work/hold.log" "$client" alloc 1 1 1 0 8 & hold=$!
  for _ in $(seq 100); do grep -q ready "$work/hold.log" && break; sleep 0.05; done
  run a vf1 "$work/alloc.log" "$client" alloc 3 4 2 1 0 || fail "limits across two programs: $(cat "$work/alloc.log")"
  echo "ok: $(cat "$work/alloc.log") (beside another program holding one of each)"
  kill $hold 2>/dev/null || true; wait $hold 2>/dev/null || true
  run a vf2 "$work/bytes.log" "$client" bytes 1048576 || fail "registered bytes: $(cat "$work/bytes.log")"
  echo "ok: $(cat "$work/bytes.log")"
  ctl a vf set 3 rate 300M >/dev/null
  # The rate: vf3 writes to the PF of its own device process (the switch carries the frames), so
  # the limit, not this host's two cores shared by two device processes, bounds the stream
  # (spec/rnicd.md §10). The limit counts frame bytes: vf3's tx_bytes over 5 s of the run, past
  # perftest's warm-up; perftest's own figure counts payload (1.5% less) to 2 decimals.
  run a pf "$work/rate-server.log" ib_write_bw -d pw0 -x 0 -F -s 65536 -D 9 --report_gbits -p 19521 & rs=$!
  wait_listen a 19521
  run a vf3 "$work/rate-client.log" ib_write_bw -d pw0 -x 0 -F -s 65536 -D 9 --report_gbits -p 19521 $A & rc=$!
  sleep 3
  # The machine's idle share over the same 5 s (/proc/stat): a stream below the rate on a machine
  # with no idle CPU left says nothing of the limiter (other work took the cores), so the lower
  # bounds are judged only with 10% or more idle; the upper bounds always.
  idle() { awk '/^cpu / {print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat; }
  t0=$(date +%s.%N) b0=$(json a "j['functions'][3]['tx_bytes']") i0=$(idle)
  sleep 5
  t1=$(date +%s.%N) b1=$(json a "j['functions'][3]['tx_bytes']") i1=$(idle)
  wait $rc || fail "ib_write_bw at a rate"
  wait $rs || true
  bw=$(awk '/#bytes/ {getline; print $4; exit}' "$work/rate-client.log")
  mbps=$(/usr/bin/python3 -c "print(round(($b1 - $b0) * 8 / ($t1 - $t0) / 1e6, 1))")
  idle_share=$(/usr/bin/python3 -c "a, b = '$i0'.split(), '$i1'.split(); print(round((float(b[0]) - float(a[0])) / max(1.0, float(b[1]) - float(a[1])), 2))")
  low=0.95 low_bw=0.93 note=""
  if /usr/bin/python3 -c "import sys; sys.exit(0 if $idle_share < 0.10 else 1)"; then
    low=0 low_bw=0 note=" (lower bounds not judged: the machine was ${idle_share} idle)"
  fi
  /usr/bin/python3 -c "import sys; sys.exit(0 if $low * 300 <= $mbps <= 1.05 * 300 else 1)" ||
    fail "vf3 at rate 300M sent $mbps Mb/s of frames over 5 s (more than 5% from it; the machine ${idle_share} idle)"
  /usr/bin/python3 -c "import sys; sys.exit(0 if $low_bw * 0.3 <= float('$bw') <= 1.05 * 0.3 else 1)" ||
    fail "vf3 at rate 300M: ib_write_bw moved ${bw} Gb/s (the machine ${idle_share} idle)"
  echo "ok: vf3 at rate 300 Mb/s: $mbps Mb/s of frames over 5 s; ib_write_bw averaged $bw Gb/s of payload$note"
  echo "PASS: QP, MR and CQ limits across two programs, registered bytes, and a rate held within 5%"
  ;;
classes)
  start_daemon a --egress "rate 200M tcbw 0,75,25,0,0,0,0,0"
  start_daemon b
  ip netns exec $s-a dumpcap -q -i $s-a -f "udp port 4791" -s 128 -w "$work/classes.pcapng" 2>/dev/null & cap=$!; pw_pids+=($cap)
  sleep 0.5
  # ib_write_bw's --tclass is the traffic class byte: DSCP << 2
  # the servers' devices send ECT(0) (PUSHWIRE_VERBS_QOS): their ACKs show it on the wire
  qos="ecn ect0" run b vf1 "$work/tc1-server.log" ib_write_bw -d pw0 -x 0 -F -s 65536 -D 5 --tclass=32 -p 19531 & s1=$!
  qos="ecn ect0" run b vf2 "$work/tc2-server.log" ib_write_bw -d pw0 -x 0 -F -s 65536 -D 5 --tclass=64 -p 19532 & s2=$!
  wait_listen b 19531; wait_listen b 19532
  run a vf1 "$work/tc1-client.log" ib_write_bw -d pw0 -x 0 -F -s 65536 -D 5 --tclass=32 -p 19531 $B & c1=$!
  run a vf2 "$work/tc2-client.log" ib_write_bw -d pw0 -x 0 -F -s 65536 -D 5 --tclass=64 -p 19532 $B & c2=$!
  for p in $c1 $c2 $s1 $s2; do wait $p || fail "ib_write_bw in a class"; done
  kill -INT $cap 2>/dev/null; wait $cap 2>/dev/null || true
  bw1=$(awk '/#bytes/ {getline; print $4; exit}' "$work/tc1-client.log")
  bw2=$(awk '/#bytes/ {getline; print $4; exit}' "$work/tc2-client.log")
  share=$(/usr/bin/python3 -c "print(round($bw1 / ($bw1 + $bw2), 4))")
  echo "ib_write_bw: class 1 $bw1 MB/s, class 2 $bw2 MB/s: class 1's share $share"
  ctl a show | grep -E "^port|^  tc [0-2]"
  /usr/bin/python3 -c "import sys; s=$share; sys.exit(0 if abs(s - 0.75) <= 0.05 else 1)" || fail "class 1's share $share is not 0.75 +- 0.05"
  /usr/bin/python3 -c "import sys; t=$bw1+$bw2; sys.exit(0 if 15 <= t <= 26 else 1)" || fail "the two flows moved $bw1 + $bw2 MB/s: not about the port's 25 MB/s"
  # the DSCPs on the wire, as stock tshark reads the veth's IP headers (a's data frames)
  dscps=$(tshark -r "$work/classes.pcapng" -Y "ip.src == $A && ip.len > 1000" -T fields -e ip.dsfield.dscp 2>/dev/null | sort | uniq -c | awk '{print $2 ":" $1}' | tr '\n' ' ')
  echo "DSCP of a's data frames on the wire: $dscps"
  case " $dscps" in *" 8:"*) ;; *) fail "no DSCP 8 on the wire" ;; esac
  case " $dscps" in *" 16:"*) ;; *) fail "no DSCP 16 on the wire" ;; esac
  case " $dscps" in *" 0:"*) fail "data frames without their DSCP on the wire" ;; esac
  ecns=$(tshark -r "$work/classes.pcapng" -Y "ip.src == $B && udp.dstport == 4791" -T fields -e ip.dsfield.ecn 2>/dev/null | sort | uniq -c | awk '{print $2 ":" $1}' | tr '\n' ' ')
  echo "ECN of b's frames on the wire: $ecns"
  case "$ecns" in "2:"*) ;; *) fail "b's frames are not all ECT(0) (PUSHWIRE_VERBS_QOS=\"ecn ect0\")" ;; esac
  case "$ecns" in *" "[0-9]*:*) fail "b's frames are not all ECT(0)" ;; esac
  echo "PASS: two classes weighted 75/25 share the port $share : $(/usr/bin/python3 -c "print(round(1 - $share, 4))"), their DSCPs on the wire"
  ;;
*) echo "usage: rnicd.sh BUILD share|faults|isolation|limits|classes"; exit 64 ;;
esac
