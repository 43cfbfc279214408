/*
 * protocol.h - the protocol's handles and the helpers its files share.
 * Internal: not installed.
 *
 * mess.c is the entry (handles, keys, labels, routing, coins, locking);
 * the operations live in client_update.c (insert and delete messages),
 * client_request.c, client_finish.c, server_apply.c (apply, compact),
 * server_search.c, server_view.c and state.c (state-file bodies).
 * docs/ARCHITECTURE.md maps the paper onto these files.
 */
#ifndef MESS_PROTOCOL_H
#define MESS_PROTOCOL_H

#include <pthread.h>

#include "hnsw_bin.h"
#include "internal.h"
#include "payload.h"
#include "rng.h"
#include "wire.h"


#define KEY_BYTES 32
#define LABEL_BYTES MESS_LABEL_BYTES

/* Domain separating the deterministic-mode query coin streams. */
enum coin_domain { COIN_QUERY = 2 };

/* An id the client deleted at least once: its current generation and
 * whether that generation is deleted. */
struct gen_entry {
    uint64_t id;
    uint32_t gen;
    uint8_t deleted;
};

struct client_keys {
    uint8_t master[KEY_BYTES];
    uint8_t route[KEY_BYTES];
    uint8_t memo[KEY_BYTES];
    uint8_t coin[KEY_BYTES];
    uint8_t hash[KEY_BYTES];
    uint8_t store[KEY_BYTES];
    uint8_t shard[]; /* M x (payload keys[96] | label[32]) */
};

struct mess_client {
    /* Guards the mutable state (op counter, generation map,
     * per-handle settings): calls that change it hold it for writing,
     * calls that only read it (finish, save) for reading.  mess.h,
     * "Threads". */
    pthread_rwlock_t lock;
    mess_params p;
    struct client_keys *keys; /* sodium_malloc'd, wiped on free */
    size_t keys_len;
    struct isohash *hash;
    int deterministic;        /* coins from a ChaCha20 stream keyed by keys->coin */
    uint64_t op_counter;      /* separates deterministic streams per operation */
    unsigned threads;         /* workers opening response entries (not saved) */
    int verify_all;           /* open every copy in a response (not saved) */
    uint8_t owner[MESS_OWNER_BYTES]; /* owner tag (derived, not saved) */
    struct gen_entry *gens;   /* ids ever deleted, ascending by id (saved) */
    size_t ngens;
};

/* One shard's graph and ciphertexts.  Node i's ciphertext is in the
 * mapped payload arena for i < base (a directory-backed server, read only
 * for the entries a search returns) and in the heap tail `entries` at
 * (i - base) * entry_bytes otherwise (a server in memory has base 0).
 * The file fields belong to server_store.c (docs/PROTOCOL.md, "Server
 * directory"). */
/* One delta of a shard's chain (docs/PROTOCOL.md "Proportional
 * checkpoint"): S/shard-JJJJ-GGGGGGGG.delta, gen = GGGGGGGG. */
#define STORE_CHAIN_MAX 8
struct store_delta {
    uint64_t gen, bytes, nodes; /* nodes: the graph's after it */
    uint8_t digest[32];
};

struct shard_store {
    struct hnsw *graph;   /* NULL: a shard this (subset) server does not hold */
    void *graph_map;      /* the graph file's mapping the graph is attached to
                             (MAP_PRIVATE, copy-on-write) or NULL */
    size_t graph_map_len;
    uint8_t *entries;     /* heap tail: nodes base .. count-1 */
    size_t cap;           /* tail entries allocated */
    size_t base;          /* nodes whose ciphertexts are in the arena */
    const uint8_t *arena; /* the arena mapping (MAP_SHARED, PROT_READ) or NULL */
    size_t arena_map;     /* its length in bytes */
    uint64_t graph_gen;   /* generation in the graph file's name */
    uint64_t graph_bytes; /* its length */
    uint8_t graph_digest[32]; /* its BLAKE2b-256 */
    uint64_t nodes;       /* node count the manifest records */
    uint64_t arena_gen;   /* generation in the arena file's name */
    uint64_t arena_bytes; /* valid arena bytes (nodes * entry_bytes) */
    uint32_t chain_len;   /* deltas applied over the graph file */
    struct store_delta chain[STORE_CHAIN_MAX];
    int dirty;            /* graph changed since the last checkpoint */
    int rewrite;          /* arena to be rewritten whole (after compact) */
    /* Lazy apply (docs/PROTOCOL.md "Lazy apply"): the open attaches the
     * base and checks only each delta's header; the first operation that
     * reads the shard applies its chain (server_ready, under the server's
     * ready_lock).  A pending shard is never changed and keeps its record. */
    int pending;          /* chain not applied yet: the graph is the base's */
    uint32_t chain_done;  /* deltas of the chain applied so far */
    uint64_t pending_deleted; /* deleted nodes after the chain (its last header) */
    int failed;           /* 0, or the code its chain's apply failed with (sticky) */
    char *failed_msg;     /* that failure's reason, naming the file (malloc'd) */
    int fold;             /* the next checkpoint writes a new graph file
                             (mess_server_compact: the chain folds away) */
    /* A pending chain's deltas mapped at the open (NULL: not mapped), read
     * only if the file's name is gone when the chain is applied: another
     * handle's checkpoint folded the chain and unlinked them, and this
     * handle still applies what it opened (unmapped once applied). */
    const uint8_t *chain_map[STORE_CHAIN_MAX];
};

/* Node `node`'s ciphertext (node < hnsw_count(st->graph)). */
static inline const uint8_t *shard_entry(const struct shard_store *st,
                                         size_t entry_bytes, size_t node)
{
    if (node < st->base)
        return st->arena + node * entry_bytes;
    return st->entries + (node - st->base) * entry_bytes;
}

#define SCRATCH_POOL 64

/* Shard searches in flight per worker thread (hnsw_search_many, measured
 * in docs/PERFORMANCE.md "Server"). */
#define SERVER_SEARCH_WIDTH 8
/* The width searches use from now on: 1..HNSW_MANY_MAX, or 0 for the shards
 * one after the other through hnsw_search (the path before interleaving).
 * Not thread-safe: tests and benchmarks set it between searches. */
int server_search_set_width(unsigned width);
unsigned server_search_get_width(void);
/* Entries ahead of the one being copied into a response whose lines are
 * prefetched (0: none); for the benchmark. */
#define SERVER_COPY_AHEAD 4
void server_search_set_copy_ahead(unsigned ahead);
/* Requests of a batch searched together per worker, shard by shard
 * (1..8, default 8; 1: each request alone); for the benchmark. */
int server_search_set_group(unsigned group);
/* Multi-threaded searches on the server's kept workers (1, default) or on
 * threads started for each search (0, as before); for the benchmark. */
void server_search_set_keep_workers(int keep);

struct wal;

struct mess_server {
    mess_params p;
    size_t entry_bytes;
    struct shard_store *shards;
    /* Search scratch (visit marks sized by the shards) kept across queries,
     * so a search allocates and clears nothing proportional to the index. */
    pthread_mutex_t pool_lock;
    struct hnsw_scratch *pool[SCRATCH_POOL];
    size_t npool;
    /* Worker threads of multi-threaded searches, started by the first and
     * kept (under pool_lock); busy while one search uses them. */
    mess_workers *workers;
    int workers_busy;
    long workers_pid;                /* the process that started them: a
                                        forked child has none of them */
    int owned;                       /* an upload has been applied */
    uint8_t owner[MESS_OWNER_BYTES]; /* its client's owner tag */
    /* Directory-backed (server_store.c): NULL for a server in memory. */
    char *dir;
    uint64_t generation;             /* the MANIFEST's */
    uint32_t held;                   /* shards held (p.shards unless a subset) */
    int owner_dirty;                 /* owner set since the last checkpoint */
    struct wal *wal;                 /* its write-ahead log (wal.h; read-only
                                        for a subset or verify) or NULL */
    int replaying;                   /* applying the log's records: not logged again */
    int log_foreign;                 /* a subset whose log holds records of other
                                        shards: it may not checkpoint (fold) it */
    int claimed, claim_fd;           /* the directory's writer claim (flock on
                                        S/LOCK) and its descriptor */
    /* Guards the lazy apply of the shards' delta chains (server_ready) and
     * `unready`: the shards pending or failed.  A search takes it once. */
    pthread_mutex_t ready_lock;
    uint32_t unready;
};

/* Applies the delta chain of each listed shard (shards NULL / n 0: every
 * shard it holds) that the lazy open left pending, exactly as an eager
 * open would (server_store.c); shards out of range or not held are
 * skipped (the caller refuses them).  One lock when nothing is pending.
 * MESS_OK, or the first failure: a shard whose chain fails (MESS_EFORMAT,
 * MESS_EIO...) keeps failing with that code and mess_server_error names
 * the file; MESS_ENOMEM leaves it pending, resumed at the next call.
 * Safe from many threads (searches on a const server). */
int server_ready(const mess_server *s, const uint32_t *shards, size_t n);

/* 1 if the server holds shard j (every shard, unless opened on a subset). */
static inline int server_holds(const mess_server *s, uint32_t j)
{
    return j < s->p.shards && s->shards[j].graph != NULL;
}

struct mess_query {
    float *q;      /* the clean query (secret: wiped on free) */
    uint32_t dim;
    uint8_t request_id[WIRE_REQUEST_ID_BYTES];
    uint16_t *budgets;
};

/* ---- keys (mess.c) ------------------------------------------------------ */

#define SHARD_KEY_BYTES (sizeof(struct payload_keys) + KEY_BYTES)

static inline const struct payload_keys *aead_key(const mess_client *c, uint32_t j)
{
    return (const struct payload_keys *)(const void *)(c->keys->shard +
                                                       (size_t)j * SHARD_KEY_BYTES);
}

static inline const uint8_t *label_key(const mess_client *c, uint32_t j)
{
    return c->keys->shard + (size_t)j * SHARD_KEY_BYTES + sizeof(struct payload_keys);
}

/* Derives every subkey and the owner tag from keys->master. */
void client_keys_derive(mess_client *c);
/* A client handle with its key block allocated (zeroed), no hash yet. */
int client_alloc(const mess_params *p, mess_client **out);
/* Label of generation `gen` of item id in shard j. */
void client_item_label(const mess_client *c, uint32_t j, uint64_t id,
                       uint32_t gen, uint8_t out[LABEL_BYTES]);
/* The generation map entry of id, or NULL; its current generation. */
struct gen_entry *client_gen_find(const mess_client *c, uint64_t id);
uint32_t client_gen_current(const mess_client *c, uint64_t id);
/* Route(id, M, t): the t shards of item id, out[0..t). */
void client_route(const mess_client *c, uint64_t id, uint32_t *out);
/* The coin stream of (operation, domain, item, shard). */
void client_coins_init(const mess_client *c, struct mess_rng *r, uint64_t op,
                       enum coin_domain d, uint64_t id, uint32_t shard);

static inline struct hnsw_label label_load(const uint8_t *b)
{
    return hnsw_label_of(mess_load_u64(b), mess_load_u64(b + 8));
}

/* ---- server handle (mess.c) ---------------------------------------------- */

/* The graph parameters of shard `shard` (its level seed is public). */
struct hnsw_params server_graph_params(const mess_params *p, uint32_t shard);
/* A server handle; with_graphs: empty graphs (else the loader fills them). */
int server_alloc(const mess_params *p, int with_graphs, mess_server **out);

/* ---- the client's operations, called under the handle's lock (mess.c) ---- */

/* The encoders write into a struct mess_wr the caller initialised
 * (growable, or over a caller-owned buffer: the _into calls) and frees on
 * failure. */
/* client_update.c */
int client_upload(mess_client *c, const uint64_t *ids, const float *vectors,
                  size_t n, unsigned threads, struct mess_wr *w);
int client_delete(mess_client *c, const uint64_t *ids, size_t n,
                  struct mess_wr *w);
/* client_request.c: the request with the coins of operation `op`, leaving
 * the client unchanged (a batch builds many at once under one write lock);
 * client_request uses the next operation and advances the counter. */
int client_request_build(const mess_client *c, const float *qv, size_t pool,
                         uint64_t op, mess_query **q_out, struct mess_wr *w);
int client_request(mess_client *c, const float *qv, size_t pool,
                   mess_query **q_out, struct mess_wr *w);
/* client_finish.c; workers: threads opening entries (0: the handle's
 * set_threads) */
int client_finish(const mess_client *c, const mess_query *q,
                  const uint8_t *resp, size_t resp_len, size_t k,
                  uint64_t *ids, float *dists, size_t *n_out,
                  mess_finish_stats *stats, unsigned workers);
/* 1 (default): peeks and openings batched in the lane core
 * (payload_peek_ids, payload_open_peeked_many); 0: one libsodium call per
 * block, the path before them, kept for benchmarks that time both in one
 * process.  Same results either way.  Process-wide, not thread-safe. */
void client_finish_set_batched(int on);
/* 1 (default): the batched path runs the SIMD cores the CPU has (the
 * AVX-512 ChaCha20 lanes, Poly1305 in AVX-512 or AVX2 lanes, AVX
 * distances); 0: the portable lane core, libsodium's Poly1305 and the
 * portable distances, the fallback of a CPU without them, so tests run
 * both on one machine.  Same results either way.  Process-wide
 * (chacha_lanes_force, poly1305_lanes_force, metric_set_simd), not
 * thread-safe. */
void client_finish_set_simd(int on);
/* state.c.  client_save_as with create 1 never replaces a file at path
 * (statefile_create: MESS_EEXIST); client_save replaces it. */
int client_save(const mess_client *c, const char *path,
                const char *passphrase, size_t passphrase_len);
int client_save_as(const mess_client *c, const char *path,
                   const char *passphrase, size_t passphrase_len, int create);

#endif
