/* clcnn_train's process group: MPI start-up, the clcnn_comm callbacks on MPI_COMM_WORLD, the
 * start-up agreement between ranks and the abort path. Built without MPI it is one process. */
#include "dist.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CLCNN_HAVE_MPI
#include <mpi.h>
#endif

/* With one process there is nothing to combine: every callback leaves buf as it is. */
static int solo_allreduce_float(void *user, float *buf, size_t n) {
    (void)user, (void)buf, (void)n;
    return 0;
}

static int solo_allreduce_double(void *user, double *buf, size_t n) {
    (void)user, (void)buf, (void)n;
    return 0;
}

static int solo_broadcast(void *user, void *buf, size_t bytes, int root) {
    (void)user, (void)buf, (void)bytes;
    return root == 0 ? 0 : -1;
}

/* An environment variable as a whole non-negative number; -1 when unset or not one. */
static long env_count(const char *name) {
    const char *v = getenv(name);
    if (!v || *v < '0' || *v > '9') return -1;
    char *end = NULL;
    long x = strtol(v, &end, 10);
    return *end == '\0' && x >= 0 && x < INT_MAX ? x : -1;
}

/* How many processes a launcher started together with this one, from its environment; 0 when
 * no launcher did, or when the launcher (srun) also starts programs that are not MPI and said
 * one process. `who` names the launcher for messages; *rank is this process's rank there (0
 * when not said), so that only one process prints what all of them would. */
static long launcher_size(const char **who, long *rank) {
    long n;
    if ((n = env_count("OMPI_COMM_WORLD_SIZE")) > 0) {
        *who = "mpirun (Open MPI)";
        *rank = env_count("OMPI_COMM_WORLD_RANK");
    } else if ((n = env_count("PMI_SIZE")) > 0) {
        *who = "the PMI launcher (mpiexec)";
        *rank = env_count("PMI_RANK");
    } else {
        n = env_count("SLURM_STEP_NUM_TASKS");
        *who = getenv("PMIX_RANK") ? "srun --mpi=pmix" : "srun";
        *rank = env_count("SLURM_PROCID");
        if (n <= 0 || (n == 1 && !getenv("PMIX_RANK"))) n = 0;
    }
    if (*rank < 0) *rank = 0;
    return n;
}

/* CLCNN_TEST_FAIL_AT=PHASE:RANK[:N] into d (cli_dist_fail_here); a value of another form is
 * ignored, as an unset variable. */
static void read_fail_at(cli_dist *d) {
    const char *v = getenv("CLCNN_TEST_FAIL_AT");
    char phase[sizeof d->fail_phase];
    int rank = -1, n = 1, used = 0;
    if (!v || sscanf(v, "%31[a-z]:%d%n", phase, &rank, &used) != 2 || rank < 0) return;
    if (v[used] == ':' && (sscanf(v + used + 1, "%d", &n) != 1 || n < 1)) return;
    snprintf(d->fail_phase, sizeof d->fail_phase, "%s", phase);
    d->fail_rank = rank, d->fail_n = n;
}

static void init_solo(cli_dist *d) {
    memset(d, 0, sizeof *d);
    read_fail_at(d);
    d->size = d->local_size = 1;
    clcnn_comm_init(&d->comm);
    d->comm.rank = 0;
    d->comm.size = 1;
    d->comm.user = d;
    d->comm.allreduce_float = solo_allreduce_float;
    d->comm.allreduce_double = solo_allreduce_double;
    d->comm.broadcast = solo_broadcast;
}

/* Two's complement without implementation-defined conversion. */
static int64_t as_int64(uint64_t h) {
    return h <= INT64_MAX ? (int64_t)h : -(int64_t)(~h) - 1;
}

int64_t cli_dist_hash(const char *s) {
    uint64_t h = 0xcbf29ce484222325u;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        h = (h ^ *p) * 0x100000001b3u;
    return as_int64(h);
}

int cli_dist_fail_here(cli_dist *d, const char *phase) {
    if (!d->fail_phase[0] || d->rank != d->fail_rank || strcmp(phase, d->fail_phase) != 0) return 0;
    return ++d->fail_seen == d->fail_n;
}

void cli_dist_fail_next_call(cli_dist *d) {
    d->fail_next = 1;
}

#ifdef CLCNN_HAVE_MPI

/* Records a failed MPI call in d->error and returns -1. */
static int mpi_failed(cli_dist *d, const char *call, int rc) {
    char why[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, why, &len) != MPI_SUCCESS) snprintf(why, sizeof why, "error %d", rc);
    snprintf(d->error, sizeof d->error, "%s failed: %s", call, why);
    return -1;
}

/* An injected failure (cli_dist_fail_next_call) in place of the MPI call `call`: 1 and
 * d->error says so, once; else 0. */
static int injected(cli_dist *d, const char *call) {
    if (!d->fail_next) return 0;
    d->fail_next = 0;
    snprintf(d->error, sizeof d->error, "%s failed: injected by CLCNN_TEST_FAIL_AT", call);
    return 1;
}

/* MPI_Bcast and MPI_Allreduce on MPI_COMM_WORLD: 0, or -1 with d->error. */
static int bcast(cli_dist *d, void *buf, int count, MPI_Datatype type, int root) {
    if (injected(d, "MPI_Bcast")) return -1;
    int rc = MPI_Bcast(buf, count, type, root, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : mpi_failed(d, "MPI_Bcast", rc);
}

static int allreduce(cli_dist *d, const void *in, void *out, int count, MPI_Datatype type,
                     MPI_Op op) {
    if (injected(d, "MPI_Allreduce")) return -1;
    int rc = MPI_Allreduce(in, out, count, type, op, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : mpi_failed(d, "MPI_Allreduce", rc);
}

/* MPI counts are int: larger buffers go in chunks of at most INT_MAX elements. */
static int allreduce_sum(cli_dist *d, void *buf, size_t n, MPI_Datatype type, size_t elsize) {
    for (size_t off = 0; off < n; off += INT_MAX) {
        int count = (int)(n - off < INT_MAX ? n - off : INT_MAX);
        if (allreduce(d, MPI_IN_PLACE, (char *)buf + off * elsize, count, type, MPI_SUM)) return -1;
    }
    return 0;
}

static int mpi_allreduce_float(void *user, float *buf, size_t n) {
    return allreduce_sum(user, buf, n, MPI_FLOAT, sizeof *buf);
}

static int mpi_allreduce_double(void *user, double *buf, size_t n) {
    return allreduce_sum(user, buf, n, MPI_DOUBLE, sizeof *buf);
}

static int mpi_broadcast(void *user, void *buf, size_t bytes, int root) {
    cli_dist *d = user;
    if (root < 0 || root >= d->size) {
        snprintf(d->error, sizeof d->error, "broadcast from rank %d of %d", root, d->size);
        return -1;
    }
    for (size_t off = 0; off < bytes; off += INT_MAX) {
        int count = (int)(bytes - off < INT_MAX ? bytes - off : INT_MAX);
        if (bcast(d, (char *)buf + off, count, MPI_BYTE, root)) return -1;
    }
    return 0;
}

/* The ranks sharing this node's memory: local_rank and local_size. */
static int find_local(cli_dist *d) {
    MPI_Comm node = MPI_COMM_NULL;
    int rc =
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &node);
    if (rc != MPI_SUCCESS) return mpi_failed(d, "MPI_Comm_split_type", rc);
    MPI_Comm_rank(node, &d->local_rank);
    MPI_Comm_size(node, &d->local_size);
    MPI_Comm_free(&node);
    return 0;
}

/* MPI_Init_thread and the group's shape. On -1 MPI may still be active: the caller aborts. */
static int start_mpi(cli_dist *d, int *argc, char ***argv, long expect, const char *who,
                     long launcher_rank) {
    int provided = MPI_THREAD_SINGLE;
    /* The library calls the transport from whichever of its threads runs the step, one call at
     * a time. */
    if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "clcnn_train: MPI_Init_thread failed (started by %s)\n", who);
        return -1;
    }
    d->active = 1;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->size);
    if (d->size != expect) {
        /* Each process is a singleton: the MPI library did not find the launcher's group. */
        if (launcher_rank == 0)
            fprintf(
                stderr,
                "clcnn_train: %s started %ld processes but MPI sees %d: this clcnn_train's MPI "
                "library is not the launcher's (use the mpirun of the MPI clcnn_train was built "
                "with, or srun --mpi=pmix)\n",
                who, expect, d->size);
        MPI_Finalize();
        d->active = 0;
        return -1;
    }
    if (provided < MPI_THREAD_SERIALIZED) {
        if (d->rank == 0)
            fprintf(stderr,
                    "clcnn_train: the MPI library does not support MPI_THREAD_SERIALIZED\n");
        return -1;
    }
    if (find_local(d) != 0) {
        fprintf(stderr, "clcnn_train: rank %d: %s\n", d->rank, d->error);
        return -1;
    }
    d->comm.rank = d->rank;
    d->comm.size = d->size;
    d->comm.allreduce_float = mpi_allreduce_float;
    d->comm.allreduce_double = mpi_allreduce_double;
    d->comm.broadcast = mpi_broadcast;
    return 0;
}

int cli_dist_init(cli_dist *d, int *argc, char ***argv) {
    init_solo(d);
    const char *who = NULL;
    long launcher_rank = 0, expect = launcher_size(&who, &launcher_rank);
    if (expect == 0) return 0;
    return start_mpi(d, argc, argv, expect, who, launcher_rank);
}

void cli_dist_finalize(cli_dist *d) {
    if (!d || !d->active) return;
    MPI_Finalize();
    d->active = 0;
}

/* Open MPI 4.1's mpirun then kills every rank and exits with `code`, and prints its MPI_ABORT
 * banner after our error line (or, in a race of its own, an "ORTE_ERROR_LOG: Data unpack would
 * read past end of buffer" line instead). `mpirun --quiet` drops it. Setting orte_execute_quiet
 * in the rank before MPI_Init would drop it too, but also every other Open MPI message of the
 * rank, down to why MPI_Init failed (the rank then exits 1 without a word), so it is left as
 * it is; MPI_T cannot change that variable after MPI_Init. A failure every rank met alike (a
 * settings mismatch, a NaN loss) therefore ends each rank through MPI_Finalize instead: no
 * banner, though mpirun still notes the non-zero exit status (mpirun, not a rank, prints that
 * note; `mpirun --quiet` drops it too). */
_Noreturn void cli_dist_abort(cli_dist *d, int code) {
    fflush(stdout);
    fflush(stderr);
    if (d && d->active) MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

int cli_dist_all_ok(cli_dist *d, int ok) {
    int mine = ok != 0, all = 0;
    if (!d->active) return mine;
    return allreduce(d, &mine, &all, 1, MPI_INT, MPI_MIN) == 0 && all;
}

/* The value of a setting the ranks compare: the integer, the bits of the number (those of 0
 * for -0: the same arithmetic), or the hash of the text. */
static int64_t setting_key(const cli_setting *s) {
    double x = s->x == 0 ? 0.0 : s->x;
    uint64_t bits;
    switch (s->kind) {
    case CLI_VALUE_INT: return s->i;
    case CLI_VALUE_REAL: memcpy(&bits, &x, sizeof bits); return as_int64(bits);
    case CLI_VALUE_TEXT: break;
    }
    return cli_dist_hash(s->text ? s->text : "");
}

/* The most of a text value a disagreement shows, and the room a shown value takes. */
#define SHOWN_TEXT 200
#define SHOWN_SIZE (SHOWN_TEXT + 8)

/* A text value as a message shows it: at most SHOWN_TEXT bytes, "..." where cut, and "(none)"
 * for "". */
static void show_text(char out[SHOWN_SIZE], const char *text) {
    size_t n = text ? strlen(text) : 0;
    if (n == 0)
        snprintf(out, SHOWN_SIZE, "(none)");
    else
        snprintf(out, SHOWN_SIZE, "%.*s%s", SHOWN_TEXT, text, n > SHOWN_TEXT ? "..." : "");
}

/* A compared integer or number as a message shows it: a number as the shortest text that
 * reads back as exactly it ("0.9", not "0.90000000000000002" or its bits). */
static void show_key(char out[SHOWN_SIZE], cli_value_kind kind, int64_t key) {
    double x;
    if (kind != CLI_VALUE_REAL) {
        snprintf(out, SHOWN_SIZE, "%" PRId64, key);
        return;
    }
    memcpy(&x, &key, sizeof x);
    snprintf(out, SHOWN_SIZE, "%.15g", x);
    if (strtod(out, NULL) != x) snprintf(out, SHOWN_SIZE, "%.17g", x);
}

/* The lowest rank whose head (a setting count and a hash of the names and kinds) differs from
 * rank 0's, or 0 when none does (rank 0 cannot differ from itself); zero receives rank 0's
 * head and theirs that rank's. -1 when an MPI call failed (d->error). */
static int first_differing_head(cli_dist *d, const int64_t head[2], int64_t zero[2],
                                int64_t theirs[2]) {
    memcpy(zero, head, 2 * sizeof *head);
    if (bcast(d, zero, 2, MPI_INT64_T, 0)) return -1;
    int mine = zero[0] != head[0] || zero[1] != head[1] ? d->rank : INT_MAX, lowest = 0;
    if (allreduce(d, &mine, &lowest, 1, MPI_INT, MPI_MIN)) return -1;
    if (lowest == INT_MAX) return 0;
    memcpy(theirs, head, 2 * sizeof *head);
    if (bcast(d, theirs, 2, MPI_INT64_T, lowest)) return -1;
    return lowest;
}

/* The first setting where some rank differs from rank 0 (n when none) and the lowest rank
 * that differs there, over every rank (MPI_MINLOC); -1 when an MPI call failed. */
static int first_setting_differing(cli_dist *d, const int64_t *keys, int n, int where[2]) {
    enum { CHUNK = 64 };
    int mine[2] = {n, d->rank};
    for (int start = 0; start < n; start += CHUNK) {
        int count = n - start < CHUNK ? n - start : CHUNK;
        int64_t zero[CHUNK];
        memcpy(zero, keys + start, (size_t)count * sizeof *keys);
        if (bcast(d, zero, count, MPI_INT64_T, 0)) return -1;
        for (int i = 0; i < count && mine[0] == n; i++)
            if (zero[i] != keys[start + i]) mine[0] = start + i;
    }
    return allreduce(d, mine, where, 1, MPI_2INT, MPI_MINLOC);
}

/* Rank 0's and rank `other`'s value of setting s, as a message shows them, on every rank. */
static int show_both(cli_dist *d, const cli_setting *s, int other, char zero[SHOWN_SIZE],
                     char theirs[SHOWN_SIZE]) {
    if (s->kind == CLI_VALUE_TEXT) {
        show_text(zero, s->text);
        show_text(theirs, s->text);
        return bcast(d, zero, SHOWN_SIZE, MPI_CHAR, 0) ||
                       bcast(d, theirs, SHOWN_SIZE, MPI_CHAR, other)
                   ? -1
                   : 0;
    }
    int64_t pair[2] = {setting_key(s), setting_key(s)};
    if (bcast(d, &pair[0], 1, MPI_INT64_T, 0) || bcast(d, &pair[1], 1, MPI_INT64_T, other))
        return -1;
    show_key(zero, s->kind, pair[0]);
    show_key(theirs, s->kind, pair[1]);
    return 0;
}

int cli_dist_agree(cli_dist *d, const cli_setting *s, int n, char *msg, size_t size) {
    if (size) msg[0] = '\0';
    if (!d->active || d->size == 1) return 0;
    int64_t *keys = malloc((n ? (size_t)n : 1) * sizeof *keys);
    if (!keys) {
        snprintf(msg, size, "ranks cannot compare their settings: out of memory");
        return -1;
    }
    /* The list itself first: a rank with other names runs another clcnn_train. */
    uint64_t h = 0xcbf29ce484222325u;
    for (int i = 0; i < n; i++) {
        h = h * 31u + (uint64_t)cli_dist_hash(s[i].name) + (uint64_t)s[i].kind;
        keys[i] = setting_key(&s[i]);
    }
    int64_t head[2] = {n, (int64_t)(h >> 1)}, zero[2], other[2];
    int where[2] = {n, 0}, r = first_differing_head(d, head, zero, other), verdict = 0;
    char mine[SHOWN_SIZE], theirs[SHOWN_SIZE];
    if (r > 0) {
        snprintf(msg, size,
                 "ranks run different clcnn_train builds: rank 0 checks %" PRId64
                 " settings, rank %d checks %" PRId64 "%s",
                 zero[0], r, other[0], other[0] == zero[0] ? " with other names" : "");
        verdict = 1;
    } else if (r < 0 || first_setting_differing(d, keys, n, where) != 0) {
        verdict = -1;
    } else if (where[0] < n) {
        if (show_both(d, &s[where[0]], where[1], mine, theirs) == 0) {
            snprintf(msg, size, "ranks disagree on %s: rank 0 has %s, rank %d has %s",
                     s[where[0]].name, mine, where[1], theirs);
            verdict = 1;
        } else {
            verdict = -1;
        }
    }
    if (verdict < 0) snprintf(msg, size, "ranks cannot compare their settings: %s", d->error);
    free(keys);
    return verdict;
}

#else /* no MPI: one process */

int cli_dist_init(cli_dist *d, int *argc, char ***argv) {
    (void)argc, (void)argv;
    init_solo(d);
    const char *who = NULL;
    long launcher_rank = 0, expect = launcher_size(&who, &launcher_rank);
    if (expect <= 1) return 0;
    if (launcher_rank == 0)
        fprintf(stderr,
                "clcnn_train: %s started %ld processes, but this clcnn_train was built without MPI "
                "and each would train alone (rebuild with Open MPI's development files installed, "
                "cmake -DCLCNN_MPI=ON)\n",
                who, expect);
    return -1;
}

void cli_dist_finalize(cli_dist *d) {
    (void)d;
}

_Noreturn void cli_dist_abort(cli_dist *d, int code) {
    (void)d;
    fflush(stdout);
    exit(code);
}

int cli_dist_all_ok(cli_dist *d, int ok) {
    (void)d;
    return ok != 0;
}

int cli_dist_agree(cli_dist *d, const cli_setting *s, int n, char *msg, size_t size) {
    (void)d, (void)s, (void)n;
    if (size) msg[0] = '\0';
    return 0;
}

#endif
