#!/usr/bin/env python3
"""Downtime per move of a migrating function, from a capture on the bridge (spec/migration.md §6).

usage: downtime.py PCAP GUEST_IP MOVES_TXT MIN_MOVES [--json LABEL]

The function's frames (source GUEST_IP, UDP 4791) change source MAC when it moves: the gap from
its last frame through one device to its first through the next is the move's downtime. Each
line of MOVES_TXT is a `pushwire-rnicd ctl ... migrate` answer ("quiesced in Q ms, held there
in H ms, addresses given up in R ms, committed in C ms; commit sent at T"): the move's quiesce
(Q), move (H + R: the offer held, the addresses gone) and resume (the commit sent to the first
frame through the destination: it takes the addresses there, adopts, and wakes the engines) are
taken from it, in order. Prints a
summary line, or with --json one object per move and one summary object ("label": LABEL).
Exit status 1 when fewer than MIN_MOVES moves are seen in the capture.
"""
import json
import re
import subprocess
import sys


def main():
    pcap, guest, moves_txt, min_moves = sys.argv[1:5]
    label = sys.argv[6] if len(sys.argv) > 6 and sys.argv[5] == "--json" else None
    out = subprocess.run(["tshark", "-r", pcap, "-Y", f"ip.src == {guest} && udp.port == 4791", "-T", "fields",
                          "-e", "frame.time_epoch", "-e", "eth.src"], capture_output=True, text=True, check=True).stdout
    gaps, last = [], None
    for line in out.splitlines():
        if not line.strip():
            continue
        t, mac = line.split("\t")
        t = float(t)
        if last and mac != last[1]:
            gaps.append((last[0], t))
        last = (t, mac)
    pat = re.compile(r"quiesced in ([\d.]+) ms, held there in ([\d.]+) ms, addresses given up in ([\d.]+) ms, "
                     r"committed in [\d.]+ ms; commit sent at ([\d.]+)")
    moves = [m.groups() for m in map(pat.search, open(moves_txt).read().splitlines()) if m]
    rows = []
    for k, (before, after) in enumerate(gaps):
        r = {"move": k + 1, "downtime_ms": round((after - before) * 1000, 3)}
        if k < len(moves):
            q, h, g, sent = (float(x) for x in moves[k])
            r.update(quiesce_ms=q, move_ms=round(h + g, 3), resume_ms=round((after - sent) * 1000, 3))
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
              (f"; p50 {summary['downtime_p50_ms']:.1f}, max {summary['downtime_max_ms']:.1f}" if ds else ""))
    sys.exit(0 if len(rows) >= int(min_moves) else 1)


if __name__ == "__main__":
    main()
