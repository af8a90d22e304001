#!/usr/bin/python3
"""Runs stock tshark 4.0 with the pushwire plugin from a build tree (spec/wireshark.md §7).

  check_plugin.py load    PLUGIN_SO
  check_plugin.py decode  PLUGIN_SO CAPTURES_TOOL FILE.pcap [FILE.pcap ...]
  check_plugin.py robust  PLUGIN_SO CAPTURES_TOOL SEED COUNT FILE.pcap [FILE.pcap ...]
  check_plugin.py agree   PLUGIN_SO PUSHWIRE_DUMP FILE.pcap FILE.want
  check_plugin.py tap     PLUGIN_SO PUSHWIRE_RNIC
  check_plugin.py conform PLUGIN_SO PUSHWIRE_CONFORM DIR (DIR/conform.want, DIR/gen-*.pcap)
  check_plugin.py claims  PLUGIN_SO ICRC_CHECK PUSHWIRE_DUMP FILE.pcap [FILE.pcap ...]
  check_plugin.py pools   PLUGIN_SO CAPTURES_TOOL FILE.pcap [FILE.pcap ...]

tshark ignores personal plugin directories when run as root (CI runs as root), so the plugin is
staged under a fresh HOME in /tmp and tshark runs as uid 65534 through setpriv. Exit 77 (ctest
SKIP) when tshark or setpriv is missing; 1 on any failure."""
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77


def stage(plugin):
    if not shutil.which("tshark"):
        print("SKIP: tshark is not installed")
        sys.exit(SKIP)
    if os.geteuid() == 0 and not shutil.which("setpriv"):
        print("SKIP: running as root without setpriv")
        sys.exit(SKIP)
    home = tempfile.mkdtemp(prefix="pushwire-ws-", dir="/tmp")
    atexit.register(shutil.rmtree, home, True)
    epan = os.path.join(home, ".local/lib/wireshark/plugins/4.0/epan")
    os.makedirs(epan)
    shutil.copy(plugin, epan)
    for root, dirs, files in os.walk(home):
        for n in dirs + files + ["."]:
            os.chmod(os.path.join(root, n), 0o755)
    return home


def tshark(home, args, check=True):
    env = dict(os.environ, HOME=home, WIRESHARK_ABORT_ON_DISSECTOR_BUG="1", LC_ALL="C")
    env.pop("WIRESHARK_PLUGIN_DIR", None)
    cmd = ["tshark"] + args
    if os.geteuid() == 0:
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + cmd
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=home)
    if check and (p.returncode != 0 or p.stderr.strip()):
        sys.exit(f"FAIL: {' '.join(args)}: exit {p.returncode}\n{p.stderr}")
    return p


def put(home, path):
    dst = os.path.join(home, os.path.basename(path))
    shutil.copy(path, dst)
    os.chmod(dst, 0o644)
    return dst


def registered(home):
    fields = {}
    for line in tshark(home, ["-G", "fields"]).stdout.splitlines():
        col = line.split("\t")
        if col[0] == "F" and col[4] == "pushwire":
            fields[col[2]] = col[3]
    return fields


def load(plugin):
    home = stage(plugin)
    out = tshark(home, ["-G", "plugins"]).stdout
    if "pushwire.so" not in out:
        sys.exit("FAIL: tshark -G plugins does not list pushwire.so:\n" + out)
    fields = registered(home)
    # The normative names of the issue, and their types.
    want = {"pushwire.function": "FT_UINT16", "pushwire.version": "FT_UINT16", "pushwire.txn": "FT_UINT64",
            "pushwire.pool.ref": "FT_UINT32", "pushwire.pool.elements": "FT_UINT32",
            "pushwire.pool.element_size": "FT_UINT32", "pushwire.pool.rkey": "FT_UINT32",
            "pushwire.pool.address": "FT_UINT64", "pushwire.pool.context": "FT_UINT64",
            "pushwire.idata.pool": "FT_UINT8", "pushwire.idata.element": "FT_UINT8",
            "pushwire.idata.bytes": "FT_UINT32", "pushwire.icrc.status": "FT_UINT8",
            "pushwire.dc.access_key": "FT_UINT64", "pushwire.dc.dct": "FT_UINT24", "pushwire.dc.dci": "FT_UINT24",
            "pushwire.cell.type": "FT_UINT8", "pushwire.cell.psn": "FT_UINT24", "pushwire.cell.crc.status": "FT_UINT8"}
    bad = [f"{k}: {fields.get(k, 'missing')} (want {v})" for k, v in want.items() if fields.get(k) != v]
    if bad:
        sys.exit("FAIL: fields\n" + "\n".join(bad))
    print(f"plugin loads; {len(fields)} pushwire fields registered")


def norm(v):
    v = v.strip()
    if v in ("True", "False"):
        return "1" if v == "True" else "0"
    try:
        return str(int(v, 0))
    except ValueError:
        return v.replace(":", "").lower()


def decode(plugin, tool, pcaps):
    home = stage(plugin)
    fields = registered(home)
    values = sorted(k for k, t in fields.items() if t != "FT_NONE")
    experts = subprocess.run([tool, "experts"], capture_output=True, text=True, check=True).stdout.split()
    failures = []
    for pcap in pcaps:
        if subprocess.run([tool, "expect", pcap]).returncode != 0:
            sys.exit(f"FAIL: {tool} expect {pcap}")
        exp, exp_experts = {}, {}
        frames = 0
        with open(os.path.splitext(pcap)[0] + ".expected") as f:
            for line in f:
                frame, field, value = line.rstrip("\n").split("\t")
                if field == "expert":
                    exp_experts.setdefault(value, set()).add(int(frame))
                else:
                    exp.setdefault((int(frame), field), []).append(norm(value))
        local = put(home, pcap)
        args = ["-r", local, "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,", "-e", "frame.number"]
        for v in values:
            args += ["-e", v]
        out = tshark(home, args).stdout.splitlines()
        for line in out:
            col = line.split("\t")
            frame = int(col[0])
            frames += 1
            for name, cell in zip(values, col[1:]):
                got = [norm(x) for x in cell.split(",")] if cell else []
                want = exp.get((frame, name), [])
                if got != want:
                    failures.append(f"{os.path.basename(pcap)} frame {frame} {name}: tshark {got}, library {want}")
        for e in experts:
            got = {int(x) for x in tshark(home, ["-r", local, "-Y", e, "-T", "fields", "-e", "frame.number"]).stdout.split()}
            want = exp_experts.get(e, set())
            if got != want:
                failures.append(f"{os.path.basename(pcap)} expert {e}: tshark frames {sorted(got)}, expected {sorted(want)}")
        checked = sum(len(v) for v in exp.values())
        print(f"{os.path.basename(pcap)}: {frames} frames, {checked} pushwire values and "
              f"{sum(len(v) for v in exp_experts.values())} expert infos compared")
    if failures:
        print("\n".join(failures[:60]))
        sys.exit(f"FAIL: {len(failures)} differences")


def robust(plugin, tool, seed, count, pcaps):
    home = stage(plugin)
    corrupt = os.path.join(home, "corrupt")
    os.makedirs(corrupt)
    n = 0
    for i, pcap in enumerate(pcaps):
        subprocess.run([tool, "corrupt", pcap, str(count), corrupt, str(seed * 100 + i)], check=True)
    for root, _, files in os.walk(corrupt):
        os.chmod(root, 0o755)
        for name in sorted(files):
            path = os.path.join(root, name)
            os.chmod(path, 0o644)
            p = tshark(home, ["-r", path, "-V"], check=False)
            n += 1
            if p.returncode != 0 or "Dissector bug" in p.stdout or "Dissector bug" in p.stderr:
                keep = os.path.join(tempfile.gettempdir(), "pushwire-ws-crash-" + name)
                shutil.copy(path, keep)
                sys.exit(f"FAIL: tshark on {name} (kept as {keep}): exit {p.returncode}\n{p.stderr[-2000:]}")
    print(f"{n} corrupted captures decoded without a crash or dissector bug")


def agree(plugin, dump, pcap, want_path):
    """pushwire-dump and the plugin give every cell of FILE.pcap the packet CRC status and
    reassembly outcome FILE.want says (frame TAB status TAB reassembly, "-" for none)."""
    want = {}
    with open(want_path) as f:
        for line in f:
            frame, status, reasm = line.rstrip("\n").split("\t")
            want[int(frame)] = (status, reasm)
    p = subprocess.run([dump, "--json", pcap], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: pushwire-dump --json {pcap}: exit {p.returncode}\n{p.stderr}")
    dumped = {}
    for line in p.stdout.splitlines():
        o = json.loads(line)
        dumped[o["frame"]] = (o.get("pushwire.cell.packet_crc", "-"), o.get("pushwire.cell.reassembly", "-"))
    home = stage(plugin)
    local = put(home, pcap)
    status_name = {"1": "good", "0": "bad", "2": "unverified", "": "-"}
    shown = {}
    out = tshark(home, ["-r", local, "-T", "fields", "-e", "frame.number", "-e", "pushwire.cell.packet_crc.status",
                        "-e", "pushwire.cell.reassembly"]).stdout
    for line in out.splitlines():
        frame, status, reasm = line.split("\t")
        shown[int(frame)] = (status_name.get(status, status), reasm or "-")
    failures = []
    for frame in sorted(set(want) | set(dumped) | set(shown)):
        w, d, t = want.get(frame), dumped.get(frame), shown.get(frame)
        if not (w == d == t):
            failures.append(f"frame {frame}: expected {w}, pushwire-dump {d}, plugin {t}")
    if failures:
        print("\n".join(failures))
        sys.exit(f"FAIL: {len(failures)} frames differ")
    print(f"{os.path.basename(pcap)}: {len(want)} cells; pushwire-dump and the plugin agree with the expected outcome")


def tap(plugin, rnic):
    """The reference RNIC's pcap tap (spec/rnic.md §8), in both framings: without corruption every
    frame's CRC is good in the plugin; with corruption some are bad and the rest good."""
    home = stage(plugin)
    for framing, field in (("roce", "pushwire.icrc.status"), ("cell", "pushwire.cell.crc.status")):
        for corrupt in ("0", "0.05"):
            pcap = os.path.join(home, f"tap-{framing}-{corrupt}.pcap")
            p = subprocess.run([rnic, "soak", "--messages", "200", "--framing", framing, "--corrupt", corrupt,
                                "--pcap", pcap, "--json"], capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"FAIL: pushwire-rnic soak --framing {framing} --corrupt {corrupt}: {p.stdout}{p.stderr}")
            os.chmod(pcap, 0o644)
            lines = tshark(home, ["-r", pcap, "-T", "fields", "-e", field]).stdout.splitlines()
            good, bad = lines.count("1"), lines.count("0")
            print(f"{framing}, corrupt {corrupt}: {len(lines)} frames, {good} good, {bad} bad")
            if corrupt == "0" and (bad != 0 or good != len(lines)):
                sys.exit(f"FAIL: {framing} without corruption: {bad} bad, {len(lines) - good - bad} without a CRC status")
            if corrupt != "0" and (bad == 0 or good == 0):
                sys.exit(f"FAIL: {framing} with corruption: {good} good, {bad} bad")
            if framing == "roce" and corrupt == "0":
                # The reads served as writes (pushwire's 0xC0) show their source and sink.
                rows = tshark(home, ["-r", pcap, "-Y", "pushwire.opcode == 0xc0", "-T", "fields",
                                     "-e", "pushwire.read_as_write.dmalen", "-e", "pushwire.sink.va"]).stdout.splitlines()
                if not rows or any(len(r.split("\t")) != 2 or not all(r.split("\t")) for r in rows):
                    sys.exit(f"FAIL: read-as-write frames without their RETH and SinkETH fields: {rows[:3]}")
                print(f"roce: {len(rows)} reads served as writes, each with its source length and sink")


def conform(plugin, tool, directory):
    """The plugin's pushwire.conform.* expert infos (spec/conformance.md, spec/wireshark.md) are
    pushwire-conform's verdicts: for every rule's capture, tshark -2 shows exactly that rule at
    that frame, as pushwire-conform --json does; for the captures only a complete capture
    breaks, the same with the preference pushwire.conform_complete (--complete) and nothing
    without it; pushwire-gen's captures show none."""
    home = stage(plugin)
    checked = 0
    with open(os.path.join(directory, "conform.want")) as f:
        wants = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    for name, frame, rule, *mode in wants:
        pcap = put(home, os.path.join(directory, name))
        complete = mode == ["complete"]

        def verdicts(whole):
            pref = ["-o", "pushwire.conform_complete:TRUE"] if whole else []
            rows = tshark(home, pref + ["-2", "-r", pcap, "-Y", "pushwire.conform.rule", "-T", "fields", "-e", "frame.number",
                                        "-e", "pushwire.conform.rule", "-e", "_ws.expert.severity"]).stdout.splitlines()
            p = subprocess.run([tool, "--json"] + (["--complete"] if whole else []) + [pcap], capture_output=True, text=True)
            tool_says = [(str(o["frame"]), o["rule"]) for o in map(json.loads, p.stdout.splitlines()) if "rule" in o]
            return rows, [tuple(r.split("\t")[:2]) for r in rows], tool_says

        rows, got, tool_says = verdicts(complete)
        if got != [(frame, rule)] or tool_says != got:
            sys.exit(f"FAIL: {name}: want {rule} at frame {frame}; the plugin says {got}, pushwire-conform {tool_says}")
        if not rows[0].split("\t")[2]:
            sys.exit(f"FAIL: {name}: no expert info severity on the violation")
        if complete:
            _, got, tool_says = verdicts(False)
            if got or tool_says:
                sys.exit(f"FAIL: {name}: not complete, want nothing; the plugin says {got}, pushwire-conform {tool_says}")
        checked += 1
    for name in ("gen-roce.pcap", "gen-cells.pcap"):
        pcap = put(home, os.path.join(directory, name))
        rows = tshark(home, ["-2", "-r", pcap, "-Y", "pushwire.conform.rule"]).stdout.splitlines()
        if rows:
            sys.exit(f"FAIL: {name}: violations in pushwire-gen's capture: {rows[:3]}")
    print(f"{checked} captures, each its rule at its frame as pushwire-conform says (complete or not); pushwire-gen's captures clean")


WRITE_IMM = (0x09, 0x0B)  # RDMA WRITE LAST/ONLY with immediate (low 5 opcode bits; RC, UC, RD, XRC)


def claims(plugin, icrc_check, dump, pcaps):
    """Push-push beside other RDMA traffic (spec/wireshark.md section 3, "Claiming"). FILE.want,
    when present, lists the frames the plugin may claim ("FRAME message|idata|write ..."); no other
    frame is claimed. Every ICRC is good (scapy says so first: icrc_check.py) and the plugin shows
    it as stock Wireshark's Invariant CRC does. idata_mode always and never, and Decode As.
    pushwire-dump --json prints "pushwire.idata" on the same frames as the plugin."""
    home = stage(plugin)
    for pcap in pcaps:
        name = os.path.basename(pcap)
        p = subprocess.run(["/usr/bin/python3", icrc_check, pcap, "1"], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"FAIL: {name}: scapy finds a bad ICRC, the capture is not what this test needs\n{p.stdout}{p.stderr}")
        want = {}
        wpath = os.path.splitext(pcap)[0] + ".want"
        if os.path.exists(wpath):
            with open(wpath) as f:
                for line in f:
                    frame, *kinds = line.split()
                    want[int(frame)] = set(kinds)
        local = put(home, pcap)
        cols = ["frame.number", "infiniband.bth.opcode", "infiniband.immdt", "infiniband.invariant.crc", "pushwire.icrc",
                "pushwire.icrc.status", "pushwire.function", "pushwire.idata.pool", "pushwire.write.pool",
                "pushwire.pool.books", "pushwire.conform.rule", "_ws.expert.message"]

        def rows(extra):
            args = ["-2", "-r", local, "-T", "fields", "-E", "occurrence=f", "-E", "separator=|"] + extra
            for c in cols:
                args += ["-e", c]
            return [dict(zip(cols, line.split("|"))) for line in tshark(home, args).stdout.splitlines()]

        failures = []
        write_imm = set()
        auto = rows([])
        for r in auto:
            n = int(r["frame.number"])
            if r["infiniband.immdt"] and int(r["infiniband.bth.opcode"], 0) & 0x1F in WRITE_IMM:
                write_imm.add(n)
            got = {k for k, f in (("message", "pushwire.function"), ("idata", "pushwire.idata.pool"),
                                  ("write", "pushwire.write.pool")) if r[f]}
            if got != want.get(n, set()):
                failures.append(f"frame {n}: claimed {sorted(got)}, want {sorted(want.get(n, set()))}")
            if r["pushwire.pool.books"] and not want.get(n):
                failures.append(f"frame {n}: pool books on a foreign frame")
            if r["pushwire.conform.rule"]:
                failures.append(f"frame {n}: conformance says {r['pushwire.conform.rule']} ({r['_ws.expert.message']})")
            if not r["infiniband.invariant.crc"]:
                failures.append(f"frame {n}: stock Wireshark shows no Invariant CRC")
            elif r["pushwire.icrc"] != r["infiniband.invariant.crc"] or r["pushwire.icrc.status"] != "1":
                failures.append(f"frame {n}: pushwire.icrc {r['pushwire.icrc']} status {r['pushwire.icrc.status']}, "
                                f"stock Invariant CRC {r['infiniband.invariant.crc']} (good, scapy says)")
        for mode, args, expect in (("idata_mode always", ["-o", "pushwire.idata_mode:always"], write_imm),
                                   ("idata_mode never", ["-o", "pushwire.idata_mode:never"], set()),
                                   ("Decode As infiniband,pushwire", ["-d", "infiniband,pushwire"], write_imm)):
            got = {int(r["frame.number"]) for r in rows(args) if r["pushwire.idata.pool"]}
            if got != expect:
                failures.append(f"{mode}: idata on frames {sorted(got)}, want {sorted(expect)}")
        p = subprocess.run([dump, "--json", pcap], capture_output=True, text=True)
        if p.returncode != 0:
            failures.append(f"pushwire-dump --json: exit {p.returncode}: {p.stderr.strip()}")
        dumped = {o["frame"] for o in map(json.loads, p.stdout.splitlines()) if "pushwire.idata" in o}
        shown = {int(r["frame.number"]) for r in auto if r["pushwire.idata.pool"]}
        if dumped != shown:
            failures.append(f"pushwire-dump prints idata on frames {sorted(dumped)}, the plugin on {sorted(shown)}")
        if failures:
            sys.exit(f"FAIL: {name}\n" + "\n".join(failures[:40]))
        claimed = sum(1 for k in want.values() if k)
        print(f"{name}: {len(auto)} frames, {claimed} claimed as listed, the rest foreign; {len(write_imm)} RDMA WRITE with "
              f"immediate; every ICRC good and shown as stock Wireshark shows it; pushwire-dump agrees")


def pools(plugin, tool, pcaps):
    """tshark -z pushwire,pools lists what the library counted (CAPTURES_TOOL pools FILE); with a
    filter that passes nothing, no row."""
    home = stage(plugin)
    rows_seen = 0
    for pcap in pcaps:
        name = os.path.basename(pcap)
        lib = subprocess.run([tool, "pools", pcap], capture_output=True, text=True, check=True).stdout.splitlines()
        local = put(home, pcap)
        out = tshark(home, ["-r", local, "-q", "-z", "pushwire,pools"]).stdout.splitlines()
        if not any(line.startswith("pushwire pools:") for line in out):
            sys.exit(f"FAIL: {name}: no pushwire pools table\n" + "\n".join(out))
        got = ["|".join(c.strip() for c in line.split("|")[:-1]) for line in out if line.count("|") == 11 and
               not line.startswith("Owner")]
        got, lib = sorted(got), sorted(lib)  # rows: tshark in order of appearance, the library by key
        if got != lib:
            sys.exit(f"FAIL: {name}: tshark -z pushwire,pools\n" + "\n".join(got) + "\nlibrary\n" + "\n".join(lib))
        none = tshark(home, ["-r", local, "-q", "-z", "pushwire,pools,frame.number==0"]).stdout.splitlines()
        if [line for line in none if line.count("|") == 11 and not line.startswith("Owner")]:
            sys.exit(f"FAIL: {name}: rows with a filter that passes no frame")
        rows_seen += len(lib)
        print(f"{name}: {len(lib)} pools, as the library counts them")
    if not rows_seen:
        sys.exit("FAIL: no pool in any capture: the test checks nothing")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    mode, plugin = sys.argv[1], sys.argv[2]
    if mode == "load":
        load(plugin)
    elif mode == "decode":
        decode(plugin, sys.argv[3], sys.argv[4:])
    elif mode == "agree":
        agree(plugin, sys.argv[3], sys.argv[4], sys.argv[5])
    elif mode == "tap":
        tap(plugin, sys.argv[3])
    elif mode == "conform":
        conform(plugin, sys.argv[3], sys.argv[4])
    elif mode == "claims":
        claims(plugin, sys.argv[3], sys.argv[4], sys.argv[5:])
    elif mode == "pools":
        pools(plugin, sys.argv[3], sys.argv[4:])
    elif mode == "robust":
        robust(plugin, sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
