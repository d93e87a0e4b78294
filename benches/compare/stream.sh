#!/usr/bin/env bash
# Streaming latency, tensorfit against PyTorch: the seed network, batch 1, one step per
# call with the state kept (tensorfit's Stream; PyTorch's nn.LSTM with (h, c) passed
# back). The two take turns for ROUNDS rounds, each figure the median of REPEATS means
# over STEPS steps, in wall-clock and in process CPU time; prints every round, the
# medians over the rounds and their ratios.
#
#   PYTHON=/root/torchvenv/bin/python THREADS=2 ROUNDS=5 benches/compare/stream.sh
#
# BENCH=path runs that build of the bench instead of building it (an A/B against an
# older build's binary); the bench is looked for under $CARGO_TARGET_DIR when it is set.
set -euo pipefail
cd "$(dirname "$0")/../.."
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-5}
STEPS=${STEPS:-2000}
REPEATS=${REPEATS:-5}
PYTHON=${PYTHON:-python3}
export RAYON_NUM_THREADS=$THREADS

if [ -z "${BENCH:-}" ]; then
    cargo bench --quiet --bench stream_step --no-run 2>/dev/null
    BENCH=$(ls -t "${CARGO_TARGET_DIR:-target}"/release/deps/stream_step-* | grep -v '\.d$' | head -1)
fi
tf=() pt=() tfc=() ptc=()
field() { sed "s/.*\"$1\": \([0-9.]*\).*/\1/" <<< "$2"; }
for round in $(seq 1 "$ROUNDS"); do
    p=$("$PYTHON" benches/compare/torch_stream.py --threads "$THREADS" --steps "$STEPS" --repeats "$REPEATS")
    t=$("$BENCH" "$STEPS" "$REPEATS")
    echo "round $round: pytorch $(field us_per_step "$p") us/step ($(field cpu_us_per_step "$p") CPU), tensorfit $(field us_per_step "$t") us/step ($(field cpu_us_per_step "$t") CPU)"
    pt+=("$(field us_per_step "$p")") tf+=("$(field us_per_step "$t")")
    ptc+=("$(field cpu_us_per_step "$p")") tfc+=("$(field cpu_us_per_step "$t")")
done
python3 - "${pt[*]}" "${tf[*]}" "${ptc[*]}" "${tfc[*]}" <<'PY'
import statistics, sys
pt, tf, ptc, tfc = ([float(v) for v in a.split()] for a in sys.argv[1:5])
for what, p, t in (("wall", pt, tf), ("CPU", ptc, tfc)):
    p, t = statistics.median(p), statistics.median(t)
    print(f"{what}, median over {len(pt)} rounds: pytorch {p:.1f} us/step, tensorfit {t:.1f} us/step, tensorfit/pytorch {t / p:.2f}")
PY
