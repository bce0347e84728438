/* Data sets on the device: bytes uploaded once, batches gathered and scaled by a kernel, the
 * epoch order derived from (seed, epoch) so that any epoch can be replayed exactly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/dataset.h"
#include "model.h"
#include "rng.h"

struct clcnn_dataset {
    clcnn_error err;
    clcnn_context *ctx;
    clcnn_dataset_format format;
    int n, c, h, w;
    int max_label;
    cl_mem images, labels, order, norm;
    int *host_order;
};

static clcnn_status ds_cl_fail(clcnn_dataset *ds, cl_int rc, const char *what) {
    return clcnn_fail(&ds->err, (clcnn_status)rc, "%s failed: %s", what, clcnn_cl_error_name(rc));
}

static clcnn_status upload(clcnn_dataset *ds, cl_mem *buf, const void *src, size_t bytes,
                           const char *what) {
    cl_int rc;
    const clcnn_device_info *in = &ds->ctx->info;
    if (in->max_alloc_bytes && bytes > in->max_alloc_bytes)
        return clcnn_fail(&ds->err, CLCNN_ERR_SHAPE,
                          "the data set's %s take %zu bytes, more than %s allows in one "
                          "allocation (%llu bytes)",
                          what, bytes, in->name, (unsigned long long)in->max_alloc_bytes);
    *buf = clCreateBuffer(ds->ctx->context, CL_MEM_READ_WRITE, bytes ? bytes : 4, NULL, &rc);
    if (rc != CL_SUCCESS) return ds_cl_fail(ds, rc, "allocating the data set on the device");
    if (bytes && src) {
        rc = clEnqueueWriteBuffer(ds->ctx->queue, *buf, CL_TRUE, 0, bytes, src, 0, NULL, NULL);
        if (rc != CL_SUCCESS) return ds_cl_fail(ds, rc, "uploading the data set");
    }
    return CLCNN_SUCCESS;
}

/* Shared tail of both constructors: device copies, identity normalisation, file order. */
static clcnn_status finish(clcnn_dataset *ds, const uint8_t *images, const uint8_t *labels) {
    clcnn_status st;
    size_t per = (size_t)ds->c * ds->h * ds->w;
    /* The gather kernel indexes within an image with 32-bit ints (across images with 64). */
    if (per > (size_t)1 << 28)
        return clcnn_fail(&ds->err, CLCNN_ERR_SHAPE,
                          "images of %d x %d x %d = %zu elements are too large (at most 2^28)",
                          ds->c, ds->h, ds->w, per);
    ds->max_label = -1;
    for (int i = 0; i < ds->n; i++)
        if (labels[i] > ds->max_label) ds->max_label = labels[i];
    if ((st = upload(ds, &ds->images, images, (size_t)ds->n * per, "images"))) return st;
    if ((st = upload(ds, &ds->labels, labels, (size_t)ds->n, "labels"))) return st;
    if ((st = upload(ds, &ds->order, NULL, (size_t)ds->n * sizeof(int), "sample order"))) return st;
    if (!(ds->host_order = malloc((size_t)ds->n * sizeof(int) + 4)))
        return clcnn_fail(&ds->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    float *norm = malloc(2 * (size_t)ds->c * sizeof *norm);
    if (!norm) return clcnn_fail(&ds->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    for (int k = 0; k < ds->c; k++)
        norm[k] = 0.0f, norm[ds->c + k] = 1.0f;
    st = upload(ds, &ds->norm, norm, 2 * (size_t)ds->c * sizeof *norm, "normalisation");
    free(norm);
    if (st) return st;
    return clcnn_dataset_set_epoch(ds, 0, 0, 0);
}

static clcnn_status create(clcnn_dataset **out, clcnn_context *ctx) {
    clcnn_dataset *ds;
    if (!out) return CLCNN_ERR_INVALID_ARGUMENT;
    *out = ds = calloc(1, sizeof *ds);
    if (!ds) return CLCNN_ERR_OUT_OF_HOST_MEMORY;
    ds->ctx = ctx;
    if (!ctx) return clcnn_fail(&ds->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL context");
    return CLCNN_SUCCESS;
}

int clcnn_dataset_format_parse(const char *name) {
    int f = name ? clcnn_data_format_parse(name) : -1;
    return f;
}

const char *clcnn_dataset_format_name(clcnn_dataset_format format) {
    return clcnn_data_format_name((clcnn_data_format)format);
}

clcnn_status clcnn_dataset_open(clcnn_dataset **out, clcnn_context *ctx, const char *dir,
                                clcnn_dataset_format format, int train) {
    clcnn_dataset *ds;
    clcnn_host_dataset host = {0};
    clcnn_data_format fmt = (clcnn_data_format)format;
    clcnn_status st = create(out, ctx);
    if (st) return st;
    ds = *out;
    if (!dir) return clcnn_fail(&ds->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL data folder");
    if (fmt == CLCNN_DATA_AUTO && (st = clcnn_data_detect(dir, &fmt, &ds->err))) return st;
    if ((st = clcnn_data_load(dir, fmt, train, &host, &ds->err))) return st;
    ds->format = (clcnn_dataset_format)fmt;
    ds->n = host.n, ds->c = host.c, ds->h = host.h, ds->w = host.w;
    st = finish(ds, host.images, host.labels);
    clcnn_host_dataset_free(&host);
    return st;
}

clcnn_status clcnn_dataset_from_memory(clcnn_dataset **out, clcnn_context *ctx,
                                       const uint8_t *images, const uint8_t *labels, int n,
                                       int channels, int height, int width) {
    clcnn_status st = create(out, ctx);
    if (st) return st;
    clcnn_dataset *ds = *out;
    if (!images || !labels || n <= 0 || channels <= 0 || height <= 0 || width <= 0 ||
        (double)n * channels * height * width > 1e12)
        return clcnn_fail(&ds->err, CLCNN_ERR_INVALID_ARGUMENT,
                          "invalid in-memory data set (n %d, shape %d x %d x %d)", n, channels,
                          height, width);
    ds->n = n, ds->c = channels, ds->h = height, ds->w = width;
    ds->format = CLCNN_DATASET_AUTO;
    return finish(ds, images, labels);
}

void clcnn_dataset_free(clcnn_dataset *ds) {
    if (!ds) return;
    cl_mem *bufs[] = {&ds->images, &ds->labels, &ds->order, &ds->norm};
    if (ds->ctx && ds->ctx->queue) clFinish(ds->ctx->queue);
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (*bufs[i]) clReleaseMemObject(*bufs[i]);
    free(ds->host_order);
    free(ds);
}

const char *clcnn_dataset_errmsg(const clcnn_dataset *ds) {
    return ds ? ds->err.msg : "NULL data set";
}

int clcnn_dataset_size(const clcnn_dataset *ds) {
    return ds ? ds->n : 0;
}

void clcnn_dataset_shape(const clcnn_dataset *ds, int *c, int *h, int *w) {
    if (c) *c = ds ? ds->c : 0;
    if (h) *h = ds ? ds->h : 0;
    if (w) *w = ds ? ds->w : 0;
}

clcnn_dataset_format clcnn_dataset_format_of(const clcnn_dataset *ds) {
    return ds ? ds->format : CLCNN_DATASET_AUTO;
}

clcnn_status clcnn_dataset_set_normalize(clcnn_dataset *ds, const float *mean, const float *std) {
    if (!ds) return CLCNN_ERR_INVALID_ARGUMENT;
    if (!mean || !std) return clcnn_fail(&ds->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL mean/std");
    float *norm = malloc(2 * (size_t)ds->c * sizeof *norm);
    if (!norm) return clcnn_fail(&ds->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    for (int k = 0; k < ds->c; k++) {
        if (!(std[k] > 0.0f) || !isfinite(std[k]) || !isfinite(mean[k])) {
            free(norm);
            return clcnn_fail(&ds->err, CLCNN_ERR_INVALID_ARGUMENT,
                              "normalisation of channel %d: std %g must be > 0 and mean %g finite",
                              k, (double)std[k], (double)mean[k]);
        }
        norm[k] = mean[k];
        norm[ds->c + k] = 1.0f / std[k];
    }
    cl_int rc = clEnqueueWriteBuffer(ds->ctx->queue, ds->norm, CL_TRUE, 0,
                                     2 * (size_t)ds->c * sizeof *norm, norm, 0, NULL, NULL);
    free(norm);
    if (rc != CL_SUCCESS) return ds_cl_fail(ds, rc, "uploading the normalisation");
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_dataset_set_epoch(clcnn_dataset *ds, uint64_t seed, int64_t epoch, int shuffle) {
    if (!ds) return CLCNN_ERR_INVALID_ARGUMENT;
    for (int i = 0; i < ds->n; i++)
        ds->host_order[i] = i;
    if (shuffle) {
        clcnn_rng r;
        /* Mix the epoch into the seed: epochs get unrelated permutations, and a resumed run
         * recreates the same one without saving generator state. */
        clcnn_rng_seed(&r, seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(epoch + 1)));
        clcnn_rng_shuffle(&r, ds->host_order, ds->n);
    }
    cl_int rc = clEnqueueWriteBuffer(ds->ctx->queue, ds->order, CL_TRUE, 0,
                                     (size_t)ds->n * sizeof(int), ds->host_order, 0, NULL, NULL);
    if (rc != CL_SUCCESS) return ds_cl_fail(ds, rc, "uploading the sample order");
    return CLCNN_SUCCESS;
}

/* Gathers samples [first, first+n) (through the order when use_order) into the model's
 * input and label buffers. */
static clcnn_status stage(clcnn_model *m, clcnn_dataset *ds, int first, int n, int use_order) {
    clcnn_status st;
    if (!m || !ds) return CLCNN_ERR_INVALID_ARGUMENT;
    if (ds->ctx != m->ctx)
        return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT,
                          "the data set and the model belong to different contexts");
    if (ds->c != m->in_c || ds->h != m->in_h || ds->w != m->in_w)
        return clcnn_fail(&m->err, CLCNN_ERR_SHAPE,
                          "the data set's images are %d x %d x %d but the model takes %d x %d x %d",
                          ds->c, ds->h, ds->w, m->in_c, m->in_h, m->in_w);
    if (ds->max_label >= m->out_size)
        return clcnn_fail(&m->err, CLCNN_ERR_SHAPE,
                          "the data set has label %d but the model has only %d outputs",
                          ds->max_label, m->out_size);
    if (n <= 0 || first < 0 || first > ds->n - n)
        return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT,
                          "samples %d..%d are outside the data set of %d", first, first + n - 1,
                          ds->n);
    if ((st = clcnn_model_reserve(m, n))) return st;
    clcnn_kern *k = clcnn_kernel_must(m->ctx, "gather_batch");
    int hw = ds->h * ds->w;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, m->act[0]);
    CLCNN_ARG(&a, m->labels);
    CLCNN_ARG(&a, ds->images);
    CLCNN_ARG(&a, ds->labels);
    CLCNN_ARG(&a, ds->order);
    CLCNN_ARG(&a, use_order);
    CLCNN_ARG(&a, first);
    CLCNN_ARG(&a, n);
    CLCNN_ARG(&a, ds->c);
    CLCNN_ARG(&a, hw);
    CLCNN_ARG(&a, ds->norm);
    st = clcnn_launch1d(m->ctx, k, &a, (size_t)n * ds->c * hw);
    if (st) memcpy(m->err.msg, m->ctx->err.msg, sizeof m->err.msg);
    return st;
}

clcnn_status clcnn_model_train_dataset(clcnn_model *m, clcnn_dataset *ds, int first, int n) {
    clcnn_status st = stage(m, ds, first, n, 1);
    if (st) return st;
    return clcnn_model_train_staged(m, n);
}

clcnn_status clcnn_model_evaluate(clcnn_model *m, clcnn_dataset *ds, int batch_size,
                                  double *mean_loss, int *correct) {
    clcnn_status st;
    if (!m || !ds) return CLCNN_ERR_INVALID_ARGUMENT;
    if (batch_size <= 0)
        return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "batch size %d", batch_size);
    for (int first = 0; first < ds->n; first += batch_size) {
        int n = ds->n - first < batch_size ? ds->n - first : batch_size;
        if ((st = stage(m, ds, first, n, 0))) return st;
        if ((st = clcnn_model_forward(m, n))) return st;
        if ((st = clcnn_model_loss(m, n, 0, 1, first > 0))) return st;
    }
    float sum = 0;
    int hits = 0;
    if ((st = clcnn_model_read_acc(m, &sum, &hits))) return st;
    if (mean_loss) *mean_loss = (double)sum / ds->n;
    if (correct) *correct = hits;
    m->last_n = 0; /* the accumulators now hold a sum, not a batch's mean */
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_model_train_epoch(clcnn_model *m, clcnn_dataset *ds, int batch_size,
                                     uint64_t seed, int64_t epoch, int shuffle, int every,
                                     clcnn_progress_fn fn, void *user, int64_t *batches_done) {
    clcnn_status st;
    if (batches_done) *batches_done = 0;
    if (!m || !ds) return CLCNN_ERR_INVALID_ARGUMENT;
    if (batch_size <= 0 || (fn && every <= 0))
        return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT,
                          "batch size %d and report interval %d must be positive", batch_size,
                          every);
    if ((st = clcnn_dataset_set_epoch(ds, seed, epoch, shuffle))) {
        memcpy(m->err.msg, ds->err.msg, sizeof m->err.msg);
        return st;
    }
    int64_t nb = (ds->n + batch_size - 1) / batch_size;
    for (int64_t b = 0; b < nb; b++) {
        int first = (int)(b * batch_size),
            n = ds->n - first < batch_size ? ds->n - first : batch_size;
        if ((st = clcnn_model_train_dataset(m, ds, first, n))) return st;
        if (batches_done) *batches_done = b + 1;
        if (fn && ((b + 1) % every == 0 || b + 1 == nb)) {
            float loss = 0;
            if ((st = clcnn_model_last_loss(m, &loss, NULL))) return st;
            if (!isfinite(loss))
                return clcnn_fail(
                    &m->err, CLCNN_ERR_NUMERIC, "the loss is %s at batch %lld of epoch %lld",
                    isnan(loss) ? "NaN" : "infinite", (long long)(b + 1), (long long)epoch);
            if (fn(user, b + 1, nb, loss)) break;
        }
    }
    if (!fn) {
        cl_int rc = clFinish(m->ctx->queue);
        if (rc != CL_SUCCESS)
            return clcnn_fail(&m->err, (clcnn_status)rc, "clFinish failed: %s",
                              clcnn_cl_error_name(rc));
    }
    return CLCNN_SUCCESS;
}
