/* A sequential model on the device: layer shapes from the spec and the input, one allocation
 * for every parameter (and one for the gradients, one or two for optimizer state), activations
 * sized for the largest batch seen and reused, and the training step that drives the layers. */
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loss.h"
#include "plan.h"
#include "rng.h"

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
    clcnn_status st = clcnn_fill(m->ctx, buf, 0, (int)n, 0.0f);
    if (st) m->err = m->ctx->err;
    return st;
}

/* The running statistics' initial values (bn: mean 0, variance 1), by each layer's
 * init_stats, and num_batches_tracked 0. */
static clcnn_status init_stats(clcnn_model *m) {
    m->batches_tracked = 0;
    if (m->n_stats == 0) return CLCNN_SUCCESS;
    clcnn_status st = clcnn_model_alloc(m, &m->stats, m->n_stats * sizeof(float), "statistics");
    if (st) return st;
    float *host = calloc(m->n_stats, sizeof *host);
    if (!host) return clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    for (int i = 0; i < m->n_nodes; i++) {
        const clcnn_node *n = &m->nodes[i];
        if (n->ops->init_stats) n->ops->init_stats(n, m->params, host);
    }
    cl_int rc = clEnqueueWriteBuffer(m->ctx->queue, m->stats, CL_TRUE, 0, m->n_stats * sizeof *host,
                                     host, 0, NULL, NULL);
    if (rc != CL_SUCCESS) st = mfail_cl(m, rc, "uploading initial statistics");
    free(host);
    return st;
}

/* PyTorch's defaults, by each layer's init (conv and linear: kaiming_uniform_(a=sqrt(5)) gives
 * U(+-1/sqrt(fan_in)) for the weights, and the bias is U(+-1/sqrt(fan_in)) too). Values come
 * from clcnn's own generator, drawn node by node in parameter order. */
static clcnn_status init_params(clcnn_model *m, uint64_t seed) {
    float *host = calloc(m->total + 1, sizeof *host);
    clcnn_rng rng;
    clcnn_status st = CLCNN_SUCCESS;
    if (!host) return clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    clcnn_rng_seed(&rng, seed);
    for (int i = 0; i < m->n_nodes; i++) {
        const clcnn_node *n = &m->nodes[i];
        if (n->ops->init && n->n_params) n->ops->init(n, m->params, host, &rng);
    }
    cl_int rc = clEnqueueWriteBuffer(m->ctx->queue, m->p, CL_TRUE, 0, m->total * sizeof *host, host,
                                     0, NULL, NULL);
    if (rc != CL_SUCCESS) st = mfail_cl(m, rc, "uploading initial parameters");
    free(host);
    return st;
}

/* The spec's layers and their canonical text, sized from its own length: it can be far longer
 * than the spec as written (repetitions expanded, every default spelled out). */
static clcnn_status parse_spec(clcnn_model *m, const char *spec, clcnn_layer_desc **descs, int *n) {
    clcnn_status st = clcnn_spec_parse(spec, descs, n, &m->err);
    if (st) return st;
    size_t len = clcnn_spec_format(*descs, *n, NULL, 0);
    if ((m->spec = malloc(len + 1))) clcnn_spec_format(*descs, *n, m->spec, len + 1);
    if (!m->spec) return clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_model_create(clcnn_model **out, clcnn_context *ctx, const char *spec,
                                int channels, int height, int width, uint64_t seed) {
    clcnn_model *m;
    clcnn_status st;
    clcnn_layer_desc *descs = NULL;
    int n = 0;
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
    m->seed = seed;
    st = parse_spec(m, spec, &descs, &n);
    if (!st) st = clcnn_plan_build(m, descs, n, NULL);
    free(descs);
    if (st) return st;
    size_t bytes = m->total * sizeof(float);
    if ((st = clcnn_model_alloc(m, &m->p, bytes, "parameters"))) return st;
    if ((st = clcnn_model_alloc(m, &m->g, bytes, "gradients"))) return st;
    if ((st = clcnn_model_alloc(m, &m->acc, 2 * sizeof(float), "loss accumulator"))) return st;
    if ((st = clcnn_model_alloc(m, &m->acc_correct, 2 * sizeof(int), "accuracy accumulator")))
        return st;
    if ((st = init_params(m, seed))) return st;
    if ((st = init_stats(m))) return st;
    if ((st = fill_zero(m, m->g, m->total))) return st;
    clcnn_optimizer_options o;
    clcnn_optimizer_options_init(&o, CLCNN_OPTIMIZER_SGD);
    return clcnn_model_set_optimizer(m, &o);
}

size_t clcnn_model_plan(const clcnn_model *m, int batch, char *buf, size_t size) {
    if (buf && size) buf[0] = '\0';
    if (!m || !m->nodes || batch <= 0) return 0;
    return clcnn_plan_format(m, batch, buf, size);
}

static void release_batch(clcnn_model *m) {
    for (int i = 0; m->act && i <= m->n_nodes; i++)
        release(&m->act[i]);
    for (int i = 0; m->gact && i <= m->n_nodes; i++)
        release(&m->gact[i]);
    for (int i = 0; m->bufs && i < m->n_nodes; i++) {
        release(&m->bufs[i].aux);
        release(&m->bufs[i].keep_col);
        release(&m->bufs[i].keep_pad);
        release(&m->bufs[i].keep_gpad);
    }
    free(m->act);
    free(m->gact);
    free(m->bufs);
    m->act = m->gact = NULL;
    m->bufs = NULL;
    release(&m->labels);
    release(&m->loss_vec);
    release(&m->correct_vec);
    release(&m->col);
    release(&m->rows);
    release(&m->wflip);
    release(&m->xpad);
    for (int s = 0; s < CLCNN_MAX_INPUTS; s++)
        release(&m->gsum[s]);
    memset(&m->shared, 0, sizeof m->shared);
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
    release(&m->stats);
    release(&m->acc);
    release(&m->acc_correct);
    free(m->nodes);
    free(m->params);
    free(m->spec);
    free(m->norm);
    free(m);
}

static int is_view(const clcnn_node *n) {
    return (n->algo[CLCNN_PASS_FORWARD]->flags & CLCNN_ALGO_VIEW) != 0;
}

/* The node whose buffers hold node i's output: i, or for a view the node it views (-1: the
 * model's input). */
static int storage_of(const clcnn_model *m, int i) {
    while (i >= 0 && is_view(&m->nodes[i]))
        i = m->nodes[i].in[0];
    return i;
}

/* How many inputs of nodes that are not views read the output held by node r (through views
 * too): the writers of its gradient. */
static int readers(const clcnn_model *m, int r) {
    int c = 0;
    for (int k = 0; k < m->n_nodes; k++)
        for (int s = 0; s < m->nodes[k].n_in && !is_view(&m->nodes[k]); s++)
            c += storage_of(m, m->nodes[k].in[s]) == r;
    return c;
}

/* One buffer's check: its element count against CLCNN_MAX_ELEMENTS and its bytes (4 an
 * element) against the device's largest allocation; what names the buffer, as in "the output
 * of layer 3". */
static clcnn_status check_elements(clcnn_model *m, size_t elems, int n, const char *what) {
    const clcnn_device_info *in = &m->ctx->info;
    if (elems > (size_t)CLCNN_MAX_ELEMENTS)
        return clcnn_fail(&m->err, CLCNN_ERR_SHAPE,
                          "%s needs %zu elements for a batch of %d, more than the %lld that "
                          "clcnn's 32-bit kernel indices reach; use a smaller batch",
                          what, elems, n, (long long)CLCNN_MAX_ELEMENTS);
    if (in->max_alloc_bytes && elems * 4 > in->max_alloc_bytes)
        return clcnn_fail(&m->err, CLCNN_ERR_SHAPE,
                          "%s needs a buffer of %zu bytes for a batch of %d, more than %s allows "
                          "in one allocation (%llu bytes); use a smaller batch",
                          what, elems * 4, n, in->name, (unsigned long long)in->max_alloc_bytes);
    return CLCNN_SUCCESS;
}

static void grow(size_t *cap, size_t need) {
    if (need > *cap) *cap = need;
}

/* What one batch of n samples needs on the device, in elements, before anything is allocated:
 * per node its plan's buffers (into bufs[i].ws), the shared scratch (into *shared) and, per
 * input slot s, the largest input whose gradient a second reader adds in (gsum[s]). Everything
 * is checked against CLCNN_MAX_ELEMENTS and the device's largest allocation first, so an
 * oversized batch is refused with one message and no allocation (clcnn_model_check_batch makes
 * the same checks alone). */
static clcnn_status size_batch(clcnn_model *m, int n, clcnn_node_bufs *bufs, clcnn_node_ws *shared,
                               size_t *gsum) {
    for (int i = 0; i < m->n_nodes; i++)
        for (int s = 0; s < m->nodes[i].n_in && !is_view(&m->nodes[i]); s++) {
            int src = m->nodes[i].in[s], r = storage_of(m, src);
            const clcnn_shape *y = &m->nodes[src < 0 ? 0 : src].y;
            if (r >= 0 && readers(m, r) > 1) grow(&gsum[s], (size_t)n * y->c * y->h * y->w);
        }
    clcnn_status st;
    char what[96];
    size_t in = (size_t)n * m->in_c * m->in_h * m->in_w;
    if ((st = check_elements(m, in, n, "the input batch"))) return st;
    for (int i = 0; i < m->n_nodes; i++) {
        const clcnn_node *N = &m->nodes[i];
        clcnn_node_ws *w = &bufs[i].ws;
        int last = N->layer + N->n_layers - 1;
        const char *kind = clcnn_layer_kind_name(N->n_layers > 1 ? N->fused.kind : N->d.kind);
        size_t out = (size_t)n * N->y.c * N->y.h * N->y.w;
        clcnn_node_workspace(m->ctx, N, n, w);
        grow(&shared->col, w->col), grow(&shared->rows, w->rows);
        grow(&shared->xpad, w->xpad), grow(&shared->wflip, w->wflip);
        snprintf(what, sizeof what, "the output of layer %d (%s)", last, kind);
        if ((st = check_elements(m, out, n, what))) return st;
        kind = clcnn_layer_kind_name(N->d.kind);
        snprintf(what, sizeof what, "the im2col matrix of layer %d (%s)", N->layer, kind);
        if ((st = check_elements(m, w->keep_col, n, what))) return st;
        snprintf(what, sizeof what, "the padded input of layer %d (%s)", N->layer, kind);
        if ((st = check_elements(m, w->keep_pad, n, what))) return st;
        snprintf(what, sizeof what, "the padded gradient of layer %d (%s)", N->layer, kind);
        if ((st = check_elements(m, w->keep_gpad, n, what))) return st;
    }
    if ((st = check_elements(m, shared->col, n, "the im2col workspace"))) return st;
    if ((st = check_elements(m, shared->rows, n, "the GEMM workspace"))) return st;
    if ((st = check_elements(m, shared->xpad, n, "the padded-input workspace"))) return st;
    return CLCNN_SUCCESS;
}

/* What n's backward reads (layer.h's backward_reads; NULL: everything). */
static unsigned reads(const clcnn_node *n) {
    return n->ops->backward_reads ? n->ops->backward_reads(n) : CLCNN_READS_X | CLCNN_READS_Y;
}

/* A buffer some nodes hold in turn: the span of a training step it is needed in, on one time
 * line: forward step i at time i, the loss at n_nodes, backward step i at 2 n_nodes - i. */
typedef struct tenant {
    int start, end; /* inclusive */
    size_t need;    /* elements */
    int *slot;      /* where the slot it is given goes */
} tenant;

/* Gives each tenant a slot whose other tenants' spans do not meet its own: in the order the
 * spans start, the free slot that fits best (or the largest, which grows), else a new one.
 * sizes[k] receives slot k's elements; returns the number of slots, -1 when out of memory. */
static int place(tenant *t, int n, size_t *sizes) {
    int n_slots = 0;
    int *busy = calloc((size_t)n + 1, sizeof *busy); /* per slot: the end of its last tenant */
    if (!busy) return -1;
    for (int done = 0; done < n; done++) {
        int next = -1;
        for (int i = 0; i < n; i++)
            if (*t[i].slot == -3 && (next < 0 || t[i].start < t[next].start)) next = i;
        tenant *c = &t[next];
        int best = -1;
        for (int k = 0; k < n_slots; k++) {
            if (busy[k] >= c->start) continue;
            int fits = sizes[k] >= c->need, bfits = best >= 0 && sizes[best] >= c->need;
            if (best < 0 || (fits && (!bfits || sizes[k] < sizes[best])) ||
                (!fits && !bfits && sizes[k] > sizes[best]))
                best = k;
        }
        if (best < 0) best = n_slots++, sizes[best] = 0;
        if (sizes[best] < c->need) sizes[best] = c->need;
        busy[best] = c->end;
        *c->slot = best;
    }
    free(busy);
    return n_slots;
}

/* The nodes' outputs and output gradients by liveness (docs/ARCHITECTURE.md, "Memory"): a
 * value no backward reads (backward_reads) is needed from its forward to its last reader's;
 * one a backward reads, to the end of the step; the gradient of node r's output from the
 * backward of its last reader (the loss, for the model's output) down to r's own. Buffers whose
 * spans do not meet are one. act_of[r] and grad_of[r] receive r's slots, -1 for a view (its
 * input's buffers) and -2 for a buffer nothing writes or reads: the output of a node that hands
 * it over only padded (pad_only) or writes it into a concatenation's (slice_of: that one's
 * output is then needed from the first such producer's forward), the gradient of one whose
 * gradient is handed over only padded (gpad_only). Returns the number of slots (sizes in
 * floats, per slot), -1 when out of memory. */
static int place_values(const clcnn_model *m, int n, int *act_of, int *grad_of, size_t *sizes) {
    int N = m->n_nodes, k = 0;
    tenant *t = calloc(2 * (size_t)N + 1, sizeof *t);
    unsigned char *plain_unused = calloc((size_t)N + 1, 1);
    if (!t || !plain_unused) {
        free(t), free(plain_unused);
        return -1;
    }
    for (int r = 0; r < N; r++)
        if (m->nodes[r].gpad_to >= 0 && m->nodes[r].gpad_only)
            plain_unused[m->nodes[r].gpad_to] = 1;
    for (int r = 0; r < N; r++) {
        const clcnn_node *R = &m->nodes[r];
        act_of[r] = grad_of[r] = -1;
        if (is_view(R)) continue;
        /* readers, through views: the last forward, the last backward that reads the value */
        int last = r == N - 1 ? N : r, back = reads(R) & CLCNN_READS_Y ? 2 * N - r : -1;
        for (int j = r + 1; j < N; j++)
            for (int s = 0; s < m->nodes[j].n_in && !is_view(&m->nodes[j]); s++) {
                if (storage_of(m, m->nodes[j].in[s]) != r) continue;
                if (j > last) last = j;
                if ((reads(&m->nodes[j]) & CLCNN_READS_X) && 2 * N - j > back) back = 2 * N - j;
            }
        size_t need = (size_t)n * R->y.c * R->y.h * R->y.w;
        int first = r; /* a concatenation's output from its first in-place producer's forward */
        for (int p = 0; p < r; p++)
            if (m->nodes[p].slice_of == r && p < first) first = p;
        act_of[r] = grad_of[r] = -3;
        if ((R->pad_to >= 0 && R->pad_only && !(reads(R) & CLCNN_READS_Y)) || R->slice_of >= 0)
            act_of[r] = -2;
        else
            t[k++] = (tenant){first, back > last ? back : last, need, &act_of[r]};
        if (plain_unused[r])
            grad_of[r] = -2;
        else
            t[k++] = (tenant){last == N ? N : 2 * N - last, 2 * N - r, need, &grad_of[r]};
    }
    int n_slots = place(t, k, sizes);
    free(t), free(plain_unused);
    return n_slots;
}

/* Allocates `elems` elements of `size` bytes into *buf when elems > 0, naming it by fmt and
 * the layer index. */
static clcnn_status alloc_named(clcnn_model *m, cl_mem *buf, size_t elems, size_t size,
                                const char *fmt, int layer) {
    char what[64];
    if (!elems) return CLCNN_SUCCESS;
    snprintf(what, sizeof what, fmt, layer);
    return clcnn_model_alloc(m, buf, elems * size, what);
}

/* Node i's own buffers; its output and output gradient are the buffers out and gout (its
 * input's, for a view). */
static clcnn_status alloc_node(clcnn_model *m, int i, cl_mem out, cl_mem gout) {
    const clcnn_node *N = &m->nodes[i];
    clcnn_node_bufs *b = &m->bufs[i];
    int last = N->layer + N->n_layers - 1, src = N->in[0] + 1;
    clcnn_status st;
    if (is_view(N)) {
        clRetainMemObject(m->act[src]);
        m->act[i + 1] = m->act[src];
        if (m->gact[src]) clRetainMemObject(m->gact[src]);
        m->gact[i + 1] = m->gact[src];
    } else {
        clRetainMemObject(m->act[i + 1] = out);
        clRetainMemObject(m->gact[i + 1] = gout);
    }
    if ((st = alloc_named(m, &b->aux, b->ws.aux, sizeof(int), "the argmax of layer %d", last)))
        return st;
    if ((st = alloc_named(m, &b->keep_pad, b->ws.keep_pad, 4, "the padded input of layer %d",
                          N->layer)))
        return st;
    /* handed off: the producer writes the inside, nothing ever writes the zeros around it */
    if (N->x_padded && (st = fill_zero(m, b->keep_pad, b->ws.keep_pad))) return st;
    if ((st = alloc_named(m, &b->keep_gpad, b->ws.keep_gpad, 4, "the padded gradient of layer %d",
                          N->layer)))
        return st;
    if (b->keep_gpad && (st = fill_zero(m, b->keep_gpad, b->ws.keep_gpad))) return st;
    return alloc_named(m, &b->keep_col, b->ws.keep_col, 4, "the im2col matrix of layer %d",
                       N->layer);
}

/* The shared scratch and the per-sample label, loss and hit buffers. */
static clcnn_status alloc_shared(clcnn_model *m, int n, const size_t *gsum) {
    clcnn_status st;
    const clcnn_node_ws *z = &m->shared;
    if ((st = clcnn_model_alloc(m, &m->col, z->col * 4, "the im2col workspace"))) return st;
    if ((st = clcnn_model_alloc(m, &m->rows, z->rows * 4, "the GEMM workspace"))) return st;
    if (z->xpad && (st = clcnn_model_alloc(m, &m->xpad, z->xpad * 4, "the padded input")))
        return st;
    if (z->wflip && (st = clcnn_model_alloc(m, &m->wflip, z->wflip * 4, "flipped weights")))
        return st;
    for (int s = 0; s < CLCNN_MAX_INPUTS; s++)
        if (gsum[s] && (st = clcnn_model_alloc(m, &m->gsum[s], gsum[s] * 4, "a gradient sum")))
            return st;
    if ((st = clcnn_model_alloc(m, &m->labels, (size_t)n, "the labels"))) return st;
    if ((st = clcnn_model_alloc(m, &m->loss_vec, (size_t)n * sizeof(float), "per-sample losses")))
        return st;
    return clcnn_model_alloc(m, &m->correct_vec, (size_t)n * sizeof(int), "per-sample hits");
}

clcnn_status clcnn_model_check_batch(clcnn_model *m, int batch) {
    clcnn_node_ws shared = {0};
    size_t gsum[CLCNN_MAX_INPUTS] = {0};
    if (!m) return CLCNN_ERR_INVALID_ARGUMENT;
    if (!m->nodes || batch <= 0)
        return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT,
                          "clcnn_model_check_batch: a batch of %d samples", batch);
    clcnn_node_bufs *bufs = calloc((size_t)m->n_nodes + 1, sizeof *bufs);
    if (!bufs) return clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    clcnn_status st = size_batch(m, batch, bufs, &shared, gsum);
    free(bufs);
    return st;
}

/* What one batch of n needs, placed (size_batch and grad_slots), before anything is allocated.
 * slot_of has n_nodes entries, slot_size n_nodes + 1. */
typedef struct batch_plan {
    clcnn_node_bufs *bufs;
    clcnn_node_ws shared;
    size_t gsum[CLCNN_MAX_INPUTS];
    int *act_of, *grad_of, n_slots; /* place_values */
    size_t *slot_size;
} batch_plan;

static void plan_free(batch_plan *b) {
    free(b->bufs), free(b->act_of), free(b->grad_of), free(b->slot_size);
    memset(b, 0, sizeof *b);
}

static clcnn_status plan_batch(clcnn_model *m, int n, batch_plan *b) {
    size_t nn = (size_t)m->n_nodes + 1;
    memset(b, 0, sizeof *b);
    b->bufs = calloc(nn, sizeof *b->bufs);
    b->act_of = calloc(nn, sizeof *b->act_of);
    b->grad_of = calloc(nn, sizeof *b->grad_of);
    b->slot_size = calloc(2 * nn, sizeof *b->slot_size);
    clcnn_status st = CLCNN_SUCCESS;
    if (!b->bufs || !b->act_of || !b->grad_of || !b->slot_size ||
        (b->n_slots = place_values(m, n, b->act_of, b->grad_of, b->slot_size)) < 0)
        st = clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    else
        st = size_batch(m, n, b->bufs, &b->shared, b->gsum);
    if (st) plan_free(b);
    return st;
}

/* The device bytes of the batch buffers a plan allocates (as clcnn_model_reserve does). */
static size_t plan_bytes(const clcnn_model *m, int n, const batch_plan *b) {
    size_t f = (size_t)n * m->in_c * m->in_h * m->in_w; /* floats and ints: 4 bytes each */
    for (int i = 0; i < m->n_nodes; i++) {
        const clcnn_node_ws *w = &b->bufs[i].ws;
        f += w->aux + w->keep_pad + w->keep_gpad + w->keep_col;
    }
    for (int k = 0; k < b->n_slots; k++)
        f += b->slot_size[k];
    for (int s = 0; s < CLCNN_MAX_INPUTS; s++)
        f += b->gsum[s];
    f += b->shared.col + b->shared.rows + b->shared.xpad + b->shared.wflip;
    /* labels, losses, hits; the placeholder */
    return 4 * f + (size_t)n * (1 + sizeof(float) + sizeof(int)) + 4;
}

/* The bytes the model holds whatever the batch: parameters, gradients, optimizer state,
 * statistics and the accumulators. */
static size_t fixed_bytes(const clcnn_model *m) {
    size_t states = (size_t)clcnn_optimizer_states(&m->opt);
    return m->total * sizeof(float) * (2 + states) + m->n_stats * sizeof(float) +
           2 * sizeof(float) + 2 * sizeof(int);
}

size_t clcnn_model_device_bytes(clcnn_model *m, int batch) {
    batch_plan b;
    if (!m || !m->nodes || batch <= 0 || plan_batch(m, batch, &b)) return 0;
    size_t bytes = fixed_bytes(m) + plan_bytes(m, batch, &b);
    plan_free(&b);
    return bytes;
}

/* Sizes every per-batch buffer for n samples; a no-op when they are already large enough. */
clcnn_status clcnn_model_reserve(clcnn_model *m, int n) {
    clcnn_status st;
    size_t nn = (size_t)m->n_nodes + 1;
    batch_plan b;
    cl_mem *slots = NULL;
    if (n <= m->cap) return CLCNN_SUCCESS;
    if ((st = plan_batch(m, n, &b))) return st;
    release_batch(m);
    m->bufs = b.bufs, b.bufs = NULL;
    m->shared = b.shared;
    m->act = calloc(nn, sizeof *m->act);
    m->gact = calloc(nn, sizeof *m->gact);
    slots = calloc(2 * nn + 1, sizeof *slots);
    if (!m->act || !m->gact || !slots) {
        st = clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
        goto fail;
    }
    size_t in_floats = (size_t)n * m->in_c * m->in_h * m->in_w;
    if ((st = clcnn_model_alloc(m, &m->act[0], in_floats * sizeof(float), "the input batch")))
        goto fail;
    for (int k = 0; k < b.n_slots; k++)
        if ((st = clcnn_model_alloc(m, &slots[k], b.slot_size[k] * 4, "outputs and gradients")))
            goto fail;
    /* what nothing reads or writes: a placeholder, for the kernels' arguments */
    if ((st = clcnn_model_alloc(m, &slots[b.n_slots], 4, "a placeholder"))) goto fail;
    for (int i = 0; i < m->n_nodes; i++) {
        int a = b.act_of[i], g = b.grad_of[i];
        cl_mem out = slots[a == -2 ? b.n_slots : a < 0 ? 0 : a];
        cl_mem gout = slots[g == -2 ? b.n_slots : g < 0 ? 0 : g];
        if ((st = alloc_node(m, i, out, gout))) goto fail;
    }
    if ((st = alloc_shared(m, n, b.gsum))) goto fail;
    m->n_slots = b.n_slots;
    m->cap = n;
fail:
    for (int k = 0; slots && k <= b.n_slots; k++)
        release(&slots[k]); /* the act and gact entries hold them */
    free(slots);
    plan_free(&b);
    if (st) release_batch(m);
    return st;
}

/* Propagates a context-level failure message into the model's error slot. */
static clcnn_status ctx_status(clcnn_model *m, clcnn_status st) {
    if (st != CLCNN_SUCCESS) m->err = m->ctx->err;
    return st;
}

/* Node i's random stream for the current step: splitmix64 of the model's seed, the step count
 * and the node. */
static cl_uint node_seed(const clcnn_model *m, int i) {
    uint64_t z = m->seed ^ ((uint64_t)m->step * 0x9E3779B97F4A7C15ull) ^
                 ((uint64_t)(i + 1) * 0xD1B54A32D192ED03ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (cl_uint)(z ^ (z >> 31));
}

/* What node i's passes see for a batch of n, in training mode or not. */
static clcnn_io node_io(const clcnn_model *m, int i, int n, int training) {
    const clcnn_node *N = &m->nodes[i];
    const clcnn_node_bufs *b = &m->bufs[i];
    clcnn_io io = {.ctx = m->ctx,
                   .col = m->col,
                   .rows = m->rows,
                   .xpad = m->xpad,
                   .wflip = m->wflip,
                   .params = m->p,
                   .grads = m->g,
                   .woff = 0,
                   .boff = -1,
                   .stats = m->stats,
                   .soff = -1};
    if (N->n_params > 0) io.woff = (int)m->params[N->param0].off;
    if (N->n_params > 1) io.boff = (int)m->params[N->param0 + 1].off;
    for (int k = N->param0; k < N->param0 + N->n_params; k++)
        if (m->params[k].kind == CLCNN_PARAM_STAT && io.soff < 0) io.soff = (int)m->params[k].off;
    for (int s = 0; s < N->n_in; s++) {
        const clcnn_node *P = N->in[s] >= 0 ? &m->nodes[N->in[s]] : NULL;
        io.x[s] = P && P->slice_of == i
                      ? clcnn_tensor_slice(m->act[i + 1], n, &N->xs[s], P->slice_off, &N->y)
                      : clcnn_tensor_of(m->act[N->in[s] + 1], n, &N->xs[s], 0);
    }
    io.y = N->slice_of >= 0 ? clcnn_tensor_slice(m->act[N->slice_of + 1], n, &N->y, N->slice_off,
                                                 &m->nodes[N->slice_of].y)
                            : clcnn_tensor_of(m->act[i + 1], n, &N->y, 0);
    io.gy = clcnn_tensor_of(m->gact[i + 1], n, &N->y, 0);
    io.aux = b->aux, io.keep_col = b->keep_col, io.keep_pad = b->keep_pad;
    if (N->pad_to >= 0) {
        const clcnn_node *C = &m->nodes[N->pad_to];
        io.y_view = clcnn_tensor_of(m->bufs[N->pad_to].keep_pad, n, &N->y, C->views.x_halo);
        io.y_view_only = N->pad_only;
    }
    io.x_in_view = N->x_padded;
    if (N->gpad_to >= 0) {
        const clcnn_node *G = &m->nodes[N->gpad_to];
        io.gx_view = clcnn_tensor_of(m->bufs[N->gpad_to].keep_gpad, n, &N->x, G->views.gy_halo);
        io.gx_view_only = N->gpad_only;
    }
    io.keep_gpad = b->keep_gpad, io.gy_in_view = N->gy_padded;
    io.ws = m->shared;
    io.N = n;
    io.training = training;
    io.seed = node_seed(m, i);
    io.sample0 = m->sample0;
    return io;
}

/* The forward pass in training mode (batch statistics, dropout) or evaluation mode. */
static clcnn_status forward(clcnn_model *m, int n, int training) {
    clcnn_context *ctx = m->ctx;
    clcnn_status st = CLCNN_SUCCESS;
    if (training) m->batches_tracked++;
    for (int i = 0; i < m->n_nodes && !st; i++) {
        const clcnn_node *N = &m->nodes[i];
        if (is_view(N)) continue;
        clcnn_io io = node_io(m, i, n, training);
        clcnn_prof_section(ctx, N->label[0], N->flops * n);
        st = N->ops->forward(N, &io);
    }
    clcnn_prof_section(ctx, NULL, 0);
    return ctx_status(m, st);
}

clcnn_status clcnn_model_forward(clcnn_model *m, int n) {
    return forward(m, n, 0);
}

/* Where node i's backward writes the gradient of its input s: the gradient buffer of that value
 * (shared with the node it views, for a view) when this is the first (in backward order) of the
 * buffer's writers, else gsum[s], added in afterwards (*add). NULL when no gradient is needed
 * there. */
static cl_mem grad_target(const clcnn_model *m, int i, int s, unsigned char *written, int *add) {
    const clcnn_node *N = &m->nodes[i];
    int src = N->in[s], r = storage_of(m, src);
    *add = 0;
    if (r < 0 || !N->need_gx) return NULL;
    if (!written[r]) return written[r] = 1, m->gact[src + 1];
    *add = 1;
    return m->gsum[s];
}

/* gact[src + 1] += gsum[s] over the producer's output. */
static clcnn_status add_grad(clcnn_model *m, int src, int s, int n) {
    const clcnn_node *P = &m->nodes[src];
    clcnn_kern *k = clcnn_kernel(m->ctx, CLCNN_K_axpy_f32);
    int count = n * P->y.c * P->y.h * P->y.w, zero = 0;
    float one = 1.0f;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, m->gact[src + 1]);
    CLCNN_ARG(&a, zero);
    CLCNN_ARG(&a, m->gsum[s]);
    CLCNN_ARG(&a, zero);
    CLCNN_ARG(&a, count);
    CLCNN_ARG(&a, one);
    return clcnn_launch1d(m->ctx, k, &a, (size_t)count);
}

/* Nodes in reverse order; a view's gradient is its input's, so it has nothing to do. A node
 * with neither parameters nor a needed input gradient is skipped. */
static clcnn_status backward(clcnn_model *m, int n) {
    clcnn_context *ctx = m->ctx;
    clcnn_status st = CLCNN_SUCCESS;
    unsigned char *written = calloc((size_t)m->n_nodes + 1, 1);
    if (!written) return clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    for (int i = m->n_nodes - 1; i >= 0 && !st; i--) {
        const clcnn_node *N = &m->nodes[i];
        int add[CLCNN_MAX_INPUTS] = {0};
        if (is_view(N) || (!N->need_gx && N->n_params == 0)) continue;
        clcnn_io io = node_io(m, i, n, 1);
        for (int s = 0; s < N->n_in; s++)
            io.gx[s] = clcnn_tensor_of(grad_target(m, i, s, written, &add[s]), n, &N->xs[s], 0);
        /* Weight gradient, plus the input gradient when it is needed: 1 or 2 forwards' work. */
        clcnn_prof_section(ctx, N->label[1], N->flops * n * (io.gx[0].buf ? 2 : 1));
        st = N->ops->backward(N, &io);
        for (int s = 0; s < N->n_in && !st; s++)
            if (add[s]) st = add_grad(m, N->in[s], s, n);
    }
    free(written);
    clcnn_prof_section(ctx, NULL, 0);
    return ctx_status(m, st);
}

/* The loss of n samples; want_grad: its gradient, divided by grad_n; the accumulator gets the
 * losses' sum divided by `divisor`. */
static clcnn_status loss(clcnn_model *m, int n, int want_grad, float divisor, int accumulate,
                         int grad_n) {
    clcnn_prof_section(m->ctx, "cross-entropy", 0);
    clcnn_status st = clcnn_cross_entropy(
        m->ctx, m->loss_vec, m->correct_vec, want_grad ? m->gact[m->n_nodes] : NULL,
        m->act[m->n_nodes], 0, m->labels, n, m->out_size, m->acc, m->acc_correct, divisor,
        accumulate, m->label_smoothing, grad_n);
    m->last_n = n;
    clcnn_prof_section(m->ctx, NULL, 0);
    return ctx_status(m, st);
}

clcnn_status clcnn_model_loss(clcnn_model *m, int n, int want_grad, int sum, int accumulate) {
    return loss(m, n, want_grad, sum ? 1.0f : (float)n, accumulate, n);
}

/* How many parameters, from the first, weight decay applies to. */
static int decayed(const clcnn_model *m) {
    return (int)(m->opt.no_decay_bn_bias ? m->n_decay : m->total);
}

clcnn_status clcnn_model_optimizer_step(clcnn_model *m) {
    const clcnn_optimizer_options *o = &m->opt;
    clcnn_context *ctx = m->ctx;
    int n = (int)m->total;
    m->step++;
    /* Labelled by the kernel (sgd_step / adam_step): no section is open here. */
    if (o->kind == CLCNN_OPTIMIZER_SGD) {
        clcnn_kern *k = clcnn_kernel(ctx, CLCNN_K_sgd_step);
        float lr = (float)o->lr, mom = (float)o->momentum, omd = (float)(1.0 - o->dampening);
        float wd = (float)o->weight_decay;
        int nest = o->nesterov, first = m->step == 1, n_decay = decayed(m);
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
        CLCNN_ARG(&a, n_decay);
        CLCNN_ARG(&a, nest);
        CLCNN_ARG(&a, first);
        return ctx_status(m, clcnn_launch1d(ctx, k, &a, (size_t)n));
    }
    /* Adam/AdamW: the scalars are computed in double, as PyTorch's Python code does. */
    clcnn_kern *k = clcnn_kernel(ctx, CLCNN_K_adam_step);
    double t = (double)m->step;
    int decoupled = o->kind == CLCNN_OPTIMIZER_ADAMW;
    float b1 = (float)o->beta1, omb1 = (float)(1.0 - o->beta1);
    float b2 = (float)o->beta2, omb2 = (float)(1.0 - o->beta2), eps = (float)o->eps;
    float wd = decoupled ? 0.0f : (float)o->weight_decay;
    float decay = decoupled ? (float)(1.0 - o->lr * o->weight_decay) : 1.0f;
    float step_size = (float)(o->lr / (1.0 - pow(o->beta1, t)));
    float bc2_sqrt = (float)sqrt(1.0 - pow(o->beta2, t));
    int n_decay = decayed(m);
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
    CLCNN_ARG(&a, n_decay);
    CLCNN_ARG(&a, step_size);
    CLCNN_ARG(&a, bc2_sqrt);
    return ctx_status(m, clcnn_launch1d(ctx, k, &a, (size_t)n));
}

clcnn_status clcnn_model_grad_staged(clcnn_model *m, int n, int global_n) {
    clcnn_status st;
    if ((st = forward(m, n, 1))) return st;
    if ((st = loss(m, n, 1, (float)global_n, 0, global_n))) return st;
    return backward(m, n);
}

clcnn_status clcnn_model_train_staged(clcnn_model *m, int n) {
    clcnn_status st;
    if ((st = clcnn_model_grad_staged(m, n, n))) return st;
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
    cl_int rc = clEnqueueReadBuffer(m->ctx->queue, m->act[m->n_nodes], CL_TRUE, 0,
                                    (size_t)n * m->out_size * sizeof(float), logits, 0, NULL, NULL);
    if (rc != CL_SUCCESS) return mfail_cl(m, rc, "reading the logits");
    return CLCNN_SUCCESS;
}

void clcnn_optimizer_options_init(clcnn_optimizer_options *o, clcnn_optimizer_kind kind) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
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

clcnn_status clcnn_model_set_optimizer(clcnn_model *m, const clcnn_optimizer_options *given) {
    clcnn_status st;
    clcnn_optimizer_options in, *o = &in;
    if (!m) return CLCNN_ERR_INVALID_ARGUMENT;
    if (!given) return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL optimizer options");
    clcnn_optimizer_options_init(&in, CLCNN_OPTIMIZER_SGD);
    if ((st = clcnn_sized_in(&m->err, "clcnn_optimizer_options", &in, given, sizeof in))) return st;
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

clcnn_status clcnn_model_set_lr(clcnn_model *m, double lr) {
    if (!m) return CLCNN_ERR_INVALID_ARGUMENT;
    if (!(lr > 0.0) || !isfinite(lr))
        return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "learning rate %g must be > 0", lr);
    m->opt.lr = lr;
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_model_get_optimizer(const clcnn_model *m, clcnn_optimizer_options *o) {
    clcnn_optimizer_options out;
    if (!m || !o) return CLCNN_ERR_INVALID_ARGUMENT;
    /* The message goes into the model's error slot, which is no part of its value. */
    clcnn_status st =
        clcnn_sized_in(&((clcnn_model *)m)->err, "clcnn_optimizer_options", &out, o, sizeof out);
    if (st) return st;
    memcpy(o, &m->opt, o->struct_size);
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_model_errcode(const clcnn_model *m) {
    return m ? m->err.code : CLCNN_ERR_INVALID_ARGUMENT;
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

int clcnn_model_train_min(const clcnn_model *m, int *node) {
    if (node) *node = -1;
    for (int i = 0; m && i < m->n_nodes; i++) {
        const clcnn_node *N = &m->nodes[i];
        if (N->d.kind == CLCNN_LAYER_BATCHNORM && N->x.h * N->x.w == 1) {
            if (node) *node = i;
            return 2;
        }
    }
    return 1;
}

void clcnn_model_train_min_name(const clcnn_model *m, char *buf, size_t size) {
    int i = -1;
    clcnn_model_train_min(m, &i);
    if (i < 0) {
        snprintf(buf, size, "the model");
        return;
    }
    const clcnn_node *N = &m->nodes[i];
    snprintf(buf, size, "layer %s (%s)", N->path, N->x.flat ? "BatchNorm1d" : "BatchNorm2d");
}

int clcnn_model_min_train_batch(const clcnn_model *m) {
    return m ? clcnn_model_train_min(m, NULL) : 0;
}

int clcnn_model_param_count(const clcnn_model *m) {
    return m ? m->n_params : 0;
}

int clcnn_model_param_trained(const clcnn_model *m, int i) {
    return m && i >= 0 && i < m->n_params && clcnn_param_trained(m->params[i].kind);
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

/* Reads (dst) or writes (src) entry i of buf, the parameters or the gradients; a running
 * statistic lives in the stats buffer, and the counter on the host (as a float here). */
static clcnn_status copy_param(clcnn_model *m, cl_mem buf, int i, float *dst, const float *src) {
    if (!m) return CLCNN_ERR_INVALID_ARGUMENT;
    if (i < 0 || i >= m->n_params || (!dst && !src))
        return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "bad parameter index %d or NULL", i);
    const clcnn_param *p = &m->params[i];
    if (!clcnn_param_trained(p->kind) && buf == m->g)
        return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "%s is not trained: no gradient",
                          p->name);
    if (p->kind == CLCNN_PARAM_COUNTER) {
        if (dst) *dst = (float)m->batches_tracked;
        if (src) m->batches_tracked = (int64_t)src[0];
        return CLCNN_SUCCESS;
    }
    if (p->kind == CLCNN_PARAM_STAT) buf = m->stats;
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
