/* Every kernel family once, on tiny shapes, through the public API, checked against a
 * double-precision host computation of the same models (tests/ref/): stride-1 and strided
 * convolutions (with and without bias), 2x2 and overlapping padded max-pools, ReLU, linear
 * layers, cross-entropy, SGD (momentum, dampening, Nesterov, weight decay), Adam (with L2
 * decay) and AdamW, the on-device batch gather, evaluation and inference. Sized for oclgrind,
 * which interprets every work-item (tests/oclgrind_check.sh runs this under it, once per GEMM
 * backend); on a real device it takes a fraction of a second.
 *
 * The oracle, step by step. Before each training step the device's weights are read; the
 * reference runs forward and backward in double from exactly those weights on the samples the
 * step should have used (the shuffled order is recomputed here), and the device's loss and every
 * gradient must match it. The reference optimizer is then applied to the device's weights and
 * the device's own gradients (its state fed the same way), and the device's weights after the
 * step must match that. Every step is thus checked from where the device really was: fp32
 * rounding cannot compound over steps, and Adam's division by small second moments cannot
 * amplify gradient rounding into the weight check. At the end, evaluation (mean loss, correct
 * count) and inference (every logit) are checked against the reference at the final weights.
 *
 * Tolerances (fp32 against double; u = 2^-24 = 6e-8, the unit roundoff). Each forward value is
 * a sum of R products with R at most 2048 here (the linear layer after a 2x32x32 map) and 150
 * in the convolutions; the weight gradients sum over batch x pixels, at most 4 x 32 x 32 = 4096
 * products. Rounding gives a relative error of about sqrt(R) u (4e-6 for R 4096) of the sum of
 * the terms' magnitudes, and a network chains three or four such sums. So:
 *  - logits: 2e-5 of the largest |logit| + 1e-6, the per-layer bound of tests/test_layer_ops.c;
 *    the losses, through a softmax whose derivative in each logit is at most 1 in magnitude,
 *    4e-5 of the largest |logit| + 1e-6 of the loss (exp and log in fp32);
 *  - gradients: 5e-5 of the tensor's largest |gradient| + 1e-7: ten times sqrt(4096) u, since
 *    cancellation can make the sum of magnitudes several times the largest result;
 *  - weights after a step: elementwise 1e-6 |p| (the update's own roundings, a few u of p) +
 *    1e-5 of the tensor's largest step + 1e-9; the optimizers are elementwise, so only a handful
 *    of roundings separate the device from the reference there.
 * Any indexing or formula mistake gives errors of the order of the values themselves, far above
 * these. Observed on PoCL with every GEMM backend: at most 0.11 of the tolerance (weights),
 * 0.04 (gradients, logits) and 0.03 (losses).
 * A ReLU input that close to zero, or a max-pool winner that close to its runner-up, within
 * 5e-6 of the layer's largest input (about seven times sqrt(150) u, the fp32 error of those
 * layers' outputs), could be decided the other way in fp32 and move a whole gradient term, so
 * such a step's gradients are not compared (reported on stderr; more than one such step in a
 * model fails it). Exact ties (zeros after a ReLU) are
 * decided alike on both sides. The closest decision of each model is printed (observed: 9e-6).
 *
 * It prints one line of figures per model (losses of each step, evaluation loss, a checksum of
 * the logits) so that a run under oclgrind can be compared with a run on another device, and one
 * line per model on stderr with the worst error found as a fraction of its tolerance. Any check
 * that fails prints what, where, got, want and the tolerance, and the exit status is 1. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clcnn.h"
#include "ref/ref.h"
#include "rng.h"
#include "spec.h"

#define N_IMG 7 /* two batches of 4: the last one partial */
#define BATCH 4
#define HOST_N 3 /* the step from host memory: samples 0..2 */
#define EPOCHS 2
#define SHUFFLE_SEED 9
#define MAX_LAYERS 16
#define MAX_PARAMS 16
#define DECISION_MARGIN 5e-6 /* see the tolerances above */

typedef struct model_case {
    const char *spec;
    int c, h, w;
    clcnn_optimizer_kind opt;
    double momentum, weight_decay, dampening;
    int nesterov;
} model_case;

/* The reference model: the layers of the spec, the shapes between them, and in double the
 * weights the next step starts from plus the optimizer state. */
typedef struct ref_model {
    clcnn_layer_desc *layer;
    int nl, np, classes;
    int c[MAX_LAYERS + 1], h[MAX_LAYERS + 1], w[MAX_LAYERS + 1]; /* input of layer l; [nl]: out */
    int wi[MAX_LAYERS], bi[MAX_LAYERS]; /* parameter index of layer l's weight and bias, or -1 */
    const char *name[MAX_PARAMS];
    size_t numel[MAX_PARAMS];
    double *p[MAX_PARAMS], *g[MAX_PARAMS], *s1[MAX_PARAMS], *s2[MAX_PARAMS];
} ref_model;

/* What a check compares, for the summary line. */
enum { LOSSES, GRADIENTS, WEIGHTS, OUTPUTS, N_KINDS };
static const char *const kind_name[N_KINDS] = {"losses", "gradients", "weights", "eval+logits"};

/* Failures and, per kind of check, the worst error/tolerance ratio seen, for one model. */
typedef struct oracle {
    const char *spec;
    int failures, checks, skipped;
    double worst[N_KINDS], margin; /* margin: the closest ReLU or pool decision of any step */
} oracle;

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "test_kernels_small: out of memory\n");
        exit(1);
    }
    return p;
}

static void report(oracle *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "test_kernels_small: FAIL: %s: ", o->spec);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    o->failures++;
}

static double max_abs(const double *a, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(a[i]));
    return m;
}

/* got[i] against want[i] within tol_const + tol_rel * |want[i]|; a NaN always fails. */
static void compare(oracle *o, int kind, const char *what, const float *got, const double *want,
                    size_t n, double tol_const, double tol_rel) {
    double worst = -1, worst_tol = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]), tol = tol_const + tol_rel * fabs(want[i]);
        double ratio = isnan(err) ? INFINITY : err / tol;
        if (ratio > worst) worst = ratio, worst_tol = tol, at = i;
    }
    o->checks++;
    o->worst[kind] = fmax(o->worst[kind], worst);
    if (!(worst <= 1.0))
        report(o,
               "%s: element %zu of %zu is %.9g, the reference says %.9g (error %.3g, tolerance "
               "%.3g)",
               what, at, n, (double)got[at], want[at], fabs((double)got[at] - want[at]), worst_tol);
}

static void compare_scalar(oracle *o, int kind, const char *what, double got, double want,
                           double tol) {
    double err = fabs(got - want), ratio = isnan(err) ? INFINITY : err / tol;
    o->checks++;
    o->worst[kind] = fmax(o->worst[kind], ratio);
    if (!(ratio <= 1.0))
        report(o, "%s is %.9g, the reference says %.9g (error %.3g, tolerance %.3g)", what, got,
               want, err, tol);
}

/* An integer argument of layer L, by name. */
static int ia(const clcnn_layer_desc *L, const char *name) {
    return (int)clcnn_spec_arg(L, name);
}

/* Builds the reference for model m: its layers (from the canonical spec), shapes, and the
 * parameter tensors matched to their layers by their PyTorch names ("3.weight"). */
static int ref_init(ref_model *r, oracle *o, clcnn_model *m, int c, int h, int w) {
    clcnn_error err = {0};
    memset(r, 0, sizeof *r);
    if (clcnn_spec_parse(clcnn_model_spec(m), &r->layer, &r->nl, &err) || r->nl > MAX_LAYERS) {
        report(o, "the canonical spec does not parse: %s", err.msg);
        return 1;
    }
    r->c[0] = c, r->h[0] = h, r->w[0] = w;
    for (int l = 0; l < r->nl; l++) {
        const clcnn_layer_desc *L = &r->layer[l];
        int oc = r->c[l], oh = r->h[l], ow = r->w[l];
        r->wi[l] = r->bi[l] = -1;
        if (L->kind == CLCNN_LAYER_CONV2D || L->kind == CLCNN_LAYER_MAXPOOL2D) {
            oc = L->kind == CLCNN_LAYER_CONV2D ? ia(L, "out") : oc;
            oh = (oh + 2 * ia(L, "pad") - ia(L, "kernel")) / ia(L, "stride") + 1;
            ow = (ow + 2 * ia(L, "pad") - ia(L, "kernel")) / ia(L, "stride") + 1;
        } else if (L->kind == CLCNN_LAYER_FLATTEN || L->kind == CLCNN_LAYER_LINEAR) {
            oc = L->kind == CLCNN_LAYER_LINEAR ? ia(L, "out") : oc * oh * ow;
            oh = ow = 1;
        }
        r->c[l + 1] = oc, r->h[l + 1] = oh, r->w[l + 1] = ow;
    }
    r->classes = r->c[r->nl];
    r->np = clcnn_model_param_count(m);
    if (r->np > MAX_PARAMS || r->classes != clcnn_model_output_size(m)) {
        report(o, "%d parameters, %d outputs: not the reference's model", r->np, r->classes);
        return 1;
    }
    for (int i = 0; i < r->np; i++) {
        int ndim, l = -1;
        int64_t shape[4];
        char kind[16] = "";
        clcnn_model_param_info(m, i, &r->name[i], &ndim, shape, &r->numel[i]);
        if (sscanf(r->name[i], "%d.%15s", &l, kind) != 2 || l < 0 || l >= r->nl ||
            (strcmp(kind, "weight") && strcmp(kind, "bias"))) {
            report(o, "parameter %d is named '%s'", i, r->name[i]);
            return 1;
        }
        const clcnn_layer_desc *L = &r->layer[l];
        int bias = !strcmp(kind, "bias");
        size_t fan_in = L->kind == CLCNN_LAYER_CONV2D
                            ? (size_t)r->c[l] * ia(L, "kernel") * ia(L, "kernel")
                            : (size_t)r->c[l] * r->h[l] * r->w[l];
        size_t want = bias ? (size_t)ia(L, "out") : (size_t)ia(L, "out") * fan_in;
        if (L->kind != CLCNN_LAYER_CONV2D && L->kind != CLCNN_LAYER_LINEAR) want = 0;
        if (r->numel[i] != want || (bias && !ia(L, "bias"))) {
            report(o, "parameter %s has %zu elements, the reference expects %zu", r->name[i],
                   r->numel[i], want);
            return 1;
        }
        *(bias ? &r->bi[l] : &r->wi[l]) = i;
        r->p[i] = xcalloc(r->numel[i], sizeof(double));
        r->g[i] = xcalloc(r->numel[i], sizeof(double));
        r->s1[i] = xcalloc(r->numel[i], sizeof(double));
        r->s2[i] = xcalloc(r->numel[i], sizeof(double));
    }
    for (int l = 0; l < r->nl; l++) {
        int has_params =
            r->layer[l].kind == CLCNN_LAYER_CONV2D || r->layer[l].kind == CLCNN_LAYER_LINEAR;
        if ((r->wi[l] >= 0) != has_params ||
            (r->bi[l] >= 0) != (has_params && ia(&r->layer[l], "bias"))) {
            report(o, "layer %d's parameters are not the ones its spec implies", l);
            return 1;
        }
    }
    return 0;
}

static void ref_free(ref_model *r) {
    for (int i = 0; i < r->np; i++) {
        free(r->p[i]);
        free(r->g[i]);
        free(r->s1[i]);
        free(r->s2[i]);
    }
    free(r->layer);
}

static size_t act_size(const ref_model *r, int l, int n) {
    return (size_t)n * r->c[l] * r->h[l] * r->w[l];
}

/* The smallest gap, relative to the layer's input scale, between a pool window's winner and
 * the largest value strictly below it (exact ties are decided alike in fp32 and double). */
static double pool_margin(const double *x, int NC, int H, int W, int K, int S, int P,
                          double scale) {
    int OH = (H + 2 * P - K) / S + 1, OW = (W + 2 * P - K) / S + 1;
    double margin = INFINITY;
    for (int nc = 0; nc < NC; nc++)
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++) {
                double best = -INFINITY, second = -INFINITY;
                for (int ih = oh * S - P; ih < oh * S - P + K; ih++)
                    for (int iw = ow * S - P; iw < ow * S - P + K; iw++) {
                        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                        double v = x[((size_t)nc * H + ih) * W + iw];
                        if (v > best)
                            second = best, best = v;
                        else if (v < best && v > second)
                            second = v;
                    }
                if (second > -INFINITY) margin = fmin(margin, (best - second) / scale);
            }
    return margin;
}

/* Forward pass of n samples in act[0]: act[l] is layer l's input, act[nl] the logits, am[l] a
 * pool's argmax. Returns the smallest margin of a ReLU or max-pool decision (see above). */
static double ref_forward(const ref_model *r, double **act, int **am, int n) {
    double margin = INFINITY;
    for (int l = 0; l < r->nl; l++) {
        const clcnn_layer_desc *L = &r->layer[l];
        size_t in = act_size(r, l, n);
        double scale = fmax(max_abs(act[l], in), 1e-30);
        act[l + 1] = xcalloc(act_size(r, l + 1, n), sizeof(double));
        switch (L->kind) {
        case CLCNN_LAYER_CONV2D:
            clcnn_ref_conv2d_forward(act[l + 1], act[l], r->p[r->wi[l]],
                                     r->bi[l] >= 0 ? r->p[r->bi[l]] : NULL, n, r->c[l], r->h[l],
                                     r->w[l], ia(L, "out"), ia(L, "kernel"), ia(L, "stride"),
                                     ia(L, "pad"));
            break;
        case CLCNN_LAYER_MAXPOOL2D:
            am[l] = xcalloc(act_size(r, l + 1, n), sizeof(int));
            clcnn_ref_maxpool2d_forward(act[l + 1], am[l], act[l], n, r->c[l], r->h[l], r->w[l],
                                        ia(L, "kernel"), ia(L, "stride"), ia(L, "pad"));
            margin =
                fmin(margin, pool_margin(act[l], n * r->c[l], r->h[l], r->w[l], ia(L, "kernel"),
                                         ia(L, "stride"), ia(L, "pad"), scale));
            break;
        case CLCNN_LAYER_RELU:
            clcnn_ref_relu_forward(act[l + 1], act[l], (int)in);
            for (size_t i = 0; i < in; i++)
                margin = fmin(margin, fabs(act[l][i]) / scale);
            break;
        case CLCNN_LAYER_FLATTEN: memcpy(act[l + 1], act[l], in * sizeof(double)); break;
        case CLCNN_LAYER_LINEAR:
            clcnn_ref_linear_forward(act[l + 1], act[l], r->p[r->wi[l]],
                                     r->bi[l] >= 0 ? r->p[r->bi[l]] : NULL, n, (int)(in / n),
                                     ia(L, "out"));
            break;
        default: CLCNN_ASSERT(!"a layer kind these models do not use"); break;
        }
    }
    return margin;
}

/* Backward from glogits: every parameter's gradient into r->g (set, not added). */
static void ref_backward(ref_model *r, double **act, int **am, const double *glogits, int n) {
    size_t nout = act_size(r, r->nl, n);
    double *gy = xcalloc(nout, sizeof(double));
    memcpy(gy, glogits, nout * sizeof(double));
    for (int i = 0; i < r->np; i++)
        memset(r->g[i], 0, r->numel[i] * sizeof(double));
    for (int l = r->nl - 1; l >= 0; l--) {
        const clcnn_layer_desc *L = &r->layer[l];
        size_t in = act_size(r, l, n);
        double *gx = xcalloc(in, sizeof(double));
        double *gw = r->wi[l] >= 0 ? r->g[r->wi[l]] : NULL;
        double *gb = r->bi[l] >= 0 ? r->g[r->bi[l]] : NULL;
        switch (L->kind) {
        case CLCNN_LAYER_CONV2D:
            clcnn_ref_conv2d_backward(gx, gw, gb, gy, act[l], r->p[r->wi[l]], n, r->c[l], r->h[l],
                                      r->w[l], ia(L, "out"), ia(L, "kernel"), ia(L, "stride"),
                                      ia(L, "pad"));
            break;
        case CLCNN_LAYER_MAXPOOL2D:
            clcnn_ref_maxpool2d_backward(gx, gy, am[l], n, r->c[l], r->h[l], r->w[l],
                                         ia(L, "kernel"), ia(L, "stride"), ia(L, "pad"));
            break;
        case CLCNN_LAYER_RELU: clcnn_ref_relu_backward(gx, gy, act[l + 1], (int)in); break;
        case CLCNN_LAYER_FLATTEN: memcpy(gx, gy, in * sizeof(double)); break;
        case CLCNN_LAYER_LINEAR:
            clcnn_ref_linear_backward(gx, gw, gb, gy, act[l], r->p[r->wi[l]], n, (int)(in / n),
                                      ia(L, "out"));
            break;
        default: CLCNN_ASSERT(!"a layer kind these models do not use"); break;
        }
        free(gy);
        gy = gx;
    }
    free(gy);
}

static void free_acts(const ref_model *r, double **act, int **am) {
    for (int l = 0; l <= r->nl; l++) {
        free(act[l]);
        act[l] = NULL;
        if (l < r->nl) free(am[l]), am[l] = NULL;
    }
}

/* The reference batch: samples idx[0..n) of the data set as the device stages them. */
static double *ref_batch(const uint8_t *images, const uint8_t *labels, int pixels, const int *idx,
                         int n, uint8_t *lab) {
    double *x = xcalloc((size_t)n * pixels, sizeof(double));
    for (int b = 0; b < n; b++) {
        for (int p = 0; p < pixels; p++)
            x[(size_t)b * pixels + p] = images[(size_t)idx[b] * pixels + p] / 255.0;
        lab[b] = labels[idx[b]];
    }
    return x;
}

/* Reads every parameter (or gradient) of m into dst[i] as floats. */
static int read_tensors(clcnn_model *m, const ref_model *r, float **dst, int grads) {
    for (int i = 0; i < r->np; i++)
        if ((grads ? clcnn_model_get_grad : clcnn_model_get_param)(m, i, dst[i])) return 1;
    return 0;
}

/* Checks the step the device just took (number `step`, 1-based, on the n samples x with labels
 * lab) from the weights it started from (r->p): loss and gradients against the reference's
 * forward and backward there; then the weights after it against the reference optimizer
 * applied to the device's gradients. Leaves the device's new weights in r->p; f holds one
 * float buffer per parameter tensor. Returns 1 when the API fails (checks only count). */
static int check_step(oracle *o, ref_model *r, clcnn_model *m, const clcnn_optimizer_options *opt,
                      int step, const double *x, const uint8_t *lab, int n, float **f) {
    double *act[MAX_LAYERS + 1] = {NULL}, *glogits = NULL;
    int *am[MAX_LAYERS] = {NULL};
    float loss = NAN;
    char what[160];
    if (clcnn_model_last_loss(m, &loss, NULL) || read_tensors(m, r, f, 1)) return 1;
    act[0] = xcalloc(act_size(r, 0, n), sizeof(double));
    memcpy(act[0], x, act_size(r, 0, n) * sizeof(double));
    double margin = ref_forward(r, act, am, n);
    o->margin = fmin(o->margin, margin);
    glogits = xcalloc(act_size(r, r->nl, n), sizeof(double));
    double want = clcnn_ref_cross_entropy(glogits, NULL, act[r->nl], lab, n, r->classes);
    double zmax = max_abs(act[r->nl], act_size(r, r->nl, n));
    snprintf(what, sizeof what, "step %d: loss", step);
    compare_scalar(o, LOSSES, what, loss, want, 4e-5 * zmax + 1e-6 * fabs(want));
    ref_backward(r, act, am, glogits, n);
    if (margin < DECISION_MARGIN) {
        fprintf(stderr,
                "test_kernels_small: %s: step %d: a ReLU or max-pool decision is %.2g of its "
                "layer's scale from flipping: gradients not compared\n",
                o->spec, step, margin);
        o->skipped++;
    } else {
        for (int i = 0; i < r->np; i++) {
            snprintf(what, sizeof what, "step %d: gradient of %s", step, r->name[i]);
            compare(o, GRADIENTS, what, f[i], r->g[i], r->numel[i],
                    5e-5 * max_abs(r->g[i], r->numel[i]) + 1e-7, 0);
        }
    }
    /* The optimizer on the device's own gradients, its state fed the same way; `before`
     * keeps the weights the step started from, to size each tensor's step. */
    double *before[MAX_PARAMS];
    for (int i = 0; i < r->np; i++) {
        double *p = r->p[i], *g = r->g[i];
        int k = (int)r->numel[i];
        before[i] = xcalloc(r->numel[i], sizeof(double));
        memcpy(before[i], p, r->numel[i] * sizeof(double));
        for (int j = 0; j < k; j++)
            g[j] = f[i][j];
        if (opt->kind == CLCNN_OPTIMIZER_SGD)
            clcnn_ref_sgd_step(p, g, r->s1[i], k, opt->lr, opt->momentum, opt->dampening,
                               opt->weight_decay, opt->nesterov, step);
        else
            clcnn_ref_adam_step(p, g, r->s1[i], r->s2[i], k, opt->lr, opt->beta1, opt->beta2,
                                opt->eps, opt->weight_decay, opt->kind == CLCNN_OPTIMIZER_ADAMW,
                                step);
    }
    int rc = read_tensors(m, r, f, 0);
    for (int i = 0; i < r->np && !rc; i++) {
        double big = 0;
        for (size_t j = 0; j < r->numel[i]; j++)
            big = fmax(big, fabs(r->p[i][j] - before[i][j]));
        snprintf(what, sizeof what, "step %d: %s after the update", step, r->name[i]);
        compare(o, WEIGHTS, what, f[i], r->p[i], r->numel[i], 1e-5 * big + 1e-9, 1e-6);
        for (size_t j = 0; j < r->numel[i]; j++)
            r->p[i][j] = f[i][j]; /* the next step starts where the device is */
    }
    for (int i = 0; i < r->np; i++)
        free(before[i]);
    free_acts(r, act, am);
    free(glogits);
    return rc;
}

/* The order clcnn_dataset_set_epoch(ds, seed, epoch, 1) gives (src/dataset.c): recomputed
 * here, so that a gather that ignores or misreads the order is caught. If the library changes
 * how it mixes the epoch into the seed, change it here too. */
static void epoch_order(int *order, int n, uint64_t seed, int64_t epoch) {
    clcnn_rng r;
    for (int i = 0; i < n; i++)
        order[i] = i;
    clcnn_rng_seed(&r, seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(epoch + 1)));
    clcnn_rng_shuffle(&r, order, n);
}

/* Evaluation and inference at the final weights (r->p, the device's). */
static void check_eval(oracle *o, ref_model *r, const uint8_t *images, const uint8_t *labels,
                       int pixels, double eval_loss, int correct, const float *logits) {
    double *act[MAX_LAYERS + 1] = {NULL};
    int *am[MAX_LAYERS] = {NULL}, idx[N_IMG], hits = 0, ambiguous = 0;
    uint8_t lab[N_IMG];
    for (int i = 0; i < N_IMG; i++)
        idx[i] = i;
    act[0] = ref_batch(images, labels, pixels, idx, N_IMG, lab);
    ref_forward(r, act, am, N_IMG);
    const double *z = act[r->nl];
    size_t nz = act_size(r, r->nl, N_IMG);
    double zmax = max_abs(z, nz), ztol = 2e-5 * zmax + 1e-6;
    double want = clcnn_ref_cross_entropy(NULL, &hits, z, lab, N_IMG, r->classes);
    compare_scalar(o, OUTPUTS, "evaluation loss", eval_loss, want, 4e-5 * zmax + 1e-6 * fabs(want));
    compare(o, OUTPUTS, "inference logits", logits, z, nz, ztol, 0);
    /* A sample whose two highest logits are within the logits' tolerance may be counted either
     * way in fp32. */
    for (int i = 0; i < N_IMG; i++) {
        int best = 0;
        for (int k = 1; k < r->classes; k++)
            best = z[i * r->classes + k] > z[i * r->classes + best] ? k : best;
        for (int k = 0; k < r->classes; k++)
            if (k != best && z[i * r->classes + best] - z[i * r->classes + k] <= 2 * ztol) {
                ambiguous++;
                break;
            }
    }
    o->checks++;
    if (abs(correct - hits) > ambiguous)
        report(o, "evaluation: %d correct, the reference says %d (%d ambiguous)", correct, hits,
               ambiguous);
    free_acts(r, act, am);
}

static int run_case(clcnn_context *ctx, const model_case *mc) {
    int pixels = mc->c * mc->h * mc->w, correct = 0, step = 0;
    uint8_t labels[N_IMG], lab[BATCH], *images = xcalloc((size_t)N_IMG * pixels, 1);
    float logits[N_IMG * 10], *x = xcalloc((size_t)N_IMG * pixels, sizeof *x), *f[MAX_PARAMS];
    int order[EPOCHS][N_IMG], nf = 0;
    clcnn_dataset *ds = NULL;
    clcnn_model *m = NULL;
    clcnn_optimizer_options opt;
    ref_model r = {0};
    oracle o = {mc->spec, 0, 0, 0, {0}, INFINITY};
    double eval_loss = 0, sum = 0;
    for (int i = 0; i < N_IMG; i++) {
        labels[i] = (uint8_t)((i * 3) % 10);
        for (int p = 0; p < pixels; p++)
            images[i * pixels + p] = (uint8_t)((i * 37 + p * 11 + (p % 7) * labels[i]) % 256);
    }
    for (int i = 0; i < N_IMG * pixels; i++)
        x[i] = images[i] / 255.0f;
    if (clcnn_dataset_from_memory(&ds, ctx, images, labels, N_IMG, mc->c, mc->h, mc->w)) {
        report(&o, "%s", clcnn_dataset_errmsg(ds));
        goto out;
    }
    if (clcnn_model_create(&m, ctx, mc->spec, mc->c, mc->h, mc->w, 5)) {
        report(&o, "%s", clcnn_model_errmsg(m));
        goto out;
    }
    clcnn_optimizer_options_init(&opt, mc->opt);
    opt.momentum = mc->momentum;
    opt.nesterov = mc->nesterov;
    opt.weight_decay = mc->weight_decay;
    opt.dampening = mc->dampening;
    if (clcnn_model_set_optimizer(m, &opt)) {
        report(&o, "%s", clcnn_model_errmsg(m));
        goto out;
    }
    if (ref_init(&r, &o, m, mc->c, mc->h, mc->w)) goto out;
    for (nf = 0; nf < r.np; nf++)
        f[nf] = xcalloc(r.numel[nf], sizeof(float));
    if (read_tensors(m, &r, f, 0)) goto api_fail;
    for (int i = 0; i < r.np; i++)
        for (size_t j = 0; j < r.numel[i]; j++)
            r.p[i][j] = f[i][j];
    /* A gather that ignored the order would see the same batches only if the shuffle kept
     * them; it must not, or the check of the gather is vacuous. */
    int moved = 0;
    for (int e = 0; e < EPOCHS; e++) {
        epoch_order(order[e], N_IMG, SHUFFLE_SEED, e);
        for (int b = 0; b < BATCH; b++)
            moved |= order[e][b] >= BATCH;
    }
    if (!moved) report(&o, "the shuffle keeps the first batch: choose another seed");
    printf("%s |", clcnn_model_spec(m));
    /* Two epochs from the data set (shuffled, gathered on the device), one step from host
     * memory (a partial batch), then inference on more samples than any batch so far (the
     * per-batch buffers are reallocated). */
    for (int e = 0; e < EPOCHS; e++) {
        for (int first = 0; first < N_IMG; first += BATCH) {
            float loss = NAN;
            int n = N_IMG - first < BATCH ? N_IMG - first : BATCH;
            if (first == 0 && clcnn_dataset_set_epoch(ds, SHUFFLE_SEED, e, 1)) {
                report(&o, "%s", clcnn_dataset_errmsg(ds));
                goto out;
            }
            if (clcnn_model_train_dataset(m, ds, first, n) || clcnn_model_last_loss(m, &loss, NULL))
                goto api_fail;
            printf(" %.6g", loss);
            double *xb = ref_batch(images, labels, pixels, &order[e][first], n, lab);
            int bad = check_step(&o, &r, m, &opt, ++step, xb, lab, n, f);
            free(xb);
            if (bad) goto api_fail;
        }
    }
    float loss = NAN;
    int first3[HOST_N] = {0, 1, 2};
    if (clcnn_model_train_batch(m, x, labels, HOST_N) || clcnn_model_last_loss(m, &loss, NULL))
        goto api_fail;
    double *xb = ref_batch(images, labels, pixels, first3, HOST_N, lab);
    int bad = check_step(&o, &r, m, &opt, ++step, xb, lab, HOST_N, f);
    free(xb);
    if (bad || clcnn_model_evaluate(m, ds, BATCH, &eval_loss, &correct) ||
        clcnn_model_predict(m, x, N_IMG, logits))
        goto api_fail;
    if (clcnn_model_step_count(m) != step)
        report(&o, "%lld optimizer steps counted, %d taken", (long long)clcnn_model_step_count(m),
               step);
    for (int i = 0; i < N_IMG * 10; i++)
        sum += logits[i] * (1.0 + (i % 5));
    printf(" %.6g | eval %.6g %d | logits %.6g\n", loss, eval_loss, correct, sum);
    fflush(stdout);
    check_eval(&o, &r, images, labels, pixels, eval_loss, correct, logits);
    if (o.skipped > 1)
        report(&o,
               "the gradients of %d of %d steps were not compared (decisions within fp32 "
               "noise): change the data",
               o.skipped, step);
    fprintf(stderr,
            "oracle: %s: %d checks, closest decision %.2g, %d step(s) without "
            "gradients; worst error / tolerance:",
            mc->spec, o.checks, o.margin, o.skipped);
    for (int k = 0; k < N_KINDS; k++)
        fprintf(stderr, " %s %.3g", kind_name[k], o.worst[k]);
    fputc('\n', stderr);
    goto out;
api_fail:
    report(&o, "%s", clcnn_model_errmsg(m));
out:
    for (int i = 0; i < nf; i++)
        free(f[i]);
    ref_free(&r);
    clcnn_model_free(m);
    clcnn_dataset_free(ds);
    free(images);
    free(x);
    return o.failures ? 1 : 0;
}

int main(void) {
    static const model_case cases[] = {
        /* stride-1 conv (the direct path on CPU devices; OW 8 has its own kernel variant),
         * 2x2 max-pool, strided conv (im2col + GEMM), linear layers, SGD with momentum,
         * Nesterov and weight decay */
        {"conv(4,3,pad=1) relu maxpool(2) conv(6,3,stride=2,pad=1) relu flatten linear(12) relu "
         "linear(10)",
         3, 8, 8, CLCNN_OPTIMIZER_SGD, 0.9, 1e-3, 0, 1},
        /* K 5, no bias, odd sizes (OW 7), overlapping padded max-pool, Adam with L2 decay */
        {"conv(3,5,pad=2,bias=0) maxpool(3,stride=2,pad=1) flatten linear(10,bias=0)", 1, 7, 9,
         CLCNN_OPTIMIZER_ADAM, 0, 0.05, 0, 0},
        /* OW 16, 1x1 kernel, stride 3 pool with gaps, AdamW */
        {"conv(5,1) relu conv(4,3,pad=1) maxpool(2,stride=3) flatten linear(10)", 2, 16, 16,
         CLCNN_OPTIMIZER_ADAMW, 0, 0.01, 0, 0},
        /* 4 x 32 x 32 = 4096 output pixels in a batch: the split-K weight gradient (its partial
         * sums and gemm_reduce) on the cpu backend; plain SGD */
        {"conv(2,3,stride=2,pad=1) flatten linear(10)", 1, 64, 64, CLCNN_OPTIMIZER_SGD, 0, 0, 0, 0},
        /* 6 x 5 x 5 = 150 taps in the second conv, whose pool is fused forward and backward
         * (the gradient goes straight to pixel rows and NCHW for the input gradient); odd
         * 2x2 pool input (7x7); SGD momentum with dampening */
        {"conv(6,3,pad=1) conv(5,5,pad=2) maxpool(2) flatten linear(10)", 1, 7, 7,
         CLCNN_OPTIMIZER_SGD, 0.9, 0, 0.1, 0},
        /* a first convolution with its pool fused both ways (no input gradient), odd 9x11
         * maps: the pool's uncovered last row and column */
        {"conv(4,3,pad=1) maxpool(2) flatten linear(10)", 2, 9, 11, CLCNN_OPTIMIZER_SGD, 0, 0, 0,
         0},
        /* padding 3 > K-1 on the second convolution: its input gradient cannot be a
         * convolution, so its pool is fused forward but not backward (pool backward, then
         * im2col + col2im) */
        {"conv(3,3,pad=1) conv(4,3,pad=3) maxpool(2) flatten linear(10)", 1, 6, 6,
         CLCNN_OPTIMIZER_SGD, 0, 0, 0, 0},
        /* the kernels with output channels in the lanes: 16 x 4 x 7 tiles on 7x7 maps (the
         * third conv's input gradient too), 32 x 3 x 3 tiles on 3x3 maps (the last conv's
         * input gradient too) */
        {"conv(8,3,pad=1) conv(16,3,pad=1) relu conv(16,3,pad=1) relu maxpool(2) "
         "conv(32,3,pad=1) conv(32,3,pad=1) flatten linear(10)",
         2, 7, 7, CLCNN_OPTIMIZER_SGD, 0, 0, 0, 0},
    };
    clcnn_devices *devs = NULL;
    clcnn_context *ctx = NULL;
    int idx = -1, failures = 0;
    if (clcnn_devices_create(&devs, NULL) != CLCNN_SUCCESS || clcnn_devices_count(devs) == 0) {
        fprintf(stderr, "no OpenCL device: skipping (%s)\n", clcnn_devices_errmsg(devs));
        clcnn_devices_free(devs);
        return 77;
    }
    if (clcnn_devices_select(devs, -1, -1, &idx) || clcnn_context_create(&ctx, devs, idx, NULL)) {
        fprintf(stderr, "context creation failed: %s%s\n", clcnn_devices_errmsg(devs),
                clcnn_context_errmsg(ctx));
        clcnn_context_free(ctx);
        clcnn_devices_free(devs);
        return 1;
    }
    clcnn_device_info info;
    if (clcnn_context_device(ctx, &info) == CLCNN_SUCCESS)
        fprintf(stderr, "device: %s (%s)\n", info.name, info.platform_name);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        failures += run_case(ctx, &cases[i]);
    clcnn_context_free(ctx);
    clcnn_devices_free(devs);
    if (failures) fprintf(stderr, "test_kernels_small: %d model(s) failed\n", failures);
    return failures ? 1 : 0;
}
