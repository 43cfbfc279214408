/*
 * parallel.c - fork-join over pthreads with a mutex-protected work counter.
 */
#include <pthread.h>

#include "internal.h"
#include "parallel.h"

#define PARALLEL_MAX_THREADS 256

struct job {
    pthread_mutex_t lock;
    size_t next, n;
    int status;
    parallel_fn fn;
    void *ctx;
};

struct worker_arg {
    struct job *job;
    unsigned id;
};

static void *worker_main(void *arg)
{
    struct worker_arg *w = (struct worker_arg *)arg;
    struct job *j = w->job;
    for (;;) {
        size_t i;
        int rc;
        pthread_mutex_lock(&j->lock);
        if (j->status != MESS_OK || j->next >= j->n) {
            pthread_mutex_unlock(&j->lock);
            return NULL;
        }
        i = j->next++;
        pthread_mutex_unlock(&j->lock);
        rc = j->fn(j->ctx, i, w->id);
        if (rc != MESS_OK) {
            pthread_mutex_lock(&j->lock);
            if (j->status == MESS_OK)
                j->status = rc;
            pthread_mutex_unlock(&j->lock);
        }
    }
}

int parallel_for(size_t n, unsigned threads, parallel_fn fn, void *ctx)
{
    pthread_t tid[PARALLEL_MAX_THREADS];
    struct worker_arg args[PARALLEL_MAX_THREADS];
    struct job j;
    unsigned t, started = 0;

    if (threads == 0)
        threads = 1;
    if (threads > PARALLEL_MAX_THREADS)
        threads = PARALLEL_MAX_THREADS;
    if (threads > n)
        threads = n ? (unsigned)n : 1;
    if (threads == 1) {
        size_t i;
        for (i = 0; i < n; i++) {
            int rc = fn(ctx, i, 0);
            if (rc != MESS_OK)
                return rc;
        }
        return MESS_OK;
    }
    if (pthread_mutex_init(&j.lock, NULL) != 0)
        return MESS_ENOMEM;
    j.next = 0;
    j.n = n;
    j.status = MESS_OK;
    j.fn = fn;
    j.ctx = ctx;
    /* worker 0 is the calling thread */
    for (t = 1; t < threads; t++) {
        args[t].job = &j;
        args[t].id = t;
        if (pthread_create(&tid[t], NULL, worker_main, &args[t]) != 0)
            break;
        started++;
    }
    args[0].job = &j;
    args[0].id = 0;
    worker_main(&args[0]);
    for (t = 1; t <= started; t++)
        pthread_join(tid[t], NULL);
    pthread_mutex_destroy(&j.lock);
    return j.status;
}
