#!/usr/bin/env bash
# Times a training step of the layer models of issue 32 in tensorfit (`tensorfit bench
# --mode train`, release build) and in PyTorch (torch_layers.py), in turns, and prints
# the ratios. Only ratios measured together mean anything on a shared machine: ROUNDS
# rounds, each running PyTorch then tensorfit on every model (each figure the median of
# ITERS timed steps); the table gives the medians over the rounds and their ratio
# (tensorfit / PyTorch, < 1 is faster).
#
#   PYTHON=/work/torch-venv/bin/python benches/compare/layers.sh
#   THREADS=2 ITERS=5 ROUNDS=5 BATCH=32 STEPS=100 HIDDEN=256 benches/compare/layers.sh
#
# Models (MODELS, comma-separated): bilstm (benches/compare/bilstm.toml: nn.LSTM(152, H,
# 2 layers, bidirectional) -> cat(h_n[-2], h_n[-1]) -> Linear(2H, 6); its `hidden`
# replaced by HIDDEN), transformer (benches/compare/transformer.toml: 4 encoder layers of
# d_model 256, 4 heads, feed-forward 1024, over embedded ids; HIDDEN unused):
#
#   MODELS=transformer STEPS=128 benches/compare/layers.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
THREADS=${THREADS:-2}
ITERS=${ITERS:-5}
ROUNDS=${ROUNDS:-5}
BATCH=${BATCH:-32}
STEPS=${STEPS:-100}
HIDDEN=${HIDDEN:-256}
MODELS=${MODELS:-bilstm}
PYTHON=${PYTHON:-python3}
export RAYON_NUM_THREADS=$THREADS

cargo build --quiet --release --bin tensorfit
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for round in $(seq 1 "$ROUNDS"); do
    echo "round $round of $ROUNDS ..." >&2
    "$PYTHON" benches/compare/torch_layers.py --threads "$THREADS" --iters "$ITERS" \
        --batch "$BATCH" --steps "$STEPS" --hidden "$HIDDEN" --models "$MODELS" >> "$tmp/runs.jsonl"
    for model in ${MODELS//,/ }; do
        sed "s/^hidden = .*/hidden = $HIDDEN/" "benches/compare/$model.toml" > "$tmp/$model.toml"
        target/release/tensorfit bench --model "$tmp/$model.toml" --mode train \
            --batch "$BATCH" --seq-len "$STEPS" --iters "$ITERS" --device cpu --json |
            python3 -c "import json, sys; r = json.load(sys.stdin); print(json.dumps({'system': 'tensorfit', 'model': '$model', 'batch': $BATCH, 'steps': $STEPS, 'hidden': $HIDDEN, 'ms': r['ms_per_step']}))" \
            >> "$tmp/runs.jsonl"
    done
done

python3 - "$tmp/runs.jsonl" "$ROUNDS" "$THREADS" <<'PY'
import json, statistics, sys
path, rounds, threads = sys.argv[1], sys.argv[2], sys.argv[3]
runs = [json.loads(line) for line in open(path) if line.startswith("{")]
systems = list(dict.fromkeys(r["system"] for r in runs))
torch = next(s for s in systems if s.startswith("pytorch"))
models = list(dict.fromkeys(r["model"] for r in runs))
print(f"training step; medians over {rounds} rounds, {threads} threads")
print(f"| model | B | T | H | tensorfit ms | {torch} ms | ratio |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for m in models:
    ms = {s: statistics.median(r["ms"] for r in runs if r["model"] == m and r["system"] == s)
          for s in systems}
    r0 = next(r for r in runs if r["model"] == m)
    print(f"| {m} | {r0['batch']} | {r0['steps']} | {r0['hidden']} | {ms['tensorfit']:.1f} | {ms[torch]:.1f} | "
          f"{ms['tensorfit'] / ms[torch]:.2f} |")
PY
