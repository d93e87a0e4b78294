#!/usr/bin/env bash
# Times tensorfit and (where it is importable) PyTorch on the seed network's workloads
# on this machine, and prints the ratios. Only ratios measured together mean anything
# on a shared machine, so the two systems take turns: ROUNDS rounds, each timing
# PyTorch (train, infer, 1024^3 GEMM) and then tensorfit (train, infer), each figure
# the median of ITERS timed runs after warm-up. The table gives every round and the
# medians over the rounds; the ratios are those of the medians.
#
#   PYTHON=/path/to/python benches/compare/run.sh      (default: python3)
#   THREADS=2 ITERS=5 ROUNDS=3 TRAIN=32,50 INFER=100,200 benches/compare/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
THREADS=${THREADS:-2}
ITERS=${ITERS:-5}
ROUNDS=${ROUNDS:-3}
TRAIN=${TRAIN:-32,50}
INFER=${INFER:-100,200}
PYTHON=${PYTHON:-python3}
# tensorfit's threads; PyTorch's are set by torch.set_num_threads in the harness
# (exporting OMP_NUM_THREADS made PyTorch ~10x slower on the development machine).
export RAYON_NUM_THREADS=$THREADS

cargo build --release --quiet --bin tensorfit
TF=target/release/tensorfit
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

have_torch=0
if "$PYTHON" -c 'import torch' 2>/dev/null; then
    have_torch=1
else
    echo "PyTorch is not importable with $PYTHON: timing tensorfit only (set PYTHON=...)." >&2
fi
IFS=, read -r tb tt <<< "$TRAIN"
IFS=, read -r ib it <<< "$INFER"
for round in $(seq 1 "$ROUNDS"); do
    echo "round $round of $ROUNDS ..." >&2
    if [ "$have_torch" = 1 ]; then
        "$PYTHON" benches/compare/torch_seed.py --threads "$THREADS" --iters "$ITERS" \
            --train "$TRAIN" --infer "$INFER" > "$tmp/torch_$round.jsonl"
    else
        : > "$tmp/torch_$round.jsonl"
    fi
    "$TF" bench --model seed --mode train --batch "$tb" --seq-len "$tt" --tbptt "$tt" \
        --iters "$ITERS" --device cpu --json > "$tmp/tf_train_$round.json"
    "$TF" bench --model seed --mode infer --batch "$ib" --seq-len "$it" \
        --iters "$ITERS" --device cpu --json > "$tmp/tf_infer_$round.json"
done

python3 - "$tmp" "$THREADS" "$TRAIN" "$INFER" "$ROUNDS" <<'PY'
import json, os, statistics, sys
tmp, threads, train, infer, rounds = sys.argv[1:]
rounds = int(rounds)
runs = {w: [json.load(open(os.path.join(tmp, f"tf_{w}_{r}.json")))
            for r in range(1, rounds + 1)] for w in ("train", "infer")}
tf = {w: [run["ms_per_step"] for run in runs[w]] for w in runs}
# Model GFLOP per step times 1000 (GFLOP/s x ms), so that work[w] / ms is GFLOP/s.
work = {w: runs[w][0]["gflops"] * runs[w][0]["ms_per_step"] for w in runs}
pt, gemm = {"train": [], "infer": []}, {}
for r in range(1, rounds + 1):
    for line in open(os.path.join(tmp, f"torch_{r}.jsonl")):
        rec = json.loads(line)
        if rec["workload"] in pt:
            pt[rec["workload"]].append(rec["ms"])
        else:
            gemm.setdefault(rec["system"], []).append(rec["gflops"])
med = statistics.median
print(f"seed network, {threads} threads; train = batch,length {train} (tbptt = length); "
      f"infer = batch,length {infer}; {rounds} rounds, PyTorch then tensorfit in each")
print(f"{'workload':<8} {'round':>5} {'tensorfit ms':>13} {'pytorch ms':>11} {'ratio tf/pt':>12}")
for w in ("train", "infer"):
    for r in range(rounds):
        row = f"{w:<8} {r + 1:>5} {tf[w][r]:>13.1f}"
        if pt[w]:
            row += f" {pt[w][r]:>11.1f} {tf[w][r] / pt[w][r]:>12.2f}"
        print(row)
print("medians over the rounds:")
print(f"{'workload':<8} {'tensorfit ms':>13} {'GFLOP/s':>8} {'pytorch ms':>11} {'GFLOP/s':>8} "
      f"{'ratio tf/pt':>12}")
for w in ("train", "infer"):
    t = med(tf[w])
    row = f"{w:<8} {t:>13.1f} {work[w] / t:>8.0f}"
    if pt[w]:
        p = med(pt[w])
        row += f" {p:>11.1f} {work[w] / p:>8.0f} {t / p:>12.2f}"
    print(row)
if gemm:
    for system, rates in gemm.items():
        print(f"1024^3 sgemm, {system}, {threads} threads: median {med(rates):.0f} GFLOP/s")
    ceiling = max(med(rates) for rates in gemm.values())
    print(f"GEMM ceiling {ceiling:.0f} GFLOP/s; tensorfit training reaches "
          f"{100 * work['train'] / med(tf['train']) / ceiling:.0f}% of it")
print("targets: train ratio <= 0.80, infer ratio <= 1.00, training >= 55% of the ceiling")
PY
