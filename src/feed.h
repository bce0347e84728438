/* Feeding a model from a data set (feed.c), for the rows above it: the training loop
 * (train.c) and the data-parallel group (replicas.c). */
#ifndef CLCNN_FEED_H
#define CLCNN_FEED_H

#include "data/device_dataset.h"
#include "model.h"

/* What a batch's gather does beyond copying: the epoch key and the crop padding and flip
 * (none: all 0, as evaluation stages). */
typedef struct clcnn_augment {
    uint64_t key;
    int pad, hflip;
} clcnn_augment;

/* Gathers samples [first, first+n) (through the epoch's order when use_order) into the model's
 * input and label buffers, augmented as aug says. */
clcnn_status clcnn_stage_batch(clcnn_model *m, clcnn_dataset *ds, int first, int n, int use_order,
                               clcnn_augment aug);

/* Evaluates samples [first, first+count) of ds in batches of batch_size (evaluation mode):
 * *sum receives the sum of their losses as the device accumulated it, *hits the correct ones. */
clcnn_status clcnn_evaluate_range(clcnn_model *m, clcnn_dataset *ds, int first, int count,
                                  int batch_size, float *sum, int *hits);

#endif
