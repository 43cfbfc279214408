/*
 * parallel.c - fork-join over pthreads with a mutex-protected work counter.
 */
#include <pthread.h>

#include "internal.h"
#include "parallel.h"

#define PARALLEL_MAX_THREADS MESS_MAX_THREADS

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

/* ------------------------------------------------------------------------
 * Persistent workers (mess_workers, mess.h "Batches").
 *
 * threads - 1 threads started once; the caller of workers_for is worker 0.
 * A job is published under `lock` with a new generation number and a
 * broadcast; each started thread takes items from the shared counter until
 * none are left, then decrements `active`; the caller takes items too and
 * then waits for active == 0, so no thread still runs the job's function
 * when workers_for returns.  `run` serialises jobs: calls from several
 * threads on one mess_workers take turns.
 * ---------------------------------------------------------------------- */

struct mess_workers {
    pthread_mutex_t run;    /* one job at a time */
    pthread_mutex_t lock;   /* everything below */
    pthread_cond_t wake;    /* a new job (gen changed) or quit */
    pthread_cond_t done;    /* active reached 0 */
    unsigned threads;       /* workers, the caller included */
    unsigned started;       /* threads running worker_loop */
    pthread_t *tid;
    struct pool_arg *args;
    uint64_t gen;
    int quit;
    parallel_fn fn;
    void *ctx;
    size_t next, n;
    int status;
    unsigned active;        /* started threads still inside the job */
};

struct pool_arg {
    struct mess_workers *w;
    unsigned id;
};

/* Runs items of the current job; called and returns with w->lock held. */
static void pool_items(struct mess_workers *w, unsigned id)
{
    while (w->status == MESS_OK && w->next < w->n) {
        size_t i = w->next++;
        int rc;
        pthread_mutex_unlock(&w->lock);
        rc = w->fn(w->ctx, i, id);
        pthread_mutex_lock(&w->lock);
        if (rc != MESS_OK && w->status == MESS_OK)
            w->status = rc;
    }
}

static void *pool_loop(void *arg)
{
    struct pool_arg *a = (struct pool_arg *)arg;
    struct mess_workers *w = a->w;
    uint64_t seen = 0;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->quit && w->gen == seen)
            pthread_cond_wait(&w->wake, &w->lock);
        if (w->quit)
            break;
        seen = w->gen;
        pool_items(w, a->id);
        if (--w->active == 0)
            pthread_cond_signal(&w->done);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

static void pool_stop(struct mess_workers *w)
{
    unsigned t;
    pthread_mutex_lock(&w->lock);
    w->quit = 1;
    pthread_cond_broadcast(&w->wake);
    pthread_mutex_unlock(&w->lock);
    for (t = 0; t < w->started; t++)
        pthread_join(w->tid[t], NULL);
    w->started = 0;
}

int mess_workers_new(unsigned threads, mess_workers **out)
{
    mess_workers *w;
    unsigned t;
    if (!out)
        return MESS_EINVAL;
    *out = NULL;
    if (threads == 0)
        threads = 1;
    if (threads > MESS_MAX_THREADS)
        return MESS_ELIMIT;
    w = (mess_workers *)calloc(1, sizeof *w);
    if (!w)
        return MESS_ENOMEM;
    w->threads = threads;
    w->tid = (pthread_t *)mess_calloc_array(threads, sizeof *w->tid);
    w->args = (struct pool_arg *)mess_calloc_array(threads, sizeof *w->args);
    if (!w->tid || !w->args)
        goto nomem;
    if (pthread_mutex_init(&w->run, NULL) != 0)
        goto nomem;
    if (pthread_mutex_init(&w->lock, NULL) != 0) {
        pthread_mutex_destroy(&w->run);
        goto nomem;
    }
    if (pthread_cond_init(&w->wake, NULL) != 0) {
        pthread_mutex_destroy(&w->lock);
        pthread_mutex_destroy(&w->run);
        goto nomem;
    }
    if (pthread_cond_init(&w->done, NULL) != 0) {
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->lock);
        pthread_mutex_destroy(&w->run);
        goto nomem;
    }
    for (t = 1; t < threads; t++) {
        w->args[t - 1].w = w;
        w->args[t - 1].id = t;
        if (pthread_create(&w->tid[t - 1], NULL, pool_loop, &w->args[t - 1]) != 0) {
            /* all or nothing: a pool smaller than asked is not returned */
            mess_workers_free(w);
            return MESS_ENOMEM;
        }
        w->started++;
    }
    *out = w;
    return MESS_OK;
nomem:
    free(w->tid);
    free(w->args);
    free(w);
    return MESS_ENOMEM;
}

void workers_forget(mess_workers *w)
{
    if (!w)
        return;
    free(w->tid);
    free(w->args);
    free(w);
}

void mess_workers_free(mess_workers *w)
{
    if (!w)
        return;
    pool_stop(w);
    pthread_cond_destroy(&w->done);
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->lock);
    pthread_mutex_destroy(&w->run);
    free(w->tid);
    free(w->args);
    free(w);
}

size_t mess_max_threads(void)
{
    return MESS_MAX_THREADS;
}

unsigned mess_workers_threads(const mess_workers *w)
{
    return w ? w->threads : 0;
}

int workers_for(mess_workers *w, size_t n, parallel_fn fn, void *ctx)
{
    int status;
    if (!w || w->threads == 1 || n <= 1)
        return parallel_for(n, 1, fn, ctx);
    pthread_mutex_lock(&w->run);
    pthread_mutex_lock(&w->lock);
    w->fn = fn;
    w->ctx = ctx;
    w->n = n;
    w->next = 0;
    w->status = MESS_OK;
    w->active = w->started;
    w->gen++;
    pthread_cond_broadcast(&w->wake);
    pool_items(w, 0);
    while (w->active > 0)
        pthread_cond_wait(&w->done, &w->lock);
    status = w->status;
    w->fn = NULL;
    w->ctx = NULL;
    pthread_mutex_unlock(&w->lock);
    pthread_mutex_unlock(&w->run);
    return status;
}
