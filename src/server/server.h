/*
 * server.h - the server's internal header: the server operations' shared
 * declarations (the handle's allocation, server_core.c; the search
 * settings, server_search.c; the open, server_open.c) over the store's
 * (store.h: the server handle's data, its directory's files).  Internal:
 * not installed; the client never includes it.
 *
 * server_core.c is the handle (alloc, free, params, owner, stats);
 * server_apply.c applies uploads and deletes and compacts,
 * server_search.c searches, server_view.c is the read-only view,
 * server_state.c the travel form's body, server_open.c and
 * server_checkpoint.c the directory's upper half (open, replay, verify;
 * checkpoint, create, export, import), server_extract.c a shard group's
 * directory.  docs/ARCHITECTURE.md maps the paper onto these files.
 */
#ifndef MESS_SERVER_H
#define MESS_SERVER_H

#include "store.h"

/* A record's label (wire.h) as the graphs store it (hnsw_bin.h). */
#define LABEL_BYTES MESS_LABEL_BYTES

static inline struct hnsw_label label_load(const uint8_t *b)
{
    return hnsw_label_of(mess_load_u64(b), mess_load_u64(b + 8));
}

/* ---- server handle (server_core.c) ---------------------------------------- */

/* A server handle; with_graphs: empty graphs (else the loader fills them). */
int server_alloc(const mess_params *p, int with_graphs, mess_server **out);

/* ---- search settings (server_search.c) ------------------------------------ */

/* The handle's search options (struct server_search_opts in store.h, set
 * to these defaults by server_alloc).  Not thread-safe: tests and
 * benchmarks set them between searches of the handle. */

/* Shard searches in flight per worker thread (hnsw_search_many, measured
 * in docs/PERFORMANCE.md "Server"). */
#define SERVER_SEARCH_WIDTH 8
/* The width the handle's searches use from now on: 1..HNSW_MANY_MAX, or 0
 * for the shards one after the other through hnsw_search (the path before
 * interleaving); MESS_EINVAL above HNSW_MANY_MAX. */
int server_search_set_width(mess_server *s, unsigned width);
unsigned server_search_get_width(const mess_server *s);
/* hnsw_search_many's loops (struct hnsw_many_opts, hnsw_bin.h); for the
 * tests and the benchmark. */
void server_search_set_paths(mess_server *s, int fast, size_t clear_words);
/* Entries ahead of the one being copied into a response whose lines are
 * prefetched (0: none); for the benchmark. */
#define SERVER_COPY_AHEAD 4
void server_search_set_copy_ahead(mess_server *s, unsigned ahead);
/* How a response's copy reads a directory's arena pages
 * (server_search.c, "Reading the payload"): 1 (the default) watches its
 * pace and, on uncached pages, asks for those of every entry still to
 * copy at once; 0 lets each entry's fault read its pages in turn (as
 * before); 2 asks for every entry's pages before copying, cached or not
 * (for the tests and the benchmark).  MESS_EINVAL for another mode. */
int server_search_set_payload_io(mess_server *s, int mode);
/* Requests of a batch searched together per worker, shard by shard
 * (1..SEARCH_GROUP, the default; 1: each request alone); for the
 * benchmark. */
#define SEARCH_GROUP 8
int server_search_set_group(mess_server *s, unsigned group);
/* Multi-threaded searches on the server's kept workers (1, default) or on
 * threads started for each search (0, as before); for the benchmark. */
void server_search_set_keep_workers(mess_server *s, int keep);
/* mess_server_search_batch's throughput mode (server_search.c): the
 * requests of a batch, in windows of up to `window` (1..SEARCH_WINDOW_MAX),
 * searched shard by shard across the workers, each shard's graph for all
 * of a window's requests at once; 0 the groups above (the path before it).
 * MESS_EINVAL above SEARCH_WINDOW_MAX; for the tests and the benchmark. */
#define SEARCH_WINDOW 256
#define SEARCH_WINDOW_MAX 4096
int server_search_set_by_shard(mess_server *s, unsigned window);
/* Whether hnsw_search_many reads the graphs' code layout where built
 * (1, default) or not (0): the benchmark's switch between the two on one
 * handle, without building the layout again. */
void server_search_set_read_layout(mess_server *s, int on);

/* The defaults above, which server_alloc gives every handle (inline here
 * so that server_core.c, below server_search.c, needs nothing of it). */
static inline void server_search_opts_default(struct server_search_opts *o)
{
    o->width = SERVER_SEARCH_WIDTH;
    o->many.fast = HNSW_MANY_FAST;
    o->many.clear_words = HNSW_MANY_CLEAR_WORDS;
    o->copy_ahead = SERVER_COPY_AHEAD;
    o->payload_io = 1;
    o->group = SEARCH_GROUP;
    o->many.layout = 1; /* read where built (o->layout) */
    o->layout = MESS_LAYOUT_DEFAULT;
    o->keep_workers = 1;
    o->by_shard = SEARCH_WINDOW;
}

/* ---- the directory's upper half (server_open.c) --------------------------- */

/* mess_server_open with a reason in msg on failure; mode: enum store_mode. */
int store_open(const char *dir, const mess_params *expect, const uint32_t *shards,
               size_t nshards, int mode, mess_server **out, char *msg,
               size_t msg_cap);

/* Opens S/wal for the server's generation, applies its records and keeps
 * it as the server's log (writable, or read-only for a verification;
 * mess_server_create, server_checkpoint.c). */
int store_open_log(mess_server *s, int writable, char *msg, size_t cap);

#endif
