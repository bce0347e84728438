/* The learning-rate schedules (src/schedule.c) on the host: their defining values, the names,
 * and NaN where PyTorch raises. With --table it prints the lr of every step of a set of
 * schedules, and with --ce the double-precision reference of the smoothed cross-entropy (loss
 * and gradient), for tests/check_training_torch.py to compare with PyTorch. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ref/ref.h"
#include "testutil.h"

/* The schedules --table prints: kind, lr, total steps, pct_start. */
static const struct {
    clcnn_schedule_kind kind;
    double lr;
    int64_t total;
    double pct;
} table[] = {
    {CLCNN_SCHEDULE_COSINE, 0.1, 100, 0.3},    {CLCNN_SCHEDULE_COSINE, 0.4, 1173, 0.3},
    {CLCNN_SCHEDULE_COSINE, 1.0, 1, 0.3},      {CLCNN_SCHEDULE_COSINE, 0.05, 7, 0.3},
    {CLCNN_SCHEDULE_ONECYCLE, 0.1, 100, 0.3},  {CLCNN_SCHEDULE_ONECYCLE, 0.4, 1173, 0.25},
    {CLCNN_SCHEDULE_ONECYCLE, 0.2, 2350, 0.3}, {CLCNN_SCHEDULE_ONECYCLE, 1.0, 7, 0.3},
    {CLCNN_SCHEDULE_ONECYCLE, 0.05, 1, 0.3},   {CLCNN_SCHEDULE_ONECYCLE, 0.2, 10, 0.0},
    {CLCNN_SCHEDULE_ONECYCLE, 0.2, 10, 1.0},   {CLCNN_SCHEDULE_ONECYCLE, 0.3, 5, 0.2},
    {CLCNN_SCHEDULE_ONECYCLE, 0.3, 33, 0.45},  {CLCNN_SCHEDULE_CONSTANT, 0.01, 5, 0.3},
};
#define N_TABLE (sizeof table / sizeof table[0])

/* "KIND LR TOTAL PCT STEP VALUE" for steps 0 .. total (the last is PyTorch's last too). */
static void print_table(void) {
    for (size_t i = 0; i < N_TABLE; i++)
        for (int64_t k = 0; k <= table[i].total; k++)
            printf("%s %.17g %lld %.17g %lld %.17g\n", clcnn_schedule_name(table[i].kind),
                   table[i].lr, (long long)table[i].total, table[i].pct, (long long)k,
                   clcnn_schedule_lr(table[i].kind, table[i].lr, k, table[i].total, table[i].pct));
}

/* "ce N K EPS", then the logits, the labels, the loss and the gradient, one line each. */
static void print_ce(void) {
    static const struct {
        int n, k;
        double eps, scale;
    } cases[] = {{5, 10, 0.1, 3.0}, {1, 3, 0.0, 1.0}, {4, 7, 1.0, 2.0}, {16, 10, 0.25, 10.0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int n = cases[c].n, k = cases[c].k;
        double z[160], g[160];
        unsigned char y[16];
        for (int i = 0; i < n * k; i++)
            z[i] = cases[c].scale * sin(1.7 * i + (double)c);
        for (int i = 0; i < n; i++)
            y[i] = (unsigned char)((i * 7 + (int)c) % k);
        double loss = clcnn_ref_cross_entropy_ls(g, NULL, z, y, n, k, cases[c].eps);
        printf("ce %d %d %.17g\n", n, k, cases[c].eps);
        for (int i = 0; i < n * k; i++)
            printf("%.17g%c", z[i], i + 1 < n * k ? ' ' : '\n');
        for (int i = 0; i < n; i++)
            printf("%d%c", y[i], i + 1 < n ? ' ' : '\n');
        printf("%.17g\n", loss);
        for (int i = 0; i < n * k; i++)
            printf("%.17g%c", g[i], i + 1 < n * k ? ' ' : '\n');
    }
}

static int close_to(double a, double b) {
    return fabs(a - b) <= 1e-15 * fabs(b);
}

/* Values that follow from the definitions, without PyTorch. */
static void self_checks(void) {
    const clcnn_schedule_kind cosine = CLCNN_SCHEDULE_COSINE, one = CLCNN_SCHEDULE_ONECYCLE;
    CHECK(clcnn_schedule_lr(CLCNN_SCHEDULE_CONSTANT, 0.3, 17, 10, 0.3) == 0.3);
    CHECK(clcnn_schedule_lr(cosine, 0.4, 0, 100, 0.3) == 0.4);
    CHECK(close_to(clcnn_schedule_lr(cosine, 0.4, 50, 100, 0.3), 0.2));
    CHECK(clcnn_schedule_lr(cosine, 0.4, 100, 100, 0.3) == 0.0);
    /* onecycle: lr/25 first, max_lr at pct_start * total - 1, lr/25/1e4 at total - 1. */
    CHECK(close_to(clcnn_schedule_lr(one, 0.5, 0, 100, 0.3), 0.5 / 25.0));
    CHECK(clcnn_schedule_lr(one, 0.5, 29, 100, 0.3) == 0.5);
    CHECK(close_to(clcnn_schedule_lr(one, 0.5, 99, 100, 0.3), 0.5 / 25.0 / 1e4));
    double prev = 0;
    for (int k = 0; k < 100; k++) {
        double lr = clcnn_schedule_lr(one, 0.5, k, 100, 0.3);
        CHECK_MSG(k < 30 ? lr > prev : lr < prev, "step %d: %g after %g", k, lr, prev);
        prev = lr;
    }
    /* NaN where PyTorch raises, or for bad arguments. */
    CHECK(isnan(clcnn_schedule_lr(one, 0.5, 101, 100, 0.3)));
    CHECK(!isnan(clcnn_schedule_lr(one, 0.5, 100, 100, 0.3)));
    CHECK(isnan(clcnn_schedule_lr(one, 0.3, 0, 5, 0.2))); /* a first phase of zero steps */
    CHECK(isnan(clcnn_schedule_lr(cosine, 0.5, -1, 100, 0.3)));
    CHECK(isnan(clcnn_schedule_lr(cosine, 0.0, 1, 100, 0.3)));
    CHECK(isnan(clcnn_schedule_lr(cosine, 0.1, 1, 0, 0.3)));
    CHECK(isnan(clcnn_schedule_lr(one, 0.1, 1, 10, 1.5)));
    CHECK(isnan(clcnn_schedule_lr(one, 0.1, 1, 10, -0.1)));
    CHECK(isnan(clcnn_schedule_lr((clcnn_schedule_kind)7, 0.1, 1, 10, 0.3)));
    for (int k = 0; k < 3; k++)
        CHECK(clcnn_schedule_parse(clcnn_schedule_name((clcnn_schedule_kind)k)) == k);
    CHECK(clcnn_schedule_parse("linear") == -1 && clcnn_schedule_parse(NULL) == -1);
    CHECK(strcmp(clcnn_schedule_name((clcnn_schedule_kind)9), "unknown") == 0);
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "--table")) {
        print_table();
        return 0;
    }
    if (argc == 2 && !strcmp(argv[1], "--ce")) {
        print_ce();
        return 0;
    }
    if (argc != 1) return fprintf(stderr, "usage: test_schedule [--table | --ce]\n"), 2;
    self_checks();
    return test_finish("test_schedule");
}
