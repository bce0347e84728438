#!/usr/bin/env bash
# The fuzz step of CI: builds the harnesses (fuzz/build.sh), runs every committed corpus input
# once (the regression inputs of crashes found earlier are among them), then fuzzes each
# harness for SECONDS (default 20), two at a time. New inputs and any crash stay under OUT.
# Usage: bash fuzz/smoke.sh [OUT] [SECONDS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$(cd "$here/.." && pwd)/build-fuzz}
secs=${2:-20}
bash "$here/build.sh" "$out"
names=(cifar idx gzip safetensors spec devices)
for h in "${names[@]}"; do
    "$out/fuzz_$h" "$here"/corpus/$h/* >"$out/corpus_$h.log" 2>&1 ||
        { echo "FAIL: fuzz_$h on its corpus"; tail -40 "$out/corpus_$h.log"; exit 1; }
done
echo "fuzz: every corpus input passes"
fuzz() {
    local h=$1 dict=()
    [ -f "$here/$h.dict" ] && dict=(-dict="$here/$h.dict")
    mkdir -p "$out/smoke_$h"
    "$out/fuzz_$h" "${dict[@]}" -max_total_time="$secs" -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$out/crash_${h}_" "$out/smoke_$h" "$here/corpus/$h" \
        >"$out/smoke_$h.log" 2>&1
}
fail=0
for ((i = 0; i < ${#names[@]}; i += 2)); do
    fuzz "${names[i]}" & a=$!
    fuzz "${names[i + 1]}" & b=$!
    wait $a || fail=1
    wait $b || fail=1
done
for h in "${names[@]}"; do
    runs=$(sed -n 's/^stat::number_of_executed_units: //p' "$out/smoke_$h.log")
    echo "fuzz_$h: ${runs:-?} runs in ${secs} s"
done
if [ $fail != 0 ]; then
    grep -l -E 'ERROR|deadly|runtime error' "$out"/smoke_*.log | while read -r f; do
        echo "== $f"; grep -A30 -E 'ERROR|deadly|runtime error' "$f" | head -40
    done
    ls "$out"/crash_* 2>/dev/null
    exit 1
fi
