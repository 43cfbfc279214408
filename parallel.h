/*
 * parallel.h - a minimal fork-join over pthreads.  Internal header.
 */
#ifndef MESS_PARALLEL_H
#define MESS_PARALLEL_H

#include <stddef.h>

/* Calls fn(ctx, i, worker) for every i in [0, n), spread over up to
 * `threads` workers (worker in [0, threads)); items are handed out one at a
 * time from a shared counter, so uneven items balance.  Returns the first
 * non-zero status any call returned (remaining items are skipped), or
 * MESS_ENOMEM if no thread could be started and running inline failed. */
typedef int (*parallel_fn)(void *ctx, size_t i, unsigned worker);
int parallel_for(size_t n, unsigned threads, parallel_fn fn, void *ctx);

#endif
