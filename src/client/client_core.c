/*
 * client_core.c - the client handle's machinery that every client
 * operation shares (paper section 4, Figure 6): the key schedule, labels,
 * generations, Route, the coin streams, the handle's lifecycle and
 * settings, and its lock around every operation.  The operations live in
 * client_update.c, client_request.c, client_finish.c and client_state.c,
 * each beside the public entry points that wrap it.
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

#include "client.h"
#include "isohash.h"

/* ------------------------------------------------------------------------
 * The client's locked entry points (mess.h, "Threads"): each call that
 * changes the operation counter, the generation map or the
 * per-handle settings holds the handle's lock for writing throughout, so
 * such calls from several threads are serialized in some order and none
 * sees another half done; finish and save only read that state and hold
 * the lock for reading, so they overlap each other.  The entry points
 * live beside the operations they wrap (client_update.c,
 * client_request.c, client_finish.c, client_state.c).
 * ---------------------------------------------------------------------- */

/* The lock of a client handle, also taken through a const pointer: the
 * state it guards is not the handle's logical value. */
static pthread_rwlock_t *client_rwlock(const mess_client *c)
{
    return &((mess_client *)(uintptr_t)c)->lock;
}

void client_lock(const mess_client *c)
{
    pthread_rwlock_wrlock(client_rwlock(c));
}

void client_lock_read(const mess_client *c)
{
    pthread_rwlock_rdlock(client_rwlock(c));
}

void client_unlock(const mess_client *c)
{
    pthread_rwlock_unlock(client_rwlock(c));
}

/* Gives the caller a filled writer's buffer, or frees it after an error
 * (the allocating entry points leave *buf NULL and *len 0 on any error). */
int wr_hand_over(struct mess_wr *w, int rc, uint8_t **buf, size_t *len)
{
    if (rc != MESS_OK) {
        mess_wr_free(w);
        return rc;
    }
    *buf = w->p;
    *len = w->len;
    return MESS_OK;
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
    c->finish_batched = 1;
    rc = keys_alloc(c);
    if (rc != MESS_OK) {
        pthread_rwlock_destroy(&c->lock);
        free(c);
        return rc;
    }
    *out = c;
    return MESS_OK;
}
