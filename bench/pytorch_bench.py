#!/usr/bin/env python3
"""PyTorch reference for bench/bench_train: the same model (seed or seed-relu), batch, input
shape and number of SGD steps on synthetic data, on the CPU with a fixed thread count (or on
CUDA with --cuda). Prints one line: 'pytorch: <images/s> images/s, <ms> ms/step'.
Usage: pytorch_bench.py [--model seed|seed-relu] [--batch 64] [--steps 20] [--warmup 3]
                        [--input 3x32x32] [--threads 2] [--cuda]"""
import argparse
import time

import torch
import torch.nn as nn


def build(name, c, h, w):
    relu = name == "seed-relu"
    layers = []
    ch = c
    for out in (32, 32, 64):
        layers.append(nn.Conv2d(ch, out, 5, 1, 2))
        if relu:
            layers.append(nn.ReLU())
        layers.append(nn.MaxPool2d(2))
        ch, h, w = out, h // 2, w // 2
    layers += [nn.Flatten(), nn.Linear(ch * h * w, 64)]
    if relu:
        layers.append(nn.ReLU())
    layers.append(nn.Linear(64, 10))
    return nn.Sequential(*layers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="seed", choices=["seed", "seed-relu"])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--input", default="3x32x32")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cuda", action="store_true")
    a = ap.parse_args()
    c, h, w = (int(v) for v in a.input.split("x"))
    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    dev = torch.device("cuda" if a.cuda else "cpu")
    model = build(a.model, c, h, w).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    x = (torch.arange(a.batch * c * h * w, dtype=torch.int64) * 2654435761 % 256).float() / 255
    x = x.reshape(a.batch, c, h, w).to(dev)
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
    where = "cuda" if a.cuda else "cpu, %d threads" % a.threads
    print("pytorch %s (%s): %.1f images/s, %.2f ms/step (loss %.4f)"
          % (torch.__version__, where, a.batch * a.steps / dt, 1e3 * dt / a.steps, loss.item()))


if __name__ == "__main__":
    main()
