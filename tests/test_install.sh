#!/usr/bin/env bash
# Installs the built tree into a temporary prefix and builds the examples against it twice:
# through find_package(clcnn) (each example's own CMakeLists.txt) and through
# `pkg-config --static`; then runs them. Also checks that every symbol the static library
# exports starts with clcnn_.
set -u
build=$1
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
check() { if [ "$2" != 0 ]; then echo "FAIL: $1: $3"; fail=1; fi; }

bad=$(nm -g --defined-only "$build/libclcnn.a" | awk 'NF == 3 { print $3 }' | grep -v '^clcnn_')
[ -z "$bad" ]; check "exported symbols" $? "not prefixed clcnn_: $(echo $bad | head -c 400)"
n=$(nm -g --defined-only "$build/libclcnn.a" | awk 'NF == 3' | wc -l)
[ "$n" -gt 50 ]; check "symbol count" $? "only $n symbols"

prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1
check "cmake --install" $? "$(cat "$work/install.log")"
for f in include/clcnn.h bin/clcnn_train; do
    [ -f "$prefix/$f" ]; check "installed $f" $? "$(find "$prefix" | head -30)"
done
libdir=$(dirname "$(find "$prefix" -name libclcnn.a | head -1)")
[ -f "$libdir/libclcnn.a" ] && [ -f "$libdir/cmake/clcnn/clcnnConfig.cmake" ] &&
    [ -f "$libdir/cmake/clcnn/clcnnConfigVersion.cmake" ] && [ -f "$libdir/pkgconfig/clcnn.pc" ]
check "installed package files" $? "$(find "$prefix" | head -30)"

have_device=1
"$build/clcnn_train" --list-devices >/dev/null 2>&1 || have_device=0
for ex in list_devices train_in_memory cpp_predict; do
    cmake -S "$src/examples/$ex" -B "$work/$ex" -DCMAKE_PREFIX_PATH="$prefix" >"$work/$ex.log" 2>&1 &&
        cmake --build "$work/$ex" >>"$work/$ex.log" 2>&1
    check "find_package build of $ex" $? "$(tail -30 "$work/$ex.log")"
    if [ $have_device = 1 ] && [ -x "$work/$ex/$ex" ]; then
        "$work/$ex/$ex" >"$work/$ex.run" 2>&1; check "run $ex (find_package)" $? "$(tail -5 "$work/$ex.run")"
    fi
done
export PKG_CONFIG_PATH=$libdir/pkgconfig
for ex in list_devices train_in_memory; do
    cc -std=c11 -o "$work/pc_$ex" "$src/examples/$ex/$ex.c" $(pkg-config --cflags --static --libs clcnn) \
        >"$work/pc_$ex.log" 2>&1
    check "pkg-config build of $ex" $? "$(cat "$work/pc_$ex.log")"
    if [ $have_device = 1 ] && [ -x "$work/pc_$ex" ]; then
        "$work/pc_$ex" >"$work/pc_$ex.run" 2>&1; check "run $ex (pkg-config)" $? "$(tail -5 "$work/pc_$ex.run")"
    fi
done
# The README's embedding example compiles and runs exactly as shown.
awk '/^## Embedding/ { e = 1 } e && /^```c$/ { c = 1; next } c && /^```$/ { exit } c' \
    "$src/README.md" >"$work/tiny.c"
[ -s "$work/tiny.c" ]; check "README example extracted" $? ""
cc -std=c11 -Wall -Wextra -Werror "$work/tiny.c" $(pkg-config --cflags --static --libs clcnn) \
    -o "$work/tiny" >"$work/tiny.log" 2>&1
check "README example builds" $? "$(cat "$work/tiny.log")"
if [ $have_device = 1 ] && [ -x "$work/tiny" ]; then
    "$work/tiny" >"$work/tiny.run" 2>&1; check "README example runs" $? "$(cat "$work/tiny.run")"
    grep -q 'accuracy 1.000' "$work/tiny.run"; check "README example learns" $? "$(cat "$work/tiny.run")"
fi
# The header alone compiles as C and as C++ with strict warnings.
echo '#include <clcnn.h>' >"$work/h.c"
cc -std=c11 -Wall -Wextra -Wpedantic -Werror -c "$work/h.c" -I"$prefix/include" -o "$work/h.o"
check "header as C11" $? ""
c++ -x c++ -std=c++11 -Wall -Wextra -Wpedantic -Werror -c "$work/h.c" -I"$prefix/include" -o "$work/h2.o"
check "header as C++11" $? ""
[ $fail = 0 ] && [ $have_device = 0 ] && { echo "built everything; no OpenCL device to run on: skipping"; exit 77; }
[ $fail = 0 ] && echo "test_install: installed, built 3 examples with find_package and 2 with pkg-config, ran them"
exit $fail
