/* clcnn: a vendor-neutral CNN training engine on OpenCL. This header is the whole public API.
 *
 * Conventions: every fallible call returns a clcnn_status (CLCNN_SUCCESS is 0); the handle it
 * was called on keeps a one-line message describing the last failure (`*_errmsg()`) and that
 * failure's status (`*_errcode()`, CLCNN_SUCCESS until a call fails); a later success clears
 * neither. Every `*_free(NULL)` is a no-op. The library never prints and never exits.
 *
 * Lifetimes: a context needs nothing else once created (its device list may be freed). A model
 * and a data set each need their context alive until they are freed: free them before the
 * context. A model and a data set do not hold each other: either may be freed after any call
 * that used both has returned. A summary writer stands alone. Strings a handle returns
 * (errmsg, spec, parameter names, the event file's path) stay valid until the handle is freed,
 * and errmsg's text changes with the next failure on that handle. No handle is thread-safe:
 * call each from one thread at a time.
 *
 * Structs that grow over releases (clcnn_context_options, clcnn_optimizer_options,
 * clcnn_train_options, clcnn_checkpoint_info, clcnn_comm) begin with `size_t struct_size`, the
 * sizeof the struct the caller was compiled with. Fill each with its init function
 * (clcnn_context_options_init, clcnn_optimizer_options_init, clcnn_train_options_init,
 * clcnn_checkpoint_info_init, clcnn_comm_init), which sets struct_size and the defaults, then
 * set what you need; a struct the library fills (clcnn_model_get_optimizer,
 * clcnn_model_load_checkpoint) needs its struct_size set too. A call given a struct_size this
 * library does not know is CLCNN_ERR_INVALID_ARGUMENT with one line naming the struct and its init
 * function. */
#ifndef CLCNN_H
#define CLCNN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CLCNN_VERSION_MAJOR 0
#define CLCNN_VERSION_MINOR 6
#define CLCNN_VERSION_PATCH 0
#define CLCNN_VERSION_STRING "0.6.0"
/* One number for comparisons: major*10000 + minor*100 + patch. */
#define CLCNN_VERSION_NUMBER                                                                       \
    (CLCNN_VERSION_MAJOR * 10000 + CLCNN_VERSION_MINOR * 100 + CLCNN_VERSION_PATCH)

/* Status codes. They extend OpenCL's: a value in -1..-999 is an OpenCL error code passed
 * through unchanged (CL_OUT_OF_RESOURCES is -5); clcnn's own codes start at -2000. */
typedef enum clcnn_status {
    CLCNN_SUCCESS = 0,
    CLCNN_ERR_INVALID_ARGUMENT = -2001, /* a NULL handle, a negative size, an unknown name */
    CLCNN_ERR_OUT_OF_HOST_MEMORY = -2002,
    CLCNN_ERR_NO_DEVICE = -2003,     /* no OpenCL device is present or visible */
    CLCNN_ERR_DEVICE_FILTER = -2004, /* CLCNN_VISIBLE_DEVICES is malformed or names nothing */
    CLCNN_ERR_DEVICE_INDEX = -2005,  /* --platform/--device out of range */
    CLCNN_ERR_BUILD = -2006,         /* kernel build failed; the message holds the log */
    CLCNN_ERR_IO = -2007,            /* a file could not be opened, read or written */
    CLCNN_ERR_FORMAT = -2008,        /* a file's content is malformed */
    CLCNN_ERR_SPEC = -2009,          /* a model spec could not be parsed */
    CLCNN_ERR_SHAPE = -2010,         /* tensor shapes do not fit together */
    CLCNN_ERR_BLAS = -2011,          /* the GEMM backend (CLBlast) failed */
    CLCNN_ERR_NUMERIC = -2012,       /* a NaN or Inf appeared */
    CLCNN_ERR_UNSUPPORTED = -2013,   /* the device lacks something clcnn needs */
    CLCNN_ERR_STATE = -2014,         /* a call made in the wrong order */
    CLCNN_ERR_COMM = -2015,          /* a data-parallel transport call failed, or replicas differ */
    CLCNN_ERR_PEER = -2016           /* another process of a data-parallel group failed (its own
                                        error says why); this one stopped with it */
} clcnn_status;

/* A short constant name for a status ("CLCNN_ERR_IO", "CL_OUT_OF_RESOURCES"). Never NULL. */
const char *clcnn_status_str(clcnn_status status);

/* The library's version string, CLCNN_VERSION_STRING of the build that made it. Compare with
 * the header's macro to detect a header/library mismatch. */
const char *clcnn_version(void);

/* The CLBlast version the library was built against ("1.5.3"), or "none". */
const char *clcnn_blas_version(void);

/* ---------------------------------------------------------------------------------------- */
/* Devices                                                                                    */

typedef enum clcnn_device_type {
    CLCNN_DEVICE_CPU = 1,
    CLCNN_DEVICE_GPU = 2,
    CLCNN_DEVICE_ACCELERATOR = 4,
    CLCNN_DEVICE_OTHER = 8
} clcnn_device_type;

/* What clcnn knows of one OpenCL device. Strings are NUL-terminated and truncated to fit. */
typedef struct clcnn_device_info {
    int global_index;   /* position in the flat list of every device of every platform */
    int platform_index; /* P: position of the platform in clGetPlatformIDs order */
    int device_index;   /* D: position of the device within its platform (CL_DEVICE_TYPE_ALL) */
    clcnn_device_type type;
    char platform_name[128];
    char platform_version[128];
    char name[128];
    char vendor[128];
    char opencl_c_version[64];
    char driver_version[64];
    unsigned compute_units;
    uint64_t global_mem_bytes;
    uint64_t max_alloc_bytes;
    size_t max_work_group_size;
} clcnn_device_info;

/* The list of visible devices: every device of every platform, filtered and ordered by a
 * CUDA_VISIBLE_DEVICES-style filter. A context copies what it needs from it: the list may be
 * freed as soon as the contexts are created. */
typedef struct clcnn_devices clcnn_devices;

/* Enumerates all OpenCL devices and applies `filter`. filter == NULL reads the environment
 * variable CLCNN_VISIBLE_DEVICES (unset: every device visible). Filter syntax: a comma list of
 * entries, each a global index ("3"), a platform:device pair ("0:1") or a type word ("cpu",
 * "gpu", "accelerator"); the list's order is the visible order; duplicates are dropped; an
 * empty string hides every device. A malformed entry or one naming no device fails with
 * CLCNN_ERR_DEVICE_FILTER. A platform that fails to enumerate its devices is skipped.
 * On failure *out still receives a handle (unless memory ran out) whose errmsg says why; the
 * caller frees it either way. */
clcnn_status clcnn_devices_create(clcnn_devices **out, const char *filter);

/* Frees the list. NULL is a no-op. */
void clcnn_devices_free(clcnn_devices *devs);

/* The last error message recorded on the list ("" when none). */
const char *clcnn_devices_errmsg(const clcnn_devices *devs);

/* The status of the last failure recorded on the list (CLCNN_SUCCESS when none;
 * CLCNN_ERR_INVALID_ARGUMENT for NULL). Each handle has one, beside its errmsg. */
clcnn_status clcnn_devices_errcode(const clcnn_devices *devs);

/* Number of visible devices (0 for NULL). */
int clcnn_devices_count(const clcnn_devices *devs);

/* Copies the description of visible device `i` (0-based visible order) into *info. */
clcnn_status clcnn_devices_get(const clcnn_devices *devs, int i, clcnn_device_info *info);

/* Applies the selection rules. platform >= 0 and device >= 0: the device-th visible device of
 * platform `platform`; platform < 0 and device >= 0: the device-th entry of the visible list;
 * platform >= 0 and device < 0: the first visible device of that platform; both < 0: the
 * first visible GPU, else the first visible device. Writes the visible index to *index.
 * Out of range: CLCNN_ERR_DEVICE_INDEX with a message listing what is visible. */
clcnn_status clcnn_devices_select(clcnn_devices *devs, int platform, int device, int *index);

/* Fills buf with a table of the visible devices (one row each, like nvidia-smi), marking
 * `default_index` (pass -1 for none). Returns the length the full table needs, excluding the
 * NUL, like snprintf; buf may be NULL when size is 0. */
size_t clcnn_devices_format(const clcnn_devices *devs, int default_index, char *buf, size_t size);

/* ---------------------------------------------------------------------------------------- */
/* Context: one device, its command queue and every clcnn kernel built for it                */

typedef struct clcnn_context clcnn_context;

/* The GEMM backend a context uses for fully connected layers and im2col convolutions. */
typedef enum clcnn_backend {
    CLCNN_BACKEND_DEFAULT = 0, /* as CLCNN_BACKEND says, else per device type: cpu on CPU
                                  devices, clblast elsewhere */
    CLCNN_BACKEND_CPU,         /* kernels shaped for CPU devices (8x32 register tiles) */
    CLCNN_BACKEND_OPENCL,      /* portable register-blocked kernels */
    CLCNN_BACKEND_CLBLAST,     /* CLBlast */
    CLCNN_BACKEND_GPU          /* kernels shaped for GPUs (local-memory tiles, 16x16 groups) */
} clcnn_backend;

/* How convolutions run. */
typedef enum clcnn_conv_algo {
    CLCNN_CONV_ALGO_DEFAULT = 0, /* as CLCNN_CONV_ALGO says, else rules per device */
    CLCNN_CONV_ALGO_DIRECT,      /* direct kernels where the layer allows them (not Winograd) */
    CLCNN_CONV_ALGO_IM2COL,      /* im2col + GEMM everywhere */
    CLCNN_CONV_ALGO_IMPLICIT     /* implicit-GEMM kernels shaped for GPUs where the device runs
                                    them (work-groups of 64 or 256, 4.2-12.4 KB of local memory;
                                    CLCNN_IMPLICIT_SIZE picks the size) */
} clcnn_conv_algo;

/* Options for clcnn_context_create. Fill with clcnn_context_options_init, then set what you
 * need. A field left at 0 defers to its environment variable where it has one (README.md,
 * "Environment variables"); a field set explicitly wins, and its variable is then not read. */
typedef struct clcnn_context_options {
    size_t struct_size; /* sizeof(clcnn_context_options), set by clcnn_context_options_init */
    /* Profiling events on the queue (used by benchmarks). */
    int enable_profiling;
    /* Program-binary cache: 0 = as the environment says (CLCNN_CACHE=0 disables), 1 = off. */
    int disable_cache;
    /* Autotuning, like torch.backends.cudnn.benchmark: 0 = as the environment says
     * (CLCNN_AUTOTUNE=1 enables), 1 = on. When on, the first use of each GEMM shape (unless
     * `backend` or CLCNN_BACKEND forces one: cpu against opencl on CPU devices, clblast, gpu
     * and opencl elsewhere) and of each stride-1 convolution's weight gradient times the
     * interchangeable kernels and keeps the fastest, in a file beside the program binaries
     * that later processes reuse. Off, fixed rules by device type choose, and runs
     * repeat bit for bit. */
    int autotune;
    /* The GEMM backend (0 = CLCNN_BACKEND_DEFAULT). An explicit backend is never autotuned;
     * CLCNN_BACKEND_GPU fails context creation on a device that cannot run its work-groups. */
    clcnn_backend backend;
    /* The convolution algorithm (0 = CLCNN_CONV_ALGO_DEFAULT). */
    clcnn_conv_algo conv_algo;
} clcnn_context_options;

/* Sets opts->struct_size and every other field to 0 (each as the environment says). NULL is a
 * no-op. */
void clcnn_context_options_init(clcnn_context_options *opts);

/* Creates a context on visible device `index` of `devs`: a context, an in-order queue, and
 * every clcnn kernel built for the device (from the on-disk binary cache when it holds a
 * valid entry). Kernel sources are embedded in the library; CLCNN_KERNEL_DIR=dir reads
 * dir/<name>.cl instead. The cache lives in $CLCNN_CACHE_DIR, else $XDG_CACHE_HOME/clcnn,
 * else $HOME/.cache/clcnn. `opts` may be NULL. On failure *out still receives a handle (unless
 * memory ran out) whose errmsg says why (a build failure carries the device name and the
 * build log); free it either way. */
clcnn_status clcnn_context_create(clcnn_context **out, const clcnn_devices *devs, int index,
                                  const clcnn_context_options *opts);

/* Adopts an OpenCL context and in-order command queue that the host application already
 * uses (as CLBlast does): clcnn's kernels are built for the queue's device and every clcnn
 * command is enqueued on that queue. Pass them as void pointers (cl_context,
 * cl_command_queue) so this header needs no OpenCL headers. clcnn retains both and releases
 * its references in clcnn_context_free. The device has no index in the visible list:
 * clcnn_context_device reports -1 for global, platform and device index. Profiling follows
 * the queue's CL_QUEUE_PROFILING_ENABLE. */
clcnn_status clcnn_context_create_from_cl(clcnn_context **out, void *cl_context,
                                          void *cl_command_queue,
                                          const clcnn_context_options *opts);

/* Frees the context and everything it owns (an adopted context and queue are only released,
 * not destroyed). NULL is a no-op. */
void clcnn_context_free(clcnn_context *ctx);

/* The last error message recorded on the context ("" when none), and its status. */
const char *clcnn_context_errmsg(const clcnn_context *ctx);
clcnn_status clcnn_context_errcode(const clcnn_context *ctx);

/* The device the context runs on. */
clcnn_status clcnn_context_device(const clcnn_context *ctx, clcnn_device_info *info);

/* How the kernels were obtained when the context was created: 1 = every program came from
 * the binary cache, 0 = at least one was compiled from source. And the seconds it took. */
int clcnn_context_cache_hit(const clcnn_context *ctx);
double clcnn_context_build_seconds(const clcnn_context *ctx);
/* Why the binary cache was not used, or was repaired, when the context was created: one line
 * for the user ("" when there is nothing to say). The cache folder is used only when it
 * belongs to the user and neither group nor others may write to it; otherwise the kernels are
 * compiled, nothing is written there, and this says why. An entry made for another key (copied
 * or renamed), or whose binary lacks the kernels its source defines, is rebuilt silently; one
 * that passes those checks while the programs still lack a kernel the library needs is rebuilt
 * with a note. The library never prints it: clcnn_train does, as a "note:" line. */
const char *clcnn_context_cache_note(const clcnn_context *ctx);

/* Measures the device's fp32 multiply-add throughput with a register-only kernel (about a
 * quarter of a second), for reading benchmark figures as a fraction of peak. */
clcnn_status clcnn_context_measure_peak(clcnn_context *ctx, double *gflops);

/* With enable_profiling: waits for the queue, then writes one line per layer section (or kernel
 * name outside a layer) with calls, total device milliseconds, share and GFLOP/s, for every
 * launch since the previous report, and starts a new collection. With CLCNN_PROFILE=kernels in
 * the environment when the context was created, each layer's line is split per kernel. A last
 * line, "all: ...", gives the number of launches and their device time, and how many of them
 * ran under 20 microseconds. snprintf-style return value; 0 when profiling is off. */
size_t clcnn_context_profile_report(clcnn_context *ctx, char *buf, size_t size);

/* ---------------------------------------------------------------------------------------- */
/* Models                                                                                     */

/* A sequential network on one context: parameters, gradients, optimizer state and
 * activations on the device. Not thread-safe; one model per thread. */
typedef struct clcnn_model clcnn_model;

/* The longest model spec text accepted, in bytes. The canonical text of any accepted spec
 * (clcnn_model_spec) is shorter than this too. */
#define CLCNN_SPEC_MAX_LEN 65536

/* Builds a model from a spec (see docs/MODEL_SPEC.md) or a preset name ("seed", "seed-relu",
 * "resnet")
 * for inputs of channels x height x width, initialised as PyTorch's defaults (kaiming-uniform
 * weights with a = sqrt(5), U(+-1/sqrt(fan_in)) biases) from `seed`: the same seed gives the
 * same weights on every device. The context must outlive the model. On failure *out still
 * receives a handle (unless memory ran out) whose errmsg says why (a spec error names the
 * column; a shape error names the layer); free it either way. */
clcnn_status clcnn_model_create(clcnn_model **out, clcnn_context *ctx, const char *spec,
                                int channels, int height, int width, uint64_t seed);

/* Frees the model and its device memory. NULL is a no-op. */
void clcnn_model_free(clcnn_model *model);

/* The last error message recorded on the model ("" when none), and its status. */
const char *clcnn_model_errmsg(const clcnn_model *model);
clcnn_status clcnn_model_errcode(const clcnn_model *model);

/* The device memory, in bytes, that a training step on a batch of `batch` samples takes in the
 * model's buffers: parameters, gradients, optimizer state and statistics, and every per-batch
 * buffer as the plan places them (activations, output gradients sharing buffers by liveness,
 * workspaces). The context's own buffers are not included. 0 for a batch the model cannot
 * take. */
size_t clcnn_model_device_bytes(clcnn_model *model, int batch);

/* The model's canonical spec text (every layer written out, presets expanded). */
const char *clcnn_model_spec(const clcnn_model *model);

/* The graph of a model spec or preset name as JSON (docs/MODEL_SPEC.md, "The graph as JSON"):
 * every layer's kind, PyTorch class, module path, inputs and arguments, for other languages to
 * build the same model without a parser of their own (python/clcnn_torch.py does). Like
 * snprintf: json receives at most size bytes including the NUL (json may be NULL when size is
 * 0), and *needed (may be NULL) the length the whole text needs. No device is used. A bad spec
 * is CLCNN_ERR_SPEC with its one-line message in err (errsize bytes, may be NULL). */
clcnn_status clcnn_spec_graph_json(const char *spec, char *json, size_t size, size_t *needed,
                                   char *err, size_t errsize);

/* The fewest samples a training batch (or a data-parallel replica's share of one) may hold: 2
 * when a BatchNorm layer sees one value per channel and sample (BatchNorm1d, or BatchNorm2d on
 * 1 x 1 planes), which it cannot normalise alone, as PyTorch's "Expected more than 1 value per
 * channel when training"; else 1. 0 for NULL. Evaluation takes any batch. */
int clcnn_model_min_train_batch(const clcnn_model *model);

/* Number of outputs per sample (the logits of the last layer). */
int clcnn_model_output_size(const clcnn_model *model);

/* The model's plan for a batch of `batch` samples, as text: a header line, then one line per
 * node of the graph (a spec layer, or two fused into one such as a convolution carrying the
 * MaxPool2d(2) after it): its index, layer(s), input node(s) ("input" for the model's input),
 * per-sample output shape, the algorithm of its forward pass, weight gradient and input
 * gradient ("-" where a pass does not run), and the bytes of its buffers for that batch, then
 * ", pads for N" where its forward also writes node N's zero-padded input (", pads gradient
 * for N": its backward, node N's zero-padded output gradient). The
 * algorithms are chosen when the model is built, by rules per device type, unless
 * clcnn_context_options.conv_algo or CLCNN_CONV_ALGO forces them. snprintf-style: returns the
 * length the whole text needs; buf may be NULL when size is 0. */
size_t clcnn_model_plan(const clcnn_model *model, int batch, char *buf, size_t size);

/* Checks that a batch of `batch` samples fits, without allocating: every per-batch buffer and
 * workspace of the plan within the element count clcnn's 32-bit kernel indices reach and
 * within the device's largest allocation. These are the checks a training or evaluation step
 * makes before it allocates for a larger batch than before, with the same message; it fails
 * with CLCNN_ERR_SHAPE naming the first buffer that does not fit. Device memory as a whole is
 * not checked (only an allocation can tell). CLCNN_ERR_INVALID_ARGUMENT for batch <= 0. */
clcnn_status clcnn_model_check_batch(clcnn_model *model, int batch);

/* The state_dict's entries, in torch.nn.Sequential state_dict order ("0.weight", "0.bias",
 * ..., "3.0.weight" inside a residual block): the parameters, and BatchNorm's buffers
 * ("running_mean", "running_var", and "num_batches_tracked", a 0-dim tensor of one element
 * that get/set_param carry as a float). Buffers are not trained: clcnn_model_get_grad fails on
 * them. */
int clcnn_model_param_count(const clcnn_model *model);

/* 1 when entry i is a trained parameter (what model.parameters() yields), 0 for a buffer or an
 * index out of range. */
int clcnn_model_param_trained(const clcnn_model *model, int i);

/* Name, shape (PyTorch layout, ndim <= 4) and element count of parameter tensor i. The name
 * stays valid for the model's lifetime. Any output pointer may be NULL. */
clcnn_status clcnn_model_param_info(const clcnn_model *model, int i, const char **name, int *ndim,
                                    int64_t shape[4], size_t *numel);

/* Copies parameter tensor i (or its gradient from the last training step) to/from host
 * memory holding numel floats. These wait for the device. */
clcnn_status clcnn_model_get_param(clcnn_model *model, int i, float *dst);
clcnn_status clcnn_model_set_param(clcnn_model *model, int i, const float *src);
clcnn_status clcnn_model_get_grad(clcnn_model *model, int i, float *dst);

typedef enum clcnn_optimizer_kind {
    CLCNN_OPTIMIZER_SGD = 0,  /* torch.optim.SGD */
    CLCNN_OPTIMIZER_ADAM = 1, /* torch.optim.Adam (L2 weight decay added to the gradient) */
    CLCNN_OPTIMIZER_ADAMW = 2 /* torch.optim.AdamW (decoupled weight decay) */
} clcnn_optimizer_kind;

/* Fill with clcnn_optimizer_options_init, then set what you need. */
typedef struct clcnn_optimizer_options {
    size_t struct_size; /* sizeof(clcnn_optimizer_options), set by clcnn_optimizer_options_init */
    clcnn_optimizer_kind kind;
    double lr;
    double momentum;     /* SGD */
    double dampening;    /* SGD */
    int nesterov;        /* SGD: needs momentum > 0 and dampening == 0, as in PyTorch */
    double weight_decay; /* all */
    double beta1, beta2; /* Adam, AdamW */
    double eps;          /* Adam, AdamW */
    /* 1: no weight decay on biases and BatchNorm weights and biases (two parameter groups, as
     * PyTorch users write them); 0: weight decay on every parameter (default). */
    int no_decay_bn_bias;
} clcnn_optimizer_options;

/* Sets opts->struct_size and PyTorch's defaults for `kind` (lr 0.01 for SGD, the tutorial's
 * value; Adam lr 1e-3, betas 0.9/0.999, eps 1e-8; AdamW the same with weight_decay 1e-2). NULL
 * is a no-op. */
void clcnn_optimizer_options_init(clcnn_optimizer_options *opts, clcnn_optimizer_kind kind);

/* The optimizer settings in use (after clcnn_model_set_optimizer, or as a loaded checkpoint
 * left them), into *opts, whose struct_size the caller sets (clcnn_optimizer_options_init). */
clcnn_status clcnn_model_get_optimizer(const clcnn_model *model, clcnn_optimizer_options *opts);

/* Changes the learning rate of the optimizer in use and keeps its state (momentum, moments,
 * step count): what a learning-rate scheduler does between steps. lr must be > 0 and finite. */
clcnn_status clcnn_model_set_lr(clcnn_model *model, double lr);

/* Sets the optimizer used by clcnn_model_train_batch and resets its state (momentum buffers,
 * moments, step count). Invalid values (lr <= 0, momentum < 0, betas outside [0,1), nesterov
 * without momentum ...) are CLCNN_ERR_INVALID_ARGUMENT. A new model starts with SGD defaults. */
clcnn_status clcnn_model_set_optimizer(clcnn_model *model, const clcnn_optimizer_options *opts);

/* One training step on a batch from host memory: x holds n samples of channels*height*width
 * floats (NCHW), labels n class indices < clcnn_model_output_size. Forward, mean
 * cross-entropy, backward, optimizer update, all queued on the device; the call does not wait
 * for the result (read it with clcnn_model_last_loss). */
clcnn_status clcnn_model_train_batch(clcnn_model *model, const float *x, const uint8_t *labels,
                                     int n);

/* Forward and loss only (no update) on a batch from host memory. */
clcnn_status clcnn_model_eval_batch(clcnn_model *model, const float *x, const uint8_t *labels,
                                    int n);

/* Waits for the last train/eval batch and returns its mean loss and the number of samples
 * whose highest logit (first maximum) is the label. Either pointer may be NULL. */
clcnn_status clcnn_model_last_loss(clcnn_model *model, float *loss, int *correct);

/* Inference: logits (n x output_size floats) for n samples from host memory. Waits. */
clcnn_status clcnn_model_predict(clcnn_model *model, const float *x, int n, float *logits);

/* Number of optimizer steps taken since the optimizer was set. */
int64_t clcnn_model_step_count(const clcnn_model *model);

/* ---------------------------------------------------------------------------------------- */
/* Data sets                                                                                  */

/* Images and labels held on a context's device as bytes (uploaded once); batches are
 * gathered, scaled to [0,1] like torchvision's ToTensor and optionally normalised on the
 * device. The context must outlive the data set; models on the same context may train on it
 * (one model at a time: it holds one epoch order). */
typedef struct clcnn_dataset clcnn_dataset;

typedef enum clcnn_dataset_format {
    CLCNN_DATASET_AUTO = 0, /* detect from the files in the folder */
    CLCNN_DATASET_CIFAR10 = 1,
    CLCNN_DATASET_MNIST = 2,
    CLCNN_DATASET_FASHION_MNIST = 3
} clcnn_dataset_format;

/* Parses "cifar10", "mnist", "fashion-mnist" or "auto", in any case (also "cifar-10" and
 * "fashion_mnist"); -1 when unknown or NULL. */
int clcnn_dataset_format_parse(const char *name);

/* Opens the training split (train = 1) or the test split (train = 0) of a folder: CIFAR-10
 * binary (data_batch_1..5.bin / test_batch.bin, also inside cifar-10-batches-bin/) or IDX
 * (train-/t10k-images-idx3-ubyte and -labels-idx1-ubyte, plain or .gz). Every file is
 * validated first; a bad one fails with CLCNN_ERR_FORMAT or CLCNN_ERR_IO and a message that
 * names it. On failure *out still receives a handle (unless memory ran out) whose errmsg says
 * why; free it either way. */
clcnn_status clcnn_dataset_open(clcnn_dataset **out, clcnn_context *ctx, const char *dir,
                                clcnn_dataset_format format, int train);

/* A data set from the embedder's memory: n images of channels x height x width bytes (CHW,
 * 0..255) and n labels (< 256; must be below the model's outputs when trained on). Copied. */
clcnn_status clcnn_dataset_from_memory(clcnn_dataset **out, clcnn_context *ctx,
                                       const uint8_t *images, const uint8_t *labels, int n,
                                       int channels, int height, int width);

/* Frees the data set and its device memory (after the device has finished with it). NULL is
 * a no-op. */
void clcnn_dataset_free(clcnn_dataset *ds);
/* The last error message recorded on the data set ("" when none), and its status. */
const char *clcnn_dataset_errmsg(const clcnn_dataset *ds);
clcnn_status clcnn_dataset_errcode(const clcnn_dataset *ds);

/* Number of samples, image shape, and the format it was read as (AUTO for memory). */
int clcnn_dataset_size(const clcnn_dataset *ds);
void clcnn_dataset_shape(const clcnn_dataset *ds, int *channels, int *height, int *width);
clcnn_dataset_format clcnn_dataset_format_of(const clcnn_dataset *ds);
/* "cifar10", "mnist", "fashion-mnist" or "auto"; "unknown" for any other value. Never NULL. */
const char *clcnn_dataset_format_name(clcnn_dataset_format format);

/* Per-channel normalisation after scaling to [0,1]: (x - mean[c]) / std[c], as
 * torchvision's Normalize. mean and std hold `channels` values, finite; each std at least
 * FLT_MIN (a normal float, so that 1/std is finite), and (x - mean) / std must stay finite in
 * float for x in [0, 1]. Otherwise CLCNN_ERR_INVALID_ARGUMENT, and the previous normalisation
 * stays. A data set that never had one set takes the normalisation of the first model fed from
 * it that knows its own (clcnn_model_set_normalize). */
clcnn_status clcnn_dataset_set_normalize(clcnn_dataset *ds, const float *mean, const float *std);

/* The input normalisation a model's weights were trained with, per input channel (mean and
 * std hold `channels` values; std > 0), or none (both NULL: not known, as for a new model).
 * Loading a clcnn checkpoint sets it to the one the checkpoint records
 * (clcnn_checkpoint_info.normalize; a checkpoint that records "" trained on unnormalised
 * inputs: mean 0, std 1), and to none for a file that records nothing (a plain state_dict, a
 * checkpoint older than the record). Every call that feeds the model from a data set
 * (clcnn_model_train_dataset, _train_epoch, _evaluate, the replicas' through each replica,
 * which takes replica 0's) then agrees with it: a data set with no normalisation set takes the
 * model's (clcnn_dataset_set_normalize, and keeps it); one set to another is refused with
 * CLCNN_ERR_INVALID_ARGUMENT, naming both, before its first batch runs. */
clcnn_status clcnn_model_set_normalize(clcnn_model *model, const float *mean, const float *std);
/* 1 and the model's normalisation in mean and std (`channels` values each; either may be
 * NULL), or 0 when it has none. */
int clcnn_model_get_normalize(const clcnn_model *model, float *mean, float *std);

/* Sets the sample order used by clcnn_model_train_dataset: shuffle = 0 keeps file order;
 * otherwise a permutation drawn from (seed, epoch) alone, so any epoch's order can be
 * recreated (this is what makes --resume exact). Uploads the order (waits for it). */
clcnn_status clcnn_dataset_set_epoch(clcnn_dataset *ds, uint64_t seed, int64_t epoch, int shuffle);

/* ---------------------------------------------------------------------------------------- */
/* Training loop                                                                              */

/* One training step on samples order[first .. first+n) of the data set (see
 * clcnn_dataset_set_epoch). Nothing is copied from the host: the batch is gathered on the
 * device. Does not wait for the result (clcnn_model_last_loss does). */
clcnn_status clcnn_model_train_dataset(clcnn_model *model, clcnn_dataset *ds, int first, int n);

/* Learning-rate schedules, stepped after every batch as PyTorch's schedulers are. */
typedef enum clcnn_schedule_kind {
    CLCNN_SCHEDULE_CONSTANT = 0, /* the optimizer's lr throughout */
    CLCNN_SCHEDULE_COSINE = 1,   /* CosineAnnealingLR(T_max = total_steps, eta_min = 0) */
    /* OneCycleLR(max_lr = lr, total_steps, pct_start, anneal_strategy='cos', div_factor=25,
     * final_div_factor=1e4, cycle_momentum=False) */
    CLCNN_SCHEDULE_ONECYCLE = 2
} clcnn_schedule_kind;

/* The learning rate of 0-based global step `step` (the batch that follows `step` calls of
 * scheduler.step()): `lr` is the base lr (cosine) or max_lr (onecycle) and total_steps the
 * schedule's length; pct_start matters to onecycle only. Computed in double as PyTorch 1.13
 * computes it: onecycle to the bit, cosine in closed form, which PyTorch's step-by-step
 * recursion matches to a few ulps per step. CONSTANT returns lr. NaN where PyTorch raises
 * (onecycle past total_steps, a phase of zero length) or for invalid arguments (lr <= 0,
 * total_steps <= 0, pct_start outside [0, 1], step < 0). */
double clcnn_schedule_lr(clcnn_schedule_kind kind, double lr, int64_t step, int64_t total_steps,
                         double pct_start);

/* "constant", "cosine", "onecycle"; "unknown" for any other value. Never NULL. */
const char *clcnn_schedule_name(clcnn_schedule_kind kind);

/* The kind named "constant", "cosine" or "onecycle"; -1 when unknown or NULL. */
int clcnn_schedule_parse(const char *name);

/* The loss as nn.CrossEntropyLoss(label_smoothing=eps) computes it, in training and in every
 * loss a model reports (evaluation included): (1-eps) * NLL + eps * the mean over classes of
 * -log_softmax. 0 <= eps <= 1; a new model has 0. */
clcnn_status clcnn_model_set_label_smoothing(clcnn_model *model, double eps);

/* The random augmentation of training sample `sample` (its index in the data set) in epoch
 * `epoch` of a run seeded with `seed`, as the training loop applies it: torchvision's
 * RandomCrop(size, padding=random_crop) then RandomHorizontalFlip(0.5), before scaling and
 * normalisation. *dy, *dx receive the crop's top-left corner in the zero-padded image (each in
 * 0 .. 2*random_crop; random_crop 0: both 0) and *flip 1 when the crop is mirrored (always 0
 * without hflip). A counter-based hash of (seed, epoch, sample) picks them: the same on every
 * call and device, so a resumed run sees the same samples. Any output may be NULL. */
void clcnn_augment_sample(uint64_t seed, int64_t epoch, int sample, int random_crop, int hflip,
                          int *dy, int *dx, int *flip);

/* The largest random_crop padding the training loop accepts. */
#define CLCNN_MAX_CROP 4096

/* Progress callback: called with the 1-based batch number within the epoch, the epoch's batch
 * count and that batch's loss (reading it waits for the device). Return non-zero to stop the
 * epoch early (the call then returns CLCNN_SUCCESS with *batches_done telling how far it
 * got). */
typedef int (*clcnn_progress_fn)(void *user, int64_t batch, int64_t batches, float loss);

/* Batch hook: called before each batch is gathered, with the epoch, the batch's 0-based index
 * within the epoch and its samples, positions first .. first+n-1 of the epoch's order. It does
 * not wait for the device. Return non-zero to stop the epoch before this batch (the call then
 * returns CLCNN_SUCCESS; *batches_done is this batch's index, where a resumed run starts). */
typedef int (*clcnn_batch_hook)(void *user, int64_t epoch, int64_t batch, int first, int n);

/* How clcnn_model_train_epoch walks an epoch: what torch.utils.data.DataLoader's
 * batch_size, shuffle and drop_last, its sampler's set_epoch(epoch) and a training loop's
 * global_step and log interval say. Fill it with clcnn_train_options_init, then set what you
 * need. */
typedef struct clcnn_train_options {
    size_t struct_size; /* sizeof(clcnn_train_options), set by clcnn_train_options_init */
    int batch_size;     /* samples per step (default 64) */
    int shuffle;        /* 1: the order of (seed, epoch), see clcnn_dataset_set_epoch (default);
                           0: file order */
    int drop_last;      /* 1: skip the last batch when it is partial (default 0: train on it) */
    uint64_t seed;      /* the shuffle's seed (default 1) */
    int64_t epoch;      /* 0-based: picks the epoch's order, like sampler.set_epoch */
    /* Resume mid-epoch: the batches before this one (0-based) are skipped; the rest see the
     * same samples as in an uninterrupted epoch, so the run continues bit for bit. */
    int64_t start_batch;
    /* Steps taken before this call, as the caller counts them (a training loop's global_step,
     * e.g. a checkpoint's step). progress runs after each batch that brings global_step plus
     * the batches this call took to a multiple of `every`. */
    int64_t global_step;
    int64_t every;              /* steps between progress calls (default 100) */
    clcnn_progress_fn progress; /* may be NULL */
    void *user;                 /* passed to progress */
    /* Called before each batch; the place for per-batch work such as augmentation or a step
     * limit. May be NULL. */
    clcnn_batch_hook hook;
    void *hook_user; /* passed to hook */
    /* The learning-rate schedule (default CONSTANT: the optimizer's lr is left as it is).
     * Otherwise the optimizer's lr is set to clcnn_schedule_lr(schedule, lr, step, total_steps,
     * pct_start) before each batch, `step` being global_step plus the batches this call took
     * before it; set lr, total_steps (e.g. epochs * batches per epoch) and pct_start (default
     * 0.3) for it. */
    clcnn_schedule_kind schedule;
    double lr;
    int64_t total_steps;
    double pct_start;
    /* Augmentation of training batches (clcnn_augment_sample, with this seed and epoch):
     * random_crop P > 0 pads P zero pixels on each side and crops back at a random offset;
     * hflip 1 mirrors half the samples. Default 0: none. Evaluation is never augmented. */
    int random_crop;
    int hflip;
} clcnn_train_options;

/* Sets opts->struct_size and the defaults above: batch 64, shuffled with seed 1, epoch 0 from
 * its first batch, progress every 100 steps, no callbacks, a constant lr (pct_start 0.3 should
 * a schedule be chosen), no augmentation. NULL is a no-op. */
void clcnn_train_options_init(clcnn_train_options *opts);

/* One epoch over a data set as `opts` says: clcnn_dataset_set_epoch(ds, seed, epoch, shuffle),
 * then batches of batch_size from start_batch on through clcnn_model_train_dataset, the hook
 * before each and progress after those that reach a multiple of `every`. A NaN or infinite
 * loss seen at a progress point stops the epoch with CLCNN_ERR_NUMERIC. Waits for the device
 * before it returns. *batches_done (may be NULL) receives the epoch's batches taken so far,
 * start_batch included: the start_batch that resumes the epoch where this call stopped.
 * An epoch that would train a batch smaller than clcnn_model_min_train_batch (a last batch of
 * 1 with BatchNorm1d; PyTorch raises at that batch) is refused before its first step with
 * CLCNN_ERR_INVALID_ARGUMENT, the numbers and the nearest batch sizes that avoid it, even when
 * the hook would stop the epoch earlier: nothing is trained. */
clcnn_status clcnn_model_train_epoch(clcnn_model *model, clcnn_dataset *ds,
                                     const clcnn_train_options *opts, int64_t *batches_done);

/* Evaluates the whole data set in file order, in batches of batch_size, without augmentation:
 * mean cross-entropy (with the model's label smoothing) over all samples and the number of
 * correct predictions. Waits. */
clcnn_status clcnn_model_evaluate(clcnn_model *model, clcnn_dataset *ds, int batch_size,
                                  double *mean_loss, int *correct);

/* ---------------------------------------------------------------------------------------- */
/* Data-parallel training                                                                     */

/* How the replicas of other processes are reached: a transport the embedder provides
 * (clcnn_train provides one on MPI). Every call is collective: each process makes the same
 * calls in the same order with the same sizes. A callback returns 0 on success; anything else
 * fails the library call with CLCNN_ERR_COMM. Fill it with clcnn_comm_init, then set every field.
 * The struct is copied; user must stay valid. */
typedef struct clcnn_comm {
    size_t struct_size; /* sizeof(clcnn_comm), set by clcnn_comm_init */
    int rank;           /* this process, 0 .. size-1 */
    int size;           /* processes taking part */
    void *user;
    /* Sums n floats element-wise over every process, in place (MPI_Allreduce, MPI_SUM). */
    int (*allreduce_float)(void *user, float *buf, size_t n);
    /* The same for doubles (losses, hit counts, timings). */
    int (*allreduce_double)(void *user, double *buf, size_t n);
    /* Copies `bytes` bytes from process root's buf into every other process's buf. */
    int (*broadcast)(void *user, void *buf, size_t bytes, int root);
} clcnn_comm;

/* Sets comm->struct_size, and every other field to 0 and NULL. NULL is a no-op. */
void clcnn_comm_init(clcnn_comm *comm);

/* A data-parallel group: one model replica per context in this process, optionally spanning
 * processes through a clcnn_comm. A global batch of n samples is split into contiguous shares,
 * first across processes (rank order), then across each process's replicas, each split as even
 * as possible (parts differ by at most one sample). No share is smaller than
 * clcnn_model_min_train_batch: a batch too small to give every part that many (an epoch's last
 * batch, say) goes to the first parts only, as many as can take it, and the others take none;
 * a replica without samples adds no gradient and no BatchNorm statistics and applies the same
 * update. So a last batch of 2 on two replicas of a model with BatchNorm1d trains on replica 0
 * alone, as on one device (PyTorch's DistributedSampler would give each rank 1 and fail). Each
 * replica runs forward and backward on
 * its share with the loss divided by the global n, the gradients are summed over every
 * replica (host-staged: read, summed in replica order, all-reduced, written back), and every
 * replica applies the same optimizer update: the single-device step on the same global batch,
 * up to the order of float additions. Dropout draws by the sample's place in the global batch,
 * as one device does. Each replica runs in its own thread. A failure in any process fails the
 * step (or evaluation) in every process: with its own error where it happened, with
 * CLCNN_ERR_PEER elsewhere, so no process is left waiting in a collective.
 * BatchNorm normalises each share with its own batch statistics, as PyTorch's
 * DistributedDataParallel without SyncBatchNorm; after every step the running statistics of
 * replica 0 of rank 0 are copied to every replica (DDP's broadcast_buffers), so evaluation
 * and checkpoints use them. */
typedef struct clcnn_replicas clcnn_replicas;

/* Makes a group of n models (n >= 1, each on its own context, all with the same spec and input
 * shape); the caller keeps them and frees them after the group. The group gives every replica
 * replica 0's optimizer settings, label smoothing, parameters, running statistics, optimizer
 * state and step count (over comm: rank 0's), after checking through comm that every process
 * has the same model, optimizer settings and label smoothing (else CLCNN_ERR_COMM). comm
 * NULL: this process alone. Collective over comm. On failure *out still receives a handle
 * (unless memory ran out) whose errmsg says why; free it either way. */
clcnn_status clcnn_replicas_create(clcnn_replicas **out, clcnn_model *const *models, int n,
                                   const clcnn_comm *comm);
/* Stops the group's threads and frees it (not the models). NULL is a no-op. */
void clcnn_replicas_free(clcnn_replicas *r);
const char *clcnn_replicas_errmsg(const clcnn_replicas *r);
clcnn_status clcnn_replicas_errcode(const clcnn_replicas *r);

/* Replicas in this process, and in all processes together. */
int clcnn_replicas_local_count(const clcnn_replicas *r);
int clcnn_replicas_global_count(const clcnn_replicas *r);

/* The share of a global training batch of n samples that local replica i takes: samples
 * [first + *offset, first + *offset + *count) of the batch (offset within the global batch).
 * *count may be 0 (n too small for every replica to take clcnn_model_min_train_batch samples):
 * that replica only applies the update. */
void clcnn_replicas_share(const clcnn_replicas *r, int n, int i, int *offset, int *count);

/* One data-parallel training step on samples order[first .. first+n) of the data sets (n at
 * least clcnn_model_min_train_batch, else CLCNN_ERR_INVALID_ARGUMENT before anything runs):
 * ds[i] belongs to replica i's context and every ds[i] (in every process) holds the same
 * samples in the same epoch order (clcnn_dataset_set_epoch on each). Waits for the step (the
 * gradients cross the host). Collective over comm. */
clcnn_status clcnn_replicas_train_dataset(clcnn_replicas *r, clcnn_dataset *const *ds, int first,
                                          int n);

/* The last step's mean loss and hits over the whole global batch. */
clcnn_status clcnn_replicas_last_loss(clcnn_replicas *r, float *loss, int *correct);

/* clcnn_model_train_epoch over the group: the same batches, schedule, augmentation, hook
 * and progress callback, each step data-parallel; the callbacks see global figures. It refuses
 * what one model refuses (a batch smaller than clcnn_model_min_train_batch), before the first
 * step, with the same message. */
clcnn_status clcnn_replicas_train_epoch(clcnn_replicas *r, clcnn_dataset *const *ds,
                                        const clcnn_train_options *opts, int64_t *batches_done);

/* clcnn_model_evaluate over the group: each replica evaluates a contiguous part of the test
 * set (ds[i] as above) with the common running statistics; the sums are combined. Collective
 * over comm. */
clcnn_status clcnn_replicas_evaluate(clcnn_replicas *r, clcnn_dataset *const *ds, int batch_size,
                                     double *mean_loss, int *correct);

/* Where the group's time went since it was made, in seconds, summed over steps: compute is
 * the slowest replica's forward and backward, wait the time replicas of this process sat idle
 * for the slowest one (summed over replicas), reduce the host-side gradient sum, all-reduce
 * and write-back, steps the number of steps. Any pointer may be NULL. */
void clcnn_replicas_timing(const clcnn_replicas *r, double *compute, double *wait, double *reduce,
                           int64_t *steps);

/* ---------------------------------------------------------------------------------------- */
/* Checkpoints (safetensors)                                                                  */

/* Where a training run stands: completed epochs, optimizer steps taken in total, batches
 * taken in the current (unfinished) epoch, the seed that drives the epoch order, and the batch
 * size the run trains with, which a checkpoint records so that a run stopped in the middle of
 * an epoch is resumed on the same samples. */
typedef struct clcnn_checkpoint_info {
    size_t struct_size; /* sizeof(clcnn_checkpoint_info), set by clcnn_checkpoint_info_init */
    int64_t epoch;
    int64_t step;
    int64_t batch_in_epoch;
    uint64_t seed;
    int64_t batch_size; /* samples per step; 0 when not recorded */
    /* The training settings a resumed run must continue with, saved as given: the
     * learning-rate schedule, its base (or max) lr, length and pct_start, label smoothing and
     * augmentation. A checkpoint written before they were recorded reads as a constant
     * schedule with pct_start 0.3 and every other field 0. The lr of the last step taken is
     * the optimizer's (clcnn_model_get_optimizer). */
    clcnn_schedule_kind schedule;
    double schedule_lr;
    int64_t total_steps;
    double pct_start;
    double label_smoothing;
    int random_crop;
    int hflip;
    /* The input normalisation the run trained with, as the caller spells it (the CLI: its
     * --normalize text, "" for none) so that a resume or an evaluation feeds the model the
     * same inputs: "" or "MEAN,STD" for every channel or C means then C stds (numbers that
     * are finite as floats, stds > 0, at most 127 bytes). A save refuses any other text, as
     * a load does. */
    char normalize[128];
} clcnn_checkpoint_info;

/* Sets info->struct_size, and every other field to 0 ("" for normalize). NULL is a no-op. */
void clcnn_checkpoint_info_init(clcnn_checkpoint_info *info);

/* Writes the model to `path` as safetensors with torch.nn.Sequential state_dict names, so
 * `model.load_state_dict(safetensors.torch.load_file(path))` works in PyTorch; __metadata__
 * holds the spec, input shape, every field of *info and the clcnn version. The optimizer state
 * (momentum or moments, step count, hyperparameters) goes to a sibling file, `path` with
 * ".safetensors" replaced by ".state.safetensors", written first. Both writes are atomic:
 * each file is written and fsync'd under a fresh temporary name in the same folder
 * ("<file>.tmp.<pid>.<random>", created exclusively with mode 0600, never through a symbolic
 * link, and locked until its rename), and renamed over its target only when both are
 * complete; temporary files that a crashed process left beside the targets (unlocked, and
 * unchanged for ten minutes) are removed first. Each file carries an XXH64 of
 * everything in it (every tensor's bytes and all metadata) and both carry an XXH64 of the
 * weights, which binds them together; loads check both. Every field is written with one type
 * and range and a load reads it back with the same, so a save refuses
 * (CLCNN_ERR_INVALID_ARGUMENT, naming the field) what a load would refuse: epoch, step,
 * total_steps and the optimizer's step count in [0, 2^53] (exact as doubles, and far enough
 * below INT64_MAX that a run's arithmetic on them cannot overflow), batch_in_epoch and
 * batch_size in [0, 2^31-1], seed any uint64_t, finite lrs and smoothing as
 * clcnn_model_set_optimizer and the schedule accept them, the normalisation as above. */
clcnn_status clcnn_model_save_checkpoint(clcnn_model *model, const char *path,
                                         const clcnn_checkpoint_info *info);

/* Loads weights only (the --init path) from a safetensors state_dict, e.g. one PyTorch saved
 * with safetensors.torch.save_file(model.state_dict(), path). A common key prefix (the
 * tutorial's "model1.") is accepted. F32 and F64 tensors are accepted. A missing or unexpected
 * tensor under the prefix, or a shape mismatch, is CLCNN_ERR_FORMAT naming the tensor. The file
 * must be a regular file of at most 100 MB (header) plus 16 bytes per model parameter (the
 * weights in F64, and as much again of other tensors); a clcnn checkpoint must match its
 * checksums and hold metadata in range (as clcnn_model_load_checkpoint checks it), and the
 * model takes its recorded normalisation (clcnn_model_set_normalize; none for a plain
 * state_dict). A file whose "format" names a clcnn checkpoint version other than
 * clcnn-checkpoint/2 or /1 (a newer clcnn's) is CLCNN_ERR_FORMAT naming the versions this one
 * reads; a file without a clcnn format is a plain state_dict. On failure the model is
 * unchanged. */
clcnn_status clcnn_model_load_weights(clcnn_model *model, const char *path);

/* Loads a checkpoint written by clcnn_model_save_checkpoint, weights and optimizer state
 * (which replaces the current optimizer), and returns where the run stood in *info (whose
 * struct_size the caller sets, with clcnn_checkpoint_info_init). Both files are read and
 * checked completely (structure, the model's spec, shapes, both checksums, the pair's binding, the
 * optimizer settings, every metadata field against its type and range) before the model
 * changes: on any failure the model, its optimizer, its step count and its normalisation are
 * as they were. A torn or edited file is refused, with a message naming it, as is a file of an
 * unknown clcnn-checkpoint version. The model takes the checkpoint's normalisation
 * (clcnn_model_set_normalize). */
clcnn_status clcnn_model_load_checkpoint(clcnn_model *model, const char *path,
                                         clcnn_checkpoint_info *info);

/* Reads a checkpoint's model spec and input shape without a model, so the right model can be
 * built before loading; only the file's header is read. spec receives the whole spec: a
 * buffer of spec_size bytes that cannot hold it (with its NUL) is CLCNN_ERR_INVALID_ARGUMENT
 * with the size needed in err, never a cut spec; a buffer as large as the file always holds
 * it. Messages go to err (errsize bytes). Any output may be NULL. */
clcnn_status clcnn_checkpoint_peek(const char *path, char *spec, size_t spec_size, int *channels,
                                   int *height, int *width, char *err, size_t errsize);

/* The normalisation recorded in a checkpoint (clcnn_checkpoint_info.normalize) without a
 * model, "" when none was recorded; only the file's header is read. norm receives at most
 * size bytes including the NUL (128 always suffice). *recorded (may be NULL) tells a
 * checkpoint that records its normalisation (1; "" then means unnormalised inputs) from a file
 * that records nothing (0: a plain state_dict, or a checkpoint older than the record). A
 * recorded text that is no normalisation of the checkpoint's input channels, and a file of an
 * unknown clcnn-checkpoint version, are CLCNN_ERR_FORMAT. */
clcnn_status clcnn_checkpoint_peek_normalize(const char *path, char *norm, size_t size,
                                             int *recorded, char *err, size_t errsize);

/* ---------------------------------------------------------------------------------------- */
/* TensorBoard logs                                                                           */

/* What torch.utils.tensorboard.SummaryWriter writes for add_scalar: an
 * events.out.tfevents.<time>.<host> file in logdir (created with its parents) that
 * `tensorboard --logdir` reads. Every scalar reaches the OS when it is added, so a killed run
 * keeps every complete record. */
typedef struct clcnn_summary_writer clcnn_summary_writer;

/* Opens a writer on logdir. It holds no other handle. On failure *out still receives a handle
 * (unless memory ran out) whose errmsg says why; close it either way. */
clcnn_status clcnn_summary_writer_open(clcnn_summary_writer **out, const char *logdir);
clcnn_status clcnn_summary_writer_add_scalar(clcnn_summary_writer *w, const char *tag, float value,
                                             int64_t step);
/* The event file's path ("" when not open). */
const char *clcnn_summary_writer_path(const clcnn_summary_writer *w);
/* The last error message recorded on the writer ("" when none), and its status. */
const char *clcnn_summary_writer_errmsg(const clcnn_summary_writer *w);
clcnn_status clcnn_summary_writer_errcode(const clcnn_summary_writer *w);
/* Closes and frees; reports a failed write or close. NULL is a no-op. */
clcnn_status clcnn_summary_writer_close(clcnn_summary_writer *w);

#ifdef __cplusplus
}
#endif

#endif
