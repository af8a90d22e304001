#!/usr/bin/env python3
"""Downtime per move of a migrating function, from a capture on the bridge (spec/migration.md §6).

usage: downtime.py PCAP GUEST_IP MOVES_TXT MIN_MOVES [--naks] [--json LABEL]

The function's frames (source GUEST_IP, UDP 4791) change source MAC when it moves: the gap from
its last frame through one device to its first through the next is the move's downtime. Each
line of MOVES_TXT is a `pushwire-rnicd ctl ... migrate` answer ("quiesced in Q ms, held there
in H ms, addresses given up in R ms, committed in C ms; commit sent at T"); a gap takes the move
whose commit was sent last before the gap's end: its quiesce (Q), move (H + R: the offer held,
the addresses gone) and resume (the commit sent to the first frame through the destination: it
takes the addresses there, adopts, and wakes the engines).
--naks: each move must show the engines' resume (spec/migration.md §5): a PSN sequence error NAK
from the function among its frames through the destination before the next move.
Prints a summary line, or with --json one object per move and one summary object ("label").
Exit status 1 when fewer than MIN_MOVES moves are seen, or (--naks) a move shows no NAK.
"""
import json
import re
import subprocess
import sys


def main():
    args = sys.argv[1:]
    naks = "--naks" in args
    label = args[args.index("--json") + 1] if "--json" in args else None
    pcap, guest, moves_txt, min_moves = args[:4]
    out = subprocess.run(["tshark", "-r", pcap, "-Y", f"ip.src == {guest} && udp.port == 4791", "-T", "fields",
                          "-e", "frame.time_epoch", "-e", "eth.src", "-e", "infiniband.aeth.syndrome"],
                         capture_output=True, text=True, check=True).stdout
    frames = []
    for line in out.splitlines():
        if line.strip():
            t, mac, syn = (line.split("\t") + [""])[:3]
            frames.append((float(t), mac, int(syn, 0) if syn else None))
    gaps = []  # (last frame before, first frame after, index of the first after)
    for i in range(1, len(frames)):
        if frames[i][1] != frames[i - 1][1]:
            gaps.append((frames[i - 1][0], frames[i][0], i))
    pat = re.compile(r"quiesced in ([\d.]+) ms, held there in ([\d.]+) ms, addresses given up in ([\d.]+) ms, "
                     r"committed in [\d.]+ ms; commit sent at ([\d.]+)")
    moves = [tuple(float(x) for x in m.groups()) for m in map(pat.search, open(moves_txt).read().splitlines()) if m]
    rows, missing_nak = [], []
    for k, (before, after, first) in enumerate(gaps):
        r = {"move": k + 1, "downtime_ms": round((after - before) * 1000, 3)}
        sent_before = [m for m in moves if m[3] <= after]
        if sent_before:
            q, h, g, sent = max(sent_before, key=lambda m: m[3])
            r.update(quiesce_ms=q, move_ms=round(h + g, 3), resume_ms=round((after - sent) * 1000, 3))
        end = gaps[k + 1][2] if k + 1 < len(gaps) else len(frames)
        # AETH syndrome 0x60: NAK, PSN sequence error
        r["nak"] = any(f[2] == 0x60 for f in frames[first:end])
        if not r["nak"]:
            missing_nak.append(k + 1)
        rows.append(r)

    def p50(xs):
        xs = sorted(xs)
        return xs[len(xs) // 2] if xs else None

    summary = {"moves": len(rows)}
    for key in ("downtime_ms", "quiesce_ms", "move_ms", "resume_ms"):
        xs = [r[key] for r in rows if key in r]
        if xs:
            summary[key.replace("_ms", "_p50_ms")] = p50(xs)
            summary[key.replace("_ms", "_max_ms")] = max(xs)
    if label is not None:
        for r in rows:
            print(json.dumps({"label": label, **r}))
        print(json.dumps({"label": label, "summary": True, **summary}))
    else:
        ds = sorted(r["downtime_ms"] for r in rows)
        print("downtime per move (ms): " + ", ".join(f"{d:.1f}" for d in ds) +
              (f"; p50 {summary['downtime_p50_ms']:.1f}, max {summary['downtime_max_ms']:.1f}" if ds else "") +
              (f"; a resume NAK after {len(rows) - len(missing_nak)} of {len(rows)} moves" if naks else ""))
    if len(rows) < int(min_moves):
        print(f"only {len(rows)} moves in the capture, not {min_moves}", file=sys.stderr)
        sys.exit(1)
    if naks and missing_nak:
        print(f"no PSN sequence error NAK from {guest} after move(s) {missing_nak}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
