/* The process group clcnn_train runs in, and the clcnn_comm transport it gives the library:
 * MPI ranks when clcnn_train is built with MPI (CLCNN_HAVE_MPI) and started by a launcher, else
 * one process. The library itself never links MPI. */
#ifndef CLCNN_CLI_DIST_H
#define CLCNN_CLI_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "clcnn.h"

/* The process group clcnn_train runs in: MPI ranks when built with MPI and started by a
 * launcher (mpirun/mpiexec/srun), else one process. */
typedef struct cli_dist {
    int rank, size;             /* world rank and size (0 and 1 without MPI) */
    int local_rank, local_size; /* among the ranks on this node (MPI_Comm_split_type SHARED) */
    int active;                 /* MPI was initialised */
    /* The library's transport. Always filled: with one process its callbacks do nothing. */
    clcnn_comm comm;
    /* The last MPI call of comm's callbacks that failed, with MPI's reason; "" when none. */
    char error[320];
} cli_dist;

/* Starts MPI only when a launcher's environment says this process is one of several
 * (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK with a size, SLURM_STEP_NUM_TASKS; Open MPI's
 * and MPICH's launchers count even with one process, srun from two): a plain `clcnn_train`
 * never calls MPI_Init. Without MPI, a launcher's group of several processes is an error (each
 * would train alone). Returns 0, or -1 with one error line printed to stderr (when every
 * process meets the same error, only the launcher's rank 0 prints it); MPI may then be active,
 * so the caller ends with cli_dist_abort(). */
int cli_dist_init(cli_dist *d, int *argc, char ***argv);

/* Ends MPI normally (MPI_Finalize) when active. */
void cli_dist_finalize(cli_dist *d);

/* For a rank that has printed its error line and must take every rank down: MPI_Abort(WORLD,
 * code) when active (never returns), else exit(code). Open MPI adds its own banner (see
 * dist.c). */
_Noreturn void cli_dist_abort(cli_dist *d, int code);

/* Start-up agreement: every rank passes the same number n of named values (names identical on
 * every rank, e.g. "--batch-size", "training images", "model spec" as a 64-bit hash);
 * rank 0 gathers them, finds the first name where some rank differs, and every rank receives
 * the verdict. Returns 0 when all agree; otherwise -1 and msg holds one line such as
 * "ranks disagree on --batch-size: rank 0 has 64, rank 1 has 32" (same text on every rank).
 * Without MPI: returns 0. */
int cli_dist_agree(cli_dist *d, const char *const *names, const int64_t *values, int n, char *msg,
                   size_t size);

/* 1 when ok is non-zero on every rank (MPI_Allreduce MIN); without MPI: ok != 0. A failed
 * MPI call counts as not ok. */
int cli_dist_all_ok(cli_dist *d, int ok);

/* A 64-bit FNV-1a hash of a string, for agree(). */
int64_t cli_dist_hash(const char *s);

#endif
