/* Checks the double-precision references in tests/ref/: finite-difference gradients,
 * PyTorch's maxpool tie rules, optimizer steps against torch, and the PyTorch layer fixtures.
 * Usage: test_gradcheck [path/to/layers.safetensors] */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/ref.h"
#include "safetensors.h"
#include "testutil.h"

/* Finite differences: central, step FD_H, error measured per element as
 * |fd - analytic| / max(|analytic|, FD_FLOOR). Per single parameter every output here is either
 * exactly linear (conv, linear; relu and maxpool away from their kinks), so the central
 * difference has no truncation error, or smooth with O(1) third derivatives (the loss through
 * log-softmax), truncation ~h^2 = 1e-12. What is left is rounding: outputs of O(1-10) carry
 * ~1e-15 each, and dividing the difference of two passes by 2h = 2e-6 leaves ~1e-10 absolute.
 * The floor keeps gradients near zero from turning that into a large relative error, so
 * FD_TOL = 1e-6 (1e-9 absolute at the floor) passes with margin (observed <= 1e-7), while a
 * wrong index or a missing term gives errors of O(1). */
#define FD_H 1e-6
#define FD_FLOOR 1e-3
#define FD_TOL 1e-6

static void report(const char *group, const char *what, double err, double tol) {
    int ok = err <= tol; /* false for NaN too */
    printf("%-4s %-34s %-10s max rel err %.3g (tol %.0g)\n", ok ? "ok" : "FAIL", group, what, err,
           tol);
    if (!ok) test_failures++;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

/* Uniform in [-1, 1) (xorshift64*): deterministic and independent of the C library. */
static double urand(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t r = rng_state * 0x2545f4914f6cdd1dull;
    return (double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static double *randn_like(int n, double scale) {
    double *a = malloc(sizeof(double) * (size_t)n);
    CLCNN_ASSERT(a);
    for (int i = 0; i < n; i++)
        a[i] = scale * urand();
    return a;
}

static double *zeros(int n) {
    double *a = calloc((size_t)n, sizeof(double));
    CLCNN_ASSERT(a);
    return a;
}

static double dot(const double *a, const double *b, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* max_i |got_i - want_i| / max(max_i |want_i|, 1e-30): the error relative to the tensor's scale. */
static double err_vs_max(const double *got, const double *want, int n) {
    double worst = 0.0, scale = 1e-30;
    for (int i = 0; i < n; i++) {
        double d = fabs(got[i] - want[i]);
        if (!(d <= worst)) worst = d;
        if (fabs(want[i]) > scale) scale = fabs(want[i]);
    }
    return worst / scale;
}

/* Runs a forward pass of the case in ctx, writing its nout outputs. */
typedef void (*forward_fn)(double *out, void *ctx);

/* The worst FD error (see FD_TOL) over the n entries of param, for the vector-Jacobian product
 * that backward computes: d(sum_i out_i * gy_i)/d param. The outputs of the two perturbed passes
 * are subtracted before they are weighted and summed, so outputs that do not depend on the
 * parameter cancel exactly instead of adding their rounding to the difference. The step is
 * divided by the difference actually represented, which is not 2h when |param| is large (a
 * logit of 1000 has ulp 1e-13). */
static double fd_error(forward_fn f, void *ctx, int nout, const double *gy, double *param,
                       const double *analytic, int n) {
    double *op = zeros(nout), *om = zeros(nout), worst = 0.0;
    for (int i = 0; i < n; i++) {
        double saved = param[i], xp = saved + FD_H, xm = saved - FD_H;
        param[i] = xp;
        f(op, ctx);
        param[i] = xm;
        f(om, ctx);
        param[i] = saved;
        double diff = 0.0;
        for (int k = 0; k < nout; k++)
            diff += (op[k] - om[k]) * gy[k];
        double fd = diff / (xp - xm);
        double err = fabs(fd - analytic[i]) / fmax(fabs(analytic[i]), FD_FLOOR);
        if (!(err <= worst)) worst = err;
    }
    free(op), free(om);
    return worst;
}

/* ---- conv2d, maxpool, linear, relu: FD of the output against a random cotangent gy ---- */

typedef struct conv_case {
    int N, C, H, W, OC, K, stride, pad, bias;
    double *x, *w, *b;
} conv_case;

static int conv_out(int in, int K, int stride, int pad) {
    return (in + 2 * pad - K) / stride + 1;
}

static void conv_fwd(double *y, void *ctx) {
    conv_case *c = ctx;
    clcnn_ref_conv2d_forward(y, c->x, c->w, c->bias ? c->b : NULL, c->N, c->C, c->H, c->W, c->OC,
                             c->K, c->stride, c->pad);
}

static void check_conv(int N, int C, int H, int W, int OC, int K, int stride, int pad, int bias) {
    conv_case c = {N, C, H, W, OC, K, stride, pad, bias, NULL, NULL, NULL};
    int nx = N * C * H * W, nw = OC * C * K * K;
    int ny = N * OC * conv_out(H, K, stride, pad) * conv_out(W, K, stride, pad);
    c.x = randn_like(nx, 1.0);
    c.w = randn_like(nw, 0.5);
    c.b = randn_like(OC, 0.5);
    double *gy = randn_like(ny, 1.0);
    double *gx = zeros(nx), *gw = zeros(nw), *gb = zeros(OC);
    clcnn_ref_conv2d_backward(gx, gw, bias ? gb : NULL, gy, c.x, c.w, N, C, H, W, OC, K, stride,
                              pad);
    char group[64];
    snprintf(group, sizeof group, "conv2d %dx%d K%d s%d p%d%s", H, W, K, stride, pad,
             bias ? " bias" : "");
    report(group, "gx", fd_error(conv_fwd, &c, ny, gy, c.x, gx, nx), FD_TOL);
    report(group, "gw", fd_error(conv_fwd, &c, ny, gy, c.w, gw, nw), FD_TOL);
    if (bias) report(group, "gb", fd_error(conv_fwd, &c, ny, gy, c.b, gb, OC), FD_TOL);

    /* Backward adds, and a NULL gradient leaves the others unchanged: a second call with only
     * gw must give exactly 2*gw (x + x is exact, and each term is the same product). */
    double *gw2 = zeros(nw);
    for (int i = 0; i < nw; i++)
        gw2[i] = gw[i];
    clcnn_ref_conv2d_backward(NULL, gw2, NULL, gy, c.x, c.w, N, C, H, W, OC, K, stride, pad);
    double worst = 0.0;
    for (int i = 0; i < nw; i++)
        worst = fmax(worst, fabs(gw2[i] - 2.0 * gw[i]));
    report(group, "gw adds", worst, 1e-12);
    free(gw2);
    free(gx), free(gw), free(gb);
    free(c.x), free(c.w), free(c.b), free(gy);
}

/* ---- maxpool2d ---- */

typedef struct pool_case {
    int N, C, H, W, K, stride, pad;
    double *x;
    int *argmax;
} pool_case;

static void pool_fwd(double *y, void *ctx) {
    pool_case *p = ctx;
    clcnn_ref_maxpool2d_forward(y, p->argmax, p->x, p->N, p->C, p->H, p->W, p->K, p->stride,
                                p->pad);
}

/* n values 0.01 apart, centred on 0, in random order: no window of a max pool has a tie or a
 * near-tie that a step of 1e-6 could flip, so the max is locally linear and FD is exact. */
static double *shuffled_grid(int n) {
    double *x = zeros(n);
    for (int i = 0; i < n; i++)
        x[i] = 0.01 * i - 0.005 * n;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)((urand() + 1.0) * 0.5 * (i + 1));
        double t = x[i];
        x[i] = x[j], x[j] = t;
    }
    return x;
}

static void check_pool(int N, int C, int H, int W, int K, int stride, int pad) {
    pool_case p = {N, C, H, W, K, stride, pad, NULL, NULL};
    int nx = N * C * H * W, ny = N * C * conv_out(H, K, stride, pad) * conv_out(W, K, stride, pad);
    p.x = shuffled_grid(nx);
    double *gy = randn_like(ny, 1.0), *y = zeros(ny);
    p.argmax = malloc(sizeof(int) * (size_t)ny);
    CLCNN_ASSERT(p.argmax);
    double *gx = zeros(nx);
    pool_fwd(y, &p);
    clcnn_ref_maxpool2d_backward(gx, gy, p.argmax, N, C, H, W, K, stride, pad);
    char group[64];
    snprintf(group, sizeof group, "maxpool %dx%d K%d s%d p%d", H, W, K, stride, pad);
    report(group, "gx", fd_error(pool_fwd, &p, ny, gy, p.x, gx, nx), FD_TOL);
    free(gx), free(p.x), free(gy), free(y), free(p.argmax);
}

/* ---- avgpool2d (count_include_pad: every window divides by K*K), global pools ---- */

static void avgpool_fwd(double *y, void *ctx) {
    pool_case *p = ctx;
    clcnn_ref_avgpool2d_forward(y, p->x, p->N, p->C, p->H, p->W, p->K, p->stride, p->pad);
}

/* Linear in x: FD is exact. */
static void check_avgpool(int N, int C, int H, int W, int K, int stride, int pad) {
    pool_case p = {N, C, H, W, K, stride, pad, NULL, NULL};
    int nx = N * C * H * W, ny = N * C * conv_out(H, K, stride, pad) * conv_out(W, K, stride, pad);
    p.x = randn_like(nx, 1.0);
    double *gy = randn_like(ny, 1.0), *gx = zeros(nx);
    clcnn_ref_avgpool2d_backward(gx, gy, N, C, H, W, K, stride, pad);
    char group[64];
    snprintf(group, sizeof group, "avgpool %dx%d K%d s%d p%d", H, W, K, stride, pad);
    report(group, "gx", fd_error(avgpool_fwd, &p, ny, gy, p.x, gx, nx), FD_TOL);
    free(gx), free(p.x), free(gy);
}

static void globalavgpool_fwd(double *y, void *ctx) {
    pool_case *p = ctx;
    clcnn_ref_globalavgpool_forward(y, p->x, p->N * p->C, p->H * p->W);
}

static void globalmaxpool_fwd(double *y, void *ctx) {
    pool_case *p = ctx;
    clcnn_ref_globalmaxpool_forward(y, p->argmax, p->x, p->N * p->C, p->H * p->W);
}

/* The global average is linear; the global max is linear away from ties, which the shuffled
 * grid keeps 0.01 away. The max pool's backward routes by the argmax of the unperturbed pass. */
static void check_global_pools(int N, int C, int H, int W) {
    pool_case p = {N, C, H, W, 0, 0, 0, NULL, NULL};
    int nx = N * C * H * W, ny = N * C;
    double *gy = randn_like(ny, 1.0), *y = zeros(ny), *gx = zeros(nx);
    char group[64];
    p.x = randn_like(nx, 1.0);
    clcnn_ref_globalavgpool_backward(gx, gy, ny, H * W);
    snprintf(group, sizeof group, "globalavgpool N%d C%d %dx%d", N, C, H, W);
    report(group, "gx", fd_error(globalavgpool_fwd, &p, ny, gy, p.x, gx, nx), FD_TOL);
    free(p.x), free(gx);
    p.x = shuffled_grid(nx);
    gx = zeros(nx);
    p.argmax = malloc(sizeof(int) * (size_t)ny);
    CLCNN_ASSERT(p.argmax);
    globalmaxpool_fwd(y, &p);
    clcnn_ref_globalmaxpool_backward(gx, gy, p.argmax, ny, H * W);
    snprintf(group, sizeof group, "globalmaxpool N%d C%d %dx%d", N, C, H, W);
    report(group, "gx", fd_error(globalmaxpool_fwd, &p, ny, gy, p.x, gx, nx), FD_TOL);
    free(gx), free(p.x), free(gy), free(y), free(p.argmax);
}

/* ---- add, cat, mul: several inputs ----
 * Every output is linear in each single input element (a sum, a copy, a product with the
 * other factor held), so the central difference is exact but for rounding, as for conv; each
 * input's gradient is checked against FD of that input alone. */
enum { JOIN_ADD, JOIN_CAT, JOIN_MUL, JOIN_MAX_IN = 3 };

typedef struct join_case {
    int kind, n_in, N;
    int c[JOIN_MAX_IN], hw[JOIN_MAX_IN]; /* input k: N x c[k] x hw[k] */
    double *x[JOIN_MAX_IN];
} join_case;

static int join_out(const join_case *j) {
    int C = j->c[0], HW = j->hw[0];
    for (int k = 1; k < j->n_in; k++) {
        if (j->kind == JOIN_CAT) C += j->c[k];
        if (j->hw[k] > HW) HW = j->hw[k];
    }
    return j->N * C * HW;
}

static void join_fwd(double *y, void *ctx) {
    const join_case *j = ctx;
    const double *x[JOIN_MAX_IN];
    for (int k = 0; k < j->n_in; k++)
        x[k] = j->x[k];
    if (j->kind == JOIN_ADD) clcnn_ref_add_forward(y, x, j->n_in, j->N * j->c[0] * j->hw[0]);
    if (j->kind == JOIN_CAT) clcnn_ref_cat_forward(y, x, j->c, j->n_in, j->N, j->hw[0]);
    if (j->kind == JOIN_MUL)
        clcnn_ref_mul_forward(y, x[0], x[1], j->N, j->c[0], j->hw[0], j->hw[1]);
}

static void join_bwd(const join_case *j, double *const *gx, const double *gy) {
    if (j->kind == JOIN_ADD) clcnn_ref_add_backward(gx, gy, j->n_in, j->N * j->c[0] * j->hw[0]);
    if (j->kind == JOIN_CAT) clcnn_ref_cat_backward(gx, gy, j->c, j->n_in, j->N, j->hw[0]);
    if (j->kind == JOIN_MUL)
        clcnn_ref_mul_backward(gx[0], gx[1], gy, j->x[0], j->x[1], j->N, j->c[0], j->hw[0],
                               j->hw[1]);
}

/* Inputs k < n_in of c[k] x hw[k] each (a sum and a product take equal channels). */
static void check_join(int kind, int N, int n_in, const int *c, const int *hw) {
    static const char *const names[] = {"add", "cat", "mul"};
    join_case j = {kind, n_in, N, {0}, {0}, {NULL}};
    double *gx[JOIN_MAX_IN] = {NULL}, *g2[JOIN_MAX_IN] = {NULL};
    int nx[JOIN_MAX_IN];
    char group[64], what[16];
    size_t used = (size_t)snprintf(group, sizeof group, "%s N%d", names[kind], N);
    for (int k = 0; k < n_in; k++) {
        j.c[k] = c[k], j.hw[k] = hw[k], nx[k] = N * c[k] * hw[k];
        j.x[k] = randn_like(nx[k], 1.0);
        gx[k] = zeros(nx[k]), g2[k] = zeros(nx[k]);
        if (used < sizeof group)
            used += (size_t)snprintf(group + used, sizeof group - used, "%s%dx%d", k ? "," : " ",
                                     c[k], hw[k]);
    }
    int ny = join_out(&j);
    double *gy = randn_like(ny, 1.0);
    join_bwd(&j, gx, gy);
    for (int k = 0; k < n_in; k++) {
        snprintf(what, sizeof what, "gx%d", k);
        report(group, what, fd_error(join_fwd, &j, ny, gy, j.x[k], gx[k], nx[k]), FD_TOL);
    }
    /* Backward adds, and skips a NULL gradient: with gx0 NULL, a second call leaves the others
     * at twice the first (but for the rounding of a gate's plane sum added onto its first
     * value, < 1e-15 here). */
    double *second[JOIN_MAX_IN] = {NULL}, worst = 0.0;
    for (int k = 1; k < n_in; k++) {
        memcpy(g2[k], gx[k], sizeof(double) * (size_t)nx[k]);
        second[k] = g2[k];
    }
    join_bwd(&j, second, gy);
    for (int k = 1; k < n_in; k++)
        for (int i = 0; i < nx[k]; i++)
            worst = fmax(worst, fabs(g2[k][i] - 2.0 * gx[k][i]));
    report(group, "adds", worst, 1e-12);
    for (int k = 0; k < n_in; k++)
        free(j.x[k]), free(gx[k]), free(g2[k]);
    free(gy);
}

/* ---- dropout with a fixed mask, scale ----
 * Each is one function that the layer tests apply to x for the forward and to gy for the
 * backward (a diagonal map is its own transpose). FD proves that reuse right (gx), and the FD
 * Jacobian must be the layer's own definition (jacobian): diagonal, with 1/(1-p) (in float,
 * as the device) where the header's rule keeps element i, (hash(seed, i) >> 8) / 2^24 >= p,
 * and 0 elsewhere; for scale, the factor rounded to float. The mask depends only on the seed
 * and the index, so for a fixed seed dropout is a linear function that FD differentiates
 * exactly. */

typedef struct diag_case {
    int n, dropout;
    uint32_t seed;
    double p, *x;
} diag_case;

static void diag_fwd(double *y, void *ctx) {
    diag_case *d = ctx;
    for (int i = 0; i < d->n; i++)
        y[i] = 0.0; /* both add into y */
    if (d->dropout)
        clcnn_ref_dropout(y, d->x, d->n, d->seed, 0, d->p);
    else
        clcnn_ref_scale(y, d->x, d->n, d->p);
}

/* The FD Jacobian of diag_fwd against want (n x n, row = output): the largest difference. */
static double jacobian_error(diag_case *d, const double *want) {
    int n = d->n;
    double *op = zeros(n), *om = zeros(n), worst = 0.0;
    for (int j = 0; j < n; j++) {
        double saved = d->x[j], xp = saved + FD_H, xm = saved - FD_H;
        d->x[j] = xp;
        diag_fwd(op, d);
        d->x[j] = xm;
        diag_fwd(om, d);
        d->x[j] = saved;
        for (int k = 0; k < n; k++) {
            double e = fabs((op[k] - om[k]) / (xp - xm) - want[k * n + j]);
            if (!(e <= worst)) worst = e;
        }
    }
    free(op), free(om);
    return worst;
}

/* dropout: p is the drop probability; scale (dropout 0): p is the factor. */
static void check_diag(int dropout, int n, uint32_t seed, double p) {
    diag_case d = {n, dropout, seed, p, NULL};
    d.x = randn_like(n, 1.0);
    double *gy = randn_like(n, 1.0), *gx = zeros(n), *want = zeros(n * n);
    if (dropout)
        clcnn_ref_dropout(gx, gy, n, seed, 0, p);
    else
        clcnn_ref_scale(gx, gy, n, p);
    int kept = 0;
    for (int i = 0; i < n; i++) {
        int keep = !dropout || (clcnn_ref_dropout_hash(seed, (uint32_t)i) >> 8) / 16777216.0 >= p;
        double v = dropout ? (p < 1.0 ? (double)(float)(1.0 / (1.0 - p)) : 0.0) : (double)(float)p;
        want[i * n + i] = keep ? v : 0.0;
        kept += keep;
    }
    char group[64];
    if (dropout)
        snprintf(group, sizeof group, "dropout p%g n%d s%u (%d kept)", p, n, seed, kept);
    else
        snprintf(group, sizeof group, "scale %g n%d", p, n);
    report(group, "gx", fd_error(diag_fwd, &d, n, gy, d.x, gx, n), FD_TOL);
    /* Entries are 0, 1 or a float constant of O(1): FD's rounding, ~1e-10, is all that is left. */
    report(group, "jacobian", jacobian_error(&d, want), 1e-8);
    free(d.x), free(gy), free(gx), free(want);
}

/* ---- linear ---- */

typedef struct linear_case {
    int N, IN, OUT, bias;
    double *x, *w, *b;
} linear_case;

static void linear_fwd(double *y, void *ctx) {
    linear_case *l = ctx;
    clcnn_ref_linear_forward(y, l->x, l->w, l->bias ? l->b : NULL, l->N, l->IN, l->OUT);
}

static void check_linear(int N, int IN, int OUT, int bias) {
    linear_case l = {N, IN, OUT, bias, NULL, NULL, NULL};
    l.x = randn_like(N * IN, 1.0);
    l.w = randn_like(OUT * IN, 0.5);
    l.b = randn_like(OUT, 0.5);
    double *gy = randn_like(N * OUT, 1.0);
    double *gx = zeros(N * IN), *gw = zeros(OUT * IN), *gb = zeros(OUT);
    clcnn_ref_linear_backward(gx, gw, bias ? gb : NULL, gy, l.x, l.w, N, IN, OUT);
    char group[64];
    snprintf(group, sizeof group, "linear %d->%d N%d%s", IN, OUT, N, bias ? " bias" : "");
    int ny = N * OUT;
    report(group, "gx", fd_error(linear_fwd, &l, ny, gy, l.x, gx, N * IN), FD_TOL);
    report(group, "gw", fd_error(linear_fwd, &l, ny, gy, l.w, gw, OUT * IN), FD_TOL);
    if (bias) report(group, "gb", fd_error(linear_fwd, &l, ny, gy, l.b, gb, OUT), FD_TOL);
    free(gx), free(gw), free(gb), free(l.x), free(l.w), free(l.b), free(gy);
}

/* ---- relu ---- */

typedef struct relu_case {
    int n;
    double *x;
} relu_case;

static void relu_fwd(double *y, void *ctx) {
    relu_case *r = ctx;
    clcnn_ref_relu_forward(y, r->x, r->n);
}

static void check_relu(void) {
    enum { n = 24 };
    double x[n], gy[n], y[n], gx[n] = {0};
    relu_case r = {n, x};
    /* |x| >= 0.1: far from the kink, where FD is undefined. */
    for (int i = 0; i < n; i++) {
        double u = urand();
        x[i] = (u < 0 ? -0.1 : 0.1) + u;
        gy[i] = urand();
    }
    relu_fwd(y, &r);
    clcnn_ref_relu_backward(gx, gy, y, n);
    report("relu n24", "gx", fd_error(relu_fwd, &r, n, gy, x, gx, n), FD_TOL);

    /* PyTorch: relu(NaN) = NaN and its gradient passes (threshold_backward tests y <= 0). */
    double xn[3] = {NAN, -1.0, 2.0}, yn[3], gn[3] = {0}, ones[3] = {1, 1, 1};
    clcnn_ref_relu_forward(yn, xn, 3);
    clcnn_ref_relu_backward(gn, ones, yn, 3);
    int ok = isnan(yn[0]) && yn[1] == 0.0 && yn[2] == 2.0 && gn[0] == 1 && gn[1] == 0 && gn[2] == 1;
    report("relu NaN as torch", "y, gx", ok ? 0.0 : 1.0, 0.0);
}

typedef struct leaky_case {
    int n;
    double *x, slope;
} leaky_case;

static void leakyrelu_fwd(double *y, void *ctx) {
    leaky_case *r = ctx;
    clcnn_ref_leakyrelu_forward(y, r->x, r->n, r->slope);
}

/* LeakyReLU, for PyTorch's default slope, a negative one and one above 1: FD away from the
 * kink; at 0 and for NaN, PyTorch's choices (the slope's side; NaN passes, scaled). */
static void check_leakyrelu(void) {
    enum { n = 24 };
    static const double slopes[] = {0.01, -0.3, 2.5};
    double x[n], gy[n], y[n], gx[n];
    for (int s = 0; s < 3; s++) {
        leaky_case r = {n, x, slopes[s]};
        for (int i = 0; i < n; i++) {
            double u = urand();
            x[i] = (u < 0 ? -0.1 : 0.1) + u;
            gy[i] = urand();
            gx[i] = 0.0;
        }
        leakyrelu_fwd(y, &r);
        clcnn_ref_leakyrelu_backward(gx, gy, x, n, r.slope);
        char name[40];
        snprintf(name, sizeof name, "leakyrelu(%g) n24", r.slope);
        report(name, "gx", fd_error(leakyrelu_fwd, &r, n, gy, x, gx, n), FD_TOL);
    }
    double xn[3] = {NAN, 0.0, 2.0}, yn[3], gn[3] = {0}, ones[3] = {1, 1, 1};
    clcnn_ref_leakyrelu_forward(yn, xn, 3, 0.5);
    clcnn_ref_leakyrelu_backward(gn, ones, xn, 3, 0.5);
    int ok =
        isnan(yn[0]) && yn[1] == 0.0 && yn[2] == 2.0 && gn[0] == 0.5 && gn[1] == 0.5 && gn[2] == 1;
    report("leakyrelu 0 and NaN as torch", "y, gx", ok ? 0.0 : 1.0, 0.0);
}

static void gelu_fwd(double *y, void *ctx) {
    relu_case *r = ctx;
    clcnn_ref_gelu_forward(y, r->x, r->n);
}

/* GELU is smooth: FD everywhere, including around 0 and in both tails. */
static void check_gelu(void) {
    enum { n = 24 };
    double x[n], gy[n], gx[n] = {0};
    relu_case r = {n, x};
    for (int i = 0; i < n; i++)
        x[i] = 4.0 * urand(), gy[i] = urand();
    clcnn_ref_gelu_backward(gx, gy, x, n);
    report("gelu n24", "gx", fd_error(gelu_fwd, &r, n, gy, x, gx, n), FD_TOL);
}

/* The dropout hash keeps each element with probability 1 - p: over 2^20 elements of one
 * seed, the kept fraction is within 5 standard deviations (0.25% here) of 1 - p, and two
 * seeds' masks agree on about (1-p)^2 + p^2 of the elements, as independent draws would. So do
 * the masks of indices i and i + 2^32 (a global batch past 2^32 elements must not repeat its
 * first 2^32 masks), and the 64-bit hash is the 32-bit one below 2^32. */
static void check_dropout_hash(void) {
    enum { n = 1 << 20 };
    const double p = 0.3;
    const uint32_t t = (uint32_t)(p * 16777216.0);
    long kept = 0, agree = 0, kept_hi = 0, agree_hi = 0, same32 = 0;
    for (uint32_t i = 0; i < n; i++) {
        int a = (clcnn_ref_dropout_hash(12345u, i) >> 8) >= t;
        int b = (clcnn_ref_dropout_hash(12346u, i) >> 8) >= t;
        int c = (clcnn_ref_dropout_hash64(12345u, ((uint64_t)1 << 32) + i) >> 8) >= t;
        kept += a, agree += a == b, kept_hi += c, agree_hi += a == c;
        same32 += clcnn_ref_dropout_hash64(12345u, (uint64_t)0xFFF00000u + i) ==
                  clcnn_ref_dropout_hash(12345u, 0xFFF00000u + i);
    }
    double fk = (double)kept / n, fa = (double)agree / n;
    double fkh = (double)kept_hi / n, fah = (double)agree_hi / n;
    report("dropout hash", "kept", fabs(fk - (1 - p)), 0.0025);
    report("dropout hash", "2 seeds", fabs(fa - ((1 - p) * (1 - p) + p * p)), 0.0025);
    report("dropout hash", "kept past 2^32", fabs(fkh - (1 - p)), 0.0025);
    report("dropout hash", "i and i + 2^32", fabs(fah - ((1 - p) * (1 - p) + p * p)), 0.0025);
    report("dropout hash", "64-bit below 2^32", (double)(n - same32), 0.0);
}

/* ---- batchnorm (training) ----
 * Every output of a channel moves with each of its inputs (through the batch mean and
 * variance), smoothly: truncation stays ~h^2. But the rounding of all M outputs of the channel
 * (|y| up to sqrt(M)) enters each difference, ~1e-9 absolute, which is 1e-6 at FD_FLOOR: bn
 * takes BN_FD_TOL = 1e-5 (observed <= 1e-6 over a thousand draws); a wrong term is O(1). */
#define BN_FD_TOL 1e-5

typedef struct bn_case {
    int N, C, HW;
    double eps, *x, *w, *b;
} bn_case;

static void bn_fwd(double *y, void *ctx) {
    bn_case *c = ctx;
    clcnn_ref_bn_forward_train(y, NULL, NULL, c->x, c->w, c->b, c->N, c->C, c->HW, c->eps, 0.1);
}

static void check_bn(int N, int C, int HW, double eps) {
    bn_case c = {N, C, HW, eps, NULL, NULL, NULL};
    int nx = N * C * HW;
    c.x = randn_like(nx, 1.0);
    c.w = randn_like(C, 1.0);
    c.b = randn_like(C, 0.5);
    double *gy = randn_like(nx, 1.0), *gx = zeros(nx), *gw = zeros(C), *gb = zeros(C);
    clcnn_ref_bn_backward(gx, gw, gb, gy, c.x, c.w, N, C, HW, eps);
    char group[64];
    snprintf(group, sizeof group, "batchnorm N%d C%d HW%d eps %g", N, C, HW, eps);
    report(group, "gx", fd_error(bn_fwd, &c, nx, gy, c.x, gx, nx), BN_FD_TOL);
    report(group, "gw", fd_error(bn_fwd, &c, nx, gy, c.w, gw, C), BN_FD_TOL);
    report(group, "gb", fd_error(bn_fwd, &c, nx, gy, c.b, gb, C), BN_FD_TOL);
    free(gy), free(gx), free(gw), free(gb), free(c.x), free(c.w), free(c.b);
}

/* PyTorch's numbers for one channel of 1, 2, 3, 4 (BatchNorm1d(1), weight 1, bias 0, running
 * statistics 0 and 1, momentum 0.1): mean 2.5, biased variance 1.25, unbiased 5/3; a training
 * step leaves running_mean 0.25 and running_var 0.9 + 1/6; evaluation then normalises by
 * those. */
static void check_bn_stats(void) {
    const double x[4] = {1, 2, 3, 4}, w[1] = {1}, b[1] = {0};
    double y[4], ye[4], rm[1] = {0}, rv[1] = {1}, worst = 0.0;
    clcnn_ref_bn_forward_train(y, rm, rv, x, w, b, 4, 1, 1, 1e-5, 0.1);
    for (int i = 0; i < 4; i++)
        worst = fmax(worst, fabs(y[i] - (x[i] - 2.5) / sqrt(1.25 + 1e-5)));
    worst = fmax(worst, fabs(rm[0] - 0.25));
    worst = fmax(worst, fabs(rv[0] - (0.9 + 0.1 * 5.0 / 3.0)));
    clcnn_ref_bn_forward_eval(ye, x, w, b, rm, rv, 4, 1, 1, 1e-5);
    for (int i = 0; i < 4; i++)
        worst = fmax(worst, fabs(ye[i] - (x[i] - rm[0]) / sqrt(rv[0] + 1e-5)));
    report("batchnorm as torch", "y, stats", worst, 1e-15);
}

/* ---- cross-entropy ---- */

typedef struct ce_case {
    int N, K;
    double *logits;
    const unsigned char *labels;
} ce_case;

/* The loss is the one output; its cotangent is 1. */
static const double one_cotangent[1] = {1.0};

static void ce_fwd(double *loss, void *ctx) {
    ce_case *c = ctx;
    *loss = clcnn_ref_cross_entropy(NULL, NULL, c->logits, c->labels, c->N, c->K);
}

static void check_ce_case(const char *group, int N, int K, double *logits,
                          const unsigned char *labels) {
    ce_case c = {N, K, logits, labels};
    double *g = zeros(N * K);
    for (int i = 0; i < N * K; i++)
        g[i] = 123.0; /* glogits is set, not added to */
    double loss = clcnn_ref_cross_entropy(g, NULL, logits, labels, N, K);
    int finite = isfinite(loss);
    for (int i = 0; i < N * K; i++)
        finite = finite && isfinite(g[i]);
    report(group, "finite", finite ? 0.0 : 1.0, 0.0);
    report(group, "glogits", fd_error(ce_fwd, &c, 1, one_cotangent, logits, g, N * K), FD_TOL);
    free(g);
}

static void check_ce(void) {
    enum { N = 4, K = 6 };
    double logits[N * K];
    const unsigned char labels[N] = {0, 5, 2, 3};
    for (int i = 0; i < N * K; i++)
        logits[i] = 2.0 * urand();
    /* Row 2 around +1000 (exp would overflow without the max shift), row 3 around -1000
     * (would underflow to log(0)). Their spread of a few units keeps softmax non-degenerate. */
    for (int k = 0; k < K; k++)
        logits[2 * K + k] = 1000.0 + 3.0 * urand();
    for (int k = 0; k < K; k++)
        logits[3 * K + k] = -1000.0 + 3.0 * urand();
    check_ce_case("cross-entropy N4 K6 +-1000", N, K, logits, labels);

    double one[K];
    const unsigned char label1[1] = {4};
    for (int k = 0; k < K; k++)
        one[k] = 1.5 * urand();
    check_ce_case("cross-entropy N1 K6", 1, K, one, label1);

    /* Hand-computed: loss of logits all equal is log(K); argmax takes the first maximum. */
    /* Rows 0 and 1 are right only under the first-maximum rule, row 3 is wrong under any. */
    double eq[4 * 3] = {1, 3, 3, 2, 2, 0, 0, 0, 5, 4, 1, 1};
    const unsigned char eql[4] = {1, 0, 2, 2};
    int correct = -1;
    clcnn_ref_cross_entropy(NULL, &correct, eq, eql, 4, 3);
    report("cross-entropy argmax ties", "correct", correct == 3 ? 0.0 : 1.0, 0.0);
    double flat[4] = {7, 7, 7, 7};
    const unsigned char fl[1] = {3};
    double l = clcnn_ref_cross_entropy(NULL, NULL, flat, fl, 1, 4);
    report("cross-entropy equal logits", "log(4)", fabs(l - log(4.0)) / log(4.0), 1e-15);
}

/* ---- composed: CE(linear(flatten(maxpool(relu(conv(x)))))) ---- */

enum { CN = 2, CC = 2, CH = 6, CW = 6, COC = 3, CK = 3, CPH = 3, CPW = 3, CF = COC * CPH * CPW };
enum { CCLASSES = 4 };

typedef struct net_case {
    double x[CN * CC * CH * CW], w[COC * CC * CK * CK], b[COC];
    double w2[CCLASSES * CF], b2[CCLASSES];
    unsigned char labels[CN];
    /* activations */
    double conv[CN * COC * CH * CW], relu[CN * COC * CH * CW], pool[CN * CF];
    int argmax[CN * CF];
    double logits[CN * CCLASSES];
} net_case;

static void net_fwd(double *loss, void *ctx) {
    net_case *t = ctx;
    clcnn_ref_conv2d_forward(t->conv, t->x, t->w, t->b, CN, CC, CH, CW, COC, CK, 1, 1);
    clcnn_ref_relu_forward(t->relu, t->conv, CN * COC * CH * CW);
    clcnn_ref_maxpool2d_forward(t->pool, t->argmax, t->relu, CN, COC, CH, CW, 2, 2, 0);
    /* flatten is a no-op on NCHW memory: (N,C,H,W) is already (N, C*H*W) */
    clcnn_ref_linear_forward(t->logits, t->pool, t->w2, t->b2, CN, CF, CCLASSES);
    *loss = clcnn_ref_cross_entropy(NULL, NULL, t->logits, t->labels, CN, CCLASSES);
}

static void check_composed(void) {
    static net_case t;
    static double glogits[CN * CCLASSES], gpool[CN * CF], grelu[CN * COC * CH * CW],
        gconv[CN * COC * CH * CW], gw[COC * CC * CK * CK], gb[COC];
    for (size_t i = 0; i < sizeof t.x / sizeof t.x[0]; i++)
        t.x[i] = urand();
    for (size_t i = 0; i < sizeof t.w / sizeof t.w[0]; i++)
        t.w[i] = 0.5 * urand();
    /* A positive bias keeps most units active, so the gradient has something to flow through. */
    for (int i = 0; i < COC; i++)
        t.b[i] = 0.3 + 0.1 * urand();
    for (size_t i = 0; i < sizeof t.w2 / sizeof t.w2[0]; i++)
        t.w2[i] = 0.5 * urand();
    for (int i = 0; i < CCLASSES; i++)
        t.b2[i] = 0.1 * urand();
    t.labels[0] = 1, t.labels[1] = 3;

    double loss;
    net_fwd(&loss, &t);
    clcnn_ref_cross_entropy(glogits, NULL, t.logits, t.labels, CN, CCLASSES);
    clcnn_ref_linear_backward(gpool, NULL, NULL, glogits, t.pool, t.w2, CN, CF, CCLASSES);
    clcnn_ref_maxpool2d_backward(grelu, gpool, t.argmax, CN, COC, CH, CW, 2, 2, 0);
    clcnn_ref_relu_backward(gconv, grelu, t.relu, CN * COC * CH * CW);
    clcnn_ref_conv2d_backward(NULL, gw, gb, gconv, t.x, t.w, CN, CC, CH, CW, COC, CK, 1, 1);
    report("composed conv-relu-pool-linear-CE", "conv gw",
           fd_error(net_fwd, &t, 1, one_cotangent, t.w, gw, COC * CC * CK * CK), FD_TOL);
    report("composed conv-relu-pool-linear-CE", "conv gb",
           fd_error(net_fwd, &t, 1, one_cotangent, t.b, gb, COC), FD_TOL);
}

/* ---- maxpool tie rules (PyTorch's CPU kernel, aten/src/ATen/native/cpu/MaxPoolKernel.cpp
 * cpu_max_pool: maxindex starts at the clipped window's first in-bounds element, maxval at
 * -inf, and `val > maxval || isnan(val)` replaces both). Expected indices below were also
 * printed by torch 1.13 F.max_pool2d(..., return_indices=True) for the -inf and NaN cases. */

static int pool_indices_match(const double *x, int H, int W, int K, int stride, int pad,
                              const int *want, const double *want_y, int ny) {
    double y[16];
    int am[16];
    CLCNN_ASSERT(ny <= 16);
    clcnn_ref_maxpool2d_forward(y, am, x, 1, 1, H, W, K, stride, pad);
    int ok = 1;
    for (int i = 0; i < ny; i++) {
        if (am[i] != want[i]) {
            printf("     window %d: argmax %d, want %d\n", i, am[i], want[i]);
            ok = 0;
        }
        int same = isnan(want_y[i]) ? isnan(y[i])
                                    : y[i] == want_y[i] && signbit(y[i]) == signbit(want_y[i]);
        if (!same) {
            printf("     window %d: y %g, want %g\n", i, y[i], want_y[i]);
            ok = 0;
        }
    }
    return ok;
}

static void check_pool_ties(void) {
    /* K2 s2: a tie of 3s (first wins), all-equal 5s, -0.0 before 0.0 (equal under '>': the
     * first, -0.0, wins and is the output), and three 7s. */
    const double x1[16] = {1, 3, 5, 5, 3, 2, 5, 5, -1, -0.0, 7, 1, 0.0, -1, 7, 7};
    const int a1[4] = {1, 2, 9, 10};
    const double y1[4] = {3, 5, -0.0, 7};
    int ok = pool_indices_match(x1, 4, 4, 2, 2, 0, a1, y1, 4);
    report("maxpool ties K2 s2", "argmax", ok ? 0.0 : 1.0, 0.0);

    /* K3 s2 overlapping: both windows pick column 2 (first of the tied 9s), so its gradient is
     * the sum of both windows'. */
    const double x2[15] = {1, 2, 9, 9, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    const int a2[2] = {2, 2};
    const double y2[2] = {9, 9};
    ok = pool_indices_match(x2, 3, 5, 3, 2, 0, a2, y2, 2);
    double gx[15] = {0}, gy[2] = {1.0, 10.0};
    clcnn_ref_maxpool2d_backward(gx, gy, a2, 1, 1, 3, 5, 3, 2, 0);
    ok = ok && gx[2] == 11.0 && dot(gx, gx, 15) == 121.0;
    report("maxpool ties K3 s2 overlap", "argmax, gx", ok ? 0.0 : 1.0, 0.0);

    /* All -inf with padding: nothing beats the initial -inf, so each window reports its first
     * in-bounds element (torch 1.13: indices [[0, 1], [4, 5]]). */
    double x3[12];
    for (int i = 0; i < 12; i++)
        x3[i] = -INFINITY;
    const int a3[4] = {0, 1, 4, 5};
    const double y3[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    ok = pool_indices_match(x3, 3, 4, 3, 2, 1, a3, y3, 4);
    report("maxpool all -inf K3 s2 p1", "argmax", ok ? 0.0 : 1.0, 0.0);

    /* Padding never wins: all-negative input, each padded window covers one real element. */
    const double x4[4] = {-3, -1, -2, -4};
    const int a4[4] = {0, 1, 2, 3};
    ok = pool_indices_match(x4, 2, 2, 2, 2, 1, a4, x4, 4);
    report("maxpool negative K2 s2 p1", "argmax", ok ? 0.0 : 1.0, 0.0);

    /* NaN: every NaN replaces the running max, so the LAST NaN wins (torch 1.13: index 2). */
    const double x5[4] = {1, NAN, NAN, 2};
    const int a5[1] = {2};
    const double y5[1] = {NAN};
    ok = pool_indices_match(x5, 2, 2, 2, 2, 0, a5, y5, 1);
    report("maxpool NaN K2 s2", "argmax", ok ? 0.0 : 1.0, 0.0);
}

/* ---- optimizers: 2 steps on p0 = [1, -2, 0.5] with gradients g1, g2. Expected values printed
 * by torch 1.13.0a0 in float64 (/usr/bin/python3, torch.set_default_dtype(torch.float64),
 * p.grad set by hand, optimizer(..., foreach=False).step(), "%.17g"). Plain SGD checks by hand:
 * 1 - 0.1*0.1 = 0.99, then 0.99 + 0.1*0.4 = 1.03. Tolerance 1e-14 relative: the same formulas
 * in double, differing at most in the association of a product or two. */

static const double opt_p0[3] = {1.0, -2.0, 0.5};
static const double opt_g[2][3] = {{0.1, -0.2, 0.3}, {-0.4, 0.5, 0.6}};

static double opt_err(const double *p, const double *want) {
    double worst = 0.0;
    for (int i = 0; i < 3; i++) {
        double e = fabs(p[i] - want[i]) / fmax(fabs(want[i]), 1.0);
        if (!(e <= worst)) worst = e;
    }
    return worst;
}

static void check_sgd(const char *name, double lr, double momentum, double dampening, double wd,
                      int nesterov, const double want[2][3]) {
    double p[3], buf[3] = {0};
    memcpy(p, opt_p0, sizeof p);
    double worst = 0.0;
    for (int s = 0; s < 2; s++) {
        clcnn_ref_sgd_step(p, opt_g[s], buf, 3, lr, momentum, dampening, wd, nesterov, s + 1);
        worst = fmax(worst, opt_err(p, want[s]));
    }
    report(name, "2 steps", worst, 1e-14);
}

static void check_adam(const char *name, double lr, double beta1, double beta2, double eps,
                       double wd, int decoupled, const double want[2][3]) {
    double p[3], m[3] = {0}, v[3] = {0};
    memcpy(p, opt_p0, sizeof p);
    double worst = 0.0;
    for (int s = 0; s < 2; s++) {
        clcnn_ref_adam_step(p, opt_g[s], m, v, 3, lr, beta1, beta2, eps, wd, decoupled, s + 1);
        worst = fmax(worst, opt_err(p, want[s]));
    }
    report(name, "2 steps", worst, 1e-14);
}

static void check_optimizers(void) {
    /* SGD(lr=0.1) */
    const double sgd[2][3] = {{0.98999999999999999, -1.98, 0.46999999999999997},
                              {1.03, -2.0299999999999998, 0.40999999999999998}};
    /* SGD(lr=0.1, momentum=0.9, dampening=0.1): no dampening on the first step */
    const double mom[2][3] = {{0.98999999999999999, -1.98, 0.46999999999999997},
                              {1.0169999999999999, -2.0070000000000001, 0.38899999999999996}};
    /* SGD(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01) */
    const double nest[2][3] = {{0.97909999999999997, -1.9581999999999999, 0.44205},
                               {1.04432971, -2.03165942, 0.302505105}};
    /* Adam(lr=0.01) (betas 0.9/0.999, eps 1e-8) */
    const double adam[2][3] = {{0.99000000099999985, -1.9900000005, 0.4900000003333333},
                               {0.99559503574851282, -1.9944221530217234, 0.4803481802785633}};
    /* Adam(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1): L2 added to the gradient */
    const double adam_l2[2][3] = {{0.99000004999975, -1.9900000249999374, 0.49000002857134695},
                                  {0.99306246665182429, -1.9897016201213169, 0.48011498357354332}};
    /* AdamW(lr=0.01, weight_decay=0.1) (betas 0.9/0.999, eps 1e-8) */
    const double adamw[2][3] = {{0.98900000099999985, -1.9880000005, 0.4895000003333333},
                                {0.99360603574751283, -1.9904341530212235, 0.47935868027822998}};
    check_sgd("sgd lr0.1", 0.1, 0.0, 0.0, 0.0, 0, sgd);
    check_sgd("sgd momentum0.9 dampening0.1", 0.1, 0.9, 0.1, 0.0, 0, mom);
    check_sgd("sgd nesterov wd0.01", 0.1, 0.9, 0.0, 0.01, 1, nest);
    check_adam("adam lr0.01", 0.01, 0.9, 0.999, 1e-8, 0.0, 0, adam);
    check_adam("adam l2 0.1 betas0.8/0.99 eps1e-6", 0.01, 0.8, 0.99, 1e-6, 0.1, 0, adam_l2);
    check_adam("adamw wd0.1", 0.01, 0.9, 0.999, 1e-8, 0.1, 1, adamw);
}

/* ---- PyTorch fixtures (tests/fixtures/layers.safetensors, see its README) ----
 * PyTorch ran in fp32; the references run in double from the same fp32 inputs. Each output is
 * a sum of at most ~80 products (conv gw: N*OH*OW = 40 terms; conv y: C*K*K = 27), and fp32
 * accumulation errs by up to ~L * 2^-24 * sum|terms|, a few 1e-6 of the tensor's largest
 * entry: FIX_TOL = 1e-5 relative to the tensor's max |value|. Max pooling does no arithmetic in
 * the forward pass, so y and the routing of gx are compared exactly. */
#define FIX_TOL 1e-5

/* The tensor `name` as doubles (F32) or NULL after reporting why; numel is its element count. */
static double *fixture(const clcnn_st_file *f, const char *name, int *numel) {
    const clcnn_st_tensor *t = clcnn_st_find(f, name);
    if (!t || t->dtype != CLCNN_ST_F32) {
        printf("FAIL fixture %s: %s\n", name, t ? "not F32" : "missing");
        test_failures++;
        return NULL;
    }
    int n = (int)((t->end - t->begin) / 4);
    const unsigned char *src = clcnn_st_data(f, t);
    double *a = zeros(n > 0 ? n : 1);
    for (int i = 0; i < n; i++) {
        float v;
        memcpy(&v, src + 4 * (size_t)i, 4);
        a[i] = v;
    }
    if (numel) *numel = n;
    return a;
}

static int meta_int(const clcnn_st_file *f, const char *key) {
    const char *v = clcnn_st_meta(f, key);
    return v ? atoi(v) : -1;
}

static const int64_t *shape_of(const clcnn_st_file *f, const char *name) {
    const clcnn_st_tensor *t = clcnn_st_find(f, name);
    CLCNN_ASSERT(t);
    return t->shape;
}

static void fixture_conv(const clcnn_st_file *f) {
    int nx, nw, nb, ny, ngy, ngx, ngw, ngb;
    double *x = fixture(f, "conv.x", &nx), *w = fixture(f, "conv.w", &nw);
    double *b = fixture(f, "conv.b", &nb), *y = fixture(f, "conv.y", &ny);
    double *gy = fixture(f, "conv.gy", &ngy), *gx = fixture(f, "conv.gx", &ngx);
    double *gw = fixture(f, "conv.gw", &ngw), *gb = fixture(f, "conv.gb", &ngb);
    if (x && w && b && y && gy && gx && gw && gb) {
        const int64_t *xs = shape_of(f, "conv.x"), *ws = shape_of(f, "conv.w");
        int N = (int)xs[0], C = (int)xs[1], H = (int)xs[2], W = (int)xs[3];
        int OC = (int)ws[0], K = (int)ws[2];
        int stride = meta_int(f, "conv.stride"), pad = meta_int(f, "conv.padding");
        int OH = conv_out(H, K, stride, pad), OW = conv_out(W, K, stride, pad);
        CLCNN_ASSERT(ny == N * OC * OH * OW && ngy == ny && ngx == nx && ngw == nw && ngb == OC);
        double *ry = zeros(ny), *rgx = zeros(nx), *rgw = zeros(nw), *rgb = zeros(OC);
        clcnn_ref_conv2d_forward(ry, x, w, b, N, C, H, W, OC, K, stride, pad);
        clcnn_ref_conv2d_backward(rgx, rgw, rgb, gy, x, w, N, C, H, W, OC, K, stride, pad);
        report("fixture conv2d", "y", err_vs_max(ry, y, ny), FIX_TOL);
        report("fixture conv2d", "gx", err_vs_max(rgx, gx, nx), FIX_TOL);
        report("fixture conv2d", "gw", err_vs_max(rgw, gw, nw), FIX_TOL);
        report("fixture conv2d", "gb", err_vs_max(rgb, gb, OC), FIX_TOL);
        free(ry), free(rgx), free(rgw), free(rgb);
    }
    free(x), free(w), free(b), free(y), free(gy), free(gx), free(gw), free(gb);
}

static void fixture_pool(const clcnn_st_file *f) {
    int nx, ny, ngy, ngx;
    double *x = fixture(f, "pool.x", &nx), *y = fixture(f, "pool.y", &ny);
    double *gy = fixture(f, "pool.gy", &ngy), *gx = fixture(f, "pool.gx", &ngx);
    if (x && y && gy && gx) {
        const int64_t *xs = shape_of(f, "pool.x");
        int N = (int)xs[0], C = (int)xs[1], H = (int)xs[2], W = (int)xs[3];
        int K = meta_int(f, "pool.kernel"), stride = meta_int(f, "pool.stride");
        int pad = meta_int(f, "pool.padding");
        int OH = conv_out(H, K, stride, pad), OW = conv_out(W, K, stride, pad);
        CLCNN_ASSERT(ny == N * C * OH * OW && ngy == ny && ngx == nx);
        double *ry = zeros(ny), *rgx = zeros(nx);
        int *am = malloc(sizeof(int) * (size_t)ny);
        CLCNN_ASSERT(am);
        clcnn_ref_maxpool2d_forward(ry, am, x, N, C, H, W, K, stride, pad);
        clcnn_ref_maxpool2d_backward(rgx, gy, am, N, C, H, W, K, stride, pad);
        report("fixture maxpool (ties)", "y", err_vs_max(ry, y, ny), 0.0);
        /* PyTorch accumulated gx in fp32, in output order; do the same from our argmax so the
         * routing (the tie rule) is compared bit for bit, then the double gx within FIX_TOL. */
        float *gx32 = calloc((size_t)nx, sizeof(float));
        CLCNN_ASSERT(gx32);
        for (int nc = 0; nc < N * C; nc++) {
            for (int o = 0; o < OH * OW; o++) {
                gx32[nc * H * W + am[nc * OH * OW + o]] += (float)gy[nc * OH * OW + o];
            }
        }
        double worst = 0.0;
        for (int i = 0; i < nx; i++)
            worst = fmax(worst, fabs((double)gx32[i] - gx[i]));
        report("fixture maxpool (ties)", "gx routing", worst, 0.0);
        report("fixture maxpool (ties)", "gx", err_vs_max(rgx, gx, nx), FIX_TOL);
        free(gx32), free(am), free(ry), free(rgx);
    }
    free(x), free(y), free(gy), free(gx);
}

static void fixture_linear(const clcnn_st_file *f) {
    int nx, nw, nb, ny, ngy, ngx, ngw, ngb;
    double *x = fixture(f, "linear.x", &nx), *w = fixture(f, "linear.w", &nw);
    double *b = fixture(f, "linear.b", &nb), *y = fixture(f, "linear.y", &ny);
    double *gy = fixture(f, "linear.gy", &ngy), *gx = fixture(f, "linear.gx", &ngx);
    double *gw = fixture(f, "linear.gw", &ngw), *gb = fixture(f, "linear.gb", &ngb);
    if (x && w && b && y && gy && gx && gw && gb) {
        const int64_t *ws = shape_of(f, "linear.w");
        int OUT = (int)ws[0], IN = (int)ws[1], N = nx / IN;
        CLCNN_ASSERT(ny == N * OUT && ngy == ny && ngx == nx && ngw == nw && nb == OUT);
        double *ry = zeros(ny), *rgx = zeros(nx), *rgw = zeros(nw), *rgb = zeros(OUT);
        clcnn_ref_linear_forward(ry, x, w, b, N, IN, OUT);
        clcnn_ref_linear_backward(rgx, rgw, rgb, gy, x, w, N, IN, OUT);
        report("fixture linear", "y", err_vs_max(ry, y, ny), FIX_TOL);
        report("fixture linear", "gx", err_vs_max(rgx, gx, nx), FIX_TOL);
        report("fixture linear", "gw", err_vs_max(rgw, gw, nw), FIX_TOL);
        report("fixture linear", "gb", err_vs_max(rgb, gb, OUT), FIX_TOL);
        free(ry), free(rgx), free(rgw), free(rgb);
    }
    free(x), free(w), free(b), free(y), free(gy), free(gx), free(gw), free(gb);
}

static void fixture_ce(const clcnn_st_file *f) {
    int nz, nl, ng;
    double *z = fixture(f, "ce.logits", &nz), *loss = fixture(f, "ce.loss", &nl);
    double *g = fixture(f, "ce.glogits", &ng);
    const clcnn_st_tensor *lt = clcnn_st_find(f, "ce.labels");
    if (z && loss && g && lt && lt->dtype == CLCNN_ST_U8) {
        const int64_t *zs = shape_of(f, "ce.logits");
        int N = (int)zs[0], K = (int)zs[1];
        CLCNN_ASSERT(nl == 1 && ng == nz && (int)(lt->end - lt->begin) == N);
        const unsigned char *labels = clcnn_st_data(f, lt);
        double *rg = zeros(nz);
        double rl = clcnn_ref_cross_entropy(rg, NULL, z, labels, N, K);
        report("fixture cross-entropy", "loss", fabs(rl - loss[0]) / fabs(loss[0]), FIX_TOL);
        report("fixture cross-entropy", "glogits", err_vs_max(rg, g, nz), FIX_TOL);
        free(rg);
    } else if (z && loss && g) {
        printf("FAIL fixture ce.labels: missing or not U8\n");
        test_failures++;
    }
    free(z), free(loss), free(g);
}

static void check_fixtures(const char *path) {
    clcnn_st_file f = {0};
    clcnn_error e = {0};
    if (clcnn_st_read(&f, path, &e) != CLCNN_SUCCESS) {
        printf("FAIL fixtures: %s\n", e.msg);
        test_failures++;
        return;
    }
    fixture_conv(&f);
    fixture_pool(&f);
    fixture_linear(&f);
    fixture_ce(&f);
    clcnn_st_free(&f);
}

int main(int argc, char **argv) {
    const char *fixtures = argc > 1 ? argv[1] : "tests/fixtures/layers.safetensors";

    check_conv(2, 2, 5, 7, 3, 3, 1, 1, 1);
    check_conv(2, 2, 5, 7, 3, 3, 2, 0, 1);
    check_conv(2, 2, 5, 7, 3, 3, 2, 1, 0);
    check_conv(2, 2, 5, 7, 3, 3, 1, 2, 1);
    check_conv(2, 2, 5, 7, 3, 1, 1, 0, 1);
    check_conv(2, 2, 5, 7, 3, 1, 2, 1, 0);
    check_pool(2, 2, 5, 7, 2, 2, 0);
    check_pool(2, 2, 5, 7, 3, 2, 0);
    check_pool(2, 2, 5, 7, 3, 2, 1);
    check_pool(1, 2, 6, 6, 2, 2, 1);
    check_linear(3, 5, 4, 1);
    check_linear(1, 6, 3, 0);
    check_relu();
    check_bn(3, 2, 5, 1e-5);
    check_bn(4, 3, 1, 1e-3);
    check_bn(1, 2, 6, 1e-5);
    check_bn_stats();
    check_leakyrelu();
    check_gelu();
    check_dropout_hash();
    check_ce();
    check_composed();
    check_pool_ties();
    check_optimizers();
    check_fixtures(fixtures);
    check_avgpool(2, 2, 5, 7, 2, 2, 0);
    check_avgpool(2, 2, 5, 7, 3, 2, 1);
    check_avgpool(1, 3, 6, 6, 3, 1, 1);
    check_avgpool(2, 1, 7, 5, 3, 3, 1);
    check_global_pools(2, 3, 5, 7);
    check_global_pools(3, 2, 1, 4);
    check_diag(1, 64, 12345u, 0.25);
    check_diag(1, 64, 777u, 0.5);
    check_diag(1, 16, 12345u, 0.0);
    check_diag(0, 16, 0u, -0.5);
    check_diag(0, 16, 0u, 0.1);
    check_join(JOIN_ADD, 2, 2, (const int[]){3, 3}, (const int[]){20, 20});
    check_join(JOIN_ADD, 3, 3, (const int[]){2, 2, 2}, (const int[]){6, 6, 6});
    check_join(JOIN_ADD, 2, 2, (const int[]){7, 7}, (const int[]){1, 1}); /* flat */
    check_join(JOIN_CAT, 2, 2, (const int[]){2, 3}, (const int[]){12, 12});
    check_join(JOIN_CAT, 3, 3, (const int[]){1, 4, 2}, (const int[]){6, 6, 6});
    check_join(JOIN_CAT, 2, 2, (const int[]){5, 3}, (const int[]){1, 1}); /* flat */
    check_join(JOIN_MUL, 2, 2, (const int[]){3, 3}, (const int[]){12, 12});
    check_join(JOIN_MUL, 2, 2, (const int[]){4, 4}, (const int[]){15, 1}); /* gate second */
    check_join(JOIN_MUL, 3, 2, (const int[]){4, 4}, (const int[]){1, 15}); /* gate first */
    check_join(JOIN_MUL, 2, 2, (const int[]){6, 6}, (const int[]){1, 1});  /* flat */
    return test_finish("test_gradcheck");
}
