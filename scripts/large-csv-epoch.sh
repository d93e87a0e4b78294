#!/usr/bin/env bash
# One training epoch from a long CSV far larger than the reader's buffers (4 GiB by
# default), through the CLI on the CPU: the process's peak RSS against the plan's host
# section (issue 17: under 500 MiB, predicted within 10%), the reader's MB/s, and the time
# per step against the same steps from memory (`tensorfit bench`, the built-in task's
# batches of the same shape: no reading at all).
#
#   scripts/large-csv-epoch.sh                      # builds the release binary first
#   BIN=target/release/tensorfit SIZE=$((1<<30)) scripts/large-csv-epoch.sh
#   MODEL=examples/models/seed.toml SIZE=$((200<<20)) BATCH=32 scripts/large-csv-epoch.sh
#                                                   # the seed network: reading overlapped?
#
# The CSV is written to $DIR (default: a temporary directory, removed at the end) in the
# layout `sequence,step,f0..fF,label` (a label on each sequence's last step); it takes
# about a minute per GiB. Figures go in docs/data.md with date, machine and command.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="$(scripts/release-bin.sh)"
SIZE="${SIZE:-$((4 << 30))}" T="${T:-100}" BATCH="${BATCH:-256}"
HIDDEN="${HIDDEN:-32}" AHEAD="${AHEAD:-4}"
DIR="${DIR:-$(mktemp -d)}"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$DIR"' EXIT

# The built-in task's input and classes (152 features, 6 classes), so that `bench` times
# the same model on batches of the same shape from memory.
F=152 CLASSES=6
# 1000 sequences of random rows, written again under new ids until the file has SIZE bytes.
python3 - "$DIR/data.csv" "$SIZE" "$T" "$F" "$CLASSES" <<'PY'
import random, sys
path, size, t, f, c = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rng = random.Random(7)
templates = []
for _ in range(1000):
    rows = [[rng.gauss(0, 1) for _ in range(f)] for _ in range(t)]
    label = max(range(c), key=lambda k: sum(r[k] for r in rows))
    templates.append([
        f",{s}," + ",".join(f"{v:.5f}" for v in r) + (f",{label}\n" if s == t - 1 else ",\n")
        for s, r in enumerate(rows)
    ])
written, n = 0, 0
with open(path, "w") as out:
    head = "sequence,step," + ",".join(f"f{k}" for k in range(f)) + ",label\n"
    written += out.write(head)
    while written < size:
        ident = f"s{n}"
        written += out.write("".join(ident + row for row in templates[n % len(templates)]))
        n += 1
print(f"{n} sequences written", file=sys.stderr)
PY
MODEL="${MODEL:-$DIR/model.toml}"
scripts/lstm-classifier-toml.sh "$F" "$HIDDEN" "$CLASSES" > "$DIR/model.toml"

mb="$(python3 -c "import os,sys; print(os.path.getsize(sys.argv[1]) / 1e6)" "$DIR/data.csv")"
echo "long CSV ${mb} MB, $T steps x $F features a sequence; batch $BATCH, model $MODEL (LSTM $HIDDEN if the script's own), read-ahead $AHEAD, cpu, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
start=$(date +%s.%N)
epoch="$("$BIN" train --model "$MODEL" --data "$DIR/data.csv" --epochs 1 \
    --val-fraction 0 --batch "$BATCH" --read-ahead "$AHEAD" --device cpu --json 2>/dev/null | tail -1)"
wall="$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$start" "$(date +%s.%N)")"
bench="$("$BIN" bench --model "$MODEL" --mode train --batch "$BATCH" --seq-len "$T" \
    --iters 20 --device cpu --json 2>/dev/null | tail -1)"
python3 - "$mb" "$wall" "$epoch" "$bench" <<'PY'
import json, sys
mb, wall, v, b = float(sys.argv[1]), float(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4])
mib = lambda x: f"{x / 2**20:.1f} MiB"
planned, got = v["planned_resident_bytes"], v["peak_resident_bytes"]
steps, secs = v["steps"], v["seconds"]
step_ms = secs * 1e3 / steps
mem_ms = b["ms_per_step"]
print(f"process wall time (scan + epoch)  {wall:.1f} s: {mb / wall:.1f} MB/s of CSV")
print(f"epoch                             {steps} steps in {secs:.1f} s, {step_ms:.2f} ms a step")
print(f"from memory (bench, median of 20) {mem_ms:.2f} ms a step: files / memory = {step_ms / mem_ms:.3f}")
print(f"peak RSS                          planned {mib(planned)}, measured {mib(got)}, measured / planned = {got / planned:.3f}")
PY
