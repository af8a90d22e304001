#!/usr/bin/python3
"""Every RoCEv2 frame of a capture has a good ICRC, recomputed by scapy (an independent
implementation: scapy.contrib.roce), and what the frames are (spec/verbs.md §6).
usage: icrc_check.py CAPTURE MIN_FRAMES   (prints counts by opcode; exit 1 on a bad ICRC or too few)"""
import collections
import sys

from scapy.all import PcapReader, raw, UDP
from scapy.contrib.roce import BTH

path, minimum = sys.argv[1], int(sys.argv[2])
good = bad = 0
ops = collections.Counter()
for pkt in PcapReader(path):
    if UDP not in pkt or pkt[UDP].dport != 4791 or BTH not in pkt:
        continue
    wire = raw(pkt)[-4:]
    again = pkt.copy()
    again[BTH].icrc = None
    if raw(again)[-4:] == wire:
        good += 1
    else:
        bad += 1
        print(f"bad ICRC: {pkt.summary()} wire {wire.hex()} scapy {raw(again)[-4:].hex()}")
    ops[pkt[BTH].opcode] += 1
print(f"{good} RoCEv2 frames with a good ICRC (scapy), {bad} bad; opcodes: " +
      ", ".join(f"0x{o:02x} x{n}" for o, n in sorted(ops.items())))
sys.exit(0 if bad == 0 and good >= minimum else 1)
