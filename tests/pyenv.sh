#!/usr/bin/env bash
# Creates, or reuses, the Python virtual environment that holds the pinned TensorBoard of
# tests/requirements-tensorboard.txt (for test_tblog_tensorboard). tests/run.sh calls it.
# Usage: bash tests/pyenv.sh VENV_DIR        (tests/run.sh: BUILD/pyenv)
#
# The venv is built on Debian's own interpreter, /usr/bin/python3 (python3-venv), the one a fresh
# CI machine has, not on whatever python3 comes first on PATH; CLCNN_PYENV_PYTHON=path picks
# another. VENV_DIR/.clcnn-stamp records the requirements and the interpreter it was made from
# and is written last: when it matches, nothing is done (no network); when it is missing or
# differs (an interrupted install, new pins, another Python), the venv is made again from scratch.
# pip runs with --no-cache-dir, so nothing is left in HOME: the venv is the cache.
# Exit status: 0 ready, 1 could not be made (the reason on stderr, the partial venv removed).
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 VENV_DIR" >&2; exit 2; }
src=$(cd "$(dirname "$0")" && pwd)
req=$src/requirements-tensorboard.txt
venv=$1
base=${CLCNN_PYENV_PYTHON:-}
if [ -z "$base" ]; then
    if [ -x /usr/bin/python3 ]; then base=/usr/bin/python3; else base=$(command -v python3 || true); fi
fi
fail() { echo "pyenv: $*" >&2; exit 1; }
if [ -z "$base" ] || [ ! -x "$base" ]; then
    fail "no python3 to build $venv on (apt-get install python3)"
fi

stamp=$(printf '%s\n%s\n' "$base" "$("$base" -c 'import sys; print(sys.version)')"; cat "$req")
if [ -x "$venv/bin/python3" ] && [ -f "$venv/.clcnn-stamp" ] &&
   [ "$(cat "$venv/.clcnn-stamp")" = "$stamp" ]; then
    echo "== pyenv: $venv is up to date ($("$venv/bin/python3" -c \
        'import tensorboard; print("tensorboard", tensorboard.__version__)' 2>&1))"
    exit 0
fi

echo "== pyenv: creating $venv (pinned TensorBoard, $base $("$base" -c \
    'import platform; print(platform.python_version())'))"
start=$(date +%s)
rm -rf "$venv"
ready=0
trap '[ $ready = 1 ] || rm -rf "$venv"' EXIT
"$base" -m venv "$venv" ||
    fail "'$base -m venv' failed (Debian: apt-get install python3-venv)"
"$venv/bin/python3" -m pip install --quiet --no-cache-dir --disable-pip-version-check \
    --no-input --retries 2 --only-binary :all: -r "$req" ||
    fail "pip could not install $req into $venv (no network?)"
"$venv/bin/python3" -c \
    'from tensorboard.backend.event_processing.event_accumulator import EventAccumulator' ||
    fail "$venv: tensorboard installed but its reader does not import"
printf '%s\n' "$stamp" >"$venv/.clcnn-stamp"
ready=1
echo "== pyenv: ready in $(($(date +%s) - start)) s ($(du -sh "$venv" | cut -f1))"
