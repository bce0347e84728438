/* The training loop: batches gathered (and augmented) on the device from a data set, epochs in
 * the order that (seed, epoch) fixes (resumable at any batch), the learning-rate schedule,
 * progress and per-batch hooks, and evaluation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "feed.h"
#include "replicas.h"
#include "schedule.h"

/* ---- augmentation -------------------------------------------------------------------------- */

/* splitmix64's finaliser, as cl/data.cl's aug_mix. */
static uint64_t aug_mix(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The key of an epoch's augmentation: every sample's draw is a hash of it and the sample. The
 * constant ("AUGMENT1") keeps these draws apart from other uses of the seed. */
static uint64_t aug_key(uint64_t seed, int64_t epoch) {
    return aug_mix(seed ^ aug_mix((uint64_t)epoch ^ 0x41554741454E5431ull));
}

void clcnn_augment_sample(uint64_t seed, int64_t epoch, int sample, int random_crop, int hflip,
                          int *dy, int *dx, int *flip) {
    uint64_t h = aug_mix(aug_key(seed, epoch) ^ ((uint64_t)sample * 0xD1B54A32D192ED03ull));
    uint32_t span = random_crop > 0 ? (uint32_t)(2 * random_crop + 1) : 1;
    if (dy) *dy = (int)((uint32_t)h % span);
    if (dx) *dx = (int)((uint32_t)((h >> 32) & 0x7FFFFFFFu) % span);
    if (flip) *flip = hflip ? (int)(h >> 63) : 0;
}

/* ---- the loop ------------------------------------------------------------------------------ */

void clcnn_train_options_init(clcnn_train_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->batch_size = 64;
    o->shuffle = 1;
    o->seed = 1;
    o->every = 100;
    o->pct_start = 0.3;
}

clcnn_status clcnn_model_set_label_smoothing(clcnn_model *m, double eps) {
    if (!m) return CLCNN_ERR_INVALID_ARGUMENT;
    if (!(eps >= 0 && eps <= 1))
        return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT,
                          "label smoothing %g is outside [0, 1]", eps);
    m->label_smoothing = eps;
    return CLCNN_SUCCESS;
}

/* Batches in an epoch of n samples: the last one partial, or dropped with drop_last. */
static int64_t epoch_batches(int n, const clcnn_train_options *o) {
    return o->drop_last ? n / o->batch_size : (n + (int64_t)o->batch_size - 1) / o->batch_size;
}

/* What an epoch trains: a data-parallel group, replica i on sets[i] (one model is a group of
 * one, clcnn_replicas_of_one). m and ds are replica 0's; err is where a failure is described
 * (the model's, for one model). */
typedef struct trainer {
    clcnn_model *m;
    clcnn_dataset *ds;
    clcnn_replicas *group;
    clcnn_dataset *const *sets;
    clcnn_error *err;
} trainer;

/* A failure of the group's as the trainer's (where err is not the group's own). */
static clcnn_status group_failed(const trainer *t, clcnn_status st) {
    if (st && t->err != &t->group->err) *t->err = t->group->err;
    return st;
}

/* The batch size nearest to bs on one side (step -1: below, +1: above) whose batches over n
 * samples all hold at least `least`; 0 when there is none. */
static int batch_that_fits(int n, int bs, int least, int step) {
    for (int b = bs + step; b >= least && b <= n; b += step)
        if (n % b == 0 || n % b >= least) return b;
    return 0;
}

/* An epoch whose batches include one that the model cannot train on (fewer samples than
 * clcnn_model_train_min: BatchNorm with one value per channel) is refused before its first
 * step, not at that batch, where PyTorch raises: nothing of the epoch is trained, so nothing is
 * lost. Every replica of a group then takes a share of at least that many (replicas.c). */
static clcnn_status check_last_batch(const trainer *t, const clcnn_train_options *o, int64_t nb) {
    int least = clcnn_model_train_min(t->m, NULL), n = t->ds->n;
    if (least == 1 || nb <= o->start_batch) return CLCNN_SUCCESS;
    int last = (int)(n - (nb - 1) * o->batch_size);
    if (last >= least) return CLCNN_SUCCESS;
    char what[80], fix[96] = "the data set is too small";
    int below = batch_that_fits(n, o->batch_size, least, -1);
    int above = batch_that_fits(n, o->batch_size, least, 1);
    const char *drop = !o->drop_last && o->batch_size >= least ? ", or drop_last" : "";
    if (below && above)
        snprintf(fix, sizeof fix, "use a batch size of %d or %d%s", below, above, drop);
    else if (below || above)
        snprintf(fix, sizeof fix, "use a batch size of %d%s", below ? below : above, drop);
    clcnn_model_train_min_name(t->m, what, sizeof what);
    return clcnn_fail(t->err, CLCNN_ERR_INVALID_ARGUMENT,
                      "an epoch of %d samples in batches of %d ends with a batch of %d, but %s "
                      "needs at least %d samples to train (more than 1 value per channel): %s",
                      n, o->batch_size, last, what, least, fix);
}

static clcnn_status check_options(const trainer *t, const clcnn_train_options *o) {
    clcnn_status st;
    if (o->batch_size <= 0 || (o->progress && o->every <= 0))
        return clcnn_fail(t->err, CLCNN_ERR_INVALID_ARGUMENT,
                          "batch size %d and report interval %lld must be positive", o->batch_size,
                          (long long)o->every);
    int64_t nb = epoch_batches(t->ds->n, o);
    if (o->start_batch < 0 || o->start_batch > nb || o->global_step < 0)
        return clcnn_fail(t->err, CLCNN_ERR_INVALID_ARGUMENT,
                          "start batch %lld (of %lld) and global step %lld: out of range",
                          (long long)o->start_batch, (long long)nb, (long long)o->global_step);
    if ((st = check_last_batch(t, o, nb))) return st;
    if (o->random_crop < 0 || o->random_crop > CLCNN_MAX_CROP || o->hflip < 0 || o->hflip > 1)
        return clcnn_fail(t->err, CLCNN_ERR_INVALID_ARGUMENT,
                          "random crop %d (0..%d) and hflip %d (0 or 1): out of range",
                          o->random_crop, CLCNN_MAX_CROP, o->hflip);
    return clcnn_schedule_check(o->schedule, o->lr, o->total_steps, o->pct_start, t->err);
}

/* Sets the optimizer's lr for global step `step` as the schedule says (a constant schedule
 * leaves it alone), on every replica. */
static clcnn_status schedule_step(const trainer *t, const clcnn_train_options *o, int64_t step) {
    if (o->schedule == CLCNN_SCHEDULE_CONSTANT) return CLCNN_SUCCESS;
    double lr = clcnn_schedule_lr(o->schedule, o->lr, step, o->total_steps, o->pct_start);
    if (!(lr >= 0) || !isfinite(lr))
        return clcnn_fail(t->err, CLCNN_ERR_INVALID_ARGUMENT,
                          "the %s schedule has no learning rate for step %lld (total steps %lld, "
                          "pct_start %g)",
                          clcnn_schedule_name(o->schedule), (long long)step,
                          (long long)o->total_steps, o->pct_start);
    for (int i = 0; i < t->group->n; i++)
        t->group->reps[i].m->opt.lr = lr;
    return CLCNN_SUCCESS;
}

/* Hands the loss of batch b (0-based), just taken, to the progress callback; a loss that is
 * not finite stops the epoch instead. *stop receives the callback's wish. */
static clcnn_status report(const trainer *t, const clcnn_train_options *o, int64_t b, int64_t nb,
                           int *stop) {
    float loss = 0;
    clcnn_status st = clcnn_replicas_last_loss(t->group, &loss, NULL);
    if (st) return group_failed(t, st);
    if (!isfinite(loss))
        return clcnn_fail(t->err, CLCNN_ERR_NUMERIC, "the loss is %s at batch %lld of epoch %lld",
                          isnan(loss) ? "NaN" : "infinite", (long long)(b + 1),
                          (long long)o->epoch);
    *stop = o->progress(o->user, b + 1, nb, loss) != 0;
    return CLCNN_SUCCESS;
}

/* The epoch's sample order on every data set. */
static clcnn_status set_epoch(const trainer *t, const clcnn_train_options *o) {
    for (int i = 0; i < t->group->n; i++) {
        clcnn_dataset *ds = t->sets[i];
        clcnn_status st = clcnn_dataset_set_epoch(ds, o->seed, o->epoch, o->shuffle);
        if (st) {
            *t->err = ds->err;
            return st;
        }
    }
    return CLCNN_SUCCESS;
}

static clcnn_status take_step(const trainer *t, int first, int n, clcnn_augment aug) {
    return group_failed(t, clcnn_replicas_step(t->group, t->sets, first, n, aug));
}

/* Waits for every replica's queue. */
static clcnn_status finish(const trainer *t) {
    for (int i = 0; i < t->group->n; i++) {
        clcnn_model *m = t->group->reps[i].m;
        cl_int rc = clFinish(m->ctx->queue);
        if (rc != CL_SUCCESS)
            return clcnn_fail(t->err, (clcnn_status)rc, "clFinish failed: %s",
                              clcnn_cl_error_name(rc));
    }
    return CLCNN_SUCCESS;
}

/* One epoch from batch o->start_batch on, with the caller's options (checked for their size
 * first). *done: the epoch's batches taken so far. */
static clcnn_status run_epoch(const trainer *t, const clcnn_train_options *given, int64_t *done) {
    clcnn_status st;
    clcnn_train_options opts, *o = &opts;
    clcnn_train_options_init(&opts);
    if ((st = clcnn_sized_in(t->err, "clcnn_train_options", &opts, given, sizeof opts))) return st;
    int stop = 0, size = t->ds->n;
    if ((st = check_options(t, o))) return st;
    *done = o->start_batch;
    if ((st = set_epoch(t, o))) return st;
    int64_t nb = epoch_batches(size, o);
    clcnn_augment aug = {aug_key(o->seed, o->epoch), o->random_crop, o->hflip};
    for (int64_t b = o->start_batch; b < nb && !stop; b++) {
        int first = (int)(b * o->batch_size);
        int n = size - first < o->batch_size ? size - first : o->batch_size;
        int64_t steps = o->global_step + (b - o->start_batch);
        if (o->hook && o->hook(o->hook_user, o->epoch, b, first, n)) break;
        if ((st = schedule_step(t, o, steps))) return st;
        if ((st = take_step(t, first, n, aug))) return st;
        *done = b + 1;
        steps++;
        if (o->progress && steps % o->every == 0 && (st = report(t, o, b, nb, &stop))) return st;
    }
    return finish(t);
}

clcnn_status clcnn_model_train_epoch(clcnn_model *m, clcnn_dataset *ds,
                                     const clcnn_train_options *o, int64_t *batches_done) {
    int64_t done = 0;
    clcnn_status st;
    if (batches_done) *batches_done = 0;
    if (!m || !ds) return CLCNN_ERR_INVALID_ARGUMENT;
    if (!o) return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL training options");
    clcnn_replicas one;
    clcnn_replicas_of_one(&one, m);
    clcnn_dataset *sets[1] = {ds};
    trainer t = {m, ds, &one, sets, &m->err};
    st = run_epoch(&t, o, &done);
    if (batches_done) *batches_done = done;
    return st;
}

clcnn_status clcnn_replicas_train_epoch(clcnn_replicas *r, clcnn_dataset *const *ds,
                                        const clcnn_train_options *o, int64_t *batches_done) {
    int64_t done = 0;
    if (batches_done) *batches_done = 0;
    if (!r) return CLCNN_ERR_INVALID_ARGUMENT;
    if (!o) return clcnn_fail(&r->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL training options");
    for (int i = 0; i < r->n; i++)
        if (!ds || !ds[i])
            return clcnn_fail(&r->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL data set for replica %d",
                              i);
    trainer t = {r->reps[0].m, ds[0], r, ds, &r->err};
    clcnn_status st = run_epoch(&t, o, &done);
    if (batches_done) *batches_done = done;
    return st;
}
