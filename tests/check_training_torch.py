"""clcnn's learning-rate schedules and smoothed cross-entropy against PyTorch's.

Usage: check_training_torch.py TEST_SCHEDULE

TEST_SCHEDULE --table prints the lr clcnn gives each step of a set of schedules; each is
compared with the lr torch.optim.lr_scheduler's CosineAnnealingLR(T_max=total, eta_min=0) or
OneCycleLR(max_lr, total_steps, pct_start, anneal_strategy='cos', div_factor=25,
final_div_factor=1e4, cycle_momentum=False) sets after that many scheduler.step() calls, within
1e-12 relative (OneCycleLR's closed form is reproduced to the bit; CosineAnnealingLR steps
recursively, each lr from the last, so it drifts from the closed form by a few ulps per step).
Where PyTorch raises (a phase of no steps, stepping past total_steps), clcnn must give NaN.

TEST_SCHEDULE --ce prints the double-precision reference of the cross-entropy with label
smoothing (tests/ref/loss.c), which the device kernel is tested against; it is compared with
nn.CrossEntropyLoss(label_smoothing=eps) and its gradient in float64, within 1e-12.

Exit status: 0 all match, 1 a mismatch, 77 torch is not installed.
"""

import math
import subprocess
import sys
import warnings

SKIP = 77
REL = 1e-12


def torch_lrs(torch, kind, lr, total, pct):
    """The lr after k scheduler.step() calls, k = 0 .. total; NaN where PyTorch raises."""
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=lr)
    sched_mod = torch.optim.lr_scheduler
    out = []
    try:
        if kind == "cosine":
            s = sched_mod.CosineAnnealingLR(opt, T_max=total, eta_min=0)
        elif kind == "onecycle":
            s = sched_mod.OneCycleLR(opt, max_lr=lr, total_steps=total, pct_start=pct,
                                     anneal_strategy="cos", div_factor=25.0,
                                     final_div_factor=1e4, cycle_momentum=False)
        else:
            s = None
    except ZeroDivisionError:
        return [math.nan]  # the first step's lr cannot be computed: only that is compared
    for k in range(total + 1):
        out.append(opt.param_groups[0]["lr"])
        if s is None:
            continue
        opt.step()
        try:
            s.step()
        except (ValueError, ZeroDivisionError):
            out += [math.nan] * (total - k)
            break
    return out


def same(a, b):
    if math.isnan(b):
        return math.isnan(a)
    return abs(a - b) <= REL * abs(b)


def check_table(torch, exe):
    text = subprocess.run([exe, "--table"], check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in text.splitlines():
        kind, lr, total, pct, k, v = line.split()
        rows.setdefault((kind, float(lr), int(total), float(pct)), []).append((int(k), float(v)))
    bad = 0
    for (kind, lr, total, pct), got in rows.items():
        want = torch_lrs(torch, kind, lr, total, pct)
        worst = 0.0
        for k, v in got:
            if k >= len(want):
                continue
            if not same(v, want[k]):
                if bad < 10:
                    print(f"FAIL: {kind} lr {lr} total {total} pct {pct} step {k}: "
                          f"clcnn {v!r}, torch {want[k]!r}")
                bad += 1
            elif want[k] and not math.isnan(want[k]):
                worst = max(worst, abs(v - want[k]) / abs(want[k]))
        print(f"{kind:8} lr {lr:<5} total {total:<5} pct {pct:<4}: {min(len(got), len(want))} "
              f"steps compared, worst relative difference {worst:.2g}")
    return bad


def check_ce(torch, exe):
    lines = subprocess.run([exe, "--ce"], check=True, capture_output=True,
                           text=True).stdout.splitlines()
    bad = 0
    while lines:
        _, n, k, eps = lines[0].split()
        n, k, eps = int(n), int(k), float(eps)
        z = torch.tensor([float(x) for x in lines[1].split()], dtype=torch.float64)
        z = z.reshape(n, k).requires_grad_(True)
        y = torch.tensor([int(x) for x in lines[2].split()])
        loss = float(lines[3])
        grad = torch.tensor([float(x) for x in lines[4].split()], dtype=torch.float64)
        lines = lines[5:]
        want = torch.nn.CrossEntropyLoss(label_smoothing=eps)(z, y)
        (g,) = torch.autograd.grad(want, z)
        dl = abs(loss - want.item()) / abs(want.item())
        dg = (grad.reshape(n, k) - g).abs().max().item() / g.abs().max().item()
        ok = dl <= REL and dg <= REL
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'} cross-entropy N {n} K {k} label_smoothing {eps}: "
              f"loss {loss:.12g} vs {want.item():.12g} (rel {dl:.2g}), gradient rel {dg:.2g}")
    return bad


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        print("torch is not installed: skipping")
        return SKIP
    warnings.simplefilter("ignore")
    torch.set_default_dtype(torch.float64)
    print(f"torch {torch.__version__}")
    bad = check_table(torch, argv[1]) + check_ce(torch, argv[1])
    print("check_training_torch: " + (f"{bad} mismatches" if bad else "all match"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
