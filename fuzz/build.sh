#!/usr/bin/env bash
# Builds the libFuzzer harnesses with clang (-fsanitize=fuzzer,address,undefined), each
# against only the library files it exercises, into OUT (default build-fuzz/ at the top of the
# tree). Needs clang and its runtime (Debian: clang, libclang-rt-14-dev or later).
# Usage: bash fuzz/build.sh [OUT]
# Then:  build-fuzz/fuzz_spec -max_total_time=600 fuzz/corpus/spec   (see docs/RELIABILITY.md)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=${1:-$root/build-fuzz}
cc=${CC:-clang}
mkdir -p "$out"
flags=(-std=c11 -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=undefined -D_POSIX_C_SOURCE=200809L -DCL_TARGET_OPENCL_VERSION=120
       -I"$root/include" -I"$root/src" -Wall -Wextra)
data=("$root"/src/data/*.c "$root/src/common.c")
build() { # build NAME SOURCES... -- LIBS...
    local name=$1 srcs=() libs=()
    shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do srcs+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    libs=("$@")
    echo "fuzz/build.sh: $name"
    "$cc" "${flags[@]}" "$here/$name.c" "${srcs[@]}" -o "$out/$name" "${libs[@]}"
}
build fuzz_cifar "${data[@]}" -- -lz
build fuzz_idx "${data[@]}" -- -lz
build fuzz_gzip "${data[@]}" -- -lz
build fuzz_safetensors "$root/src/safetensors.c" "$root/src/files.c" "$root/src/common.c" -- -lxxhash
# The spec's layer syntaxes live in the layer units, which link the rest of the engine: the
# harness gets the whole library (with no kernel sources: it never touches a device).
printf '%s\n' '#include "program.h"' \
    'const clcnn_kernel_source clcnn_kernel_sources[] = {{0}};' \
    'const int clcnn_kernel_source_count = 0;' >"$out/no_kernels.c"
engine=("$root"/src/*.c "$root"/src/layers/*.c "$root"/src/layers/conv2d/*.c "$root"/src/data/*.c
    "$out/no_kernels.c")
build fuzz_spec "${engine[@]}" -- -lOpenCL -lclblast -lxxhash -lz -lm
build fuzz_devices "$root/src/device.c" "$root/src/env.c" "$root/src/common.c" -- -lOpenCL
