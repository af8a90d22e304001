#!/usr/bin/python3
"""Plots pushwire-incast's JSON lines (spec/qos.md §3): the receiver's switch queue over time with
DCQCN and without, and each flow's rate with DCQCN.
usage: incast.py DATA.jsonl OUTDIR   (writes OUTDIR/incast-queue.png and OUTDIR/incast-rates.png)"""
import json
import sys


def main():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data, out = sys.argv[1], sys.argv[2]
    runs = {True: [], False: []}
    summary = {}
    for line in open(data):
        j = json.loads(line)
        if "summary" in j:
            summary[j["dcqcn"]] = j["summary"]
        else:
            runs[j["dcqcn"]].append(j)

    fig, ax = plt.subplots(figsize=(9, 4))
    for dcqcn, colour in ((False, "tab:red"), (True, "tab:blue")):
        pts = runs[dcqcn]
        s = summary.get(dcqcn, {})
        label = ("DCQCN" if dcqcn else "no DCQCN") + f": {s.get('tail_drops', '?')} tail drops, goodput {100 * s.get('goodput', 0):.1f}%"
        ax.plot([p["t_us"] / 1000 for p in pts], [p["queue"] / 1000 for p in pts], color=colour, lw=0.6, label=label)
    for y, name in ((40, "Kmin"), (160, "Kmax"), (200, "buffer")):
        ax.axhline(y, color="grey", ls="--", lw=0.6)
        ax.text(201, y - 4, name, color="grey", fontsize=8)
    ax.set_xlabel("virtual time (ms)")
    ax.set_ylabel("receiver's switch queue (KB)")
    ax.set_title("8-to-1 incast of RC WRITEs, 25 Gb/s links, 200 KB shared buffer")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(f"{out}/incast-queue.png", dpi=110)

    # per-flow rates with DCQCN, over 5 ms windows
    pts = runs[True]
    step = 100  # samples of 50 µs: 5 ms
    fig, ax = plt.subplots(figsize=(9, 4))
    flows = len(pts[0]["done"]) if pts else 0
    for f in range(flows):
        xs, ys = [], []
        for i in range(step, len(pts), step):
            dt = (pts[i]["t_us"] - pts[i - step]["t_us"]) * 1e-6
            xs.append(pts[i]["t_us"] / 1000)
            ys.append((pts[i]["done"][f] - pts[i - step]["done"][f]) * 8 / dt / 1e9)
        ax.plot(xs, ys, lw=0.7, label=f"flow {f}")
    s = summary.get(True, {})
    ax.axhline(25 / max(flows, 1), color="grey", ls="--", lw=0.6)
    ax.set_xlabel("virtual time (ms)")
    ax.set_ylabel("goodput per flow over 5 ms (Gb/s)")
    ax.set_title(f"DCQCN: Jain's fairness over the last 50 ms {s.get('jain', 0):.3f}; dashed: a fair share of 25 Gb/s")
    ax.legend(loc="upper right", fontsize=7, ncol=4)
    fig.tight_layout()
    fig.savefig(f"{out}/incast-rates.png", dpi=110)


if __name__ == "__main__":
    main()
