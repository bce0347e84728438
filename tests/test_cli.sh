#!/usr/bin/env bash
# CLI tests through the real binary: listing, device selection through the filter, and one
# clear error line with a non-zero exit for every bad filter or index.
set -u
bin=$1
fail=0
check() { # check NAME CONDITION-RESULT MESSAGE
    if [ "$2" != 0 ]; then echo "FAIL: $1: $3"; fail=1; fi
}
export CLCNN_CACHE_DIR=${CLCNN_CACHE_DIR:-$(mktemp -d)}
unset CLCNN_VISIBLE_DEVICES

"$bin" --help | grep -q -- '--list-devices'; check help $? "--help lacks --list-devices"
for f in --label-smoothing --schedule --pct-start --random-crop --hflip --no-decay-bn-bias \
    --no-recipe '^Recipes:' '^  resnet  *--schedule'; do
    "$bin" --help | grep -q -- "$f"; check "help $f" $? "--help lacks $f"
done
"$bin" --version | grep -q '^clcnn [0-9]'; check version $? "--version lacks 'clcnn X'"
"$bin" --version | grep -q '^CLBlast '; check version-blas $? "--version lacks CLBlast"

out=$("$bin" --bogus 2>&1); rc=$?
[ $rc -ne 0 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ]; check bad-option $? "rc=$rc out=$out"
out=$("$bin" --device x 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q "not a non-negative integer"; check bad-index $? "$out"
out=$("$bin" --device 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q "needs a value"; check missing-value $? "$out"

list=$("$bin" --list-devices 2>&1)
if [ $? -ne 0 ] || ! echo "$list" | grep -q 'P:D'; then
    if echo "$list" | grep -q "no OpenCL device found"; then echo "no OpenCL device: skipping"; exit 77; fi
    echo "FAIL: --list-devices: $list"; exit 1
fi
echo "$list"
type=$(echo "$list" | awk 'NR==2 {print $3}')
for f in "$type" 0 0:0; do
    out=$(CLCNN_VISIBLE_DEVICES=$f "$bin" --list-devices 2>&1)
    [ $? -eq 0 ] && echo "$out" | grep -q '^0  *0:0 .*\*$'; check "filter=$f" $? "$out"
    out=$(CLCNN_VISIBLE_DEVICES=$f "$bin" --data /nonexistent-clcnn-data 2>&1)
    echo "$out" | grep -q ' on device 0:0 '; check "select filter=$f" $? "$out"
done
for f in '' 7 9:9 gpuu 0,,1; do
    for args in "--list-devices" ""; do
        out=$(CLCNN_VISIBLE_DEVICES=$f "$bin" $args 2>&1); rc=$?
        lines=$(printf '%s\n' "$out" | wc -l)
        [ $rc -ne 0 ] && [ "$lines" -eq 1 ] && echo "$out" | grep -q '^clcnn_train: '
        check "bad filter '$f' $args" $? "rc=$rc lines=$lines out=$out"
    done
done
out=$(CLCNN_VISIBLE_DEVICES=gpuu "$bin" 2>&1)
echo "$out" | grep -q "'gpuu'" && echo "$out" | grep -q "available: 0 (0:0"; check filter-msg $? "$out"
for args in "--device 9" "--platform 9" "--platform 0 --device 9"; do
    out=$("$bin" $args 2>&1); rc=$?
    [ $rc -ne 0 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q "visible"
    check "select $args" $? "rc=$rc out=$out"
done

# ---- --plan makes the batch checks a training step makes -----------------------------------
# A batch whose buffers pass clcnn's 32-bit indices fails with training's one line instead of
# printing a plan of workspaces no device holds; a batch that fits still prints its plan.
plan_dir=$(mktemp -d)
python3 "$(dirname "$0")/make_cifar.py" "$plan_dir/data" 10 10 >/dev/null ||
    { echo "FAIL: cannot write the data set"; rm -rf "$plan_dir"; exit 1; }
plan=(--data "$plan_dir/data" --model seed --plan)
out=$("$bin" "${plan[@]}" --batch-size 1048576 2>&1 >/dev/null); rc=$?
[ $rc -ne 0 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] &&
    echo "$out" | grep -q "^clcnn_train: --plan: the input batch needs 3221225472 elements for a batch of 1048576, more than the 2147418112 that clcnn's 32-bit kernel indices reach; use a smaller batch$"
check "plan batch too large" $? "rc=$rc out=$out"
out=$("$bin" "${plan[@]}" --batch-size 16 2>&1); rc=$?
[ $rc -eq 0 ] && echo "$out" | grep -q "^plan for a batch of 16:"; check "plan batch 16" $? "rc=$rc out=$out"
rm -rf "$plan_dir"
exit $fail
