/*
 * state.c - the client and server state files' bodies (serialise and
 * load); statefile.c wraps them in the container.
 */
#include <sodium.h>

#include "isohash.h"
#include "protocol.h"
#include "statefile.h"

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

#define CLIENT_BODY_VERSION 2
#define SERVER_BODY_VERSION 3

int mess_client_save(const mess_client *c, const char *path,
                     const char *passphrase)
{
    return mess_client_save_pass(c, path, passphrase,
                                 passphrase ? strlen(passphrase) : 0);
}

int client_save(const mess_client *c, const char *path,
                const char *passphrase, size_t passphrase_len)
{
    return client_save_as(c, path, passphrase, passphrase_len, 0);
}

int client_save_as(const mess_client *c, const char *path,
                   const char *passphrase, size_t passphrase_len, int create)
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
        rc = (create ? statefile_create : statefile_write)(
            path, STATEFILE_CLIENT, &c->p, w.p, w.len, passphrase,
            passphrase_len, 0600);
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
    client_keys_derive(c);
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
    if (!s || !path || s->held != s->p.shards)
        return MESS_EINVAL; /* the travel form holds every shard */
    rc = server_ready(s, NULL, 0); /* every delta chain a lazy open left */
    if (rc != MESS_OK)
        return rc;
    mess_wr_init(&w);
    mess_wr_u32(&w, SERVER_BODY_VERSION);
    mess_wr_u8(&w, (uint8_t)s->owned);
    mess_wr_bytes(&w, s->owner, MESS_OWNER_BYTES);
    for (j = 0; j < s->p.shards && rc == MESS_OK; j++) {
        const struct shard_store *st = &s->shards[j];
        size_t n = hnsw_count(st->graph);
        rc = hnsw_serialize(st->graph, &w);
        mess_wr_u64(&w, n);
        /* the arena's nodes, then the heap tail's: node order */
        mess_wr_bytes(&w, st->arena, st->base * s->entry_bytes);
        mess_wr_bytes(&w, st->entries, (n - st->base) * s->entry_bytes);
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
        mess_params e;
        if (params_import(expect, &e) != MESS_OK) {
            rc = MESS_EINVAL;
            goto done;
        }
        params_fingerprint(&p, fa);
        params_fingerprint(&e, fb);
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
        struct hnsw_params hp = server_graph_params(&p, j);
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
