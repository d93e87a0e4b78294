#!/usr/bin/env bash
# Untruncated BPTT over the seed user's full sequences (B=100, T=2000, --tbptt 2000) on the
# CPU backend: unconstrained against a 1.67 GiB cap (the planner then recomputes
# activations in sub-segments), alternating per round; prints each run's strategy, time
# per step, planned and measured device peak and peak RSS, and the median time ratio.
#
#   ROUNDS=3 STEPS=3 scripts/moonshot.sh        (BIN=... to skip the release build)
. "$(dirname "$0")/measuring.sh"
ROUNDS="${ROUNDS:-3}"
STEPS="${STEPS:-3}"
run() { # cap-or-empty → one JSON line
    local caps=()
    if [ -n "$1" ]; then caps=(--device-memory "cpu=$1"); fi
    rm -rf "$DIR/ck"
    "$BIN" train --batch 100 --seq-len 2000 --tbptt 2000 --steps "$STEPS" --eval-every 0 \
        --eval-batch 2 --device cpu "${caps[@]}" --checkpoint-dir "$DIR/ck" --json 2>/dev/null | tail -1
}
for r in $(seq "$ROUNDS"); do
    for cap in "" 1.67GiB; do
        echo "${cap:-none}|$(run "$cap")"
    done
done >"$DIR/runs"
python3 - "$DIR/runs" <<'PY'
import json, statistics, sys
rows = {}
mib = lambda b: f"{b / 2**20:.0f} MiB"
for line in open(sys.argv[1]):
    cap, _, js = line.strip().partition("|")
    v = json.loads(js)
    per_step = v["seconds"] / v["steps"]
    rows.setdefault(cap, []).append(per_step)
    print(
        f"cap {cap:<8} {v['strategy']:<40} {per_step:7.2f} s/step  "
        f"plan {mib(v['estimated_peak_bytes'])}, measured {mib(v['measured_peak_bytes'])}, "
        f"RSS {mib(v['peak_resident_bytes'])} (planned {mib(v['planned_resident_bytes'])})"
    )
a, b = statistics.median(rows["none"]), statistics.median(rows["1.67GiB"])
print(f"median s/step: unconstrained {a:.2f}, 1.67 GiB cap {b:.2f}: ratio {b / a:.2f}")
PY
