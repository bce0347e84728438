#!/usr/bin/env bash
# Runs tests/test_kernels_small (every kernel family once, tiny shapes) under oclgrind, once per
# GEMM backend, and fails on anything oclgrind reports: invalid reads and writes (always
# checked), API misuse (--check-api) and data races (--data-races). oclgrind exits 0 whatever it
# finds, so its report goes to a log (--log) that must stay empty. The program must exit 0
# (tests/test_kernels_small checks every step against the double-precision reference itself,
# so that holds under oclgrind too), and the figures it prints must match a run on the default
# device. A self-test first injects an out-of-bounds read into a copy of the kernels and
# demands that it is caught, so a change in oclgrind's output cannot make this check pass
# vacuously.
# Usage: [SELF_TEST=0] [PROG_ARGS=...] oclgrind_check.sh PROGRAM [BACKEND...]
#   (default backends: cpu opencl; PROG_ARGS: arguments for PROGRAM, split at spaces)
# PROGRAM prints "... | figures" lines (tests/test_kernels_small, tests/test_gemm).
# --uninitialized is not used: oclgrind 21.10 aborts on LLVM's freeze instruction and, with
# -cl-opt-disable, reports false positives (see docs/RELIABILITY.md).
set -u
prog=$1
shift
read -ra args <<<"${PROG_ARGS:-}"
backends=("$@")
[ ${#backends[@]} -gt 0 ] || backends=(cpu opencl)
src=$(cd "$(dirname "$0")/.." && pwd)
command -v oclgrind >/dev/null || { echo "oclgrind is not installed: skipping"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
figures() { sed -n 's/^\(.*\) |\(.*\)$/\1 |\2/p' "$1"; }

# under_oclgrind NAME LOG OUT [VAR=value...]: runs the program under oclgrind.
under_oclgrind() {
    local name=$1 log=$2 out=$3 rc
    shift 3
    env "$@" oclgrind --num-threads 1 --check-api --data-races --log "$log" "$prog" \
        "${args[@]}" >"$out" 2>"$out.err"
    rc=$?
    if ! grep -qE '^device( [0-9]+)?: Oclgrind' "$out.err" "$out"; then
        echo "FAIL: $name: did not run on oclgrind's device: $(head -5 "$out.err")"
        return 2
    fi
    return $rc
}

# Self-test: an out-of-bounds read in relu_forward must be reported (test_kernels_small runs
# relu_forward; SELF_TEST=0 skips this for programs that do not).
mkdir -p "$work/cl"
cp "$src"/cl/*.cl "$work/cl/"
if [ "${SELF_TEST:-1}" = 0 ]; then
    echo "self-test: skipped (SELF_TEST=0)"
else
sed -i 's/float v = x\[xoff + i\];/float v = x[xoff + i + (1 << 22)];/' "$work/cl/relu.cl"
if cmp -s "$src/cl/relu.cl" "$work/cl/relu.cl"; then
    echo "FAIL: self-test: could not inject the bug into relu_forward (cl/relu.cl changed?)"
    fail=1
else
    under_oclgrind self-test "$work/self.log" "$work/self.out" CLCNN_BACKEND=cpu \
        CLCNN_KERNEL_DIR="$work/cl"
    if grep -q 'Invalid read' "$work/self.log" && grep -q 'relu_forward' "$work/self.log"; then
        echo "self-test: the injected out-of-bounds read was reported"
    else
        echo "FAIL: self-test: oclgrind did not report the injected out-of-bounds read"
        head -20 "$work/self.log" "$work/self.out.err"
        fail=1
    fi
fi
fi

# The figures to match: the default device, when there is one.
"$prog" "${args[@]}" >"$work/ref.out" 2>"$work/ref.err"
ref_rc=$?
for b in "${backends[@]}"; do
    t0=$(date +%s)
    under_oclgrind "$b" "$work/$b.log" "$work/$b.out" CLCNN_BACKEND="$b"
    rc=$?
    if [ $rc -ne 0 ]; then
        echo "FAIL: $b: exit status $rc"; cat "$work/$b.out" "$work/$b.out.err" | tail -20; fail=1
    fi
    if [ -s "$work/$b.log" ]; then
        echo "FAIL: $b: oclgrind reported $(grep -c . "$work/$b.log") lines:"
        grep -E 'Invalid|race|Uninitialized|FATAL|error|Kernel:' "$work/$b.log" | sort | uniq -c |
            sort -rn | head -20
        head -40 "$work/$b.log"
        fail=1
    fi
    if [ $ref_rc -eq 0 ]; then
        # Same kernels, other summation order at most: 5 significant digits.
        if ! python3 - "$work/ref.out" "$work/$b.out" <<'PY'; then
import sys
def nums(p):
    out = []
    for line in open(p):
        if "|" in line:
            out.append([float(t) for t in line.split("|", 1)[1].replace("|", " ").split()
                        if t not in ("eval", "logits")])
    return out
a, b = nums(sys.argv[1]), nums(sys.argv[2])
ok = len(a) == len(b) and all(len(x) == len(y) and all(abs(u - v) <= 1e-4 * max(1.0, abs(u))
                                                      for u, v in zip(x, y)) for x, y in zip(a, b))
sys.exit(0 if ok else 1)
PY
            echo "FAIL: $b: figures differ from the default device's"
            diff <(figures "$work/ref.out") <(figures "$work/$b.out"); fail=1
        fi
    fi
    echo "$b: $(($(date +%s) - t0)) s under oclgrind, $(grep -c . "$work/$b.log") report lines"
done
exit $fail
