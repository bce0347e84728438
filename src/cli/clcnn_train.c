/* clcnn_train: the command-line front end, the PyTorch CIFAR-10 tutorial's training loop on any
 * OpenCL device. It uses only the public API (include/clcnn.h); it is the one place that
 * prints. */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clcnn.h"
#include "dist.h"

#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"
/* The most devices one process trains on with --devices. */
#define MAX_REPLICAS 16

/* The text fields of the option and checkpoint structs, named so that one field list can
 * declare them. */
typedef char recipe_text[512];
typedef char normalize_text[128];

/* Every field of cli_options, once, with what the ranks of an MPI run must share
 * (agree_settings): X(p, type, field, rule, kind, text).
 * - STEP: the field changes the arithmetic of a step, or which collective calls a rank makes,
 *   so every rank must hold the same value; text is the option a disagreement names, kind how
 *   its value is compared and shown (INT, REAL, TEXT, or OPTIMIZER and SCHEDULE: their words).
 *   The values compared are the resolved ones: after the --model preset's recipe, a resumed
 *   checkpoint's settings and the defaults that depend on --optimizer.
 * - DERIVED: computed from others; compared where the step takes it from (text says where).
 * - LOCAL: ranks may differ; text says why.
 * The struct is declared from this list, so a field cannot be added without one of the three.
 * p is passed through to X. */
/* clang-format off */
#define CLI_OPTIONS(X, p)                                                                          \
    X(p, int, platform, LOCAL, NONE, "each rank picks its own device")                            \
    X(p, int, device, LOCAL, NONE, "each rank picks its own device")                              \
    X(p, const char *, devices, LOCAL, NONE, "each rank has its own devices; the group splits "    \
      "the global batch over all replicas")                                                        \
    /* also compared before the devices (agree_mode): a rank that lists them stops there */     \
    X(p, int, list_devices, STEP, INT, "--list-devices")                                          \
    X(p, int, version, LOCAL, NONE, "ends before MPI starts (mpirun then ends the job)")          \
    X(p, int, help, LOCAL, NONE, "ends before MPI starts (mpirun then ends the job)")             \
    X(p, int, graph_json, LOCAL, NONE, "ends before MPI starts (mpirun then ends the job)")       \
    X(p, const char *, data, LOCAL, NONE, "each machine its own copy; what it holds is compared " \
      "(images, format, shape)")                                                                   \
    X(p, const char *, dataset, LOCAL, NONE, "the format found is compared")                      \
    X(p, const char *, model, STEP, TEXT, "--model")                                              \
    X(p, const char *, logdir, LOCAL, NONE, "rank 0 alone writes")                                \
    X(p, const char *, save_dir, LOCAL, NONE, "rank 0 alone writes")                              \
    X(p, const char *, metrics, LOCAL, NONE, "rank 0 alone writes")                               \
    X(p, const char *, init, LOCAL, NONE, "the group gives every rank rank 0's weights")          \
    X(p, const char *, resume, LOCAL, NONE, "what it restores is compared (optimizer, schedule, " \
      "step, epoch, seed, ...); the group gives every rank rank 0's weights and state")           \
    X(p, const char *, normalize, STEP, TEXT, "--normalize")                                      \
    X(p, int, model_given, LOCAL, NONE, "a default or a given value: the value is compared")      \
    X(p, int, seed_given, LOCAL, NONE, "a default or a given value: the value is compared")       \
    X(p, int, lr_given, LOCAL, NONE, "a default or a given value: the value is compared")         \
    X(p, int, optimizer_given, LOCAL, NONE, "a default or a given value: the value is compared")  \
    X(p, int, momentum_given, LOCAL, NONE, "a default or a given value: the value is compared")   \
    X(p, int, wd_given, LOCAL, NONE, "a default or a given value: the value is compared")         \
    X(p, int, betas_given, LOCAL, NONE, "a default or a given value: the value is compared")      \
    X(p, int, eps_given, LOCAL, NONE, "a default or a given value: the value is compared")        \
    X(p, int, batch_given, LOCAL, NONE, "a default or a given value: the value is compared")      \
    X(p, int, epochs_given, LOCAL, NONE, "a default or a given value: the value is compared")     \
    X(p, int, schedule_given, LOCAL, NONE, "a default or a given value: the value is compared")   \
    X(p, int, pct_given, LOCAL, NONE, "a default or a given value: the value is compared")        \
    X(p, int, smoothing_given, LOCAL, NONE, "a default or a given value: the value is compared")  \
    X(p, int, crop_given, LOCAL, NONE, "a default or a given value: the value is compared")       \
    X(p, int, hflip_given, LOCAL, NONE, "a default or a given value: the value is compared")      \
    X(p, int, no_decay_given, LOCAL, NONE, "a default or a given value: the value is compared")   \
    X(p, int, nesterov_given, LOCAL, NONE, "a default or a given value: the value is compared")   \
    /* before the numbers whose defaults they choose */                                           \
    X(p, clcnn_optimizer_kind, optimizer, STEP, OPTIMIZER, "--optimizer")                         \
    X(p, clcnn_schedule_kind, schedule, STEP, SCHEDULE, "--schedule")                             \
    X(p, long, epochs, STEP, INT, "--epochs")                                                     \
    X(p, long, batch_size, STEP, INT, "--batch-size")                                             \
    X(p, long, log_every, STEP, INT, "--log-every") /* a log point checks the loss for NaN */     \
    X(p, long, max_steps, STEP, INT, "--max-steps")                                               \
    X(p, double, lr, STEP, REAL, "--lr")                                                          \
    X(p, double, momentum, STEP, REAL, "--momentum")                                              \
    X(p, double, weight_decay, STEP, REAL, "--weight-decay")                                      \
    X(p, double, beta1, STEP, REAL, "--betas B1")                                                 \
    X(p, double, beta2, STEP, REAL, "--betas B2")                                                 \
    X(p, double, eps, STEP, REAL, "--eps")                                                        \
    X(p, double, label_smoothing, STEP, REAL, "--label-smoothing")                                \
    X(p, double, pct_start, STEP, REAL, "--pct-start")                                            \
    X(p, int, nesterov, STEP, INT, "--nesterov")                                                  \
    X(p, int, no_shuffle, STEP, INT, "--no-shuffle")                                              \
    X(p, int, eval_only, STEP, INT, "--eval-only")                                                \
    X(p, int, no_tensorboard, LOCAL, NONE, "rank 0 alone writes")                                 \
    X(p, int, plan, STEP, INT, "--plan")                                                          \
    X(p, int, no_recipe, LOCAL, NONE, "the settings it leaves or takes are compared")             \
    X(p, int, random_crop, STEP, INT, "--random-crop")                                            \
    X(p, int, hflip, STEP, INT, "--hflip")                                                        \
    X(p, int, no_decay_bn_bias, STEP, INT, "--no-decay-bn-bias")                                  \
    X(p, uint64_t, seed, STEP, INT, "--seed")                                                     \
    /* the schedule's length: epochs * batches per epoch */                                        \
    X(p, int64_t, total_steps, DERIVED, NONE, "the checkpoint info's and the loop's total_steps")  \
    /* the --model preset's recipe in force, or NULL, and its values that apply, as options */    \
    X(p, const struct recipe *, recipe, LOCAL, NONE, "the settings it gives are compared")        \
    X(p, recipe_text, recipe_used, LOCAL, NONE, "printed only")
/* clang-format on */

/* A field of a list above, declared. */
#define DECLARE_FIELD(p, type, field, rule, kind, text) type field;

typedef struct cli_options {
    CLI_OPTIONS(DECLARE_FIELD, 0)
} cli_options;

/* Preset recipes: the defaults a --model preset brings for the options the command line leaves
 * out (--no-recipe turns them off). One row per preset; --help lists them. The optimizer
 * settings (lr, momentum, nesterov, weight decay) are SGD's: they apply unless --optimizer
 * names another. */
typedef struct recipe {
    const char *model;
    clcnn_schedule_kind schedule;
    double lr, momentum, weight_decay, label_smoothing, pct_start;
    int nesterov, no_decay_bn_bias, random_crop, hflip;
    long batch_size, epochs;
    const char *normalize; /* NULL: none */
} recipe;

static const recipe recipes[] = {
    /* Residual network on Fashion-MNIST (1x28x28; --normalize is its mean and std). */
    {.model = "resnet",
     .schedule = CLCNN_SCHEDULE_ONECYCLE,
     .pct_start = 0.25,
     .lr = 0.2,
     .momentum = 0.9,
     .nesterov = 1,
     .weight_decay = 5e-4,
     .no_decay_bn_bias = 1,
     .label_smoothing = 0.1,
     .random_crop = 2,
     .hflip = 1,
     .batch_size = 256,
     .epochs = 10,
     .normalize = "0.2860,0.3530"},
};

static const char usage_text[] =
    "Usage: clcnn_train [options]\n"
    "Train a CNN on an OpenCL device: the PyTorch CIFAR-10 tutorial's loop (cross-entropy,\n"
    "SGD, test loss and accuracy every epoch, a checkpoint every epoch, TensorBoard scalars).\n"
    "\n"
    "Device:\n"
    "  --list-devices        list the visible OpenCL devices (like nvidia-smi) and exit\n"
    "  --platform P          use platform P (index in clGetPlatformIDs order)\n"
    "  --device D            with --platform: the D-th visible device of platform P;\n"
    "                        alone: the D-th device of the visible list\n"
    "                        (neither: the first visible GPU, else the first visible device;\n"
    "                        under mpirun, the device of the node-local rank)\n"
    "  --devices LIST        data-parallel over several devices: a comma list of indices as\n"
    "                        --device takes them (with --platform: within that platform), or\n"
    "                        'all'. --batch-size stays the global batch, split evenly (a\n"
    "                        batch too small to go round over fewer devices); see README,\n"
    "                        Scaling out (also for mpirun)\n"
    "  --version             print clcnn's version and the OpenCL/CLBlast versions found\n"
    "\n"
    "Data:\n"
    "  --data DIR            data folder: CIFAR-10 binary (data_batch_1..5.bin, test_batch.bin,\n"
    "                        also inside cifar-10-batches-bin/) or MNIST/Fashion-MNIST IDX files\n"
    "                        (plain or .gz). Default: " DEFAULT_DATA "\n"
    "                        when it exists (Debian's dataset-fashion-mnist)\n"
    "  --dataset NAME        cifar10 | mnist | fashion-mnist (default: detect from the files)\n"
    "  --normalize M,S       after scaling pixels to [0,1]: (x - M) / S for every channel, or\n"
    "                        C means then C stds (e.g. 0.49,0.48,0.45,0.25,0.24,0.26)\n"
    "  --no-shuffle          keep file order (default: reshuffle every epoch from --seed)\n"
    "\n"
    "Model and optimizer:\n"
    "  --model SPEC          a preset (seed, seed-relu, resnet, resnet18) or a spec,\n"
    "                        see docs/MODEL_SPEC.md\n"
    "                        (default: seed)\n"
    "  --optimizer NAME      sgd | adam | adamw (default: sgd)\n"
    "  --lr X                learning rate (default: 0.01 for sgd, 0.001 for adam/adamw)\n"
    "  --momentum X          SGD momentum (default: 0)\n"
    "  --nesterov            SGD Nesterov momentum (needs --momentum)\n"
    "  --weight-decay X      L2 penalty for sgd/adam, decoupled for adamw (default: 0, adamw\n"
    "                        0.01)\n"
    "  --betas B1,B2         Adam/AdamW betas (default: 0.9,0.999)\n"
    "  --eps X               Adam/AdamW epsilon (default: 1e-8)\n"
    "  --no-decay-bn-bias    no weight decay on biases and BatchNorm weights and biases\n"
    "  --label-smoothing E   nn.CrossEntropyLoss(label_smoothing=E), 0 <= E <= 1, in training\n"
    "                        and evaluation (default: 0)\n"
    "  --seed N              seed for initial weights, shuffling and augmentation (default: 1);\n"
    "                        the same seed repeats a run bit for bit on the same device\n"
    "  --no-recipe           ignore the --model preset's recipe (see Recipes below)\n"
    "\n"
    "Training:\n"
    "  --epochs N            epochs to train (default: 10)\n"
    "  --batch-size N        samples per step (default: 64, or a resumed checkpoint's); the\n"
    "                        last partial batch is used (a last batch of 1 is refused at\n"
    "                        start-up when a BatchNorm layer sees one value per channel)\n"
    "  --schedule NAME       learning rate after every step: constant | cosine\n"
    "                        (CosineAnnealingLR, T_max = all steps) | onecycle (OneCycleLR,\n"
    "                        max_lr = --lr, cos, div_factor 25, final_div_factor 1e4, no\n"
    "                        momentum cycling) (default: constant)\n"
    "  --pct-start F         onecycle: the share of steps spent rising, 0 <= F <= 1\n"
    "                        (default: 0.3)\n"
    "  --random-crop P       training: pad P zero pixels on each side and crop back at a random\n"
    "                        offset, as torchvision's RandomCrop(size, padding=P) (default: 0)\n"
    "  --hflip               training: mirror half the images, as RandomHorizontalFlip()\n"
    "  --max-steps N         stop after N steps in total, then evaluate and save as at an\n"
    "                        epoch's end\n"
    "  --log-every N         log the step's loss, elapsed time and images/s every N steps\n"
    "                        (default: 100)\n"
    "  --init FILE           start from weights in a safetensors state_dict (e.g. PyTorch's\n"
    "                        safetensors.torch.save_file(model.state_dict(), FILE)); a common\n"
    "                        key prefix such as 'model1.' is accepted; a clcnn checkpoint's\n"
    "                        --normalize is taken, and another --normalize is refused\n"
    "  --resume FILE         continue a run from a checkpoint (FILE and FILE's .state sibling):\n"
    "                        weights, optimizer state and settings, step, epoch, seed and\n"
    "                        batch size, schedule, label smoothing, augmentation and\n"
    "                        --normalize. An option that differs from the checkpoint's is\n"
    "                        refused, and so is another --batch-size when the checkpoint\n"
    "                        stopped mid-epoch (--max-steps), and, with a schedule,\n"
    "                        --epochs or --batch-size that change its length (--epochs\n"
    "                        defaults to the schedule's)\n"
    "  --eval-only           evaluate the test set with --init or --resume weights and exit\n"
    "  --graph-json          print the --model graph as JSON and exit (no device, no data):\n"
    "                        each layer's kind, module path, inputs and arguments, what\n"
    "                        python/clcnn_torch.py builds its PyTorch module from\n"
    "  --plan                print the model's plan for --batch-size and exit: one line per\n"
    "                        node (a layer, or two fused: a convolution and the MaxPool2d(2)\n"
    "                        after it, a BatchNorm and the ReLU after it) with its input,\n"
    "                        output shape, the algorithm of its forward, weight gradient and\n"
    "                        input gradient, and its buffers' size (\"pads for N\": it writes\n"
    "                        node N's padded input, so N pads nothing; \"pads gradient for N\":\n"
    "                        the same for N's output gradient), then the device memory of a\n"
    "                        training step; a batch too large for\n"
    "                        clcnn's 32-bit indices or the device's largest allocation fails\n"
    "                        with the error a training step would give\n"
    "\n"
    "Output:\n"
    "  --save-dir DIR        checkpoint folder: epoch_<N>.safetensors after every epoch, loadable\n"
    "                        with model.load_state_dict(safetensors.torch.load_file(f))\n"
    "                        (default: model)\n"
    "  --logdir DIR          TensorBoard folder: train_loss and learning_rate by step,\n"
    "                        test_loss and test_accuracy by epoch (default: logs)\n"
    "  --no-tensorboard      do not write TensorBoard events\n"
    "  --metrics FILE        append JSON Lines: one record per log point (loss, lr) and per\n"
    "                        evaluation, each whole or not at all; a torn last line (a killed\n"
    "                        run's) is cut, with a note\n"
    "  -h, --help            show this help\n"
    "\n"
    "Environment:\n"
    "  CLCNN_VISIBLE_DEVICES  comma list of global indices (3), P:D pairs (0:1) or type words\n"
    "                         (cpu, gpu, accelerator); its order is the visible order; empty\n"
    "                         hides every device\n"
    "  CLCNN_BACKEND          GEMM backend: cpu, gpu, opencl or clblast (default: by device\n"
    "                         type)\n"
    "  CLCNN_CONV_ALGO        convolution algorithm: direct (no Winograd), im2col or implicit\n"
    "                         (default: by device type; --plan shows what each layer takes)\n"
    "  CLCNN_IMPLICIT_SIZE    the implicit kernels' size: 64, 32, 64x128 or 64w8 (default:\n"
    "                         by device class)\n"
    "  CLCNN_AUTOTUNE=1       time interchangeable kernels on first use of each shape, keep the\n"
    "                         fastest in the cache folder (default: fixed rules, repeatable)\n"
    "  CLCNN_KERNEL_DIR       read kernel sources from DIR/<name>.cl instead of the embedded ones\n"
    "  CLCNN_CACHE_DIR        program-binary cache folder (default $XDG_CACHE_HOME/clcnn or\n"
    "                         ~/.cache/clcnn; created 0700, used only when it and each entry\n"
    "                         belong to the user and the folder is not group- or\n"
    "                         world-writable, else a note says why); CLCNN_CACHE=0 turns the\n"
    "                         cache off\n";

/* This process's rank in an MPI run of several, for error lines; -1 otherwise. */
static int say_rank = -1;

/* One error line on stderr: "clcnn_train: " and the message. Messages quote what the user
 * typed and what files hold, so control characters are shown as \xNN rather than breaking the
 * line or reaching the terminal. `lead` is printed first, as it is (the newline that ends a
 * progress bar). The line goes out in one write: stderr is unbuffered, and a line written a
 * character at a time reaches an MPI launcher in pieces, between which it prints its own lines
 * (another rank's, its banner for a rank's exit status). */
static void vsay(const char *lead, const char *fmt, va_list ap) {
    char msg[2048], line[4 * sizeof msg + 64];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = 0;
    if (say_rank >= 0)
        n = (size_t)snprintf(line, sizeof line, "%sclcnn_train (rank %d): ", lead, say_rank);
    else
        n = (size_t)snprintf(line, sizeof line, "%sclcnn_train: ", lead);
    if (n >= sizeof line) n = 0;
    for (const unsigned char *p = (const unsigned char *)msg; *p && n + 6 < sizeof line; p++)
        if (*p < 0x20 || *p == 0x7f)
            n += (size_t)snprintf(line + n, sizeof line - n, "\\x%02x", *p);
        else
            line[n++] = (char)*p;
    line[n++] = '\n';
    fwrite(line, 1, n, stderr);
}

#if defined(__GNUC__)
#define CLI_PRINTF(i, j) __attribute__((format(printf, i, j)))
#else
#define CLI_PRINTF(i, j)
#endif

static void say(const char *fmt, ...) CLI_PRINTF(1, 2);
static void say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsay("", fmt, ap);
    va_end(ap);
}

/* say() after a progress bar's line (lead "\n" on a terminal). */
static void say_after(const char *lead, const char *fmt, ...) CLI_PRINTF(2, 3);
static void say_after(const char *lead, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsay(lead, fmt, ap);
    va_end(ap);
}

/* say(), then exit status 2: for bad command lines. */
static void die(const char *fmt, ...) CLI_PRINTF(1, 2);
static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsay("", fmt, ap);
    va_end(ap);
    exit(2);
}

/* How an option's value is read. */
typedef enum arg_kind {
    ARG_FLAG,      /* no value: the int field becomes 1 */
    ARG_INT,       /* an int in [lo, hi] */
    ARG_LONG,      /* a long in [lo, hi] */
    ARG_U64,       /* a uint64_t in [lo, hi] */
    ARG_NUMBER,    /* a finite double, greater than 0 when lo is 1, else not negative */
    ARG_TEXT,      /* the word as given */
    ARG_BETAS,     /* B1,B2 into beta1 and beta2 */
    ARG_OPTIMIZER, /* sgd | adam | adamw */
    ARG_FRACTION,  /* a double in [0, 1] */
    ARG_SCHEDULE,  /* constant | cosine | onecycle */
} arg_kind;

/* One command-line option: where its value goes in cli_options and, for those a resume checks
 * or a default depends on, the int that records that it was given. */
typedef struct cli_arg {
    const char *name;
    arg_kind kind;
    size_t field, given; /* offsets into cli_options; given is NOT_RECORDED for none */
    long lo, hi;
} cli_arg;

#define OPT(f) offsetof(cli_options, f)
#define NOT_RECORDED ((size_t)-1)

/* clang-format off */
static const cli_arg cli_args[] = {
    {"-h",               ARG_FLAG,      OPT(help),           NOT_RECORDED,         0, 0},
    {"--help",           ARG_FLAG,      OPT(help),           NOT_RECORDED,         0, 0},
    {"--version",        ARG_FLAG,      OPT(version),        NOT_RECORDED,         0, 0},
    {"--list-devices",   ARG_FLAG,      OPT(list_devices),   NOT_RECORDED,         0, 0},
    {"--nesterov",       ARG_FLAG,      OPT(nesterov),       OPT(nesterov_given),  0, 0},
    {"--hflip",          ARG_FLAG,      OPT(hflip),          OPT(hflip_given),     0, 0},
    {"--no-decay-bn-bias", ARG_FLAG,    OPT(no_decay_bn_bias), OPT(no_decay_given), 0, 0},
    {"--no-recipe",      ARG_FLAG,      OPT(no_recipe),      NOT_RECORDED,         0, 0},
    {"--no-shuffle",     ARG_FLAG,      OPT(no_shuffle),     NOT_RECORDED,         0, 0},
    {"--eval-only",      ARG_FLAG,      OPT(eval_only),      NOT_RECORDED,         0, 0},
    {"--plan",           ARG_FLAG,      OPT(plan),           NOT_RECORDED,         0, 0},
    {"--graph-json",     ARG_FLAG,      OPT(graph_json),     NOT_RECORDED,         0, 0},
    {"--no-tensorboard", ARG_FLAG,      OPT(no_tensorboard), NOT_RECORDED,         0, 0},
    {"--platform",       ARG_INT,       OPT(platform),       NOT_RECORDED,         0, INT_MAX},
    {"--device",         ARG_INT,       OPT(device),         NOT_RECORDED,         0, INT_MAX},
    {"--devices",        ARG_TEXT,      OPT(devices),        NOT_RECORDED,         0, 0},
    {"--data",           ARG_TEXT,      OPT(data),           NOT_RECORDED,         0, 0},
    {"--dataset",        ARG_TEXT,      OPT(dataset),        NOT_RECORDED,         0, 0},
    {"--model",          ARG_TEXT,      OPT(model),          OPT(model_given),     0, 0},
    {"--epochs",         ARG_LONG,      OPT(epochs),         OPT(epochs_given),    1, 1000000},
    {"--batch-size",     ARG_LONG,      OPT(batch_size),     OPT(batch_given),     1, 1 << 20},
    {"--log-every",      ARG_LONG,      OPT(log_every),      NOT_RECORDED,         1, LONG_MAX},
    {"--max-steps",      ARG_LONG,      OPT(max_steps),      NOT_RECORDED,         1, LONG_MAX},
    {"--lr",             ARG_NUMBER,    OPT(lr),             OPT(lr_given),        1, 0},
    {"--momentum",       ARG_NUMBER,    OPT(momentum),       OPT(momentum_given),  0, 0},
    {"--weight-decay",   ARG_NUMBER,    OPT(weight_decay),   OPT(wd_given),        0, 0},
    {"--eps",            ARG_NUMBER,    OPT(eps),            OPT(eps_given),       0, 0},
    {"--betas",          ARG_BETAS,     OPT(beta1),          OPT(betas_given),     0, 0},
    {"--optimizer",      ARG_OPTIMIZER, OPT(optimizer),      OPT(optimizer_given), 0, 0},
    {"--seed",           ARG_U64,       OPT(seed),           OPT(seed_given),      0, LONG_MAX},
    {"--logdir",         ARG_TEXT,      OPT(logdir),         NOT_RECORDED,         0, 0},
    {"--save-dir",       ARG_TEXT,      OPT(save_dir),       NOT_RECORDED,         0, 0},
    {"--metrics",        ARG_TEXT,      OPT(metrics),        NOT_RECORDED,         0, 0},
    {"--init",           ARG_TEXT,      OPT(init),           NOT_RECORDED,         0, 0},
    {"--resume",         ARG_TEXT,      OPT(resume),         NOT_RECORDED,         0, 0},
    {"--normalize",      ARG_TEXT,      OPT(normalize),      NOT_RECORDED,         0, 0},
    {"--label-smoothing", ARG_FRACTION, OPT(label_smoothing), OPT(smoothing_given), 0, 0},
    {"--schedule",       ARG_SCHEDULE,  OPT(schedule),       OPT(schedule_given),  0, 0},
    {"--pct-start",      ARG_FRACTION,  OPT(pct_start),      OPT(pct_given),       0, 0},
    {"--random-crop",    ARG_INT,       OPT(random_crop),    OPT(crop_given),      0, CLCNN_MAX_CROP},
};
/* clang-format on */

/* Strict integer in [lo, hi]: no trailing garbage, no overflow. */
static long parse_long(const char *opt, const char *v, long lo, long hi) {
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        if (lo == 0 && hi == INT_MAX) die("%s: '%s' is not a non-negative integer", opt, v);
        die("%s: '%s' is not an integer in [%ld, %ld]", opt, v, lo, hi);
    }
    return x;
}

/* Strict finite number; `positive` requires > 0, else >= 0. */
static double parse_double(const char *opt, const char *v, int positive) {
    char *end = NULL;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x)) die("%s: '%s' is not a number", opt, v);
    if (positive && !(x > 0)) die("%s: %s must be greater than 0", opt, v);
    if (!positive && x < 0) die("%s: %s must not be negative", opt, v);
    return x;
}

/* A number in [0, 1]. */
static double parse_fraction(const char *opt, const char *v) {
    double x = parse_double(opt, v, 0);
    if (x > 1) die("%s: %s is not in [0, 1]", opt, v);
    return x;
}

static clcnn_schedule_kind parse_schedule(const char *v) {
    int k = clcnn_schedule_parse(v);
    if (k < 0) die("--schedule: '%s' is not constant, cosine or onecycle", v);
    return (clcnn_schedule_kind)k;
}

static void parse_betas(const char *v, double *beta1, double *beta2) {
    char *end = NULL;
    errno = 0;
    *beta1 = strtod(v, &end);
    if (errno || end == v || *end != ',') die("--betas: '%s' is not B1,B2", v);
    const char *b2 = end + 1;
    *beta2 = strtod(b2, &end);
    if (errno || end == b2 || *end) die("--betas: '%s' is not B1,B2", v);
    if (!(*beta1 >= 0 && *beta1 < 1 && *beta2 >= 0 && *beta2 < 1))
        die("--betas: %s: each beta must be in [0, 1)", v);
}

/* The --optimizer words, indexed by clcnn_optimizer_kind. */
static const char *const optimizer_words[] = {"sgd", "adam", "adamw"};

static clcnn_optimizer_kind parse_optimizer(const char *v) {
    for (int k = 0; k < 3; k++)
        if (!strcmp(v, optimizer_words[k])) return (clcnn_optimizer_kind)k;
    die("--optimizer: '%s' is not sgd, adam or adamw", v);
    return CLCNN_OPTIMIZER_SGD;
}

/* Stores option a's value v (NULL for a flag) into o. */
static void take_arg(const cli_arg *a, const char *v, cli_options *o) {
    char *field = (char *)o + a->field;
    switch (a->kind) {
    case ARG_FLAG: *(int *)field = 1; break;
    case ARG_INT: *(int *)field = (int)parse_long(a->name, v, a->lo, a->hi); break;
    case ARG_LONG: *(long *)field = parse_long(a->name, v, a->lo, a->hi); break;
    case ARG_U64: *(uint64_t *)field = (uint64_t)parse_long(a->name, v, a->lo, a->hi); break;
    case ARG_NUMBER: *(double *)field = parse_double(a->name, v, a->lo == 1); break;
    case ARG_TEXT: *(const char **)field = v; break;
    case ARG_BETAS: parse_betas(v, &o->beta1, &o->beta2); break;
    case ARG_OPTIMIZER: o->optimizer = parse_optimizer(v); break;
    case ARG_FRACTION: *(double *)field = parse_fraction(a->name, v); break;
    case ARG_SCHEDULE: o->schedule = parse_schedule(v); break;
    }
    if (a->given != NOT_RECORDED) *(int *)((char *)o + a->given) = 1;
}

static void set_defaults(cli_options *o) {
    memset(o, 0, sizeof *o);
    o->platform = o->device = -1;
    o->model = "seed";
    o->logdir = "logs";
    o->save_dir = "model";
    o->epochs = 10;
    o->batch_size = 64;
    o->log_every = 100;
    o->lr = 0.01;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->eps = 1e-8;
    o->weight_decay = -1; /* per optimizer default */
    o->seed = 1;
    o->optimizer = CLCNN_OPTIMIZER_SGD;
    o->schedule = CLCNN_SCHEDULE_CONSTANT;
    o->pct_start = 0.3;
}

/* The recipe of the --model preset, or NULL. */
static const recipe *find_recipe(const char *model) {
    for (size_t i = 0; i < sizeof recipes / sizeof recipes[0]; i++)
        if (!strcmp(model, recipes[i].model)) return &recipes[i];
    return NULL;
}

/* Appends " --opt value" to o->recipe_used. */
static void note_used(cli_options *o, const char *fmt, ...) CLI_PRINTF(2, 3);
static void note_used(cli_options *o, const char *fmt, ...) {
    size_t n = strlen(o->recipe_used);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->recipe_used + n, sizeof o->recipe_used - n, fmt, ap);
    va_end(ap);
}

/* The recipe's optimizer settings, for the options not given (SGD's: not for another
 * --optimizer). */
static void apply_recipe_optimizer(cli_options *o, const recipe *r) {
    if (o->optimizer_given && o->optimizer != CLCNN_OPTIMIZER_SGD) return;
    if (!o->lr_given) {
        o->lr = r->lr;
        note_used(o, " --lr %g", r->lr);
    }
    if (!o->momentum_given && r->momentum > 0) {
        o->momentum = r->momentum;
        note_used(o, " --momentum %g", r->momentum);
        if (r->nesterov && !o->nesterov) {
            o->nesterov = 1;
            note_used(o, " --nesterov");
        }
    }
    if (!o->wd_given) {
        o->weight_decay = r->weight_decay;
        note_used(o, " --weight-decay %g", r->weight_decay);
    }
}

/* The --model preset's recipe, for the options the command line leaves out. */
static void apply_recipe(cli_options *o) {
    const recipe *r = o->no_recipe ? NULL : find_recipe(o->model);
    if (!r) return;
    o->recipe = r;
    if (!o->schedule_given && r->schedule != CLCNN_SCHEDULE_CONSTANT) {
        o->schedule = r->schedule;
        note_used(o, " --schedule %s", clcnn_schedule_name(r->schedule));
    }
    if (!o->pct_given && o->schedule == CLCNN_SCHEDULE_ONECYCLE) {
        o->pct_start = r->pct_start;
        note_used(o, " --pct-start %g", r->pct_start);
    }
    apply_recipe_optimizer(o, r);
    if (r->no_decay_bn_bias && !o->no_decay_bn_bias) {
        o->no_decay_bn_bias = 1;
        note_used(o, " --no-decay-bn-bias");
    }
    if (!o->smoothing_given && r->label_smoothing > 0) {
        o->label_smoothing = r->label_smoothing;
        note_used(o, " --label-smoothing %g", r->label_smoothing);
    }
    if (!o->crop_given && r->random_crop > 0) {
        o->random_crop = r->random_crop;
        note_used(o, " --random-crop %d", r->random_crop);
    }
    if (r->hflip && !o->hflip) {
        o->hflip = 1;
        note_used(o, " --hflip");
    }
    if (!o->batch_given) {
        o->batch_size = r->batch_size;
        note_used(o, " --batch-size %ld", r->batch_size);
    }
    if (!o->epochs_given) {
        o->epochs = r->epochs;
        note_used(o, " --epochs %ld", r->epochs);
    }
    if (!o->normalize && r->normalize) {
        o->normalize = r->normalize;
        note_used(o, " --normalize %s", r->normalize);
    }
}

/* --help's list of recipes, from the table. */
static void print_recipes(void) {
    printf("\nRecipes: a --model preset with a recipe takes these values for the options not\n"
           "given (--no-recipe: none of them):\n");
    for (size_t i = 0; i < sizeof recipes / sizeof recipes[0]; i++) {
        const recipe *r = &recipes[i];
        printf("  %-10s --schedule %s", r->model, clcnn_schedule_name(r->schedule));
        if (r->schedule == CLCNN_SCHEDULE_ONECYCLE) printf(" --pct-start %g", r->pct_start);
        printf(" --lr %g --momentum %g%s\n", r->lr, r->momentum, r->nesterov ? " --nesterov" : "");
        printf("             --weight-decay %g%s --label-smoothing %g\n", r->weight_decay,
               r->no_decay_bn_bias ? " --no-decay-bn-bias" : "", r->label_smoothing);
        printf("             --random-crop %d%s --batch-size %ld --epochs %ld", r->random_crop,
               r->hflip ? " --hflip" : "", r->batch_size, r->epochs);
        if (r->normalize) printf(" --normalize %s", r->normalize);
        printf("\n");
    }
}

static void parse_args(int argc, char **argv, cli_options *o) {
    set_defaults(o);
    for (int i = 1; i < argc; i++) {
        const cli_arg *a = NULL;
        const char *v = NULL;
        for (size_t k = 0; k < sizeof cli_args / sizeof cli_args[0] && !a; k++)
            if (!strcmp(argv[i], cli_args[k].name)) a = &cli_args[k];
        /* An unknown word is named as such, even as the last argument, never as "needs a
         * value". */
        if (!a) die("unknown option '%s' (see --help)", argv[i]);
        if (a->kind != ARG_FLAG) {
            if (i + 1 >= argc || argv[i + 1] == NULL) die("%s needs a value (see --help)", argv[i]);
            v = argv[++i];
        }
        take_arg(a, v, o);
    }
    if (o->dataset && clcnn_dataset_format_parse(o->dataset) < 0)
        die("--dataset: '%s' is not cifar10, mnist or fashion-mnist", o->dataset);
    apply_recipe(o);
    if (o->normalize && strlen(o->normalize) > 127) die("--normalize: at most 127 characters");
    if (o->pct_given && o->schedule != CLCNN_SCHEDULE_ONECYCLE)
        die("--pct-start applies to --schedule onecycle only");
    if (o->nesterov && o->momentum <= 0) die("--nesterov needs --momentum greater than 0");
    if (o->optimizer != CLCNN_OPTIMIZER_SGD && (o->momentum > 0 || o->nesterov))
        die("--momentum and --nesterov apply to --optimizer sgd only");
    if (o->init && o->resume) die("--init and --resume exclude each other");
    if (o->devices && o->device >= 0) die("--device and --devices exclude each other");
    if (o->devices && strcmp(o->devices, "all") != 0) {
        const char *p = o->devices;
        while (*p >= '0' && *p <= '9') {
            while (*p >= '0' && *p <= '9')
                p++;
            if (*p == ',' && p[1]) p++;
        }
        if (*p || !o->devices[0])
            die("--devices: '%s' is not 'all' or a comma list of device indices (0,1)", o->devices);
    }
    if (o->eval_only && !o->init && !o->resume)
        die("--eval-only needs weights: --init FILE or --resume FILE");
    if (!o->lr_given && o->optimizer != CLCNN_OPTIMIZER_SGD) o->lr = 1e-3;
    if (o->weight_decay < 0) o->weight_decay = o->optimizer == CLCNN_OPTIMIZER_ADAMW ? 1e-2 : 0;
}

static const char *type_name(clcnn_device_type t) {
    switch (t) {
    case CLCNN_DEVICE_CPU: return "CPU";
    case CLCNN_DEVICE_GPU: return "GPU";
    case CLCNN_DEVICE_ACCELERATOR: return "accelerator";
    case CLCNN_DEVICE_OTHER: break;
    }
    return "other";
}

/* --graph-json: the graph of the --model spec (clcnn_spec_graph_json). */
static int print_graph_json(const char *model) {
    char err[1100];
    size_t need = 0;
    if (clcnn_spec_graph_json(model, NULL, 0, &need, err, sizeof err) != CLCNN_SUCCESS) {
        say("--model: %s", err);
        return 2;
    }
    char *json = malloc(need + 1);
    if (!json) {
        say("out of memory");
        return 1;
    }
    clcnn_spec_graph_json(model, json, need + 1, NULL, NULL, 0);
    fputs(json, stdout);
    free(json);
    return fflush(stdout) == 0 ? 0 : 1;
}

static int print_version(void) {
    clcnn_devices *devs = NULL;
    clcnn_status st;
    printf("clcnn %s\n", clcnn_version());
    printf("CLBlast %s\n", clcnn_blas_version());
    st = clcnn_devices_create(&devs, NULL);
    if (st != CLCNN_SUCCESS) {
        printf("OpenCL: %s\n", clcnn_devices_errmsg(devs));
    } else if (clcnn_devices_count(devs) == 0) {
        printf("OpenCL: no visible device\n");
    } else {
        for (int i = 0; i < clcnn_devices_count(devs); i++) {
            clcnn_device_info in;
            clcnn_devices_get(devs, i, &in);
            printf("OpenCL device %d:%d: %s | %s | %s | driver %s\n", in.platform_index,
                   in.device_index, in.name, in.platform_version, in.opencl_c_version,
                   in.driver_version);
        }
    }
    clcnn_devices_free(devs);
    return 0;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* mkdir -p; returns 0 or an errno. */
static int make_dirs(const char *dir) {
    char tmp[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof tmp) return ENAMETOOLONG;
    memcpy(tmp, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (tmp[i] != '/' && tmp[i] != '\0') continue;
        char c = tmp[i];
        tmp[i] = '\0';
        if (mkdir(tmp, 0777) != 0 && errno != EEXIST) return errno;
        tmp[i] = c;
    }
    struct stat sb;
    if (stat(dir, &sb) != 0) return errno;
    return S_ISDIR(sb.st_mode) ? 0 : ENOTDIR;
}

/* Fails early, before any training, when checkpoints could not be written. */
static int check_writable_dir(const char *dir, const char *opt) {
    char probe[4200];
    int err = make_dirs(dir);
    if (!err) {
        /* A fresh name created exclusively: a file or link planted at a guessable name is never
         * opened, let alone truncated. */
        snprintf(probe, sizeof probe, "%s/.clcnn_write_test.XXXXXX", dir);
        int fd = mkstemp(probe);
        if (fd < 0)
            err = errno;
        else {
            close(fd);
            remove(probe);
        }
    }
    if (err) {
        say("%s %s is not writable: %s", opt, dir, strerror(err));
        return -1;
    }
    return 0;
}

/* --normalize's text into channels means and stds: "M,S" for every channel, or the means then
 * the stds. -1 with why "" for text of the wrong shape, or with why naming a number float
 * cannot hold: one that rounds to infinity, or a std that rounds below the smallest normal
 * float; clcnn_dataset_set_normalize checks the rest. */
static int parse_normalize(const char *v, int channels, float *mean, float *std, char *why,
                           size_t size) {
    double vals[64];
    int n = 0;
    const char *p = v;
    why[0] = '\0';
    while (*p && n < 64) {
        char *end = NULL;
        errno = 0;
        vals[n] = strtod(p, &end);
        /* "inf" and "nan" are not numbers here; 1e999 is one too large */
        if (end == p || (!isfinite(vals[n]) && errno != ERANGE)) return -1;
        if (fabs(vals[n]) >= (double)FLT_MAX + 0x1p103) { /* it rounds to infinity */
            snprintf(why, size, "%.*s is too large for float (the largest magnitude is %.9g)",
                     (int)(end - p), p, FLT_MAX);
            return -1;
        }
        n++;
        if (*end == ',')
            p = end + 1;
        else if (*end == '\0')
            p = end;
        else
            return -1;
    }
    if (*p) return -1;
    int stds = n == 2 ? 1 : n == 2 * channels ? channels : n; /* the first std; n: no stds */
    for (int k = stds; k < n; k++)
        if (vals[k] > 0 && (float)vals[k] < FLT_MIN) {
            snprintf(why, size,
                     "std %.9g is below %.9g, the smallest normal float (1/std must be finite)",
                     vals[k], FLT_MIN);
            return -1;
        }
    if (n == 2) {
        for (int c = 0; c < channels; c++)
            mean[c] = (float)vals[0], std[c] = (float)vals[1];
    } else if (n == 2 * channels) {
        for (int c = 0; c < channels; c++)
            mean[c] = (float)vals[c], std[c] = (float)vals[channels + c];
    } else {
        return -1;
    }
    for (int c = 0; c < channels; c++)
        if (!(std[c] > 0)) return -1;
    return 0;
}

/* The shortest text that reads back as exactly v ("0.9", not "0.90000000000000002"). */
static const char *exact(char buf[32], double v) {
    snprintf(buf, 32, "%.15g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, 32, "%.17g", v);
    return buf;
}

/* The lr a resumed run is set with: a schedule's base (or max) lr, else the optimizer's. */
static double resumed_lr(const clcnn_optimizer_options *ck, const clcnn_checkpoint_info *info) {
    return info->schedule != CLCNN_SCHEDULE_CONSTANT ? info->schedule_lr : ck->lr;
}

/* Fills mine and theirs (80 bytes each) with two numbers or two words; returns opt. */
static const char *differ_num(const char *opt, char *mine, char *theirs, double a, double b) {
    char x[32];
    snprintf(mine, 80, "%s", exact(x, a));
    snprintf(theirs, 80, "%s", exact(x, b));
    return opt;
}
static const char *differ_word(const char *opt, char *mine, char *theirs, const char *a,
                               const char *b) {
    snprintf(mine, 80, "%s", a);
    snprintf(theirs, 80, "%s", b);
    return opt;
}

/* The first training setting beside the optimizer's (schedule, label smoothing, augmentation,
 * decay exclusions) given on the command line that differs from the checkpoint's, or NULL. */
static const char *training_conflict(const cli_options *o, const clcnn_optimizer_options *ck,
                                     const clcnn_checkpoint_info *info, char *mine, char *theirs) {
    if (o->schedule_given && o->schedule != info->schedule)
        return differ_word("--schedule", mine, theirs, clcnn_schedule_name(o->schedule),
                           clcnn_schedule_name(info->schedule));
    if (o->pct_given && o->pct_start != info->pct_start)
        return differ_num("--pct-start", mine, theirs, o->pct_start, info->pct_start);
    if (o->smoothing_given && o->label_smoothing != info->label_smoothing)
        return differ_num("--label-smoothing", mine, theirs, o->label_smoothing,
                          info->label_smoothing);
    if (o->crop_given && o->random_crop != info->random_crop)
        return differ_num("--random-crop", mine, theirs, o->random_crop, info->random_crop);
    if (o->hflip_given && !info->hflip) return differ_word("--hflip", mine, theirs, "on", "off");
    if (o->no_decay_given && !ck->no_decay_bn_bias)
        return differ_word("--no-decay-bn-bias", mine, theirs, "on", "off");
    return NULL;
}

/* A resumed run keeps the checkpoint's optimizer settings. An option given on the command line
 * that differs from them is refused, naming both values; so is another batch size when the
 * checkpoint stopped in the middle of an epoch (its remaining samples are counted in batches). */
static int resume_conflicts(const cli_options *o, const clcnn_optimizer_options *ck,
                            const clcnn_checkpoint_info *info) {
    const char *why = "a resumed run keeps the checkpoint's settings; leave the option out";
    char mine[80] = "", theirs[80] = "", x[32], y[32];
    const char *opt = NULL;
    if (o->optimizer_given && o->optimizer != ck->kind) {
        opt = "--optimizer";
        snprintf(mine, sizeof mine, "%s", optimizer_words[o->optimizer]);
        snprintf(theirs, sizeof theirs, "%s", optimizer_words[ck->kind]);
    } else if (o->lr_given && o->lr != resumed_lr(ck, info)) {
        opt = "--lr";
        snprintf(mine, sizeof mine, "%s", exact(x, o->lr));
        snprintf(theirs, sizeof theirs, "%s", exact(x, resumed_lr(ck, info)));
    } else if (o->momentum_given && o->momentum != ck->momentum) {
        opt = "--momentum";
        snprintf(mine, sizeof mine, "%s", exact(x, o->momentum));
        snprintf(theirs, sizeof theirs, "%s", exact(x, ck->momentum));
    } else if (o->nesterov_given && !ck->nesterov) {
        opt = "--nesterov";
        snprintf(mine, sizeof mine, "on");
        snprintf(theirs, sizeof theirs, "off");
    } else if (o->wd_given && o->weight_decay != ck->weight_decay) {
        opt = "--weight-decay";
        snprintf(mine, sizeof mine, "%s", exact(x, o->weight_decay));
        snprintf(theirs, sizeof theirs, "%s", exact(x, ck->weight_decay));
    } else if (o->betas_given && (o->beta1 != ck->beta1 || o->beta2 != ck->beta2)) {
        opt = "--betas";
        snprintf(mine, sizeof mine, "%s,%s", exact(x, o->beta1), exact(y, o->beta2));
        snprintf(theirs, sizeof theirs, "%s,%s", exact(x, ck->beta1), exact(y, ck->beta2));
    } else if (o->eps_given && o->eps != ck->eps) {
        opt = "--eps";
        snprintf(mine, sizeof mine, "%s", exact(x, o->eps));
        snprintf(theirs, sizeof theirs, "%s", exact(x, ck->eps));
    } else if (o->batch_given && info->batch_in_epoch > 0 && info->batch_size != o->batch_size) {
        opt = "--batch-size";
        snprintf(mine, sizeof mine, "%ld", o->batch_size);
        snprintf(theirs, sizeof theirs, "%" PRId64, info->batch_size);
        why = "it stopped in the middle of an epoch; resume it with its own batch size";
    } else {
        opt = training_conflict(o, ck, info, mine, theirs);
    }
    if (!opt) return 0;
    say("--resume: %s %s conflicts with the checkpoint's %s (%s)", opt, mine, theirs, why);
    return -1;
}

/* How a failure of this process ends an MPI run of several processes. */
typedef enum run_end {
    /* This process alone knows of it, and the others may be waiting for it in a collective
     * call: it takes every rank down (MPI_Abort). What a failure is unless it says otherwise. */
    END_ALONE,
    /* Every rank met the same failure at the same point, none waits in a collective call (a
     * settings mismatch, a NaN loss): each exits through MPI_Finalize with the same status. */
    END_TOGETHER,
    /* A collective call said another rank failed: that rank says why and ends the run; this
     * one leaves through MPI_Finalize without a word. */
    END_PEER,
} run_end;

typedef struct run_state {
    const cli_options *o;
    cli_dist *dist;
    /* The replica 0 of this process: its context, model and data sets (the only ones without
     * data parallelism). */
    clcnn_context *ctx;
    clcnn_model *model;
    clcnn_dataset *train, *test;
    /* Data parallelism: a replica per device (ctxs[0] is ctx ...), and the group, made when
     * there are several replicas in all (devices here or processes). */
    int n_rep;
    int dev[MAX_REPLICAS]; /* visible device indices */
    clcnn_context *ctxs[MAX_REPLICAS];
    clcnn_model *models[MAX_REPLICAS];
    clcnn_dataset *trains[MAX_REPLICAS], *tests[MAX_REPLICAS];
    clcnn_replicas *group;
    run_end end; /* how the failure that ended the run ends it under MPI (failed()) */
    clcnn_summary_writer *tb;
    FILE *metrics;
    int tty;
    double t_start;
    /* The epoch being trained, for the library loop's callbacks: its 0-based number, the batch
     * it starts at and the steps taken before that batch. */
    int64_t epoch, start_batch, step0;
    double t_last;     /* when the last log line was written */
    int64_t last_step; /* and at which step */
    int failed;        /* a callback could not write its output; it has said why */
} run_state;

/* Returns -1 for a failure of the run, recording how it ends an MPI run: set where each
 * failure happens, never left over from an earlier step. */
static int failed(run_state *r, run_end end) {
    r->end = end;
    return -1;
}

/* The message of a failure CLCNN_TEST_FAIL_AT injected (cli_dist_fail_here). */
static const char injected[] = "injected by CLCNN_TEST_FAIL_AT";

/* Appends one JSON Lines record, whole or not at all: the line goes out in one write(2) to
 * the O_APPEND descriptor (resumed after a short write), and when the disk fills part-way the
 * file is cut back to its size before the record, so no partial line stays for a resumed run
 * to append after. r->metrics only holds the descriptor: stdio never buffers a record. */
static int metrics_line(run_state *r, const char *fmt, ...) CLI_PRINTF(2, 3);
static int metrics_line(run_state *r, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    if (!r->metrics) return 0;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof line) {
        say("writing %s failed: a record of %d bytes does not fit the buffer", r->o->metrics, n);
        return -1;
    }
    int fd = fileno(r->metrics), err = 0;
    struct stat sb;
    off_t before = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) ? sb.st_size : -1;
    size_t done = 0;
    while (done < (size_t)n) {
        ssize_t k = write(fd, line + done, (size_t)n - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            err = k < 0 ? errno : EIO;
            break;
        }
        done += (size_t)k;
    }
    if (!err) return 0;
    if (done > 0 && before >= 0 && ftruncate(fd, before) != 0)
        say("writing %s failed: %s; cutting the partial record failed too: %s", r->o->metrics,
            strerror(err), strerror(errno));
    else
        say("writing %s failed: %s", r->o->metrics, strerror(err));
    return -1;
}

static int tb_scalar(run_state *r, const char *tag, float v, int64_t step) {
    if (!r->tb) return 0;
    if (clcnn_summary_writer_add_scalar(r->tb, tag, v, step) != CLCNN_SUCCESS) {
        say("%s", clcnn_summary_writer_errmsg(r->tb));
        return -1;
    }
    return 0;
}

/* A JSON number, or null for NaN and infinities (which JSON cannot hold). */
static const char *json_num(char buf[40], double v) {
    if (!isfinite(v)) return "null";
    snprintf(buf, 40, "%.9g", v);
    return buf;
}

static int evaluate(run_state *r, int64_t epoch, int64_t step) {
    double loss = 0;
    int correct = 0, n = clcnn_dataset_size(r->test), bs = (int)r->o->batch_size;
    if (r->group) {
        if (cli_dist_fail_here(r->dist, "eval")) cli_dist_fail_next_call(r->dist);
        clcnn_status st = clcnn_replicas_evaluate(r->group, r->tests, bs, &loss, &correct);
        if (st == CLCNN_ERR_PEER) return failed(r, END_PEER);
        if (st) {
            say("evaluation failed: %s%s%s", clcnn_replicas_errmsg(r->group),
                r->dist->error[0] ? ": " : "", r->dist->error);
            return failed(r, END_ALONE);
        }
    } else if (clcnn_model_evaluate(r->model, r->test, bs, &loss, &correct)) {
        say("evaluation failed: %s", clcnn_model_errmsg(r->model));
        return failed(r, END_ALONE);
    }
    double acc = (double)correct / n;
    if (!isfinite(loss)) {
        /* The record says what happened (valid JSON); nothing is saved from this state. */
        metrics_line(r,
                     "{\"type\":\"eval\",\"epoch\":%" PRId64 ",\"step\":%" PRId64
                     ",\"test_loss\":null,\"test_accuracy\":%.9g}\n",
                     epoch, step, acc);
        if (r->dist->rank == 0) /* every rank has the same test loss */
            say("the test loss is %s after epoch %" PRId64 " (step %" PRId64
                "); stopping. Lower --lr? The last checkpoint in %s is intact.",
                isnan(loss) ? "NaN" : "infinite", epoch, step, r->o->save_dir);
        return failed(r, END_TOGETHER);
    }
    printf("epoch %" PRId64 ": test loss %.4f, test accuracy %.4f (%d/%d)\n", epoch, loss, acc,
           correct, n);
    fflush(stdout);
    /* This rank's own output (rank 0's): a failure here is its alone. */
    if (cli_dist_fail_here(r->dist, "metrics")) {
        say("writing the evaluation's records failed: %s", injected);
        return failed(r, END_ALONE);
    }
    if (metrics_line(r,
                     "{\"type\":\"eval\",\"epoch\":%" PRId64 ",\"step\":%" PRId64
                     ",\"test_loss\":%.9g,\"test_accuracy\":%.9g}\n",
                     epoch, step, loss, acc) ||
        tb_scalar(r, "test_loss", (float)loss, epoch) ||
        tb_scalar(r, "test_accuracy", (float)acc, epoch))
        return failed(r, END_ALONE);
    return 0;
}

static void progress(run_state *r, int64_t epoch, int64_t b, int64_t nb, float loss, double ips) {
    if (!r->tty) return;
    int width = 24, fill = nb ? (int)(width * b / nb) : width;
    double eta = ips > 0 ? (double)(nb - b) * (double)r->o->batch_size / ips : 0;
    printf("\r\033[Kepoch %" PRId64 " [%.*s%*s] %" PRId64 "/%" PRId64 " loss %.4f %.0f img/s ETA "
           "%d:%02d",
           epoch, fill, "########################", width - fill, "", b, nb, loss, ips,
           (int)eta / 60, (int)eta % 60);
    fflush(stdout);
}

static int save(run_state *r, const clcnn_checkpoint_info *info, int64_t epoch_label) {
    char path[4200];
    if (r->dist->rank != 0) return 0; /* rank 0 writes for all */
    snprintf(path, sizeof path, "%s/epoch_%" PRId64 ".safetensors", r->o->save_dir, epoch_label);
    if (cli_dist_fail_here(r->dist, "save")) {
        say("saving failed: %s", injected);
        return failed(r, END_ALONE);
    }
    if (clcnn_model_save_checkpoint(r->model, path, info)) {
        say("saving failed: %s", clcnn_model_errmsg(r->model));
        return failed(r, END_ALONE);
    }
    printf("saved %s\n", path);
    fflush(stdout);
    return 0;
}

/* The library loop's progress callback: every step on a terminal (the progress bar), else
 * every --log-every steps. A log step writes the log line, its JSON Lines record and the
 * TensorBoard scalar, with the images per second since the previous log line. */
static int on_progress(void *user, int64_t batch, int64_t batches, float loss) {
    run_state *r = user;
    const cli_options *o = r->o;
    int64_t step = r->step0 + batch - r->start_batch;
    double t = now(), ips = (double)(step - r->last_step) * (int)o->batch_size / (t - r->t_last);
    if (step % o->log_every == 0) {
        if (r->tty) printf("\r\033[K");
        printf("step %" PRId64 "  epoch %" PRId64 "  loss %.4f  elapsed %.1f s  %.1f img/s\n", step,
               r->epoch + 1, loss, t - r->t_start, ips);
        fflush(stdout);
        char num[40];
        clcnn_optimizer_options opt;
        clcnn_optimizer_options_init(&opt, CLCNN_OPTIMIZER_SGD);
        clcnn_model_get_optimizer(r->model, &opt); /* its lr: the one this step took */
        if (cli_dist_fail_here(r->dist, "log")) {
            say("writing the log point's records failed: %s", injected);
            r->failed = 1;
            return 1;
        }
        if (metrics_line(r,
                         "{\"type\":\"train\",\"epoch\":%" PRId64 ",\"step\":%" PRId64
                         ",\"loss\":%.9g,\"lr\":%.9g,\"elapsed_s\":%.6f,\"images_per_s\":%s}\n",
                         r->epoch + 1, step, loss, opt.lr, t - r->t_start, json_num(num, ips)) ||
            tb_scalar(r, "train_loss", loss, step) ||
            tb_scalar(r, "learning_rate", (float)opt.lr, step)) {
            r->failed = 1;
            return 1;
        }
        r->t_last = t, r->last_step = step;
    }
    progress(r, r->epoch + 1, batch, batches, loss, ips);
    return 0;
}

/* The library loop's batch hook: --max-steps ends the run after the step that reaches it (at
 * least one step of this run is taken, as a resumed run that was already there expects). */
static int on_batch(void *user, int64_t epoch, int64_t batch, int first, int n) {
    const run_state *r = user;
    (void)epoch, (void)first, (void)n;
    return batch > r->start_batch && r->step0 + batch - r->start_batch >= r->o->max_steps;
}

/* Says why an epoch stopped with an error: a loss that is not finite, or a failed step. */
static void epoch_failed(run_state *r, clcnn_status st, int64_t step) {
    const char *lead = r->tty ? "\n" : "";
    float loss = 0;
    if (st == CLCNN_ERR_PEER) return; /* the failing process has said why */
    /* Every rank sees the same global loss: rank 0 speaks for all. */
    if (st == CLCNN_ERR_NUMERIC && r->dist->rank != 0) return;
    if (st == CLCNN_ERR_NUMERIC && !(r->group ? clcnn_replicas_last_loss(r->group, &loss, NULL)
                                              : clcnn_model_last_loss(r->model, &loss, NULL)))
        say_after(lead,
                  "the loss is %s at step %" PRId64 " (epoch %" PRId64
                  "); stopping. Lower --lr? The last checkpoint in %s is intact.",
                  isnan(loss) ? "NaN" : "infinite", step, r->epoch + 1, r->o->save_dir);
    else if (r->group)
        say_after(lead, "step %" PRId64 " failed: %s%s%s", step + 1,
                  clcnn_replicas_errmsg(r->group), r->dist->error[0] ? ": " : "", r->dist->error);
    else
        say_after(lead, "step %" PRId64 " failed: %s", step + 1, clcnn_model_errmsg(r->model));
}

/* What the library's loop trains the first epoch with, the run starting where info says (the
 * loop moves epoch, start_batch and global_step on). */
static void train_options(run_state *r, const clcnn_checkpoint_info *info, clcnn_train_options *t) {
    const cli_options *o = r->o;
    int n = r->train ? clcnn_dataset_size(r->train) : 0, bs = (int)o->batch_size;
    int64_t nb = (n + bs - 1) / bs;
    clcnn_train_options_init(t);
    t->batch_size = bs;
    t->seed = info->seed;
    t->shuffle = !o->no_shuffle;
    t->every = r->tty ? 1 : o->log_every;
    t->progress = on_progress, t->user = r;
    if (o->max_steps) t->hook = on_batch, t->hook_user = r;
    t->schedule = o->schedule, t->lr = o->lr, t->total_steps = o->total_steps;
    t->pct_start = o->pct_start;
    t->random_crop = o->random_crop, t->hflip = o->hflip;
    t->epoch = info->epoch;
    t->start_batch = info->batch_in_epoch < nb ? info->batch_in_epoch : nb;
    t->global_step = info->step;
}

static int train(run_state *r, clcnn_checkpoint_info info) {
    const cli_options *o = r->o;
    int n = clcnn_dataset_size(r->train), bs = (int)o->batch_size;
    int64_t nb = (n + bs - 1) / bs;
    clcnn_train_options t;
    train_options(r, &info, &t);
    r->t_last = now();
    r->last_step = info.step;
    r->t_start = now();
    for (int64_t e = info.epoch; e < o->epochs; e++) {
        int64_t done = 0;
        t.epoch = r->epoch = e;
        t.start_batch = r->start_batch = info.batch_in_epoch < nb ? info.batch_in_epoch : nb;
        t.global_step = r->step0 = info.step;
        info.batch_in_epoch = 0;
        if (!r->tty) printf("----- epoch %" PRId64 "/%ld -----\n", e + 1, o->epochs);
        if (r->group && cli_dist_fail_here(r->dist, "step")) cli_dist_fail_next_call(r->dist);
        clcnn_status st = r->group ? clcnn_replicas_train_epoch(r->group, r->trains, &t, &done)
                                   : clcnn_model_train_epoch(r->model, r->train, &t, &done);
        info.step += done - t.start_batch;
        /* This rank's callback stopped its loop: the others go on to the next step. */
        if (r->failed) return failed(r, END_ALONE);
        if (st) {
            epoch_failed(r, st, info.step);
            /* A NaN loss is the global loss, seen at the same step by every rank; a failed
             * step is reported by the step's exchange to the others (CLCNN_ERR_PEER there).
             * Anything else (the transport itself, a failure before or after the step's
             * exchange) may leave the others waiting. */
            return failed(r, st == CLCNN_ERR_NUMERIC ? END_TOGETHER
                             : st == CLCNN_ERR_PEER  ? END_PEER
                                                     : END_ALONE);
        }
        if (r->tty) printf("\n");
        if (o->max_steps && info.step >= o->max_steps) {
            printf("reached --max-steps %ld\n", o->max_steps);
            info.epoch = done == nb ? e + 1 : e;
            info.batch_in_epoch = done == nb ? 0 : done;
            if (evaluate(r, e + 1, info.step)) return -1;
            return save(r, &info, e + 1);
        }
        info.epoch = e + 1;
        if (evaluate(r, e + 1, info.step)) return -1;
        if (save(r, &info, e + 1)) return -1;
    }
    return 0;
}

/* --list-devices: the visible devices, the one a run would take (idx, or -1 for none) marked.
 * Returns the exit status. */
static int list_devices(clcnn_devices *devs, int idx) {
    if (clcnn_devices_count(devs) == 0) {
        say("%s", clcnn_devices_errmsg(devs));
        return 1;
    }
    size_t n = clcnn_devices_format(devs, idx, NULL, 0);
    char *buf = malloc(n + 1);
    if (!buf) return 1;
    clcnn_devices_format(devs, idx, buf, n + 1);
    fputs(buf, stdout);
    free(buf);
    return 0;
}

/* What --resume's checkpoint says before the device is touched: its model and image shape.
 * CLCNN_SPEC_MAX_LEN bytes hold any spec a model can have. */
typedef struct resume_peek {
    char spec[CLCNN_SPEC_MAX_LEN + 1];
    int c, h, w;
    char normalize[128]; /* the --normalize the run trained with ("" none) */
} resume_peek;

/* The normalisation of the checkpoint a run starts from (--resume, or --init, also for
 * --eval-only): the checkpoint's, unless --normalize (or the --model preset's recipe) gives the
 * same; another one is refused, as for the other settings. A file that records none (a plain
 * PyTorch state_dict, a checkpoint older than the record) keeps --normalize as given. */
static int checkpoint_normalize(cli_options *o, resume_peek *ck) {
    const char *opt = o->resume ? "--resume" : "--init", *path = o->resume ? o->resume : o->init;
    char err[1100];
    int recorded = 0;
    if (clcnn_checkpoint_peek_normalize(path, ck->normalize, sizeof ck->normalize, &recorded, err,
                                        sizeof err)) {
        /* --init's file is read whole by the load, whose message about it (its size limit,
         * what is wrong inside) is the one to show. */
        if (!o->resume) return 0;
        say("%s: %s", opt, err);
        return -1;
    }
    if (!recorded) return 0;
    if (!o->normalize) {
        if (ck->normalize[0]) o->normalize = ck->normalize;
        return 0;
    }
    if (strcmp(o->normalize, ck->normalize) != 0) {
        int from_recipe = o->recipe && o->normalize == o->recipe->normalize;
        say("%s: %s--normalize %s conflicts with the checkpoint's %s; leave it out to continue "
            "with the checkpoint's",
            opt, from_recipe ? "the --model preset's recipe " : "", o->normalize,
            ck->normalize[0] ? ck->normalize : "(none)");
        return -1;
    }
    return 0;
}

/* Where the last whole line of the regular file fd (size bytes) ends, i.e. the size to cut it
 * to when it does not end in '\n'; size when it does, -1 when it cannot be read or when the
 * unterminated tail is not the start of a clcnn record ('{' then printable ASCII, shorter than
 * any record): a file that is not JSON Lines is never cut. */
static off_t whole_lines_end(const char *path, off_t size) {
    char buf[1024];
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -1;
    off_t from = size > (off_t)sizeof buf ? size - (off_t)sizeof buf : 0;
    ssize_t n = pread(fd, buf, (size_t)(size - from), from);
    close(fd);
    if (n != (ssize_t)(size - from)) return -1;
    if (buf[n - 1] == '\n') return size;
    ssize_t i = n - 1;
    while (i >= 0 && buf[i] != '\n')
        i--;
    if (i < 0 && from > 0) return -1; /* a "line" longer than any record */
    if (buf[i + 1] != '{') return -1;
    for (ssize_t j = i + 1; j < n; j++)
        if (buf[j] < 0x20 || buf[j] > 0x7e) return -1;
    return from + i + 1;
}

/* Opens --metrics for appending: a resumed run continues the same file, nothing earlier is
 * lost. A last line without its newline is a record cut short (a run killed mid-write, or a
 * full disk under an older clcnn): it is cut, with a note, so that the records that follow
 * start on a line of their own and every line of the file stays valid JSON. */
static int open_metrics(const cli_options *o, run_state *r) {
    struct stat sb;
    int fd = open(o->metrics, O_WRONLY | O_APPEND | O_CREAT | O_NOCTTY | O_CLOEXEC, 0666);
    if (fd < 0) {
        say("--metrics %s: %s", o->metrics, strerror(errno));
        return -1;
    }
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0) {
        off_t keep = whole_lines_end(o->metrics, sb.st_size);
        if (keep < 0) {
            say("--metrics %s does not end in a whole line and is not a clcnn JSON Lines file; "
                "not appending to it",
                o->metrics);
            close(fd);
            return -1;
        }
        if (keep < sb.st_size) {
            if (ftruncate(fd, keep) != 0) {
                say("--metrics %s ends in a torn line that cannot be cut: %s", o->metrics,
                    strerror(errno));
                close(fd);
                return -1;
            }
            printf("note: --metrics %s ended in a torn line (%lld bytes); cut\n", o->metrics,
                   (long long)(sb.st_size - keep));
            fflush(stdout);
        }
    }
    if (!(r->metrics = fdopen(fd, "a"))) {
        say("--metrics %s: %s", o->metrics, strerror(errno));
        close(fd);
        return -1;
    }
    return 0;
}

/* Inputs are checked before the device is touched: a typo costs nothing. Fills in the default
 * --data, reads --resume's model into ck and opens --metrics. */
static int check_inputs(cli_options *o, run_state *r, resume_peek *ck) {
    struct stat sb;
    if (!o->data) {
        if (stat(DEFAULT_DATA, &sb) != 0) {
            say("no --data given and %s is missing (apt-get install dataset-fashion-mnist, or "
                "pass --data DIR)",
                DEFAULT_DATA);
            return -1;
        }
        o->data = DEFAULT_DATA;
    }
    if (o->init && stat(o->init, &sb) != 0) {
        say("--init %s: %s", o->init, strerror(errno));
        return -1;
    }
    if (o->resume) {
        char err[1100];
        if (clcnn_checkpoint_peek(o->resume, ck->spec, sizeof ck->spec, &ck->c, &ck->h, &ck->w, err,
                                  sizeof err)) {
            say("--resume: %s", err);
            return -1;
        }
    }
    if ((o->resume || o->init) && checkpoint_normalize(o, ck)) return -1;
    if (r->dist->rank != 0) return 0; /* rank 0 alone writes */
    if (!o->eval_only && !o->plan) {
        if (check_writable_dir(o->save_dir, "--save-dir")) return -1;
        if (!o->no_tensorboard && check_writable_dir(o->logdir, "--logdir")) return -1;
    }
    if (o->metrics && open_metrics(o, r)) return -1;
    return 0;
}

/* A context on each of the replicas' devices, announced with the time its kernels took to be
 * ready. */
static int open_context(run_state *r, clcnn_devices *devs) {
    for (int i = 0; i < r->n_rep; i++) {
        clcnn_device_info info;
        clcnn_devices_get(devs, r->dev[i], &info);
        if (clcnn_context_create(&r->ctxs[i], devs, r->dev[i], NULL) != CLCNN_SUCCESS) {
            say("%s", clcnn_context_errmsg(r->ctxs[i]));
            return -1;
        }
        printf("clcnn %s on device %d:%d %s (%s, %s), kernels ready in %.3f s (%s)\n",
               clcnn_version(), info.platform_index, info.device_index, info.name,
               type_name(info.type), info.platform_name, clcnn_context_build_seconds(r->ctxs[i]),
               clcnn_context_cache_hit(r->ctxs[i]) ? "binary cache" : "compiled");
        if (*clcnn_context_cache_note(r->ctxs[i]))
            printf("note: %s\n", clcnn_context_cache_note(r->ctxs[i]));
    }
    r->ctx = r->ctxs[0];
    if (r->o->resume && r->o->model_given)
        printf("note: --model is ignored with --resume: the checkpoint's model is used\n");
    return 0;
}

/* --normalize on both sets; c is the images' channel count. */
static int apply_normalize(run_state *r, int c) {
    float mean[64], sd[64];
    char why[160] = "";
    if (c > 64 || parse_normalize(r->o->normalize, c, mean, sd, why, sizeof why)) {
        if (why[0])
            say("--normalize: '%s': %s", r->o->normalize, why);
        else
            say("--normalize: '%s' is not MEAN,STD or %d means then %d stds (stds > 0)",
                r->o->normalize, c, c);
        return -1;
    }
    for (int i = 0; i < r->n_rep; i++) {
        clcnn_dataset *bad = NULL; /* the set that refused: its message */
        if (r->trains[i] && clcnn_dataset_set_normalize(r->trains[i], mean, sd))
            bad = r->trains[i];
        else if (clcnn_dataset_set_normalize(r->tests[i], mean, sd))
            bad = r->tests[i];
        if (bad) {
            say("--normalize: '%s': %s", r->o->normalize, clcnn_dataset_errmsg(bad));
            return -1;
        }
    }
    return 0;
}

/* The other replicas' data sets, on their own contexts: the same files (checked once, by
 * replica 0's). */
static int open_replica_data(run_state *r, clcnn_dataset_format fmt) {
    const cli_options *o = r->o;
    r->trains[0] = r->train, r->tests[0] = r->test;
    for (int i = 1; i < r->n_rep; i++) {
        if (r->train && clcnn_dataset_open(&r->trains[i], r->ctxs[i], o->data, fmt, 1)) {
            say("%s", clcnn_dataset_errmsg(r->trains[i]));
            return -1;
        }
        if (clcnn_dataset_open(&r->tests[i], r->ctxs[i], o->data, fmt, 0)) {
            say("%s", clcnn_dataset_errmsg(r->tests[i]));
            return -1;
        }
    }
    return 0;
}

/* Opens the test set, and the training set when the run trains; shape receives the images'
 * channels, height and width, which both sets and a resumed checkpoint must share. */
static int open_data(run_state *r, const resume_peek *ck, int shape[3]) {
    const cli_options *o = r->o;
    int c, h, w;
    clcnn_dataset_format fmt = o->dataset
                                   ? (clcnn_dataset_format)clcnn_dataset_format_parse(o->dataset)
                                   : CLCNN_DATASET_AUTO;
    if (!o->eval_only && !o->plan && clcnn_dataset_open(&r->train, r->ctx, o->data, fmt, 1)) {
        say("%s", clcnn_dataset_errmsg(r->train));
        return -1;
    }
    if (clcnn_dataset_open(&r->test, r->ctx, o->data, fmt, 0)) {
        say("%s", clcnn_dataset_errmsg(r->test));
        return -1;
    }
    clcnn_dataset_shape(r->test, &c, &h, &w);
    if (r->train) {
        int c2, h2, w2;
        clcnn_dataset_shape(r->train, &c2, &h2, &w2);
        if (c2 != c || h2 != h || w2 != w) {
            say("%s: train images are %dx%dx%d, test images %dx%dx%d", o->data, c2, h2, w2, c, h,
                w);
            return -1;
        }
    }
    if (o->resume && (ck->c != c || ck->h != h || ck->w != w)) {
        say("--resume %s was trained on %dx%dx%d images, %s has %dx%dx%d", o->resume, ck->c, ck->h,
            ck->w, o->data, c, h, w);
        return -1;
    }
    if (open_replica_data(r, fmt) || (o->normalize && apply_normalize(r, c))) return -1;
    printf("data: %s (%s), %d train / %d test images of %dx%dx%d\n", o->data,
           clcnn_dataset_format_name(clcnn_dataset_format_of(r->test)),
           r->train ? clcnn_dataset_size(r->train) : 0, clcnn_dataset_size(r->test), c, h, w);
    shape[0] = c, shape[1] = h, shape[2] = w;
    return 0;
}

/* --resume into the model: its weights, optimizer state and settings, and where the run stood
 * (ck). opt receives the settings; o's batch size becomes the checkpoint's unless given. */
static int resume_model(run_state *r, cli_options *o, clcnn_optimizer_options *opt,
                        clcnn_checkpoint_info *ck) {
    if (clcnn_model_load_checkpoint(r->model, o->resume, ck)) {
        say("--resume: %s", clcnn_model_errmsg(r->model));
        return -1;
    }
    /* The run continues with the checkpoint's settings; an option that says otherwise is
     * refused rather than silently overridden (or silently ignored). */
    clcnn_model_get_optimizer(r->model, opt);
    if (resume_conflicts(o, opt, ck)) return -1;
    o->lr = resumed_lr(opt, ck);
    o->no_decay_bn_bias = opt->no_decay_bn_bias;
    o->schedule = ck->schedule;
    o->pct_start = ck->pct_start;
    o->label_smoothing = ck->label_smoothing;
    o->random_crop = ck->random_crop;
    o->hflip = ck->hflip;
    if (!o->batch_given) o->batch_size = ck->batch_size ? ck->batch_size : o->batch_size;
    if (ck->batch_size && o->batch_size != ck->batch_size)
        printf("note: batch size %ld from here on; the checkpoint was trained with %" PRId64 "\n",
               o->batch_size, ck->batch_size);
    if (o->seed_given && ck->seed != o->seed)
        printf("note: continuing with the checkpoint's seed %" PRIu64 ", not --seed %" PRIu64 "\n",
               ck->seed, o->seed);
    printf("resumed from %s: epoch %" PRId64 ", step %" PRId64 "\n", o->resume, ck->epoch,
           ck->step);
    return 0;
}

/* The schedule's length: --epochs times the batches of an epoch. A resumed schedule keeps its
 * length: --epochs defaults to what it was, and one that changes the length is refused. */
static int settle_total(const run_state *r, cli_options *o, const clcnn_checkpoint_info *ck) {
    int sched = o->schedule != CLCNN_SCHEDULE_CONSTANT;
    if (!r->train) return 0;
    int64_t nb = (clcnn_dataset_size(r->train) + o->batch_size - 1) / o->batch_size;
    if (o->resume && sched && o->batch_size != ck->batch_size) {
        say("--resume: --batch-size %ld changes the length of the checkpoint's %s schedule "
            "(batch size %" PRId64 "); leave the option out",
            o->batch_size, clcnn_schedule_name(o->schedule), ck->batch_size);
        return -1;
    }
    if (o->resume && sched && !o->epochs_given && ck->total_steps % nb == 0 &&
        ck->total_steps / nb <= 1000000)
        o->epochs = (long)(ck->total_steps / nb);
    o->total_steps = (int64_t)o->epochs * nb;
    if (o->resume && sched && o->total_steps != ck->total_steps) {
        say("--resume: the checkpoint's %s schedule spans %" PRId64
            " steps; --epochs %ld of %" PRId64 " batches make %" PRId64
            " (a resumed schedule keeps its length)",
            clcnn_schedule_name(o->schedule), ck->total_steps, o->epochs, nb, o->total_steps);
        return -1;
    }
    return 0;
}

/* A schedule PyTorch would refuse (a onecycle phase of zero steps: --pct-start times the steps
 * is 1) is refused before the first step. */
static int check_schedule(const cli_options *o) {
    if (o->schedule == CLCNN_SCHEDULE_CONSTANT) return 0;
    /* Only a first phase that ends at step 0 fails within the steps taken, at step 0. */
    if (!isfinite(clcnn_schedule_lr(o->schedule, o->lr, 0, o->total_steps, o->pct_start))) {
        say("--schedule %s: --pct-start %g of %" PRId64 " steps leaves a phase of no steps",
            clcnn_schedule_name(o->schedule), o->pct_start, o->total_steps);
        return -1;
    }
    return 0;
}

/* The training settings beside the optimizer's, now that a resume has had its say: the
 * schedule's length, the model's label smoothing, and what the checkpoints record. */
static int settle_training(run_state *r, cli_options *o, clcnn_checkpoint_info *ck) {
    if (settle_total(r, o, ck) || (r->train && check_schedule(o))) return -1;
    if (clcnn_model_set_label_smoothing(r->model, o->label_smoothing)) {
        say("--label-smoothing: %s", clcnn_model_errmsg(r->model));
        return -1;
    }
    ck->schedule = o->schedule;
    ck->schedule_lr = o->lr;
    ck->total_steps = o->total_steps;
    ck->pct_start = o->pct_start;
    ck->label_smoothing = o->label_smoothing;
    ck->random_crop = o->random_crop;
    ck->hflip = o->hflip;
    snprintf(ck->normalize, sizeof ck->normalize, "%s", o->normalize ? o->normalize : "");
    return 0;
}

/* The model for images of shape (c, h, w) with its optimizer and its starting weights (--init
 * or --resume); opt receives what it trains with and ck where the run starts. */
static int make_model(run_state *r, cli_options *o, const char *spec, const int shape[3],
                      clcnn_optimizer_options *opt, clcnn_checkpoint_info *ck) {
    size_t nparams = 0;
    if (clcnn_model_create(&r->model, r->ctx, spec, shape[0], shape[1], shape[2], o->seed)) {
        say("--model: %s", clcnn_model_errmsg(r->model));
        return -1;
    }
    clcnn_optimizer_options_init(opt, o->optimizer);
    opt->lr = o->lr;
    opt->momentum = o->momentum;
    opt->nesterov = o->nesterov;
    opt->weight_decay = o->weight_decay;
    opt->beta1 = o->beta1;
    opt->beta2 = o->beta2;
    opt->eps = o->eps;
    opt->no_decay_bn_bias = o->no_decay_bn_bias;
    if (!o->resume && clcnn_model_set_optimizer(r->model, opt)) {
        say("%s", clcnn_model_errmsg(r->model));
        return -1;
    }
    clcnn_checkpoint_info_init(ck);
    ck->seed = o->seed, ck->batch_size = o->batch_size;
    if (o->init && clcnn_model_load_weights(r->model, o->init)) {
        say("--init: %s", clcnn_model_errmsg(r->model));
        return -1;
    }
    if (o->resume && resume_model(r, o, opt, ck)) return -1;
    if (settle_training(r, o, ck)) return -1;
    ck->batch_size = o->batch_size;
    for (int i = 0; i < clcnn_model_param_count(r->model); i++) {
        size_t k = 0;
        clcnn_model_param_info(r->model, i, NULL, NULL, NULL, &k);
        nparams += clcnn_model_param_trained(r->model, i) ? k : 0;
    }
    printf("model: %s (%zu parameters)\n", clcnn_model_spec(r->model), nparams);
    size_t bytes = clcnn_model_device_bytes(r->model, (int)o->batch_size);
    if (!o->eval_only && bytes)
        printf("device memory: %.1f MiB for a training step of %d samples on one device\n",
               (double)bytes / (1024.0 * 1024.0), (int)o->batch_size);
    return 0;
}

/* The schedule, the loss and the augmentation in force. */
static void print_training(const cli_options *o) {
    printf("schedule: %s", clcnn_schedule_name(o->schedule));
    if (o->schedule == CLCNN_SCHEDULE_COSINE)
        printf(" (lr %g to 0 over %" PRId64 " steps)", o->lr, o->total_steps);
    if (o->schedule == CLCNN_SCHEDULE_ONECYCLE)
        printf(" (max lr %g, pct_start %g, %" PRId64 " steps)", o->lr, o->pct_start,
               o->total_steps);
    printf(", label smoothing %g, augmentation: ", o->label_smoothing);
    if (o->random_crop) printf("random crop %d%s", o->random_crop, o->hflip ? ", " : "");
    if (o->hflip) printf("horizontal flip");
    printf("%s\n", o->random_crop || o->hflip ? "" : "none");
}

/* What the model will train with: the options given, or a resumed checkpoint's. */
static void print_settings(const cli_options *o, const clcnn_optimizer_options *opt,
                           uint64_t seed) {
    if (o->recipe)
        printf("recipe %s, for the options not given:%s%s\n", o->recipe->model,
               o->recipe_used[0] ? o->recipe_used : " none",
               o->resume ? " (where the checkpoint records a setting, its value wins)" : "");
    printf("optimizer: %s lr %g",
           opt->kind == CLCNN_OPTIMIZER_SGD    ? "SGD"
           : opt->kind == CLCNN_OPTIMIZER_ADAM ? "Adam"
                                               : "AdamW",
           o->lr);
    if (opt->kind == CLCNN_OPTIMIZER_SGD && opt->momentum > 0)
        printf(" momentum %g%s", opt->momentum, opt->nesterov ? " (Nesterov)" : "");
    if (opt->kind != CLCNN_OPTIMIZER_SGD &&
        (opt->beta1 != 0.9 || opt->beta2 != 0.999 || opt->eps != 1e-8))
        printf(" betas %g,%g eps %g", opt->beta1, opt->beta2, opt->eps);
    if (opt->weight_decay > 0)
        printf(" weight decay %g%s", opt->weight_decay,
               opt->no_decay_bn_bias ? " (not on biases and BatchNorm)" : "");
    printf(", batch %ld, %ld epoch%s, seed %" PRIu64 "%s\n", o->batch_size, o->epochs,
           o->epochs == 1 ? "" : "s", seed, o->no_shuffle ? ", no shuffle" : "");
    print_training(o);
}

/* ---- data parallelism ------------------------------------------------------------------ */

/* The devices of --devices (or, under a launcher with several processes and no --device, the
 * node-local rank's) into r->dev; else the one --platform/--device select. Returns 0, or -1
 * after saying why. */
static int pick_devices(run_state *r, clcnn_devices *devs, const cli_options *o) {
    const cli_dist *d = r->dist;
    r->n_rep = 1;
    if (!o->devices) {
        int dev = o->device, count = 0, idx;
        if (d->size > 1 && dev < 0) {
            while (count < 1000 && clcnn_devices_select(devs, o->platform, count, &idx) == 0)
                count++;
            dev = count ? d->local_rank % count : 0;
        }
        if (clcnn_devices_select(devs, o->platform, dev, &r->dev[0]) == CLCNN_SUCCESS) return 0;
        say("%s", clcnn_devices_errmsg(devs));
        return -1;
    }
    int all = strcmp(o->devices, "all") == 0;
    const char *p = o->devices;
    r->n_rep = 0;
    for (int k = 0;; k++) {
        char *end = NULL;
        long v = all ? k : strtol(p, &end, 10);
        if (!all && (end == p || v < 0 || v > INT_MAX || (*end && *end != ','))) {
            say("--devices: '%s' is not 'all' or a comma list of device indices", o->devices);
            return -1;
        }
        int idx;
        if (clcnn_devices_select(devs, o->platform, (int)v, &idx) != CLCNN_SUCCESS) {
            if (all && k > 0) break;
            say("--devices: %s", clcnn_devices_errmsg(devs));
            return -1;
        }
        for (int i = 0; i < r->n_rep; i++)
            if (r->dev[i] == idx) {
                say("--devices: device %ld is listed twice", v);
                return -1;
            }
        if (r->n_rep == MAX_REPLICAS) {
            say("--devices: at most %d devices per process", MAX_REPLICAS);
            return -1;
        }
        r->dev[r->n_rep++] = idx;
        if (!all && !*end) break;
        if (!all) p = end + 1;
    }
    return 0;
}

/* The fields of the library's structs a step is made from, as CLI_OPTIONS lists its own:
 * the optimizer in force (a resumed checkpoint's), the checkpoint info the run starts from and
 * the options the training loop is given (train_options). Each list is checked against its
 * struct below: a field added to the struct without a line here fails to compile, unless it
 * fits in the struct's tail padding (a struct that grows takes new fields at its end, after
 * the ones an older caller's struct_size covers). */
/* clang-format off */
#define OPTIMIZER_FIELDS(X, p)                                                                     \
    X(p, size_t, struct_size, LOCAL, NONE, "the struct's size")                                   \
    X(p, clcnn_optimizer_kind, kind, STEP, OPTIMIZER, "--optimizer")                              \
    X(p, double, lr, STEP, REAL, "the optimizer's lr")                                            \
    X(p, double, momentum, STEP, REAL, "--momentum")                                              \
    X(p, double, dampening, STEP, REAL, "the optimizer's dampening")                              \
    X(p, int, nesterov, STEP, INT, "--nesterov")                                                  \
    X(p, double, weight_decay, STEP, REAL, "--weight-decay")                                      \
    X(p, double, beta1, STEP, REAL, "--betas B1")                                                 \
    X(p, double, beta2, STEP, REAL, "--betas B2")                                                 \
    X(p, double, eps, STEP, REAL, "--eps")                                                        \
    X(p, int, no_decay_bn_bias, STEP, INT, "--no-decay-bn-bias")

#define CHECKPOINT_FIELDS(X, p)                                                                    \
    X(p, size_t, struct_size, LOCAL, NONE, "the struct's size")                                   \
    X(p, int64_t, epoch, STEP, INT, "the starting epoch")                                         \
    X(p, int64_t, step, STEP, INT, "the starting step")                                           \
    X(p, int64_t, batch_in_epoch, STEP, INT, "the starting batch")                                \
    X(p, uint64_t, seed, STEP, INT, "--seed")                                                     \
    X(p, int64_t, batch_size, STEP, INT, "--batch-size")                                          \
    X(p, clcnn_schedule_kind, schedule, STEP, SCHEDULE, "--schedule")                             \
    X(p, double, schedule_lr, STEP, REAL, "--lr")                                                 \
    X(p, int64_t, total_steps, STEP, INT, "the schedule's length")                                \
    X(p, double, pct_start, STEP, REAL, "--pct-start")                                            \
    X(p, double, label_smoothing, STEP, REAL, "--label-smoothing")                                \
    X(p, int, random_crop, STEP, INT, "--random-crop")                                            \
    X(p, int, hflip, STEP, INT, "--hflip")                                                        \
    X(p, normalize_text, normalize, STEP, TEXT, "--normalize")

#define TRAIN_FIELDS(X, p)                                                                         \
    X(p, size_t, struct_size, LOCAL, NONE, "the struct's size")                                   \
    X(p, int, batch_size, STEP, INT, "--batch-size")                                              \
    X(p, int, shuffle, STEP, INT, "--no-shuffle")                                                 \
    X(p, int, drop_last, STEP, INT, "the loop's drop_last")                                       \
    X(p, uint64_t, seed, STEP, INT, "--seed")                                                     \
    X(p, int64_t, epoch, STEP, INT, "the starting epoch")                                         \
    X(p, int64_t, start_batch, STEP, INT, "the starting batch")                                   \
    X(p, int64_t, global_step, STEP, INT, "the starting step")                                    \
    X(p, int64_t, every, STEP, INT, "--log-every")                                                \
    X(p, clcnn_progress_fn, progress, LOCAL, NONE, "this process's callback")                     \
    X(p, void *, user, LOCAL, NONE, "this process's callback")                                    \
    X(p, clcnn_batch_hook, hook, LOCAL, NONE, "set by --max-steps, which is compared")            \
    X(p, void *, hook_user, LOCAL, NONE, "this process's callback")                               \
    X(p, clcnn_schedule_kind, schedule, STEP, SCHEDULE, "--schedule")                             \
    X(p, double, lr, STEP, REAL, "--lr")                                                          \
    X(p, int64_t, total_steps, STEP, INT, "the schedule's length")                                \
    X(p, double, pct_start, STEP, REAL, "--pct-start")                                            \
    X(p, int, random_crop, STEP, INT, "--random-crop")                                            \
    X(p, int, hflip, STEP, INT, "--hflip")
/* clang-format on */

/* Each list declares a mirror of its struct; the mirror must have the struct's size and every
 * field the struct's offset and size. */
struct optimizer_mirror {
    OPTIMIZER_FIELDS(DECLARE_FIELD, 0)
};
struct checkpoint_mirror {
    CHECKPOINT_FIELDS(DECLARE_FIELD, 0)
};
struct train_mirror {
    TRAIN_FIELDS(DECLARE_FIELD, 0)
};
#define SAME_FIELD(mirror, type, field, rule, kind, text)                                          \
    _Static_assert(offsetof(struct mirror##_mirror, field) == offsetof(mirror##_struct, field) &&  \
                       sizeof(((mirror##_struct *)0)->field) == sizeof(type),                      \
                   #mirror "." #field " is not where its list says");
typedef clcnn_optimizer_options optimizer_struct;
typedef clcnn_checkpoint_info checkpoint_struct;
typedef clcnn_train_options train_struct;
OPTIMIZER_FIELDS(SAME_FIELD, optimizer)
CHECKPOINT_FIELDS(SAME_FIELD, checkpoint)
TRAIN_FIELDS(SAME_FIELD, train)
_Static_assert(sizeof(struct optimizer_mirror) == sizeof(clcnn_optimizer_options),
               "clcnn_optimizer_options has a field OPTIMIZER_FIELDS lacks");
_Static_assert(sizeof(struct checkpoint_mirror) == sizeof(clcnn_checkpoint_info),
               "clcnn_checkpoint_info has a field CHECKPOINT_FIELDS lacks");
_Static_assert(sizeof(struct train_mirror) == sizeof(clcnn_train_options),
               "clcnn_train_options has a field TRAIN_FIELDS lacks");

/* A field of a list above as a cli_setting (STEP), or nothing (DERIVED, LOCAL); p points to the
 * struct. */
#define AS_SETTING(p, type, field, rule, kind, label) SETTING_##rule(kind, label, (p)->field)
#define SETTING_LOCAL(kind, label, value)
#define SETTING_DERIVED(kind, label, value)
#define SETTING_STEP(kind, label, value) SETTING_##kind(label, value),
#define SETTING_INT(label, value)                                                                  \
    { .name = label, .kind = CLI_VALUE_INT, .i = (int64_t)(value) }
#define SETTING_REAL(label, value)                                                                 \
    { .name = label, .kind = CLI_VALUE_REAL, .x = (value) }
#define SETTING_TEXT(label, value)                                                                 \
    { .name = label, .kind = CLI_VALUE_TEXT, .text = (value) }
#define SETTING_OPTIMIZER(label, value) SETTING_TEXT(label, optimizer_words[value])
#define SETTING_SCHEDULE(label, value) SETTING_TEXT(label, clcnn_schedule_name(value))

/* Every process must train the same thing from the same place: checked before the first
 * step, so a mismatched launch ends with one line instead of diverging. Compared: every STEP
 * field of the options as the run resolved them, of the optimizer in force, of where the run
 * starts and of what the training loop is given, and what the data set holds. */
static int agree_settings(run_state *r, const cli_options *o, const clcnn_checkpoint_info *ck) {
    cli_options res = *o;
    clcnn_optimizer_options opt;
    clcnn_train_options t;
    int c = 0, h = 0, w = 0;
    char shape[64], msg[1024];
    const char *format = clcnn_dataset_format_name(clcnn_dataset_format_of(r->test));
    clcnn_optimizer_options_init(&opt, CLCNN_OPTIMIZER_SGD);
    clcnn_model_get_optimizer(r->model, &opt);
    /* What the command line left to the model, the optimizer and a resumed checkpoint. */
    res.model = clcnn_model_spec(r->model);
    res.optimizer = opt.kind, res.momentum = opt.momentum, res.nesterov = opt.nesterov;
    res.weight_decay = opt.weight_decay, res.beta1 = opt.beta1, res.beta2 = opt.beta2;
    res.eps = opt.eps, res.no_decay_bn_bias = opt.no_decay_bn_bias;
    res.seed = ck->seed;
    train_options(r, ck, &t);
    clcnn_dataset_shape(r->test, &c, &h, &w);
    snprintf(shape, sizeof shape, "%dx%dx%d", c, h, w);
    /* clang-format off */
    const cli_setting s[] = {
        CLI_OPTIONS(AS_SETTING, &res)
        /* what the data set holds, before what is derived from it (the schedule's length) */
        SETTING_INT("training images", r->train ? clcnn_dataset_size(r->train) : -1),
        SETTING_INT("test images", clcnn_dataset_size(r->test)),
        SETTING_TEXT("--data's format", format),
        SETTING_TEXT("the images' shape", shape),
        OPTIMIZER_FIELDS(AS_SETTING, &opt)
        CHECKPOINT_FIELDS(AS_SETTING, ck)
        TRAIN_FIELDS(AS_SETTING, &t)
    };
    /* clang-format on */
    if (cli_dist_fail_here(r->dist, "agree")) cli_dist_fail_next_call(r->dist);
    int verdict = cli_dist_agree(r->dist, s, (int)(sizeof s / sizeof s[0]), msg, sizeof msg);
    if (verdict == 0) return 0;
    /* A disagreement is the same line on every rank: rank 0 says it. A failed comparison is
     * this rank's alone, and the others may wait in it. */
    if (verdict < 0 || r->dist->rank == 0) say("%s", msg);
    return failed(r, verdict > 0 ? END_TOGETHER : END_ALONE);
}

/* Right after MPI starts: whether a rank only lists the devices (--list-devices), which every
 * rank must share, or the ranks that train would wait for it in their first collective call. */
static int agree_mode(run_state *r, const cli_options *o) {
    const cli_setting s[] = {SETTING_INT("--list-devices", o->list_devices)};
    char msg[256];
    int verdict = cli_dist_agree(r->dist, s, 1, msg, sizeof msg);
    if (verdict == 0) return 0;
    if (verdict < 0 || r->dist->rank == 0) say("%s", msg);
    return failed(r, verdict > 0 ? END_TOGETHER : END_ALONE);
}

/* The other replicas' models (replica 0's spec and seed), then the group: it gives every
 * replica replica 0's weights, optimizer and state (rank 0's, across processes). */
static int make_group(run_state *r, const cli_options *o, const clcnn_checkpoint_info *ck) {
    int c, h, w;
    r->models[0] = r->model;
    if (r->n_rep == 1 && r->dist->size == 1) return 0;
    if (agree_settings(r, o, ck)) return -1;
    clcnn_dataset_shape(r->test, &c, &h, &w);
    for (int i = 1; i < r->n_rep; i++)
        if (clcnn_model_create(&r->models[i], r->ctxs[i], clcnn_model_spec(r->model), c, h, w,
                               o->seed)) {
            say("--model: %s", clcnn_model_errmsg(r->models[i]));
            return -1;
        }
    const clcnn_comm *comm = r->dist->size > 1 ? &r->dist->comm : NULL;
    if (comm && cli_dist_fail_here(r->dist, "group")) cli_dist_fail_next_call(r->dist);
    if (clcnn_replicas_create(&r->group, r->models, r->n_rep, comm)) {
        say("%s%s%s", clcnn_replicas_errmsg(r->group), r->dist->error[0] ? ": " : "",
            r->dist->error);
        return failed(r, END_ALONE);
    }
    int total = clcnn_replicas_global_count(r->group), bs = (int)o->batch_size;
    printf("data-parallel: %d replicas (%d process%s, %d device%s here), global batch %d, "
           "about %d samples each; BatchNorm statistics per replica, running statistics from "
           "replica 0\n",
           total, r->dist->size, r->dist->size == 1 ? "" : "es", r->n_rep, r->n_rep == 1 ? "" : "s",
           bs, (bs + total - 1) / total);
    return 0;
}

/* Where the data-parallel run's time went. */
static void print_timing(const run_state *r) {
    double compute = 0, wait = 0, reduce = 0;
    int64_t steps = 0;
    if (!r->group) return;
    clcnn_replicas_timing(r->group, &compute, &wait, &reduce, &steps);
    if (steps == 0) return;
    printf("data-parallel, per step: %.2f ms forward and backward (the slowest replica), "
           "%.2f ms idle (replicas waiting for it, summed), %.2f ms gradient exchange (host sum, "
           "all-reduce and waiting for other processes, write-back)\n",
           1e3 * compute / steps, 1e3 * wait / steps, 1e3 * reduce / steps);
}

/* Releases everything the run holds, each replica's handles in reverse order of making. */
static void release_run(run_state *r) {
    clcnn_replicas_free(r->group);
    for (int i = r->n_rep - 1; i >= 0; i--) {
        clcnn_model_free(i ? r->models[i] : r->model);
        clcnn_dataset_free(i ? r->trains[i] : r->train);
        clcnn_dataset_free(i ? r->tests[i] : r->test);
        clcnn_context_free(r->ctxs[i]);
    }
}

/* Refuses, before anything is trained or written, a --batch-size that leaves a last batch
 * smaller than the model trains on (BatchNorm on one value per channel needs 2 samples), rather
 * than failing at the end of the first epoch, where PyTorch raises. The ranks have agreed on the
 * numbers, so every rank stops here. */
static int check_last_batch(run_state *r, const cli_options *o) {
    int n = clcnn_dataset_size(r->train), bs = (int)o->batch_size, last = n % bs;
    int least = clcnn_model_min_train_batch(r->model), fit[2] = {0, 0};
    if (bs >= least && (last == 0 || last >= least)) return 0;
    for (int side = 0; side < 2; side++)
        for (int b = side ? bs + 1 : bs - 1; !fit[side] && b >= least && b <= n; b += side ? 1 : -1)
            if (n % b == 0 || n % b >= least) fit[side] = b;
    char what[96], fix[64] = "the training set is too small";
    if (bs < least)
        snprintf(what, sizeof what, "--batch-size %d", bs);
    else
        snprintf(what, sizeof what, "--batch-size %d leaves a last batch of %d of the %d %s", bs,
                 last, n, "training images");
    if (fit[0] && fit[1])
        snprintf(fix, sizeof fix, "use --batch-size %d or %d", fit[0], fit[1]);
    else if (fit[0] || fit[1])
        snprintf(fix, sizeof fix, "use --batch-size %d", fit[0] + fit[1]);
    if (r->dist->rank == 0)
        say("%s, but the model's BatchNorm on one value per channel needs at least %d samples to "
            "train (PyTorch: \"Expected more than 1 value per channel when training\"); %s",
            what, least, fix);
    /* Every rank has the same numbers and stops here: they wait for rank 0's line, then end
     * together. */
    cli_dist_all_ok((cli_dist *)r->dist, 0);
    return failed(r, END_TOGETHER);
}

/* The model's plan for a batch (clcnn_model_plan), once the batch passes the checks a training
 * step makes before it allocates (clcnn_model_check_batch): a plan that cannot run fails as
 * training would, rather than printing workspaces no device holds. */
static int print_plan(clcnn_model *m, int batch) {
    if (clcnn_model_check_batch(m, batch)) {
        say("--plan: %s", clcnn_model_errmsg(m));
        return 1;
    }
    size_t n = clcnn_model_plan(m, batch, NULL, 0);
    char *buf = malloc(n + 1);
    if (!buf) return 1;
    clcnn_model_plan(m, batch, buf, n + 1);
    printf("plan for a batch of %d:\n%s", batch, buf);
    printf("device memory of a training step: %.1f MiB (parameters, optimizer state and every "
           "batch buffer)\n",
           (double)clcnn_model_device_bytes(m, batch) / (1024.0 * 1024.0));
    free(buf);
    return 0;
}

/* From the chosen devices to the end of training (or evaluation, or the plan). Returns the
 * exit status. */
static int run(run_state *r, cli_options *o, clcnn_devices *devs) {
    static resume_peek peek; /* static: a spec may take 64 KiB */
    clcnn_optimizer_options opt;
    clcnn_checkpoint_info ck;
    int shape[3];
    if (check_inputs(o, r, &peek)) return 1;
    double t0 = now();
    if (open_context(r, devs) || open_data(r, &peek, shape)) return 1;
    if (make_model(r, o, o->resume ? peek.spec : o->model, shape, &opt, &ck)) return 1;
    if (make_group(r, o, &ck)) return 1;
    if (o->eval_only) return evaluate(r, ck.epoch, ck.step) ? 1 : 0;
    if (o->plan) return print_plan(r->model, (int)o->batch_size);
    if (check_last_batch(r, o)) return 1;
    print_settings(o, &opt, ck.seed);
    if (!o->no_tensorboard && r->dist->rank == 0) {
        if (clcnn_summary_writer_open(&r->tb, o->logdir)) {
            say("--logdir: %s", clcnn_summary_writer_errmsg(r->tb));
            return 1;
        }
        printf("TensorBoard: %s\n", clcnn_summary_writer_path(r->tb));
    }
    fflush(stdout);
    /* Under mpirun, rank 0's stdout is a forwarded pseudo-terminal: log lines, not a bar. */
    r->tty = isatty(fileno(stdout)) && r->dist->size == 1;
    if (ck.epoch >= o->epochs && !o->max_steps) {
        printf("nothing to do: the checkpoint has %" PRId64 " epochs, --epochs is %ld\n", ck.epoch,
               o->epochs);
        return 0;
    }
    if (train(r, ck)) return 1;
    print_timing(r);
    printf("done in %.1f s\n", now() - t0);
    return 0;
}

int main(int argc, char **argv) {
    cli_options o;
    cli_dist dist;
    clcnn_devices *devs = NULL;
    run_state r;
    int rc = 1;
    clcnn_status st;
    memset(&r, 0, sizeof r);
    parse_args(argc, argv, &o);
    r.o = &o;
    if (o.help) {
        fputs(usage_text, stdout);
        print_recipes();
        return 0;
    }
    if (o.version) return print_version();
    if (o.graph_json) return print_graph_json(o.model);
    /* It has said why; MPI may be up, so every rank goes down with this one. */
    if (cli_dist_init(&dist, &argc, &argv)) cli_dist_abort(&dist, 1);
    r.dist = &dist;
    if (dist.size > 1) {
        say_rank = dist.rank;
        /* Rank 0 alone prints the log; the others keep stderr for their own errors. */
        if (dist.rank != 0 && !freopen("/dev/null", "w", stdout)) {
            say("cannot silence stdout: %s", strerror(errno));
            cli_dist_abort(&dist, 1);
        }
    }
    if (dist.size > 1 && agree_mode(&r, &o)) goto done;
    st = clcnn_devices_create(&devs, NULL);
    if (st != CLCNN_SUCCESS) {
        say("%s", clcnn_devices_errmsg(devs));
        goto done;
    }
    if (o.list_devices) {
        int idx = -1;
        st = clcnn_devices_select(devs, o.platform, o.device, &idx);
        rc = list_devices(devs, st == CLCNN_SUCCESS ? idx : -1);
        goto done;
    }
    if (pick_devices(&r, devs, &o)) goto done;
    rc = run(&r, &o, devs);
done:
    if (r.tb) {
        /* A write that failed was said where it failed (tb_scalar) and the run ends with it:
         * closing reports that failure again, so only a failure of its own is said here. */
        int said = clcnn_summary_writer_errcode(r.tb) != CLCNN_SUCCESS;
        char path[4200];
        snprintf(path, sizeof path, "%s", clcnn_summary_writer_path(r.tb));
        if (clcnn_summary_writer_close(r.tb) != CLCNN_SUCCESS) {
            if (!said) say("closing the TensorBoard file %s failed", path);
            rc = 1;
        }
        r.tb = NULL;
    }
    if (r.metrics && fclose(r.metrics) != 0) {
        say("closing %s failed: %s", o.metrics, strerror(errno));
        rc = 1;
    }
    /* A failure only this process saw takes the others down; one they all saw, or another
     * rank's, ends each through MPI_Finalize (no launcher's banner for an abort). */
    if (rc && dist.size > 1 && r.end == END_ALONE) {
        fflush(stdout);
        cli_dist_abort(&dist, rc);
    }
    release_run(&r);
    clcnn_devices_free(devs);
    cli_dist_finalize(&dist);
    return rc;
}
