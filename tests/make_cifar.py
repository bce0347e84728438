#!/usr/bin/env python3
"""Writes a tiny CIFAR-10 binary data set (the real format: 1 label byte + 3072 bytes of R, G, B
planes per record) with a learnable pattern: class k brightens rows 3k..3k+2 of channel k % 3.
Usage: make_cifar.py DIR [TRAIN1 TRAIN2 TEST]   (records per file; default 200 120 100)"""
import os
import random
import sys


def record(rng, label):
    planes = bytearray(rng.randrange(0, 96) for _ in range(3072))
    c = label % 3
    for r in range(3 * label, 3 * label + 3):
        for x in range(32):
            planes[c * 1024 + r * 32 + x] = 200 + rng.randrange(0, 56)
    return bytes([label]) + bytes(planes)


def main():
    out = sys.argv[1]
    sizes = [int(v) for v in sys.argv[2:5]] if len(sys.argv) >= 5 else [200, 120, 100]
    os.makedirs(os.path.join(out, "cifar-10-batches-bin"), exist_ok=True)
    rng = random.Random(20261129)
    names = ["data_batch_1.bin", "data_batch_2.bin", "test_batch.bin"]
    for name, n in zip(names, sizes):
        with open(os.path.join(out, "cifar-10-batches-bin", name), "wb") as f:
            for _ in range(n):
                f.write(record(rng, rng.randrange(10)))


if __name__ == "__main__":
    main()
