#!/usr/bin/env bash
# The files clcnn_train writes and trusts, against a hostile neighbour in the same folders:
# - temporary files (checkpoints, the writability probes) are fresh names created exclusively,
#   so a symbolic link planted at the predictable name "<file>.tmp.<pid>" is never followed;
# - temporary files that a killed run left behind are removed by the next save, those that a
#   live process holds locked are not, even when the pid in their name does not exist here (a
#   writer in another PID namespace or on another host);
# - the kernel cache folder is created 0700, and a cache entry or folder that is not the user's
#   own, or a folder that group or others may write to, is never loaded (on PoCL a program
#   binary is native code); a well-formed entry that is wrong is rebuilt;
# - --metrics and the TensorBoard file hold whole records only, on a full disk too.
# Usage: test_files.sh CLCNN_TRAIN
set -u
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
holder= mounted=
trap '[ -n "$holder" ] && kill "$holder" 2>/dev/null; [ -n "$mounted" ] && umount "$mounted"
      rm -rf "$work"' EXIT
unset CLCNN_VISIBLE_DEVICES CLCNN_BACKEND CLCNN_CACHE
fail=0
check() { if [ "$2" != 0 ]; then echo "FAIL: $1: $3"; fail=1; else echo "ok  $1"; fi; }

if ! "$bin" --list-devices >/dev/null 2>&1; then echo "no OpenCL device: skipping"; exit 77; fi
python3 "$src/make_cifar.py" "$work/data" 40 10 || { echo "FAIL: cannot write the data set"; exit 1; }
export CLCNN_CACHE_DIR=$work/cache/clcnn
run=(--data "$work/data" --model 'conv(4,3,pad=1) maxpool(2) flatten linear(10)' --batch-size 8
     --epochs 1 --save-dir "$work/model" --logdir "$work/logs")

# ---- links planted at the old predictable temporary names ----------------------------------
# The run execs from a shell that knows its own pid, which clcnn_train keeps: every name an
# older clcnn would have used for this process is a link to a file that must stay untouched.
mkdir -p "$work/model" "$work/logs"
printf 'precious\n' >"$work/precious"
out=$(bash -c 'for f in "$1/model/epoch_1.safetensors.tmp.$$" \
                       "$1/model/epoch_1.state.safetensors.tmp.$$" \
                       "$1/model/.clcnn_write_test.$$" "$1/logs/.clcnn_write_test.$$"; do
                   ln -s "$1/precious" "$f"; done
               shift; exec "$@"' _ "$work" "$bin" "${run[@]}" 2>&1)
check "run with planted links" $? "$out"
[ "$(cat "$work/precious")" = precious ]
check "the links' target is untouched" $? "$(od -c "$work/precious" | head -3)"
[ -f "$work/model/epoch_1.safetensors" ] && [ ! -L "$work/model/epoch_1.safetensors" ] &&
    [ -f "$work/model/epoch_1.state.safetensors" ] && [ ! -L "$work/model/epoch_1.state.safetensors" ]
check "the checkpoint is a file of its own" $? "$(ls -l "$work/model")"
mode=$(stat -c %a "$work/model/epoch_1.safetensors")
[ "$mode" = "$(printf '%o' $((0666 & ~$(umask))))" ]
check "the checkpoint has the mode of a new file ($mode)" $? "umask $(umask)"
"$bin" --data "$work/data" --eval-only --resume "$work/model/epoch_1.safetensors" >/dev/null 2>&1
check "the checkpoint loads" $? ""

# ---- what a killed run left behind ------------------------------------------------------------
# A sweep removes a temporary file only when it can take the file's lock (a writer holds it
# from creation to rename) and the file has not changed for ten minutes; the pid in the name
# proves nothing (another PID namespace, another host, reuse). Old files are made with
# touch -d: each kept one must be kept for its lock or its age alone.
sleep 0.01 &
dead=$!
wait $dead
old='-2 hours'
for f in epoch_1.safetensors.tmp.$dead epoch_1.state.safetensors.tmp.$dead.k3x9q0 \
         epoch_7.safetensors.tmp.$dead.abcdef; do
    printf 'left by a crash\n' >"$work/model/$f"
    touch -d "$old" "$work/model/$f"
done
# A live writer this process cannot see, as in a container: its pid has ended here, its lock is
# held by a live process. The pid-based sweep of old removed it.
live=epoch_3.safetensors.tmp.$dead.livewr
printf 'being written elsewhere\n' >"$work/model/$live"
touch -d "$old" "$work/model/$live"
(exec 9<>"$work/model/$live" && flock 9 && touch "$work/lockholder.locked" && exec sleep 120) &
holder=$!
for _ in $(seq 100); do [ -e "$work/lockholder.locked" ] && break; sleep 0.05; done
[ -e "$work/lockholder.locked" ]
check "a process holds the live writer's lock" $? ""
printf 'being written\n' >"$work/model/epoch_1.safetensors.tmp.$$.zzzzzz" # recent, unlocked
printf 'not ours\n' >"$work/model/notes.tmp.$dead"
touch -d "$old" "$work/model/notes.tmp.$dead"
# (the links planted above are left by a process that has ended too: they go as well)
for f in "$work"/model/*.tmp.*; do [ -L "$f" ] && touch -h -d "$old" "$f"; done
out=$("$bin" "${run[@]}" --resume "$work/model/epoch_1.safetensors" --epochs 2 2>&1)
check "a run that saves" $? "$out"
left=$(cd "$work/model" && ls -A | grep '\.tmp\.' | sort | tr '\n' ' ')
[ "$left" = "epoch_1.safetensors.tmp.$$.zzzzzz $live notes.tmp.$dead " ]
check "stale temporary files removed; a locked one, a recent one and a foreign one kept" $? \
    "left: $left"
[ "$(cat "$work/model/$live" 2>/dev/null)" = "being written elsewhere" ]
check "the live writer's file is intact" $? ""
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
# Its writer gone (lock released), the same file is stale: the next save removes it.
out=$("$bin" "${run[@]}" --resume "$work/model/epoch_2.safetensors" --epochs 3 2>&1)
check "a run that saves after the writer ended" $? "$out"
[ ! -e "$work/model/$live" ]
check "an unlocked old temporary file is removed" $? "$(ls -A "$work/model")"

# ---- --metrics: whole lines only ----------------------------------------------------------------
# Every line of the file must be a JSON value, whatever happened to the run that wrote it.
all_json() { python3 -c 'import json,sys
for n, l in enumerate(open(sys.argv[1], "rb").read().split(b"\n")[:-1], 1): json.loads(l)
sys.exit(0 if open(sys.argv[1], "rb").read().endswith(b"\n") else 1)' "$1" 2>&1; }
m=$work/torn.jsonl
printf '{"type":"train","epoch":1,"step":1,"loss":2.3}\n{"type":"train","epoch":1,"st' >"$m"
out=$("$bin" "${run[@]}" --epochs 1 --save-dir "$work/mt" --no-tensorboard --metrics "$m" 2>&1)
check "a run appending to a file that ends in a torn line" $? "$out"
echo "$out" | grep -qx "note: --metrics $m ended in a torn line (29 bytes); cut"
check "it says the torn line was cut" $? "$out"
res=$(all_json "$m")
check "every line of the file is JSON" $? "$res: $(cat "$m")"
[ "$(head -1 "$m")" = '{"type":"train","epoch":1,"step":1,"loss":2.3}' ]
check "the whole line before it is kept" $? "$(head -2 "$m")"
printf 'some notes\nwithout a newline' >"$work/notes.txt"
out=$("$bin" "${run[@]}" --epochs 1 --save-dir "$work/mt2" --no-tensorboard \
    --metrics "$work/notes.txt" 2>&1)
rc=$?
[ $rc != 0 ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] &&
    [ "$(cat "$work/notes.txt")" = "$(printf 'some notes\nwithout a newline')" ]
check "a file that is not JSON Lines is refused, unchanged" $? "rc=$rc: $out"

# ---- a full disk under --metrics and --logdir -------------------------------------------------
# A 64 KB tmpfs with 4 KB left: the file being written fills it part-way through a record.
full=$work/full
if [ "$(id -u)" = 0 ] && mkdir -p "$full" && mount -t tmpfs -o size=64k clcnn-test "$full" 2>/dev/null
then
    mounted=$full
    fill() { rm -rf "${full:?}"/*; dd if=/dev/zero of="$full/filler" bs=1k count=60 2>/dev/null; }
    fill
    mrun=(--data "$work/data" --model 'conv(4,3,pad=1) maxpool(2) flatten linear(10)'
          --batch-size 8 --epochs 60 --log-every 1 --save-dir "$work/mfull")
    err=$("$bin" "${mrun[@]}" --no-tensorboard --metrics "$full/m.jsonl" 2>&1 >/dev/null)
    rc=$?
    [ $rc != 0 ] && [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] &&
        printf '%s' "$err" | grep -q "writing $full/m.jsonl failed: No space left on device"
    check "--metrics on a full disk: one line naming the file" $? "rc=$rc: $err"
    res=$(all_json "$full/m.jsonl")
    check "--metrics on a full disk: whole lines only" $? "$res: $(tail -c 300 "$full/m.jsonl")"
    rm -f "$full/filler"
    last=$(ls "$work/mfull"/epoch_*.safetensors | grep -v state | sort -V | tail -1)
    out=$("$bin" "${mrun[@]}" --epochs 62 --resume "$last" --no-tensorboard \
        --metrics "$full/m.jsonl" 2>&1)
    check "--metrics: a resumed run appends" $? "$out"
    res=$(all_json "$full/m.jsonl")
    check "--metrics: every line JSON after the resume" $? "$res"
    fill
    err=$("$bin" "${mrun[@]}" --save-dir "$work/tfull" --logdir "$full/logs" 2>&1 >/dev/null)
    rc=$?
    [ $rc != 0 ] && [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] &&
        printf '%s' "$err" | grep -q "events.out.tfevents.*: No space left on device"
    check "--logdir on a full disk: one line" $? "rc=$rc: $err"
    res=$(python3 -c 'import glob,struct,sys
b = open(glob.glob(sys.argv[1] + "/events.out.tfevents.*")[0], "rb").read()
i = n = 0
while i + 12 <= len(b): i += 12 + struct.unpack("<Q", b[i:i + 8])[0] + 4; n += 1
sys.exit(0 if i == len(b) and n > 1 else "%d records, %d of %d bytes" % (n, i, len(b)))' \
        "$full/logs" 2>&1)
    check "--logdir on a full disk: the event file ends in a whole record" $? "$res"
    umount "$full" && mounted=
else
    echo "not root (or no tmpfs): full-disk cases not run"
fi

# ---- the kernel cache ---------------------------------------------------------------------------
rm -rf "$work/cache"
first=$("$bin" "${run[@]}" --epochs 1 --save-dir "$work/m2" 2>&1 | head -1)
[ "$(stat -c %a "$work/cache/clcnn")" = 700 ] && [ "$(stat -c %a "$work/cache")" = 700 ]
check "the cache folder is created 0700" $? "$(ls -ld "$work/cache" "$work/cache/clcnn")"
second=$("$bin" "${run[@]}" --epochs 1 --save-dir "$work/m3" 2>&1 | head -1)
echo "$second" | grep -q "(binary cache)"
check "the second start loads the cache" $? "$first / $second"
# A folder group or others may write to: not used, nothing written, and a note says why.
c=$work/cache/clcnn
for mode in 770 703; do
    chmod "$mode" "$c"
    before=$(ls -l --time-style=+%s.%N "$c" | md5sum)
    out=$("$bin" "${run[@]}" --epochs 1 --save-dir "$work/m-$mode" 2>&1)
    rc=$?
    [ $rc = 0 ] && echo "$out" | head -1 | grep -q "(compiled)" &&
        echo "$out" | grep -qx "note: the kernel cache is off: $c is .*-writable (mode $mode; .*)"
    check "a cache folder of mode $mode is not used, with a note" $? "rc=$rc: $(echo "$out" | head -3)"
    [ "$before" = "$(ls -l --time-style=+%s.%N "$c" | md5sum)" ]
    check "nothing is written into it" $? "$(ls -l "$c")"
done
chmod 700 "$c"
# A well-formed entry in the wrong place (one program's entry copied over another's): rebuilt,
# and the cache works again on the next start.
cp "$(ls "$c"/util-*.bin)" "$(ls "$c"/conv2d-*.bin)"
out=$("$bin" "${run[@]}" --epochs 1 --save-dir "$work/m-copy" 2>&1)
check "a start with an entry copied over another's" $? "$(echo "$out" | head -3)"
out=$("$bin" "${run[@]}" --epochs 1 --save-dir "$work/m-copy2" 2>&1 | head -1)
echo "$out" | grep -q "(binary cache)"
check "the next start loads the repaired cache" $? "$out"
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
    # An entry someone else owns: rebuilt, never loaded.
    entry=$(ls "$work/cache/clcnn"/*.bin | head -1)
    chown nobody "$entry"
    out=$("$bin" "${run[@]}" --epochs 1 --save-dir "$work/m4" 2>&1 | head -1)
    echo "$out" | grep -q "(compiled)"
    check "an entry owned by another user is not loaded" $? "$out"
    # A folder someone else owns: nothing in it is loaded, nothing is written into it.
    "$bin" "${run[@]}" --epochs 1 --save-dir "$work/m5" >/dev/null 2>&1 # the cache is whole again
    chown nobody "$work/cache/clcnn"
    before=$(ls -l --time-style=+%s.%N "$work/cache/clcnn" | md5sum)
    out=$("$bin" "${run[@]}" --epochs 1 --save-dir "$work/m6" 2>&1 | head -1)
    echo "$out" | grep -q "(compiled)"
    check "a folder owned by another user is not loaded" $? "$out"
    [ "$before" = "$(ls -l --time-style=+%s.%N "$work/cache/clcnn" | md5sum)" ]
    check "nothing is written into it" $? "$(ls -l "$work/cache/clcnn")"
else
    echo "not root (or no user 'nobody'): ownership cases not run"
fi
exit $fail
