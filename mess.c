/*
 * mess.c - the MESS protocol's entry (paper section 4, Figure 6): the
 * client and server handles, the key schedule, labels, generations,
 * Route, the coin streams, and the client's lock around every operation.
 * The operations themselves live in the files protocol.h lists.
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
#include <pthread.h>
#include <sodium.h>

#include "isohash.h"
#include "parallel.h"
#include "protocol.h"
#include "server_store.h"
#include "wal.h"

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


/* ------------------------------------------------------------------------
 * Keys
 * ---------------------------------------------------------------------- */

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

void client_keys_derive(mess_client *c)
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
void client_item_label(const mess_client *c, uint32_t j, uint64_t id,
                       uint32_t gen, uint8_t out[LABEL_BYTES])
{
    uint8_t msg[12];
    mess_store_u64(msg, id);
    mess_store_u32(msg + 8, gen);
    crypto_generichash(out, LABEL_BYTES, msg, sizeof msg, label_key(c, j),
                       KEY_BYTES);
}

/* The generation map entry of id, or NULL (generation 0, never deleted). */
struct gen_entry *client_gen_find(const mess_client *c, uint64_t id)
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
uint32_t client_gen_current(const mess_client *c, uint64_t id)
{
    const struct gen_entry *e = client_gen_find(c, id);
    return e ? e->gen : 0;
}

/* Route(id, M, t): the first t entries of a permutation of [M] drawn by
 * Fisher-Yates from the coin stream (rng.h) keyed by the route key with the
 * id as its stream id: a keyed PRF, independent of the data (section 4.1).
 * mess_rng_below's rejection sampling keeps every permutation equally
 * likely. */
void client_route(const mess_client *c, uint64_t id, uint32_t *out)
{
    uint32_t perm[MESS_MAX_SHARDS], M = c->p.shards, t = c->p.per_item, i;
    struct mess_rng rng;

    mess_rng_init(&rng, c->keys->route, id); /* cannot fail: sodium is up */
    for (i = 0; i < M; i++)
        perm[i] = i;
    for (i = 0; i < t; i++) {
        uint32_t r = i + mess_rng_below(&rng, M - i), tmp = perm[i];
        perm[i] = perm[r];
        perm[r] = tmp;
        out[i] = perm[i];
    }
    mess_rng_wipe(&rng);
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

void client_coins_init(const mess_client *c, struct mess_rng *r, uint64_t op,
                       enum coin_domain d, uint64_t id, uint32_t shard)
{
    mess_rng_init(r, c->deterministic ? c->keys->coin : NULL,
                  coin_stream(op, d, id, shard));
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

int mess_client_params_sized(const mess_client *c, mess_params *out,
                             size_t size)
{
    if (!c || !out)
        return MESS_EINVAL;
    return params_export(&c->p, out, size);
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

int client_alloc(const mess_params *p, mess_client **out)
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

int mess_client_new(const mess_params *in, const float *train, size_t n,
                    const uint8_t *seed, unsigned threads, mess_client **out)
{
    struct isohash_params hp;
    mess_params pp;
    const mess_params *p = &pp;
    mess_client *c;
    int rc;

    if (!in || !train || n == 0 || !out)
        return MESS_EINVAL;
    *out = NULL;
    rc = params_import(in, &pp);
    if (rc != MESS_OK)
        return rc;
    rc = client_alloc(p, &c);
    if (rc != MESS_OK)
        return rc;
    if (seed) {
        static const uint8_t domain[] = "libmess deterministic master key";
        crypto_generichash(c->keys->master, KEY_BYTES, domain, sizeof domain,
                           seed, MESS_SEED_BYTES);
        c->deterministic = 1;
    } else {
        randombytes_buf(c->keys->master, KEY_BYTES);
    }
    client_keys_derive(c);

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

void mess_buf_free(uint8_t *buf)
{
    free(buf);
}

/* ------------------------------------------------------------------------
 * Server
 * ---------------------------------------------------------------------- */

struct hnsw_params server_graph_params(const mess_params *p, uint32_t shard)
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
            store_free_graph(&s->shards[j]);
            free(s->shards[j].entries);
            store_unmap_arena(&s->shards[j]);
            free(s->shards[j].failed_msg);
        }
    store_release_claim(s);
    free(s->dir);
    wal_close(s->wal);
    while (s->npool > 0)
        hnsw_scratch_free(s->pool[--s->npool]);
    mess_workers_free(s->workers);
    pthread_mutex_destroy(&s->pool_lock);
    pthread_mutex_destroy(&s->ready_lock);
    free(s->shards);
    free(s);
}

int mess_server_params_sized(const mess_server *s, mess_params *out,
                             size_t size)
{
    if (!s || !out)
        return MESS_EINVAL;
    return params_export(&s->p, out, size);
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

int server_alloc(const mess_params *p, int with_graphs, mess_server **out)
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
    s->held = p->shards;
    s->entry_bytes = payload_entry_bytes(p);
    s->shards = (struct shard_store *)calloc(p->shards, sizeof *s->shards);
    if (!s->shards || pthread_mutex_init(&s->pool_lock, NULL) != 0) {
        free(s->shards);
        free(s);
        return MESS_ENOMEM;
    }
    if (pthread_mutex_init(&s->ready_lock, NULL) != 0) {
        pthread_mutex_destroy(&s->pool_lock);
        free(s->shards);
        free(s);
        return MESS_ENOMEM;
    }
    for (j = 0; with_graphs && j < p->shards; j++) {
        struct hnsw_params hp = server_graph_params(p, j);
        rc = hnsw_new(&hp, &s->shards[j].graph);
        if (rc != MESS_OK) {
            mess_server_free(s);
            return rc;
        }
    }
    *out = s;
    return MESS_OK;
}

int mess_server_new(const mess_params *in, mess_server **out)
{
    mess_params p;
    int rc;
    if (!in || !out)
        return MESS_EINVAL;
    *out = NULL;
    rc = params_import(in, &p);
    if (rc != MESS_OK)
        return rc;
    return server_alloc(&p, 1, out);
}

int mess_server_stats_get_sized(const mess_server *s, mess_server_stats *caller,
                                size_t size)
{
    mess_server_stats full, *out = &full;
    uint32_t j;
    if (!s || !caller)
        return MESS_EINVAL;
    memset(out, 0, sizeof *out);
    out->size = (uint32_t)sizeof *out;
    out->min_shard = SIZE_MAX;
    out->bytes = sizeof *s + (size_t)s->p.shards * sizeof *s->shards;
    /* a shard whose chain is not applied yet (lazy open) counts what its
     * MANIFEST record and last delta header say; the lock keeps a search
     * from applying one meanwhile */
    pthread_mutex_lock(&((mess_server *)(uintptr_t)s)->ready_lock);
    for (j = 0; j < s->p.shards; j++) {
        const struct shard_store *st = &s->shards[j];
        size_t live, n, del;
        if (!st->graph)
            continue; /* a subset server: not held */
        n = st->pending ? (size_t)st->nodes : hnsw_count(st->graph);
        del = st->pending ? (size_t)st->pending_deleted : hnsw_deleted(st->graph);
        live = n - del;
        out->entries += n;
        out->live += live;
        out->deleted += del;
        out->bytes += hnsw_bytes(st->graph) + st->cap * s->entry_bytes;
        if (live < out->min_shard)
            out->min_shard = live;
        if (live > out->max_shard)
            out->max_shard = live;
    }
    pthread_mutex_unlock(&((mess_server *)(uintptr_t)s)->ready_lock);
    return mess_struct_out(caller, size, out,
                           MESS_FIELD_END(mess_server_stats, max_shard),
                           MESS_SERVER_STATS_MIN_SIZE);
}

/* ------------------------------------------------------------------------
 * The client's locked entry points (mess.h, "Threads"): each call that
 * changes the operation counter, the generation map or the
 * per-handle settings holds the handle's lock for writing throughout, so
 * such calls from several threads are serialized in some order and none
 * sees another half done; finish and save only read that state and hold
 * the lock for reading, so they overlap each other.
 * ---------------------------------------------------------------------- */

/* Gives the caller a filled writer's buffer, or frees it after an error
 * (the allocating calls below leave *buf NULL and *len 0 on any error). */
static int wr_hand_over(struct mess_wr *w, int rc, uint8_t **buf, size_t *len)
{
    if (rc != MESS_OK) {
        mess_wr_free(w);
        return rc;
    }
    *buf = w->p;
    *len = w->len;
    return MESS_OK;
}

int mess_client_upload(mess_client *c, const uint64_t *ids,
                       const float *vectors, size_t n, unsigned threads,
                       uint8_t **buf, size_t *len)
{
    struct mess_wr w;
    int rc;
    if (!c || !buf || !len)
        return MESS_EINVAL;
    *buf = NULL;
    *len = 0;
    mess_wr_init(&w);
    client_lock(c);
    rc = client_upload(c, ids, vectors, n, threads, &w);
    client_unlock(c);
    return wr_hand_over(&w, rc, buf, len);
}

/* The _into calls ("Caller-owned buffers"): *len is the size needed; a
 * buffer below it is MESS_ELIMIT before anything changes. */
int mess_client_upload_into(mess_client *c, const uint64_t *ids,
                            const float *vectors, size_t n, unsigned threads,
                            uint8_t *buf, size_t cap, size_t *len)
{
    struct mess_wr w;
    int rc;
    if (!c || !buf || !len)
        return MESS_EINVAL;
    *len = mess_upload_size(&c->p, n);
    if (*len == 0)
        return MESS_ELIMIT; /* n * t records overflow size_t */
    if (cap < *len)
        return MESS_ELIMIT;
    mess_wr_init_fixed(&w, buf, cap);
    client_lock(c);
    rc = client_upload(c, ids, vectors, n, threads, &w);
    client_unlock(c);
    return rc;
}

int mess_client_delete(mess_client *c, const uint64_t *ids, size_t n,
                       uint8_t **buf, size_t *len)
{
    struct mess_wr w;
    int rc;
    if (!c || !buf || !len)
        return MESS_EINVAL;
    *buf = NULL;
    *len = 0;
    mess_wr_init(&w);
    client_lock(c);
    rc = client_delete(c, ids, n, &w);
    client_unlock(c);
    return wr_hand_over(&w, rc, buf, len);
}

int mess_client_delete_into(mess_client *c, const uint64_t *ids, size_t n,
                            uint8_t *buf, size_t cap, size_t *len)
{
    struct mess_wr w;
    int rc;
    if (!c || !buf || !len)
        return MESS_EINVAL;
    *len = mess_delete_size(&c->p, n);
    if (*len == 0)
        return MESS_ELIMIT;
    if (cap < *len)
        return MESS_ELIMIT;
    mess_wr_init_fixed(&w, buf, cap);
    client_lock(c);
    rc = client_delete(c, ids, n, &w);
    client_unlock(c);
    return rc;
}

int mess_client_request(mess_client *c, const float *q, size_t pool,
                        mess_query **q_out, uint8_t **req, size_t *req_len)
{
    struct mess_wr w;
    int rc;
    if (!c || !q_out || !req || !req_len)
        return MESS_EINVAL;
    *q_out = NULL;
    *req = NULL;
    *req_len = 0;
    mess_wr_init(&w);
    client_lock(c);
    rc = client_request(c, q, pool, q_out, &w);
    client_unlock(c);
    return wr_hand_over(&w, rc, req, req_len);
}

int mess_client_request_into(mess_client *c, const float *q, size_t pool,
                             mess_query **q_out, uint8_t *req, size_t cap,
                             size_t *req_len)
{
    struct mess_wr w;
    int rc;
    if (!c || !q_out || !req || !req_len)
        return MESS_EINVAL;
    *q_out = NULL;
    *req_len = mess_request_size(&c->p);
    if (cap < *req_len)
        return MESS_ELIMIT;
    mess_wr_init_fixed(&w, req, cap);
    client_lock(c);
    rc = client_request(c, q, pool, q_out, &w);
    client_unlock(c);
    return rc;
}

struct request_batch {
    const mess_client *c;
    const float *queries;
    size_t pool, req_bytes;
    uint64_t op0;
    mess_query **q_out;
    uint8_t *reqs;
};

static int request_item(void *ctx, size_t i, unsigned worker)
{
    struct request_batch *b = (struct request_batch *)ctx;
    struct mess_wr w;
    MESS_UNUSED(worker);
    mess_wr_init_fixed(&w, b->reqs + i * b->req_bytes, b->req_bytes);
    return client_request_build(b->c, b->queries + i * (size_t)b->c->p.dim, b->pool,
                         b->op0 + i, &b->q_out[i], &w);
}

int mess_client_request_batch(mess_client *c, const float *queries, size_t nq,
                              size_t pool, mess_workers *w, mess_query **q_out,
                              uint8_t *reqs, size_t cap, size_t *req_len)
{
    struct request_batch b;
    size_t i, need;
    int rc;
    if (!c || (!queries && nq) || (!q_out && nq) || (!reqs && nq) || !req_len)
        return MESS_EINVAL;
    for (i = 0; i < nq; i++)
        q_out[i] = NULL;
    *req_len = mess_request_size(&c->p);
    if (mess_mul_size(nq, *req_len, &need) != MESS_OK || cap < need)
        return MESS_ELIMIT;
    if (nq > 0 && mess_mul_size(nq, c->p.dim, &need) != MESS_OK)
        return MESS_ELIMIT;
    b.c = c;
    b.queries = queries;
    b.pool = pool;
    b.req_bytes = *req_len;
    b.q_out = q_out;
    b.reqs = reqs;
    client_lock(c);
    b.op0 = c->op_counter;
    rc = workers_for(w, nq, request_item, &b);
    if (rc == MESS_OK)
        c->op_counter += nq;
    client_unlock(c);
    if (rc != MESS_OK)
        for (i = 0; i < nq; i++) {
            mess_query_free(q_out[i]);
            q_out[i] = NULL;
        }
    return rc;
}

int mess_client_finish_sized(const mess_client *c, const mess_query *q,
                             const uint8_t *resp, size_t resp_len, size_t k,
                             uint64_t *ids, float *dists, size_t *n_out,
                             mess_finish_stats *stats, size_t stats_size)
{
    mess_finish_stats st;
    int rc;
    if (!c)
        return MESS_EINVAL;
    if (stats && (stats_size < MESS_FINISH_STATS_MIN_SIZE || stats_size > UINT32_MAX))
        return MESS_EINVAL; /* "Growable structs": nothing read or written */
    memset(&st, 0, sizeof st);
    client_lock_read(c);
    rc = client_finish(c, q, resp, resp_len, k, ids, dists, n_out,
                       stats ? &st : NULL, 0);
    client_unlock(c);
    if (stats) {
        st.size = (uint32_t)sizeof st;
        mess_struct_out(stats, stats_size, &st,
                        MESS_FIELD_END(mess_finish_stats, unopened),
                        MESS_FINISH_STATS_MIN_SIZE);
    }
    return rc;
}

struct finish_batch {
    const mess_client *c;
    const mess_query *const *qs;
    const uint8_t *const *resps;
    const size_t *resp_lens;
    size_t k, stats_size;
    uint64_t *ids;
    float *dists;
    size_t *n_out;
    uint8_t *stats; /* the caller's array, stats_size bytes per item */
    int *status;
};

static int finish_item(void *ctx, size_t i, unsigned worker)
{
    struct finish_batch *b = (struct finish_batch *)ctx;
    mess_finish_stats st;
    int rc;
    MESS_UNUSED(worker);
    memset(&st, 0, sizeof st);
    b->n_out[i] = 0;
    rc = b->resps[i] ? client_finish(b->c, b->qs[i], b->resps[i], b->resp_lens[i],
                                     b->k, b->k ? b->ids + i * b->k : NULL,
                                     b->k ? b->dists + i * b->k : NULL,
                                     &b->n_out[i], &st, 1)
                     : MESS_EINVAL;
    if (rc != MESS_OK)
        b->n_out[i] = 0;
    if (b->stats) {
        st.size = (uint32_t)sizeof st;
        mess_struct_out(b->stats + i * b->stats_size, b->stats_size, &st,
                        MESS_FIELD_END(mess_finish_stats, unopened),
                        MESS_FINISH_STATS_MIN_SIZE);
    }
    if (b->status)
        b->status[i] = rc;
    return MESS_OK; /* items are independent */
}

int mess_client_finish_batch_sized(const mess_client *c,
                                   const mess_query *const *qs,
                                   const uint8_t *const *resps,
                                   const size_t *resp_lens, size_t n, size_t k,
                                   mess_workers *w, uint64_t *ids,
                                   float *dists, size_t *n_out,
                                   mess_finish_stats *stats, size_t stats_size,
                                   int *status)
{
    struct finish_batch b;
    int *codes = status;
    size_t i, x;
    int rc;
    if (!c || (n && (!qs || !resps || !resp_lens || !n_out ||
                     (k && (!ids || !dists)))))
        return MESS_EINVAL;
    if (stats && (stats_size < MESS_FINISH_STATS_MIN_SIZE || stats_size > UINT32_MAX))
        return MESS_EINVAL; /* "Growable structs" */
    if (mess_mul_size(n, k, &x) != MESS_OK ||
        (stats && mess_mul_size(n, stats_size, &x) != MESS_OK))
        return MESS_ELIMIT;
    if (n == 0)
        return MESS_OK;
    if (!codes) {
        codes = (int *)mess_malloc_array(n, sizeof *codes);
        if (!codes)
            return MESS_ENOMEM;
    }
    b.c = c;
    b.qs = qs;
    b.resps = resps;
    b.resp_lens = resp_lens;
    b.k = k;
    b.stats_size = stats_size;
    b.ids = ids;
    b.dists = dists;
    b.n_out = n_out;
    b.stats = (uint8_t *)stats;
    b.status = codes;
    client_lock_read(c);
    rc = workers_for(w, n, finish_item, &b);
    client_unlock(c);
    for (i = 0; rc == MESS_OK && i < n; i++)
        rc = codes[i];
    if (codes != status)
        free(codes);
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

int mess_client_save_new(const mess_client *c, const char *path,
                         const char *passphrase, size_t passphrase_len)
{
    int rc;
    if (!c)
        return MESS_EINVAL;
    client_lock_read(c);
    rc = client_save_as(c, path, passphrase, passphrase_len, 1);
    client_unlock(c);
    return rc;
}

int mess_client_codes(const mess_client *c, const float *x, uint64_t *codes)
{
    if (!c || !x || !codes)
        return MESS_EINVAL;
    return isohash_hash_all(c->hash, x, codes);
}

