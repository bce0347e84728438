#!/usr/bin/env bash
# Installs what is missing (Debian/Ubuntu, as root), builds clcnn with warnings as errors and
# runs the whole test suite under ctest. Usage: bash tests/run.sh   (CI calls this too)
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(cmake gcc g++ make pkg-config python3 pocl-opencl-icd ocl-icd-opencl-dev opencl-headers
      libclblast-dev zlib1g-dev libxxhash-dev oclgrind)
bash cmake/apt-install.sh "${pkgs[@]}"

build=${CLCNN_BUILD_DIR:-build}
# PoCL refuses to start when HOME is not writable unless its cache points somewhere writable;
# the kernel caches live in the build folder so test runs leave nothing in HOME.
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$PWD/$build/pocl-cache}
export CLCNN_CACHE_DIR=${CLCNN_CACHE_DIR:-$PWD/$build/clcnn-cache}
mkdir -p "$POCL_CACHE_DIR" "$CLCNN_CACHE_DIR"

echo "== configure and build ($build)"
cmake -S . -B "$build" -DCLCNN_WERROR=ON ${CLCNN_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j"$(nproc)"
echo "== OpenCL devices"
"$build/clcnn_train" --list-devices || true
echo "== tests"
cd "$build"
ctest --output-on-failure -j"$(nproc)" ${CLCNN_CTEST_ARGS:-}
