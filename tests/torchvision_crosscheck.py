#!/usr/bin/python3
"""Cross-check clcnn's resnet18 preset against torchvision's resnet18, step for step.

Needs PyTorch and torchvision (Debian's python3-torch 1.13 and python3-torchvision 0.14).
CI runs it as ctest test_torchvision_resnet18. Exit status: 0 all checks passed, 1 a check
failed, 77 torch or torchvision is not importable or clcnn_train sees no OpenCL device
(ctest's "skipped"; tests/python_test.sh makes it a failure where CI requires the test),
2 usage or run error.

    /usr/bin/python3 tests/torchvision_crosscheck.py --clcnn build/clcnn_train \
        [--steps 3] [--batch 32] [--lr 1e-4] [--momentum 0.9] [--work DIR] [--noise-floor]

 1. builds torchvision.models.resnet18(num_classes=10) under torch.manual_seed(0) (its own
    initialisation: Kaiming normal convolutions, BatchNorm weight 1 and bias 0) and saves its
    state_dict as it is (no key prefix; num_batches_tracked I64) in safetensors;
 2. writes a small CIFAR-10-format data set (tests/make_cifar.py: --steps batches of --batch
    3x32x32 images, read in file order) and runs clcnn_train --model resnet18 --init
    THAT_FILE --no-shuffle --max-steps N with SGD and momentum, no augmentation;
 3. checks that clcnn's checkpoint has torchvision's state_dict names, shapes and dtypes;
 4. trains torchvision's model the same way in train mode and checks every step's loss
    within 1e-4 relative;
 5. loads clcnn's checkpoint into a fresh resnet18 with load_state_dict(strict=True) and
    checks every tensor of it against PyTorch's after the same steps (check_state).

A script of its own rather than a mode of pytorch_crosscheck.py: the reference is
torchvision's module (names and initialisation included), not one built from a spec, the
data set is written here, and what is compared after training is the whole state_dict rather
than the test set's accuracy. The safetensors and metrics helpers are pytorch_crosscheck.py's.

Why batch 32 and lr 1e-4: ResNet-18 on 32x32 images has 4x4, 2x2 and 1x1 planes in its last
stages, so a BatchNorm channel there sums only batch x 16, x 4 or x 1 values, and a ReLU
whose input lies within fp32 rounding of 0 (about one per step per 16 images in this net)
can go either way in two correct fp32 implementations. One such decision changes one
element's gradient entirely: at batch 16 the first step has one (an input of 9e-7 after
layer2.1's sum), and it moves the third step's loss by 2e-2 at lr 1e-2 and still by 1.2e-4 at
lr 1e-4 (the weights it moves shift other ReLU inputs across 0 in the next steps). At batch
32 and lr 1e-4, the same experiment on step 1's ReLU input nearest 0 after the stem (2.1e-7;
the stem's feed a max pool, which drops most of their gradients) moves the third loss by 2e-6
and no tensor's update by more than 2e-3 of its size (L2), while the steps move the losses by
3.6e-3 and 1.6e-2 from their values at the initial weights; torch's own float32 run is 2.3e-5
from its float64 run at the third step (--noise-floor shows it). check_state says what the
tolerances of the final state rest on.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pytorch_crosscheck as xc  # noqa: E402  (exits 77 when torch is not importable)

try:
    import torchvision
except Exception as e:  # noqa: BLE001 - any import failure means "skip"
    print(f"torchvision_crosscheck: torchvision is not importable ({e}); skipped")
    sys.exit(xc.SKIP)

torch, nn = xc.torch, xc.nn

LOSS_RTOL = 1e-4
# Parameters after the steps: ||clcnn - torch|| <= PARAM_RTOL ||torch - init|| (L2, per tensor).
PARAM_RTOL = 0.1
# BatchNorm running statistics: max |clcnn - torch| <= STAT_RTOL max |torch - init|.
STAT_RTOL = 1e-3


def make_model():
    return torchvision.models.resnet18(num_classes=10)


def train_torch(init_sd, x_u8, y, steps, batch, lr, momentum, dtype):
    """The same steps as clcnn_train: file order, pixels / 255, CrossEntropyLoss, SGD with
    momentum, train mode -> ({step: loss}, state_dict)."""
    model = make_model()
    model.load_state_dict(init_sd, strict=True)
    model.to(dtype)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    crit = nn.CrossEntropyLoss()
    losses = {}
    for step in range(1, steps + 1):
        first = (step - 1) * batch
        xb = xc.to_input(x_u8[first:first + batch]).to(dtype)
        yb = torch.from_numpy(y[first:first + batch])
        opt.zero_grad()
        loss = crit(model(xb), yb)
        loss.backward()
        opt.step()
        losses[step] = float(loss)
    return losses, {k: v.detach().clone() for k, v in model.state_dict().items()}


def run_clcnn(args, work, init_path, data):
    """clcnn_train from init_path -> ({step: loss}, path of its checkpoint) or (None, None)."""
    mdir, ldir = os.path.join(work, "model"), os.path.join(work, "logs")
    metrics = os.path.join(work, "m.jsonl")
    for p in (mdir, ldir):
        shutil.rmtree(p, ignore_errors=True)
    if os.path.exists(metrics):
        os.remove(metrics)  # clcnn appends
    cmd = [args.clcnn, "--data", data, "--model", "resnet18", "--init", init_path,
           "--no-shuffle", "--max-steps", str(args.steps), "--epochs", "1",
           "--log-every", "1", "--batch-size", str(args.batch), "--optimizer", "sgd",
           "--lr", repr(args.lr), "--momentum", repr(args.momentum), "--no-tensorboard",
           "--metrics", metrics, "--save-dir", mdir, "--logdir", ldir]
    print("clcnn: " + " ".join(cmd))
    t0 = time.time()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True)
    with open(os.path.join(work, "clcnn.out"), "w") as f:
        f.write(proc.stdout)
    if proc.returncode != 0:
        print(proc.stdout[-4000:])
        print(f"FAIL clcnn_train exited with {proc.returncode}")
        return None, None
    print(f"clcnn: {args.steps} steps in {time.time() - t0:.1f} s")
    losses, _ = xc.read_metrics(metrics)
    ckpt = os.path.join(mdir, "epoch_1.safetensors")  # its .state sibling holds the rest
    if not os.path.exists(ckpt):
        print(f"FAIL clcnn_train wrote no {ckpt}")
        return None, None
    return losses, ckpt


def crosscheck(args, work):
    ok = True

    def check(cond, msg):
        nonlocal ok
        print(("PASS " if cond else "FAIL ") + msg)
        ok = ok and bool(cond)
        return bool(cond)

    xc.setup_torch(args.threads)
    n_train = args.steps * args.batch
    data = os.path.join(work, "data")
    shutil.rmtree(data, ignore_errors=True)
    subprocess.run([sys.executable, os.path.join(HERE, "make_cifar.py"), data, str(n_train),
                    "16"], check=True, stdout=subprocess.DEVNULL)
    trx, try_, _, _ = xc.load_data(data)
    print(f"data: {n_train} training images {tuple(trx.shape[1:])}, batch {args.batch}, "
          f"file order; torch {torch.__version__}, torchvision {torchvision.__version__}")

    # 1. torchvision's model, its own initialisation, its state_dict as it is
    torch.manual_seed(0)
    init_sd = {k: v.detach().clone() for k, v in make_model().state_dict().items()}
    init_path = os.path.join(work, "resnet18_init.safetensors")
    xc.write_safetensors(init_path, init_sd, {"format": "pt"})

    # 2. clcnn from that file
    cl_loss, ckpt = run_clcnn(args, work, init_path, data)
    if cl_loss is None:
        return 1
    check(sorted(cl_loss) == list(range(1, args.steps + 1)),
          f"clcnn logged steps 1..{args.steps}")

    # 3. names, shapes and dtypes of clcnn's checkpoint against torchvision's state_dict
    _, cl_sd = xc.read_safetensors(ckpt)
    only_cl, only_th = sorted(set(cl_sd) - set(init_sd)), sorted(set(init_sd) - set(cl_sd))
    check(not only_cl and not only_th,
          f"checkpoint names are torchvision's state_dict names ({len(init_sd)} tensors)"
          + ("" if not only_cl and not only_th else
             f"; only clcnn: {only_cl}, only torchvision: {only_th}"))
    bad = [f"{k} {tuple(cl_sd[k].shape)} {cl_sd[k].dtype}, torchvision {tuple(v.shape)} "
           f"{v.dtype}" for k, v in init_sd.items()
           if k in cl_sd and (cl_sd[k].shape != v.shape or cl_sd[k].dtype != v.dtype)]
    check(not bad, "checkpoint shapes and dtypes match" + "".join("; " + b for b in bad))

    # 4. the same steps in PyTorch, train mode (with --noise-floor in float64 too)
    t0 = time.time()
    th_loss, th_sd = train_torch(init_sd, trx, try_, args.steps, args.batch, args.lr,
                                 args.momentum, torch.float32)
    ex_loss = ex_sd = None
    if args.noise_floor:
        ex_loss, ex_sd = train_torch(init_sd, trx, try_, args.steps, args.batch, args.lr,
                                     args.momentum, torch.float64)
    print(f"torch: {args.steps} steps in {time.time() - t0:.1f} s")
    worst = 0.0
    for s in range(1, args.steps + 1):
        if s not in cl_loss:
            continue
        d = xc.rel(cl_loss[s], th_loss[s])
        worst = max(worst, d)
        floor = (f"  (torch float32 vs float64 {xc.rel(th_loss[s], ex_loss[s]):.2e})"
                 if ex_loss else "")
        check(d <= LOSS_RTOL, f"step {s} loss: clcnn {cl_loss[s]:.8f}, torch {th_loss[s]:.8f}, "
              f"rel. diff {d:.2e} (tolerance {LOSS_RTOL:g}){floor}")

    # 5. clcnn's checkpoint into a fresh torchvision resnet18, then every tensor
    fresh = make_model()
    try:
        fresh.load_state_dict(cl_sd, strict=True)
        loaded = True
    except RuntimeError as e:
        print(e)
        loaded = False
    check(loaded, "load_state_dict(clcnn checkpoint, strict=True) into torchvision's resnet18")
    if not loaded or bad:
        return 1
    figures = check_state(fresh.state_dict(), th_sd, ex_sd, init_sd, args.steps, check)
    print(f"RESULT resnet18 vs torchvision, {args.steps} steps, batch {args.batch}, lr "
          f"{args.lr:g}, momentum {args.momentum:g}: "
          f"{'all checks passed' if ok else 'FAILED'}; max step-loss rel. diff {worst:.2e}; "
          + figures)
    return 0 if ok else 1


def rel_diffs(got, want, init):
    """-> {name: (||got - want|| / ||want - init||, max |got - want| / max |want - init|)}
    over the float tensors: how far two runs from the same start differ, relative to how far
    the tensor moved."""
    out = {}
    for k, w in want.items():
        if not w.is_floating_point():
            continue
        d, moved = got[k].double() - w.double(), w.double() - init[k].double()
        out[k] = (float(d.norm() / max(float(moved.norm()), 1e-30)),
                  float(d.abs().max() / max(float(moved.abs().max()), 1e-30)))
    return out


def check_state(cl, th, ex, init, steps, check):
    """Every tensor of clcnn's state against torch's after the same steps -> a summary line.

    Both runs start from the same bits, so only what the steps added can differ, and each
    tensor is measured against how far it moved.

    Parameters: L2 norm, PARAM_RTOL = 0.1. The gradients are fp32 sums in different orders,
    and a ReLU input within rounding of 0 (see the module's docstring) changes one element's
    gradient outright. One such decision of step 1, emulated in PyTorch, changes no tensor's
    update by more than 2e-3, but two fp32 implementations differ in several per step (torch
    float32 against float64: 2, 9 and 31 in the three steps), and the last step's go straight
    into the final weights: torch float32 is 4.2e-2 from float64 in layer4's BatchNorm
    weights, whose gradients are sums of 32 values per channel (1x1 planes). A wrong index,
    padding or formula moves a whole tensor's update by a good fraction of itself (a col2im
    that drops the last output row: 1.0); what it does to a loss is checked at 1e-4.

    BatchNorm running statistics: max norm, STAT_RTOL = 1e-3. They are smooth functions of
    the forward activations of steps 1 to 3, which the decisions reach only through the small
    weight changes they cause (torch float32 against float64: 1.4e-4); a biased variance, a
    wrong momentum or a step's statistics missing is off by percents (the biased variance:
    7.2e-2). num_batches_tracked must equal the steps."""
    dcl = rel_diffs(cl, th, init)
    dex = rel_diffs(th, ex, init) if ex else {}
    fails, kinds = [], {}
    for k, (l2, mx) in sorted(dcl.items()):
        kind = k.rsplit(".", 1)[1]
        stat = kind.startswith("running_")
        r, tol = (mx, STAT_RTOL) if stat else (l2, PARAM_RTOL)
        w = kinds.setdefault(kind, [0.0, "", 0.0, "", 0.0])
        if r > w[0]:
            w[0], w[1] = r, k
        if mx > w[2]:
            w[2], w[3] = mx, k
        if k in dex:
            w[4] = max(w[4], dex[k][0 if not stat else 1])
        if r > tol:
            fails.append(f"{k}: {r:.3g} of its update (tolerance {tol:g})")
    print("final state against torch's, per kind: the measure checked (L2 of the difference "
          "over the L2 of the update; running statistics: max over max), its worst tensor, "
          "and the largest max-norm ratio" + (", [torch float32 vs float64]" if dex else ""))
    for kind, w in sorted(kinds.items()):
        print(f"  {kind:13s} {w[0]:.2e} ({w[1]})  max-norm {w[2]:.2e} ({w[3]})"
              + (f"  [{w[4]:.2e}]" if dex else ""))
    n_par = sum(not k.rsplit(".", 1)[1].startswith("running_") for k in dcl)
    check(not fails, f"{n_par} parameters within {PARAM_RTOL:g} of their update (L2) and "
          f"{len(dcl) - n_par} running statistics within {STAT_RTOL:g} (max)"
          + "".join("; " + f for f in fails))
    counters = [k for k in th if not th[k].is_floating_point()]
    wrong = [f"{k} {int(cl[k])}" for k in counters if int(cl[k]) != steps]
    check(not wrong, f"{len(counters)} num_batches_tracked equal {steps}"
          + ("" if not wrong else ": " + ", ".join(wrong)))
    return ", ".join(f"{kind} {w[0]:.1e}" for kind, w in sorted(kinds.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clcnn", required=True, help="path to clcnn_train")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    ap.add_argument("--noise-floor", action="store_true",
                    help="also train torch in float64 and show how far its float32 is from it")
    ap.add_argument("--work", help="work folder (default: a temporary one, removed)")
    args = ap.parse_args()
    if args.steps < 1 or args.batch < 2:
        ap.error("--steps must be >= 1 and --batch >= 2")
    try:
        dev = subprocess.run([args.clcnn, "--list-devices"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, universal_newlines=True)
    except OSError as e:
        print(f"torchvision_crosscheck: {args.clcnn}: {e}")
        return 2
    if dev.returncode != 0:
        print(dev.stdout[-2000:])
        print("torchvision_crosscheck: clcnn_train sees no OpenCL device; skipped")
        return xc.SKIP
    tmp = None
    if args.work:
        work = args.work
        os.makedirs(work, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="clcnn-tv-")
        work = tmp.name
    try:
        return crosscheck(args, work)
    except (OSError, ValueError, subprocess.CalledProcessError) as e:
        print(f"torchvision_crosscheck: {e}")
        return 2
    finally:
        if tmp:
            tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())
