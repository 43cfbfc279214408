/*
 * client.h - the client's internal header: the client handle (struct
 * mess_client), its keys, the generation map, the key helpers, the shared
 * machinery of client_core.c and the client operations.  Internal: not
 * installed, and never included by the server or the store (src/server,
 * src/store), which must not see the client's keys.
 *
 * client_core.c is the client's machinery (keys, labels, routing, coins,
 * locking); each operation lives beside its public entry points:
 * client_update.c (insert and delete messages), client_request.c,
 * client_finish.c and client_state.c (the client file's body).
 * docs/ARCHITECTURE.md maps the paper onto these files.
 */
#ifndef MESS_CLIENT_H
#define MESS_CLIENT_H

#include <pthread.h>

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
    int finish_batched;       /* 1 (default): finish's peeks, openings and
                                 distances batched; 0: the per-entry path
                                 before them (client_finish_set_batched;
                                 not saved) */
    uint8_t owner[MESS_OWNER_BYTES]; /* owner tag (derived, not saved) */
    struct gen_entry *gens;   /* ids ever deleted, ascending by id (saved) */
    size_t ngens;
    /* Changes a server acknowledged, as the caller noted them
     * (mess_client_note_applied; saved from client body version 3): items
     * uploaded, ids deleted.  applied_unknown: loaded from a version 2
     * file, which did not count (notes are then ignored). */
    uint64_t applied_uploads, applied_deletes;
    int applied_unknown;
};

/* A query between its request and its finish (client_request.c). */
struct mess_query {
    float *q;      /* the clean query (secret: wiped on free) */
    uint32_t dim;
    uint8_t request_id[WIRE_REQUEST_ID_BYTES];
    uint16_t *budgets;
};

/* ---- the client's lock and keys (client_core.c) --------------------------- */

/* The handle's lock (mess.h, "Threads"), also taken through a const
 * pointer: for writing around every call that changes the operation
 * counter, the generation map or the settings; for reading around finish
 * and save. */
void client_lock(const mess_client *c);
void client_lock_read(const mess_client *c);
void client_unlock(const mess_client *c);
/* Gives the caller w's buffer in *buf / *len (rc MESS_OK), or frees it
 * (any other rc, which it returns). */
int wr_hand_over(struct mess_wr *w, int rc, uint8_t **buf, size_t *len);

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

/* ---- the client's operations, called under the handle's lock by their
 * entry points (each in the operation's file) -------------------------------- */

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
/* 1 (default): the handle's finishes batch peeks and openings in the lane
 * core (payload_peek_ids, payload_open_peeked_many); 0: one libsodium call
 * per block, the path before them, kept for benchmarks that time both in
 * one process.  Same results either way.  Per handle, under its lock. */
void client_finish_set_batched(mess_client *c, int on);
/* 1 (default): the batched path runs the SIMD cores the CPU has (the
 * AVX-512 ChaCha20 lanes, Poly1305 in AVX-512 or AVX2 lanes, AVX
 * distances, F16C half to float); 0: the portable lane core, libsodium's
 * Poly1305, the portable distances and half conversion, the fallback of a
 * CPU without them, so tests run both on one machine.  Same results
 * either way.  Process-wide, the CPU-dispatch table's overrides
 * (SIMD_CHACHA, SIMD_POLY1305, SIMD_METRIC, SIMD_F16 in
 * src/common/simd.h), not thread-safe. */
void client_finish_set_simd(int on);

#endif
