/* The public API as an embedder sees it: only <clcnn.h> (and OpenCL's own header, for the
 * adopted-context case). Error paths return statuses with messages and never crash; the
 * in-memory data set trains through the epoch call and its progress callback; inference
 * agrees with what evaluation reported; checkpoints round-trip; an epoch resumed at any batch
 * (through a checkpoint) ends bit for bit where the uninterrupted one ends; a checkpoint's
 * normalisation reaches every evaluation from it; every handle keeps the status of its last
 * failure; a host-made OpenCL context and queue can be adopted. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clcnn.h"

static int failures;
#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);                  \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

enum { N = 96, C = 1, H = 12, W = 12 };
static uint8_t img[N * C * H * W], lab[N];

static void make_data(unsigned seed) {
    srand(seed);
    for (int i = 0; i < N; i++) {
        lab[i] = (uint8_t)(rand() % 4);
        for (int p = 0; p < C * H * W; p++)
            img[i * C * H * W + p] = (uint8_t)(rand() % 50 + ((p / W) / 3 == lab[i] ? 180 : 0));
    }
}

typedef struct progress_log {
    int calls;
    int64_t last_batch, batches;
    int stop_after;
} progress_log;

static int on_progress(void *user, int64_t batch, int64_t batches, float loss) {
    progress_log *p = user;
    p->calls++;
    p->last_batch = batch, p->batches = batches;
    CHECK(isfinite(loss) && loss > 0);
    return p->stop_after && p->calls >= p->stop_after;
}

/* Every loss a progress callback saw, by batch. */
typedef struct loss_log {
    float loss[16];
    int64_t batch[16];
    int calls;
} loss_log;

static int record_loss(void *user, int64_t batch, int64_t batches, float loss) {
    loss_log *l = user;
    (void)batches;
    if (l->calls < 16) l->loss[l->calls] = loss, l->batch[l->calls] = batch;
    l->calls++;
    return 0;
}

/* A batch hook that checks its arguments and stops the epoch before batch `at`. */
typedef struct stop_at {
    int64_t at, epoch;
    int batch_size, calls;
} stop_at;

static int stop_hook(void *user, int64_t epoch, int64_t batch, int first, int n) {
    stop_at *s = user;
    s->calls++;
    CHECK(epoch == s->epoch && first == (int)batch * s->batch_size);
    CHECK(n == (N - first < s->batch_size ? N - first : s->batch_size));
    return batch >= s->at;
}

static void check_no_crash_on_null(void) {
    CHECK(strcmp(clcnn_version(), CLCNN_VERSION_STRING) == 0);
    CHECK(strcmp(clcnn_status_str(CLCNN_ERR_IO), "CLCNN_ERR_IO") == 0);
    CHECK(strcmp(clcnn_status_str((clcnn_status)-5), "CL_OUT_OF_RESOURCES") == 0);
    CHECK(strcmp(clcnn_status_str((clcnn_status)12345), "CLCNN_UNKNOWN_STATUS") == 0);
    CHECK(clcnn_devices_count(NULL) == 0);
    CHECK(clcnn_devices_errmsg(NULL) != NULL);
    CHECK(clcnn_context_errmsg(NULL) != NULL && clcnn_model_errmsg(NULL) != NULL);
    CHECK(clcnn_dataset_errmsg(NULL) != NULL && clcnn_summary_writer_errmsg(NULL) != NULL);
    CHECK(clcnn_devices_errcode(NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_context_errcode(NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_model_errcode(NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_dataset_errcode(NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_summary_writer_errcode(NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_model_train_epoch(NULL, NULL, NULL, NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    clcnn_train_options_init(NULL);
    clcnn_devices_free(NULL);
    clcnn_context_free(NULL);
    clcnn_model_free(NULL);
    clcnn_dataset_free(NULL);
    CHECK(clcnn_summary_writer_close(NULL) == CLCNN_SUCCESS);
    CHECK(clcnn_devices_create(NULL, NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_context_create(NULL, NULL, 0, NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    clcnn_context *ctx = NULL;
    CHECK(clcnn_context_create(&ctx, NULL, 0, NULL) == CLCNN_ERR_DEVICE_INDEX);
    CHECK(strstr(clcnn_context_errmsg(ctx), "not in the visible list") != NULL);
    CHECK(clcnn_context_errcode(ctx) == CLCNN_ERR_DEVICE_INDEX);
    clcnn_context_free(ctx);
    clcnn_model *m = NULL;
    CHECK(clcnn_model_create(&m, NULL, "seed", 1, 28, 28, 1) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(strstr(clcnn_model_errmsg(m), "NULL") != NULL);
    CHECK(clcnn_model_errcode(m) == CLCNN_ERR_INVALID_ARGUMENT);
    clcnn_model_free(m);
    clcnn_replicas_free(NULL);
    CHECK(clcnn_replicas_errcode(NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(strcmp(clcnn_replicas_errmsg(NULL), "NULL replicas") == 0);
    CHECK(clcnn_replicas_local_count(NULL) == 0 && clcnn_replicas_global_count(NULL) == 0);
    CHECK(clcnn_replicas_train_dataset(NULL, NULL, 0, 1) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_replicas_train_epoch(NULL, NULL, NULL, NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_replicas_evaluate(NULL, NULL, 1, NULL, NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_replicas_last_loss(NULL, NULL, NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    clcnn_replicas_timing(NULL, NULL, NULL, NULL, NULL);
    clcnn_replicas *g = NULL;
    CHECK(clcnn_replicas_create(&g, NULL, 0, NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(strstr(clcnn_replicas_errmsg(g), "no models") != NULL);
    clcnn_replicas_free(g);
    CHECK(strcmp(clcnn_status_str(CLCNN_ERR_PEER), "CLCNN_ERR_PEER") == 0);
    CHECK(clcnn_model_train_batch(NULL, NULL, NULL, 1) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_model_train_dataset(NULL, NULL, 0, 1) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_model_evaluate(NULL, NULL, 1, NULL, NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_model_save_checkpoint(NULL, "x", NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_dataset_set_epoch(NULL, 1, 1, 1) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_dataset_format_parse("cifar10") == CLCNN_DATASET_CIFAR10);
    CHECK(clcnn_dataset_format_parse("imagenet") == -1);
    char err[256];
    CHECK(clcnn_checkpoint_peek("/nonexistent/x.safetensors", NULL, 0, NULL, NULL, NULL, err,
                                sizeof err) == CLCNN_ERR_IO);
    CHECK(strstr(err, "/nonexistent/x.safetensors") != NULL);
    clcnn_train_options o;
    clcnn_train_options_init(&o);
    CHECK(o.batch_size == 64 && o.shuffle == 1 && o.drop_last == 0 && o.seed == 1);
    CHECK(o.epoch == 0 && o.start_batch == 0 && o.global_step == 0 && o.every == 100);
    CHECK(!o.progress && !o.user && !o.hook && !o.hook_user);
    /* A log folder below a file cannot be made: the writer records why and the status. */
    clcnn_summary_writer *w = NULL;
    CHECK(clcnn_summary_writer_open(&w, "/dev/null/logs") == CLCNN_ERR_IO);
    CHECK(clcnn_summary_writer_errcode(w) == CLCNN_ERR_IO);
    CHECK(strstr(clcnn_summary_writer_errmsg(w), "/dev/null") != NULL);
    clcnn_summary_writer_close(w);
}

/* Copies every parameter of m into one malloc'd array of *total floats. */
static float *all_params(clcnn_model *m, size_t *total) {
    size_t n = 0, k = 0;
    for (int i = 0; i < clcnn_model_param_count(m); i++) {
        clcnn_model_param_info(m, i, NULL, NULL, NULL, &k);
        n += k;
    }
    float *p = malloc(n * sizeof *p + 1), *at = p;
    for (int i = 0; i < clcnn_model_param_count(m); i++) {
        clcnn_model_param_info(m, i, NULL, NULL, NULL, &k);
        CHECK(clcnn_model_get_param(m, i, at) == CLCNN_SUCCESS);
        at += k;
    }
    *total = n;
    return p;
}

/* A model with SGD momentum (state that a resume must carry) on the in-memory set. */
static clcnn_model *momentum_model(clcnn_context *ctx) {
    clcnn_model *m = NULL;
    clcnn_optimizer_options opt;
    CHECK(clcnn_model_create(&m, ctx, "conv(4,3,pad=1) relu maxpool(2) flatten linear(4)", C, H, W,
                             11) == CLCNN_SUCCESS);
    clcnn_optimizer_options_init(&opt, CLCNN_OPTIMIZER_SGD);
    opt.lr = 0.05, opt.momentum = 0.9;
    CHECK(clcnn_model_set_optimizer(m, &opt) == CLCNN_SUCCESS);
    return m;
}

/* A checkpoint's recorded normalisation travels with its weights: a model that loaded it
 * (load_checkpoint or load_weights) feeds a data set with none set as the checkpoint was
 * trained, refuses one set to another, and forgets it on request; the save refuses fields a
 * load would refuse; a seed past 2^63 round-trips. */
static void check_checkpoint_normalize(clcnn_context *ctx, const char *dir) {
    clcnn_dataset *plain = NULL, *norm = NULL, *other = NULL;
    clcnn_model *a = NULL, *b = NULL, *c = NULL;
    const float m9 = 0.9f, s05 = 0.05f, m5 = 0.5f, s25 = 0.25f;
    float mean = 0, sd = 0;
    double ref = 0, loss = 0;
    int ref_hits = -1, hits = -2, recorded = -1;
    char path[512], text[128];
    make_data(6);
    CHECK(clcnn_dataset_from_memory(&plain, ctx, img, lab, N, C, H, W) == CLCNN_SUCCESS);
    CHECK(clcnn_dataset_from_memory(&norm, ctx, img, lab, N, C, H, W) == CLCNN_SUCCESS);
    CHECK(clcnn_dataset_from_memory(&other, ctx, img, lab, N, C, H, W) == CLCNN_SUCCESS);
    CHECK(clcnn_dataset_set_normalize(norm, &m9, &s05) == CLCNN_SUCCESS);
    CHECK(clcnn_dataset_set_normalize(other, &m5, &s25) == CLCNN_SUCCESS);
    a = momentum_model(ctx);
    CHECK(clcnn_model_get_normalize(a, &mean, &sd) == 0); /* a new model knows none */
    CHECK(clcnn_model_evaluate(a, norm, 32, &ref, &ref_hits) == CLCNN_SUCCESS);
    CHECK(clcnn_model_evaluate(a, other, 32, &loss, &hits) == CLCNN_SUCCESS);
    CHECK(loss != ref); /* the two normalisations do give different results */
    snprintf(path, sizeof path, "%s/norm.safetensors", dir);
    clcnn_checkpoint_info info = {.struct_size = sizeof(clcnn_checkpoint_info),
                                  .epoch = 1,
                                  .step = 6,
                                  .seed = (1ULL << 63) + 5,
                                  .batch_size = 16,
                                  .pct_start = 0.3,
                                  .normalize = "0.9,0.05"},
                          back = {.struct_size = sizeof(clcnn_checkpoint_info)};
    CHECK(clcnn_model_save_checkpoint(a, path, &info) == CLCNN_SUCCESS);
    CHECK(clcnn_checkpoint_peek_normalize(path, text, sizeof text, &recorded, NULL, 0) ==
          CLCNN_SUCCESS);
    CHECK(recorded == 1 && !strcmp(text, "0.9,0.05"));

    CHECK(clcnn_model_create(&b, ctx, clcnn_model_spec(a), C, H, W, 99) == CLCNN_SUCCESS);
    CHECK(clcnn_model_load_checkpoint(b, path, &back) == CLCNN_SUCCESS);
    CHECK(back.seed == (1ULL << 63) + 5 && !strcmp(back.normalize, "0.9,0.05"));
    CHECK(clcnn_model_get_normalize(b, &mean, &sd) == 1 && mean == m9 && sd == s05);
    /* A set with none takes the model's: the result of the normalised set, exactly. */
    CHECK(clcnn_model_evaluate(b, plain, 32, &loss, &hits) == CLCNN_SUCCESS);
    CHECK(loss == ref && hits == ref_hits);
    CHECK(clcnn_model_evaluate(b, norm, 32, &loss, &hits) == CLCNN_SUCCESS);
    CHECK(loss == ref && hits == ref_hits);
    CHECK(clcnn_model_evaluate(b, other, 32, &loss, &hits) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(strstr(clcnn_model_errmsg(b), "normalised with mean 0.5, std 0.25") != NULL);
    CHECK(clcnn_model_train_dataset(b, other, 0, 8) == CLCNN_ERR_INVALID_ARGUMENT);

    /* load_weights (the --init path) takes it too; clearing it lets any set through. */
    CHECK(clcnn_model_create(&c, ctx, clcnn_model_spec(a), C, H, W, 98) == CLCNN_SUCCESS);
    CHECK(clcnn_model_load_weights(c, path) == CLCNN_SUCCESS);
    CHECK(clcnn_model_get_normalize(c, &mean, &sd) == 1 && mean == m9 && sd == s05);
    CHECK(clcnn_model_evaluate(c, other, 32, &loss, &hits) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_model_set_normalize(c, &m5, NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_model_set_normalize(c, NULL, NULL) == CLCNN_SUCCESS);
    CHECK(clcnn_model_get_normalize(c, NULL, NULL) == 0);
    CHECK(clcnn_model_evaluate(c, other, 32, &loss, &hits) == CLCNN_SUCCESS);

    /* A checkpoint that records no normalisation (""): unnormalised inputs, mean 0, std 1. */
    info.normalize[0] = '\0';
    CHECK(clcnn_model_save_checkpoint(a, path, &info) == CLCNN_SUCCESS);
    CHECK(clcnn_checkpoint_peek_normalize(path, text, sizeof text, &recorded, NULL, 0) ==
          CLCNN_SUCCESS);
    CHECK(recorded == 1 && text[0] == '\0');
    CHECK(clcnn_model_load_weights(c, path) == CLCNN_SUCCESS);
    CHECK(clcnn_model_get_normalize(c, &mean, &sd) == 1 && mean == 0.0f && sd == 1.0f);
    CHECK(clcnn_model_evaluate(c, other, 32, &loss, &hits) == CLCNN_ERR_INVALID_ARGUMENT);

    /* What a load would refuse, a save refuses, naming the field; the file is untouched. */
    clcnn_checkpoint_info bad = info;
    snprintf(bad.normalize, sizeof bad.normalize, "imagenet");
    CHECK(clcnn_model_save_checkpoint(a, path, &bad) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(strstr(clcnn_model_errmsg(a), "normalize") != NULL);
    bad = info, bad.step = ((int64_t)1 << 53) + 1;
    CHECK(clcnn_model_save_checkpoint(a, path, &bad) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(strstr(clcnn_model_errmsg(a), "step") != NULL);
    bad = info, bad.batch_size = (int64_t)1 << 31;
    CHECK(clcnn_model_save_checkpoint(a, path, &bad) == CLCNN_ERR_INVALID_ARGUMENT);
    bad = info, bad.label_smoothing = NAN;
    CHECK(clcnn_model_save_checkpoint(a, path, &bad) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_checkpoint_peek_normalize(path, text, sizeof text, &recorded, NULL, 0) ==
          CLCNN_SUCCESS);
    CHECK(recorded == 1 && text[0] == '\0');
    clcnn_model_free(a);
    clcnn_model_free(b);
    clcnn_model_free(c);
    clcnn_dataset_free(plain);
    clcnn_dataset_free(norm);
    clcnn_dataset_free(other);
}

/* clcnn_model_train_epoch: an epoch stopped by the hook before batch 3, saved, loaded into a
 * fresh model and resumed with start_batch gives the uninterrupted epoch's losses and weights
 * bit for bit. Batches of 20 make the last of the 5 partial. */
static void check_resume_mid_epoch(clcnn_context *ctx, const char *dir) {
    clcnn_dataset *ds = NULL;
    clcnn_model *a = NULL, *b = NULL, *c = NULL;
    clcnn_train_options o;
    loss_log la = {0}, lb = {0}, lc = {0};
    int64_t done = -1;
    char path[512];
    make_data(4);
    CHECK(clcnn_dataset_from_memory(&ds, ctx, img, lab, N, C, H, W) == CLCNN_SUCCESS);
    a = momentum_model(ctx), b = momentum_model(ctx);
    clcnn_train_options_init(&o);
    o.batch_size = 20, o.seed = 5, o.epoch = 2, o.every = 1, o.progress = record_loss;
    o.user = &la;
    CHECK(clcnn_model_train_epoch(a, ds, &o, &done) == CLCNN_SUCCESS);
    CHECK(done == 5 && la.calls == 5 && la.batch[4] == 5);

    stop_at s = {3, 2, 20, 0};
    o.user = &lb, o.hook = stop_hook, o.hook_user = &s;
    CHECK(clcnn_model_train_epoch(b, ds, &o, &done) == CLCNN_SUCCESS);
    CHECK(done == 3 && s.calls == 4 && lb.calls == 3);
    CHECK(memcmp(la.loss, lb.loss, 3 * sizeof(float)) == 0);
    snprintf(path, sizeof path, "%s/mid.safetensors", dir);
    clcnn_checkpoint_info info = {.struct_size = sizeof(clcnn_checkpoint_info),
                                  .epoch = 2,
                                  .step = 3,
                                  .batch_in_epoch = 3,
                                  .seed = 5,
                                  .batch_size = 20,
                                  .schedule = CLCNN_SCHEDULE_ONECYCLE,
                                  .schedule_lr = 0.3,
                                  .total_steps = 17,
                                  .pct_start = 0.25,
                                  .label_smoothing = 0.1,
                                  .random_crop = 4,
                                  .hflip = 1},
                          back = {.struct_size = sizeof(clcnn_checkpoint_info)};
    CHECK(clcnn_model_save_checkpoint(b, path, &info) == CLCNN_SUCCESS);
    CHECK(clcnn_model_create(&c, ctx, clcnn_model_spec(b), C, H, W, 99) == CLCNN_SUCCESS);
    CHECK(clcnn_model_load_checkpoint(c, path, &back) == CLCNN_SUCCESS);
    CHECK(back.epoch == 2 && back.step == 3 && back.batch_in_epoch == 3 && back.seed == 5 &&
          back.batch_size == 20);
    CHECK(back.schedule == CLCNN_SCHEDULE_ONECYCLE && back.schedule_lr == 0.3 &&
          back.total_steps == 17 && back.pct_start == 0.25 && back.label_smoothing == 0.1 &&
          back.random_crop == 4 && back.hflip == 1);
    /* every 2 counted from the checkpoint's step 3: after batches 4 (step 4) but not 5. */
    o.epoch = back.epoch, o.start_batch = back.batch_in_epoch, o.global_step = back.step;
    o.every = 2, o.user = &lc, o.hook = NULL, o.hook_user = NULL;
    CHECK(clcnn_model_train_epoch(c, ds, &o, &done) == CLCNN_SUCCESS);
    CHECK(done == 5 && lc.calls == 1 && lc.batch[0] == 4 && lc.loss[0] == la.loss[3]);
    CHECK(clcnn_model_step_count(c) == clcnn_model_step_count(a));
    size_t na = 0, nc = 0;
    float *pa = all_params(a, &na), *pc = all_params(c, &nc);
    CHECK(na == nc && na > 0 && memcmp(pa, pc, na * sizeof *pa) == 0);
    free(pa);
    free(pc);

    /* drop_last leaves out the partial batch; a start past the end is refused, on the model. */
    o.start_batch = 0, o.global_step = 0, o.progress = NULL, o.drop_last = 1;
    CHECK(clcnn_model_train_epoch(c, ds, &o, &done) == CLCNN_SUCCESS && done == 4);
    CHECK(clcnn_model_errcode(c) == CLCNN_SUCCESS);
    o.start_batch = 5;
    CHECK(clcnn_model_train_epoch(c, ds, &o, &done) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_model_errcode(c) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(strstr(clcnn_model_errmsg(c), "start batch 5") != NULL);
    CHECK(clcnn_dataset_errcode(ds) == CLCNN_SUCCESS);
    clcnn_model_free(a);
    clcnn_model_free(b);
    clcnn_model_free(c);
    clcnn_dataset_free(ds);
}

/* Trains on the in-memory set, checks progress reports, evaluation against inference, and a
 * checkpoint round trip into a second model. */
static void check_training(clcnn_context *ctx, const char *dir) {
    clcnn_dataset *ds = NULL;
    clcnn_model *m = NULL, *m2 = NULL;
    make_data(3);
    CHECK(clcnn_dataset_from_memory(&ds, ctx, img, lab, N, C, H, W) == CLCNN_SUCCESS);
    CHECK(clcnn_dataset_size(ds) == N);
    CHECK(clcnn_model_create(&m, ctx, "conv(6,3,pad=1) relu maxpool(2) flatten linear(4)", C, H, W,
                             9) == CLCNN_SUCCESS);
    progress_log p = {0, 0, 0, 0};
    int64_t done = -1;
    clcnn_train_options o;
    clcnn_train_options_init(&o);
    o.batch_size = 16, o.seed = 5, o.every = 2, o.progress = on_progress, o.user = &p;
    for (o.epoch = 0; o.epoch < 4; o.epoch++)
        CHECK(clcnn_model_train_epoch(m, ds, &o, &done) == CLCNN_SUCCESS);
    CHECK(p.calls == 12 && p.batches == 6 && p.last_batch == 6 && done == 6);
    p.calls = 0, p.stop_after = 1;
    CHECK(clcnn_model_train_epoch(m, ds, &o, &done) == CLCNN_SUCCESS);
    CHECK(p.calls == 1 && done == 2); /* stopped by the callback */
    CHECK(clcnn_model_step_count(m) == 26);

    double loss = 0;
    int correct = -1;
    CHECK(clcnn_model_evaluate(m, ds, 40, &loss, &correct) == CLCNN_SUCCESS);
    CHECK(correct > N / 2); /* a learnable task after 26 steps */
    float *x = malloc(sizeof(float) * N * C * H * W), *logits = malloc(sizeof(float) * N * 4);
    for (int i = 0; i < N * C * H * W; i++)
        x[i] = (float)img[i] / 255.0f;
    CHECK(clcnn_model_predict(m, x, N, logits) == CLCNN_SUCCESS);
    int hits = 0;
    double sum = 0;
    for (int i = 0; i < N; i++) {
        int best = 0;
        double mx = logits[i * 4], se = 0;
        for (int k = 1; k < 4; k++)
            if (logits[i * 4 + k] > logits[i * 4 + best]) best = k, mx = logits[i * 4 + k];
        for (int k = 0; k < 4; k++)
            se += exp(logits[i * 4 + k] - mx);
        sum += mx + log(se) - logits[i * 4 + lab[i]];
        hits += best == lab[i];
    }
    CHECK(hits == correct);
    CHECK(fabs(sum / N - loss) < 1e-4 * (1 + loss));

    /* Checkpoint round trip: a second model predicts the same logits. */
    char path[512], spec[256];
    snprintf(path, sizeof path, "%s/ck.safetensors", dir);
    clcnn_checkpoint_info info, back;
    clcnn_checkpoint_info_init(&info);
    clcnn_checkpoint_info_init(&back);
    info.epoch = 4, info.step = 26, info.batch_in_epoch = 2, info.seed = 5;
    CHECK(clcnn_model_save_checkpoint(m, path, &info) == CLCNN_SUCCESS);
    int c = 0, h = 0, w = 0;
    CHECK(clcnn_checkpoint_peek(path, spec, sizeof spec, &c, &h, &w, NULL, 0) == CLCNN_SUCCESS);
    CHECK(c == C && h == H && w == W && strcmp(spec, clcnn_model_spec(m)) == 0);
    CHECK(clcnn_model_create(&m2, ctx, spec, c, h, w, 1) == CLCNN_SUCCESS);
    CHECK(clcnn_model_load_checkpoint(m2, path, &back) == CLCNN_SUCCESS);
    CHECK(back.epoch == 4 && back.step == 26 && back.batch_in_epoch == 2 && back.seed == 5);
    CHECK(clcnn_model_step_count(m2) == 26);
    float *logits2 = malloc(sizeof(float) * N * 4);
    CHECK(clcnn_model_predict(m2, x, N, logits2) == CLCNN_SUCCESS);
    CHECK(memcmp(logits, logits2, sizeof(float) * N * 4) == 0);
    /* Wrong shapes and foreign handles are refused. */
    clcnn_model *other = NULL;
    CHECK(clcnn_model_create(&other, ctx, "flatten linear(4)", C, H, W, 1) == CLCNN_SUCCESS);
    CHECK(clcnn_model_load_weights(other, path) == CLCNN_ERR_FORMAT);
    CHECK(strstr(clcnn_model_errmsg(other), "ck.safetensors") != NULL);
    clcnn_model_free(other);
    uint8_t bad_lab[N];
    memcpy(bad_lab, lab, N);
    bad_lab[7] = 9; /* beyond the model's 4 outputs */
    clcnn_dataset *bad = NULL;
    CHECK(clcnn_dataset_from_memory(&bad, ctx, img, bad_lab, N, C, H, W) == CLCNN_SUCCESS);
    CHECK(clcnn_model_train_dataset(m, bad, 0, 16) == CLCNN_ERR_SHAPE);
    CHECK(strstr(clcnn_model_errmsg(m), "label 9") != NULL);
    CHECK(clcnn_model_errcode(m) == CLCNN_ERR_SHAPE);
    CHECK(clcnn_model_train_dataset(m, ds, 90, 16) == CLCNN_ERR_INVALID_ARGUMENT);
    clcnn_dataset_free(bad);
    clcnn_dataset *mem_bad = NULL;
    CHECK(clcnn_dataset_from_memory(&mem_bad, ctx, img, lab, 0, C, H, W) ==
          CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_dataset_errcode(mem_bad) == CLCNN_ERR_INVALID_ARGUMENT);
    clcnn_dataset_free(mem_bad);
    free(x);
    free(logits);
    free(logits2);
    clcnn_model_free(m2);
    clcnn_model_free(m);
    clcnn_dataset_free(ds);
}

/* The host application owns an OpenCL context and queue; clcnn runs on them. */
/* Every struct with a struct_size: its init function sets it, and a size this library does not
 * know (a caller that skipped the init, or one built against another layout) is refused with
 * one line naming the struct and its init function, before anything is read, written or run. */
static void check_struct_sizes(clcnn_devices *devs, int idx, clcnn_context *ctx, const char *dir) {
    clcnn_context_options co;
    clcnn_train_options to;
    clcnn_checkpoint_info ci;
    clcnn_comm cm;
    clcnn_optimizer_options oo;
    clcnn_context_options_init(&co);
    clcnn_optimizer_options_init(&oo, CLCNN_OPTIMIZER_ADAM);
    clcnn_train_options_init(&to);
    clcnn_checkpoint_info_init(&ci);
    clcnn_comm_init(&cm);
    CHECK(co.struct_size == sizeof co && to.struct_size == sizeof to);
    CHECK(ci.struct_size == sizeof ci && cm.struct_size == sizeof cm);
    CHECK(oo.struct_size == sizeof oo && oo.kind == CLCNN_OPTIMIZER_ADAM);

    clcnn_context *bad = NULL;
    co.struct_size = 0;
    CHECK(clcnn_context_create(&bad, devs, idx, &co) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(strstr(clcnn_context_errmsg(bad), "clcnn_context_options_init") != NULL);
    clcnn_context_free(bad);

    clcnn_dataset *ds = NULL;
    clcnn_model *m = NULL;
    clcnn_replicas *g = NULL;
    make_data(5);
    CHECK(clcnn_dataset_from_memory(&ds, ctx, img, lab, N, C, H, W) == CLCNN_SUCCESS);
    m = momentum_model(ctx);
    to.struct_size = sizeof to + 8;
    CHECK(clcnn_model_train_epoch(m, ds, &to, NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(strstr(clcnn_model_errmsg(m), "clcnn_train_options_init") != NULL);
    CHECK(clcnn_model_step_count(m) == 0);
    oo.struct_size = 0;
    CHECK(clcnn_model_set_optimizer(m, &oo) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(strstr(clcnn_model_errmsg(m), "clcnn_optimizer_options_init") != NULL);
    clcnn_optimizer_options got = oo; /* struct_size 0: refused, and not written */
    CHECK(clcnn_model_get_optimizer(m, &got) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(got.struct_size == 0 && got.kind == CLCNN_OPTIMIZER_ADAM);
    got.struct_size = sizeof got;
    CHECK(clcnn_model_get_optimizer(m, &got) == CLCNN_SUCCESS);
    CHECK(got.kind == CLCNN_OPTIMIZER_SGD && got.struct_size == sizeof got); /* momentum_model */

    char path[512];
    snprintf(path, sizeof path, "%s/sizes.safetensors", dir);
    ci.struct_size = sizeof ci - 8;
    CHECK(clcnn_model_save_checkpoint(m, path, &ci) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(strstr(clcnn_model_errmsg(m), "clcnn_checkpoint_info_init") != NULL);
    CHECK(access(path, F_OK) != 0); /* nothing written */
    ci.struct_size = sizeof ci, ci.epoch = 3;
    CHECK(clcnn_model_save_checkpoint(m, path, &ci) == CLCNN_SUCCESS);
    clcnn_checkpoint_info back = ci;
    back.struct_size = 0, back.epoch = 0;
    CHECK(clcnn_model_load_checkpoint(m, path, &back) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(strstr(clcnn_model_errmsg(m), "clcnn_checkpoint_info_init") != NULL);
    CHECK(back.epoch == 0 && back.struct_size == 0); /* not written */
    clcnn_checkpoint_info_init(&back);
    CHECK(clcnn_model_load_checkpoint(m, path, &back) == CLCNN_SUCCESS && back.epoch == 3);
    CHECK(back.struct_size == sizeof back);

    cm.rank = 0, cm.size = 1, cm.struct_size = 1;
    CHECK(clcnn_replicas_create(&g, &m, 1, &cm) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(strstr(clcnn_replicas_errmsg(g), "clcnn_comm_init") != NULL);
    clcnn_replicas_free(g);
    g = NULL;
    cm.struct_size = sizeof cm;
    CHECK(clcnn_replicas_create(&g, &m, 1, &cm) == CLCNN_SUCCESS);
    clcnn_replicas_free(g);
    clcnn_model_free(m);
    clcnn_dataset_free(ds);
    remove(path);
    snprintf(path, sizeof path, "%s/sizes.state.safetensors", dir);
    remove(path);
}

static void check_adopted(cl_platform_id platform, cl_device_id device) {
    cl_int rc;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)platform, 0};
    cl_context cl = clCreateContext(props, 1, &device, NULL, NULL, &rc);
    CHECK(rc == CL_SUCCESS);
    cl_command_queue q = clCreateCommandQueue(cl, device, 0, &rc);
    CHECK(rc == CL_SUCCESS);
    clcnn_context *ctx = NULL;
    CHECK(clcnn_context_create_from_cl(&ctx, cl, q, NULL) == CLCNN_SUCCESS);
    clcnn_device_info in;
    CHECK(clcnn_context_device(ctx, &in) == CLCNN_SUCCESS && in.name[0] && in.global_index == -1);
    clcnn_model *m = NULL;
    CHECK(clcnn_model_create(&m, ctx, "flatten linear(4)", C, H, W, 1) == CLCNN_SUCCESS);
    float x[2 * C * H * W] = {0};
    uint8_t y[2] = {1, 2};
    CHECK(clcnn_model_train_batch(m, x, y, 2) == CLCNN_SUCCESS);
    float loss = 0;
    CHECK(clcnn_model_last_loss(m, &loss, NULL) == CLCNN_SUCCESS && isfinite(loss) && loss > 0);
    clcnn_model_free(m);
    clcnn_context_free(ctx);
    /* Still the application's: usable after clcnn let go of it. */
    cl_mem b = clCreateBuffer(cl, CL_MEM_READ_WRITE, 64, NULL, &rc);
    CHECK(rc == CL_SUCCESS);
    if (b) clReleaseMemObject(b);
    /* A queue from another context is refused. */
    cl_context cl2 = clCreateContext(props, 1, &device, NULL, NULL, &rc);
    ctx = NULL;
    CHECK(clcnn_context_create_from_cl(&ctx, cl2, q, NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(strstr(clcnn_context_errmsg(ctx), "does not belong") != NULL);
    clcnn_context_free(ctx);
    clReleaseContext(cl2);
    clReleaseCommandQueue(q);
    clReleaseContext(cl);
}

int main(void) {
    clcnn_devices *devs = NULL;
    clcnn_context *ctx = NULL;
    int idx = -1;
    check_no_crash_on_null();
    if (clcnn_devices_create(&devs, NULL) != CLCNN_SUCCESS || clcnn_devices_count(devs) == 0) {
        clcnn_devices_free(devs);
        if (failures) return 1;
        fprintf(stderr, "no OpenCL device: skipping the device part\n");
        return 77;
    }
    CHECK(clcnn_devices_errcode(devs) == CLCNN_SUCCESS);
    CHECK(clcnn_devices_select(devs, 0, 99, &idx) == CLCNN_ERR_DEVICE_INDEX);
    CHECK(strstr(clcnn_devices_errmsg(devs), "--device 99 is out of range") != NULL);
    CHECK(clcnn_devices_errcode(devs) == CLCNN_ERR_DEVICE_INDEX);
    CHECK(clcnn_devices_select(devs, -1, -1, &idx) == CLCNN_SUCCESS);
    CHECK(clcnn_context_create(&ctx, devs, 99, NULL) == CLCNN_ERR_DEVICE_INDEX);
    clcnn_context_free(ctx);
    ctx = NULL;
    CHECK(clcnn_context_create(&ctx, devs, idx, NULL) == CLCNN_SUCCESS);
    char tmpl[] = "/tmp/clcnn_test_api_XXXXXX";
    CHECK(mkdtemp(tmpl) != NULL);
    CHECK(clcnn_context_errcode(ctx) == CLCNN_SUCCESS);
    check_training(ctx, tmpl);
    check_resume_mid_epoch(ctx, tmpl);
    check_checkpoint_normalize(ctx, tmpl);
    check_struct_sizes(devs, idx, ctx, tmpl);

    clcnn_summary_writer *w = NULL;
    char logdir[600];
    snprintf(logdir, sizeof logdir, "%s/logs", tmpl);
    CHECK(clcnn_summary_writer_open(&w, logdir) == CLCNN_SUCCESS);
    CHECK(clcnn_summary_writer_add_scalar(w, "train_loss", 1.5f, 1) == CLCNN_SUCCESS);
    CHECK(strstr(clcnn_summary_writer_path(w), "events.out.tfevents.") != NULL);
    CHECK(clcnn_summary_writer_errcode(w) == CLCNN_SUCCESS);
    CHECK(clcnn_summary_writer_close(w) == CLCNN_SUCCESS);

    /* The adopted-context case, on the same device. */
    clcnn_device_info in;
    clcnn_devices_get(devs, idx, &in);
    cl_uint np = 0;
    clGetPlatformIDs(0, NULL, &np);
    cl_platform_id *plats = calloc(np + 1, sizeof *plats);
    clGetPlatformIDs(np, plats, NULL);
    cl_uint nd = 0;
    clGetDeviceIDs(plats[in.platform_index], CL_DEVICE_TYPE_ALL, 0, NULL, &nd);
    cl_device_id *ids = calloc(nd + 1, sizeof *ids);
    clGetDeviceIDs(plats[in.platform_index], CL_DEVICE_TYPE_ALL, nd, ids, NULL);
    check_adopted(plats[in.platform_index], ids[in.device_index]);
    free(ids);
    free(plats);

    clcnn_context_free(ctx);

    /* A profile report after the model that labelled its sections is gone (ASan watches). */
    clcnn_context_options popts;
    clcnn_context_options_init(&popts);
    popts.enable_profiling = 1;
    ctx = NULL;
    CHECK(clcnn_context_create(&ctx, devs, idx, &popts) == CLCNN_SUCCESS);
    {
        clcnn_model *pm = NULL;
        float px[2 * C * H * W] = {0};
        uint8_t py[2] = {0, 1};
        CHECK(clcnn_model_create(&pm, ctx, "conv(2,3) flatten linear(4)", C, H, W, 1) ==
              CLCNN_SUCCESS);
        CHECK(clcnn_model_train_batch(pm, px, py, 2) == CLCNN_SUCCESS);
        clcnn_model_free(pm);
        char rep[4096];
        CHECK(clcnn_context_profile_report(ctx, rep, sizeof rep) > 0);
        CHECK(strstr(rep, "0 Conv2d forward") != NULL);
    }
    clcnn_context_free(ctx);
    clcnn_devices_free(devs);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
    if (system(cmd) != 0) fprintf(stderr, "cleanup failed\n");
    if (failures)
        fprintf(stderr, "test_api: %d check(s) failed\n", failures);
    else
        printf("test_api: all checks passed\n");
    return failures ? 1 : 0;
}
