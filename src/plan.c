/* From the spec's layers to a planned graph: one node per layer, each with its inputs, shapes
 * and parameters; every node's algorithms chosen by its layer's rules for the device (or
 * forced); then fusions as rewrites of the graph (a node absorbs its only consumer). The step
 * (model.c) runs what the plan says and decides nothing. */
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether node `i` feeds exactly one node, `j`, as its only input. */
static int only_link(const clcnn_model *m, int i, int j) {
    const clcnn_node *b = &m->nodes[j];
    if (b->n_in != 1 || b->in[0] != i) return 0;
    for (int k = 0; k < m->n_nodes; k++)
        for (int s = 0; s < m->nodes[k].n_in && k != j; s++)
            if (m->nodes[k].in[s] == i) return 0;
    return 1;
}

void clcnn_node_absorb(const clcnn_context *ctx, clcnn_node *a, const clcnn_node *b,
                       const clcnn_plan_force *force) {
    a->y = b->y;
    a->fused = b->d;
    a->n_layers += b->n_layers;
    snprintf(a->label[0], sizeof a->label[0], "%d %s+%s forward", a->layer,
             clcnn_layer_kind_name(a->d.kind), clcnn_layer_kind_name(b->d.kind));
    snprintf(a->label[1], sizeof a->label[1], "%d %s+%s backward", a->layer,
             clcnn_layer_kind_name(a->d.kind), clcnn_layer_kind_name(b->d.kind));
    clcnn_node_plan(ctx, a, force);
}

/* Node i absorbs node i + 1, and later inputs are renumbered. */
static void fuse(clcnn_model *m, int i, const clcnn_plan_force *force) {
    clcnn_node *a = &m->nodes[i];
    clcnn_node_absorb(m->ctx, a, &m->nodes[i + 1], force);
    memmove(&m->nodes[i + 1], &m->nodes[i + 2], (size_t)(m->n_nodes - i - 2) * sizeof *a);
    m->n_nodes--;
    for (int k = 0; k < m->n_nodes; k++)
        for (int s = 0; s < m->nodes[k].n_in; s++)
            if (m->nodes[k].in[s] > i) m->nodes[k].in[s]--;
}

/* The padded hand-off: a node that keeps its input padded for the direct kernels (keep_pad, a
 * view with a halo: its views.x_halo; a direct convolution) has it written there by its input's
 * producer, in the producer's forward, when the producer can (views.writes_y) and hands off to
 * no other node: the separate padding pass, a read and a write of the whole tensor, goes; where
 * the convolution is the output's only reader (its backward reads keep_pad), the producer
 * writes only the padded copy. The zeros around it are written once, when the buffer is
 * allocated (model.c). Off with the context's no_pad_handoff. */
static void plan_handoff(clcnn_model *m) {
    for (int j = 0; j < m->n_nodes; j++) {
        clcnn_node *c = &m->nodes[j];
        c->pad_to = c->gpad_to = -1, c->pad_only = c->x_padded = c->gy_padded = 0;
        c->gpad_only = 0, c->slice_of = -1, c->slice_off = 0;
        c->views = (clcnn_views){.x_halo = -1, .gy_halo = -1};
        if (c->ops->views) c->ops->views(c, &c->views);
    }
    if (m->ctx->no_pad_handoff) return;
    for (int j = 0; j < m->n_nodes; j++) {
        clcnn_node *c = &m->nodes[j];
        clcnn_node_ws ws = {0};
        if (c->n_in != 1 || c->in[0] < 0 || c->views.x_halo < 0) continue;
        clcnn_node *p = &m->nodes[c->in[0]];
        if (p->pad_to >= 0 || (p->algo[CLCNN_PASS_FORWARD]->flags & CLCNN_ALGO_VIEW) ||
            !p->views.writes_y)
            continue;
        clcnn_node_workspace(m->ctx, c, 1, &ws);
        if (ws.keep_pad) p->pad_to = j, p->pad_only = only_link(m, c->in[0], j), c->x_padded = 1;
    }
    /* the backward's: a node whose input gradient pass pads its output gradient (views.gy_halo)
     * has it written padded by the backward of its output's only reader, when that one can
     * (views.writes_gx); only padded when the node reads its output gradient nowhere else
     * (views.gy_only) */
    for (int j = 0; j + 1 < m->n_nodes; j++) {
        clcnn_node *c = &m->nodes[j], *r = NULL;
        for (int k = j + 1; k < m->n_nodes && !r; k++)
            if (only_link(m, j, k)) r = &m->nodes[k];
        if (r && c->views.gy_halo >= 0 && r->views.writes_gx)
            r->gpad_to = j, c->gy_padded = 1, r->gpad_only = c->views.gy_only;
    }
}

/* Whether node i can write its output as a slice of the output of the one node that reads it,
 * once: its layer can, its backward does not read it back, and it hands it to no padded view. */
static int slice_ok(const clcnn_model *m, int i) {
    const clcnn_node *p = &m->nodes[i];
    int links = 0;
    if (i < 0 || !p->views.writes_slice || p->pad_to >= 0 || p->slice_of >= 0 ||
        (p->algo[CLCNN_PASS_FORWARD]->flags & CLCNN_ALGO_VIEW) || !p->ops->backward_reads ||
        (p->ops->backward_reads(p) & CLCNN_READS_Y))
        return 0;
    for (int k = 0; k < m->n_nodes; k++)
        for (int s = 0; s < m->nodes[k].n_in; s++)
            links += m->nodes[k].in[s] == i;
    return links == 1;
}

/* Zero-copy concatenation: a node that reads its inputs as channel slices of its output
 * (views.x_slices: cat) takes an input in place where its producer can write it there
 * (slice_ok); it copies the others. The slice's producer gets no buffer of its own. Off with
 * the context's no_pad_handoff, as the other hand-offs. */
static void plan_slices(clcnn_model *m) {
    if (m->ctx->no_pad_handoff) return;
    for (int j = 0; j < m->n_nodes; j++) {
        const clcnn_node *c = &m->nodes[j];
        if (!c->views.x_slices) continue;
        size_t off = 0;
        for (int s = 0; s < c->n_in; s++) {
            int i = c->in[s];
            if (slice_ok(m, i)) m->nodes[i].slice_of = j, m->nodes[i].slice_off = off;
            off += (size_t)c->xs[s].c * c->xs[s].h * c->xs[s].w;
        }
    }
}

/* Checks of the whole model: flat logits at the end, something to train, a bounded size. */
static clcnn_status check_model(clcnn_model *m, clcnn_params *pl) {
    const clcnn_shape *y = &m->nodes[m->n_nodes - 1].y;
    if (!y->flat)
        return clcnn_fail(&m->err, CLCNN_ERR_SHAPE,
                          "the model ends with a %d x %d x %d output; cross-entropy needs flat "
                          "logits: end with flatten and linear",
                          y->c, y->h, y->w);
    if (pl->total == 0)
        return clcnn_fail(&m->err, CLCNN_ERR_SHAPE, "the model has no parameters to train");
    if (pl->total > (size_t)1 << 30)
        return clcnn_fail(&m->err, CLCNN_ERR_SHAPE, "the model has %zu parameters, over 2^30",
                          pl->total);
    m->out_size = y->c;
    return CLCNN_SUCCESS;
}

/* The graph of a layer list. */
typedef struct plan_walk {
    clcnn_model *m;
    const clcnn_layer_desc *descs;
    clcnn_params *pl;
    int *node_of;                       /* per entry: the node that makes its value */
    char (*paths)[CLCNN_SPEC_PATH_MAX]; /* per entry: its module path */
} plan_walk;

/* The node that makes value v (-1: the model's input), and its per-sample shape. */
static int value_node(const plan_walk *w, int v) {
    return v < 0 ? -1 : w->node_of[v];
}

static clcnn_shape node_shape(const plan_walk *w, int node) {
    const clcnn_model *m = w->m;
    return node < 0 ? (clcnn_shape){m->in_c, m->in_h, m->in_w, 0} : m->nodes[node].y;
}

/* The node of entry i, reading values vals[0 .. n_in), under module path `path`. */
static clcnn_status add_node(plan_walk *w, int i, const char *path, const int *vals, int n_in) {
    clcnn_model *m = w->m;
    clcnn_node *n = &m->nodes[m->n_nodes];
    clcnn_shape xs[CLCNN_MAX_INPUTS];
    int in[CLCNN_MAX_INPUTS];
    for (int k = 0; k < n_in; k++)
        in[k] = value_node(w, vals[k]), xs[k] = node_shape(w, in[k]);
    clcnn_status st = clcnn_node_init(n, &w->descs[i], i, path, xs, n_in, w->pl, &m->err);
    if (st) return st;
    memcpy(n->in, in, (size_t)n_in * sizeof *in);
    w->node_of[i] = m->n_nodes++;
    return CLCNN_SUCCESS;
}

/* The sum that ends residual block descs[i]: the body's value plus the block's input, or plus
 * the shortcut's value when it has one. The two must have one shape. */
static clcnn_status add_res(plan_walk *w, int i, const char *path) {
    const clcnn_layer_desc *d = &w->descs[i];
    int vals[2] = {d->shortcut ? d->in[2] : d->in[0], d->in[1]};
    clcnn_shape a = node_shape(w, value_node(w, vals[0])),
                b = node_shape(w, value_node(w, vals[1]));
    if (memcmp(&a, &b, sizeof a) != 0) {
        char ta[48], tb[48];
        if (d->shortcut)
            return clcnn_fail(&w->m->err, CLCNN_ERR_SHAPE,
                              "residual block at layer %d (res, column %d): its body makes %s "
                              "and its shortcut %s; the two must have one shape",
                              i, d->pos, clcnn_shape_text(ta, sizeof ta, &b),
                              clcnn_shape_text(tb, sizeof tb, &a));
        return clcnn_fail(&w->m->err, CLCNN_ERR_SHAPE,
                          "residual block at layer %d (res, column %d): its body turns %s into "
                          "%s; the output must have the input's shape",
                          i, d->pos, clcnn_shape_text(ta, sizeof ta, &a),
                          clcnn_shape_text(tb, sizeof tb, &b));
    }
    return add_node(w, i, path, vals, 2);
}

/* Nodes for descs[from .. from + count) (module paths in w->paths): one per layer, a residual
 * block's body and shortcut and then its sum. */
static clcnn_status walk_list(plan_walk *w, int from, int count) {
    clcnn_status st;
    for (int i = from; i < from + count;) {
        const clcnn_layer_desc *d = &w->descs[i];
        if (d->kind == CLCNN_LAYER_RES) {
            if ((st = walk_list(w, i + 1, d->body + d->shortcut))) return st;
            if ((st = add_res(w, i, w->paths[i]))) return st;
            i += 1 + d->body + d->shortcut;
            continue;
        }
        if ((st = add_node(w, i, w->paths[i], d->in, d->n_in))) return st;
        i++;
    }
    return CLCNN_SUCCESS;
}

/* Checks of the graph: every value but the model's output is read by some node, and no two
 * state_dict entries share a name. */
static clcnn_status check_graph(clcnn_model *m, const clcnn_params *pl) {
    for (int i = 0; i + 1 < m->n_nodes; i++) {
        int used = 0;
        for (int k = i + 1; k < m->n_nodes && !used; k++)
            for (int s = 0; s < m->nodes[k].n_in && !used; s++)
                used = m->nodes[k].in[s] == i;
        const clcnn_node *n = &m->nodes[i];
        if (!used)
            return clcnn_fail(&m->err, CLCNN_ERR_SHAPE,
                              "the output of layer %d (%s, column %d) is not used: every value "
                              "must reach the model's output",
                              n->layer, clcnn_layer_kind_name(n->d.kind), n->d.pos);
    }
    for (int i = 0; i < pl->n; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(pl->p[i].name, pl->p[j].name))
                return clcnn_fail(&m->err, CLCNN_ERR_SPEC,
                                  "two parameters are named %s: give the layers different "
                                  "module names",
                                  pl->p[i].name);
    return CLCNN_SUCCESS;
}

/* Trained entries laid out weights first, then the rest, so that weight decay can skip the
 * second run (--no-decay-bn-bias); returns the floats of the first. */
static size_t layout_params(clcnn_params *pl) {
    size_t off = 0, decayed = 0;
    for (int pass = 0; pass < 2; pass++) {
        clcnn_param_kind kind = pass ? CLCNN_PARAM_NO_DECAY : CLCNN_PARAM_WEIGHT;
        for (int i = 0; i < pl->n; i++)
            if (pl->p[i].kind == kind) pl->p[i].off = off, off += pl->p[i].numel;
        if (pass == 0) decayed = off;
    }
    return decayed;
}

clcnn_status clcnn_plan_build(clcnn_model *m, const clcnn_layer_desc *descs, int n,
                              const clcnn_plan_force *force) {
    clcnn_shape x = {m->in_c, m->in_h, m->in_w, 0};
    clcnn_status st;
    /* Per sample, no tensor may pass 2^28 elements (the input included): c * h * w then stays
     * an int wherever it is formed, and a batch's buffers stay within reach of the batch check. */
    if ((long long)x.c * x.h * x.w > (1LL << 28))
        return clcnn_fail(&m->err, CLCNN_ERR_SHAPE,
                          "the input of %d x %d x %d = %lld elements per sample is too large "
                          "(at most 2^28)",
                          x.c, x.h, x.w, (long long)x.c * x.h * x.w);
    clcnn_params pl = {calloc((size_t)n * 5 + 5, sizeof(clcnn_param)), 0, n * 5 + 5, 0, 0};
    m->nodes = calloc((size_t)n + 1, sizeof *m->nodes);
    m->params = pl.p;
    if (!m->nodes || !pl.p)
        return clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    int *node_of = malloc((size_t)n * sizeof *node_of);
    char(*paths)[CLCNN_SPEC_PATH_MAX] = malloc((size_t)n * sizeof *paths);
    plan_walk w = {m, descs, &pl, node_of, paths};
    m->n_nodes = 0;
    if (!node_of || !paths)
        st = clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    else if (!(st = clcnn_spec_paths(descs, n, paths, &m->err)))
        st = walk_list(&w, 0, n);
    free(node_of);
    free(paths);
    if (st || (st = check_graph(m, &pl))) return st;
    m->n_layers = n;
    m->n_params = pl.n, m->total = pl.total, m->n_stats = pl.stats;
    m->n_decay = layout_params(&pl);
    if ((st = check_model(m, &pl))) return st;
    for (int i = 0, seen = 0; i < m->n_nodes; i++) {
        m->nodes[i].need_gx = seen;
        seen = seen || m->nodes[i].n_params > 0;
        clcnn_node_plan(m->ctx, &m->nodes[i], force);
    }
    for (int i = 0; i + 1 < m->n_nodes; i++) {
        const clcnn_node *a = &m->nodes[i];
        if (a->ops->can_fuse && only_link(m, i, i + 1) &&
            a->ops->can_fuse(m->ctx, a, &m->nodes[i + 1]))
            fuse(m, i, force);
    }
    plan_handoff(m);
    plan_slices(m);
    return CLCNN_SUCCESS;
}

/* Bytes a node's buffers take for a batch: its own and its share of the scratch. */
static double node_bytes(const clcnn_node_ws *w) {
    return 4.0 * (double)(w->col + w->rows + w->xpad + w->wflip + w->keep_col + w->keep_pad +
                          w->keep_gpad + w->aux);
}

size_t clcnn_plan_format(const clcnn_model *m, int N, char *buf, size_t size) {
    size_t used = 0;
    if (buf && size) buf[0] = '\0';
    clcnn_appendf(buf, size, &used, "%-4s %-20s %-7s %-12s %-14s %-14s %-14s %s\n", "node", "layer",
                  "input", "output", "forward", "wgrad", "dgrad", "workspace");
    for (int i = 0; i < m->n_nodes; i++) {
        const clcnn_node *n = &m->nodes[i];
        char name[48], in[16] = "", out[32];
        clcnn_node_ws w = {0};
        if (n->n_layers == 2)
            snprintf(name, sizeof name, "%d-%d %s+%s", n->layer, n->layer + 1,
                     clcnn_layer_kind_name(n->d.kind), clcnn_layer_kind_name(n->fused.kind));
        else
            snprintf(name, sizeof name, "%d %s", n->layer, clcnn_layer_kind_name(n->d.kind));
        for (int s = 0; s < n->n_in; s++) {
            size_t l = strlen(in);
            if (n->in[s] < 0)
                snprintf(in + l, sizeof in - l, "%sinput", s ? "," : "");
            else
                snprintf(in + l, sizeof in - l, "%s%d", s ? "," : "", n->in[s]);
        }
        if (n->y.flat)
            snprintf(out, sizeof out, "%d", n->y.c);
        else
            snprintf(out, sizeof out, "%dx%dx%d", n->y.c, n->y.h, n->y.w);
        clcnn_node_workspace(m->ctx, n, N, &w);
        clcnn_appendf(buf, size, &used, "%-4d %-20s %-7s %-12s %-14s %-14s %-14s %.1f KiB", i, name,
                      in, out, clcnn_algo_name(n->algo[0]), clcnn_algo_name(n->algo[1]),
                      clcnn_algo_name(n->algo[2]), node_bytes(&w) / 1024.0);
        if (n->pad_to >= 0) clcnn_appendf(buf, size, &used, ", pads for %d", n->pad_to);
        if (n->slice_of >= 0) clcnn_appendf(buf, size, &used, ", into %d", n->slice_of);
        if (n->gpad_to >= 0) clcnn_appendf(buf, size, &used, ", pads gradient for %d", n->gpad_to);
        clcnn_appendf(buf, size, &used, "\n");
    }
    return used;
}
