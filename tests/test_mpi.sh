#!/usr/bin/env bash
# clcnn_train under mpirun, two ranks on this machine, each on its own device
# (POCL_DEVICES="basic basic": two one-core PoCL devices):
# 1. kill: SIGKILL rank 1 in epoch 2 of a run; mpirun and rank 0 must be gone within 30 s, mpirun's
#    status non-zero. Resuming epoch_1 on two ranks must log every loss of an uninterrupted
#    two-rank run (1e-6 relative), and resuming it on one device (no mpirun) within 1e-5 relative.
# 2. mismatch: ranks given different --batch-size end non-zero within 30 s, with exactly one
#    line saying they disagree on --batch-size.
# 3. a rank that fails at start (--device 7, which does not exist) ends the whole job non-zero
#    within 30 s, with its error line.
# 4. a loss that turns NaN (--lr 1e6) stops both ranks at the same step, non-zero, with one
#    line (rank 0's) and no checkpoint.
# Usage: test_mpi.sh CLCNN_TRAIN MPIEXEC   (MPIEXEC "" -> skipped: clcnn_train built without MPI)
set -u
bin=$1
mpiexec=${2:-}
src=$(cd "$(dirname "$0")" && pwd)
[ -n "$mpiexec" ] || { echo "clcnn_train was built without MPI: skipping"; exit 77; }
command -v "$mpiexec" >/dev/null || { echo "$mpiexec not found: skipping"; exit 77; }
work=$(mktemp -d)
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null; rm -rf "$work"' EXIT
fail=0
check() { if [ "$2" != 0 ]; then echo "FAIL: $1: $3"; fail=1; fi; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# True while fewer than $2 seconds have passed since $1.
within() { awk -v a="$1" -v b="$(now)" -v s="$2" 'BEGIN { exit !(b - a < s) }'; }

export CLCNN_CACHE_DIR=${CLCNN_CACHE_DIR:-$work/cache}
export POCL_DEVICES="basic basic" CLCNN_VISIBLE_DEVICES=cpu
# Open MPI as root (containers), more ranks than cores, no cross-memory attach in containers.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
ndev=$("$bin" --list-devices 2>/dev/null | grep -c '^[0-9]')
[ "$ndev" -ge 2 ] || { echo "fewer than two CPU OpenCL devices ($ndev): skipping"; exit 77; }
mpirun=("$mpiexec")
"$mpiexec" --version 2>&1 | grep -q 'Open MPI' && mpirun+=(--oversubscribe)

python3 "$src/make_cifar.py" "$work/data" 640 64 >/dev/null \
    || { echo "FAIL: cannot write the data set"; exit 1; }
# 640 images in global batches of 64: 10 steps an epoch, 32 samples per rank.
common=(--data "$work/data" --model seed --batch-size 64 --epochs 6 --seed 5 --log-every 1
        --no-tensorboard)
# "epoch step loss" of every training record of a metrics file.
losses() { sed -n 's/.*"epoch":\([0-9]*\),"step":\([0-9]*\),"loss":\([^,]*\),.*/\1 \2 \3/p' "$1"; }
# Every step of $2 is in $1 with a loss within relative $3; and $2 covers $1's steps from $4 on.
same_losses() {
    awk -v tol="$3" -v from="$4" '
        NR == FNR { ref[$2] = $3; next }
        { n++; seen[$2] = 1; d = $3 - ref[$2]; if (d < 0) d = -d; r = d / ($3 < 0 ? -$3 : $3)
          if (!($2 in ref) || r > tol) { bad++; if (bad <= 3) print "step " $2 ": " $3 " vs " ref[$2] }
          if (r > worst) worst = r }
        END { for (s in ref) if (s + 0 >= from && !(s in seen)) { bad++; print "step " s " missing" }
              printf "%d steps compared, largest relative difference %.2g\n", n, worst
              exit bad > 0 }' <(losses "$1") <(losses "$2")
}

# Kernels into the cache once, so that no timing below includes building them.
"$bin" "${common[@]}" --epochs 1 --max-steps 1 --save-dir "$work/warm" >"$work/warm.out" 2>&1
check "warm-up run" $? "$(tail -3 "$work/warm.out")"

# The uninterrupted two-rank run.
t0=$(now)
"${mpirun[@]}" -np 2 "$bin" "${common[@]}" --save-dir "$work/ref" --metrics "$work/ref.jsonl" \
    >"$work/ref.out" 2>&1
check "uninterrupted 2-rank run" $? "$(tail -5 "$work/ref.out")"
echo "uninterrupted 2-rank run: $(since "$t0") s, $(losses "$work/ref.jsonl" | wc -l) steps;" \
    "$(grep '^data-parallel, per step' "$work/ref.out")"

# 1. Kill. Each rank writes its pid (exec keeps it) to pid.RANK before it becomes clcnn_train.
# shellcheck disable=SC2016
wrap=(bash -c 'echo $$ >"$0.${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-x}}}"; exec "$@"'
      "$work/pid")
"${mpirun[@]}" -np 2 "${wrap[@]}" "$bin" "${common[@]}" --save-dir "$work/run" \
    --metrics "$work/run.jsonl" >"$work/run.out" 2>&1 &
mpi_pid=$!
pids+=("$mpi_pid")
t0=$(now)
killed=
while kill -0 "$mpi_pid" 2>/dev/null; do
    if [ -f "$work/run/epoch_1.safetensors" ] && [ -s "$work/pid.1" ] && \
       [ "$(grep -c '"type":"train","epoch":2,' "$work/run.jsonl" 2>/dev/null)" -ge 2 ]; then
        r0=$(cat "$work/pid.0") r1=$(cat "$work/pid.1")
        pids+=("$r0" "$r1")
        kill -9 "$r1" && killed=$(now)
        break
    fi
    sleep 0.01
    within "$t0" 60 || break
done
if [ -z "$killed" ]; then
    check "kill rank 1 in epoch 2" 1 "run ended or never reached epoch 2: $(tail -3 "$work/run.out")"
else
    at=$(grep -c '"type":"train"' "$work/run.jsonl")
    while { kill -0 "$mpi_pid" || kill -0 "$r0"; } 2>/dev/null && within "$killed" 30; do
        sleep 0.05
    done
    gone=$(since "$killed")
    alive=
    kill -0 "$mpi_pid" 2>/dev/null && alive="mpirun"
    kill -0 "$r0" 2>/dev/null && alive="$alive rank 0"
    [ -z "$alive" ]; check "mpirun and rank 0 end after rank 1 is killed" $? "still running after 30 s: $alive"
    kill -9 "$mpi_pid" "$r0" 2>/dev/null
    wait "$mpi_pid"
    rc=$?
    [ "$rc" != 0 ]; check "mpirun's exit status after the kill" $? "0"
    echo "kill: rank 1 killed after $at logged steps; mpirun and rank 0 gone ${gone} s later," \
         "mpirun exit status $rc"
fi

# Resume epoch_1 on two ranks: the uninterrupted run's losses, digit for digit (1e-6 allowed).
t0=$(now)
"${mpirun[@]}" -np 2 "$bin" "${common[@]}" --resume "$work/run/epoch_1.safetensors" \
    --save-dir "$work/res2" --metrics "$work/res2.jsonl" >"$work/res2.out" 2>&1
check "2-rank resume" $? "$(tail -5 "$work/res2.out")"
out=$(same_losses "$work/ref.jsonl" "$work/res2.jsonl" 1e-6 11)
check "2-rank resume's losses equal the uninterrupted run's" $? "$out"
echo "2-rank resume from epoch_1 ($(since "$t0") s): $(echo "$out" | tail -1)"

# Resume it on one device, no mpirun: the same losses up to summation order (1e-5 relative).
t0=$(now)
"$bin" "${common[@]}" --resume "$work/run/epoch_1.safetensors" --save-dir "$work/res1" \
    --metrics "$work/res1.jsonl" >"$work/res1.out" 2>&1
check "1-device resume" $? "$(tail -5 "$work/res1.out")"
out=$(same_losses "$work/ref.jsonl" "$work/res1.jsonl" 1e-5 11)
check "1-device resume's losses are the 2-rank run's" $? "$out"
echo "1-device resume from epoch_1 ($(since "$t0") s): $(echo "$out" | tail -1)"

# Runs "${mpirun[@]}" with the given arguments; sets rc, secs and out (its output file).
run_job() {
    out=$1
    shift
    local t
    t=$(now)
    timeout -s KILL 60 "${mpirun[@]}" "$@" >"$out" 2>&1
    rc=$?
    secs=$(since "$t")
}

# 2. Settings that differ between ranks: one line on rank 0, every rank exits 1.
short=(--data "$work/data" --model seed --epochs 1 --no-tensorboard)
run_job "$work/mismatch.out" -np 1 "$bin" "${short[@]}" --batch-size 64 --save-dir "$work/mm" \
    : -np 1 "$bin" "${short[@]}" --batch-size 32 --save-dir "$work/mm"
lines=$(grep -c disagree "$work/mismatch.out")
[ "$rc" != 0 ] && [ "${secs%.*}" -lt 30 ]
check "mismatched --batch-size ends the job non-zero within 30 s" $? "status $rc after $secs s"
[ "$lines" = 1 ] && grep disagree "$work/mismatch.out" | grep -q -- '--batch-size'
check "one line naming --batch-size" $? "$lines lines: $(grep disagree "$work/mismatch.out")"
echo "mismatch: exit status $rc after $secs s: $(grep disagree "$work/mismatch.out")"

# 3. Rank 1 cannot open its device: its line, and the job ends.
run_job "$work/nodev.out" -np 1 "$bin" "${short[@]}" --batch-size 64 --save-dir "$work/nd" \
    : -np 1 "$bin" "${short[@]}" --batch-size 64 --save-dir "$work/nd" --device 7
line=$(grep -m1 '^clcnn_train (rank 1): ' "$work/nodev.out")
[ "$rc" != 0 ] && [ "${secs%.*}" -lt 30 ]
check "a rank failing at start ends the job non-zero within 30 s" $? "status $rc after $secs s"
[ -n "$line" ]; check "the failing rank's line" $? "$(head -5 "$work/nodev.out")"
echo "rank 1 on --device 7: exit status $rc after $secs s: $line"

# 4. A NaN loss is global: every rank stops at the same step, rank 0 alone says so.
run_job "$work/nan.out" -np 2 "$bin" "${short[@]}" --batch-size 64 --save-dir "$work/nan" \
    --lr 1e6 --momentum 0.9 --log-every 1
lines=$(grep -c 'the loss is NaN' "$work/nan.out")
[ "$rc" != 0 ] && [ "${secs%.*}" -lt 30 ] && [ "$lines" = 1 ] && [ ! -e "$work/nan/epoch_1.safetensors" ]
check "a NaN loss ends both ranks with one line and no checkpoint" $? \
    "status $rc after $secs s, $lines lines: $(grep -i nan "$work/nan.out" | head -3)"
echo "NaN loss: exit status $rc after $secs s: $(grep -m1 'the loss is NaN' "$work/nan.out")"

[ $fail = 0 ] && echo "all MPI checks passed"
exit $fail
