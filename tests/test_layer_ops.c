/* One table for every layer, after ggml's tests/test-backend-ops.cpp: each row (a layer spec,
 * an input shape, a batch, whether the input gradient is wanted) runs on every visible device,
 * every GEMM backend and every combination of algorithms its node can take (the rows of its
 * layer's table that apply, clcnn_node_algos, each forced through clcnn_node_plan), against
 * the double-precision references of tests/ref/. A row of
 * two layers is a fused node (a convolution that absorbed the MaxPool2d(2) after it, or a
 * BatchNorm the ReLU after it), checked against the two references in turn. A row of a node
 * that reads several values (add, cat, mul) gives each input's shape, and may leave some
 * input gradients unwanted (NULL to the node, as the model passes for an input that needs
 * none); y and every wanted gradient are checked. Every device buffer a pass writes or may
 * read as scratch starts as NaN, so an element a pass forgets to write shows.
 *
 * Tolerance: fp32 device results against double references. Each output is a sum of up to
 * R = C*K*K (or batch*pixels for weight gradients, a few thousand) products of values O(1);
 * fp32 rounding gives a relative error around sqrt(R) * 6e-8 in the typical case and R * 6e-8
 * in the worst. We allow 2e-5 of the tensor's largest magnitude (plus 1e-6 absolute), which
 * covers R up to ~300 worst case and ~1e5 typical, and is far below any indexing mistake (those
 * give errors of the order of the values themselves). A NaN must be where the reference has
 * one; a pool's argmax must match exactly. The nodes of several inputs sit well inside the
 * same bound: cat and the gradients of add are copies (exact), add rounds once per input after
 * the first (R <= 2 here), mul once per product, and a gate's gradient sums R = H*W (<= 30
 * here) products of O(1).
 *
 * The implicit-GEMM algorithms (implicit, wgrad-implicit, flip-implicit) share no buffer with
 * the others, so they run as one combination, every pass implicit, rather than in every mix;
 * that combination runs in every size of the implicit kernels (CLCNN_IMPLICIT_SIZE's: 64, 32,
 * 64x128 and 64w8).
 *
 * Usage: test_layer_ops [--perf] [--implicit[=SIZES]] [--first-backend]
 *                       [SUBSTRING[|SUBSTRING...]]
 *   --perf      also time each combination's forward and backward (GFLOP/s)
 *   --implicit  only the all-implicit combinations, on the first backend (for oclgrind: their
 *               work-groups and local memory, interpreted, are slow); =SIZES: only those
 *               sizes, a comma list (64,32,64x128,64w8)
 *   --first-backend  every combination, on the first backend only (cpu): for oclgrind runs of
 *               kernels that take no GEMM, which the other backends would run again
 *   SUBSTRING   only the rows whose spec contains one of them
 * Exits 1 on any failure, 77 when no device is visible. */
#include <stdarg.h>
#include <stdint.h>

#include "layers/layer.h"
#include "loss.h"
#include "plan.h"
#include "ref/ref.h"
#include "rng.h"
#include "spec.h"
#include "testutil.h"

/* How a row's input is drawn. */
enum {
    IN_RANDOM,  /* uniform in (-1, 1) */
    IN_TIES,    /* a 0.25 grid over [-2, 2]: many pool windows hold equal maxima */
    IN_ZERO,    /* zeros: a fused pool sees four equal values (the bias) in every window */
    IN_SPECIAL, /* random, with every 7th element 0 and every 13th NaN */
};

typedef struct lo_case {
    const char *spec; /* one layer, or a conv and the maxpool(2) it absorbs */
    int c, h, w;      /* per-sample input; h = w = 0: c flat features */
    int N, gx;        /* batch; whether the input gradient is wanted */
    int input;        /* IN_* */
    int chunk;        /* conv: scratch for this many images only, as for a batch too large for it */
    int eval;         /* 1: evaluation mode (forward only); 0: a training step */
} lo_case;

static const lo_case cases[] = {
    {"conv(5,3,stride=2,pad=1)", 3, 7, 9, 2, 1, IN_RANDOM, 0, 0}, /* odd, non-square, stride 2 */
    {"conv(5,3,stride=2,pad=1)", 3, 7, 9, 2, 0, IN_RANDOM, 0, 0}, /* the first layer: no gx */
    {"conv(2,5,pad=2)", 1, 5, 5, 1, 1, IN_RANDOM, 0, 0},          /* batch 1, pad 2 ("same") */
    {"conv(3,1,bias=0)", 2, 6, 4, 3, 1, IN_RANDOM, 0, 0},         /* 1x1 kernel, no bias */
    {"conv(6,3)", 4, 8, 8, 2, 1, IN_RANDOM, 0, 0},                /* pad 0 */
    {"conv(4,4,stride=3,pad=2)", 3, 9, 7, 5, 1, IN_RANDOM, 0, 0}, /* even kernel, stride 3 */
    {"conv(2,3,stride=3,pad=1)", 1, 8, 11, 1, 1, IN_RANDOM, 0, 0},
    {"conv(4,3,stride=2,pad=2)", 2, 6, 5, 3, 1, IN_RANDOM, 0, 0},
    {"conv(3,3,pad=3)", 2, 5, 6, 2, 1, IN_RANDOM, 0, 0},    /* pad > K-1: col2im is the only gx */
    {"conv(4,2,pad=2)", 3, 4, 5, 3, 1, IN_RANDOM, 0, 0},    /* pad > K-1, even kernel */
    {"conv(8,5,pad=2)", 3, 12, 10, 7, 1, IN_RANDOM, 0, 0},  /* an odd batch of 7 */
    {"conv(4,5,pad=2)", 5, 5, 9, 2, 1, IN_RANDOM, 0, 0},    /* direct: 2 of 3 tiles an item */
    {"conv(3,5,pad=2)", 3, 7, 7, 2, 1, IN_RANDOM, 0, 0},    /* Winograd's 4 x 4 tiles, 7 wide */
    {"conv(3,5,pad=2)", 2, 9, 11, 1, 1, IN_RANDOM, 0, 0},   /* and its 8 x 2, on 9 x 11 */
    {"conv(8,5,pad=2)", 3, 12, 10, 7, 1, IN_RANDOM, 2, 0},  /* the same in chunks of images */
    {"conv(3,3,stride=2)", 2, 5, 7, 3, 1, IN_RANDOM, 2, 0}, /* chunked, stride 2 */
    {"conv(32,5,pad=2)", 3, 11, 13, 2, 1, IN_RANDOM, 0, 0}, /* OC 32: full 8x32 CPU GEMM tiles */
    {"conv(8,3,pad=1)", 3, 37, 40, 5, 1, IN_RANDOM, 0, 0},  /* 7400 pixels: split-K weight grad */
    {"conv(6,3,pad=1)", 5, 8, 8, 3, 1, IN_RANDOM, 0, 0},    /* 8-wide maps: two rows per vector */
    {"conv(5,3,pad=1)", 4, 9, 8, 2, 1, IN_RANDOM, 0, 0},    /* 8 wide, odd height */
    {"conv(9,3,pad=1)", 3, 6, 8, 2, 1, IN_RANDOM, 0, 0},
    {"conv(12,3,pad=1)", 5, 7, 7, 3, 1, IN_RANDOM, 0, 0},  /* 7 wide: 8-lane rows, 1 unstored */
    {"conv(20,3,pad=1)", 4, 5, 27, 2, 1, IN_RANDOM, 0, 0}, /* 27 wide: 1 x 28 lanes tiles */
    {"conv(20,3,pad=1)", 3, 2, 28, 2, 1, IN_RANDOM, 0, 0}, /* whole 1 x 28 tiles, 4 channels over */
    {"conv(17,3,pad=1)", 3, 4, 14, 2, 1, IN_RANDOM, 0, 0}, /* whole 2 x 14 tiles, 1 channel over */
    {"conv(16,3,pad=1)", 2, 8, 7, 2, 1, IN_RANDOM, 0, 0},  /* whole 4 x 7 tiles */
    {"conv(20,5,pad=2)", 8, 9, 10, 2, 1, IN_RANDOM, 0, 0}, /* 200 taps: row-GEMM weight grad */
    {"conv(40,5,pad=2,bias=0)", 6, 8, 8, 3, 1, IN_RANDOM, 0, 0},    /* two 32-channel tiles */
    {"conv(33,5,pad=2)", 6, 40, 40, 3, 1, IN_RANDOM, 0, 0},         /* row GEMM in 3 batch slices */
    {"conv(128,3,pad=1,bias=0)", 128, 3, 3, 6, 1, IN_RANDOM, 0, 0}, /* resnet's last block */
    {"conv(24,3,pad=1,bias=0)", 16, 3, 3, 5, 1, IN_RANDOM, 0, 0},
    {"bn", 128, 3, 3, 32, 1, IN_RANDOM, 0, 0}, /* resnet's last stage: 288 values a channel */
    {"globalmaxpool", 128, 3, 3, 32, 1, IN_RANDOM, 0, 0},
    {"maxpool(2)", 64, 7, 7, 8, 1, IN_RANDOM, 0, 0},
    /* conv + MaxPool2d(2), fused: the pool in the convolution's store */
    {"conv(8,3,pad=1) maxpool(2)", 3, 8, 8, 3, 1, IN_RANDOM, 0, 0},
    {"conv(8,3,pad=1) maxpool(2)", 3, 8, 8, 3, 0, IN_RANDOM, 0, 0},
    {"conv(5,3,pad=1) maxpool(2)", 2, 7, 9, 1, 1, IN_RANDOM, 0, 0}, /* odd: the last row drops */
    {"conv(6,3) maxpool(2)", 4, 8, 8, 2, 1, IN_RANDOM, 0, 0},
    {"conv(6,3,pad=1) maxpool(2)", 5, 8, 8, 3, 1, IN_RANDOM, 0, 0}, /* 8 wide */
    {"conv(9,3,pad=1) maxpool(2)", 3, 6, 8, 2, 1, IN_RANDOM, 0, 0}, /* 3 pooled rows */
    {"conv(9,3,pad=1) maxpool(2)", 3, 6, 8, 2, 1, IN_ZERO, 0, 0},   /* four-way ties everywhere */
    {"conv(8,5,pad=2) maxpool(2)", 3, 12, 10, 7, 1, IN_ZERO, 0, 0},
    {"conv(20,5,pad=2) maxpool(2)", 8, 9, 10, 2, 0, IN_RANDOM, 0, 0},
    {"conv(40,5,pad=2,bias=0) maxpool(2)", 6, 8, 8, 3, 1, IN_RANDOM, 0, 0},
    {"conv(33,5,pad=2) maxpool(2)", 6, 12, 12, 3, 1, IN_RANDOM, 0, 0},
    /* Winograd's limits, small enough for oclgrind: 33 input channels (two blocks of 32), 64
     * outputs (its most), and the input gradient the other way round; an odd 17 x 18 map (9
     * tiles a row: a second work-item column of one tile; the last tile row half) */
    {"conv(64,5,pad=2) maxpool(2)", 33, 4, 4, 1, 1, IN_RANDOM, 0, 0},
    {"conv(17,5,pad=2) maxpool(2)", 2, 17, 18, 1, 1, IN_RANDOM, 0, 0},
    /* the fused pool's padded NCHW gradient: 9 windows a row (eight at once, one alone) and an
     * odd last row and column; 16 windows (two vectors) with four-way ties */
    {"conv(3,3,pad=1) maxpool(2)", 2, 7, 19, 2, 1, IN_RANDOM, 0, 0},
    {"conv(4,5,pad=2) maxpool(2)", 2, 6, 32, 2, 1, IN_ZERO, 0, 0},
    /* maxpool: overlapping windows, ties, padding, gaps, the 2x2 fast path */
    {"maxpool(3,stride=2)", 3, 7, 9, 2, 1, IN_TIES, 0, 0},
    {"maxpool(3,stride=2)", 3, 7, 9, 2, 1, IN_RANDOM, 0, 0},
    {"maxpool(2)", 2, 8, 8, 1, 1, IN_RANDOM, 0, 0},
    {"maxpool(2)", 3, 9, 7, 2, 1, IN_TIES, 0, 0},     /* 2x2: odd sizes */
    {"maxpool(2)", 2, 7, 37, 2, 1, IN_TIES, 0, 0},    /* 2x2: 18 windows a row (vectors + tail) */
    {"maxpool(2)", 3, 6, 14, 2, 1, IN_TIES, 0, 0},    /* 2x2: 7 windows, two overlapping fours */
    {"maxpool(2)", 2, 5, 11, 2, 1, IN_SPECIAL, 0, 0}, /* 2x2: NaN, infinities, 5 windows */
    {"maxpool(2)", 2, 4, 33, 2, 1, IN_SPECIAL, 0, 0}, /* 2x2: NaN, 16 windows, odd width */
    {"maxpool(3,stride=2,pad=1)", 2, 5, 7, 3, 1, IN_TIES, 0, 0},
    {"maxpool(3,stride=2,pad=1)", 2, 5, 7, 3, 1, IN_SPECIAL, 0, 0}, /* NaN: the last one wins */
    {"maxpool(2,stride=1)", 1, 6, 5, 2, 1, IN_TIES, 0, 0},
    {"maxpool(1)", 1, 1, 1, 1, 1, IN_RANDOM, 0, 0},
    {"maxpool(2,stride=3)", 2, 9, 10, 2, 1, IN_TIES, 0, 0}, /* stride > K: gaps */
    {"maxpool(3,stride=3,pad=1)", 1, 7, 7, 2, 1, IN_TIES, 0, 0},
    /* relu: exact zeros (no gradient) and NaN (passes through, with its gradient) */
    {"relu", 7, 11, 13, 1, 1, IN_SPECIAL, 0, 0},
    {"relu", 3, 5, 4, 3, 1, IN_RANDOM, 0, 0},
    /* flatten: a view of its input */
    {"flatten", 3, 4, 5, 2, 1, IN_RANDOM, 0, 0},
    {"flatten", 3, 4, 5, 1, 0, IN_RANDOM, 0, 0},
    /* linear */
    {"linear(4)", 7, 0, 0, 3, 1, IN_RANDOM, 0, 0},
    {"linear(1)", 5, 0, 0, 1, 1, IN_RANDOM, 0, 0},
    {"linear(10)", 33, 0, 0, 65, 1, IN_RANDOM, 0, 0},
    {"linear(33)", 40, 0, 0, 70, 1, IN_RANDOM, 0, 0},
    {"linear(4,bias=0)", 7, 0, 0, 3, 1, IN_RANDOM, 0, 0},
    {"linear(10,bias=0)", 33, 0, 0, 65, 0, IN_RANDOM, 0, 0},
    /* leakyrelu: the default slope, exact zeros (gy * slope) and NaN; a negative slope; a
     * slope above 1; flat input */
    {"leakyrelu", 7, 11, 13, 1, 1, IN_SPECIAL, 0, 0},
    {"leakyrelu(-0.3)", 3, 5, 4, 3, 1, IN_RANDOM, 0, 0},
    {"leakyrelu(negative_slope=2.5)", 10, 0, 0, 4, 1, IN_TIES, 0, 0},
    /* gelu: NaN passes through; flat input */
    {"gelu", 3, 5, 7, 2, 1, IN_SPECIAL, 0, 0},
    {"gelu", 10, 0, 0, 4, 1, IN_RANDOM, 0, 0},
    /* dropout: the mask from the node's seed; evaluation is the identity; p = 0 and p = 1 */
    {"dropout(0.3)", 4, 6, 5, 3, 1, IN_RANDOM, 0, 0},
    {"dropout(0.3)", 4, 6, 5, 3, 1, IN_RANDOM, 0, 1},
    {"dropout", 12, 0, 0, 5, 1, IN_SPECIAL, 0, 0},
    {"dropout(0)", 3, 4, 4, 2, 1, IN_RANDOM, 0, 0},
    {"dropout(1)", 3, 4, 4, 2, 1, IN_RANDOM, 0, 0},
    /* scale */
    {"scale(0.125)", 3, 5, 4, 2, 1, IN_SPECIAL, 0, 0},
    {"scale(-2.5)", 9, 0, 0, 3, 1, IN_RANDOM, 0, 0},
    /* avgpool: overlapping windows, padding (count_include_pad), gaps, odd sizes, 1x1 */
    {"avgpool(3,stride=2)", 3, 7, 9, 2, 1, IN_RANDOM, 0, 0},
    {"avgpool(2)", 2, 9, 7, 3, 1, IN_RANDOM, 0, 0}, /* odd: the last row and column drop */
    {"avgpool(2)", 2, 8, 8, 1, 0, IN_RANDOM, 0, 0},
    {"avgpool(3,stride=2,pad=1)", 2, 5, 7, 3, 1, IN_RANDOM, 0, 0},
    {"avgpool(3,stride=2,pad=1)", 2, 5, 7, 3, 1, IN_SPECIAL, 0, 0},
    {"avgpool(4,stride=3,pad=2)", 3, 9, 6, 2, 1, IN_RANDOM, 0, 0},
    {"avgpool(2,stride=1)", 1, 6, 5, 2, 1, IN_RANDOM, 0, 0},
    {"avgpool(2,stride=3)", 2, 9, 10, 2, 1, IN_RANDOM, 0, 0}, /* stride > K: gaps */
    {"avgpool(1)", 1, 1, 1, 1, 1, IN_RANDOM, 0, 0},
    {"avgpool(3,stride=3,pad=1)", 4, 7, 7, 2, 1, IN_RANDOM, 0, 1},
    /* globalavgpool, globalmaxpool: planes of odd sizes (vectors and tails), 1x1, ties, NaNs */
    {"globalavgpool", 3, 7, 7, 2, 1, IN_RANDOM, 0, 0},
    {"globalavgpool", 5, 9, 11, 3, 1, IN_SPECIAL, 0, 0},
    {"globalavgpool", 4, 4, 4, 1, 0, IN_RANDOM, 0, 0},
    {"globalavgpool", 7, 1, 1, 1, 1, IN_RANDOM, 0, 0},
    {"globalavgpool", 6, 28, 28, 2, 1, IN_RANDOM, 0, 0},
    {"globalmaxpool", 3, 7, 7, 2, 1, IN_RANDOM, 0, 0},
    {"globalmaxpool", 5, 9, 11, 3, 1, IN_TIES, 0, 0},
    {"globalmaxpool", 16, 5, 5, 2, 1, IN_ZERO, 0, 0},    /* all equal: index 0 */
    {"globalmaxpool", 6, 8, 8, 2, 1, IN_SPECIAL, 0, 0},  /* NaN: the last one wins */
    {"globalmaxpool", 13, 3, 2, 3, 1, IN_SPECIAL, 0, 0}, /* tails only, NaNs */
    {"globalmaxpool", 4, 4, 4, 1, 0, IN_TIES, 0, 0},
    {"globalmaxpool", 7, 1, 1, 1, 1, IN_RANDOM, 0, 0},
    {"globalmaxpool", 3, 28, 28, 2, 1, IN_TIES, 0, 1},
    /* bn: BatchNorm2d (odd sizes, batch 1, chunks of several samples with a short last one)
     * and BatchNorm1d; evaluation; other eps and momentum */
    {"bn", 4, 6, 5, 5, 1, IN_RANDOM, 0, 0},    /* 3 samples a chunk: 3 + 2 */
    {"bn", 3, 7, 9, 1, 1, IN_RANDOM, 0, 0},    /* batch 1 */
    {"bn", 3, 4, 4, 7, 1, IN_RANDOM, 0, 0},    /* 4 samples a chunk: 4 + 3 */
    {"bn", 5, 37, 41, 3, 1, IN_RANDOM, 0, 0},  /* planes of 1517 */
    {"bn", 16, 14, 14, 8, 1, IN_RANDOM, 0, 0}, /* a ResNet stage, scaled down */
    {"bn", 4, 6, 5, 3, 0, IN_RANDOM, 0, 0},    /* the first layer: no gx */
    {"bn", 4, 6, 5, 3, 1, IN_RANDOM, 0, 1},    /* evaluation: the running statistics */
    {"bn", 7, 0, 0, 5, 1, IN_RANDOM, 0, 0},    /* BatchNorm1d */
    {"bn", 33, 0, 0, 2, 0, IN_RANDOM, 0, 0},   /* two values a channel: gx is ~0 (cancels) */
    {"bn", 3, 0, 0, 150, 1, IN_RANDOM, 0, 0},  /* 64 samples a chunk: 64 + 64 + 22 */
    {"bn", 6, 0, 0, 1, 1, IN_RANDOM, 0, 1},    /* evaluation takes a batch of 1 */
    {"bn(eps=0.001,momentum=0.01)", 5, 3, 3, 4, 1, IN_RANDOM, 0, 0},
    {"bn(eps=0.5,momentum=1)", 9, 0, 0, 3, 1, IN_RANDOM, 0, 0},
    {"bn(eps=0.5,momentum=1)", 4, 6, 5, 3, 1, IN_RANDOM, 0, 1},
    /* bn relu, fused: relu(bn(x)) in the store, gy masked by that output in the backward */
    {"bn relu", 4, 6, 5, 5, 1, IN_RANDOM, 0, 0},
    {"bn relu", 16, 14, 14, 8, 1, IN_RANDOM, 0, 0},
    {"bn relu", 4, 6, 5, 3, 0, IN_RANDOM, 0, 0},
    {"bn relu", 4, 6, 5, 3, 1, IN_RANDOM, 0, 1},
    {"bn relu", 7, 0, 0, 5, 1, IN_RANDOM, 0, 0},
    {"bn(eps=0.5,momentum=1) relu", 5, 3, 3, 4, 1, IN_RANDOM, 0, 0},
};

/* Rows run as one share of a data-parallel step: the batch starts at sample0 of the step's
 * global batch, and random draws are keyed by the global element index. 35791394 samples of
 * 120 elements are 2^32 - 16 elements: the share's indices cross 2^32 (a 32-bit index would
 * wrap there and repeat the first share's masks); 2^31 - 1 samples put the whole share far
 * past it. */
static const struct {
    lo_case c;
    int sample0;
} shares[] = {
    {{"dropout(0.3)", 4, 6, 5, 3, 1, IN_RANDOM, 0, 0}, 35791394},
    {{"dropout", 12, 0, 0, 5, 1, IN_RANDOM, 0, 0}, 2147483647},
    {{"dropout(0.3)", 4, 6, 5, 3, 1, IN_RANDOM, 0, 0}, 1000},
};

/* The most inputs a row's node reads. */
enum { LO_MAX_IN = 3 };

/* Rows of nodes that read several values (add, cat, mul): input 0 is the row's c, h, w, the
 * others follow. The spec names the model's input (@input) for each; only its kind and the
 * count of values matter, as the node takes its inputs' shapes from the row. */
typedef struct lo_graph {
    lo_case c;
    int more[LO_MAX_IN - 1][3]; /* inputs 1, 2: c, h, w (h = w = 0: flat); c = 0 ends them */
    unsigned skip_gx;           /* bit k: input k's gradient is not wanted (gx[k] NULL) */
} lo_graph;

static const lo_graph graphs[] = {
    /* add: two and three inputs (the third added to the first sum), NaNs with one gradient
     * not wanted, flat, no gradient wanted */
    {{"add(@input,@input)", 3, 5, 7, 2, 1, IN_RANDOM, 0, 0}, {{3, 5, 7}}, 0},
    {{"add(@input,@input,@input)", 4, 3, 5, 3, 1, IN_RANDOM, 0, 0}, {{4, 3, 5}, {4, 3, 5}}, 0},
    {{"add(@input,@input,@input)", 2, 4, 3, 2, 1, IN_SPECIAL, 0, 0}, {{2, 4, 3}, {2, 4, 3}}, 2},
    {{"add(@input,@input)", 10, 0, 0, 3, 1, IN_RANDOM, 0, 0}, {{10, 0, 0}}, 0},
    {{"add(@input,@input)", 3, 5, 7, 2, 0, IN_RANDOM, 0, 0}, {{3, 5, 7}}, 0},
    /* cat: channel counts that differ, three inputs, flat; the first gradient not wanted (the
     * slices after it keep their offsets) */
    {{"cat(@input,@input)", 2, 4, 5, 2, 1, IN_RANDOM, 0, 0}, {{3, 4, 5}}, 0},
    {{"cat(@input,@input,@input)", 1, 3, 3, 3, 1, IN_SPECIAL, 0, 0}, {{4, 3, 3}, {2, 3, 3}}, 0},
    {{"cat(@input,@input,@input)", 3, 2, 5, 2, 1, IN_RANDOM, 0, 0}, {{1, 2, 5}, {2, 2, 5}}, 1},
    {{"cat(@input,@input)", 5, 0, 0, 3, 1, IN_RANDOM, 0, 0}, {{7, 0, 0}}, 0},
    /* mul: one shape (maps, flat), a C x 1 x 1 gate second and first, NaNs (planes of 6, so
     * that some of the gate's gradients are free of them), each gradient not wanted in turn */
    {{"mul(@input,@input)", 3, 4, 5, 2, 1, IN_RANDOM, 0, 0}, {{3, 4, 5}}, 0},
    {{"mul(@input,@input)", 6, 0, 0, 3, 1, IN_RANDOM, 0, 0}, {{6, 0, 0}}, 0},
    {{"mul(@input,@input)", 4, 5, 6, 2, 1, IN_RANDOM, 0, 0}, {{4, 1, 1}}, 0},
    {{"mul(@input,@input)", 4, 1, 1, 3, 1, IN_RANDOM, 0, 0}, {{4, 5, 6}}, 0},
    {{"mul(@input,@input)", 5, 2, 3, 2, 1, IN_SPECIAL, 0, 0}, {{5, 1, 1}}, 0},
    {{"mul(@input,@input)", 4, 5, 6, 2, 1, IN_RANDOM, 0, 0}, {{4, 1, 1}}, 1},
    {{"mul(@input,@input)", 4, 5, 6, 2, 1, IN_RANDOM, 0, 0}, {{4, 1, 1}}, 2},
    {{"mul(@input,@input)", 4, 1, 1, 2, 1, IN_RANDOM, 0, 0}, {{4, 5, 6}}, 1},
    {{"mul(@input,@input)", 4, 1, 1, 2, 1, IN_RANDOM, 0, 0}, {{4, 5, 6}}, 2},
};

/* The GEMM backends every row runs with. */
static const struct {
    clcnn_backend b;
    const char *name;
} backends[] = {
    {CLCNN_BACKEND_CPU, "cpu"},
    {CLCNN_BACKEND_OPENCL, "opencl"},
    {CLCNN_BACKEND_CLBLAST, "clblast"},
    {CLCNN_BACKEND_GPU, "gpu"},
};

enum { MAX_CTX = 64, PERF_REPEATS = 5, PAD_PARAM = 5 };

typedef struct lo_ctx {
    clcnn_context *ctx;
    char name[48]; /* "d0 cpu" */
} lo_ctx;

/* A row made ready: its node (planned per context later), the inputs as the device gets them
 * and the reference results. */
typedef struct lo_host {
    clcnn_node n;    /* unplanned; a fused row's convolution */
    cl_uint seed;    /* the node's random stream (dropout) */
    int sample0;     /* the batch's first sample within the step's global batch (dropout) */
    clcnn_node next; /* a fused row's pool, which n absorbs once planned */
    int fused;
    clcnn_param par[8];
    clcnn_params pl;
    char label[128];
    int n_in;                  /* inputs the node reads */
    unsigned skip_gx;          /* bit k: gx[k] not wanted (NULL in the node's io) */
    size_t nx[LO_MAX_IN], ny;  /* floats of a batch's inputs and output */
    float *x[LO_MAX_IN];       /* the inputs */
    float *p, *gy;             /* p holds the parameters at their offsets */
    double *y, *gx[LO_MAX_IN]; /* reference output and input gradients */
    double *gp;                /* reference parameter gradients, at the parameters' offsets */
    float *st;                 /* running statistics before the forward (NULL: none) */
    double *stref;             /* and after it, as the reference updates them */
    int *am;                   /* the reference argmax of a pool (plain or fused) */
} lo_host;

/* The device buffers of one run. */
typedef struct lo_dev {
    cl_mem x[LO_MAX_IN], gx[LO_MAX_IN];
    cl_mem y, gy, p, g, aux, keep_col, keep_pad, col, rows, xpad, wflip, stats;
} lo_dev;

/* What one run found: the first failure, for its line. */
typedef struct lo_result {
    int ok;
    char why[400];
} lo_result;

static int perf_mode, implicit_only, first_backend;

static void fail(lo_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(lo_result *r, const char *fmt, ...) {
    if (!r->ok) return; /* keep the first */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->why, sizeof r->why, fmt, ap);
    va_end(ap);
    r->ok = 0;
}

static double *to_double(const float *f, size_t n) {
    double *d = malloc((n ? n : 1) * sizeof *d);
    CLCNN_ASSERT(d != NULL);
    for (size_t i = 0; i < n; i++)
        d[i] = f[i];
    return d;
}

static float *draw(clcnn_rng *rng, size_t n, double scale, int how) {
    float *f = malloc((n ? n : 1) * sizeof *f);
    CLCNN_ASSERT(f != NULL);
    for (size_t i = 0; i < n; i++) {
        double u = (2.0 * clcnn_rng_uniform(rng) - 1.0) * scale;
        f[i] = how == IN_ZERO ? 0.0f : how == IN_TIES ? (float)(floor(u * 8.0) / 4.0) : (float)u;
        if (how == IN_SPECIAL && i % 7 == 0) f[i] = 0.0f;
        if (how == IN_SPECIAL && i % 13 == 5) f[i] = NAN;
    }
    return f;
}

/* An integer argument of a layer, by name (its unit's table has it). */
static int argi(const clcnn_layer_desc *d, const char *name) {
    return (int)clcnn_spec_arg(d, name);
}

/* The reference of a convolution node (plain, or with its fused pool), from double copies of
 * the inputs; w and b point into the parameters, gw and gb into h->gp. */
static void ref_conv(lo_host *h, const lo_case *c, const double *x, const double *w,
                     const double *b, const double *gy, double *gw, double *gb) {
    const clcnn_conv2d_shape *s = &h->n.conv;
    const clcnn_layer_desc *p = &h->next.d;
    double *gx = c->gx ? h->gx[0] : NULL;
    if (!h->fused) {
        clcnn_ref_conv2d_forward(h->y, x, w, b, c->N, s->C, s->H, s->W, s->OC, s->K, s->stride,
                                 s->pad);
        clcnn_ref_conv2d_backward(gx, gw, gb, gy, x, w, c->N, s->C, s->H, s->W, s->OC, s->K,
                                  s->stride, s->pad);
        return;
    }
    size_t ny = (size_t)c->N * s->OC * s->OH * s->OW;
    double *yc = calloc(ny, sizeof *yc), *gyc = calloc(ny, sizeof *gyc);
    CLCNN_ASSERT(yc && gyc);
    clcnn_ref_conv2d_forward(yc, x, w, b, c->N, s->C, s->H, s->W, s->OC, s->K, s->stride, s->pad);
    clcnn_ref_maxpool2d_forward(h->y, h->am, yc, c->N, s->OC, s->OH, s->OW, argi(p, "kernel"),
                                argi(p, "stride"), argi(p, "pad"));
    clcnn_ref_maxpool2d_backward(gyc, gy, h->am, c->N, s->OC, s->OH, s->OW, argi(p, "kernel"),
                                 argi(p, "stride"), argi(p, "pad"));
    clcnn_ref_conv2d_backward(gx, gw, gb, gyc, x, w, c->N, s->C, s->H, s->W, s->OC, s->K, s->stride,
                              s->pad);
    free(yc), free(gyc);
}

/* The reference of a BatchNorm node (plain, or with its fused ReLU: relu(bn(x)) forward, gy
 * through ReLU's backward first); rm/rv, the running statistics, are h->stref. */
static void ref_bn(lo_host *h, const lo_case *c, const double *x, const double *w, const double *b,
                   const double *gy, double *gx, double *gw, double *gb) {
    const clcnn_node *n = &h->n;
    const clcnn_layer_desc *d = &n->d;
    int N = c->N, C = n->x.c, hw = n->x.h * n->x.w, size = N * C * hw;
    double *rm = h->stref + h->par[n->param0 + 2].off, *rv = rm + C;
    double *gyb = h->fused ? calloc((size_t)size, sizeof *gyb) : (double *)gy;
    CLCNN_ASSERT(gyb);
    if (c->eval)
        clcnn_ref_bn_forward_eval(h->y, x, w, b, rm, rv, N, C, hw, clcnn_spec_arg(d, "eps"));
    else
        clcnn_ref_bn_forward_train(h->y, rm, rv, x, w, b, N, C, hw, clcnn_spec_arg(d, "eps"),
                                   clcnn_spec_arg(d, "momentum"));
    if (h->fused) {
        clcnn_ref_relu_forward(h->y, h->y, size);
        clcnn_ref_relu_backward(gyb, gy, h->y, size);
    }
    clcnn_ref_bn_backward(gx, gw, gb, gyb, x, w, N, C, hw, clcnn_spec_arg(d, "eps"));
    if (h->fused) free(gyb);
}

/* The reference of a node of several inputs (add, cat, mul), from double copies xs of the
 * inputs; gx[k] NULL where input k's gradient is not wanted. */
static void ref_graph(lo_host *h, const lo_case *c, const double *const *xs, const double *gy,
                      double *const *gx) {
    const clcnn_node *n = &h->n;
    int N = c->N, plane = n->y.c * n->y.h * n->y.w, c_in[LO_MAX_IN];
    switch (n->d.kind) {
    case CLCNN_LAYER_ADD:
        clcnn_ref_add_forward(h->y, xs, h->n_in, N * plane);
        clcnn_ref_add_backward(gx, gy, h->n_in, N * plane);
        break;
    case CLCNN_LAYER_CAT:
        for (int k = 0; k < h->n_in; k++)
            c_in[k] = n->xs[k].c;
        clcnn_ref_cat_forward(h->y, xs, c_in, h->n_in, N, n->y.h * n->y.w);
        clcnn_ref_cat_backward(gx, gy, c_in, h->n_in, N, n->y.h * n->y.w);
        break;
    case CLCNN_LAYER_MUL: { /* each factor has the output's H*W values a plane, or one (a gate) */
        int hwa = n->xs[0].h * n->xs[0].w, hwb = n->xs[1].h * n->xs[1].w;
        clcnn_ref_mul_forward(h->y, xs[0], xs[1], N, n->y.c, hwa, hwb);
        clcnn_ref_mul_backward(gx[0], gx[1], gy, xs[0], xs[1], N, n->y.c, hwa, hwb);
        break;
    }
    default: CLCNN_ASSERT(0 && "a row of several inputs is add, cat or mul (host_node)");
    }
}

/* Whether row c wants input k's gradient. */
static int gx_wanted(const lo_host *h, const lo_case *c, int k) {
    return c->gx && !(h->skip_gx >> k & 1u);
}

/* h->y, h->am, h->gx and h->gp from h->x, h->p and h->gy. */
static void reference(lo_host *h, const lo_case *c) {
    const clcnn_node *n = &h->n;
    const clcnn_layer_desc *d = &n->d;
    double *xk[LO_MAX_IN], *gxk[LO_MAX_IN];
    const double *xs[LO_MAX_IN];
    for (int k = 0; k < h->n_in; k++) {
        xs[k] = xk[k] = to_double(h->x[k], h->nx[k]);
        gxk[k] = gx_wanted(h, c, k) ? h->gx[k] : NULL;
    }
    double *x = xk[0], *p = to_double(h->p, h->pl.total);
    double *gy = to_double(h->gy, h->ny), *gx = gxk[0];
    size_t woff = n->n_params > 0 ? h->par[n->param0].off : 0;
    size_t boff = n->n_params > 1 ? h->par[n->param0 + 1].off : 0;
    double *w = p + woff, *b = n->n_params > 1 ? p + boff : NULL;
    double *gw = h->gp + woff, *gb = n->n_params > 1 ? h->gp + boff : NULL;
    int N = c->N, plane = n->x.c * n->x.h * n->x.w;
    switch (d->kind) {
    case CLCNN_LAYER_CONV2D: ref_conv(h, c, x, w, b, gy, gw, gb); break;
    case CLCNN_LAYER_MAXPOOL2D:
        clcnn_ref_maxpool2d_forward(h->y, h->am, x, N, n->x.c, n->x.h, n->x.w, argi(d, "kernel"),
                                    argi(d, "stride"), argi(d, "pad"));
        clcnn_ref_maxpool2d_backward(h->gx[0], gy, h->am, N, n->x.c, n->x.h, n->x.w,
                                     argi(d, "kernel"), argi(d, "stride"), argi(d, "pad"));
        break;
    case CLCNN_LAYER_RELU:
        clcnn_ref_relu_forward(h->y, x, N * plane);
        clcnn_ref_relu_backward(h->gx[0], gy, h->y, N * plane);
        break;
    case CLCNN_LAYER_FLATTEN: /* the identity both ways */
        memcpy(h->y, x, h->nx[0] * sizeof *x);
        if (gx) memcpy(gx, gy, h->ny * sizeof *gy);
        break;
    case CLCNN_LAYER_LINEAR:
        clcnn_ref_linear_forward(h->y, x, w, b, N, n->x.c, n->y.c);
        clcnn_ref_linear_backward(gx, gw, gb, gy, x, w, N, n->x.c, n->y.c);
        break;
    case CLCNN_LAYER_LEAKYRELU:
        clcnn_ref_leakyrelu_forward(h->y, x, N * plane, clcnn_spec_arg(d, "slope"));
        clcnn_ref_leakyrelu_backward(h->gx[0], gy, x, N * plane, clcnn_spec_arg(d, "slope"));
        break;
    case CLCNN_LAYER_GELU:
        clcnn_ref_gelu_forward(h->y, x, N * plane);
        clcnn_ref_gelu_backward(h->gx[0], gy, x, N * plane);
        break;
    case CLCNN_LAYER_DROPOUT: /* evaluation: the identity */
        clcnn_ref_dropout(h->y, x, N * plane, h->seed, (uint64_t)h->sample0 * (uint64_t)plane,
                          c->eval ? 0.0 : clcnn_spec_arg(d, "p"));
        clcnn_ref_dropout(h->gx[0], gy, N * plane, h->seed, (uint64_t)h->sample0 * (uint64_t)plane,
                          c->eval ? 0.0 : clcnn_spec_arg(d, "p"));
        break;
    case CLCNN_LAYER_SCALE:
        clcnn_ref_scale(h->y, x, N * plane, clcnn_spec_arg(d, "factor"));
        clcnn_ref_scale(h->gx[0], gy, N * plane, clcnn_spec_arg(d, "factor"));
        break;
    case CLCNN_LAYER_RES: break; /* a group: tested in whole models (test_model) */
    case CLCNN_LAYER_ADD:
    case CLCNN_LAYER_CAT:
    case CLCNN_LAYER_MUL: ref_graph(h, c, xs, gy, gxk); break;
    case CLCNN_LAYER_BATCHNORM: /* the running statistics are h->stref, moved in training */
        ref_bn(h, c, x, w, b, gy, gx, gw, gb);
        break;
    case CLCNN_LAYER_AVGPOOL2D:
        clcnn_ref_avgpool2d_forward(h->y, x, N, n->x.c, n->x.h, n->x.w, argi(d, "kernel"),
                                    argi(d, "stride"), argi(d, "pad"));
        clcnn_ref_avgpool2d_backward(h->gx[0], gy, N, n->x.c, n->x.h, n->x.w, argi(d, "kernel"),
                                     argi(d, "stride"), argi(d, "pad"));
        break;
    case CLCNN_LAYER_GLOBALAVGPOOL:
        clcnn_ref_globalavgpool_forward(h->y, x, N * n->x.c, n->x.h * n->x.w);
        clcnn_ref_globalavgpool_backward(h->gx[0], gy, N * n->x.c, n->x.h * n->x.w);
        break;
    case CLCNN_LAYER_GLOBALMAXPOOL:
        clcnn_ref_globalmaxpool_forward(h->y, h->am, x, N * n->x.c, n->x.h * n->x.w);
        clcnn_ref_globalmaxpool_backward(h->gx[0], gy, h->am, N * n->x.c, n->x.h * n->x.w);
        break;
    }
    for (int k = 0; k < h->n_in; k++)
        free(xk[k]);
    free(p), free(gy);
}

/* The per-sample shape of a row's c, h, w (h = 0: c flat features). */
static clcnn_shape row_shape(int c, int h, int w) {
    return (clcnn_shape){c, h ? h : 1, w ? w : 1, h == 0};
}

/* Parses the row's spec into a node on its inputs (the row's, and those of g when it is a row
 * of several; two layers: the convolution and, in h->next, the pool it is to absorb), after a
 * PAD_PARAM-float parameter that puts the node's own at non-zero offsets. Returns 0 with a
 * message in *e on failure. */
static int host_node(lo_host *h, const lo_case *c, const lo_graph *g, clcnn_error *e) {
    clcnn_layer_desc *d = NULL;
    int nd = 0, ok = 0;
    clcnn_shape x[LO_MAX_IN] = {row_shape(c->c, c->h, c->w)};
    int64_t pad[1] = {PAD_PARAM};
    h->n_in = 1;
    for (int k = 0; g && k < LO_MAX_IN - 1 && g->more[k][0]; k++)
        x[h->n_in++] = row_shape(g->more[k][0], g->more[k][1], g->more[k][2]);
    h->pl = (clcnn_params){h->par, 0, (int)(sizeof h->par / sizeof h->par[0]), 0, 0};
    clcnn_params_add(&h->pl, "99", "pad", CLCNN_PARAM_WEIGHT, 1, pad);
    if (clcnn_spec_parse(c->spec, &d, &nd, e)) return 0;
    if (nd > 2 || (nd == 2 && d[0].kind != CLCNN_LAYER_CONV2D &&
                   !(d[0].kind == CLCNN_LAYER_BATCHNORM && d[1].kind == CLCNN_LAYER_RELU))) {
        snprintf(e->msg, sizeof e->msg, "a row is one layer, a conv and its pool or bn relu");
        goto done;
    }
    if (d[0].n_in != h->n_in ||
        (h->n_in > 1) != (d[0].kind == CLCNN_LAYER_ADD || d[0].kind == CLCNN_LAYER_CAT ||
                          d[0].kind == CLCNN_LAYER_MUL)) {
        snprintf(e->msg, sizeof e->msg, "the spec reads %d values, the row gives %d inputs",
                 d[0].n_in, h->n_in);
        goto done;
    }
    if (clcnn_node_init(&h->n, &d[0], 0, NULL, x, h->n_in, &h->pl, e)) goto done;
    if (nd == 2 && clcnn_node_init(&h->next, &d[1], 1, NULL, &h->n.y, 1, &h->pl, e)) goto done;
    h->n.need_gx = c->gx;
    h->fused = nd == 2;
    ok = 1;
done:
    free(d);
    return ok;
}

static void host_free(lo_host *h) {
    for (int k = 0; k < h->n_in; k++)
        free(h->x[k]), free(h->gx[k]);
    free(h->p), free(h->gy), free(h->y), free(h->gp), free(h->am);
    free(h->st), free(h->stref);
}

/* "3x4x5" or "7" (flat), with a leading ',' after the first input, appended to buf. */
static void shape_label(char *buf, size_t size, const clcnn_shape *s, int first) {
    size_t l = strlen(buf);
    if (s->flat)
        snprintf(buf + l, size - l, "%s%d", first ? "" : ",", s->c);
    else
        snprintf(buf + l, size - l, "%s%dx%dx%d", first ? "" : ",", s->c, s->h, s->w);
}

/* Builds row `index` (a row of several inputs when g is not NULL): its node, inputs (seeded by
 * the index) and reference results, for a batch that starts at sample0 of the step's global
 * batch. */
static int host_init(lo_host *h, const lo_case *c, const lo_graph *g, int index, int sample0) {
    static const char *const inputs[] = {"", " ties", " zeros", " 0s+NaNs"};
    clcnn_error e = {{0}, CLCNN_SUCCESS};
    clcnn_rng rng;
    char shape[64] = "";
    memset(h, 0, sizeof *h);
    h->sample0 = sample0;
    h->skip_gx = g ? g->skip_gx : 0;
    if (!host_node(h, c, g, &e)) return printf("FAIL %s: %s\n", c->spec, e.msg), 0;
    const clcnn_shape *y = h->fused ? &h->next.y : &h->n.y;
    h->ny = (size_t)c->N * y->c * y->h * y->w;
    clcnn_rng_seed(&rng, 1000 + (uint64_t)index);
    for (int k = 0; k < h->n_in; k++) {
        const clcnn_shape *xs = &h->n.xs[k];
        h->nx[k] = (size_t)c->N * xs->c * xs->h * xs->w;
        h->x[k] = draw(&rng, h->nx[k], 1.0, c->input);
        h->gx[k] = calloc(h->nx[k] + 1, sizeof *h->gx[k]);
        CLCNN_ASSERT(h->gx[k]);
        shape_label(shape, sizeof shape, xs, k == 0);
    }
    h->p = draw(&rng, h->pl.total, 0.5, IN_RANDOM);
    for (int i = 0; i < PAD_PARAM; i++)
        h->p[i] = 1e30f; /* not the node's: read by mistake, it shows */
    h->gy = draw(&rng, h->ny, 1.0, IN_RANDOM);
    h->seed = (cl_uint)(0x9E3779B9u * (unsigned)(index + 1));
    if (h->pl.stats) { /* positive, as a variance must be */
        h->st = draw(&rng, h->pl.stats, 0.5, IN_RANDOM);
        for (size_t i = 0; i < h->pl.stats; i++)
            h->st[i] += 0.75f;
        h->stref = to_double(h->st, h->pl.stats);
    }
    h->y = calloc(h->ny + 1, sizeof *h->y);
    h->gp = calloc(h->pl.total + 1, sizeof *h->gp);
    h->am = calloc(h->ny + 1, sizeof *h->am);
    CLCNN_ASSERT(h->y && h->gp && h->am);
    reference(h, c);
    snprintf(h->label, sizeof h->label, "%s %s N%d%s%s%s", c->spec, shape, c->N,
             c->gx ? "" : " no-gx", inputs[c->input], c->eval ? " eval" : "");
    for (int k = 0; k < h->n_in; k++)
        if (c->gx && !gx_wanted(h, c, k)) {
            size_t l = strlen(h->label);
            snprintf(h->label + l, sizeof h->label - l, " no-gx%d", k);
        }
    if (c->chunk) {
        size_t l = strlen(h->label);
        snprintf(h->label + l, sizeof h->label - l, " chunk%d", c->chunk);
    }
    if (sample0) {
        size_t l = strlen(h->label);
        snprintf(h->label + l, sizeof h->label - l, " sample0=%d", sample0);
    }
    return 1;
}

/* A device buffer of n elements of `size` bytes: a copy of src, or NaN throughout (src NULL).
 * NULL when n is 0. */
static cl_mem dev_buf(clcnn_context *ctx, size_t n, size_t size, const void *src, lo_result *r) {
    cl_int rc;
    float nan = NAN;
    if (n == 0) return NULL;
    cl_mem m = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE | (src ? CL_MEM_COPY_HOST_PTR : 0),
                              n * size, (void *)src, &rc);
    if (rc != CL_SUCCESS) {
        fail(r, "allocating %zu bytes: %s", n * size, clcnn_cl_error_name(rc));
        return NULL;
    }
    if (!src) rc = clEnqueueFillBuffer(ctx->queue, m, &nan, sizeof nan, 0, n * size, 0, NULL, NULL);
    if (rc != CL_SUCCESS) fail(r, "filling a buffer: %s", clcnn_cl_error_name(rc));
    return m;
}

static void dev_free(lo_dev *d) {
    cl_mem *all[] = {&d->y,        &d->gy,  &d->p,    &d->g,    &d->aux,   &d->keep_col,
                     &d->keep_pad, &d->col, &d->rows, &d->xpad, &d->wflip, &d->stats};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (*all[i]) clReleaseMemObject(*all[i]), *all[i] = NULL;
    for (int k = 0; k < LO_MAX_IN; k++) {
        if (d->x[k]) clReleaseMemObject(d->x[k]), d->x[k] = NULL;
        if (d->gx[k]) clReleaseMemObject(d->gx[k]), d->gx[k] = NULL;
    }
}

/* The buffers of a batch under n's plan (ws): every input, gy and the parameters uploaded, the
 * rest NaN; an input gradient only where it is wanted. A view's output and input gradient are
 * its input's buffers, as in the model. The shared im2col and GEMM scratch always exist in the
 * model, so here too. */
static void dev_alloc(clcnn_context *ctx, const lo_host *h, const lo_case *c, const clcnn_node *n,
                      const clcnn_node_ws *ws, lo_dev *d, lo_result *r) {
    int view = (n->algo[CLCNN_PASS_FORWARD]->flags & CLCNN_ALGO_VIEW) != 0;
    for (int k = 0; k < h->n_in; k++)
        d->x[k] = dev_buf(ctx, h->nx[k], 4, h->x[k], r);
    d->gy = dev_buf(ctx, h->ny, 4, h->gy, r);
    d->p = dev_buf(ctx, h->pl.total, 4, h->p, r);
    d->g = dev_buf(ctx, h->pl.total, 4, NULL, r);
    d->y = view ? (clRetainMemObject(d->x[0]), d->x[0]) : dev_buf(ctx, h->ny, 4, NULL, r);
    for (int k = 0; k < h->n_in; k++)
        if (gx_wanted(h, c, k))
            d->gx[k] =
                view ? (clRetainMemObject(d->gy), d->gy) : dev_buf(ctx, h->nx[k], 4, NULL, r);
    d->aux = dev_buf(ctx, ws->aux, sizeof(int), NULL, r);
    d->keep_col = dev_buf(ctx, ws->keep_col, 4, NULL, r);
    d->keep_pad = dev_buf(ctx, ws->keep_pad, 4, NULL, r);
    d->col = dev_buf(ctx, ws->col ? ws->col : 1, 4, NULL, r);
    d->rows = dev_buf(ctx, ws->rows ? ws->rows : 1, 4, NULL, r);
    d->xpad = dev_buf(ctx, ws->xpad, 4, NULL, r);
    d->wflip = dev_buf(ctx, ws->wflip, 4, NULL, r);
    d->stats = dev_buf(ctx, h->pl.stats, 4, h->st, r);
}

/* A row's chunk: the convolution is told that the scratch holds `chunk` images (of itself and
 * of its input-gradient convolution) and that it keeps no im2col matrix, as for a batch too
 * large for them; *alloc grows to hold what it is told. */
static void limit_chunk(const clcnn_node *n, int chunk, clcnn_node_ws *use, clcnn_node_ws *alloc) {
    const clcnn_conv2d_shape *s = &n->conv;
    size_t ohw = (size_t)s->OH * s->OW, hw = (size_t)s->H * s->W, kk = (size_t)s->K * s->K;
    size_t col = ohw * s->C * kk, rows = ohw * s->OC;
    if (hw * s->OC * kk > col) col = hw * s->OC * kk;
    if (hw * s->C > rows) rows = hw * s->C;
    use->keep_col = alloc->keep_col = 0;
    use->col = (size_t)chunk * col, use->rows = (size_t)chunk * rows;
    if (use->col > alloc->col) alloc->col = use->col;
    if (use->rows > alloc->rows) alloc->rows = use->rows;
}

static clcnn_io io_of(clcnn_context *ctx, const lo_host *h, const lo_case *c, const clcnn_node *n,
                      const lo_dev *d, const clcnn_node_ws *use, int N) {
    clcnn_io io = {.ctx = ctx,
                   .col = d->col,
                   .rows = d->rows,
                   .xpad = d->xpad,
                   .wflip = d->wflip,
                   .params = d->p,
                   .grads = d->g,
                   .woff = 0,
                   .boff = -1};
    if (n->n_params > 0) io.woff = (int)h->par[n->param0].off;
    if (n->n_params > 1) io.boff = (int)h->par[n->param0 + 1].off;
    const clcnn_shape *ys = h->fused ? &h->next.y : &n->y;
    for (int k = 0; k < h->n_in; k++) {
        io.x[k] = clcnn_tensor_of(d->x[k], N, &n->xs[k], 0);
        io.gx[k] = clcnn_tensor_of(d->gx[k], N, &n->xs[k], 0);
    }
    io.y = clcnn_tensor_of(d->y, N, ys, 0), io.gy = clcnn_tensor_of(d->gy, N, ys, 0);
    io.aux = d->aux, io.keep_col = d->keep_col, io.keep_pad = d->keep_pad;
    io.ws = *use;
    io.N = N;
    io.training = !c->eval;
    io.seed = h->seed;
    io.sample0 = h->sample0;
    io.stats = d->stats;
    io.soff = -1;
    for (int k = n->param0; k < n->param0 + n->n_params; k++)
        if (h->par[k].kind == CLCNN_PARAM_STAT && io.soff < 0) io.soff = (int)h->par[k].off;
    return io;
}

/* A tensor's name and shape (row-major, at most 4 dimensions), for the messages. */
typedef struct lo_tensor {
    const char *name;
    int nd;
    int64_t dim[4];
} lo_tensor;

/* "y[1,0,3,2]": element i of t by its coordinates. */
static void coords(char *buf, size_t size, const lo_tensor *t, size_t i) {
    int64_t c[4], rest = (int64_t)i;
    for (int d = t->nd - 1; d >= 0; d--)
        c[d] = t->dim[d] ? rest % t->dim[d] : 0, rest = t->dim[d] ? rest / t->dim[d] : 0;
    size_t used = (size_t)snprintf(buf, size, "%s[", t->name);
    for (int d = 0; d < t->nd && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, d ? ",%lld" : "%lld", (long long)c[d]);
    if (used < size) snprintf(buf + used, size - used, "]");
}

/* The n elements of device tensor t from element off of b against ref: each within 2e-5 of
 * ref's largest finite magnitude plus 1e-6, a NaN exactly where ref has one. Records the first
 * wrong element. */
static void compare(clcnn_context *ctx, lo_result *r, const lo_tensor *t, cl_mem b, size_t off,
                    const double *ref, size_t n) {
    const char *what = t->name;
    if (!r->ok || n == 0) return;
    float *f = malloc(n * sizeof *f);
    CLCNN_ASSERT(f != NULL);
    cl_int rc = clEnqueueReadBuffer(ctx->queue, b, CL_TRUE, off * 4, n * 4, f, 0, NULL, NULL);
    if (rc != CL_SUCCESS) {
        fail(r, "reading %s: %s", what, clcnn_cl_error_name(rc));
        free(f);
        return;
    }
    double maxref = 0.0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(ref[i])) maxref = fmax(maxref, fabs(ref[i]));
    double tol = 2e-5 * maxref + 1e-6;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        int wrong = isnan(ref[i]) ? !isnan(f[i]) : !(fabs((double)f[i] - ref[i]) <= tol);
        if (wrong && bad++ == 0) first = i;
    }
    if (bad) {
        char at[96];
        coords(at, sizeof at, t, first);
        fail(r, "%s = %.9g, want %.9g (tolerance %.3g; %zu of %zu elements wrong)", at,
             (double)f[first], ref[first], tol, bad, n);
    }
    free(f);
}

/* A pool's argmax, index for index. */
static void compare_argmax(clcnn_context *ctx, lo_result *r, cl_mem b, const int *ref, size_t n) {
    if (!r->ok) return;
    int *a = malloc(n * sizeof *a);
    CLCNN_ASSERT(a != NULL);
    cl_int rc = clEnqueueReadBuffer(ctx->queue, b, CL_TRUE, 0, n * sizeof *a, a, 0, NULL, NULL);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n && rc == CL_SUCCESS; i++)
        if (a[i] != ref[i] && bad++ == 0) first = i;
    if (rc != CL_SUCCESS) fail(r, "reading the argmax: %s", clcnn_cl_error_name(rc));
    if (bad)
        fail(r, "argmax[%zu] = %d, want %d (%zu of %zu wrong)", first, a[first], ref[first], bad,
             n);
    free(a);
}

/* Forward, then (when the forward matched) backward, each checked against the reference. */
static void run_passes(const clcnn_node *n, const clcnn_io *io, const lo_host *h, const lo_case *c,
                       lo_result *r) {
    clcnn_context *ctx = io->ctx;
    clcnn_status st = n->ops->forward(n, io);
    if (st) fail(r, "forward: %s: %s", clcnn_status_str(st), clcnn_context_errmsg(ctx));
    const clcnn_shape *ys = h->fused ? &h->next.y : &n->y;
    lo_tensor y = {"y", ys->flat ? 2 : 4, {io->N, ys->c, ys->h, ys->w}};
    compare(ctx, r, &y, io->y.buf, 0, h->y, h->ny);
    if (n->d.kind == CLCNN_LAYER_MAXPOOL2D || n->d.kind == CLCNN_LAYER_GLOBALMAXPOOL)
        compare_argmax(ctx, r, io->aux, h->am, h->ny);
    if (h->stref) {
        lo_tensor ts = {"running stats", 1, {(int64_t)h->pl.stats, 0, 0, 0}};
        compare(ctx, r, &ts, io->stats, 0, h->stref, h->pl.stats);
    }
    /* A broken forward (an argmax out of range) must not drive a backward; evaluation has
     * none. */
    if (!r->ok || c->eval) return;
    if ((st = n->ops->backward(n, io)))
        fail(r, "backward: %s: %s", clcnn_status_str(st), clcnn_context_errmsg(ctx));
    for (int i = n->param0; i < n->param0 + n->n_params; i++) {
        const clcnn_param *p = &h->par[i];
        char what[48];
        if (!clcnn_param_trained(p->kind)) continue; /* statistics: checked after the forward */
        lo_tensor g = {what, p->ndim, {p->shape[0], p->shape[1], p->shape[2], p->shape[3]}};
        snprintf(what, sizeof what, "grad %s", strchr(p->name, '.') + 1);
        compare(ctx, r, &g, io->grads, p->off, h->gp + p->off, p->numel);
    }
    for (int k = 0; k < h->n_in; k++) {
        const clcnn_shape *xs = &n->xs[k];
        char what[16];
        lo_tensor x = {what, xs->flat ? 2 : 4, {io->N, xs->c, xs->h, xs->w}};
        if (h->n_in > 1)
            snprintf(what, sizeof what, "gx%d", k);
        else
            snprintf(what, sizeof what, "gx");
        if (gx_wanted(h, c, k)) compare(ctx, r, &x, io->gx[k].buf, 0, h->gx[k], h->nx[k]);
    }
}

/* Seconds per pass (0 forward, 1 backward), after one warm-up run. */
static double time_pass(const clcnn_node *n, const clcnn_io *io, int pass) {
    double t0 = 0.0;
    for (int i = 0; i <= PERF_REPEATS; i++) {
        if (i == 1) clFinish(io->ctx->queue), t0 = clcnn_now_seconds();
        if ((pass ? n->ops->backward(n, io) : n->ops->forward(n, io)) != CLCNN_SUCCESS) return -1.0;
    }
    clFinish(io->ctx->queue);
    return (clcnn_now_seconds() - t0) / PERF_REPEATS;
}

/* " | fwd ... | bwd ...": microseconds per pass and GFLOP/s (a backward does the weight
 * gradient and, when wanted, the input gradient: one or two forwards' work, as the profiler
 * counts it). */
static void perf(const clcnn_node *n, const clcnn_io *io, int gx, char *out, size_t size) {
    double flops[2] = {n->flops * io->N, n->flops * io->N * (gx ? 2 : 1)};
    size_t used = 0;
    for (int pass = 0; pass < 2 && used < size; pass++) {
        double t = time_pass(n, io, pass);
        int k = t < 0 ? snprintf(out + used, size - used, " | %s failed", pass ? "bwd" : "fwd")
                : flops[pass] > 0
                    ? snprintf(out + used, size - used, " | %s %8.1f us %7.2f GFLOP/s",
                               pass ? "bwd" : "fwd", t * 1e6, flops[pass] / t * 1e-9)
                    : snprintf(out + used, size - used, " | %s %8.1f us", pass ? "bwd" : "fwd",
                               t * 1e6);
        used += k > 0 ? (size_t)k : 0;
    }
}

/* Whether a is one of the implicit-GEMM algorithms. */
static int is_implicit(const clcnn_algo *a) {
    return a && (a->flags & CLCNN_ALGO_IMPLICIT_GEMM);
}

/* Whether combination f runs: every pass implicit (where it runs at all and can be: a strided
 * convolution's input gradient cannot, dgrad_can 0), or none; with --implicit only the
 * former. */
static int combo_runs(const clcnn_plan_force *f, int dgrad_can) {
    int some = 0, all = 1;
    for (int p = 0; p < CLCNN_PASS_COUNT; p++) {
        if (!f->algo[p] || (p == CLCNN_PASS_DGRAD && !dgrad_can)) continue;
        some |= is_implicit(f->algo[p]);
        all &= is_implicit(f->algo[p]);
    }
    return implicit_only ? some && all : !some || all;
}

/* One run of node n (planned) on ctx: buffers, passes, checks, and with --perf the timings. */
static void run_one(clcnn_context *ctx, const lo_host *h, const lo_case *c, const clcnn_node *n,
                    lo_result *r, char *perf_out, size_t perf_size) {
    clcnn_node_ws ws = {0}, use;
    lo_dev d = {0};
    clcnn_node_workspace(ctx, n, c->N, &ws);
    use = ws;
    if (c->chunk && n->d.kind == CLCNN_LAYER_CONV2D && n->n_layers == 1)
        limit_chunk(n, c->chunk, &use, &ws);
    dev_alloc(ctx, h, c, n, &ws, &d, r);
    if (r->ok) {
        clcnn_io io = io_of(ctx, h, c, n, &d, &use, c->N);
        run_passes(n, &io, h, c, r);
        if (r->ok && perf_mode) perf(n, &io, c->gx, perf_out, perf_size);
    }
    dev_free(&d);
}

/* A fused row's node on ctx: the convolution planned with its forward forced direct absorbs
 * the pool, as the planner's fusion does. 0 when the convolution refuses it. */
static int fuse(clcnn_context *ctx, const lo_host *h, clcnn_node *n) {
    clcnn_plan_force f = {{clcnn_algo_named(h->n.ops, CLCNN_PASS_FORWARD, "direct"), NULL, NULL}};
    *n = h->n;
    clcnn_node_plan(ctx, n, &f);
    if (!n->ops->can_fuse || !n->ops->can_fuse(ctx, n, &h->next)) return 0;
    clcnn_node_absorb(ctx, n, &h->next, &f);
    return 1;
}

/* The implicit-GEMM convolutions' sizes, as CLCNN_IMPLICIT_SIZE names them
 * (src/layers/conv2d/implicit.c): each all-implicit combination runs in every one. */
static const char *const implicit_sizes[] = {"64", "32", "64x128", "64w8"};
enum { IMPLICIT_SIZES = (int)(sizeof implicit_sizes / sizeof implicit_sizes[0]) };

/* --implicit=SIZES: the sizes to run, a comma list (NULL: all). */
static const char *implicit_list;

static int size_wanted(int z) {
    size_t n = strlen(implicit_sizes[z]);
    for (const char *p = implicit_list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, implicit_sizes[z], n) && (p[n] == ',' || p[n] == '\0')) return 1;
    return implicit_list == NULL;
}

/* The algorithms of a pass of n as planned (NULL alone when the pass does not run). */
static int list_algos(clcnn_context *ctx, const clcnn_node *n, int pass, const clcnn_algo **out) {
    int k = clcnn_node_algos(ctx, n, pass, out);
    return k > 0 ? k : (out[0] = NULL, 1);
}

/* Runs one forced combination and prints its line; returns 1 when it passed. */
static int run_combo(const lo_ctx *lc, const lo_host *h, const lo_case *c, const clcnn_node *base,
                     const clcnn_plan_force *f) {
    clcnn_node n = *base;
    lo_result r = {1, ""};
    char algos[64], perf_out[128] = "";
    clcnn_node_plan(lc->ctx, &n, f);
    snprintf(algos, sizeof algos, "%s/%s/%s", clcnn_algo_name(f->algo[0]),
             clcnn_algo_name(f->algo[1]), clcnn_algo_name(f->algo[2]));
    if (lc->ctx->implicit_size) /* the implicit kernels' size this run */
        snprintf(algos + strlen(algos), sizeof algos - strlen(algos), " (%s)",
                 implicit_sizes[lc->ctx->implicit_size - 1]);
    if (lc->ctx->pool_wgrad) /* the fused pool's weight gradient, a slice per image */
        snprintf(algos + strlen(algos), sizeof algos - strlen(algos), " (%s)",
                 lc->ctx->pool_wgrad == 1 ? "per slice" : "two passes");
    if (memcmp(n.algo, f->algo, sizeof n.algo) != 0)
        fail(&r, "the plan took %s/%s/%s instead", clcnn_algo_name(n.algo[0]),
             clcnn_algo_name(n.algo[1]), clcnn_algo_name(n.algo[2]));
    else
        run_one(lc->ctx, h, c, &n, &r, perf_out, sizeof perf_out);
    printf("%-44s %-11s %-38s %s%s\n", h->label, lc->name, algos,
           r.ok ? "ok" : "FAIL: ", r.ok ? perf_out : r.why);
    fflush(stdout);
    return r.ok;
}

/* Every combination of the node's algorithms on one context: for each forward algorithm, the
 * weight- and input-gradient lists as they are once that forward is planned. Counts runs and
 * failures. */
static void run_node(const lo_ctx *lc, const lo_host *h, const lo_case *c, int *runs, int *failed) {
    clcnn_context *ctx = lc->ctx;
    clcnn_node base = h->n, n;
    const clcnn_algo *fw[CLCNN_MAX_ALGOS], *wg[CLCNN_MAX_ALGOS], *dg[CLCNN_MAX_ALGOS];
    if (h->fused && !fuse(ctx, h, &base)) {
        printf("%-44s %-11s FAIL: the convolution does not absorb the pool\n", h->label, lc->name);
        ++*runs, ++*failed;
        return;
    }
    int nf = list_algos(ctx, &base, CLCNN_PASS_FORWARD, fw);
    for (int i = 0; i < nf; i++) {
        clcnn_plan_force f = {{fw[i], NULL, NULL}};
        n = base;
        clcnn_node_plan(ctx, &n, &f);
        int nw = list_algos(ctx, &n, CLCNN_PASS_WGRAD, wg);
        int nd = list_algos(ctx, &n, CLCNN_PASS_DGRAD, dg), dgrad_can = 0;
        for (int k = 0; k < nd; k++)
            dgrad_can |= is_implicit(dg[k]);
        for (int j = 0; j < nw; j++) {
            for (int k = 0; k < nd; k++) {
                f = (clcnn_plan_force){{fw[i], wg[j], dg[k]}};
                if (!combo_runs(&f, dgrad_can)) continue;
                if (!is_implicit(fw[i])) {
                    ++*runs;
                    *failed += !run_combo(lc, h, c, &base, &f);
                    if (strcmp(fw[i]->name, "direct+pool") != 0) continue;
                    /* the fused pool's weight gradient both ways, over a slice per image (its
                     * partial sums reduced): one kernel per slice, and the two passes */
                    ctx->wgrad_slice = 1;
                    for (int way = 1; way <= 2; way++) {
                        ctx->pool_wgrad = way;
                        ++*runs;
                        *failed += !run_combo(lc, h, c, &base, &f);
                    }
                    ctx->wgrad_slice = 0, ctx->pool_wgrad = 0;
                    continue;
                }
                /* the implicit kernels in every size the device runs (PoCL's CPU device and
                 * oclgrind run them all; Intel's CPU runtime allows 64x128's kernels 208
                 * work-items, not its 256) */
                for (int z = 0; z < IMPLICIT_SIZES; z++) {
                    if (!size_wanted(z)) continue;
                    if (clcnn_conv_implicit_size(ctx, implicit_sizes[z]) != CLCNN_SUCCESS) {
                        printf("%-44s %-11s implicit size %-24s skipped: %s\n", h->label, lc->name,
                               implicit_sizes[z], clcnn_context_errmsg(ctx));
                        continue;
                    }
                    ++*runs;
                    *failed += !run_combo(lc, h, c, &base, &f);
                }
                clcnn_conv_implicit_size(ctx, NULL);
            }
        }
    }
}

/* The cross-entropy the last layer feeds, with label smoothing eps, against its reference: the
 * mean loss, its gradient, the hits, and the accumulating form (evaluation: a second call adds
 * its sum). Logits scaled by `scale`; with N > 2, a huge right logit and a large wrong one. */
static int check_ce_eps(const lo_ctx *lc, int N, int K, double scale, int seed, double eps) {
    clcnn_context *ctx = lc->ctx;
    clcnn_rng rng;
    lo_result r = {1, ""};
    lo_dev d = {0};
    size_t nz = (size_t)N * K;
    int correct = 0, dcorrect = -1;
    char label[64];
    clcnn_rng_seed(&rng, (uint64_t)seed);
    float *z = draw(&rng, nz, scale, IN_RANDOM);
    unsigned char *lab = malloc((size_t)N);
    double *gz = calloc(nz, sizeof *gz), loss, two;
    CLCNN_ASSERT(lab && gz);
    for (int i = 0; i < N; i++)
        lab[i] = (unsigned char)clcnn_rng_below(&rng, (uint64_t)K);
    if (N > 2) z[K + lab[1]] = 1e3f, z[2 * K] = 95.0f;
    double *zd = to_double(z, nz);
    loss = clcnn_ref_cross_entropy_ls(gz, &correct, zd, lab, N, K, eps);
    two = loss + loss * N;
    d.x[0] = dev_buf(ctx, nz, 4, z, &r), d.gx[0] = dev_buf(ctx, nz, 4, NULL, &r);
    d.y = dev_buf(ctx, (size_t)N, 4, NULL, &r), d.aux = dev_buf(ctx, (size_t)N, 4, NULL, &r);
    d.p = dev_buf(ctx, 1, 4, NULL, &r), d.g = dev_buf(ctx, 1, 4, NULL, &r);
    d.gy = dev_buf(ctx, (size_t)N, 1, lab, &r);
    if (r.ok && clcnn_cross_entropy(ctx, d.y, d.aux, d.gx[0], d.x[0], 0, d.gy, N, K, d.p, d.g,
                                    (float)N, 0, eps, N) != CLCNN_SUCCESS)
        fail(&r, "clcnn_cross_entropy: %s", clcnn_context_errmsg(ctx));
    lo_tensor tl = {"loss", 1, {1, 0, 0, 0}}, tg = {"grad", 2, {N, K, 0, 0}};
    lo_tensor ta = {"accumulated loss", 1, {1, 0, 0, 0}};
    compare(ctx, &r, &tl, d.p, 0, &loss, 1);
    compare(ctx, &r, &tg, d.gx[0], 0, gz, nz);
    if (r.ok) clEnqueueReadBuffer(ctx->queue, d.g, CL_TRUE, 0, 4, &dcorrect, 0, NULL, NULL);
    if (r.ok && dcorrect != correct) fail(&r, "%d correct, want %d", dcorrect, correct);
    if (r.ok && clcnn_cross_entropy(ctx, d.y, d.aux, NULL, d.x[0], 0, d.gy, N, K, d.p, d.g, 1.0f, 1,
                                    eps, N) != CLCNN_SUCCESS)
        fail(&r, "clcnn_cross_entropy (accumulating): %s", clcnn_context_errmsg(ctx));
    compare(ctx, &r, &ta, d.p, 0, &two, 1);
    snprintf(label, sizeof label, "cross-entropy N%d K%d scale %g smoothing %g", N, K, scale, eps);
    printf("%-44s %-11s %-38s %s%s\n", label, lc->name, "kernel",
           r.ok ? "ok" : "FAIL: ", r.ok ? "" : r.why);
    dev_free(&d);
    free(z), free(lab), free(gz), free(zd);
    return r.ok;
}

/* check_ce_eps without label smoothing, then with 0.1 and (K > 2) with 1, the whole target
 * spread evenly. */
static int check_ce(const lo_ctx *lc, int N, int K, double scale, int seed) {
    int ok = check_ce_eps(lc, N, K, scale, seed, 0.0);
    ok &= check_ce_eps(lc, N, K, scale, seed, 0.1);
    if (K > 2) ok &= check_ce_eps(lc, N, K, scale, seed, 1.0);
    return ok;
}

/* A context per visible device and GEMM backend; a backend the device cannot run
 * (CLCNN_ERR_UNSUPPORTED) is skipped with a line saying why, any other failure counts. */
static int open_contexts(const clcnn_devices *devs, lo_ctx *out, int *failed) {
    int n = 0;
    for (int d = 0; d < clcnn_devices_count(devs); d++) {
        clcnn_device_info info;
        if (clcnn_devices_get(devs, d, &info) == CLCNN_SUCCESS)
            printf("device %d: %s (%s)\n", d, info.name, info.platform_name);
        for (size_t b = 0; b < sizeof backends / sizeof backends[0] && n < MAX_CTX; b++) {
            clcnn_context_options o;
            clcnn_context *ctx = NULL;
            clcnn_context_options_init(&o);
            o.backend = backends[b].b;
            clcnn_status st = clcnn_context_create(&ctx, devs, d, &o);
            if (st == CLCNN_SUCCESS) {
                out[n].ctx = ctx;
                snprintf(out[n++].name, sizeof out->name, "d%d %s", d, backends[b].name);
                continue;
            }
            printf("%sdevice %d, backend %s: %s\n",
                   st == CLCNN_ERR_UNSUPPORTED ? "skipped: " : "FAIL: ", d, backends[b].name,
                   clcnn_context_errmsg(ctx));
            *failed += st != CLCNN_ERR_UNSUPPORTED;
            clcnn_context_free(ctx);
        }
    }
    return n;
}

/* Whether s contains one of the '|'-separated substrings of filter. */
static int matches(const char *s, const char *filter) {
    char one[128];
    for (const char *p = filter;; p++) {
        size_t n = strcspn(p, "|");
        snprintf(one, sizeof one, "%.*s", (int)(n < sizeof one ? n : sizeof one - 1), p);
        if (n > 0 && strstr(s, one)) return 1;
        p += n;
        if (!*p) return 0;
    }
}

int main(int argc, char **argv) {
    const char *filter = NULL;
    clcnn_devices *devs = NULL;
    lo_ctx ctxs[MAX_CTX];
    int runs = 0, failed = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--perf") == 0)
            perf_mode = 1;
        else if (strcmp(argv[i], "--implicit") == 0)
            implicit_only = 1;
        else if (strncmp(argv[i], "--implicit=", 11) == 0)
            implicit_only = 1, implicit_list = argv[i] + 11;
        else if (strcmp(argv[i], "--first-backend") == 0)
            first_backend = 1;
        else if (argv[i][0] != '-' && !filter)
            filter = argv[i];
        else
            return fprintf(stderr, "usage: test_layer_ops [--perf] [--implicit[=SIZES]] "
                                   "[--first-backend] [SUBSTRING]\n"),
                   2;
    }
    if (clcnn_devices_create(&devs, NULL) != CLCNN_SUCCESS || clcnn_devices_count(devs) == 0) {
        printf("no OpenCL device: skipping (%s)\n", clcnn_devices_errmsg(devs));
        clcnn_devices_free(devs);
        return 77;
    }
    int nctx = open_contexts(devs, ctxs, &failed);
    /* the implicit kernels take no GEMM; --first-backend: the kernels under test take none */
    int nrun = (implicit_only || first_backend) && nctx > 1 ? 1 : nctx;
    size_t ncases = sizeof cases / sizeof cases[0], nshares = sizeof shares / sizeof shares[0];
    size_t ngraphs = sizeof graphs / sizeof graphs[0];
    for (size_t i = 0; i < ncases + nshares + ngraphs; i++) {
        const lo_graph *g = i >= ncases + nshares ? &graphs[i - ncases - nshares] : NULL;
        const lo_case *c = i < ncases ? &cases[i] : g ? &g->c : &shares[i - ncases].c;
        int sample0 = i >= ncases && !g ? shares[i - ncases].sample0 : 0;
        lo_host h;
        if (filter && !matches(c->spec, filter)) continue;
        if (!host_init(&h, c, g, (int)i, sample0)) {
            failed++;
            continue;
        }
        for (int k = 0; k < nrun; k++)
            run_node(&ctxs[k], &h, c, &runs, &failed);
        host_free(&h);
    }
    for (int k = 0; k < nctx && !implicit_only && (!filter || matches("cross-entropy", filter));
         k++) {
        runs += 3;
        failed += !check_ce(&ctxs[k], 5, 10, 3.0, 1) + !check_ce(&ctxs[k], 1, 3, 1.0, 2) +
                  !check_ce(&ctxs[k], 64, 10, 10.0, 3);
    }
    for (int k = 0; k < nctx; k++)
        clcnn_context_free(ctxs[k].ctx);
    clcnn_devices_free(devs);
    printf("test_layer_ops: %d runs on %d device/backend pairs, %d failed\n", runs, nctx, failed);
    if (failed) return 1;
    return runs ? 0 : 77;
}
