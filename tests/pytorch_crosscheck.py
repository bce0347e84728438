#!/usr/bin/python3
"""Cross-check clcnn_train against PyTorch on a real data set.

Needs PyTorch (Debian's python3-torch 1.13 works) and a data set on disk.
CI runs it as ctest test_pytorch_crosscheck (tests/CMakeLists.txt: seed, 200
steps, --checks-only, on Debian's dataset-fashion-mnist). Exit status: 0 all
checks passed, 1 a check failed, 77 PyTorch is not importable, the --data
folder does not exist or clcnn_train sees no OpenCL device (ctest's "skipped"
convention; tests/python_test.sh makes it a failure where CI requires the
test), 2 usage or run error.

Cross-check (default):

    /usr/bin/python3 tests/pytorch_crosscheck.py --clcnn build/clcnn_train \
        [--data DIR] [--steps N] [--model PRESET|SPEC] [--work DIR] [--checks-only] \
        [--lr X] [--momentum X] [--weight-decay X] [--no-decay-bn-bias] \
        [--label-smoothing E] [--schedule constant|cosine|onecycle] [--pct-start F] \
        [--sched-epochs E]

The model is any preset or spec, built on the PyTorch side by python/clcnn_torch.py;
the training options are passed to clcnn_train and mirrored in PyTorch (SGD with
two parameter groups under --no-decay-bn-bias, CrossEntropyLoss(label_smoothing),
CosineAnnealingLR / OneCycleLR over --sched-epochs epochs, stepped after every
batch). Without options it is the tutorial's plain SGD at lr 0.01.

 1. builds the torch.nn.Sequential equivalent of the clcnn preset with
    torch.manual_seed(0) and PyTorch's default init, checks that its
    state_dict has the same names and shapes as clcnn's checkpoint, and saves
    it as safetensors with a 'model1.' key prefix (clcnn must strip it);
 2. runs clcnn_train from those weights: --no-shuffle --max-steps N
    --log-every 1 --batch-size 64 --lr 0.01 (SGD), reading the per-step
    losses from its JSON Lines metrics;
 3. trains the same torch model the same way (SGD lr 0.01, batch 64, file
    order, inputs uint8/255 as float32, CrossEntropyLoss) for N steps;
 4. compares the per-step losses (max relative difference <= 1e-4);
 5. loads clcnn's final checkpoint into a fresh torch model with
    load_state_dict(strict=True), evaluates the test set and compares with
    clcnn's reported test accuracy (same number of correct predictions) and
    test loss (within 1e-4 relative).

Reference run (--full-run): trains the torch model alone the way
clcnn_train's defaults do (SGD lr 0.01, batch 64, a shuffled DataLoader,
--epochs epochs, torch.set_num_threads(--threads)) and prints/records the
test loss and accuracy after every epoch (JSON Lines in --work).

The safetensors files are read and written by hand (no `safetensors`
package): u64 little-endian header length N | N bytes of JSON, space padded to
a multiple of 8 | raw little-endian tensor data.
"""

import argparse
import gzip
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

LOSS_RTOL = 1e-4
TEST_LOSS_RTOL = 1e-4
BATCH = 64
LR = 0.01
PREFIX = "model1."
SKIP = 77  # ctest's SKIP_RETURN_CODE

try:
    import numpy as np
    import torch
    import torch.nn as nn
except Exception as e:  # noqa: BLE001 - any import failure means "skip"
    print(f"pytorch_crosscheck: PyTorch is not importable ({e}); skipped")
    sys.exit(SKIP)


# ---------------------------------------------------------------- data sets

def _open(path):
    if os.path.exists(path):
        return open(path, "rb")
    if os.path.exists(path + ".gz"):
        return gzip.open(path + ".gz", "rb")
    raise FileNotFoundError(path + "[.gz]")


def _read_idx(path):
    with _open(path) as f:
        raw = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    count = int(np.prod(dims))
    if data.size != count:
        raise ValueError(f"{path}: {data.size} bytes of data, expected {count}")
    return data.reshape(dims).copy()  # writable, for torch.from_numpy


def load_data(d):
    """-> (train_x uint8 [N,C,H,W], train_y int64 [N], test_x, test_y)."""
    def has(name):
        return (os.path.exists(os.path.join(d, name))
                or os.path.exists(os.path.join(d, name + ".gz")))

    if has("train-images-idx3-ubyte"):
        out = []
        for split in ("train", "t10k"):
            x = _read_idx(os.path.join(d, f"{split}-images-idx3-ubyte"))
            y = _read_idx(os.path.join(d, f"{split}-labels-idx1-ubyte"))
            out += [x[:, None, :, :], y.astype(np.int64)]
        return tuple(out)
    for sub in ("", "cifar-10-batches-bin"):
        base = os.path.join(d, sub)
        if os.path.exists(os.path.join(base, "data_batch_1.bin")):
            def rd(names):
                raw = b"".join(open(os.path.join(base, n), "rb").read()
                               for n in names)
                rec = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3073)
                return rec[:, 1:].reshape(-1, 3, 32, 32).copy(), rec[:, 0].astype(np.int64)
            tr = rd([f"data_batch_{i}.bin" for i in range(1, 6)])
            te = rd(["test_batch.bin"])
            return tr[0], tr[1], te[0], te[1]
    raise FileNotFoundError(f"{d}: no MNIST/Fashion-MNIST IDX or CIFAR-10 binary files")


def to_input(u8):
    """uint8 numpy [B,C,H,W] -> float32 tensor, pixel / 255 (as clcnn does)."""
    return torch.from_numpy(np.ascontiguousarray(u8)).to(torch.float32) / 255.0


# ---------------------------------------------------------------- models

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import clcnn_torch  # noqa: E402  (the repository's spec -> nn.Module builder)


def build_model(name, c, h, w):
    """The nn.Module of a clcnn preset or spec (python/clcnn_torch.py)."""
    return clcnn_torch.build(name, c, h, w)


def make_optimizer(model, args):
    """SGD as clcnn_train sets it up; --no-decay-bn-bias gives two parameter groups (conv and
    linear weights decay, biases and BatchNorm parameters do not)."""
    decay, rest = [], []
    for mod in model.modules():
        for pname, p in mod.named_parameters(recurse=False):
            w = pname == "weight" and isinstance(mod, (nn.Conv2d, nn.Linear))
            (decay if w or not args.no_decay_bn_bias else rest).append(p)
    groups = [{"params": decay, "weight_decay": args.weight_decay}]
    if rest:
        groups.append({"params": rest, "weight_decay": 0.0})
    return torch.optim.SGD(groups, lr=args.lr, momentum=args.momentum)


def make_scheduler(opt, args, steps_per_epoch):
    """The scheduler clcnn_train's --schedule names, stepped after every batch."""
    total = args.sched_epochs * steps_per_epoch
    if args.schedule == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total, eta_min=0)
    if args.schedule == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(
            opt, max_lr=args.lr, total_steps=total, pct_start=args.pct_start,
            anneal_strategy="cos", div_factor=25.0, final_div_factor=1e4,
            cycle_momentum=False)
    return None


# ---------------------------------------------------------------- safetensors

ST_DTYPES = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8"),
             "I32": np.dtype("<i4"), "I64": np.dtype("<i8"), "U8": np.dtype("u1")}
TORCH_TO_ST = {torch.float32: "F32", torch.float64: "F64", torch.int32: "I32",
               torch.int64: "I64", torch.uint8: "U8"}


def write_safetensors(path, tensors, metadata=None):
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs = []
    off = 0
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        st = TORCH_TO_ST[t.dtype]
        data = t.numpy().astype(ST_DTYPES[st], copy=False).tobytes(order="C")
        header[name] = {"dtype": st, "shape": list(t.shape),
                        "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    js = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    js += b" " * (-len(js) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)))
        f.write(js)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """-> (metadata, {name: torch.Tensor}); checks offsets tile the data."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: too short")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: header overruns the file")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out = {}
    pos = 0
    for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        b, end = e["data_offsets"]
        dt = ST_DTYPES[e["dtype"]]
        count = int(np.prod(e["shape"])) if e["shape"] else 1
        if b != pos or end - b != count * dt.itemsize:
            raise ValueError(f"{path}: {name}: bad data_offsets {e['data_offsets']}")
        pos = end
        arr = np.frombuffer(data, dtype=dt, count=count, offset=b)
        out[name] = torch.from_numpy(arr.astype(dt.newbyteorder("="))
                                     .reshape(e["shape"]).copy())
    if pos != len(data):
        raise ValueError(f"{path}: {len(data) - pos} trailing bytes")
    return meta, out


# ---------------------------------------------------------------- helpers

def evaluate(model, x_u8, y, batch=1000, label_smoothing=0.0):
    """-> (mean CE over all samples, correct count, near-tie count, logits)."""
    model.eval()
    total = 0.0
    correct = 0
    margins = []
    with torch.no_grad():
        for i in range(0, len(y), batch):
            out = model(to_input(x_u8[i:i + batch]))
            tgt = torch.from_numpy(y[i:i + batch])
            ce = nn.functional.cross_entropy(out, tgt, reduction="none",
                                             label_smoothing=label_smoothing)
            total += float(ce.double().sum())
            correct += int((out.argmax(1) == tgt).sum())
            top2 = out.topk(2, dim=1).values
            margins.append((top2[:, 0] - top2[:, 1]).abs())
    model.train()
    margins = torch.cat(margins)
    return total / len(y), correct, margins


def read_metrics(path):
    train, evals = {}, []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            if r.get("type") == "train":
                train[int(r["step"])] = float(r["loss"])
            elif r.get("type") == "eval":
                evals.append(r)
    return train, evals


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def setup_torch(threads, deterministic=True):
    torch.set_num_threads(threads)
    if deterministic:
        torch.use_deterministic_algorithms(True)


# ---------------------------------------------------------------- cross-check

def train_steps(args, init_sd, trx, try_, steps, chw, mkldnn=True):
    """The run's SGD and schedule, batch 64, file order, from init_sd -> ({step: loss},
    model)."""
    prev = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = mkldnn
    try:
        model = build_model(args.model, *chw)
        model.load_state_dict(init_sd, strict=True)
        model.train()
        opt = make_optimizer(model, args)
        sched = make_scheduler(opt, args, (len(try_) + BATCH - 1) // BATCH)
        crit = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
        losses = {}
        n = len(try_)
        first = 0
        for step in range(1, steps + 1):
            if first >= n:
                first = 0  # next epoch: clcnn_train without shuffle starts over
            xb = to_input(trx[first:first + BATCH])
            yb = torch.from_numpy(try_[first:first + BATCH])
            first += BATCH
            opt.zero_grad()
            loss = crit(model(xb), yb)
            loss.backward()
            opt.step()
            if sched:
                sched.step()
            losses[step] = float(loss)
    finally:
        torch.backends.mkldnn.enabled = prev
    return losses, model


def crosscheck(args, work):
    ok = True

    def check(cond, msg):
        nonlocal ok
        print(("PASS " if cond else "FAIL ") + msg)
        ok = ok and bool(cond)

    setup_torch(args.threads)
    trx, try_, tex, tey = load_data(args.data)
    n, c, h, w = trx.shape
    print(f"data: {args.data}: {n} train / {len(tey)} test images of {c}x{h}x{w}")

    torch.manual_seed(0)
    model = build_model(args.model, c, h, w)
    init_sd = {k: v.clone() for k, v in model.state_dict().items()}
    init_path = os.path.join(work, "init.safetensors")
    write_safetensors(init_path, {PREFIX + k: v for k, v in init_sd.items()},
                      {"format": "pt"})

    # 2. clcnn
    mdir = os.path.join(work, "model")
    ldir = os.path.join(work, "logs")
    metrics = os.path.join(work, "m.jsonl")
    for p in (mdir, ldir):
        shutil.rmtree(p, ignore_errors=True)
    if os.path.exists(metrics):
        os.remove(metrics)  # clcnn appends
    cmd = [args.clcnn, "--data", args.data, "--model", args.model,
           "--init", init_path, "--no-shuffle", "--max-steps", str(args.steps),
           "--log-every", "1", "--batch-size", str(BATCH), "--lr", repr(args.lr),
           "--metrics", metrics, "--save-dir", mdir, "--logdir", ldir]
    if args.momentum:
        cmd += ["--momentum", repr(args.momentum)]
    if args.weight_decay:
        cmd += ["--weight-decay", repr(args.weight_decay)]
    if args.no_decay_bn_bias:
        cmd += ["--no-decay-bn-bias"]
    if args.label_smoothing:
        cmd += ["--label-smoothing", repr(args.label_smoothing)]
    if args.schedule != "constant":
        cmd += ["--schedule", args.schedule, "--epochs", str(args.sched_epochs)]
    if args.schedule == "onecycle":
        cmd += ["--pct-start", repr(args.pct_start)]
    print("clcnn: " + " ".join(cmd))
    t0 = time.time()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True)
    t_cl = time.time() - t0
    with open(os.path.join(work, "clcnn.out"), "w") as f:
        f.write(proc.stdout)
    if proc.returncode != 0:
        print(proc.stdout[-4000:])
        print(f"FAIL clcnn_train exited with {proc.returncode}")
        return 1
    cl_loss, cl_evals = read_metrics(metrics)
    print(f"clcnn: {len(cl_loss)} steps and {len(cl_evals)} evaluation(s) in {t_cl:.1f} s")
    check(sorted(cl_loss) == list(range(1, args.steps + 1)),
          f"clcnn logged steps 1..{args.steps}")
    check(len(cl_evals) == 1, "clcnn logged one evaluation")
    if not cl_evals or not cl_loss:
        return 1

    # 3. torch, same steps (PyTorch's default CPU kernels, oneDNN where it applies)
    t0 = time.time()
    th_loss, model = train_steps(args, init_sd, trx, try_, args.steps, (c, h, w))
    print(f"torch: {args.steps} steps in {time.time() - t0:.1f} s")

    # 4. per-step losses
    steps = [s for s in sorted(th_loss) if s in cl_loss]
    diffs = [(rel(cl_loss[s], th_loss[s]), s) for s in steps]
    worst, at = max(diffs)
    print("step losses (clcnn / torch / rel. diff):")
    show = sorted(set([1, 2, 3, 10, 50, 100] + [s for s in steps if s % 50 == 0]
                      + [at, steps[-1]]))
    for s in show:
        if s in th_loss and s in cl_loss:
            print(f"  step {s:5d}  {cl_loss[s]:.8f}  {th_loss[s]:.8f}  "
                  f"{rel(cl_loss[s], th_loss[s]):.2e}")
    for lo, hi in ((1, 10), (11, 50), (51, 100), (101, 200), (201, 10**9)):
        part = [d for d, s in diffs if lo <= s <= hi]
        if part:
            print(f"  steps {lo}-{min(hi, steps[-1])}: max rel. diff {max(part):.2e}, "
                  f"mean {sum(part) / len(part):.2e}")
    check(worst <= LOSS_RTOL,
          f"per-step loss: max rel. diff {worst:.3e} at step {at} "
          f"(clcnn {cl_loss[at]:.8f}, torch {th_loss[at]:.8f}; tolerance {LOSS_RTOL:g})")

    # informative: the fp32 noise floor, torch against itself with other kernels
    if not args.no_noise_floor and not args.checks_only:
        t0 = time.time()
        nat_loss, _ = train_steps(args, init_sd, trx, try_, args.steps, (c, h, w),
                                  mkldnn=False)
        print(f"torch, native kernels (mkldnn off): {args.steps} steps in "
              f"{time.time() - t0:.1f} s")
        nf, nf_at = max((rel(th_loss[s], nat_loss[s]), s) for s in steps)
        cn, cn_at = max((rel(cl_loss[s], nat_loss[s]), s) for s in steps)
        print(f"fp32 noise floor: torch (default) vs torch (mkldnn off) max rel. diff "
              f"{nf:.2e} (step {nf_at}); clcnn vs torch (mkldnn off) {cn:.2e} (step {cn_at})")

    # 5. clcnn's checkpoint into torch
    ckpt = os.path.join(mdir, "epoch_1.safetensors")
    _, cl_sd = read_safetensors(ckpt)
    keys_cl = set(cl_sd)
    keys_th = set(init_sd)
    check(keys_cl == keys_th,
          f"checkpoint names match torch's state_dict ({len(keys_th)} tensors: "
          f"{', '.join(sorted(keys_th, key=lambda k: (int(k.split('.')[0]), k)))})"
          + ("" if keys_cl == keys_th else
             f"; only clcnn: {sorted(keys_cl - keys_th)}, only torch: {sorted(keys_th - keys_cl)}"))
    shapes_ok = all(tuple(cl_sd[k].shape) == tuple(init_sd[k].shape)
                    for k in keys_cl & keys_th)
    check(shapes_ok, "checkpoint shapes match")

    # informative: clcnn's weights vs torch's after the same steps
    th_sd = model.state_dict()
    wd = []
    for k in sorted(keys_cl & keys_th, key=lambda k: (int(k.split('.')[0]), k)):
        a, b = cl_sd[k].double(), th_sd[k].double()
        wd.append((float((a - b).abs().max() / b.abs().max()), k))
    print("final weights, max |clcnn - torch| / max |torch| per tensor: "
          + ", ".join(f"{k} {d:.1e}" for d, k in wd))

    fresh = build_model(args.model, c, h, w)
    try:
        fresh.load_state_dict(cl_sd, strict=True)
        loaded = True
    except RuntimeError as e:
        print(e)
        loaded = False
    check(loaded, "load_state_dict(clcnn checkpoint, strict=True)")
    if not loaded:
        return 1
    tl, tc, margins = evaluate(fresh, tex, tey, label_smoothing=args.label_smoothing)
    ev = cl_evals[-1]
    nt = len(tey)
    cl_correct = int(round(float(ev["test_accuracy"]) * nt))
    m = re.search(r"test accuracy [0-9.]+ \((\d+)/(\d+)\)", proc.stdout)
    if m:
        cl_correct = int(m.group(1))
    near = int((margins < 1e-4).sum())
    print(f"test set, clcnn's weights: torch {tc}/{nt} correct, loss {tl:.8f}; "
          f"clcnn {cl_correct}/{nt}, loss {float(ev['test_loss']):.8f}; "
          f"{near} sample(s) with top-2 logit margin < 1e-4 in torch")
    check(tc == cl_correct,
          f"test accuracy: clcnn {cl_correct}/{nt}, torch on clcnn's weights {tc}/{nt}"
          + ("" if tc == cl_correct else f" (differ by {tc - cl_correct})"))
    check(rel(float(ev["test_loss"]), tl) <= TEST_LOSS_RTOL,
          f"test loss: clcnn {float(ev['test_loss']):.8f}, torch {tl:.8f}, rel. diff "
          f"{rel(float(ev['test_loss']), tl):.2e} (tolerance {TEST_LOSS_RTOL:g})")

    # informative: torch's own trained weights on the test set
    if not args.checks_only:
        ol, oc, _ = evaluate(model, tex, tey, label_smoothing=args.label_smoothing)
        print(f"test set, torch's own weights after {args.steps} steps: {oc}/{nt} correct, "
              f"loss {ol:.8f}")

    print(f"RESULT {args.model}, {args.steps} steps: "
          f"{'all checks passed' if ok else 'FAILED'}; max step-loss rel. diff {worst:.2e} "
          f"(step {at}); test accuracy clcnn {cl_correct} vs torch {tc}; test loss rel. diff "
          f"{rel(float(ev['test_loss']), tl):.2e}")
    return 0 if ok else 1


# ---------------------------------------------------------------- reference run

def full_run(args, work):
    setup_torch(args.threads, deterministic=False)
    trx, try_, tex, tey = load_data(args.data)
    n, c, h, w = trx.shape
    torch.manual_seed(args.seed)
    model = build_model(args.model, c, h, w)
    ds = torch.utils.data.TensorDataset(to_input(trx), torch.from_numpy(try_))
    gen = torch.Generator()
    gen.manual_seed(args.seed)
    loader = torch.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=True,
                                         generator=gen, num_workers=0)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    crit = nn.CrossEntropyLoss()
    out = os.path.join(work, f"torch-{args.model}.jsonl")
    print(f"torch reference: {args.model}, SGD lr {LR}, batch {BATCH}, shuffled, "
          f"{args.epochs} epochs, {args.threads} thread(s), torch {torch.__version__}; "
          f"metrics -> {out}")
    t0 = time.time()
    step = 0
    with open(out, "w") as f:
        for epoch in range(1, args.epochs + 1):
            running = 0.0
            for xb, yb in loader:
                opt.zero_grad()
                loss = crit(model(xb), yb)
                loss.backward()
                opt.step()
                step += 1
                running += float(loss)
                if step % 100 == 0:
                    f.write(json.dumps({"type": "train", "epoch": epoch, "step": step,
                                        "loss": float(loss),
                                        "elapsed_s": time.time() - t0}) + "\n")
            tl, tc, _ = evaluate(model, tex, tey)
            rec = {"type": "eval", "epoch": epoch, "step": step, "test_loss": tl,
                   "test_accuracy": tc / len(tey), "correct": tc,
                   "elapsed_s": time.time() - t0}
            f.write(json.dumps(rec) + "\n")
            f.flush()
            print(f"epoch {epoch}: test loss {tl:.4f}, test accuracy {tc / len(tey):.4f} "
                  f"({tc}/{len(tey)}), elapsed {time.time() - t0:.0f} s", flush=True)
    print(f"done in {time.time() - t0:.0f} s")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clcnn", help="path to clcnn_train (needed unless --full-run)")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--model", default="seed",
                    help="a preset or a model spec (default seed)")
    ap.add_argument("--lr", type=float, default=LR, help="learning rate (default 0.01)")
    ap.add_argument("--momentum", type=float, default=0.0)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--no-decay-bn-bias", action="store_true")
    ap.add_argument("--label-smoothing", type=float, default=0.0)
    ap.add_argument("--schedule", default="constant",
                    choices=["constant", "cosine", "onecycle"])
    ap.add_argument("--pct-start", type=float, default=0.3)
    ap.add_argument("--sched-epochs", type=int, default=1,
                    help="epochs the schedule spans (clcnn_train --epochs; default 1)")
    ap.add_argument("--work", help="work folder (default: a temporary one, removed)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--no-noise-floor", action="store_true",
                    help="skip the second torch run (mkldnn off) that measures how far "
                         "two fp32 implementations drift apart")
    ap.add_argument("--checks-only", action="store_true",
                    help="only what the checks need (the ctest): implies --no-noise-floor "
                         "and skips evaluating torch's own weights on the test set")
    ap.add_argument("--full-run", action="store_true",
                    help="train the PyTorch reference alone (shuffled) and report "
                         "test loss/accuracy per epoch")
    ap.add_argument("--epochs", type=int, default=10, help="--full-run epochs")
    ap.add_argument("--seed", type=int, default=1, help="--full-run init/shuffle seed")
    args = ap.parse_args()
    if not args.full_run and not args.clcnn:
        ap.error("--clcnn is required")
    if args.steps < 1:
        ap.error("--steps must be >= 1")
    if not os.path.isdir(args.data):
        print(f"pytorch_crosscheck: {args.data}: no such folder (Fashion-MNIST: apt-get "
              f"install dataset-fashion-mnist); skipped")
        return SKIP
    if not args.full_run:
        try:
            dev = subprocess.run([args.clcnn, "--list-devices"], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, universal_newlines=True)
        except OSError as e:
            print(f"pytorch_crosscheck: {args.clcnn}: {e}")
            return 2
        if dev.returncode != 0:
            print(dev.stdout[-2000:])
            print("pytorch_crosscheck: clcnn_train sees no OpenCL device; skipped")
            return SKIP
    tmp = None
    if args.work:
        work = args.work
        os.makedirs(work, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="clcnn-xcheck-")
        work = tmp.name
    try:
        return full_run(args, work) if args.full_run else crosscheck(args, work)
    except (OSError, ValueError) as e:
        print(f"pytorch_crosscheck: {e}")
        return 2
    finally:
        if tmp:
            tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())
