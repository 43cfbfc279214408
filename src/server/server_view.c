/*
 * server_view.c - the read-only view of a server's shards (what the
 * untrusted server can see), for the leakage evaluation.
 */
#include "server.h"

/* ------------------------------------------------------------------------
 * Read-only server view (what the untrusted server can see, per shard)
 * ---------------------------------------------------------------------- */

/* Shard `shard`'s graph in *g, once the handle and the index are checked
 * and its delta chain is applied (a lazy open's: server_ready, whose
 * failure is returned). */
static int view_shard(const mess_server *s, uint32_t shard, const struct hnsw **g)
{
    int rc;
    *g = NULL;
    if (!s || !server_holds(s, shard))
        return MESS_EINVAL;
    if ((rc = server_ready(s, &shard, 1)) != MESS_OK)
        return rc;
    *g = s->shards[shard].graph;
    return MESS_OK;
}

/* The shard's graph after view_shard and a check that `cap` output slots
 * hold every node; NULL with *rc set otherwise. */
static const struct hnsw *view_graph(const mess_server *s, uint32_t shard,
                                     const void *out, size_t cap, int *rc)
{
    const struct hnsw *g;
    *rc = out ? view_shard(s, shard, &g) : MESS_EINVAL;
    if (*rc != MESS_OK)
        return NULL;
    if (cap < hnsw_count(g)) {
        *rc = MESS_ELIMIT;
        return NULL;
    }
    *rc = MESS_OK;
    return g;
}

int mess_server_shard_nodes(const mess_server *s, uint32_t shard, size_t *nodes)
{
    const struct hnsw *g;
    int rc = nodes ? view_shard(s, shard, &g) : MESS_EINVAL;
    if (rc != MESS_OK)
        return rc;
    *nodes = hnsw_count(g);
    return MESS_OK;
}

int mess_server_shard_entry_point(const mess_server *s, uint32_t shard,
                                  uint32_t *node)
{
    const struct hnsw *g;
    int rc = node ? view_shard(s, shard, &g) : MESS_EINVAL;
    if (rc != MESS_OK)
        return rc;
    *node = hnsw_entry_point(g);
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
    {
        const struct shard_store *st = &s->shards[shard];
        size_t i, n = hnsw_count(g);
        store_arena_sweep(st, 1); /* the whole arena: read ahead */
        for (i = 0; i < n; i++)
            memcpy(entries + i * s->entry_bytes, shard_entry(st, s->entry_bytes, i),
                   s->entry_bytes);
        store_arena_sweep(st, 0);
    }
    return MESS_OK;
}

int mess_server_shard_neighbors(const mess_server *s, uint32_t shard,
                                uint32_t node, uint32_t level, uint32_t *ids,
                                size_t cap, size_t *n)
{
    const struct hnsw *g;
    const uint32_t *l;
    size_t cnt;
    int rc = n && !(cap && !ids) ? view_shard(s, shard, &g) : MESS_EINVAL;
    if (rc != MESS_OK)
        return rc;
    rc = hnsw_neighbors(g, node, level, &l, &cnt);
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
    int rc = offsets && n_ids && !(cap && !ids) ? view_shard(s, shard, &g) : MESS_EINVAL;
    if (rc != MESS_OK)
        return rc;
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
