#!/usr/bin/env bash
# Times tensorfit's GRU (benches/gru_cpu.rs) and PyTorch's nn.GRU (torch_gru.py) on the
# same workloads in turns, and prints the ratios. Only ratios measured together mean
# anything on a shared machine: ROUNDS rounds, each running PyTorch then tensorfit over
# every workload (each figure the median of ITERS timed runs after two warm-ups); the
# table gives the medians over the rounds and their ratio (tensorfit / PyTorch, < 1 is
# faster).
#
#   PYTHON=/root/torchvenv/bin/python benches/compare/gru.sh
#   THREADS=2 ITERS=5 ROUNDS=5 WORKLOADS=train:32:50:250,infer:100:200:250 NICE=-19 benches/compare/gru.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
THREADS=${THREADS:-2}
ITERS=${ITERS:-5}
ROUNDS=${ROUNDS:-5}
WORKLOADS=${WORKLOADS:-train:32:50:250,infer:100:200:250,train:8:500:250,infer:8:500:250,train:32:50:512,infer:100:200:512}
PYTHON=${PYTHON:-python3}
NICE=${NICE:-0}
export RAYON_NUM_THREADS=$THREADS

cargo bench --quiet --bench gru_cpu --no-run 2>/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for round in $(seq 1 "$ROUNDS"); do
    echo "round $round of $ROUNDS ..." >&2
    nice -n "$NICE" "$PYTHON" benches/compare/torch_gru.py --threads "$THREADS" \
        --iters "$ITERS" --workloads "$WORKLOADS" >> "$tmp/runs.jsonl"
    nice -n "$NICE" cargo bench --quiet --bench gru_cpu -- --iters "$ITERS" \
        --workloads "$WORKLOADS" >> "$tmp/runs.jsonl"
done

python3 - "$tmp/runs.jsonl" "$ROUNDS" "$THREADS" <<'PY'
import json, statistics, sys
path, rounds, threads = sys.argv[1], sys.argv[2], sys.argv[3]
runs = [json.loads(line) for line in open(path) if line.startswith("{")]
key = lambda r: (r["workload"], r["batch"], r["steps"], r["hidden"])
shapes = list(dict.fromkeys(key(r) for r in runs))
systems = list(dict.fromkeys(r["system"] for r in runs))
torch = next(s for s in systems if s.startswith("pytorch"))
print(f"GRU 3 layers, input 152; medians over {rounds} rounds, {threads} threads")
print(f"| workload | B | T | H | tensorfit ms | {torch} ms | ratio | tensorfit GFLOP/s |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for shape in shapes:
    ms = {s: statistics.median(r["ms"] for r in runs if key(r) == shape and r["system"] == s)
          for s in systems}
    gf = statistics.median(r["gflops"] for r in runs if key(r) == shape and r["system"] == "tensorfit")
    w, b, t, h = shape
    print(f"| {w} | {b} | {t} | {h} | {ms['tensorfit']:.1f} | {ms[torch]:.1f} | "
          f"{ms['tensorfit'] / ms[torch]:.2f} | {gf:.0f} |")
PY
