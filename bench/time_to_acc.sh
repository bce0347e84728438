#!/usr/bin/env bash
# Time to accuracy, clcnn against PyTorch on the same machine: trains the resnet preset on
# Fashion-MNIST with its recipe (clcnn_train --model resnet with the recipe's defaults;
# bench/torch_fashion.py, the same net and recipe in PyTorch on the CPU), first clcnn and then
# PyTorch, each for at most EPOCHS epochs with the test set evaluated after every one, and reports
# for each the first epoch whose test accuracy is at least TARGET and the wall-clock seconds from
# launching its process to the line that reports it (start-up, data loading, training, every test
# pass and, for clcnn, the earlier epochs' checkpoints included), then PyTorch's seconds over
# clcnn's. A run that reaches TARGET is stopped there: clcnn_train is killed as soon as its epoch
# line appears, torch_fashion.py stops itself (--target).
# ROUNDS=R (default 1) repeats the race R times, alternating which side goes first (clcnn first
# in odd rounds, PyTorch first in even ones: a load that drifts through a run then weighs on both
# sides alike), and reports every round, each side's median seconds and their ratio.
# Usage: bash bench/time_to_acc.sh [build-dir] [target] [epochs]
#   defaults: build 0.93 10. TARGET is a test accuracy in (0, 1]; EPOCHS also sets the length of
#   the one-cycle schedule on both sides, so runs of other EPOCHS are different runs.
#   clcnn_train runs on its default device (the first visible GPU, else the first device;
#   CLCNN_VISIBLE_DEVICES picks another) and writes its checkpoints to a temporary folder,
#   removed at the end; no TensorBoard events.
#   PyTorch: the pinned 2.x in ${CLCNN_BENCH_VENV:-BUILD/bench-venv}, made by bench/torch_venv.sh
#   on the first run; PYTHON=python3 runs that Python's torch instead (Debian's 1.13, say).
#   THREADS (default 2) PyTorch threads, and PoCL's threads when clcnn runs on PoCL's CPU device
#   (POCL_MAX_PTHREAD_COUNT, unless set). NCHW=1 runs PyTorch in NCHW instead of channels_last.
#   SEED (default 1) both sides' seed. CLCNN_TTA_DATA the Fashion-MNIST folder (default
#   /usr/share/datasets/fashion-mnist). CLCNN_TTA_LIMIT=N trains both sides on the first N
#   training images only (still testing on all 10,000), to check the script in minutes.
set -euo pipefail
me=time_to_acc.sh
die() {
    echo "$me: $*" >&2
    exit 1
}
build=${1:-build}
target=${2:-0.93}
epochs=${3:-10}
[ $# -le 3 ] || die "usage: bash bench/time_to_acc.sh [build-dir] [target] [epochs]"
here=$(cd "$(dirname "$0")" && pwd)
train=$build/clcnn_train
[ -x "$train" ] || die "no clcnn_train in $build (build it, or name the build folder)"
# Whether $1 is a whole number from $2 to $3.
whole() { [[ $1 =~ ^[0-9]{1,10}$ ]] && [ $((10#$1)) -ge "$2" ] && [ $((10#$1)) -le "$3" ]; }
awk -v t="$target" 'BEGIN {exit !(t ~ /^([0-9]*\.)?[0-9]+$/ && t > 0 && t <= 1)}' ||
    die "target must be a test accuracy in (0, 1], e.g. 0.93; got '$target'"
whole "$epochs" 1 10000 || die "epochs must be a whole number from 1 to 10000; got '$epochs'"
epochs=$((10#$epochs))
threads=${THREADS:-2}
whole "$threads" 1 4096 || die "THREADS must be a whole number from 1 to 4096; got '$threads'"
seed=${SEED:-1}
whole "$seed" 0 2147483647 || die "SEED must be a whole number below 2^31; got '$seed'"
rounds=${ROUNDS:-1}
whole "$rounds" 1 100 || die "ROUNDS must be a whole number from 1 to 100; got '$rounds'"
rounds=$((10#$rounds))
limit=${CLCNN_TTA_LIMIT:-}
[ -z "$limit" ] || whole "$limit" 1 1000000000 ||
    die "CLCNN_TTA_LIMIT must be a positive number of training images; got '$limit'"
data=${CLCNN_TTA_DATA:-/usr/share/datasets/fashion-mnist}
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte \
    t10k-labels-idx1-ubyte; do
    [ -f "$data/$f" ] || [ -f "$data/$f.gz" ] || die "no $f(.gz) in $data (set CLCNN_TTA_DATA)"
done
layout=channels_last
[ "${NCHW:-0}" = 0 ] || layout=NCHW
if [ -n "${PYTHON:-}" ]; then
    py=$PYTHON
    "$py" -c 'import torch' 2>/dev/null || die "$py cannot import torch"
else
    py=$(bash "$here/torch_venv.sh" "${CLCNN_BENCH_VENV:-$build/bench-venv}")
fi
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$HOME/.cache/pocl}
export POCL_MAX_PTHREAD_COUNT=${POCL_MAX_PTHREAD_COUNT:-$threads}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/clcnn-tta.XXXXXX")
pid=
cleanup() {
    [ -z "$pid" ] || kill "$pid" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# With CLCNN_TTA_LIMIT, clcnn reads a copy of the first N training images and labels.
cdata=$data
if [ -n "$limit" ]; then
    cdata=$tmp/fashion-mnist
    mkdir "$cdata"
    # The Python prints its own error line.
    "$py" - "$data" "$cdata" "$limit" <<'EOF' || exit 1
import gzip, os, struct, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for name, head, item in (("train-images-idx3-ubyte", 16, 784), ("train-labels-idx1-ubyte", 8, 1)):
    path = os.path.join(src, name)
    try:
        with open(path, "rb") if os.path.exists(path) else gzip.open(path + ".gz") as f:
            raw = f.read()
        total = struct.unpack(">I", raw[4:8])[0]
        if n > total:
            sys.exit("time_to_acc.sh: CLCNN_TTA_LIMIT=%d: the training set has %d images"
                     % (n, total))
        with open(os.path.join(dst, name), "wb") as f:
            f.write(raw[:4] + struct.pack(">I", n) + raw[8:head] + raw[head:head + n * item])
    except (OSError, EOFError, struct.error) as e:
        sys.exit("time_to_acc.sh: cannot copy the first %d items of %s: %s" % (n, path, e))
EOF
    for f in t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
        if [ -f "$data/$f" ]; then ln -s "$(realpath "$data/$f")" "$cdata/$f"; else
            ln -s "$(realpath "$data/$f.gz")" "$cdata/$f.gz"; fi
    done
fi

now() { echo "${EPOCHREALTIME/,/.}"; }
# Runs a command (the rest of the arguments) for side $1, echoing its epoch lines with the
# seconds since launch, until it ends or reports an epoch at or above the target, which kills it.
# Sets hit_epoch, hit_acc, hit_s (empty when not reached) and last_epoch.
race() {
    local name=$1 line t0 t e acc rc
    shift
    hit_epoch="" hit_acc="" hit_s="" last_epoch=0
    rm -f "$tmp/out" "$tmp/log"
    mkfifo "$tmp/out"
    t0=$(now)
    "$@" >"$tmp/out" 2>&1 &
    pid=$!
    exec 3<"$tmp/out"
    while IFS= read -r line <&3; do
        t=$(now)
        echo "$line" >>"$tmp/log"
        [[ $line =~ ^epoch\ ([0-9]+):.*test\ accuracy\ ([0-9.]+)\ \(([0-9]+)/([0-9]+)\) ]] ||
            continue
        e=${BASH_REMATCH[1]}
        acc=$(awk -v h="${BASH_REMATCH[3]}" -v n="${BASH_REMATCH[4]}" 'BEGIN {printf "%.4f", h / n}')
        last_epoch=$e
        printf '%s epoch %d: test accuracy %s after %.1f s\n' "$name" "$e" "$acc" \
            "$(awk -v a="$t" -v b="$t0" 'BEGIN {print a - b}')"
        if awk -v h="${BASH_REMATCH[3]}" -v n="${BASH_REMATCH[4]}" -v g="$target" \
            'BEGIN {exit !(h / n >= g)}'; then
            hit_epoch=$e hit_acc=$acc hit_s=$(awk -v a="$t" -v b="$t0" 'BEGIN {printf "%.1f", a - b}')
            kill "$pid" 2>/dev/null || true
            break
        fi
    done
    exec 3<&-
    rc=0
    wait "$pid" || rc=$?
    pid=
    if [ -z "$hit_epoch" ] && [ "$rc" -ne 0 ]; then
        die "$name failed (exit $rc): $(tail -n 2 "$tmp/log" 2>/dev/null | tr '\n' ' ')"
    fi
    [ -n "$hit_epoch" ] || [ "$last_epoch" -gt 0 ] || die "$name printed no epoch line"
}

tver=$("$py" -c 'import torch; print(torch.__version__)')
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), host: $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "command: bash bench/time_to_acc.sh $build $target $epochs${limit:+ (CLCNN_TTA_LIMIT=$limit)}"
# The default device (marked * by --list-devices) as --version names it: P:D, name, platform.
pd=$("$train" --list-devices 2>/dev/null | awk '$NF == "*" {print $2; exit}' || true)
dev=$("$train" --version | grep -m1 -F "OpenCL device $pd: " | cut -d' ' -f3- |
    awk -F' [|] ' '{sub(/  .*/, "", $2); print $1 " (" $2 ")"}' || true)
echo "clcnn: $("$train" --version | head -n 1), device ${dev:-unknown}," \
    "POCL_MAX_PTHREAD_COUNT=$POCL_MAX_PTHREAD_COUNT"
echo "pytorch: $tver ($py), $threads threads, $layout"
echo "recipe: resnet preset, ${limit:-60000} training images, seed $seed, target $target," \
    "at most $epochs epochs"

echo "rounds: $rounds (odd rounds clcnn first, even rounds PyTorch first)"

run_clcnn() {
    race clcnn "$train" --model resnet --epochs "$epochs" --seed "$seed" --data "$cdata" \
        --save-dir "$tmp/model" --no-tensorboard
    c_epoch=$hit_epoch c_acc=$hit_acc c_s=$hit_s
    rm -rf "$tmp/model"
}
nchw=
[ "$layout" = channels_last ] || nchw=--nchw
run_pytorch() {
    race pytorch env OMP_NUM_THREADS="$threads" "$py" "$here/torch_fashion.py" --epochs "$epochs" \
        --threads "$threads" --seed "$seed" --target "$target" --data "$data" \
        ${limit:+--limit-train "$limit"} ${nchw:+"$nchw"}
    p_epoch=$hit_epoch p_acc=$hit_acc p_s=$hit_s
}

pct=$(awk -v t="$target" 'BEGIN {printf "%.1f%%", 100 * t}')
result() {
    if [ -n "$2" ]; then
        echo "$1: $pct at epoch $2 after $4 s (test accuracy $3)"
    else
        echo "$1: $pct not reached in $epochs epochs"
    fi
}
ratio() {
    if [ -n "$2" ] && [ -n "$1" ]; then
        awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'
    else
        echo "none (not reached by both)"
    fi
}
# The median of the arguments (none: empty).
median() {
    [ $# -gt 0 ] || return 0
    printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {
        if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
c_all=() p_all=()
for ((r = 1; r <= rounds; r++)); do
    [ "$rounds" -eq 1 ] || echo "round $r"
    if ((r % 2)); then run_clcnn; run_pytorch; else run_pytorch; run_clcnn; fi
    [ "$rounds" -eq 1 ] || echo "round $r: clcnn ${c_s:-none} s, pytorch ${p_s:-none} s," \
        "ratio pytorch/clcnn $(ratio "$p_s" "$c_s")"
    [ -z "$c_s" ] || c_all+=("$c_s")
    [ -z "$p_s" ] || p_all+=("$p_s")
done

result clcnn "$c_epoch" "$c_acc" "$c_s"
result "pytorch $tver $layout" "$p_epoch" "$p_acc" "$p_s"
if [ "$rounds" -eq 1 ]; then
    echo "ratio pytorch/clcnn seconds: $(ratio "$p_s" "$c_s")"
else
    cm=$(median "${c_all[@]}") pm=$(median "${p_all[@]}")
    echo "medians over $rounds rounds: clcnn ${cm:-none} s (${#c_all[@]} reached)," \
        "pytorch ${pm:-none} s (${#p_all[@]} reached)"
    echo "ratio pytorch/clcnn of the medians: $(ratio "$pm" "$cm")"
fi
