"""Checks python/clcnn_torch.py, the PyTorch builder of clcnn model specs.

    python3 tests/test_torch_builder.py                        # self-checks
    python3 tests/test_torch_builder.py CHECKPOINT SPEC C H W  # also load a clcnn checkpoint
    python3 tests/test_torch_builder.py --clcnn BUILD/clcnn_train [--data DIR] [--work DIR]

Self-checks: every preset (resnet18 against torchvision's module) and a spec using every layer
kind (nested res, N*( ) repetition) build on 1x28x28 and 3x32x32 with the expected output
shapes, modules and state_dict names; a graph-form spec computes what torch computes from the
same modules; the grammar (aliases, case, separators, keywords, real numbers) gives the same
modules as the canonical text; bad specs raise ValueError with src/spec.c's messages (the
graph comes from clcnn_train --graph-json: $CLCNN_TRAIN or build/clcnn_train). With a checkpoint (a clcnn weights file, safetensors), the model of SPEC
on C x H x W inputs loads it with strict=True and holds exactly its tensors. With --clcnn, the
every-layer spec is trained for 60 steps by clcnn_train on Fashion-MNIST (default
/usr/share/datasets/fashion-mnist), its checkpoint is loaded strictly and PyTorch's test
accuracy and loss must be clcnn's.
Exits 0 on success, 1 on a failure, 77 (a skip) without torch, the data set or a device.
The safetensors package is used when installed, else the files are read here.
"""
import gzip
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

try:
    import torch
    import torch.nn as nn
except ImportError:
    print("test_torch_builder: skipped, this python has no torch")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import clcnn_torch  # noqa: E402

FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL: " + what)


def out_shape(model, c, h, w):
    model.eval()
    with torch.no_grad():
        return tuple(model(torch.randn(2, c, h, w)).shape)


PRESET_NAMES = ("seed", "seed-relu", "resnet", "resnet18")


def test_presets():
    for name in PRESET_NAMES:
        text = clcnn_torch.graph(name)["spec"]
        for c, h, w in ((1, 28, 28), (3, 32, 32)):
            m = clcnn_torch.build(name, c, h, w)
            check(out_shape(m, c, h, w)[1:] == clcnn_torch.output_shape(text, c, h, w) == (10,),
                  "preset %s on %dx%dx%d: output shape" % (name, c, h, w))
            m2 = clcnn_torch.build(" " + name.upper() + "\n", c, h, w)
            check(list(m.state_dict()) == list(m2.state_dict()), "preset %s by name" % name)
            check(list(m.state_dict()) == list(clcnn_torch.build(text, c, h, w).state_dict()),
                  "preset %s by its canonical text" % name)
    try:
        import torchvision
    except ImportError:
        torchvision = None
    if torchvision is not None:  # resnet18 is torchvision's module, name for name
        t = torchvision.models.resnet18(num_classes=10).eval()
        m = clcnn_torch.build("resnet18", 3, 32, 32).eval()
        check([(k, v.shape) for k, v in m.state_dict().items()] ==
              [(k, v.shape) for k, v in t.state_dict().items()], "resnet18 state_dict")
        m.load_state_dict(t.state_dict(), strict=True)
        x = torch.randn(2, 3, 32, 32)
        with torch.no_grad():
            check(torch.equal(m(x), t(x)), "resnet18 computes torchvision's function")
    resnet = clcnn_torch.build("resnet", 1, 28, 28)
    names = list(resnet.state_dict())
    check(names[:6] == ["0.weight", "1.weight", "1.bias", "1.running_mean", "1.running_var",
                        "1.num_batches_tracked"] and "7.0.weight" in names
          and "7.4.num_batches_tracked" in names and "16.3.weight" in names
          and names[-1] == "19.weight", "resnet state_dict names")
    check(isinstance(resnet[7], clcnn_torch.Residual) and isinstance(resnet[20], clcnn_torch.Scale)
          and len(resnet) == 21, "resnet modules")
    seed = clcnn_torch.build("seed", 3, 32, 32)
    check([k for k in seed.state_dict()] == [
        "0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias", "7.weight", "7.bias",
        "8.weight", "8.bias"], "seed state_dict names")
    check(tuple(seed[7].weight.shape) == (64, 1024), "seed linear(64) takes 1024 features")
    check(out_shape(seed, 3, 32, 32) == (2, 10), "seed output 10")


# Every layer kind, nested res, repetition (inside and around res), bn on flat features.
ALL = ("conv(8,3,pad=1,bias=0) bn gelu "
       "2*(res(conv(8,3,1,1) bn(eps=1e-3, momentum=0.2) relu res(conv(8,1) relu) dropout(0.1))) "
       "maxpool(3,stride=2,pad=1) avgpool(2) conv(16,3,padding=1) scale(0.5) "
       "res(2*(conv(16,3,pad=1,bias=0) bn relu)) globalmaxpool flatten linear(12) bn relu "
       "dropout linear(10,bias=0) scale(0.125)")
ALL_GAP = "conv(4,3) globalavgpool flatten fc(3)"

ALL_NAMES = [
    "0.weight",
    "1.weight", "1.bias", "1.running_mean", "1.running_var", "1.num_batches_tracked",
    "3.0.weight", "3.0.bias",
    "3.1.weight", "3.1.bias", "3.1.running_mean", "3.1.running_var", "3.1.num_batches_tracked",
    "3.3.0.weight", "3.3.0.bias",
    "4.0.weight", "4.0.bias",
    "4.1.weight", "4.1.bias", "4.1.running_mean", "4.1.running_var", "4.1.num_batches_tracked",
    "4.3.0.weight", "4.3.0.bias",
    "7.weight", "7.bias",
    "9.0.weight",
    "9.1.weight", "9.1.bias", "9.1.running_mean", "9.1.running_var", "9.1.num_batches_tracked",
    "9.3.weight",
    "9.4.weight", "9.4.bias", "9.4.running_mean", "9.4.running_var", "9.4.num_batches_tracked",
    "12.weight", "12.bias",
    "13.weight", "13.bias", "13.running_mean", "13.running_var", "13.num_batches_tracked",
    "16.weight",
]


def test_all_layers():
    B = clcnn_torch
    for c, h, w in ((1, 28, 28), (3, 32, 32)):
        m = B.build(ALL, c, h, w)
        check(out_shape(m, c, h, w) == (2, 10), "ALL on %dx%dx%d: output (2, 10)" % (c, h, w))
        check(list(m.state_dict()) == ALL_NAMES, "ALL state_dict names on %dx%dx%d: %s"
              % (c, h, w, list(m.state_dict())))
        types = [type(x) for x in m]
        check(types == [nn.Conv2d, nn.BatchNorm2d, nn.GELU, B.Residual, B.Residual, nn.MaxPool2d,
                        nn.AvgPool2d, nn.Conv2d, B.Scale, B.Residual, nn.AdaptiveMaxPool2d,
                        nn.Flatten, nn.Linear, nn.BatchNorm1d, nn.ReLU, nn.Dropout, nn.Linear,
                        B.Scale], "ALL module types: %s" % types)
        check(m[0].in_channels == c and m[0].bias is None, "conv in_channels, bias=0")
        check(m[3][1].eps == 1e-3 and m[3][1].momentum == 0.2, "bn eps/momentum")
        check(m[1].eps == 1e-5 and m[1].momentum == 0.1, "bn defaults")
        check(m[3][3][0].kernel_size == (1, 1), "nested res conv")
        check(m[3][4].p == 0.1 and m[15].p == 0.5, "dropout p and default")
        mp = m[5]
        check((mp.kernel_size, mp.stride, mp.padding) == (3, 2, 1), "maxpool args")
        ap = m[6]
        check((ap.kernel_size, ap.stride, ap.padding, ap.count_include_pad) == (2, 2, 0, True),
              "avgpool args")
        check(m[8].s == 0.5 and m[17].s == 0.125, "scale values")
        check(B.graph("res(conv(8,3,pad=1) res(relu))")["layers"][0]["body"] == 3, "res body")
        check(m[12].in_features == 16 and m[16].bias is None, "linear in_features, bias=0")
        # scale is x * s (res blocks: test_graph)
        x = torch.randn(2, 8, 5, 5)
        with torch.no_grad():
            check(torch.equal(m[8](x), x * 0.5), "Scale forward")
        gap = B.build(ALL_GAP, c, h, w)
        check(isinstance(gap[1], nn.AdaptiveAvgPool2d) and out_shape(gap, c, h, w) == (2, 3),
              "globalavgpool")
        # the same net written with aliases, other case, commas and extra whitespace
        alt = ("Conv2d( 8 ,3, padding = 1, bias=0 ),BN , GELU\n"
               "2 * ( RES ( conv2d(8,3,1,1),bn(momentum=0.2,eps=0.001) ReLU res(conv(8,1),relu)"
               "\tDropout(.1) ) ) mp(3, 2, 1) AvgPool(2,2,0) conv(16,3,1,1) Scale(5e-1) "
               "Res(conv(16,3,pad=1,bias=0) bn relu conv(16,3,pad=1,bias=0) bn relu), "
               "GlobalMaxPool Flatten() FC(12) bn() relu dropout(0.5) linear(10,bias=0) "
               "scale(0.125)")
        m2 = B.build(alt, c, h, w)
        check(str(m2) == str(m), "aliases/case/separators give the same modules")


def test_leakyrelu():
    m = clcnn_torch.build("conv(4,3) leakyrelu leakyrelu(negative_slope=-0.5) flatten fc(3)",
                          1, 6, 6)
    check([type(x) for x in m][1:3] == [nn.LeakyReLU, nn.LeakyReLU], "leakyrelu modules")
    check(m[1].negative_slope == 0.01 and m[2].negative_slope == -0.5, "leakyrelu slopes")
    x = torch.linspace(-2, 2, 16).reshape(1, 1, 4, 4)
    check(torch.equal(m[2](x), torch.nn.functional.leaky_relu(x, -0.5)), "leakyrelu forward")


def test_graph():
    """The graph form: every value as torch computes it from the same modules."""
    B = clcnn_torch
    spec = ("x: conv(8,3,pad=1) relu c=conv(8,3,pad=1) y: add(@x) conv(4,1) s: cat(@y) "
            "globalavgpool g=conv(12,1) mul(@s) "
            "b=res(c1=conv(12,3,pad=1,bias=0) bn | d.0=conv(12,1,stride=1) d.1=bn) flatten "
            "fc=linear(10)")
    m = B.build(spec, 3, 8, 8).eval()
    names = [k for k in m.state_dict()]
    check(names[:6] == ["0.weight", "0.bias", "c.weight", "c.bias", "4.weight", "4.bias"] and
          "b.c1.weight" in names and "b.d.1.running_var" in names and names[-1] == "fc.bias",
          "graph state_dict names: %s" % names)
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        v0 = m[0](x)
        v1 = torch.relu(v0)
        v3 = m["c"](v1) + v0
        v5 = torch.cat([m[4](v3), v3], 1)
        v7 = m["g"](nn.functional.adaptive_avg_pool2d(v5, 1)) * v5
        blk = m["b"]
        v8 = blk["d"][1](blk["d"][0](v7)) + blk[1](blk["c1"](v7))
        want = m["fc"](v8.flatten(1))
        check(torch.equal(m(x), want), "graph forward")
    ng = sum(1 for d in B.graph(spec)["layers"] if d["kind"] in ("add", "cat", "mul"))
    check(ng == 3, "add, cat and mul in the graph")


def test_grammar():
    B = clcnn_torch
    same = [
        ("seed", "2*(conv(32,5,pad=2) maxpool(2)) conv(64,5,pad=2) maxpool(2) flatten "
                 "linear(64) linear(10)"),
        ("seed", "conv2d(32,5,1,2), mp(2), conv2d(32,5,1,2), mp(2), conv2d(64,5,1,2), mp(2), "
                 "flatten, fc(64), fc(10)"),
        ("conv(8,3,stride=2) relu maxpool(3,2,1) flatten linear(10,bias=0)",
         "CONV ( 8 , 3 , stride = 2 )\trelu,maxpool2d(3,stride=2,padding=1)\nflatten() "
         "Linear(10, bias=0)"),
        ("2*(2*(relu))", "relu relu relu relu"),
        ("dropout scale(2)", "dropout(0.5) scale(2.0)"),
        ("bn(eps=.5,momentum=1)", "bn(momentum=1e0, eps=5E-1)"),
        ("bn avgpool(2) res(relu) scale(2) dropout(0.25)",
         "BatchNorm2d AP(2,2) Residual(ReLU) mul(+2.) dropout(p=25e-2)"),
        ("flatten bn", "flatten batchnorm1d"),
        ("flatten linear(0010)", "flatten linear(10)"),
        ("scale(%s)" % ("1" * 38), "scale(1.111111111111111e37)"),
        ("scale(0.125%s)" % ("0" * 57), "scale(0.125)"),  # 62 characters
        ("bn(eps=1.1754944e-38) scale(-3.4028234e38)", "bn(eps=11754944e-45) mul(-34028234e31)"),
        ("bn(eps=1.17549435e-38) scale(3.40282347e+38)",
         "bn(eps=117549435e-46) mul(340282347e30)"),
    ]
    for a, b in same:
        check(str(B.build(a, 3, 32, 32)) == str(B.build(b, 3, 32, 32)), "same: %r == %r" % (a, b))
    layers = B.graph("3*(res(2*(relu)))")["layers"]
    check(len(layers) == 9 and [d["body"] for d in layers if d["kind"] == "res"] == [2, 2, 2],
          "repetition of res")
    bad = [
        ("", "empty spec"), ("   ", "empty spec"), ("convv(32,5)", "unknown layer 'convv'"),
        ("conv(32)", "needs at least 2 positional"), ("conv(32,5,pad=x)", "pad expects"),
        ("linear(99999999999999999999)", "too large"), ("maxpool(3,pad=2)", "more than half"),
        ("conv(8,3,pad=1,padding=1)", "given twice"), ("conv(8,3,2,stride=2)", "both positionally"),
        ("conv(8,stride=2,3)", "positional argument after keyword"),
        ("conv(8,3,dilation=2)", "no keyword 'dilation'"), ("linear(10)x", "between layers"),
        ("relu(3)", "takes no arguments"), ("3*relu", "expected '('"),
        ("65*(relu)", "too large"), ("relu 4*(64*(relu))", "more than 256 layers"),
        ("2*(relu", "missing ')'"), (",relu", "expected a layer name"),
        ("relu,", "expected a layer after ','"), ("relu,,relu", "expected a layer name"),
        ("relu)", "unexpected ')'"), ("seed relu", "preset name must be the whole spec"),
        ("conv(8,3,bias=2)", "0 or 1"), ("conv(0,3)", "must be in 1..65536"),
        ("bn(1e-5)", "takes no positional"), ("bn(eps=0)", "eps must be greater than 0"),
        ("bn(momentum=1.5)", "momentum must be in [0, 1]"),
        ("dropout(1.5)", "p must be in [0, 1]"), ("dropout(p=-0.1)", "p must be in"),
        ("dropout(x)", "p expects a number"), ("dropout(0x1p-2)", "expects a number"),
        ("scale(1e999)", "must be a finite number"), ("scale(1e)", "expects a number"),
        ("relu(p=1)", "relu takes no arguments"), ("scale(factor=2)", "takes no keyword"),
        ("scale", "needs 1 positional"), ("scale(inf)", "expects a number"),
        ("scale(nan)", "expects a number"), ("res", "expected '('"),
        ("res()", "empty res block"), ("2*( )", "empty repetition group"),
        ("res(relu", "missing ')'"), ("linear(%s)" % ("9" * 5000), "too large"),
        ("relu " * 300, "more than 256 layers"),
        ("scale(%s)" % ("1" * 48), "scale factor '111111111111111111111111...' is too large for "
         "float (the largest magnitude is 3.40282347e+38)"),
        ("scale(1e300)", "scale factor '1e300' is too large for float"),
        ("mul(-3.5e38)", "scale factor '-3.5e38' is too large for float"),
        ("scale(1e-300)", "scale factor '1e-300' is too small for float (a non-zero magnitude "
         "must be at least 1.17549435e-38, the smallest normal float)"),
        ("bn(eps=1e-300)", "bn eps '1e-300' is too small for float"),
        ("bn(eps=1e39)", "bn eps '1e39' is too large for float"),
        ("scale(3.4028236e38)", "scale factor '3.4028236e38' is too large for float"),
        ("bn(eps=1.1754942e-38)", "bn eps '1.1754942e-38' is too small for float"),
        ("bn(momentum=1e-39)", "bn momentum '1e-39' is too small for float"),
        ("dropout(p=1e-45)", "dropout p '1e-45' is too small for float"),
        ("res(conv(4,3,pad=1))", "on 3 x 32 x 32 inputs"), ("linear(10)", "needs flat features"),
        ("flatten conv(4,3)", "on 3 x 32 x 32 inputs"), ("conv(4,64)", "on 3 x 32 x 32 inputs"),
        ("relu add(@y)", "no value is labelled 'y'"),
        ("9*(9*(9*(9*(9*(9*(9*(9*(9*(relu)))))))))", "groups nest deeper than 8"),
        ("res(2*(res(2*(res(2*(res(2*(res(relu))))))))))", "groups nest deeper than 8"),
    ]
    for spec, msg in bad:
        try:
            B.build(spec, 3, 32, 32)
            check(False, "bad spec %r built" % spec)
        except ValueError as e:
            check(msg in str(e), "bad spec %r: message %r lacks %r" % (spec, str(e), msg))
    for args in ((0, 32, 32), (3, 32, -1), (3.0, 32, 32)):
        try:
            B.build("relu", *args)
            check(False, "bad input size %r accepted" % (args,))
        except ValueError:
            pass
    e = None
    try:
        B.build("conv(8,3) rleu", 3, 32, 32)
    except ValueError as ex:
        e = str(ex)
    check(e is not None and re.search(r"column 11: unknown layer 'rleu'", e), "column: %s" % e)


ST_DTYPES = {"F32": torch.float32, "F64": torch.float64, "I32": torch.int32,
             "I64": torch.int64, "U8": torch.uint8}


def read_safetensors(path):
    """{name: tensor} of a safetensors file, with the safetensors package when it is installed,
    else read here (little-endian host assumed, as clcnn writes)."""
    try:
        import safetensors.torch
        return safetensors.torch.load_file(path)
    except ImportError:
        pass
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    header.pop("__metadata__", None)
    data = bytearray(raw[8 + n:])
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        t = torch.frombuffer(data[b:end], dtype=ST_DTYPES[e["dtype"]]) if end > b else \
            torch.empty(0, dtype=ST_DTYPES[e["dtype"]])
        out[name] = t.reshape(e["shape"]).clone()
    return out


def load_checkpoint(path, spec, c, h, w):
    model = clcnn_torch.build(spec, c, h, w)
    sd = read_safetensors(path)
    model.load_state_dict(sd, strict=True)
    print("loaded %s (%d tensors) into %s on %dx%dx%d" % (path, len(sd), spec, c, h, w))
    model.eval()
    with torch.no_grad():
        y = model(torch.zeros(1, c, h, w))
    check(bool(torch.isfinite(y).all()), "checkpoint forward is finite")
    for k, v in model.state_dict().items():
        check(v.dtype == sd[k].dtype and torch.equal(v, sd[k]), "checkpoint tensor %s" % k)


def read_idx(path):
    """An IDX file (plain or .gz) as a uint8/int64 tensor."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    nd = raw[3]
    dims = [struct.unpack(">I", raw[4 + 4 * i:8 + 4 * i])[0] for i in range(nd)]
    return torch.frombuffer(bytearray(raw[4 + 4 * nd:]), dtype=torch.uint8).reshape(dims)


def find_idx(data, name):
    for ext in ("", ".gz"):
        if os.path.exists(os.path.join(data, name + ext)):
            return os.path.join(data, name + ext)
    return None


def crosscheck(clcnn, data, work):
    """Trains ALL (every layer kind, a LeakyReLU too) for 60 steps with clcnn_train, loads its checkpoint into
    the module of ALL strictly, and evaluates the test set in PyTorch: clcnn's test accuracy
    and loss. Returns 77 when the data set is missing."""
    images = find_idx(data, "t10k-images-idx3-ubyte")
    labels = find_idx(data, "t10k-labels-idx1-ubyte")
    if not images or not labels:
        print("test_torch_builder: skipped, no Fashion-MNIST test set in %s" % data)
        return 77
    dev = subprocess.run([clcnn, "--list-devices"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, universal_newlines=True)
    if dev.returncode != 0:
        print(dev.stdout[-2000:])
        print("test_torch_builder: clcnn_train sees no OpenCL device; skipped")
        return 77
    # ALL with a LeakyReLU for the head's ReLU (the same module names)
    spec = ALL.replace("dropout linear", "dropout(0.1) linear").replace(
        "linear(12) bn relu", "linear(12) bn leakyrelu(0.1)")
    ls, mean, std = 0.1, 0.286, 0.353
    save, logs = os.path.join(work, "model"), os.path.join(work, "logs")
    cmd = [clcnn, "--data", data, "--model", spec, "--max-steps", "60", "--batch-size", "32",
           "--lr", "0.05", "--momentum", "0.9", "--label-smoothing", str(ls), "--normalize",
           "%s,%s" % (mean, std), "--random-crop", "2", "--hflip", "--save-dir", save,
           "--logdir", logs, "--no-tensorboard"]
    print("running: %s" % " ".join("'%s'" % c if " " in c else c for c in cmd), flush=True)
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True)
    print(out.stdout[-2000:])
    m = re.search(r"epoch 1: test loss ([0-9.]+), test accuracy ([0-9.]+)", out.stdout)
    check(out.returncode == 0 and m is not None, "clcnn_train ran (rc %d)" % out.returncode)
    if not m:
        return 1
    model = clcnn_torch.build(spec, 1, 28, 28)
    sd = read_safetensors(os.path.join(save, "epoch_1.safetensors"))
    model.load_state_dict(sd, strict=True)
    model.eval()
    x = (read_idx(images).float().div(255).unsqueeze(1) - mean) / std
    y = read_idx(labels).long()
    with torch.no_grad():
        logits = torch.cat([model(x[i:i + 1000]) for i in range(0, x.shape[0], 1000)])
    loss = torch.nn.functional.cross_entropy(logits, y, label_smoothing=ls).item()
    acc = (logits.argmax(1) == y).float().mean().item()
    print("clcnn: test loss %s accuracy %s; torch on its checkpoint: %.4f %.4f"
          % (m.group(1), m.group(2), loss, acc))
    # clcnn prints 4 decimals; a near-tie may flip an image or two between fp32 orders.
    check(abs(acc - float(m.group(2))) <= 3e-4, "test accuracy: torch %.4f, clcnn %s"
          % (acc, m.group(2)))
    check(abs(loss - float(m.group(1))) <= 1e-3 * max(1.0, loss), "test loss: torch %.4f, "
          "clcnn %s" % (loss, m.group(1)))
    return 0


USAGE = """usage: %s                                  self-checks only
       %s CHECKPOINT SPEC C H W            also load a clcnn weights file strictly
       %s --clcnn CLCNN_TRAIN [--data DIR] [--work DIR]
                                            also train 60 steps with clcnn_train and compare
                                            its test accuracy with torch's on its checkpoint
"""


def main(argv):
    test_presets()
    test_all_layers()
    test_leakyrelu()
    test_graph()
    test_grammar()
    rc = 0
    if len(argv) == 6 and not argv[1].startswith("--"):
        load_checkpoint(argv[1], argv[2], int(argv[3]), int(argv[4]), int(argv[5]))
    elif len(argv) > 1 and argv[1] == "--clcnn" and len(argv) % 2 == 1:
        opts = dict(zip(argv[1::2], argv[2::2]))
        if set(opts) - {"--clcnn", "--data", "--work"}:
            sys.stderr.write(USAGE % ((argv[0],) * 3))
            return 2
        data = opts.get("--data", "/usr/share/datasets/fashion-mnist")
        if "--work" in opts:
            os.makedirs(opts["--work"], exist_ok=True)
            rc = crosscheck(opts["--clcnn"], data, opts["--work"])
        else:
            with tempfile.TemporaryDirectory() as work:
                rc = crosscheck(opts["--clcnn"], data, work)
    elif len(argv) != 1:
        sys.stderr.write(USAGE % ((argv[0],) * 3))
        return 2
    if rc == 77 and not FAILS:
        return 77
    print("%s: %s" % (os.path.basename(argv[0]), "%d failures" % len(FAILS) if FAILS else "ok"))
    return 1 if FAILS or rc else 0


if __name__ == "__main__":
    torch.manual_seed(0)
    sys.exit(main(sys.argv))
