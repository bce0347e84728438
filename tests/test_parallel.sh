#!/usr/bin/env bash
# Data parallelism gives the single-device answer, through the real clcnn_train: the seed model,
# --no-shuffle, 30 steps of global batch 64 on one device, on two devices in one process
# (--devices 0,1), on two MPI ranks (one device each) and on two ranks with two devices each.
# Every per-step loss and every final weight must be within 1e-5 relative of the one-device run
# (the split batch's sums are added in another order, nothing else differs). PoCL shows two
# one-core devices with POCL_DEVICES="basic basic".
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

# run NAME [launcher words ...] -- [clcnn_train options ...]
run() {
    local name=$1 launcher=()
    shift
    while [ "$1" != -- ]; do launcher+=("$1"); shift; done
    shift
    "${launcher[@]}" "$bin" "${common[@]}" --metrics "$work/$name.jsonl" --save-dir "$work/$name" \
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

# compare NAME: losses and final weights against the one-device run.
compare() {
    python3 - "$work/one" "$work/$1" <<'EOF' || fail=1
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

ref, got = sys.argv[1], sys.argv[2]
name = got.rsplit("/", 1)[1]
a, b = losses(ref), losses(got)
ok = len(a) == len(b) == 30
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b)) if ok else float("inf")
ta, tb = tensors(ref + "/epoch_1.safetensors"), tensors(got + "/epoch_1.safetensors")
wworst = 0.0
for k in ta:
    scale = max(max(abs(x) for x in ta[k]), 1e-6)
    wworst = max(wworst, max(abs(x - y) for x, y in zip(ta[k], tb[k])) / scale)
ok = ok and ta.keys() == tb.keys() and worst < 1e-5 and wworst < 1e-5
print("%s: %d losses, within %.2g relative; final weights within %.2g of each tensor's scale%s"
      % (name, len(b), worst, wworst, "" if ok else "  FAIL (limit 1e-5)"))
sys.exit(0 if ok else 1)
EOF
}

run one -- --device 0 || exit 1
run devices -- --devices 0,1 && compare devices
if [ -z "$mpiexec" ]; then
    [ $fail = 0 ] || exit 1
    echo "clcnn_train was built without MPI: the MPI runs are skipped"
    exit 77
fi
mpi=("$mpiexec" --oversubscribe -np 2)
run ranks "${mpi[@]}" -- && compare ranks
run ranks_devices "${mpi[@]}" -- --devices 0,1 && compare ranks_devices
if ! grep -q "2 processes, 1 device here" "$work/ranks.log"; then
    echo "FAIL: the 2-rank run did not train on 2 processes:"
    head -6 "$work/ranks.log"
    fail=1
fi
[ $fail = 0 ] && echo "test_parallel: all checks passed"
exit $fail
