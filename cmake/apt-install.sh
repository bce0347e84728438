#!/usr/bin/env bash
# Installs the given Debian packages that are missing (apt-get, as root), or explains what to
# install when not root. Shared by tests/run.sh and examples/quickstart.sh.
set -euo pipefail
missing=()
for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "missing packages: ${missing[*]} (run as root, or apt-get install them)" >&2
    exit 1
fi
echo "== installing: ${missing[*]}"
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
