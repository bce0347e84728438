/* Trains a small CNN on data made in memory (class k = a bright k-th row band), then checks
 * itself on fresh samples. The embedding path end to end: device, model, data set from the
 * embedder's arrays, an epoch loop with a progress callback, evaluation, inference. */
#include <stdio.h>
#include <stdlib.h>

#include <clcnn.h>

enum { N = 512, C = 1, H = 16, W = 16 };

static void make(uint8_t *img, uint8_t *lab, int n, unsigned seed) {
    srand(seed);
    for (int i = 0; i < n; i++) {
        lab[i] = (uint8_t)(rand() % 8);
        for (int p = 0; p < C * H * W; p++)
            img[i * C * H * W + p] = (uint8_t)(rand() % 64 + ((p / W) / 2 == lab[i] ? 160 : 0));
    }
}

static int progress(void *user, int64_t batch, int64_t batches, float loss) {
    const clcnn_train_options *o = user;
    printf("  epoch %lld batch %lld/%lld loss %.4f\n", (long long)o->epoch, (long long)batch,
           (long long)batches, loss);
    return 0; /* non-zero would stop the epoch */
}

int main(void) {
    static uint8_t img[N * C * H * W], lab[N];
    clcnn_devices *devs = NULL;
    clcnn_context *ctx = NULL;
    clcnn_model *model = NULL;
    clcnn_dataset *train = NULL, *test = NULL;
    int idx, correct = 0, rc = 1;
    double loss = 0;
    if (clcnn_devices_create(&devs, NULL) || clcnn_devices_select(devs, -1, -1, &idx) ||
        clcnn_context_create(&ctx, devs, idx, NULL)) {
        fprintf(stderr, "no device: %s%s\n", clcnn_devices_errmsg(devs), clcnn_context_errmsg(ctx));
        goto done;
    }
    make(img, lab, N, 1);
    if (clcnn_dataset_from_memory(&train, ctx, img, lab, N, C, H, W) ||
        clcnn_model_create(&model, ctx, "conv(8,3,pad=1) relu maxpool(2) flatten linear(8)", C, H,
                           W, 42)) {
        fprintf(stderr, "setup: %s%s\n", clcnn_dataset_errmsg(train), clcnn_model_errmsg(model));
        goto done;
    }
    clcnn_train_options opts;
    clcnn_train_options_init(&opts);
    opts.batch_size = 32, opts.seed = 7, opts.every = 8;
    opts.progress = progress, opts.user = &opts;
    for (opts.epoch = 1; opts.epoch <= 3; opts.epoch++) {
        opts.global_step = clcnn_model_step_count(model); /* progress every 8 steps */
        if (clcnn_model_train_epoch(model, train, &opts, NULL)) {
            fprintf(stderr, "training: %s\n", clcnn_model_errmsg(model));
            goto done;
        }
    }
    make(img, lab, N, 2);
    if (clcnn_dataset_from_memory(&test, ctx, img, lab, N, C, H, W) ||
        clcnn_model_evaluate(model, test, 128, &loss, &correct)) {
        fprintf(stderr, "evaluation: %s\n", clcnn_model_errmsg(model));
        goto done;
    }
    printf("fresh samples: loss %.4f, accuracy %.3f\n", loss, (double)correct / N);
    rc = correct > N * 9 / 10 ? 0 : 1;
done:
    clcnn_dataset_free(test);
    clcnn_dataset_free(train);
    clcnn_model_free(model);
    clcnn_context_free(ctx);
    clcnn_devices_free(devs);
    return rc;
}
