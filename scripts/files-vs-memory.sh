#!/usr/bin/env bash
# Issue 17's "at most 5% slower per step than from memory": the seed network (152 one-hot
# features -> 3 x LSTM 250 -> BN -> Dense -> BN -> softmax over 6 classes) trained through
# the CLI on the CPU from memory, from a DL4J-style CSV sequence directory and from a
# safetensors file holding the same shape of data. From memory twice: `bench` (one batch
# trained on again and again: no data work at all, the median step) and `train` on the
# built-in task (a batch generated in memory before each step; its closing evaluation,
# inside the loop's seconds, on one sequence). The four runs take turns
# in each round (the order rotates) and the table gives the median over rounds of each
# run's milliseconds per step (for `train`, the training loop's seconds over its steps:
# the files' scan and the plan are before it).
#
#   scripts/files-vs-memory.sh                      # builds the release binary first
#   BIN=target/release/tensorfit ROUNDS=7 STEPS=40 T=50 BATCH=32 scripts/files-vs-memory.sh
#
# The files hold STEPS x BATCH sequences of T steps (one epoch is STEPS steps), a random
# symbol's one-hot vector a step ("0"/"1" in the CSV, as the seed user's character data
# would be), a class a sequence. Figures go in docs/data.md with date, machine and command.
. "$(dirname "$0")/measuring.sh"
ROUNDS="${ROUNDS:-5}" STEPS="${STEPS:-40}" T="${T:-50}" BATCH="${BATCH:-32}" AHEAD="${AHEAD:-4}"

python3 - "$DIR" "$((STEPS * BATCH))" "$T" <<'PY'
import os, random, struct, sys
sys.path.insert(0, "scripts")
from sequences_safetensors import write_sequences
d, n, t = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
features, classes = 152, 6
rng = random.Random(17)
os.makedirs(f"{d}/dl4j/features")
os.makedirs(f"{d}/dl4j/labels")
onehot = ["0," * k + "1" + ",0" * (features - 1 - k) + "\n" for k in range(features)]
xs, labels = bytearray(), []
for i in range(n):
    symbols = [rng.randrange(features) for _ in range(t)]
    label = rng.randrange(classes)
    with open(f"{d}/dl4j/features/{i}.csv", "w") as out:
        out.write("".join(onehot[s] for s in symbols))
    with open(f"{d}/dl4j/labels/{i}.csv", "w") as out:
        out.write(f"{label}\n")
    for s in symbols:
        row = [0.0] * features
        row[s] = 1.0
        xs += struct.pack(f"<{features}f", *row)
    labels.append(label)
write_sequences(f"{d}/data.safetensors", bytes(xs), [n, t, features], labels)
PY

csv_mb="$(du -sm --apparent-size "$DIR/dl4j/features" | cut -f1)"
echo "seed network, batch $BATCH, T $T, $STEPS steps a run, read-ahead $AHEAD; CSV directory ${csv_mb} MB; cpu, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
common=(--model seed --batch "$BATCH" --device cpu --json)
run() {
    case "$1" in
    bench) "$BIN" bench --model seed --mode train --batch "$BATCH" --seq-len "$T" --tbptt "$T" \
        --iters "$STEPS" --device cpu --json ;;
    memory) "$BIN" train "${common[@]}" --seq-len "$T" --tbptt "$T" --steps "$STEPS" --eval-every 0 --eval-batch 1 ;;
    csv) "$BIN" train "${common[@]}" --data "$DIR/dl4j" --epochs 1 --val-fraction 0 --read-ahead "$AHEAD" ;;
    safetensors) "$BIN" train "${common[@]}" --data "$DIR/data.safetensors" --epochs 1 --val-fraction 0 --read-ahead "$AHEAD" ;;
    esac 2>/dev/null | tail -1 | python3 -c '
import json, sys
v = json.load(sys.stdin)
print("%.2f" % (v["ms_per_step"] if "ms_per_step" in v else v["seconds"] * 1e3 / v["steps"]))'
}
kinds=(bench memory csv safetensors)
: > "$DIR/times"
for round in $(seq 1 "$ROUNDS"); do
    for k in 0 1 2 3; do
        kind="${kinds[$(((round + k) % 4))]}"
        ms="$(run "$kind")"
        echo "round $round $kind $ms ms/step"
        echo "$kind $ms" >> "$DIR/times"
    done
done
python3 - "$DIR/times" <<'PY'
import statistics, sys
times = {}
for line in open(sys.argv[1]):
    kind, ms = line.split()
    times.setdefault(kind, []).append(float(ms))
bench, mem = statistics.median(times["bench"]), statistics.median(times["memory"])
print(f"{'source':<12} {'median ms/step':>15} {'range':>17} {'/ bench':>8} {'/ memory':>9}")
for kind in ("bench", "memory", "csv", "safetensors"):
    ts = times[kind]
    med = statistics.median(ts)
    print(f"{kind:<12} {med:>15.2f} {min(ts):>8.2f}-{max(ts):<8.2f} {med / bench:>8.3f} {med / mem:>9.3f}")
PY
