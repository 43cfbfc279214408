/*
 * server_state.c - the server state file's body, the server's travel form
 * (mess_server_save / mess_server_load, which mess_server_export and
 * mess_server_import use); statefile.c wraps it in the container.
 */
#include "server.h"
#include "statefile.h"

/* ------------------------------------------------------------------------
 * State file
 *
 * Server body: u32 version (3) | u8 owned | owner tag[16] (zero if not
 *              owned) | per shard: graph | u64 n | n x entry
 * ---------------------------------------------------------------------- */

#define SERVER_BODY_VERSION 3

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
        /* the arena's nodes, then the heap tail's: node order (the
         * arena read ahead as a whole, not page by page) */
        store_arena_sweep(st, 1);
        mess_wr_bytes(&w, st->arena, st->base * s->entry_bytes);
        store_arena_sweep(st, 0);
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
