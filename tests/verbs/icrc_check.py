#!/usr/bin/python3
"""Every RoCEv2 frame of a capture has a good ICRC, recomputed by scapy (an independent
implementation: scapy.contrib.roce) for IPv4, and for IPv6 (which scapy leaves undone) the same
way, with IPv6's masked fields (IBTA vol. 1 annex A17: traffic class, flow label and hop limit
set to ones); and what the frames are (spec/verbs.md §6).
usage: icrc_check.py CAPTURE MIN_FRAMES   (prints counts by opcode; exit 1 on a bad ICRC or too few)"""
import collections
import sys

from scapy.all import IPv6, PcapReader, raw, UDP
from scapy.contrib.roce import BTH

from roce_icrc import icrc_v6

path, minimum = sys.argv[1], int(sys.argv[2])
good = bad = 0
ops = collections.Counter()
families = collections.Counter()
for pkt in PcapReader(path):
    if UDP not in pkt or pkt[UDP].dport != 4791 or BTH not in pkt:
        continue
    wire = raw(pkt)[-4:]
    if IPv6 in pkt:
        want = icrc_v6(pkt)
        families["IPv6"] += 1
    else:
        again = pkt.copy()
        again[BTH].icrc = None
        want = raw(again)[-4:]
        families["IPv4"] += 1
    if want == wire:
        good += 1
    else:
        bad += 1
        print(f"bad ICRC: {pkt.summary()} wire {wire.hex()} computed {want.hex()}")
    ops[pkt[BTH].opcode] += 1
print(f"{good} RoCEv2 frames with a good ICRC (scapy), {bad} bad; " +
      ", ".join(f"{k} {v}" for k, v in sorted(families.items())) + "; opcodes: " +
      ", ".join(f"0x{o:02x} x{n}" for o, n in sorted(ops.items())))
sys.exit(0 if bad == 0 and good >= minimum else 1)
