#!/usr/bin/env python3
"""Writes a tiny CIFAR-10 binary data set (the real format: 1 label byte + 3072 bytes of R, G, B
planes per record) with a learnable pattern: class k brightens rows 3k..3k+2 of channel k % 3.
All five training files are written, as clcnn (like torchvision) refuses an incomplete set: the
training records are spread over data_batch_1..5.bin in order (as evenly as possible), then
test_batch.bin holds the test records.
Usage: make_cifar.py DIR [TRAIN TEST]   (records in all; default 320 100)
       make_cifar.py DIR TRAIN1 TRAIN2 TEST   (the older form: TRAIN = TRAIN1 + TRAIN2)"""
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
    nums = [int(v) for v in sys.argv[2:]]
    if len(nums) == 3:
        train, test = nums[0] + nums[1], nums[2]
    elif len(nums) == 2:
        train, test = nums
    elif not nums:
        train, test = 320, 100
    else:
        sys.exit(__doc__)
    base = os.path.join(out, "cifar-10-batches-bin")
    os.makedirs(base, exist_ok=True)
    rng = random.Random(20261129)
    sizes = [train // 5 + (1 if i < train % 5 else 0) for i in range(5)]
    files = [(f"data_batch_{i + 1}.bin", n) for i, n in enumerate(sizes)] + [("test_batch.bin", test)]
    for name, n in files:
        with open(os.path.join(base, name), "wb") as f:
            for _ in range(n):
                f.write(record(rng, rng.randrange(10)))


if __name__ == "__main__":
    main()
