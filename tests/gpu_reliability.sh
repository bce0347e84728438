#!/usr/bin/env bash
# The reliability checks on an NVIDIA GPU, for a machine without OpenCL headers, ICD loader or
# CLBlast and without internet (the .deb files of bench/gpu_check.sh --fetch carried in .debs/):
# the bad-input table, the kill -9 test (bit-exact resume on the GPU) and the small-kernel test
# in a plain build, then the whole suite built with ASan+UBSan on the GPU (LeakSanitizer
# reports what NVIDIA's driver leaks). Logs go to $OUT when it is set.
# Usage: bash tests/gpu_reliability.sh   (SKIP_ASAN=1: the plain part only)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/build-gpu-rel-logs}
mkdir -p "$out"
t0=$(date +%s)
prefix=$PWD/.gpu-prefix
ls .debs/*.deb >/dev/null 2>&1 || { echo "no .debs/ (bash bench/gpu_check.sh --fetch)"; exit 1; }
rm -rf "$prefix" && mkdir -p "$prefix"
for d in .debs/*.deb; do dpkg-deb -x "$d" "$prefix" || exit 1; done
lib=$prefix/usr/lib/x86_64-linux-gnu
for pc in "$lib"/pkgconfig/*.pc "$prefix"/usr/share/pkgconfig/*.pc; do
    [ -f "$pc" ] && sed -i "s|^prefix=/usr|prefix=$prefix/usr|" "$pc"
done
export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PKG_CONFIG_PATH=$lib/pkgconfig:$prefix/usr/share/pkgconfig
export CMAKE_PREFIX_PATH=$prefix/usr
export CPATH=$prefix/usr/include
if ! grep -qs nvidia /etc/OpenCL/vendors/*.icd; then
    nv=$( (ldconfig -p 2>/dev/null | awk '/libnvidia-opencl.so.1/ {print $NF}'
           ls /usr/local/nvidia/lib64/libnvidia-opencl.so.1 \
              /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 2>/dev/null) | head -1)
    [ -n "$nv" ] || { echo "libnvidia-opencl.so.1 not found"; exit 1; }
    mkdir -p "$prefix/vendors" && echo "$nv" >"$prefix/vendors/nvidia.icd"
    export OCL_ICD_VENDORS=$prefix/vendors
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | tee "$out/gpu.txt"
export CLCNN_VISIBLE_DEVICES=gpu
export CLCNN_CACHE_DIR=$PWD/build-gpu-rel/clcnn-cache POCL_CACHE_DIR=$PWD/build-gpu-rel/pocl-cache
mkdir -p "$CLCNN_CACHE_DIR" "$POCL_CACHE_DIR"
j=$(nproc)

echo "== plain build"
cmake -S . -B build-gpu-rel -DCLCNN_WERROR=ON >"$out/build-rel.log" 2>&1 &&
    cmake --build build-gpu-rel -j"$j" >>"$out/build-rel.log" 2>&1 ||
    { tail -30 "$out/build-rel.log"; exit 1; }
./build-gpu-rel/clcnn_train --list-devices | tee "$out/devices.txt"
(cd build-gpu-rel && ctest --output-on-failure -j3 -R 'test_bad_inputs|test_kill|test_kernels_small' \
    >"$out/ctest-rel.log" 2>&1)
echo "plain ctest exit $?"; tail -8 "$out/ctest-rel.log"
for b in clblast opencl; do
    CLCNN_BACKEND=$b ./build-gpu-rel/tests/test_kernels_small >"$out/small-$b.txt" 2>&1
    echo "test_kernels_small $b exit $?"
done

[ "${SKIP_ASAN:-0}" = 1 ] && { echo "== done in $(($(date +%s) - t0)) s (SKIP_ASAN=1)"; exit 0; }
echo "== ASan+UBSan build"
cmake -S . -B build-gpu-asan -DCLCNN_WERROR=ON -DCLCNN_SANITIZE=ON >"$out/build-asan.log" 2>&1 &&
    cmake --build build-gpu-asan -j"$j" >>"$out/build-asan.log" 2>&1 ||
    { tail -30 "$out/build-asan.log"; exit 1; }
# CUDA-based drivers map memory where ASan's shadow gap is by default.
# intercept_tls_get_addr=0: see tests/sanitize.sh.
export ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=1:fast_unwind_on_malloc=0:intercept_tls_get_addr=0
export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
(cd build-gpu-asan && timeout 300 ctest --output-on-failure -j6 -LE oclgrind -E '^test_install$' \
    >"$out/ctest-asan.log" 2>&1)
echo "asan ctest exit $?"; tail -25 "$out/ctest-asan.log"
# One program alone, with its full leak report, for the suppressions file.
./build-gpu-asan/tests/test_kernels_small >"$out/asan-small.txt" 2>&1
echo "asan test_kernels_small exit $?"
grep -E '^(Direct|Indirect) leak|SUMMARY' "$out/asan-small.txt" | head -20
echo "== done in $(($(date +%s) - t0)) s"
