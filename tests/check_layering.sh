#!/bin/sh
# docs/ARCHITECTURE.md's table of the library's rows, checked against the built library: every
# library source file sits in one row, and no function calls a function of a higher row. Calls
# within a row are free; references to data (the registry's ops and syntax tables, through
# which the planner and the parser reach the layer units) are not calls.
# Usage: check_layering.sh <libclcnn.a> <docs/ARCHITECTURE.md> <src folder>
set -eu
lib=$1 doc=$2 src=$3
command -v nm >/dev/null 2>&1 || { echo "check_layering: no nm: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Row number, then each `src/...` path of the row's files column (a folder ends in /).
awk '/^## The layers of the code/ {on = 1; next}
     on && /^## / {exit}
     on && /^\| / && !/^\| layer \|/ {
         n++; split($0, col, "|"); s = col[3]
         while (match(s, /`src\/[^`]*`/)) {
             print n, substr(s, RSTART + 1, RLENGTH - 2); s = substr(s, RSTART + RLENGTH)
         }
     }' "$doc" >"$tmp/rows"
[ -s "$tmp/rows" ] || { echo "check_layering: no table in $doc"; exit 1; }

# Each library source (by the basename its archive member has) and its row (the first that
# names it: model.c is the model's row, not the optimizers'): a path named exactly first, then a folder holding it, then src/layers/<kind>.c for a file directly there.
(cd "$src/.." && find src -name '*.c' ! -path 'src/cli/*') | sort >"$tmp/files"
awk 'NR == FNR {if (!($2 in row)) row[$2] = $1; next}
     {
         f = $0; r = row[f]
         if (r == "") for (p in row) if (p ~ /\/$/ && index(f, p) == 1) r = row[p]
         if (r == "" && f ~ /^src\/layers\/[^\/]*\.c$/) r = row["src/layers/<kind>.c"]
         n = split(f, part, "/")
         if (r == "") { print "check_layering: " f " is in no row of the table"; bad = 1 }
         else print part[n] ".o", r, f
     }
     END {exit bad}' "$tmp/rows" "$tmp/files" >"$tmp/map" || { cat "$tmp/map"; exit 1; }

nm -A "$lib" 2>/dev/null | awk '{
    split($1, w, ":"); m = w[2]
    if ($(NF - 1) == "T") print "def", m, $NF
    else if ($(NF - 1) == "U") print "use", m, $NF
}' >"$tmp/syms"

awk 'FILENAME == ARGV[1] {row[$1] = $2; path[$1] = $3; next}
     $1 == "def" {def[$3] = $2; next}
     $1 == "use" {use[++n] = $2 " " $3}
     END {
         for (i = 1; i <= n; i++) {
             split(use[i], u, " "); callee = def[u[2]]
             if (callee == "" || !(u[1] in row) || !(callee in row)) continue
             if (row[callee] < row[u[1]]) {
                 printf "%s (row %d) calls %s of %s (row %d), a higher row\n", path[u[1]],
                        row[u[1]], u[2], path[callee], row[callee]
                 bad = 1
             }
         }
         exit bad
     }' "$tmp/map" "$tmp/syms" >"$tmp/out" || { sort "$tmp/out"; exit 1; }
echo "check_layering: $(wc -l <"$tmp/map") files in $(cut -d' ' -f1 "$tmp/rows" | sort -u | wc -l) rows, every call goes down or within a row"
