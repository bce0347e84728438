/* The device-side data set behind clcnn_dataset (dataset.c): the bytes and the epoch order on
 * the device, which the training loop (train.c) gathers batches from. */
#ifndef CLCNN_DEVICE_DATASET_H
#define CLCNN_DEVICE_DATASET_H

#include "context.h"
#include "data/dataset.h"

struct clcnn_dataset {
    clcnn_error err;
    clcnn_context *ctx; /* not owned: must outlive the data set */
    clcnn_dataset_format format;
    int n, c, h, w;
    int max_label;                      /* the largest label, checked against the model's outputs */
    cl_mem images, labels, order, norm; /* uint8 CHW images, uint8 labels, int order, mean|1/std */
    int *host_order;                    /* the order of the current epoch (set_epoch) */
    float *norm_set; /* mean[c] then std[c] as clcnn_dataset_set_normalize took them; NULL: none */
};

#endif
