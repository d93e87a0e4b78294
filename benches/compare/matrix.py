"""The benchmark matrix: tensorfit and PyTorch (default, and with
torch.set_flush_denormal(True)) on the seed network over batch x length x hidden, train
and inference, taking turns cell by cell on one machine; prints a Markdown table of
milliseconds, model GFLOP/s, the ratio to PyTorch with flush-to-zero and the planner's
estimate over the measured time.

    python3 benches/compare/matrix.py --python /root/torchvenv/bin/python [--quick]
    python3 benches/compare/matrix.py --baseline /tmp/old/release/deps/matrix-HASH ...

Each system runs as one long-lived server (benches/matrix.rs for tensorfit,
benches/compare/torch_matrix.py for PyTorch) fed one cell at a time, so start-up costs
stay out of the figures and every cell's systems run within seconds of one another (the
development machines drift 10-40% from minute to minute; only figures taken together
compare). The order of the systems rotates from cell to cell and round to round; each
figure is the median of the rounds' medians. Training uses the whole sequence as the
truncated-BPTT window up to length 500 and a window of 50 beyond (--tbptt-long).
Without PyTorch it times tensorfit alone and says so. With --baseline, the matrix
server of another build (`cargo bench --bench matrix --no-run` in a checkout of it, with
a CARGO_TARGET_DIR of its own) takes its turn in the same rotation, and the table gains
this build over that one per cell: a build-against-build comparison taken together with
the one against PyTorch.
"""
import argparse
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.join(ROOT, "benches", "compare")


def ints(text):
    return [int(v) for v in text.split(",") if v]


class Server:
    """A system answering one JSON cell per line."""

    def __init__(self, name, argv, env=None):
        self.name = name
        self.proc = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env)

    def ask(self, cell):
        self.proc.stdin.write(json.dumps(cell) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"{self.name} stopped (exit code {self.proc.poll()})")
        return json.loads(line)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def flops(mode, b, t, tbptt, h):
    per = sum(2 * 4 * hh * (i + hh) for i, hh in [(152, h), (h, h), (h, h)])
    if mode == "train":
        last = min(tbptt, t)
        return per * b * (3 * last + (t - last))
    return per * b * t


def cells(a):
    out = []
    for h, b, t, mode in itertools.product(ints(a.hidden), ints(a.batch), ints(a.length), a.modes.split(",")):
        tbptt = t if mode == "infer" or t <= a.untruncated_max else a.tbptt_long
        if flops(mode, b, t, tbptt, h) <= a.max_gflop * 1e9:
            out.append(dict(mode=mode, batch=b, seq_len=t, tbptt=tbptt, hidden=h))
    for spec in a.extra.split(";"):
        if spec:
            mode, b, t, tbptt, h = spec.split(",")
            cell = dict(mode=mode, batch=int(b), seq_len=int(t), tbptt=int(tbptt), hidden=int(h))
            if cell not in out:
                out.append(cell)
    for c in out:
        work = flops(c["mode"], c["batch"], c["seq_len"], c["tbptt"], c["hidden"])
        # Small cells: many runs, and at least three rounds (a stall of a second on a
        # shared machine must not decide a cell that takes a millisecond); the largest
        # (tens of seconds per run): one run after warm-up.
        c["min_runs"] = 5 if work < 5e10 else 3 if work < 1e12 else 1
        c["min_seconds"] = a.min_seconds if work < 1e12 else 0.0
        c["rounds"] = max(a.rounds, 3) if work < 5e10 else a.rounds
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--python", default=os.environ.get("PYTHON", "python3"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--hidden", default="64,250,1024")
    p.add_argument("--batch", default="1,8,32,100")
    p.add_argument("--length", default="10,50,200,2000")
    p.add_argument("--modes", default="train,infer")
    p.add_argument("--untruncated-max", type=int, default=500)
    p.add_argument("--tbptt-long", type=int, default=50)
    p.add_argument("--extra", default="train,32,500,500,250;train,100,500,500,250",
                   help="more cells: mode,batch,length,tbptt,hidden;...")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--max-gflop", type=float, default=float("inf"),
                   help="leave out cells of more model GFLOP per run (the largest take a minute per run)")
    p.add_argument("--min-seconds", type=float, default=1.0)
    p.add_argument("--quick", action="store_true", help="hidden 250 only, lengths up to 200")
    p.add_argument("--json", help="also write every measurement to this file")
    p.add_argument("--baseline", metavar="BIN",
                   help="another build's matrix server (target/release/deps/matrix-*), timed in turn")
    p.add_argument("--render", metavar="JSON", help="print the table of a saved --json file and exit")
    p.add_argument("--summary", metavar="JSON",
                   help="print the README's summary of a saved --json file (per hidden size) and exit")
    a = p.parse_args()
    if a.summary:
        with open(a.summary) as f:
            print(summary_table(json.load(f)["cells"]))
        return
    if a.render:
        with open(a.render) as f:
            saved = json.load(f)
        have = any("pytorch-ftz" in c for c in saved["cells"])
        print(table(saved["cells"], have, saved["threads"], saved.get("date", "?"), saved.get("baseline")))
        return
    if a.quick:
        a.hidden, a.length, a.extra = "250", "10,50,200", "train,32,500,500,250"

    env = dict(os.environ, RAYON_NUM_THREADS=str(a.threads), VK_ICD_FILENAMES="/nonexistent")
    subprocess.run(["cargo", "bench", "--quiet", "--bench", "matrix", "--no-run"], cwd=ROOT, check=True)
    servers = [Server("tensorfit", ["cargo", "bench", "--quiet", "--bench", "matrix"], env)]
    if a.baseline:
        servers.append(Server("baseline", [os.path.abspath(a.baseline)], env))
    try:
        have_torch = subprocess.run([a.python, "-c", "import torch"], capture_output=True).returncode == 0
    except OSError:
        have_torch = False
    if have_torch:
        torch = [a.python, os.path.join(HERE, "torch_matrix.py"), "--threads", str(a.threads)]
        servers.append(Server("pytorch", torch))
        servers.append(Server("pytorch-ftz", torch + ["--flush-denormal"]))
    else:
        print(f"PyTorch is not importable with {a.python}: timing tensorfit only (--python ...).",
              file=sys.stderr)
    todo = cells(a)
    results = []
    started = time.time()
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started))
    for i, cell in enumerate(todo):
        got = {s.name: [] for s in servers}
        extra = {}
        for r in range(cell["rounds"]):
            k = (i + r) % len(servers)
            for s in servers[k:] + servers[:k]:
                answer = s.ask({k: v for k, v in cell.items() if k != "rounds"})
                if "error" in answer:
                    got[s.name].append(None)
                    extra.setdefault("errors", []).append(f"{s.name}: {answer['error']}")
                    continue
                got[s.name].append(answer["ms"])
                if s.name == "tensorfit":
                    extra["estimated_ms"] = answer["estimated_ms"]
                    extra["strategy"] = answer["strategy"]
        row = dict(cell)
        for name, ms in got.items():
            ok = [m for m in ms if m is not None]
            row[name] = statistics.median(ok) if ok else None
        row.update(extra)
        results.append(row)
        print(f"[{i + 1}/{len(todo)} {time.time() - started:.0f} s] {summary(row)}", file=sys.stderr, flush=True)
        if a.json:
            # After every cell, so that a run stopped half-way keeps what it measured
            # (the whole matrix takes hours; --render prints the cells written so far).
            with open(a.json, "w") as f:
                json.dump({"machine": machine(), "threads": a.threads, "date": date, "baseline": a.baseline,
                           "cells": results}, f, indent=1)
    for s in servers:
        s.close()
    print(table(results, have_torch, a.threads, date, a.baseline))


def gflops(row, name):
    ms = row.get(name)
    return flops(row["mode"], row["batch"], row["seq_len"], row["tbptt"], row["hidden"]) / ms / 1e6 if ms else None


def summary(row):
    parts = [f"{row['mode']} B={row['batch']} T={row['seq_len']} L={row['tbptt']} H={row['hidden']}:"]
    for name in ("tensorfit", "baseline", "pytorch", "pytorch-ftz"):
        if row.get(name):
            parts.append(f"{name} {row[name]:.2f} ms")
    for e in row.get("errors", []):
        parts.append(f"error {e}")
    return " ".join(parts)


def summary_table(rows):
    """Per hidden size and mode, over the cells with B·T ≥ 1000 (the issue's bar): how
    many, the median and the largest ratio tensorfit / PyTorch with flush-to-zero, and
    the cell of the largest; with a baseline build, over every cell, the median and the
    largest ratio this build / the baseline."""
    against = any(r.get("baseline") for r in rows)
    lines = ["| H | mode | cells (B·T ≥ 1000) | tensorfit / PyTorch FTZ: median | largest (cell B, T) |"
             + (" cells | / baseline: median | largest (cell B, T) |" if against else ""),
             "|---|---|---|---|---|" + ("---|---|---|" if against else "")]

    def ratios(mode, h, of, big):
        return [(r["tensorfit"] / r[of], r) for r in rows
                if r["hidden"] == h and r["mode"] == mode and r.get("tensorfit") and r.get(of)
                and (r["batch"] * r["seq_len"] >= 1000 or not big)]

    def stats(got):
        worst, at = max(got, key=lambda g: g[0])
        med = statistics.median(g[0] for g in got)
        return f" {len(got)} | {med:.2f} | {worst:.2f} (B={at['batch']}, T={at['seq_len']}) |"

    for h in sorted({r["hidden"] for r in rows}):
        for mode in ("train", "infer"):
            got = ratios(mode, h, "pytorch-ftz", True)
            if not got:
                continue
            line = f"| {h} | {mode} |" + stats(got)
            if against:
                line += stats(ratios(mode, h, "baseline", False) or [(float("nan"), got[0][1])])
            lines.append(line)
    return "\n".join(lines)


def fmt(v, spec):
    return "—" if v is None else format(v, spec)


def table(rows, have_torch, threads, date, baseline=None):
    """One line per (hidden, batch, length): training and inference side by side; with a
    baseline build, this build's time over its per mode."""
    lines = [f"machine: {machine()}, {threads} threads, started {date}"
             + (f"; baseline build: {baseline}" if baseline else ""), ""]
    head, rule = "| H | B | T |", "|---|---|---|"
    for mode in ("train", "infer"):
        head += f" {mode}: tensorfit ms (GFLOP/s) | est./meas. |"
        rule += "---|---|"
        if have_torch:
            head += " PyTorch ms | PyTorch FTZ ms | tensorfit / FTZ |"
            rule += "---|---|---|"
        if baseline:
            head += " / baseline |"
            rule += "---|"
    lines += [head, rule]
    by_shape = {}
    for r in rows:
        by_shape.setdefault((r["hidden"], r["batch"], r["seq_len"]), {})[r["mode"]] = r
    for (h, b, t), modes in by_shape.items():
        line = f"| {h} | {b} | {t} |"
        for mode in ("train", "infer"):
            r = modes.get(mode)
            if r is None:
                line += " |  |" + (" |  |  |" if have_torch else "") + (" |" if baseline else "")
                continue
            tf, est = r.get("tensorfit"), r.get("estimated_ms")
            window = f" (TBPTT {r['tbptt']})" if r["tbptt"] < r["seq_len"] else ""
            line += (f" {fmt(tf, '.1f')}{window} ({fmt(gflops(r, 'tensorfit'), '.0f')}) |"
                     f" {fmt(est / tf if est and tf else None, '.2f')} |")
            if have_torch:
                ftz = r.get("pytorch-ftz")
                ratio = tf / ftz if tf and ftz else None
                slower = ratio and ratio > 1.0 and b * t >= 1000
                line += (f" {fmt(r.get('pytorch'), '.1f')} | {fmt(ftz, '.1f')} |"
                         f" {'**' if slower else ''}{fmt(ratio, '.2f')}{'**' if slower else ''} |")
            if baseline:
                old = r.get("baseline")
                ratio = tf / old if tf and old else None
                slower = ratio and ratio > 1.05
                line += f" {'**' if slower else ''}{fmt(ratio, '.2f')}{'**' if slower else ''} |"
        lines.append(line)
    lines.append("")
    lines.append("— : not run (BatchNorm in training mode needs a batch of at least 2, in both systems) "
                 "or failed; **bold**: tensorfit slower than PyTorch with flush-to-zero where B·T ≥ 1000"
                 + (", or than the baseline build by more than 5%." if baseline else "."))
    return "\n".join(lines)


def machine():
    """The CPU's name, with its x86 family and model and its L1d and L2 sizes where
    Linux tells: hosts that call themselves "AMD EPYC" differ by 2x (Zen 4, Zen 5)."""
    name = platform.processor() or platform.machine()
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    name = fields.get("model name", name)
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']} model {fields['model']})"
    caches = []
    for index in range(4):
        base = f"/sys/devices/system/cpu/cpu0/cache/index{index}/"
        try:
            with open(base + "level") as l, open(base + "type") as t, open(base + "size") as z:
                level, kind, size = l.read().strip(), t.read().strip(), z.read().strip()
        except OSError:
            continue
        if (level, kind) in (("1", "Data"), ("2", "Unified")):
            caches.append(f"L{level}{'d' if kind == 'Data' else ''} {size}")
    return name + (f", {' '.join(caches)} a core" if caches else "")


if __name__ == "__main__":
    main()
