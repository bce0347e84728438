/* Model-level tests through the public API: parameter names and shapes as PyTorch's
 * state_dict, input-dependent shapes (1x28x28 and 3x32x32), initialisation bounds, bit-for-bit
 * repeatability from --seed, shape and argument errors, and a short training run on a
 * learnable synthetic data set that must drive the loss well below its start. */
#include "rng.h"
#include "testutil.h"

static clcnn_context *ctx;

static void check_names(void) {
    clcnn_model *m = NULL;
    CHECK(clcnn_model_create(&m, ctx, "seed", 1, 28, 28, 7) == CLCNN_SUCCESS);
    const char *want[] = {"0.weight", "0.bias",   "2.weight", "2.bias",   "4.weight",
                          "4.bias",   "7.weight", "7.bias",   "8.weight", "8.bias"};
    const int64_t shapes[10][4] = {{32, 1, 5, 5}, {32}, {32, 32, 5, 5}, {32}, {64, 32, 5, 5}, {64},
                                   {64, 576},     {64}, {10, 64},       {10}};
    CHECK(clcnn_model_param_count(m) == 10);
    CHECK(clcnn_model_output_size(m) == 10);
    for (int i = 0; i < 10 && i < clcnn_model_param_count(m); i++) {
        const char *name;
        int ndim;
        int64_t shape[4];
        size_t numel;
        CHECK(clcnn_model_param_info(m, i, &name, &ndim, shape, &numel) == CLCNN_SUCCESS);
        CHECK_MSG(strcmp(name, want[i]) == 0, "param %d is %s, want %s", i, name, want[i]);
        for (int d = 0; d < ndim; d++)
            CHECK_MSG(shape[d] == shapes[i][d], "%s dim %d is %lld", name, d, (long long)shape[d]);
        /* PyTorch's default init: every value within +-1/sqrt(fan_in), and not all equal. */
        float *v = malloc(numel * sizeof *v);
        CHECK(clcnn_model_get_param(m, i, v) == CLCNN_SUCCESS);
        size_t fan_in = numel / (size_t)shape[0];
        if (ndim == 1) fan_in = i == 1 ? 25 : i == 3 ? 800 : i == 5 ? 800 : i == 7 ? 576 : 64;
        double bound = 1.0 / sqrt((double)fan_in), lo = 1, hi = -1;
        for (size_t j = 0; j < numel; j++)
            lo = fmin(lo, v[j]), hi = fmax(hi, v[j]);
        CHECK_MSG(lo >= -bound && hi <= bound && hi - lo > bound, "%s init range [%g, %g] bound %g",
                  name, lo, hi, bound);
        free(v);
    }
    CHECK(strstr(clcnn_model_spec(m), "linear(64) linear(10)") != NULL);
    clcnn_model_free(m);
}

static void check_errors(void) {
    clcnn_model *m = NULL;
    CHECK(clcnn_model_create(&m, ctx, "conv(8,3) linear(10)", 3, 8, 8, 1) == CLCNN_ERR_SHAPE);
    CHECK_MSG(strstr(clcnn_model_errmsg(m), "layer 1 (Linear, column 11) needs a flat input"), "%s",
              clcnn_model_errmsg(m));
    clcnn_model_free(m);
    m = NULL;
    CHECK(clcnn_model_create(&m, ctx, "conv(8,9) flatten linear(10)", 3, 8, 8, 1) ==
          CLCNN_ERR_SHAPE);
    CHECK(strstr(clcnn_model_errmsg(m), "kernel 9 is larger") != NULL);
    clcnn_model_free(m);
    m = NULL;
    CHECK(clcnn_model_create(&m, ctx, "conv(8,3) relu", 3, 8, 8, 1) == CLCNN_ERR_SHAPE);
    CHECK(strstr(clcnn_model_errmsg(m), "flat logits") != NULL);
    clcnn_model_free(m);
    m = NULL;
    CHECK(clcnn_model_create(&m, ctx, "conv(8,3) bogus", 3, 8, 8, 1) == CLCNN_ERR_SPEC);
    CHECK(strstr(clcnn_model_errmsg(m), "column 11") != NULL);
    clcnn_model_free(m);
    m = NULL;
    CHECK(clcnn_model_create(&m, ctx, "seed", 0, 8, 8, 1) == CLCNN_ERR_INVALID_ARGUMENT);
    clcnn_model_free(m);
    m = NULL;
    CHECK(clcnn_model_create(&m, ctx, "flatten linear(3)", 1, 2, 2, 1) == CLCNN_SUCCESS);
    float x[8] = {0}, logits[6];
    uint8_t bad[2] = {1, 3}, good[2] = {0, 2};
    CHECK(clcnn_model_train_batch(m, x, bad, 2) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(strstr(clcnn_model_errmsg(m), "label 3 of sample 1") != NULL);
    CHECK(clcnn_model_last_loss(m, NULL, NULL) == CLCNN_ERR_STATE);
    CHECK(clcnn_model_train_batch(m, x, good, 0) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_model_predict(m, x, 2, logits) == CLCNN_SUCCESS);
    clcnn_optimizer_options o;
    clcnn_optimizer_defaults(&o, CLCNN_OPTIMIZER_SGD);
    o.lr = 0;
    CHECK(clcnn_model_set_optimizer(m, &o) == CLCNN_ERR_INVALID_ARGUMENT);
    clcnn_optimizer_defaults(&o, CLCNN_OPTIMIZER_SGD);
    o.nesterov = 1;
    CHECK(clcnn_model_set_optimizer(m, &o) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(strstr(clcnn_model_errmsg(m), "Nesterov") != NULL);
    clcnn_optimizer_defaults(&o, CLCNN_OPTIMIZER_ADAM);
    o.beta1 = 1.0;
    CHECK(clcnn_model_set_optimizer(m, &o) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_model_param_info(m, 5, NULL, NULL, NULL, NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_model_get_param(m, -1, logits) == CLCNN_ERR_INVALID_ARGUMENT);
    clcnn_model_free(m);
    clcnn_model_free(NULL);
    CHECK(clcnn_model_train_batch(NULL, x, good, 2) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(strcmp(clcnn_model_errmsg(NULL), "NULL model") == 0);
}

/* A learnable task: class k images are noise plus a bright k-th horizontal band. */
static void make_data(float *x, uint8_t *y, int n, clcnn_rng *r) {
    for (int i = 0; i < n; i++) {
        int k = (int)clcnn_rng_below(r, 10);
        y[i] = (uint8_t)k;
        for (int p = 0; p < 3 * 20 * 20; p++) {
            int row = (p / 20) % 20;
            x[i * 1200 + p] = 0.3f * (float)clcnn_rng_uniform(r) + (row / 2 == k ? 0.7f : 0.0f);
        }
    }
}

static void check_training(void) {
    clcnn_model *a = NULL, *b = NULL;
    clcnn_rng r;
    enum { B = 32 };
    float *x = malloc(B * 1200 * sizeof *x);
    uint8_t y[B];
    clcnn_rng_seed(&r, 5);
    CHECK(clcnn_model_create(&a, ctx, "seed-relu", 3, 20, 20, 123) == CLCNN_SUCCESS);
    CHECK(clcnn_model_create(&b, ctx, "seed-relu", 3, 20, 20, 123) == CLCNN_SUCCESS);
    clcnn_optimizer_options o;
    clcnn_optimizer_defaults(&o, CLCNN_OPTIMIZER_SGD);
    o.lr = 0.05;
    o.momentum = 0.9;
    CHECK(clcnn_model_set_optimizer(a, &o) == CLCNN_SUCCESS);
    CHECK(clcnn_model_set_optimizer(b, &o) == CLCNN_SUCCESS);
    float first = 0, last = 0, la, lb;
    double tail = 0;
    int steps = 60;
    for (int s = 0; s < steps; s++) {
        make_data(x, y, B, &r);
        CHECK(clcnn_model_train_batch(a, x, y, B) == CLCNN_SUCCESS);
        CHECK(clcnn_model_last_loss(a, &la, NULL) == CLCNN_SUCCESS);
        if (s < 3) { /* same seed, same data: bit-for-bit equal losses */
            CHECK(clcnn_model_train_batch(b, x, y, B) == CLCNN_SUCCESS);
            CHECK(clcnn_model_last_loss(b, &lb, NULL) == CLCNN_SUCCESS);
            CHECK_MSG(memcmp(&la, &lb, sizeof la) == 0, "step %d: %.9g vs %.9g", s, la, lb);
        }
        if (s == 0) first = la;
        if (s >= steps - 10) tail += la / 10.0;
        last = la;
    }
    printf(
        "seed-relu on synthetic bands: loss %.4f at step 1, %.3g mean of the last 10 (last %.3g)\n",
        first, tail, last);
    CHECK_MSG(first > 2.0 && tail < 0.5 * first, "loss went from %.4f to %.4f", first, tail);
    /* Evaluation on fresh data agrees with the trained state. */
    make_data(x, y, B, &r);
    int correct = 0;
    float *logits = malloc(B * 10 * sizeof *logits);
    CHECK(clcnn_model_eval_batch(a, x, y, B) == CLCNN_SUCCESS);
    CHECK(clcnn_model_last_loss(a, &la, &correct) == CLCNN_SUCCESS);
    CHECK(clcnn_model_predict(a, x, B, logits) == CLCNN_SUCCESS);
    int pc = 0;
    for (int i = 0; i < B; i++) {
        int best = 0;
        for (int k = 1; k < 10; k++)
            if (logits[i * 10 + k] > logits[i * 10 + best]) best = k;
        pc += best == y[i];
    }
    CHECK_MSG(pc == correct, "predict says %d correct, eval says %d", pc, correct);
    printf("held-out batch: loss %.3g, %d/%d correct\n", la, correct, B);
    free(logits);
    free(x);
    clcnn_model_free(a);
    clcnn_model_free(b);
}

int main(void) {
    clcnn_devices *devs = NULL;
    ctx = test_context(&devs);
    check_names();
    check_errors();
    check_training();
    clcnn_context_free(ctx);
    clcnn_devices_free(devs);
    return test_finish("test_model");
}
