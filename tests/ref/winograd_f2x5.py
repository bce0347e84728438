#!/usr/bin/env python3
"""The Winograd F(2x2, 5x5) transforms of cl/conv2d.cl (conv_wino5, wino5_weights), derived by
Toom-Cook from the points 0, 1, -1, 2, -2 and infinity in exact rational arithmetic, printed,
and checked: A^T [(G g G^T) . (B^T d B)] A equals the 2x2 correlation of every 6x6 patch d with
every 5x5 filter g (exactly, on random integer data). Standard library only.
Usage: python3 tests/ref/winograd_f2x5.py (exit 1 if the identity fails)."""
import random
import sys
from fractions import Fraction as F

M, R = 2, 5  # outputs per tile side, filter side
PTS = [0, 1, -1, 2, -2]  # and infinity
N = M + R - 1


def poly_from_roots(roots):
    """Coefficients (constant first) of the product of (x - r) over roots."""
    c = [F(1)]
    for r in roots:
        c = [F(0)] + c  # times x
        for k in range(len(c) - 1):
            c[k] -= r * c[k + 1]
    return c


def transforms():
    at = [[F(0)] * N for _ in range(M)]
    g = [[F(0)] * R for _ in range(N)]
    bt = [[F(0)] * N for _ in range(N)]
    for i, a in enumerate(PTS):
        f = F(1)
        for j, b in enumerate(PTS):
            if j != i:
                f *= a - b
        for k in range(M):
            at[k][i] = F(a) ** k
        for k in range(R):
            g[i][k] = F(a) ** k / f
        row = poly_from_roots([b for j, b in enumerate(PTS) if j != i])
        bt[i] = row + [F(0)] * (N - len(row))
    at[M - 1][N - 1] = F(1)
    g[N - 1][R - 1] = F(1)
    bt[N - 1] = poly_from_roots(PTS)
    return at, g, bt


def mul(a, b):
    return [[sum(a[i][k] * b[k][j] for k in range(len(b))) for j in range(len(b[0]))]
            for i in range(len(a))]


def tr(a):
    return [list(r) for r in zip(*a)]


def main():
    at, g, bt = transforms()
    for name, m in (("B^T", bt), ("G", g), ("A^T", at)):
        print(name + " = [" + "; ".join(" ".join(str(v) for v in r) for r in m) + "]")
    rng = random.Random(1)
    for _ in range(20):
        w = [[F(rng.randint(-9, 9)) for _ in range(R)] for _ in range(R)]
        d = [[F(rng.randint(-9, 9)) for _ in range(N)] for _ in range(N)]
        u, v = mul(mul(g, w), tr(g)), mul(mul(bt, d), tr(bt))
        y = mul(mul(at, [[u[i][j] * v[i][j] for j in range(N)] for i in range(N)]), tr(at))
        ref = [[sum(w[a][b] * d[r + a][s + b] for a in range(R) for b in range(R))
                for s in range(M)] for r in range(M)]
        if y != ref:
            print("the identity fails:", y, ref)
            return 1
    print("A^T [(G g G^T) . (B^T d B)] A = correlation: exact on 20 random patches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
