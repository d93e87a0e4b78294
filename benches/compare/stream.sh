#!/usr/bin/env bash
# Streaming latency, tensorfit against PyTorch: the seed network, batch 1, one step per
# call with the state kept (tensorfit's Stream; PyTorch's nn.LSTM with (h, c) passed
# back). The two take turns for ROUNDS rounds, each figure the median of REPEATS means
# over STEPS steps; prints every round, the medians over the rounds and their ratio.
#
#   PYTHON=/root/torchvenv/bin/python THREADS=2 ROUNDS=5 benches/compare/stream.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-5}
STEPS=${STEPS:-2000}
REPEATS=${REPEATS:-5}
PYTHON=${PYTHON:-python3}
export RAYON_NUM_THREADS=$THREADS

cargo bench --quiet --bench stream_step --no-run 2>/dev/null
BENCH=$(ls -t target/release/deps/stream_step-* | grep -v '\.d$' | head -1)
tf=() pt=()
for round in $(seq 1 "$ROUNDS"); do
    p=$("$PYTHON" benches/compare/torch_stream.py --threads "$THREADS" --steps "$STEPS" --repeats "$REPEATS")
    t=$("$BENCH" "$STEPS" "$REPEATS")
    p=$(sed 's/.*"us_per_step": \([0-9.]*\).*/\1/' <<< "$p")
    t=$(sed 's/.*"us_per_step": \([0-9.]*\).*/\1/' <<< "$t")
    echo "round $round: pytorch $p us/step, tensorfit $t us/step"
    pt+=("$p") tf+=("$t")
done
python3 - "${pt[*]}" "${tf[*]}" <<'PY'
import statistics, sys
pt = [float(v) for v in sys.argv[1].split()]
tf = [float(v) for v in sys.argv[2].split()]
p, t = statistics.median(pt), statistics.median(tf)
print(f"median over {len(pt)} rounds: pytorch {p:.1f} us/step, tensorfit {t:.1f} us/step, tensorfit/pytorch {t / p:.2f}")
PY
