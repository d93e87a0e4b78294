#!/usr/bin/env bash
# Issue 15: token ids against dense one-hot input on the seed network (3 x LSTM 250, the
# BN-Dense-BN head, 6 classes), inference on the CPU through the CLI: `tensorfit bench
# --mode infer` (the built-in task's batches: 152-wide one-hot vectors for the dense
# model, the same symbols as ids for the token model; the input's upload is part of each
# inference), the two models taking turns in every round, the median over rounds of each
# one's median; then the plans of both at the seed case's B=100, T=2000 (the device's
# peak and the host's input section).
#
#   scripts/tokens-vs-dense.sh                      # builds the release binary first
#   BIN=target/release/tensorfit ROUNDS=9 BATCH=100 T=200 scripts/tokens-vs-dense.sh
#
# The token model is examples/models/seed.toml with its [input] table made
# `kind = "tokens"`, `vocab = 152`. Figures go in docs/cpu-performance.md.
. "$(dirname "$0")/measuring.sh"
ROUNDS="${ROUNDS:-7}" BATCH="${BATCH:-100}" T="${T:-200}" ITERS="${ITERS:-5}"
dense=examples/models/seed.toml
tokens="$DIR/seed_tokens.toml"
sed -e 's/^kind = "dense".*/kind = "tokens"/' -e 's/^features = 152.*/vocab = 152/' "$dense" > "$tokens"
grep -q '^vocab = 152' "$tokens" || { echo "could not make the token model from $dense" >&2; exit 1; }

echo "seed network inference, batch $BATCH, T $T, $ITERS timed runs a turn, $ROUNDS rounds; cpu, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
ms() {
    "$BIN" bench --model "$1" --mode infer --batch "$BATCH" --seq-len "$T" --iters "$ITERS" \
        --device cpu --json 2>/dev/null | tail -1 |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["ms_per_step"])'
}
: > "$DIR/times"
for round in $(seq 1 "$ROUNDS"); do
    # Alternate which goes first.
    if [ $((round % 2)) = 1 ]; then order="dense tokens"; else order="tokens dense"; fi
    for kind in $order; do
        if [ "$kind" = dense ]; then t="$(ms "$dense")"; else t="$(ms "$tokens")"; fi
        echo "round $round $kind $t ms"
        echo "$kind $t" >> "$DIR/times"
    done
done
plan() {
    "$BIN" plan --model "$1" --mode infer --batch 100 --seq-len 2000 --device cpu --json 2>/dev/null
}
plan "$dense" > "$DIR/plan_dense.json"
plan "$tokens" > "$DIR/plan_tokens.json"
python3 - "$DIR" <<'PY'
import json, statistics, sys
d = sys.argv[1]
times = {}
for line in open(f"{d}/times"):
    kind, ms = line.split()
    times.setdefault(kind, []).append(float(ms))
dense, tokens = statistics.median(times["dense"]), statistics.median(times["tokens"])
print(f"{'input':<8} {'median ms':>10} {'range':>19}")
for kind in ("dense", "tokens"):
    ts = times[kind]
    print(f"{kind:<8} {statistics.median(ts):>10.1f} {min(ts):>9.1f}-{max(ts):<9.1f}")
print(f"token ids take {100 * (1 - tokens / dense):.1f}% less time than dense one-hot input")
mib = lambda b: f"{b / 2**20:.2f} MiB"
for kind in ("dense", "tokens"):
    p = json.load(open(f"{d}/plan_{kind}.json"))
    chosen = p["chosen"] or {}
    print(f"plan B=100 T=2000 {kind:<7} device peak {mib(chosen.get('estimated_peak_bytes', 0))}, host input data {mib(p['host']['inputs'])}, planned resident {mib(p['host']['planned_resident'] or 0)}")
PY
