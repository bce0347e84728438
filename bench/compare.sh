#!/usr/bin/env bash
# clcnn against PyTorch on the same CPU, side by side in one run: for each model the same batch,
# input and number of training steps on synthetic data, alternating clcnn, PyTorch in NCHW and
# PyTorch in channels_last RUNS times, reporting the median images/s of each and clcnn's ratio
# to each PyTorch layout. Also measures the device's fp32 peak (clcnn's FMA kernel) so the
# figures can be read as a fraction of it.
# Usage: bash bench/compare.sh [build-dir] [runs] [steps] [model...]
#   defaults: build 3 30 seed resnet. A model is a preset name or a spec (one argument). The
#   resnet preset runs batch 256 on 1x28x28 (its recipe, Fashion-MNIST's shape), any other model
#   batch 64 on 3x32x32; BATCH= and INPUT= (CxHxW) set them for every model.
#   PyTorch: the pinned 2.x in ${CLCNN_BENCH_VENV:-BUILD/bench-venv}, made by bench/torch_venv.sh
#   on the first run; PYTHON=python3 runs that Python's torch instead (Debian's 1.13, say).
#   THREADS (default 2) PyTorch threads. bench_train trains every model with clcnn's default
#   optimizer (SGD lr 0.01); pytorch_bench.py the resnet preset with its recipe's Nesterov
#   momentum and weight decay (element-wise passes over 0.4 M parameters per step).
set -euo pipefail
build=${1:-build}
runs=${2:-3}
steps=${3:-30}
models=("${@:4}")
[ ${#models[@]} -gt 0 ] || models=(seed resnet)
here=$(cd "$(dirname "$0")" && pwd)
if [ -n "${PYTHON:-}" ]; then
    py=$PYTHON
    "$py" -c 'import torch' 2>/dev/null ||
        { echo "compare.sh: $py cannot import torch" >&2; exit 1; }
else
    py=$(bash "$here/torch_venv.sh" "${CLCNN_BENCH_VENV:-$build/bench-venv}")
fi
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$HOME/.cache/pocl}
threads=${THREADS:-2}
# The batch and input of model $1: "BATCH CxHxW".
shape() {
    local b=64 i=3x32x32
    if [ "$(echo "$1" | tr '[:upper:]' '[:lower:]')" = resnet ]; then b=256 i=1x28x28; fi
    echo "${BATCH:-$b} ${INPUT:-$i}"
}
# Runs a benchmark command and prints the images/s of its result line.
rate() {
    local out v
    out=$("$@" 2>&1) || { echo "compare.sh: failed: $*: $(echo "$out" | tail -n 2)" >&2; return 1; }
    v=$(echo "$out" | sed -n 's/.*: \([0-9.]*\) images\/s.*/\1/p' | tail -n 1)
    [ -n "$v" ] || { echo "compare.sh: no images/s from: $*" >&2; return 1; }
    echo "$v"
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), host: $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "command: bash bench/compare.sh $build $runs $steps ${models[*]}"
echo "pytorch: $("$py" -c 'import torch; print(torch.__version__)') ($py), $threads threads"
read -r b0 i0 <<<"$(shape "${models[0]}")"
"$build/bench_train" --model "${models[0]}" --batch "$b0" --input "$i0" --steps 1 --warmup 0 \
    --peak |
    grep -E '^device|^peak|^start-up'
for model in "${models[@]}"; do
    read -r batch input <<<"$(shape "$model")"
    echo "model: $model, batch $batch, input $input, $steps steps after 3 warm-up"
    c=(); p=(); l=()
    for i in $(seq "$runs"); do
        c+=("$(rate "$build/bench_train" --model "$model" --batch "$batch" --input "$input" \
                    --steps "$steps" --warmup 3)")
        for cl in "" --channels-last; do
            v=$(rate env OMP_NUM_THREADS="$threads" "$py" "$here/pytorch_bench.py" \
                    --model "$model" --batch "$batch" --input "$input" --steps "$steps" --warmup 3 \
                    --threads "$threads" ${cl:+"$cl"})
            if [ -z "$cl" ]; then p+=("$v"); else l+=("$v"); fi
        done
        echo "run $i: clcnn ${c[-1]}, pytorch NCHW ${p[-1]}," \
            "pytorch channels_last ${l[-1]} images/s"
    done
    mc=$(median "${c[@]}"); mp=$(median "${p[@]}"); ml=$(median "${l[@]}")
    echo "median $model: clcnn $mc, pytorch NCHW $mp, pytorch channels_last $ml images/s" \
        "($threads threads); clcnn/NCHW $(ratio "$mc" "$mp")x," \
        "clcnn/channels_last $(ratio "$mc" "$ml")x"
done
