#!/usr/bin/env bash
# Two tensorfit builds on the seed network (H = 250) across batch x length, inference and
# training, alternating per cell (before, after, after, before) so that the machine's
# drift hits both alike. Prints milliseconds per run of `tensorfit bench`.
#
#   BEFORE=/path/to/old/tensorfit AFTER=target/release/tensorfit scripts/ab-seed-shapes.sh
#
# Build the old binary from a worktree of the old commit. Run it with `nice -n -19` on a
# shared machine.
set -u
: "${BEFORE:?set BEFORE to the old tensorfit binary}" "${AFTER:=target/release/tensorfit}"
export VK_ICD_FILENAMES=/nonexistent RAYON_NUM_THREADS=${RAYON_NUM_THREADS:-2}
ms() {
    "$@" --json 2>/dev/null |
        python3 -c "import json,sys; print(round(json.load(sys.stdin)['ms_per_step'], 2))" 2>/dev/null ||
        echo "-"
}
for mode in infer train; do for b in 1 8 32 100; do for t in 10 50 200 2000; do
    # BatchNorm in training mode needs two sequences.
    [ "$mode" = train ] && [ "$b" = 1 ] && continue
    tb=$t; [ "$mode" = train ] && [ "$t" = 2000 ] && tb=50
    it=5; [ $((b * t)) -ge 20000 ] && it=2
    a=(bench --model seed --device cpu --mode "$mode" --batch "$b" --seq-len "$t" --tbptt "$tb" --iters "$it")
    o1=$(ms "$BEFORE" "${a[@]}"); n1=$(ms "$AFTER" "${a[@]}")
    n2=$(ms "$AFTER" "${a[@]}"); o2=$(ms "$BEFORE" "${a[@]}")
    echo "$mode B=$b T=$t TBPTT=$tb: before $o1 $o2 after $n1 $n2"
done; done; done
