#!/usr/bin/env bash
# Compiles every kernel source (cl/*.cl) as OpenCL C 1.2 with clang for the generic spir64
# target at -O2, warnings as errors. The devices compile the same sources at run time and
# only print their warnings (PoCL to stderr, where no test looks): a `#pragma unroll` the
# optimizer cannot honour, say, leaves a kernel's accumulators in memory without failing a
# single result. A self-test first demands that a source with a warning fails, so that the
# check cannot pass vacuously. Exits 77 when clang is not installed.
# Usage: check_kernels_clang.sh   (CLANG=path picks the compiler)
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
cc=${CLANG:-$(command -v clang || true)}
if [ -z "$cc" ] || [ ! -x "$cc" ]; then echo "clang is not installed: skipping"; exit 77; fi
flags=(-x cl -cl-std=CL1.2 -O2 -target spir64 -Xclang -finclude-default-header -Werror -c
       -emit-llvm -o /dev/null)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf 'static int f(int a) { if (a) return 1; }\n__kernel void k(__global int *p) { p[0] = f(p[1]); }\n' \
    >"$work/warns.cl"
if "$cc" "${flags[@]}" "$work/warns.cl" >/dev/null 2>&1; then
    echo "FAIL: self-test: a source with a warning compiled under -Werror"
    exit 1
fi
echo "self-test: a source with a warning fails"
fail=0
for f in "$src"/cl/*.cl; do
    if out=$("$cc" "${flags[@]}" "$f" 2>&1); then
        echo "ok: $(basename "$f")"
    else
        echo "FAIL: $(basename "$f")"
        echo "$out" | head -20
        fail=1
    fi
done
exit $fail
