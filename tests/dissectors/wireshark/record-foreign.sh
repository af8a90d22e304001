#!/usr/bin/env bash
# Records other people's RDMA traffic, for the plugin's claiming tests (spec/wireshark.md §7):
# unmodified verbs programs (ibverbs-utils' pingpongs, perftest, and rdma-core's own pyverbs tests
# of SEND and RDMA WRITE with immediate) run through libpushwire-verbs over loopback, captured
# on lo by dumpcap. Nothing in it is push-push. Needs root (a capture on lo).
# usage: record-foreign.sh BUILD OUT.pcap
# tests/dissectors/wireshark/foreign-verbs.pcap was made by it; run it again to renew that file.
build=$(cd "$1" && pwd); out=$2
[ "$(id -u)" = 0 ] || { echo "SKIPPED: a capture on lo needs root"; exit 77; }
command -v dumpcap >/dev/null || { echo "SKIPPED: dumpcap is not installed"; exit 77; }
pw_port=18611
. "$(dirname "$0")/../../verbs/common.sh"
cap=$pw_work/foreign.pcapng
dumpcap -q -i lo -f "udp port 4791" -s 0 -w "$cap" 2>"$pw_work/dumpcap.log" &
dpid=$!
for _ in $(seq 100); do grep -q "Capturing on" "$pw_work/dumpcap.log" 2>/dev/null && break; sleep 0.05; done
sleep 0.3
g=(-d pw0 -g 0 -p $pw_port)
pw_pair 60 ibv_rc_pingpong "${g[@]}" -n 20 -s 1024 -- ibv_rc_pingpong "${g[@]}" -n 20 -s 1024 127.0.0.1
pw_pair 60 ibv_ud_pingpong "${g[@]}" -n 20 -s 512 -- ibv_ud_pingpong "${g[@]}" -n 20 -s 512 127.0.0.1
p=(-d pw0 -x 0 -p $pw_port -F)
pw_pair 60 ib_write_bw "${p[@]}" -n 20 -s 2048 -- ib_write_bw "${p[@]}" -n 20 -s 2048 127.0.0.1
pw_pair 60 ib_read_lat "${p[@]}" -n 20 -s 64 -- ib_read_lat "${p[@]}" -n 20 -s 64 127.0.0.1
pw_pair 60 ib_atomic_bw "${p[@]}" -n 20 -- ib_atomic_bw "${p[@]}" -n 20 127.0.0.1
pw_pair 60 ib_send_lat "${p[@]}" -n 20 -s 128 -- ib_send_lat "${p[@]}" -n 20 -s 128 127.0.0.1
# rdma-core's own tests: RDMA WRITE with immediate (as NCCL does it) and SEND with immediate.
tests=$build/verbs/pyverbs-tests
if [ -f "$tests/run_tests.py" ]; then
  pw_run /usr/bin/python3 "$tests/run_tests.py" --dev pw0 -v test_qpex.QpExTestCase.test_qp_ex_rc_rdma_write_imm \
    test_qpex.QpExTestCase.test_qp_ex_rc_send_imm >"$pw_work/pyverbs.log" 2>&1 || { cat "$pw_work/pyverbs.log"; exit 1; }
fi
sleep 0.3
kill -INT $dpid; wait $dpid || true
# pcap (Ethernet), as the other test captures
editcap -F pcap "$cap" "$out"
capinfos -c "$out"
