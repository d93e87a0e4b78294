#!/usr/bin/env bash
# Two tensorfit builds on the seed network at chosen cells, many alternating pairs each
# (old then new, new then old, ...), the median of each build's `tensorfit bench` figures:
# the follow-up of scripts/ab-seed-shapes.sh for cells whose four runs disagree.
#
#   BEFORE=/path/old/tensorfit AFTER=target/release/tensorfit PAIRS=8 ITERS=5 \
#       scripts/ab-cells.sh "train 32 50" "infer 100 2000"      # "mode batch length"
#
# The truncated-BPTT length is the sequence's; MODEL (default seed) names another model.
# Figures go in docs/cpu-performance.md.
set -u
: "${BEFORE:?set BEFORE to the old tensorfit binary}" "${AFTER:=target/release/tensorfit}"
export VK_ICD_FILENAMES=/nonexistent
ms() { "$@" --json 2>/dev/null | python3 -c "import json,sys; print(round(json.load(sys.stdin)['ms_per_step'], 2))"; }
for cell in "$@"; do set -- $cell; mode=$1 b=$2 t=$3
  a=(bench --model "${MODEL:-seed}" --device cpu --mode $mode --batch $b --seq-len $t --tbptt $t --iters ${ITERS:-5})
  o=(); n=()
  for i in $(seq 1 ${PAIRS:-6}); do
    if [ $((i % 2)) = 1 ]; then o+=($(ms "$BEFORE" "${a[@]}")); n+=($(ms "$AFTER" "${a[@]}"));
    else n+=($(ms "$AFTER" "${a[@]}")); o+=($(ms "$BEFORE" "${a[@]}")); fi
  done
  python3 -c "
import statistics as s; o=[float(x) for x in '${o[*]}'.split()]; n=[float(x) for x in '${n[*]}'.split()]
print('$mode B=$b T=$t: old median %.2f (%s) new median %.2f (%s) new/old %.3f' % (s.median(o), ' '.join(map(str,o)), s.median(n), ' '.join(map(str,n)), s.median(n)/s.median(o)))"
done
