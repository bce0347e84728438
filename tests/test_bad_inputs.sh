#!/usr/bin/env bash
# Bad input through the real clcnn_train, one table row per case: every row must exit non-zero
# (and not by a signal), print exactly one line on stderr containing the expected text, and
# leave every file it could touch as it was: an existing checkpoint folder (its bytes and its
# file list), the broken inputs themselves and the working directory. Then a save that fails
# for lack of space (a file-size limit) must be reported and leave the checkpoint it would have
# replaced whole and loadable. Usage: test_bad_inputs.sh CLCNN_TRAIN
set -u
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
export CLCNN_CACHE_DIR=${CLCNN_CACHE_DIR:-$work/cache}
unset CLCNN_VISIBLE_DEVICES CLCNN_BACKEND
fail=0 cases=0
check() { if [ "$2" != 0 ]; then echo "FAIL: $1: $3"; fail=1; fi; }

# Everything a failing run must leave alone, as one digest: names and bytes.
snapshot() {
    (cd "$work" && find sent bad run 2>/dev/null | sort &&
        find sent bad run -type f -print0 2>/dev/null | sort -z | xargs -0 md5sum) | md5sum
}

# run_case NAME ENV EXPECT ARGS...: ENV is "-" or one VAR=value (the value may hold anything).
run_case() {
    local name=$1 env=$2 expect=$3 before after out rc lines
    shift 3
    cases=$((cases + 1))
    before=$(snapshot)
    if [ "$env" = - ]; then
        out=$(cd "$work/run" && "$bin" "$@" 2>&1 >/dev/null)
    else
        out=$(cd "$work/run" && env "$env" "$bin" "$@" 2>&1 >/dev/null)
    fi
    rc=$?
    lines=$(printf '%s\n' "$out" | wc -l)
    after=$(snapshot)
    if [ $rc -eq 0 ] || [ $rc -ge 128 ]; then
        check "$name" 1 "exit status $rc (want 1..127): $out"
    elif [ -z "$out" ] || [ "$lines" -ne 1 ]; then
        check "$name" 1 "$lines lines on stderr (want 1): $out"
    elif [ -z "$expect" ]; then
        check "$name" 1 "the table gives no expected text (it would match anything)"
    elif ! printf '%s' "$out" | grep -qF -- "$expect"; then
        check "$name" 1 "message lacks '$expect': $out"
    elif printf '%s' "$out" | grep -q $'\x1b'; then
        check "$name" 1 "the message holds a raw escape character: $(printf '%s' "$out" | od -c | head -3)"
    elif [ "$before" != "$after" ]; then
        check "$name" 1 "files changed: $(cd "$work" && ls -lR sent run | head -20)"
    else
        printf 'ok  %-28s %s\n' "$name" "$out"
    fi
}

mkdir -p "$work/run" "$work/sent"
data=$work/data
model='conv(4,3,pad=1) maxpool(2) flatten linear(10)'

# ---- CLI options: refused before any device is touched, so they run on any machine ----------
while IFS='|' read -r name expect args; do
    [ -z "$name" ] && continue
    eval "set -- $args"
    run_case "$name" - "$expect" "$@"
done <<'EOF'
epochs-word|--epochs: 'ten' is not an integer|--epochs ten
epochs-negative|--epochs: '-1' is not an integer|--epochs -1
epochs-zero|--epochs: '0'|--epochs 0
epochs-overflow|--epochs: '99999999999999999999'|--epochs 99999999999999999999
epochs-float|--epochs: '1.5'|--epochs 1.5
epochs-newline|--epochs: '1\x0a2' is not an integer|--epochs $'1\n2'
batch-zero|--batch-size: '0'|--batch-size 0
batch-negative|--batch-size: '-64'|--batch-size -64
batch-word|--batch-size: '64x'|--batch-size 64x
batch-empty|--batch-size: ''|--batch-size ''
lr-zero|--lr: 0 must be greater than 0|--lr 0
lr-negative|--lr: -0.1 must be greater than 0|--lr -0.1
lr-word|--lr: 'fast' is not a number|--lr fast
lr-nan|--lr: 'nan' is not a number|--lr nan
lr-inf|--lr: 'inf' is not a number|--lr inf
lr-overflow|--lr: '1e999' is not a number|--lr 1e999
momentum-negative|--momentum: -0.5 must not be negative|--momentum -0.5
weight-decay-word|--weight-decay: 'x'|--weight-decay x
eps-negative|--eps: -1 must not be negative|--eps -1
betas-one|--betas: '0.9' is not B1,B2|--betas 0.9
betas-range|each beta must be in [0, 1)|--betas 0.9,1.5
betas-word|--betas: 'a,b' is not B1,B2|--betas a,b
seed-negative|--seed: '-5'|--seed -5
log-every-zero|--log-every: '0'|--log-every 0
max-steps-zero|--max-steps: '0'|--max-steps 0
optimizer-unknown|--optimizer: 'rmsprop' is not sgd, adam or adamw|--optimizer rmsprop
dataset-unknown|--dataset: 'imagenet' is not cifar10|--dataset imagenet
device-word|--device: 'x' is not a non-negative integer|--device x
device-negative|--device: '-1'|--device -1
platform-word|--platform: 'first'|--platform first
devices-word|--devices: 'gpu' is not 'all' or a comma list of device indices|--devices gpu
devices-empty-entry|--devices: '0,,1'|--devices 0,,1
devices-trailing-comma|--devices: '0,'|--devices 0,
devices-negative|--devices: '-1'|--devices -1
devices-and-device|--device and --devices exclude each other|--device 0 --devices 0,1
missing-value-last|--lr needs a value|--epochs 1 --lr
missing-value-data|--data needs a value|--data
missing-value-model|--model needs a value|--model
unknown-option|unknown option '--bogus'|--bogus 1
unknown-option-last|unknown option '--bogus'|--epochs 1 --bogus
unknown-short|unknown option '-x'|-x
positional|unknown option 'data'|data
empty-argument|unknown option ''|''
nesterov-no-momentum|--nesterov needs --momentum|--nesterov
momentum-adam|--momentum and --nesterov apply to --optimizer sgd only|--optimizer adam --momentum 0.9
init-and-resume|--init and --resume exclude each other|--init a --resume b
eval-only-no-weights|--eval-only needs weights|--eval-only
label-smoothing-range|--label-smoothing: 1.5 is not in [0, 1]|--label-smoothing 1.5
label-smoothing-word|--label-smoothing: 'x' is not a number|--label-smoothing x
label-smoothing-negative|--label-smoothing: -0.1 must not be negative|--label-smoothing -0.1
schedule-unknown|--schedule: 'linear' is not constant, cosine or onecycle|--schedule linear
schedule-missing|--schedule needs a value|--schedule
pct-start-range|--pct-start: 2 is not in [0, 1]|--schedule onecycle --pct-start 2
pct-start-constant|--pct-start applies to --schedule onecycle only|--pct-start 0.5
random-crop-negative|--random-crop: '-1' is not an integer in [0, 4096]|--random-crop -1
random-crop-word|--random-crop: 'x' is not an integer|--random-crop x
random-crop-huge|--random-crop: '5000' is not an integer in [0, 4096]|--random-crop 5000
EOF

if ! "$bin" --list-devices >/dev/null 2>&1; then
    echo "no OpenCL device: $cases CLI cases checked, skipping the rest"
    [ $fail = 0 ] && exit 77
    exit 1
fi

# ---- inputs: a tiny CIFAR-10 set, a good run's checkpoints, then every broken variant --------
python3 "$src/make_cifar.py" "$data" 96 32 || { echo "FAIL: cannot write the data set"; exit 1; }
good=(--data "$data" --model "$model" --batch-size 16 --no-tensorboard)
"$bin" "${good[@]}" --epochs 2 --momentum 0.9 --save-dir "$work/good" >"$work/good.out" 2>&1
check "good run" $? "$(cat "$work/good.out")"
python3 "$src/make_bad_inputs.py" "$work/bad" "$data" "$work/good/epoch_1.safetensors" \
    "$work/good/epoch_2.safetensors" || { echo "FAIL: cannot write the bad inputs"; exit 1; }
# The folder every failing run is pointed at: an existing checkpoint a wrong save would replace.
"$bin" "${good[@]}" --epochs 1 --save-dir "$work/sent" --logdir "$work/sent/logs" \
    >"$work/sent.out" 2>&1
check "sentinel run" $? "$(cat "$work/sent.out")"
# clcnn_train creates --save-dir and --logdir (mkdir -p) before it looks at the data: an empty
# folder is all a refused run may leave, so the sentinel has both already.
mkdir -p "$work/sent/logs"
printf 'not a folder\n' >"$work/afile"
base=(--data "$data" --model "$model" --epochs 2 --batch-size 16 --save-dir "$work/sent"
      --logdir "$work/sent/logs")
bd=$work/bad/data ck=$work/bad/ckpt

# ---- device filter and indices ----------------------------------------------------------------
for f in '' 7 9:9 gpuu 0,,1 0:x -1 $'g\npu'; do
    run_case "filter '${f//$'\n'/\\n}'" "CLCNN_VISIBLE_DEVICES=$f" "CLCNN_VISIBLE_DEVICES" "${base[@]}"
done
run_case "device 9" - "--device 9 is out of range" "${base[@]}" --device 9
run_case "platform 9" - "--platform 9 has no visible device" "${base[@]}" --platform 9
run_case "platform 0 device 9" - "--device 9 is out of range" "${base[@]}" --platform 0 --device 9
run_case "devices 0,9" - "--devices: --device 9 is out of range" "${base[@]}" --devices 0,9
run_case "devices twice" - "--devices: device 0 is listed twice" "${base[@]}" --devices 0,0
run_case "backend unknown" CLCNN_BACKEND=cuda "cuda" "${base[@]}"
run_case "autotune not 0 or 1" CLCNN_AUTOTUNE=yes "CLCNN_AUTOTUNE='yes' is not 0 or 1" "${base[@]}"

# ---- model specs ------------------------------------------------------------------------------
while IFS='|' read -r name expect spec; do
    [ -z "$name" ] && continue
    run_case "spec $name" - "$expect" "${base[@]}" --model "$spec"
done <<'EOF'
empty|empty spec|
blank|empty spec|   
unknown-layer|unknown layer 'bogus'|conv(4,3) bogus
unclosed|missing ')'|conv(4,3
no-args|expected an argument|conv(
too-few-args|conv needs at least 2 positional arguments|conv(4)
zero-out|out must be in 1..65536, got 0|conv(0,3)
negative|out expects a non-negative integer, got '-1'|conv(-1,3)
bad-keyword|conv has no keyword 'foo'|conv(4,3,foo=1)
bad-value|pad expects a non-negative integer, got 'x'|conv(4,3,pad=x)
stride-zero|stride must be in 1..64|conv(4,3,stride=0)
twice|stride given twice|maxpool(2,stride=2,stride=3)
bias-2|bias expects 0 or 1|conv(4,3,bias=2)
stray-paren|unexpected ')'|conv(4,3)) relu
trailing-comma|expected a layer after ','|conv(4,3),
repeat-too-many|repeat count '65' is too large|65*(relu) flatten linear(10)
nest-too-deep|nest deeper than 8|9*(2*(2*(2*(2*(2*(2*(2*(2*(relu))))))))) flatten linear(10)
res-shape|residual block at layer 1 (res, column 11): its body turns 4 x 30 x 30 into 8 x 30 x 30|conv(4,3) res(conv(8,3,pad=1) relu) flatten linear(10)
res-empty|empty res block|conv(4,3) res() flatten linear(10)
bn-eps-zero|eps must be greater than 0, got '0'|conv(4,3) bn(eps=0) flatten linear(10)
bn-momentum|momentum must be in [0, 1], got '2'|conv(4,3) bn(momentum=2) flatten linear(10)
bn-positional|bn takes no positional arguments (it takes eps, momentum by keyword)|conv(4,3) bn(0.1) flatten linear(10)
dropout-1.5|p must be in [0, 1], got '1.5'|conv(4,3) dropout(1.5) flatten linear(10)
avgpool-zero|kernel must be in 1..64, got 0|conv(4,3) avgpool(0) flatten linear(10)
gelu-args|gelu takes no arguments|conv(4,3) gelu(1) flatten linear(10)
scale-word|factor expects a number, got 'half'|conv(4,3) scale(half) flatten linear(10)
scale-huge|scale factor '1e300' is too large for float|conv(4,3) scale(1e300) flatten linear(10)
bn-eps-tiny|bn eps '1e-300' is too small for float|conv(4,3) bn(eps=1e-300) flatten linear(10)
bn-unknown-arg|bn has no keyword 'affine'|conv(4,3) bn(affine=0) flatten linear(10)
huge-out|out '99999999' is too large|conv(99999999,3)
kernel-too-big|kernel 40 is larger than its 32 x 32 input|conv(4,40) flatten linear(10)
pool-too-big|kernel 64 is larger than its 32 x 32 input|maxpool(64) flatten linear(10)
linear-before-flatten|needs a flat input|conv(4,3) linear(10)
no-logits|cross-entropy needs flat logits|relu
too-many-params|parameters, over 2^30|flatten linear(65536) linear(65536) linear(10)
EOF
# These two start training, so they must not open a TensorBoard file in the sentinel folder.
run_case "spec too-few-classes" - "has label 9 but the model has only 5 outputs" "${base[@]}" \
    --model 'flatten linear(5)' --no-tensorboard

# ---- data sets ---------------------------------------------------------------------------------
while IFS='|' read -r name expect; do
    [ -z "$name" ] && continue
    run_case "data $name" - "$expect" "${base[@]}" --data "$bd/$name"
done <<'EOF'
cifar_truncated|data_batch_1.bin: size 9319 is not a multiple of the 3073-byte CIFAR-10 record
cifar_test_truncated|test_batch.bin: size 98335 is not a multiple
cifar_batch2_bad|data_batch_2.bin: size
cifar_label10|data_batch_1.bin: record 2 has label 10, expected 0..9
cifar_label255|test_batch.bin: record 2 has label 255
cifar_empty|data_batch_1.bin: empty file
cifar_no_test|test_batch.bin: missing
cifar_no_train|missing data_batch_1.bin (CIFAR-10 training needs data_batch_1.bin..data_batch_5.bin
cifar_batch_is_dir|missing data_batch_1.bin (
cifar_gap|cifar-10-batches-bin: missing data_batch_3.bin (
cifar_no_batch5|cifar-10-batches-bin: missing data_batch_4.bin, data_batch_5.bin (
gzip_corrupt|data_batch_1.bin: corrupt gzip stream
gzip_truncated|data_batch_1.bin: truncated gzip stream
gzip_trailing|trailing garbage after the gzip stream
gzip_bad_crc|corrupt gzip stream: incorrect data check
gzip_header_only|truncated gzip stream
empty_dir|no dataset found
unrelated_files|no dataset found
not_a_dir|not a directory
both_formats|holds both CIFAR-10 and IDX
idx_bad_magic|train-images-idx3-ubyte: bad IDX magic 0x00000804
idx_labels_magic|train-labels-idx1-ubyte: bad IDX magic 0x00000803
idx_truncated|train-images-idx3-ubyte: truncated: header declares 20 images of 8 x 8
idx_trailing|t10k-images-idx3-ubyte: 1 bytes of trailing data
idx_count_mismatch|holds 19 labels but
idx_header_count|header declares 21 images
idx_huge_count|header declares 4294967295 images
idx_label10|train-labels-idx1-ubyte: label 10 at index 7
idx_empty|train-labels-idx1-ubyte: empty file
idx_short_header|t10k-images-idx3-ubyte: truncated IDX header
idx_zero_images|holds zero images
idx_no_labels|no train-labels-idx1-ubyte
idx_shapes_differ|train images are 1x8x8, test images 1x9x8
idx_gzip_corrupt|train-images-idx3-ubyte.gz: corrupt gzip stream
EOF
run_case "data missing" - "cannot open dataset directory" "${base[@]}" --data "$work/nope"
run_case "data wrong format" - "no train-images-idx3-ubyte" "${base[@]}" --dataset mnist
run_case "normalize arity" - "--normalize: '1,2,3'" "${base[@]}" --normalize 1,2,3
run_case "normalize std 0" - "--normalize: '0.5,0'" "${base[@]}" --normalize 0.5,0
run_case "normalize too large" - "--normalize: '1e300,1': 1e300 is too large for float" \
    "${base[@]}" --normalize 1e300,1
run_case "normalize std subnormal" - "std 1e-40 is below 1.17549435e-38, the smallest normal" \
    "${base[@]}" --normalize 0.5,1e-40
run_case "normalize overflow" - "and (x - mean) / std finite in float for pixels x in [0, 1]" \
    "${base[@]}" --normalize 1e38,1e-37

# ---- checkpoints: --resume (weights + state) and --init (weights only) -------------------------
while IFS='|' read -r name expect init_expect; do
    [ -z "$name" ] && continue
    run_case "resume $name" - "$expect" "${base[@]}" --resume "$ck/$name.safetensors"
    if [ -n "$init_expect" ]; then
        run_case "init $name" - "$init_expect" "${base[@]}" --init "$ck/$name.safetensors"
    fi
done <<'EOF'
empty|shorter than the 8-byte header length|shorter than the 8-byte header length
short|file is 5 bytes|file is 5 bytes
torn|is beyond the|is beyond the
hdrlen_beyond|bytes that follow it|bytes that follow it
hdrlen_huge|header length 18446744073709551615 exceeds|header length 18446744073709551615
json_malformed|malformed JSON header at file offset|malformed JSON header
json_truncated|malformed JSON header|malformed JSON header
json_not_object|the header is not a JSON object|the header is not a JSON object
offsets_out_of_range|is beyond the 41448-byte data buffer|is beyond the 41448-byte data buffer
offsets_overlap|overlap|overlap
offsets_reversed|data_offsets begin 432 is after end 0|data_offsets begin 432 is after end 0
dtype_i32|tensor '0.bias' is I32; clcnn loads F32 or F64|tensor '0.bias' is I32
dtype_unknown|unknown dtype "F33"|unknown dtype "F33"
dtype_f16_size|but F16 [4, 3, 3, 3] needs 216|but F16 [4, 3, 3, 3] needs 216
shape_mismatch|has shape [4, 3, 9, 1] but the model's 0.weight is [4, 3, 3, 3]|has shape [4, 3, 9, 1]
missing_tensor|missing tensor '3.bias'|missing tensor '3.bias'
unexpected_tensor|unexpected tensor '99.weight'|unexpected tensor '99.weight'
bitflip|do not match their recorded checksum|do not match their recorded checksum
meta_not_string|value for key 'epoch' is not a string|value for key 'epoch' is not a string
meta_bad_epoch|metadata epoch='-3' is not a decimal integer in [0, 9007199254740992]|metadata epoch='-3' is not a decimal integer
meta_bad_input|is not a clcnn checkpoint|
meta_other_input|was trained on 1x28x28 images|
meta_bad_spec|unknown layer 'bogus'|
plain_weights|is not a clcnn checkpoint|
no_state|no_state.state.safetensors: cannot open|
state_other_save|does not belong to|
state_is_weights|no 'optimizer' in its metadata|
state_missing_tensor|missing optimizer tensor 's1.3.bias'|
state_bad_optimizer|metadata optimizer='rmsprop' is not one of sgd, adam, adamw|
state_torn|state_torn.state.safetensors: tensor|
state_bitflip|state_bitflip.state.safetensors: the file does not match its recorded checksum|
state_lr_edit|state_lr_edit.state.safetensors: the file does not match its recorded checksum|
state_step_edit|state_step_edit.state.safetensors: the file does not match its recorded checksum|
meta_epoch_edit|meta_epoch_edit.safetensors: the file does not match its recorded checksum|meta_epoch_edit.safetensors: the file does not match its recorded checksum
meta_step_edit|meta_step_edit.safetensors: the file does not match its recorded checksum|meta_step_edit.safetensors: the file does not match
meta_seed_edit|meta_seed_edit.safetensors: the file does not match its recorded checksum|meta_seed_edit.safetensors: the file does not match
meta_batch_in_epoch_edit|meta_batch_in_epoch_edit.safetensors: the file does not match its recorded checksum|the file does not match
meta_batch_size_edit|meta_batch_size_edit.safetensors: the file does not match its recorded checksum|the file does not match
evil_name|unexpected tensor '0.bias?[2J?[31m?EVIL'|unexpected tensor '0.bias?[2J?[31m?EVIL'
directory|not a regular file (a directory)|not a regular file (a directory)
nonexistent|nonexistent.safetensors: cannot open|nonexistent.safetensors: No such file
sealed_seed_negative|metadata seed='-5' is not an unsigned decimal integer below 2^64|metadata seed='-5' is not an unsigned
sealed_seed_2p64|metadata seed='18446744073709551616' is not an unsigned decimal integer|seed='18446744073709551616' is not
sealed_seed_plus|metadata seed='+5' is not an unsigned decimal integer|metadata seed='+5' is not
sealed_batch_size_2p31|metadata batch_size='2147483648' is not a decimal integer in [0, 2147483647]|batch_size='2147483648' is not
sealed_step_huge|metadata step='9223372036854775806' is not a decimal integer in [0, 9007199254740992]|step='9223372036854775806' is not
sealed_epoch_huge|metadata epoch='9007199254740993' is not a decimal integer in [0, 9007199254740992]|epoch='9007199254740993' is not
sealed_epoch_leading_zero|metadata epoch='01' is not a decimal integer|metadata epoch='01' is not
sealed_batch_in_epoch_2p31|metadata batch_in_epoch='2147483648' is not a decimal integer in [0, 2147483647]|batch_in_epoch='2147483648' is not
sealed_total_steps_huge|metadata total_steps='9223372036854775807' is not a decimal integer in [0, 9007199254740992]|total_steps='9223372036854775807' is not
sealed_schedule_lr_inf|metadata schedule_lr='1e999' is not a finite number in [0, 1e+300]|schedule_lr='1e999' is not a finite number
sealed_schedule_unknown|metadata schedule='linear' is not one of constant, cosine, onecycle|schedule='linear' is not one of
sealed_pct_start_2|metadata pct_start='2' is not a finite number in [0, 1]|pct_start='2' is not a finite number in [0, 1]
sealed_label_smoothing_nan|metadata label_smoothing='nan' is not a finite number in [0, 1]|label_smoothing='nan' is not
sealed_random_crop_huge|metadata random_crop='5000' is not a decimal integer in [0, 4096]|random_crop='5000' is not
sealed_hflip_2|metadata hflip='2' is not a decimal integer in [0, 1]|hflip='2' is not a decimal integer in [0, 1]
sealed_model_seed_negative|metadata model_seed='-1' is not an unsigned decimal integer|model_seed='-1' is not
sealed_normalize_std0|metadata normalize='0.5,0' is not '' or a normalisation|metadata normalize='0.5,0' is not
sealed_normalize_word|metadata normalize='imagenet' is not '' or a normalisation|metadata normalize='imagenet' is not
sealed_format_v3|format 'clcnn-checkpoint/3', which this clcnn|format 'clcnn-checkpoint/3', which this clcnn
sealed_format_pt|is not a clcnn checkpoint (no format 'clcnn-checkpoint/2'|
state_sealed_lr_nan|state_sealed_lr_nan.state.safetensors: metadata lr='nan' is not a finite number|
state_sealed_lr_inf|metadata lr='inf' is not a finite number|
state_sealed_momentum_negative|bad optimizer settings: momentum -0.5 must be >= 0|
state_sealed_optimizer_step_negative|metadata optimizer_step='-1' is not a decimal integer in [0, 9007199254740992]|
state_sealed_optimizer_step_huge|metadata optimizer_step='9223372036854775807' is not a decimal integer|
state_sealed_nesterov_2|metadata nesterov='2' is not a decimal integer in [0, 1]|
state_sealed_step_huge|state_sealed_step_huge.state.safetensors: metadata step='9223372036854775807' is not|
state_sealed_format_v3|format 'clcnn-checkpoint/3', which this clcnn|
EOF
# The sealed_* files keep both checksums right (make_bad_inputs.py recomputes them), so what
# refuses them above is the range check. A seed of 2^63 or more is written unsigned and read
# back the same: the run resumes and its next checkpoint records the seed unchanged.
out=$("$bin" "${good[@]}" --epochs 2 --save-dir "$work/bigseed" \
    --resume "$ck/sealed_seed_2p63.safetensors" 2>&1)
check "resume seed 2^63+5" $? "$out"
python3 - "$work/bigseed/epoch_2.safetensors" <<'EOF2' >"$work/bigseed.check" 2>&1
import json, struct, sys
b = open(sys.argv[1], "rb").read()
seed = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])["__metadata__"]["seed"]
assert seed == str(2**63 + 5), seed
EOF2
check "seed 2^63+5 round-trips" $? "$(cat "$work/bigseed.check")"
# A safetensors file whose format is not clcnn's (Hugging Face writes "pt") or that has no
# metadata is a plain state_dict for --init.
for f in sealed_format_pt plain_weights; do
    out=$("$bin" "${good[@]}" --eval-only --init "$ck/$f.safetensors" 2>&1)
    check "init $f loads as plain weights" $? "$out"
done
cases=$((cases + 4))
run_case "eval-only bitflip" - "recorded checksum" "${base[@]}" --eval-only --resume "$ck/bitflip.safetensors"
run_case "eval-only init torn" - "is beyond the" "${base[@]}" --eval-only --init "$ck/torn.safetensors"
run_case "init other model" - "has shape" "${base[@]}" --model 'conv(6,3,pad=1) maxpool(2) flatten linear(10)' \
    --init "$work/sent/epoch_1.safetensors"
# Files that never end or never answer, and one too large for this model, are refused before
# anything is read (a sparse file: no disk is used).
mkfifo "$work/fifo.safetensors"
truncate -s 5G "$work/huge.safetensors"
run_case "init /dev/zero" - "/dev/zero: not a regular file (a character device)" "${base[@]}" \
    --init /dev/zero
run_case "resume /dev/zero" - "/dev/zero: not a regular file (a character device)" "${base[@]}" \
    --resume /dev/zero
run_case "init fifo" - "fifo.safetensors: not a regular file (a pipe)" "${base[@]}" \
    --init "$work/fifo.safetensors"
run_case "init 5 GB" - "huge.safetensors: 5368709120 bytes, more than the 1" "${base[@]}" \
    --init "$work/huge.safetensors"

# ---- resuming with options that contradict the checkpoint ---------------------------------------
# A resumed run keeps the checkpoint's optimizer settings (the good run: SGD, lr 0.01, momentum
# 0.9, batch 16); an option that says otherwise is refused, naming both values.
gk=$work/good/epoch_1.safetensors
run_case "resume --lr" - "--resume: --lr 0.5 conflicts with the checkpoint's 0.01" "${base[@]}" \
    --resume "$gk" --lr 0.5
run_case "resume --optimizer" - "--optimizer adam conflicts with the checkpoint's sgd" \
    "${base[@]}" --resume "$gk" --optimizer adam
run_case "resume --momentum" - "--momentum 0.5 conflicts with the checkpoint's 0.9" "${base[@]}" \
    --resume "$gk" --momentum 0.5
run_case "resume --weight-decay" - "--weight-decay 0.001 conflicts with the checkpoint's 0" \
    "${base[@]}" --resume "$gk" --weight-decay 0.001
# The schedule, label smoothing, augmentation and decay exclusions are the checkpoint's too.
run_case "resume --schedule" - "--schedule cosine conflicts with the checkpoint's constant" \
    "${base[@]}" --resume "$gk" --schedule cosine
run_case "resume --label-smoothing" - "--label-smoothing 0.1 conflicts with the checkpoint's 0" \
    "${base[@]}" --resume "$gk" --label-smoothing 0.1
run_case "resume --random-crop" - "--random-crop 4 conflicts with the checkpoint's 0" \
    "${base[@]}" --resume "$gk" --random-crop 4
run_case "resume --hflip" - "--hflip on conflicts with the checkpoint's off" "${base[@]}" \
    --resume "$gk" --hflip
run_case "resume --no-decay-bn-bias" - "--no-decay-bn-bias on conflicts with the checkpoint's off" \
    "${base[@]}" --resume "$gk" --no-decay-bn-bias
# A onecycle schedule whose rising phase has no steps (pct_start 0.5 of 2 steps), which PyTorch
# refuses too, is refused before anything is written.
run_case "onecycle empty phase" - "leaves a phase of no steps" "${base[@]}" --epochs 1 \
    --batch-size 48 --schedule onecycle --pct-start 0.5
# Stopped after 3 of 6 batches: the rest of that epoch is counted in batches of 16.
"$bin" "${good[@]}" --epochs 2 --momentum 0.9 --max-steps 3 --save-dir "$work/mid" \
    >"$work/mid.out" 2>&1
check "mid-epoch run" $? "$(cat "$work/mid.out")"
run_case "resume mid-epoch --batch-size" - "--batch-size 8 conflicts with the checkpoint's 16" \
    "${base[@]}" --resume "$work/mid/epoch_1.safetensors" --batch-size 8
# Accepted: the same values, or none; the log then shows the checkpoint's settings.
out=$("$bin" --data "$data" --epochs 1 --no-tensorboard --save-dir "$work/mid" --resume "$gk" \
    --lr 0.01 2>&1)
check "resume same --lr" $? "$out"
printf '%s\n' "$out" | grep -q "^optimizer: SGD lr 0.01 momentum 0.9, batch 16,"
check "resume shows the checkpoint's settings" $? "$out"
cases=$((cases + 2))

# ---- a test loss that is not finite: valid JSON (null), an error, nothing saved ------------------
# The train loss is never read (--log-every past the run), so only the evaluation sees the NaN.
run_case "test loss NaN" - "the test loss is" "${base[@]}" --lr 1e30 --log-every 1000 \
    --max-steps 2 --no-tensorboard --metrics "$work/nan.jsonl"
python3 - "$work/nan.jsonl" >"$work/nan.check" 2>&1 <<'EOF'
import json, sys
def bad(x):
    raise ValueError("not JSON: " + x)
recs = [json.loads(line, parse_constant=bad) for line in open(sys.argv[1])]
assert recs and recs[-1]["type"] == "eval" and recs[-1]["test_loss"] is None, recs
EOF
check "test loss NaN: JSON Lines stay valid" $? "$(cat "$work/nan.check" "$work/nan.jsonl")"

# ---- outputs that cannot be written -------------------------------------------------------------
run_case "save-dir under a file" - "--save-dir $work/afile/sub is not writable" "${base[@]}" \
    --save-dir "$work/afile/sub"
run_case "save-dir is a file" - "is not writable: Not a directory" "${base[@]}" --save-dir "$work/afile"
run_case "save-dir in /proc" - "--save-dir /proc/clcnn-cannot-write is not writable" "${base[@]}" \
    --save-dir /proc/clcnn-cannot-write
run_case "logdir under a file" - "--logdir $work/afile/logs is not writable" "${base[@]}" \
    --logdir "$work/afile/logs"
run_case "metrics under a file" - "--metrics $work/afile/m.jsonl" "${base[@]}" \
    --metrics "$work/afile/m.jsonl"
run_case "metrics is a folder" - "Is a directory" "${base[@]}" --metrics "$work/sent"
if [ "$(id -u)" != 0 ]; then # permissions do not stop root
    mkdir -p "$work/ro" && chmod 555 "$work/ro"
    run_case "save-dir read-only" - "Permission denied" "${base[@]}" --save-dir "$work/ro/model"
fi

# ---- numerical fault: a diverging run stops, names the step, saves nothing --------------------
run_case "loss diverges" - "at step" "${base[@]}" --lr 1e30 --log-every 1 --no-tensorboard

# ---- disk full during a save -----------------------------------------------------------------
# The run resumes from epoch 1 and saves epoch 2 over an existing epoch_2 pair from another run,
# under a file-size limit that the new files exceed. SIGXFSZ is ignored, so the write fails
# with EFBIG as it would with ENOSPC. Two limits: the state file fails (SGD with momentum: the
# state is as large as the weights), and the weights file fails after the state was written.
for variant in "state:--momentum 0.9" "weights:"; do
    what=${variant%%:*} opt=${variant#*:}
    d=$work/full-$what
    "$bin" "${good[@]}" --epochs 2 $opt --save-dir "$d" >/dev/null 2>&1
    "$bin" "${good[@]}" --epochs 2 $opt --seed 5 --save-dir "$d.other" >"$d.out" 2>&1
    check "disk full ($what): setup" $? "$(cat "$d.out")"
    cp "$d.other"/epoch_2.* "$d/"
    "$bin" --data "$data" --batch-size 16 --eval-only --resume "$d/epoch_2.safetensors" \
        >"$d.eval0" 2>&1
    before=$(cd "$d" && md5sum epoch_*)
    out=$( (trap '' XFSZ; ulimit -f 20; exec "$bin" "${good[@]}" --epochs 2 --save-dir "$d" \
        --resume "$d/epoch_1.safetensors") 2>&1 >/dev/null)
    rc=$?
    cases=$((cases + 1))
    [ $rc -ne 0 ] && [ $rc -lt 128 ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] &&
        printf '%s' "$out" | grep -q "saving failed: .*epoch_2.*File too large"
    check "disk full ($what): one line naming the failure" $? "rc=$rc: $out"
    [ "$before" = "$(cd "$d" && md5sum epoch_*)" ]
    check "disk full ($what): checkpoints unchanged" $? "$(ls -l "$d")"
    [ -z "$(find "$d" -name '*.tmp*')" ]; check "disk full ($what): no temp files left" $? "$(ls "$d")"
    "$bin" --data "$data" --batch-size 16 --eval-only --resume "$d/epoch_2.safetensors" \
        >"$d.eval1" 2>&1
    check "disk full ($what): previous checkpoint loads" $? "$(cat "$d.eval1")"
    cmp -s <(grep '^epoch' "$d.eval0") <(grep '^epoch' "$d.eval1")
    check "disk full ($what): same evaluation" $? "$(cat "$d.eval0" "$d.eval1")"
    [ $fail = 0 ] && echo "ok  disk full ($what)         $out"
done

echo "$cases cases"
exit $fail
