/*
 * client_update.c - the client's insert and delete messages (paper section
 * 4.1): route each id to t shards, label, hash, perturb (storage coins)
 * and seal each copy; delete records name the same labels.
 */
#include <math.h>
#include <sodium.h>

#include "client.h"
#include "isohash.h"
#include "lshrr.h"
#include "metric.h"
#include "parallel.h"
#include "rng.h"

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
    size_t n = u->counts[j], i;
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
        payload_seal(p, aead_key(c, j), payload_ctx(j, u->gens[lr->item]),
                     u->ids[lr->item], u->vectors + lr->item * p->dim, plain,
                     wire_upload_record_put(rec, p, j, lr->label, code));
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

int client_upload(mess_client *c, const uint64_t *ids,
                  const float *vectors, size_t n, unsigned threads,
                  struct mess_wr *w)
{
    struct shard_upload u;
    uint32_t M, t, j, route_buf[MESS_MAX_SHARDS], *gens = NULL;
    size_t i, total, rec_bytes, *fill = NULL;
    uint8_t *body;
    int rc;

    if (!c || (!ids && n) || (!vectors && n))
        return MESS_EINVAL;
    if (n > 0 && mess_mul_size(n, c->p.dim, &total) != MESS_OK)
        return MESS_ELIMIT;
    for (i = 0; i < n * (size_t)c->p.dim; i++)
        if (!isfinite(vectors[i]))
            return MESS_EINVAL; /* a NaN would outrank every distance in finish */
    /* under cosine a zero vector has no direction: no distance to it means
     * anything (metric_distance calls it 1 from everything) */
    if (c->p.metric == MESS_METRIC_COSINE)
        for (i = 0; i < n; i++)
            if (vector_is_zero(vectors + i * c->p.dim, c->p.dim))
                return MESS_EINVAL;
    for (i = 0; i < n; i++)
        if (payload_unencodable(&c->p, vectors + i * c->p.dim) < c->p.dim)
            return MESS_EINVAL; /* u8 payloads: not a byte vector */
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
        const struct gen_entry *e = client_gen_find(c, ids[i]);
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
        client_route(c, ids[i], route_buf);
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
        client_route(c, ids[i], route_buf);
        for (j = 0; j < t; j++) {
            uint32_t s = route_buf[j];
            client_item_label(c, s, ids[i], gens[i], u.recs[s][fill[s]].label);
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

    wire_records_begin(w, WIRE_UPLOAD, &c->p, c->owner, (uint64_t)(n * t));
    body = mess_wr_reserve(w, total);
    if (!body) {
        rc = w->err;
        goto done;
    }
    u.out = body;
    rc = parallel_for(M, threads, upload_shard, &u);
    if (rc != MESS_OK)
        goto done;
    /* committed: the re-inserted ids are live at their new generation */
    for (i = 0; i < n; i++) {
        struct gen_entry *e = client_gen_find(c, ids[i]);
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
        fresh += client_gen_find(c, ids[i]) == NULL;
    if (fresh > 0) {
        add = (uint64_t *)mess_malloc_array(fresh, sizeof *add);
        merged = (struct gen_entry *)mess_malloc_array(c->ngens + fresh, sizeof *merged);
        if (!add || !merged) {
            free(add);
            free(merged);
            return MESS_ENOMEM;
        }
        for (i = 0, k = 0; i < n; i++)
            if (!client_gen_find(c, ids[i]))
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
        client_gen_find(c, ids[i])->deleted = 1;
    return MESS_OK;
}

int client_delete(mess_client *c, const uint64_t *ids, size_t n,
                  struct mess_wr *w)
{
    struct del_rec *recs;
    uint32_t route_buf[MESS_MAX_SHARDS], j, t;
    size_t i, k = 0, total;
    int rc;

    if (!c || (!ids && n))
        return MESS_EINVAL;
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
        uint32_t gen = client_gen_current(c, ids[i]);
        client_route(c, ids[i], route_buf);
        for (j = 0; j < t; j++, k++) {
            recs[k].shard = route_buf[j];
            client_item_label(c, route_buf[j], ids[i], gen, recs[k].label);
        }
    }
    qsort(recs, total, sizeof *recs, del_rec_cmp);
    wire_records_begin(w, WIRE_DELETE, &c->p, c->owner, (uint64_t)total);
    for (k = 0; k < total; k++)
        wire_delete_record_put(w, recs[k].shard, recs[k].label);
    free(recs);
    rc = w->err;
    if (rc == MESS_OK)
        rc = gen_mark_deleted(c, ids, n);
    return rc;
}

/* ------------------------------------------------------------------------
 * The public entry points (mess.h): each holds the handle's lock around
 * the operation, for writing (client_core.c, "The client's locked entry points").
 * ---------------------------------------------------------------------- */

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
