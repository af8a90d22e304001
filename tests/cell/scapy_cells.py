#!/usr/bin/python3
"""ctest "cells: an independent scapy implementation of spec/cells.md agrees with pushwire".

spec/cells.md implemented again from its text, in scapy (python3-scapy) with a bitwise CRC-32C:

1. scapy segments and builds cells (Send, multi-cell RDMA writes with and without idata, ACK,
   NAK, page-fault delay); pushwire-dump --json must decode every field equal, with both CRCs
   "good". Copies with one bit flipped must read "bad" (or not decode at all).
2. scapy parses the capture pushwire-gen --framing cell writes: every cell's CRC and every
   packet CRC must verify, and the fields must follow the spec's rules.

Exit status: 0 pass, 1 fail, 77 skip (scapy missing).
usage: scapy_cells.py PATH/TO/pushwire-dump PATH/TO/pushwire-gen WORKDIR
"""
import json
import os
import subprocess
import sys

try:
    import logging
    logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
    from scapy.all import (Ether, Packet, BitField, BitEnumField, ByteField, XByteField, ShortField,
                           XIntField, IntField, X3BytesField, ThreeBytesField, XLongField, Raw,
                           bind_layers, raw, rdpcap, wrpcap)
except ImportError as e:  # visible in the ctest log
    print(f"SKIP: python3-scapy is not available ({e}); install it with apt-get install python3-scapy")
    sys.exit(77)

dump, gen, work = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(work, exist_ok=True)
failures = []


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_vectors import crc32c  # noqa: E402  (the same independent bitwise CRC-32C)

TYPES = {0: "Send", 1: "RDMAWrite", 2: "ACK", 3: "NAK", 4: "PageFaultDelay", 5: "Transport"}
CONTROL = (2, 3, 4)


class CellHeader(Packet):  # spec/cells.md §3
    name = "pushwire cell"
    fields_desc = [BitField("version", 1, 4), BitEnumField("type", 0, 4, TYPES),
                   BitField("first", 0, 1), BitField("last", 0, 1), BitField("has_idata", 0, 1),
                   BitField("ack_req", 0, 1), BitField("has_vamh", 0, 1), BitField("response", 0, 1),
                   BitField("resv_flags", 0, 2),
                   X3BytesField("dst_wqp", 0), X3BytesField("src_wqp", 0), ByteField("resv8", 0),
                   ThreeBytesField("psn", 0), ShortField("csn", 0), ShortField("cell_count", 1),
                   ShortField("length", 0)]


bind_layers(Ether, CellHeader, type=0x88B5)


def segment(dst, src, typ, psn, payload, cell=256, vamh=None, idata=None, ack=None, ack_req=0,
            dst_wqp=0x22, src_wqp=0x11):
    """The cells of one packet, and the expected JSON of each."""
    n = max(1, -(-len(payload) // cell))
    frames, expected, covered = [], [], b""
    for i in range(n):
        first, last = i == 0, i == n - 1
        data = payload[i * cell:(i + 1) * cell]
        h = CellHeader(type=typ, first=int(first), last=int(last), has_idata=int(last and idata is not None),
                       ack_req=ack_req, has_vamh=int(first and vamh is not None), dst_wqp=dst_wqp,
                       src_wqp=src_wqp, psn=psn, csn=i, cell_count=n, length=len(data))
        body = raw(Ether(dst=dst, src=src) / h)
        e = {f"pushwire.cell.{k}": getattr(h, k) for k in
             ("version", "type", "first", "last", "has_idata", "ack_req", "has_vamh", "response", "resv_flags",
              "dst_wqp", "src_wqp", "resv8", "psn", "csn", "cell_count", "length")}
        if first and vamh is not None:
            body += vamh[0].to_bytes(8, "big") + vamh[1].to_bytes(4, "big")
            e["pushwire.cell.va"], e["pushwire.cell.mh"] = vamh
        if typ in CONTROL:
            body += bytes([ack[0], 0, 0, 0]) + ack[1].to_bytes(4, "big")
            e["pushwire.cell.code"], e["pushwire.cell.delay_us"] = ack
        if last and idata is not None:
            body += idata.to_bytes(4, "big")
            e["pushwire.cell.idata"] = idata
        body += data
        covered += body
        if last:
            body += crc32c(covered).to_bytes(4, "big")
            e["pushwire.cell.packet_crc"] = "good"
        body += crc32c(body).to_bytes(4, "big")
        body += bytes(max(0, 60 - len(body)))
        e["pushwire.cell.crc"] = "good"
        e["pushwire.cell.type_name"] = TYPES[typ]
        frames.append(body)
        expected.append(e)
    return frames, expected


host, iou = "02:00:00:00:00:01", "02:00:00:00:00:02"
frames, expected = [], []


def add(*a, **k):
    f, e = segment(*a, **k)
    frames.extend(f)
    expected.extend(e)


blob = bytes((i * 37 + 11) & 0xFF for i in range(2000))
add(iou, host, 0, 1, b"ping", ack_req=1)
for k, n in enumerate((0, 1, 255, 256, 257, 512, 769, 2000)):
    add(iou, host, 1, 10 + k, blob[:n], vamh=(0x7F0000010000 + 4096 * k, 0x1234), idata=0x07050000 | k)
    add(iou, host, 0, 30 + k, blob[:n], cell=100)
add(iou, host, 1, 50, blob[:600], vamh=(0x1000, 0x77))  # no idata: Fig. 8's message 805
add(host, iou, 2, 50, b"", ack=(0, 0), dst_wqp=0x11, src_wqp=0x22)
add(host, iou, 3, 51, b"", ack=(2, 0), dst_wqp=0x11, src_wqp=0x22)
add(host, iou, 4, 52, b"", ack=(0, 2000), dst_wqp=0x11, src_wqp=0x22)

# Copies with one bit flipped (the dump must not call them good).
flipped = []
for i, f in enumerate(frames[:40]):
    b = bytearray(f)
    b[14 + (i * 7) % (len(f.rstrip(b"\0")) - 14)] ^= 1 << (i % 8)
    flipped.append(bytes(b))

pcap = os.path.join(work, "scapy-cells.pcap")
wrpcap(pcap, [Ether(f) for f in frames + flipped])
out = subprocess.run([dump, "--json", pcap], capture_output=True, text=True)
if out.returncode != 0:
    print("pushwire-dump failed:", out.stderr)
    sys.exit(1)
lines = [json.loads(l) for l in out.stdout.splitlines()]
if len(lines) != len(frames) + len(flipped):
    failures.append(f"{len(lines)} lines for {len(frames) + len(flipped)} frames")
compared = 0
for i, (got, want) in enumerate(zip(lines, expected)):
    for k, v in want.items():
        compared += 1
        if got.get(k) != v:
            failures.append(f"frame {i + 1}: {k} = {got.get(k)!r}, scapy built {v!r}")
    if "pushwire.cell.reassembly" in got:
        failures.append(f"frame {i + 1}: reassembly error {got['pushwire.cell.reassembly']}")
for i, got in enumerate(lines[len(frames):]):
    if got.get("pushwire.cell.crc") == "good":
        failures.append(f"flipped frame {i + 1}: decoded with a good CRC: {got}")

# 2. scapy reads pushwire-gen's capture.
gen_pcap = os.path.join(work, "gen-cells.pcap")
subprocess.run([gen, "--framing", "cell", "--out", gen_pcap], check=True)
covered, cells_checked, packets_checked = {}, 0, 0
for p in rdpcap(gen_pcap):
    f = raw(p)
    if not p.haslayer(CellHeader):
        failures.append("pushwire-gen wrote a frame that is not a cell")
        continue
    h = p[CellHeader]
    size = 14 + 18 + 12 * h.has_vamh + 8 * (h.type in CONTROL) + 4 * h.has_idata + h.length + 4 * h.last
    if int.from_bytes(f[size:size + 4], "big") != crc32c(f[:size]):
        failures.append(f"pushwire-gen cell psn {h.psn} csn {h.csn}: cell CRC")
    if h.first != (h.csn == 0) or h.last != (h.csn == h.cell_count - 1) or h.version != 1:
        failures.append(f"pushwire-gen cell psn {h.psn} csn {h.csn}: header rules")
    if h.type == 1 and h.has_vamh != h.first:
        failures.append(f"pushwire-gen cell psn {h.psn} csn {h.csn}: VA/MH placement")
    cells_checked += 1
    key = (p.src, h.src_wqp, h.psn)
    part = f[:size - 4] if h.last else f[:size]
    covered[key] = (covered.get(key, b"") if h.csn else b"") + part
    if h.last:
        if int.from_bytes(f[size - 4:size], "big") != crc32c(covered[key]):
            failures.append(f"pushwire-gen packet psn {h.psn}: packet CRC")
        packets_checked += 1

print(f"scapy -> pushwire: {len(frames)} cells, {compared} fields compared, {len(flipped)} corrupted copies")
print(f"pushwire -> scapy: {cells_checked} cells, {packets_checked} packet CRCs verified")
for f in failures[:30]:
    print("FAIL:", f)
sys.exit(1 if failures or compared < 1000 or packets_checked < 6 else 0)
