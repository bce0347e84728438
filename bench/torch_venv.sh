#!/usr/bin/env bash
# Makes, once, the virtual environment with a pinned PyTorch 2.x that bench/compare.sh measures
# clcnn against (Debian's PyTorch 1.13 stays for the test fixtures), and prints its Python on
# standard output. A venv that holds the pinned version already is reused without the network.
# Usage: bash bench/torch_venv.sh VENV-DIR
#   CLCNN_BENCH_TORCH      the torch version (default 2.15.0)
#   CLCNN_BENCH_PIP_ARGS   extra pip install arguments, e.g. --index-url URL of a CPU-only
#                          wheel index (the default index's Linux wheel pulls in the CUDA
#                          libraries it links against, several GB, though only the CPU is used)
# The install log is VENV-DIR/install.log. Needs /usr/bin/python3 with venv (python3-venv).
set -euo pipefail
venv=${1:?usage: torch_venv.sh VENV-DIR}
pin="torch==${CLCNN_BENCH_TORCH:-2.15.0}"
py=$venv/bin/python
stamp=$venv/clcnn-torch.txt
if [ -x "$py" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$pin" ]; then
    echo "$py"
    exit 0
fi
fail() {
    echo "torch_venv.sh: cannot make $venv with $pin: $1" >&2
    exit 1
}
mkdir -p "$venv" || fail "cannot create the folder"
log=$venv/install.log
echo "torch_venv.sh: installing $pin into $venv (once; log: $log)" >&2
if [ ! -x "$py" ]; then
    /usr/bin/python3 -m venv "$venv" >"$log" 2>&1 ||
        fail "python3 -m venv failed ($(tail -n 1 "$log"); apt-get install python3-venv?)"
fi
# shellcheck disable=SC2086 # CLCNN_BENCH_PIP_ARGS is a list of arguments
"$py" -m pip install --no-input ${CLCNN_BENCH_PIP_ARGS:-} "$pin" numpy >>"$log" 2>&1 ||
    fail "pip install failed ($(grep -E 'ERROR|rror:' "$log" | tail -n 1 | cut -c1-200))"
"$py" -c 'import torch; torch.ones(2, 2).sum()' >>"$log" 2>&1 ||
    fail "torch does not import ($(tail -n 1 "$log" | cut -c1-200))"
echo "$pin" >"$stamp"
echo "$py"
