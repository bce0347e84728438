/* The loss: softmax cross-entropy over the logits, with its gradient (cl/loss.cl). */
#ifndef CLCNN_LOSS_H
#define CLCNN_LOSS_H

#include "context.h"

/* Per-sample cross-entropy over logits (N,K) with byte labels, as
 * nn.CrossEntropyLoss(label_smoothing=smoothing) (0 <= smoothing <= 1): loss and correct (N
 * each), and glogits = d(sum of losses / grad_n)/d(logits) when glogits != NULL (grad_n = N: the
 * mean's; a data-parallel share divides by the global batch). Then acc[0] (+)=
 * sum(loss)/divisor and acc_correct[0] (+)= sum(correct). */
clcnn_status clcnn_cross_entropy(clcnn_context *ctx, cl_mem loss, cl_mem correct, cl_mem glogits,
                                 cl_mem logits, int zoff, cl_mem labels, int N, int K, cl_mem acc,
                                 cl_mem acc_correct, float divisor, int accumulate,
                                 double smoothing, int grad_n);

#endif
