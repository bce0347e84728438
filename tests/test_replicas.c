/* Data-parallel training (clcnn_replicas) against one model on the same global batches: two
 * replicas in this process, and two "processes" (threads joined by an in-memory transport that
 * stands in for MPI), each on its own context of the first device. Losses and weights must
 * agree within 1e-5 relative (the sums of a split batch are added in another order); with
 * BatchNorm, which normalises each share alone, the replicas must agree with each other and
 * evaluate with replica 0's running statistics. The tail rule: a batch that cannot be shared
 * evenly goes to fewer replicas (unequal shares, a share of 0), none takes fewer samples than
 * BatchNorm on one value per channel trains on, and an epoch whose last batch one model cannot
 * train on is refused before its first step; all of it against one model, on replicas and on
 * processes alike. At most two contexts are alive at a time: on PoCL before 6.0 each further one
 * builds its programs again (src/context.c). */
#include <pthread.h>

#include "testutil.h"

enum { NS = 150, C = 3, H = 8, W = 8, K = 10, PIX = C * H * W, STEPS = 12, BATCH = 25 };

static uint8_t images[NS * PIX], labels[NS];

/* No BatchNorm: a split batch gives the single-device answer. Dropout draws by global sample. */
static const char *const SPEC_PLAIN =
    "conv(6,3,pad=1) relu maxpool(2) conv(8,3) gelu dropout(0.25) flatten linear(10)";
static const char *const SPEC_BN = "conv(6,3,pad=1,bias=0) bn relu maxpool(2) flatten linear(10)";
/* BatchNorm1d: one value per channel and sample, so no batch or share of 1 trains. */
static const char *const SPEC_BN1 = "conv(4,3,pad=1) relu maxpool(2) flatten linear(12) bn relu "
                                    "linear(10)";

/* The steps of the tail checks, (first, n) each: shares of 19/18, 1/1, 1/0, 2/1, 1/1 and 19/18
 * (2/0, 3/0 and 2/0 under SPEC_BN1, whose shares hold 2 or more). */
static const int TAIL[][2] = {{0, 37}, {37, 2}, {39, 1}, {40, 3}, {43, 2}, {45, 37}};
enum { TAIL_STEPS = sizeof TAIL / sizeof TAIL[0] };

typedef struct setup {
    clcnn_devices *devs;
    int idx;
} setup;

static clcnn_context *new_context(const setup *s) {
    clcnn_context *ctx = NULL;
    if (clcnn_context_create(&ctx, s->devs, s->idx, NULL) != CLCNN_SUCCESS) {
        fprintf(stderr, "context creation failed: %s\n", clcnn_context_errmsg(ctx));
        exit(1);
    }
    return ctx;
}

/* A model with SGD + momentum + weight decay and its data set on a fresh context. */
typedef struct unit {
    clcnn_context *ctx;
    clcnn_model *m;
    clcnn_dataset *ds;
} unit;

static void unit_make(unit *u, const setup *s, const char *spec, double lr) {
    clcnn_optimizer_options o;
    u->ctx = new_context(s);
    CHECK(clcnn_model_create(&u->m, u->ctx, spec, C, H, W, 7) == CLCNN_SUCCESS);
    clcnn_optimizer_options_init(&o, CLCNN_OPTIMIZER_SGD);
    o.lr = lr, o.momentum = 0.9, o.weight_decay = 5e-4;
    CHECK(clcnn_model_set_optimizer(u->m, &o) == CLCNN_SUCCESS);
    CHECK(clcnn_model_set_label_smoothing(u->m, 0.1) == CLCNN_SUCCESS);
    CHECK(clcnn_dataset_from_memory(&u->ds, u->ctx, images, labels, NS, C, H, W) == CLCNN_SUCCESS);
}

static void unit_free(unit *u) {
    clcnn_model_free(u->m);
    clcnn_dataset_free(u->ds);
    clcnn_context_free(u->ctx);
}

/* The training options every run here shares: shuffled, cropped and flipped, a report per
 * step (the losses land in `losses`). */
typedef struct record {
    float losses[64];
    int n;
} record;

static int on_progress(void *user, int64_t batch, int64_t batches, float loss) {
    record *r = user;
    (void)batch, (void)batches;
    if (r->n < 64) r->losses[r->n++] = loss;
    return 0;
}

static void options(clcnn_train_options *o, record *rec) {
    clcnn_train_options_init(o);
    o->batch_size = BATCH;
    o->seed = 3;
    o->every = 1;
    o->progress = on_progress, o->user = rec;
    o->random_crop = 1, o->hflip = 1;
    o->schedule = CLCNN_SCHEDULE_COSINE, o->lr = 0.05, o->total_steps = STEPS;
}

static double rel(double a, double b) {
    double d = fabs(a - b), s = fmax(fabs(a), fabs(b));
    return s > 1e-6 ? d / s : d;
}

/* A model's tensors, all in one host array. */
typedef struct snapshot {
    float *v;
    size_t n;
} snapshot;

static snapshot take(clcnn_model *m) {
    snapshot s = {NULL, 0};
    for (int i = 0; i < clcnn_model_param_count(m); i++) {
        size_t k = 0;
        clcnn_model_param_info(m, i, NULL, NULL, NULL, &k);
        s.v = realloc(s.v, (s.n + k) * sizeof *s.v);
        CHECK(s.v && clcnn_model_get_param(m, i, s.v + s.n) == CLCNN_SUCCESS);
        s.n += k;
    }
    return s;
}

/* The largest difference between two models' tensors, relative to the largest magnitude. */
static double snap_diff(snapshot a, snapshot b) {
    double scale = 1e-6, d = 0;
    if (a.n != b.n) return INFINITY;
    for (size_t k = 0; k < a.n; k++) {
        scale = fmax(scale, fabs(a.v[k]));
        d = fmax(d, fabs((double)a.v[k] - b.v[k]));
    }
    return d / scale;
}

static double weights_diff(clcnn_model *a, clcnn_model *b) {
    snapshot x = take(a), y = take(b);
    double d = snap_diff(x, y);
    free(x.v);
    free(y.v);
    return d;
}

/* One model, STEPS steps over two epochs. */
static void run_single(unit *u, record *rec) {
    clcnn_train_options o;
    options(&o, rec);
    for (int64_t e = 0; e < 2; e++) {
        int64_t done = 0;
        o.epoch = e, o.global_step = e * 6;
        CHECK(clcnn_model_train_epoch(u->m, u->ds, &o, &done) == CLCNN_SUCCESS);
        CHECK(done == 6);
    }
}

static void run_group(clcnn_replicas *g, clcnn_dataset *const *sets, record *rec) {
    clcnn_train_options o;
    options(&o, rec);
    for (int64_t e = 0; e < 2; e++) {
        int64_t done = 0;
        o.epoch = e, o.global_step = e * 6;
        clcnn_status st = clcnn_replicas_train_epoch(g, sets, &o, &done);
        CHECK_MSG(st == CLCNN_SUCCESS, "%s", clcnn_replicas_errmsg(g));
        CHECK(done == 6);
    }
}

/* One device's run: its losses, final weights and evaluation. */
typedef struct reference {
    record rec;
    snapshot w;
    double loss;
    int hits;
} reference;

static void make_reference(const setup *s, reference *ref) {
    unit one;
    memset(ref, 0, sizeof *ref);
    unit_make(&one, s, SPEC_PLAIN, 0.05);
    run_single(&one, &ref->rec);
    ref->w = take(one.m);
    CHECK(clcnn_model_evaluate(one.m, one.ds, 40, &ref->loss, &ref->hits) == CLCNN_SUCCESS);
    unit_free(&one);
}

static void compare_runs(const char *what, const reference *ref, const record *b, clcnn_model *mb) {
    const record *a = &ref->rec;
    double worst = 0;
    CHECK_MSG(a->n == STEPS && b->n == STEPS, "%s: %d and %d losses", what, a->n, b->n);
    for (int i = 0; i < a->n && i < b->n; i++)
        worst = fmax(worst, rel(a->losses[i], b->losses[i]));
    snapshot got = take(mb);
    double w = snap_diff(ref->w, got);
    free(got.v);
    printf("%s: losses within %.2g, weights within %.2g of one device\n", what, worst, w);
    CHECK_MSG(worst < 1e-5 && w < 1e-5, "%s: losses %.3g, weights %.3g", what, worst, w);
}

/* Two units of `spec` and their group; sets receives their data sets. */
static clcnn_replicas *make_pair(const setup *s, const char *spec, unit u[2],
                                 clcnn_dataset *sets[2]) {
    clcnn_replicas *g = NULL;
    unit_make(&u[0], s, spec, 0.05);
    unit_make(&u[1], s, spec, 0.05);
    clcnn_model *models[2] = {u[0].m, u[1].m};
    sets[0] = u[0].ds, sets[1] = u[1].ds;
    CHECK(clcnn_replicas_create(&g, models, 2, NULL) == CLCNN_SUCCESS);
    return g;
}

/* Two replicas in this process against one model. */
static void test_two_local(const setup *s, const reference *ref) {
    unit u[2];
    record rb = {{0}, 0};
    clcnn_dataset *sets[2];
    clcnn_replicas *g = make_pair(s, SPEC_PLAIN, u, sets);
    CHECK(clcnn_replicas_local_count(g) == 2 && clcnn_replicas_global_count(g) == 2);
    int off = -1, cnt = -1;
    clcnn_replicas_share(g, BATCH, 1, &off, &cnt);
    CHECK(off == 13 && cnt == 12);
    run_group(g, sets, &rb);
    compare_runs("2 replicas", ref, &rb, u[0].m);
    CHECK(weights_diff(u[0].m, u[1].m) == 0); /* the same update on the same device kind */
    double l1 = ref->loss, l2 = 0;
    int h1 = ref->hits, h2 = 0;
    CHECK(clcnn_replicas_evaluate(g, sets, 40, &l2, &h2) == CLCNN_SUCCESS);
    CHECK_MSG(rel(l1, l2) < 1e-5 && h1 == h2, "evaluation %.8g/%d vs %.8g/%d", l1, h1, l2, h2);
    double c = -1, w = -1, red = -1;
    int64_t steps = 0;
    clcnn_replicas_timing(g, &c, &w, &red, &steps);
    CHECK(steps == STEPS && c > 0 && w >= 0 && red > 0);
    clcnn_replicas_free(g);
    unit_free(&u[0]);
    unit_free(&u[1]);
}

/* BatchNorm: each share normalised alone (no single-device answer); the replicas stay equal,
 * share replica 0's running statistics, and evaluate as replica 0 alone does. */
static void test_batchnorm(const setup *s) {
    unit u[2];
    record rec = {{0}, 0};
    clcnn_dataset *sets[2];
    clcnn_replicas *g = make_pair(s, SPEC_BN, u, sets);
    run_group(g, sets, &rec);
    CHECK(rec.n == STEPS && isfinite(rec.losses[STEPS - 1]));
    CHECK(weights_diff(u[0].m, u[1].m) == 0); /* parameters and running statistics alike */
    double l1 = 0, l2 = 0;
    int h1 = 0, h2 = 0;
    CHECK(clcnn_model_evaluate(u[0].m, u[0].ds, 40, &l1, &h1) == CLCNN_SUCCESS);
    CHECK(clcnn_replicas_evaluate(g, sets, 40, &l2, &h2) == CLCNN_SUCCESS);
    CHECK_MSG(rel(l1, l2) < 1e-5 && h1 == h2, "bn evaluation %.8g/%d vs %.8g/%d", l1, h1, l2, h2);
    clcnn_replicas_free(g);
    unit_free(&u[0]);
    unit_free(&u[1]);
}

/* ---- the tail rule -------------------------------------------------------------------------- */

/* One model's or a group's losses and final tensors over TAIL's steps. For SPEC_BN1 the steps
 * of 37 are left out (their shares are normalised apart, so one model has another answer), and
 * the step of 1 (no model trains on it). */
typedef struct tail_run {
    float loss[TAIL_STEPS];
    int hits[TAIL_STEPS];
    snapshot w;
} tail_run;

static int tail_step_taken(const char *spec, int k) {
    return spec != SPEC_BN1 || (TAIL[k][1] >= 2 && TAIL[k][1] < 4);
}

static void tail_single(const setup *s, const char *spec, tail_run *out) {
    unit one;
    unit_make(&one, s, spec, 0.05);
    CHECK(clcnn_dataset_set_epoch(one.ds, 3, 0, 1) == CLCNN_SUCCESS);
    for (int k = 0; k < TAIL_STEPS; k++) {
        if (!tail_step_taken(spec, k)) continue;
        clcnn_status st = clcnn_model_train_dataset(one.m, one.ds, TAIL[k][0], TAIL[k][1]);
        CHECK_MSG(st == CLCNN_SUCCESS, "one model, step %d: %s", k, clcnn_model_errmsg(one.m));
        CHECK(clcnn_model_last_loss(one.m, &out->loss[k], &out->hits[k]) == CLCNN_SUCCESS);
    }
    out->w = take(one.m);
    unit_free(&one);
}

static void tail_group(clcnn_replicas *g, clcnn_dataset *const *sets, int n_sets, const char *spec,
                       tail_run *out) {
    for (int i = 0; i < n_sets; i++)
        CHECK(clcnn_dataset_set_epoch(sets[i], 3, 0, 1) == CLCNN_SUCCESS);
    for (int k = 0; k < TAIL_STEPS; k++) {
        if (!tail_step_taken(spec, k)) continue;
        clcnn_status st = clcnn_replicas_train_dataset(g, sets, TAIL[k][0], TAIL[k][1]);
        CHECK_MSG(st == CLCNN_SUCCESS, "group, step %d: %s", k, clcnn_replicas_errmsg(g));
        CHECK(clcnn_replicas_last_loss(g, &out->loss[k], &out->hits[k]) == CLCNN_SUCCESS);
    }
}

static void tail_compare(const char *what, const char *spec, const tail_run *ref,
                         const tail_run *got, clcnn_model *m) {
    double worst = 0;
    for (int k = 0; k < TAIL_STEPS; k++) {
        if (!tail_step_taken(spec, k)) continue;
        worst = fmax(worst, rel(ref->loss[k], got->loss[k]));
        CHECK_MSG(ref->hits[k] == got->hits[k], "%s, step %d: %d and %d hits", what, k,
                  ref->hits[k], got->hits[k]);
    }
    snapshot w = take(m);
    double d = snap_diff(ref->w, w);
    free(w.v);
    printf("%s: losses within %.2g, tensors within %.2g of one model\n", what, worst, d);
    CHECK_MSG(worst < 1e-5 && d < 1e-5, "%s: losses %.3g, tensors %.3g", what, worst, d);
}

/* An epoch whose last batch is 1 sample, under SPEC_BN1: refused before its first step by one
 * model and by the group alike, nothing trained; drop_last trains it. */
static void tail_refused(clcnn_model *m, clcnn_dataset *ds, clcnn_replicas *g,
                         clcnn_dataset *const *sets) {
    clcnn_train_options o;
    clcnn_train_options_init(&o);
    o.batch_size = NS - 1;
    int64_t done = -1;
    snapshot before = take(m);
    clcnn_status st = g ? clcnn_replicas_train_epoch(g, sets, &o, &done)
                        : clcnn_model_train_epoch(m, ds, &o, &done);
    const char *msg = g ? clcnn_replicas_errmsg(g) : clcnn_model_errmsg(m);
    CHECK_MSG(st == CLCNN_ERR_INVALID_ARGUMENT && done == 0, "%s: %d, %lld batches: %s",
              g ? "group" : "one model", st, (long long)done, msg);
    CHECK_MSG(strstr(msg, "an epoch of 150 samples in batches of 149 ends with a batch of 1") &&
                  strstr(msg, "(BatchNorm1d) needs at least 2") && strstr(msg, "148 or 150"),
              "%s", msg);
    snapshot after = take(m);
    CHECK(snap_diff(before, after) == 0);
    free(before.v);
    free(after.v);
    CHECK(clcnn_model_min_train_batch(m) == 2);
    /* A step of one sample is refused as well, before it changes anything. */
    if (g) {
        CHECK(clcnn_replicas_train_dataset(g, sets, 0, 1) == CLCNN_ERR_INVALID_ARGUMENT);
        CHECK_MSG(strstr(clcnn_replicas_errmsg(g), "a batch of 1: layer"), "%s",
                  clcnn_replicas_errmsg(g));
    }
    o.drop_last = 1, o.every = 1;
    st = g ? clcnn_replicas_train_epoch(g, sets, &o, &done)
           : clcnn_model_train_epoch(m, ds, &o, &done);
    CHECK_MSG(st == CLCNN_SUCCESS && done == 1, "drop_last: %s",
              g ? clcnn_replicas_errmsg(g) : clcnn_model_errmsg(m));
}

/* Two replicas in this process on TAIL's steps against one model: unequal shares and a share of
 * 0 without BatchNorm; with BatchNorm1d no share of 1, so that the group is one model. */
static void test_tail_local(const setup *s, const char *spec) {
    tail_run ref, got;
    unit u[2];
    clcnn_dataset *sets[2];
    memset(&ref, 0, sizeof ref), memset(&got, 0, sizeof got);
    tail_single(s, spec, &ref);
    clcnn_replicas *g = make_pair(s, spec, u, sets);
    static const int want[][5] = {/* n, then replica 0's and 1's (offset, count) */
                                  {37, 0, 19, 19, 18},
                                  {2, 0, 1, 1, 1},
                                  {1, 0, 1, 1, 0}};
    static const int want_bn1[][5] = {{37, 0, 19, 19, 18}, {5, 0, 3, 3, 2}, {4, 0, 2, 2, 2},
                                      {3, 0, 3, 3, 0},     {2, 0, 2, 2, 0}, {1, 0, 1, 1, 0}};
    int bn1 = spec == SPEC_BN1, rows = bn1 ? 6 : 3;
    for (int k = 0; k < rows; k++) {
        const int *w = bn1 ? want_bn1[k] : want[k];
        for (int i = 0; i < 2; i++) {
            int off = -1, cnt = -1;
            clcnn_replicas_share(g, w[0], i, &off, &cnt);
            CHECK_MSG(off == w[1 + 2 * i] && cnt == w[2 + 2 * i],
                      "%s: batch %d, replica %d: share (%d, %d), not (%d, %d)", spec, w[0], i, off,
                      cnt, w[1 + 2 * i], w[2 + 2 * i]);
        }
    }
    tail_group(g, sets, 2, spec, &got);
    tail_compare(bn1 ? "2 replicas, BatchNorm1d tail" : "2 replicas, unequal shares", spec, &ref,
                 &got, u[0].m);
    CHECK(weights_diff(u[0].m, u[1].m) == 0);
    if (bn1) {
        tail_refused(u[0].m, NULL, g, sets);
        clcnn_replicas_free(g);
        unit_free(&u[1]);
        tail_refused(u[0].m, u[0].ds, NULL, NULL);
        unit_free(&u[0]);
    } else {
        clcnn_replicas_free(g);
        unit_free(&u[0]);
        unit_free(&u[1]);
    }
    free(ref.w.v);
}

/* ---- two processes, as threads over an in-memory transport ------------------------------- */

typedef struct fake_world {
    pthread_barrier_t bar;
    void *slot[2];
} fake_world;

typedef struct fake_rank {
    fake_world *w;
    int rank;
} fake_rank;

static int fake_float(void *user, float *buf, size_t n) {
    fake_rank *r = user;
    r->w->slot[r->rank] = buf;
    pthread_barrier_wait(&r->w->bar);
    float *sum = malloc(n * sizeof *sum);
    const float *a = r->w->slot[0], *b = r->w->slot[1];
    for (size_t i = 0; i < n; i++)
        sum[i] = a[i] + b[i];
    pthread_barrier_wait(&r->w->bar); /* both have read both before either writes */
    memcpy(buf, sum, n * sizeof *sum);
    free(sum);
    pthread_barrier_wait(&r->w->bar);
    return 0;
}

static int fake_double(void *user, double *buf, size_t n) {
    fake_rank *r = user;
    r->w->slot[r->rank] = buf;
    pthread_barrier_wait(&r->w->bar);
    double *sum = malloc(n * sizeof *sum);
    const double *a = r->w->slot[0], *b = r->w->slot[1];
    for (size_t i = 0; i < n; i++)
        sum[i] = a[i] + b[i];
    pthread_barrier_wait(&r->w->bar);
    memcpy(buf, sum, n * sizeof *sum);
    free(sum);
    pthread_barrier_wait(&r->w->bar);
    return 0;
}

static int fake_bcast(void *user, void *buf, size_t bytes, int root) {
    fake_rank *r = user;
    r->w->slot[r->rank] = buf;
    pthread_barrier_wait(&r->w->bar);
    if (r->rank != root) memcpy(buf, r->w->slot[root], bytes);
    pthread_barrier_wait(&r->w->bar);
    return 0;
}

typedef struct process {
    const setup *s;
    fake_rank fr;
    double lr;
    const char *spec; /* NULL: SPEC_PLAIN over two epochs; else TAIL's steps */
    unit u;
    record rec;
    tail_run tail;
    clcnn_status create;
    char err[1024];
} process;

static void *process_main(void *arg) {
    process *p = arg;
    clcnn_comm comm;
    clcnn_comm_init(&comm);
    comm.rank = p->fr.rank, comm.size = 2, comm.user = &p->fr;
    comm.allreduce_float = fake_float, comm.allreduce_double = fake_double;
    comm.broadcast = fake_bcast;
    clcnn_replicas *g = NULL;
    unit_make(&p->u, p->s, p->spec ? p->spec : SPEC_PLAIN, p->lr);
    clcnn_dataset *sets[1] = {p->u.ds};
    p->create = clcnn_replicas_create(&g, &p->u.m, 1, &comm);
    snprintf(p->err, sizeof p->err, "%s", clcnn_replicas_errmsg(g));
    if (p->create == CLCNN_SUCCESS) {
        CHECK(clcnn_replicas_global_count(g) == 2);
        if (p->spec)
            tail_group(g, sets, 1, p->spec, &p->tail);
        else
            run_group(g, sets, &p->rec);
    }
    clcnn_replicas_free(g);
    return NULL;
}

/* Runs two processes of `spec` (NULL: the epochs of SPEC_PLAIN); lr1 is process 1's learning
 * rate. */
static void run_two(const setup *s, process p[2], double lr1, const char *spec) {
    fake_world w;
    pthread_t t[2];
    pthread_barrier_init(&w.bar, NULL, 2);
    for (int i = 0; i < 2; i++) {
        memset(&p[i], 0, sizeof p[i]);
        p[i].s = s, p[i].fr.w = &w, p[i].fr.rank = i, p[i].lr = i ? lr1 : 0.05, p[i].spec = spec;
        pthread_create(&t[i], NULL, process_main, &p[i]);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&w.bar);
}

static void test_two_processes(const setup *s, const reference *ref) {
    static process p[2];
    run_two(s, p, 0.05, NULL);
    CHECK(p[0].create == CLCNN_SUCCESS && p[1].create == CLCNN_SUCCESS);
    compare_runs("2 processes", ref, &p[0].rec, p[0].u.m);
    compare_runs("2 processes, rank 1", ref, &p[1].rec, p[1].u.m);
    for (int i = 0; i < 2; i++)
        unit_free(&p[i].u);
    /* Another optimizer setting in process 1: both refuse at creation, with the reason. */
    run_two(s, p, 0.1, NULL);
    for (int i = 0; i < 2; i++) {
        CHECK_MSG(p[i].create == CLCNN_ERR_COMM && strstr(p[i].err, "optimizer"), "process %d: %s",
                  i, p[i].err);
        unit_free(&p[i].u);
    }
}

/* Two processes on TAIL's steps against one model: the shares of the processes follow the
 * same rule as those of a process's replicas. */
static void test_tail_processes(const setup *s, const char *spec, const char *what) {
    static process p[2];
    tail_run ref;
    memset(&ref, 0, sizeof ref);
    tail_single(s, spec, &ref);
    run_two(s, p, 0.05, spec);
    for (int i = 0; i < 2; i++) {
        CHECK(p[i].create == CLCNN_SUCCESS);
        tail_compare(what, spec, &ref, &p[i].tail, p[i].u.m);
        unit_free(&p[i].u);
    }
    free(ref.w.v);
}

int main(void) {
    setup s = {NULL, -1};
    clcnn_context *probe = test_context(&s.devs);
    clcnn_context_free(probe);
    CHECK(clcnn_devices_select(s.devs, -1, -1, &s.idx) == CLCNN_SUCCESS);
    uint64_t z = 99;
    for (int i = 0; i < NS * PIX; i++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        images[i] = (uint8_t)(z >> 56);
    }
    for (int i = 0; i < NS; i++)
        labels[i] = (uint8_t)((i * 7) % K);
    reference ref;
    make_reference(&s, &ref);
    test_two_local(&s, &ref);
    test_batchnorm(&s);
    test_two_processes(&s, &ref);
    test_tail_local(&s, SPEC_PLAIN);
    test_tail_local(&s, SPEC_BN1);
    test_tail_processes(&s, SPEC_PLAIN, "2 processes, unequal shares");
    test_tail_processes(&s, SPEC_BN1, "2 processes, BatchNorm1d tail");
    free(ref.w.v);
    clcnn_devices_free(s.devs);
    return test_finish("test_replicas");
}
