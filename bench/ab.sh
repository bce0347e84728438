#!/usr/bin/env bash
# Two builds of clcnn side by side in one run: bench_train of build A and of build B alternate
# (A first on odd rounds, B first on even ones, so a drifting machine load falls on both), and
# the median images/s of each and B's ratio to A are printed per model.
# Usage: bash bench/ab.sh BUILD_A BUILD_B [rounds]   (default 7; resnet takes 5)
#   e.g. bash bench/ab.sh old/build build    the models: seed at batch 64 on 3x32x32 (30 steps)
#   and resnet at batch 256 on 1x28x28 (10 steps), as bench/compare.sh.
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,8p "$0"; exit 2; }
a=$1/bench_train b=$2/bench_train rounds=${3:-7}
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$HOME/.cache/pocl}
rate() { "$@" 2>&1 | sed -n 's/.*: \([0-9.]*\) images\/s.*/\1/p' | tail -n 1; }
med() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {
    print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
run() { # model batch input steps rounds
    local A=() B=() args=(--model "$1" --batch "$2" --input "$3" --steps "$4" --warmup 3)
    for i in $(seq "$5"); do
        if [ $((i % 2)) = 1 ]; then
            A+=("$(rate "$a" "${args[@]}")") B+=("$(rate "$b" "${args[@]}")")
        else
            B+=("$(rate "$b" "${args[@]}")") A+=("$(rate "$a" "${args[@]}")")
        fi
    done
    echo "$1 batch $2 on $3: A ${A[*]} | B ${B[*]}"
    awk -v m="$1" -v x="$(med "${A[@]}")" -v y="$(med "${B[@]}")" 'BEGIN {
        printf "%s median images/s: A %.1f, B %.1f, B/A %.3f\n", m, x, y, y / x }'
}
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
run seed 64 3x32x32 30 "$rounds"
run resnet 256 1x28x28 10 $((rounds < 5 ? rounds : 5))
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
