#!/usr/bin/env python3
"""PyTorch reference for bench/bench_train: the same model (any clcnn spec or preset, built by
python/clcnn_torch.py), batch, input shape and number of training steps on synthetic data, in
train() mode (BatchNorm on batch statistics), on the CPU with a fixed thread count (or on CUDA
with --cuda, in fp32 with TF32 off: the same arithmetic as clcnn's), in NCHW or, with
--channels-last, torch.channels_last (model and input).
The optimizer: --recipe plain is SGD lr 0.01 (clcnn's default optimizer, which bench_train
uses); --recipe resnet is the resnet preset's recipe (SGD lr 0.01, Nesterov momentum 0.9,
weight decay 5e-4 on conv and linear weights only, label smoothing 0.1; the one-cycle schedule
is left out: a learning rate costs nothing). The default is resnet for the resnet preset and
plain otherwise. Prints one line:
'pytorch <version> (<where>, <layout>): <images/s> images/s, <ms> ms/step (loss <loss>)'.
Usage: pytorch_bench.py [--model SPEC] [--batch 64] [--steps 20] [--warmup 3] [--input 3x32x32]
                        [--threads 2] [--channels-last] [--recipe plain|resnet] [--cuda]"""
import argparse
import os
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import clcnn_torch  # noqa: E402


def optimizer(model, recipe):
    if recipe == "plain":
        return torch.optim.SGD(model.parameters(), lr=0.01), nn.CrossEntropyLoss()
    decay = [p for p in model.parameters() if p.dim() > 1]
    rest = [p for p in model.parameters() if p.dim() <= 1]
    groups = [{"params": decay, "weight_decay": 5e-4}, {"params": rest, "weight_decay": 0.0}]
    opt = torch.optim.SGD(groups, lr=0.01, momentum=0.9, nesterov=True)
    return opt, nn.CrossEntropyLoss(label_smoothing=0.1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="seed", help="clcnn model spec or preset name")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--input", default="3x32x32")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--recipe", choices=["plain", "resnet"])
    ap.add_argument("--cuda", action="store_true")
    a = ap.parse_args()
    try:
        c, h, w = (int(v) for v in a.input.split("x"))
    except ValueError:
        ap.error("--input must be CxHxW, got %r" % a.input)
    if a.batch <= 0 or a.steps <= 0 or a.warmup < 0:
        ap.error("batch and steps must be positive")
    recipe = a.recipe or ("resnet" if a.model.strip().lower() == "resnet" else "plain")
    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    dev = torch.device("cuda" if a.cuda else "cpu")
    if a.cuda:  # plain fp32 matmuls and convolutions, no TF32 (Ampere and later default to it)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    layout = torch.channels_last if a.channels_last else torch.contiguous_format
    try:
        model = clcnn_torch.build(a.model, c, h, w)
    except clcnn_torch.SpecError as e:
        sys.exit("pytorch_bench.py: %s" % e)
    model = model.to(dev, memory_format=layout).train()
    opt, loss_fn = optimizer(model, recipe)
    x = (torch.arange(a.batch * c * h * w, dtype=torch.int64) * 2654435761 % 256).float() / 255
    x = x.reshape(a.batch, c, h, w).to(dev).contiguous(memory_format=layout)
    y = (torch.arange(a.batch) % 10).to(dev)

    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(a.warmup):
        step()
    if a.cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    loss.item()
    if a.cuda:
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    where = "cuda, fp32, TF32 off" if a.cuda else "cpu, %d threads" % a.threads
    print("pytorch %s (%s, %s, %s recipe): %.1f images/s, %.2f ms/step (loss %.4f)"
          % (torch.__version__, where, "channels_last" if a.channels_last else "NCHW", recipe,
             a.batch * a.steps / dt, 1e3 * dt / a.steps, loss.item()))


if __name__ == "__main__":
    main()
