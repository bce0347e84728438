/* What every layer shares: the registry's table, node set-up, the rows of the layers with one
 * way per pass, the planner that filters a layer's rows and picks by its preference order,
 * PyTorch's fan-in initialisation, and two small kernels' launches (bias gradient, fill). */
#include "layer.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "registry.h"

#define X(UPPER, lower, kernels) extern const clcnn_layer_ops clcnn_##lower##_ops;
CLCNN_LAYER_LIST(X, CLCNN_LAYER_NO_KERNELS_)
#undef X

static const clcnn_layer_ops *const table[] = {
#define X(UPPER, lower, kernels) [CLCNN_LAYER_##UPPER] = &clcnn_##lower##_ops,
    CLCNN_LAYER_LIST(X, CLCNN_LAYER_NO_KERNELS_)
#undef X
};

const clcnn_layer_ops *clcnn_layer_ops_of(clcnn_layer_kind kind) {
    if ((int)kind < 0 || (size_t)kind >= sizeof table / sizeof table[0]) return NULL;
    return table[kind];
}

const char *clcnn_algo_name(const clcnn_algo *a) {
    return a ? a->name : "-";
}

/* The rows of the layers with one way per pass. */
#define ONE_WAY(var, name_, pass_, flags_)                                                         \
    static const clcnn_algo var = {.name = name_, .pass = pass_, .flags = flags_}
ONE_WAY(kernel_fwd, "kernel", CLCNN_PASS_FORWARD, 0);
ONE_WAY(kernel_wgrad, "kernel", CLCNN_PASS_WGRAD, 0);
ONE_WAY(kernel_dgrad, "kernel", CLCNN_PASS_DGRAD, 0);
ONE_WAY(gemm_fwd, "gemm", CLCNN_PASS_FORWARD, 0);
ONE_WAY(gemm_wgrad, "gemm", CLCNN_PASS_WGRAD, 0);
ONE_WAY(gemm_dgrad, "gemm", CLCNN_PASS_DGRAD, 0);
ONE_WAY(view_fwd, "view", CLCNN_PASS_FORWARD, CLCNN_ALGO_VIEW);
ONE_WAY(view_dgrad, "view", CLCNN_PASS_DGRAD, CLCNN_ALGO_VIEW);
#undef ONE_WAY
const clcnn_algo *const clcnn_algos_kernel[] = {&kernel_fwd, &kernel_wgrad, &kernel_dgrad, NULL};
const clcnn_algo *const clcnn_algos_gemm[] = {&gemm_fwd, &gemm_wgrad, &gemm_dgrad, NULL};
const clcnn_algo *const clcnn_algos_view[] = {&view_fwd, &view_dgrad, NULL};

int clcnn_node_algos(const clcnn_context *ctx, const clcnn_node *n, int pass,
                     const clcnn_algo **out) {
    int k = 0;
    if ((pass == CLCNN_PASS_WGRAD && !n->n_params) || (pass == CLCNN_PASS_DGRAD && !n->need_gx))
        return 0;
    for (const clcnn_algo *const *r = n->ops->algos; *r; r++)
        if ((*r)->pass == pass && (!(*r)->applies || (*r)->applies(ctx, n))) {
            CLCNN_ASSERT(k < CLCNN_MAX_ALGOS);
            out[k++] = *r;
        }
    return k;
}

static int listed(const clcnn_algo *const *list, int n, const clcnn_algo *a) {
    for (int i = 0; i < n; i++)
        if (list[i] == a) return 1;
    return 0;
}

void clcnn_node_plan(const clcnn_context *ctx, clcnn_node *n, const clcnn_plan_force *force) {
    for (int p = 0; p < CLCNN_PASS_COUNT; p++) {
        const clcnn_algo *a[CLCNN_MAX_ALGOS];
        int k = clcnn_node_algos(ctx, n, p, a);
        const clcnn_algo_pref *o = n->ops->prefer ? n->ops->prefer(ctx, n, p) : NULL;
        n->algo[p] = k > 0 ? a[0] : NULL;
        for (; k > 0 && o && o->algo; o++)
            if (listed(a, k, o->algo) && (!o->when || o->when(ctx, n))) {
                n->algo[p] = o->algo;
                break;
            }
        if (force && force->algo[p] && listed(a, k, force->algo[p])) n->algo[p] = force->algo[p];
    }
}

void clcnn_node_workspace(const clcnn_context *ctx, const clcnn_node *n, int N, clcnn_node_ws *ws) {
    if (n->ops->workspace) n->ops->workspace(ctx, n, N, ws);
    for (int p = 0; p < CLCNN_PASS_COUNT; p++)
        if (n->algo[p] && n->algo[p]->workspace) n->algo[p]->workspace(ctx, n, N, ws);
}

const clcnn_algo *clcnn_algo_named(const clcnn_layer_ops *ops, int pass, const char *name) {
    for (const clcnn_algo *const *r = ops->algos; *r; r++)
        if ((*r)->pass == pass && !strcmp((*r)->name, name)) return *r;
    return NULL;
}

int clcnn_params_add(clcnn_params *pl, const char *path, const char *name, clcnn_param_kind kind,
                     int ndim, const int64_t *shape) {
    if (pl->n >= pl->cap) return -1;
    clcnn_param *p = &pl->p[pl->n];
    snprintf(p->name, sizeof p->name, "%s.%s", path, name);
    p->kind = kind;
    p->ndim = ndim;
    p->numel = 1;
    for (int d = 0; d < ndim; d++)
        p->shape[d] = shape[d], p->numel *= (size_t)shape[d];
    if (clcnn_param_trained(kind)) {
        p->off = pl->total;
        pl->total += p->numel;
    } else if (kind == CLCNN_PARAM_STAT) {
        p->off = pl->stats;
        pl->stats += p->numel;
    } else {
        p->off = 0;
    }
    return pl->n++;
}

clcnn_status clcnn_node_init(clcnn_node *n, const clcnn_layer_desc *d, int layer, const char *path,
                             const clcnn_shape *xs, int n_in, clcnn_params *pl, clcnn_error *e) {
    char where[96];
    const char *torch = clcnn_layer_kind_name(d->kind);
    memset(n, 0, sizeof *n);
    n->ops = clcnn_layer_ops_of(d->kind);
    CLCNN_ASSERT(n->ops != NULL);
    n->d = *d;
    n->layer = layer, n->n_layers = 1;
    CLCNN_ASSERT(n_in >= 1 && n_in <= CLCNN_MAX_INPUTS);
    n->n_in = n_in;
    for (int k = 0; k < n_in; k++)
        n->in[k] = k ? -1 : layer - 1, n->xs[k] = xs[k];
    n->x = xs[0];
    if (path)
        snprintf(n->path, sizeof n->path, "%s", path);
    else
        snprintf(n->path, sizeof n->path, "%d", layer);
    n->param0 = pl->n;
    snprintf(where, sizeof where, "layer %d (%s, column %d)", layer, torch, d->pos);
    clcnn_status st = n->ops->shape(n, pl, e, where);
    if (st) return st;
    n->n_params = pl->n - n->param0;
    if ((long long)n->y.c * n->y.h * n->y.w > (1LL << 28))
        return clcnn_fail(e, CLCNN_ERR_SHAPE,
                          "%s output of %d x %d x %d is too large (at most 2^28 elements per "
                          "sample)",
                          where, n->y.c, n->y.h, n->y.w);
    snprintf(n->label[0], sizeof n->label[0], "%d %s forward", layer, torch);
    snprintf(n->label[1], sizeof n->label[1], "%d %s backward", layer, torch);
    return CLCNN_SUCCESS;
}

const char *clcnn_shape_text(char *buf, size_t size, const clcnn_shape *s) {
    if (s->flat)
        snprintf(buf, size, "%d features", s->c);
    else
        snprintf(buf, size, "%d x %d x %d", s->c, s->h, s->w);
    return buf;
}

clcnn_status clcnn_shape_same(clcnn_node *n, clcnn_params *pl, clcnn_error *e, const char *where) {
    (void)pl, (void)e, (void)where;
    n->y = n->x;
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_shape_global(clcnn_node *n, clcnn_params *pl, clcnn_error *e,
                                const char *where) {
    (void)pl;
    if (n->x.flat)
        return clcnn_fail(e, CLCNN_ERR_SHAPE,
                          "%s needs a C x H x W input but gets %d flat features", where, n->x.c);
    n->y = (clcnn_shape){n->x.c, 1, 1, 0};
    return CLCNN_SUCCESS;
}

void clcnn_init_fan_in(const clcnn_node *n, const clcnn_param *params, float *host,
                       clcnn_rng *rng) {
    const clcnn_param *w = &params[n->param0];
    size_t fan_in = w->numel / (size_t)w->shape[0];
    double bound = 1.0 / sqrt((double)fan_in);
    for (int pi = n->param0; pi < n->param0 + n->n_params; pi++) {
        const clcnn_param *p = &params[pi];
        for (size_t j = 0; j < p->numel; j++)
            host[p->off + j] = (float)(-bound + 2.0 * bound * clcnn_rng_uniform(rng));
    }
}

clcnn_status clcnn_bias_grad(clcnn_context *ctx, cl_mem grads, int boff, cl_mem g, int goff, int N,
                             int OC, int hw) {
    clcnn_kern *kb = clcnn_kernel(ctx, CLCNN_K_bias_grad);
    int acc = 0;
    clcnn_args a = {kb->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, grads);
    CLCNN_ARG(&a, boff);
    CLCNN_ARG(&a, g);
    CLCNN_ARG(&a, goff);
    CLCNN_ARG(&a, N);
    CLCNN_ARG(&a, OC);
    CLCNN_ARG(&a, hw);
    CLCNN_ARG(&a, acc);
    return clcnn_launch_items(ctx, kb, &a, (size_t)OC);
}

clcnn_status clcnn_fill(clcnn_context *ctx, cl_mem buf, int off, int n, float value) {
    clcnn_kern *k = clcnn_kernel(ctx, CLCNN_K_fill_f32);
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, buf);
    CLCNN_ARG(&a, off);
    CLCNN_ARG(&a, n);
    CLCNN_ARG(&a, value);
    return clcnn_launch1d(ctx, k, &a, (size_t)n);
}

unsigned clcnn_reads_nothing(const clcnn_node *n) {
    (void)n;
    return 0;
}

unsigned clcnn_reads_x(const clcnn_node *n) {
    (void)n;
    return CLCNN_READS_X;
}

unsigned clcnn_reads_y(const clcnn_node *n) {
    (void)n;
    return CLCNN_READS_Y;
}

clcnn_tensor clcnn_tensor_of(cl_mem buf, int n, const clcnn_shape *s, int halo) {
    clcnn_tensor t = {0};
    if (!buf) return t;
    size_t hp = (size_t)s->h + 2 * (size_t)halo, wp = (size_t)s->w + 2 * (size_t)halo;
    t.buf = buf, t.n = n, t.c = s->c, t.h = s->h, t.w = s->w, t.halo = halo;
    t.sh = wp, t.sc = hp * wp, t.sn = (size_t)s->c * hp * wp;
    t.off = (size_t)halo * wp + (size_t)halo;
    return t;
}

clcnn_tensor clcnn_tensor_slice(cl_mem buf, int n, const clcnn_shape *s, size_t off,
                                const clcnn_shape *whole) {
    clcnn_tensor t = clcnn_tensor_of(buf, n, s, 0);
    if (!buf) return t;
    t.off = off, t.sn = (size_t)whole->c * whole->h * whole->w;
    return t;
}
