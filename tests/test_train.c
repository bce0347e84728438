/* The training loop's own features on a tiny in-memory data set: augmentation (random crop and
 * horizontal flip) gathered on the device against a host reference built from
 * clcnn_augment_sample, its determinism and resumability, evaluation without it; the
 * learning-rate schedule as the loop applies it; label smoothing in the model's loss. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/device_dataset.h"
#include "model.h"
#include "testutil.h"

#define NS 37 /* samples: the last batch of 8 is partial */
#define C 2
#define H 5
#define W 6
#define K 4 /* classes */
#define BS 8
#define NB ((NS + BS - 1) / BS)
#define PIX (C * H * W)

static uint8_t images[NS * PIX], labels[NS];
static const float mean[C] = {0.25f, 0.5f}, sd[C] = {0.5f, 0.2f};

/* What the progress callback saw after each batch of an epoch: the staged input and labels. */
typedef struct capture {
    clcnn_model *m;
    int64_t first_batch; /* the epoch's batch the first call belongs to (a resumed start) */
    int calls;
    float x[NB][BS * PIX];
    uint8_t y[NB][BS];
    double lr[NB];
} capture;

static int on_progress(void *user, int64_t batch, int64_t batches, float loss) {
    capture *cap = user;
    int b = (int)batch - 1, n = b * BS + BS <= NS ? BS : NS - b * BS;
    clcnn_optimizer_options o;
    (void)batches, (void)loss;
    CHECK(b >= 0 && b < NB);
    if (b < 0 || b >= NB) return 1;
    cl_command_queue q = cap->m->ctx->queue;
    CHECK(clEnqueueReadBuffer(q, cap->m->act[0], CL_TRUE, 0, (size_t)n * PIX * sizeof(float),
                              cap->x[b], 0, NULL, NULL) == CL_SUCCESS);
    CHECK(clEnqueueReadBuffer(q, cap->m->labels, CL_TRUE, 0, (size_t)n, cap->y[b], 0, NULL, NULL) ==
          CL_SUCCESS);
    clcnn_optimizer_options_init(&o, CLCNN_OPTIMIZER_SGD);
    CHECK(clcnn_model_get_optimizer(cap->m, &o) == CLCNN_SUCCESS);
    cap->lr[b] = o.lr;
    cap->calls++;
    return 0;
}

/* The input the loop must stage for sample s: torchvision's RandomCrop(padding=pad) and
 * RandomHorizontalFlip as clcnn_augment_sample draws them, then ToTensor and Normalize. */
static void reference(float *out, int s, uint64_t seed, int64_t epoch, int pad, int hflip) {
    int dy, dx, flip;
    clcnn_augment_sample(seed, epoch, s, pad, hflip, &dy, &dx, &flip);
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                int sy = y + dy - pad, sx = (flip ? W - 1 - x : x) + dx - pad;
                int in = sy >= 0 && sy < H && sx >= 0 && sx < W;
                float v = in ? (float)images[s * PIX + (c * H + sy) * W + sx] / 255.0f : 0.0f;
                out[(c * H + y) * W + x] = (v - mean[c]) * (1.0f / sd[c]);
            }
}

/* Every staged batch of epoch `epoch` against the reference, through the epoch's order. The
 * kernel and the host round the same operations, but OpenCL's division may be 2.5 ulps off. */
static void check_epoch(const capture *cap, const clcnn_dataset *ds, uint64_t seed, int64_t epoch,
                        int pad, int hflip, const char *what) {
    float want[PIX];
    int bad = 0;
    for (int b = (int)cap->first_batch; b < NB; b++)
        for (int i = 0; i < BS && b * BS + i < NS; i++) {
            int s = ds->host_order[b * BS + i];
            reference(want, s, seed, epoch, pad, hflip);
            bad += cap->y[b][i] != labels[s];
            for (int p = 0; p < PIX; p++)
                bad += !(fabsf(cap->x[b][i * PIX + p] - want[p]) <= 1e-5f);
        }
    CHECK_MSG(bad == 0, "%s: %d values differ from the reference", what, bad);
}

/* One epoch with these options on a fresh model (same seed: same weights), captured. */
static void run(clcnn_context *ctx, clcnn_dataset *ds, const clcnn_train_options *base,
                capture *cap) {
    clcnn_model *m = NULL;
    clcnn_train_options o = *base;
    int64_t done = 0;
    memset(cap, 0, sizeof *cap);
    CHECK(clcnn_model_create(&m, ctx, "flatten linear(4)", C, H, W, 3) == CLCNN_SUCCESS);
    cap->m = m, cap->first_batch = o.start_batch;
    o.progress = on_progress, o.user = cap, o.every = 1;
    CHECK_MSG(clcnn_model_train_epoch(m, ds, &o, &done) == CLCNN_SUCCESS, "%s",
              clcnn_model_errmsg(m));
    CHECK(done == NB && cap->calls == NB - o.start_batch);
    clcnn_model_free(m);
}

static void test_augmentation(clcnn_context *ctx, clcnn_dataset *ds) {
    static capture a, b, c;
    clcnn_train_options o;
    clcnn_train_options_init(&o);
    o.batch_size = BS, o.seed = 11, o.epoch = 2;
    const int cases[][2] = {{0, 0}, {2, 0}, {0, 1}, {2, 1}, {7, 1}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char what[64];
        o.random_crop = cases[k][0], o.hflip = cases[k][1];
        snprintf(what, sizeof what, "random crop %d, hflip %d", o.random_crop, o.hflip);
        run(ctx, ds, &o, &a);
        check_epoch(&a, ds, o.seed, o.epoch, o.random_crop, o.hflip, what);
    }
    /* The same (seed, epoch) stages the same batches; a run resumed at batch 2 too. */
    o.random_crop = 2, o.hflip = 1;
    run(ctx, ds, &o, &a);
    run(ctx, ds, &o, &b);
    CHECK(memcmp(a.x, b.x, sizeof a.x) == 0);
    o.start_batch = 2;
    run(ctx, ds, &o, &c);
    CHECK(memcmp(a.x[2], c.x[2], sizeof a.x - 2 * sizeof a.x[0]) == 0);
    /* Another epoch draws other crops. */
    o.start_batch = 0, o.epoch = 3, o.shuffle = 0;
    run(ctx, ds, &o, &b);
    check_epoch(&b, ds, o.seed, o.epoch, 2, 1, "epoch 3, file order");
    o.epoch = 2;
    run(ctx, ds, &o, &c);
    CHECK(memcmp(b.x, c.x, sizeof b.x) != 0);
    /* Out of range. */
    clcnn_model *m = NULL;
    CHECK(clcnn_model_create(&m, ctx, "flatten linear(4)", C, H, W, 3) == CLCNN_SUCCESS);
    o.random_crop = -1;
    CHECK(clcnn_model_train_epoch(m, ds, &o, NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    o.random_crop = CLCNN_MAX_CROP + 1;
    CHECK(clcnn_model_train_epoch(m, ds, &o, NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    o.random_crop = 0, o.hflip = 2;
    CHECK(clcnn_model_train_epoch(m, ds, &o, NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    clcnn_model_free(m);
}

/* The draws themselves: in range, deterministic, about half flipped, every offset taken. */
static void test_draws(void) {
    enum { N = 20000, P = 3 };
    int flips = 0, hist[2][2 * P + 1] = {{0}}, same = 0;
    for (int s = 0; s < N; s++) {
        int dy, dx, f, dy2, dx2, f2;
        clcnn_augment_sample(5, 1, s, P, 1, &dy, &dx, &f);
        clcnn_augment_sample(5, 1, s, P, 1, &dy2, &dx2, &f2);
        CHECK(dy == dy2 && dx == dx2 && f == f2);
        CHECK(dy >= 0 && dy <= 2 * P && dx >= 0 && dx <= 2 * P && (f == 0 || f == 1));
        if (dy < 0 || dy > 2 * P || dx < 0 || dx > 2 * P) return;
        flips += f, hist[0][dy]++, hist[1][dx]++;
        clcnn_augment_sample(5, 2, s, P, 1, &dy2, &dx2, &f2);
        same += dy == dy2 && dx == dx2 && f == f2;
    }
    /* Binomial(20000, 1/2): sd 71, so +-500 is 7 sd. Each offset: expected 2857, sd 50. */
    CHECK_MSG(abs(flips - N / 2) < 500, "%d of %d flipped", flips, N);
    for (int a = 0; a < 2; a++)
        for (int v = 0; v <= 2 * P; v++)
            CHECK_MSG(abs(hist[a][v] - N / (2 * P + 1)) < 400, "offset %d taken %d times", v,
                      hist[a][v]);
    /* Epochs draw independently: agreement by chance is 1/98. */
    CHECK_MSG(same < N / 40, "%d of %d draws repeat in the next epoch", same, N);
    int dy = -1, dx = -1, f = -1;
    clcnn_augment_sample(5, 1, 7, 0, 0, &dy, &dx, &f);
    CHECK(dy == 0 && dx == 0 && f == 0);
    clcnn_augment_sample(5, 1, 7, 2, 0, NULL, NULL, &f);
    CHECK(f == 0);
}

/* Evaluation stages the file order without augmentation, and reports the smoothed loss. */
static void test_evaluation(clcnn_context *ctx, clcnn_dataset *ds) {
    static capture a;
    static float x[NS * PIX], logits[NS * K];
    clcnn_train_options o;
    clcnn_model *m = NULL;
    clcnn_train_options_init(&o);
    o.batch_size = BS, o.random_crop = 2, o.hflip = 1;
    run(ctx, ds, &o, &a); /* leaves the data set's order shuffled */
    CHECK(clcnn_model_create(&m, ctx, "flatten linear(4)", C, H, W, 3) == CLCNN_SUCCESS);
    double plain = 0, smooth = 0;
    int correct = 0;
    CHECK(clcnn_model_evaluate(m, ds, NS, &plain, &correct) == CLCNN_SUCCESS);
    CHECK(clEnqueueReadBuffer(m->ctx->queue, m->act[0], CL_TRUE, 0, sizeof x, x, 0, NULL, NULL) ==
          CL_SUCCESS);
    for (int s = 0; s < NS; s++) {
        float want[PIX];
        reference(want, s, 0, 0, 0, 0);
        int bad = 0;
        for (int p = 0; p < PIX; p++)
            bad += !(fabsf(x[s * PIX + p] - want[p]) <= 1e-5f);
        CHECK_MSG(bad == 0, "evaluation sample %d: %d values differ", s, bad);
    }
    CHECK(clcnn_model_set_label_smoothing(m, -0.1) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_model_set_label_smoothing(m, 1.5) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_model_set_label_smoothing(m, NAN) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_model_set_label_smoothing(m, 0.3) == CLCNN_SUCCESS);
    CHECK(clcnn_model_evaluate(m, ds, 16, &smooth, NULL) == CLCNN_SUCCESS);
    CHECK(clcnn_model_predict(m, x, NS, logits) == CLCNN_SUCCESS);
    double want_plain = 0, want_smooth = 0;
    for (int s = 0; s < NS; s++) {
        const float *z = logits + s * K;
        double zmax = z[0], sum = 0, all = 0;
        for (int k = 1; k < K; k++)
            zmax = fmax(zmax, z[k]);
        for (int k = 0; k < K; k++)
            sum += exp(z[k] - zmax);
        for (int k = 0; k < K; k++)
            all += log(sum) - (z[k] - zmax);
        double nll = log(sum) - (z[labels[s]] - zmax);
        want_plain += nll / NS;
        want_smooth += (0.7 * nll + 0.3 / K * all) / NS;
    }
    CHECK_MSG(fabs(plain - want_plain) <= 1e-5 * want_plain, "plain %.9g, want %.9g", plain,
              want_plain);
    CHECK_MSG(fabs(smooth - want_smooth) <= 1e-5 * want_smooth, "smoothed %.9g, want %.9g", smooth,
              want_smooth);
    clcnn_model_free(m);
}

/* The loop sets each step's lr from the schedule, counted from global_step. */
static void test_schedule_in_loop(clcnn_context *ctx, clcnn_dataset *ds) {
    static capture a;
    clcnn_train_options o;
    clcnn_train_options_init(&o);
    CHECK(o.schedule == CLCNN_SCHEDULE_CONSTANT && o.pct_start == 0.3);
    o.batch_size = BS, o.schedule = CLCNN_SCHEDULE_ONECYCLE, o.lr = 0.5, o.total_steps = 3 * NB;
    o.epoch = 1, o.start_batch = 1, o.global_step = NB + 1; /* resumed at batch 1 of epoch 1 */
    run(ctx, ds, &o, &a);
    for (int b = 1; b < NB; b++) {
        double want = clcnn_schedule_lr(o.schedule, o.lr, NB + b, o.total_steps, o.pct_start);
        CHECK_MSG(a.lr[b] == want, "batch %d: lr %.17g, want %.17g", b, a.lr[b], want);
    }
    o.schedule = CLCNN_SCHEDULE_COSINE;
    run(ctx, ds, &o, &a);
    for (int b = 1; b < NB; b++)
        CHECK(a.lr[b] == clcnn_schedule_lr(o.schedule, o.lr, NB + b, o.total_steps, 0));
    /* A schedule that cannot run is refused before any step; onecycle past its end too. */
    clcnn_model *m = NULL;
    CHECK(clcnn_model_create(&m, ctx, "flatten linear(4)", C, H, W, 3) == CLCNN_SUCCESS);
    o.total_steps = 0;
    CHECK(clcnn_model_train_epoch(m, ds, &o, NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    o.total_steps = 10, o.lr = 0;
    CHECK(clcnn_model_train_epoch(m, ds, &o, NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    o.lr = 0.1, o.schedule = CLCNN_SCHEDULE_ONECYCLE, o.pct_start = 1.5;
    CHECK(clcnn_model_train_epoch(m, ds, &o, NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    /* Batches 1, 2 take steps NB+1 and NB+2 (PyTorch's last: total_steps); batch 3 fails. */
    o.pct_start = 0.3, o.total_steps = NB + 2;
    int64_t done = 0;
    CHECK(clcnn_model_train_epoch(m, ds, &o, &done) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(done == 3 && strstr(clcnn_model_errmsg(m), "onecycle") != NULL);
    clcnn_model_free(m);
}

/* Normalisations float cannot carry are refused with one line naming the channel, and leave
 * the previous one in place (test_augmentation then checks pixels against mean and sd). */
static void test_normalize_limits(clcnn_dataset *ds) {
    static const struct {
        float m, s;
    } bad[] = {
        {0.5f, 1e-40f},   /* subnormal std: 1/std is infinite */
        {0.5f, 0.0f},     /* std 0 */
        {0.5f, -1.0f},    /* negative std */
        {INFINITY, 1.0f}, /* infinite mean */
        {0.5f, NAN},      /* NaN std */
        {1e38f, 0.1f},    /* (x - mean) / std overflows */
        {5.0f, 1.2e-38f}, /* a normal std, but (0 - 5) / std is past FLT_MAX */
    };
    /* the edges that still fit, then the one that must stay */
    float em[C] = {3.4028235e38f, -0.5f}, es[C] = {1.0f, 1.1754944e-38f * 4};
    CHECK_MSG(clcnn_dataset_set_normalize(ds, em, es) == CLCNN_SUCCESS, "%s",
              clcnn_dataset_errmsg(ds));
    CHECK(clcnn_dataset_set_normalize(ds, mean, sd) == CLCNN_SUCCESS);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        float m[C] = {mean[0], bad[i].m}, s[C] = {sd[0], bad[i].s};
        clcnn_status st = clcnn_dataset_set_normalize(ds, m, s);
        const char *msg = clcnn_dataset_errmsg(ds);
        CHECK_MSG(st == CLCNN_ERR_INVALID_ARGUMENT && strstr(msg, "channel 1: ") &&
                      strstr(msg, "smallest normal float") && !strchr(msg, '\n'),
                  "mean %g std %g: status %s, \"%s\"", (double)bad[i].m, (double)bad[i].s,
                  clcnn_status_str(st), msg);
    }
}

int main(void) {
    clcnn_devices *devs = NULL;
    clcnn_dataset *ds = NULL;
    test_draws();
    clcnn_context *ctx = test_context(&devs);
    uint64_t z = 12345;
    for (int i = 0; i < NS * PIX; i++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        images[i] = (uint8_t)(z >> 56);
    }
    for (int i = 0; i < NS; i++)
        labels[i] = (uint8_t)(i % K);
    CHECK(clcnn_dataset_from_memory(&ds, ctx, images, labels, NS, C, H, W) == CLCNN_SUCCESS);
    test_normalize_limits(ds);
    test_augmentation(ctx, ds);
    test_evaluation(ctx, ds);
    test_schedule_in_loop(ctx, ds);
    clcnn_dataset_free(ds);
    clcnn_context_free(ctx);
    clcnn_devices_free(devs);
    return test_finish("test_train");
}
