#!/usr/bin/env python3
"""Writes the broken inputs that tests/test_bad_inputs.sh feeds to clcnn_train: data folders
(CIFAR-10 binary and IDX, plain and gzip) and checkpoints (safetensors) damaged in one way each.
Every case is derived from a valid input, so each file is wrong in exactly the way its name says.

Usage: make_bad_inputs.py OUT GOOD_DATA CKPT1 CKPT2
  GOOD_DATA  a valid tiny CIFAR-10 folder (tests/make_cifar.py), with cifar-10-batches-bin/
  CKPT1      a checkpoint (epoch_1.safetensors, its .state sibling next to it) of a model with
             optimizer state (SGD with momentum)
  CKPT2      a later checkpoint of the same run (for a weights/state pair from two saves)
Writes OUT/data/<case>/ and OUT/ckpt/<case>.safetensors (+ .state.safetensors where needed)."""
import gzip
import json
import os
import shutil
import struct
import sys

CIFAR_RECORD = 3073


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


# ---- safetensors -------------------------------------------------------------------------

def st_split(blob):
    n = struct.unpack("<Q", blob[:8])[0]
    return json.loads(blob[8:8 + n].decode()), blob[8 + n:]


def st_join(header, data, raw_header=None):
    h = raw_header if raw_header is not None else json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


# ---- clcnn's checksums, so that an edit can keep a file self-consistent -------------------

M64 = (1 << 64) - 1
P1, P2, P3, P4, P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                      0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5)


def rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def xxh64(b, seed=0):
    """XXH64 (the reference algorithm), as clcnn's checksums use it."""
    def rnd(acc, lane):
        return (rotl((acc + lane * P2) & M64, 31) * P1) & M64

    def merge(acc, v):
        return ((acc ^ rnd(0, v)) * P1 + P4) & M64
    n, i = len(b), 0
    if n >= 32:
        v = [(seed + P1 + P2) & M64, (seed + P2) & M64, seed, (seed - P1) & M64]
        while i + 32 <= n:
            for k in range(4):
                v[k] = rnd(v[k], struct.unpack_from("<Q", b, i + 8 * k)[0])
            i += 32
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M64
        for x in v:
            h = merge(h, x)
    else:
        h = (seed + P5) & M64
    h = (h + n) & M64
    while i + 8 <= n:
        h = (rotl(h ^ rnd(0, struct.unpack_from("<Q", b, i)[0]), 27) * P1 + P4) & M64
        i += 8
    if i + 4 <= n:
        h = (rotl(h ^ (struct.unpack_from("<I", b, i)[0] * P1 & M64), 23) * P2 + P3) & M64
        i += 4
    while i < n:
        h = (rotl(h ^ (b[i] * P5 & M64), 11) * P1) & M64
        i += 1
    h = ((h ^ (h >> 33)) * P2) & M64
    h = ((h ^ (h >> 29)) * P3) & M64
    return h ^ (h >> 32)


def content_xxh64(header, data):
    """The content checksum clcnn records (checkpoint.c's content_hash): every metadata pair but
    the checksum's own and every tensor (name, dtype, shape, bytes), each in name order."""
    z = lambda s: s.encode() + b"\0"
    out = bytearray(z("clcnn-content/1"))
    meta = header.get("__metadata__", {})
    for k in sorted(meta, key=str.encode):
        if k != "content_xxh64":
            out += z(k) + z(meta[k])
    names = sorted((k for k in header if k != "__metadata__"), key=str.encode)
    out += z(f"{len(names)} tensors")
    for k in names:
        t = header[k]
        b, e = t["data_offsets"]
        out += z(k) + z(t["dtype"]) + b"".join(f"{d},".encode() for d in t["shape"])
        out += z(str(e - b)) + data[b:e]
    return f"{xxh64(bytes(out)):016x}"


def resealed(header, data):
    """The file with header's metadata as given and its content checksum recomputed: an edit
    that only clcnn's range checks can catch."""
    header["__metadata__"]["content_xxh64"] = content_xxh64(header, data)
    return st_join(header, data)


def state_path(path):
    return path[:-len(".safetensors")] + ".state.safetensors"


def checkpoints(out, ck1, ck2):
    d = os.path.join(out, "ckpt")
    os.makedirs(d, exist_ok=True)
    w1, s1 = read(ck1), read(state_path(ck1))
    w2 = read(ck2)
    hdr, data = st_split(w1)
    names = [k for k in hdr if k != "__metadata__"]
    first, last = names[0], names[-1]

    def put(case, blob, state=s1):
        write(os.path.join(d, case + ".safetensors"), blob)
        if state is not None:
            write(os.path.join(d, case + ".state.safetensors"), state)

    def edit(case, fn, state=s1):
        h = json.loads(json.dumps(hdr))
        dd = fn(h)
        put(case, st_join(h, dd if isinstance(dd, bytes) else data), state)

    put("empty", b"")
    put("short", w1[:5])
    put("torn", w1[:len(w1) // 2])
    put("hdrlen_beyond", struct.pack("<Q", len(w1)) + w1[8:])
    put("hdrlen_huge", struct.pack("<Q", 2**64 - 1) + w1[8:])
    raw = json.dumps(hdr, separators=(",", ":")).encode()
    put("json_malformed", st_join(None, data, raw.replace(b'"dtype":', b'"dtype" ', 1)))
    put("json_truncated", st_join(None, data, raw[:len(raw) // 2]))
    put("json_not_object", st_join(None, data, b"[1,2,3]"))

    def oob(h):
        h[last]["data_offsets"][1] += 4  # one float past the end of the data buffer
        h[last]["shape"][-1] += 1
    edit("offsets_out_of_range", oob)

    def overlap(h):  # the second tensor starts 4 bytes inside the first; lengths stay right
        b, e = h[names[1]]["data_offsets"]
        h[names[1]]["data_offsets"] = [b - 4, e - 4]
    edit("offsets_overlap", overlap)

    def begin_after_end(h):
        b, e = h[first]["data_offsets"]
        h[first]["data_offsets"] = [e, b]
    edit("offsets_reversed", begin_after_end)
    edit("dtype_i32", lambda h: h[names[1]].update(dtype="I32"))  # same size, wrong type
    edit("dtype_unknown", lambda h: h[first].update(dtype="F33"))
    edit("dtype_f16_size", lambda h: h[first].update(dtype="F16"))  # length no longer fits

    def reshape(h):  # same element count, different shape: only the model can tell
        s = h[first]["shape"]
        h[first]["shape"] = [s[0], s[1], s[2] * s[3], 1]
    edit("shape_mismatch", reshape)
    edit("missing_tensor", lambda h: h.pop(last))

    def extra(h):
        b, e = h[last]["data_offsets"]
        h["99.weight"] = {"dtype": "F32", "shape": [1], "data_offsets": [e, e + 4]}
        return data + b"\0\0\0\0"
    edit("unexpected_tensor", extra)

    def flip(h):  # one weight bit: the checksum must catch it
        b = bytearray(data)
        b[len(b) // 2] ^= 0x40
        return bytes(b)
    edit("bitflip", flip)
    edit("meta_not_string", lambda h: h["__metadata__"].update(epoch=1))
    edit("meta_bad_epoch", lambda h: h["__metadata__"].update(epoch="-3"))
    edit("meta_bad_input", lambda h: h["__metadata__"].update(input="huge"))
    edit("meta_other_input", lambda h: h["__metadata__"].update(input="1x28x28"))
    edit("meta_bad_spec", lambda h: h["__metadata__"].update(spec="conv(4,3) bogus"))
    # Well-formed edits of what a resume trusts: each must be caught by the file's checksum.
    for key in ("epoch", "step", "seed", "batch_in_epoch", "batch_size"):
        edit(f"meta_{key}_edit", lambda h, key=key: h["__metadata__"].update(
            {key: str(int(h["__metadata__"][key]) + 1)}))

    # A name from the file reaching a message must not reach the terminal raw: an escape
    # sequence (clear screen, red) and a newline in an unexpected tensor's name.
    def evil_name(h):
        b, e = h[last]["data_offsets"]
        h["0.bias\x1b[2J\x1b[31m\nEVIL"] = {"dtype": "F32", "shape": [1],
                                             "data_offsets": [e, e + 4]}
        return data + b"\0\0\0\0"
    edit("evil_name", evil_name)

    def plain(h):  # what PyTorch's save_file writes: no clcnn metadata at all
        h.pop("__metadata__")
    edit("plain_weights", plain, state=None)
    put("no_state", w1, state=None)
    put("state_other_save", w2, state=s1)
    put("state_is_weights", w1, state=w1)
    sh, sd = st_split(s1)
    snames = [k for k in sh if k != "__metadata__"]
    s = json.loads(json.dumps(sh))
    s.pop(snames[-1])
    put("state_missing_tensor", w1, state=st_join(s, sd))
    s = json.loads(json.dumps(sh))
    s["__metadata__"]["optimizer"] = "rmsprop"
    put("state_bad_optimizer", w1, state=st_join(s, sd))
    put("state_torn", w1, state=s1[:len(s1) // 2])
    # The state file's contents, edited consistently (still valid safetensors, same weights
    # hash): one momentum bit, the learning rate, the step count.
    b = bytearray(sd)
    b[len(b) // 3] ^= 0x40
    put("state_bitflip", w1, state=st_join(sh, bytes(b)))
    s = json.loads(json.dumps(sh))
    s["__metadata__"]["lr"] = "0.5"
    put("state_lr_edit", w1, state=st_join(s, sd))
    s = json.loads(json.dumps(sh))
    s["__metadata__"]["optimizer_step"] = str(int(s["__metadata__"]["optimizer_step"]) + 1)
    put("state_step_edit", w1, state=st_join(s, sd))
    os.makedirs(os.path.join(d, "directory.safetensors"), exist_ok=True)

    # Metadata edits that keep both checksums right: what clcnn reads must still be in range.
    for h, dd in ((hdr, data), (sh, sd)):
        if content_xxh64(h, dd) != h["__metadata__"]["content_xxh64"]:
            sys.exit("make_bad_inputs.py: the recomputed content checksum differs from clcnn's")

    def sealed(case, **meta):
        h = json.loads(json.dumps(hdr))
        h["__metadata__"].update(meta)
        put(case, resealed(h, data))

    def sealed_state(case, **meta):
        s = json.loads(json.dumps(sh))
        s["__metadata__"].update(meta)
        put(case, w1, state=resealed(s, sd))
    sealed("sealed_seed_2p63", seed=str(2**63 + 5))  # valid: must resume, seed intact
    sealed("sealed_seed_negative", seed="-5")
    sealed("sealed_seed_2p64", seed=str(2**64))
    sealed("sealed_seed_plus", seed="+5")
    sealed("sealed_batch_size_2p31", batch_size=str(2**31))
    sealed("sealed_step_huge", step=str(2**63 - 2))
    sealed("sealed_epoch_huge", epoch=str(2**53 + 1))
    sealed("sealed_epoch_leading_zero", epoch="01")
    sealed("sealed_batch_in_epoch_2p31", batch_in_epoch=str(2**31))
    sealed("sealed_total_steps_huge", total_steps=str(2**63 - 1))
    sealed("sealed_schedule_lr_inf", schedule_lr="1e999")
    sealed("sealed_schedule_unknown", schedule="linear")
    sealed("sealed_pct_start_2", pct_start="2")
    sealed("sealed_label_smoothing_nan", label_smoothing="nan")
    sealed("sealed_random_crop_huge", random_crop="5000")
    sealed("sealed_hflip_2", hflip="2")
    sealed("sealed_model_seed_negative", model_seed="-1")
    sealed("sealed_normalize_std0", normalize="0.5,0")
    sealed("sealed_normalize_word", normalize="imagenet")
    sealed("sealed_format_v3", format="clcnn-checkpoint/3")
    sealed("sealed_format_pt", format="pt")  # Hugging Face's save_file: a plain state_dict
    sealed_state("state_sealed_lr_nan", lr="nan")
    sealed_state("state_sealed_lr_inf", lr="inf")
    sealed_state("state_sealed_momentum_negative", momentum="-0.5")
    sealed_state("state_sealed_optimizer_step_negative", optimizer_step="-1")
    sealed_state("state_sealed_optimizer_step_huge", optimizer_step=str(2**63 - 1))
    sealed_state("state_sealed_nesterov_2", nesterov="2")
    sealed_state("state_sealed_step_huge", step=str(2**63 - 1))
    sealed_state("state_sealed_format_v3", format="clcnn-checkpoint/3")


# ---- data sets ---------------------------------------------------------------------------

def idx_images(n, rows, cols, magic=0x803, count=None):
    body = bytes((i * 7) % 256 for i in range(n * rows * cols))
    return struct.pack(">IIII", magic, n if count is None else count, rows, cols) + body


def idx_labels(n, magic=0x801, count=None, bad_at=None):
    lab = bytearray(i % 10 for i in range(n))
    if bad_at is not None:
        lab[bad_at] = 10
    return struct.pack(">II", magic, n if count is None else count) + bytes(lab)


def idx_set(d, train=None, test=None):
    """train/test: dict of the four files' bytes, defaults valid (20 and 10 images of 8x8)."""
    files = {"train-images-idx3-ubyte": idx_images(20, 8, 8),
             "train-labels-idx1-ubyte": idx_labels(20),
             "t10k-images-idx3-ubyte": idx_images(10, 8, 8),
             "t10k-labels-idx1-ubyte": idx_labels(10)}
    files.update(train or {})
    files.update(test or {})
    for name, blob in files.items():
        if blob is not None:
            write(os.path.join(d, name), blob)


def datasets(out, good):
    d = os.path.join(out, "data")
    src = os.path.join(good, "cifar-10-batches-bin")
    batches = {f"data_batch_{k}.bin": read(os.path.join(src, f"data_batch_{k}.bin"))
               for k in range(1, 6)}
    batch1 = batches["data_batch_1.bin"]
    test = read(os.path.join(src, "test_batch.bin"))

    def cifar(case, b1=batch1, tb=test, extra=None, drop=()):
        """The good set with data_batch_1 (b1), test_batch (tb) and `extra` files replaced
        (None: left out) and the training files named in `drop` left out."""
        base = os.path.join(d, case, "cifar-10-batches-bin")
        os.makedirs(base, exist_ok=True)
        files = dict(batches)
        files.update({"data_batch_1.bin": b1, "test_batch.bin": tb})
        files.update(extra or {})
        for name, blob in files.items():
            if blob is not None and name not in drop:
                write(os.path.join(base, name), blob)

    cifar("cifar_truncated", b1=batch1[:CIFAR_RECORD * 3 + 100])
    cifar("cifar_test_truncated", tb=test[:-1])
    bad = bytearray(batch1)
    bad[CIFAR_RECORD * 2] = 10
    cifar("cifar_label10", b1=bytes(bad))
    bad[CIFAR_RECORD * 2] = 255
    cifar("cifar_label255", tb=bytes(bad))
    cifar("cifar_empty", b1=b"")
    cifar("cifar_no_test", tb=None)
    cifar("cifar_no_train", b1=None)
    cifar("cifar_batch2_bad", extra={"data_batch_2.bin": batch1[:-5]})
    cifar("cifar_gap", drop=("data_batch_3.bin",))  # an interrupted download: a gap
    cifar("cifar_no_batch5", drop=("data_batch_4.bin", "data_batch_5.bin"))
    gz = gzip.compress(batch1)
    cifar("gzip_corrupt", b1=gz[:10] + bytes(b ^ 0x55 for b in gz[10:200]) + gz[200:])
    cifar("gzip_truncated", b1=gz[:len(gz) // 2])
    cifar("gzip_trailing", b1=gz + b"garbage after the stream")
    cifar("gzip_bad_crc", b1=gz[:-8] + bytes(b ^ 1 for b in gz[-8:-4]) + gz[-4:])
    cifar("gzip_header_only", b1=b"\x1f\x8b")
    cifar("cifar_batch_is_dir", b1=None)
    os.makedirs(os.path.join(d, "cifar_batch_is_dir", "cifar-10-batches-bin", "data_batch_1.bin"))
    os.makedirs(os.path.join(d, "empty_dir"), exist_ok=True)
    write(os.path.join(d, "not_a_dir"), b"plain file\n")
    os.makedirs(os.path.join(d, "unrelated_files"), exist_ok=True)
    write(os.path.join(d, "unrelated_files", "README"), b"no data here\n")

    idx_set(os.path.join(d, "idx_ok"))  # control: a valid set
    idx_set(os.path.join(d, "idx_bad_magic"), {"train-images-idx3-ubyte": idx_images(20, 8, 8, 0x804)})
    idx_set(os.path.join(d, "idx_labels_magic"), {"train-labels-idx1-ubyte": idx_labels(20, 0x803)})
    idx_set(os.path.join(d, "idx_truncated"), {"train-images-idx3-ubyte": idx_images(20, 8, 8)[:-9]})
    idx_set(os.path.join(d, "idx_trailing"), {"t10k-images-idx3-ubyte": idx_images(10, 8, 8) + b"x"})
    idx_set(os.path.join(d, "idx_count_mismatch"), {"train-labels-idx1-ubyte": idx_labels(19)})
    idx_set(os.path.join(d, "idx_header_count"), {"train-images-idx3-ubyte": idx_images(20, 8, 8, count=21)})
    idx_set(os.path.join(d, "idx_huge_count"), {"train-images-idx3-ubyte": idx_images(20, 8, 8, count=2**32 - 1)})
    idx_set(os.path.join(d, "idx_label10"), {"train-labels-idx1-ubyte": idx_labels(20, bad_at=7)})
    idx_set(os.path.join(d, "idx_empty"), {"train-labels-idx1-ubyte": b""})
    idx_set(os.path.join(d, "idx_short_header"), {"t10k-images-idx3-ubyte": idx_images(10, 8, 8)[:10]})
    idx_set(os.path.join(d, "idx_zero_images"), {"train-images-idx3-ubyte": idx_images(0, 8, 8)})
    idx_set(os.path.join(d, "idx_no_labels"), {"train-labels-idx1-ubyte": None})
    idx_set(os.path.join(d, "idx_shapes_differ"), {"t10k-images-idx3-ubyte": idx_images(10, 9, 8)})
    d2 = os.path.join(d, "idx_gzip_corrupt")
    idx_set(d2, {"train-images-idx3-ubyte": None})
    g = bytearray(gzip.compress(idx_images(20, 8, 8)))
    g[len(g) // 2] ^= 0xff
    write(os.path.join(d2, "train-images-idx3-ubyte.gz"), bytes(g))
    d2 = os.path.join(d, "both_formats")
    idx_set(d2)
    cifar("both_formats")


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    out, good, ck1, ck2 = sys.argv[1:5]
    shutil.rmtree(out, ignore_errors=True)
    datasets(out, good)
    checkpoints(out, ck1, ck2)


if __name__ == "__main__":
    main()
