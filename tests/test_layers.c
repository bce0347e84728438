/* Every layer's OpenCL path against the double-precision C reference (src/layers/ref.c), on
 * odd shapes, strides 1-3, paddings 0-2, non-square inputs, batch 1 and partial batches, for
 * the forward pass and every gradient. Runs with whichever GEMM backend CLCNN_BACKEND names.
 *
 * Tolerance: fp32 device results against double references. Each output is a sum of up to
 * R = C*K*K (or batch*pixels for weight gradients, a few thousand) products of values O(1);
 * fp32 rounding gives a relative error around sqrt(R) * 6e-8 in the typical case and R * 6e-8
 * in the worst. We allow 2e-5 of the tensor's largest magnitude (plus 1e-6 absolute), which
 * covers R up to ~300 worst case and ~1e5 typical, and is far below any indexing mistake (those
 * give errors of the order of the values themselves). */
#include "layers/layers.h"
#include "layers/ref.h"
#include "rng.h"
#include "testutil.h"

static clcnn_context *ctx;
static clcnn_rng rng;

static double *rnd(size_t n, double scale) {
    double *a = malloc(n * sizeof *a + 8);
    for (size_t i = 0; i < n; i++)
        a[i] = (2.0 * clcnn_rng_uniform(&rng) - 1.0) * scale;
    return a;
}

static double *zeros(size_t n) {
    return calloc(n + 1, sizeof(double));
}

static cl_mem dev(const double *a, size_t n) {
    float *f = malloc(n * sizeof *f + 4);
    cl_int rc;
    for (size_t i = 0; i < n; i++)
        f[i] = a ? (float)a[i] : 0.0f;
    cl_mem b = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                              n * sizeof *f + 4, f, &rc);
    CLCNN_ASSERT(rc == CL_SUCCESS);
    free(f);
    return b;
}

/* Device buffer holding `a` at element offset `off` (garbage before it), to prove offsets. */
static cl_mem dev_at(const double *a, size_t n, int off) {
    double *t = malloc((n + (size_t)off) * sizeof *t + 8);
    for (int i = 0; i < off; i++)
        t[i] = 1e30;
    for (size_t i = 0; i < n; i++)
        t[(size_t)off + i] = a ? a[i] : 0.0;
    cl_mem b = dev(t, n + (size_t)off);
    free(t);
    return b;
}

/* Compares n device floats at offset off against the reference; reports the worst error. */
static void compare(const char *what, cl_mem b, int off, const double *ref, size_t n) {
    float *f = malloc(n * sizeof *f + 4);
    CHECK(clEnqueueReadBuffer(ctx->queue, b, CL_TRUE, (size_t)off * 4, n * 4, f, 0, NULL, NULL) ==
          CL_SUCCESS);
    double maxref = 0, maxerr = 0;
    size_t worst = 0;
    for (size_t i = 0; i < n; i++)
        maxref = fmax(maxref, fabs(ref[i]));
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)f[i] - ref[i]);
        if (isnan(e)) e = INFINITY; /* a NaN must not be forgotten when a later error is finite */
        if (e > maxerr) maxerr = e, worst = i;
    }
    double tol = 2e-5 * maxref + 1e-6;
    CHECK_MSG(maxerr <= tol, "%s: max error %.3g at %zu (got %.9g, want %.9g), tolerance %.3g",
              what, maxerr, worst, (double)f[worst], ref[worst], tol);
    free(f);
}

/* A device buffer of n NaNs. */
static cl_mem nan_buf(size_t n) {
    double *v = malloc((n ? n : 1) * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = NAN;
    cl_mem m = dev(v, n);
    free(v);
    return m;
}

typedef struct conv_case {
    int N, C, H, W, OC, K, stride, pad, bias;
    int chunked; /* 1 = workspace for two images only: forces the chunked path */
} conv_case;

/* The fused conv + MaxPool2d(2) backward from a random pooled gradient, against the double
 * reference convolution backward of that gradient scattered to the argmax positions (am:
 * the fused forward's argmax); with and without the input gradient. */
static void test_pooled_backward(const conv_case *t, const clcnn_conv2d_shape *s,
                                 clcnn_workspace *ws, const char *name, const int *am,
                                 const double *x, const double *w, cl_mem dx, cl_mem dp, int woff,
                                 int boff, cl_mem kpad) {
    int PH = s->OH / 2, PW = s->OW / 2, ohw = s->OH * s->OW;
    size_t np = (size_t)t->N * t->OC * PH * PW, ny = (size_t)t->N * t->OC * ohw;
    size_t nx = (size_t)t->N * t->C * t->H * t->W, nw = (size_t)t->OC * t->C * t->K * t->K;
    char what[240];
    for (int with_gx = 1; with_gx >= 0; with_gx--) {
        if (!clcnn_conv2d_can_pool_backward(ctx, ws, s, t->N, with_gx)) {
            CHECK_MSG(0, "%s: the fused pool backward is not possible (gx %d)", name, with_gx);
            return;
        }
    }
    double *gp = rnd(np, 1.0), *gy = zeros(ny), *gx = zeros(nx), *gw = zeros(nw);
    double *gb = zeros((size_t)t->OC);
    for (size_t q = 0; q < np; q++) /* plane of q: q / (PH*PW); its argmax indexes that plane */
        gy[q / (size_t)(PH * PW) * (size_t)ohw + (size_t)am[q]] = gp[q];
    clcnn_ref_conv2d_backward(gx, gw, t->bias ? gb : NULL, gy, x, w, t->N, t->C, t->H, t->W, t->OC,
                              t->K, 1, t->pad);
    cl_mem dgp = dev_at(gp, np, 1), dam = dev(NULL, np), dgy = nan_buf(ny);
    cl_mem dgx = nan_buf(nx + 4), dg = nan_buf((size_t)boff + t->OC);
    CHECK(clEnqueueWriteBuffer(ctx->queue, dam, CL_TRUE, 0, np * sizeof *am, am, 0, NULL, NULL) ==
          0);
    for (int with_gx = 1; with_gx >= 0; with_gx--) {
        CHECK(clcnn_conv2d_backward_pooled(ctx, ws, s, with_gx ? dgx : NULL, 4, dg, woff, boff, dgp,
                                           1, dam, dgy, dx, 3, dp, t->N, kpad) == 0);
        if (with_gx) {
            snprintf(what, sizeof what, "%s pooled backward grad x", name);
            compare(what, dgx, 4, gx, nx);
        }
        snprintf(what, sizeof what, "%s pooled backward grad w%s", name, with_gx ? "" : " (no gx)");
        compare(what, dg, woff, gw, nw);
        if (t->bias) {
            snprintf(what, sizeof what, "%s pooled backward grad b", name);
            compare(what, dg, boff, gb, (size_t)t->OC);
        }
    }
    cl_mem rel[] = {dgp, dam, dgy, dgx, dg};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++)
        clReleaseMemObject(rel[i]);
    free(gp), free(gy), free(gx), free(gw), free(gb);
}

static void test_conv(const conv_case *t) {
    clcnn_conv2d_shape s = {t->C, t->H, t->W, t->OC, t->K, t->stride, t->pad, 0, 0, t->bias};
    s.OH = (t->H + 2 * t->pad - t->K) / t->stride + 1;
    s.OW = (t->W + 2 * t->pad - t->K) / t->stride + 1;
    size_t nx = (size_t)t->N * t->C * t->H * t->W, nw = (size_t)t->OC * t->C * t->K * t->K;
    size_t ny = (size_t)t->N * t->OC * s.OH * s.OW;
    char name[160];
    snprintf(name, sizeof name, "conv N%d C%d %dx%d OC%d K%d s%d p%d b%d chunked%d", t->N, t->C,
             t->H, t->W, t->OC, t->K, t->stride, t->pad, t->bias, t->chunked);
    double *x = rnd(nx, 1.0), *w = rnd(nw, 0.5), *b = rnd((size_t)t->OC, 0.5);
    double *y = zeros(ny), *gy = rnd(ny, 1.0), *gx = zeros(nx), *gw = zeros(nw);
    double *gb = zeros((size_t)t->OC);
    clcnn_ref_conv2d_forward(y, x, w, t->bias ? b : NULL, t->N, t->C, t->H, t->W, t->OC, t->K,
                             t->stride, t->pad);
    clcnn_ref_conv2d_backward(gx, gw, t->bias ? gb : NULL, gy, x, w, t->N, t->C, t->H, t->W, t->OC,
                              t->K, t->stride, t->pad);
    /* Parameters at offsets inside one buffer, as in a model: w at 5, b right after. */
    double *params = zeros(5 + nw + (size_t)t->OC);
    memcpy(params + 5, w, nw * sizeof *w);
    memcpy(params + 5 + nw, b, (size_t)t->OC * sizeof *b);
    int woff = 5, boff = 5 + (int)nw;
    cl_mem dp = dev(params, 5 + nw + (size_t)t->OC), dg = dev(NULL, 5 + nw + (size_t)t->OC);
    cl_mem dx = dev_at(x, nx, 3), dy = dev_at(NULL, ny, 2), dgy = dev_at(gy, ny, 1);
    cl_mem dgx = dev_at(NULL, nx, 4);
    clcnn_workspace ws = {0};
    size_t col, rows;
    clcnn_conv2d_scratch(&s, t->N, &col, &rows);
    if (t->chunked) {
        clcnn_conv2d_scratch(&s, 2, &col, &rows);
    }
    /* Room for the input-gradient convolution too, so stride-1 layers take that path; the
     * chunked cases leave it out and so test col2im (and the stride-2 ones always do). */
    clcnn_conv2d_shape g;
    if (!t->chunked && clcnn_conv2d_grad_input_shape(&s, &g)) {
        size_t c2, r2;
        clcnn_conv2d_scratch(&g, t->N, &c2, &r2);
        if (c2 > col) col = c2;
        if (r2 > rows) rows = r2;
        ws.wflip = dev(NULL, nw), ws.wflip_cap = nw;
    }
    /* The direct convolution (stride 1 on the cpu backend) for the unchunked cases, forward
     * and input gradient; the chunked ones keep testing im2col + GEMM. */
    size_t xp = t->chunked ? 0 : clcnn_conv2d_direct_scratch(ctx, &s, t->N);
    if (xp && ws.wflip) {
        size_t xg = clcnn_conv2d_direct_scratch(ctx, &g, t->N);
        if (xg > xp) xp = xg;
    }
    if (xp) { /* NaN-filled: the kernels must never let left-over bytes reach a result */
        double *nan = malloc(xp * sizeof *nan);
        for (size_t i = 0; i < xp; i++)
            nan[i] = NAN;
        ws.xpad = dev(nan, xp), ws.xpad_cap = xp;
        free(nan);
    }
    if (xp) { /* the direct weight gradient's scratch */
        size_t wr, wc;
        clcnn_conv2d_wgrad_scratch(ctx, &s, t->N, 1, &wr, &wc);
        if (wr > rows) rows = wr;
        if (wc > col) col = wc;
    }
    ws.col = dev(NULL, col), ws.col_cap = col;
    ws.rows = nan_buf(rows), ws.rows_cap = rows; /* every path must write before it reads */
    /* The kept-im2col path: the batch's matrix in its own buffer, reused by the backward. */
    cl_mem keep = t->chunked ? NULL : dev(NULL, (size_t)t->N * s.OH * s.OW * t->C * t->K * t->K);
    /* The direct path's padded input, kept from forward to backward (NaN until padded). */
    size_t kp = t->chunked ? 0 : clcnn_conv2d_direct_scratch(ctx, &s, t->N);
    cl_mem kpad = kp ? nan_buf(kp) : NULL;
    CHECK(clcnn_conv2d_forward(ctx, &ws, &s, dy, 2, dx, 3, dp, woff, boff, t->N, keep, kpad) == 0);
    char what[200];
    snprintf(what, sizeof what, "%s forward", name);
    compare(what, dy, 2, y, ny);
    CHECK(clcnn_conv2d_backward(ctx, &ws, &s, dgx, 4, dg, woff, boff, dgy, 1, dx, 3, dp, t->N, keep,
                                kpad) == 0);
    snprintf(what, sizeof what, "%s grad x", name);
    compare(what, dgx, 4, gx, nx);
    snprintf(what, sizeof what, "%s grad w", name);
    compare(what, dg, woff, gw, nw);
    if (t->bias) {
        snprintf(what, sizeof what, "%s grad b", name);
        compare(what, dg, boff, gb, (size_t)t->OC);
    }
    /* A fused MaxPool2d(2) on the direct path: bit for bit what the pool kernel makes of the
     * unfused output (values and argmax), with the output buffer pre-filled with NaN. Twice:
     * with the input, and with a zero input, where every window is a four-way tie (output =
     * bias) that the scan-order rule must break as maxpool2_forward does. */
    int PH = s.OH / 2, PW = s.OW / 2;
    for (int zero_in = 0;
         zero_in < 2 && PH > 0 && PW > 0 && clcnn_conv2d_can_pool(ctx, &ws, &s, t->N); zero_in++) {
        size_t np = (size_t)t->N * t->OC * PH * PW;
        double *nan_fill = malloc(np * sizeof *nan_fill);
        for (size_t i = 0; i < np; i++)
            nan_fill[i] = NAN;
        cl_mem in = zero_in ? dev_at(NULL, nx, 3) : dx;
        cl_mem uy = dev_at(NULL, ny, 2), py = dev_at(NULL, np, 2), pam = dev(NULL, np);
        cl_mem fy = dev_at(nan_fill, np, 2), fam = dev(NULL, np);
        CHECK(clcnn_conv2d_forward(ctx, &ws, &s, uy, 2, in, 3, dp, woff, boff, t->N, NULL, NULL) ==
              0);
        CHECK(clcnn_maxpool2d_forward(ctx, py, 2, pam, uy, 2, t->N * t->OC, s.OH, s.OW, 2, 2, 0, PH,
                                      PW) == 0);
        CHECK(clcnn_conv2d_forward_pool(ctx, &ws, &s, fy, 2, fam, in, 3, dp, woff, boff, t->N,
                                        kpad) == 0);
        float *ua = malloc(np * 4), *fa = malloc(np * 4);
        int *ia = malloc(np * sizeof *ia), *ib = malloc(np * sizeof *ib);
        CHECK(clEnqueueReadBuffer(ctx->queue, py, CL_TRUE, 8, np * 4, ua, 0, NULL, NULL) == 0);
        CHECK(clEnqueueReadBuffer(ctx->queue, fy, CL_TRUE, 8, np * 4, fa, 0, NULL, NULL) == 0);
        CHECK(clEnqueueReadBuffer(ctx->queue, pam, CL_TRUE, 0, np * 4, ia, 0, NULL, NULL) == 0);
        CHECK(clEnqueueReadBuffer(ctx->queue, fam, CL_TRUE, 0, np * 4, ib, 0, NULL, NULL) == 0);
        size_t bad = 0;
        for (size_t i = 0; i < np; i++)
            bad += memcmp(&ua[i], &fa[i], 4) != 0 || ia[i] != ib[i];
        CHECK_MSG(bad == 0, "%s: fused pool differs from conv + pool in %zu of %zu outputs%s", name,
                  bad, np, zero_in ? " (zero input: ties)" : "");
        if (!zero_in) test_pooled_backward(t, &s, &ws, name, ib, x, w, dx, dp, woff, boff, kpad);
        free(ua), free(fa), free(ia), free(ib), free(nan_fill);
        cl_mem rel[] = {uy, py, pam, fy, fam, zero_in ? in : NULL};
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++)
            if (rel[i]) clReleaseMemObject(rel[i]);
    }
    /* Without gx (first layer): weight gradient unchanged, still correct. */
    CHECK(clcnn_conv2d_backward(ctx, &ws, &s, NULL, 0, dg, woff, boff, dgy, 1, dx, 3, dp, t->N,
                                NULL, NULL) == 0);
    snprintf(what, sizeof what, "%s grad w (no gx)", name);
    compare(what, dg, woff, gw, nw);
    cl_mem bufs[] = {dp, dg, dx, dy, dgy, dgx, ws.col, ws.rows, keep, ws.wflip, ws.xpad, kpad};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) clReleaseMemObject(bufs[i]);
    free(x), free(w), free(b), free(y), free(gy), free(gx), free(gw), free(gb), free(params);
}

static void test_pool(int N, int C, int H, int W, int K, int stride, int pad, int ties) {
    int OH = (H + 2 * pad - K) / stride + 1, OW = (W + 2 * pad - K) / stride + 1;
    size_t nx = (size_t)N * C * H * W, ny = (size_t)N * C * OH * OW;
    double *x = rnd(nx, 2.0), *y = zeros(ny), *gy = rnd(ny, 1.0), *gx = zeros(nx);
    int *am = calloc(ny + 1, sizeof *am), *dam = calloc(ny + 1, sizeof *dam);
    char name[160], what[200];
    if (ties) /* a 0.25 grid over [-2, 2]: many windows hold equal maxima */
        for (size_t i = 0; i < nx; i++)
            x[i] = floor(x[i] * 4.0) / 4.0;
    snprintf(name, sizeof name, "maxpool N%d C%d %dx%d K%d s%d p%d ties%d", N, C, H, W, K, stride,
             pad, ties);
    clcnn_ref_maxpool2d_forward(y, am, x, N, C, H, W, K, stride, pad);
    clcnn_ref_maxpool2d_backward(gx, gy, am, N, C, H, W, K, stride, pad);
    cl_mem dx = dev_at(x, nx, 1), dy = dev_at(NULL, ny, 2), dgy = dev_at(gy, ny, 3);
    /* gx starts as NaN: the backward must write every element, the uncovered edges too */
    double *nan_fill = malloc(nx * sizeof *nan_fill);
    for (size_t i = 0; i < nx; i++)
        nan_fill[i] = NAN;
    cl_mem dgx = dev_at(nan_fill, nx, 4), dargmax = dev(NULL, ny);
    free(nan_fill);
    CHECK(clcnn_maxpool2d_forward(ctx, dy, 2, dargmax, dx, 1, N * C, H, W, K, stride, pad, OH,
                                  OW) == 0);
    snprintf(what, sizeof what, "%s forward", name);
    compare(what, dy, 2, y, ny);
    CHECK(clEnqueueReadBuffer(ctx->queue, dargmax, CL_TRUE, 0, ny * 4, dam, 0, NULL, NULL) == 0);
    int bad = 0;
    for (size_t i = 0; i < ny; i++)
        bad += dam[i] != am[i];
    CHECK_MSG(bad == 0, "%s: %d argmax indices differ from the reference (tie rule)", name, bad);
    CHECK(clcnn_maxpool2d_backward(ctx, dgx, 4, dgy, 3, dargmax, N * C, H, W, K, stride, pad, OH,
                                   OW) == 0);
    snprintf(what, sizeof what, "%s grad x", name);
    compare(what, dgx, 4, gx, nx);
    cl_mem bufs[] = {dx, dy, dgy, dgx, dargmax};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        clReleaseMemObject(bufs[i]);
    free(x), free(y), free(gy), free(gx), free(am), free(dam);
}

static void test_linear(int N, int IN, int OUT) {
    size_t nx = (size_t)N * IN, nw = (size_t)OUT * IN, ny = (size_t)N * OUT;
    double *x = rnd(nx, 1.0), *w = rnd(nw, 0.5), *y = zeros(ny), *gy = rnd(ny, 1.0);
    double *gx = zeros(nx), *gw = zeros(nw), *gb = zeros((size_t)OUT);
    double *params = zeros(7 + nw + (size_t)OUT);
    char name[100], what[160];
    snprintf(name, sizeof name, "linear N%d %d->%d", N, IN, OUT);
    for (int i = 0; i < OUT; i++)
        params[7 + nw + (size_t)i] = 0.1 * i - 0.3;
    memcpy(params + 7, w, nw * sizeof *w);
    clcnn_ref_linear_forward(y, x, w, params + 7 + nw, N, IN, OUT);
    clcnn_ref_linear_backward(gx, gw, gb, gy, x, w, N, IN, OUT);
    int woff = 7, boff = 7 + (int)nw;
    cl_mem dp = dev(params, 7 + nw + (size_t)OUT), dg = dev(NULL, 7 + nw + (size_t)OUT);
    cl_mem dx = dev_at(x, nx, 2), dy = dev_at(NULL, ny, 1), dgy = dev_at(gy, ny, 3);
    cl_mem dgx = dev_at(NULL, nx, 5);
    CHECK(clcnn_linear_forward(ctx, dy, 1, dx, 2, dp, woff, boff, N, IN, OUT) == 0);
    snprintf(what, sizeof what, "%s forward", name);
    compare(what, dy, 1, y, ny);
    CHECK(clcnn_linear_backward(ctx, dgx, 5, dg, woff, boff, dgy, 3, dx, 2, dp, N, IN, OUT) == 0);
    snprintf(what, sizeof what, "%s grad x", name);
    compare(what, dgx, 5, gx, nx);
    snprintf(what, sizeof what, "%s grad w", name);
    compare(what, dg, woff, gw, nw);
    snprintf(what, sizeof what, "%s grad b", name);
    compare(what, dg, boff, gb, (size_t)OUT);
    cl_mem bufs[] = {dp, dg, dx, dy, dgy, dgx};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        clReleaseMemObject(bufs[i]);
    free(x), free(w), free(y), free(gy), free(gx), free(gw), free(gb), free(params);
}

static void test_relu(int n) {
    double *x = rnd((size_t)n, 1.0), *y = zeros((size_t)n), *gy = rnd((size_t)n, 1.0);
    double *gx = zeros((size_t)n);
    for (int i = 0; i < n; i += 7)
        x[i] = 0.0; /* exact zeros: gradient must be 0 there */
    clcnn_ref_relu_forward(y, x, n);
    clcnn_ref_relu_backward(gx, gy, y, n);
    cl_mem dx = dev_at(x, (size_t)n, 1), dy = dev_at(NULL, (size_t)n, 2);
    cl_mem dgy = dev_at(gy, (size_t)n, 3), dgx = dev_at(NULL, (size_t)n, 4);
    CHECK(clcnn_relu_forward(ctx, dy, 2, dx, 1, n) == 0);
    compare("relu forward", dy, 2, y, (size_t)n);
    CHECK(clcnn_relu_backward(ctx, dgx, 4, dgy, 3, dy, 2, n) == 0);
    compare("relu grad x", dgx, 4, gx, (size_t)n);
    cl_mem bufs[] = {dx, dy, dgy, dgx};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        clReleaseMemObject(bufs[i]);
    free(x), free(y), free(gy), free(gx);
}

static void test_ce(int N, int K, double scale) {
    size_t nz = (size_t)N * K;
    double *z = rnd(nz, scale), *gz = zeros(nz);
    unsigned char *lab = malloc((size_t)N);
    int correct = 0, dcorrect = -1;
    char name[100], what[160];
    for (int i = 0; i < N; i++)
        lab[i] = (unsigned char)clcnn_rng_below(&rng, (uint64_t)K);
    if (N > 2) z[K + lab[1]] = 1e3, z[2 * K] = 95.0; /* a huge right logit, a large wrong one */
    snprintf(name, sizeof name, "cross-entropy N%d K%d scale %g", N, K, scale);
    double loss = clcnn_ref_cross_entropy(gz, &correct, z, lab, N, K);
    cl_int rc;
    cl_mem dz = dev_at(z, nz, 3), dgz = dev(NULL, nz), dl = dev(NULL, (size_t)N);
    cl_mem dc = dev(NULL, (size_t)N), dacc = dev(NULL, 1), dacc_c = dev(NULL, 1);
    cl_mem dlab =
        clCreateBuffer(ctx->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (size_t)N, lab, &rc);
    CHECK(clcnn_cross_entropy(ctx, dl, dc, dgz, dz, 3, dlab, N, K, dacc, dacc_c, (float)N, 0) == 0);
    snprintf(what, sizeof what, "%s loss", name);
    compare(what, dacc, 0, &loss, 1);
    snprintf(what, sizeof what, "%s grad", name);
    compare(what, dgz, 0, gz, nz);
    CHECK(clEnqueueReadBuffer(ctx->queue, dacc_c, CL_TRUE, 0, 4, &dcorrect, 0, NULL, NULL) == 0);
    CHECK_MSG(dcorrect == correct, "%s: %d correct, reference %d", name, dcorrect, correct);
    /* Accumulating form (evaluation): sum of losses over two calls. */
    CHECK(clcnn_cross_entropy(ctx, dl, dc, NULL, dz, 3, dlab, N, K, dacc, dacc_c, 1.0f, 1) == 0);
    double two = loss + loss * N;
    snprintf(what, sizeof what, "%s accumulated", name);
    compare(what, dacc, 0, &two, 1);
    cl_mem bufs[] = {dz, dgz, dl, dc, dacc, dacc_c, dlab};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        clReleaseMemObject(bufs[i]);
    free(z), free(gz), free(lab);
}

int main(void) {
    clcnn_devices *devs = NULL;
    ctx = test_context(&devs);
    clcnn_rng_seed(&rng, 42);
    printf("GEMM backend: %s\n", getenv("CLCNN_BACKEND") ? getenv("CLCNN_BACKEND") : "default");
    const conv_case convs[] = {
        {2, 3, 7, 9, 5, 3, 2, 1, 1, 0},    /* odd sizes, stride 2, pad 1, non-square */
        {1, 1, 5, 5, 2, 5, 1, 2, 1, 0},    /* batch 1, pad 2 ("same") */
        {3, 2, 6, 4, 3, 1, 1, 0, 0, 0},    /* 1x1 kernel, no bias */
        {2, 4, 8, 8, 6, 3, 1, 0, 1, 0},    /* pad 0 */
        {5, 3, 9, 7, 4, 4, 3, 2, 1, 0},    /* even kernel, stride 3 */
        {7, 3, 12, 10, 8, 5, 1, 2, 1, 0},  /* a partial batch of 7 */
        {7, 3, 12, 10, 8, 5, 1, 2, 1, 1},  /* the same through chunks of 2 images */
        {3, 2, 5, 7, 3, 3, 2, 0, 1, 1},    /* chunked, stride 2 */
        {2, 3, 11, 13, 32, 5, 1, 2, 1, 0}, /* OC 32: full 8x32 tiles of the CPU GEMM */
        {5, 3, 37, 40, 8, 3, 1, 1, 1, 0},  /* 7400 pixels: split-K weight gradient */
        {3, 5, 8, 8, 6, 3, 1, 1, 1, 0},    /* 8-wide maps: two rows per vector */
        {2, 4, 9, 8, 5, 3, 1, 1, 1, 0},    /* 8 wide, odd height */
        {2, 3, 6, 8, 9, 3, 1, 1, 1, 0},    /* 8 wide, 3 pooled rows: a half 8-window pool */
        {2, 8, 9, 10, 20, 5, 1, 2, 1, 0},  /* 200 taps: the row-GEMM weight gradient, OC 20 */
        {3, 6, 8, 8, 40, 5, 1, 2, 0, 0},   /* row GEMM, two 32-channel tiles, 8 wide */
        {3, 6, 40, 40, 33, 5, 1, 2, 1, 0}, /* row GEMM in 3 batch slices, summed */
    };
    for (size_t i = 0; i < sizeof convs / sizeof convs[0]; i++)
        test_conv(&convs[i]);
    test_pool(2, 3, 7, 9, 3, 2, 0, 1); /* overlapping windows with ties */
    test_pool(2, 3, 7, 9, 3, 2, 0, 0);
    test_pool(1, 2, 8, 8, 2, 2, 0, 0);
    test_pool(2, 3, 9, 7, 2, 2, 0, 1);  /* the 2x2 fast path: odd sizes, ties */
    test_pool(2, 2, 7, 37, 2, 2, 0, 1); /* 2x2: 18 windows a row (vector steps + tail) */
    test_pool(3, 2, 5, 7, 3, 2, 1, 1);  /* padding 1 with ties */
    test_pool(2, 1, 6, 5, 2, 1, 0, 1);  /* stride 1 */
    test_pool(1, 1, 1, 1, 1, 1, 0, 0);  /* degenerate 1x1 */
    test_pool(2, 2, 9, 10, 2, 3, 0, 1); /* stride > K: gaps between windows */
    test_pool(2, 1, 7, 7, 3, 3, 1, 1);  /* stride == K with padding */
    test_linear(3, 7, 4);
    test_linear(1, 5, 1);
    test_linear(65, 33, 10);
    test_linear(70, 40, 33);
    test_relu(1001);
    test_ce(5, 10, 3.0);
    test_ce(1, 3, 1.0);
    test_ce(64, 10, 10.0);
    clcnn_context_free(ctx);
    clcnn_devices_free(devs);
    return test_finish("test_layers");
}
