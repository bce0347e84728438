/* Double-precision reference of CrossEntropyLoss (log-softmax + NLL, mean over the batch). */
#include "ref.h"

#include <math.h>

#include "common.h"

double clcnn_ref_cross_entropy(double *glogits, int *correct, const double *logits,
                               const unsigned char *labels, int N, int K) {
    double total = 0.0;
    int hits = 0;
    for (int n = 0; n < N; n++) {
        const double *z = logits + n * K;
        int label = labels[n];
        CLCNN_ASSERT(label < K);
        int best = 0;
        for (int k = 1; k < K; k++) {
            if (z[k] > z[best]) best = k;
        }
        hits += best == label;
        double zmax = z[best], sum = 0.0;
        for (int k = 0; k < K; k++)
            sum += exp(z[k] - zmax);
        /* -log_softmax[label] as log(sum) - (z[label] - zmax): every term stays O(1) however
         * large the logits, so no precision is lost to a large zmax cancelling. */
        total += log(sum) - (z[label] - zmax);
        if (glogits) {
            for (int k = 0; k < K; k++) {
                glogits[n * K + k] = (exp(z[k] - zmax) / sum - (k == label ? 1.0 : 0.0)) / N;
            }
        }
    }
    if (correct) *correct = hits;
    return total / N;
}
