/* Double-precision reference of CrossEntropyLoss (log-softmax + NLL, mean over the batch, with
 * optional label smoothing). */
#include "ref.h"

#include <math.h>

#include "common.h"

double clcnn_ref_cross_entropy(double *glogits, int *correct, const double *logits,
                               const unsigned char *labels, int N, int K) {
    return clcnn_ref_cross_entropy_ls(glogits, correct, logits, labels, N, K, 0.0);
}

double clcnn_ref_cross_entropy_ls(double *glogits, int *correct, const double *logits,
                                  const unsigned char *labels, int N, int K, double eps) {
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
        /* -log_softmax[k] as log(sum) - (z[k] - zmax): every term stays O(1) however large
         * the logits, so no precision is lost to a large zmax cancelling. PyTorch's smoothed
         * loss: (1 - eps) * NLL + eps / K * sum_k -log_softmax[k]. */
        double smooth = 0.0;
        for (int k = 0; k < K && eps > 0; k++)
            smooth += log(sum) - (z[k] - zmax);
        total += (1.0 - eps) * (log(sum) - (z[label] - zmax)) + eps / K * smooth;
        if (glogits) {
            for (int k = 0; k < K; k++) {
                double target = (k == label ? 1.0 - eps : 0.0) + eps / K;
                glogits[n * K + k] = (exp(z[k] - zmax) / sum - target) / N;
            }
        }
    }
    if (correct) *correct = hits;
    return total / N;
}
