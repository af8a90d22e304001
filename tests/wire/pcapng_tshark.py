#!/usr/bin/python3
"""ctest "wire: pcapng written by stock tools reads as tshark reads it".

pcapng files written by Wireshark's editcap (from pushwire-gen's pcaps, one with a Decryption
Secrets Block injected) and mergecap (three captures of two link types: several interfaces),
by scapy's PcapNgWriter (EPB comments), and block by block here from the pcapng draft (two
sections of each byte order, if_tsresol 10^-9 / 2^-10 / 2^-30 / default, if_tsoffset, SPB, obsolete
packet block, name resolution and interface statistics blocks). For each, wire::pcap::reader
(through pushwire-pcap-records) must read the records tshark reads: interface, original and
captured length, bytes and timestamp; pushwire-dump --json must print one line per record, exit
0 and warn on stderr about exactly the blocks it skipped.
Exit status: 0 pass, 1 fail, 77 skip (tshark, editcap or mergecap missing; or scapy missing and the
rest passed).

usage: pcapng_tshark.py PUSHWIRE-PCAP-RECORDS PUSHWIRE-DUMP PUSHWIRE-GEN WORKDIR
"""
import json
import os
import shutil
import struct
import subprocess
import sys
from decimal import Decimal

records_tool, dump, gen, work = sys.argv[1:5]
for tool in ("tshark", "editcap", "mergecap"):
    if not shutil.which(tool):
        print(f"SKIP: {tool} is not installed (apt-get install tshark)")
        sys.exit(77)
os.makedirs(work, exist_ok=True)
failures = 0


def fail(msg):
    global failures
    failures += 1
    print("FAIL: " + msg)


def path(name):
    return os.path.join(work, name)


def run(*cmd):
    return subprocess.run(list(cmd), check=True, capture_output=True)


# ---- the files -------------------------------------------------------------------------------
files = {}  # name -> the skipped-block warnings pushwire must print

run(gen, "--framing", "roce", "--out", path("roce.pcap"))
run(gen, "--framing", "cell", "--out", path("cells.pcap"))
frames = []  # (ts_ns, bytes) of roce.pcap, read here independently of pushwire
with open(path("roce.pcap"), "rb") as f:
    data = f.read()
assert struct.unpack_from("<I", data)[0] == 0xA1B2C3D4
pos = 24
while pos < len(data):
    sec, usec, incl, _orig = struct.unpack_from("<IIII", data, pos)
    frames.append((sec * 10**9 + usec * 1000, data[pos + 16:pos + 16 + incl]))
    pos += 16 + incl

run("editcap", "-F", "pcapng", path("roce.pcap"), path("editcap.pcapng"))
files["editcap.pcapng"] = []
with open(path("keys.txt"), "w") as f:
    f.write("CLIENT_RANDOM " + "00" * 32 + " " + "11" * 48 + "\n")
run("editcap", "-F", "pcapng", "--inject-secrets", "tls," + path("keys.txt"), path("cells.pcap"), path("secrets.pcapng"))
files["secrets.pcapng"] = ["skipped 1 block of type 0x0000000a (decryption secrets)"]

# A raw-IP (LINKTYPE_RAW, 101) classic pcap, for a second link type in the merge.
with open(path("rawip.pcap"), "wb") as f:
    f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 101))
    for k in range(3):
        pkt = bytes.fromhex("4500001c0000400040110000") + bytes([10, 0, 0, 1, 10, 0, 0, 2]) + bytes(8)
        f.write(struct.pack("<IIII", 1700000000 + k, 500000 + k, len(pkt), len(pkt)) + pkt)
run("mergecap", "-F", "pcapng", "-w", path("merged.pcapng"), path("roce.pcap"), path("cells.pcap"), path("rawip.pcap"))
files["merged.pcapng"] = []

scapy_missing = ""
try:
    import logging
    logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
    from scapy.all import Ether, PcapNgWriter
    from decimal import Decimal as D
    w = PcapNgWriter(path("scapy.pcapng"))
    for i, (ts, b) in enumerate(frames):
        p = Ether(b)
        p.time = D(ts) / D(10**9)
        if i % 3 == 0:
            p.comment = b"frame %d" % i
        w.write(p)
    w.close()
    files["scapy.pcapng"] = []
except ImportError as e:
    scapy_missing = f"python3-scapy is not available ({e}): its PcapNgWriter file was not read"
    print(f"note: {scapy_missing}")


def section(o, section_length):
    """A section in byte order o ('<' or '>') built from the draft's block layouts."""
    def blk(t, body):
        body += b"\0" * (-len(body) % 4)
        return struct.pack(o + "II", t, 12 + len(body)) + body + struct.pack(o + "I", 12 + len(body))

    def opt(code, val):
        return struct.pack(o + "HH", code, len(val)) + val + b"\0" * (-len(val) % 4)

    end = struct.pack(o + "HH", 0, 0)
    body = b""
    body += blk(1, struct.pack(o + "HHI", 1, 0, 0) + opt(9, bytes([9])) + end)             # 0: ns
    body += blk(1, struct.pack(o + "HHI", 1, 0, 96) + opt(9, bytes([0x8A]))                # 1: 2^-10, snaplen 96
                + opt(14, struct.pack(o + "q", -7)) + end)                                 #    if_tsoffset -7 s
    body += blk(1, struct.pack(o + "HHI", 101, 0, 0) + opt(9, bytes([0x80 | 30])) + end)   # 2: raw IP, 2^-30
    body += blk(1, struct.pack(o + "HHI", 1, 0, 0))                                        # 3: default (us)
    body += blk(4, struct.pack(o + "HH", 1, 10) + bytes([10, 0, 0, 1]) + b"host\0" + b"\0" * 2 + end)  # NRB: skipped
    for i, (ts, b) in enumerate(frames):
        iface = i % 4
        if iface == 2:
            b = b[14:]  # the IP packet alone
        t = {0: ts, 1: (ts // 10**9 + 7) * 1024 + (ts % 10**9) * 1024 // 10**9,
             2: (ts // 10**9) * 2**30 + (ts % 10**9) * 2**30 // 10**9, 3: ts // 1000}[iface]
        cap = b[:96] if iface == 1 else b
        body += blk(6, struct.pack(o + "IIIII", iface, t >> 32, t & 0xFFFFFFFF, len(cap), len(b)) + cap)
        if i == 5:
            body += blk(3, struct.pack(o + "I", len(b)) + b)  # SPB: interface 0, no timestamp
            body += blk(2, struct.pack(o + "HHIIII", 3, 0, t >> 32, t & 0xFFFFFFFF, len(b), len(b)) + b)  # obsolete
            body += blk(5, struct.pack(o + "IIII", 0, t >> 32, t & 0xFFFFFFFF, 0))  # ISB: skipped
    length = len(body) if section_length else -1
    return blk(0x0A0D0D0A, struct.pack(o + "IHHq", 0x1A2B3C4D, 1, 0, length)) + body


with open(path("handmade.pcapng"), "wb") as f:
    f.write(section("<", True) + section(">", False) + section(">", True) + section("<", False))
files["handmade.pcapng"] = ["skipped 4 blocks of type 0x00000004 (name resolution)",
                            "skipped 4 blocks of type 0x00000005 (interface statistics)"]


# ---- the comparison --------------------------------------------------------------------------
def tshark_records(f):
    out = subprocess.run(["tshark", "-r", f, "-T", "json", "-x", "-j", "frame"], check=True, capture_output=True,
                         text=True).stdout
    recs = []
    for pkt in json.loads(out):
        layers = pkt["_source"]["layers"]
        fr = layers["frame"]
        if "frame.interface_id" not in fr:
            continue  # not a packet (tshark shows some other blocks as records; none are written here)
        t = fr.get("frame.time_epoch")  # absent for a record without a timestamp (SPB)
        ts = str(int(Decimal(t) * 10**9)) if t else "-"
        recs.append((int(fr["frame.interface_id"]), ts, int(fr["frame.len"]), int(fr["frame.cap_len"]),
                     layers["frame_raw"][0]))
    return recs


def pushwire_records(f):
    p = subprocess.run([records_tool, f], capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"{f}: pushwire-pcap-records exited {p.returncode}: {p.stderr.strip()}")
        return []
    recs = []
    for line in p.stdout.splitlines():
        iface, _linktype, ts, orig, hexbytes = line.split("\t")
        recs.append((int(iface), ts, int(orig), len(hexbytes) // 2, hexbytes))
    return recs


for name, warnings in files.items():
    f = path(name)
    want, got = tshark_records(f), pushwire_records(f)
    if len(want) != len(got):
        fail(f"{name}: tshark reads {len(want)} records, pushwire {len(got)}")
    for i, (w, g) in enumerate(zip(want, got)):
        if w != g:
            fail(f"{name} record {i + 1}: tshark {w[:4]} {w[4][:32]}..., pushwire {g[:4]} {g[4][:32]}...")
    d = subprocess.run([dump, "--json", f], capture_output=True, text=True)
    lines = d.stdout.splitlines()
    if d.returncode != 0 or len(lines) != len(want):
        fail(f"{name}: pushwire-dump exited {d.returncode} with {len(lines)} lines for {len(want)} records")
    expected_err = "".join(f"pushwire-dump: warning: {w}\n" for w in warnings)
    if d.stderr != expected_err:
        fail(f"{name}: pushwire-dump stderr {d.stderr!r}, expected {expected_err!r}")
    print(f"{name}: {len(want)} records, {len(warnings)} kinds of skipped blocks")

if failures:
    sys.exit(1)
if scapy_missing:
    print(f"SKIP: {scapy_missing} (the rest passed)")
    sys.exit(77)
print("PASS")
