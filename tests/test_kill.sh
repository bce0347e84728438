#!/usr/bin/env bash
# Crash safety through the real clcnn_train: a training run is killed with SIGKILL again and
# again (at random moments, at a random moment once it has trained past a checkpoint, and the
# moment a checkpoint's temporary file appears, i.e. during a save), and each time resumed from
# its newest checkpoint. After every kill the newest epoch_N.safetensors must load (--eval-only
# --resume); every loss and evaluation any attempt logged must equal, digit for digit, the same
# step's in a run never interrupted; the last checkpoint must be byte-identical to that run's;
# and attempts must have resumed from a checkpoint and trained on from it (else the comparison
# would set two uninterrupted runs side by side). Usage: test_kill.sh CLCNN_TRAIN [TRIALS]
set -u
shopt -s nullglob
bin=$1
trials=${2:-8}
[ "$trials" -ge 3 ] 2>/dev/null || { echo "FAIL: TRIALS must be a number of at least 3 (the third trial is the one past a checkpoint)"; exit 1; }
src=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'kill -9 $pid 2>/dev/null; rm -rf "$work"' EXIT
pid=
fail=0
check() { if [ "$2" != 0 ]; then echo "FAIL: $1: $3"; fail=1; fi; }
export CLCNN_CACHE_DIR=${CLCNN_CACHE_DIR:-$work/cache}
seed=${CLCNN_KILL_SEED:-$$}
RANDOM=$seed
echo "random seed $seed (CLCNN_KILL_SEED=$seed repeats the kill times)"

"$bin" --list-devices >/dev/null 2>&1 || { echo "no OpenCL device: skipping"; exit 77; }
python3 "$src/make_cifar.py" "$work/data" 128 32 || { echo "FAIL: cannot write the data set"; exit 1; }
# 128 training images in batches of 8: 16 steps and one checkpoint pair (weights and Adam's two
# moment buffers, 0.6 + 1.2 MB) per epoch, a save every quarter second or so. Twenty epochs, so
# that the trials (each advances the run by one to about two epochs) never reach the end.
epochs=20
common=(--data "$work/data" --model seed-relu --optimizer adam --batch-size 8 --epochs $epochs
        --seed 3 --log-every 1 --no-tensorboard)
strip() { sed -n 's/,"elapsed_s":[0-9.]*,"images_per_s":[0-9.]*//; /}$/p' "$@"; }

# Kill times are drawn from the reference run's duration, so it must not include building the
# kernels (seconds on a GPU driver, while every later start loads them from the caches).
"$bin" "${common[@]}" --epochs 1 --max-steps 1 --save-dir "$work/warm" >"$work/warm.out" 2>&1
check "warm-up run" $? "$(tail -5 "$work/warm.out")"
t0=$(date +%s.%N)
"$bin" "${common[@]}" --save-dir "$work/ref" --metrics "$work/ref.jsonl" >"$work/ref.out" 2>&1
check "reference run" $? "$(tail -5 "$work/ref.out")"
t_ref=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
echo "reference run: $epochs epochs in $t_ref s"
strip "$work/ref.jsonl" >"$work/ref.lines"

# The newest epoch_N.safetensors in the run folder ("" when none).
newest() {
    local n best=0
    for f in "$work/run"/epoch_*.safetensors; do
        n=${f##*/epoch_}; n=${n%.safetensors}
        case $n in *[!0-9]*|'') continue ;; esac
        [ "$n" -gt "$best" ] && best=$n
    done
    [ $best -gt 0 ] && echo "$work/run/epoch_$best.safetensors"
}

during_save=0 killed=0 attempt=0
while :; do
    attempt=$((attempt + 1))
    last=$(newest)
    resume=()
    [ -n "$last" ] && resume=(--resume "$last")
    "$bin" "${common[@]}" --save-dir "$work/run" --metrics "$work/a$attempt.jsonl" "${resume[@]}" \
        >"$work/a$attempt.out" 2>&1 &
    pid=$!
    if [ $attempt -gt "$trials" ]; then # the last attempt runs to the end
        wait $pid
        check "final attempt" $? "$(tail -5 "$work/a$attempt.out")"
        pid=
        break
    fi
    how=
    done_epochs=0
    if [ -n "$last" ]; then done_epochs=${last##*/epoch_}; done_epochs=${done_epochs%.safetensors}; fi
    if [ $((attempt % 2)) = 0 ]; then
        # During a save: the moment this process's temporary file appears, in its first save or
        # (at random) once it has completed one, so that these trials move the run on too.
        # Globs, not commands: a fork in this loop would let the save finish before the kill.
        saves=("$work"/run/epoch_*[0-9].safetensors)
        need=$((${#saves[@]} + RANDOM % 2))
        while kill -0 $pid 2>/dev/null; do
            saves=("$work"/run/epoch_*[0-9].safetensors)
            [ ${#saves[@]} -ge $need ] || continue
            tmps=("$work"/run/*.tmp.$pid.*)
            if [ ${#tmps[@]} -gt 0 ]; then
                kill -9 $pid 2>/dev/null && how="during a save"
                break
            fi
        done
    elif [ $((attempt % 4)) = 3 ]; then
        # Past a checkpoint: once this process has logged a step of the epoch after the one it
        # resumed from (started afresh: after the first, whose checkpoint it saved), at a random
        # moment within an epoch's time. So whatever the machine's speed, a checkpoint exists
        # from the third trial on, this attempt or the next trains on from it, and a resume
        # that loaded the optimizer state wrongly shows in the losses.
        next=$((done_epochs > 0 ? done_epochs + 1 : 2))
        while kill -0 $pid 2>/dev/null; do
            [ -e "$work/run/epoch_$((next - 1)).safetensors" ] &&
                grep -q "\"type\":\"train\",\"epoch\":$next," "$work/a$attempt.jsonl" 2>/dev/null && break
            sleep 0.02
        done
        delay=$(awk -v r=$RANDOM -v t="$t_ref" -v e=$epochs 'BEGIN { printf "%.3f", r / 32768 * t / e }')
        sleep "$delay"
        kill -9 $pid 2>/dev/null && how="$delay s after its first step of epoch $next"
    else
        # At a random moment of what is left of the run (start-up included), but within about
        # two epochs, so that the run does not finish before the last trial.
        delay=$(awk -v r=$RANDOM -v t="$t_ref" -v e=$epochs -v d="$done_epochs" \
            'BEGIN { m = 0.8 * t * (e - d) / e; if (m > 2 * t / e) m = 2 * t / e
                    printf "%.3f", r / 32768 * m }')
        sleep "$delay"
        kill -9 $pid 2>/dev/null && how="at a random moment ($delay s)"
    fi
    wait $pid 2>/dev/null
    rc=$?
    pid=
    if [ -z "$how" ]; then
        check "attempt $attempt" $rc "ended before the kill: $(tail -3 "$work/a$attempt.out")"
        break
    fi
    killed=$((killed + 1))
    tmp=$(compgen -G "$work/run/*.tmp.*" | wc -l)
    [ "$how" = "during a save" ] && [ "$tmp" -gt 0 ] && during_save=$((during_save + 1))
    last=$(newest)
    steps=$(cat "$work/a$attempt.jsonl" 2>/dev/null | grep -c '"type":"train"')
    echo "attempt $attempt: killed $how after $steps logged steps; newest checkpoint: ${last##*/}; temp files left: $tmp"
    if [ -n "$last" ]; then
        "$bin" --data "$work/data" --batch-size 8 --eval-only --resume "$last" >"$work/e$attempt.out" 2>&1
        check "attempt $attempt: newest checkpoint loads" $? "$(cat "$work/e$attempt.out")"
        # The evaluation of a complete checkpoint is the reference's evaluation of that epoch.
        n=${last##*/epoch_}; n=${n%.safetensors}
        want=$(grep "^epoch $n: test" "$work/ref.out" | sed 's/^epoch [0-9]*: //')
        if [ -z "$want" ]; then # grep -F "" would match any output
            check "attempt $attempt: evaluation of epoch $n" 1 "no expected line in the reference's output"
        else
            grep -qF "$want" "$work/e$attempt.out"
            check "attempt $attempt: evaluation of epoch $n" $? "want '$want': $(tail -1 "$work/e$attempt.out")"
        fi
    fi
done

# The attempts that loaded a checkpoint ("resumed from ...: epoch E, step S", S > 0), and those
# of them that then logged a step: the bit-exact comparisons below prove a resume right only
# if one happened. By the kill schedule a checkpoint exists from the third trial on, so the
# last attempt always resumes from one and trains to the end; if it did not, that is a
# failure, not luck.
resumes=0 trained=0 last_resumed=1
for ((a = 1; a <= attempt; a++)); do
    if ! grep -q '^resumed from .*: epoch [0-9]*, step [1-9][0-9]*$' "$work/a$a.out"; then
        [ $a = $attempt ] && last_resumed=0
        continue
    fi
    resumes=$((resumes + 1))
    grep -q '"type":"train"' "$work/a$a.jsonl" 2>/dev/null && trained=$((trained + 1))
done
[ $last_resumed = 1 ] && grep -q '"type":"train"' "$work/a$attempt.jsonl"
check "the last attempt resumed and trained on" $? "it started afresh or logged no step ($resumes attempts resumed from a checkpoint, $trained of them logged a step)"

# Every record any attempt wrote is the reference's record for that step or epoch, and
# together they cover all of the reference's.
strip "$work"/a*.jsonl | sort -u >"$work/all.lines"
bad=$(grep -vxFf "$work/ref.lines" "$work/all.lines")
[ -z "$bad" ]; check "logged losses equal the uninterrupted run's" $? "$(echo "$bad" | head -5)"
missing=$(grep -vxFf "$work/all.lines" "$work/ref.lines")
[ -z "$missing" ]; check "every step logged" $? "$(echo "$missing" | head -5)"
cmp -s "$work/ref/epoch_$epochs.safetensors" "$work/run/epoch_$epochs.safetensors"
check "final weights identical" $? "epoch_$epochs differs from the reference"
cmp -s "$work/ref/epoch_$epochs.state.safetensors" "$work/run/epoch_$epochs.state.safetensors"
check "final optimizer state identical" $? "epoch_$epochs.state differs from the reference"
# Kill times scale with the measured reference run, so only a badly overloaded machine could
# let the runs outpace them; demand most of the trials.
[ $killed -ge $((trials * 3 / 4)) ] && [ $during_save -ge 1 ]
check "enough kills" $? "$killed of $trials trials killed, $during_save during a save"
echo "$killed kills ($during_save during a save), $resumes resumes ($trained trained on), $(wc -l <"$work/ref.lines") records compared"
exit $fail
