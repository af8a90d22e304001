#!/usr/bin/python3
"""ctest "ib: frames built by scapy decode in pushwire".

Scapy (python3-scapy, scapy.contrib.roce, which computes the ICRC over IPv4) builds RoCEv2
frames; pushwire-dump --json must decode every BTH/AETH field equal to what scapy encoded, with
"pushwire.icrc": "good". A copy of each frame with one payload byte flipped must read "bad".
Exit status: 0 pass, 1 fail, 77 skip (scapy missing).

usage: scapy_conformance.py PATH/TO/pushwire-dump WORKDIR
"""
import json
import os
import subprocess
import sys

try:
    import logging
    logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
    from scapy.all import Ether, IP, UDP, Raw, raw, wrpcap
    from scapy.contrib.roce import AETH, BTH, CNPPadding, opcode
except ImportError as e:  # visible in the ctest log
    print(f"SKIP: python3-scapy is not available ({e}); install it with apt-get install python3-scapy")
    sys.exit(77)

dump, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
frames, expect = [], []


def add(op_name, payload=b"", aeth=None, ip_options=None, **bth):
    pad = (-len(payload)) % 4
    fields = dict(opcode=op_name, padcount=pad, pkey=0x8001, dqpn=0x123456, psn=(0xFFFFF0 + len(frames)) & 0xFFFFFF,  # wraps past 0
                  ackreq=1, solicited=len(frames) % 2, migreq=1)
    fields.update(bth)
    p = (Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")
         / IP(src="10.0.0.1", dst="10.0.0.2", flags="DF", ttl=64, tos=0x68, options=ip_options or [])
         / UDP(sport=0xC000 + len(frames), dport=4791)
         / BTH(**fields))
    if aeth is not None:
        p = p / AETH(**aeth)
    if payload or pad:
        p = p / Raw(payload + b"\0" * pad)
    frames.append(raw(p))
    b = p[BTH]
    e = {"infiniband.bth.opcode": b.opcode, "infiniband.bth.se": b.solicited, "infiniband.bth.m": b.migreq,
         "infiniband.bth.padcnt": b.padcount, "infiniband.bth.tver": b.version, "infiniband.bth.p_key": b.pkey,
         "infiniband.bth.fecn": b.fecn, "infiniband.bth.becn": b.becn, "infiniband.bth.destqp": b.dqpn,
         "infiniband.bth.a": b.ackreq, "infiniband.bth.psn": b.psn, "pushwire.icrc": "good"}
    if aeth is not None:
        e["infiniband.aeth.syndrome"] = p[AETH].syndrome
        e["infiniband.aeth.msn"] = p[AETH].msn
    expect.append(e)


for transport in ("RC", "UC"):
    for n in range(0, 9):
        add(opcode(transport, "SEND_ONLY")[0], bytes(range(0x40, 0x40 + n)))
# IPv4 with options (IHL 6 and 8): the ICRC covers them.
from scapy.layers.inet import IPOption_NOP, IPOption_Router_Alert  # noqa: E402
add(opcode("RC", "SEND_ONLY")[0], b"options", ip_options=[IPOption_Router_Alert()])
add(opcode("UC", "SEND_ONLY")[0], b"more options!", ip_options=[IPOption_NOP()] * 12)
for syndrome in (0x00, 0x1F, 0x20, 0x30, 0x3F, 0x60, 0x61, 0x62, 0x63, 0x64):  # ACK, RNR NAK, NAK
    add(opcode("RC", "ACKNOWLEDGE")[0], aeth={"syndrome": syndrome, "msn": 0xABCDEF})
frames.append(raw(Ether() / IP(src="22.22.22.8", dst="22.22.22.7", flags="DF", ttl=0x20, tos=0x89)
                  / UDP(sport=56238, dport=4791, chksum=0) / BTH(opcode=0x81, dqpn=0xD2, becn=1) / CNPPadding()))
expect.append({"infiniband.bth.opcode": 0x81, "infiniband.bth.becn": 1, "infiniband.bth.destqp": 0xD2,
               "pushwire.opcode": "CNP", "pushwire.icrc": "good"})


def decode(path):
    out = subprocess.run([dump, "--json", path], check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines()]


good = os.path.join(work, "scapy.pcap")
wrpcap(good, [Ether(f) for f in frames])
got = decode(good)
failures = 0
if len(got) != len(expect):
    print(f"FAIL: {len(got)} frames decoded, {len(expect)} written")
    sys.exit(1)
for i, (g, e) in enumerate(zip(got, expect), start=1):
    for k, v in e.items():
        if g.get(k) != v:
            failures += 1
            print(f"FAIL frame {i}: {k} = {g.get(k)!r}, scapy encoded {v!r}")

# Corrupt one byte the ICRC covers (the BTH's last PSN byte) in every frame.
bad_frames = []
for f in frames:
    b = bytearray(f)
    ihl = (b[14] & 0x0F) * 4
    b[14 + ihl + 8 + 11] ^= 0x01
    bad_frames.append(bytes(b))
bad = os.path.join(work, "scapy-corrupt.pcap")
wrpcap(bad, [Ether(f) for f in bad_frames])
for i, g in enumerate(decode(bad), start=1):
    if g.get("pushwire.icrc") != "bad":
        failures += 1
        print(f"FAIL corrupt frame {i}: pushwire.icrc = {g.get('pushwire.icrc')!r}")

print(f"{len(frames)} scapy frames and {len(bad_frames)} corrupted copies checked, {failures} failures")
sys.exit(1 if failures else 0)
