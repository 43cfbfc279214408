/*
 * server_core.c - the server handle: its allocation and release, its
 * parameters, search setting, owner tag and statistics, and
 * mess_server_new (a server in memory).  The operations on it live in
 * server_apply.c, server_search.c and server_view.c; its directory in
 * src/store (below) and server_open.c / server_checkpoint.c (above).
 */
#include <pthread.h>
#include <sodium.h>

#include "parallel.h"
#include "payload.h"
#include "server.h"
#include "wal.h"

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
    server_search_opts_default(&s->search);
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
