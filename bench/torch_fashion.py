#!/usr/bin/env python3
"""PyTorch's side of bench/time_to_acc.sh: the resnet preset (python/clcnn_torch.py) trained on
Fashion-MNIST with the recipe clcnn_train's `--model resnet` takes (docs/ACCURACY.md): batch 256
with the last partial batch used, SGD with Nesterov momentum 0.9, weight decay 5e-4 on conv and
linear weights only, OneCycleLR(max_lr=0.2, total_steps=epochs * batches per epoch,
pct_start=0.25, cos, div_factor 25, final_div_factor 1e4, cycle_momentum=False) stepped after
every batch, CrossEntropyLoss(label_smoothing=0.1), RandomCrop(28, padding=2) then
RandomHorizontalFlip() on training images (written with torch ops on each batch: torchvision is
not needed; the padding is 0 before normalisation, as in torchvision and clcnn) and
Normalize(0.2860, 0.3530). A fresh torch.randperm order every epoch, no DataLoader. After every
epoch it evaluates the 10,000 test images in eval() mode and prints
'epoch E: test accuracy A (HITS/10000), elapsed S s', S being wall-clock seconds since the
process started (data loading and every test pass included).
Runs on the CPU with --threads threads in channels_last (PyTorch's fastest fp32 CPU layout) or,
with --nchw, in NCHW. Needs torch >= 1.13 and the standard library only.
Usage: torch_fashion.py [--epochs 10] [--threads 2] [--nchw] [--seed 1] [--target ACC]
                        [--limit-train N] [--data DIR]"""
import time

T_IMPORT = time.time()

import argparse  # noqa: E402
import gzip  # noqa: E402
import os  # noqa: E402
import struct  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import clcnn_torch  # noqa: E402

BATCH = 256
MEAN, STD = 0.2860, 0.3530
PAD = 2
EVAL_BATCH = 1000


def process_start():
    """The wall-clock time this process started: from /proc on Linux (10 ms ticks), else the
    time this module began (which leaves out the interpreter's own start-up)."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # field 22, starttime, in clock ticks after boot
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
        start = time.time() - age
    except (OSError, ValueError, IndexError, AttributeError):
        return T_IMPORT
    # A clock that disagrees (a time namespace, say) shows as a start after this module's or
    # long before it.
    return start if 0 <= T_IMPORT - start < 60 else T_IMPORT


def read_idx(folder, name, magic, count=None):
    """An IDX file of Fashion-MNIST (NAME or NAME.gz in FOLDER) as a uint8 tensor, its first
    COUNT items when COUNT is given."""
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        path += ".gz"
    try:
        with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise ValueError("cannot read %s(.gz) in %s: %s" % (name, folder, e))
    ndim = magic & 0xFF
    head = 4 + 4 * ndim
    if len(raw) < head or struct.unpack(">I", raw[:4])[0] != magic:
        raise ValueError("%s: not an IDX file of type 0x%08x" % (path, magic))
    dims = list(struct.unpack(">%dI" % ndim, raw[4:head]))
    size = 1
    for d in dims:
        size *= d
    if len(raw) != head + size:
        raise ValueError("%s: %d bytes of data for shape %s" % (path, len(raw) - head, dims))
    t = torch.frombuffer(bytearray(raw[head:]), dtype=torch.uint8).reshape(dims)
    return t if count is None else t[:count]


def load(folder, limit):
    """-> (train images (N,28,28) uint8, train labels, test images normalised (10000,1,28,28)
    float32, test labels)."""
    xtr = read_idx(folder, "train-images-idx3-ubyte", 0x803)
    ytr = read_idx(folder, "train-labels-idx1-ubyte", 0x801)
    xte = read_idx(folder, "t10k-images-idx3-ubyte", 0x803)
    yte = read_idx(folder, "t10k-labels-idx1-ubyte", 0x801)
    if len(xtr) != len(ytr) or len(xte) != len(yte):
        raise ValueError("%s: image and label counts differ" % folder)
    if limit is not None:
        if limit > len(xtr):
            raise ValueError("--limit-train %d: the training set has %d images"
                             % (limit, len(xtr)))
        xtr, ytr = xtr[:limit], ytr[:limit]
    xte = normalise(xte.float().div_(255)).unsqueeze(1)
    return xtr, ytr.long(), xte, yte.long()


def normalise(x):
    return x.sub_(MEAN).div_(STD)


def augment(x_u8, gen):
    """RandomCrop(28, padding=2) then RandomHorizontalFlip() of each image of a (B,H,W) uint8
    batch -> (B,1,H,W) float32 normalised."""
    b, h, w = x_u8.shape
    padded = nn.functional.pad(x_u8.float().div_(255), (PAD, PAD, PAD, PAD))
    dy = torch.randint(0, 2 * PAD + 1, (b, 1), generator=gen)
    dx = torch.randint(0, 2 * PAD + 1, (b, 1), generator=gen)
    flip = torch.rand(b, 1, generator=gen) < 0.5
    ar_h, ar_w = torch.arange(h), torch.arange(w)
    rows = dy + ar_h  # (B,H): the crop's rows in the padded image
    cols = dx + torch.where(flip, (w - 1) - ar_w, ar_w)  # mirrored columns when flipped
    out = padded[torch.arange(b)[:, None, None], rows[:, :, None], cols[:, None, :]]
    return normalise(out).unsqueeze(1)


def optimizer(model, epochs, steps_per_epoch):
    decay = [p for p in model.parameters() if p.dim() > 1]  # conv and linear weights
    rest = [p for p in model.parameters() if p.dim() <= 1]  # BatchNorm weights and biases
    groups = [{"params": decay, "weight_decay": 5e-4}, {"params": rest, "weight_decay": 0.0}]
    opt = torch.optim.SGD(groups, lr=0.2, momentum=0.9, nesterov=True)
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=0.2, total_steps=epochs * steps_per_epoch, pct_start=0.25,
        anneal_strategy="cos", div_factor=25.0, final_div_factor=1e4, cycle_momentum=False)
    return opt, sched


def evaluate(model, x, y, layout):
    model.eval()
    hits = 0
    with torch.no_grad():
        for i in range(0, len(y), EVAL_BATCH):
            out = model(x[i:i + EVAL_BATCH].contiguous(memory_format=layout))
            hits += int((out.argmax(1) == y[i:i + EVAL_BATCH]).sum())
    model.train()
    return hits


def args():
    ap = argparse.ArgumentParser(description="The resnet preset on Fashion-MNIST in PyTorch, "
                                 "with clcnn_train's resnet recipe; prints the test accuracy "
                                 "and elapsed seconds after every epoch.")
    ap.add_argument("--epochs", type=int, default=10, help="epochs, also the schedule's length")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    ap.add_argument("--nchw", action="store_true", help="NCHW instead of channels_last")
    ap.add_argument("--seed", type=int, default=1, help="initial weights, order, augmentation")
    ap.add_argument("--target", type=float,
                    help="stop after the first epoch whose test accuracy is at least this "
                    "(0 < ACC <= 1)")
    ap.add_argument("--limit-train", type=int, metavar="N",
                    help="train on the first N training images only")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist",
                    help="folder of the IDX files, plain or .gz (default: %(default)s)")
    a = ap.parse_args()
    if a.epochs <= 0 or a.threads <= 0:
        ap.error("--epochs and --threads must be positive")
    if a.target is not None and not 0 < a.target <= 1:
        ap.error("--target must be in (0, 1], got %g" % a.target)
    if a.limit_train is not None and a.limit_train <= 0:
        ap.error("--limit-train must be positive")
    return a


def main():
    t0 = process_start()
    a = args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    gen = torch.Generator().manual_seed(a.seed)
    layout = torch.contiguous_format if a.nchw else torch.channels_last
    try:
        xtr, ytr, xte, yte = load(a.data, a.limit_train)
    except ValueError as e:
        sys.exit("torch_fashion.py: %s" % e)
    n = len(ytr)
    steps = (n + BATCH - 1) // BATCH
    model = clcnn_torch.build("resnet", 1, 28, 28).to(memory_format=layout).train()
    opt, sched = optimizer(model, a.epochs, steps)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
    print("pytorch %s (cpu, %d threads, %s): resnet preset, %d training images, %d steps per "
          "epoch, seed %d" % (torch.__version__, a.threads, "NCHW" if a.nchw else "channels_last",
                               n, steps, a.seed), flush=True)
    for epoch in range(1, a.epochs + 1):
        order = torch.randperm(n, generator=gen)
        for i in range(0, n, BATCH):
            idx = order[i:i + BATCH]
            x = augment(xtr[idx], gen).contiguous(memory_format=layout)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), ytr[idx])
            loss.backward()
            opt.step()
            sched.step()
        if not torch.isfinite(loss):
            sys.exit("torch_fashion.py: the training loss is %s after epoch %d" % (loss.item(),
                                                                                  epoch))
        hits = evaluate(model, xte, yte, layout)
        acc = hits / len(yte)
        print("epoch %d: test accuracy %.4f (%d/%d), elapsed %.1f s"
              % (epoch, acc, hits, len(yte), time.time() - t0), flush=True)
        if a.target is not None and acc >= a.target:
            break


if __name__ == "__main__":
    main()
