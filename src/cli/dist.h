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
    /* CLCNN_TEST_FAIL_AT, parsed (cli_dist_fail_here): the phase ("" none), the rank, the
     * occurrence that fails and how often the phase was reached; fail_next: the next MPI
     * call fails (cli_dist_fail_next_call). */
    char fail_phase[32];
    int fail_rank, fail_n, fail_seen, fail_next;
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

/* One setting every rank must share, for cli_dist_agree(): its name as a message gives it
 * ("--pct-start", "training images") and its value, of the kind said. */
typedef enum cli_value_kind {
    CLI_VALUE_INT,  /* i */
    CLI_VALUE_REAL, /* x: compared as a value (0 and -0 alike), shown as its shortest text */
    CLI_VALUE_TEXT  /* text (NULL reads as ""): compared as a 64-bit hash, shown as it is */
} cli_value_kind;

typedef struct cli_setting {
    const char *name;
    cli_value_kind kind;
    int64_t i;
    double x;
    const char *text;
} cli_setting;

/* Start-up agreement: every rank passes the same list of n settings (the same names and kinds
 * on every rank); rank 0 gathers them, finds the first one where some rank differs, and every
 * rank receives the verdict. Returns 0 when all agree; 1 when some differ, msg then holding
 * the same line on every rank, such as "ranks disagree on --pct-start: rank 0 has 0.3, rank 1
 * has 0.9" (texts longer than 200 bytes are cut, "..." marking the cut); -1 when an MPI call
 * failed on this rank (msg says which): the other ranks may then be waiting in a collective.
 * Without MPI, or with one process: 0. */
int cli_dist_agree(cli_dist *d, const cli_setting *s, int n, char *msg, size_t size);

/* 1 when ok is non-zero on every rank (MPI_Allreduce MIN); without MPI: ok != 0. A failed
 * MPI call counts as not ok. */
int cli_dist_all_ok(cli_dist *d, int ok);

/* A 64-bit FNV-1a hash of a string. */
int64_t cli_dist_hash(const char *s);

/* The test suite's failure injection, a test hook documented in docs/RELIABILITY.md:
 * CLCNN_TEST_FAIL_AT=PHASE:RANK[:N] makes rank RANK fail the N-th time (default 1) it reaches
 * PHASE; the caller names its phases. Returns 1 exactly then, else 0 (always 0 when the
 * variable is unset). */
int cli_dist_fail_here(cli_dist *d, const char *phase);

/* For an injected failure inside a collective: the next MPI call of this process (a callback
 * of comm, or one of cli_dist_agree's) fails as a failed MPI call does, without calling MPI,
 * so that the other ranks are left waiting in that collective as after a real failure. */
void cli_dist_fail_next_call(cli_dist *d);

#endif
