#!/usr/bin/python3
"""ctest "tools: pushwire-gen frame rebuilds every frame pushwire-dump --json prints".

For every RoCEv2 frame of the given captures (every record of every pcap under the paths, and
the capture `pushwire-gen --framing roce` writes into WORKDIR), the
keys `pushwire-dump --json` prints for it, passed to `pushwire-gen frame KEY=VALUE...`, must give
the record's bytes exactly, under both readings of opcodes 0x40-0x5F (default DC, --ibta-rd).
Every key the dump prints for a frame's headers and parts must be one `pushwire-gen frame --keys`
lists; the others are the dump's annotations (frame, pushwire.icrc, pushwire.idata, a push-push
message's fields).
Exit status: 0 pass, 1 a mismatch or an unknown key, 2 fewer than MIN frames.

usage: gen_frame_roundtrip.py DUMP GEN WORKDIR MIN PATH...
"""
import json
import os
import struct
import subprocess
import sys

dump, gen, work, minimum, paths = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:]
os.makedirs(work, exist_ok=True)
scripted = os.path.join(work, "gen-roce.pcap")
subprocess.run([gen, "--framing", "roce", "--out", scripted], check=True)
paths.append(scripted)

# Keys of a frame's headers and parts start with these; the dump's annotations do not (or are
# listed in NOT_FRAME).
FRAME_PREFIXES = ("eth.", "vlan.", "ip.", "ipv6.", "udp.", "infiniband.", "pushwire.dc.", "pushwire.payload",
                  "pushwire.pad", "pushwire.opcode")
NOT_FRAME = {"frame", "pushwire.icrc", "pushwire.idata"}
gen_keys = set(subprocess.run([gen, "frame", "--keys"], check=True, capture_output=True, text=True).stdout.split())


def records(path):
    """The records of a classic pcap (either byte order), or [] for another file."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        return []
    for endian in "<>":
        magic = struct.unpack(endian + "I", data[:4])[0]
        if magic in (0xA1B2C3D4, 0xA1B23C4D):
            break
    else:
        return []
    out, at = [], 24
    while at + 16 <= len(data):
        incl = struct.unpack(endian + "I", data[at + 8:at + 12])[0]
        out.append(data[at + 16:at + 16 + incl])
        at += 16 + incl
    return out


def value_text(v):
    return str(v) if isinstance(v, int) else v


checked = failures = 0
pcaps = []
for p in paths:
    if os.path.isdir(p):
        for root, _, files in os.walk(p):
            pcaps += [os.path.join(root, f) for f in sorted(files)]
    elif os.path.isfile(p):
        pcaps.append(p)
    else:
        print(f"missing: {p}")
for path in sorted(pcaps):
    frames = records(path)
    if not frames:
        continue
    for rd in ([], ["--ibta-rd"]):
        out = subprocess.run([dump, "--json", *rd, path], capture_output=True, text=True)
        if out.returncode != 0:
            print(f"FAIL {path}: pushwire-dump exited {out.returncode}: {out.stderr.strip()}")
            failures += 1
            continue
        for line in out.stdout.splitlines():
            obj = json.loads(line)
            n = obj["frame"]
            if "error" in obj or "infiniband.bth.opcode" not in obj:
                continue  # not RoCEv2 (a cell frame, or one that does not parse)
            args = []
            for k, v in obj.items():
                if k in NOT_FRAME or not k.startswith(FRAME_PREFIXES):
                    continue
                if k not in gen_keys:
                    print(f"FAIL {path} frame {n}: pushwire-dump printed {k}, which pushwire-gen frame does not take")
                    failures += 1
                    continue
                args.append(f"{k}={value_text(v)}")
            built = subprocess.run([gen, "frame", "--hex", *rd, *args], capture_output=True, text=True)
            want = frames[n - 1].hex()
            checked += 1
            if built.returncode != 0 or built.stdout.strip() != want:
                failures += 1
                print(f"FAIL {path} frame {n} {' '.join(rd)}: {built.stderr.strip() or 'different bytes'}\n"
                      f"  frame {want}\n  built {built.stdout.strip()}\n  keys  {' '.join(args)}")

print(f"{checked} frames dumped and built again, {failures} failures")
if failures:
    sys.exit(1)
sys.exit(2 if checked < minimum else 0)
