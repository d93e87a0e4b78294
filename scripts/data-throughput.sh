#!/usr/bin/env bash
# Training throughput from a long CSV against the reader's read-ahead depth, and the
# process's resident memory against the plan's host section, on the CPU backend.
#
# Writes a long CSV of N sequences of T steps of F features (a label per sequence) and the
# same data as safetensors (the fast reader, for comparison), then trains one epoch of an
# LSTM on each (`train --data … --epochs 1 --val-fraction 0 --json`) with --read-ahead
# 0, 1, 2, 4 and 8, and prints a table: seconds of the epoch, steps/s, CSV MB/s, and the
# planned against the measured peak RSS (`planned_resident_bytes`, `peak_resident_bytes`).
# The figures go in docs/data.md with the date and machine.
#
#   scripts/data-throughput.sh                 # builds the release binary first
#   BIN=target/release/tensorfit N=4000 scripts/data-throughput.sh
. "$(dirname "$0")/measuring.sh"
N="${N:-2000}" T="${T:-100}" F="${F:-16}" BATCH="${BATCH:-32}" HIDDEN="${HIDDEN:-64}"

python3 - "$DIR" "$N" "$T" "$F" <<'EOF'
import random, struct, sys
sys.path.insert(0, "scripts")
from sequences_safetensors import write_sequences
d, n, t, f = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(7)
xs, labels = [], []
with open(f"{d}/data.csv", "w") as out:
    out.write("sequence,step," + ",".join(f"f{k}" for k in range(f)) + ",label\n")
    for i in range(n):
        rows = [[rng.gauss(0, 1) for _ in range(f)] for _ in range(t)]
        label = max(range(3), key=lambda k: sum(r[k] for r in rows))
        xs.extend(v for r in rows for v in r)
        labels.append(label)
        for s, r in enumerate(rows):
            vals = ",".join(f"{v:.5f}" for v in r)
            out.write(f"s{i},{s},{vals},{label if s == t - 1 else ''}\n")
write_sequences(f"{d}/data.safetensors", struct.pack(f"<{len(xs)}f", *xs), [n, t, f], labels)
EOF
scripts/lstm-classifier-toml.sh "$F" "$HIDDEN" 3 > "$DIR/model.toml"

csv_mb="$(python3 -c "import os,sys; print(os.path.getsize(sys.argv[1]) / 1e6)" "$DIR/data.csv")"
echo "$N sequences x $T steps x $F features: CSV ${csv_mb} MB; batch $BATCH, LSTM $HIDDEN, cpu, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
printf '%-12s %10s %8s %9s %9s %14s %14s %7s\n' file read-ahead seconds steps/s "MB/s" "planned RSS" "measured RSS" ratio
for file in data.csv data.safetensors; do
    for ahead in 0 1 2 4 8; do
        line="$("$BIN" train --model "$DIR/model.toml" --data "$DIR/$file" --epochs 1 \
            --val-fraction 0 --batch "$BATCH" --read-ahead "$ahead" --device cpu --json 2>/dev/null | tail -1)"
        python3 - "$file" "$ahead" "$csv_mb" "$line" <<'EOF'
import json, sys
file, ahead, mb, v = sys.argv[1], sys.argv[2], float(sys.argv[3]), json.loads(sys.argv[4])
secs, steps = v["seconds"], v["steps"]
planned, got = v["planned_resident_bytes"], v["peak_resident_bytes"]
mib = lambda b: f"{b / 2**20:.1f} MiB"
rate = f"{mb / secs:.1f}" if file.endswith(".csv") else "-"
print(f"{file:<12} {ahead:>10} {secs:>8.2f} {steps / secs:>9.1f} {rate:>9} {mib(planned):>14} {mib(got):>14} {got / planned:>7.3f}")
EOF
    done
done
