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

static void init_solo(cli_dist *d) {
    memset(d, 0, sizeof *d);
    d->size = d->local_size = 1;
    d->comm.rank = 0;
    d->comm.size = 1;
    d->comm.user = d;
    d->comm.allreduce_float = solo_allreduce_float;
    d->comm.allreduce_double = solo_allreduce_double;
    d->comm.broadcast = solo_broadcast;
}

int64_t cli_dist_hash(const char *s) {
    uint64_t h = 0xcbf29ce484222325u;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        h = (h ^ *p) * 0x100000001b3u;
    /* Two's complement without implementation-defined conversion. */
    return h <= INT64_MAX ? (int64_t)h : -(int64_t)(~h) - 1;
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

/* MPI counts are int: larger buffers go in chunks of at most INT_MAX elements. */
static int allreduce_sum(cli_dist *d, void *buf, size_t n, MPI_Datatype type, size_t elsize) {
    for (size_t off = 0; off < n; off += INT_MAX) {
        int count = (int)(n - off < INT_MAX ? n - off : INT_MAX);
        int rc = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + off * elsize, count, type, MPI_SUM,
                               MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return mpi_failed(d, "MPI_Allreduce", rc);
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
        int rc = MPI_Bcast((char *)buf + off, count, MPI_BYTE, root, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return mpi_failed(d, "MPI_Bcast", rc);
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
 * it is; MPI_T cannot change that variable after MPI_Init. */
_Noreturn void cli_dist_abort(cli_dist *d, int code) {
    fflush(stdout);
    fflush(stderr);
    if (d && d->active) MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

int cli_dist_all_ok(cli_dist *d, int ok) {
    int mine = ok != 0, all = 0;
    if (!d->active) return mine;
    int rc = MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) {
        mpi_failed(d, "MPI_Allreduce", rc);
        return 0;
    }
    return all;
}

/* The lowest rank whose head (a value count and a hash of the names) differs from rank 0's, or
 * 0 when none does (rank 0 cannot differ from itself); zero receives rank 0's head and theirs
 * that rank's. -1 when an MPI call failed (d->error). */
static int first_differing_head(cli_dist *d, const int64_t head[2], int64_t zero[2],
                                int64_t theirs[2]) {
    memcpy(zero, head, 2 * sizeof *head);
    int rc = MPI_Bcast(zero, 2, MPI_INT64_T, 0, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_failed(d, "MPI_Bcast", rc);
    int mine = zero[0] != head[0] || zero[1] != head[1] ? d->rank : INT_MAX, lowest = 0;
    rc = MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_failed(d, "MPI_Allreduce", rc);
    if (lowest == INT_MAX) return 0;
    memcpy(theirs, head, 2 * sizeof *head);
    rc = MPI_Bcast(theirs, 2, MPI_INT64_T, lowest, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_failed(d, "MPI_Bcast", rc);
    return lowest;
}

/* The first value index where some rank differs from rank 0 (n when none) and the lowest rank
 * that differs there, over every rank (MPI_MINLOC); -1 when an MPI call failed. */
static int first_name_differing(cli_dist *d, const int64_t *values, int n, int where[2]) {
    enum { CHUNK = 64 };
    int mine[2] = {n, d->rank};
    for (int start = 0; start < n; start += CHUNK) {
        int count = n - start < CHUNK ? n - start : CHUNK;
        int64_t zero[CHUNK];
        memcpy(zero, values + start, (size_t)count * sizeof *values);
        int rc = MPI_Bcast(zero, count, MPI_INT64_T, 0, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return mpi_failed(d, "MPI_Bcast", rc);
        for (int i = 0; i < count && mine[0] == n; i++)
            if (zero[i] != values[start + i]) mine[0] = start + i;
    }
    int rc = MPI_Allreduce(mine, where, 1, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : mpi_failed(d, "MPI_Allreduce", rc);
}

int cli_dist_agree(cli_dist *d, const char *const *names, const int64_t *values, int n, char *msg,
                   size_t size) {
    if (size) msg[0] = '\0';
    if (!d->active || d->size == 1) return 0;
    /* The list itself first: a rank with other names runs another clcnn_train. */
    uint64_t h = 0xcbf29ce484222325u;
    for (int i = 0; i < n; i++)
        h = h * 31u + (uint64_t)cli_dist_hash(names[i]);
    int64_t head[2] = {n, (int64_t)(h >> 1)}, zero[2], other[2];
    int r = first_differing_head(d, head, zero, other);
    if (r > 0) {
        snprintf(msg, size,
                 "ranks run different clcnn_train builds: rank 0 checks %" PRId64
                 " settings, rank %d checks %" PRId64 "%s",
                 zero[0], r, other[0], other[0] == zero[0] ? " with other names" : "");
        return -1;
    }
    int where[2] = {n, 0};
    if (r < 0 || first_name_differing(d, values, n, where) != 0) {
        snprintf(msg, size, "ranks cannot compare their settings: %s", d->error);
        return -1;
    }
    if (where[0] == n) return 0;
    int64_t pair[2] = {values[where[0]], values[where[0]]};
    int rc = MPI_Bcast(&pair[0], 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
    if (rc == MPI_SUCCESS) rc = MPI_Bcast(&pair[1], 1, MPI_INT64_T, where[1], MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) {
        mpi_failed(d, "MPI_Bcast", rc);
        snprintf(msg, size, "ranks cannot compare their settings: %s", d->error);
        return -1;
    }
    snprintf(msg, size, "ranks disagree on %s: rank 0 has %" PRId64 ", rank %d has %" PRId64,
             names[where[0]], pair[0], where[1], pair[1]);
    return -1;
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

int cli_dist_agree(cli_dist *d, const char *const *names, const int64_t *values, int n, char *msg,
                   size_t size) {
    (void)d, (void)names, (void)values, (void)n;
    if (size) msg[0] = '\0';
    return 0;
}

#endif
