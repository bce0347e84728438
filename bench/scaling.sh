#!/usr/bin/env bash
# Usage: bash bench/scaling.sh [CLCNN_TRAIN] [RUNS] [STEPS]
#   defaults: build/clcnn_train 1 60. Environment: MPIEXEC (default: mpirun on PATH),
#   WARMUP (steps left out of the figure, default 10).
# Data-parallel scaling of clcnn_train on this machine's CPU through PoCL: images/s of the seed
# model at global batch 128 on synthetic CIFAR-10 (tests/make_cifar.py), for
#   (a) one 'basic' device (one core)                   POCL_DEVICES=basic
#   (b) two 'basic' devices in one process              POCL_DEVICES="basic basic" --devices 0,1
#   (c) two MPI ranks, each its own 'basic' device      POCL_DEVICES=basic mpirun -np 2
#   (d) two MPI ranks with two devices each (4 replicas) POCL_DEVICES="basic basic" mpirun -np 2
#       --devices 0,1
#   (e) one 'pthread' device (every core), for reference POCL_DEVICES=pthread
# The figure is STEPS * 128 images over the elapsed time between the metrics records of step
# WARMUP and step WARMUP + STEPS (start-up, the first steps and the final evaluation and save
# are left out); the median of RUNS runs, the configurations taking turns. Each run's
# "data-parallel, per step" line (averages over all of its steps, warm-up included) says where
# the time goes. (c) and (d) are left out when there is no mpirun.
set -uo pipefail
bin=${1:-build/clcnn_train}
runs=${2:-1}
steps=${3:-60}
warmup=${WARMUP:-10}
batch=128
here=$(cd "$(dirname "$0")" && pwd)
[ -x "$bin" ] || { echo "scaling.sh: $bin is not an executable (build clcnn_train first)" >&2; exit 1; }
mpiexec=${MPIEXEC:-$(command -v mpirun)}
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$HOME/.cache/pocl}
# Open MPI as root (containers), more ranks than cores, no cross-memory attach in containers.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

total=$((warmup + steps))
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), host: $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "command: bash bench/scaling.sh $bin $runs $steps (warm-up $warmup steps, batch $batch)"
echo "writing $((total * batch)) synthetic CIFAR-10 images (one epoch of $total steps)..."
python3 "$here/../tests/make_cifar.py" "$work/data" $((total * batch)) 64 >/dev/null ||
    { echo "scaling.sh: cannot write the data set" >&2; exit 1; }
common=(--data "$work/data" --model seed --batch-size "$batch" --epochs 1 --max-steps "$total"
        --log-every "$warmup" --no-tensorboard --save-dir "$work/ck")
mpi=("$mpiexec" -np 2)
"$mpiexec" --version 2>&1 | grep -q 'Open MPI' && mpi=("$mpiexec" --oversubscribe -np 2)

names=(a b e)
declare -A title envs
title[a]="(a) 1 basic device";            envs[a]="basic"
title[b]="(b) --devices 0,1, 2 basic";    envs[b]="basic basic"
title[c]="(c) mpirun -np 2, basic each";  envs[c]="basic"
title[d]="(d) mpirun -np 2 --devices 0,1"; envs[d]="basic basic"
title[e]="(e) 1 pthread device (2 cores)"; envs[e]="pthread"
if [ -n "$mpiexec" ] && command -v "$mpiexec" >/dev/null; then
    names=(a b c d e)
else
    echo "no mpirun (set MPIEXEC): (c) and (d) left out"
fi

# One run of configuration $1, run $2: prints its images/s (empty on failure).
run_one() {
    local n=$1 i=$2 m="$work/$1.$2.jsonl" cmd=("$bin") two="0,1"
    case $n in
        b) cmd+=(--devices "$two") ;;
        c) cmd=("${mpi[@]}" "$bin") ;;
        d) cmd=("${mpi[@]}" "$bin" --devices "$two") ;;
    esac
    rm -f "$m"
    POCL_DEVICES=${envs[$n]} "${cmd[@]}" "${common[@]}" --metrics "$m" >"$work/$n.$i.out" 2>&1 ||
        { echo "scaling.sh: ${title[$n]} failed: $(tail -3 "$work/$n.$i.out")" >&2; return; }
    awk -v a="$warmup" -v b="$total" -v imgs=$((steps * batch)) '
        /"type":"train"/ { s = $0; sub(/.*"step":/, "", s); s += 0
                           e = $0; sub(/.*"elapsed_s":/, "", e); e += 0; t[s] = e }
        END { if ((a in t) && (b in t) && t[b] > t[a]) printf "%.1f\n", imgs / (t[b] - t[a]) }' "$m"
}

declare -A got
for i in $(seq "$runs"); do
    for n in "${names[@]}"; do
        v=$(run_one "$n" "$i")
        got[$n]="${got[$n]:-} $v"
        echo "run $i ${title[$n]}: ${v:-failed} images/s"
    done
done

median() {
    printf '%s\n' "$@" | sort -g |
        awk '{ a[NR] = $1 } END { if (NR) print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}
# shellcheck disable=SC2086
base=$(median ${got[a]})
echo
printf '%-34s %10s %8s %8s   %s\n' "configuration" "images/s" "ms/step" "vs (a)" "runs"
for n in "${names[@]}"; do
    # shellcheck disable=SC2086
    med=$(median ${got[$n]})
    ratio=$(awk -v a="$med" -v b="$base" 'BEGIN { if (a > 0 && b > 0) printf "%.2fx", a / b; else print "-" }')
    ms=$(awk -v a="$med" -v b="$batch" 'BEGIN { if (a > 0) printf "%.1f", 1000 * b / a; else print "-" }')
    printf '%-34s %10s %8s %8s  %s\n' "${title[$n]}" "${med:--}" "$ms" "$ratio" "${got[$n]}"
done
echo
echo "where the time goes (each run's data-parallel line; one replica prints none):"
for n in "${names[@]}"; do
    for i in $(seq "$runs"); do
        line=$(grep -h '^data-parallel, per step' "$work/$n.$i.out" 2>/dev/null)
        echo "${title[$n]}, run $i: ${line:-(none)}"
    done
done
