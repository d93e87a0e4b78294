#!/usr/bin/env bash
# Two builds of tensorfit against each other, cell by cell: the matrix server of each
# (benches/matrix.rs, built with `cargo bench --bench matrix --no-run`, each checkout in
# its own CARGO_TARGET_DIR) is fed the same cell in turns, the order alternating by
# round; prints every figure, then per cell the medians in ms and after / before.
#
#   benches/compare/matrix_ab.sh BEFORE_BIN AFTER_BIN [ROUNDS]
#   CELLS="infer,1,200,200,1024 train,32,50,50,250" benches/compare/matrix_ab.sh ...
#
# A cell is mode,batch,length,tbptt,hidden. The default cells span batch 1-100, length
# 10-2000 and hidden 64-1024, training and inference.
set -euo pipefail
before=$1 after=$2 rounds=${3:-3}
export RAYON_NUM_THREADS=${RAYON_NUM_THREADS:-2}
CELLS=${CELLS:-"train,32,50,50,250 infer,100,200,200,250 train,8,200,200,64 infer,8,50,50,64 infer,1,2000,2000,250 train,32,2000,50,250 train,32,200,200,1024 infer,32,50,50,1024 infer,100,10,10,1024 train,100,50,50,64"}
out=$(mktemp)
for r in $(seq 1 "$rounds"); do
  for cell in $CELLS; do
    IFS=, read -r mode batch len tbptt hidden <<< "$cell"
    line="{\"mode\":\"$mode\",\"batch\":$batch,\"seq_len\":$len,\"tbptt\":$tbptt,\"hidden\":$hidden,\"min_runs\":3,\"min_seconds\":0.5}"
    if (( r % 2 )); then order="before after"; else order="after before"; fi
    for who in $order; do
      bin=$before; [ "$who" = after ] && bin=$after
      ms=$(echo "$line" | "$bin" | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["ms"])')
      echo "round $r $who $cell $ms" | tee -a "$out"
    done
  done
done
python3 - "$out" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    _, _, who, cell, ms = line.split()
    d[cell, who].append(float(ms))
print("| cell (mode,B,T,L,H) | before ms | after ms | after / before |\n|---|---|---|---|")
for cell in dict.fromkeys(c for c, _ in d):
    b, a = statistics.median(d[cell, "before"]), statistics.median(d[cell, "after"])
    print(f"| {cell} | {b:.1f} | {a:.1f} | {a / b:.2f} |")
PY
rm -f "$out"
