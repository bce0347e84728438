/* Checkpoints: the weights as a PyTorch-loadable safetensors state_dict, the optimizer state in
 * a sibling file, both bound together by an XXH64 of the weights. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "model.h"
#include "safetensors.h"

static const char *ckpt_format = "clcnn-checkpoint/1";

/* "dir/epoch_1.safetensors" -> "dir/epoch_1.state.safetensors" */
static void state_path(const char *path, char *out, size_t size) {
    size_t n = strlen(path), ext = strlen(".safetensors");
    if (n > ext && strcmp(path + n - ext, ".safetensors") == 0)
        snprintf(out, size, "%.*s.state.safetensors", (int)(n - ext), path);
    else
        snprintf(out, size, "%s.state", path);
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

static clcnn_status write_all(clcnn_model *m, cl_mem buf, const float *h) {
    cl_int rc = clEnqueueWriteBuffer(m->ctx->queue, buf, CL_TRUE, 0, m->total * sizeof *h, h, 0,
                                     NULL, NULL);
    if (rc != CL_SUCCESS)
        return clcnn_fail(&m->err, (clcnn_status)rc, "writing parameters failed: %s",
                          clcnn_cl_error_name(rc));
    return CLCNN_SUCCESS;
}

static void entry_for(const clcnn_param *p, const char *name, const float *base,
                      clcnn_st_entry *e) {
    memset(e, 0, sizeof *e);
    e->name = name;
    e->dtype = CLCNN_ST_F32;
    e->ndim = p->ndim;
    for (int d = 0; d < p->ndim; d++)
        e->shape[d] = p->shape[d];
    e->data = base + p->off;
}

clcnn_status clcnn_model_save_checkpoint(clcnn_model *m, const char *path,
                                         const clcnn_checkpoint_info *info) {
    clcnn_status st;
    float *w = NULL, *s1 = NULL, *s2 = NULL;
    clcnn_st_entry *ents = NULL;
    char(*names)[48] = NULL;
    char *stmp = NULL, *wtmp = NULL;
    char spath[4200], hash[24], epoch[24], step[24], bie[24], seed[24], input[48], ostep[24];
    char lr[32], mom[32], damp[32], nest[8], wd[32], b1[32], b2[32], eps[32];
    if (!m) return CLCNN_ERR_INVALID_ARGUMENT;
    if (!path || !info) return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL argument");
    if ((st = read_all(m, m->p, &w))) goto done;
    if (m->s1 && (st = read_all(m, m->s1, &s1))) goto done;
    if (m->s2 && (st = read_all(m, m->s2, &s2))) goto done;
    ents = calloc((size_t)m->n_params * 2 + 1, sizeof *ents);
    names = calloc((size_t)m->n_params * 2 + 1, sizeof *names);
    if (!ents || !names) {
        st = clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
        goto done;
    }
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)XXH64(w, m->total * sizeof *w, 0));
    snprintf(epoch, sizeof epoch, "%" PRId64, info->epoch);
    snprintf(step, sizeof step, "%" PRId64, info->step);
    snprintf(bie, sizeof bie, "%" PRId64, info->batch_in_epoch);
    snprintf(seed, sizeof seed, "%" PRIu64, info->seed);
    snprintf(input, sizeof input, "%dx%dx%d", m->in_c, m->in_h, m->in_w);
    snprintf(ostep, sizeof ostep, "%" PRId64, m->step);
    /* %.17g round-trips a double exactly, so a resumed run uses the same hyperparameters. */
    snprintf(lr, sizeof lr, "%.17g", m->opt.lr);
    snprintf(mom, sizeof mom, "%.17g", m->opt.momentum);
    snprintf(damp, sizeof damp, "%.17g", m->opt.dampening);
    snprintf(nest, sizeof nest, "%d", m->opt.nesterov);
    snprintf(wd, sizeof wd, "%.17g", m->opt.weight_decay);
    snprintf(b1, sizeof b1, "%.17g", m->opt.beta1);
    snprintf(b2, sizeof b2, "%.17g", m->opt.beta2);
    snprintf(eps, sizeof eps, "%.17g", m->opt.eps);
    const char *kind = m->opt.kind == CLCNN_OPTIMIZER_SGD    ? "sgd"
                       : m->opt.kind == CLCNN_OPTIMIZER_ADAM ? "adam"
                                                             : "adamw";
    /* Both files are written and fsync'd under temporary names before either replaces its
     * predecessor, so a failed write (disk full) leaves an existing pair at these paths whole
     * and loadable. Then the state is renamed first: a crash between the two renames leaves an
     * old weights file whose hash no longer matches, which a resume refuses, never a silent
     * mix. */
    int n = 0;
    for (int i = 0; i < m->n_params; i++) {
        if (s1) {
            snprintf(names[n], sizeof names[n], "s1.%s", m->params[i].name);
            entry_for(&m->params[i], names[n], s1, &ents[n]), n++;
        }
        if (s2) {
            snprintf(names[n], sizeof names[n], "s2.%s", m->params[i].name);
            entry_for(&m->params[i], names[n], s2, &ents[n]), n++;
        }
    }
    const char *smeta[] = {"format",
                           ckpt_format,
                           "weights_xxh64",
                           hash,
                           "optimizer",
                           kind,
                           "optimizer_step",
                           ostep,
                           "lr",
                           lr,
                           "momentum",
                           mom,
                           "dampening",
                           damp,
                           "nesterov",
                           nest,
                           "weight_decay",
                           wd,
                           "beta1",
                           b1,
                           "beta2",
                           b2,
                           "eps",
                           eps,
                           "epoch",
                           epoch,
                           "step",
                           step};
    state_path(path, spath, sizeof spath);
    st = clcnn_st_write_tmp(spath, ents, n, smeta, (int)(sizeof smeta / sizeof smeta[0] / 2), &stmp,
                            &m->err);
    if (st) goto done;
    for (int i = 0; i < m->n_params; i++)
        entry_for(&m->params[i], m->params[i].name, w, &ents[i]);
    const char *meta[] = {
        "format", ckpt_format, "spec",          m->spec, "input",          input,
        "epoch",  epoch,       "step",          step,    "batch_in_epoch", bie,
        "seed",   seed,        "weights_xxh64", hash,    "clcnn_version",  clcnn_version()};
    st = clcnn_st_write_tmp(path, ents, m->n_params, meta, (int)(sizeof meta / sizeof meta[0] / 2),
                            &wtmp, &m->err);
    if (st) goto done;
    st = clcnn_st_commit(stmp, spath, &m->err);
    free(stmp);
    stmp = NULL;
    if (st) goto done;
    st = clcnn_st_commit(wtmp, path, &m->err);
    free(wtmp);
    wtmp = NULL;
done:
    if (stmp) remove(stmp);
    if (wtmp) remove(wtmp);
    free(stmp);
    free(wtmp);
    free(w);
    free(s1);
    free(s2);
    free(ents);
    free(names);
    return st;
}

/* Copies tensor t (F32 or F64, shape equal to p's) into dst + p->off. */
static clcnn_status take_tensor(clcnn_model *m, const clcnn_st_file *f, const clcnn_st_tensor *t,
                                const clcnn_param *p, const char *path, float *dst) {
    int same = t->ndim == p->ndim;
    for (int d = 0; same && d < p->ndim; d++)
        same = t->shape[d] == p->shape[d];
    if (!same) {
        char got[128] = "", want[128] = "";
        size_t u = 0, v = 0;
        for (int d = 0; d < t->ndim && u < sizeof got; d++)
            u += (size_t)snprintf(got + u, sizeof got - u, "%s%lld", d ? ", " : "",
                                  (long long)t->shape[d]);
        for (int d = 0; d < p->ndim && v < sizeof want; d++)
            v += (size_t)snprintf(want + v, sizeof want - v, "%s%lld", d ? ", " : "",
                                  (long long)p->shape[d]);
        return clcnn_fail(&m->err, CLCNN_ERR_FORMAT,
                          "%s: tensor '%s' has shape [%s] but the model's %s is [%s]", path,
                          t->name, got, p->name, want);
    }
    const unsigned char *src = clcnn_st_data(f, t);
    if (t->dtype == CLCNN_ST_F32) {
        memcpy(dst + p->off, src, p->numel * sizeof(float));
    } else if (t->dtype == CLCNN_ST_F64) {
        for (size_t j = 0; j < p->numel; j++) {
            double v;
            memcpy(&v, src + j * 8, 8);
            dst[p->off + j] = (float)v;
        }
    } else {
        return clcnn_fail(&m->err, CLCNN_ERR_FORMAT,
                          "%s: tensor '%s' is %s; clcnn loads F32 or F64 weights", path, t->name,
                          clcnn_st_dtype_name(t->dtype));
    }
    return CLCNN_SUCCESS;
}

/* Finds the key prefix under which the model's first parameter appears ("" or "model1."). */
static clcnn_status find_prefix(clcnn_model *m, const clcnn_st_file *f, const char *path,
                                char *prefix, size_t size) {
    const char *first = m->params[0].name;
    size_t fl = strlen(first);
    int found = 0;
    if (clcnn_st_find(f, first)) {
        prefix[0] = '\0';
        return CLCNN_SUCCESS;
    }
    for (int i = 0; i < f->ntensors; i++) {
        const char *nm = f->tensors[i].name;
        size_t l = strlen(nm);
        if (l > fl && nm[l - fl - 1] == '.' && strcmp(nm + l - fl, first) == 0) {
            if (found++)
                return clcnn_fail(&m->err, CLCNN_ERR_FORMAT,
                                  "%s: several tensors end in '.%s' (%.*s, ...): cannot tell "
                                  "which prefix holds the model",
                                  path, first, (int)(l - fl), nm);
            snprintf(prefix, size, "%.*s", (int)(l - fl), nm);
        }
    }
    if (!found)
        return clcnn_fail(&m->err, CLCNN_ERR_FORMAT,
                          "%s: no tensor '%s' (or '<prefix>.%s'): it does not hold this model's "
                          "weights",
                          path, first, first);
    return CLCNN_SUCCESS;
}

static clcnn_status load_weights_from(clcnn_model *m, const clcnn_st_file *f, const char *path,
                                      float *w) {
    char prefix[256], key[400];
    clcnn_status st;
    if ((st = find_prefix(m, f, path, prefix, sizeof prefix))) return st;
    size_t pl = strlen(prefix);
    for (int i = 0; i < m->n_params; i++) {
        snprintf(key, sizeof key, "%s%s", prefix, m->params[i].name);
        const clcnn_st_tensor *t = clcnn_st_find(f, key);
        if (!t)
            return clcnn_fail(&m->err, CLCNN_ERR_FORMAT, "%s: missing tensor '%s' (the model %s)",
                              path, key, m->spec);
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
                              path, nm, m->spec);
    }
    return CLCNN_SUCCESS;
}

/* A clcnn checkpoint records an XXH64 of its weights: a damaged or edited one is refused by
 * --init as by --resume. Plain state_dicts (PyTorch's save_file) have none and load as they
 * are. Once every parameter is loaded, w holds exactly the file's weights. */
static clcnn_status verify_checksum(clcnn_model *m, const clcnn_st_file *f, const char *path,
                                    const float *w) {
    const char *fmt = clcnn_st_meta(f, "format"), *want = clcnn_st_meta(f, "weights_xxh64");
    char hash[24];
    if (!fmt || strcmp(fmt, ckpt_format) != 0 || !want) return CLCNN_SUCCESS;
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)XXH64(w, m->total * sizeof *w, 0));
    if (strcmp(want, hash) != 0)
        return clcnn_fail(&m->err, CLCNN_ERR_FORMAT,
                          "%s: the weights do not match their recorded checksum (file damaged "
                          "or edited)",
                          path);
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_model_load_weights(clcnn_model *m, const char *path) {
    clcnn_st_file f = {0};
    float *w = NULL;
    clcnn_status st;
    if (!m) return CLCNN_ERR_INVALID_ARGUMENT;
    if (!path) return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL path");
    if ((st = clcnn_st_read(&f, path, &m->err))) return st;
    if ((st = read_all(m, m->p, &w))) goto done;
    if ((st = load_weights_from(m, &f, path, w))) goto done;
    if ((st = verify_checksum(m, &f, path, w))) goto done;
    st = write_all(m, m->p, w);
done:
    free(w);
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

clcnn_status clcnn_model_load_checkpoint(clcnn_model *m, const char *path,
                                         clcnn_checkpoint_info *info) {
    clcnn_st_file f = {0}, s = {0};
    float *w = NULL, *s1 = NULL, *s2 = NULL;
    char spath[4200], hash[24];
    clcnn_status st;
    int ok = 1;
    if (!m) return CLCNN_ERR_INVALID_ARGUMENT;
    if (!path || !info) return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL argument");
    if ((st = clcnn_st_read(&f, path, &m->err))) goto done;
    const char *fmt = clcnn_st_meta(&f, "format"), *spec = clcnn_st_meta(&f, "spec");
    if (!fmt || strcmp(fmt, ckpt_format) != 0) {
        st = clcnn_fail(&m->err, CLCNN_ERR_FORMAT,
                        "%s is not a clcnn checkpoint (no format '%s' in its metadata); use "
                        "--init for plain weights",
                        path, ckpt_format);
        goto done;
    }
    if (!spec || strcmp(spec, m->spec) != 0) {
        st = clcnn_fail(&m->err, CLCNN_ERR_FORMAT, "%s holds the model '%s', not '%s'", path,
                        spec ? spec : "?", m->spec);
        goto done;
    }
    if ((st = read_all(m, m->p, &w))) goto done;
    if ((st = load_weights_from(m, &f, path, w))) goto done;
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)XXH64(w, m->total * sizeof *w, 0));
    const char *want = clcnn_st_meta(&f, "weights_xxh64");
    if (!want || strcmp(want, hash) != 0) {
        st = clcnn_fail(&m->err, CLCNN_ERR_FORMAT,
                        "%s: the weights do not match their recorded checksum (file damaged "
                        "or edited)",
                        path);
        goto done;
    }
    info->epoch = meta_i64(&f, "epoch", &ok);
    info->step = meta_i64(&f, "step", &ok);
    info->batch_in_epoch = meta_i64(&f, "batch_in_epoch", &ok);
    info->seed = (uint64_t)meta_i64(&f, "seed", &ok);
    if (!ok || info->epoch < 0 || info->step < 0 || info->batch_in_epoch < 0) {
        st = clcnn_fail(&m->err, CLCNN_ERR_FORMAT, "%s: bad epoch/step/seed metadata", path);
        goto done;
    }
    state_path(path, spath, sizeof spath);
    if ((st = clcnn_st_read(&s, spath, &m->err))) goto done;
    const char *sh = clcnn_st_meta(&s, "weights_xxh64"), *kind = clcnn_st_meta(&s, "optimizer");
    if (!sh || strcmp(sh, hash) != 0) {
        st = clcnn_fail(&m->err, CLCNN_ERR_FORMAT,
                        "%s does not belong to %s (weights checksum differs): the pair is from "
                        "two different saves",
                        spath, path);
        goto done;
    }
    clcnn_optimizer_options o;
    clcnn_optimizer_defaults(&o, CLCNN_OPTIMIZER_SGD);
    if (!kind || (strcmp(kind, "sgd") && strcmp(kind, "adam") && strcmp(kind, "adamw"))) {
        st = clcnn_fail(&m->err, CLCNN_ERR_FORMAT, "%s: unknown optimizer '%s'", spath,
                        kind ? kind : "");
        goto done;
    }
    o.kind = !strcmp(kind, "sgd")    ? CLCNN_OPTIMIZER_SGD
             : !strcmp(kind, "adam") ? CLCNN_OPTIMIZER_ADAM
                                     : CLCNN_OPTIMIZER_ADAMW;
    o.lr = meta_f64(&s, "lr", &ok);
    o.momentum = meta_f64(&s, "momentum", &ok);
    o.dampening = meta_f64(&s, "dampening", &ok);
    o.nesterov = (int)meta_i64(&s, "nesterov", &ok);
    o.weight_decay = meta_f64(&s, "weight_decay", &ok);
    o.beta1 = meta_f64(&s, "beta1", &ok);
    o.beta2 = meta_f64(&s, "beta2", &ok);
    o.eps = meta_f64(&s, "eps", &ok);
    int64_t ostep = meta_i64(&s, "optimizer_step", &ok);
    if (!ok || ostep < 0) {
        st = clcnn_fail(&m->err, CLCNN_ERR_FORMAT, "%s: bad optimizer metadata", spath);
        goto done;
    }
    if ((st = clcnn_model_set_optimizer(m, &o))) goto done;
    cl_mem bufs[2] = {m->s1, m->s2};
    float **hosts[2] = {&s1, &s2};
    for (int k = 0; k < 2; k++) {
        if (!bufs[k]) continue;
        if ((st = read_all(m, bufs[k], hosts[k]))) goto done;
        for (int i = 0; i < m->n_params; i++) {
            char key[64];
            snprintf(key, sizeof key, "s%d.%s", k + 1, m->params[i].name);
            const clcnn_st_tensor *t = clcnn_st_find(&s, key);
            if (!t) {
                st = clcnn_fail(&m->err, CLCNN_ERR_FORMAT, "%s: missing optimizer tensor '%s'",
                                spath, key);
                goto done;
            }
            if ((st = take_tensor(m, &s, t, &m->params[i], spath, *hosts[k]))) goto done;
        }
    }
    if ((st = write_all(m, m->p, w))) goto done;
    if (s1 && (st = write_all(m, m->s1, s1))) goto done;
    if (s2 && (st = write_all(m, m->s2, s2))) goto done;
    m->step = ostep;
done:
    free(w);
    free(s1);
    free(s2);
    clcnn_st_free(&f);
    clcnn_st_free(&s);
    return st;
}

clcnn_status clcnn_checkpoint_peek(const char *path, char *spec, size_t spec_size, int *c, int *h,
                                   int *w, char *err, size_t errsize) {
    clcnn_st_file f = {0};
    clcnn_error e = {{0}};
    clcnn_status st;
    int cc = 0, hh = 0, ww = 0;
    if (!path) return CLCNN_ERR_INVALID_ARGUMENT;
    st = clcnn_st_read(&f, path, &e);
    if (!st) {
        const char *sp = clcnn_st_meta(&f, "spec"), *in = clcnn_st_meta(&f, "input");
        if (!sp || !in || sscanf(in, "%dx%dx%d", &cc, &hh, &ww) != 3)
            st = clcnn_fail(&e, CLCNN_ERR_FORMAT,
                            "%s is not a clcnn checkpoint (no spec/input in its metadata)", path);
        else {
            if (spec && spec_size) snprintf(spec, spec_size, "%s", sp);
            if (c) *c = cc;
            if (h) *h = hh;
            if (w) *w = ww;
        }
    }
    if (st && err && errsize) snprintf(err, errsize, "%s", e.msg);
    clcnn_st_free(&f);
    return st;
}
