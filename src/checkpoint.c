/* Checkpoints: the weights as a PyTorch-loadable safetensors state_dict, the optimizer state in
 * a sibling file. Each file carries an XXH64 of everything in it (tensors and metadata), and
 * both carry an XXH64 of the weights, which binds the pair together. Loading reads and checks
 * both files completely before the model changes. */
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
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

/* ---- the metadata -------------------------------------------------------------------------- */

/* Every metadata field of both files, with its one type and range: a save formats each value
 * through its row and refuses one outside it, a load parses each through the same row and
 * refuses what the save could not have written, so that a field cannot be written one way and
 * read another. Counters (epochs, steps, the schedule's length) stay within 2^53: exact as the
 * doubles a data-parallel group broadcasts them as, and so far below INT64_MAX that what a run
 * adds to them (epochs times batches) cannot overflow. */
#define COUNT_MAX ((int64_t)1 << 53)
#define NORM_MAX 127 /* bytes of a normalisation's text (clcnn_checkpoint_info.normalize) */

typedef enum meta_type {
    META_TEXT, /* any text, checked where it is used (the spec, the input shape, a hash) */
    META_U64,  /* decimal digits: 0 .. 2^64-1 */
    META_I64,  /* a decimal integer in [lo, hi], lo >= 0 (written without a sign) */
    META_F64,  /* a finite number in [dlo, dhi], written with %.17g (which round-trips) */
    META_ENUM, /* one of names[0 .. hi] */
    META_NORM  /* a normalisation: "" (none), "M,S", or C means then C stds; stds > 0 */
} meta_type;

typedef struct meta_field {
    const char *key;
    meta_type type;
    int64_t lo, hi;
    double dlo, dhi;
    const char *const *names;
} meta_field;

typedef union meta_value {
    const char *s;
    uint64_t u;
    int64_t i;
    double d;
} meta_value;

/* Indexed by clcnn_schedule_kind. */
static const char *const schedule_names[] = {"constant", "cosine", "onecycle"};

/* clang-format off */
enum {
    K_FORMAT, K_SPEC, K_INPUT, K_WEIGHTS, K_VERSION,                         /* identity */
    K_EPOCH, K_STEP, K_BIE, K_BATCH, K_SEED, K_MSEED,                        /* position */
    K_SCHEDULE, K_SLR, K_TOTAL, K_PCT, K_SMOOTH, K_CROP, K_FLIP, K_NORM,     /* training */
    K_OPTIMIZER, K_OSTEP, K_LR, K_MOM, K_DAMP, K_NEST, K_WD, K_B1, K_B2, K_EPS, K_NODECAY,
    N_KEYS
};
/* clang-format on */

/* clang-format off */
static const meta_field fields[N_KEYS] = {
    [K_FORMAT]    = {"format",          META_TEXT, 0, 0, 0, 0, NULL},
    [K_SPEC]      = {"spec",            META_TEXT, 0, 0, 0, 0, NULL},
    [K_INPUT]     = {"input",           META_TEXT, 0, 0, 0, 0, NULL},
    [K_WEIGHTS]   = {"weights_xxh64",   META_TEXT, 0, 0, 0, 0, NULL},
    [K_VERSION]   = {"clcnn_version",   META_TEXT, 0, 0, 0, 0, NULL},
    [K_EPOCH]     = {"epoch",           META_I64,  0, COUNT_MAX, 0, 0, NULL},
    [K_STEP]      = {"step",            META_I64,  0, COUNT_MAX, 0, 0, NULL},
    /* A data set holds at most INT_MAX samples, so an epoch at most INT_MAX batches, and a
     * batch (clcnn_model_reserve's int) at most INT_MAX samples. */
    [K_BIE]       = {"batch_in_epoch",  META_I64,  0, INT32_MAX, 0, 0, NULL},
    [K_BATCH]     = {"batch_size",      META_I64,  0, INT32_MAX, 0, 0, NULL},
    [K_SEED]      = {"seed",            META_U64,  0, 0, 0, 0, NULL},
    [K_MSEED]     = {"model_seed",      META_U64,  0, 0, 0, 0, NULL},
    [K_SCHEDULE]  = {"schedule",        META_ENUM, 0, 2, 0, 0, schedule_names},
    [K_SLR]       = {"schedule_lr",     META_F64,  0, 0, 0, 1e300, NULL},
    [K_TOTAL]     = {"total_steps",     META_I64,  0, COUNT_MAX, 0, 0, NULL},
    [K_PCT]       = {"pct_start",       META_F64,  0, 0, 0, 1, NULL},
    [K_SMOOTH]    = {"label_smoothing", META_F64,  0, 0, 0, 1, NULL},
    [K_CROP]      = {"random_crop",     META_I64,  0, CLCNN_MAX_CROP, 0, 0, NULL},
    [K_FLIP]      = {"hflip",           META_I64,  0, 1, 0, 0, NULL},
    [K_NORM]      = {"normalize",       META_NORM, 0, 0, 0, 0, NULL},
    [K_OPTIMIZER] = {"optimizer",       META_ENUM, 0, 2, 0, 0, optimizer_names},
    [K_OSTEP]     = {"optimizer_step",  META_I64,  0, COUNT_MAX, 0, 0, NULL},
    /* Finite; the ranges are clcnn_optimizer_check's (lr > 0, betas in [0, 1) for Adam), which
     * the load applies and which leaves the fields an optimizer does not use free. */
    [K_LR]        = {"lr",              META_F64,  0, 0, -DBL_MAX, DBL_MAX, NULL},
    [K_MOM]       = {"momentum",        META_F64,  0, 0, -DBL_MAX, DBL_MAX, NULL},
    [K_DAMP]      = {"dampening",       META_F64,  0, 0, -DBL_MAX, DBL_MAX, NULL},
    [K_NEST]      = {"nesterov",        META_I64,  0, 1, 0, 0, NULL},
    [K_WD]        = {"weight_decay",    META_F64,  0, 0, -DBL_MAX, DBL_MAX, NULL},
    [K_B1]        = {"beta1",           META_F64,  0, 0, -DBL_MAX, DBL_MAX, NULL},
    [K_B2]        = {"beta2",           META_F64,  0, 0, -DBL_MAX, DBL_MAX, NULL},
    [K_EPS]       = {"eps",             META_F64,  0, 0, -DBL_MAX, DBL_MAX, NULL},
    [K_NODECAY]   = {"no_decay_bn_bias", META_I64, 0, 1, 0, 0, NULL},
};
/* clang-format on */

/* The fields of each file, in the order they are written. */
static const int weights_keys[] = {
    K_FORMAT,   K_SPEC, K_INPUT, K_EPOCH, K_STEP,   K_BIE,  K_BATCH, K_SEED,  K_WEIGHTS, K_VERSION,
    K_SCHEDULE, K_SLR,  K_TOTAL, K_PCT,   K_SMOOTH, K_CROP, K_FLIP,  K_MSEED, K_NORM};
static const int state_keys[] = {K_FORMAT, K_WEIGHTS, K_OPTIMIZER, K_OSTEP, K_LR,
                                 K_MOM,    K_DAMP,    K_NEST,      K_WD,    K_B1,
                                 K_B2,     K_EPS,     K_NODECAY,   K_EPOCH, K_STEP};
#define N_WEIGHTS_KEYS ((int)(sizeof weights_keys / sizeof weights_keys[0]))
#define N_STATE_KEYS ((int)(sizeof state_keys / sizeof state_keys[0]))

/* (x - mean[c]) / std[c]: text as --normalize spells it, "M,S" for every channel or C means
 * then C stds, into mean and std (c values each). Values must be finite as floats, stds > 0.
 * Returns 0, or -1 for text that is not such a normalisation. */
static int parse_norm(const char *v, int c, float *mean, float *std) {
    int n = 0;
    const char *p = v;
    if (c <= 0) return -1;
    while (*p) {
        char *end = NULL;
        errno = 0;
        double x = strtod(p, &end);
        float fx = (float)x;
        if (errno || end == p || !isfinite(fx) || n >= 2 * c) return -1;
        if (n < c)
            mean[n] = fx;
        else
            std[n - c] = fx;
        n++;
        if (*end == ',')
            p = end + 1;
        else if (*end == '\0')
            p = end;
        else
            return -1;
    }
    if (n == 2 && c != 1) {
        float s = mean[1];
        for (int k = 0; k < c; k++)
            mean[k] = mean[0], std[k] = s;
    } else if (n != 2 * c) {
        return -1;
    }
    for (int k = 0; k < c; k++)
        if (!(std[k] > 0)) return -1;
    return 0;
}

/* Whether v is "" or a normalisation of c channels that fits the recorded field. */
static int norm_ok(const char *v, int c) {
    if (strlen(v) > NORM_MAX) return 0;
    if (!v[0]) return 1;
    float *buf = malloc(2 * (size_t)(c > 0 ? c : 1) * sizeof *buf);
    int ok = buf && parse_norm(v, c, buf, buf + c) == 0;
    free(buf);
    return ok;
}

/* What a field's value must be, for a message. buf holds 96 bytes. */
static const char *describe(const meta_field *fd, char *buf) {
    switch (fd->type) {
    case META_U64: return "an unsigned decimal integer below 2^64";
    case META_I64:
        snprintf(buf, 96, "a decimal integer in [%" PRId64 ", %" PRId64 "]", fd->lo, fd->hi);
        return buf;
    case META_F64:
        if (fd->dlo == -DBL_MAX) return "a finite number";
        snprintf(buf, 96, "a finite number in [%g, %g]", fd->dlo, fd->dhi);
        return buf;
    case META_ENUM:
        snprintf(buf, 96, "one of %s", fd->names[0]);
        for (int64_t k = 1; k <= fd->hi; k++)
            snprintf(buf + strlen(buf), 96 - strlen(buf), ", %s", fd->names[k]);
        return buf;
    case META_NORM: return "'' or a normalisation M,S or C means then C stds (stds > 0)";
    case META_TEXT: break;
    }
    return "text";
}

/* Parses v as field fd (c: the model's input channels, for a normalisation). Returns 0, or -1
 * for a value the field cannot hold. */
static int meta_parse(const meta_field *fd, const char *v, int c, meta_value *out) {
    char *end = NULL;
    const char *p = v;
    switch (fd->type) {
    case META_TEXT: out->s = v; return 0;
    case META_NORM: out->s = v; return norm_ok(v, c) ? 0 : -1;
    case META_ENUM:
        for (int64_t k = 0; k <= fd->hi; k++)
            if (!strcmp(v, fd->names[k])) return out->i = k, 0;
        return -1;
    case META_U64:
    case META_I64:
        /* Exactly what the save writes: digits, no sign, space or leading zero. */
        if (*p == '0' && p[1]) return -1;
        for (; *p; p++)
            if (*p < '0' || *p > '9') return -1;
        if (p == v) return -1;
        errno = 0;
        out->u = strtoull(v, &end, 10);
        if (errno || *end) return -1;
        if (fd->type == META_U64) return 0;
        if (out->u > (uint64_t)INT64_MAX) return -1;
        out->i = (int64_t)out->u;
        return out->i >= fd->lo && out->i <= fd->hi ? 0 : -1;
    case META_F64:
        if (!*v || *v == ' ' || *v == '\t' || *v == '\n') return -1;
        out->d = strtod(v, &end);
        if (*end || !isfinite(out->d)) return -1;
        return out->d >= fd->dlo && out->d <= fd->dhi ? 0 : -1;
    }
    return -1;
}

/* A field of f: 1 and *out when it is there and holds a value of its type, 0 when it is
 * absent (*out untouched), or a failure naming the field and what it must hold. */
static clcnn_status meta_get(clcnn_error *e, const clcnn_st_file *f, const char *path, int key,
                             int c, meta_value *out, int *present) {
    const meta_field *fd = &fields[key];
    const char *v = clcnn_st_meta(f, fd->key);
    char shown[CLCNN_SHOWN_MAX + 4], want[96];
    *present = v != NULL;
    if (!v) return CLCNN_SUCCESS;
    if (meta_parse(fd, v, c, out))
        return clcnn_fail(e, CLCNN_ERR_FORMAT, "%s: metadata %s='%s' is not %s", path, fd->key,
                          clcnn_shown(v, CLCNN_SHOWN_MAX, shown), describe(fd, want));
    return CLCNN_SUCCESS;
}

/* As meta_get for a field every clcnn checkpoint holds. */
static clcnn_status meta_need(clcnn_model *m, const clcnn_st_file *f, const char *path, int key,
                              meta_value *out) {
    int present = 0;
    clcnn_status st = meta_get(&m->err, f, path, key, m->in_c, out, &present);
    if (!st && !present)
        return clcnn_fail(&m->err, CLCNN_ERR_FORMAT, "%s: no '%s' in its metadata", path,
                          fields[key].key);
    return st;
}

/* The metadata values of one save, as text: each formatted through its row. */
typedef struct ckpt_text {
    const char *val[N_KEYS];
    char buf[N_KEYS][NORM_MAX + 1];
} ckpt_text;

/* Formats v into t as field key (c: the model's input channels), refusing a value outside the
 * field's range (which a load would refuse). */
static clcnn_status meta_put(clcnn_model *m, ckpt_text *t, int key, meta_value v) {
    const meta_field *fd = &fields[key];
    char *b = t->buf[key], want[96];
    size_t size = sizeof t->buf[key];
    int ok = 1;
    t->val[key] = b;
    switch (fd->type) {
    case META_TEXT: t->val[key] = v.s; break;
    case META_NORM:
        ok = norm_ok(v.s, m->in_c);
        snprintf(b, size, "%s", ok ? v.s : "");
        break;
    case META_ENUM:
        ok = v.i >= 0 && v.i <= fd->hi;
        snprintf(b, size, "%s", ok ? fd->names[v.i] : "");
        break;
    case META_U64: snprintf(b, size, "%" PRIu64, v.u); break;
    case META_I64:
        ok = v.i >= fd->lo && v.i <= fd->hi;
        snprintf(b, size, "%" PRId64, v.i);
        break;
    case META_F64:
        ok = isfinite(v.d) && v.d >= fd->dlo && v.d <= fd->dhi;
        snprintf(b, size, "%.17g", v.d);
        break;
    }
    if (!ok)
        return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT,
                          "cannot save %s = '%s' in a checkpoint: it must be %s", fd->key,
                          fd->type == META_NORM ? v.s : b, describe(fd, want));
    return CLCNN_SUCCESS;
}

static clcnn_status format_text(clcnn_model *m, const clcnn_checkpoint_info *info, const float *w,
                                ckpt_text *t, char *hash, char *input) {
    const clcnn_optimizer_options *o = &m->opt;
    clcnn_status st = CLCNN_SUCCESS;
    hex64(hash, XXH64(w, m->total * sizeof *w, 0));
    snprintf(input, 48, "%dx%dx%d", m->in_c, m->in_h, m->in_w);
    const struct {
        int key;
        meta_value v;
    } vals[] = {
        {K_FORMAT, {.s = ckpt_format}},
        {K_SPEC, {.s = m->spec}},
        {K_INPUT, {.s = input}},
        {K_WEIGHTS, {.s = hash}},
        {K_VERSION, {.s = clcnn_version()}},
        {K_EPOCH, {.i = info->epoch}},
        {K_STEP, {.i = info->step}},
        {K_BIE, {.i = info->batch_in_epoch}},
        {K_BATCH, {.i = info->batch_size}},
        {K_SEED, {.u = info->seed}},
        {K_MSEED, {.u = m->seed}},
        {K_SCHEDULE, {.i = (int64_t)info->schedule}},
        {K_SLR, {.d = info->schedule_lr}},
        {K_TOTAL, {.i = info->total_steps}},
        {K_PCT, {.d = info->pct_start}},
        {K_SMOOTH, {.d = info->label_smoothing}},
        {K_CROP, {.i = info->random_crop}},
        {K_FLIP, {.i = info->hflip}},
        {K_NORM, {.s = info->normalize}},
        {K_OPTIMIZER, {.i = (int64_t)o->kind}},
        {K_OSTEP, {.i = m->step}},
        {K_LR, {.d = o->lr}},
        {K_MOM, {.d = o->momentum}},
        {K_DAMP, {.d = o->dampening}},
        {K_NEST, {.i = o->nesterov}},
        {K_WD, {.d = o->weight_decay}},
        {K_B1, {.d = o->beta1}},
        {K_B2, {.d = o->beta2}},
        {K_EPS, {.d = o->eps}},
        {K_NODECAY, {.i = o->no_decay_bn_bias}},
    };
    if (!memchr(info->normalize, '\0', sizeof info->normalize))
        return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT,
                          "the checkpoint's normalisation is not a NUL-terminated string");
    memset(t->val, 0, sizeof t->val);
    for (size_t i = 0; i < sizeof vals / sizeof vals[0] && !st; i++)
        st = meta_put(m, t, vals[i].key, vals[i].v);
    for (int k = 0; k < N_KEYS && !st; k++)
        CLCNN_ASSERT(t->val[k] != NULL); /* every field of the table is given a value above */
    return st;
}

/* The metadata pairs of one file (keys in the order given) from t, into meta. Returns the
 * pair count. */
static int meta_pairs(const ckpt_text *t, const int *keys, int n, const char **meta) {
    for (int i = 0; i < n; i++)
        meta[2 * i] = fields[keys[i]].key, meta[2 * i + 1] = t->val[keys[i]];
    return n;
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
    const char *meta[2 * META_MAX];
    int nm = add_checksum(ents, n, meta, meta_pairs(t, state_keys, N_STATE_KEYS, meta), hex);
    if (nm < 0) return clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    return clcnn_st_write_tmp(spath, ents, n, meta, nm, tmp, &m->err);
}

/* Writes the weights file (every parameter from w, the model and the position in the run)
 * under a temporary name beside path, into *tmp. ents has room for one entry a parameter. */
static clcnn_status write_weights_tmp(clcnn_model *m, const char *path, const host_dict *w,
                                      const ckpt_text *t, clcnn_st_entry *ents,
                                      clcnn_tmpfile *tmp) {
    char hex[24];
    const char *meta[2 * META_MAX];
    for (int i = 0; i < m->n_params; i++)
        entry_for(&m->params[i], m->params[i].name, w, &ents[i]);
    int nm = add_checksum(ents, m->n_params, meta,
                          meta_pairs(t, weights_keys, N_WEIGHTS_KEYS, meta), hex);
    if (nm < 0) return clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    return clcnn_st_write_tmp(path, ents, m->n_params, meta, nm, tmp, &m->err);
}

void clcnn_checkpoint_info_init(clcnn_checkpoint_info *info) {
    if (!info) return;
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
}

clcnn_status clcnn_model_save_checkpoint(clcnn_model *m, const char *path,
                                         const clcnn_checkpoint_info *given) {
    clcnn_checkpoint_info info_in, *info = &info_in;
    clcnn_status st;
    float *w = NULL, *s1 = NULL, *s2 = NULL;
    host_dict wd = {NULL, NULL, 0};
    clcnn_st_entry *ents = NULL;
    char(*names)[CKPT_NAME_MAX] = NULL;
    clcnn_tmpfile stmp = {NULL, -1}, wtmp = {NULL, -1};
    char spath[4200], hash[24], input[48];
    ckpt_text t;
    if (!m) return CLCNN_ERR_INVALID_ARGUMENT;
    if (!path || !given) return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL argument");
    clcnn_checkpoint_info_init(&info_in);
    if ((st = clcnn_sized_in(&m->err, "clcnn_checkpoint_info", &info_in, given, sizeof info_in)))
        return st;
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
    if ((st = format_text(m, info, w, &t, hash, input))) goto done;
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

/* What a file's "format" says: a /2 or /1 clcnn checkpoint, another clcnn format (a newer
 * clcnn's, refused: nothing here can tell what its fields mean), or none of clcnn's (a plain
 * state_dict, such as PyTorch's or Hugging Face's save_file, whose "format" is "pt"). */
enum { FMT_PLAIN, FMT_V1, FMT_V2 };
static clcnn_status format_of(const clcnn_st_file *f, const char *path, clcnn_error *e, int *kind) {
    const char *fmt = clcnn_st_meta(f, "format");
    static const char prefix[] = "clcnn-checkpoint/";
    char shown[CLCNN_SHOWN_MAX + 4];
    *kind = FMT_PLAIN;
    if (!fmt || strncmp(fmt, prefix, sizeof prefix - 1) != 0) return CLCNN_SUCCESS;
    if (!strcmp(fmt, ckpt_format)) return *kind = FMT_V2, CLCNN_SUCCESS;
    if (!strcmp(fmt, ckpt_format_v1)) return *kind = FMT_V1, CLCNN_SUCCESS;
    return clcnn_fail(e, CLCNN_ERR_FORMAT,
                      "%s is a checkpoint of format '%s', which this clcnn (%s) cannot read: it "
                      "reads %s (and the weights of %s)",
                      path, clcnn_shown(fmt, CLCNN_SHOWN_MAX, shown), clcnn_version(), ckpt_format,
                      ckpt_format_v1);
}

/* The normalisation a /2 weights file records, for a model of c input channels, into *out
 * (mean then std, c values each; freed by the caller): "" (trained on unnormalised inputs) is
 * mean 0, std 1; a file that records none (older than the field) leaves *out NULL. */
static clcnn_status read_norm(clcnn_model *m, const clcnn_st_file *f, const char *path,
                              float **out) {
    meta_value v;
    int present = 0;
    clcnn_status st = meta_get(&m->err, f, path, K_NORM, m->in_c, &v, &present);
    *out = NULL;
    if (st || !present) return st;
    float *n = malloc(2 * (size_t)m->in_c * sizeof *n);
    if (!n) return clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    for (int k = 0; k < m->in_c; k++)
        n[k] = 0.0f, n[m->in_c + k] = 1.0f;
    if (v.s[0]) parse_norm(v.s, m->in_c, n, n + m->in_c); /* checked by meta_get */
    *out = n;
    return CLCNN_SUCCESS;
}

/* The model takes the normalisation of the file it loaded (NULL: none recorded). */
static void take_norm(clcnn_model *m, float **norm) {
    free(m->norm);
    m->norm = *norm;
    *norm = NULL;
}

static clcnn_status read_position(clcnn_model *m, const clcnn_st_file *f, const char *path,
                                  clcnn_checkpoint_info *at);

clcnn_status clcnn_model_load_weights(clcnn_model *m, const char *path) {
    clcnn_st_file f = {0};
    host_dict d = {NULL, NULL, 0};
    float *w = NULL, *norm = NULL;
    clcnn_status st;
    clcnn_checkpoint_info at;
    char hash[24];
    int kind = FMT_PLAIN;
    if (!m) return CLCNN_ERR_INVALID_ARGUMENT;
    if (!path) return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL path");
    if ((st = clcnn_st_read_max(&f, path, max_file_bytes(m), &m->err))) return st;
    if ((st = format_of(&f, path, &m->err, &kind))) goto done;
    if ((st = alloc_dict(m, &d))) goto done;
    w = d.w;
    if ((st = load_weights_from(m, &f, path, &d))) goto done;
    /* A clcnn checkpoint is checked as a resume would check it; a plain state_dict (PyTorch's
     * save_file) carries no checksum and loads as it is. */
    if (kind == FMT_V2) {
        if ((st = verify_weights(m, &f, path, w, hash))) goto done;
        meta_value mseed;
        int has_mseed = 0;
        if ((st = read_position(m, &f, path, &at))) goto done;
        if ((st = meta_get(&m->err, &f, path, K_MSEED, m->in_c, &mseed, &has_mseed))) goto done;
        if ((st = read_norm(m, &f, path, &norm))) goto done;
        if ((st = verify_content(m, &f, path))) goto done;
    } else if (kind == FMT_V1) {
        if ((st = verify_weights(m, &f, path, w, hash))) goto done;
    }
    cl_mem p = NULL;
    if ((st = upload_new(m, &p, w, "parameters"))) goto done;
    clReleaseMemObject(m->p);
    m->p = p;
    take_norm(m, &norm);
    st = write_stats(m, &d);
done:
    free(norm);
    free_dict(&d);
    clcnn_st_free(&f);
    return st;
}

/* The optimizer settings and step count recorded in a state file, checked as
 * clcnn_model_set_optimizer would check them. */
static clcnn_status read_optimizer(clcnn_model *m, const clcnn_st_file *s, const char *spath,
                                   clcnn_optimizer_options *o, int64_t *ostep) {
    clcnn_error e;
    meta_value v[N_KEYS];
    static const int keys[] = {K_OPTIMIZER, K_OSTEP, K_LR, K_MOM, K_DAMP,
                               K_NEST,      K_WD,    K_B1, K_B2,  K_EPS};
    clcnn_status st;
    int present = 0;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if ((st = meta_need(m, s, spath, keys[i], &v[keys[i]]))) return st;
    /* Newer than the format: a file without it trained with decay on every parameter. */
    v[K_NODECAY].i = 0;
    if ((st = meta_get(&m->err, s, spath, K_NODECAY, m->in_c, &v[K_NODECAY], &present))) return st;
    clcnn_optimizer_options_init(o, (clcnn_optimizer_kind)v[K_OPTIMIZER].i);
    o->lr = v[K_LR].d;
    o->momentum = v[K_MOM].d;
    o->dampening = v[K_DAMP].d;
    o->nesterov = (int)v[K_NEST].i;
    o->weight_decay = v[K_WD].d;
    o->beta1 = v[K_B1].d;
    o->beta2 = v[K_B2].d;
    o->eps = v[K_EPS].d;
    o->no_decay_bn_bias = (int)v[K_NODECAY].i;
    *ostep = v[K_OSTEP].i;
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
    const char *spec = clcnn_st_meta(f, "spec");
    char a[200], b[200];
    clcnn_status st;
    int kind = FMT_PLAIN;
    if ((st = format_of(f, path, &m->err, &kind))) return st;
    if (kind == FMT_V1)
        return clcnn_fail(&m->err, CLCNN_ERR_FORMAT,
                          "%s was written by an older clcnn (%s), whose checksum covers only the "
                          "weights; it cannot be resumed, but --init loads its weights",
                          path, ckpt_format_v1);
    if (kind != FMT_V2)
        return clcnn_fail(&m->err, CLCNN_ERR_FORMAT,
                          "%s is not a clcnn checkpoint (no format '%s' in its metadata); use "
                          "--init for plain weights",
                          path, ckpt_format);
    if (!spec || strcmp(spec, m->spec) != 0)
        return clcnn_fail(&m->err, CLCNN_ERR_FORMAT, "%s holds the model '%s', not '%s'", path,
                          clcnn_shown(spec ? spec : "?", 160, a), clcnn_shown(m->spec, 160, b));
    return CLCNN_SUCCESS;
}

/* The training settings recorded in a weights file (schedule, label smoothing, augmentation,
 * normalisation). They are newer than the format: a file without them trained with a constant
 * lr, no smoothing and no augmentation. */
static clcnn_status read_training(clcnn_model *m, const clcnn_st_file *f, const char *path,
                                  clcnn_checkpoint_info *at) {
    static const int keys[] = {K_SLR, K_TOTAL, K_PCT, K_SMOOTH, K_CROP, K_FLIP};
    meta_value v[N_KEYS];
    clcnn_status st;
    int present = 0;
    at->schedule = CLCNN_SCHEDULE_CONSTANT;
    at->pct_start = 0.3;
    if ((st = meta_get(&m->err, f, path, K_SCHEDULE, m->in_c, &v[K_SCHEDULE], &present)) ||
        !present)
        return st;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if ((st = meta_need(m, f, path, keys[i], &v[keys[i]]))) return st;
    at->schedule = (clcnn_schedule_kind)v[K_SCHEDULE].i;
    at->schedule_lr = v[K_SLR].d;
    at->total_steps = v[K_TOTAL].i;
    at->pct_start = v[K_PCT].d;
    at->label_smoothing = v[K_SMOOTH].d;
    at->random_crop = (int)v[K_CROP].i;
    at->hflip = (int)v[K_FLIP].i;
    if ((st = meta_get(&m->err, f, path, K_NORM, m->in_c, &v[K_NORM], &present))) return st;
    if (present) snprintf(at->normalize, sizeof at->normalize, "%s", v[K_NORM].s);
    return CLCNN_SUCCESS;
}

/* The position in the run recorded in a weights file, and its training settings. */
static clcnn_status read_position(clcnn_model *m, const clcnn_st_file *f, const char *path,
                                  clcnn_checkpoint_info *at) {
    static const int keys[] = {K_EPOCH, K_STEP, K_BIE, K_BATCH, K_SEED};
    meta_value v[N_KEYS];
    clcnn_status st;
    clcnn_checkpoint_info_init(at);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if ((st = meta_need(m, f, path, keys[i], &v[keys[i]]))) return st;
    at->epoch = v[K_EPOCH].i;
    at->step = v[K_STEP].i;
    at->batch_in_epoch = v[K_BIE].i;
    at->seed = v[K_SEED].u;
    at->batch_size = v[K_BATCH].i;
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
    const char *sh = clcnn_st_meta(s, "weights_xxh64");
    int kind = FMT_PLAIN;
    if ((st = format_of(s, spath, &m->err, &kind))) return st;
    if (kind != FMT_V2)
        return clcnn_fail(&m->err, CLCNN_ERR_FORMAT, "%s: not a clcnn optimizer-state file", spath);
    if (!sh || strcmp(sh, hash) != 0)
        return clcnn_fail(&m->err, CLCNN_ERR_FORMAT,
                          "%s does not belong to %s (weights checksum differs): the pair is from "
                          "two different saves",
                          spath, path);
    if ((st = read_optimizer(m, s, spath, o, ostep))) return st;
    meta_value v;
    if ((st = meta_need(m, s, spath, K_EPOCH, &v)) || (st = meta_need(m, s, spath, K_STEP, &v)))
        return st;
    if ((st = read_states(m, s, spath, clcnn_optimizer_states(o), host))) return st;
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

clcnn_status clcnn_model_load_checkpoint(clcnn_model *m, const char *path,
                                         clcnn_checkpoint_info *info) {
    clcnn_st_file f = {0}, s = {0};
    host_dict d = {NULL, NULL, 0};
    float *w = NULL, *host[2] = {NULL, NULL}, *norm = NULL;
    char hash[24];
    clcnn_checkpoint_info at;
    clcnn_optimizer_options o;
    int64_t ostep = 0;
    meta_value mseed = {.u = 0};
    int has_mseed = 0;
    clcnn_status st;
    if (!m) return CLCNN_ERR_INVALID_ARGUMENT;
    if (!path || !info) return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL argument");
    /* The caller's struct is only written, as far as its struct_size reaches, once its size is
     * known to be one this library writes. */
    if ((st = clcnn_sized_in(&m->err, "clcnn_checkpoint_info", &at, info, sizeof at))) return st;
    /* Everything is read and checked into host memory first; the model changes only at the
     * end, when nothing can fail but the device itself. */
    if ((st = clcnn_st_read_max(&f, path, max_file_bytes(m), &m->err))) goto done;
    if ((st = check_checkpoint(m, &f, path))) goto done;
    if ((st = alloc_dict(m, &d))) goto done;
    w = d.w;
    if ((st = load_weights_from(m, &f, path, &d))) goto done;
    if ((st = verify_weights(m, &f, path, w, hash))) goto done;
    if ((st = read_position(m, &f, path, &at))) goto done;
    /* The model's own seed drives its dropout streams; checkpoints before it was recorded keep
     * the model's. */
    if ((st = meta_get(&m->err, &f, path, K_MSEED, m->in_c, &mseed, &has_mseed))) goto done;
    if ((st = read_norm(m, &f, path, &norm))) goto done;
    if ((st = verify_content(m, &f, path))) goto done;
    if ((st = read_state_file(m, &s, path, hash, &o, &ostep, host))) goto done;
    if ((st = swap_in(m, w, host, clcnn_optimizer_states(&o)))) goto done;
    m->opt = o;
    m->step = ostep;
    if (has_mseed) m->seed = mseed.u;
    take_norm(m, &norm);
    memcpy(info, &at, info->struct_size);
    st = write_stats(m, &d);
done:
    free(norm);
    free_dict(&d);
    free(host[0]);
    free(host[1]);
    clcnn_st_free(&f);
    clcnn_st_free(&s);
    return st;
}

clcnn_status clcnn_checkpoint_peek(const char *path, char *spec, size_t spec_size, int *c, int *h,
                                   int *w, char *err, size_t errsize) {
    clcnn_st_file f = {0};
    clcnn_error e = {0};
    clcnn_status st;
    int cc = 0, hh = 0, ww = 0, kind = FMT_PLAIN;
    if (!path) return CLCNN_ERR_INVALID_ARGUMENT;
    st = clcnn_st_read_header(&f, path, &e);
    if (!st) st = format_of(&f, path, &e, &kind);
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

clcnn_status clcnn_checkpoint_peek_normalize(const char *path, char *norm, size_t size,
                                             int *recorded, char *err, size_t errsize) {
    clcnn_st_file f = {0};
    clcnn_error e = {0};
    int kind = FMT_PLAIN, present = 0, c = 0, h = 0, w = 0;
    char end;
    meta_value v;
    if (!path || !norm || size == 0) return CLCNN_ERR_INVALID_ARGUMENT;
    norm[0] = '\0';
    if (recorded) *recorded = 0;
    clcnn_status st = clcnn_st_read_header(&f, path, &e);
    if (!st) st = format_of(&f, path, &e, &kind);
    /* Only a /2 checkpoint records a normalisation; in any other file the key means nothing. */
    if (!st && kind == FMT_V2) {
        const char *in = clcnn_st_meta(&f, "input");
        if (!in || sscanf(in, "%dx%dx%d%c", &c, &h, &w, &end) != 3 || c <= 0)
            st = clcnn_fail(&e, CLCNN_ERR_FORMAT,
                            "%s is not a clcnn checkpoint (no input shape in its metadata)", path);
        else
            st = meta_get(&e, &f, path, K_NORM, c, &v, &present);
        if (!st && present && strlen(v.s) >= size)
            st = clcnn_fail(&e, CLCNN_ERR_INVALID_ARGUMENT, "%s: its normalisation needs %zu bytes",
                            path, strlen(v.s) + 1);
        else if (!st && present) {
            memcpy(norm, v.s, strlen(v.s) + 1);
            if (recorded) *recorded = 1;
        }
    }
    if (st && err && errsize) snprintf(err, errsize, "%s", e.msg);
    clcnn_st_free(&f);
    return st;
}
