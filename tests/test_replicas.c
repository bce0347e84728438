/* Data-parallel training (clcnn_replicas) against one model on the same global batches: two
 * replicas in this process, and two "processes" (threads joined by an in-memory transport that
 * stands in for MPI), each on its own context of the first device. Losses and weights must
 * agree within 1e-5 relative (the sums of a split batch are added in another order); with
 * BatchNorm, which normalises each share alone, the replicas must agree with each other and
 * evaluate with replica 0's running statistics. At most two contexts are alive at a time: on PoCL
 * before 6.0 each further one builds its programs again (src/context.c). */
#include <pthread.h>

#include "testutil.h"

enum { NS = 150, C = 3, H = 8, W = 8, K = 10, PIX = C * H * W, STEPS = 12, BATCH = 25 };

static uint8_t images[NS * PIX], labels[NS];

/* No BatchNorm: a split batch gives the single-device answer. Dropout draws by global sample. */
static const char *const SPEC_PLAIN =
    "conv(6,3,pad=1) relu maxpool(2) conv(8,3) gelu dropout(0.25) flatten linear(10)";
static const char *const SPEC_BN = "conv(6,3,pad=1,bias=0) bn relu maxpool(2) flatten linear(10)";

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
    clcnn_optimizer_defaults(&o, CLCNN_OPTIMIZER_SGD);
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
    clcnn_train_options_defaults(o);
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
        CHECK(clcnn_model_train_epoch_v2(u->m, u->ds, &o, &done) == CLCNN_SUCCESS);
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
    unit u;
    record rec;
    clcnn_status create;
    char err[1024];
} process;

static void *process_main(void *arg) {
    process *p = arg;
    clcnn_comm comm = {p->fr.rank, 2, &p->fr, fake_float, fake_double, fake_bcast};
    clcnn_replicas *g = NULL;
    unit_make(&p->u, p->s, SPEC_PLAIN, p->lr);
    clcnn_dataset *sets[1] = {p->u.ds};
    p->create = clcnn_replicas_create(&g, &p->u.m, 1, &comm);
    snprintf(p->err, sizeof p->err, "%s", clcnn_replicas_errmsg(g));
    if (p->create == CLCNN_SUCCESS) {
        CHECK(clcnn_replicas_global_count(g) == 2);
        run_group(g, sets, &p->rec);
    }
    clcnn_replicas_free(g);
    return NULL;
}

/* Runs two processes; lr1 is process 1's learning rate. */
static void run_two(const setup *s, process p[2], double lr1) {
    fake_world w;
    pthread_t t[2];
    pthread_barrier_init(&w.bar, NULL, 2);
    for (int i = 0; i < 2; i++) {
        memset(&p[i], 0, sizeof p[i]);
        p[i].s = s, p[i].fr.w = &w, p[i].fr.rank = i, p[i].lr = i ? lr1 : 0.05;
        pthread_create(&t[i], NULL, process_main, &p[i]);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&w.bar);
}

static void test_two_processes(const setup *s, const reference *ref) {
    static process p[2];
    run_two(s, p, 0.05);
    CHECK(p[0].create == CLCNN_SUCCESS && p[1].create == CLCNN_SUCCESS);
    compare_runs("2 processes", ref, &p[0].rec, p[0].u.m);
    compare_runs("2 processes, rank 1", ref, &p[1].rec, p[1].u.m);
    for (int i = 0; i < 2; i++)
        unit_free(&p[i].u);
    /* Another optimizer setting in process 1: both refuse at creation, with the reason. */
    run_two(s, p, 0.1);
    for (int i = 0; i < 2; i++) {
        CHECK_MSG(p[i].create == CLCNN_ERR_COMM && strstr(p[i].err, "optimizer"), "process %d: %s",
                  i, p[i].err);
        unit_free(&p[i].u);
    }
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
    free(ref.w.v);
    clcnn_devices_free(s.devs);
    return test_finish("test_replicas");
}
