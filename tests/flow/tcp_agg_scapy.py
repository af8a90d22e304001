#!/usr/bin/python3
"""TCP aggregation against scapy (flow/tcp_agg.hpp; spec/split-model.md, TCP aggregation).

scapy builds the segments of five TCP flows, interleaved with a UDP datagram: IPv4 and IPv6 runs
that end with PSH, a run with a gap, a run whose timestamp option changes midway, and a run with
a bad checksum in it. `pushwire-dump --tcp-aggregate` runs them through flow::tcp_aggregator.
scapy then reads what came out, rebuilds every TCP frame with its lengths and checksums
recomputed and finds them equal, and every flow's payload comes out whole and in place, in as
many frames as the flush rules say.
usage: tcp_agg_scapy.py PUSHWIRE_DUMP WORK_DIR    (exit 77: scapy missing)
"""
import os
import subprocess
import sys

try:
    from scapy.all import IP, TCP, UDP, Ether, IPv6, Raw, rdpcap, wrpcap
except ImportError:
    print("SKIPPED: python3-scapy missing")
    sys.exit(77)

dump, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
MAC = dict(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")


def data(seq, n):
    return bytes(((seq + i) * 7 + ((seq + i) >> 9)) & 0xFF for i in range(n))


def segment(sport, seq, n, v6=False, flags="A", ipid=1, ts=1000):
    l3 = IPv6(src="fd00::1", dst="fd00::2", hlim=64) if v6 else IP(src="198.18.0.1", dst="198.18.0.2", id=ipid, flags="DF", ttl=64)
    tcp = TCP(sport=sport, dport=5201, seq=seq, ack=5000, flags=flags, window=512, options=[("NOP", None), ("NOP", None), ("Timestamp", (ts, 99))])
    return Ether(**MAC) / l3 / tcp / Raw(data(seq, n))


def run(sport, count, size, v6=False, psh_last=True, skip=(), ts_change_at=None, bad_at=None):
    """A flow's segments in order: (frames, the bad frame's bytes or None)."""
    frames, bad = [], None
    for i in range(count):
        if i in skip:
            continue
        flags = "PA" if psh_last and i == count - 1 else "A"
        ts = 1001 if ts_change_at is not None and i >= ts_change_at else 1000
        p = segment(sport, 100000 + i * size, size, v6=v6, flags=flags, ipid=1 + i, ts=ts)
        if i == bad_at:
            p = Ether(bytes(p))
            p[TCP].chksum ^= 0x5A5A
            bad = bytes(p)
        frames.append(p)
    return frames, bad


flows = {
    40001: (run(40001, 20, 1448), 1),                      # one aggregate, ended by PSH
    40002: (run(40002, 12, 1428, v6=True), 1),              # the same over IPv6
    40003: (run(40003, 10, 1448, psh_last=False, skip={4}), 2),  # a gap: two aggregates
    40004: (run(40004, 8, 1448, ts_change_at=4), 2),        # the timestamp changes: two
    40006: (run(40006, 7, 1000, bad_at=3), 3),              # a bad checksum passes alone between two
}
order = []
longest = max(len(f[0][0]) for f in flows.values())
for i in range(longest):
    for sport, ((frames, _), _) in flows.items():
        if i < len(frames):
            order.append(frames[i])
    if i == 5:
        order.append(Ether(**MAC) / IP(src="198.18.0.1", dst="198.18.0.2") / UDP(sport=9, dport=9) / Raw(b"x" * 100))
for k, p in enumerate(order):
    p.time = 1_700_000_000 + k * 1e-6
wrpcap(os.path.join(work, "in.pcap"), order)

out_path = os.path.join(work, "out.pcap")
r = subprocess.run([dump, "--tcp-aggregate", out_path, "--tcp-aggregation-timeout", "1000", os.path.join(work, "in.pcap")], capture_output=True, text=True)
print(r.stdout.strip())
if r.returncode != 0:
    print(r.stderr)
    sys.exit("FAIL: pushwire-dump --tcp-aggregate exited %d" % r.returncode)

failures = []
got = {}
udp = 0
for p in rdpcap(out_path):
    p = Ether(bytes(p))
    if UDP in p:
        udp += 1
        continue
    sport = p[TCP].sport
    got.setdefault(sport, []).append(p)
    bad = flows[sport][0][1]
    if bad is not None and bytes(p) == bad:
        continue  # the bad segment, untouched
    q = p.copy()
    if IP in q:
        del q[IP].chksum
        del q[IP].len
    else:
        del q[IPv6].plen
    del q[TCP].chksum
    if bytes(Ether(bytes(q))) != bytes(p):
        failures.append("flow %d: a frame of %d bytes whose lengths or checksums scapy computes differently" % (sport, len(p)))

for sport, ((frames, bad), want) in flows.items():
    out = got.get(sport, [])
    if len(out) != want:
        failures.append("flow %d: %d frames out, %d expected" % (sport, len(out), want))
    sent = {p[TCP].seq: bytes(p[Raw].load) for p in frames}
    came = {}
    for p in out:
        came[p[TCP].seq] = bytes(p[Raw].load)
    def stream(d):
        return b"".join(d[k] for k in sorted(d)), sorted(d)[0]
    if stream(sent)[0] != stream(came)[0] or stream(sent)[1] != stream(came)[1]:
        failures.append("flow %d: the payload came out changed" % sport)
    if sport in (40001, 40002) and out and "P" not in str(out[-1][TCP].flags):
        failures.append("flow %d: the aggregate lost the last segment's PSH" % sport)
if udp != 1:
    failures.append("%d UDP frames out, 1 expected" % udp)
if "bad checksums" in r.stdout and " 1 bad checksums" not in r.stdout:
    failures.append("the aggregator counted: " + r.stdout.strip())
for f in failures:
    print("FAIL:", f)
if failures:
    sys.exit(1)
print("PASS: %d frames in, %d out; scapy recomputes every aggregate's lengths and checksums equal, every payload intact" %
      (len(order), sum(len(v) for v in got.values()) + udp))
