/*
 * parallel.h - a minimal fork-join over pthreads.  Internal header.
 */
#ifndef MESS_PARALLEL_H
#define MESS_PARALLEL_H

#include <stddef.h>

#include "mess.h"

/* Calls fn(ctx, i, worker) for every i in [0, n), spread over up to
 * `threads` workers (worker in [0, threads)); items are handed out one at a
 * time from a shared counter, so uneven items balance.  Returns the first
 * non-zero status any call returned (remaining items are skipped), or
 * MESS_ENOMEM if no thread could be started and running inline failed. */
typedef int (*parallel_fn)(void *ctx, size_t i, unsigned worker);
int parallel_for(size_t n, unsigned threads, parallel_fn fn, void *ctx);

/* The same over a persistent mess_workers (mess.h, "Batches"): no thread
 * is started; worker ids are in [0, mess_workers_threads(w)), the calling
 * thread being worker 0.  w == NULL runs inline (one worker).  Jobs on
 * one mess_workers run one at a time (concurrent callers wait their
 * turn), so fn must not itself call workers_for on the same w. */
int workers_for(mess_workers *w, size_t n, parallel_fn fn, void *ctx);

/* A pool inherited through fork(): its threads are not in this process,
 * so it can be neither stopped nor joined; only its memory is released
 * (its mutexes may be held by threads that do not exist here, so they are
 * not destroyed). */
void workers_forget(mess_workers *w);

#endif
