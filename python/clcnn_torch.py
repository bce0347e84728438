"""PyTorch equivalents of clcnn model specs.

`build(spec, in_channels, height, width)` parses a clcnn model spec (docs/MODEL_SPEC.md, the
grammar of src/spec.c) or a preset name and returns the equivalent module: a top-level
nn.Sequential in which each spec layer, after N*( ) expansion, is one module at its index, so
the state_dict names are clcnn's tensor names (`0.weight`, `3.0.weight` inside a res block,
`3.1.0.weight` inside a nested one). Default initialisations are PyTorch's, as in clcnn.

| spec (aliases)                           | module                                        |
|------------------------------------------|-----------------------------------------------|
| conv(OUT,K[,S[,P]], bias=0/1) (conv2d)   | nn.Conv2d(in, OUT, K, stride=S, padding=P)    |
| maxpool(K[,S[,P]]) (maxpool2d, mp)       | nn.MaxPool2d(K, S, P)                         |
| avgpool(K[,S[,P]]) (avgpool2d, ap)       | nn.AvgPool2d(K, S, P), count_include_pad=True |
| globalavgpool / globalmaxpool            | nn.AdaptiveAvgPool2d(1) / AdaptiveMaxPool2d(1)|
| relu / gelu                              | nn.ReLU() / nn.GELU()                         |
| bn(eps=E, momentum=M) (batchnorm,        | nn.BatchNorm2d(C) on C x H x W,               |
|   batchnorm2d, batchnorm1d)              | nn.BatchNorm1d(F) on flat features            |
| dropout[(P)], dropout(p=P)               | nn.Dropout(P), P defaults to 0.5              |
| scale(S) (mul)                           | Scale(S): x * S                               |
| flatten                                  | nn.Flatten()                                  |
| linear(OUT, bias=0/1) (fc)               | nn.Linear(in, OUT, bias=..)                   |
| res( LAYERS ) (residual)                 | Residual(LAYERS): x + body(x)                 |

Loading a clcnn checkpoint: clcnn writes its weights as safetensors whose tensor names are
exactly these state_dict names (header metadata aside, the file holds nothing else), so

    import safetensors.torch, clcnn_torch
    model = clcnn_torch.build("seed", 3, 32, 32)
    model.load_state_dict(safetensors.torch.load_file("model/epoch_10.safetensors"), strict=True)

loads it (the file's running_mean, running_var and num_batches_tracked fill the BatchNorm
buffers). The sibling `epoch_10.state.safetensors` holds the optimizer state, not weights.

Command line: `python3 clcnn_torch.py SPEC C H W` prints the module, its output shape and its
parameter count.

Only torch and the standard library are used (torch >= 1.13).
"""
import math
import re
import struct
import sys

import torch
import torch.nn as nn

__all__ = ["GRAPH_PRESETS", "PRESETS", "Residual", "Scale", "SpecError", "build", "output_shape", "parse", "preset"]

# The presets of src/spec.c, name -> text.
PRESETS = {
    "seed": "conv(32,5,pad=2) maxpool(2) conv(32,5,pad=2) maxpool(2) conv(64,5,pad=2) "
            "maxpool(2) flatten linear(64) linear(10)",
    "seed-relu": "conv(32,5,pad=2) relu maxpool(2) conv(32,5,pad=2) relu maxpool(2) "
                 "conv(64,5,pad=2) relu maxpool(2) flatten linear(64) relu linear(10)",
    "resnet": "conv(16,3,pad=1,bias=0) bn relu conv(32,3,pad=1,bias=0) bn relu maxpool(2) "
              "res(conv(32,3,pad=1,bias=0) bn relu conv(32,3,pad=1,bias=0) bn relu) "
              "conv(64,3,pad=1,bias=0) bn relu maxpool(2) conv(128,3,pad=1,bias=0) bn relu "
              "maxpool(2) res(conv(128,3,pad=1,bias=0) bn relu conv(128,3,pad=1,bias=0) bn "
              "relu) globalmaxpool flatten linear(10,bias=0) scale(0.125)",
}

# The presets of src/spec.c in the graph form, which this module does not build; the module of
# each is the torchvision model named.
GRAPH_PRESETS = {"resnet18": "torchvision.models.resnet18(num_classes=10)"}

MAX_LAYERS = 256  # layers after expanding repetitions, res blocks and their bodies included
MAX_REPEAT = 64
MAX_DEPTH = 8  # nesting of groups: repetitions and res blocks
MAX_LEN = 65536

# Integer slots: name -> (min, max), as src/spec.c.
_INT_SLOTS = {"out": (1, 65536), "kernel": (1, 64), "stride": (1, 64), "pad": (0, 64),
              "bias": (0, 1)}


class SpecError(ValueError):
    """A bad model spec, or a spec whose shapes do not work out for the input."""


class Residual(nn.Sequential):
    """clcnn's res( ... ): y = x + body(x)."""

    def forward(self, x):
        return x + super().forward(x)


class Scale(nn.Module):
    """clcnn's scale(S): y = x * S, no parameters."""

    def __init__(self, s):
        super().__init__()
        self.s = float(s)

    def forward(self, x):
        return x * self.s

    def extra_repr(self):
        return repr(self.s)


# Layer syntax: canonical name -> aliases, positional slots, required count, keywords (keyword ->
# slot). Slots in _INT_SLOTS take integers, the others floats.
_WINDOW = dict(pos=("kernel", "stride", "pad"), nreq=1,
               kw={"stride": "stride", "pad": "pad", "padding": "pad"})
_SYNTAX = {
    "conv": dict(aliases=("conv2d",), pos=("out", "kernel", "stride", "pad"), nreq=2,
                 kw={"stride": "stride", "pad": "pad", "padding": "pad", "bias": "bias"}),
    "maxpool": dict(aliases=("maxpool2d", "mp"), **_WINDOW),
    "avgpool": dict(aliases=("avgpool2d", "ap"), **_WINDOW),
    "relu": dict(aliases=(), pos=(), nreq=0, kw={}),
    "gelu": dict(aliases=(), pos=(), nreq=0, kw={}),
    "flatten": dict(aliases=(), pos=(), nreq=0, kw={}),
    "linear": dict(aliases=("fc",), pos=("out",), nreq=1, kw={"bias": "bias"}),
    "bn": dict(aliases=("batchnorm", "batchnorm2d", "batchnorm1d"), pos=(), nreq=0,
               kw={"eps": "eps", "momentum": "momentum"}),
    "dropout": dict(aliases=(), pos=("p",), nreq=0, kw={"p": "p"}),
    "scale": dict(aliases=("mul",), pos=("factor",), nreq=1, kw={}),
    "globalavgpool": dict(aliases=(), pos=(), nreq=0, kw={}),
    "globalmaxpool": dict(aliases=(), pos=(), nreq=0, kw={}),
    "res": dict(aliases=("residual",)),  # res( LAYERS ): its parentheses hold a layer list
}
_KINDS = {}
for _name, _syn in _SYNTAX.items():
    _KINDS[_name] = _name
    for _alias in _syn["aliases"]:
        _KINDS[_alias] = _name

_SPACE = " \t\n\r\v\f"
_FLOAT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\Z")
_FLT_MAX = 3.4028234663852886e38  # float's largest finite value
_FLT_MIN = 1.1754943508222875e-38  # float's smallest normal value


def preset(name):
    """The text of the preset `name` (case-insensitive), or None."""
    return PRESETS.get(name.lower()) if name.isascii() else None


class _Parser:
    def __init__(self, text):
        self.s = text
        self.i = 0
        self.depth = 0
        self.count = 0  # layers so far, res blocks and bodies included

    # -- text helpers --
    def fail(self, at, what):
        s = self.s
        frm, end = 0, len(s)
        if len(s) > 160:
            frm = max(0, min(at - 80, len(s) - 160))
            end = frm + 160
        quote = "".join(" " if c in _SPACE else c if " " <= c <= "~" else "?" for c in s[frm:end])
        raise SpecError('model spec, column %d: %s (in "%s%s%s")' % (
            at + 1, what, "..." if frm > 0 else "", quote, "..." if end < len(s) else ""))

    def cur(self):
        return self.s[self.i] if self.i < len(self.s) else ""

    def skip_ws(self):
        start = self.i
        while self.i < len(self.s) and self.s[self.i] in _SPACE:
            self.i += 1
        return self.i - start

    def word_end(self, at):
        while at < len(self.s) and self.s[at] not in _SPACE + ",()=":
            at += 1
        return at

    def describe(self, at):
        return "end of spec" if at >= len(self.s) else "'%s'" % self.s[at]

    @staticmethod
    def token(w):
        return "'%s'" % (w if len(w) <= 24 else w[:24] + "...")

    # -- numbers --
    def read_int(self, what, lo, hi, at, end):
        w = self.s[at:end]
        flag = (lo, hi) == (0, 1)
        expects = "0 or 1" if flag else "a non-negative integer"
        if not w:
            self.fail(at, "%s expects %s, got %s" % (what, expects, self.describe(at)))
        if not (w.isascii() and w.isdigit()) or (flag and int(w) > 1):
            self.fail(at, "%s expects %s, got %s" % (what, expects, self.token(w)))
        # Saturates as src/spec.c does (and keeps int() off huge digit strings).
        v = int(w) if len(w.lstrip("0")) <= 9 else 10 ** 9
        if v > hi:
            self.fail(at, "%s %s is too large (at most %d)" % (what, self.token(w), hi))
        if v < lo:
            self.fail(at, "%s must be in %d..%d, got %d" % (what, lo, hi, v))
        return v

    def read_float(self, kind, what, at, end):
        w = self.s[at:end]
        if not _FLOAT.match(w):  # any length, as src/spec.c reads the whole token
            self.fail(at, "%s expects a number, got %s"
                      % (what, self.token(w) if w else self.describe(at)))
        v = float(w)
        rule = None
        if not math.isfinite(v):
            rule = "a finite number"
        elif what in ("p", "momentum") and not 0 <= v <= 1:
            rule = "in [0, 1]"
        elif what == "eps" and not v > 0:
            rule = "greater than 0"
        if rule:
            self.fail(at, "%s must be %s, got %s" % (what, rule, self.token(w)))
        # The float rule of src/spec.c: clcnn's kernels take the value as a float.
        if abs(v) >= _FLT_MAX + 2.0 ** 103:  # rounds to infinity as a float
            self.fail(at, "%s %s %s is too large for float (the largest magnitude is %.9g)"
                      % (kind, what, self.token(w), _FLT_MAX))
        if v != 0 and abs(struct.unpack("f", struct.pack("f", v))[0]) < _FLT_MIN:
            self.fail(at, "%s %s %s is too small for float (a non-zero magnitude must be at "
                      "least %.9g, the smallest normal float)"
                      % (kind, what, self.token(w), _FLT_MIN))
        return v

    # -- grammar --
    def parse_list(self, open_at, empty=""):
        """Layers up to the end (open_at None) or the ')' closing the '(' at open_at; `empty`
        is the message for a group with nothing in it."""
        out = []
        sep, comma, comma_at = False, False, 0
        self.skip_ws()
        while True:
            c = self.cur()
            end = self.i >= len(self.s)
            if end or c == ")":
                if comma:
                    self.fail(comma_at, "expected a layer after ','")
                if end and open_at is not None:
                    self.fail(self.i, "missing ')' to close the group opened at column %d"
                              % (open_at + 1))
                if not end and open_at is None:
                    self.fail(self.i, "unexpected ')' with no group open")
                if not out:
                    if open_at is None:
                        self.fail(0, "empty spec, expected at least one layer")
                    self.fail(open_at, empty)
                if not end:
                    self.i += 1
                return out
            if out and not sep:
                self.fail(self.i, "expected ',' or whitespace between layers, got %s"
                          % self.describe(self.i))
            if c.isascii() and c.isdigit():
                out += self.parse_repeat()
            elif c not in _SPACE + ",()=":
                out.append(self.parse_layer())
            else:
                self.fail(self.i, "expected a layer name, got %s" % self.describe(self.i))
            sep = self.skip_ws() > 0
            comma = self.cur() == ","
            if comma:
                comma_at = self.i
                self.i += 1
                sep = True
                self.skip_ws()

    def parse_repeat(self):
        start = self.i
        while self.i < len(self.s) and self.s[self.i].isascii() and self.s[self.i].isdigit():
            self.i += 1
        digits_end = self.i
        self.skip_ws()
        if self.cur() != "*":
            self.fail(self.i, "expected '*' after the repeat count (a repetition is "
                      "N*( layers )), got %s" % self.describe(self.i))
        self.i += 1
        self.skip_ws()
        if self.cur() != "(":
            self.fail(self.i, "expected '(' after '*' (a repetition is N*( layers )), got %s"
                      % self.describe(self.i))
        count = self.read_int("repeat count", 1, MAX_REPEAT, start, digits_end)
        if self.depth >= MAX_DEPTH:
            self.fail(self.i, "groups nest deeper than %d" % MAX_DEPTH)
        open_at = self.i
        self.i += 1
        before = self.count
        self.depth += 1
        group = self.parse_list(open_at, "empty repetition group")
        self.depth -= 1
        glen = self.count - before
        for _ in range(count - 1):
            if self.count + glen > MAX_LAYERS:
                self.fail(start, "more than %d layers after expanding repetitions" % MAX_LAYERS)
            self.count += glen
        return [_copy(d) for _ in range(count) for d in group]

    def add_layer(self, at):
        if self.count >= MAX_LAYERS:
            self.fail(at, "more than %d layers" % MAX_LAYERS)
        self.count += 1

    def parse_layer(self):
        start = self.i
        end = self.word_end(start)
        word = self.s[start:end]
        kind = _KINDS.get(word.lower()) if word.isascii() else None
        if kind is None:
            if preset(word) is not None:
                self.fail(start, "unknown layer %s (a preset name must be the whole spec)"
                          % self.token(word))
            names = list(_SYNTAX)
            self.fail(start, "unknown layer %s (expected %s or %s)"
                      % (self.token(word), ", ".join(names[:-1]), names[-1]))
        self.i = end
        self.skip_ws()
        if kind == "res":
            self.add_layer(start)
            if self.cur() != "(":
                self.fail(self.i, "expected '(' after res (a residual block is res( layers )), "
                          "got %s" % self.describe(self.i))
            if self.depth >= MAX_DEPTH:
                self.fail(start, "groups nest deeper than %d" % MAX_DEPTH)
            open_at = self.i
            self.i += 1
            self.depth += 1
            body = self.parse_list(open_at, "empty res block")
            self.depth -= 1
            return {"kind": "res", "pos": start, "body": body}
        args = {}
        if self.cur() == "(":
            args = self.parse_args(kind)
        else:
            self.i = end
        syn = _SYNTAX[kind]
        npos = sum(1 for s in syn["pos"] if args.get(s, (None, None, "kw"))[2] == "pos")
        if npos < syn["nreq"]:
            need = syn["nreq"]
            self.fail(start, "%s needs %s%d positional argument%s (%s), got %d" % (
                kind, "at least " if len(syn["pos"]) > need else "", need,
                "" if need == 1 else "s", ", ".join(syn["pos"][:need]), npos))
        self.add_layer(start)
        return self.finish(kind, start, {k: v[0] for k, v in args.items()},
                           {k: v[1] for k, v in args.items()})

    def parse_args(self, kind):
        syn = _SYNTAX[kind]
        open_at = self.i
        self.i += 1
        self.skip_ws()
        args = {}  # slot -> (value, column, "pos" | "kw")
        if self.cur() == ")":
            self.i += 1
            return args
        if not syn["pos"] and not syn["kw"]:
            self.fail(self.i, "%s takes no arguments" % kind)
        seen_kw = False
        npos = 0
        while True:
            self.skip_ws()
            at = self.i
            end = self.word_end(at)
            self.i = end
            self.skip_ws()
            if self.cur() == "=":
                if end == at:
                    self.fail(self.i, "expected a keyword name before '='")
                if not syn["kw"]:
                    self.fail(at, "%s takes no keyword arguments, got %s"
                              % (kind, self.token(self.s[at:end])))
                key = self.s[at:end].lower()
                slot = syn["kw"].get(key)
                if slot is None:
                    self.fail(at, "%s has no keyword %s (it takes %s)" % (
                        kind, self.token(self.s[at:end]), ", ".join(syn["kw"]) or "none"))
                if slot in args:
                    self.fail(at, "%s given twice" % slot if args[slot][2] == "kw" else
                              "%s given both positionally and by keyword" % slot)
                self.i += 1
                self.skip_ws()
                at = self.i
                end = self.word_end(at)
                self.i = end
                seen_kw = True
                how = "kw"
            else:
                if end == at:
                    self.fail(at, "expected an argument, got %s" % self.describe(at))
                if seen_kw:
                    self.fail(at, "positional argument after keyword arguments")
                if not syn["pos"]:
                    self.fail(at, "%s takes no positional arguments (keywords: %s)"
                              % (kind, ", ".join(syn["kw"])))
                if npos >= len(syn["pos"]):
                    n = len(syn["pos"])
                    self.fail(at, "%s takes at most %d positional argument%s (%s)" % (
                        kind, n, "" if n == 1 else "s", ", ".join(syn["pos"])))
                slot = syn["pos"][npos]
                npos += 1
                how = "pos"
            if slot in _INT_SLOTS:
                val = self.read_int(slot, *_INT_SLOTS[slot], at, end)
            else:
                val = self.read_float(kind, slot, at, end)
            args[slot] = (val, at, how)
            self.skip_ws()
            if self.i >= len(self.s):
                self.fail(self.i, "missing ')' to close the arguments of %s opened at column %d"
                          % (kind, open_at + 1))
            if self.cur() == ")":
                self.i += 1
                return args
            if self.cur() != ",":
                self.fail(self.i, "expected ',' or ')' in the arguments of %s, got %s"
                          % (kind, self.describe(self.i)))
            self.i += 1

    def finish(self, kind, at, a, col):
        d = {"kind": kind, "pos": at}
        if kind == "conv":
            d.update(out=a["out"], kernel=a["kernel"], stride=a.get("stride", 1),
                     pad=a.get("pad", 0), bias=a.get("bias", 1))
        elif kind in ("maxpool", "avgpool"):
            k = a["kernel"]
            d.update(kernel=k, stride=a.get("stride", k), pad=a.get("pad", 0))
            if d["pad"] > k // 2:
                self.fail(col["pad"], "%s pad %d is more than half the kernel %d (PyTorch "
                          "requires pad <= kernel/2)" % (kind, d["pad"], k))
        elif kind == "linear":
            d.update(out=a["out"], bias=a.get("bias", 1))
        elif kind == "bn":
            d.update(eps=a.get("eps", 1e-5), momentum=a.get("momentum", 0.1))
        elif kind == "dropout":
            d.update(p=a.get("p", 0.5))
        elif kind == "scale":
            d.update(factor=a["factor"])
        return d


def _copy(d):
    d = dict(d)
    if "body" in d:
        d["body"] = [_copy(b) for b in d["body"]]
    return d


def parse(spec):
    """The layer list of `spec` (a preset name or spec text): a list of dicts with "kind",
    "pos" (0-based column) and the layer's arguments; a res dict holds its "body" list.
    Raises SpecError (a ValueError) on a bad spec."""
    if not isinstance(spec, str):
        raise SpecError("model spec must be a string, got %s" % type(spec).__name__)
    if len(spec.encode("utf-8", "surrogatepass")) > MAX_LEN:
        raise SpecError("model spec, column %d: longer than %d bytes" % (MAX_LEN + 1, MAX_LEN))
    text = preset(spec.strip(_SPACE))
    p = _Parser(text if text is not None else spec)
    return p.parse_list(None)


def _shape_str(shape):
    return " x ".join(str(v) for v in shape) if len(shape) == 3 else "%d flat features" % shape[0]


def _module(d, shape, spec):
    """The module for layer d on an input of `shape` ((C, H, W) or (F,)), and its output shape."""
    kind = d["kind"]
    where = "layer %s at column %d" % (kind, d["pos"] + 1)

    def fail(msg):
        raise SpecError('model spec "%s": %s: %s' % (spec if len(spec) <= 160 else
                                                     spec[:157] + "...", where, msg))

    def need_chw():
        if len(shape) != 3:
            fail("needs a C x H x W input but gets %d flat features" % shape[0])

    def window(k, s, p):
        need_chw()
        c, h, w = shape
        if h + 2 * p < k or w + 2 * p < k:
            fail("kernel %d is larger than its %d x %d input padded by %d" % (k, h, w, p))
        return (c, (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1)

    if kind == "conv":
        out = window(d["kernel"], d["stride"], d["pad"])
        return (nn.Conv2d(shape[0], d["out"], d["kernel"], stride=d["stride"], padding=d["pad"],
                          bias=bool(d["bias"])), (d["out"],) + out[1:])
    if kind == "maxpool":
        out = window(d["kernel"], d["stride"], d["pad"])
        return nn.MaxPool2d(d["kernel"], d["stride"], d["pad"]), out
    if kind == "avgpool":
        out = window(d["kernel"], d["stride"], d["pad"])
        return nn.AvgPool2d(d["kernel"], d["stride"], d["pad"]), out
    if kind in ("globalavgpool", "globalmaxpool"):
        need_chw()
        m = nn.AdaptiveAvgPool2d(1) if kind == "globalavgpool" else nn.AdaptiveMaxPool2d(1)
        return m, (shape[0], 1, 1)
    if kind == "relu":
        return nn.ReLU(), shape
    if kind == "gelu":
        return nn.GELU(), shape
    if kind == "flatten":
        return nn.Flatten(), (math.prod(shape),)
    if kind == "linear":
        if len(shape) != 1:
            fail("needs a flat input but gets %s: put flatten before it" % _shape_str(shape))
        return nn.Linear(shape[0], d["out"], bias=bool(d["bias"])), (d["out"],)
    if kind == "bn":
        cls = nn.BatchNorm2d if len(shape) == 3 else nn.BatchNorm1d
        return cls(shape[0], eps=d["eps"], momentum=d["momentum"]), shape
    if kind == "dropout":
        return nn.Dropout(d["p"]), shape
    if kind == "scale":
        return Scale(d["factor"]), shape
    if kind == "res":
        mods, out = _modules(d["body"], shape, spec)
        if out != shape:
            fail("the body's output (%s) must have the shape of the block's input (%s)"
                 % (_shape_str(out), _shape_str(shape)))
        return Residual(*mods), shape
    raise AssertionError(kind)


def _modules(layers, shape, spec):
    mods = []
    for d in layers:
        m, shape = _module(d, shape, spec)
        mods.append(m)
    return mods, shape


def build(spec, in_channels, height, width):
    """The nn.Sequential equivalent to clcnn's model for `spec` on in_channels x height x width
    inputs. Raises SpecError (a ValueError) on a bad spec or shapes that do not work out."""
    for name, v in (("in_channels", in_channels), ("height", height), ("width", width)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise SpecError("%s must be a positive integer, got %r" % (name, v))
    layers = parse(spec)
    text = preset(spec.strip(_SPACE)) or spec
    mods, _ = _modules(layers, (in_channels, height, width), text)
    return nn.Sequential(*mods)


def output_shape(spec, in_channels, height, width):
    """The output shape of one image, (C, H, W) or (F,), without building modules' weights."""
    model = build(spec, in_channels, height, width)
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
