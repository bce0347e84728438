/* Feeding a model from a data set: the normalisation both must agree on, a batch gathered
 * (and augmented) on the device into the model's input, one training step on it, and
 * evaluation. The training loop (train.c) and the data-parallel group (replicas.c) build on
 * these. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "feed.h"

/* A model whose weights were trained on normalised inputs is fed them so: a data set without a
 * normalisation of its own takes the model's, one with another is refused. */
static clcnn_status agree_norm(clcnn_model *m, clcnn_dataset *ds) {
    const float *want = m->norm, *have = ds->norm_set;
    int c = m->in_c, identity = 1;
    if (!want) return CLCNN_SUCCESS;
    if (!have) {
        for (int k = 0; k < c; k++)
            identity = identity && want[k] == 0.0f && want[c + k] == 1.0f;
        if (identity) return CLCNN_SUCCESS; /* what the data set does already */
        clcnn_status st = clcnn_dataset_set_normalize(ds, want, want + c);
        if (st) m->err = ds->err;
        return st;
    }
    for (int k = 0; k < c; k++)
        if (have[k] != want[k] || have[c + k] != want[c + k])
            return clcnn_fail(
                &m->err, CLCNN_ERR_INVALID_ARGUMENT,
                "the data set is normalised with mean %.9g, std %.9g (channel %d) but "
                "the model's weights were trained with mean %.9g, std %.9g "
                "(clcnn_model_get_normalize); clcnn_model_set_normalize changes the "
                "model's",
                (double)have[k], (double)have[c + k], k, (double)want[k], (double)want[c + k]);
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_model_set_normalize(clcnn_model *m, const float *mean, const float *std) {
    if (!m) return CLCNN_ERR_INVALID_ARGUMENT;
    if (!mean != !std)
        return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "mean and std: both or neither");
    float *n = NULL;
    if (mean) {
        for (int k = 0; k < m->in_c; k++)
            if (!(std[k] > 0.0f) || !isfinite(std[k]) || !isfinite(mean[k]))
                return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT,
                                  "normalisation of channel %d: std %g must be > 0 and mean %g "
                                  "finite",
                                  k, (double)std[k], (double)mean[k]);
        if (!(n = malloc(2 * (size_t)m->in_c * sizeof *n)))
            return clcnn_fail(&m->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
        memcpy(n, mean, (size_t)m->in_c * sizeof *n);
        memcpy(n + m->in_c, std, (size_t)m->in_c * sizeof *n);
    }
    free(m->norm);
    m->norm = n;
    return CLCNN_SUCCESS;
}

int clcnn_model_get_normalize(const clcnn_model *m, float *mean, float *std) {
    if (!m || !m->norm) return 0;
    if (mean) memcpy(mean, m->norm, (size_t)m->in_c * sizeof *mean);
    if (std) memcpy(std, m->norm + m->in_c, (size_t)m->in_c * sizeof *std);
    return 1;
}

clcnn_status clcnn_stage_batch(clcnn_model *m, clcnn_dataset *ds, int first, int n, int use_order,
                               clcnn_augment aug) {
    clcnn_status st;
    if (!m || !ds) return CLCNN_ERR_INVALID_ARGUMENT;
    if (ds->ctx != m->ctx)
        return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT,
                          "the data set and the model belong to different contexts");
    if (ds->c != m->in_c || ds->h != m->in_h || ds->w != m->in_w)
        return clcnn_fail(&m->err, CLCNN_ERR_SHAPE,
                          "the data set's images are %d x %d x %d but the model takes %d x %d x %d",
                          ds->c, ds->h, ds->w, m->in_c, m->in_h, m->in_w);
    if ((st = agree_norm(m, ds))) return st;
    if (ds->max_label >= m->out_size)
        return clcnn_fail(&m->err, CLCNN_ERR_SHAPE,
                          "the data set has label %d but the model has only %d outputs",
                          ds->max_label, m->out_size);
    if (n <= 0 || first < 0 || first > ds->n - n)
        return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT,
                          "samples %d..%d are outside the data set of %d", first, first + n - 1,
                          ds->n);
    if ((st = clcnn_model_reserve(m, n))) return st;
    clcnn_kern *k = clcnn_kernel(m->ctx, CLCNN_K_gather_batch);
    int hw = ds->h * ds->w;
    cl_ulong key = aug.key;
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
    CLCNN_ARG(&a, ds->h);
    CLCNN_ARG(&a, ds->w);
    CLCNN_ARG(&a, ds->norm);
    CLCNN_ARG(&a, key);
    CLCNN_ARG(&a, aug.pad);
    CLCNN_ARG(&a, aug.hflip);
    st = clcnn_launch1d(m->ctx, k, &a, (size_t)n * ds->c * hw);
    if (st) m->err = m->ctx->err;
    return st;
}

static const clcnn_augment no_augment = {0, 0, 0};

clcnn_status clcnn_model_train_dataset(clcnn_model *m, clcnn_dataset *ds, int first, int n) {
    clcnn_status st = clcnn_stage_batch(m, ds, first, n, 1, no_augment);
    if (st) return st;
    return clcnn_model_train_staged(m, n);
}

clcnn_status clcnn_evaluate_range(clcnn_model *m, clcnn_dataset *ds, int first, int count,
                                  int batch_size, float *sum, int *hits) {
    clcnn_status st;
    for (int b = first; b < first + count; b += batch_size) {
        int n = first + count - b < batch_size ? first + count - b : batch_size;
        if ((st = clcnn_stage_batch(m, ds, b, n, 0, no_augment))) return st;
        if ((st = clcnn_model_forward(m, n))) return st;
        if ((st = clcnn_model_loss(m, n, 0, 1, b > first))) return st;
    }
    st = clcnn_model_read_acc(m, sum, hits);
    m->last_n = 0; /* the accumulators now hold a sum, not a batch's mean */
    return st;
}

clcnn_status clcnn_model_evaluate(clcnn_model *m, clcnn_dataset *ds, int batch_size,
                                  double *mean_loss, int *correct) {
    clcnn_status st;
    if (!m || !ds) return CLCNN_ERR_INVALID_ARGUMENT;
    if (batch_size <= 0)
        return clcnn_fail(&m->err, CLCNN_ERR_INVALID_ARGUMENT, "batch size %d", batch_size);
    float sum = 0;
    int hits = 0;
    if ((st = clcnn_evaluate_range(m, ds, 0, ds->n, batch_size, &sum, &hits))) return st;
    if (mean_loss) *mean_loss = (double)sum / ds->n;
    if (correct) *correct = hits;
    return CLCNN_SUCCESS;
}
