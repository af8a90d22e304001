#!/usr/bin/python3
"""Writes bench/results.md and its PNG plots from one run of make bench-report.

  bench/report.py --split S.jsonl --pingpong P.jsonl --bench B.json [--line-rate L] [--perftest F]
                  [--rnicd R] [--migration M] --out bench/results.md
  bench/report.py --update [--rnicd R] [--migration M] --out bench/results.md   (those sections only)

S: bench/split_model.sh's lines; P: bench/pingpong.sh's; B: pushwire-bench
--benchmark_format=json. Every figure stands beside its peer from the same run, with the ratio.
"""
import argparse
import datetime
import json
import os
import platform
import re
import subprocess


def pyplot():
    """matplotlib's pyplot (python3-matplotlib), for the plots only: --update needs none."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def lines(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip().startswith("{")]


def machine():
    cpu = "unknown CPU"
    try:
        for l in open("/proc/cpuinfo"):
            if l.startswith("model name"):
                cpu = l.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    return (f"{cpu}, {os.cpu_count()} CPUs, Linux {platform.release()}, "
            f"{datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, commit {commit or 'unknown'}")


def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "-"


def split_section(rows, outdir):
    by = {r["path"]: r for r in rows}
    vx = by.get("vxlan", {})
    out = ["## The split-model driver against veth and VXLAN (`bench/split_model.sh`)", "",
           "One iperf3 TCP stream and 200 pings (0.01 s apart) between the same two namespaces over each path; "
           "the -rx rows send LAN -> host (iperf3 -R), the LAN's stack one segment at a time, against vxlan-rx.", "",
           "| Path | iperf3 Gbit/s | × VXLAN | TCP retransmits | ping p50 ms | × VXLAN | ping p99 ms |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for p in by:
        r = by.get(p)
        if not r:
            continue
        # LAN -> host rows (-rx) against VXLAN the same way
        vx = by.get("vxlan-rx", {}) if p.endswith("-rx") else by.get("vxlan", {})
        if r.get("built") is False:
            out.append(f"| {p} | not built | | | | | |")
            continue
        out.append(f"| {p} | {r['iperf3_gbps']:.2f} | {ratio(r['iperf3_gbps'], vx.get('iperf3_gbps'))} | {r['retransmits']} | "
                   f"{r['ping_p50_ms']:.3f} | {ratio(r['ping_p50_ms'], vx.get('ping_p50_ms'))} | {r['ping_p99_ms']:.3f} |")
    built = [r for r in rows if r.get("built", True)]
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.5))
    names = [r["path"] for r in built]
    a1.bar(names, [r["iperf3_gbps"] for r in built], color="#4a7ebb")
    a1.set_ylabel("Gbit/s")
    a1.set_title("iperf3, one TCP stream")
    x = range(len(built))
    a2.bar([i - 0.2 for i in x], [r["ping_p50_ms"] for r in built], 0.4, label="p50")
    a2.bar([i + 0.2 for i in x], [r["ping_p99_ms"] for r in built], 0.4, label="p99")
    a2.set_xticks(list(x), names)
    for ax in (a1, a2):
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    a2.set_ylabel("ms")
    a2.set_title("ping RTT")
    a2.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "split_model.png"), dpi=100)
    out += ["", "![split model](split_model.png)", ""]
    return out


def pingpong_section(rows, outdir):
    peers = ["pushwire", "udp;ofi_rxd", "tcp;ofi_rxm"]
    by = {(r["peer"], r["bytes"]): r for r in rows}
    sizes = sorted({r["bytes"] for r in rows})
    out = ["## pushwire-rnic pingpong against fi_pingpong (`bench/pingpong.sh`)", "",
           "Two processes over UDP on loopback; fi_pingpong's definitions (usec/xfer = time / 2 iterations, "
           "MB/s = 2 x bytes x iterations / time), medians.", "",
           "| Bytes | pushwire µs | rxd µs | tcp;rxm µs | × rxd | × tcp;rxm | pushwire MB/s | rxd MB/s | tcp;rxm MB/s | × rxd | × tcp;rxm |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in sizes:
        p, d, t = (by.get((peer, s), {}) for peer in peers)
        u = [x.get("usec_per_xfer") for x in (p, d, t)]
        m = [x.get("MB_per_s") for x in (p, d, t)]
        fmt = lambda v: f"{v:.2f}" if v is not None else "-"  # noqa: E731
        out.append(f"| {s} | {fmt(u[0])} | {fmt(u[1])} | {fmt(u[2])} | {ratio(u[0], u[1])} | {ratio(u[0], u[2])} | "
                   f"{fmt(m[0])} | {fmt(m[1])} | {fmt(m[2])} | {ratio(m[0], m[1])} | {ratio(m[0], m[2])} |")
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.5))
    w = 0.27
    for k, peer in enumerate(peers):
        lat = [by.get((peer, s), {}).get("usec_per_xfer", 0) for s in sizes if s <= 4096]
        bw = [by.get((peer, s), {}).get("MB_per_s", 0) for s in sizes if s > 4096]
        a1.bar([i + (k - 1) * w for i in range(len(lat))], lat, w, label=peer)
        a2.bar([i + (k - 1) * w for i in range(len(bw))], bw, w, label=peer)
    a1.set_xticks(range(len([s for s in sizes if s <= 4096])), [str(s) for s in sizes if s <= 4096])
    a1.set_title("latency, µs per transfer (lower is better)")
    a2.set_xticks(range(len([s for s in sizes if s > 4096])), [str(s) for s in sizes if s > 4096])
    a2.set_title("bandwidth, MB/s")
    a1.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "pingpong.png"), dpi=100)
    out += ["", "![pingpong](pingpong.png)", ""]
    return out


def perftest_section(rows, pingpong_rows):
    """perftest over the verbs provider (bench/perftest.sh), against the issue's goals and the
    same run's fi_pingpong udp;ofi_rxd (a user-space reliable transport over UDP)."""
    goals = {"ib_write_bw": ("MB_per_s", 1250.0, "≥ 10 Gb/s"), "ib_write_lat": ("t_typical_us", 10.0, "≤ 10 µs")}
    rxd = {r["bytes"]: r for r in pingpong_rows if r.get("peer") == "udp;ofi_rxd"}
    out = ["## perftest over pushwire's verbs provider (`bench/perftest.sh`)", "",
           "Two processes over loopback, each through libpushwire-verbs.so (spec/verbs.md); medians. Latency is "
           "perftest's t_typical (half a round trip, as fi_pingpong's µs/xfer).", "",
           "| Program | Bytes | Figure | Goal | × goal | × rxd (same run) |", "|---|---:|---:|---|---:|---:|"]
    for r in rows:
        if "syscalls" in r:
            continue
        prog = r["program"]
        if "MB_per_s" in r:
            v, fig = r["MB_per_s"], f"{r['MB_per_s']:.1f} MB/s ({r['MB_per_s'] * 8 / 1000:.2f} Gb/s)"
        else:
            v, fig = r["t_typical_us"], f"{r['t_typical_us']:.2f} µs"
        g = goals.get(prog)
        goal = g[2] if g else ""
        xg = f"{v / g[1]:.2f}" if g else ""
        peer = rxd.get(r["bytes"], {}).get("usec_per_xfer") if "t_typical_us" in r else None
        xr = f"{v / peer:.2f}" if peer else ""
        out.append(f"| `{prog}` | {r['bytes']} | {fig} | {goal} | {xg} | {xr} |")
    calls = [r for r in rows if "syscalls" in r]
    if calls:
        out += ["", "System calls per message (the client, `strace -f -c`, one run):", "",
                "| Program | Messages | Calls | Per message |", "|---|---:|---|---:|"]
        for r in calls:
            pairs = dict(kv.split("=") for kv in r["syscalls"].split())
            total = sum(int(v) for v in pairs.values())
            out.append(f"| `{r['program']}` {r['bytes']} B | {r['messages']} | {r['syscalls'].strip()} | "
                       f"{total / r['messages']:.2f} |")
    return out + [""]


def goals_section(line_rows, split_rows, bench_doc, outdir):
    """Issue 35's table: each datapath goal beside its peer from the same run, over UDP sockets
    and over AF_XDP where the row has both (bench/line_rate.sh, bench/split_model.sh,
    pushwire-bench), and line_rate.png: each figure as a fraction of its goal."""
    rate = {}
    for b in bench_doc.get("benchmarks", []):
        if b.get("run_type", "iteration") == "iteration":
            rate[b["name"]] = (b.get("bytes_per_second"), b.get("items_per_second"))
    rows = []  # (what, transport, figure text, peer text, x peer, goal text, fraction of goal)

    def add(what, transport, fig, peer, x, goal, frac):
        rows.append((what, transport, fig, peer, f"{x:.2f}" if x is not None else "-", goal, frac))

    for r in line_rows:
        t = r["transport"]
        if "unavailable" in r:
            add("verbs provider", t, "unavailable: " + r["unavailable"], "", None, "", None)
    tcp = {r["transport"]: r["iperf3_gbps"] for r in line_rows if "iperf3_gbps" in r}
    for r in line_rows:
        t, prog = r["transport"], r.get("program")
        label = f"{t} (veth MTU {r['mtu']})"
        if prog == "ib_write_bw":
            gbps = r["MB_per_s"] * 8 / 1000
            peer = tcp.get(t)
            x = gbps / peer if peer else None
            add("`ib_write_bw` 64 KiB", label, f"{gbps:.2f} Gb/s", f"iperf3 TCP {peer:.2f} Gb/s" if peer else "-", x,
                "≥ 1.0× iperf3", x)
        elif prog == "ib_write_lat":
            us = r["t_typical_us"]
            add("`ib_write_lat` 64 B", label, f"{us:.2f} µs", "", None, "≤ 5 µs", 5.0 / us if us else None)
    by = {r["path"]: r for r in split_rows}
    vx = by.get("vxlan", {})
    for p in ("pushwire", "pushwire-xdp", "cells", "cells-xdp"):
        r = by.get(p)
        if not r or not vx:
            continue
        t = "AF_XDP" if p.endswith("-xdp") else "UDP" if p == "pushwire" else "AF_PACKET"
        if r.get("iperf3_gbps") and vx.get("iperf3_gbps"):
            x = r["iperf3_gbps"] / vx["iperf3_gbps"]
            add(f"split driver ({p}), iperf3", t, f"{r['iperf3_gbps']:.2f} Gb/s", f"VXLAN {vx['iperf3_gbps']:.2f} Gb/s", x,
                "≥ 1.0× VXLAN", x)
        if r.get("ping_p50_ms") and vx.get("ping_p50_ms"):
            x = r["ping_p50_ms"] / vx["ping_p50_ms"]
            add(f"split driver ({p}), ping p50", t, f"{r['ping_p50_ms']:.3f} ms", f"VXLAN {vx['ping_p50_ms']:.3f} ms", x,
                "≤ 1.5× VXLAN", 1.5 / x)
    mem = rate.get("BM_memcpy/1048576", (None, None))[0]
    for name, goal in (("BM_rnic_write/1048576", 0.5), ("BM_cell_sar/1048576", 0.25)):
        v = rate.get(name, (None, None))[0]
        if v and mem:
            add(f"`{name}`", "in process", f"{v / 1e9:.2f} GB/s", f"memcpy {mem / 1e9:.2f} GB/s", v / mem,
                f"≥ {goal}× memcpy", v / mem / goal)
    v = rate.get("BM_rnic_send/64", (None, None))[1]
    if v:
        add("`BM_rnic_send/64`", "in process", f"{v / 1e6:.2f} M msg/s", "", None, "≥ 5 M msg/s", v / 5e6)
    for n in (64, 1500, 4096, 65536):
        a, b = rate.get(f"BM_crc32c/{n}", (None,))[0], rate.get(f"BM_isal_crc32c/{n}", (None,))[0]
        if a and b:
            add(f"CRC-32C {n} B", "in process", f"{a / 1e9:.1f} GB/s", f"ISA-L {b / 1e9:.1f} GB/s", a / b, "≥ 1.0× ISA-L",
                a / b)
    out = ["## Datapath goals, each beside its peer (issue 35)", "",
           "`bench/line_rate.sh` (the verbs provider between two namespaces on one veth, over UDP sockets and over "
           "AF_XDP, against one iperf3 TCP stream on the same veth at the same MTU), `bench/split_model.sh` and "
           "pushwire-bench, in one run. × goal is the figure as a fraction of its goal (1.00 or more: met).", "",
           "| What | Transport | Figure | Peer (same run) | × peer | Goal | × goal |", "|---|---|---:|---|---:|---|---:|"]
    for what, t, fig, peer, x, goal, frac in rows:
        out.append(f"| {what} | {t} | {fig} | {peer} | {x} | {goal} | {f'{frac:.2f}' if frac is not None else '-'} |")
    plotted = [(f"{w} {t}".replace("`", ""), f) for w, t, _, _, _, _, f in rows if f is not None]
    if plotted:
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(8, 0.35 * len(plotted) + 1.2))
        names = [n for n, _ in plotted][::-1]
        vals = [f for _, f in plotted][::-1]
        ax.barh(names, vals, color=["tab:green" if v >= 1 else "tab:red" for v in vals])
        ax.axvline(1.0, color="black", linewidth=1)
        ax.set_xlabel("figure / goal (1 = goal met)")
        ax.tick_params(axis="y", labelsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "line_rate.png"), dpi=100)
        plt.close(fig)
        out += ["", "![Each figure as a fraction of its goal](line_rate.png)"]
    return out + [""]


def rnicd_section(rows):
    """Programs attached to pushwire-rnicd against programs with devices of their own, same run
    (bench/rnicd.sh), against issue 31's goals."""
    inproc = {(r["program"], r.get("mode")): r for r in rows if r.get("mode", "").endswith("inproc") and "syscalls" not in r}
    out = ["## Attached to pushwire-rnicd against in-process (`bench/rnicd.sh`)", "",
           "Two hosts: two namespaces over a veth, a device process per side (spec/rnicd.md), against each "
           "program's own device. One host: both programs in one namespace, on VF 1 and the PF of one device "
           "process, against two devices of their own. Medians; latency is perftest's t_typical.", "",
           "| Program | Bytes | Topology | Pairs | Attached | In-process | Ratio | Goal |", "|---|---:|---|---:|---:|---:|---:|---|"]
    for r in rows:
        if not r.get("mode", "").endswith("attached") or "syscalls" in r:
            continue
        host = r["mode"].startswith("host")
        base = inproc.get((r["program"], "host-inproc" if host else "inproc"))
        if "t_typical_us" in r:
            a, b, unit, goal = r["t_typical_us"], base and base.get("t_typical_us"), "µs", "≤ 1.2×"
        else:
            a, b, unit = r["MB_per_s"], base and base.get("MB_per_s"), "MB/s"
            goal = "≥ 1.0×" if r["pairs"] == 1 else "≥ 1.5× (sum against one in-process pair)"
        ratio = f"{a / b:.2f}" if a and b else ""
        topo = "one host" if host else "two hosts"
        out.append(f"| `{r['program']}` | {r['bytes']} | {topo} | {r['pairs']} | {a} {unit} | {b} {unit} | {ratio} | {goal} |")
    calls = [r for r in rows if "syscalls" in r]
    if calls:
        out += ["", "System calls per message in the client under load (`strace -f -c`: a run of N messages less a run "
                "of N/5, over the difference; goal ≤ 0.05 attached):", "",
                "| Program | Mode | Messages | Calls | Per message |", "|---|---|---:|---:|---:|"]
        for r in calls:
            dn, dc = r["messages"] - r["messages_less"], r["syscalls"] - r["syscalls_less"]
            out.append(f"| `{r['program']}` {r['bytes']} B | {r['mode']} | {r['messages_less']} → {r['messages']} | "
                       f"{r['syscalls_less']} → {r['syscalls']} | {dc / dn:.3f} |")
    return out + [""]


def migration_section(rows):
    """Live migration's downtime against the number of QPs (bench/migration.sh), against issue 32's goal."""
    out = ["## Live migration: downtime against QPs (`bench/migration.sh`)", "",
           "A guest function runs `ib_write_bw -q N` (64 KiB) against a peer while it moves between two device "
           "processes on a bridge (spec/migration.md), five times per count. Downtime: the function's last frame "
           "through its source to its first through its destination, from a capture on the bridge. Quiesce: the "
           "source stops taking frames from its rings. Move: the destination holds the offer and the source gives "
           "its addresses up. Resume: the commit sent to the first frame through the destination (the addresses "
           "taken, the function adopted, the engines resend and NAK). p50 / max over the moves, ms; goal with 64 "
           "QPs: downtime p50 ≤ 20, max ≤ 50.", "",
           "| QPs | Moves | Downtime p50 | Downtime max | Quiesce p50 | Move p50 | Move max | Resume p50 | Resume max |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if r.get("failed"):
            out.append(f"| {r['qps']} | failed after {r['moves_done']} moves: {r['failed']} | | | | | | | |")
            continue
        if not r.get("summary"):
            continue
        out.append(f"| {r['qps']} | {r['moves']} | {r['downtime_p50_ms']:.1f} | {r['downtime_max_ms']:.1f} | "
                   f"{r['quiesce_p50_ms']:.3f} | {r['move_p50_ms']:.1f} | {r['move_max_ms']:.1f} | "
                   f"{r['resume_p50_ms']:.1f} | {r['resume_max_ms']:.1f} |")
    return out + [""]


def replace_section(path, section):
    """Puts `section` (its first line a '## ' heading) in place of the one with that heading in the
    report at `path`, or before the pushwire-bench section when it has none."""
    doc = open(path).read().rstrip("\n").split("\n")
    head = section[0]
    if head in doc:
        i = doc.index(head)
        j = next((k for k in range(i + 1, len(doc)) if doc[k].startswith("## ")), len(doc))
        doc[i:j] = section
    else:
        k = next((k for k, line in enumerate(doc) if line.startswith("## pushwire-bench")), len(doc))
        doc[k:k] = section
    with open(path, "w") as f:
        f.write("\n".join(doc) + "\n")


# (benchmark, its peer) pairs from the same pushwire-bench run.
PEERS = [(r"BM_crc32/(\d+)", ["BM_zlib_crc32/{}", "BM_isal_crc32/{}"]), (r"BM_crc32c/(\d+)", ["BM_isal_crc32c/{}"]),
         (r"BM_rnic_write/(\d+)", ["BM_memcpy/{}"]), (r"BM_rnic_write_cell/(\d+)", ["BM_memcpy/{}"]),
         (r"BM_cell_sar/(\d+)", ["BM_memcpy/{}"]), (r"BM_cell_sar_percell/(\d+)", ["BM_memcpy/{}"]),
         (r"BM_cell_sar_jumbo/(\d+)", ["BM_memcpy/{}"]), (r"BM_crc32c_cells_batch/(\d+)", ["BM_crc32c_cells_each/{}"])]


def bench_section(doc):
    rate = {}
    for b in doc.get("benchmarks", []):
        if b.get("run_type", "iteration") != "iteration":
            continue
        rate[b["name"]] = (b.get("bytes_per_second"), b.get("items_per_second"), b.get("real_time"), b.get("time_unit"))
    out = ["## pushwire-bench beside its peers (Google Benchmark, same run)", "",
           "| Benchmark | GB/s | Peer | Peer GB/s | Ratio |", "|---|---:|---|---:|---:|"]
    for pat, peers in PEERS:
        for name in rate:
            m = re.fullmatch(pat, name)
            if not m:
                continue
            for peer in peers:
                pn = peer.format(m.group(1))
                a, b = rate[name][0], rate.get(pn, (None,))[0]
                if a and b:
                    out.append(f"| `{name}` | {a / 1e9:.2f} | `{pn}` | {b / 1e9:.2f} | {a / b:.3f} |")
    out += ["", "Every benchmark:", "", "| Benchmark | GB/s | M items/s | Time |", "|---|---:|---:|---:|"]
    for name, (bps, ips, t, unit) in rate.items():
        g = f"{bps / 1e9:.3f}" if bps else "-"
        i = f"{ips / 1e6:.3f}" if ips else "-"
        out.append(f"| `{name}` | {g} | {i} | {t:.0f} {unit} |")
    return out


def cache_section(doc, outdir):
    """BM_rnic_send_qps: the context cache and WR lookahead against the QPs (spec/qos.md §8)."""
    rows = {}
    for b in doc.get("benchmarks", []):
        m = re.fullmatch(r"BM_rnic_send_qps/qps:(\d+)/lookahead:(\d+)", b.get("name", ""))
        if not m or b.get("run_type", "iteration") != "iteration":
            continue
        rows[(int(m.group(1)), int(m.group(2)))] = b
    if not rows:
        return []
    out = ["## QP context cache and WR lookahead (`BM_rnic_send_qps`)", "",
           "64-byte WRITEs over N RC QPs, posted in groups of 32 QPs taking turns (spec/qos.md §7); 16 contexts "
           "held, 1 µs per miss in virtual time. W = 0: no cache model.", "",
           "| QPs | W | Misses per WR | Virtual ns per WR | Real ns per WR |", "|---:|---:|---:|---:|---:|"]
    for (q, w), b in sorted(rows.items()):
        out.append(f"| {q} | {w} | {b.get('misses_per_wr', 0):.3f} | {b.get('virtual_ns_per_wr', 0):.1f} | "
                   f"{1e9 / b['items_per_second']:.0f} |")
    plt = pyplot()
    if plt:
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
        for w in sorted({w for _, w in rows}):
            qs = sorted(q for q, ww in rows if ww == w)
            label = "no cache model" if w == 0 else f"W = {w}"
            ax1.plot(qs, [rows[(q, w)].get("virtual_ns_per_wr", 0) for q in qs], marker="o", label=label)
            ax2.plot(qs, [1e9 / rows[(q, w)]["items_per_second"] for q in qs], marker="o", label=label)
        ax2.set_yscale("log")
        for ax, what in ((ax1, "virtual ns per WR (the device)"), (ax2, "real ns per WR (the reference RNIC's CPU)")):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("QPs")
            ax.set_ylabel(what)
            ax.legend(fontsize=8)
        fig.suptitle("QP context cache of 16, WR lookahead W")
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "context_cache.png"), dpi=100)
        out += ["", "![context cache](context_cache.png)", ""]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--split")
    ap.add_argument("--pingpong")
    ap.add_argument("--bench")
    ap.add_argument("--migration", help="bench/migration.sh's lines")
    ap.add_argument("--update", action="store_true",
                    help="replace only the sections given (--rnicd, --migration, --bench's context cache; --line-rate with "
                         "--split and --bench: the datapath goals) in an existing --out")
    ap.add_argument("--perftest", help="bench/perftest.sh's lines")
    ap.add_argument("--rnicd", help="bench/rnicd.sh's lines")
    ap.add_argument("--line-rate", help="bench/line_rate.sh's lines (the datapath goals, with --split and --bench)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--notes", help="a Markdown file appended as is (where the time goes)")
    a = ap.parse_args()
    if a.update:
        if a.rnicd:
            replace_section(a.out, rnicd_section(lines(a.rnicd)))
        if a.migration:
            replace_section(a.out, migration_section(lines(a.migration)))
        if a.line_rate and a.split and a.bench:
            replace_section(a.out, goals_section(lines(a.line_rate), lines(a.split), json.load(open(a.bench)),
                                                 os.path.dirname(os.path.abspath(a.out))))
        if a.bench:
            section = cache_section(json.load(open(a.bench)), os.path.dirname(os.path.abspath(a.out)))
            if section:
                replace_section(a.out, section)
        print(f"updated {a.out}")
        return
    if not (a.split and a.pingpong and a.bench):
        ap.error("--split, --pingpong and --bench are needed (or --update)")
    outdir = os.path.dirname(os.path.abspath(a.out))
    doc = ["# pushwire benchmark report", "", f"Machine: {machine()}.", "",
           "Written by `make bench-report` (bench/report.py); every figure beside its peer from the same run.", ""]
    bench_doc = json.load(open(a.bench))
    if a.line_rate:
        doc += goals_section(lines(a.line_rate), lines(a.split), bench_doc, outdir)
    doc += split_section(lines(a.split), outdir)
    doc += pingpong_section(lines(a.pingpong), outdir)
    if a.perftest:
        doc += perftest_section(lines(a.perftest), lines(a.pingpong))
    if a.rnicd:
        doc += rnicd_section(lines(a.rnicd))
    if a.migration:
        doc += migration_section(lines(a.migration))
    doc += cache_section(bench_doc, outdir)
    doc += bench_section(bench_doc)
    if a.notes and os.path.exists(a.notes):
        doc += ["", open(a.notes).read().rstrip()]
    with open(a.out, "w") as f:
        f.write("\n".join(doc) + "\n")
    print(f"wrote {a.out}, {outdir}/split_model.png, {outdir}/pingpong.png")


if __name__ == "__main__":
    main()
