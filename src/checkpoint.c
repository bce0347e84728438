/* Checkpoints: the weights as a PyTorch-loadable safetensors state_dict, the optimizer state in
 * a sibling file. Each file carries an XXH64 of everything in it (tensors and metadata), and
 * both carry an XXH64 of the weights, which binds the pair together. Loading reads and checks
 * both files completely before the model changes. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "files.h"
#include "model.h"
#include "safetensors.h"

/* /2 added the content checksum (every tensor and all metadata) and the batch size. /1 files
 * are refused by a resume, whose state /1 could not protect; --init still takes their weights. */
static const char *ckpt_format = "clcnn-checkpoint/2";
static const char *ckpt_format_v1 = "clcnn-checkpoint/1";
#define CONTENT_KEY "content_xxh64"
#define META_MAX 24 /* metadata pairs in either file, the content checksum included */

/* The state file's name of each optimizer, indexed by clcnn_optimizer_kind (which
 * clcnn_optimizer_check keeps in range). */
static const char *const optimizer_names[] = {"sgd", "adam", "adamw"};

/* A 64-bit checksum as the metadata holds it: 16 hex digits. out holds 17 bytes. */
static void hex64(char *out, uint64_t h) {
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

/* "dir/epoch_1.safetensors" -> "dir/epoch_1.state.safetensors" */
static void state_path(const char *path, char *out, size_t size) {
    size_t n = strlen(path), ext = strlen(".safetensors");
    if (n > ext && strcmp(path + n - ext, ".safetensors") == 0)
        snprintf(out, size, "%.*s.state.safetensors", (int)(n - ext), path);
    else
        snprintf(out, size, "%s.state", path);
}

/* The largest file a load reads for this model: a header as large as safetensors allows, and
 * 16 bytes per parameter (the weights in F64, and as much again of other tensors). */
static size_t max_file_bytes(const clcnn_model *m) {
    return (size_t)CLCNN_ST_MAX_HEADER + 16 * (m->total + m->n_stats);
}

/* Longest tensor name in a state file: "s1." and a parameter's name. */
#define CKPT_NAME_MAX (CLCNN_PARAM_NAME_MAX + 16)

/* A model's state_dict on the host: the trained parameters (or an optimizer state laid out as
 * them), the running statistics and num_batches_tracked. */
typedef struct host_dict {
    float *w;
    float *stats; /* NULL when the model has none */
    int64_t count;
} host_dict;

/* Reads the running statistics into d->stats (none: NULL) and the counter. */
static clcnn_status read_stats(clcnn_model *m, host_dict *d) {
    d->count = m->batches_tracked;
    d->stats = NULL;
    if (m->n_stats == 0) return CLCNN_SUCCESS;
    if (!(d->stats = malloc(m->n_stats * sizeof *d->stats)))
        return clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    cl_int rc = clEnqueueReadBuffer(m->ctx->queue, m->stats, CL_TRUE, 0,
                                    m->n_stats * sizeof *d->stats, d->stats, 0, NULL, NULL);
    if (rc != CL_SUCCESS)
        return clcnn_fail(&m->err, (clcnn_status)rc, "reading statistics failed: %s",
                          clcnn_cl_error_name(rc));
    return CLCNN_SUCCESS;
}

/* The model takes d's statistics and counter (after its parameters were swapped in). */
static clcnn_status write_stats(clcnn_model *m, const host_dict *d) {
    m->batches_tracked = d->count;
    if (m->n_stats == 0) return CLCNN_SUCCESS;
    cl_int rc = clEnqueueWriteBuffer(m->ctx->queue, m->stats, CL_TRUE, 0,
                                     m->n_stats * sizeof *d->stats, d->stats, 0, NULL, NULL);
    if (rc != CL_SUCCESS)
        return clcnn_fail(&m->err, (clcnn_status)rc, "writing statistics failed: %s",
                          clcnn_cl_error_name(rc));
    return CLCNN_SUCCESS;
}

/* Reads a whole device buffer of `total` floats. */
static clcnn_status read_all(clcnn_model *m, cl_mem buf, float **out) {
    float *h = malloc(m->total * sizeof *h + 4);
    if (!h) return clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    cl_int rc =
        clEnqueueReadBuffer(m->ctx->queue, buf, CL_TRUE, 0, m->total * sizeof *h, h, 0, NULL, NULL);
    if (rc != CL_SUCCESS) {
        free(h);
        return clcnn_fail(&m->err, (clcnn_status)rc, "reading parameters failed: %s",
                          clcnn_cl_error_name(rc));
    }
    *out = h;
    return CLCNN_SUCCESS;
}

/* A new device buffer holding `total` floats from h (the commit of a load). */
static clcnn_status upload_new(clcnn_model *m, cl_mem *out, const float *h, const char *what) {
    clcnn_status st = clcnn_model_alloc(m, out, m->total * sizeof *h, what);
    if (st) return st;
    cl_int rc = clEnqueueWriteBuffer(m->ctx->queue, *out, CL_TRUE, 0, m->total * sizeof *h, h, 0,
                                     NULL, NULL);
    if (rc != CL_SUCCESS) {
        clReleaseMemObject(*out);
        *out = NULL;
        return clcnn_fail(&m->err, (clcnn_status)rc, "writing %s failed: %s", what,
                          clcnn_cl_error_name(rc));
    }
    return CLCNN_SUCCESS;
}

/* The entry of p in d (an I64 scalar for the counter, F32 otherwise). */
static void entry_for(const clcnn_param *p, const char *name, const host_dict *d,
                      clcnn_st_entry *e) {
    memset(e, 0, sizeof *e);
    e->name = name;
    e->dtype = p->kind == CLCNN_PARAM_COUNTER ? CLCNN_ST_I64 : CLCNN_ST_F32;
    e->ndim = p->ndim;
    for (int k = 0; k < p->ndim; k++)
        e->shape[k] = p->shape[k];
    if (p->kind == CLCNN_PARAM_COUNTER)
        e->data = &d->count;
    else
        e->data = (p->kind == CLCNN_PARAM_STAT ? d->stats : d->w) + p->off;
}

/* ---- the content checksum ------------------------------------------------------------------ */

/* One tensor as the checksum sees it; the same whether it is about to be written or was read. */
typedef struct hashed {
    const char *name, *dtype;
    int ndim;
    const int64_t *shape;
    const void *data;
    size_t bytes;
} hashed;

static int cmp_hashed(const void *a, const void *b) {
    return strcmp(((const hashed *)a)->name, ((const hashed *)b)->name);
}

static int cmp_pair(const void *a, const void *b) {
    return strcmp(((const char *const *)a)[0], ((const char *const *)b)[0]);
}

static void hash_str(XXH64_state_t *s, const char *v) {
    XXH64_update(s, v, strlen(v) + 1); /* the NUL separates fields */
}

/* XXH64 of every tensor (name, dtype, shape, bytes) and every metadata pair but the checksum's
 * own, each in name order, so that the file's layout and key order do not matter but any
 * change of content does. t and meta (n_meta key/value pairs) are sorted in place. Returns 0
 * and leaves *out alone when out of memory. */
static int content_hash(hashed *t, int nt, const char **meta, int n_meta, uint64_t *out) {
    char num[32];
    XXH64_state_t *s = XXH64_createState();
    if (!s) return 0;
    qsort(t, (size_t)nt, sizeof *t, cmp_hashed);
    qsort(meta, (size_t)n_meta, 2 * sizeof *meta, cmp_pair);
    XXH64_reset(s, 0);
    hash_str(s, "clcnn-content/1");
    for (int i = 0; i < n_meta; i++) {
        if (!strcmp(meta[2 * i], CONTENT_KEY)) continue;
        hash_str(s, meta[2 * i]);
        hash_str(s, meta[2 * i + 1]);
    }
    snprintf(num, sizeof num, "%d tensors", nt);
    hash_str(s, num);
    for (int i = 0; i < nt; i++) {
        hash_str(s, t[i].name);
        hash_str(s, t[i].dtype);
        for (int d = 0; d < t[i].ndim; d++) {
            snprintf(num, sizeof num, "%" PRId64 ",", t[i].shape[d]);
            XXH64_update(s, num, strlen(num));
        }
        snprintf(num, sizeof num, "%zu", t[i].bytes);
        hash_str(s, num);
        if (t[i].bytes) XXH64_update(s, t[i].data, t[i].bytes);
    }
    *out = XXH64_digest(s);
    XXH64_freeState(s);
    return 1;
}

/* Appends the content checksum of entries and meta (n_meta pairs, room for one more) to meta.
 * Returns the new pair count, or -1 when out of memory. hex holds 17 bytes. */
static int add_checksum(const clcnn_st_entry *ents, int n, const char **meta, int n_meta,
                        char *hex) {
    hashed *t = calloc((size_t)n + 1, sizeof *t);
    const char *pairs[2 * META_MAX];
    uint64_t h = 0;
    if (!t || n_meta >= META_MAX) {
        free(t);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        size_t numel = 1;
        for (int d = 0; d < ents[i].ndim; d++)
            numel *= (size_t)ents[i].shape[d];
        t[i] = (hashed){ents[i].name, clcnn_st_dtype_name(ents[i].dtype),
                        ents[i].ndim, ents[i].shape,
                        ents[i].data, numel * clcnn_st_dtype_size(ents[i].dtype)};
    }
    memcpy(pairs, meta, 2 * (size_t)n_meta * sizeof *meta);
    int ok = content_hash(t, n, pairs, n_meta, &h);
    free(t);
    if (!ok) return -1;
    hex64(hex, h);
    meta[2 * n_meta] = CONTENT_KEY;
    meta[2 * n_meta + 1] = hex;
    return n_meta + 1;
}

/* Whether the file's content matches its recorded checksum; a clcnn /2 file without one is as
 * damaged as one whose checksum differs. */
static clcnn_status verify_content(clcnn_model *m, const clcnn_st_file *f, const char *path) {
    const char *want = clcnn_st_meta(f, CONTENT_KEY);
    hashed *t = calloc((size_t)f->ntensors + 1, sizeof *t);
    const char **pairs = calloc(2 * (size_t)f->nmeta + 2, sizeof *pairs);
    char hex[24];
    uint64_t h = 0;
    int ok = t && pairs;
    for (int i = 0; ok && i < f->ntensors; i++) {
        const clcnn_st_tensor *x = &f->tensors[i];
        t[i] = (hashed){x->name,  clcnn_st_dtype_name(x->dtype), x->ndim,
                        x->shape, clcnn_st_data(f, x),           x->end - x->begin};
    }
    for (int i = 0; ok && i < f->nmeta; i++)
        pairs[2 * i] = f->meta_keys[i], pairs[2 * i + 1] = f->meta_values[i];
    ok = ok && content_hash(t, f->ntensors, pairs, f->nmeta, &h);
    free(t);
    free(pairs);
    if (!ok) return clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    hex64(hex, h);
    if (!want || strcmp(want, hex) != 0)
        return clcnn_fail(&m->err, CLCNN_ERR_FORMAT,
                          "%s: the file does not match its recorded checksum (file damaged or "
                          "edited)",
                          path);
    return CLCNN_SUCCESS;
}

/* ---- saving -------------------------------------------------------------------------------- */

/* Removes temporary checkpoint files that crashed runs left in path's folder. */
static void sweep_folder(const char *path) {
    char dir[4200];
    const char *slash = strrchr(path, '/');
    if (!slash) {
        clcnn_tmp_sweep(".", ".safetensors");
        return;
    }
    snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    clcnn_tmp_sweep(dir, ".safetensors");
}

/* The metadata values of one save, as text. %.17g round-trips a double exactly, so a resumed
 * run uses the same hyperparameters. */
typedef struct ckpt_text {
    char hash[24], epoch[24], step[24], bie[24], bs[24], seed[24], input[48], ostep[24];
    char lr[32], mom[32], damp[32], nest[8], wd[32], b1[32], b2[32], eps[32], nodecay[8];
    char slr[32], total[24], pct[32], ls[32], crop[16], flip[8], mseed[24], norm[128];
    const char *kind, *schedule;
} ckpt_text;

static void format_text(const clcnn_model *m, const clcnn_checkpoint_info_v2 *info, const float *w,
                        ckpt_text *t) {
    hex64(t->hash, XXH64(w, m->total * sizeof *w, 0));
    snprintf(t->epoch, sizeof t->epoch, "%" PRId64, info->epoch);
    snprintf(t->step, sizeof t->step, "%" PRId64, info->step);
    snprintf(t->bie, sizeof t->bie, "%" PRId64, info->batch_in_epoch);
    snprintf(t->bs, sizeof t->bs, "%" PRId64, info->batch_size);
    snprintf(t->seed, sizeof t->seed, "%" PRIu64, info->seed);
    snprintf(t->input, sizeof t->input, "%dx%dx%d", m->in_c, m->in_h, m->in_w);
    snprintf(t->ostep, sizeof t->ostep, "%" PRId64, m->step);
    snprintf(t->lr, sizeof t->lr, "%.17g", m->opt.lr);
    snprintf(t->mom, sizeof t->mom, "%.17g", m->opt.momentum);
    snprintf(t->damp, sizeof t->damp, "%.17g", m->opt.dampening);
    snprintf(t->nest, sizeof t->nest, "%d", m->opt.nesterov);
    snprintf(t->wd, sizeof t->wd, "%.17g", m->opt.weight_decay);
    snprintf(t->b1, sizeof t->b1, "%.17g", m->opt.beta1);
    snprintf(t->b2, sizeof t->b2, "%.17g", m->opt.beta2);
    snprintf(t->eps, sizeof t->eps, "%.17g", m->opt.eps);
    snprintf(t->nodecay, sizeof t->nodecay, "%d", m->opt.no_decay_bn_bias);
    t->kind = optimizer_names[m->opt.kind];
    t->schedule = clcnn_schedule_name(info->schedule);
    snprintf(t->slr, sizeof t->slr, "%.17g", info->schedule_lr);
    snprintf(t->total, sizeof t->total, "%" PRId64, info->total_steps);
    snprintf(t->pct, sizeof t->pct, "%.17g", info->pct_start);
    snprintf(t->ls, sizeof t->ls, "%.17g", info->label_smoothing);
    snprintf(t->crop, sizeof t->crop, "%d", info->random_crop);
    snprintf(t->flip, sizeof t->flip, "%d", info->hflip);
    snprintf(t->mseed, sizeof t->mseed, "%" PRIu64, m->seed);
    snprintf(t->norm, sizeof t->norm, "%s", info->normalize);
}

/* Writes the optimizer-state file (the s1./s2. tensors present and the optimizer settings)
 * under a temporary name beside spath, into *tmp. ents and names have room for two entries a
 * parameter. */
static clcnn_status write_state_tmp(clcnn_model *m, const char *spath, const float *s1,
                                    const float *s2, const ckpt_text *t, clcnn_st_entry *ents,
                                    char (*names)[CKPT_NAME_MAX], clcnn_tmpfile *tmp) {
    char hex[24];
    int n = 0;
    host_dict d1 = {(float *)s1, NULL, 0}, d2 = {(float *)s2, NULL, 0};
    for (int i = 0; i < m->n_params; i++) {
        if (!clcnn_param_trained(m->params[i].kind)) continue;
        if (s1) {
            snprintf(names[n], sizeof names[n], "s1.%s", m->params[i].name);
            entry_for(&m->params[i], names[n], &d1, &ents[n]), n++;
        }
        if (s2) {
            snprintf(names[n], sizeof names[n], "s2.%s", m->params[i].name);
            entry_for(&m->params[i], names[n], &d2, &ents[n]), n++;
        }
    }
    /* clang-format off */
    const char *meta[2 * META_MAX] = {
        "format",         ckpt_format,
        "weights_xxh64",  t->hash,
        "optimizer",      t->kind,
        "optimizer_step", t->ostep,
        "lr",             t->lr,
        "momentum",       t->mom,
        "dampening",      t->damp,
        "nesterov",       t->nest,
        "weight_decay",   t->wd,
        "beta1",          t->b1,
        "beta2",          t->b2,
        "eps",            t->eps,
        "no_decay_bn_bias", t->nodecay,
        "epoch",          t->epoch,
        "step",           t->step};
    /* clang-format on */
    int nm = add_checksum(ents, n, meta, 15, hex);
    if (nm < 0) return clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    return clcnn_st_write_tmp(spath, ents, n, meta, nm, tmp, &m->err);
}

/* Writes the weights file (every parameter from w, the model and the position in the run)
 * under a temporary name beside path, into *tmp. ents has room for one entry a parameter. */
static clcnn_status write_weights_tmp(clcnn_model *m, const char *path, const host_dict *w,
                                      const ckpt_text *t, clcnn_st_entry *ents,
                                      clcnn_tmpfile *tmp) {
    char hex[24];
    for (int i = 0; i < m->n_params; i++)
        entry_for(&m->params[i], m->params[i].name, w, &ents[i]);
    /* clang-format off */
    const char *meta[2 * META_MAX] = {
        "format",         ckpt_format,
        "spec",           m->spec,
        "input",          t->input,
        "epoch",          t->epoch,
        "step",           t->step,
        "batch_in_epoch", t->bie,
        "batch_size",     t->bs,
        "seed",           t->seed,
        "weights_xxh64",  t->hash,
        "clcnn_version",  clcnn_version(),
        "schedule",       t->schedule,
        "schedule_lr",    t->slr,
        "total_steps",    t->total,
        "pct_start",      t->pct,
        "label_smoothing", t->ls,
        "random_crop",    t->crop,
        "hflip",          t->flip,
        "model_seed",     t->mseed,
        "normalize",      t->norm};
    /* clang-format on */
    int nm = add_checksum(ents, m->n_params, meta, 19, hex);
    if (nm < 0) return clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    return clcnn_st_write_tmp(path, ents, m->n_params, meta, nm, tmp, &m->err);
}

clcnn_status clcnn_model_save_checkpoint_v2(clcnn_model *m, const char *path,
                                            const clcnn_checkpoint_info_v2 *info) {
    clcnn_status st;
    float *w = NULL, *s1 = NULL, *s2 = NULL;
    host_dict wd = {NULL, NULL, 0};
    clcnn_st_entry *ents = NULL;
    char(*names)[CKPT_NAME_MAX] = NULL;
    clcnn_tmpfile stmp = {NULL, -1}, wtmp = {NULL, -1};
    char spath[4200];
    ckpt_text t;
    if (!m) return CLCNN_ERR_INVALID_ARGUMENT;
    if (!path || !info) return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL argument");
    if (info->epoch < 0 || info->step < 0 || info->batch_in_epoch < 0 || info->batch_size < 0)
        return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "negative checkpoint position");
    sweep_folder(path);
    if ((st = read_all(m, m->p, &w))) goto done;
    wd.w = w;
    if ((st = read_stats(m, &wd))) goto done;
    if (m->s1 && (st = read_all(m, m->s1, &s1))) goto done;
    if (m->s2 && (st = read_all(m, m->s2, &s2))) goto done;
    ents = calloc((size_t)m->n_params * 2 + 1, sizeof *ents);
    names = calloc((size_t)m->n_params * 2 + 1, sizeof *names);
    if (!ents || !names) {
        st = clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
        goto done;
    }
    format_text(m, info, w, &t);
    /* Both files are written and fsync'd under temporary names before either replaces its
     * predecessor, so a failed write (disk full) leaves an existing pair at these paths whole
     * and loadable. Then the state is renamed first: a crash between the two renames leaves an
     * old weights file whose hash no longer matches, which a resume refuses, never a silent
     * mix. */
    state_path(path, spath, sizeof spath);
    if ((st = write_state_tmp(m, spath, s1, s2, &t, ents, names, &stmp))) goto done;
    if ((st = write_weights_tmp(m, path, &wd, &t, ents, &wtmp))) goto done;
    if ((st = clcnn_st_commit(&stmp, spath, &m->err))) goto done;
    st = clcnn_st_commit(&wtmp, path, &m->err);
done:
    clcnn_tmp_discard(&stmp);
    clcnn_tmp_discard(&wtmp);
    free(w);
    free(wd.stats);
    free(s1);
    free(s2);
    free(ents);
    free(names);
    return st;
}

clcnn_status clcnn_model_save_checkpoint(clcnn_model *m, const char *path,
                                         const clcnn_checkpoint_info *info) {
    if (!m) return CLCNN_ERR_INVALID_ARGUMENT;
    if (!info) return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL argument");
    clcnn_checkpoint_info_v2 v2 = {.epoch = info->epoch,
                                   .step = info->step,
                                   .batch_in_epoch = info->batch_in_epoch,
                                   .seed = info->seed};
    return clcnn_model_save_checkpoint_v2(m, path, &v2);
}

/* ---- loading ------------------------------------------------------------------------------- */

static void fmt_shape(char *buf, size_t size, const int64_t *shape, int ndim) {
    size_t u = 0;
    buf[0] = '\0';
    for (int d = 0; d < ndim && u < size; d++)
        u += (size_t)snprintf(buf + u, size - u, "%s%lld", d ? ", " : "", (long long)shape[d]);
}

/* Takes tensor t (shape equal to p's) into d: F32 or F64 into d->w or d->stats at p->off, an
 * integer scalar into the counter (as PyTorch saves num_batches_tracked). */
static clcnn_status take_tensor(clcnn_model *m, const clcnn_st_file *f, const clcnn_st_tensor *t,
                                const clcnn_param *p, const char *path, host_dict *d) {
    char name[CLCNN_SHOWN_MAX + 4];
    float *dst = p->kind == CLCNN_PARAM_STAT ? d->stats : d->w;
    int same = t->ndim == p->ndim;
    for (int k = 0; same && k < p->ndim; k++)
        same = t->shape[k] == p->shape[k];
    if (!same) {
        char got[128], want[128];
        fmt_shape(got, sizeof got, t->shape, t->ndim);
        fmt_shape(want, sizeof want, p->shape, p->ndim);
        return clcnn_fail(&m->err, CLCNN_ERR_FORMAT,
                          "%s: tensor '%s' has shape [%s] but the model's %s is [%s]", path,
                          clcnn_shown(t->name, CLCNN_SHOWN_MAX, name), got, p->name, want);
    }
    const unsigned char *src = clcnn_st_data(f, t);
    if (p->kind == CLCNN_PARAM_COUNTER) {
        if (t->dtype != CLCNN_ST_I64)
            return clcnn_fail(&m->err, CLCNN_ERR_FORMAT,
                              "%s: tensor '%s' is %s; clcnn loads it "
                              "as I64",
                              path, clcnn_shown(t->name, CLCNN_SHOWN_MAX, name),
                              clcnn_st_dtype_name(t->dtype));
        memcpy(&d->count, src, 8);
        if (d->count < 0)
            return clcnn_fail(&m->err, CLCNN_ERR_FORMAT, "%s: tensor '%s' is negative", path,
                              clcnn_shown(t->name, CLCNN_SHOWN_MAX, name));
    } else if (t->dtype == CLCNN_ST_F32) {
        memcpy(dst + p->off, src, p->numel * sizeof(float));
    } else if (t->dtype == CLCNN_ST_F64) {
        for (size_t j = 0; j < p->numel; j++) {
            double v;
            memcpy(&v, src + j * 8, 8);
            dst[p->off + j] = (float)v;
        }
    } else {
        return clcnn_fail(
            &m->err, CLCNN_ERR_FORMAT, "%s: tensor '%s' is %s; clcnn loads F32 or F64 weights",
            path, clcnn_shown(t->name, CLCNN_SHOWN_MAX, name), clcnn_st_dtype_name(t->dtype));
    }
    return CLCNN_SUCCESS;
}

/* Whether every entry of the model is in f under prefix (the first l bytes of pre). */
static int holds_model(const clcnn_model *m, const clcnn_st_file *f, const char *pre, size_t l) {
    char key[400];
    for (int i = 0; i < m->n_params; i++) {
        snprintf(key, sizeof key, "%.*s%s", (int)l, pre, m->params[i].name);
        if (!clcnn_st_find(f, key)) return 0;
    }
    return 1;
}

/* Finds the key prefix under which the model's entries appear ("" or "model1."): among the
 * prefixes of the tensors named '<prefix><first entry's name>', the one under which every
 * entry of the model is found (nested names such as "4.0.weight" also end in ".0.weight").
 * When none holds them all, the first candidate, so that the load names what is missing. */
static clcnn_status find_prefix(clcnn_model *m, const clcnn_st_file *f, const char *path,
                                char *prefix, size_t size) {
    const char *first = m->params[0].name;
    size_t fl = strlen(first);
    int found = 0, candidates = 0;
    char shown[CLCNN_SHOWN_MAX + 4];
    if (clcnn_st_find(f, first)) {
        prefix[0] = '\0';
        return CLCNN_SUCCESS;
    }
    for (int i = 0; i < f->ntensors; i++) {
        const char *nm = f->tensors[i].name;
        size_t l = strlen(nm);
        if (l <= fl || nm[l - fl - 1] != '.' || strcmp(nm + l - fl, first) != 0) continue;
        if (!found && !candidates++) snprintf(prefix, size, "%.*s", (int)(l - fl), nm);
        if (holds_model(m, f, nm, l - fl)) {
            if (found++)
                return clcnn_fail(&m->err, CLCNN_ERR_FORMAT,
                                  "%s: the model's tensors appear under several prefixes (%s, "
                                  "...): cannot tell which one holds the model",
                                  path, clcnn_shown(nm, CLCNN_SHOWN_MAX, shown));
            snprintf(prefix, size, "%.*s", (int)(l - fl), nm);
        }
    }
    if (!found && !candidates)
        return clcnn_fail(&m->err, CLCNN_ERR_FORMAT,
                          "%s: no tensor '%s' (or '<prefix>.%s'): it does not hold this model's "
                          "weights",
                          path, first, first);
    return CLCNN_SUCCESS;
}

static clcnn_status load_weights_from(clcnn_model *m, const clcnn_st_file *f, const char *path,
                                      host_dict *w) {
    char prefix[256], key[400], shown[CLCNN_SHOWN_MAX + 4];
    clcnn_status st;
    if ((st = find_prefix(m, f, path, prefix, sizeof prefix))) return st;
    size_t pl = strlen(prefix);
    for (int i = 0; i < m->n_params; i++) {
        snprintf(key, sizeof key, "%s%s", prefix, m->params[i].name);
        const clcnn_st_tensor *t = clcnn_st_find(f, key);
        if (!t)
            return clcnn_fail(&m->err, CLCNN_ERR_FORMAT, "%s: missing tensor '%s' (the model %s)",
                              path, clcnn_shown(key, CLCNN_SHOWN_MAX, shown), m->spec);
        if ((st = take_tensor(m, f, t, &m->params[i], path, w))) return st;
    }
    /* Like load_state_dict(strict=True): a tensor under the prefix that the model lacks means
     * the file was made for another architecture. */
    for (int i = 0; i < f->ntensors; i++) {
        const char *nm = f->tensors[i].name;
        if (strncmp(nm, prefix, pl) != 0) continue;
        int known = 0;
        for (int j = 0; j < m->n_params && !known; j++)
            known = !strcmp(nm + pl, m->params[j].name);
        if (!known)
            return clcnn_fail(&m->err, CLCNN_ERR_FORMAT,
                              "%s: unexpected tensor '%s': the file holds another architecture "
                              "than %s",
                              path, clcnn_shown(nm, CLCNN_SHOWN_MAX, shown), m->spec);
    }
    return CLCNN_SUCCESS;
}

/* The weights w (every parameter, as read from f) against the XXH64 recorded with them. */
static clcnn_status verify_weights(clcnn_model *m, const clcnn_st_file *f, const char *path,
                                   const float *w, char hash[24]) {
    const char *want = clcnn_st_meta(f, "weights_xxh64");
    hex64(hash, XXH64(w, m->total * sizeof *w, 0));
    if (!want || strcmp(want, hash) != 0)
        return clcnn_fail(&m->err, CLCNN_ERR_FORMAT,
                          "%s: the weights do not match their recorded checksum (file damaged "
                          "or edited)",
                          path);
    return CLCNN_SUCCESS;
}

/* Host room for a state_dict of m (freed with free_dict). */
static clcnn_status alloc_dict(clcnn_model *m, host_dict *d) {
    d->w = malloc(m->total * sizeof *d->w + 4);
    d->stats = malloc(m->n_stats * sizeof *d->stats + 4);
    d->count = 0;
    if (!d->w || !d->stats)
        return clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    return CLCNN_SUCCESS;
}

static void free_dict(host_dict *d) {
    free(d->w);
    free(d->stats);
}

clcnn_status clcnn_model_load_weights(clcnn_model *m, const char *path) {
    clcnn_st_file f = {0};
    host_dict d = {NULL, NULL, 0};
    float *w = NULL;
    clcnn_status st;
    char hash[24];
    if (!m) return CLCNN_ERR_INVALID_ARGUMENT;
    if (!path) return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL path");
    if ((st = clcnn_st_read_max(&f, path, max_file_bytes(m), &m->err))) return st;
    if ((st = alloc_dict(m, &d))) goto done;
    w = d.w;
    if ((st = load_weights_from(m, &f, path, &d))) goto done;
    /* A clcnn checkpoint is checked as a resume would check it; a plain state_dict (PyTorch's
     * save_file) carries no checksum and loads as it is. */
    const char *fmt = clcnn_st_meta(&f, "format");
    if (fmt && !strcmp(fmt, ckpt_format)) {
        if ((st = verify_weights(m, &f, path, w, hash))) goto done;
        if ((st = verify_content(m, &f, path))) goto done;
    } else if (fmt && !strcmp(fmt, ckpt_format_v1)) {
        if ((st = verify_weights(m, &f, path, w, hash))) goto done;
    }
    cl_mem p = NULL;
    if ((st = upload_new(m, &p, w, "parameters"))) goto done;
    clReleaseMemObject(m->p);
    m->p = p;
    st = write_stats(m, &d);
done:
    free_dict(&d);
    clcnn_st_free(&f);
    return st;
}

static int64_t meta_i64(const clcnn_st_file *f, const char *key, int *ok) {
    const char *v = clcnn_st_meta(f, key);
    char *end = NULL;
    if (!v) return *ok = 0, 0;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end) *ok = 0;
    return (int64_t)x;
}

static double meta_f64(const clcnn_st_file *f, const char *key, int *ok) {
    const char *v = clcnn_st_meta(f, key);
    char *end = NULL;
    if (!v) return *ok = 0, 0;
    double x = strtod(v, &end);
    if (end == v || *end) *ok = 0;
    return x;
}

/* The optimizer settings and step count recorded in a state file, checked as
 * clcnn_model_set_optimizer would check them. */
static clcnn_status read_optimizer(clcnn_model *m, const clcnn_st_file *s, const char *spath,
                                   clcnn_optimizer_options *o, int64_t *ostep) {
    const char *kind = clcnn_st_meta(s, "optimizer");
    char shown[CLCNN_SHOWN_MAX + 4];
    clcnn_error e;
    int ok = 1, k = 0;
    clcnn_optimizer_defaults(o, CLCNN_OPTIMIZER_SGD);
    while (kind && k < 3 && strcmp(kind, optimizer_names[k]) != 0)
        k++;
    if (!kind || k == 3)
        return clcnn_fail(&m->err, CLCNN_ERR_FORMAT, "%s: unknown optimizer '%s'", spath,
                          clcnn_shown(kind ? kind : "", CLCNN_SHOWN_MAX, shown));
    o->kind = (clcnn_optimizer_kind)k;
    o->lr = meta_f64(s, "lr", &ok);
    o->momentum = meta_f64(s, "momentum", &ok);
    o->dampening = meta_f64(s, "dampening", &ok);
    o->nesterov = (int)meta_i64(s, "nesterov", &ok);
    o->weight_decay = meta_f64(s, "weight_decay", &ok);
    o->beta1 = meta_f64(s, "beta1", &ok);
    o->beta2 = meta_f64(s, "beta2", &ok);
    o->eps = meta_f64(s, "eps", &ok);
    /* Newer than the format: a file without it trained with decay on every parameter. */
    o->no_decay_bn_bias =
        clcnn_st_meta(s, "no_decay_bn_bias") ? (int)meta_i64(s, "no_decay_bn_bias", &ok) : 0;
    *ostep = meta_i64(s, "optimizer_step", &ok);
    if (!ok || *ostep < 0 || (o->no_decay_bn_bias != 0 && o->no_decay_bn_bias != 1))
        return clcnn_fail(&m->err, CLCNN_ERR_FORMAT, "%s: bad optimizer metadata", spath);
    if (clcnn_optimizer_check(o, &e))
        return clcnn_fail(&m->err, CLCNN_ERR_FORMAT, "%s: bad optimizer settings: %s", spath,
                          e.msg);
    return CLCNN_SUCCESS;
}

/* The optimizer state tensors ("s1.<param>", "s2.<param>") into host arrays, exactly those. */
static clcnn_status read_states(clcnn_model *m, const clcnn_st_file *s, const char *spath,
                                int states, float *host[2]) {
    clcnn_status st;
    char key[CKPT_NAME_MAX + 8];
    int trained = 0;
    for (int k = 0; k < states; k++) {
        if (!(host[k] = malloc(m->total * sizeof(float) + 4)))
            return clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
        host_dict d = {host[k], NULL, 0};
        trained = 0;
        for (int i = 0; i < m->n_params; i++) {
            if (!clcnn_param_trained(m->params[i].kind)) continue;
            trained++;
            snprintf(key, sizeof key, "s%d.%s", k + 1, m->params[i].name);
            const clcnn_st_tensor *t = clcnn_st_find(s, key);
            if (!t)
                return clcnn_fail(&m->err, CLCNN_ERR_FORMAT, "%s: missing optimizer tensor '%s'",
                                  spath, key);
            if ((st = take_tensor(m, s, t, &m->params[i], spath, &d))) return st;
        }
    }
    if (s->ntensors != states * trained) {
        char shown[CLCNN_SHOWN_MAX + 4];
        for (int i = 0; i < s->ntensors; i++) {
            const char *nm = s->tensors[i].name;
            int k =
                nm[0] == 's' && (nm[1] == '1' || nm[1] == '2') && nm[2] == '.' ? nm[1] - '0' : 0;
            if (!k || k > states || !clcnn_st_find(s, nm))
                return clcnn_fail(&m->err, CLCNN_ERR_FORMAT, "%s: unexpected optimizer tensor '%s'",
                                  spath, clcnn_shown(nm, CLCNN_SHOWN_MAX, shown));
        }
        return clcnn_fail(&m->err, CLCNN_ERR_FORMAT, "%s: unexpected optimizer tensors", spath);
    }
    return CLCNN_SUCCESS;
}

/* Whether f is a /2 clcnn checkpoint of this model, with a message that says what to do when
 * it is not. */
static clcnn_status check_checkpoint(clcnn_model *m, const clcnn_st_file *f, const char *path) {
    const char *fmt = clcnn_st_meta(f, "format"), *spec = clcnn_st_meta(f, "spec");
    char a[200], b[200];
    if (fmt && !strcmp(fmt, ckpt_format_v1))
        return clcnn_fail(&m->err, CLCNN_ERR_FORMAT,
                          "%s was written by an older clcnn (%s), whose checksum covers only the "
                          "weights; it cannot be resumed, but --init loads its weights",
                          path, ckpt_format_v1);
    if (!fmt || strcmp(fmt, ckpt_format) != 0)
        return clcnn_fail(&m->err, CLCNN_ERR_FORMAT,
                          "%s is not a clcnn checkpoint (no format '%s' in its metadata); use "
                          "--init for plain weights",
                          path, ckpt_format);
    if (!spec || strcmp(spec, m->spec) != 0)
        return clcnn_fail(&m->err, CLCNN_ERR_FORMAT, "%s holds the model '%s', not '%s'", path,
                          clcnn_shown(spec ? spec : "?", 160, a), clcnn_shown(m->spec, 160, b));
    return CLCNN_SUCCESS;
}

/* The training settings recorded in a weights file (schedule, label smoothing, augmentation).
 * They are newer than the format: a file without them trained with a constant lr, no
 * smoothing and no augmentation. */
static clcnn_status read_training(clcnn_model *m, const clcnn_st_file *f, const char *path,
                                  clcnn_checkpoint_info_v2 *at) {
    const char *name = clcnn_st_meta(f, "schedule");
    char shown[CLCNN_SHOWN_MAX + 4];
    int ok = 1, kind = name ? clcnn_schedule_parse(name) : CLCNN_SCHEDULE_CONSTANT;
    if (kind < 0)
        return clcnn_fail(&m->err, CLCNN_ERR_FORMAT, "%s: unknown learning-rate schedule '%s'",
                          path, clcnn_shown(name, CLCNN_SHOWN_MAX, shown));
    at->schedule = (clcnn_schedule_kind)kind;
    at->pct_start = 0.3;
    if (!name) return CLCNN_SUCCESS;
    at->schedule_lr = meta_f64(f, "schedule_lr", &ok);
    at->total_steps = meta_i64(f, "total_steps", &ok);
    at->pct_start = meta_f64(f, "pct_start", &ok);
    at->label_smoothing = meta_f64(f, "label_smoothing", &ok);
    at->random_crop = (int)meta_i64(f, "random_crop", &ok);
    at->hflip = (int)meta_i64(f, "hflip", &ok);
    const char *norm = clcnn_st_meta(f, "normalize");
    if (norm) snprintf(at->normalize, sizeof at->normalize, "%s", norm);
    if (!ok || !(at->schedule_lr >= 0 && at->schedule_lr <= 1e300) || at->total_steps < 0 ||
        !(at->pct_start >= 0 && at->pct_start <= 1) ||
        !(at->label_smoothing >= 0 && at->label_smoothing <= 1) || at->random_crop < 0 ||
        at->random_crop > CLCNN_MAX_CROP || (at->hflip != 0 && at->hflip != 1))
        return clcnn_fail(&m->err, CLCNN_ERR_FORMAT,
                          "%s: bad schedule/label smoothing/augmentation metadata", path);
    return CLCNN_SUCCESS;
}

/* The position in the run recorded in a weights file, and its training settings. */
static clcnn_status read_position(clcnn_model *m, const clcnn_st_file *f, const char *path,
                                  clcnn_checkpoint_info_v2 *at) {
    int ok = 1;
    memset(at, 0, sizeof *at);
    at->epoch = meta_i64(f, "epoch", &ok);
    at->step = meta_i64(f, "step", &ok);
    at->batch_in_epoch = meta_i64(f, "batch_in_epoch", &ok);
    at->seed = (uint64_t)meta_i64(f, "seed", &ok);
    at->batch_size = meta_i64(f, "batch_size", &ok);
    if (!ok || at->epoch < 0 || at->step < 0 || at->batch_in_epoch < 0 || at->batch_size < 0)
        return clcnn_fail(&m->err, CLCNN_ERR_FORMAT, "%s: bad epoch/step/seed metadata", path);
    return read_training(m, f, path, at);
}

/* Reads and checks the optimizer-state file that belongs to the weights file at path (whose
 * weights have the XXH64 hash): the optimizer settings, its step count and its state tensors
 * into host (freed by the caller, like s). */
static clcnn_status read_state_file(clcnn_model *m, clcnn_st_file *s, const char *path,
                                    const char *hash, clcnn_optimizer_options *o, int64_t *ostep,
                                    float *host[2]) {
    char spath[4200];
    clcnn_status st;
    state_path(path, spath, sizeof spath);
    if ((st = clcnn_st_read_max(s, spath, max_file_bytes(m), &m->err))) return st;
    const char *sh = clcnn_st_meta(s, "weights_xxh64"), *sfmt = clcnn_st_meta(s, "format");
    if (!sh || strcmp(sh, hash) != 0)
        return clcnn_fail(&m->err, CLCNN_ERR_FORMAT,
                          "%s does not belong to %s (weights checksum differs): the pair is from "
                          "two different saves",
                          spath, path);
    if ((st = read_optimizer(m, s, spath, o, ostep))) return st;
    if ((st = read_states(m, s, spath, clcnn_optimizer_states(o), host))) return st;
    if (!sfmt || strcmp(sfmt, ckpt_format) != 0)
        return clcnn_fail(&m->err, CLCNN_ERR_FORMAT, "%s: not a clcnn optimizer-state file", spath);
    return verify_content(m, s, spath);
}

/* The commit of a load: new device buffers for the weights w and the first `states` state
 * arrays of host (a failure there leaves the model as it was), then they replace the model's. */
static clcnn_status swap_in(clcnn_model *m, const float *w, float *const host[2], int states) {
    cl_mem fresh[3] = {NULL, NULL, NULL}; /* parameters, state 1, state 2 */
    cl_mem *slots[3] = {&m->p, &m->s1, &m->s2};
    clcnn_status st;
    if ((st = upload_new(m, &fresh[0], w, "parameters"))) goto fail;
    for (int k = 0; k < states; k++)
        if ((st = upload_new(m, &fresh[k + 1], host[k], "optimizer state"))) goto fail;
    for (int k = 0; k < 3; k++) {
        if (*slots[k]) clReleaseMemObject(*slots[k]);
        *slots[k] = fresh[k];
    }
    return CLCNN_SUCCESS;
fail:
    for (int k = 0; k < 3; k++)
        if (fresh[k]) clReleaseMemObject(fresh[k]);
    return st;
}

clcnn_status clcnn_model_load_checkpoint_v2(clcnn_model *m, const char *path,
                                            clcnn_checkpoint_info_v2 *info) {
    clcnn_st_file f = {0}, s = {0};
    host_dict d = {NULL, NULL, 0};
    float *w = NULL, *host[2] = {NULL, NULL};
    char hash[24];
    clcnn_checkpoint_info_v2 at;
    clcnn_optimizer_options o;
    int64_t ostep = 0;
    clcnn_status st;
    if (!m) return CLCNN_ERR_INVALID_ARGUMENT;
    if (!path || !info) return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL argument");
    /* Everything is read and checked into host memory first; the model changes only at the
     * end, when nothing can fail but the device itself. */
    if ((st = clcnn_st_read_max(&f, path, max_file_bytes(m), &m->err))) goto done;
    if ((st = check_checkpoint(m, &f, path))) goto done;
    if ((st = alloc_dict(m, &d))) goto done;
    w = d.w;
    if ((st = load_weights_from(m, &f, path, &d))) goto done;
    if ((st = verify_weights(m, &f, path, w, hash))) goto done;
    if ((st = read_position(m, &f, path, &at))) goto done;
    if ((st = verify_content(m, &f, path))) goto done;
    if ((st = read_state_file(m, &s, path, hash, &o, &ostep, host))) goto done;
    if ((st = swap_in(m, w, host, clcnn_optimizer_states(&o)))) goto done;
    m->opt = o;
    m->step = ostep;
    /* The model's own seed drives its dropout streams; checkpoints before it was recorded keep
     * the model's. */
    const char *ms = clcnn_st_meta(&f, "model_seed");
    if (ms) m->seed = strtoull(ms, NULL, 10);
    *info = at;
    st = write_stats(m, &d);
done:
    free_dict(&d);
    free(host[0]);
    free(host[1]);
    clcnn_st_free(&f);
    clcnn_st_free(&s);
    return st;
}

clcnn_status clcnn_model_load_checkpoint(clcnn_model *m, const char *path,
                                         clcnn_checkpoint_info *info) {
    clcnn_checkpoint_info_v2 v2;
    if (!m) return CLCNN_ERR_INVALID_ARGUMENT;
    if (!info) return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL argument");
    clcnn_status st = clcnn_model_load_checkpoint_v2(m, path, &v2);
    if (!st) *info = (clcnn_checkpoint_info){v2.epoch, v2.step, v2.batch_in_epoch, v2.seed};
    return st;
}

clcnn_status clcnn_checkpoint_peek(const char *path, char *spec, size_t spec_size, int *c, int *h,
                                   int *w, char *err, size_t errsize) {
    clcnn_st_file f = {0};
    clcnn_error e = {0};
    clcnn_status st;
    int cc = 0, hh = 0, ww = 0;
    if (!path) return CLCNN_ERR_INVALID_ARGUMENT;
    st = clcnn_st_read_header(&f, path, &e);
    if (!st) {
        const char *sp = clcnn_st_meta(&f, "spec"), *in = clcnn_st_meta(&f, "input");
        char end;
        if (!sp || !in || sscanf(in, "%dx%dx%d%c", &cc, &hh, &ww, &end) != 3)
            st = clcnn_fail(&e, CLCNN_ERR_FORMAT,
                            "%s is not a clcnn checkpoint (no spec/input in its metadata)", path);
        else if (spec && strlen(sp) >= spec_size)
            st = clcnn_fail(&e, CLCNN_ERR_INVALID_ARGUMENT,
                            "%s: its spec needs %zu bytes, the buffer has %zu", path,
                            strlen(sp) + 1, spec_size);
        else {
            if (spec) memcpy(spec, sp, strlen(sp) + 1);
            if (c) *c = cc;
            if (h) *h = hh;
            if (w) *w = ww;
        }
    }
    if (st && err && errsize) snprintf(err, errsize, "%s", e.msg);
    clcnn_st_free(&f);
    return st;
}

clcnn_status clcnn_checkpoint_peek_normalize(const char *path, char *norm, size_t size, char *err,
                                             size_t errsize) {
    clcnn_st_file f = {0};
    clcnn_error e = {0};
    if (!path || !norm || size == 0) return CLCNN_ERR_INVALID_ARGUMENT;
    clcnn_status st = clcnn_st_read_header(&f, path, &e);
    norm[0] = '\0';
    if (!st) {
        const char *v = clcnn_st_meta(&f, "normalize");
        if (v && strlen(v) >= size)
            st = clcnn_fail(&e, CLCNN_ERR_INVALID_ARGUMENT, "%s: its normalisation needs %zu bytes",
                            path, strlen(v) + 1);
        else if (v)
            memcpy(norm, v, strlen(v) + 1);
    }
    if (st && err && errsize) snprintf(err, errsize, "%s", e.msg);
    clcnn_st_free(&f);
    return st;
}
