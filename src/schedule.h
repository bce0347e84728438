/* Learning-rate schedules as pure functions of the step (PyTorch's CosineAnnealingLR and
 * OneCycleLR); the public entry points are in include/clcnn.h. */
#ifndef CLCNN_SCHEDULE_H
#define CLCNN_SCHEDULE_H

#include "common.h"

/* Whether (kind, lr, total_steps, pct_start) describe a schedule clcnn_schedule_lr can follow
 * (the checks PyTorch's constructors make); the message names the first bad value. */
clcnn_status clcnn_schedule_check(clcnn_schedule_kind kind, double lr, int64_t total_steps,
                                  double pct_start, clcnn_error *e);

#endif
