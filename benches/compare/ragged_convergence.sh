#!/usr/bin/env bash
# Convergence and epoch time on variable-length data (issue 30): tensorfit's
# `train --data` and PyTorch (ragged.py: DataLoader-style order, pack_padded_sequence)
# train the same task (ragged.py make: 540 training and 60 validation sequences of
# 40..=120 steps, 3 features, 3 classes) with the same model (LSTM 32, a linear output on
# the last real step), Adam 0.01, batch 16, EPOCHS epochs, over SEEDS; each prints the
# validation accuracy after its last epoch and the median seconds of an epoch's training.
# The table gives both systems' median accuracy in each batch order, and the time of an
# epoch shuffled over the time of one length-grouped (padding's cost) for each system.
#
#   PYTHON=/work/torch-venv/bin/python benches/compare/ragged_convergence.sh
#   TENSORFIT=target/debug/tensorfit PYTHON=... benches/compare/ragged_convergence.sh
#   SEEDS="1 2 3" EPOCHS=8 ORDERS="shuffled length-grouped" THREADS=2 benches/compare/ragged_convergence.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
SEEDS=${SEEDS:-1 2 3}
EPOCHS=${EPOCHS:-8}
THREADS=${THREADS:-2}
ORDERS=${ORDERS:-shuffled length-grouped}
DATA_SEED=${DATA_SEED:-0}
export RAYON_NUM_THREADS=$THREADS

# TENSORFIT: a tensorfit binary built already (default: a release build made here).
if [ -z "${TENSORFIT:-}" ]; then
    cargo build --quiet --release --bin tensorfit
fi
tf=${TENSORFIT:-target/release/tensorfit}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PYTHON" benches/compare/ragged.py make --out "$tmp" --seed "$DATA_SEED"
cat > "$tmp/model.toml" <<'TOML'
[input]
kind = "dense"
features = 3

[recurrent]
cell = "lstm"
hidden = 32
layers = 1

[head]
on = "last"

[loss]
kind = "cross_entropy"
classes = 3
TOML

for seed in $SEEDS; do
    for order in $ORDERS; do
        echo "seed $seed, $order ..." >&2
        "$PYTHON" benches/compare/ragged.py train --data "$tmp" --seed "$seed" \
            --order "$order" --epochs "$EPOCHS" --threads "$THREADS" >> "$tmp/runs.jsonl"
        # tensorfit's epoch: the run's seconds over its epochs (each epoch ends with a
        # validation of the 60 sequences, a small part of it).
        "$tf" train --model "$tmp/model.toml" --data "$tmp/train.npz" --val "$tmp/val.npz" \
            --batch-order "$order" --epochs "$EPOCHS" --batch 16 --lr 0.01 --seed "$seed" \
            --device cpu --json \
            | "$PYTHON" -c '
import json, sys
r = json.loads(sys.stdin.read().strip().splitlines()[-1])
print(json.dumps({"system": "tensorfit", "seed": int(sys.argv[1]), "order": sys.argv[2],
                  "val_accuracy": r["val_accuracy"],
                  "epoch_seconds": r["seconds"] / int(sys.argv[3]),
                  "plans": r["plans"], "bound": r["bound"],
                  "peak_within_plan": r["measured_peak_bytes"] <= r["estimated_peak_bytes"]}))
' "$seed" "$order" "$EPOCHS" >> "$tmp/runs.jsonl"
    done
done

"$PYTHON" - "$tmp/runs.jsonl" "$EPOCHS" "$THREADS" <<'PY'
import json, statistics, sys
path, epochs, threads = sys.argv[1], sys.argv[2], sys.argv[3]
runs = [json.loads(line) for line in open(path) if line.startswith("{")]
systems = list(dict.fromkeys(r["system"] for r in runs))
orders = list(dict.fromkeys(r["order"] for r in runs))
seeds = sorted({r["seed"] for r in runs})
print(f"LSTM 32 on 540 sequences of 40..=120 steps, batch 16, Adam 0.01, {epochs} epochs, "
      f"seeds {seeds}, {threads} threads")
print("| system | batch order | val accuracy per seed | median | epoch s (median) |")
print("| --- | --- | --- | --- | --- |")
med = {}
for s in systems:
    for o in orders:
        rs = [r for r in runs if r["system"] == s and r["order"] == o]
        if not rs:
            continue
        accs = [r["val_accuracy"] for r in sorted(rs, key=lambda r: r["seed"])]
        secs = statistics.median(r["epoch_seconds"] for r in rs)
        med[s, o] = (statistics.median(accs), secs)
        print(f"| {s} | {o} | {' / '.join(f'{a:.2f}' for a in accs)} | "
              f"{med[s, o][0]:.2f} | {secs:.3f} |")
torch = next(s for s in systems if s.startswith("pytorch"))
if ("tensorfit", "shuffled") in med and (torch, "shuffled") in med:
    gap = med["tensorfit", "shuffled"][0] - med[torch, "shuffled"][0]
    print(f"tensorfit (shuffled, the default) median minus {torch}'s (shuffled): {gap:+.3f}")
if all((s, o) in med for s in ("tensorfit", torch) for o in ("shuffled", "length-grouped")):
    ratio = {s: med[s, "shuffled"][1] / med[s, "length-grouped"][1] for s in ("tensorfit", torch)}
    print(f"epoch time shuffled / length-grouped: tensorfit {ratio['tensorfit']:.2f}, "
          f"{torch} {ratio[torch]:.2f}")
tf = [r for r in runs if r["system"] == "tensorfit"]
print(f"tensorfit runs planned once: {sum(r['plans'] == 1 for r in tf)} of {len(tf)}; "
      f"measured peak within the plan: {sum(r['peak_within_plan'] for r in tf)} of {len(tf)}")
PY
