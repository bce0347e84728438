/* Data-parallel internals shared by replicas.c and the training loop (train.c), which sits
 * above it. */
#ifndef CLCNN_REPLICAS_H
#define CLCNN_REPLICAS_H

#include <pthread.h>

#include "feed.h"

typedef enum clcnn_job {
    CLCNN_JOB_COMPUTE, /* stage the share, forward, loss, backward; copy the gradients out */
    CLCNN_JOB_APPLY,   /* write the summed gradients (and statistics) back, optimizer step */
    CLCNN_JOB_EVAL,    /* evaluate the share of the test set */
    CLCNN_JOB_QUIT
} clcnn_job;

/* One local replica and its worker thread's results. */
typedef struct clcnn_replica {
    struct clcnn_replicas *g;
    clcnn_model *m;
    int index;         /* among this process's replicas */
    int offset, count; /* the current share: its first sample's place in the global batch (all
                        * processes), and its size */
    clcnn_dataset *ds; /* the current job's data set */
    float *grad;       /* the gradients of the last COMPUTE (m->total floats) */
    float loss;        /* COMPUTE: sum(loss) / global batch; EVAL: sum(loss) */
    int correct;
    clcnn_status st;
    double seconds; /* the last job's wall time */
    pthread_t thread;
    int started;
} clcnn_replica;

struct clcnn_replicas {
    clcnn_error err;
    int n;        /* local replicas */
    int global_n; /* replicas in every process */
    clcnn_replica *reps;
    int has_comm;
    clcnn_comm comm;
    int rank, size;
    /* Jobs: the caller bumps generation with the job set; each worker runs it once and counts
     * pending down. */
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    int sync_made;
    uint64_t generation;
    int pending;
    clcnn_job job;
    int first, batch_n, eval_batch; /* the job's arguments */
    clcnn_augment aug;
    size_t total, n_stats;
    int least;       /* the fewest samples a training share may hold (clcnn_model_train_min) */
    float *sum;      /* the summed gradients */
    float *stats;    /* the running statistics every replica takes (rank 0's replica 0) */
    int64_t tracked; /* and its num_batches_tracked */
    float last_loss;
    int last_correct, have_loss;
    double t_compute, t_wait, t_reduce;
    int64_t steps;
    /* A group of one (clcnn_replicas_of_one): one model in this process and no other process,
     * so a step exchanges nothing. Its replica runs each job on the caller's thread, keeps its
     * gradients and statistics on the device, and the loss stays there until asked for
     * (loss_on_device). */
    int alone, loss_on_device;
    clcnn_replica one;
};

/* Makes *r a group of one: model m alone, without threads, host buffers or a transport, for
 * the training loop's one-model calls. Nothing to free. */
void clcnn_replicas_of_one(clcnn_replicas *r, clcnn_model *m);

/* One data-parallel step on samples [first, first+n) of every replica's data set. */
clcnn_status clcnn_replicas_step(clcnn_replicas *r, clcnn_dataset *const *ds, int first, int n,
                                 clcnn_augment aug);

#endif
