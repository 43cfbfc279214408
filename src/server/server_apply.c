/*
 * server_apply.c - the server applies upload and delete messages to its
 * shards (HNSW graphs over the perturbed codes, plus the ciphertexts) and
 * compacts deleted nodes away.
 */
#include <errno.h>

#include <sodium.h>

#include "parallel.h"
#include "server.h"

/* Makes room for `more` ciphertexts in shard j. */
static int store_reserve(mess_server *s, struct shard_store *st, size_t more)
{
    size_t need = hnsw_count(st->graph) + more, cap, bytes;
    uint8_t *q;
    int rc = hnsw_reserve(st->graph, need); /* the same policy for the graph */
    if (rc != MESS_OK)
        return rc;
    need -= st->base; /* the heap holds the nodes past the arena */
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

/* The records of an upload or delete: header, then the owner tag (this
 * server's client only), then the records, checked in that order. */
static int server_records(const mess_server *s, enum wire_kind kind,
                          const uint8_t *buf, size_t len,
                          struct wire_records *recs, const uint8_t **owner)
{
    struct mess_rd r;
    int rc;
    mess_rd_init(&r, buf, len);
    rc = wire_check_header_owned(&r, kind, &s->p, owner);
    if (rc == MESS_OK)
        rc = mess_server_check_owner(s, *owner);
    if (rc == MESS_OK)
        rc = wire_records_parse(&r, kind, &s->p, recs);
    return rc;
}

struct apply_job {
    mess_server *s;
    struct wire_records recs;
    size_t *start; /* M + 1: records of shard j are [start[j], start[j+1]) */
};

static int apply_shard(void *ctx, size_t jj, unsigned worker)
{
    struct apply_job *a = (struct apply_job *)ctx;
    mess_server *s = a->s;
    struct shard_store *st = &s->shards[jj];
    size_t i;
    uint64_t code[MESS_MAX_BITS / 64];
    (void)worker;

    for (i = a->start[jj]; i < a->start[jj + 1]; i++) {
        const uint8_t *rec = wire_record(&a->recs, i), *entry;
        uint32_t node;
        int rc;
        entry = wire_upload_record_code(rec, &s->p, code);
        rc = hnsw_add(st->graph, code, label_load(wire_record_label(rec)), &node);
        if (rc != MESS_OK)
            return rc;
        memcpy(st->entries + ((size_t)node - st->base) * s->entry_bytes, entry,
               s->entry_bytes);
    }
    if (a->start[jj + 1] > a->start[jj])
        st->dirty = 1;
    return MESS_OK;
}

int mess_server_apply_upload(mess_server *s, const uint8_t *buf, size_t len,
                             unsigned threads)
{
    struct apply_job a;
    const uint8_t *owner;
    size_t i;
    uint32_t prev_shard = 0;
    const uint8_t *prev_label = NULL;
    int rc;

    if (!s || !buf)
        return MESS_EINVAL;
    rc = server_records(s, WIRE_UPLOAD, buf, len, &a.recs, &owner);
    if (rc != MESS_OK)
        return rc;
    a.s = s;
    a.start = (size_t *)calloc((size_t)s->p.shards + 1, sizeof *a.start);
    if (!a.start)
        return MESS_ENOMEM;
    /* Validate everything before changing anything: records strictly
     * ordered by (shard, label), shards in range, labels not stored yet. */
    for (i = 0; i < a.recs.n; i++) {
        const uint8_t *rec = wire_record(&a.recs, i);
        uint32_t shard = wire_record_shard(rec);
        const uint8_t *label = wire_record_label(rec);
        if (shard < s->p.shards && !server_holds(s, shard)) {
            free(a.start);
            return MESS_ESTATE; /* a subset server: another holder's shard */
        }
        if (shard >= s->p.shards ||
            (i > 0 && (shard < prev_shard ||
                       (shard == prev_shard &&
                        memcmp(label, prev_label, LABEL_BYTES) <= 0)))) {
            free(a.start);
            return MESS_EFORMAT;
        }
        if (i == 0 || shard != prev_shard) {
            /* a shard's delta chain is applied before it is read (lazy
             * open); records are in shard order: once per shard */
            rc = server_ready(s, &shard, 1);
            if (rc != MESS_OK) {
                free(a.start);
                return rc;
            }
        }
        if (hnsw_find(s->shards[shard].graph, label_load(label), NULL) == MESS_OK) {
            free(a.start);
            return MESS_ESTATE; /* already stored: the server's state, not the buffer */
        }
        a.start[shard + 1]++;
        prev_shard = shard;
        prev_label = label;
    }
    for (i = 0; i < s->p.shards; i++)
        a.start[i + 1] += a.start[i];
    for (i = 0; i < s->p.shards; i++) {
        if (a.start[i + 1] == a.start[i])
            continue; /* also every shard a subset server does not hold */
        rc = store_reserve(s, &s->shards[i], a.start[i + 1] - a.start[i]);
        if (rc != MESS_OK) {
            size_t k;
            for (k = 0; k <= i; k++)
                if (server_holds(s, (uint32_t)k))
                    hnsw_unreserve(s->shards[k].graph);
            free(a.start);
            return rc;
        }
    }
    /* Every allocation the inserts need is made above (store_reserve:
     * arrays, label map, scratch and link blocks of the nodes to come),
     * and the checks above exclude every other error of hnsw_add, so
     * nothing below fails half-way.  A directory-backed server logs the
     * buffer before it changes anything (store.h). */
    rc = store_log(s, WIRE_UPLOAD, buf, len);
    if (rc != MESS_OK) {
        int err = errno; /* EBUSY, ESTALE or the I/O error, for the caller */
        for (i = 0; i < s->p.shards; i++)
            if (server_holds(s, (uint32_t)i))
                hnsw_unreserve(s->shards[i].graph);
        free(a.start);
        errno = err;
        return rc;
    }
    rc = parallel_for(s->p.shards, threads, apply_shard, &a);
    free(a.start);
    if (rc == MESS_OK && !s->owned) {
        memcpy(s->owner, owner, MESS_OWNER_BYTES);
        s->owned = 1;
        s->owner_dirty = 1;
    }
    return rc;
}

int mess_server_count_stored(const mess_server *s, const uint8_t *buf, size_t len,
                             size_t *stored, size_t *records)
{
    struct wire_records recs;
    const uint8_t *owner;
    size_t i, found = 0;
    uint64_t code[MESS_MAX_BITS / 64];
    int rc;

    if (stored)
        *stored = 0;
    if (records)
        *records = 0;
    if (!s || !buf || !stored)
        return MESS_EINVAL;
    rc = server_records(s, WIRE_UPLOAD, buf, len, &recs, &owner);
    if (rc != MESS_OK)
        return rc;
    for (i = 0; i < recs.n; i++) {
        const uint8_t *rec = wire_record(&recs, i);
        uint32_t shard = wire_record_shard(rec), node;
        if (shard >= s->p.shards)
            return MESS_EFORMAT;
        if (!server_holds(s, shard))
            return MESS_ESTATE; /* a subset server: another holder's shard */
        /* its delta chain (lazy open) is applied before it is read */
        if ((i == 0 || shard != wire_record_shard(wire_record(&recs, i - 1))) &&
            (rc = server_ready(s, &shard, 1)) != MESS_OK)
            return rc;
        if (hnsw_find(s->shards[shard].graph, label_load(wire_record_label(rec)), &node) ==
            MESS_OK) {
            /* Stored, but is it this record?  Its entry (the sealed id and
             * vector) is a function of the client's keys, the shard, the
             * id's generation (which the label names too), the id and the
             * vector alone (payload.c: a synthetic IV, no random nonce;
             * each payload encoding is exact or computed in a fixed
             * order), so the same row encoded again gives the same bytes,
             * a comparison any holder of the buffer could make; other
             * bytes mean another vector under this id (another file's
             * rows at the same --first-id), which a resume must not skip. */
            const uint8_t *entry = wire_upload_record_code(rec, &s->p, code);
            if (memcmp(shard_entry(&s->shards[shard], s->entry_bytes, node), entry,
                       s->entry_bytes) != 0) {
                errno = EEXIST;
                return MESS_ESTATE;
            }
            found++;
        }
    }
    *stored = found;
    if (records)
        *records = recs.n;
    return MESS_OK;
}

int mess_server_apply_delete(mess_server *s, const uint8_t *buf, size_t len,
                             size_t *missing)
{
    struct wire_records recs;
    const uint8_t *owner;
    size_t i, miss = 0;
    int rc;

    if (missing)
        *missing = 0;
    if (!s || !buf)
        return MESS_EINVAL;
    rc = server_records(s, WIRE_DELETE, buf, len, &recs, &owner);
    if (rc != MESS_OK)
        return rc;
    for (i = 0; i < recs.n; i++)
        if (wire_record_shard(wire_record(&recs, i)) >= s->p.shards)
            return MESS_EFORMAT;
    for (i = 0; i < recs.n; i++) {
        uint32_t shard = wire_record_shard(wire_record(&recs, i));
        if (!server_holds(s, shard))
            return MESS_ESTATE; /* a subset server: another holder's shard */
        if ((i == 0 || shard != wire_record_shard(wire_record(&recs, i - 1))) &&
            (rc = server_ready(s, &shard, 1)) != MESS_OK)
            return rc; /* its delta chain (lazy open) could not be applied */
    }
    rc = store_log(s, WIRE_DELETE, buf, len);
    if (rc != MESS_OK)
        return rc;
    for (i = 0; i < recs.n; i++) {
        const uint8_t *rec = wire_record(&recs, i);
        struct shard_store *st = &s->shards[wire_record_shard(rec)];
        rc = hnsw_delete(st->graph, label_load(wire_record_label(rec)));
        if (rc == MESS_ENOTFOUND)
            miss++;
        else if (rc != MESS_OK)
            return rc;
        else
            st->dirty = 1;
    }
    if (missing)
        *missing = miss;
    return MESS_OK;
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

    if (!st->graph || hnsw_deleted(st->graph) == 0)
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
    store_arena_sweep(st, 1); /* every live entry, in arena order: read ahead */
    for (i = 0; i < n; i++)
        if (map[i] != UINT32_MAX)
            memcpy(entries + (size_t)map[i] * s->entry_bytes,
                   shard_entry(st, s->entry_bytes, i), s->entry_bytes);
    store_arena_sweep(st, 0);
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
    rc = server_ready(s, NULL, 0); /* every chain a lazy open left */
    if (rc != MESS_OK)
        return rc;
    a.s = s;
    a.fresh = (struct shard_store *)calloc(s->p.shards, sizeof *a.fresh);
    if (!a.fresh)
        return MESS_ENOMEM;
    rc = parallel_for(s->p.shards, threads, compact_shard, &a);
    if (rc == MESS_OK) {
        /* a directory-backed server logs the compaction before the
         * handle takes the new shards (store.h); nothing to
         * compact is nothing to log */
        int any = 0;
        for (j = 0; j < s->p.shards; j++)
            any |= a.fresh[j].graph != NULL;
        if (any)
            rc = store_log_compact(s);
    }
    for (j = 0; j < s->p.shards; j++) {
        struct shard_store *st = &s->shards[j], *f = &a.fresh[j];
        if (!f->graph) {
            /* a compaction also folds the shard's delta chain: the next
             * checkpoint writes its graph file anew (docs/PROTOCOL.md
             * "Lazy apply") */
            if (rc == MESS_OK && st->graph && st->chain_len > 0)
                st->fold = 1;
            continue;
        }
        if (rc == MESS_OK) {
            /* the new shard lives in the heap; a directory-backed server
             * writes it to fresh files at the next checkpoint */
            store_free_graph(st);
            free(st->entries);
            store_unmap_arena(st);
            st->graph = f->graph;
            st->entries = f->entries;
            st->cap = f->cap;
            st->base = 0;
            st->dirty = 1;
            st->rewrite = 1;
        } else {
            hnsw_free(f->graph);
            free(f->entries);
        }
    }
    free(a.fresh);
    return rc;
}
