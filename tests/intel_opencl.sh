#!/usr/bin/env bash
# Sets up Intel's CPU OpenCL runtime (PyPI `opencl-rt` 2021.2.0: libintelocl.so, OpenCL 2.1,
# driver 2021.11.3.0) in BUILD_DIR/intel-opencl as a second, independent OpenCL implementation
# for CI, and prints the folder to give ocl-icd as OCL_ICD_VENDORS (it holds only intel.icd).
# Usage: vendors=$(bash tests/intel_opencl.sh BUILD_DIR)
#
# Of the wheel's declared dependencies only `tbb` (libtbb.so.12, libtbbmalloc.so.2) is needed
# at run time; `common-cmplr-lic-rt` holds only licence text, and the libiomp5.so/libirml.so.1
# that libtbb probes for are optional. The runtime's libraries carry RUNPATH $ORIGIN, so tbb is
# unpacked beside them and no LD_LIBRARY_PATH is needed. The wheel's own libOpenCL.so (an ICD
# loader) is left out so that the system's ocl-icd stays the loader. Wheels are kept in
# BUILD_DIR/intel-opencl/wheels and checked against pinned hashes: a second run needs no network.
# Idempotent; quiet on success (stdout: the vendors folder); one line on stderr on failure.
set -euo pipefail
die() { echo "intel_opencl.sh: $*" >&2; exit 1; }
[ $# -eq 1 ] || die "usage: intel_opencl.sh BUILD_DIR"
[ "$(uname -m)" = x86_64 ] || die "Intel's OpenCL runtime wheel is x86_64 only, not $(uname -m)"
mkdir -p "$1" || die "cannot create $1"
root=$(cd "$1" && pwd)/intel-opencl
here=$(cd "$(dirname "$0")" && pwd)
wheels=$root/wheels lib=$root/lib vendors=$root/vendors log=$root/setup.log

# name==version and the sha256 of its one wheel (as pip downloaded and checked it from PyPI)
pins=(
    "opencl-rt==2021.2.0 62eb09ae093bd9e95e5786a6d672366a949799ead3ad13775d66f044ea5e7f5d"
    "tbb==2021.2.0 bf54992d1b5d6135620d5f3f2649bf331e2c412a4af00effd35481a9ecb98ee6"
)
# opencl-rt==2021.2.0 -> opencl_rt-2021.2.0-py2.py3-none-manylinux1_x86_64.whl
wheel_of() { local n=${1%%==*}; echo "${n//-/_}-${1#*==}-py2.py3-none-manylinux1_x86_64.whl"; }

mkdir -p "$wheels" "$vendors" || die "cannot create $root"
exec 9>"$root/.lock"
flock 9 # two runs on one build folder take turns

have_wheel() { [ -f "$wheels/$1" ] && [ "$(sha256sum "$wheels/$1" | cut -d' ' -f1)" = "$2" ]; }
need=()
for p in "${pins[@]}"; do
    read -r spec sum <<<"$p"
    file=$(wheel_of "$spec")
    have_wheel "$file" "$sum" || { rm -f "$wheels/$file"; need+=("$spec"); }
done
if [ ${#need[@]} -gt 0 ]; then
    if ! python3 -m pip --version >/dev/null 2>&1; then
        bash "$here/../cmake/apt-install.sh" python3-pip >"$log" 2>&1 ||
            die "python3 -m pip is missing and could not be installed (see $log)"
    fi
    python3 -m pip download --no-deps --only-binary=:all: --no-cache-dir -q -d "$wheels" \
        "${need[@]}" >"$log" 2>&1 ||
        die "pip download ${need[*]} failed: $(grep -v '^\s*$' "$log" | tail -1)" \
            "(offline? put the wheels in $wheels; log: $log)"
    for p in "${pins[@]}"; do
        read -r spec sum <<<"$p"
        file=$(wheel_of "$spec")
        have_wheel "$file" "$sum" || die "$wheels/$file: missing or not the pinned sha256 $sum"
    done
fi

# Unpack once per set of wheels: the stamp records the hashes it was unpacked from.
stamp=$(printf '%s\n' "${pins[@]}")
if [ ! -f "$lib/.stamp" ] || [ "$(cat "$lib/.stamp")" != "$stamp" ]; then
    tmp=$root/lib.tmp.$$
    rm -rf "$tmp" "$lib"
    files=()
    for p in "${pins[@]}"; do files+=("$wheels/$(wheel_of "${p%% *}")"); done
    python3 - "$tmp" "${files[@]}" <<'PY' >"$log" 2>&1 || die "cannot unpack into $lib (log: $log)"
# Writes each wheel's data/lib/ files into one folder; byte-identical copies (libX.so beside
# libX.so.2021.11.3.0) become symlinks, which saves about 220 MB.
import os, sys, zipfile
out, wheels = sys.argv[1], sys.argv[2:]
skip = ("libOpenCL.so", "libintelocl.so-gdb.py", "libtbbbind", "libtbbmalloc_proxy")
os.makedirs(out)
for wheel in wheels:
    z = zipfile.ZipFile(wheel)
    seen = {}
    members = sorted((i for i in z.infolist() if "/data/lib/" in i.filename and not i.is_dir()),
                     key=lambda i: -len(i.filename))  # longest (versioned) name first
    for i in members:
        name = os.path.basename(i.filename)
        if name.startswith(skip):
            continue
        key = (i.CRC, i.file_size)
        if key in seen:
            os.symlink(seen[key], os.path.join(out, name))
            continue
        with z.open(i) as src, open(os.path.join(out, name), "wb") as dst:
            while True:
                b = src.read(1 << 20)
                if not b:
                    break
                dst.write(b)
        seen[key] = name
PY
    printf '%s\n' "$stamp" >"$tmp/.stamp"
    mv "$tmp" "$lib" || die "cannot move $tmp to $lib"
fi

for f in libintelocl.so libcpu_device.so libOclCpuBackEnd.so libclang_compiler.so \
    libtbb.so.12 libtbbmalloc.so.2 cl.cfg; do
    [ -e "$lib/$f" ] || die "$lib/$f is missing (remove $lib to unpack again)"
done
missing=$({ ldd "$lib/libintelocl.so" "$lib/libcpu_device.so" "$lib/libclang_compiler.so" 2>&1 ||
    true; } | awk '/not found/ {print $1}' | sort -u | tr '\n' ' ')
[ -z "$missing" ] || die "libraries that libintelocl.so needs are not found: $missing"

icd=$lib/libintelocl.so
if [ ! -f "$vendors/intel.icd" ] || [ "$(cat "$vendors/intel.icd")" != "$icd" ]; then
    echo "$icd" >"$vendors/intel.icd.tmp" && mv "$vendors/intel.icd.tmp" "$vendors/intel.icd"
fi
extra=$(find "$vendors" -mindepth 1 ! -name intel.icd | head -1)
[ -z "$extra" ] || die "$vendors must hold only intel.icd, not $extra"
rm -f "$log"
echo "$vendors"
