#!/usr/bin/env bash
# Times tensorfit and (where it is importable) PyTorch on the seed network's workloads
# in one run on this machine, and prints the ratios. Only ratios within one run mean
# anything on a shared machine.
#
#   PYTHON=/path/to/python benches/compare/run.sh      (default: python3)
#   THREADS=2 ITERS=5 TRAIN=32,50 INFER=100,200 benches/compare/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
THREADS=${THREADS:-2}
ITERS=${ITERS:-5}
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

if "$PYTHON" -c 'import torch' 2>/dev/null; then
    "$PYTHON" benches/compare/torch_seed.py --threads "$THREADS" --iters "$ITERS" \
        --train "$TRAIN" --infer "$INFER" > "$tmp/torch.jsonl"
else
    echo "PyTorch is not importable with $PYTHON: timing tensorfit only (set PYTHON=...)." >&2
    : > "$tmp/torch.jsonl"
fi
IFS=, read -r tb tt <<< "$TRAIN"
IFS=, read -r ib it <<< "$INFER"
"$TF" bench --model seed --mode train --batch "$tb" --seq-len "$tt" --tbptt "$tt" \
    --iters "$ITERS" --device cpu --json > "$tmp/tf_train.json"
"$TF" bench --model seed --mode infer --batch "$ib" --seq-len "$it" \
    --iters "$ITERS" --device cpu --json > "$tmp/tf_infer.json"

python3 - "$tmp" "$THREADS" "$TRAIN" "$INFER" <<'PY'
import json, os, sys
tmp, threads, train, infer = sys.argv[1:]
torch = {}
for line in open(os.path.join(tmp, "torch.jsonl")):
    r = json.loads(line)
    torch[r["workload"]] = r
tf = {w: json.load(open(os.path.join(tmp, f"tf_{w}.json"))) for w in ("train", "infer")}
print(f"seed network, {threads} threads; train = batch,length {train} (tbptt = length); "
      f"infer = batch,length {infer}")
print(f"{'workload':<8} {'tensorfit ms':>13} {'GFLOP/s':>8} {'pytorch ms':>11} {'GFLOP/s':>8} "
      f"{'ratio tf/pt':>12}")
for w in ("train", "infer"):
    t, p = tf[w], torch.get(w)
    row = f"{w:<8} {t['ms_per_step']:>13.1f} {t['gflops']:>8.0f}"
    if p:
        row += f" {p['ms']:>11.1f} {p['gflops']:>8.0f} {t['ms_per_step'] / p['ms']:>12.2f}"
    print(row)
gemms = [r for k, r in torch.items() if k.startswith("gemm")]
if gemms:
    for r in gemms:
        print(f"1024^3 sgemm, {r['system']}, {threads} threads: {r['gflops']:.0f} GFLOP/s")
    ceiling = max(r["gflops"] for r in gemms)
    print(f"GEMM ceiling {ceiling:.0f} GFLOP/s; tensorfit training reaches "
          f"{100 * tf['train']['gflops'] / ceiling:.0f}% of it")
print("targets: train ratio <= 0.80, infer ratio <= 1.00, training >= 55% of the ceiling")
PY
