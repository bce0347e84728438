#!/usr/bin/env bash
# End to end through the CLI on a tiny CIFAR-10-format data set written here: two epochs with
# log lines, JSONL metrics, two checkpoints and a TensorBoard file; a run stopped after epoch 1
# (and one stopped mid-epoch by --max-steps) and resumed must end bit for bit where the
# uninterrupted run ended, with a onecycle schedule, label smoothing and augmentation too;
# --eval-only reproduces the last evaluation; bad inputs fail cleanly.
set -u
bin=$1
src=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
check() { if [ "$2" != 0 ]; then echo "FAIL: $1: $3"; fail=1; fi; }
export CLCNN_CACHE_DIR=${CLCNN_CACHE_DIR:-$work/cache}

"$bin" --list-devices >/dev/null 2>&1 || { echo "no OpenCL device: skipping"; exit 77; }
python3 "$src/make_cifar.py" "$work/data" || { echo "FAIL: cannot write the data set"; exit 1; }
common=(--data "$work/data" --batch-size 32 --log-every 5 --seed 7 --lr 0.05 --momentum 0.9)

# A: two epochs, uninterrupted. 320 train records = 10 steps per epoch.
"$bin" "${common[@]}" --epochs 2 --metrics "$work/A.jsonl" --save-dir "$work/A/model" \
    --logdir "$work/A/logs" >"$work/A.out" 2>&1
check "run A" $? "$(cat "$work/A.out")"
grep -q '^step 5  epoch 1  loss [0-9.]*  elapsed [0-9.]* s  [0-9.]* img/s$' "$work/A.out"
check "log line" $? "$(head -20 "$work/A.out")"
[ "$(grep -c '^step ' "$work/A.out")" = 4 ]; check "4 log lines" $? "$(grep '^step' "$work/A.out")"
grep -q '^epoch 2: test loss [0-9.]*, test accuracy [0-9.]* ([0-9]*/100)$' "$work/A.out"
check "eval line" $? "$(tail -5 "$work/A.out")"
[ "$(grep -c '"type":"train"' "$work/A.jsonl")" = 4 ] && [ "$(grep -c '"type":"eval"' "$work/A.jsonl")" = 2 ]
check "jsonl records" $? "$(cat "$work/A.jsonl")"
grep -q '^{"type":"train","epoch":1,"step":5,"loss":[0-9.e-]*,"lr":0.05,"elapsed_s":[0-9.]*,"images_per_s":[0-9.]*}$' "$work/A.jsonl"
check "jsonl train format" $? "$(head -1 "$work/A.jsonl")"
grep -q '^{"type":"eval","epoch":2,"step":20,"test_loss":[0-9.e-]*,"test_accuracy":[0-9.e-]*}$' "$work/A.jsonl"
check "jsonl eval format" $? "$(tail -1 "$work/A.jsonl")"
for f in epoch_1.safetensors epoch_1.state.safetensors epoch_2.safetensors epoch_2.state.safetensors; do
    [ -s "$work/A/model/$f" ]; check "checkpoint $f" $? "$(ls "$work/A/model")"
done
ev=$(ls "$work"/A/logs/events.out.tfevents.* 2>/dev/null | head -1)
[ -s "$ev" ]; check "event file" $? "$(ls "$work/A/logs")"
first=$(sed -n 's/.*"step":\([0-9]*\),"loss":\([0-9.e-]*\).*/\1 \2/p' "$work/A.jsonl" | head -1)
last=$(sed -n 's/.*"step":\([0-9]*\),"loss":\([0-9.e-]*\).*/\1 \2/p' "$work/A.jsonl" | tail -1)
awk -v a="${first#* }" -v b="${last#* }" 'BEGIN { exit !(b < a) }'
check "loss decreases" $? "first $first last $last"
# TensorBoard's own reader, where it is installed (exit 77 = not installed).
if [ -n "$ev" ]; then
    args=$(python3 - "$work/A.jsonl" <<'PY'
import json, sys
out = []
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["type"] == "train":
        out.append("train_loss:%d:%r" % (r["step"], r["loss"]))
        out.append("learning_rate:%d:%r" % (r["step"], r["lr"]))
    else:
        out.append("test_loss:%d:%r" % (r["epoch"], r["test_loss"]))
        out.append("test_accuracy:%d:%r" % (r["epoch"], r["test_accuracy"]))
print(" ".join(out))
PY
)
    python3 "$src/check_tensorboard.py" "$ev" $args >"$work/tb.out" 2>&1
    rc=$?
    # 77: tensorboard is not installed, which only CI (CLCNN_REQUIRE_PYTHON_TESTS=1) refuses.
    [ $rc = 0 ] || { [ $rc = 77 ] && [ "${CLCNN_REQUIRE_PYTHON_TESTS:-0}" != 1 ]; }
    check "tensorboard reader" $? "$(cat "$work/tb.out")"
fi

# B: one epoch, then resume to two. Everything must match A bit for bit.
"$bin" "${common[@]}" --epochs 1 --metrics "$work/B.jsonl" --save-dir "$work/B/model" \
    --logdir "$work/B/logs" >"$work/B1.out" 2>&1
check "run B epoch 1" $? "$(cat "$work/B1.out")"
"$bin" "${common[@]}" --epochs 2 --metrics "$work/B.jsonl" --save-dir "$work/B/model" \
    --logdir "$work/B/logs" --resume "$work/B/model/epoch_1.safetensors" >"$work/B2.out" 2>&1
check "run B resume" $? "$(cat "$work/B2.out")"
grep -q 'resumed from .*epoch_1.safetensors: epoch 1, step 10' "$work/B2.out"
check "resume message" $? "$(cat "$work/B2.out")"
strip() { sed 's/"elapsed_s":[0-9.]*,"images_per_s":[0-9.]*//' "$1"; }
diff <(strip "$work/A.jsonl") <(strip "$work/B.jsonl") >"$work/diff" 2>&1
check "resumed losses equal uninterrupted" $? "$(cat "$work/diff")"
cmp -s "$work/A/model/epoch_2.safetensors" "$work/B/model/epoch_2.safetensors"
check "resumed checkpoint identical" $? "A and B epoch_2 differ"

# C: stop mid-epoch 2 with --max-steps, resume, end identical to A.
"$bin" "${common[@]}" --epochs 2 --max-steps 13 --save-dir "$work/C/model" --no-tensorboard \
    >"$work/C1.out" 2>&1
check "run C max-steps" $? "$(cat "$work/C1.out")"
grep -q 'reached --max-steps 13' "$work/C1.out"; check "max-steps message" $? "$(cat "$work/C1.out")"
"$bin" "${common[@]}" --epochs 2 --save-dir "$work/C/model" --no-tensorboard \
    --resume "$work/C/model/epoch_2.safetensors" >"$work/C2.out" 2>&1
check "run C resume" $? "$(cat "$work/C2.out")"
cmp -s "$work/A/model/epoch_2.safetensors" "$work/C/model/epoch_2.safetensors"
check "mid-epoch resume identical" $? "A and C epoch_2 differ"

# D: a net with BatchNorm (running statistics, num_batches_tracked), dropout, a residual block
# and GELU, a onecycle schedule, label smoothing, random crops and flips, stopped mid-epoch 2
# and resumed with no options but the data: the checkpoint brings them all back (the spec,
# --epochs from the schedule's length) and the run ends identical to the uninterrupted one. Every logged lr is the
# schedule's (OneCycleLR(max_lr 0.05, 20 steps, pct_start 0.3), checked against PyTorch in
# test_schedule_torch), taken at the step before the logged one.
extra=(--schedule onecycle --label-smoothing 0.1 --random-crop 2 --hflip --no-decay-bn-bias
    --weight-decay 0.001 --no-tensorboard --normalize 0.5,0.25 --model "conv(8,3,pad=1,bias=0) bn relu maxpool(2)
    res(conv(8,3,pad=1,bias=0) bn gelu dropout(0.2)) globalavgpool flatten dropout(0.1) linear(10)")
"$bin" "${common[@]}" "${extra[@]}" --epochs 2 --metrics "$work/D.jsonl" --save-dir "$work/D/model" \
    >"$work/D.out" 2>&1
check "run D" $? "$(cat "$work/D.out")"
grep -q '^schedule: onecycle (max lr 0.05, pct_start 0.3, 20 steps), label smoothing 0.1, augmentation: random crop 2, horizontal flip$' "$work/D.out"
check "D settings line" $? "$(head -8 "$work/D.out")"
lrs=$(sed -n 's/.*"step":\([0-9]*\),"loss":[0-9.e-]*,"lr":\([0-9.e-]*\).*/\1:\2/p' "$work/D.jsonl" | tr '\n' ' ')
[ "$lrs" = "5:0.0454164079 10:0.0405872827 15:0.0141530499 20:2e-07 " ]; check "D lr per step" $? "$lrs"
! diff -q <(strip "$work/A.jsonl") <(strip "$work/D.jsonl") >/dev/null
check "D differs from A" $? "the schedule, smoothing and augmentation changed nothing"
"$bin" "${common[@]}" "${extra[@]}" --epochs 2 --max-steps 13 --save-dir "$work/D2/model" \
    >"$work/D1.out" 2>&1
check "run D max-steps" $? "$(cat "$work/D1.out")"
"$bin" --data "$work/data" --save-dir "$work/D2/model" --no-tensorboard \
    --resume "$work/D2/model/epoch_2.safetensors" >"$work/D2.out" 2>&1
check "run D resume" $? "$(cat "$work/D2.out")"
grep -q '^schedule: onecycle (max lr 0.05, pct_start 0.3, 20 steps), label smoothing 0.1' "$work/D2.out"
check "D resume settings" $? "$(head -8 "$work/D2.out")"
cmp -s "$work/D/model/epoch_2.safetensors" "$work/D2/model/epoch_2.safetensors" &&
    cmp -s "$work/D/model/epoch_2.state.safetensors" "$work/D2/model/epoch_2.state.safetensors"
check "D mid-epoch resume identical" $? "D and D2 epoch_2 differ"

# --eval-only reproduces A's last evaluation; --init loads plain weights.
"$bin" --data "$work/data" --batch-size 32 --eval-only --resume "$work/A/model/epoch_2.safetensors" \
    >"$work/E.out" 2>&1
check "eval-only" $? "$(cat "$work/E.out")"
# The expected line comes from A's output; an empty one (grep -F "" matches anything) fails.
want=$(grep '^epoch 2: test' "$work/A.out" | sed 's/^epoch 2: //')
"$bin" --data "$work/data" --batch-size 32 --eval-only --init "$work/A/model/epoch_2.safetensors" \
    >"$work/E2.out" 2>&1
if [ -z "$want" ]; then
    check "eval-only result" 1 "no expected line: run A printed no 'epoch 2: test' line"
else
    grep -qF "$want" "$work/E.out"; check "eval-only result" $? "want '$want' in $(cat "$work/E.out")"
    grep -qF "$want" "$work/E2.out"; check "eval-only --init" $? "$(cat "$work/E2.out")"
fi

# A checkpoint's recorded normalisation reaches every path that evaluates from it: --eval-only
# --init gives what --eval-only --resume gives (a far-off normalisation, so that leaving it out
# changes the result). A plain state_dict (the same weights without clcnn's metadata) records
# none and takes --normalize as given.
"$bin" --data "$work/data" --batch-size 32 --seed 7 --lr 0.05 --max-steps 2 --no-tensorboard \
    --normalize 0.9,0.05 --model "conv(4,3,pad=1) relu maxpool(2) flatten linear(10)" \
    --save-dir "$work/N" >"$work/N.out" 2>&1
check "run N" $? "$(cat "$work/N.out")"
nk=$work/N/epoch_1.safetensors
"$bin" --data "$work/data" --batch-size 32 --eval-only --resume "$nk" >"$work/N1.out" 2>&1
check "N eval-only --resume" $? "$(cat "$work/N1.out")"
"$bin" --data "$work/data" --batch-size 32 --eval-only --init "$nk" \
    --model "conv(4,3,pad=1) relu maxpool(2) flatten linear(10)" >"$work/N2.out" 2>&1
check "N eval-only --init" $? "$(cat "$work/N2.out")"
nres=$(sed -n 's/^epoch [0-9]*: \(test loss .*\)$/\1/p' "$work/N1.out")
ninit=$(sed -n 's/^epoch [0-9]*: \(test loss .*\)$/\1/p' "$work/N2.out")
[ -n "$nres" ] && [ "$nres" = "$ninit" ]
check "N --init evaluates as --resume" $? "--resume: '$nres', --init: '$ninit'"
python3 - "$nk" "$work/Nplain.safetensors" <<'EOF3'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h.pop("__metadata__")
j = json.dumps(h).encode()
j += b" " * (-len(j) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(j)) + j + b[8 + n:])
EOF3
"$bin" --data "$work/data" --batch-size 32 --eval-only --init "$work/Nplain.safetensors" \
    --normalize 0.9,0.05 --model "conv(4,3,pad=1) relu maxpool(2) flatten linear(10)" \
    >"$work/N3.out" 2>&1
nplain=$(sed -n 's/^epoch [0-9]*: \(test loss .*\)$/\1/p' "$work/N3.out")
[ -n "$nres" ] && [ "$nres" = "$nplain" ]
check "N plain --init takes --normalize" $? "--resume: '$nres', plain --init: '$nplain' $(cat "$work/N3.out")"

# Bad inputs: one line on stderr, non-zero exit, nothing overwritten. Each row is
# "arguments|text the error line must contain"; a row without that text fails, since an empty
# pattern would match any message.
cp "$work/A/model/epoch_1.safetensors" "$work/torn.safetensors"
truncate -s 5000 "$work/torn.safetensors"
cp "$work/A/model/epoch_2.safetensors" "$work/mixed.safetensors"
cp "$work/A/model/epoch_1.state.safetensors" "$work/mixed.state.safetensors"
mkdir -p "$work/trunc/cifar-10-batches-bin"
cp "$work"/data/cifar-10-batches-bin/*.bin "$work/trunc/cifar-10-batches-bin/"
truncate -s 6000 "$work/trunc/cifar-10-batches-bin/data_batch_1.bin"
before=$(md5sum "$work/A/model/epoch_2.safetensors")
while IFS='|' read -r args msg; do
    if [ -z "$msg" ]; then check "bad input: $args" 1 "the table gives no expected message"; continue; fi
    out=$(eval "\"$bin\" $args" 2>&1 >/dev/null); rc=$?
    lines=$(printf '%s\n' "$out" | grep -c .)
    [ $rc -ne 0 ] && [ "$lines" = 1 ] && echo "$out" | grep -q -- "$msg"
    check "bad input: $args" $? "rc=$rc lines=$lines: $out"
done <<EOF2
--data "$work/nope" --save-dir "$work/A/model"|cannot open
--data "$work/trunc" --save-dir "$work/A/model"|data_batch_1.bin
--data "$work/data" --resume "$work/torn.safetensors" --save-dir "$work/A/model"|torn.safetensors
--data "$work/data" --resume "$work/mixed.safetensors" --save-dir "$work/A/model"|does not belong
--data "$work/data" --resume "$work/A/model/epoch_9.safetensors"|epoch_9.safetensors
--data "$work/data" --init "$work/data/cifar-10-batches-bin/test_batch.bin" --save-dir "$work/A/model"|test_batch.bin
--data "$work/data" --model "conv(8,3) bogus" --save-dir "$work/A/model"|column 11
--data "$work/data" --batch-size 0|--batch-size
--data "$work/data" --lr -1|--lr
--data "$work/data" --optimizer rmsprop|--optimizer
--data "$work/data" --schedule linear|--schedule
--data "$work/data" --resume "$work/D2/model/epoch_2.safetensors" --schedule cosine --save-dir "$work/A/model"|--schedule cosine conflicts
--data "$work/data" --resume "$work/D/model/epoch_1.safetensors" --epochs 3 --save-dir "$work/A/model"|spans 20 steps
--data "$work/data" --resume "$work/D/model/epoch_1.safetensors" --batch-size 16 --save-dir "$work/A/model"|--batch-size 16 changes
--data "$work/data" --resume "$work/D/model/epoch_1.safetensors" --label-smoothing 0 --save-dir "$work/A/model"|--label-smoothing 0 conflicts
--data "$work/data" --save-dir /proc/clcnn-cannot-write|--save-dir
--data "$work/data" --dataset mnist --save-dir "$work/A/model"|no train-images-idx3-ubyte
--data "$work/data" --eval-only --init "$work/N/epoch_1.safetensors" --normalize 0.5,0.25 --model "conv(4,3,pad=1) relu maxpool(2) flatten linear(10)"|--init: --normalize 0.5,0.25 conflicts with the checkpoint's 0.9,0.05
--data "$work/data" --init "$work/N/epoch_1.safetensors" --normalize 0.5,0.25 --model "conv(4,3,pad=1) relu maxpool(2) flatten linear(10)" --save-dir "$work/A/model"|--init: --normalize 0.5,0.25 conflicts
EOF2
[ "$before" = "$(md5sum "$work/A/model/epoch_2.safetensors")" ]; check "nothing overwritten" $? "epoch_2 changed"

# A checkpoint written by clcnn 0.5.5 (tests/fixtures/v0.5.5, the commands in its README): the
# spec's parameter names and layout are those 0.5.5 wrote, --init evaluates it as 0.5.5 did,
# and --resume trains epoch 2 to the tensors 0.5.5's uninterrupted run saved. Those were
# computed on PoCL's CPU device; another implementation (or CPU) rounds differently, so the
# tensors must agree to within 1e-4 of each one's largest magnitude (a misread name, offset
# or optimizer state is off by far more), the counters exactly.
old=$src/fixtures/v0.5.5
python3 "$src/make_cifar.py" "$work/old_data" 96 32 >/dev/null || check "old data" 1 "make_cifar"
mkdir -p "$work/old"
cp "$old/epoch_1.safetensors" "$old/epoch_1.state.safetensors" "$work/old/"
old_model="conv(4,3,pad=1,bias=0) bn relu res(conv(4,3,pad=1,bias=0) bn relu) maxpool(4) flatten"
old_model+=" linear(10)"
"$bin" --data "$work/old_data" --init "$old/epoch_1.safetensors" --model "$old_model" \
    --eval-only >"$work/old_init.out" 2>&1
grep -q "test loss 2.14[0-9]*, test accuracy 0.4062 (13/32)" "$work/old_init.out"
check "0.5.5 checkpoint through --init" $? "$(tail -3 "$work/old_init.out")"
"$bin" --data "$work/old_data" --resume "$work/old/epoch_1.safetensors" --epochs 2 \
    --no-tensorboard --save-dir "$work/old" >"$work/old_resume.out" 2>&1
check "0.5.5 checkpoint through --resume" $? "$(tail -3 "$work/old_resume.out")"
python3 - "$old/epoch_2.safetensors" "$work/old/epoch_2.safetensors" <<'EOF3'
import json, struct, sys
def tensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h, d = json.loads(b[8:8 + n]), b[8 + n:]
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        raw = d[v["data_offsets"][0]:v["data_offsets"][1]]
        fmt = {"F32": "f", "I64": "q"}[v["dtype"]]
        out[k] = (v["dtype"], struct.unpack("<%d%s" % (len(raw) // struct.calcsize(fmt), fmt), raw))
    return out
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
bad = sorted(set(a) ^ set(b))
for k in sorted(set(a) & set(b)):
    (ta, va), (tb, vb) = a[k], b[k]
    scale = max(abs(x) for x in va) if va else 0.0
    if ta != tb or len(va) != len(vb) or (ta == "I64" and va != vb) or \
            max((abs(x - y) for x, y in zip(va, vb)), default=0.0) > 1e-4 * scale:
        bad.append(k)
sys.exit("tensors differ from 0.5.5's: %s" % bad if bad else 0)
EOF3
check "0.5.5 checkpoint resumed to 0.5.5's epoch 2" $? "see above"

exit $fail
