/*
 * store.h - the store's internal header: the server handle's data the
 * store manages (struct mess_server, each shard's graph, ciphertexts and
 * files, the lazy apply) and the server's working form, a directory
 * (PLAN D14, docs/PROTOCOL.md "Server directory"), whose lower half is
 * src/store/server_store.c.  Internal: not installed; it never includes
 * the client's header (the server never sees the client's keys).
 *
 *   S/MANIFEST                    generation, parameters, owner tag and,
 *                                 per shard, its two files (below);
 *                                 BLAKE2b-256 checksummed, replaced by
 *                                 MANIFEST.tmp + fsync + rename + fsync(S)
 *   S/shard-JJJJ-GGGGGGGG.graph   shard JJJJ's HNSW graph, written at
 *                                 generation GGGGGGGG
 *   S/shard-JJJJ-GGGGGGGG.arena   shard JJJJ's ciphertexts, node i at
 *                                 i * entry_bytes; appended to between
 *                                 rewrites, mapped read-only
 *   S/shard-JJJJ-GGGGGGGG.delta   what checkpoint GGGGGGGG changed in
 *                                 shard JJJJ's graph (hnsw_write_delta);
 *                                 the MANIFEST names each shard's chain,
 *                                 applied in order by the first operation
 *                                 that reads the shard (server_ready)
 *
 * Opening costs O(shards) system calls: the arena is mapped, never read
 * whole; every length the manifest gives is checked against the file.
 * Uploads and deletes change the handle in memory (new ciphertexts in a
 * heap tail) until mess_server_checkpoint writes them.
 */
#ifndef MESS_STORE_H
#define MESS_STORE_H

#include <pthread.h>

#include "hnsw_bin.h"
#include "internal.h"
#include "wire.h"

/* One delta of a shard's chain (docs/PROTOCOL.md "Proportional
 * checkpoint"): S/shard-JJJJ-GGGGGGGG.delta, gen = GGGGGGGG. */
#define STORE_CHAIN_MAX 8
struct store_delta {
    uint64_t gen, bytes, nodes; /* nodes: the graph's after it */
    uint8_t digest[32];
};

/* One shard's graph and ciphertexts.  Node i's ciphertext is in the
 * mapped payload arena for i < base (a directory-backed server, read only
 * for the entries a search returns) and in the heap tail `entries` at
 * (i - base) * entry_bytes otherwise (a server in memory has base 0).
 * The file fields belong to the directory's code (server_store.c below,
 * server_open.c and server_checkpoint.c above; docs/PROTOCOL.md, "Server
 * directory"). */
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

/* Search scratches a server keeps for its queries (server_search.c). */
#define SCRATCH_POOL 64

struct wal;

/* How a handle searches: same responses under every setting, only speed
 * differs.  server_alloc sets the defaults; tests and benchmarks change
 * them between searches through the setters taking the handle
 * (server_search_set_width etc., server.h), never while it searches. */
struct server_search_opts {
    /* Shard searches in flight per worker (hnsw_search_many): 1..
     * HNSW_MANY_MAX, default SERVER_SEARCH_WIDTH; 0 searches the shards one
     * after the other with hnsw_search, as before interleaving. */
    unsigned width;
    /* hnsw_search_many's loops (hnsw_bin.h), default {HNSW_MANY_FAST,
     * HNSW_MANY_CLEAR_WORDS}; fast 0 the former loops. */
    struct hnsw_many_opts many;
    /* Entries ahead of the one copied into a response whose lines are
     * prefetched: default SERVER_COPY_AHEAD, 0 none (the copy before it). */
    unsigned copy_ahead;
    /* A copy that finds the returned entries' arena pages uncached asks
     * for all the pages still to copy at once (1, default; server_search.c
     * "Reading the payload"), faults them in one by one (0, as before), or
     * asks for every entry's pages before copying (2). */
    int payload_io;
    /* Requests of a batch searched together per worker, shard by shard:
     * 1..SEARCH_GROUP (server.h), default SEARCH_GROUP; 1 each alone. */
    unsigned group;
    /* Multi-threaded searches on the handle's kept workers (1, default) or
     * on threads started for each search (0, as before). */
    int keep_workers;
    /* mess_server_search_batch shard by shard over windows of up to this
     * many requests (server_search.c "Throughput mode"): every request of
     * a window searched in one shard's graph before the next shard;
     * 0 searches the batch in groups (`group` above), as before. */
    unsigned by_shard;
    /* The graphs' code layout (mess_server_set_layout): MESS_LAYOUT_CODES
     * builds one on every held shard's graph (hnsw_layout_build), which
     * the index keeps up and a checkpoint's new mapping is given again;
     * MESS_LAYOUT_DEFAULT (default) none. */
    int layout;
};

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
    /* Directory-backed (server_store.c, server_open.c, server_checkpoint.c):
     * NULL for a server in memory. */
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
    struct server_search_opts search; /* how it searches (above) */
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

/* The graph parameters of shard `shard` (its level seed is public). */
struct hnsw_params server_graph_params(const mess_params *p, uint32_t shard);

#define STORE_MAGIC "MESSSMAN"
#define STORE_VERSION 2
#define STORE_HEADER_BYTES 112
#define STORE_SHARD_BYTES 80 /* a record without deltas */
#define STORE_DELTA_BYTES 56 /* each delta of its chain */
/* The fold rule: a checkpoint writes a shard's graph file anew instead of
 * a delta when its chain has STORE_CHAIN_MAX deltas or the chain's bytes
 * with the new delta would pass NUM/DEN of the graph file's. */
#define STORE_FOLD_NUM 1
#define STORE_FOLD_DEN 2
#define STORE_DIGEST_BYTES 32
#define STORE_FLAG_OWNED 1u

/* One shard's record in the MANIFEST. */
struct store_shard {
    uint64_t graph_gen, graph_bytes;
    uint8_t graph_digest[STORE_DIGEST_BYTES];
    uint64_t nodes, arena_gen, arena_bytes;
    uint32_t chain_len;   /* 0..STORE_CHAIN_MAX deltas over the graph file */
    struct store_delta chain[STORE_CHAIN_MAX];
};

struct store_manifest {
    uint64_t generation;
    mess_params p;
    int owned;
    uint8_t owner[MESS_OWNER_BYTES];
    struct store_shard *shard; /* p.shards records, malloc'd */
};

/* Parses and checks a MANIFEST's bytes (hostile input): magic, version
 * (MESS_EVERSION), checksum, parameters, every per-shard field's range.
 * msg (may be NULL) gets the reason of a failure.  On MESS_OK free
 * m->shard with free(). */
int store_manifest_parse(const uint8_t *buf, size_t len, struct store_manifest *m,
                         char *msg, size_t msg_cap);

/* Releases a shard's arena mapping (nothing if none). */
void store_unmap_arena(struct shard_store *st);
/* Frees a shard's graph, then the mapping it was attached to. */
void store_free_graph(struct shard_store *st);

/* How store_open (server_open.c) and store_load_shard treat the shards'
 * delta chains (docs/PROTOCOL.md "Lazy apply"): LAZY (mess_server_open)
 * checks each delta's length and header and leaves the chain to the
 * first operation that reads the shard (server_ready); EAGER applies
 * every chain (each delta read and checked whole); VERIFY
 * (mess_server_verify) also checks every graph file's digest and runs
 * hnsw_check, and opens the log read-only. */
enum store_mode { STORE_LAZY = 0, STORE_VERIFY = 1, STORE_EAGER = 2 };

/* ---- hook points of the write-ahead log (D16, wal.c) -------------------
 * store_log: called by mess_server_apply_upload/_delete after the buffer
 * is validated and before anything changes; MESS_OK for a server in
 * memory.  Today a directory-backed server's applies are in memory until
 * the next checkpoint (this returns MESS_OK); the log makes them durable
 * when it returns.  The replay is at the end of store_open (after the
 * shards are loaded, server_open.c) and the log's restart right after the
 * MANIFEST rename in mess_server_checkpoint (server_checkpoint.c). */
int store_log(mess_server *s, enum wire_kind kind, const uint8_t *buf, size_t len);
/* The same for a compaction (mess_server_compact, once its new shards
 * are built and before the handle takes them).  A subset server logs
 * nothing (its updates are durable at its checkpoint). */
int store_log_compact(mess_server *s);

/* ---- for the server's open, checkpoint and extract (src/server) ------------
 * All n bytes of p written to fd (EINTR retried): MESS_OK or MESS_EIO. */
int store_write_all(int fd, const uint8_t *p, size_t n);
/* The shard list of an open or an extract checked against count shards
 * and marked in want (count bytes, zeroed by the caller): MESS_OK, or
 * MESS_EINVAL with the reason in msg (out of range, listed twice). */
int store_shard_set(const uint32_t *shards, size_t n, uint32_t count, uint8_t *want,
                    char *msg, size_t cap);
/* The MANIFEST of directory dir read and checked (as an open does; msg
 * gets the reason); free m->shard on MESS_OK. */
int store_read_manifest(const char *dir, struct store_manifest *m, char *msg, size_t cap);
/* "DIR/NAME", or "DIR/shard-JJJJ-GGGGGGGG.EXT" when ext != NULL; malloc'd. */
char *store_file_path(const char *dir, const char *name, uint32_t shard, uint64_t gen,
                      const char *ext);
/* A MANIFEST of generation gen for s's parameters and owner with the
 * per-shard records rec (p.shards of them), appended to w. */
void store_encode_manifest(const mess_server *s, uint64_t gen, const struct store_shard *rec,
                           struct mess_wr *w);

/* Gives up the directory's writer claim (mess_server_free). */
void store_release_claim(mess_server *s);

/* Server directories are little-endian on disk and mapped as they are. */
static inline int host_little_endian(void)
{
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

/* Loads shard j of s (its manifest record e): graph and arena mapping;
 * mode: enum store_mode (STORE_LAZY leaves a chain to server_ready). */
int store_load_shard(mess_server *s, uint32_t j, const struct store_shard *e,
                     int mode, char *msg, size_t cap);
/* Copies MANIFEST record e into the shard's file fields. */
void store_take_record(struct shard_store *st, const struct store_shard *e);

/* A new file with `data` (two pieces), fsync'd; an old file of that name
 * (a checkpoint that crashed before its MANIFEST) is replaced. */
int store_write_file(const char *path, const uint8_t *a, size_t alen,
                     const uint8_t *b, size_t blen);
/* Writes graph g to a new file at path (fsync'd); its length and digest. */
int store_graph_write(const struct hnsw *g, const char *path, uint64_t *bytes,
                      uint8_t digest[STORE_DIGEST_BYTES]);
/* Writes shard j's delta since its last checkpoint (hnsw_track) to a new
 * file at path, fsync'd; d gets its generation, length and digest. */
int store_delta_write(const struct shard_store *st, uint32_t j, uint64_t gen,
                      const char *path, struct store_delta *d);
/* Maps the graph file at path (exactly `want` bytes), attaches shard j's
 * graph to it and applies its delta chain (e: the manifest record, NULL
 * for none or for a chain left to server_ready; dir: where the deltas
 * are); full: also the base's digest and hnsw_check of the result.  The
 * caller starts the graph's change record (hnsw_track). */
int store_graph_map(const mess_params *p, uint32_t j, const char *path, uint64_t want,
                    const uint8_t *digest, const char *dir, const struct store_shard *e,
                    int full, struct hnsw **g, void **map, size_t *map_len, char *msg,
                    size_t cap);
/* With MESS_ADVICE_GRAPH_WILLNEED (in the default), has the kernel read
 * the held shards' graph files in, on a detached thread, after the open
 * (server_store.c, "graphs read in at open"); all of them when they are
 * at most half of physical memory, else the upper layers' sections only.
 * Advice: nothing fails for it. */
void store_graphs_readin(const mess_server *s);
/* The page-cache advice (mess_server_set_advice) on an arena mapping. */
void store_arena_advise(void *m, size_t len);
/* Whether the pages holding node `node`'s ciphertext in st's mapped
 * arena are in the page cache (mincore, src/store/arena_io.c): 1 yes, 0
 * no, -1 unknown (no mincore on this system, or it failed). */
int store_entry_cached(const struct shard_store *st, size_t entry_bytes, size_t node);
/* Asks the kernel to read, in the background, the pages holding node
 * `node`'s ciphertext in shard st's mapped arena (node < st->base):
 * posix_madvise WILLNEED of those pages only, which submits their reads
 * and returns (src/store/arena_io.c, docs/PROTOCOL.md "Reading the
 * payload"). */
void store_entry_willneed(const struct shard_store *st, size_t entry_bytes, size_t node);
/* Around a read of a whole mapped arena (export, compact, a view of every
 * entry): sweep 1 lets the kernel read ahead as it would without advice,
 * sweep 0 puts the handle's advice back (random access: a fault reads its
 * own page only). */
void store_arena_sweep(const struct shard_store *st, int sweep);

/* The writer claim (docs/PROTOCOL.md "One writer at a time"): of a whole
 * server before its first change (the directory must still be the one it
 * opened: MESS_ESTATE with errno ESTALE otherwise), or of a subset server
 * for its checkpoint at the directory's generation gen (the log must hold
 * no record of it).  MESS_EBUSY (errno EBUSY) when another handle holds
 * the claim. */
int store_claim_log(mess_server *s);
int store_claim_subset(mess_server *s, uint64_t gen);
/* S/LOCK (path) opened for the claim's flock and the checkpoint's fcntl
 * lock, created if missing, never through a symbolic link
 * (atomicfile_open_regular): a descriptor, or -1 with errno. */
int store_open_lock(const char *path);
/* MESS_OK when every shard s holds still has, in the directory's MANIFEST
 * m, the record s last read or wrote for it (graph, chain, arena and node
 * count); else MESS_ESTATE with errno ESTALE and the first such shard in
 * msg: another handle has checkpointed it since (docs/PROTOCOL.md "One
 * writer per shard"), and a checkpoint of s would name files it removed. */
int store_held_current(const mess_server *s, const struct store_manifest *m, char *msg,
                       size_t cap);
/* Why a directory's file that is a symbolic link is refused. */
#define STORE_LINK_REFUSED "a symbolic link (a server directory's files are never followed)"

#endif
