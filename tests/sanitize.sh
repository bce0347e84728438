#!/usr/bin/env bash
# The whole test suite built with AddressSanitizer + UndefinedBehaviorSanitizer
# (-DCLCNN_SANITIZE=ON) in its own folder and run under ctest. UBSan halts on the first report
# and LeakSanitizer runs with tests/lsan.supp (OpenCL-implementation leaks only, each justified
# there). Left out: the oclgrind test (oclgrind preloads its own OpenCL runtime, which ASan
# refuses to run under), test_install (an ASan-instrumented static library cannot be linked
# by the plain consumer programs that test builds; it checks packaging, not memory) and the
# Python-based tests (not registered with CLCNN_SANITIZE: they check formats and numbers
# against other software, which the plain build covers). In CI a skipped test is a failure
# (tests/check_skips.sh).
# Usage: bash tests/sanitize.sh   (.ci/run calls it after tests/run.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${CLCNN_SAN_BUILD_DIR:-build-asan}
plain=${CLCNN_BUILD_DIR:-build}
# The kernels are the same as the plain build's: reuse its PoCL and clcnn caches when it has
# them, so PoCL does not compile every kernel again under ASan (minutes on 2 cores).
cache_dir() { if [ -d "$plain/$1" ]; then echo "$PWD/$plain/$1"; else echo "$PWD/$build/$1"; fi; }
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$(cache_dir pocl-cache)}
export CLCNN_CACHE_DIR=${CLCNN_CACHE_DIR:-$(cache_dir clcnn-cache)}
mkdir -p "$POCL_CACHE_DIR" "$CLCNN_CACHE_DIR"
# fast_unwind_on_malloc=0: PoCL has no frame pointers, so the fast unwinder stops at its first
# frame and a leak inside PoCL's compiler looks like a cl_mem clcnn forgot (both end in libpocl).
# Full stacks let tests/lsan.supp name PoCL's function and still catch clcnn's leaks (~1.6x
# slower).
# intercept_tls_get_addr=0: up to GCC 13, the sanitizer runtime's __tls_get_addr interceptor takes
# a dynamic TLS block whose address is 16 past a page boundary for a glibc 2.19 header and reads
# the two words before it as the block's bounds; when malloc places a block there by chance,
# LeakSanitizer's tracer dies scanning that range ("Tracer caught signal 11") after every check
# passed. Without the interceptor, dynamic TLS is not scanned as a root: that can only add leak
# reports, never hide one, and clcnn has no thread-local storage.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:fast_unwind_on_malloc=0:intercept_tls_get_addr=0:check_initialization_order=1:strict_init_order=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

echo "== configure and build with ASan+UBSan ($build)"
# test_e2e hands its event file to TensorBoard's own reader: the plain build's venv, when there.
pyenv=()
[ -d "$plain/pyenv" ] && pyenv=(-DCLCNN_PYENV="$PWD/$plain/pyenv")
cmake -S . -B "$build" -DCLCNN_WERROR=ON -DCLCNN_SANITIZE=ON "${pyenv[@]}" ${CLCNN_CMAKE_ARGS:-} \
    >/dev/null
cmake --build "$build" -j"$(nproc)"
# test_program and test_context build every program with a cold clcnn cache, each in a PoCL
# cache of its own (tests/CMakeLists.txt). Under ASan, PoCL's compiler runs with every malloc
# unwound in full: a cold PoCL cache there took test_program 13 minutes of CI's 2 cores. The
# plain build's copies of those PoCL caches hold the same kernels built with the same options,
# so PoCL loads them; clcnn's own cache, which the tests check, stays cold.
for d in pocl-cache-program pocl-cache-context; do
    if [ -d "$plain/tests/$d" ] && [ ! -e "$build/tests/$d" ]; then
        cp -a "$plain/tests/$d" "$build/tests/$d"
    fi
done
echo "== tests under ASan+UBSan"
log=$PWD/$build/ctest.log
(cd "$build" && ctest --output-on-failure -j"$(nproc)" -LE oclgrind -E '^test_install$' \
    ${CLCNN_CTEST_ARGS:-}) 2>&1 | tee "$log"
bash tests/check_skips.sh "$log"
