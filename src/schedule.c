/* Learning-rate schedules: the lr of a global step as PyTorch 1.13's schedulers compute it after
 * that many scheduler.step() calls, in double precision. */
#include "schedule.h"

#include <math.h>
#include <string.h>

/* Indexed by clcnn_schedule_kind. */
static const char *const schedule_names[] = {"constant", "cosine", "onecycle"};
#define N_SCHEDULES ((int)(sizeof schedule_names / sizeof schedule_names[0]))

/* Python's math.pi: the double nearest to pi (M_PI is not in strict C11). */
static const double pi = 3.14159265358979323846;

const char *clcnn_schedule_name(clcnn_schedule_kind kind) {
    return (int)kind >= 0 && (int)kind < N_SCHEDULES ? schedule_names[kind] : "unknown";
}

int clcnn_schedule_parse(const char *name) {
    for (int k = 0; name && k < N_SCHEDULES; k++)
        if (!strcmp(name, schedule_names[k])) return k;
    return -1;
}

clcnn_status clcnn_schedule_check(clcnn_schedule_kind kind, double lr, int64_t total_steps,
                                  double pct_start, clcnn_error *e) {
    if ((int)kind < 0 || (int)kind >= N_SCHEDULES)
        return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "unknown learning-rate schedule %d",
                          (int)kind);
    if (kind == CLCNN_SCHEDULE_CONSTANT) return CLCNN_SUCCESS;
    if (!(lr > 0) || !isfinite(lr))
        return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT,
                          "the %s schedule needs a learning rate greater than 0, not %g",
                          schedule_names[kind], lr);
    if (total_steps <= 0)
        return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT,
                          "the %s schedule needs a positive number of total steps, not %lld",
                          schedule_names[kind], (long long)total_steps);
    if (kind == CLCNN_SCHEDULE_ONECYCLE && !(pct_start >= 0 && pct_start <= 1))
        return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT,
                          "the onecycle schedule's pct_start must be in [0, 1], not %g", pct_start);
    return CLCNN_SUCCESS;
}

/* OneCycleLR._annealing_cos: from start to end as pct goes from 0 to 1. */
static double anneal_cos(double start, double end, double pct) {
    double cos_out = cos(pi * pct) + 1;
    return end + (start - end) / 2.0 * cos_out;
}

/* OneCycleLR.get_lr with two phases (three_phase=False), div_factor 25, final_div_factor 1e4,
 * in the same operations, so the result is PyTorch's to the bit. A division by zero, where
 * PyTorch raises ZeroDivisionError (a phase that ends where it starts), gives NaN. */
static double onecycle(double max_lr, int64_t step, int64_t total, double pct_start) {
    double initial = max_lr / 25.0, min_lr = initial / 1e4;
    double end0 = pct_start * (double)total - 1, end1 = (double)(total - 1);
    double s = (double)step;
    if (step > total) return NAN; /* "Tried to step N times" */
    if (s <= end0) {
        if (end0 == 0) return NAN;
        return anneal_cos(initial, max_lr, s / end0);
    }
    if (end1 == end0) return NAN;
    return anneal_cos(max_lr, min_lr, (s - end0) / (end1 - end0));
}

double clcnn_schedule_lr(clcnn_schedule_kind kind, double lr, int64_t step, int64_t total_steps,
                         double pct_start) {
    if (step < 0 || clcnn_schedule_check(kind, lr, total_steps, pct_start, NULL)) return NAN;
    switch (kind) {
    case CLCNN_SCHEDULE_CONSTANT: return lr;
    case CLCNN_SCHEDULE_COSINE:
        /* CosineAnnealingLR's closed form (eta_min 0). PyTorch steps it recursively, each lr
         * from the last; the two agree to a few ulps per step taken. */
        return lr * (1 + cos(pi * (double)step / (double)total_steps)) / 2;
    case CLCNN_SCHEDULE_ONECYCLE: return onecycle(lr, step, total_steps, pct_start);
    }
    return NAN;
}
