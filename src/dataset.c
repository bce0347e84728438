/* Data sets on the device: bytes uploaded once (batches are gathered from them by train.c),
 * the epoch order derived from (seed, epoch) so that any epoch can be replayed exactly. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/device_dataset.h"
#include "rng.h"

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

clcnn_status clcnn_dataset_open(clcnn_dataset **out, clcnn_context *ctx, const char *dir,
                                clcnn_dataset_format format, int train) {
    clcnn_dataset *ds;
    clcnn_host_dataset host = {0};
    clcnn_dataset_format fmt = format;
    clcnn_status st = create(out, ctx);
    if (st) return st;
    ds = *out;
    if (!dir) return clcnn_fail(&ds->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL data folder");
    if (fmt == CLCNN_DATASET_AUTO && (st = clcnn_data_detect(dir, &fmt, &ds->err))) return st;
    if ((st = clcnn_data_load(dir, fmt, train, &host, &ds->err))) return st;
    ds->format = fmt;
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
    free(ds->norm_set);
    free(ds);
}

const char *clcnn_dataset_errmsg(const clcnn_dataset *ds) {
    return ds ? ds->err.msg : "NULL data set";
}

clcnn_status clcnn_dataset_errcode(const clcnn_dataset *ds) {
    return ds ? ds->err.code : CLCNN_ERR_INVALID_ARGUMENT;
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
    float *set = ds->norm_set ? ds->norm_set : malloc(2 * (size_t)ds->c * sizeof *set);
    if (!norm || !set) {
        free(norm);
        if (set != ds->norm_set) free(set);
        return clcnn_fail(&ds->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    }
    for (int k = 0; k < ds->c; k++) {
        /* The kernel computes (x - mean) * (1 / std) in float for pixels x in [0, 1]. With std
         * a normal float, 1/std is finite (at most 2^126); the result is monotonic in x, so it
         * is finite for every pixel when it is at x = 0 and x = 1, computed here as there. */
        float inv = std[k] >= FLT_MIN && std[k] <= FLT_MAX ? 1.0f / std[k] : 0.0f;
        float at0 = (0.0f - mean[k]) * inv, at1 = (1.0f - mean[k]) * inv;
        if (!isfinite(mean[k]) || inv == 0.0f || !isfinite(at0) || !isfinite(at1)) {
            free(norm);
            if (set != ds->norm_set) free(set);
            return clcnn_fail(&ds->err, CLCNN_ERR_INVALID_ARGUMENT,
                              "normalisation of channel %d: mean %.9g and std %.9g must be finite "
                              "floats with std at least %.9g (the smallest normal float, so that "
                              "1/std is finite) and (x - mean) / std finite in float for pixels "
                              "x in [0, 1]",
                              k, (double)mean[k], (double)std[k], FLT_MIN);
        }
        norm[k] = mean[k];
        norm[ds->c + k] = inv;
    }
    cl_int rc = clEnqueueWriteBuffer(ds->ctx->queue, ds->norm, CL_TRUE, 0,
                                     2 * (size_t)ds->c * sizeof *norm, norm, 0, NULL, NULL);
    free(norm);
    if (rc != CL_SUCCESS) {
        /* What the device holds is not known: the next batch must not trust the record. */
        free(set);
        ds->norm_set = NULL;
        return ds_cl_fail(ds, rc, "uploading the normalisation");
    }
    ds->norm_set = set;
    memcpy(set, mean, (size_t)ds->c * sizeof *set);
    memcpy(set + ds->c, std, (size_t)ds->c * sizeof *set);
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
