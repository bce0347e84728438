#!/usr/bin/env bash
# clcnn against PyTorch on the same CPU, side by side in one run: the same model, batch, input
# and number of SGD steps on synthetic data, alternating the two programs RUNS times and
# reporting the median images/s of each and their ratio. Also measures the device's fp32 peak
# (clcnn's FMA kernel) so the figures can be read as a fraction of it.
# Usage: bash bench/compare.sh [build-dir] [runs] [steps] [model]
#   defaults: build 3 30 seed. PyTorch: Debian's python3-torch (or any torch), 2 threads.
set -euo pipefail
build=${1:-build}
runs=${2:-3}
steps=${3:-30}
model=${4:-seed}
# The first Python that has torch: $PYTHON, python3 on PATH, or Debian's /usr/bin/python3.
py=${PYTHON:-}
for cand in python3 /usr/bin/python3; do
    [ -n "$py" ] && break
    "$cand" -c 'import torch' 2>/dev/null && py=$cand
done
[ -n "$py" ] || { echo "compare.sh: no Python with torch (apt-get install python3-torch)" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$HOME/.cache/pocl}
threads=${THREADS:-2}
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), host: $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "command: bash bench/compare.sh $build $runs $steps $model"
"$build/bench_train" --model "$model" --steps 1 --warmup 0 --peak | grep -E '^device|^peak|^start-up'
c=(); p=()
for i in $(seq "$runs"); do
    c+=("$("$build/bench_train" --model "$model" --steps "$steps" --warmup 3 |
           sed -n 's/^clcnn: \([0-9.]*\) images.*/\1/p')")
    p+=("$(OMP_NUM_THREADS=$threads "$py" "$here/pytorch_bench.py" --model "$model" --steps "$steps" \
           --threads "$threads" | sed -n 's/.*: \([0-9.]*\) images.*/\1/p')")
    echo "run $i: clcnn ${c[-1]} images/s, pytorch ${p[-1]} images/s"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
mc=$(median "${c[@]}"); mp=$(median "${p[@]}")
echo "median: clcnn $mc images/s, pytorch $mp images/s ($threads threads), ratio $(awk -v a="$mc" -v b="$mp" 'BEGIN {printf "%.2f", a / b}')x"
