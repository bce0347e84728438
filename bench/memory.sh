#!/usr/bin/env bash
# Device memory of one training step, measured the same way for any clcnn_train binaries: each
# runs one step of every model under bench/devmem.c (an LD_PRELOAD shim that follows
# clCreateBuffer and clReleaseMemObject) and the peak of the bytes held in OpenCL buffers is
# printed, with each binary's ratio to the first. The figure is the whole process's: the model's
# buffers, the context's, and the data set's device copy.
# Usage: bash bench/memory.sh DATA "MODEL:BATCH ..." CLCNN_TRAIN [CLCNN_TRAIN ...]
#   e.g. bash bench/memory.sh /usr/share/datasets/fashion-mnist "seed:64 resnet:256" \
#            old/clcnn_train build/clcnn_train
set -euo pipefail
[ $# -ge 3 ] || { sed -n 2,10p "$0"; exit 2; }
data=$1
models=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -shared -fPIC "$here/devmem.c" -o "$work/devmem.so" -ldl
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$HOME/.cache/pocl}
for mb in $models; do
    model=${mb%%:*} batch=${mb##*:} first=
    for bin in "$@"; do
        peak=$(LD_PRELOAD="$work/devmem.so" "$bin" --data "$data" --model "$model" \
            --batch-size "$batch" --max-steps 1 --no-tensorboard --save-dir "$work/save" 2>&1 |
            sed -n 's/^devmem: peak \([0-9]*\) bytes.*/\1/p' | sort -n | tail -1)
        rm -rf "$work/save"
        [ -n "$first" ] || first=$peak
        awk -v m="$model" -v b="$batch" -v bin="$bin" -v p="$peak" -v f="$first" 'BEGIN {
            printf "%-10s batch %-4s %-40s %8.1f MiB  %.3f of the first\n", m, b, bin,
                   p / 1048576, f ? p / f : 0 }'
    done
done
