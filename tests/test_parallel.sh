#!/usr/bin/env bash
# Data parallelism gives the single-device answer, through the real clcnn_train: the seed model,
# --no-shuffle, 30 steps of global batch 64 on one device, on two devices in one process
# (--devices 0,1), on two MPI ranks (one device each) and on two ranks with two devices each.
# Every per-step loss and every final weight must be within 1e-5 relative of the one-device run
# (the split batch's sums are added in another order, nothing else differs). Then batches that
# do not split evenly: one shuffled epoch of 650 images with dropout, ten batches of 64 and one
# of 10, on three devices and on three ranks (shares of 22, 21, 21, then 4, 3, 3) against one
# device; and the tail rule with BatchNorm1d (which trains on no fewer than 2 samples): a last
# batch of 2 trains on two devices and on two ranks alike (it goes to one replica), and a last
# batch of 1 is refused at start-up on one device and on two, leaving the checkpoint in
# --save-dir as it was. PoCL shows one-core devices with POCL_DEVICES="basic basic".
# Usage: test_parallel.sh CLCNN_TRAIN [MPIEXEC]   (no MPIEXEC: the MPI runs are skipped, and the
# test reports itself skipped after the in-process checks pass)
set -u
bin=$1
mpiexec=${2:-}
src=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
export POCL_DEVICES="basic basic"
export CLCNN_CACHE_DIR=${CLCNN_CACHE_DIR:-$work/cache}
# Open MPI as root in a container (CI): see README, Scaling out.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none

"$bin" --list-devices >/dev/null 2>&1 || { echo "no OpenCL device: skipping"; exit 77; }
python3 "$src/make_cifar.py" "$work/data" 1920 64 || { echo "FAIL: cannot write the data"; exit 1; }
common=(--data "$work/data" --no-shuffle --log-every 1 --max-steps 30 --batch-size 64
        --no-tensorboard)
opts=("${common[@]}") # what run() and refused() pass
# The later cases: a small model with dropout, and one with BatchNorm1d.
tail_model="conv(8,3,pad=1) relu maxpool(2) conv(16,3,pad=1) relu maxpool(2) flatten"
tail_model+=" dropout(0.25) linear(32) relu linear(10)"
tail_opts=(--data "$work/tail_data" --epochs 1 --log-every 1 --batch-size 64 --no-tensorboard
           --model "$tail_model")
bn_opts=(--data "$work/bn_data" --epochs 1 --log-every 1 --no-tensorboard
         --model "conv(8,3,pad=1) relu maxpool(4) flatten linear(16) bn relu linear(10)")

# run NAME [launcher words ...] -- [clcnn_train options ...]
run() {
    local name=$1 launcher=()
    shift
    while [ "$1" != -- ]; do launcher+=("$1"); shift; done
    shift
    "${launcher[@]}" "$bin" "${opts[@]}" --metrics "$work/$name.jsonl" --save-dir "$work/$name" \
        "$@" >"$work/$name.log" 2>&1
    local rc=$?
    if [ $rc != 0 ]; then
        echo "FAIL: $name exited $rc:"
        tail -5 "$work/$name.log"
        fail=1
        return 1
    fi
    grep "^data-parallel, per step" "$work/$name.log"
    return 0
}

# compare NAME [REF STEPS]: losses and final weights against REF's run (default: the one-device
# run "one", 30 steps).
compare() {
    python3 - "$work/${2:-one}" "$work/$1" "${3:-30}" <<'EOF' || fail=1
import json, struct, sys

def losses(d):
    return [json.loads(l)["loss"] for l in open(d + ".jsonl") if '"train"' in l]

def tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        body = f.read()
    out = {}
    for k, v in head.items():
        if k == "__metadata__" or v["dtype"] != "F32":
            continue
        a, b = v["data_offsets"]
        out[k] = struct.unpack("<%df" % ((b - a) // 4), body[a:b])
    return out

ref, got, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
name, against = got.rsplit("/", 1)[1], ref.rsplit("/", 1)[1]
a, b = losses(ref), losses(got)
ok = len(a) == len(b) == steps
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b)) if ok else float("inf")
ta, tb = tensors(ref + "/epoch_1.safetensors"), tensors(got + "/epoch_1.safetensors")
wworst = 0.0
for k in ta:
    scale = max(max(abs(x) for x in ta[k]), 1e-6)
    wworst = max(wworst, max(abs(x - y) for x, y in zip(ta[k], tb[k])) / scale)
ok = ok and ta.keys() == tb.keys() and worst < 1e-5 and wworst < 1e-5
print("%s: %d losses, within %.2g relative of %s; final weights within %.2g of each tensor's "
      "scale%s" % (name, len(b), worst, against, wworst, "" if ok else "  FAIL (limit 1e-5)"))
sys.exit(0 if ok else 1)
EOF
}

# refused NAME [launcher words ...] -- [clcnn_train options ...]: a run that must stop at start-up
# with the last batch's numbers and the batch sizes that avoid it, training and saving nothing
# (--save-dir is b_devices', whose checkpoint must stay as it was).
refused() {
    local name=$1 launcher=()
    shift
    while [ "$1" != -- ]; do launcher+=("$1"); shift; done
    shift
    "${launcher[@]}" "$bin" "${opts[@]}" --metrics "$work/$name.jsonl" \
        --save-dir "$work/b_devices" "$@" >"$work/$name.log" 2>&1
    local rc=$? want="leaves a last batch of 1 of the 130 training images"
    if [ $rc = 0 ] || ! grep -q "$want.*use --batch-size 42 or 44" "$work/$name.log" ||
        grep -q '"train"' "$work/$name.jsonl" 2>/dev/null ||
        ! cmp -s "$work/b_devices/epoch_1.safetensors" "$work/b_epoch_1.safetensors"; then
        echo "FAIL: $name (exit $rc) did not refuse the last batch of 1 at start-up, or wrote:"
        tail -3 "$work/$name.log"
        fail=1
        return 1
    fi
    echo "$name: refused at start-up: $(grep -o "$want.*" "$work/$name.log" | head -1)"
}

run one -- --device 0 || exit 1
run devices -- --devices 0,1 && compare devices

# Unequal shares and a partial last batch.
python3 "$src/make_cifar.py" "$work/tail_data" 650 32 ||
    { echo "FAIL: cannot write the data"; exit 1; }
opts=("${tail_opts[@]}")
run t_one -- --device 0 || exit 1
run t_devices env POCL_DEVICES="basic basic basic" -- --devices 0,1,2 &&
    compare t_devices t_one 11

# BatchNorm1d's tail: 130 images, batches of 64, 64 and 2.
python3 "$src/make_cifar.py" "$work/bn_data" 130 16 ||
    { echo "FAIL: cannot write the data"; exit 1; }
opts=("${bn_opts[@]}")
run b_devices -- --devices 0,1 --batch-size 64 || exit 1
[ "$(grep -c '"train"' "$work/b_devices.jsonl")" = 3 ] ||
    { echo "FAIL: b_devices did not train 3 steps"; fail=1; }
cp "$work/b_devices/epoch_1.safetensors" "$work/b_epoch_1.safetensors"
refused b_refused_one -- --device 0 --batch-size 43 # 130 = 3 x 43 + 1
refused b_refused_devices -- --devices 0,1 --batch-size 43

if [ -z "$mpiexec" ]; then
    [ $fail = 0 ] || exit 1
    echo "clcnn_train was built without MPI: the MPI runs are skipped"
    exit 77
fi
mpi=("$mpiexec" --oversubscribe -np 2)
opts=("${common[@]}")
run ranks "${mpi[@]}" -- && compare ranks
run ranks_devices "${mpi[@]}" -- --devices 0,1 && compare ranks_devices
if ! grep -q "2 processes, 1 device here" "$work/ranks.log"; then
    echo "FAIL: the 2-rank run did not train on 2 processes:"
    head -6 "$work/ranks.log"
    fail=1
fi
opts=("${tail_opts[@]}")
run t_ranks "$mpiexec" --oversubscribe -np 3 -- && compare t_ranks t_one 11
if ! grep -q "3 processes, 1 device here" "$work/t_ranks.log"; then
    echo "FAIL: the 3-rank run did not train on 3 processes:"
    head -6 "$work/t_ranks.log"
    fail=1
fi
opts=("${bn_opts[@]}")
run b_ranks "${mpi[@]}" -- --batch-size 64 && compare b_ranks b_devices 3
refused b_refused_ranks "${mpi[@]}" -- --batch-size 43
[ $fail = 0 ] && echo "test_parallel: all checks passed"
exit $fail
