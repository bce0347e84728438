/* The GEMM interface directly, with whichever backend CLCNN_BACKEND names: every transpose
 * combination, shapes that cross every tile edge of every backend (the gpu backend's 64x64
 * tiles and 16-deep K steps, the cpu backend's 8x32 tiles, the portable 4x4 blocks), element
 * offsets and leading dimensions larger than the rows, alpha != 1 and beta 0 (C holds NaN
 * then, which must not be read) or beta != 0, against a double-precision reference.
 *
 * Prints one line per case, "gemm TT MxNxK | checksum", so tests/oclgrind_check.sh can run it
 * under oclgrind (the gpu backend's local-memory tiles and barriers) and compare. Tolerance as
 * in test_layer_ops: 2e-5 of the largest reference magnitude plus 1e-6. */
#include "gemm.h"
#include "rng.h"
#include "testutil.h"

static clcnn_context *ctx;

static cl_mem upload(const float *h, size_t n) {
    cl_int rc;
    cl_mem b = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                              (n ? n : 1) * sizeof *h, (void *)h, &rc);
    CLCNN_ASSERT(rc == CL_SUCCESS);
    return b;
}

static void one(clcnn_rng *rng, int ta, int tb, int M, int N, int K, float beta) {
    /* op(A) is M x K, stored K x M when transposed; lda/ldb/ldc exceed the rows by 3. */
    int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    int lda = ac + 3, ldb = bc + 3, ldc = N + 3, aoff = 5, boff = 7, coff = 2;
    size_t na = (size_t)aoff + (size_t)ar * lda, nb = (size_t)boff + (size_t)br * ldb;
    size_t nc = (size_t)coff + (size_t)M * ldc;
    float *A = malloc(na * 4), *B = malloc(nb * 4), *C = malloc(nc * 4), *out = malloc(nc * 4);
    double *ref = calloc(nc, sizeof *ref), maxref = 0, maxerr = 0, sum = 0;
    float alpha = 0.75f;
    for (size_t i = 0; i < na; i++)
        A[i] = (float)(2.0 * clcnn_rng_uniform(rng) - 1.0);
    for (size_t i = 0; i < nb; i++)
        B[i] = (float)(2.0 * clcnn_rng_uniform(rng) - 1.0);
    for (size_t i = 0; i < nc; i++)
        C[i] = beta == 0.0f ? NAN : (float)(2.0 * clcnn_rng_uniform(rng) - 1.0);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = 0;
            for (int k = 0; k < K; k++) {
                double a = ta ? A[aoff + k * lda + i] : A[aoff + i * lda + k];
                double b = tb ? B[boff + j * ldb + k] : B[boff + k * ldb + j];
                acc += a * b;
            }
            double c = C[coff + i * ldc + j];
            ref[coff + i * ldc + j] = alpha * acc + (beta == 0.0f ? 0.0 : beta * c);
            maxref = fmax(maxref, fabs(ref[coff + i * ldc + j]));
        }
    cl_mem dA = upload(A, na), dB = upload(B, nb), dC = upload(C, nc);
    CHECK(clcnn_gemm(ctx, ta, tb, M, N, K, alpha, dA, (size_t)aoff, lda, dB, (size_t)boff, ldb,
                     beta, dC, (size_t)coff, ldc) == CLCNN_SUCCESS);
    CHECK(clEnqueueReadBuffer(ctx->queue, dC, CL_TRUE, 0, nc * 4, out, 0, NULL, NULL) == 0);
    size_t worst = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            size_t p = (size_t)coff + (size_t)i * ldc + (size_t)j;
            double e = fabs((double)out[p] - ref[p]);
            if (isnan(e)) e = INFINITY;
            if (e > maxerr) maxerr = e, worst = p;
            sum += out[p] * (1.0 + (double)((i + 2 * j) % 7));
        }
    /* nothing outside C's M x N window (the ldc padding, the offset) may change */
    size_t touched = 0;
    for (size_t p = 0; p < nc; p++) {
        int inside =
            p >= (size_t)coff && (p - coff) % ldc < (size_t)N && (p - coff) / ldc < (size_t)M;
        if (!inside && memcmp(&out[p], &C[p], 4) != 0) touched++;
    }
    double tol = 2e-5 * maxref + 1e-6;
    CHECK_MSG(maxerr <= tol, "gemm %c%c %dx%dx%d beta %g: max error %.3g at %zu (tolerance %.3g)",
              ta ? 't' : 'n', tb ? 't' : 'n', M, N, K, beta, maxerr, worst, tol);
    CHECK_MSG(touched == 0, "gemm %c%c %dx%dx%d: %zu elements outside C changed", ta ? 't' : 'n',
              tb ? 't' : 'n', M, N, K, touched);
    printf("gemm %c%c %dx%dx%d beta %g | %.6g\n", ta ? 't' : 'n', tb ? 't' : 'n', M, N, K, beta,
           sum);
    clReleaseMemObject(dA), clReleaseMemObject(dB), clReleaseMemObject(dC);
    free(A), free(B), free(C), free(out), free(ref);
}

int main(void) {
    clcnn_devices *devs = NULL;
    clcnn_rng rng;
    clcnn_device_info info;
    ctx = test_context(&devs);
    clcnn_rng_seed(&rng, 7);
    if (clcnn_context_device(ctx, &info) == CLCNN_SUCCESS)
        fprintf(stderr, "device: %s (%s)\n", info.name, info.platform_name);
    fprintf(stderr, "GEMM backend: %s\n", clcnn_gemm_backend_name(clcnn_gemm_kind(ctx)));
    static const int shapes[][3] = {
        {1, 1, 1},    /* degenerate */
        {5, 7, 3},    /* smaller than every tile */
        {70, 65, 33}, /* crosses the 64x64 tiles, three 16-deep K steps with a partial one */
        {64, 64, 16}, /* exactly one gpu tile */
        {17, 130, 20} /* thin and wide: three column tiles, partial rows */
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            one(&rng, t >> 1, t & 1, shapes[s][0], shapes[s][1], shapes[s][2],
                (s + (size_t)t) % 2 ? 0.5f : 0.0f);
    clcnn_context_free(ctx);
    clcnn_devices_free(devs);
    return test_finish("test_gemm");
}
