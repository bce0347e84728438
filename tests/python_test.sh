#!/usr/bin/env bash
# Runs one Python-based test with the first of the given interpreters that exists, and applies
# the CI policy on skips. The scripts exit 77 when something they need is missing (tensorboard,
# torch, the data set, an OpenCL device); ctest shows that as skipped, which is right for a
# developer's build, but with CLCNN_REQUIRE_PYTHON_TESTS=1 in the environment (CI sets it) the
# skip becomes a failure, so a CI machine that lost a package cannot pass by skipping.
# Usage: python_test.sh PYTHON [PYTHON...] -- SCRIPT [ARGS...]
set -u
pythons=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do pythons+=("$1"); shift; done
if [ $# -lt 2 ]; then
    echo "usage: $0 PYTHON [PYTHON...] -- SCRIPT [ARGS...]" >&2
    exit 2
fi
shift
py=
for p in ${pythons[@]+"${pythons[@]}"}; do
    if [ -n "$p" ] && [ -x "$p" ]; then py=$p; break; fi
done
if [ -n "$py" ]; then
    echo "python_test: $py $*"
    "$py" "$@"
    rc=$?
else
    echo "python_test: skipped, no interpreter among: ${pythons[*]-}"
    rc=77
fi
if [ $rc = 77 ] && [ "${CLCNN_REQUIRE_PYTHON_TESTS:-0}" = 1 ]; then
    echo "python_test: FAIL: skipped, but CLCNN_REQUIRE_PYTHON_TESTS=1 requires this test to run"
    echo "python_test: (tests/run.sh installs python3-torch, python3-torchvision and"
    echo "python_test: dataset-fashion-mnist and makes BUILD/pyenv with tests/pyenv.sh; see its"
    echo "python_test: output)"
    exit 1
fi
exit $rc
