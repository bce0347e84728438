#!/usr/bin/env bash
# Reads a ctest log and, in CI (CLCNN_CI=1), fails when a test was skipped: a test that skips
# (exit 77: no device, no oclgrind, no PyTorch ...) proves nothing, and CI must check what the
# project claims. Tests that need hardware CI does not have (a GPU) may skip when they are named
# in CLCNN_CI_MAY_SKIP (space-separated test names; .ci/run sets it). Outside CI it only lists
# the skipped tests. Usage: check_skips.sh CTEST_LOG
set -euo pipefail
log=$1
skipped=$(sed -n '/The following tests did not run:/,/^$/p' "$log" |
          sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\) (Skipped)$/\1/p')
[ -z "$skipped" ] && exit 0
bad=()
for t in $skipped; do
    case " ${CLCNN_CI_MAY_SKIP:-} " in *" $t "*) echo "skipped (needs hardware CI lacks): $t" ;;
    *) bad+=("$t") ;; esac
done
[ ${#bad[@]} -eq 0 ] && exit 0
if [ "${CLCNN_CI:-0}" = 1 ]; then
    echo "error: CI does not accept skipped tests: ${bad[*]}" >&2
    exit 1
fi
echo "note: skipped: ${bad[*]}"
