#!/usr/bin/python3
"""Every RoCEv2 frame of a capture has a good ICRC, recomputed by scapy (an independent
implementation: scapy.contrib.roce) for IPv4, and for IPv6 (which scapy leaves undone) the same
way, with IPv6's masked fields (IBTA vol. 1 annex A17: traffic class, flow label and hop limit
set to ones); and what the frames are (spec/verbs.md §6).
usage: icrc_check.py CAPTURE MIN_FRAMES [EVERY]   (prints counts by opcode; exit 1 on a bad ICRC or
too few checked). EVERY > 1 checks one RoCEv2 frame in EVERY (found without decoding the others),
for captures too long to decode whole."""
import collections
import sys

from scapy.all import Ether, IPv6, RawPcapReader, raw, UDP
from scapy.contrib.roce import BTH

from roce_icrc import icrc_v6

path, minimum = sys.argv[1], int(sys.argv[2])
every = int(sys.argv[3]) if len(sys.argv) > 3 else 1


def roce(data):
    """Whether an untagged frame is UDP to port 4791 (IPv4 or IPv6), from its bytes."""
    if data[12:14] == b"\x08\x00" and len(data) > 34 and data[23] == 17:
        at = 14 + (data[14] & 0x0F) * 4
    elif data[12:14] == b"\x86\xdd" and len(data) > 62 and data[20] == 17:
        at = 54
    else:
        return every == 1  # (anything else: decoded only when every frame is)
    return len(data) >= at + 4 and data[at + 2:at + 4] == b"\x12\xb7"


good = bad = seen = 0
ops = collections.Counter()
families = collections.Counter()
for data, _ in RawPcapReader(path):
    if not roce(data):
        continue
    seen += 1
    if (seen - 1) % every:
        continue
    pkt = Ether(data)
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
print((f"of {seen} RoCEv2 frames, one in {every}: " if every > 1 else "") + f"{good} RoCEv2 frames with a good ICRC (scapy), {bad} bad; " +
      ", ".join(f"{k} {v}" for k, v in sorted(families.items())) + "; opcodes: " +
      ", ".join(f"0x{o:02x} x{n}" for o, n in sorted(ops.items())))
sys.exit(0 if bad == 0 and good >= minimum else 1)
