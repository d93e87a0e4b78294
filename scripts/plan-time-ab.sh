#!/usr/bin/env bash
# Planning time of two builds, interleaved: for each job, the two binaries run one after
# the other, ROUNDS times; the table shows each one's median of the time `plan` reports
# ("planned in N ms": discovery excluded, the decision included) and, for --max-batch,
# the median wall time of the whole command. CPU only (--device cpu).
#
#   A=old/target/release/tensorfit B=target/release/tensorfit scripts/plan-time-ab.sh
set -euo pipefail
cd "$(dirname "$0")/.."
: "${A:?the first binary}" "${B:?the second binary}"
ROUNDS="${ROUNDS:-5}"
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
printf '[input]\nkind = "dense"\nfeatures = 152\n\n[recurrent]\ncell = "lstm"\nhidden = 1024\nlayers = 2\n\n[head]\non = "last"\nlayers = []\n\n[loss]\nkind = "cross_entropy"\nclasses = 6\n' >"$DIR/h1024.toml"
C="--model examples/data/classify_model.toml --data examples/data/classify.safetensors"
JOBS=(
    "seed train B=100 T=2000 TBPTT 50|--mode train --batch 100 --seq-len 2000 --tbptt 50"
    "seed infer B=100 T=2000|--mode infer --batch 100 --seq-len 2000"
    "LSTM 1024x2 train B=1 T=500|--model $DIR/h1024.toml --mode train --batch 1 --seq-len 500 --tbptt 500"
    "LSTM 1024x2 train B=32 T=100|--model $DIR/h1024.toml --mode train --batch 32 --seq-len 100 --tbptt 100"
    "classify from a file|$C"
    "seed train --max-batch (wall)|--mode train --batch 100 --seq-len 200 --tbptt 50 --max-batch"
)
ms() { # the binary, then plan's arguments: milliseconds
    local bin="$1"; shift
    if [[ " $* " == *" --max-batch "* ]]; then
        local s e; s=$(date +%s%N); "$bin" plan "$@" --device cpu >/dev/null 2>&1; e=$(date +%s%N)
        echo $(( (e - s) / 1000000 ))
    else
        "$bin" plan "$@" --device cpu 2>/dev/null | sed -n 's/^planned in \([0-9.]*\) ms$/\1/p'
    fi
}
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
printf '%-36s %10s %10s %7s\n' "job (cpu)" "A ms" "B ms" "B/A"
for job in "${JOBS[@]}"; do
    name="${job%%|*}"; args="${job#*|}"
    # shellcheck disable=SC2086
    { ms "$A" $args >/dev/null; ms "$B" $args >/dev/null; } # warm the caches
    : >"$DIR/a"; : >"$DIR/b"
    for _ in $(seq "$ROUNDS"); do
        # shellcheck disable=SC2086
        ms "$A" $args >>"$DIR/a"
        # shellcheck disable=SC2086
        ms "$B" $args >>"$DIR/b"
    done
    a=$(median <"$DIR/a"); b=$(median <"$DIR/b")
    printf '%-36s %10s %10s %7.2f\n' "$name" "$a" "$b" "$(echo "$b / $a" | bc -l)"
done
