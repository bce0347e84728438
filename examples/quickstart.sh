#!/usr/bin/env bash
# Quick start on a fresh Debian/Ubuntu machine, as root: installs what is missing (OpenCL
# loader and headers, PoCL, CLBlast, zlib, xxhash, Debian's Fashion-MNIST), builds clcnn, and
# trains the `seed` model on Fashion-MNIST on the default OpenCL device.
# Usage: bash examples/quickstart.sh [clcnn_train options]   (default: --epochs 1)
#   e.g. bash examples/quickstart.sh --epochs 10     the tutorial's full 10 epochs
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(cmake gcc g++ make pkg-config pocl-opencl-icd ocl-icd-opencl-dev opencl-headers
      libclblast-dev zlib1g-dev libxxhash-dev dataset-fashion-mnist)
bash cmake/apt-install.sh "${pkgs[@]}"
# PoCL refuses to start when HOME is not writable; give it a cache it can always write.
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$PWD/build-release/pocl-cache}
mkdir -p "$POCL_CACHE_DIR"
echo "== building (build-release/)"
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DCLCNN_BUILD_TESTS=OFF >/dev/null
cmake --build build-release -j"$(nproc)" --target clcnn_train
./build-release/clcnn_train --list-devices
echo "== training"
if [ $# -eq 0 ]; then set -- --epochs 1; fi
exec ./build-release/clcnn_train "$@"
