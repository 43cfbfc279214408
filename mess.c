/*
 * mess.c - the MESS protocol (paper section 4, Figure 6): client and server
 * state, insert, delete, query, compaction and the two state files.
 *
 * Key schedule (libsodium crypto_kdf from the 32-byte master key):
 *   context "MESSpenc" id j : payload encryption key of shard j (payload.h)
 *   context "MESSpmac" id j : payload hash key of shard j
 *   context "MESSpprf" id j : payload PRF key of shard j
 *   context "MESSlabl" id j : label PRF key of shard j
 *   context "MESSrout" id 0 : Route PRF key
 *   context "MESSmemo" id 0 : PRR key: the permanent report is a PRF of the
 *                             query under it (lshrr.h)
 *   context "MESScoin" id 0 : randomized-response seed (deterministic mode)
 *   context "MESShash" id 0 : IsoHash training seed
 *   context "MESSownr" id 0 : owner key; the owner tag (mess.h) is
 *                             BLAKE2b-128 keyed by it of a fixed string
 *   context "MESSstor" id 0 : storage-coin PRF key (both modes)
 *
 * Generations: the client keeps id -> (generation, deleted) for every id it
 * ever deleted (sorted array, saved in the client file); every other id is
 * at generation 0.  The label of an item in shard j is BLAKE2b-128(label key
 * of j; id || generation) and its payload binds the generation, so an id
 * deleted and inserted again is stored under labels and ciphertexts that
 * the server cannot link to the old ones.  Storage coins are a PRF of
 * (shard, id) under the storage key: an item's perturbation is the same in
 * every generation (docs/PRIVACY.md, "What the server learns").
 */
#include <math.h>
#include <pthread.h>
#include <sodium.h>

#include "hnsw_bin.h"
#include "isohash.h"
#include "lshrr.h"
#include "parallel.h"
#include "payload.h"
#include "rng.h"
#include "statefile.h"
#include "wire.h"

#define KEY_BYTES 32
#define CLIENT_BODY_VERSION 2
#define SERVER_BODY_VERSION 3
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

/* The lock of a client handle, also taken through a const pointer: the
 * state it guards is not the handle's logical value. */
static pthread_rwlock_t *client_rwlock(const mess_client *c)
{
    return &((mess_client *)(uintptr_t)c)->lock;
}

static void client_lock(const mess_client *c)
{
    pthread_rwlock_wrlock(client_rwlock(c));
}

static void client_lock_read(const mess_client *c)
{
    pthread_rwlock_rdlock(client_rwlock(c));
}

static void client_unlock(const mess_client *c)
{
    pthread_rwlock_unlock(client_rwlock(c));
}

struct shard_store {
    struct hnsw *graph;
    uint8_t *entries; /* node i's ciphertext at i * entry_bytes */
    size_t cap;       /* entries allocated (in entries) */
};

#define SCRATCH_POOL 64

struct mess_server {
    mess_params p;
    size_t entry_bytes;
    struct shard_store *shards;
    /* Search scratch (visit marks sized by the shards) kept across queries,
     * so a search allocates and clears nothing proportional to the index. */
    pthread_mutex_t pool_lock;
    struct hnsw_scratch *pool[SCRATCH_POOL];
    size_t npool;
    int owned;                       /* an upload has been applied */
    uint8_t owner[MESS_OWNER_BYTES]; /* its client's owner tag */
};

struct mess_query {
    float *q;      /* the clean query (secret: wiped on free) */
    uint32_t dim;
    uint8_t request_id[WIRE_REQUEST_ID_BYTES];
    uint16_t *budgets;
};

/* ------------------------------------------------------------------------
 * Keys
 * ---------------------------------------------------------------------- */

#define SHARD_KEY_BYTES (sizeof(struct payload_keys) + KEY_BYTES)

static const struct payload_keys *aead_key(const mess_client *c, uint32_t j)
{
    return (const struct payload_keys *)(const void *)(c->keys->shard +
                                                       (size_t)j * SHARD_KEY_BYTES);
}

static const uint8_t *label_key(const mess_client *c, uint32_t j)
{
    return c->keys->shard + (size_t)j * SHARD_KEY_BYTES + sizeof(struct payload_keys);
}

/* Allocates the key block and derives every subkey from keys->master,
 * which the caller fills first through the returned pointer. */
static int keys_alloc(mess_client *c)
{
    c->keys_len = sizeof(struct client_keys) + (size_t)c->p.shards * SHARD_KEY_BYTES;
    c->keys = (struct client_keys *)sodium_malloc(c->keys_len);
    if (!c->keys)
        return MESS_ENOMEM;
    sodium_memzero(c->keys, c->keys_len);
    return MESS_OK;
}

/* The owner tag: a PRF (keyed BLAKE2b) of a fixed string under a subkey
 * used for nothing else, so it reveals nothing about any other key. */
static void owner_tag(const uint8_t *master, uint8_t tag[MESS_OWNER_BYTES])
{
    static const uint8_t domain[] = "libmess owner tag v1";
    uint8_t key[KEY_BYTES];
    crypto_kdf_derive_from_key(key, sizeof key, 0, "MESSownr", master);
    crypto_generichash(tag, MESS_OWNER_BYTES, domain, sizeof domain, key,
                       sizeof key);
    sodium_memzero(key, sizeof key);
}

static void keys_derive(mess_client *c)
{
    struct client_keys *k = c->keys;
    uint32_t j;
    owner_tag(k->master, c->owner);
    crypto_kdf_derive_from_key(k->route, KEY_BYTES, 0, "MESSrout", k->master);
    crypto_kdf_derive_from_key(k->memo, KEY_BYTES, 0, "MESSmemo", k->master);
    crypto_kdf_derive_from_key(k->coin, KEY_BYTES, 0, "MESScoin", k->master);
    crypto_kdf_derive_from_key(k->hash, KEY_BYTES, 0, "MESShash", k->master);
    crypto_kdf_derive_from_key(k->store, KEY_BYTES, 0, "MESSstor", k->master);
    for (j = 0; j < c->p.shards; j++) {
        uint8_t *sk = k->shard + (size_t)j * SHARD_KEY_BYTES;
        crypto_kdf_derive_from_key(sk, KEY_BYTES, j, "MESSpenc", k->master);
        crypto_kdf_derive_from_key(sk + KEY_BYTES, KEY_BYTES, j, "MESSpmac", k->master);
        crypto_kdf_derive_from_key(sk + 2 * KEY_BYTES, KEY_BYTES, j, "MESSpprf", k->master);
        crypto_kdf_derive_from_key(sk + sizeof(struct payload_keys), KEY_BYTES, j,
                                   "MESSlabl", k->master);
    }
}

/* Label of generation `gen` of item id in shard j: BLAKE2b-128 under the
 * shard's label key of id || gen (u64 | u32, little-endian), so labels of
 * one item are unrelated across shards and across generations, and the
 * client needs no table to delete an item it never deleted before (paper
 * section 4.1).  128 bits: at the 2^32-node limit of a shard the chance of
 * any two labels colliding is below 2^-64. */
static void item_label(const mess_client *c, uint32_t j, uint64_t id,
                       uint32_t gen, uint8_t out[LABEL_BYTES])
{
    uint8_t msg[12];
    mess_store_u64(msg, id);
    mess_store_u32(msg + 8, gen);
    crypto_generichash(out, LABEL_BYTES, msg, sizeof msg, label_key(c, j),
                       KEY_BYTES);
}

static struct hnsw_label label_load(const uint8_t *b)
{
    return hnsw_label_of(mess_load_u64(b), mess_load_u64(b + 8));
}

/* The generation map entry of id, or NULL (generation 0, never deleted). */
static struct gen_entry *gen_find(const mess_client *c, uint64_t id)
{
    size_t lo = 0, hi = c->ngens;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->gens[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < c->ngens && c->gens[lo].id == id ? &c->gens[lo] : NULL;
}

/* The generation whose labels and payloads name id's stored records. */
static uint32_t gen_current(const mess_client *c, uint64_t id)
{
    const struct gen_entry *e = gen_find(c, id);
    return e ? e->gen : 0;
}

/* Route(id, M, t): the first t entries of a permutation of [M] drawn by
 * Fisher-Yates from a ChaCha20 stream keyed by the route key with the id as
 * nonce: a keyed PRF, independent of the data (section 4.1).  Rejection
 * sampling keeps every permutation equally likely. */
static void route(const mess_client *c, uint64_t id, uint32_t *out)
{
    uint32_t perm[MESS_MAX_SHARDS], M = c->p.shards, t = c->p.per_item, i;
    uint8_t nonce[crypto_stream_chacha20_NONCEBYTES], block[256];
    uint64_t counter = 0;
    size_t used = sizeof block;

    mess_store_u64(nonce, id);
    for (i = 0; i < M; i++)
        perm[i] = i;
    for (i = 0; i < t; i++) {
        uint32_t range = M - i, limit = UINT32_MAX - UINT32_MAX % range, r;
        do {
            if (used == sizeof block) {
                crypto_stream_chacha20_xor_ic(block, (const uint8_t *)memset(block, 0, sizeof block),
                                              sizeof block, nonce, counter,
                                              c->keys->route);
                counter += sizeof block / 64;
                used = 0;
            }
            r = mess_load_u32(block + used);
            used += 4;
        } while (r >= limit);
        r = i + r % range;
        {
            uint32_t tmp = perm[i];
            perm[i] = perm[r];
            perm[r] = tmp;
        }
        out[i] = perm[i];
    }
}

/* Stream id of a deterministic-mode coin stream: unique per (operation,
 * domain, item, shard). */
static uint64_t coin_stream(uint64_t op, enum coin_domain d, uint64_t id,
                            uint32_t shard)
{
    uint8_t msg[24], out[8];
    mess_store_u64(msg, op);
    mess_store_u32(msg + 8, (uint32_t)d);
    mess_store_u32(msg + 12, shard);
    mess_store_u64(msg + 16, id);
    crypto_generichash(out, sizeof out, msg, sizeof msg, NULL, 0);
    return mess_load_u64(out);
}

static void coins_init(const mess_client *c, struct mess_rng *r, uint64_t op,
                       enum coin_domain d, uint64_t id, uint32_t shard)
{
    mess_rng_init(r, c->deterministic ? c->keys->coin : NULL,
                  coin_stream(op, d, id, shard));
}

/* Storage coins of shard j: a ChaCha20 stream keyed by
 * BLAKE2b-256(storage key; "MESSstor" | u32 j) with the id as the nonce, in
 * both modes.  A PRF of (shard, id): every upload of an id draws the same
 * two masks, so re-inserting or updating an item hands the server no fresh
 * randomized-response sample to average (issue 12 item 1). */
static void store_shard_key(const mess_client *c, uint32_t j,
                            uint8_t key[KEY_BYTES])
{
    uint8_t msg[12] = {'M', 'E', 'S', 'S', 's', 't', 'o', 'r'};
    mess_store_u32(msg + 8, j);
    crypto_generichash(key, KEY_BYTES, msg, sizeof msg, c->keys->store,
                       KEY_BYTES);
}

/* Perturbs one clean code with the (shard, id) coin masks: F0 (0 -> 1) and
 * F1 (1 -> 0), each bit set with probability p_D, drawn in that order from
 * the record's stream; perturbed = code ^ ((~code & F0) | (code & F1)).
 * Every bit still flips with probability p_D independently, and an update
 * flips each unchanged clean bit exactly as the previous version did. */
static int store_perturb(const mess_params *p, const uint8_t shard_key[KEY_BYTES],
                         uint64_t id, uint64_t *code)
{
    uint64_t f0[MESS_MAX_BITS / 64], f1[MESS_MAX_BITS / 64];
    uint32_t words = params_words(p), w;
    struct mess_rng rng;
    int rc;
    memset(f0, 0, (size_t)words * 8);
    memset(f1, 0, (size_t)words * 8);
    rc = mess_rng_init(&rng, shard_key, id);
    if (rc == MESS_OK)
        rc = lshrr_flip(&rng, f0, p->kappa, p->p_store);
    if (rc == MESS_OK)
        rc = lshrr_flip(&rng, f1, p->kappa, p->p_store);
    mess_rng_wipe(&rng);
    if (rc == MESS_OK)
        for (w = 0; w < words; w++)
            code[w] ^= (~code[w] & f0[w]) | (code[w] & f1[w]);
    sodium_memzero(f0, sizeof f0);
    sodium_memzero(f1, sizeof f1);
    return rc;
}

/* ------------------------------------------------------------------------
 * Client lifecycle
 * ---------------------------------------------------------------------- */

void mess_client_free(mess_client *c)
{
    if (!c)
        return;
    pthread_rwlock_destroy(&c->lock);
    if (c->keys)
        sodium_free(c->keys); /* wipes */
    isohash_free(c->hash);
    free(c->gens);
    free(c);
}

int mess_client_params(const mess_client *c, mess_params *out)
{
    if (!c || !out)
        return MESS_EINVAL;
    *out = c->p;
    return MESS_OK;
}

int mess_client_is_deterministic(const mess_client *c)
{
    return c ? c->deterministic : 0;
}

int mess_client_owner(const mess_client *c, uint8_t tag[MESS_OWNER_BYTES])
{
    if (!c || !tag)
        return MESS_EINVAL;
    memcpy(tag, c->owner, MESS_OWNER_BYTES);
    return MESS_OK;
}

int mess_client_set_threads(mess_client *c, unsigned threads)
{
    if (!c)
        return MESS_EINVAL;
    client_lock(c);
    c->threads = threads ? threads : 1;
    client_unlock(c);
    return MESS_OK;
}

int mess_client_set_verify_all(mess_client *c, int on)
{
    if (!c)
        return MESS_EINVAL;
    client_lock(c);
    c->verify_all = on != 0;
    client_unlock(c);
    return MESS_OK;
}

static int client_alloc(const mess_params *p, mess_client **out)
{
    mess_client *c;
    int rc;
    if (sodium_init() < 0)
        return MESS_ECRYPTO;
    rc = mess_params_check(p);
    if (rc != MESS_OK)
        return rc;
    c = (mess_client *)calloc(1, sizeof *c);
    if (!c)
        return MESS_ENOMEM;
    if (pthread_rwlock_init(&c->lock, NULL) != 0) {
        free(c);
        return MESS_ENOMEM;
    }
    c->p = *p;
    c->threads = 1;
    rc = keys_alloc(c);
    if (rc != MESS_OK) {
        pthread_rwlock_destroy(&c->lock);
        free(c);
        return rc;
    }
    *out = c;
    return MESS_OK;
}

int mess_client_new(const mess_params *p, const float *train, size_t n,
                    const uint8_t *seed, unsigned threads, mess_client **out)
{
    struct isohash_params hp;
    mess_client *c;
    int rc;

    if (!p || !train || n == 0 || !out)
        return MESS_EINVAL;
    *out = NULL;
    rc = client_alloc(p, &c);
    if (rc != MESS_OK)
        return rc;
    if (seed) {
        static const uint8_t domain[] = "libmess deterministic master key";
        crypto_generichash(c->keys->master, KEY_BYTES, domain, sizeof domain,
                           seed, 32);
        c->deterministic = 1;
    } else {
        randombytes_buf(c->keys->master, KEY_BYTES);
    }
    keys_derive(c);

    memset(&hp, 0, sizeof hp);
    hp.dim = p->dim;
    hp.kappa = p->kappa;
    hp.shards = p->shards;
    hp.sample = p->train_sample;
    hp.tol = 0.0;     /* library default */
    hp.max_iter = 0;  /* library default */
    hp.threads = threads;
    memcpy(hp.seed, c->keys->hash, 32);
    rc = isohash_train(&hp, train, n, &c->hash);
    sodium_memzero(hp.seed, sizeof hp.seed);
    if (rc != MESS_OK) {
        mess_client_free(c);
        return rc;
    }
    *out = c;
    return MESS_OK;
}

/* ------------------------------------------------------------------------
 * Upload
 * ---------------------------------------------------------------------- */

/* Records of one shard, sorted by label: upload order then carries no
 * linkage across shards. */
struct label_rec {
    uint8_t label[LABEL_BYTES];
    size_t item;
};

static int label_rec_cmp(const void *a, const void *b)
{
    const struct label_rec *x = (const struct label_rec *)a;
    const struct label_rec *y = (const struct label_rec *)b;
    return memcmp(x->label, y->label, LABEL_BYTES);
}

struct shard_upload {
    mess_client *c;
    const uint64_t *ids;
    const uint32_t *gens;     /* per item: the generation it is stored at */
    const float *vectors;
    struct label_rec **recs;  /* per shard, sorted by label */
    size_t *counts;           /* per shard */
    size_t *offset;           /* per shard: first record index in output */
    uint8_t *out;
    size_t rec_bytes;
};

/* Encodes every record of shard j: hash the shard's items in one call,
 * perturb each code with its (shard, id) coins (p_D), seal each payload
 * under (shard, generation). */
static int upload_shard(void *ctx, size_t jj, unsigned worker)
{
    struct shard_upload *u = (struct shard_upload *)ctx;
    mess_client *c = u->c;
    const mess_params *p = &c->p;
    uint32_t j = (uint32_t)jj, words = params_words(p);
    size_t n = u->counts[j], i, code_bytes = wire_code_bytes(p);
    float *x = NULL;
    uint64_t *codes = NULL;
    uint8_t *plain = NULL, skey[KEY_BYTES];
    int rc = MESS_OK;
    (void)worker;

    if (n == 0)
        return MESS_OK;
    x = (float *)mess_malloc_array(n, (size_t)p->dim * sizeof(float));
    codes = (uint64_t *)mess_malloc_array(n, (size_t)words * 8);
    plain = (uint8_t *)malloc(payload_plain_bytes(p));
    if (!x || !codes || !plain) {
        rc = MESS_ENOMEM;
        goto done;
    }
    for (i = 0; i < n; i++)
        memcpy(x + i * p->dim, u->vectors + u->recs[j][i].item * p->dim,
               (size_t)p->dim * sizeof(float));
    rc = isohash_hash(c->hash, j, x, n, codes);
    if (rc != MESS_OK)
        goto done;
    store_shard_key(c, j, skey);
    for (i = 0; i < n; i++) {
        const struct label_rec *lr = &u->recs[j][i];
        uint8_t *rec = u->out + (u->offset[j] + i) * u->rec_bytes;
        uint64_t *code = codes + i * words;

        rc = store_perturb(p, skey, u->ids[lr->item], code);
        if (rc != MESS_OK)
            goto done;
        mess_store_u32(rec, j);
        memcpy(rec + WIRE_LABEL_OFFSET, lr->label, LABEL_BYTES);
        wire_store_code(rec + WIRE_CODE_OFFSET, words, code);
        payload_seal(p, aead_key(c, j), payload_ctx(j, u->gens[lr->item]),
                     u->ids[lr->item], u->vectors + lr->item * p->dim, plain,
                     rec + WIRE_CODE_OFFSET + code_bytes);
    }
done:
    sodium_memzero(skey, sizeof skey);
    if (x)
        sodium_memzero(x, n * p->dim * sizeof(float));
    if (codes)
        sodium_memzero(codes, n * words * 8);
    free(x);
    free(codes);
    if (plain)
        sodium_memzero(plain, payload_plain_bytes(p));
    free(plain);
    return rc;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* MESS_EINVAL if ids has a repeated value. */
static int ids_distinct(const uint64_t *ids, size_t n)
{
    uint64_t *s;
    size_t i;
    int rc = MESS_OK;
    if (n < 2)
        return MESS_OK;
    s = (uint64_t *)mess_malloc_array(n, sizeof *s);
    if (!s)
        return MESS_ENOMEM;
    memcpy(s, ids, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_u64);
    for (i = 1; i < n; i++)
        if (s[i] == s[i - 1])
            rc = MESS_EINVAL;
    free(s);
    return rc;
}

static int client_upload(mess_client *c, const uint64_t *ids,
                         const float *vectors, size_t n, unsigned threads,
                         uint8_t **buf, size_t *len)
{
    struct shard_upload u;
    struct mess_wr w;
    uint32_t M, t, j, route_buf[MESS_MAX_SHARDS], *gens = NULL;
    size_t i, total, rec_bytes, *fill = NULL;
    uint8_t *body;
    int rc;

    if (!c || (!ids && n) || (!vectors && n) || !buf || !len)
        return MESS_EINVAL;
    *buf = NULL;
    *len = 0;
    if (n > 0 && mess_mul_size(n, c->p.dim, &total) != MESS_OK)
        return MESS_ELIMIT;
    for (i = 0; i < n * (size_t)c->p.dim; i++)
        if (!isfinite(vectors[i]))
            return MESS_EINVAL; /* a NaN would outrank every distance in finish */
    rc = ids_distinct(ids, n);
    if (rc != MESS_OK)
        return rc;
    M = c->p.shards;
    t = c->p.per_item;
    memset(&u, 0, sizeof u);
    u.c = c;
    u.ids = ids;
    u.vectors = vectors;
    rec_bytes = wire_upload_record_bytes(&c->p);
    u.rec_bytes = rec_bytes;
    if (mess_mul_size(n, t, &total) != MESS_OK ||
        mess_mul_size(total, rec_bytes, &total) != MESS_OK)
        return MESS_ELIMIT;
    /* The generation each item is stored at: its current one, or the next
     * one for an id whose current generation was deleted.  The map is only
     * changed once the buffer is complete. */
    gens = (uint32_t *)mess_malloc_array(n ? n : 1, sizeof *gens);
    if (!gens)
        return MESS_ENOMEM;
    for (i = 0; i < n; i++) {
        const struct gen_entry *e = gen_find(c, ids[i]);
        gens[i] = e ? e->gen : 0;
        if (e && e->deleted) {
            if (e->gen == UINT32_MAX) {
                free(gens);
                return MESS_ELIMIT; /* 2^32 - 1 re-insertions of one id */
            }
            gens[i] = e->gen + 1;
        }
    }
    u.gens = gens;

    u.recs = (struct label_rec **)calloc(M, sizeof *u.recs);
    u.counts = (size_t *)calloc(M, sizeof *u.counts);
    u.offset = (size_t *)calloc(M, sizeof *u.offset);
    fill = (size_t *)calloc(M, sizeof *fill);
    if (!u.recs || !u.counts || !u.offset || !fill) {
        rc = MESS_ENOMEM;
        goto done;
    }
    for (i = 0; i < n; i++) {
        route(c, ids[i], route_buf);
        for (j = 0; j < t; j++)
            u.counts[route_buf[j]]++;
    }
    for (j = 0; j < M; j++) {
        u.recs[j] = (struct label_rec *)mess_malloc_array(u.counts[j] ? u.counts[j] : 1,
                                                          sizeof **u.recs);
        if (!u.recs[j]) {
            rc = MESS_ENOMEM;
            goto done;
        }
        if (j > 0)
            u.offset[j] = u.offset[j - 1] + u.counts[j - 1];
    }
    for (i = 0; i < n; i++) {
        route(c, ids[i], route_buf);
        for (j = 0; j < t; j++) {
            uint32_t s = route_buf[j];
            item_label(c, s, ids[i], gens[i], u.recs[s][fill[s]].label);
            u.recs[s][fill[s]].item = i;
            fill[s]++;
        }
    }
    for (j = 0; j < M; j++) {
        qsort(u.recs[j], u.counts[j], sizeof **u.recs, label_rec_cmp);
        for (i = 1; i < u.counts[j]; i++)
            if (memcmp(u.recs[j][i].label, u.recs[j][i - 1].label, LABEL_BYTES) == 0) {
                rc = MESS_ELIMIT; /* a 128-bit label collision: below 2^-64 */
                goto done;
            }
    }

    mess_wr_init(&w);
    wire_header_owned(&w, WIRE_UPLOAD, &c->p, c->owner);
    mess_wr_u64(&w, (uint64_t)(n * t));
    body = mess_wr_reserve(&w, total);
    if (!body) {
        rc = w.err;
        mess_wr_free(&w);
        goto done;
    }
    u.out = body;
    rc = parallel_for(M, threads, upload_shard, &u);
    if (rc != MESS_OK) {
        mess_wr_free(&w);
        goto done;
    }
    *buf = w.p;
    *len = w.len;
    /* committed: the re-inserted ids are live at their new generation */
    for (i = 0; i < n; i++) {
        struct gen_entry *e = gen_find(c, ids[i]);
        if (e && e->deleted) {
            e->gen = gens[i];
            e->deleted = 0;
        }
    }
done:
    free(gens);
    if (u.recs)
        for (j = 0; j < M; j++)
            free(u.recs[j]);
    free(u.recs);
    free(u.counts);
    free(u.offset);
    free(fill);
    return rc;
}

/* ------------------------------------------------------------------------
 * Delete
 * ---------------------------------------------------------------------- */

struct del_rec {
    uint32_t shard;
    uint8_t label[LABEL_BYTES];
};

static int del_rec_cmp(const void *a, const void *b)
{
    const struct del_rec *x = (const struct del_rec *)a;
    const struct del_rec *y = (const struct del_rec *)b;
    if (x->shard != y->shard)
        return x->shard < y->shard ? -1 : 1;
    return memcmp(x->label, y->label, LABEL_BYTES);
}

/* Marks ids[0..n) deleted at their current generation, adding entries for
 * ids never deleted before (generation 0).  All or nothing: MESS_ENOMEM
 * leaves the map as it was. */
static int gen_mark_deleted(mess_client *c, const uint64_t *ids, size_t n)
{
    size_t i, fresh = 0, a, b, k;
    uint64_t *add;
    struct gen_entry *merged;
    for (i = 0; i < n; i++)
        fresh += gen_find(c, ids[i]) == NULL;
    if (fresh > 0) {
        add = (uint64_t *)mess_malloc_array(fresh, sizeof *add);
        merged = (struct gen_entry *)mess_malloc_array(c->ngens + fresh, sizeof *merged);
        if (!add || !merged) {
            free(add);
            free(merged);
            return MESS_ENOMEM;
        }
        for (i = 0, k = 0; i < n; i++)
            if (!gen_find(c, ids[i]))
                add[k++] = ids[i];
        qsort(add, fresh, sizeof *add, cmp_u64);
        for (a = 0, b = 0, k = 0; a < c->ngens || b < fresh; k++) {
            if (b == fresh || (a < c->ngens && c->gens[a].id < add[b])) {
                merged[k] = c->gens[a++];
            } else {
                merged[k].id = add[b++];
                merged[k].gen = 0;
                merged[k].deleted = 0;
            }
        }
        free(add);
        free(c->gens);
        c->gens = merged;
        c->ngens += fresh;
    }
    for (i = 0; i < n; i++)
        gen_find(c, ids[i])->deleted = 1;
    return MESS_OK;
}

static int client_delete(mess_client *c, const uint64_t *ids, size_t n,
                         uint8_t **buf, size_t *len)
{
    struct del_rec *recs;
    struct mess_wr w;
    uint32_t route_buf[MESS_MAX_SHARDS], j, t;
    size_t i, k = 0, total;
    int rc;

    if (!c || (!ids && n) || !buf || !len)
        return MESS_EINVAL;
    *buf = NULL;
    *len = 0;
    rc = ids_distinct(ids, n);
    if (rc != MESS_OK)
        return rc;
    t = c->p.per_item;
    if (mess_mul_size(n, t, &total) != MESS_OK)
        return MESS_ELIMIT;
    recs = (struct del_rec *)mess_malloc_array(total ? total : 1, sizeof *recs);
    if (!recs)
        return MESS_ENOMEM;
    for (i = 0; i < n; i++) {
        uint32_t gen = gen_current(c, ids[i]);
        route(c, ids[i], route_buf);
        for (j = 0; j < t; j++, k++) {
            recs[k].shard = route_buf[j];
            item_label(c, route_buf[j], ids[i], gen, recs[k].label);
        }
    }
    qsort(recs, total, sizeof *recs, del_rec_cmp);
    mess_wr_init(&w);
    wire_header_owned(&w, WIRE_DELETE, &c->p, c->owner);
    mess_wr_u64(&w, (uint64_t)total);
    for (k = 0; k < total; k++) {
        mess_wr_u32(&w, recs[k].shard);
        mess_wr_bytes(&w, recs[k].label, LABEL_BYTES);
    }
    free(recs);
    rc = w.err;
    if (rc == MESS_OK)
        rc = gen_mark_deleted(c, ids, n);
    if (rc != MESS_OK) {
        mess_wr_free(&w);
        return rc;
    }
    *buf = w.p;
    *len = w.len;
    return MESS_OK;
}

void mess_buf_free(uint8_t *buf)
{
    free(buf);
}

/* ------------------------------------------------------------------------
 * Query request and finish (client)
 * ---------------------------------------------------------------------- */

void mess_query_free(mess_query *q)
{
    if (!q)
        return;
    if (q->q)
        sodium_memzero(q->q, (size_t)q->dim * sizeof(float));
    free(q->q);
    free(q->budgets);
    free(q);
}

static int client_request(mess_client *c, const float *qv, size_t pool,
                          mess_query **q_out, uint8_t **req, size_t *req_len)
{
    const mess_params *p;
    mess_query *q = NULL;
    struct mess_rng rng;
    struct mess_wr w;
    uint64_t *clean = NULL, *report = NULL;
    uint8_t *dst;
    uint32_t j, words;
    size_t i;
    int rc;

    if (!c || !qv || !q_out || !req || !req_len || pool == 0)
        return MESS_EINVAL;
    *q_out = NULL;
    *req = NULL;
    *req_len = 0;
    p = &c->p;
    if (pool > (size_t)MESS_MAX_BUDGET * p->shards)
        return MESS_ELIMIT;
    for (i = 0; i < p->dim; i++)
        if (!isfinite(qv[i]))
            return MESS_EINVAL;
    words = params_words(p);
    mess_wr_init(&w);
    q = (mess_query *)calloc(1, sizeof *q);
    clean = (uint64_t *)mess_malloc_array((size_t)p->shards * words, 8);
    report = (uint64_t *)mess_malloc_array((size_t)p->shards * words, 8);
    if (!q || !clean || !report) {
        rc = MESS_ENOMEM;
        goto fail;
    }
    q->q = (float *)mess_malloc_array(p->dim, sizeof(float));
    q->dim = p->dim;
    q->budgets = (uint16_t *)mess_malloc_array(p->shards, sizeof(uint16_t));
    if (!q->q || !q->budgets) {
        rc = MESS_ENOMEM;
        goto fail;
    }
    memcpy(q->q, qv, (size_t)p->dim * sizeof(float));
    /* The whole request is allocated before the op counter changes: a
     * failed call leaves the client as it was. */
    wire_header_owned(&w, WIRE_REQUEST, p, c->owner);
    dst = mess_wr_reserve(&w, sizeof q->request_id + 2 * (size_t)p->shards +
                                  (size_t)p->shards * wire_code_bytes(p));
    if (!dst) {
        rc = w.err;
        goto fail;
    }

    rc = isohash_hash_all(c->hash, qv, clean);
    if (rc != MESS_OK)
        goto fail;
    coins_init(c, &rng, c->op_counter, COIN_QUERY, 0, 0);
    rc = lshrr_query_report(c->keys->memo, &rng, qv, p->dim, p->shards,
                            p->kappa, clean, p->p_prr, p->p_irr, report);
    /* The request id and the rotation of the pool split are fresh coins,
     * independent of the clean query (access-pattern theorem, 5.2.3). */
    mess_rng_bytes(&rng, q->request_id, sizeof q->request_id);
    wire_split_pool(p->shards, pool, mess_rng_u32(&rng) % p->shards, q->budgets);
    mess_rng_wipe(&rng);
    if (rc != MESS_OK)
        goto fail;

    memcpy(dst, q->request_id, sizeof q->request_id);
    dst += sizeof q->request_id;
    for (j = 0; j < p->shards; j++, dst += 2) {
        dst[0] = (uint8_t)q->budgets[j];
        dst[1] = (uint8_t)(q->budgets[j] >> 8);
    }
    for (j = 0; j < p->shards; j++)
        wire_store_code(dst + (size_t)j * wire_code_bytes(p), words,
                        report + (size_t)j * words);
    c->op_counter++;
    sodium_memzero(clean, (size_t)p->shards * words * 8);
    free(clean);
    free(report);
    *q_out = q;
    *req = w.p;
    *req_len = w.len;
    return MESS_OK;
fail:
    mess_wr_free(&w);
    if (clean)
        sodium_memzero(clean, (size_t)p->shards * words * 8);
    free(clean);
    free(report);
    mess_query_free(q);
    return rc;
}

/* Sums of q.x, q.q and x.x (the last two only when `norms`) in double, over
 * four independent accumulators so the adds pipeline; the split is fixed,
 * so the result does not depend on the machine. */
static void dot3(const float *q, const float *x, uint32_t dim, int norms,
                 double out[3])
{
    double a[4] = {0, 0, 0, 0}, b[4] = {0, 0, 0, 0}, c[4] = {0, 0, 0, 0};
    uint32_t i, l;
    for (i = 0; i + 4 <= dim; i += 4)
        for (l = 0; l < 4; l++) {
            a[l] += (double)q[i + l] * x[i + l];
            if (norms) {
                b[l] += (double)q[i + l] * q[i + l];
                c[l] += (double)x[i + l] * x[i + l];
            }
        }
    for (; i < dim; i++) {
        a[0] += (double)q[i] * x[i];
        if (norms) {
            b[0] += (double)q[i] * q[i];
            c[0] += (double)x[i] * x[i];
        }
    }
    out[0] = (a[0] + a[1]) + (a[2] + a[3]);
    out[1] = (b[0] + b[1]) + (b[2] + b[3]);
    out[2] = (c[0] + c[1]) + (c[2] + c[3]);
}

/* Exact distance for the rerank (smaller is closer for every metric). */
static float rerank_distance(const mess_params *p, const float *q,
                             const float *x)
{
    double s[3], acc[4] = {0, 0, 0, 0};
    uint32_t i, l;
    switch (p->metric) {
    case MESS_METRIC_IP:
        dot3(q, x, p->dim, 0, s);
        return (float)-s[0];
    case MESS_METRIC_COSINE:
        dot3(q, x, p->dim, 1, s);
        if (s[1] <= 0.0 || s[2] <= 0.0)
            return 1.0f;
        return (float)(1.0 - s[0] / sqrt(s[1] * s[2]));
    default:
        for (i = 0; i + 4 <= p->dim; i += 4)
            for (l = 0; l < 4; l++) {
                double d = (double)q[i + l] - x[i + l];
                acc[l] += d * d;
            }
        for (; i < p->dim; i++) {
            double d = (double)q[i] - x[i];
            acc[0] += d * d;
        }
        return (float)((acc[0] + acc[1]) + (acc[2] + acc[3]));
    }
}

struct scored {
    uint64_t id;
    float dist;
};

/* Order of the results: ascending distance, ties by id. */
static int scored_less(const struct scored *x, const struct scored *y)
{
    return x->dist < y->dist || (x->dist == y->dist && x->id < y->id);
}

static int scored_cmp(const void *a, const void *b)
{
    const struct scored *x = (const struct scored *)a, *y = (const struct scored *)b;
    return scored_less(x, y) ? -1 : scored_less(y, x);
}

/* Max-heap (by scored_less) of the best k so far. */
static void heap_offer(struct scored *h, size_t *n, size_t k, struct scored v)
{
    size_t i, c;
    if (*n < k) {
        i = (*n)++;
        while (i > 0 && scored_less(&h[(i - 1) / 2], &v)) {
            h[i] = h[(i - 1) / 2];
            i = (i - 1) / 2;
        }
        h[i] = v;
        return;
    }
    if (!scored_less(&v, &h[0]))
        return;
    i = 0;
    for (;;) {
        c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && scored_less(&h[c], &h[c + 1]))
            c++;
        if (!scored_less(&v, &h[c]))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
}

/* The distinct ids a response's entries claim, each with the chain of its
 * copies in response order.  An id is claimed by peeking (unauthenticated);
 * it is only accepted once one of its copies authenticates. */
#define NO_ENTRY ((size_t)-1)

struct claim {
    uint64_t id;
    size_t first;    /* the first copy (NO_ENTRY: none chained yet) */
    size_t last;     /* the last copy chained so far */
    size_t accepted; /* the authenticated copy (NO_ENTRY: none yet) */
    float dist;      /* exact distance of the accepted copy's vector */
};

struct entry_ref {
    const uint8_t *entry;
    uint64_t claimed; /* peeked id */
    size_t claim;     /* index into the claims */
    size_t next;      /* next copy of the same claimed id */
    uint32_t shard;
    uint32_t gen;     /* the claimed id's current generation (its AD) */
    int opened, ok;
};

/* Open addressing from a claimed id to its claim (slot value = index + 1). */
struct claim_map {
    size_t *slot;
    size_t mask;
};

static int claim_map_init(struct claim_map *m, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    m->mask = cap - 1;
    m->slot = (size_t *)calloc(cap, sizeof *m->slot);
    return m->slot ? MESS_OK : MESS_ENOMEM;
}

/* Index of id's claim; a new one (claims[*n]) when unseen. */
static size_t claim_map_get(struct claim_map *m, struct claim *claims,
                            size_t *n, uint64_t id)
{
    size_t i = (size_t)((id * 0x9e3779b97f4a7c15ull) >> 17) & m->mask;
    while (m->slot[i]) {
        if (claims[m->slot[i] - 1].id == id)
            return m->slot[i] - 1;
        i = (i + 1) & m->mask;
    }
    m->slot[i] = ++*n;
    claims[*n - 1].id = id;
    claims[*n - 1].first = NO_ENTRY;
    claims[*n - 1].accepted = NO_ENTRY;
    return *n - 1;
}

/* Work shared by the peek and open passes: `list` names the entries to
 * process.  An entry is opened into its worker's scratch plaintext and,
 * when `rerank` (not in the verify-only pass), decoded into the worker's
 * vector and its exact distance to q stored in its claim: no plaintext
 * outlives its worker's next entry. */
struct open_job {
    const mess_client *c;
    struct entry_ref *e;
    struct claim *claims;
    const size_t *list;
    const float *q;
    size_t n, chunk;
    uint8_t *scratch; /* workers x payload_plain_bytes */
    float *xs;        /* workers x dim */
    int rerank;
};

static size_t job_chunks(struct open_job *o, unsigned workers)
{
    o->chunk = workers > 1 ? (o->n + 4 * workers - 1) / (4 * workers) : o->n;
    if (o->chunk == 0)
        o->chunk = 1;
    return (o->n + o->chunk - 1) / o->chunk;
}

static int peek_chunk(void *ctx, size_t i, unsigned worker)
{
    struct open_job *o = (struct open_job *)ctx;
    size_t k, end = (i + 1) * o->chunk;
    (void)worker;
    if (end > o->n)
        end = o->n;
    for (k = i * o->chunk; k < end; k++) {
        struct entry_ref *e = &o->e[k];
        e->claimed = payload_peek_id(aead_key(o->c, e->shard), e->entry);
        e->gen = gen_current(o->c, e->claimed);
    }
    return MESS_OK;
}

/* Authenticates and decrypts the listed entries and reranks the authentic
 * ones; independent per entry (each claim has at most one listed entry). */
static int open_chunk(void *ctx, size_t i, unsigned worker)
{
    struct open_job *o = (struct open_job *)ctx;
    const mess_params *p = &o->c->p;
    size_t pb = payload_plain_bytes(p), k, end = (i + 1) * o->chunk;
    uint8_t *pl = o->scratch + (size_t)worker * pb;
    float *x = o->xs + (size_t)worker * p->dim;
    if (end > o->n)
        end = o->n;
    for (k = i * o->chunk; k < end; k++) {
        struct entry_ref *e = &o->e[o->list[k]];
        e->opened = 1;
        e->ok = payload_open_peeked(p, aead_key(o->c, e->shard),
                                    payload_ctx(e->shard, e->gen), e->entry,
                                    e->claimed, pl) == MESS_OK;
        if (e->ok && o->rerank) {
            payload_decode_vector(p, pl + 8, x);
            o->claims[e->claim].dist = rerank_distance(p, o->q, x);
        }
    }
    return MESS_OK;
}

/* Short lists run on the calling thread: starting workers costs more than
 * a few dozen openings (and a hostile response can force many short
 * rounds, one per copy of a forged id). */
static int run_job(struct open_job *o, unsigned workers, parallel_fn fn)
{
    if (o->n < 64)
        workers = 1;
    return o->n ? parallel_for(job_chunks(o, workers), workers, fn, o) : MESS_OK;
}

static int client_finish(const mess_client *c, const mess_query *q,
                         const uint8_t *resp, size_t resp_len, size_t k,
                         uint64_t *ids, float *dists, size_t *n_out,
                         mess_finish_stats *stats)
{
    const mess_params *p;
    struct mess_rd r;
    const uint8_t *rid;
    struct scored *best = NULL;
    struct entry_ref *ent = NULL;
    struct claim *claims = NULL;
    size_t *list = NULL;
    struct claim_map map;
    struct open_job oj;
    size_t entry_bytes, plain_bytes, total = 0, nclaims = 0, nactive, nok = 0,
           nbest = 0, i, a;
    unsigned workers = 1;
    int verify_all;
    mess_finish_stats st;
    uint32_t j;
    int rc;

    if (!c || !q || !resp || !n_out || (k && (!ids || !dists)))
        return MESS_EINVAL;
    workers = c->threads ? c->threads : 1;
    verify_all = c->verify_all;
    *n_out = 0;
    memset(&st, 0, sizeof st);
    memset(&map, 0, sizeof map);
    memset(&oj, 0, sizeof oj);
    p = &c->p;
    entry_bytes = payload_entry_bytes(p);
    plain_bytes = payload_plain_bytes(p);
    mess_rd_init(&r, resp, resp_len);
    rc = wire_check_header(&r, WIRE_RESPONSE, p);
    if (rc != MESS_OK)
        goto out;
    rid = mess_rd_take(&r, WIRE_REQUEST_ID_BYTES);
    if (!rid) {
        rc = MESS_EFORMAT;
        goto out;
    }
    if (sodium_memcmp(rid, q->request_id, WIRE_REQUEST_ID_BYTES) != 0) {
        rc = MESS_EAUTH; /* a response to another request (e.g. a replay) */
        goto out;
    }
    /* First pass: the shape must be exactly what was asked for. */
    {
        struct mess_rd s = r;
        for (j = 0; j < p->shards; j++) {
            uint8_t b[2];
            uint32_t count;
            if (mess_rd_bytes(&s, b, 2)) {
                rc = MESS_EFORMAT;
                goto out;
            }
            count = (uint32_t)b[0] | (uint32_t)b[1] << 8;
            if (count > q->budgets[j] || !mess_rd_take(&s, (size_t)count * entry_bytes)) {
                rc = MESS_EFORMAT;
                goto out;
            }
            total += count;
        }
        if (mess_rd_left(&s) != 0) {
            rc = MESS_EFORMAT;
            goto out;
        }
    }
    if (workers > 64)
        workers = 64;
    best = (struct scored *)mess_malloc_array(k ? k : 1, sizeof *best);
    ent = (struct entry_ref *)mess_malloc_array(total ? total : 1, sizeof *ent);
    claims = (struct claim *)mess_malloc_array(total ? total : 1, sizeof *claims);
    list = (size_t *)mess_malloc_array(total ? total : 1, sizeof *list);
    oj.scratch = (uint8_t *)mess_malloc_array(workers, plain_bytes);
    oj.xs = (float *)mess_malloc_array((size_t)workers * p->dim, sizeof(float));
    if (!best || !ent || !claims || !list || !oj.scratch || !oj.xs ||
        claim_map_init(&map, total) != MESS_OK) {
        rc = MESS_ENOMEM;
        goto out;
    }
    for (j = 0, i = 0; j < p->shards; j++) {
        uint8_t b[2];
        uint32_t count, e;
        mess_rd_bytes(&r, b, 2);
        count = (uint32_t)b[0] | (uint32_t)b[1] << 8;
        for (e = 0; e < count; e++, i++) {
            memset(&ent[i], 0, sizeof ent[i]);
            ent[i].entry = mess_rd_take(&r, entry_bytes);
            ent[i].shard = j;
            ent[i].next = NO_ENTRY;
        }
    }
    oj.c = c;
    oj.e = ent;
    oj.claims = claims;
    oj.q = q->q;
    /* Copies of one item all carry its id.  Peek every entry's id, chain the
     * copies of each claimed id in response order, then authenticate one
     * copy per id: the first, and only if it fails the next, and so on.
     * Every authentic entry claims its true id, so the accepted set (and
     * for each id the copy used: the first authentic one) is the same as
     * when opening every entry, whatever the server sent; redundant copies
     * are simply not opened (counted in `unopened`). */
    oj.n = total;
    rc = run_job(&oj, workers, peek_chunk);
    if (rc != MESS_OK)
        goto out;
    for (i = 0; i < total; i++) {
        size_t cl = claim_map_get(&map, claims, &nclaims, ent[i].claimed);
        ent[i].claim = cl;
        if (claims[cl].first == NO_ENTRY)
            claims[cl].first = i;
        else
            ent[claims[cl].last].next = i;
        claims[cl].last = i;
    }
    /* Rounds: open (and rerank) the current copy of every unresolved claim;
     * a failure moves that claim to its next copy.  Each entry is opened at
     * most once, so a hostile response costs at most one opening per entry. */
    oj.list = list;
    oj.rerank = 1;
    nactive = nclaims;
    for (a = 0; a < nclaims; a++)
        list[a] = claims[a].first;
    while (nactive) {
        size_t kept = 0;
        oj.n = nactive;
        rc = run_job(&oj, workers, open_chunk);
        if (rc != MESS_OK)
            goto out;
        for (a = 0; a < nactive; a++) {
            struct entry_ref *e = &ent[list[a]];
            struct claim *cl = &claims[e->claim];
            if (e->ok) {
                cl->accepted = list[a];
                nok++;
            } else {
                st.auth_failures++;
                if (e->next != NO_ENTRY)
                    list[kept++] = e->next;
            }
        }
        nactive = kept;
    }
    /* Verify-all: authenticate the copies not opened too, only to count. */
    if (verify_all) {
        oj.n = 0;
        for (i = 0; i < total; i++)
            if (!ent[i].opened)
                list[oj.n++] = i;
        oj.rerank = 0;
        rc = run_job(&oj, workers, open_chunk);
        if (rc != MESS_OK)
            goto out;
        for (a = 0; a < oj.n; a++) {
            if (ent[list[a]].ok)
                nok++;
            else
                st.auth_failures++;
        }
    }
    for (i = 0; i < total; i++)
        st.unopened += !ent[i].opened;
    /* The best k of the accepted ids, each reranked once. */
    for (a = 0; a < nclaims; a++) {
        struct scored v;
        if (claims[a].accepted == NO_ENTRY)
            continue;
        st.unique++;
        v.id = claims[a].id;
        v.dist = claims[a].dist;
        if (k)
            heap_offer(best, &nbest, k, v);
    }
    st.candidates = total;
    qsort(best, nbest, sizeof *best, scored_cmp);
    for (i = 0; i < nbest; i++) {
        ids[i] = best[i].id;
        dists[i] = best[i].dist;
    }
    *n_out = nbest;
    rc = (total > 0 && nok == 0) ? MESS_EAUTH : MESS_OK;
out:
    if (stats)
        *stats = st;
    if (oj.scratch)
        sodium_memzero(oj.scratch, (size_t)workers * plain_bytes);
    if (oj.xs)
        sodium_memzero(oj.xs, (size_t)workers * p->dim * sizeof(float));
    free(oj.scratch);
    free(oj.xs);
    free(list);
    free(claims);
    free(ent);
    free(best);
    free(map.slot);
    return rc;
}

/* ------------------------------------------------------------------------
 * Server
 * ---------------------------------------------------------------------- */

static struct hnsw_params graph_params(const mess_params *p, uint32_t shard)
{
    struct hnsw_params hp;
    memset(&hp, 0, sizeof hp);
    hp.bits = p->kappa;
    hp.m = p->hnsw_m;
    hp.ef_construction = p->ef_construction;
    hp.seed = 0x4d455353u + shard; /* public: level draws need no secrecy */
    return hp;
}

void mess_server_free(mess_server *s)
{
    uint32_t j;
    if (!s)
        return;
    if (s->shards)
        for (j = 0; j < s->p.shards; j++) {
            hnsw_free(s->shards[j].graph);
            free(s->shards[j].entries);
        }
    while (s->npool > 0)
        hnsw_scratch_free(s->pool[--s->npool]);
    pthread_mutex_destroy(&s->pool_lock);
    free(s->shards);
    free(s);
}

int mess_server_params(const mess_server *s, mess_params *out)
{
    if (!s || !out)
        return MESS_EINVAL;
    *out = s->p;
    return MESS_OK;
}

int mess_server_set_ef_search(mess_server *s, uint32_t ef_search)
{
    if (!s)
        return MESS_EINVAL;
    if (ef_search > MESS_MAX_EF)
        return MESS_ELIMIT;
    s->p.ef_search = ef_search;
    return MESS_OK;
}

int mess_server_owner(const mess_server *s, uint8_t tag[MESS_OWNER_BYTES])
{
    if (!s || !tag)
        return MESS_EINVAL;
    if (!s->owned)
        return MESS_ENOTFOUND;
    memcpy(tag, s->owner, MESS_OWNER_BYTES);
    return MESS_OK;
}

int mess_server_check_owner(const mess_server *s,
                            const uint8_t tag[MESS_OWNER_BYTES])
{
    if (!s || !tag)
        return MESS_EINVAL;
    if (s->owned && sodium_memcmp(s->owner, tag, MESS_OWNER_BYTES) != 0)
        return MESS_EOWNER;
    return MESS_OK;
}

static int server_alloc(const mess_params *p, int with_graphs, mess_server **out)
{
    mess_server *s;
    uint32_t j;
    int rc;
    if (sodium_init() < 0)
        return MESS_ECRYPTO;
    rc = mess_params_check(p);
    if (rc != MESS_OK)
        return rc;
    s = (mess_server *)calloc(1, sizeof *s);
    if (!s)
        return MESS_ENOMEM;
    s->p = *p;
    s->entry_bytes = payload_entry_bytes(p);
    s->shards = (struct shard_store *)calloc(p->shards, sizeof *s->shards);
    if (!s->shards || pthread_mutex_init(&s->pool_lock, NULL) != 0) {
        free(s->shards);
        free(s);
        return MESS_ENOMEM;
    }
    for (j = 0; with_graphs && j < p->shards; j++) {
        struct hnsw_params hp = graph_params(p, j);
        rc = hnsw_new(&hp, &s->shards[j].graph);
        if (rc != MESS_OK) {
            mess_server_free(s);
            return rc;
        }
    }
    *out = s;
    return MESS_OK;
}

int mess_server_new(const mess_params *p, mess_server **out)
{
    if (!p || !out)
        return MESS_EINVAL;
    *out = NULL;
    return server_alloc(p, 1, out);
}

/* Makes room for `more` ciphertexts in shard j. */
static int store_reserve(mess_server *s, struct shard_store *st, size_t more)
{
    size_t need = hnsw_count(st->graph) + more, cap, bytes;
    uint8_t *q;
    int rc = hnsw_reserve(st->graph, need); /* the same policy for the graph */
    if (rc != MESS_OK)
        return rc;
    if (need <= st->cap)
        return MESS_OK;
    /* geometric (x1.25) so many small uploads stay amortized O(1), but an
     * upload larger than that gets exactly what it needs: no slack after a
     * bulk build */
    cap = st->cap + st->cap / 4;
    if (cap < need)
        cap = need;
    if (mess_mul_size(cap, s->entry_bytes, &bytes) != MESS_OK)
        return MESS_ELIMIT;
    q = (uint8_t *)realloc(st->entries, bytes);
    if (!q)
        return MESS_ENOMEM;
    st->entries = q;
    st->cap = cap;
    return MESS_OK;
}

struct apply_job {
    mess_server *s;
    const uint8_t *recs;
    size_t rec_bytes;
    size_t *start; /* M + 1: records of shard j are [start[j], start[j+1]) */
};

static int apply_shard(void *ctx, size_t jj, unsigned worker)
{
    struct apply_job *a = (struct apply_job *)ctx;
    mess_server *s = a->s;
    struct shard_store *st = &s->shards[jj];
    uint32_t words = params_words(&s->p);
    size_t i, code_bytes = wire_code_bytes(&s->p);
    uint64_t code[MESS_MAX_BITS / 64];
    (void)worker;

    for (i = a->start[jj]; i < a->start[jj + 1]; i++) {
        const uint8_t *rec = a->recs + i * a->rec_bytes;
        uint32_t node;
        int rc;
        wire_load_code(rec + WIRE_CODE_OFFSET, words, code);
        rc = hnsw_add(st->graph, code, label_load(rec + WIRE_LABEL_OFFSET), &node);
        if (rc != MESS_OK)
            return rc;
        memcpy(st->entries + (size_t)node * s->entry_bytes, rec + WIRE_CODE_OFFSET + code_bytes,
               s->entry_bytes);
    }
    return MESS_OK;
}

int mess_server_apply_upload(mess_server *s, const uint8_t *buf, size_t len,
                             unsigned threads)
{
    struct apply_job a;
    struct mess_rd r;
    const uint8_t *owner;
    uint64_t n;
    size_t i, bytes;
    uint32_t prev_shard = 0;
    const uint8_t *prev_label = NULL;
    int rc;

    if (!s || !buf)
        return MESS_EINVAL;
    mess_rd_init(&r, buf, len);
    rc = wire_check_header_owned(&r, WIRE_UPLOAD, &s->p, &owner);
    if (rc == MESS_OK)
        rc = mess_server_check_owner(s, owner);
    if (rc != MESS_OK)
        return rc;
    if (mess_rd_u64(&r, &n))
        return MESS_EFORMAT;
    a.s = s;
    a.rec_bytes = wire_upload_record_bytes(&s->p);
    if (n > SIZE_MAX || mess_mul_size((size_t)n, a.rec_bytes, &bytes) != MESS_OK ||
        bytes != mess_rd_left(&r))
        return MESS_EFORMAT;
    a.recs = mess_rd_take(&r, bytes);
    a.start = (size_t *)calloc((size_t)s->p.shards + 1, sizeof *a.start);
    if (!a.start)
        return MESS_ENOMEM;
    /* Validate everything before changing anything: records strictly
     * ordered by (shard, label), shards in range, labels not stored yet. */
    for (i = 0; i < n; i++) {
        const uint8_t *rec = a.recs + i * a.rec_bytes;
        uint32_t shard = mess_load_u32(rec);
        const uint8_t *label = rec + WIRE_LABEL_OFFSET;
        if (shard >= s->p.shards ||
            (i > 0 && (shard < prev_shard ||
                       (shard == prev_shard &&
                        memcmp(label, prev_label, LABEL_BYTES) <= 0)))) {
            free(a.start);
            return MESS_EFORMAT;
        }
        if (hnsw_find(s->shards[shard].graph, label_load(label), NULL) == MESS_OK) {
            free(a.start);
            return MESS_EINVAL; /* already stored */
        }
        a.start[shard + 1]++;
        prev_shard = shard;
        prev_label = label;
    }
    for (i = 0; i < s->p.shards; i++)
        a.start[i + 1] += a.start[i];
    for (i = 0; i < s->p.shards; i++) {
        rc = store_reserve(s, &s->shards[i], a.start[i + 1] - a.start[i]);
        if (rc != MESS_OK) {
            size_t k;
            for (k = 0; k <= i; k++)
                hnsw_unreserve(s->shards[k].graph);
            free(a.start);
            return rc;
        }
    }
    /* Every allocation the inserts need is made above (store_reserve:
     * arrays, label map, scratch and link blocks of the nodes to come),
     * and the checks above exclude every other error of hnsw_add, so
     * nothing below fails half-way. */
    rc = parallel_for(s->p.shards, threads, apply_shard, &a);
    free(a.start);
    if (rc == MESS_OK && !s->owned) {
        memcpy(s->owner, owner, MESS_OWNER_BYTES);
        s->owned = 1;
    }
    return rc;
}

int mess_server_apply_delete(mess_server *s, const uint8_t *buf, size_t len,
                             size_t *missing)
{
    struct mess_rd r;
    const uint8_t *recs, *owner;
    uint64_t n;
    size_t i, bytes, rb, miss = 0;
    int rc;

    if (missing)
        *missing = 0;
    if (!s || !buf)
        return MESS_EINVAL;
    mess_rd_init(&r, buf, len);
    rc = wire_check_header_owned(&r, WIRE_DELETE, &s->p, &owner);
    if (rc == MESS_OK)
        rc = mess_server_check_owner(s, owner);
    if (rc != MESS_OK)
        return rc;
    if (mess_rd_u64(&r, &n))
        return MESS_EFORMAT;
    if (n > SIZE_MAX ||
        mess_mul_size((size_t)n, wire_delete_record_bytes(), &bytes) != MESS_OK ||
        bytes != mess_rd_left(&r))
        return MESS_EFORMAT;
    recs = mess_rd_take(&r, bytes);
    rb = wire_delete_record_bytes();
    for (i = 0; i < n; i++)
        if (mess_load_u32(recs + i * rb) >= s->p.shards)
            return MESS_EFORMAT;
    for (i = 0; i < n; i++) {
        const uint8_t *rec = recs + i * rb;
        rc = hnsw_delete(s->shards[mess_load_u32(rec)].graph,
                         label_load(rec + WIRE_LABEL_OFFSET));
        if (rc == MESS_ENOTFOUND)
            miss++;
        else if (rc != MESS_OK)
            return rc;
    }
    if (missing)
        *missing = miss;
    return MESS_OK;
}

struct search_job {
    const mess_server *s;
    const struct wire_request *req;
    struct hnsw_scratch **scratch; /* per worker */
    struct hnsw_hit **hits;        /* per shard, budget entries */
    size_t *found;                 /* per shard */
};

/* Hits shard j can return for a budget: never more than its live nodes, so
 * a request with huge budgets cannot make the server allocate more than
 * its index holds (the results are the same). */
static size_t search_room(const mess_server *s, uint32_t j, uint32_t budget)
{
    size_t live = hnsw_live(s->shards[j].graph);
    return budget < live ? budget : live;
}

static int search_shard(void *ctx, size_t jj, unsigned worker)
{
    struct search_job *sj = (struct search_job *)ctx;
    const mess_server *s = sj->s;
    uint32_t j = (uint32_t)jj, words = params_words(&s->p);
    uint32_t budget = wire_request_budget(sj->req, j);
    uint64_t code[MESS_MAX_BITS / 64];
    size_t ef, room = search_room(s, j, budget);

    sj->found[j] = 0;
    if (budget == 0 || room == 0)
        return MESS_OK;
    wire_load_code(sj->req->codes + (size_t)j * wire_code_bytes(&s->p), words, code);
    ef = s->p.ef_search > budget ? s->p.ef_search : budget;
    return hnsw_search(s->shards[j].graph, sj->scratch[worker], code, room, ef,
                       sj->hits[j], &sj->found[j]);
}

static int scratch_take(const mess_server *cs, struct hnsw_scratch **out)
{
    mess_server *s = (mess_server *)(uintptr_t)cs; /* the pool is not logical state */
    *out = NULL;
    pthread_mutex_lock(&s->pool_lock);
    if (s->npool > 0)
        *out = s->pool[--s->npool];
    pthread_mutex_unlock(&s->pool_lock);
    return *out ? MESS_OK : hnsw_scratch_new(out);
}

static void scratch_give(const mess_server *cs, struct hnsw_scratch *sc)
{
    mess_server *s = (mess_server *)(uintptr_t)cs;
    if (!sc)
        return;
    pthread_mutex_lock(&s->pool_lock);
    if (s->npool < SCRATCH_POOL) {
        s->pool[s->npool++] = sc;
        sc = NULL;
    }
    pthread_mutex_unlock(&s->pool_lock);
    hnsw_scratch_free(sc);
}

int mess_server_search(const mess_server *s, const uint8_t *req,
                       size_t req_len, unsigned threads, uint8_t **resp,
                       size_t *resp_len)
{
    struct wire_request rq;
    struct search_job sj;
    struct hnsw_hit *hits = NULL;
    uint32_t j, M;
    unsigned t;
    size_t total = 0, len, off, pool = 0;
    uint8_t *out;
    int rc;

    if (!s || !req || !resp || !resp_len)
        return MESS_EINVAL;
    *resp = NULL;
    *resp_len = 0;
    rc = wire_request_parse(&s->p, req, req_len, &rq);
    if (rc == MESS_OK)
        rc = mess_server_check_owner(s, rq.owner);
    if (rc != MESS_OK)
        return rc;
    M = s->p.shards;
    if (threads == 0)
        threads = 1;
    if (threads > M)
        threads = M;
    memset(&sj, 0, sizeof sj);
    sj.s = s;
    sj.req = &rq;
    sj.scratch = (struct hnsw_scratch **)calloc(threads, sizeof *sj.scratch);
    sj.hits = (struct hnsw_hit **)calloc(M, sizeof *sj.hits);
    sj.found = (size_t *)calloc(M, sizeof *sj.found);
    if (!sj.scratch || !sj.hits || !sj.found) {
        rc = MESS_ENOMEM;
        goto done;
    }
    for (t = 0; t < threads; t++)
        if ((rc = scratch_take(s, &sj.scratch[t])) != MESS_OK)
            goto done;
    for (j = 0; j < M; j++)
        pool += search_room(s, j, wire_request_budget(&rq, j));
    hits = (struct hnsw_hit *)mess_malloc_array(pool ? pool : 1, sizeof *hits);
    if (!hits) {
        rc = MESS_ENOMEM;
        goto done;
    }
    for (j = 0, off = 0; j < M; j++) {
        sj.hits[j] = hits + off;
        off += search_room(s, j, wire_request_budget(&rq, j));
    }
    rc = parallel_for(M, threads, search_shard, &sj);
    if (rc != MESS_OK)
        goto done;
    for (j = 0; j < M; j++)
        total += sj.found[j];
    /* exact size, one allocation: header | request id | per shard count + entries */
    len = WIRE_HEADER_BYTES + WIRE_REQUEST_ID_BYTES + (size_t)M * 2 + total * s->entry_bytes;
    out = (uint8_t *)malloc(len);
    if (!out) {
        rc = MESS_ENOMEM;
        goto done;
    }
    {
        struct mess_wr w;
        mess_wr_init(&w);
        wire_header(&w, WIRE_RESPONSE, &s->p);
        if (w.err || w.len != WIRE_HEADER_BYTES) {
            rc = w.err ? w.err : MESS_EFORMAT;
            mess_wr_free(&w);
            free(out);
            goto done;
        }
        memcpy(out, w.p, WIRE_HEADER_BYTES);
        mess_wr_free(&w);
    }
    off = WIRE_HEADER_BYTES;
    memcpy(out + off, rq.request_id, WIRE_REQUEST_ID_BYTES);
    off += WIRE_REQUEST_ID_BYTES;
    for (j = 0; j < M; j++) {
        const uint8_t *base = s->shards[j].entries;
        size_t e;
        out[off] = (uint8_t)sj.found[j];
        out[off + 1] = (uint8_t)(sj.found[j] >> 8);
        off += 2;
        for (e = 0; e < sj.found[j]; e++, off += s->entry_bytes)
            memcpy(out + off, base + (size_t)sj.hits[j][e].node * s->entry_bytes,
                   s->entry_bytes);
    }
    *resp = out;
    *resp_len = len;
done:
    if (sj.scratch)
        for (t = 0; t < threads; t++)
            scratch_give(s, sj.scratch[t]);
    free(hits);
    free(sj.scratch);
    free(sj.hits);
    free(sj.found);
    return rc;
}

struct compact_job {
    const mess_server *s;
    struct shard_store *fresh; /* per shard: the rebuilt graph and entries */
};

/* Builds shard j without its deleted entries into a->fresh[j] (left empty
 * when the shard has none); the server itself is not touched. */
static int compact_shard(void *ctx, size_t jj, unsigned worker)
{
    struct compact_job *a = (struct compact_job *)ctx;
    const mess_server *s = a->s;
    const struct shard_store *st = &s->shards[jj];
    struct hnsw *fresh = NULL;
    size_t n = hnsw_count(st->graph), i, live;
    uint32_t *map;
    uint8_t *entries;
    int rc;
    (void)worker;

    if (hnsw_deleted(st->graph) == 0)
        return MESS_OK;
    map = (uint32_t *)mess_malloc_array(n ? n : 1, sizeof *map);
    if (!map)
        return MESS_ENOMEM;
    rc = hnsw_compact(st->graph, &fresh, map);
    if (rc != MESS_OK) {
        free(map);
        return rc;
    }
    live = hnsw_count(fresh);
    entries = (uint8_t *)mess_malloc_array(live ? live : 1, s->entry_bytes);
    if (!entries) {
        hnsw_free(fresh);
        free(map);
        return MESS_ENOMEM;
    }
    for (i = 0; i < n; i++)
        if (map[i] != UINT32_MAX)
            memcpy(entries + (size_t)map[i] * s->entry_bytes,
                   st->entries + i * s->entry_bytes, s->entry_bytes);
    free(map);
    a->fresh[jj].graph = fresh;
    a->fresh[jj].entries = entries;
    a->fresh[jj].cap = live ? live : 1;
    return MESS_OK;
}

/* All or nothing: every shard is rebuilt aside first, and the server
 * takes the new shards only once all of them exist. */
int mess_server_compact(mess_server *s, unsigned threads)
{
    struct compact_job a;
    uint32_t j;
    int rc;
    if (!s)
        return MESS_EINVAL;
    a.s = s;
    a.fresh = (struct shard_store *)calloc(s->p.shards, sizeof *a.fresh);
    if (!a.fresh)
        return MESS_ENOMEM;
    rc = parallel_for(s->p.shards, threads, compact_shard, &a);
    for (j = 0; j < s->p.shards; j++) {
        struct shard_store *st = &s->shards[j], *f = &a.fresh[j];
        if (!f->graph)
            continue;
        if (rc == MESS_OK) {
            hnsw_free(st->graph);
            free(st->entries);
            *st = *f;
        } else {
            hnsw_free(f->graph);
            free(f->entries);
        }
    }
    free(a.fresh);
    return rc;
}

int mess_server_stats_get(const mess_server *s, mess_server_stats *out)
{
    uint32_t j;
    if (!s || !out)
        return MESS_EINVAL;
    memset(out, 0, sizeof *out);
    out->min_shard = SIZE_MAX;
    out->bytes = sizeof *s + (size_t)s->p.shards * sizeof *s->shards;
    for (j = 0; j < s->p.shards; j++) {
        const struct shard_store *st = &s->shards[j];
        size_t live = hnsw_live(st->graph);
        out->entries += hnsw_count(st->graph);
        out->live += live;
        out->deleted += hnsw_deleted(st->graph);
        out->bytes += hnsw_bytes(st->graph) + st->cap * s->entry_bytes;
        if (live < out->min_shard)
            out->min_shard = live;
        if (live > out->max_shard)
            out->max_shard = live;
    }
    return MESS_OK;
}

/* ------------------------------------------------------------------------
 * State files
 *
 * Client body: u32 version (2) | u8 deterministic | u64 op counter |
 *              master key[32] | isohash |
 *              u64 g | g x (u64 id | u32 generation | u8 deleted),
 *              ids strictly ascending (the generation map)
 * Server body: u32 version (3) | u8 owned | owner tag[16] (zero if not
 *              owned) | per shard: graph | u64 n | n x entry
 * ---------------------------------------------------------------------- */

int mess_client_save(const mess_client *c, const char *path,
                     const char *passphrase)
{
    return mess_client_save_pass(c, path, passphrase,
                                 passphrase ? strlen(passphrase) : 0);
}

static int client_save(const mess_client *c, const char *path,
                       const char *passphrase, size_t passphrase_len)
{
    struct mess_wr w;
    int rc;
    if (!c || !path || (passphrase != NULL) != (passphrase_len != 0))
        return MESS_EINVAL;
    static const uint8_t placeholder[KEY_BYTES];
    mess_wr_init(&w);
    mess_wr_u32(&w, CLIENT_BODY_VERSION);
    mess_wr_u8(&w, (uint8_t)c->deterministic);
    mess_wr_u64(&w, c->op_counter);
    /* The key goes in last, once the buffer has stopped growing: a realloc
     * would leave copies of it in freed memory. */
    mess_wr_bytes(&w, placeholder, KEY_BYTES);
    rc = isohash_serialize(c->hash, &w);
    if (rc == MESS_OK) {
        size_t i;
        mess_wr_u64(&w, (uint64_t)c->ngens);
        for (i = 0; i < c->ngens; i++) {
            mess_wr_u64(&w, c->gens[i].id);
            mess_wr_u32(&w, c->gens[i].gen);
            mess_wr_u8(&w, c->gens[i].deleted);
        }
        rc = w.err;
    }
    if (rc == MESS_OK)
        memcpy(w.p + 4 + 1 + 8, c->keys->master, KEY_BYTES);
    if (rc == MESS_OK)
        rc = statefile_write(path, STATEFILE_CLIENT, &c->p, w.p, w.len,
                             passphrase, passphrase_len, 0600);
    if (w.p)
        sodium_memzero(w.p, w.len);
    mess_wr_free(&w);
    return rc;
}

/* The generation map of a client file: hostile input, every count checked
 * against the bytes present, ids strictly ascending, flags 0 or 1. */
#define GEN_RECORD_BYTES 13
static int gens_deserialize(struct mess_rd *r, mess_client *c)
{
    uint64_t g, i;
    if (mess_rd_u64(r, &g) || g > mess_rd_left(r) / GEN_RECORD_BYTES)
        return MESS_EFORMAT;
    c->gens = (struct gen_entry *)mess_malloc_array(g ? (size_t)g : 1, sizeof *c->gens);
    if (!c->gens)
        return MESS_ENOMEM;
    for (i = 0; i < g; i++) {
        struct gen_entry *e = &c->gens[i];
        if (mess_rd_u64(r, &e->id) || mess_rd_u32(r, &e->gen) ||
            mess_rd_u8(r, &e->deleted) || e->deleted > 1 ||
            (i > 0 && e->id <= c->gens[i - 1].id))
            return MESS_EFORMAT;
        c->ngens = (size_t)i + 1;
    }
    return MESS_OK;
}

int mess_client_load(const char *path, const char *passphrase,
                     mess_client **out)
{
    return mess_client_load_pass(path, passphrase,
                                 passphrase ? strlen(passphrase) : 0, out);
}

int mess_client_load_pass(const char *path, const char *passphrase,
                          size_t passphrase_len, mess_client **out)
{
    mess_params p;
    mess_client *c = NULL;
    uint8_t *raw = NULL, det;
    size_t raw_len = 0;
    struct mess_rd r;
    uint32_t version;
    int rc;

    if (out)
        *out = NULL;
    if (!path || !out || (passphrase != NULL) != (passphrase_len != 0))
        return MESS_EINVAL;
    rc = statefile_read(path, STATEFILE_CLIENT, passphrase, passphrase_len, &p, &raw,
                        &raw_len);
    if (rc != MESS_OK)
        return rc;
    rc = client_alloc(&p, &c);
    if (rc != MESS_OK)
        goto done;
    mess_rd_init(&r, raw, raw_len);
    rc = MESS_EFORMAT;
    if (mess_rd_u32(&r, &version) || mess_rd_u8(&r, &det) ||
        mess_rd_u64(&r, &c->op_counter) ||
        mess_rd_bytes(&r, c->keys->master, KEY_BYTES))
        goto done;
    if (version != CLIENT_BODY_VERSION) {
        rc = MESS_EVERSION;
        goto done;
    }
    if (det > 1)
        goto done;
    c->deterministic = det;
    keys_derive(c);
    rc = isohash_deserialize(&r, &c->hash);
    if (rc == MESS_OK)
        rc = gens_deserialize(&r, c);
    if (rc != MESS_OK)
        goto done;
    if (mess_rd_left(&r) != 0 || isohash_dim(c->hash) != p.dim ||
        isohash_kappa(c->hash) != p.kappa || isohash_shards(c->hash) != p.shards) {
        rc = MESS_EFORMAT;
        goto done;
    }
    *out = c;
    c = NULL;
    rc = MESS_OK;
done:
    mess_client_free(c);
    statefile_free_raw(raw, raw_len);
    return rc;
}

int mess_server_save(const mess_server *s, const char *path)
{
    struct mess_wr w;
    uint32_t j;
    int rc = MESS_OK;
    if (!s || !path)
        return MESS_EINVAL;
    mess_wr_init(&w);
    mess_wr_u32(&w, SERVER_BODY_VERSION);
    mess_wr_u8(&w, (uint8_t)s->owned);
    mess_wr_bytes(&w, s->owner, MESS_OWNER_BYTES);
    for (j = 0; j < s->p.shards && rc == MESS_OK; j++) {
        size_t n = hnsw_count(s->shards[j].graph);
        rc = hnsw_serialize(s->shards[j].graph, &w);
        mess_wr_u64(&w, n);
        mess_wr_bytes(&w, s->shards[j].entries, n * s->entry_bytes);
    }
    if (rc == MESS_OK)
        rc = w.err;
    if (rc == MESS_OK)
        rc = statefile_write(path, STATEFILE_SERVER, &s->p, w.p, w.len, NULL, 0, 0644);
    mess_wr_free(&w);
    return rc;
}

int mess_server_load(const char *path, const mess_params *expect,
                     mess_server **out)
{
    mess_params p;
    mess_server *s = NULL;
    uint8_t *raw = NULL;
    size_t raw_len = 0;
    struct mess_rd r;
    uint32_t version, j;
    uint8_t fa[MESS_FINGERPRINT_BYTES], fb[MESS_FINGERPRINT_BYTES];
    int rc;

    if (!path || !out)
        return MESS_EINVAL;
    *out = NULL;
    rc = statefile_read(path, STATEFILE_SERVER, NULL, 0, &p, &raw, &raw_len);
    if (rc != MESS_OK)
        return rc;
    if (expect) {
        params_fingerprint(&p, fa);
        params_fingerprint(expect, fb);
        if (memcmp(fa, fb, sizeof fa) != 0) {
            rc = MESS_EPARAM;
            goto done;
        }
    }
    rc = server_alloc(&p, 0, &s);
    if (rc != MESS_OK)
        goto done;
    mess_rd_init(&r, raw, raw_len);
    if (mess_rd_u32(&r, &version)) {
        rc = MESS_EFORMAT;
        goto done;
    }
    if (version != SERVER_BODY_VERSION) {
        rc = MESS_EVERSION;
        goto done;
    }
    {
        uint8_t owned;
        static const uint8_t none[MESS_OWNER_BYTES];
        if (mess_rd_u8(&r, &owned) || owned > 1 ||
            mess_rd_bytes(&r, s->owner, MESS_OWNER_BYTES) ||
            (!owned && memcmp(s->owner, none, MESS_OWNER_BYTES) != 0)) {
            rc = MESS_EFORMAT;
            goto done;
        }
        s->owned = owned;
    }
    for (j = 0; j < p.shards; j++) {
        struct hnsw_params hp = graph_params(&p, j);
        struct shard_store *st = &s->shards[j];
        uint64_t n;
        size_t bytes;
        const uint8_t *src;
        rc = hnsw_deserialize(&r, &hp, &st->graph);
        if (rc != MESS_OK)
            goto done;
        rc = MESS_EFORMAT;
        if (mess_rd_u64(&r, &n) || n != hnsw_count(st->graph) ||
            mess_mul_size((size_t)n, s->entry_bytes, &bytes) != MESS_OK)
            goto done;
        src = mess_rd_take(&r, bytes);
        if (!src)
            goto done;
        st->entries = (uint8_t *)malloc(bytes ? bytes : 1);
        if (!st->entries) {
            rc = MESS_ENOMEM;
            goto done;
        }
        memcpy(st->entries, src, bytes);
        st->cap = (size_t)n;
    }
    rc = mess_rd_left(&r) == 0 ? MESS_OK : MESS_EFORMAT;
done:
    if (rc == MESS_OK)
        *out = s;
    else
        mess_server_free(s);
    statefile_free_raw(raw, raw_len);
    return rc;
}

/* ------------------------------------------------------------------------
 * The client's locked entry points (mess.h, "Threads"): each call that
 * changes the operation counter, the generation map or the
 * per-handle settings holds the handle's lock for writing throughout, so
 * such calls from several threads are serialized in some order and none
 * sees another half done; finish and save only read that state and hold
 * the lock for reading, so they overlap each other.
 * ---------------------------------------------------------------------- */

int mess_client_upload(mess_client *c, const uint64_t *ids,
                       const float *vectors, size_t n, unsigned threads,
                       uint8_t **buf, size_t *len)
{
    int rc;
    if (!c)
        return MESS_EINVAL;
    client_lock(c);
    rc = client_upload(c, ids, vectors, n, threads, buf, len);
    client_unlock(c);
    return rc;
}

int mess_client_delete(mess_client *c, const uint64_t *ids, size_t n,
                       uint8_t **buf, size_t *len)
{
    int rc;
    if (!c)
        return MESS_EINVAL;
    client_lock(c);
    rc = client_delete(c, ids, n, buf, len);
    client_unlock(c);
    return rc;
}

int mess_client_request(mess_client *c, const float *q, size_t pool,
                        mess_query **q_out, uint8_t **req, size_t *req_len)
{
    int rc;
    if (!c)
        return MESS_EINVAL;
    client_lock(c);
    rc = client_request(c, q, pool, q_out, req, req_len);
    client_unlock(c);
    return rc;
}

int mess_client_finish(const mess_client *c, const mess_query *q,
                       const uint8_t *resp, size_t resp_len, size_t k,
                       uint64_t *ids, float *dists, size_t *n_out,
                       mess_finish_stats *stats)
{
    int rc;
    if (!c)
        return MESS_EINVAL;
    client_lock_read(c);
    rc = client_finish(c, q, resp, resp_len, k, ids, dists, n_out, stats);
    client_unlock(c);
    return rc;
}

int mess_client_save_pass(const mess_client *c, const char *path,
                          const char *passphrase, size_t passphrase_len)
{
    int rc;
    if (!c)
        return MESS_EINVAL;
    client_lock_read(c);
    rc = client_save(c, path, passphrase, passphrase_len);
    client_unlock(c);
    return rc;
}

int mess_client_codes(const mess_client *c, const float *x, uint64_t *codes)
{
    if (!c || !x || !codes)
        return MESS_EINVAL;
    return isohash_hash_all(c->hash, x, codes);
}

/* ------------------------------------------------------------------------
 * Read-only server view (what the untrusted server can see, per shard)
 * ---------------------------------------------------------------------- */

/* The shard's graph after checking the handle, the index and that `cap`
 * output slots hold every node; NULL with *rc set otherwise. */
static const struct hnsw *view_graph(const mess_server *s, uint32_t shard,
                                     const void *out, size_t cap, int *rc)
{
    const struct hnsw *g;
    *rc = MESS_EINVAL;
    if (!s || !out || shard >= s->p.shards)
        return NULL;
    g = s->shards[shard].graph;
    if (cap < hnsw_count(g)) {
        *rc = MESS_ELIMIT;
        return NULL;
    }
    *rc = MESS_OK;
    return g;
}

int mess_server_shard_nodes(const mess_server *s, uint32_t shard, size_t *nodes)
{
    if (!s || !nodes || shard >= s->p.shards)
        return MESS_EINVAL;
    *nodes = hnsw_count(s->shards[shard].graph);
    return MESS_OK;
}

int mess_server_shard_entry_point(const mess_server *s, uint32_t shard,
                                  uint32_t *node)
{
    if (!s || !node || shard >= s->p.shards)
        return MESS_EINVAL;
    *node = hnsw_entry_point(s->shards[shard].graph);
    return *node == UINT32_MAX ? MESS_ENOTFOUND : MESS_OK;
}

int mess_server_shard_codes(const mess_server *s, uint32_t shard,
                            uint64_t *codes, size_t cap)
{
    int rc;
    const struct hnsw *g = view_graph(s, shard, codes, cap, &rc);
    size_t i, n, words;
    if (!g)
        return rc;
    n = hnsw_count(g);
    words = params_words(&s->p);
    for (i = 0; i < n; i++)
        memcpy(codes + i * words, hnsw_code(g, (uint32_t)i), words * 8);
    return MESS_OK;
}

int mess_server_shard_labels(const mess_server *s, uint32_t shard,
                             uint8_t *labels, size_t cap)
{
    int rc;
    const struct hnsw *g = view_graph(s, shard, labels, cap, &rc);
    size_t i, n;
    if (!g)
        return rc;
    n = hnsw_count(g);
    for (i = 0; i < n; i++) {
        struct hnsw_label l = hnsw_label(g, (uint32_t)i);
        mess_store_u64(labels + i * LABEL_BYTES, l.lo);
        mess_store_u64(labels + i * LABEL_BYTES + 8, l.hi);
    }
    return MESS_OK;
}

int mess_server_shard_levels(const mess_server *s, uint32_t shard,
                             uint32_t *levels, size_t cap)
{
    int rc;
    const struct hnsw *g = view_graph(s, shard, levels, cap, &rc);
    size_t i, n;
    if (!g)
        return rc;
    n = hnsw_count(g);
    for (i = 0; i < n; i++)
        levels[i] = hnsw_level(g, (uint32_t)i);
    return MESS_OK;
}

int mess_server_shard_deleted(const mess_server *s, uint32_t shard,
                              uint8_t *deleted, size_t cap)
{
    int rc;
    const struct hnsw *g = view_graph(s, shard, deleted, cap, &rc);
    size_t i, n;
    if (!g)
        return rc;
    n = hnsw_count(g);
    for (i = 0; i < n; i++)
        deleted[i] = (uint8_t)(hnsw_is_deleted(g, (uint32_t)i) != 0);
    return MESS_OK;
}

int mess_server_shard_entries(const mess_server *s, uint32_t shard,
                              uint8_t *entries, size_t cap)
{
    int rc;
    const struct hnsw *g = view_graph(s, shard, entries, cap, &rc);
    if (!g)
        return rc;
    if (hnsw_count(g))
        memcpy(entries, s->shards[shard].entries, hnsw_count(g) * s->entry_bytes);
    return MESS_OK;
}

int mess_server_shard_neighbors(const mess_server *s, uint32_t shard,
                                uint32_t node, uint32_t level, uint32_t *ids,
                                size_t cap, size_t *n)
{
    const uint32_t *l;
    size_t cnt;
    int rc;
    if (!s || !n || shard >= s->p.shards || (cap && !ids))
        return MESS_EINVAL;
    rc = hnsw_neighbors(s->shards[shard].graph, node, level, &l, &cnt);
    if (rc != MESS_OK)
        return rc;
    *n = cnt;
    if (cap < cnt)
        return MESS_ELIMIT;
    if (cnt)
        memcpy(ids, l, cnt * sizeof *ids);
    return MESS_OK;
}

int mess_server_shard_links(const mess_server *s, uint32_t shard,
                            uint32_t level, size_t *offsets, size_t n_offsets,
                            uint32_t *ids, size_t cap, size_t *n_ids)
{
    const struct hnsw *g;
    size_t i, n, total = 0;
    if (!s || !offsets || !n_ids || shard >= s->p.shards || (cap && !ids))
        return MESS_EINVAL;
    g = s->shards[shard].graph;
    n = hnsw_count(g);
    if (n_offsets < n + 1)
        return MESS_ELIMIT;
    for (i = 0; i < n; i++) {
        const uint32_t *l;
        size_t cnt = 0;
        offsets[i] = total;
        if (level <= hnsw_level(g, (uint32_t)i) &&
            hnsw_neighbors(g, (uint32_t)i, level, &l, &cnt) == MESS_OK) {
            if (ids && total + cnt <= cap)
                memcpy(ids + total, l, cnt * sizeof *ids);
            total += cnt;
        }
    }
    offsets[n] = total;
    *n_ids = total;
    return ids && cap < total ? MESS_ELIMIT : MESS_OK;
}
