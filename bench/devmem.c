/* An LD_PRELOAD shim that measures what a program holds in OpenCL buffers: it wraps
 * clCreateBuffer and clReleaseMemObject (through the ICD loader's exports) and at exit prints
 * the peak of the bytes alive at once, and how many buffers that was, to stderr:
 *     devmem: peak 123456789 bytes in 321 buffers
 * It sees only buffers made through the API (not an OpenCL implementation's own), and the same
 * way for any version of any program, so two versions' figures compare (bench/memory.sh).
 * Build: cc -O2 -shared -fPIC bench/devmem.c -o devmem.so -ldl */
#define _GNU_SOURCE
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static size_t live, peak;
static long live_n, peak_n;

typedef cl_mem (*create_fn)(cl_context, cl_mem_flags, size_t, void *, cl_int *);
typedef cl_int (*release_fn)(cl_mem);
typedef cl_int (*info_fn)(cl_mem, cl_mem_info, size_t, void *, size_t *);

CL_API_ENTRY cl_mem CL_API_CALL clCreateBuffer(cl_context c, cl_mem_flags f, size_t size,
                                               void *host, cl_int *rc) {
    static create_fn next;
    if (!next) next = (create_fn)dlsym(RTLD_NEXT, "clCreateBuffer");
    cl_mem m = next(c, f, size, host, rc);
    if (m) {
        pthread_mutex_lock(&lock);
        live += size, live_n++;
        if (live > peak) peak = live, peak_n = live_n;
        pthread_mutex_unlock(&lock);
    }
    return m;
}

CL_API_ENTRY cl_int CL_API_CALL clReleaseMemObject(cl_mem m) {
    static release_fn next;
    static info_fn info;
    if (!next) next = (release_fn)dlsym(RTLD_NEXT, "clReleaseMemObject");
    if (!info) info = (info_fn)dlsym(RTLD_NEXT, "clGetMemObjectInfo");
    cl_uint refs = 0;
    size_t size = 0;
    cl_mem parent = NULL;
    int last = m && info(m, CL_MEM_REFERENCE_COUNT, sizeof refs, &refs, NULL) == CL_SUCCESS &&
               refs == 1 && info(m, CL_MEM_SIZE, sizeof size, &size, NULL) == CL_SUCCESS &&
               info(m, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof parent, &parent, NULL) == CL_SUCCESS &&
               parent == NULL; /* a sub-buffer holds no memory of its own */
    cl_int rc = next(m);
    if (rc == CL_SUCCESS && last) {
        pthread_mutex_lock(&lock);
        live -= size, live_n--;
        pthread_mutex_unlock(&lock);
    }
    return rc;
}

__attribute__((destructor)) static void report(void) {
    fprintf(stderr, "devmem: peak %zu bytes in %ld buffers\n", peak, peak_n);
}
