"""PyTorch equivalents of clcnn model specs.

`build(spec, in_channels, height, width)` returns the module equivalent to clcnn's model of a
spec (docs/MODEL_SPEC.md) or preset name on in_channels x height x width inputs. It does not
parse the spec: clcnn does (`clcnn_train --model SPEC --graph-json`, the library's
`clcnn_spec_graph_json`), and the module is built from that graph. Every layer is a module at
its module path, so the state_dict names are clcnn's tensor names (`0.weight`, `3.0.weight`
inside a res block, `layer1.0.conv1.weight` where the spec names its layers). Default
initialisations are PyTorch's, drawn in the spec's order, as in clcnn.

| spec (aliases)                           | module                                        |
|------------------------------------------|-----------------------------------------------|
| conv(OUT,K[,S[,P]], bias=0/1) (conv2d)   | nn.Conv2d(in, OUT, K, stride=S, padding=P)    |
| maxpool(K[,S[,P]]) (maxpool2d, mp)       | nn.MaxPool2d(K, S, P)                         |
| avgpool(K[,S[,P]]) (avgpool2d, ap)       | nn.AvgPool2d(K, S, P), count_include_pad=True |
| globalavgpool / globalmaxpool            | nn.AdaptiveAvgPool2d(1) / AdaptiveMaxPool2d(1)|
| relu / gelu                              | nn.ReLU() / nn.GELU()                         |
| leakyrelu[(SLOPE)]                       | nn.LeakyReLU(SLOPE), default 0.01             |
| bn(eps=E, momentum=M) (batchnorm, ...)   | nn.BatchNorm2d(C) on C x H x W, 1d on flat    |
| dropout[(P)]                             | nn.Dropout(P)                                 |
| scale(S) (mul with a number)             | Scale(S): x * S                               |
| flatten                                  | nn.Flatten()                                  |
| linear(OUT, bias=0/1) (fc)               | nn.Linear(in, OUT, bias=..)                   |
| res( BODY [| SHORTCUT] ) (residual)      | Residual: x + body(x), shortcut(x) + body(x)  |
| add / cat / mul (@values)                | x + a + ..., torch.cat([...], 1), x * a       |

Loading a clcnn checkpoint: clcnn writes its weights as safetensors whose tensor names are
exactly these state_dict names, so

    import safetensors.torch, clcnn_torch
    model = clcnn_torch.build("seed", 3, 32, 32)
    model.load_state_dict(safetensors.torch.load_file("model/epoch_10.safetensors"), strict=True)

loads it. The sibling `epoch_10.state.safetensors` holds the optimizer state, not weights.

clcnn_train is found as $CLCNN_TRAIN, else build/clcnn_train next to this folder, else on
PATH; `build(..., clcnn_train=PATH)` names it. Command line: `python3 clcnn_torch.py SPEC C H
W` prints the module, its output shape and its parameter count.

Only torch and the standard library are used (torch >= 1.13).
"""
import json
import os
import shutil
import subprocess
import sys

import torch
import torch.nn as nn

__all__ = ["Graph", "Residual", "Scale", "SpecError", "build", "graph", "output_shape"]


class SpecError(ValueError):
    """A bad model spec (clcnn's one-line message), or one whose shapes do not work out."""


class _Container(nn.Module):
    """A module path's inner module: its children in order, by name (m[3] is child "3")."""

    def __getitem__(self, key):
        return self._modules[str(key)]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class Residual(_Container):
    """A res block: its children are the body's layers, then the shortcut's. The sum is the
    graph's (Graph.forward)."""


class Scale(nn.Module):
    """clcnn's scale(S): y = x * S, no parameters."""

    def __init__(self, s):
        super().__init__()
        self.s = float(s)

    def forward(self, x):
        return x * self.s

    def extra_repr(self):
        return repr(self.s)


def _find_clcnn(clcnn_train):
    if clcnn_train:
        return clcnn_train
    if os.environ.get("CLCNN_TRAIN"):
        return os.environ["CLCNN_TRAIN"]
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "clcnn_train")
    if os.access(here, os.X_OK):
        return here
    found = shutil.which("clcnn_train")
    if not found:
        raise RuntimeError("clcnn_torch needs clcnn_train to read a spec: set CLCNN_TRAIN")
    return found


def graph(spec, clcnn_train=None):
    """clcnn's graph of `spec` (a preset name or spec text): {"spec": canonical text, "layers":
    [{"index", "kind", "torch", "path", "inputs", "args", and for res "body", "shortcut"}]}.
    Raises SpecError with clcnn's message on a bad spec."""
    if not isinstance(spec, str):
        raise SpecError("model spec must be a string, got %s" % type(spec).__name__)
    out = subprocess.run([_find_clcnn(clcnn_train), "--model", spec, "--graph-json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True)
    if out.returncode != 0:
        msg = out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "rc %d" % (
            out.returncode)
        raise SpecError(msg.replace("clcnn_train: --model: ", "", 1))
    return json.loads(out.stdout)


def _module(e, x):
    """The module of graph entry e on input tensor x, or None for a layer without one."""
    kind, a = e["kind"], e["args"]
    if kind == "conv":
        return nn.Conv2d(x.shape[1], a["out"], a["kernel"], stride=a["stride"],
                         padding=a["pad"], bias=bool(a["bias"]))
    if kind in ("maxpool", "avgpool"):
        cls = nn.MaxPool2d if kind == "maxpool" else nn.AvgPool2d
        return cls(a["kernel"], a["stride"], a["pad"])
    if kind == "globalavgpool":
        return nn.AdaptiveAvgPool2d(1)
    if kind == "globalmaxpool":
        return nn.AdaptiveMaxPool2d(1)
    if kind == "linear":
        if x.dim() != 2:
            raise SpecError("layer %d (linear) needs flat features: put flatten before it"
                            % e["index"])
        return nn.Linear(x.shape[1], a["out"], bias=bool(a["bias"]))
    if kind == "bn":
        cls = nn.BatchNorm2d if x.dim() == 4 else nn.BatchNorm1d
        return cls(x.shape[1], eps=a["eps"], momentum=a["momentum"])
    simple = {"relu": nn.ReLU, "gelu": nn.GELU, "flatten": nn.Flatten}
    if kind in simple:
        return simple[kind]()
    if kind == "dropout":
        return nn.Dropout(a["p"])
    if kind == "leakyrelu":
        return nn.LeakyReLU(a["slope"])
    if kind == "scale":
        return Scale(a["factor"])
    if kind in ("add", "cat", "mul"):
        return None
    raise SpecError("layer %d: clcnn_torch does not know the layer kind %s" % (e["index"], kind))


class Graph(_Container):
    """clcnn's model as a module: the layers at their module paths, run in the graph's order."""

    def __init__(self, g, in_channels, height, width):
        super().__init__()
        self.spec = g["spec"]
        self._entries = g["layers"]
        self._mods = {}
        # The value each entry makes, and the res blocks whose sums follow an entry.
        self._sums = {}
        for e in self._entries:
            if e["kind"] == "res" and e["body"] + e["shortcut"] > 0:
                last = e["index"] + e["body"] + e["shortcut"]
                self._sums.setdefault(last, []).insert(0, e["index"])
        inner = set()
        for e in self._entries:
            if e["kind"] == "res":
                inner.update(range(e["index"] + 1, e["index"] + 1 + e["body"] + e["shortcut"]))
        top = [e["index"] for e in self._entries if e["index"] not in inner]
        self._out = top[-1]
        # Modules in the spec's order (PyTorch's initialisations draw in that order), shapes
        # from running them on a sample in evaluation mode.
        with torch.no_grad():
            try:
                self._run(torch.zeros(1, in_channels, height, width), build=True)
            except RuntimeError as err:  # shapes that do not work out, in torch's words
                raise SpecError("model spec \"%s\" on %d x %d x %d inputs: %s" % (
                    self.spec, in_channels, height, width, str(err).splitlines()[0])) from None
        self.train()

    def _place(self, path, module):
        parts = path.split(".")
        parent = self
        for p in parts[:-1]:
            if p not in parent._modules:
                parent.add_module(p, _Container())
            parent = parent._modules[p]
        parent.add_module(parts[-1], module)

    def _run(self, x, build=False):
        vals = {-1: x}
        for e in self._entries:
            i, kind = e["index"], e["kind"]
            # a res entry comes before its body: its sum is made after the body's last entry
            ins = [vals[v] for v in e["inputs"]] if kind != "res" else []
            if kind == "res":
                if build:
                    self._place(e["path"], Residual())
            elif kind == "add":
                y = ins[0]
                for t in ins[1:]:
                    y = y + t
                vals[i] = y
            elif kind == "cat":
                vals[i] = torch.cat(ins, 1)
            elif kind == "mul":
                vals[i] = ins[0] * ins[1]
            else:
                if build:
                    m = _module(e, ins[0])
                    m.eval()
                    self._place(e["path"], m)
                    self._mods[i] = m
                vals[i] = self._mods[i](ins[0])
            for r in self._sums.get(i, []):
                re = self._entries[r]
                a = vals[re["inputs"][2] if re["shortcut"] else re["inputs"][0]]
                vals[r] = a + vals[re["inputs"][1]]
        return vals[self._out]

    def forward(self, x):
        return self._run(x)


def build(spec, in_channels, height, width, clcnn_train=None):
    """The module equivalent to clcnn's model for `spec` on in_channels x height x width inputs.
    Raises SpecError (a ValueError) on a bad spec or shapes that do not work out."""
    for name, v in (("in_channels", in_channels), ("height", height), ("width", width)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise SpecError("%s must be a positive integer, got %r" % (name, v))
    return Graph(graph(spec, clcnn_train), in_channels, height, width)


def output_shape(spec, in_channels, height, width, clcnn_train=None):
    """The output shape of one image, (C, H, W) or (F,)."""
    model = build(spec, in_channels, height, width, clcnn_train)
    model.eval()
    with torch.no_grad():
        return tuple(model(torch.zeros(1, in_channels, height, width)).shape[1:])


def _main(argv):
    if len(argv) != 5:
        sys.stderr.write("usage: %s SPEC C H W\n" % argv[0])
        return 2
    try:
        c, h, w = (int(v) for v in argv[2:5])
        model = build(argv[1], c, h, w)
    except ValueError as e:
        sys.stderr.write("%s\n" % e)
        return 1
    model.eval()
    with torch.no_grad():
        y = model(torch.zeros(1, c, h, w))
    print(model)
    print("input %d x %d x %d -> output %s" % (c, h, w, " x ".join(map(str, y.shape[1:]))))
    print("parameters: %d" % sum(p.numel() for p in model.parameters()))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
