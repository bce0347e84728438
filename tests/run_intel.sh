#!/usr/bin/env bash
# Runs the device tests (layers, GEMM and PyTorch fixtures with every GEMM backend, data-parallel
# replicas, and the CLI end to end) of an already built BUILD_DIR on a second OpenCL
# implementation, Intel's CPU runtime (tests/intel_opencl.sh), with only Intel's device
# visible. A skipped test (exit 77) counts as a failure here: this run exists to prove the tests
# ran on that device.
# Usage: bash tests/run_intel.sh BUILD_DIR      (after tests/run.sh or cmake --build BUILD_DIR)
set -uo pipefail
die() { echo "run_intel.sh: FAIL: $*" >&2; exit 1; }
[ $# -eq 1 ] || die "usage: run_intel.sh BUILD_DIR"
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" 2>/dev/null && pwd) || die "no build folder $1"
if [ ! -x "$build/clcnn_train" ] || [ ! -f "$build/CTestTestfile.cmake" ]; then
    die "$build is not a built clcnn folder (run tests/run.sh or cmake --build first)"
fi
start=$(date +%s)

vendors=$(bash "$here/intel_opencl.sh" "$build") || exit 1
# ocl-icd reads only this folder, so PoCL (/etc/OpenCL/vendors) is not loaded at all.
export OCL_ICD_VENDORS=$vendors
unset OCL_ICD_FILENAMES OPENCL_VENDOR_PATH CLCNN_VISIBLE_DEVICES CLCNN_BACKEND
export CLCNN_CACHE_DIR=$build/clcnn-cache-intel
mkdir -p "$CLCNN_CACHE_DIR"

# Exactly one device, Intel's: a listing error or any other device is a failure, not a skip.
list=$("$build/clcnn_train" --list-devices 2>&1) || die "clcnn_train --list-devices: $list"
rows=$(printf '%s\n' "$list" | awk 'NR > 1 && NF')
nrows=$(printf '%s\n' "$rows" | grep -c .)
if [ "$nrows" != 1 ] || ! printf '%s\n' "$rows" | grep -q 'Intel(R) OpenCL'; then
    die "expected only Intel's OpenCL CPU device, clcnn_train --list-devices shows: $list"
fi
device=$(printf '%s\n' "$rows" | sed 's/  */ /g')
echo "== Intel OpenCL: $device"

regex='^(test_gemm|test_fixtures)(_.*)?$|^(test_layer_ops|test_e2e|test_replicas)$'
cd "$build" || die "cannot enter $build"
expected=$(ctest -N -R "$regex" | sed -n 's/^ *Test *#[0-9]*: //p')
[ -n "$expected" ] || die "no test matches $regex in $build"
log=$build/intel-ctest.log
# The runtime spreads each test over every core through TBB; two tests at a time on 2 cores
# were still about 10% faster than one (warm caches: 101-109 s against 114-122 s, loaded host).
ctest -R "$regex" --output-on-failure -j"$(nproc)" --timeout "${CLCNN_INTEL_TIMEOUT:-600}" \
    >"$log" 2>&1
rc=$?
# Only "Passed" passes: ***Failed, ***Skipped, ***Timeout, Not Run, ... all fail.
# ctest's lines: " 3/10 Test  #8: test_gemm_clblast .........***Skipped   0.01 sec"
line_re='^ *[0-9]*/[0-9]* Test *#[0-9]*: \([^ ]*\) [ .]*\(.*[^ ]\) \{1,\}\([0-9.]* sec\)$'
status=$(sed -n "s|$line_re|\1\|\2\|\3|p" "$log")
bad=0
for t in $expected; do
    line=$(printf '%s\n' "$status" | awk -F'|' -v t="$t" '$1 == t' | head -1)
    IFS='|' read -r _ s secs_t <<<"$line"
    printf '  %-24s %-12s %s\n' "$t" "${s:-no result}" "${secs_t:-}"
    [ "${s:-}" = Passed ] || bad=$((bad + 1))
done
n=$(printf '%s\n' "$expected" | grep -c .)
secs=$(($(date +%s) - start))
if [ "$bad" -ne 0 ] || [ "$rc" -ne 0 ]; then
    grep -v '^ *[0-9]*/[0-9]* Test *#' "$log" | tail -40
    die "$bad of $n tests did not pass on Intel's OpenCL runtime in ${secs} s (ctest rc $rc;" \
        "logs: $log, $build/Testing/Temporary/LastTest.log)"
fi
echo "== run_intel.sh: $n/$n tests passed on Intel's OpenCL runtime in ${secs} s"
