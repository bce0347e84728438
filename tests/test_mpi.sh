#!/usr/bin/env bash
# clcnn_train under mpirun, two ranks on this machine, each on its own device
# (POCL_DEVICES="basic basic": two one-core PoCL devices):
# 1. kill: SIGKILL rank 1 in epoch 2 of a run; mpirun and rank 0 must be gone within 30 s, mpirun's
#    status non-zero. Resuming epoch_1 on two ranks must log every loss of an uninterrupted
#    two-rank run (1e-6 relative), and resuming it on one device (no mpirun) within 1e-5 relative.
# 2. mismatch: ranks given different --batch-size end non-zero within 30 s, stderr exactly one
#    line saying they disagree on --batch-size.
# 3. a rank that fails at start (--device 7, which does not exist) ends the whole job non-zero
#    within 30 s, with its error line.
# 4. a loss that turns NaN (--lr 1e6) stops both ranks at the same step, non-zero, stderr one
#    line (rank 0's) and no checkpoint.
# 5. every option that changes a step's arithmetic or which collective calls a rank makes
#    (--eval-only, --plan, --list-devices), given another value on rank 1 alone (the MPMD form,
#    mpirun -np 1 A : -np 1 B), ends the job non-zero with stderr one line naming it; so do a
#    difference resolved from a --resume checkpoint, a --model recipe (--no-recipe) or --data.
#    Every option --help lists is either in that list or in the list of those ranks may differ
#    in, which a run then shows training.
# 6. a failure on one rank at each collective phase (CLCNN_TEST_FAIL_AT: the agreement, the
#    group's creation, a step and an evaluation after the first, the second save, the second
#    evaluation's records, a log point's records in epoch 2), and a real disk full (a 2 MB
#    tmpfs) at the second save, each end the job non-zero within 30 s with one error line.
# Open MPI's mpirun runs the one-line checks with --quiet: its own report of a non-zero exit
# status is the launcher's, not clcnn_train's (with another launcher the lines from clcnn_train
# are counted instead).
# Usage: test_mpi.sh CLCNN_TRAIN MPIEXEC   (MPIEXEC "" -> skipped: clcnn_train built without MPI)
set -u
bin=$1
mpiexec=${2:-}
src=$(cd "$(dirname "$0")" && pwd)
[ -n "$mpiexec" ] || { echo "clcnn_train was built without MPI: skipping"; exit 77; }
command -v "$mpiexec" >/dev/null || { echo "$mpiexec not found: skipping"; exit 77; }
work=$(mktemp -d)
pids=()
mounted=
# A rank still closing its files keeps the tmpfs busy: then it is detached (umount -l).
trap 'kill -9 "${pids[@]}" 2>/dev/null
      [ -z "$mounted" ] || umount "$mounted" 2>/dev/null || umount -l "$mounted"
      rm -rf "$work"' EXIT
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
quiet=()
# Open MPI's mpiexec says "OpenRTE", its mpirun "Open MPI".
if "$mpiexec" --version 2>&1 | grep -qE 'Open MPI|OpenRTE'; then
    mpirun+=(--oversubscribe)
    quiet=(--quiet)
fi

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

# Runs "${mpirun[@]}" ("${quiet[@]}" too) with the given arguments, stopped after $limit seconds
# (default 40; status 124); sets rc, secs, out (the file of its stdout) and err (of its stderr,
# "$out.err").
run_job() {
    out=$1 err=$1.err
    shift
    local t
    t=$(now)
    timeout -k 5 "${limit:-40}" "${mpirun[@]}" "${quiet[@]}" "$@" >"$out" 2>"$err"
    rc=$?
    secs=$(since "$t")
}
# The error lines of stderr file $1: all of them under Open MPI's mpirun --quiet, else those
# of clcnn_train.
err_lines() { if [ ${#quiet[@]} -gt 0 ]; then wc -l <"$1"; else grep -c '^clcnn_train' "$1"; fi; }
# True when stderr file $1 is one error line, and it contains $2.
one_line() { [ "$(err_lines "$1")" = 1 ] && grep -q -- "$2" "$1"; }
# True when the job of run_job ended non-zero within 30 s.
ended() { [ "$rc" != 0 ] && [ "${secs%.*}" -lt 30 ]; }
# True when it ended non-zero by itself, however long its start took (an ASan build on a
# loaded machine: up to 22 s for a refusal before the first step).
refused() { [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$rc" != 137 ]; }

# 2. Settings that differ between ranks: one line on rank 0, every rank exits 1.
short=(--data "$work/data" --model seed --epochs 1 --no-tensorboard)
run_job "$work/mismatch.out" -np 1 "$bin" "${short[@]}" --batch-size 64 --save-dir "$work/mm" \
    : -np 1 "$bin" "${short[@]}" --batch-size 32 --save-dir "$work/mm"
ended
check "mismatched --batch-size ends the job non-zero within 30 s" $? "status $rc after $secs s"
one_line "$err" 'ranks disagree on --batch-size: rank 0 has 64, rank 1 has 32'
check "stderr is one line naming --batch-size" $? "$(err_lines "$err") lines: $(head -5 "$err")"
echo "mismatch: exit status $rc after $secs s: $(cat "$err")"

# 3. Rank 1 cannot open its device: its line, and the job ends.
run_job "$work/nodev.out" -np 1 "$bin" "${short[@]}" --batch-size 64 --save-dir "$work/nd" \
    : -np 1 "$bin" "${short[@]}" --batch-size 64 --save-dir "$work/nd" --device 7
line=$(grep -m1 '^clcnn_train (rank 1): ' "$err")
ended
check "a rank failing at start ends the job non-zero within 30 s" $? "status $rc after $secs s"
[ -n "$line" ]; check "the failing rank's line" $? "$(head -5 "$err")"
echo "rank 1 on --device 7: exit status $rc after $secs s: $line"

# 4. A NaN loss is global: every rank stops at the same step, rank 0 alone says so.
run_job "$work/nan.out" -np 2 "$bin" "${short[@]}" --batch-size 64 --save-dir "$work/nan" \
    --lr 1e6 --momentum 0.9 --log-every 1
ended && one_line "$err" 'the loss is NaN' && [ ! -e "$work/nan/epoch_1.safetensors" ]
check "a NaN loss ends both ranks with one line and no checkpoint" $? \
    "status $rc after $secs s, $(err_lines "$err") lines: $(head -3 "$err")"
echo "NaN loss: exit status $rc after $secs s: $(cat "$err")"

# The tiny sets of checks 5 and 6 (2 steps an epoch in batches of 16), one with more images,
# and two checkpoints of one epoch, without and with momentum.
python3 "$src/make_cifar.py" "$work/tiny" 32 16 >/dev/null &&
    python3 "$src/make_cifar.py" "$work/tiny48" 48 16 >/dev/null ||
    { echo "FAIL: cannot write the tiny data sets"; exit 1; }
tiny_tb=(--data "$work/tiny" --model seed --batch-size 16)
tiny=("${tiny_tb[@]}" --no-tensorboard)
"$bin" "${tiny[@]}" --epochs 1 --save-dir "$work/ck0" >"$work/ck0.out" 2>&1 &&
    "$bin" "${tiny[@]}" --epochs 1 --momentum 0.9 --save-dir "$work/ck9" >"$work/ck9.out" 2>&1
check "the two one-epoch checkpoints" $? "$(tail -n 3 "$work/ck0.out" "$work/ck9.out")"
ck0=$work/ck0/epoch_1.safetensors ck9=$work/ck9/epoch_1.safetensors

# Runs the jobs "NAME|ARGS..." of the array named $1 three at a time, each through run_job as
# $work/$2/NAME.out with its own TMPDIR; its rc and secs go to NAME.rc and NAME.secs. ARGS are
# split at spaces.
run_jobs() {
    local -n jobs=$1
    local i=0 name rest
    mkdir -p "$work/$2"
    for j in "${jobs[@]}"; do
        IFS='|' read -r name rest <<<"$j"
        (
            read -ra args <<<"$rest"
            # A session-directory tree of its own: Open MPI 4's mpirun creates
            # $TMPDIR/ompi.<host>.<uid>/... without retrying, and three starting at once could
            # race there ("ORTE_ERROR_LOG: Error in file util/session_dir.c at line 107").
            export TMPDIR=$work/$2/$name.tmp
            mkdir -p "$TMPDIR"
            run_job "$work/$2/$name.out" "${args[@]}"
            echo "$rc" >"$work/$2/$name.rc"
            echo "$secs" >"$work/$2/$name.secs"
        ) &
        i=$((i + 1))
        [ $((i % 3)) != 0 ] || wait
    done
    wait
}
# Reads back run_jobs' job $2 of folder $1: rc, secs, out and err.
job_result() {
    out=$work/$1/$2.out err=$out.err
    rc=$(cat "$work/$1/$2.rc") secs=$(cat "$work/$1/$2.secs")
}

# 5. Every setting a step is made from, different on rank 1 alone: refused before the first
# step with one line naming it. "OPTION|RANK 0'S ARGUMENTS|RANK 1'S|WHAT THE LINE SAYS".
base="${tiny[*]} --epochs 1 --max-steps 1 --save-dir $work/agree"
step_options=(
    "--model||--model seed-relu|--model"
    "--optimizer||--optimizer adam|--optimizer"
    "--lr||--lr 0.02|--lr: rank 0 has 0.01, rank 1 has 0.02"
    "--momentum||--momentum 0.9|--momentum: rank 0 has 0, rank 1 has 0.9"
    "--nesterov|--momentum 0.9|--momentum 0.9 --nesterov|--nesterov"
    "--weight-decay||--weight-decay 1e-4|--weight-decay: rank 0 has 0, rank 1 has 0.0001"
    "--betas|--optimizer adam|--optimizer adam --betas 0.9,0.99|--betas B2: rank 0 has 0.999, rank\
 1 has 0.99"
    "--eps|--optimizer adam|--optimizer adam --eps 1e-6|--eps: rank 0 has 1e-08, rank 1 has 1e-06"
    "--no-decay-bn-bias||--no-decay-bn-bias|--no-decay-bn-bias"
    "--label-smoothing||--label-smoothing 0.1|--label-smoothing: rank 0 has 0, rank 1 has 0.1"
    "--seed||--seed 2|--seed: rank 0 has 1, rank 1 has 2"
    "--epochs||--epochs 2|--epochs"
    "--batch-size||--batch-size 8|--batch-size: rank 0 has 16, rank 1 has 8"
    "--schedule||--schedule cosine|--schedule: rank 0 has constant, rank 1 has cosine"
    "--pct-start|--schedule onecycle --pct-start 0.3|--schedule onecycle --pct-start 0.9|\
--pct-start: rank 0 has 0.3, rank 1 has 0.9"
    "--random-crop||--random-crop 2|--random-crop"
    "--hflip||--hflip|--hflip"
    "--max-steps||--max-steps 2|--max-steps"
    "--log-every||--log-every 5|--log-every"
    "--no-shuffle||--no-shuffle|--no-shuffle"
    "--normalize||--normalize 0.5,0.25|--normalize: rank 0 has (none), rank 1 has 0.5,0.25"
    "--eval-only|--init $ck0|--init $ck0 --eval-only|--eval-only"
    "--plan||--plan|--plan"
    "--list-devices||--list-devices|--list-devices: rank 0 has 0, rank 1 has 1"
    # Resolved elsewhere: a resumed checkpoint's optimizer, a recipe, what --data holds.
    "--resume|--resume $ck0|--resume $ck9|--momentum: rank 0 has 0, rank 1 has 0.9"
    "--no-recipe|--model resnet|--model resnet --no-recipe|--normalize"
    "--data||--data $work/tiny48|training images: rank 0 has 32, rank 1 has 48"
)
# Options ranks may differ in (CLI_OPTIONS in src/cli/clcnn_train.c says why), shown below.
local_options=(--platform --device --devices --version --help --graph-json --data --dataset
               --save-dir --logdir --no-tensorboard --metrics --init --resume --no-recipe)
agree_jobs=()
for c in "${step_options[@]}"; do
    IFS='|' read -r opt a b want <<<"$c"
    agree_jobs+=("${opt#--}|-np 1 $bin $base $a : -np 1 $bin $base $b")
done
t0=$(now)
limit=120 run_jobs agree_jobs agree
n_refused=0
for c in "${step_options[@]}"; do
    IFS='|' read -r opt a b want <<<"$c"
    job_result agree "${opt#--}"
    refused && one_line "$err" "ranks disagree on $want"
    check "$opt on rank 1 alone: refused with one line saying '$want'" $? \
        "status $rc after $secs s, $(err_lines "$err") lines: $(head -3 "$err")"
    [ "$rc" = 0 ] || n_refused=$((n_refused + 1))
done
range=$(sort -n "$work"/agree/*.secs | sed -n '1p;$p' | paste -sd-)
echo "settings that must agree: $n_refused of ${#step_options[@]} differences refused" \
     "(each $range s, $(since "$t0") s in all); e.g. $(cat "$work/agree/pct-start.out.err")"
# Every option of --help is in one of the two lists.
for opt in $("$bin" --help | sed -n 's/^  \(-h, \)\{0,1\}\(--[a-z-]*\).*/\2/p'); do
    known=
    for c in "${step_options[@]}"; do [ "${c%%|*}" = "$opt" ] && known=1; done
    for o in "${local_options[@]}"; do [ "$o" = "$opt" ] && known=1; done
    [ -n "$known" ]
    check "--help's $opt is a setting ranks must share or one they may differ in" $? \
        "not in this test's lists: say which in step_options or local_options"
done
# The options ranks may differ in: rank 1 writes nothing, takes rank 0's weights, its own
# device, a data set named by format.
run_job "$work/local.out" \
    -np 1 "$bin" "${tiny[@]}" --epochs 1 --save-dir "$work/local0" --metrics "$work/local.jsonl" \
    --device 0 : \
    -np 1 "$bin" "${tiny[@]}" --epochs 1 --save-dir "$work/local1" --logdir "$work/local1" \
    --device 1 --dataset cifar10 --init "$ck9" --no-recipe
[ "$rc" = 0 ] && [ -f "$work/local0/epoch_1.safetensors" ] && [ ! -e "$work/local1" ]
check "ranks differing only in options they may differ in train" $? \
    "status $rc after $secs s: $(head -3 "$err")"

# 6. A failure on one rank at each collective phase ends the job: "PHASE:RANK[:N]|WHAT ITS
# ONE LINE SAYS". Three epochs of two steps; rank 0 writes checkpoints, metrics, TensorBoard.
phases=(
    "agree:1|(rank 1): ranks cannot compare their settings: .*injected"
    "group:1|(rank 1): the transport's broadcast failed .*injected"
    "step:1:2|(rank 1): step 3 failed: .*injected"
    "eval:1:2|(rank 1): evaluation failed: .*injected"
    "save:0:2|(rank 0): saving failed: injected"
    "metrics:0:2|(rank 0): writing the evaluation's records failed: injected"
    "log:0:3|(rank 0): writing the log point's records failed: injected"
)
fail_jobs=()
for c in "${phases[@]}"; do
    at=${c%%|*} dir=$work/fail/${c%%|*}
    fail_jobs+=("${at//:/-}|-np 2 env CLCNN_TEST_FAIL_AT=$at $bin ${tiny_tb[*]} --epochs 3 \
--log-every 1 --save-dir $dir --logdir $dir --metrics $dir.jsonl")
done
t0=$(now)
run_jobs fail_jobs fail
for c in "${phases[@]}"; do
    at=${c%%|*} want=${c#*|}
    job_result fail "${at//:/-}"
    ended && one_line "$err" "^clcnn_train $want"
    check "a failure at $at ends the job within 30 s with one line" $? \
        "status $rc after $secs s, $(err_lines "$err") lines: $(head -3 "$err")"
    echo "failure at $at: exit status $rc after $secs s: $(head -1 "$err")"
done
echo "failures at ${#phases[@]} phases: $(since "$t0") s"
# The disk fills at the second save: 2 MB hold epoch 1's weights and momentum (1.2 MB), not
# epoch 2's beside them.
mkdir -p "$work/full"
if mount -t tmpfs -o size=2m tmpfs "$work/full" 2>"$work/mount.err"; then
    mounted=$work/full
    run_job "$work/full.out" -np 2 "$bin" "${tiny[@]}" --epochs 3 --momentum 0.9 \
        --save-dir "$work/full/ck"
    ended && one_line "$err" '^clcnn_train (rank 0): saving failed: .*No space left on device' &&
        [ -f "$work/full/ck/epoch_1.safetensors" ]
    check "a disk full at the second save ends the job within 30 s with one line" $? \
        "status $rc after $secs s, $(err_lines "$err") lines: $(head -3 "$err")"
    echo "disk full at the second save: exit status $rc after $secs s: $(head -1 "$err")"
    { umount "$work/full" 2>/dev/null || umount -l "$work/full"; } && mounted=
else
    echo "SKIP: disk full under mpirun: cannot mount a tmpfs here: $(head -1 "$work/mount.err")"
fi

[ $fail = 0 ] && echo "all MPI checks passed"
exit $fail
