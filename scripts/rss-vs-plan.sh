#!/usr/bin/env bash
# Process resident memory against the plan, on the CPU backend: for each job, the plan's
# prediction (this process before the job + input data + copies of the training state +
# the device plan, which on the CPU is host memory too) and the measured peak (VmHWM, as
# the run reports it in --json). Prints a table; the figures go in docs/ with the date.
#
#   scripts/rss-vs-plan.sh            # builds the release binary first
#   BIN=target/release/tensorfit scripts/rss-vs-plan.sh
. "$(dirname "$0")/measuring.sh"

C="--model examples/data/classify_model.toml --data examples/data/classify.safetensors"
# name | arguments (each job runs twice: the first run of a build measures the device's
# speed before planning; the table shows the second)
JOBS=(
    "classify train|train $C --epochs 1 --save $DIR/m.safetensors"
    "classify predict|predict --checkpoint $DIR/m.safetensors --data examples/data/classify.safetensors --output $DIR/p.safetensors"
    "seed eval B=100 T=2000|eval --batch 100 --seq-len 2000"
    "seed eval B=100 T=2000, 336 MB cap|eval --batch 100 --seq-len 2000 --device-memory cpu=336MB"
    "seed eval B=100 T=200|eval --batch 100 --seq-len 200"
    "seed train B=32 T=50|train --batch 32 --seq-len 50 --tbptt 50 --steps 20 --eval-every 0 --checkpoint-dir $DIR/a --overwrite"
    "eval B=8 T=500|eval --batch 8 --seq-len 500"
    "train B=100 T=200 TBPTT 50|train --batch 100 --seq-len 200 --tbptt 50 --steps 5 --eval-every 0 --checkpoint-dir $DIR/b --overwrite"
)

printf '%-40s %14s %14s %8s\n' "job (cpu)" "planned RSS" "measured RSS" "ratio"
for job in "${JOBS[@]}"; do
    name="${job%%|*}"
    args="${job#*|}"
    # shellcheck disable=SC2086
    "$BIN" $args --device cpu --json >/dev/null 2>&1
    # shellcheck disable=SC2086
    line="$("$BIN" $args --device cpu --json 2>/dev/null | tail -1)"
    python3 - "$name" "$line" <<'EOF'
import json, sys
name, line = sys.argv[1], sys.argv[2]
v = json.loads(line)
planned, got = v["planned_resident_bytes"], v["peak_resident_bytes"]
mib = lambda b: f"{b / 2**20:.1f} MiB"
print(f"{name:<40} {mib(planned):>14} {mib(got):>14} {got / planned:>8.3f}")
EOF
done
