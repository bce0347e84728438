/* Data-parallel training: one model replica per context, each driven by its own thread, the
 * gradients summed on the host and across processes through the embedder's clcnn_comm, and
 * the same optimizer update applied by every replica. */
#include "replicas.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The share of n items that part `i` of `parts` takes: as even as possible, the first n %
 * parts one larger. */
static void split(int n, int parts, int i, int *offset, int *count) {
    int base = n / parts, rem = n % parts;
    *count = base + (i < rem);
    *offset = i * base + (i < rem ? i : rem);
}

/* How many of `parts` take a share of n items: every part when each gets at least `least`,
 * else as many as can (n / least), and at least one however small n is. */
static int takers(int n, int parts, int least) {
    int t = n / least;
    return t < 1 ? 1 : t < parts ? t : parts;
}

/* Samples [*offset, *offset + *count) of a global batch of n for local replica i: split across
 * processes first, then across this process's replicas, no share smaller than `least` (parts
 * left out take none). */
static void share(const clcnn_replicas *r, int n, int least, int i, int *offset, int *count) {
    int p_off = n, p_cnt = 0, local, procs = takers(n, r->size, least);
    if (r->rank < procs) split(n, procs, r->rank, &p_off, &p_cnt);
    int reps = takers(p_cnt, r->n, least);
    if (i < reps)
        split(p_cnt, reps, i, &local, count);
    else
        local = p_cnt, *count = 0;
    *offset = p_off + local;
}

void clcnn_replicas_share(const clcnn_replicas *r, int n, int i, int *offset, int *count) {
    int off = 0, cnt = 0;
    if (r && i >= 0 && i < r->n && n >= 0) share(r, n, r->least, i, &off, &cnt);
    if (offset) *offset = off;
    if (count) *count = cnt;
}

/* ---- the workers --------------------------------------------------------------------------- */

static clcnn_status read_buf(clcnn_model *m, cl_mem buf, size_t floats, float *dst,
                             const char *what) {
    cl_int rc = clEnqueueReadBuffer(m->ctx->queue, buf, CL_TRUE, 0, floats * sizeof(float), dst, 0,
                                    NULL, NULL);
    if (rc == CL_SUCCESS) return CLCNN_SUCCESS;
    return clcnn_fail(&m->err, (clcnn_status)rc, "reading %s failed: %s", what,
                      clcnn_cl_error_name(rc));
}

static clcnn_status write_buf(clcnn_model *m, cl_mem buf, size_t floats, const float *src,
                              const char *what) {
    cl_int rc = clEnqueueWriteBuffer(m->ctx->queue, buf, CL_TRUE, 0, floats * sizeof(float), src, 0,
                                     NULL, NULL);
    if (rc == CL_SUCCESS) return CLCNN_SUCCESS;
    return clcnn_fail(&m->err, (clcnn_status)rc, "writing %s failed: %s", what,
                      clcnn_cl_error_name(rc));
}

/* Forward and backward on this replica's share; its gradients, loss and hits to the host.
 * Replica 0 also reads the running statistics, which every replica takes after the step. */
static clcnn_status job_compute(clcnn_replica *p) {
    clcnn_replicas *g = p->g;
    clcnn_model *m = p->m;
    clcnn_status st;
    p->loss = 0, p->correct = 0;
    if (p->count > 0) {
        m->sample0 = p->offset;
        st = clcnn_stage_batch(m, p->ds, g->first + p->offset, p->count, 1, g->aug);
        if (!st) st = clcnn_model_grad_staged(m, p->count, g->batch_n);
        m->sample0 = 0;
        if (st || g->alone) return st; /* alone: the gradients are the sum, where they are */
        if ((st = read_buf(m, m->g, m->total, p->grad, "the gradients"))) return st;
        if ((st = clcnn_model_read_acc(m, &p->loss, &p->correct))) return st;
    } else {
        m->batches_tracked++; /* a training forward of no samples: the count stays common */
    }
    if (p->index == 0 && g->n_stats)
        return read_buf(m, m->stats, g->n_stats, g->stats, "the running statistics");
    return CLCNN_SUCCESS;
}

/* The summed gradients and the common statistics into this replica, then its update. */
static clcnn_status job_apply(clcnn_replica *p) {
    clcnn_replicas *g = p->g;
    clcnn_model *m = p->m;
    if (g->alone) return clcnn_model_optimizer_step(m);
    clcnn_status st = write_buf(m, m->g, m->total, g->sum, "the summed gradients");
    int source = p->index == 0 && g->rank == 0;
    if (!st && g->n_stats && !source)
        st = write_buf(m, m->stats, g->n_stats, g->stats, "the running statistics");
    if (st) return st;
    m->batches_tracked = g->tracked;
    return clcnn_model_optimizer_step(m);
}

static clcnn_status job_eval(clcnn_replica *p) {
    p->loss = 0, p->correct = 0;
    if (p->count == 0) return CLCNN_SUCCESS;
    return clcnn_evaluate_range(p->m, p->ds, p->offset, p->count, p->g->eval_batch, &p->loss,
                                &p->correct);
}

static void *worker(void *arg) {
    clcnn_replica *p = arg;
    clcnn_replicas *g = p->g;
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&g->mu);
        while (g->generation == seen)
            pthread_cond_wait(&g->go, &g->mu);
        seen = g->generation;
        clcnn_job job = g->job;
        pthread_mutex_unlock(&g->mu);
        if (job == CLCNN_JOB_QUIT) return NULL;
        double t0 = now();
        p->st = job == CLCNN_JOB_COMPUTE ? job_compute(p)
                : job == CLCNN_JOB_APPLY ? job_apply(p)
                                         : job_eval(p);
        p->seconds = now() - t0;
        pthread_mutex_lock(&g->mu);
        if (--g->pending == 0) pthread_cond_signal(&g->done);
        pthread_mutex_unlock(&g->mu);
    }
}

/* Runs `job` on every replica and waits for all; the first failure's message goes to r->err,
 * naming the replica's device. */
static clcnn_status dispatch(clcnn_replicas *r, clcnn_job job) {
    if (r->alone) { /* no thread: the job on the caller's */
        clcnn_replica *p = &r->reps[0];
        double t0 = now();
        p->st = job == CLCNN_JOB_COMPUTE ? job_compute(p)
                : job == CLCNN_JOB_APPLY ? job_apply(p)
                                         : job_eval(p);
        p->seconds = now() - t0;
        if (p->st) return clcnn_fail(&r->err, p->st, "%s", p->m->err.msg);
        return CLCNN_SUCCESS;
    }
    pthread_mutex_lock(&r->mu);
    r->job = job;
    r->pending = r->n;
    r->generation++;
    pthread_cond_broadcast(&r->go);
    while (r->pending > 0)
        pthread_cond_wait(&r->done, &r->mu);
    pthread_mutex_unlock(&r->mu);
    for (int i = 0; i < r->n; i++) {
        const clcnn_replica *p = &r->reps[i];
        if (p->st == CLCNN_SUCCESS) continue;
        if (r->n == 1 && r->size == 1) return clcnn_fail(&r->err, p->st, "%s", p->m->err.msg);
        if (r->size == 1)
            return clcnn_fail(&r->err, p->st, "replica %d (%s): %s", i, p->m->ctx->info.name,
                              p->m->err.msg);
        return clcnn_fail(&r->err, p->st, "process %d, replica %d (%s): %s", r->rank, i,
                          p->m->ctx->info.name, p->m->err.msg);
    }
    return CLCNN_SUCCESS;
}

/* ---- the group ------------------------------------------------------------------------------ */

static clcnn_status comm_fail(clcnn_replicas *r, const char *what) {
    return clcnn_fail(&r->err, CLCNN_ERR_COMM, "the transport's %s failed (process %d of %d)", what,
                      r->rank, r->size);
}

static clcnn_status allreduce_double(clcnn_replicas *r, double *buf, size_t n) {
    if (!r->has_comm || r->size == 1) return CLCNN_SUCCESS;
    if (r->comm.allreduce_double(r->comm.user, buf, n)) return comm_fail(r, "allreduce_double");
    return CLCNN_SUCCESS;
}

static clcnn_status broadcast(clcnn_replicas *r, void *buf, size_t bytes) {
    if (!r->has_comm || r->size == 1 || bytes == 0) return CLCNN_SUCCESS;
    if (r->comm.broadcast(r->comm.user, buf, bytes, 0)) return comm_fail(r, "broadcast");
    return CLCNN_SUCCESS;
}

/* A 64-bit FNV-1a over bytes, chained through h. */
static uint64_t fnv(uint64_t h, const void *data, size_t n) {
    const unsigned char *b = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001B3ull;
    return h;
}

/* What every replica must share: the spec, the input shape, the optimizer and the loss. */
static uint64_t fingerprint(const clcnn_model *m) {
    const clcnn_optimizer_options *o = &m->opt;
    double nums[] = {o->lr,
                     o->momentum,
                     o->dampening,
                     o->weight_decay,
                     o->beta1,
                     o->beta2,
                     o->eps,
                     (double)o->kind,
                     (double)o->nesterov,
                     (double)o->no_decay_bn_bias,
                     m->label_smoothing};
    int shape[3] = {m->in_c, m->in_h, m->in_w};
    uint64_t h = fnv(0xCBF29CE484222325ull, m->spec, strlen(m->spec));
    h = fnv(h, shape, sizeof shape);
    return fnv(h, nums, sizeof nums);
}

/* Checks the models against replica 0's and against rank 0's through the transport. */
static clcnn_status check_same(clcnn_replicas *r) {
    const clcnn_model *m0 = r->reps[0].m;
    for (int i = 1; i < r->n; i++) {
        const clcnn_model *m = r->reps[i].m;
        if (strcmp(m->spec, m0->spec) != 0 || m->in_c != m0->in_c || m->in_h != m0->in_h ||
            m->in_w != m0->in_w)
            return clcnn_fail(&r->err, CLCNN_ERR_INVALID_ARGUMENT,
                              "replica %d's model (%s, %d x %d x %d) differs from replica 0's "
                              "(%s, %d x %d x %d)",
                              i, m->spec, m->in_c, m->in_h, m->in_w, m0->spec, m0->in_c, m0->in_h,
                              m0->in_w);
    }
    uint64_t mine = fingerprint(m0), theirs = mine;
    clcnn_status st = broadcast(r, &theirs, sizeof theirs);
    if (st) return st;
    double differ = mine != theirs;
    if ((st = allreduce_double(r, &differ, 1))) return st;
    if (differ > 0)
        return clcnn_fail(
            &r->err, CLCNN_ERR_COMM,
            "%.0f of %d processes have another model, input shape, optimizer or label "
            "smoothing than process 0",
            differ, r->size);
    return CLCNN_SUCCESS;
}

/* One buffer of replica 0 (of process 0) copied to every replica; n floats of host scratch. */
static clcnn_status copy_buffer(clcnn_replicas *r, size_t which, size_t n, float *host) {
    clcnn_model *m0 = r->reps[0].m;
    cl_mem *b0 = (cl_mem *)((char *)m0 + which);
    clcnn_status st;
    if (n == 0 || !*b0) return CLCNN_SUCCESS;
    if ((st = read_buf(m0, *b0, n, host, "replica 0's state"))) {
        r->err = m0->err;
        return st;
    }
    if ((st = broadcast(r, host, n * sizeof *host))) return st;
    for (int i = r->rank == 0; i < r->n; i++) {
        clcnn_model *m = r->reps[i].m;
        if ((st = write_buf(m, *(cl_mem *)((char *)m + which), n, host, "the replica's state"))) {
            r->err = m->err;
            return st;
        }
    }
    return CLCNN_SUCCESS;
}

/* Every replica takes replica 0's optimizer settings, step count, parameters, optimizer
 * state and running statistics (process 0's, through the transport). */
static clcnn_status sync_state(clcnn_replicas *r) {
    clcnn_model *m0 = r->reps[0].m;
    clcnn_status st;
    double counts[2] = {(double)m0->step, (double)m0->batches_tracked};
    if ((st = broadcast(r, counts, sizeof counts))) return st;
    for (int i = 1; i < r->n; i++) {
        clcnn_model *m = r->reps[i].m;
        if ((st = clcnn_model_set_optimizer(m, &m0->opt))) {
            r->err = m->err;
            return st;
        }
        m->label_smoothing = m0->label_smoothing;
        if ((st = clcnn_model_set_normalize(m, m0->norm, m0->norm ? m0->norm + m0->in_c : NULL))) {
            r->err = m->err;
            return st;
        }
    }
    for (int i = 0; i < r->n; i++) {
        r->reps[i].m->step = (int64_t)counts[0];
        r->reps[i].m->batches_tracked = (int64_t)counts[1];
    }
    size_t n = r->total > r->n_stats ? r->total : r->n_stats;
    float *host = malloc((n ? n : 1) * sizeof *host);
    if (!host) return clcnn_fail(&r->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    st = copy_buffer(r, offsetof(clcnn_model, p), r->total, host);
    if (!st) st = copy_buffer(r, offsetof(clcnn_model, s1), r->total, host);
    if (!st) st = copy_buffer(r, offsetof(clcnn_model, s2), r->total, host);
    if (!st) st = copy_buffer(r, offsetof(clcnn_model, stats), r->n_stats, host);
    free(host);
    return st;
}

static clcnn_status check_args(clcnn_replicas *r, clcnn_model *const *models, int n,
                               const clcnn_comm *comm) {
    if (!models || n < 1)
        return clcnn_fail(&r->err, CLCNN_ERR_INVALID_ARGUMENT, "no models (n = %d)", n);
    for (int i = 0; i < n; i++) {
        if (!models[i] || !models[i]->nodes)
            return clcnn_fail(&r->err, CLCNN_ERR_INVALID_ARGUMENT, "model %d is NULL or failed", i);
        for (int k = 0; k < i; k++)
            if (models[k] == models[i] || models[k]->ctx == models[i]->ctx)
                return clcnn_fail(&r->err, CLCNN_ERR_INVALID_ARGUMENT,
                                  "models %d and %d share a %s: each replica needs its own "
                                  "context",
                                  k, i, models[k] == models[i] ? "model" : "context");
    }
    if (comm && (comm->size < 1 || comm->rank < 0 || comm->rank >= comm->size ||
                 (comm->size > 1 &&
                  (!comm->allreduce_float || !comm->allreduce_double || !comm->broadcast))))
        return clcnn_fail(&r->err, CLCNN_ERR_INVALID_ARGUMENT,
                          "bad transport: rank %d of size %d, or a NULL callback", comm->rank,
                          comm->size);
    return CLCNN_SUCCESS;
}

static clcnn_status start_workers(clcnn_replicas *r) {
    for (int i = 0; i < r->n; i++) {
        clcnn_replica *p = &r->reps[i];
        if (pthread_create(&p->thread, NULL, worker, p) != 0)
            return clcnn_fail(&r->err, CLCNN_ERR_OUT_OF_HOST_MEMORY,
                              "cannot start the thread of replica %d", i);
        p->started = 1;
    }
    return CLCNN_SUCCESS;
}

static clcnn_status make_group(clcnn_replicas *r, clcnn_model *const *models, int n,
                               const clcnn_comm *given) {
    clcnn_status st;
    const clcnn_comm *comm = given ? &r->comm : NULL;
    clcnn_comm_init(&r->comm);
    if (given && (st = clcnn_sized_in(&r->err, "clcnn_comm", &r->comm, given, sizeof r->comm)))
        return st;
    if ((st = check_args(r, models, n, comm))) return st;
    r->has_comm = comm != NULL;
    r->rank = comm ? comm->rank : 0;
    r->size = comm ? comm->size : 1;
    r->total = models[0]->total;
    r->n_stats = models[0]->n_stats;
    r->least = clcnn_model_train_min(models[0], NULL);
    if (!(r->reps = calloc((size_t)n, sizeof *r->reps)) ||
        !(r->sum = malloc((r->total + 1) * sizeof *r->sum)) ||
        !(r->stats = malloc((r->n_stats + 1) * sizeof *r->stats)))
        return clcnn_fail(&r->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    r->n = n;
    for (int i = 0; i < n; i++) {
        clcnn_replica *p = &r->reps[i];
        p->g = r, p->m = models[i], p->index = i;
        if (!(p->grad = malloc((r->total + 1) * sizeof *p->grad)))
            return clcnn_fail(&r->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    }
    if ((st = check_same(r)) || (st = sync_state(r))) return st;
    double global = n;
    if ((st = allreduce_double(r, &global, 1))) return st;
    r->global_n = (int)global;
    if (pthread_mutex_init(&r->mu, NULL) || pthread_cond_init(&r->go, NULL) ||
        pthread_cond_init(&r->done, NULL))
        return clcnn_fail(&r->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "cannot make a lock");
    r->sync_made = 1;
    return start_workers(r);
}

clcnn_status clcnn_replicas_create(clcnn_replicas **out, clcnn_model *const *models, int n,
                                   const clcnn_comm *comm) {
    clcnn_replicas *r;
    if (!out) return CLCNN_ERR_INVALID_ARGUMENT;
    *out = r = calloc(1, sizeof *r);
    if (!r) return CLCNN_ERR_OUT_OF_HOST_MEMORY;
    return make_group(r, models, n, comm);
}

void clcnn_replicas_of_one(clcnn_replicas *r, clcnn_model *m) {
    memset(r, 0, sizeof *r);
    r->n = r->global_n = 1, r->size = 1, r->alone = 1;
    r->reps = &r->one;
    r->one.g = r, r->one.m = m;
    r->total = m->total, r->n_stats = m->n_stats;
    r->least = clcnn_model_train_min(m, NULL);
}

void clcnn_comm_init(clcnn_comm *comm) {
    if (!comm) return;
    memset(comm, 0, sizeof *comm);
    comm->struct_size = sizeof *comm;
}

void clcnn_replicas_free(clcnn_replicas *r) {
    if (!r) return;
    if (r->sync_made) {
        pthread_mutex_lock(&r->mu);
        r->job = CLCNN_JOB_QUIT;
        r->generation++;
        pthread_cond_broadcast(&r->go);
        pthread_mutex_unlock(&r->mu);
        for (int i = 0; i < r->n; i++)
            if (r->reps[i].started) pthread_join(r->reps[i].thread, NULL);
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->go);
        pthread_cond_destroy(&r->done);
    }
    for (int i = 0; r->reps && i < r->n; i++)
        free(r->reps[i].grad);
    free(r->reps);
    free(r->sum);
    free(r->stats);
    free(r);
}

const char *clcnn_replicas_errmsg(const clcnn_replicas *r) {
    return r ? r->err.msg : "NULL replicas";
}

clcnn_status clcnn_replicas_errcode(const clcnn_replicas *r) {
    return r ? r->err.code : CLCNN_ERR_INVALID_ARGUMENT;
}

int clcnn_replicas_local_count(const clcnn_replicas *r) {
    return r ? r->n : 0;
}

int clcnn_replicas_global_count(const clcnn_replicas *r) {
    return r ? r->global_n : 0;
}

/* ---- a step --------------------------------------------------------------------------------- */

/* Checks a step's or an evaluation's data sets and hands them to the replicas. */
static clcnn_status take_sets(clcnn_replicas *r, clcnn_dataset *const *ds) {
    if (!ds) return clcnn_fail(&r->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL data sets");
    for (int i = 0; i < r->n; i++) {
        if (!ds[i] || (ds[i]->ctx != r->reps[i].m->ctx && !r->alone)) /* alone: staging says */
            return clcnn_fail(&r->err, CLCNN_ERR_INVALID_ARGUMENT,
                              "data set %d is NULL or not on replica %d's context", i, i);
        if (ds[i]->n != ds[0]->n)
            return clcnn_fail(&r->err, CLCNN_ERR_INVALID_ARGUMENT,
                              "data set %d has %d samples, data set 0 %d", i, ds[i]->n, ds[0]->n);
        r->reps[i].ds = ds[i];
    }
    return CLCNN_SUCCESS;
}

/* After a job on every replica: agrees with the other processes on whether every replica
 * succeeded and returns a failure anywhere as this process's error (its own, or
 * CLCNN_ERR_PEER). With loss and hits: also sums the replicas' losses and hits. */
static clcnn_status agree(clcnn_replicas *r, clcnn_status local, double *loss, double *hits) {
    double v[3] = {local != CLCNN_SUCCESS, 0, 0};
    for (int i = 0; i < r->n && !local && loss; i++)
        v[1] += r->reps[i].loss, v[2] += r->reps[i].correct;
    clcnn_status st = allreduce_double(r, v, loss ? 3 : 1);
    if (local) return local;
    if (st) return st;
    if (v[0] > 0)
        return clcnn_fail(&r->err, CLCNN_ERR_PEER,
                          "%.0f other process(es) of the group failed; stopping with them", v[0]);
    if (loss) *loss = v[1], *hits = v[2];
    return CLCNN_SUCCESS;
}

/* The gradients of every local replica, summed in replica order, then over the processes; the
 * running statistics of process 0's replica 0. */
static clcnn_status reduce(clcnn_replicas *r) {
    clcnn_status st;
    if (r->alone) return CLCNN_SUCCESS;
    memset(r->sum, 0, r->total * sizeof *r->sum);
    for (int i = 0; i < r->n; i++) {
        const clcnn_replica *p = &r->reps[i];
        if (p->count == 0) continue;
        for (size_t k = 0; k < r->total; k++)
            r->sum[k] += p->grad[k];
    }
    if (r->has_comm && r->size > 1 && r->comm.allreduce_float(r->comm.user, r->sum, r->total))
        return comm_fail(r, "allreduce_float");
    r->tracked = r->reps[0].m->batches_tracked;
    if (r->n_stats == 0) return CLCNN_SUCCESS;
    double tracked = (double)r->tracked;
    if ((st = broadcast(r, r->stats, r->n_stats * sizeof *r->stats))) return st;
    if ((st = broadcast(r, &tracked, sizeof tracked))) return st;
    r->tracked = (int64_t)tracked;
    return CLCNN_SUCCESS;
}

/* Adds the compute phase's figures: the slowest replica, and how long the others idled. */
static void time_compute(clcnn_replicas *r) {
    double slowest = 0, sum = 0;
    for (int i = 0; i < r->n; i++) {
        double s = r->reps[i].seconds;
        slowest = s > slowest ? s : slowest;
        sum += s;
    }
    r->t_compute += slowest;
    r->t_wait += slowest * r->n - sum;
}

clcnn_status clcnn_replicas_step(clcnn_replicas *r, clcnn_dataset *const *ds, int first, int n,
                                 clcnn_augment aug) {
    clcnn_status st;
    double loss = 0, hits = 0;
    r->have_loss = 0;
    if ((st = take_sets(r, ds))) return st;
    if (n <= 0 || first < 0 || first > ds[0]->n - n)
        return clcnn_fail(&r->err, CLCNN_ERR_INVALID_ARGUMENT,
                          "samples %d..%d are outside the data set of %d", first, first + n - 1,
                          ds[0]->n);
    if (n < r->least) {
        char what[80];
        clcnn_model_train_min_name(r->reps[0].m, what, sizeof what);
        return clcnn_fail(&r->err, CLCNN_ERR_INVALID_ARGUMENT,
                          "a batch of %d: %s needs at least %d samples to train (more than 1 "
                          "value per channel)",
                          n, what, r->least);
    }
    r->first = first, r->batch_n = n, r->aug = aug;
    for (int i = 0; i < r->n; i++) {
        clcnn_replica *p = &r->reps[i];
        share(r, n, r->least, i, &p->offset, &p->count);
    }
    st = dispatch(r, CLCNN_JOB_COMPUTE);
    time_compute(r);
    double t0 = now();
    if ((st = agree(r, st, &loss, &hits)) || (st = reduce(r))) return st;
    /* A failed update ends the step everywhere too: no process may wait for this one. */
    st = dispatch(r, CLCNN_JOB_APPLY);
    if ((st = agree(r, st, NULL, NULL))) return st;
    r->t_reduce += now() - t0;
    r->steps++;
    r->last_loss = (float)loss, r->last_correct = (int)hits, r->have_loss = 1;
    r->loss_on_device = r->alone;
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_replicas_train_dataset(clcnn_replicas *r, clcnn_dataset *const *ds, int first,
                                          int n) {
    if (!r) return CLCNN_ERR_INVALID_ARGUMENT;
    clcnn_augment none = {0, 0, 0};
    return clcnn_replicas_step(r, ds, first, n, none);
}

clcnn_status clcnn_replicas_last_loss(clcnn_replicas *r, float *loss, int *correct) {
    if (!r) return CLCNN_ERR_INVALID_ARGUMENT;
    if (!r->have_loss) return clcnn_fail(&r->err, CLCNN_ERR_STATE, "no step has run yet");
    if (r->loss_on_device) {
        clcnn_model *m = r->reps[0].m;
        clcnn_status st = clcnn_model_last_loss(m, &r->last_loss, &r->last_correct);
        if (st) return clcnn_fail(&r->err, st, "%s", m->err.msg);
        r->loss_on_device = 0;
    }
    if (loss) *loss = r->last_loss;
    if (correct) *correct = r->last_correct;
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_replicas_evaluate(clcnn_replicas *r, clcnn_dataset *const *ds, int batch_size,
                                     double *mean_loss, int *correct) {
    clcnn_status st;
    double loss = 0, hits = 0;
    if (!r) return CLCNN_ERR_INVALID_ARGUMENT;
    if (batch_size <= 0)
        return clcnn_fail(&r->err, CLCNN_ERR_INVALID_ARGUMENT, "batch size %d", batch_size);
    if ((st = take_sets(r, ds))) return st;
    r->eval_batch = batch_size;
    for (int i = 0; i < r->n; i++) {
        clcnn_replica *p = &r->reps[i];
        share(r, ds[0]->n, 1, i, &p->offset, &p->count); /* a range of the whole test set */
    }
    st = dispatch(r, CLCNN_JOB_EVAL);
    if ((st = agree(r, st, &loss, &hits))) return st;
    if (mean_loss) *mean_loss = loss / ds[0]->n;
    if (correct) *correct = (int)hits;
    return CLCNN_SUCCESS;
}

void clcnn_replicas_timing(const clcnn_replicas *r, double *compute, double *wait, double *reduce,
                           int64_t *steps) {
    if (compute) *compute = r ? r->t_compute : 0;
    if (wait) *wait = r ? r->t_wait : 0;
    if (reduce) *reduce = r ? r->t_reduce : 0;
    if (steps) *steps = r ? r->steps : 0;
}
