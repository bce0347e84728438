/* clcnn_train: the command-line front end, the PyTorch CIFAR-10 tutorial's training loop on any
 * OpenCL device. It uses only the public API (include/clcnn.h); it is the one place that
 * prints. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clcnn.h"

#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"

typedef struct cli_options {
    int platform, device;
    int list_devices, version, help;
    const char *data, *dataset, *model, *logdir, *save_dir, *metrics, *init, *resume;
    const char *normalize;
    int model_given, seed_given, lr_given, optimizer_given, momentum_given, wd_given;
    int betas_given, eps_given, batch_given;
    long epochs, batch_size, log_every, max_steps;
    double lr, momentum, weight_decay, beta1, beta2, eps;
    int nesterov, no_shuffle, eval_only, no_tensorboard;
    clcnn_optimizer_kind optimizer;
    uint64_t seed;
} cli_options;

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
    "                        (neither: the first visible GPU, else the first visible device)\n"
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
    "  --model SPEC          a preset (seed, seed-relu) or a spec, see docs/MODEL_SPEC.md\n"
    "                        (default: seed)\n"
    "  --optimizer NAME      sgd | adam | adamw (default: sgd)\n"
    "  --lr X                learning rate (default: 0.01 for sgd, 0.001 for adam/adamw)\n"
    "  --momentum X          SGD momentum (default: 0)\n"
    "  --nesterov            SGD Nesterov momentum (needs --momentum)\n"
    "  --weight-decay X      L2 penalty for sgd/adam, decoupled for adamw (default: 0, adamw\n"
    "                        0.01)\n"
    "  --betas B1,B2         Adam/AdamW betas (default: 0.9,0.999)\n"
    "  --eps X               Adam/AdamW epsilon (default: 1e-8)\n"
    "  --seed N              seed for initial weights and shuffling (default: 1); the same seed\n"
    "                        repeats a run bit for bit on the same device\n"
    "\n"
    "Training:\n"
    "  --epochs N            epochs to train (default: 10)\n"
    "  --batch-size N        samples per step (default: 64, or a resumed checkpoint's); the\n"
    "                        last partial batch is used\n"
    "  --max-steps N         stop after N steps in total, then evaluate and save as at an\n"
    "                        epoch's end\n"
    "  --log-every N         log the step's loss, elapsed time and images/s every N steps\n"
    "                        (default: 100)\n"
    "  --init FILE           start from weights in a safetensors state_dict (e.g. PyTorch's\n"
    "                        safetensors.torch.save_file(model.state_dict(), FILE)); a common\n"
    "                        key prefix such as 'model1.' is accepted\n"
    "  --resume FILE         continue a run from a checkpoint (FILE and FILE's .state sibling):\n"
    "                        weights, optimizer state and settings, step, epoch, seed and\n"
    "                        batch size. An optimizer option that differs from the\n"
    "                        checkpoint's is refused, and so is another --batch-size when\n"
    "                        the checkpoint stopped mid-epoch (--max-steps)\n"
    "  --eval-only           evaluate the test set with --init or --resume weights and exit\n"
    "\n"
    "Output:\n"
    "  --save-dir DIR        checkpoint folder: epoch_<N>.safetensors after every epoch, loadable\n"
    "                        with model.load_state_dict(safetensors.torch.load_file(f))\n"
    "                        (default: model)\n"
    "  --logdir DIR          TensorBoard folder: train_loss by step, test_loss and test_accuracy\n"
    "                        by epoch (default: logs)\n"
    "  --no-tensorboard      do not write TensorBoard events\n"
    "  --metrics FILE        append JSON Lines: one record per log point and per evaluation\n"
    "  -h, --help            show this help\n"
    "\n"
    "Environment:\n"
    "  CLCNN_VISIBLE_DEVICES  comma list of global indices (3), P:D pairs (0:1) or type words\n"
    "                         (cpu, gpu, accelerator); its order is the visible order; empty\n"
    "                         hides every device\n"
    "  CLCNN_BACKEND          GEMM backend: cpu, gpu, opencl or clblast (default: by device\n"
    "                         type)\n"
    "  CLCNN_AUTOTUNE=1       time interchangeable kernels on first use of each shape, keep the\n"
    "                         fastest in the cache folder (default: fixed rules, repeatable)\n"
    "  CLCNN_KERNEL_DIR       read kernel sources from DIR/<name>.cl instead of the embedded ones\n"
    "  CLCNN_CACHE_DIR        program-binary cache folder (default $XDG_CACHE_HOME/clcnn or\n"
    "                         ~/.cache/clcnn; created 0700, used only when it and each entry\n"
    "                         belong to the user); CLCNN_CACHE=0 turns the cache off\n";

/* One error line on stderr: "clcnn_train: " and the message. Messages quote what the user
 * typed and what files hold, so control characters are shown as \xNN rather than breaking the
 * line or reaching the terminal. `lead` is printed first, as it is (the newline that ends a
 * progress bar). */
static void vsay(const char *lead, const char *fmt, va_list ap) {
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    fputs(lead, stderr);
    fputs("clcnn_train: ", stderr);
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            fprintf(stderr, "\\x%02x", *p);
        else
            fputc(*p, stderr);
    fputc('\n', stderr);
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

static const char *need_value(int argc, char **argv, int i) {
    /* An unknown word is named as such, even as the last argument, never as "needs a value". */
    static const char *const takes_value[] = {
        "--platform",   "--device",    "--data",      "--dataset",  "--model",    "--epochs",
        "--batch-size", "--log-every", "--max-steps", "--lr",       "--momentum", "--weight-decay",
        "--eps",        "--betas",     "--optimizer", "--seed",     "--logdir",   "--save-dir",
        "--metrics",    "--init",      "--resume",    "--normalize"};
    int known = 0;
    for (size_t k = 0; k < sizeof takes_value / sizeof takes_value[0] && !known; k++)
        known = !strcmp(argv[i], takes_value[k]);
    if (!known) die("unknown option '%s' (see --help)", argv[i]);
    if (i + 1 >= argc || argv[i + 1] == NULL) die("%s needs a value (see --help)", argv[i]);
    return argv[i + 1];
}

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

static void parse_args(int argc, char **argv, cli_options *o) {
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
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int takes = 1;
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            o->help = 1, takes = 0;
        else if (!strcmp(a, "--version"))
            o->version = 1, takes = 0;
        else if (!strcmp(a, "--list-devices"))
            o->list_devices = 1, takes = 0;
        else if (!strcmp(a, "--nesterov"))
            o->nesterov = 1, takes = 0;
        else if (!strcmp(a, "--no-shuffle"))
            o->no_shuffle = 1, takes = 0;
        else if (!strcmp(a, "--eval-only"))
            o->eval_only = 1, takes = 0;
        else if (!strcmp(a, "--no-tensorboard"))
            o->no_tensorboard = 1, takes = 0;
        else {
            const char *v = need_value(argc, argv, i);
            if (!strcmp(a, "--platform"))
                o->platform = (int)parse_long(a, v, 0, INT_MAX);
            else if (!strcmp(a, "--device"))
                o->device = (int)parse_long(a, v, 0, INT_MAX);
            else if (!strcmp(a, "--data"))
                o->data = v;
            else if (!strcmp(a, "--dataset"))
                o->dataset = v;
            else if (!strcmp(a, "--model"))
                o->model = v, o->model_given = 1;
            else if (!strcmp(a, "--epochs"))
                o->epochs = parse_long(a, v, 1, 1000000);
            else if (!strcmp(a, "--batch-size"))
                o->batch_size = parse_long(a, v, 1, 1 << 20), o->batch_given = 1;
            else if (!strcmp(a, "--log-every"))
                o->log_every = parse_long(a, v, 1, LONG_MAX);
            else if (!strcmp(a, "--max-steps"))
                o->max_steps = parse_long(a, v, 1, LONG_MAX);
            else if (!strcmp(a, "--lr"))
                o->lr = parse_double(a, v, 1), o->lr_given = 1;
            else if (!strcmp(a, "--momentum"))
                o->momentum = parse_double(a, v, 0), o->momentum_given = 1;
            else if (!strcmp(a, "--weight-decay"))
                o->weight_decay = parse_double(a, v, 0), o->wd_given = 1;
            else if (!strcmp(a, "--eps"))
                o->eps = parse_double(a, v, 0), o->eps_given = 1;
            else if (!strcmp(a, "--betas")) {
                o->betas_given = 1;
                char *end = NULL;
                errno = 0;
                o->beta1 = strtod(v, &end);
                if (errno || end == v || *end != ',') die("--betas: '%s' is not B1,B2", v);
                const char *b2 = end + 1;
                o->beta2 = strtod(b2, &end);
                if (errno || end == b2 || *end) die("--betas: '%s' is not B1,B2", v);
                if (!(o->beta1 >= 0 && o->beta1 < 1 && o->beta2 >= 0 && o->beta2 < 1))
                    die("--betas: %s: each beta must be in [0, 1)", v);
            } else if (!strcmp(a, "--optimizer")) {
                o->optimizer_given = 1;
                if (!strcmp(v, "sgd"))
                    o->optimizer = CLCNN_OPTIMIZER_SGD;
                else if (!strcmp(v, "adam"))
                    o->optimizer = CLCNN_OPTIMIZER_ADAM;
                else if (!strcmp(v, "adamw"))
                    o->optimizer = CLCNN_OPTIMIZER_ADAMW;
                else
                    die("--optimizer: '%s' is not sgd, adam or adamw", v);
            } else if (!strcmp(a, "--seed")) {
                o->seed = (uint64_t)parse_long(a, v, 0, LONG_MAX), o->seed_given = 1;
            } else if (!strcmp(a, "--logdir"))
                o->logdir = v;
            else if (!strcmp(a, "--save-dir"))
                o->save_dir = v;
            else if (!strcmp(a, "--metrics"))
                o->metrics = v;
            else if (!strcmp(a, "--init"))
                o->init = v;
            else if (!strcmp(a, "--resume"))
                o->resume = v;
            else if (!strcmp(a, "--normalize"))
                o->normalize = v;
            else
                die("unknown option '%s' (see --help)", a);
        }
        i += takes;
    }
    if (o->dataset && clcnn_dataset_format_parse(o->dataset) < 0)
        die("--dataset: '%s' is not cifar10, mnist or fashion-mnist", o->dataset);
    if (o->nesterov && o->momentum <= 0) die("--nesterov needs --momentum greater than 0");
    if (o->optimizer != CLCNN_OPTIMIZER_SGD && (o->momentum > 0 || o->nesterov))
        die("--momentum and --nesterov apply to --optimizer sgd only");
    if (o->init && o->resume) die("--init and --resume exclude each other");
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

static int parse_normalize(const char *v, int channels, float *mean, float *std) {
    double vals[64];
    int n = 0;
    const char *p = v;
    while (*p && n < 64) {
        char *end = NULL;
        errno = 0;
        vals[n] = strtod(p, &end);
        if (errno || end == p || !isfinite(vals[n])) return -1;
        n++;
        if (*end == ',')
            p = end + 1;
        else if (*end == '\0')
            p = end;
        else
            return -1;
    }
    if (*p) return -1;
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

static const char *optimizer_name(clcnn_optimizer_kind k) {
    return k == CLCNN_OPTIMIZER_SGD ? "sgd" : k == CLCNN_OPTIMIZER_ADAM ? "adam" : "adamw";
}

/* A resumed run keeps the checkpoint's optimizer settings. An option given on the command line
 * that differs from them is refused, naming both values; so is another batch size when the
 * checkpoint stopped in the middle of an epoch (its remaining samples are counted in batches). */
static int resume_conflicts(const cli_options *o, const clcnn_optimizer_options *ck,
                            const clcnn_checkpoint_info_v2 *info) {
    const char *why = "a resumed run keeps the checkpoint's settings; leave the option out";
    char mine[80] = "", theirs[80] = "", x[32], y[32];
    const char *opt = NULL;
    if (o->optimizer_given && o->optimizer != ck->kind) {
        opt = "--optimizer";
        snprintf(mine, sizeof mine, "%s", optimizer_name(o->optimizer));
        snprintf(theirs, sizeof theirs, "%s", optimizer_name(ck->kind));
    } else if (o->lr_given && o->lr != ck->lr) {
        opt = "--lr";
        snprintf(mine, sizeof mine, "%s", exact(x, o->lr));
        snprintf(theirs, sizeof theirs, "%s", exact(x, ck->lr));
    } else if (o->momentum_given && o->momentum != ck->momentum) {
        opt = "--momentum";
        snprintf(mine, sizeof mine, "%s", exact(x, o->momentum));
        snprintf(theirs, sizeof theirs, "%s", exact(x, ck->momentum));
    } else if (o->nesterov && !ck->nesterov) {
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
    }
    if (!opt) return 0;
    say("--resume: %s %s conflicts with the checkpoint's %s (%s)", opt, mine, theirs, why);
    return -1;
}

typedef struct run_state {
    const cli_options *o;
    clcnn_context *ctx;
    clcnn_model *model;
    clcnn_dataset *train, *test;
    clcnn_summary_writer *tb;
    FILE *metrics;
    int tty;
    double t_start;
} run_state;

static int metrics_line(run_state *r, const char *fmt, ...) {
    va_list ap;
    if (!r->metrics) return 0;
    va_start(ap, fmt);
    vfprintf(r->metrics, fmt, ap);
    va_end(ap);
    if (fflush(r->metrics) != 0 || ferror(r->metrics)) {
        say("writing %s failed: %s", r->o->metrics, strerror(errno));
        return -1;
    }
    return 0;
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
    int correct = 0, n = clcnn_dataset_size(r->test);
    if (clcnn_model_evaluate(r->model, r->test, (int)r->o->batch_size, &loss, &correct)) {
        say("evaluation failed: %s", clcnn_model_errmsg(r->model));
        return -1;
    }
    double acc = (double)correct / n;
    if (!isfinite(loss)) {
        /* The record says what happened (valid JSON); nothing is saved from this state. */
        metrics_line(r,
                     "{\"type\":\"eval\",\"epoch\":%" PRId64 ",\"step\":%" PRId64
                     ",\"test_loss\":null,\"test_accuracy\":%.9g}\n",
                     epoch, step, acc);
        say("the test loss is %s after epoch %" PRId64 " (step %" PRId64
            "); stopping. Lower --lr? The last checkpoint in %s is intact.",
            isnan(loss) ? "NaN" : "infinite", epoch, step, r->o->save_dir);
        return -1;
    }
    printf("epoch %" PRId64 ": test loss %.4f, test accuracy %.4f (%d/%d)\n", epoch, loss, acc,
           correct, n);
    fflush(stdout);
    if (metrics_line(r,
                     "{\"type\":\"eval\",\"epoch\":%" PRId64 ",\"step\":%" PRId64
                     ",\"test_loss\":%.9g,\"test_accuracy\":%.9g}\n",
                     epoch, step, loss, acc))
        return -1;
    if (tb_scalar(r, "test_loss", (float)loss, epoch) ||
        tb_scalar(r, "test_accuracy", (float)acc, epoch))
        return -1;
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

static int save(run_state *r, const clcnn_checkpoint_info_v2 *info, int64_t epoch_label) {
    char path[4200];
    snprintf(path, sizeof path, "%s/epoch_%" PRId64 ".safetensors", r->o->save_dir, epoch_label);
    if (clcnn_model_save_checkpoint_v2(r->model, path, info)) {
        say("saving failed: %s", clcnn_model_errmsg(r->model));
        return -1;
    }
    printf("saved %s\n", path);
    fflush(stdout);
    return 0;
}

static int train(run_state *r, clcnn_checkpoint_info_v2 info) {
    const cli_options *o = r->o;
    int n = clcnn_dataset_size(r->train), bs = (int)o->batch_size;
    int64_t nb = (n + bs - 1) / bs;
    double t_last = now();
    int64_t last_step = info.step;
    r->t_start = now();
    for (int64_t e = info.epoch; e < o->epochs; e++) {
        int64_t b0 = info.batch_in_epoch;
        info.batch_in_epoch = 0;
        if (clcnn_dataset_set_epoch(r->train, info.seed, e, !o->no_shuffle)) {
            say("%s", clcnn_dataset_errmsg(r->train));
            return -1;
        }
        if (!r->tty) printf("----- epoch %" PRId64 "/%ld -----\n", e + 1, o->epochs);
        for (int64_t b = b0; b < nb; b++) {
            int first = (int)(b * bs), cnt = n - first < bs ? n - first : bs;
            if (clcnn_model_train_dataset(r->model, r->train, first, cnt)) {
                say_after(r->tty ? "\n" : "", "step %" PRId64 " failed: %s", info.step + 1,
                          clcnn_model_errmsg(r->model));
                return -1;
            }
            info.step++;
            int log = info.step % o->log_every == 0;
            if (log || r->tty) {
                float loss = 0;
                if (clcnn_model_last_loss(r->model, &loss, NULL)) {
                    say_after(r->tty ? "\n" : "", "%s", clcnn_model_errmsg(r->model));
                    return -1;
                }
                if (!isfinite(loss)) {
                    say_after(r->tty ? "\n" : "",
                              "the loss is %s at step %" PRId64 " (epoch %" PRId64
                              "); stopping. Lower --lr? The last checkpoint in %s is intact.",
                              isnan(loss) ? "NaN" : "infinite", info.step, e + 1, o->save_dir);
                    return -1;
                }
                double t = now(), ips = (double)(info.step - last_step) * bs / (t - t_last);
                if (log) {
                    if (r->tty) printf("\r\033[K");
                    printf("step %" PRId64 "  epoch %" PRId64 "  loss %.4f  elapsed %.1f s  %.1f "
                           "img/s\n",
                           info.step, e + 1, loss, t - r->t_start, ips);
                    fflush(stdout);
                    char num[40];
                    if (metrics_line(r,
                                     "{\"type\":\"train\",\"epoch\":%" PRId64 ",\"step\":%" PRId64
                                     ",\"loss\":%.9g,\"elapsed_s\":%.6f,"
                                     "\"images_per_s\":%s}\n",
                                     e + 1, info.step, loss, t - r->t_start, json_num(num, ips)) ||
                        tb_scalar(r, "train_loss", loss, info.step))
                        return -1;
                    t_last = t, last_step = info.step;
                }
                progress(r, e + 1, b + 1, nb, loss, ips);
            }
            if (o->max_steps && info.step >= o->max_steps) {
                int whole = b + 1 == nb;
                if (r->tty) printf("\n");
                printf("reached --max-steps %ld\n", o->max_steps);
                info.epoch = whole ? e + 1 : e;
                info.batch_in_epoch = whole ? 0 : b + 1;
                if (evaluate(r, e + 1, info.step)) return -1;
                return save(r, &info, e + 1);
            }
        }
        if (r->tty) printf("\n");
        info.epoch = e + 1;
        if (evaluate(r, e + 1, info.step)) return -1;
        if (save(r, &info, e + 1)) return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    cli_options o;
    clcnn_devices *devs = NULL;
    clcnn_device_info info;
    run_state r;
    int idx = -1, rc = 1;
    clcnn_status st;
    /* A checkpoint's spec: CLCNN_SPEC_MAX_LEN bytes hold any spec a model can have. */
    static char ck_spec[CLCNN_SPEC_MAX_LEN + 1];
    memset(&r, 0, sizeof r);
    parse_args(argc, argv, &o);
    r.o = &o;
    if (o.help) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (o.version) return print_version();
    st = clcnn_devices_create(&devs, NULL);
    if (st != CLCNN_SUCCESS) {
        say("%s", clcnn_devices_errmsg(devs));
        goto done;
    }
    st = clcnn_devices_select(devs, o.platform, o.device, &idx);
    if (o.list_devices) {
        if (clcnn_devices_count(devs) == 0) {
            say("%s", clcnn_devices_errmsg(devs));
            goto done;
        }
        size_t n = clcnn_devices_format(devs, st == CLCNN_SUCCESS ? idx : -1, NULL, 0);
        char *buf = malloc(n + 1);
        if (!buf) goto done;
        clcnn_devices_format(devs, st == CLCNN_SUCCESS ? idx : -1, buf, n + 1);
        fputs(buf, stdout);
        free(buf);
        rc = 0;
        goto done;
    }
    if (st != CLCNN_SUCCESS) {
        say("%s", clcnn_devices_errmsg(devs));
        goto done;
    }

    /* Inputs are checked before the device is touched: a typo costs nothing. */
    struct stat sb;
    if (!o.data) {
        if (stat(DEFAULT_DATA, &sb) != 0) {
            say("no --data given and %s is missing (apt-get install dataset-fashion-mnist, or "
                "pass --data DIR)",
                DEFAULT_DATA);
            goto done;
        }
        o.data = DEFAULT_DATA;
    }
    if (o.init && stat(o.init, &sb) != 0) {
        say("--init %s: %s", o.init, strerror(errno));
        goto done;
    }
    const char *spec = o.model;
    int ck_c = 0, ck_h = 0, ck_w = 0;
    if (o.resume) {
        char err[1100];
        if (clcnn_checkpoint_peek(o.resume, ck_spec, sizeof ck_spec, &ck_c, &ck_h, &ck_w, err,
                                  sizeof err)) {
            say("--resume: %s", err);
            goto done;
        }
        spec = ck_spec;
    }
    if (!o.eval_only) {
        if (check_writable_dir(o.save_dir, "--save-dir")) goto done;
        if (!o.no_tensorboard && check_writable_dir(o.logdir, "--logdir")) goto done;
    }
    if (o.metrics) {
        /* Appending: a resumed run continues the same file, nothing earlier is lost. */
        if (!(r.metrics = fopen(o.metrics, "a"))) {
            say("--metrics %s: %s", o.metrics, strerror(errno));
            goto done;
        }
    }

    clcnn_devices_get(devs, idx, &info);
    double t0 = now();
    st = clcnn_context_create(&r.ctx, devs, idx, NULL);
    if (st != CLCNN_SUCCESS) {
        say("%s", clcnn_context_errmsg(r.ctx));
        goto done;
    }
    printf("clcnn %s on device %d:%d %s (%s, %s), kernels ready in %.3f s (%s)\n", clcnn_version(),
           info.platform_index, info.device_index, info.name, type_name(info.type),
           info.platform_name, clcnn_context_build_seconds(r.ctx),
           clcnn_context_cache_hit(r.ctx) ? "binary cache" : "compiled");
    if (o.resume && o.model_given)
        printf("note: --model is ignored with --resume: the checkpoint's model is used\n");

    clcnn_dataset_format fmt = o.dataset
                                   ? (clcnn_dataset_format)clcnn_dataset_format_parse(o.dataset)
                                   : CLCNN_DATASET_AUTO;
    if (!o.eval_only && clcnn_dataset_open(&r.train, r.ctx, o.data, fmt, 1)) {
        say("%s", clcnn_dataset_errmsg(r.train));
        goto done;
    }
    if (clcnn_dataset_open(&r.test, r.ctx, o.data, fmt, 0)) {
        say("%s", clcnn_dataset_errmsg(r.test));
        goto done;
    }
    int c, h, w;
    clcnn_dataset_shape(r.test, &c, &h, &w);
    if (r.train) {
        int c2, h2, w2;
        clcnn_dataset_shape(r.train, &c2, &h2, &w2);
        if (c2 != c || h2 != h || w2 != w) {
            say("%s: train images are %dx%dx%d, test images %dx%dx%d", o.data, c2, h2, w2, c, h, w);
            goto done;
        }
    }
    if (o.resume && (ck_c != c || ck_h != h || ck_w != w)) {
        say("--resume %s was trained on %dx%dx%d images, %s has %dx%dx%d", o.resume, ck_c, ck_h,
            ck_w, o.data, c, h, w);
        goto done;
    }
    if (o.normalize) {
        float mean[64], sd[64];
        if (c > 64 || parse_normalize(o.normalize, c, mean, sd)) {
            say("--normalize: '%s' is not MEAN,STD or %d means then %d stds (stds > 0)",
                o.normalize, c, c);
            goto done;
        }
        if ((r.train && clcnn_dataset_set_normalize(r.train, mean, sd)) ||
            clcnn_dataset_set_normalize(r.test, mean, sd)) {
            say("--normalize: %s", clcnn_dataset_errmsg(r.test));
            goto done;
        }
    }
    printf("data: %s (%s), %d train / %d test images of %dx%dx%d\n", o.data,
           clcnn_dataset_format_name(clcnn_dataset_format_of(r.test)),
           r.train ? clcnn_dataset_size(r.train) : 0, clcnn_dataset_size(r.test), c, h, w);

    if (clcnn_model_create(&r.model, r.ctx, spec, c, h, w, o.seed)) {
        say("--model: %s", clcnn_model_errmsg(r.model));
        goto done;
    }
    clcnn_optimizer_options opt;
    clcnn_optimizer_defaults(&opt, o.optimizer);
    opt.lr = o.lr;
    opt.momentum = o.momentum;
    opt.nesterov = o.nesterov;
    opt.weight_decay = o.weight_decay;
    opt.beta1 = o.beta1;
    opt.beta2 = o.beta2;
    opt.eps = o.eps;
    if (!o.resume && clcnn_model_set_optimizer(r.model, &opt)) {
        say("%s", clcnn_model_errmsg(r.model));
        goto done;
    }
    clcnn_checkpoint_info_v2 ck = {0, 0, 0, o.seed, o.batch_size};
    if (o.init && clcnn_model_load_weights(r.model, o.init)) {
        say("--init: %s", clcnn_model_errmsg(r.model));
        goto done;
    }
    if (o.resume) {
        if (clcnn_model_load_checkpoint_v2(r.model, o.resume, &ck)) {
            say("--resume: %s", clcnn_model_errmsg(r.model));
            goto done;
        }
        /* The run continues with the checkpoint's settings; an option that says otherwise is
         * refused rather than silently overridden (or silently ignored). */
        clcnn_model_get_optimizer(r.model, &opt);
        if (resume_conflicts(&o, &opt, &ck)) goto done;
        if (!o.batch_given) o.batch_size = ck.batch_size ? ck.batch_size : o.batch_size;
        if (ck.batch_size && o.batch_size != ck.batch_size)
            printf("note: batch size %ld from here on; the checkpoint was trained with %" PRId64
                   "\n",
                   o.batch_size, ck.batch_size);
        if (o.seed_given && ck.seed != o.seed)
            printf("note: continuing with the checkpoint's seed %" PRIu64 ", not --seed %" PRIu64
                   "\n",
                   ck.seed, o.seed);
        printf("resumed from %s: epoch %" PRId64 ", step %" PRId64 "\n", o.resume, ck.epoch,
               ck.step);
    }
    ck.batch_size = o.batch_size;
    size_t nparams = 0;
    for (int i = 0; i < clcnn_model_param_count(r.model); i++) {
        size_t k = 0;
        clcnn_model_param_info(r.model, i, NULL, NULL, NULL, &k);
        nparams += k;
    }
    printf("model: %s (%zu parameters)\n", clcnn_model_spec(r.model), nparams);
    if (o.eval_only) {
        rc = evaluate(&r, ck.epoch, ck.step) ? 1 : 0;
        goto done;
    }
    /* What the model will train with: the options given, or a resumed checkpoint's. */
    printf("optimizer: %s lr %g",
           opt.kind == CLCNN_OPTIMIZER_SGD    ? "SGD"
           : opt.kind == CLCNN_OPTIMIZER_ADAM ? "Adam"
                                              : "AdamW",
           opt.lr);
    if (opt.kind == CLCNN_OPTIMIZER_SGD && opt.momentum > 0)
        printf(" momentum %g%s", opt.momentum, opt.nesterov ? " (Nesterov)" : "");
    if (opt.kind != CLCNN_OPTIMIZER_SGD &&
        (opt.beta1 != 0.9 || opt.beta2 != 0.999 || opt.eps != 1e-8))
        printf(" betas %g,%g eps %g", opt.beta1, opt.beta2, opt.eps);
    if (opt.weight_decay > 0) printf(" weight decay %g", opt.weight_decay);
    printf(", batch %ld, %ld epoch%s, seed %" PRIu64 "%s\n", o.batch_size, o.epochs,
           o.epochs == 1 ? "" : "s", ck.seed, o.no_shuffle ? ", no shuffle" : "");
    if (!o.no_tensorboard) {
        if (clcnn_summary_writer_open(&r.tb, o.logdir)) {
            say("--logdir: %s", clcnn_summary_writer_errmsg(r.tb));
            goto done;
        }
        printf("TensorBoard: %s\n", clcnn_summary_writer_path(r.tb));
    }
    fflush(stdout);
    r.tty = isatty(fileno(stdout));
    if (ck.epoch >= o.epochs && !o.max_steps) {
        printf("nothing to do: the checkpoint has %" PRId64 " epochs, --epochs is %ld\n", ck.epoch,
               o.epochs);
        rc = 0;
        goto done;
    }
    rc = train(&r, ck) ? 1 : 0;
    if (!rc) printf("done in %.1f s\n", now() - t0);
done:
    if (r.tb && clcnn_summary_writer_close(r.tb) != CLCNN_SUCCESS) {
        say("closing the TensorBoard file failed");
        rc = 1;
    }
    if (r.metrics && fclose(r.metrics) != 0) {
        say("closing %s failed: %s", o.metrics, strerror(errno));
        rc = 1;
    }
    clcnn_model_free(r.model);
    clcnn_dataset_free(r.train);
    clcnn_dataset_free(r.test);
    clcnn_context_free(r.ctx);
    clcnn_devices_free(devs);
    return rc;
}
