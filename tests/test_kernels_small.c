/* Every kernel family once, on tiny shapes, through the public API: small models with stride-1
 * and strided convolutions (with and without bias), 2x2 and overlapping padded max-pools, ReLU,
 * linear layers, cross-entropy, SGD (momentum, Nesterov, weight decay), Adam and AdamW, the
 * on-device batch gather, evaluation and inference. Sized for oclgrind, which interprets every
 * work-item (tests/oclgrind_check.sh runs this under it, once per GEMM backend); on a real
 * device it takes a fraction of a second.
 *
 * It prints one line of figures per model (losses of each step, evaluation loss, a checksum of
 * the logits) so that a run under oclgrind can be compared with a run on another device, and
 * fails when any figure is not finite or any call fails. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "clcnn.h"

#define N_IMG 7 /* two batches of 4: the last one partial */
#define BATCH 4

typedef struct model_case {
    const char *spec;
    int c, h, w;
    clcnn_optimizer_kind opt;
    double momentum, weight_decay;
    int nesterov;
} model_case;

static int fail(const char *what, const char *msg) {
    fprintf(stderr, "test_kernels_small: %s: %s\n", what, msg);
    return 1;
}

static int run_case(clcnn_context *ctx, const model_case *mc) {
    int pixels = mc->c * mc->h * mc->w, rc = 1, correct = 0;
    uint8_t labels[N_IMG], *images = malloc((size_t)N_IMG * pixels);
    float logits[N_IMG * 10], *x = malloc((size_t)N_IMG * pixels * sizeof *x);
    clcnn_dataset *ds = NULL;
    clcnn_model *m = NULL;
    clcnn_optimizer_options o;
    double eval_loss = 0, sum = 0;
    if (!images || !x) {
        free(images);
        free(x);
        return fail(mc->spec, "out of memory");
    }
    for (int i = 0; i < N_IMG; i++) {
        labels[i] = (uint8_t)((i * 3) % 10);
        for (int p = 0; p < pixels; p++)
            images[i * pixels + p] = (uint8_t)((i * 37 + p * 11 + (p % 7) * labels[i]) % 256);
    }
    for (int i = 0; i < N_IMG * pixels; i++)
        x[i] = images[i] / 255.0f;
    if (clcnn_dataset_from_memory(&ds, ctx, images, labels, N_IMG, mc->c, mc->h, mc->w)) {
        fail(mc->spec, clcnn_dataset_errmsg(ds));
        goto out;
    }
    if (clcnn_model_create(&m, ctx, mc->spec, mc->c, mc->h, mc->w, 5)) {
        fail(mc->spec, clcnn_model_errmsg(m));
        goto out;
    }
    clcnn_optimizer_defaults(&o, mc->opt);
    o.momentum = mc->momentum;
    o.nesterov = mc->nesterov;
    o.weight_decay = mc->weight_decay;
    if (clcnn_model_set_optimizer(m, &o)) {
        fail(mc->spec, clcnn_model_errmsg(m));
        goto out;
    }
    printf("%s |", clcnn_model_spec(m));
    /* Two epochs from the data set (shuffled, gathered on the device), one step from host
     * memory (a partial batch), then inference on more samples than any batch so far (the
     * per-batch buffers are reallocated). */
    for (int e = 0; e < 2; e++) {
        for (int first = 0; first < N_IMG; first += BATCH) {
            float loss = NAN;
            int n = N_IMG - first < BATCH ? N_IMG - first : BATCH;
            if (first == 0 && clcnn_dataset_set_epoch(ds, 9, e, 1)) {
                fail(mc->spec, clcnn_dataset_errmsg(ds));
                goto out;
            }
            if (clcnn_model_train_dataset(m, ds, first, n) ||
                clcnn_model_last_loss(m, &loss, NULL)) {
                fail(mc->spec, clcnn_model_errmsg(m));
                goto out;
            }
            printf(" %.6g", loss);
            if (!isfinite(loss)) {
                fail(mc->spec, "a training loss is not finite");
                goto out;
            }
        }
    }
    float loss = NAN;
    if (clcnn_model_train_batch(m, x, labels, 3) || clcnn_model_last_loss(m, &loss, NULL) ||
        clcnn_model_evaluate(m, ds, BATCH, &eval_loss, &correct) ||
        clcnn_model_predict(m, x, N_IMG, logits)) {
        fail(mc->spec, clcnn_model_errmsg(m));
        goto out;
    }
    for (int i = 0; i < N_IMG * 10; i++)
        sum += logits[i] * (1.0 + (i % 5));
    printf(" %.6g | eval %.6g %d | logits %.6g\n", loss, eval_loss, correct, sum);
    if (!isfinite(loss) || !isfinite(eval_loss) || !isfinite(sum)) {
        fail(mc->spec, "a figure is not finite");
        goto out;
    }
    rc = 0;
out:
    clcnn_model_free(m);
    clcnn_dataset_free(ds);
    free(images);
    free(x);
    return rc;
}

int main(void) {
    static const model_case cases[] = {
        /* stride-1 conv (the direct path on CPU devices; OW 8 has its own kernel variant),
         * 2x2 max-pool, strided conv (im2col + GEMM), linear layers, SGD with everything */
        {"conv(4,3,pad=1) relu maxpool(2) conv(6,3,stride=2,pad=1) relu flatten linear(12) relu "
         "linear(10)",
         3, 8, 8, CLCNN_OPTIMIZER_SGD, 0.9, 1e-3, 1},
        /* K 5, no bias, odd sizes (OW 7), overlapping padded max-pool, Adam */
        {"conv(3,5,pad=2,bias=0) maxpool(3,stride=2,pad=1) flatten linear(10,bias=0)", 1, 7, 9,
         CLCNN_OPTIMIZER_ADAM, 0, 0, 0},
        /* OW 16, 1x1 kernel, stride 3 pool with gaps, AdamW */
        {"conv(5,1) relu conv(4,3,pad=1) maxpool(2,stride=3) flatten linear(10)", 2, 16, 16,
         CLCNN_OPTIMIZER_ADAMW, 0, 0.01, 0},
        /* 4 x 32 x 32 = 4096 output pixels in a batch: the split-K weight gradient (its partial
         * sums and gemm_reduce) on the cpu backend */
        {"conv(2,3,stride=2,pad=1) flatten linear(10)", 1, 64, 64, CLCNN_OPTIMIZER_SGD, 0, 0, 0},
        /* 6 x 5 x 5 = 150 taps in the second conv, whose pool is fused forward and backward
         * (the gradient goes straight to pixel rows and NCHW for the input gradient); odd
         * 2x2 pool input (7x7) */
        {"conv(6,3,pad=1) conv(5,5,pad=2) maxpool(2) flatten linear(10)", 1, 7, 7,
         CLCNN_OPTIMIZER_SGD, 0.9, 0, 0},
        /* a first convolution with its pool fused both ways (no input gradient), odd 9x11
         * maps: the pool's uncovered last row and column */
        {"conv(4,3,pad=1) maxpool(2) flatten linear(10)", 2, 9, 11, CLCNN_OPTIMIZER_SGD, 0, 0, 0},
        /* padding 3 > K-1 on the second convolution: its input gradient cannot be a
         * convolution, so its pool is fused forward but not backward (pool backward, then
         * im2col + col2im) */
        {"conv(3,3,pad=1) conv(4,3,pad=3) maxpool(2) flatten linear(10)", 1, 6, 6,
         CLCNN_OPTIMIZER_SGD, 0, 0, 0},
    };
    clcnn_devices *devs = NULL;
    clcnn_context *ctx = NULL;
    int idx = -1, failures = 0;
    if (clcnn_devices_create(&devs, NULL) != CLCNN_SUCCESS || clcnn_devices_count(devs) == 0) {
        fprintf(stderr, "no OpenCL device: skipping (%s)\n", clcnn_devices_errmsg(devs));
        clcnn_devices_free(devs);
        return 77;
    }
    if (clcnn_devices_select(devs, -1, -1, &idx) || clcnn_context_create(&ctx, devs, idx, NULL)) {
        fprintf(stderr, "context creation failed: %s%s\n", clcnn_devices_errmsg(devs),
                clcnn_context_errmsg(ctx));
        clcnn_context_free(ctx);
        clcnn_devices_free(devs);
        return 1;
    }
    clcnn_device_info info;
    if (clcnn_context_device(ctx, &info) == CLCNN_SUCCESS)
        fprintf(stderr, "device: %s (%s)\n", info.name, info.platform_name);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        failures += run_case(ctx, &cases[i]);
    clcnn_context_free(ctx);
    clcnn_devices_free(devs);
    if (failures) fprintf(stderr, "test_kernels_small: %d model(s) failed\n", failures);
    return failures ? 1 : 0;
}
