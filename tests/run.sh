#!/usr/bin/env bash
# Installs what is missing (Debian/Ubuntu, as root), builds clcnn with warnings as errors and
# runs the whole test suite under ctest. Usage: bash tests/run.sh   (CI calls this too)
# The Python-based tests (TensorBoard's reader, the PyTorch cross-check) need more: Debian's
# python3-venv, python3-torch, python3-torchvision and dataset-fashion-mnist, and a venv with a
# pinned TensorBoard made in the build folder (tests/pyenv.sh; reused, so no network after the
# first run). When those cannot be had (no network) the build goes on and the tests are skipped;
# with CLCNN_REQUIRE_PYTHON_TESTS=1 (CI) they fail instead.
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(cmake gcc g++ make pkg-config python3 pocl-opencl-icd ocl-icd-opencl-dev opencl-headers
      libclblast-dev zlib1g-dev libxxhash-dev oclgrind openmpi-bin libopenmpi-dev clang)
bash cmake/apt-install.sh "${pkgs[@]}"
require=${CLCNN_REQUIRE_PYTHON_TESTS:-${CLCNN_CI:-0}}
python_tests_missing() {
    if [ "$require" = 1 ]; then
        echo "error: $1, and CLCNN_REQUIRE_PYTHON_TESTS=1: the Python-based tests will fail" >&2
    else
        echo "warning: $1: the Python-based tests will be skipped" >&2
    fi
}
# About 640 MB installed (python3-torch brings 175 packages), 2 minutes on first install.
py_pkgs=(python3-venv python3-torch python3-torchvision dataset-fashion-mnist)
bash cmake/apt-install.sh "${py_pkgs[@]}" || python_tests_missing "cannot install ${py_pkgs[*]}"

build=${CLCNN_BUILD_DIR:-build}
# PoCL refuses to start when HOME is not writable unless its cache points somewhere writable;
# the kernel caches live in the build folder so test runs leave nothing in HOME.
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$PWD/$build/pocl-cache}
export CLCNN_CACHE_DIR=${CLCNN_CACHE_DIR:-$PWD/$build/clcnn-cache}
mkdir -p "$POCL_CACHE_DIR" "$CLCNN_CACHE_DIR"
pyenv=$PWD/$build/pyenv
bash tests/pyenv.sh "$pyenv" || python_tests_missing "no TensorBoard venv at $pyenv"

echo "== configure and build ($build)"
cmake -S . -B "$build" -DCLCNN_WERROR=ON -DCLCNN_PYENV="$pyenv" ${CLCNN_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j"$(nproc)"
echo "== OpenCL devices"
# Without a device most tests skip; CI (CLCNN_CI=1, set by .ci/run) treats that as a failure.
if ! "$build/clcnn_train" --list-devices; then
    if [ "${CLCNN_CI:-0}" = 1 ]; then
        echo "error: no OpenCL device: CI runs the suite on one (PoCL's CPU device)" >&2
        exit 1
    fi
    echo "warning: no OpenCL device: the tests that need one will be skipped" >&2
fi
echo "== tests"
log=$PWD/$build/ctest.log
(cd "$build" && ctest --output-on-failure -j"$(nproc)" ${CLCNN_CTEST_ARGS:-}) 2>&1 | tee "$log"
bash tests/check_skips.sh "$log"
