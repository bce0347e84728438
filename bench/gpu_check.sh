#!/usr/bin/env bash
# The NVIDIA check in one command, for a machine with an NVIDIA GPU and driver but possibly
# without OpenCL headers, an ICD loader or CLBlast, and without internet.
#
#   bash bench/gpu_check.sh --fetch    here, where Debian's archive is reachable: downloads
#                                      the .deb files into .debs/ (git-ignored)
#   bash bench/gpu_check.sh            on the GPU machine, with .debs/ carried along: unpacks
#                                      them into .gpu-prefix/, registers NVIDIA's ICD through
#                                      OCL_ICD_VENDORS, builds, runs ctest on the GPU, the
#                                      fp32 peak probe, the benchmark (per-layer profile,
#                                      each GEMM backend) and PyTorch CUDA on the same model
#                                      for the ratio: seed (batch 64, 3x32x32) and the resnet
#                                      preset (batch 256, 1x28x28), PyTorch eager, fp32 with
#                                      TF32 off, in NCHW and channels_last; and clcnn's
#                                      implicit-GEMM convolutions (CLCNN_CONV_ALGO=implicit,
#                                      in every CLCNN_IMPLICIT_SIZE) against its default
#                                      im2col + CLBlast, and both models
#                                      autotuned (CLCNN_AUTOTUNE=1: gemm-tuned per pass).
# Results go to stdout and, when $OUT is set, to $OUT/gpu_check.log.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
debs=(ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-headers opencl-c-headers opencl-clhpp-headers
      libclblast1 libclblast-dev libxxhash0 libxxhash-dev zlib1g-dev)

if [ "${1:-}" = "--fetch" ]; then
    mkdir -p .debs && cd .debs && apt-get download "${debs[@]}" && ls -la
    exit $?
fi

log=${OUT:+$OUT/gpu_check.log}
exec > >(tee "${log:-/dev/null}") 2>&1
t0=$(date +%s)
prefix=$PWD/.gpu-prefix
ls .debs/*.deb >/dev/null 2>&1 || { echo "gpu_check: no .debs/ (run with --fetch where apt works)"; exit 1; }
rm -rf "$prefix" && mkdir -p "$prefix"
for d in .debs/*.deb; do dpkg-deb -x "$d" "$prefix" || exit 1; done
lib=$prefix/usr/lib/x86_64-linux-gnu
# pkg-config files carry prefix=/usr: point them at the private prefix.
for pc in "$lib"/pkgconfig/*.pc "$prefix"/usr/share/pkgconfig/*.pc; do
    [ -f "$pc" ] && sed -i "s|^prefix=/usr|prefix=$prefix/usr|" "$pc"
done
export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PKG_CONFIG_PATH=$lib/pkgconfig:$prefix/usr/share/pkgconfig
export CMAKE_PREFIX_PATH=$prefix/usr
export CPATH=$prefix/usr/include

# NVIDIA's ICD: use the system's vendors folder when it names NVIDIA, else register the driver's
# libnvidia-opencl.so.1 through OCL_ICD_VENDORS.
if ! grep -qs nvidia /etc/OpenCL/vendors/*.icd; then
    nv=$( (ldconfig -p 2>/dev/null | awk '/libnvidia-opencl.so.1/ {print $NF}';
           ls /usr/local/nvidia/lib64/libnvidia-opencl.so.1 /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 \
              /usr/lib64/libnvidia-opencl.so.1 2>/dev/null) | head -1)
    if [ -n "$nv" ]; then
        mkdir -p "$prefix/vendors" && echo "$nv" >"$prefix/vendors/nvidia.icd"
        export OCL_ICD_VENDORS=$prefix/vendors
        echo "gpu_check: NVIDIA ICD $nv registered through OCL_ICD_VENDORS"
    else
        echo "gpu_check: libnvidia-opencl.so.1 not found; OpenCL will see only other ICDs"
    fi
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
export CLCNN_CACHE_DIR=$PWD/build-gpu/clcnn-cache POCL_CACHE_DIR=$PWD/build-gpu/pocl-cache
mkdir -p "$CLCNN_CACHE_DIR" "$POCL_CACHE_DIR"
echo "== build"
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCLCNN_WERROR=ON >build-gpu.log 2>&1 &&
    cmake --build build-gpu -j"$(nproc)" >>build-gpu.log 2>&1 || { tail -40 build-gpu.log; exit 1; }
./build-gpu/clcnn_train --version
./build-gpu/clcnn_train --list-devices || exit 1
export CLCNN_VISIBLE_DEVICES=${CLCNN_VISIBLE_DEVICES:-gpu}
echo "== ctest on CLCNN_VISIBLE_DEVICES=$CLCNN_VISIBLE_DEVICES"
(cd build-gpu && ctest --output-on-failure -j4 -E 'test_install|oclgrind|asan' 2>&1 | tail -30)
echo "== fp32 peak probe on the GPU (its GPU launch path; the C cross-check runs only on CPUs)"
./build-gpu/peak_check --rounds 3 || echo "(peak probe failed)"
echo "== start-up (second start: binary cache)"
./build-gpu/bench_train --steps 1 --warmup 0 | grep start-up
./build-gpu/bench_train --steps 1 --warmup 0 | grep start-up
for b in clblast gpu opencl; do
    echo "== clcnn seed, batch 64, 3x32x32, backend $b"
    CLCNN_BACKEND=$b CLCNN_PROFILE=1 ./build-gpu/bench_train --steps 50 --warmup 5
    CLCNN_BACKEND=$b ./build-gpu/bench_train --steps 200 --warmup 10 | grep clcnn:
done
echo "== clcnn seed, autotuned (CLCNN_AUTOTUNE=1): the GEMM backend per shape, and per"
echo "   convolution pass the implicit GEMM against im2col (gemm-tuned)"
CLCNN_AUTOTUNE=1 ./build-gpu/bench_train --steps 5 --warmup 0 | grep clcnn: # tunes
CLCNN_AUTOTUNE=1 ./build-gpu/bench_train --steps 200 --warmup 10 | grep clcnn:
cat "$CLCNN_CACHE_DIR"/autotune-*.txt 2>/dev/null
echo "== PyTorch CUDA, seed, same batch (eager, fp32, TF32 off)"
for cl in "" --channels-last; do
    python3 bench/pytorch_bench.py --cuda --steps 200 --warmup 10 ${cl:+"$cl"} ||
        echo "(no PyTorch CUDA)"
done
r=(--model resnet --batch 256 --input 1x28x28)
echo "== clcnn resnet, batch 256, 1x28x28 (per-kernel profile, then the default backend)"
CLCNN_PROFILE=kernels ./build-gpu/bench_train "${r[@]}" --steps 20 --warmup 5
./build-gpu/bench_train "${r[@]}" --steps 100 --warmup 10 | grep clcnn:
echo "== clcnn resnet, autotuned (CLCNN_AUTOTUNE=1; the decisions are appended to the file above)"
CLCNN_AUTOTUNE=1 ./build-gpu/bench_train "${r[@]}" --steps 3 --warmup 0 | grep clcnn: # tunes
CLCNN_AUTOTUNE=1 ./build-gpu/bench_train "${r[@]}" --steps 100 --warmup 10 | grep clcnn:
grep '^conv-' "$CLCNN_CACHE_DIR"/autotune-*.txt 2>/dev/null
echo "== the implicit-GEMM convolutions (CLCNN_CONV_ALGO=implicit) against the default, both models:"
echo "   the device class's size with its per-kernel profile, then every size (CLCNN_IMPLICIT_SIZE)"
for m in "" "${r[*]}"; do
    # shellcheck disable=SC2086 # $m is a list of options
    CLCNN_CONV_ALGO=implicit CLCNN_PROFILE=kernels ./build-gpu/bench_train $m --steps 20 \
        --warmup 5 | grep -E "Conv2d|clcnn:"
    for z in 64 32 64x128 64w8; do
        echo "-- CLCNN_IMPLICIT_SIZE=$z"
        # shellcheck disable=SC2086
        CLCNN_CONV_ALGO=implicit CLCNN_IMPLICIT_SIZE=$z ./build-gpu/bench_train $m --steps 100 \
            --warmup 10 | grep clcnn:
    done
done
echo "== PyTorch CUDA, resnet, same batch and recipe (eager, fp32, TF32 off)"
for cl in "" --channels-last; do
    python3 bench/pytorch_bench.py --cuda "${r[@]}" --steps 100 --warmup 10 ${cl:+"$cl"} ||
        echo "(no PyTorch CUDA)"
done
echo "== done in $(( $(date +%s) - t0 )) s"
