/* A sequential model on the device: layer shapes from the spec and the input, one allocation
 * for every parameter (and one for the gradients, one or two for optimizer state), activations
 * sized for the largest batch seen and reused, and the training step that drives the layers. */
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

/* Scratch budget for the convolutions' im2col matrix: bigger batches run in chunks. A layer
 * whose whole-batch im2col fits KEEP_FLOATS keeps its own copy from the forward for the
 * backward, which saves building it twice per step. */
enum { WORKSPACE_FLOATS = 16 << 20, KEEP_FLOATS = 64 << 20 };

static clcnn_status mfail_cl(clcnn_model *m, cl_int rc, const char *what) {
    return clcnn_fail(&m->err, (clcnn_status)rc, "%s failed: %s", what, clcnn_cl_error_name(rc));
}

/* Allocates a device buffer, turning failure into a message with the size and the limit. */
clcnn_status clcnn_model_alloc(clcnn_model *m, cl_mem *out, size_t bytes, const char *what) {
    cl_int rc;
    const clcnn_device_info *in = &m->ctx->info;
    if (bytes == 0) bytes = 4;
    if (in->max_alloc_bytes && bytes > in->max_alloc_bytes)
        return clcnn_fail(&m->err, CLCNN_ERR_SHAPE,
                          "%s needs a buffer of %zu bytes, more than %s allows in one allocation "
                          "(%llu bytes); use a smaller batch",
                          what, bytes, in->name, (unsigned long long)in->max_alloc_bytes);
    *out = clCreateBuffer(m->ctx->context, CL_MEM_READ_WRITE, bytes, NULL, &rc);
    if (rc != CL_SUCCESS)
        return clcnn_fail(&m->err, (clcnn_status)rc,
                          "allocating %s (%zu bytes) on %s failed: %s (device memory %llu bytes)",
                          what, bytes, in->name, clcnn_cl_error_name(rc),
                          (unsigned long long)in->global_mem_bytes);
    return CLCNN_SUCCESS;
}

static void release(cl_mem *b) {
    if (*b) clReleaseMemObject(*b);
    *b = NULL;
}

static clcnn_status fill_zero(clcnn_model *m, cl_mem buf, size_t n) {
    clcnn_kern *k = clcnn_kernel_must(m->ctx, "fill_f32");
    int off = 0, count = (int)n;
    float zero = 0.0f;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, buf);
    CLCNN_ARG(&a, off);
    CLCNN_ARG(&a, count);
    CLCNN_ARG(&a, zero);
    clcnn_status st = clcnn_launch1d(m->ctx, k, &a, n);
    if (st) memcpy(m->err.msg, m->ctx->err.msg, sizeof m->err.msg);
    return st;
}

static void add_param(clcnn_model *m, int layer, const char *kind, int ndim, const int64_t *shape) {
    clcnn_param *p = &m->params[m->n_params++];
    snprintf(p->name, sizeof p->name, "%d.%s", layer, kind);
    p->ndim = ndim;
    p->numel = 1;
    for (int d = 0; d < ndim; d++)
        p->shape[d] = shape[d], p->numel *= (size_t)shape[d];
    p->off = m->total;
    m->total += p->numel;
}

/* Walks the layers, computing shapes and the parameter layout; errors name the layer. */
static clcnn_status plan(clcnn_model *m) {
    int c = m->in_c, h = m->in_h, w = m->in_w, flat = 0;
    char where[96];
    /* Per sample, no tensor may pass 2^28 elements (the input included): c * h * w then stays
     * an int wherever it is formed, and a batch's buffers stay within reach of the batch check. */
    if ((long long)c * h * w > (1LL << 28))
        return clcnn_fail(&m->err, CLCNN_ERR_SHAPE,
                          "the input of %d x %d x %d = %lld elements per sample is too large "
                          "(at most 2^28)",
                          c, h, w, (long long)c * h * w);
    m->params = calloc((size_t)m->n_layers * 2 + 1, sizeof *m->params);
    if (!m->params) return clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    for (int i = 0; i < m->n_layers; i++) {
        clcnn_layer *L = &m->layers[i];
        const clcnn_layer_desc *d = &L->d;
        snprintf(where, sizeof where, "layer %d (%s, column %d)", i, clcnn_layer_kind_name(d->kind),
                 d->pos);
        L->in_c = c, L->in_h = h, L->in_w = w;
        L->wparam = L->bparam = -1;
        switch (d->kind) {
        case CLCNN_LAYER_CONV2D:
        case CLCNN_LAYER_MAXPOOL2D: {
            if (flat)
                return clcnn_fail(&m->err, CLCNN_ERR_SHAPE,
                                  "%s needs a C x H x W input but gets %d flat features", where, c);
            if (h + 2 * d->pad < d->kernel || w + 2 * d->pad < d->kernel)
                return clcnn_fail(&m->err, CLCNN_ERR_SHAPE,
                                  "%s: kernel %d is larger than its %d x %d input padded by %d",
                                  where, d->kernel, h, w, d->pad);
            int oh = (h + 2 * d->pad - d->kernel) / d->stride + 1;
            int ow = (w + 2 * d->pad - d->kernel) / d->stride + 1;
            if (d->kind == CLCNN_LAYER_CONV2D) {
                int64_t ws[4] = {d->out, c, d->kernel, d->kernel}, bs[1] = {d->out};
                L->conv = (clcnn_conv2d_shape){c,         h,      w,  d->out, d->kernel,
                                               d->stride, d->pad, oh, ow,     d->bias};
                L->wparam = m->n_params;
                add_param(m, i, "weight", 4, ws);
                if (d->bias) L->bparam = m->n_params, add_param(m, i, "bias", 1, bs);
                c = d->out;
            }
            h = oh, w = ow;
            break;
        }
        case CLCNN_LAYER_FLATTEN: c = c * h * w, h = w = 1, flat = 1; break;
        case CLCNN_LAYER_LINEAR: {
            if (!flat)
                return clcnn_fail(&m->err, CLCNN_ERR_SHAPE,
                                  "%s needs a flat input but gets %d x %d x %d: put flatten before "
                                  "it",
                                  where, c, h, w);
            int64_t ws[2] = {d->out, c}, bs[1] = {d->out};
            L->wparam = m->n_params;
            add_param(m, i, "weight", 2, ws);
            if (d->bias) L->bparam = m->n_params, add_param(m, i, "bias", 1, bs);
            c = d->out;
            break;
        }
        case CLCNN_LAYER_RELU: break;
        }
        L->out_c = c, L->out_h = h, L->out_w = w;
        snprintf(L->label[0], sizeof L->label[0], "%d %s forward", i,
                 clcnn_layer_kind_name(d->kind));
        snprintf(L->label[1], sizeof L->label[1], "%d %s backward", i,
                 clcnn_layer_kind_name(d->kind));
        if (d->kind == CLCNN_LAYER_CONV2D)
            L->flops = 2.0 * d->out * h * w * L->in_c * d->kernel * d->kernel;
        else if (d->kind == CLCNN_LAYER_LINEAR)
            L->flops = 2.0 * d->out * L->in_c;
        if ((long long)c * h * w > (1LL << 28))
            return clcnn_fail(&m->err, CLCNN_ERR_SHAPE,
                              "%s output of %d x %d x %d is too large (at most 2^28 elements per "
                              "sample)",
                              where, c, h, w);
    }
    if (!flat)
        return clcnn_fail(&m->err, CLCNN_ERR_SHAPE,
                          "the model ends with a %d x %d x %d output; cross-entropy needs flat "
                          "logits: end with flatten and linear",
                          c, h, w);
    if (m->n_params == 0)
        return clcnn_fail(&m->err, CLCNN_ERR_SHAPE, "the model has no parameters to train");
    if (m->total > (size_t)1 << 30)
        return clcnn_fail(&m->err, CLCNN_ERR_SHAPE, "the model has %zu parameters, over 2^30",
                          m->total);
    m->out_size = c;
    return CLCNN_SUCCESS;
}

/* PyTorch's defaults: kaiming_uniform_(a=sqrt(5)) gives U(+-1/sqrt(fan_in)) for the weights,
 * and the bias is U(+-1/sqrt(fan_in)) too. Values come from clcnn's own generator. */
static clcnn_status init_params(clcnn_model *m, uint64_t seed) {
    float *host = malloc(m->total * sizeof *host + 4);
    clcnn_rng rng;
    clcnn_status st = CLCNN_SUCCESS;
    if (!host) return clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    clcnn_rng_seed(&rng, seed);
    for (int i = 0; i < m->n_layers; i++) {
        const clcnn_layer *L = &m->layers[i];
        if (L->wparam < 0) continue;
        const clcnn_param *w = &m->params[L->wparam];
        size_t fan_in = w->numel / (size_t)w->shape[0];
        double bound = 1.0 / sqrt((double)fan_in);
        for (int pi = L->wparam; pi <= (L->bparam >= 0 ? L->bparam : L->wparam); pi++) {
            const clcnn_param *p = &m->params[pi];
            for (size_t j = 0; j < p->numel; j++)
                host[p->off + j] = (float)(-bound + 2.0 * bound * clcnn_rng_uniform(&rng));
        }
    }
    cl_int rc = clEnqueueWriteBuffer(m->ctx->queue, m->p, CL_TRUE, 0, m->total * sizeof *host, host,
                                     0, NULL, NULL);
    if (rc != CL_SUCCESS) st = mfail_cl(m, rc, "uploading initial parameters");
    free(host);
    return st;
}

clcnn_status clcnn_model_create(clcnn_model **out, clcnn_context *ctx, const char *spec,
                                int channels, int height, int width, uint64_t seed) {
    clcnn_model *m;
    clcnn_status st;
    clcnn_layer_desc *descs = NULL;
    if (!out) return CLCNN_ERR_INVALID_ARGUMENT;
    *out = m = calloc(1, sizeof *m);
    if (!m) return CLCNN_ERR_OUT_OF_HOST_MEMORY;
    m->ctx = ctx;
    if (!ctx || !spec)
        return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL context or spec");
    if (channels <= 0 || height <= 0 || width <= 0 || channels > 4096 || height > 65536 ||
        width > 65536)
        return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "invalid input shape %d x %d x %d",
                          channels, height, width);
    m->in_c = channels, m->in_h = height, m->in_w = width;
    if ((st = clcnn_spec_parse(spec, &descs, &m->n_layers, &m->err))) return st;
    m->layers = calloc((size_t)m->n_layers, sizeof *m->layers);
    if (!m->layers) {
        free(descs);
        return clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    }
    for (int i = 0; i < m->n_layers; i++)
        m->layers[i].d = descs[i];
    /* The canonical text is sized from its own length: it can be far longer than the spec
     * as written (repetitions expanded, every default spelled out). */
    size_t len = clcnn_spec_format(descs, m->n_layers, NULL, 0);
    if ((m->spec = malloc(len + 1))) clcnn_spec_format(descs, m->n_layers, m->spec, len + 1);
    free(descs);
    if (!m->spec) return clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    if ((st = plan(m))) return st;
    size_t bytes = m->total * sizeof(float);
    if ((st = clcnn_model_alloc(m, &m->p, bytes, "parameters"))) return st;
    if ((st = clcnn_model_alloc(m, &m->g, bytes, "gradients"))) return st;
    if ((st = clcnn_model_alloc(m, &m->acc, 2 * sizeof(float), "loss accumulator"))) return st;
    if ((st = clcnn_model_alloc(m, &m->acc_correct, 2 * sizeof(int), "accuracy accumulator")))
        return st;
    if ((st = init_params(m, seed))) return st;
    if ((st = fill_zero(m, m->g, m->total))) return st;
    clcnn_optimizer_options o;
    clcnn_optimizer_defaults(&o, CLCNN_OPTIMIZER_SGD);
    return clcnn_model_set_optimizer(m, &o);
}

static void release_batch(clcnn_model *m) {
    for (int i = 0; m->act && i <= m->n_layers; i++)
        release(&m->act[i]);
    for (int i = 0; m->gact && i <= m->n_layers; i++)
        release(&m->gact[i]);
    for (int i = 0; m->argmax && i < m->n_layers; i++)
        release(&m->argmax[i]);
    for (int i = 0; m->keep_col && i < m->n_layers; i++)
        release(&m->keep_col[i]);
    for (int i = 0; m->keep_pad && i < m->n_layers; i++)
        release(&m->keep_pad[i]);
    free(m->act);
    free(m->gact);
    free(m->argmax);
    free(m->keep_col);
    free(m->keep_pad);
    m->act = m->gact = m->argmax = m->keep_col = m->keep_pad = NULL;
    release(&m->labels);
    release(&m->loss_vec);
    release(&m->correct_vec);
    release(&m->ws.col);
    release(&m->ws.rows);
    release(&m->ws.wflip);
    release(&m->ws.xpad);
    m->ws.wflip_cap = m->ws.xpad_cap = 0;
    m->cap = 0;
}

void clcnn_model_free(clcnn_model *m) {
    if (!m) return;
    if (m->ctx && m->ctx->queue) clFinish(m->ctx->queue);
    release_batch(m);
    release(&m->p);
    release(&m->g);
    release(&m->s1);
    release(&m->s2);
    release(&m->acc);
    release(&m->acc_correct);
    free(m->layers);
    free(m->params);
    free(m->spec);
    free(m);
}

/* Whether layer i is a convolution followed by a MaxPool2d(2) (kernel 2, stride 2, no
 * padding): the pair whose pool the direct convolution kernels can carry. */
static int pool2_after(const clcnn_model *m, int i) {
    if (i < 0 || i + 1 >= m->n_layers) return 0;
    const clcnn_layer_desc *c = &m->layers[i].d, *p = &m->layers[i + 1].d;
    return c->kind == CLCNN_LAYER_CONV2D && p->kind == CLCNN_LAYER_MAXPOOL2D && p->kernel == 2 &&
           p->stride == 2 && p->pad == 0;
}

/* What one batch of n samples needs on the device, in elements, before anything is allocated:
 * per layer its output, gradient, pool argmax, kept im2col matrix and kept padded input, and the
 * shared workspaces. Everything is checked against CLCNN_MAX_ELEMENTS first, so an oversized
 * batch is refused with one message and no allocation. */
typedef struct batch_sizes {
    size_t *act, *argmax, *keep_col, *keep_pad; /* per layer (act: outputs, index i + 1) */
    size_t col, rows, wflip, xpad;
} batch_sizes;

static void grow(size_t *cap, size_t need) {
    if (need > *cap) *cap = need;
}

/* Images per im2col chunk of s (1..n), bounded by WORKSPACE_FLOATS; *per_col: floats per image. */
static size_t im2col_chunk(const clcnn_conv2d_shape *s, int n, size_t *per_col) {
    size_t per_rows;
    clcnn_conv2d_scratch(s, 1, per_col, &per_rows);
    size_t chunk = WORKSPACE_FLOATS / (*per_col ? *per_col : 1);
    return chunk < 1 ? 1 : chunk > (size_t)n ? (size_t)n : chunk;
}

static void size_conv(const clcnn_model *m, int i, int n, batch_sizes *z) {
    const clcnn_layer *L = &m->layers[i];
    size_t per_col, c, r;
    clcnn_conv2d_shape g;
    int has_g = clcnn_conv2d_grad_input_shape(&L->conv, &g);
    size_t xp = clcnn_conv2d_direct_scratch(m->ctx, &L->conv, n);
    size_t xg = has_g ? clcnn_conv2d_direct_scratch(m->ctx, &g, n) : 0;
    if (has_g) grow(&z->wflip, (size_t)L->conv.OC * L->conv.C * L->conv.K * L->conv.K);
    grow(&z->xpad, xp);
    grow(&z->xpad, xg);
    z->keep_pad[i] = xp; /* the direct forward's padded input, kept for the weight gradient */
    /* Direct forward, weight gradient and input gradient: no im2col scratch, only the weight
     * gradient's rows and partial sums. */
    clcnn_conv2d_wgrad_scratch(m->ctx, &L->conv, n, pool2_after(m, i), &r, &c);
    grow(&z->rows, r);
    grow(&z->col, c);
    if (xp && xg) return;
    size_t chunk = im2col_chunk(&L->conv, n, &per_col);
    if ((size_t)n * per_col <= KEEP_FLOATS) {
        z->keep_col[i] = (size_t)n * per_col;
        chunk = (size_t)n; /* the whole batch at once: rows must hold it too */
    }
    clcnn_conv2d_scratch(&L->conv, (int)chunk, &c, &r);
    grow(&z->col, c);
    grow(&z->rows, r);
    if (has_g) {
        clcnn_conv2d_scratch(&g, (int)im2col_chunk(&g, n, &per_col), &c, &r);
        grow(&z->col, c);
        grow(&z->rows, r);
    }
}

/* One element-count check; what names the buffer, as in "the output of layer 3". */
static clcnn_status check_elements(clcnn_model *m, size_t elems, int n, const char *what) {
    if (elems <= (size_t)CLCNN_MAX_ELEMENTS) return CLCNN_SUCCESS;
    return clcnn_fail(&m->err, CLCNN_ERR_SHAPE,
                      "%s needs %zu elements for a batch of %d, more than the %lld that clcnn's "
                      "32-bit kernel indices reach; use a smaller batch",
                      what, elems, n, (long long)CLCNN_MAX_ELEMENTS);
}

static clcnn_status size_batch(clcnn_model *m, int n, batch_sizes *z) {
    clcnn_status st;
    char what[96];
    size_t in = (size_t)n * m->in_c * m->in_h * m->in_w;
    if ((st = check_elements(m, in, n, "the input batch"))) return st;
    for (int i = 0; i < m->n_layers; i++) {
        const clcnn_layer *L = &m->layers[i];
        const char *kind = clcnn_layer_kind_name(L->d.kind);
        z->act[i + 1] = (size_t)n * L->out_c * L->out_h * L->out_w;
        if (L->d.kind == CLCNN_LAYER_MAXPOOL2D) z->argmax[i] = z->act[i + 1];
        if (L->d.kind == CLCNN_LAYER_CONV2D) size_conv(m, i, n, z);
        snprintf(what, sizeof what, "the output of layer %d (%s)", i, kind);
        if ((st = check_elements(m, z->act[i + 1], n, what))) return st;
        snprintf(what, sizeof what, "the im2col matrix of layer %d (%s)", i, kind);
        if ((st = check_elements(m, z->keep_col[i], n, what))) return st;
        snprintf(what, sizeof what, "the padded input of layer %d (%s)", i, kind);
        if ((st = check_elements(m, z->keep_pad[i], n, what))) return st;
    }
    if ((st = check_elements(m, z->col, n, "the im2col workspace"))) return st;
    if ((st = check_elements(m, z->rows, n, "the GEMM workspace"))) return st;
    if ((st = check_elements(m, z->xpad, n, "the padded-input workspace"))) return st;
    return CLCNN_SUCCESS;
}

/* Sizes every per-batch buffer for n samples; a no-op when they are already large enough.
 * Flatten's output and gradient share its input's buffers (same bytes, same order). */
clcnn_status clcnn_model_reserve(clcnn_model *m, int n) {
    clcnn_status st;
    char what[64];
    batch_sizes z = {0};
    if (n <= m->cap) return CLCNN_SUCCESS;
    size_t nl = (size_t)m->n_layers + 1;
    z.act = calloc(nl, sizeof *z.act), z.argmax = calloc(nl, sizeof *z.argmax);
    z.keep_col = calloc(nl, sizeof *z.keep_col), z.keep_pad = calloc(nl, sizeof *z.keep_pad);
    if (!z.act || !z.argmax || !z.keep_col || !z.keep_pad) {
        st = clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
        goto done;
    }
    if ((st = size_batch(m, n, &z))) goto done;
    release_batch(m);
    m->act = calloc(nl, sizeof *m->act);
    m->gact = calloc(nl, sizeof *m->gact);
    m->argmax = calloc(nl, sizeof *m->argmax);
    m->keep_col = calloc(nl, sizeof *m->keep_col);
    m->keep_pad = calloc(nl, sizeof *m->keep_pad);
    if (!m->act || !m->gact || !m->argmax || !m->keep_col || !m->keep_pad) {
        st = clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
        goto fail;
    }
    size_t in_floats = (size_t)n * m->in_c * m->in_h * m->in_w;
    if ((st = clcnn_model_alloc(m, &m->act[0], in_floats * sizeof(float), "the input batch")))
        goto fail;
    for (int i = 0; i < m->n_layers; i++) {
        if (m->layers[i].d.kind == CLCNN_LAYER_FLATTEN) {
            clRetainMemObject(m->act[i]);
            m->act[i + 1] = m->act[i];
            if (i > 0) {
                clRetainMemObject(m->gact[i]);
                m->gact[i + 1] = m->gact[i];
            }
        } else {
            snprintf(what, sizeof what, "the output of layer %d", i);
            if ((st = clcnn_model_alloc(m, &m->act[i + 1], z.act[i + 1] * sizeof(float), what)))
                goto fail;
            snprintf(what, sizeof what, "the gradient of layer %d", i);
            if ((st = clcnn_model_alloc(m, &m->gact[i + 1], z.act[i + 1] * sizeof(float), what)))
                goto fail;
        }
        struct {
            cl_mem *buf;
            size_t elems, size;
            const char *fmt;
        } extra[] = {
            {&m->argmax[i], z.argmax[i], sizeof(int), "the argmax of layer %d"},
            {&m->keep_pad[i], z.keep_pad[i], sizeof(float), "the padded input of layer %d"},
            {&m->keep_col[i], z.keep_col[i], sizeof(float), "the im2col matrix of layer %d"}};
        for (size_t k = 0; k < sizeof extra / sizeof extra[0]; k++) {
            if (!extra[k].elems) continue;
            snprintf(what, sizeof what, extra[k].fmt, i);
            if ((st = clcnn_model_alloc(m, extra[k].buf, extra[k].elems * extra[k].size, what)))
                goto fail;
        }
    }
    if ((st = clcnn_model_alloc(m, &m->ws.col, z.col * sizeof(float), "the im2col workspace")))
        goto fail;
    if ((st = clcnn_model_alloc(m, &m->ws.rows, z.rows * sizeof(float), "the GEMM workspace")))
        goto fail;
    m->ws.col_cap = z.col, m->ws.rows_cap = z.rows;
    if (z.xpad) {
        if ((st = clcnn_model_alloc(m, &m->ws.xpad, z.xpad * sizeof(float), "the padded input")))
            goto fail;
        m->ws.xpad_cap = z.xpad;
    }
    if (z.wflip) {
        st = clcnn_model_alloc(m, &m->ws.wflip, z.wflip * sizeof(float), "flipped weights");
        if (st) goto fail;
        m->ws.wflip_cap = z.wflip;
    }
    if ((st = clcnn_model_alloc(m, &m->labels, (size_t)n, "the labels"))) goto fail;
    if ((st = clcnn_model_alloc(m, &m->loss_vec, (size_t)n * sizeof(float), "per-sample losses")))
        goto fail;
    if ((st = clcnn_model_alloc(m, &m->correct_vec, (size_t)n * sizeof(int), "per-sample hits")))
        goto fail;
    m->cap = n;
    goto done;
fail:
    release_batch(m);
done:
    free(z.act);
    free(z.argmax);
    free(z.keep_col);
    free(z.keep_pad);
    return st;
}

/* Propagates a context-level failure message into the model's error slot. */
static clcnn_status ctx_status(clcnn_model *m, clcnn_status st) {
    if (st != CLCNN_SUCCESS) memcpy(m->err.msg, m->ctx->err.msg, sizeof m->err.msg);
    return st;
}

/* Whether layer i is a convolution whose forward carries the MaxPool2d(2) of layer i + 1. */
static int pool_fused(const clcnn_model *m, int i, int n) {
    return pool2_after(m, i) && clcnn_conv2d_can_pool(m->ctx, &m->ws, &m->layers[i].conv, n);
}

/* Whether layer i's input gradient is used: some layer before it has parameters. */
static int needs_gx(const clcnn_model *m, int i) {
    for (int j = 0; j < i; j++)
        if (m->layers[j].wparam >= 0) return 1;
    return 0;
}

/* Whether the backward of the fused pair at layers i (conv), i + 1 (pool) is fused too. */
static int pool_backward_fused(const clcnn_model *m, int i, int n) {
    return pool_fused(m, i, n) &&
           clcnn_conv2d_can_pool_backward(m->ctx, &m->ws, &m->layers[i].conv, n, needs_gx(m, i));
}

clcnn_status clcnn_model_forward(clcnn_model *m, int n) {
    clcnn_context *ctx = m->ctx;
    clcnn_status st = CLCNN_SUCCESS;
    for (int i = 0; i < m->n_layers && !st; i++) {
        clcnn_layer *L = &m->layers[i];
        const clcnn_layer_desc *d = &L->d;
        int woff = L->wparam >= 0 ? (int)m->params[L->wparam].off : 0;
        int boff = L->bparam >= 0 ? (int)m->params[L->bparam].off : -1;
        cl_mem x = m->act[i], y = m->act[i + 1];
        clcnn_prof_section(ctx, L->label[0], L->flops * n);
        /* A MaxPool2d(2) right after a convolution rides in the convolution's store: its
         * output, which nothing else reads, is never written. */
        if (pool_fused(m, i, n)) {
            st =
                clcnn_conv2d_forward_pool(ctx, &m->ws, &L->conv, m->act[i + 2], 0, m->argmax[i + 1],
                                          x, 0, m->p, woff, boff < 0 ? 0 : boff, n, m->keep_pad[i]);
            i++;
            continue;
        }
        switch (d->kind) {
        case CLCNN_LAYER_CONV2D:
            st = clcnn_conv2d_forward(ctx, &m->ws, &L->conv, y, 0, x, 0, m->p, woff,
                                      boff < 0 ? 0 : boff, n, m->keep_col[i], m->keep_pad[i]);
            break;
        case CLCNN_LAYER_MAXPOOL2D:
            st = clcnn_maxpool2d_forward(ctx, y, 0, m->argmax[i], x, 0, n * L->in_c, L->in_h,
                                         L->in_w, d->kernel, d->stride, d->pad, L->out_h, L->out_w);
            break;
        case CLCNN_LAYER_RELU:
            st = clcnn_relu_forward(ctx, y, 0, x, 0, n * L->in_c * L->in_h * L->in_w);
            break;
        case CLCNN_LAYER_LINEAR:
            st = clcnn_linear_forward(ctx, y, 0, x, 0, m->p, woff, boff, n, L->in_c, L->out_c);
            break;
        case CLCNN_LAYER_FLATTEN: break;
        }
    }
    clcnn_prof_section(ctx, NULL, 0);
    return ctx_status(m, st);
}

static clcnn_status backward(clcnn_model *m, int n) {
    clcnn_context *ctx = m->ctx;
    clcnn_status st = CLCNN_SUCCESS;
    for (int i = m->n_layers - 1; i >= 0 && !st; i--) {
        clcnn_layer *L = &m->layers[i];
        const clcnn_layer_desc *d = &L->d;
        int woff = L->wparam >= 0 ? (int)m->params[L->wparam].off : 0;
        int boff = L->bparam >= 0 ? (int)m->params[L->bparam].off : -1;
        cl_mem gx = i > 0 ? m->gact[i] : NULL, gy = m->gact[i + 1];
        /* Nothing before layer i has parameters: its input gradient is never used. */
        int need_gx = needs_gx(m, i);
        if (!need_gx && L->wparam < 0) break;
        if (!need_gx) gx = NULL;
        /* A pool whose backward is fused with its convolution's: done there, from gy. */
        if (pool_backward_fused(m, i - 1, n)) continue;
        if (pool_backward_fused(m, i, n)) {
            clcnn_prof_section(ctx, L->label[1], L->flops * n * (gx ? 2 : 1));
            st = clcnn_conv2d_backward_pooled(
                ctx, &m->ws, &L->conv, gx, 0, m->g, woff, boff < 0 ? 0 : boff, m->gact[i + 2], 0,
                m->argmax[i + 1], gy, m->act[i], 0, m->p, n, m->keep_pad[i]);
            continue;
        }
        /* Weight gradient, plus the input gradient when it is needed: 1 or 2 forwards' work. */
        clcnn_prof_section(ctx, L->label[1], L->flops * n * (gx ? 2 : 1));
        switch (d->kind) {
        case CLCNN_LAYER_CONV2D:
            st =
                clcnn_conv2d_backward(ctx, &m->ws, &L->conv, gx, 0, m->g, woff, boff < 0 ? 0 : boff,
                                      gy, 0, m->act[i], 0, m->p, n, m->keep_col[i], m->keep_pad[i]);
            break;
        case CLCNN_LAYER_MAXPOOL2D:
            st =
                clcnn_maxpool2d_backward(ctx, gx, 0, gy, 0, m->argmax[i], n * L->in_c, L->in_h,
                                         L->in_w, d->kernel, d->stride, d->pad, L->out_h, L->out_w);
            break;
        case CLCNN_LAYER_RELU:
            st = clcnn_relu_backward(ctx, gx, 0, gy, 0, m->act[i + 1], 0,
                                     n * L->in_c * L->in_h * L->in_w);
            break;
        case CLCNN_LAYER_LINEAR:
            st = clcnn_linear_backward(ctx, gx, 0, m->g, woff, boff, gy, 0, m->act[i], 0, m->p, n,
                                       L->in_c, L->out_c);
            break;
        case CLCNN_LAYER_FLATTEN: break;
        }
    }
    clcnn_prof_section(ctx, NULL, 0);
    return ctx_status(m, st);
}

clcnn_status clcnn_model_loss(clcnn_model *m, int n, int want_grad, int sum, int accumulate) {
    clcnn_prof_section(m->ctx, "cross-entropy", 0);
    clcnn_status st = clcnn_cross_entropy(m->ctx, m->loss_vec, m->correct_vec,
                                          want_grad ? m->gact[m->n_layers] : NULL,
                                          m->act[m->n_layers], 0, m->labels, n, m->out_size, m->acc,
                                          m->acc_correct, sum ? 1.0f : (float)n, accumulate);
    m->last_n = n;
    clcnn_prof_section(m->ctx, NULL, 0);
    return ctx_status(m, st);
}

clcnn_status clcnn_model_optimizer_step(clcnn_model *m) {
    const clcnn_optimizer_options *o = &m->opt;
    clcnn_context *ctx = m->ctx;
    int n = (int)m->total;
    m->step++;
    /* Labelled by the kernel (sgd_step / adam_step): no section is open here. */
    if (o->kind == CLCNN_OPTIMIZER_SGD) {
        clcnn_kern *k = clcnn_kernel_must(ctx, "sgd_step");
        float lr = (float)o->lr, mom = (float)o->momentum, omd = (float)(1.0 - o->dampening);
        float wd = (float)o->weight_decay;
        int nest = o->nesterov, first = m->step == 1;
        cl_mem buf = m->s1 ? m->s1 : m->g; /* untouched when momentum is 0 */
        clcnn_args a = {k->k, 0, CL_SUCCESS};
        CLCNN_ARG(&a, m->p);
        CLCNN_ARG(&a, m->g);
        CLCNN_ARG(&a, buf);
        CLCNN_ARG(&a, n);
        CLCNN_ARG(&a, lr);
        CLCNN_ARG(&a, mom);
        CLCNN_ARG(&a, omd);
        CLCNN_ARG(&a, wd);
        CLCNN_ARG(&a, nest);
        CLCNN_ARG(&a, first);
        return ctx_status(m, clcnn_launch1d(ctx, k, &a, (size_t)n));
    }
    /* Adam/AdamW: the scalars are computed in double, as PyTorch's Python code does. */
    clcnn_kern *k = clcnn_kernel_must(ctx, "adam_step");
    double t = (double)m->step;
    int decoupled = o->kind == CLCNN_OPTIMIZER_ADAMW;
    float b1 = (float)o->beta1, omb1 = (float)(1.0 - o->beta1);
    float b2 = (float)o->beta2, omb2 = (float)(1.0 - o->beta2), eps = (float)o->eps;
    float wd = decoupled ? 0.0f : (float)o->weight_decay;
    float decay = decoupled ? (float)(1.0 - o->lr * o->weight_decay) : 1.0f;
    float step_size = (float)(o->lr / (1.0 - pow(o->beta1, t)));
    float bc2_sqrt = (float)sqrt(1.0 - pow(o->beta2, t));
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, m->p);
    CLCNN_ARG(&a, m->g);
    CLCNN_ARG(&a, m->s1);
    CLCNN_ARG(&a, m->s2);
    CLCNN_ARG(&a, n);
    CLCNN_ARG(&a, b1);
    CLCNN_ARG(&a, omb1);
    CLCNN_ARG(&a, b2);
    CLCNN_ARG(&a, omb2);
    CLCNN_ARG(&a, eps);
    CLCNN_ARG(&a, wd);
    CLCNN_ARG(&a, decay);
    CLCNN_ARG(&a, step_size);
    CLCNN_ARG(&a, bc2_sqrt);
    return ctx_status(m, clcnn_launch1d(ctx, k, &a, (size_t)n));
}

clcnn_status clcnn_model_train_staged(clcnn_model *m, int n) {
    clcnn_status st;
    if ((st = clcnn_model_forward(m, n))) return st;
    if ((st = clcnn_model_loss(m, n, 1, 0, 0))) return st;
    if ((st = backward(m, n))) return st;
    return clcnn_model_optimizer_step(m);
}

/* Checks a host batch and uploads it into the input and label buffers (blocking: the caller's
 * memory may change as soon as the call returns). */
static clcnn_status stage_host(clcnn_model *m, const float *x, const uint8_t *labels, int n) {
    clcnn_status st;
    cl_int rc;
    if (!x || n <= 0)
        return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "empty batch (n = %d)", n);
    for (int i = 0; labels && i < n; i++)
        if (labels[i] >= m->out_size)
            return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT,
                              "label %d of sample %d is out of range for %d outputs", labels[i], i,
                              m->out_size);
    if ((st = clcnn_model_reserve(m, n))) return st;
    size_t bytes = (size_t)n * m->in_c * m->in_h * m->in_w * sizeof(float);
    rc = clEnqueueWriteBuffer(m->ctx->queue, m->act[0], CL_TRUE, 0, bytes, x, 0, NULL, NULL);
    if (rc != CL_SUCCESS) return mfail_cl(m, rc, "uploading the batch");
    if (labels) {
        rc = clEnqueueWriteBuffer(m->ctx->queue, m->labels, CL_TRUE, 0, (size_t)n, labels, 0, NULL,
                                  NULL);
        if (rc != CL_SUCCESS) return mfail_cl(m, rc, "uploading the labels");
    }
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_model_train_batch(clcnn_model *m, const float *x, const uint8_t *labels, int n) {
    clcnn_status st;
    if (!m) return CLCNN_ERR_INVALID_ARGUMENT;
    if (!labels) return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL labels");
    if ((st = stage_host(m, x, labels, n))) return st;
    return clcnn_model_train_staged(m, n);
}

clcnn_status clcnn_model_eval_batch(clcnn_model *m, const float *x, const uint8_t *labels, int n) {
    clcnn_status st;
    if (!m) return CLCNN_ERR_INVALID_ARGUMENT;
    if (!labels) return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL labels");
    if ((st = stage_host(m, x, labels, n))) return st;
    if ((st = clcnn_model_forward(m, n))) return st;
    return clcnn_model_loss(m, n, 0, 0, 0);
}

clcnn_status clcnn_model_read_acc(clcnn_model *m, float *loss, int *correct) {
    float l = 0.0f;
    int c = 0;
    cl_int rc = clEnqueueReadBuffer(m->ctx->queue, m->acc, CL_TRUE, 0, sizeof l, &l, 0, NULL, NULL);
    if (rc == CL_SUCCESS)
        rc = clEnqueueReadBuffer(m->ctx->queue, m->acc_correct, CL_TRUE, 0, sizeof c, &c, 0, NULL,
                                 NULL);
    if (rc != CL_SUCCESS) return mfail_cl(m, rc, "reading the loss");
    if (loss) *loss = l;
    if (correct) *correct = c;
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_model_last_loss(clcnn_model *m, float *loss, int *correct) {
    if (!m) return CLCNN_ERR_INVALID_ARGUMENT;
    if (m->last_n == 0) return clcnn_fail(&m->err, CLCNN_ERR_STATE, "no batch has run yet");
    return clcnn_model_read_acc(m, loss, correct);
}

clcnn_status clcnn_model_predict(clcnn_model *m, const float *x, int n, float *logits) {
    clcnn_status st;
    if (!m) return CLCNN_ERR_INVALID_ARGUMENT;
    if (!logits) return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL logits");
    if ((st = stage_host(m, x, NULL, n))) return st;
    if ((st = clcnn_model_forward(m, n))) return st;
    cl_int rc = clEnqueueReadBuffer(m->ctx->queue, m->act[m->n_layers], CL_TRUE, 0,
                                    (size_t)n * m->out_size * sizeof(float), logits, 0, NULL, NULL);
    if (rc != CL_SUCCESS) return mfail_cl(m, rc, "reading the logits");
    return CLCNN_SUCCESS;
}

void clcnn_optimizer_defaults(clcnn_optimizer_options *o, clcnn_optimizer_kind kind) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->lr = kind == CLCNN_OPTIMIZER_SGD ? 0.01 : 1e-3;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->eps = 1e-8;
    o->weight_decay = kind == CLCNN_OPTIMIZER_ADAMW ? 1e-2 : 0.0;
}

clcnn_status clcnn_optimizer_check(const clcnn_optimizer_options *o, clcnn_error *e) {
    if (o->kind != CLCNN_OPTIMIZER_SGD && o->kind != CLCNN_OPTIMIZER_ADAM &&
        o->kind != CLCNN_OPTIMIZER_ADAMW)
        return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "unknown optimizer %d", (int)o->kind);
    if (!(o->lr > 0.0) || !isfinite(o->lr))
        return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "learning rate %g must be > 0", o->lr);
    if (!(o->weight_decay >= 0.0) || !isfinite(o->weight_decay))
        return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "weight decay %g must be >= 0",
                          o->weight_decay);
    if (o->kind == CLCNN_OPTIMIZER_SGD) {
        if (!(o->momentum >= 0.0) || !isfinite(o->momentum))
            return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "momentum %g must be >= 0",
                              o->momentum);
        if (!(o->dampening >= 0.0 && o->dampening <= 1.0))
            return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "dampening %g must be in [0, 1]",
                              o->dampening);
        if (o->nesterov && (o->momentum <= 0.0 || o->dampening != 0.0))
            return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT,
                              "Nesterov momentum requires a momentum and zero dampening");
    } else {
        if (!(o->beta1 >= 0.0 && o->beta1 < 1.0) || !(o->beta2 >= 0.0 && o->beta2 < 1.0))
            return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "betas (%g, %g) must be in [0, 1)",
                              o->beta1, o->beta2);
        if (!(o->eps >= 0.0) || !isfinite(o->eps))
            return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "eps %g must be >= 0", o->eps);
    }
    return CLCNN_SUCCESS;
}

int clcnn_optimizer_states(const clcnn_optimizer_options *o) {
    return o->kind == CLCNN_OPTIMIZER_SGD ? (o->momentum != 0.0) : 2;
}

clcnn_status clcnn_model_set_optimizer(clcnn_model *m, const clcnn_optimizer_options *o) {
    clcnn_status st;
    if (!m) return CLCNN_ERR_INVALID_ARGUMENT;
    if (!o) return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL optimizer options");
    if ((st = clcnn_optimizer_check(o, &m->err))) return st;
    release(&m->s1);
    release(&m->s2);
    m->opt = *o;
    m->step = 0;
    int states = clcnn_optimizer_states(o);
    size_t bytes = m->total * sizeof(float);
    if (states >= 1) {
        if ((st = clcnn_model_alloc(m, &m->s1, bytes, "optimizer state"))) return st;
        if ((st = fill_zero(m, m->s1, m->total))) return st;
    }
    if (states >= 2) {
        if ((st = clcnn_model_alloc(m, &m->s2, bytes, "optimizer state"))) return st;
        if ((st = fill_zero(m, m->s2, m->total))) return st;
    }
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_model_get_optimizer(const clcnn_model *m, clcnn_optimizer_options *o) {
    if (!m || !o) return CLCNN_ERR_INVALID_ARGUMENT;
    *o = m->opt;
    return CLCNN_SUCCESS;
}

const char *clcnn_model_errmsg(const clcnn_model *m) {
    return m ? m->err.msg : "NULL model";
}

const char *clcnn_model_spec(const clcnn_model *m) {
    return m && m->spec ? m->spec : "";
}

int clcnn_model_output_size(const clcnn_model *m) {
    return m ? m->out_size : 0;
}

int clcnn_model_param_count(const clcnn_model *m) {
    return m ? m->n_params : 0;
}

int64_t clcnn_model_step_count(const clcnn_model *m) {
    return m ? m->step : 0;
}

clcnn_status clcnn_model_param_info(const clcnn_model *m, int i, const char **name, int *ndim,
                                    int64_t shape[4], size_t *numel) {
    if (!m || i < 0 || i >= m->n_params) return CLCNN_ERR_INVALID_ARGUMENT;
    const clcnn_param *p = &m->params[i];
    if (name) *name = p->name;
    if (ndim) *ndim = p->ndim;
    if (shape)
        for (int d = 0; d < 4; d++)
            shape[d] = d < p->ndim ? p->shape[d] : 1;
    if (numel) *numel = p->numel;
    return CLCNN_SUCCESS;
}

static clcnn_status copy_param(clcnn_model *m, cl_mem buf, int i, float *dst, const float *src) {
    if (!m) return CLCNN_ERR_INVALID_ARGUMENT;
    if (i < 0 || i >= m->n_params || (!dst && !src))
        return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "bad parameter index %d or NULL", i);
    const clcnn_param *p = &m->params[i];
    size_t off = p->off * sizeof(float), bytes = p->numel * sizeof(float);
    cl_int rc =
        dst ? clEnqueueReadBuffer(m->ctx->queue, buf, CL_TRUE, off, bytes, dst, 0, NULL, NULL)
            : clEnqueueWriteBuffer(m->ctx->queue, buf, CL_TRUE, off, bytes, src, 0, NULL, NULL);
    if (rc != CL_SUCCESS) return mfail_cl(m, rc, dst ? "reading a parameter" : "writing one");
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_model_get_param(clcnn_model *m, int i, float *dst) {
    return copy_param(m, m ? m->p : NULL, i, dst, NULL);
}

clcnn_status clcnn_model_set_param(clcnn_model *m, int i, const float *src) {
    return copy_param(m, m ? m->p : NULL, i, NULL, src);
}

clcnn_status clcnn_model_get_grad(clcnn_model *m, int i, float *dst) {
    return copy_param(m, m ? m->g : NULL, i, dst, NULL);
}
