/*
 * server_store.h - the server's working form: a directory (PLAN D14,
 * docs/PROTOCOL.md "Server directory").  Internal header.
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
#ifndef MESS_SERVER_STORE_H
#define MESS_SERVER_STORE_H

#include "protocol.h"

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

/* How store_open treats the shards' delta chains (docs/PROTOCOL.md "Lazy
 * apply"): LAZY (mess_server_open) checks each delta's length and header
 * and leaves the chain to the first operation that reads the shard
 * (server_ready); EAGER applies every chain (each delta read and checked
 * whole); VERIFY (mess_server_verify) also checks every graph file's
 * digest and runs hnsw_check, and opens the log read-only. */
enum store_mode { STORE_LAZY = 0, STORE_VERIFY = 1, STORE_EAGER = 2 };

/* mess_server_open with a reason in msg on failure; mode: enum store_mode. */
int store_open(const char *dir, const mess_params *expect, const uint32_t *shards,
               size_t nshards, int mode, mess_server **out, char *msg,
               size_t msg_cap);

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

/* ---- for the server's open and checkpoint (src/server) -------------------- */

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
/* The page-cache advice (mess_server_set_advice) on an arena mapping. */
void store_arena_advise(void *m, size_t len);

/* The writer claim (docs/PROTOCOL.md "One writer at a time"): of a whole
 * server before its first change (the directory must still be the one it
 * opened: MESS_ESTATE with errno ESTALE otherwise), or of a subset server
 * for its checkpoint at the directory's generation gen (the log must hold
 * no record of it).  MESS_ESTATE with errno EBUSY when another handle
 * holds the claim. */
int store_claim_log(mess_server *s);
int store_claim_subset(mess_server *s, uint64_t gen);

/* ---- the upper half (src/server/server_open.c) ---------------------------- */

/* Opens S/wal for the server's generation, applies its records and keeps
 * it as the server's log (writable, or read-only for a verification). */
int store_open_log(mess_server *s, int writable, char *msg, size_t cap);

#endif
