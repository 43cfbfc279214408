/*
 * server_search.c - the server answers a request: each shard's graph is
 * searched by Hamming distance for its budget, and the hits' ciphertexts
 * are returned in the response (paper section 4.2).
 */
#include <pthread.h>

#include "parallel.h"
#include "protocol.h"

struct search_job {
    const mess_server *s;
    const struct wire_request *req;
    struct hnsw_scratch **scratch; /* per worker, `width` each (1 if width 0) */
    struct hnsw_hit **hits;        /* per shard, budget entries */
    size_t *found;                 /* per shard */
    const uint32_t *list;          /* the shards searched (NULL: all M) */
    struct hnsw_job *jobs;         /* per listed shard (width > 0) */
    unsigned width;                /* searches in flight per worker */
    size_t chunk, n;               /* listed shards per work item, in all */
};

/* Searches in flight per worker (hnsw_search_many); 0 searches the shards
 * one after the other with hnsw_search, as before it (kept for the tests
 * and `mess bench server`, which compare the two). */
static unsigned search_width = SERVER_SEARCH_WIDTH;

int server_search_set_width(unsigned width)
{
    if (width > HNSW_MANY_MAX)
        return MESS_EINVAL;
    search_width = width;
    return MESS_OK;
}

unsigned server_search_get_width(void)
{
    return search_width;
}

/* Entries ahead whose lines the response copy prefetches (0: none, the
 * copy before it); server_search_set_copy_ahead for the benchmark. */
static unsigned copy_ahead = SERVER_COPY_AHEAD;

void server_search_set_copy_ahead(unsigned ahead)
{
    copy_ahead = ahead;
}

static void prefetch_entry(const uint8_t *p, size_t bytes)
{
#if defined(__GNUC__)
    size_t off;
    for (off = 0; off < bytes; off += 64)
        __builtin_prefetch(p + off);
    __builtin_prefetch(p + bytes - 1);
#else
    (void)p;
    (void)bytes;
#endif
}

/* Hits shard j can return for a budget: never more than its live nodes, so
 * a request with huge budgets cannot make the server allocate more than
 * its index holds (the results are the same). */
static size_t search_room(const mess_server *s, uint32_t j, uint32_t budget)
{
    size_t live = hnsw_live(s->shards[j].graph);
    return budget < live ? budget : live;
}

static int search_shard(struct search_job *sj, size_t jj, unsigned worker)
{
    const mess_server *s = sj->s;
    uint32_t j = sj->list ? sj->list[jj] : (uint32_t)jj;
    uint32_t budget = wire_request_budget(sj->req, j);
    uint64_t code[MESS_MAX_BITS / 64];
    size_t ef, room = search_room(s, j, budget);

    sj->found[j] = 0;
    if (budget == 0 || room == 0)
        return MESS_OK;
    wire_request_code(sj->req, &s->p, j, code);
    ef = s->p.ef_search > budget ? s->p.ef_search : budget;
    return hnsw_search(s->shards[j].graph, sj->scratch[worker], code, room, ef,
                       sj->hits[j], &sj->found[j]);
}

/* One work item: listed shards [item * chunk, ...) of the request. */
static int search_chunk(void *ctx, size_t item, unsigned worker)
{
    struct search_job *sj = (struct search_job *)ctx;
    size_t lo = item * sj->chunk, hi = lo + sj->chunk, i;
    int rc = MESS_OK;
    if (hi > sj->n)
        hi = sj->n;
    if (sj->width == 0) {
        for (i = lo; i < hi && rc == MESS_OK; i++)
            rc = search_shard(sj, i, worker);
        return rc;
    }
    rc = hnsw_search_many(sj->jobs + lo, hi - lo, sj->scratch + (size_t)worker * sj->width,
                          hi - lo < sj->width ? (unsigned)(hi - lo) : sj->width);
    for (i = lo; i < hi; i++)
        sj->found[sj->list ? sj->list[i] : (uint32_t)i] = sj->jobs[i].n_out;
    return rc;
}

/* The server's persistent workers for a search on `threads` threads, or
 * NULL (another search holds them, or they cannot be made): the caller
 * then starts threads for this search alone. */
static mess_workers *workers_take(const mess_server *cs, unsigned threads)
{
    mess_server *s = (mess_server *)(uintptr_t)cs; /* not logical state */
    mess_workers *w = NULL;
    pthread_mutex_lock(&s->pool_lock);
    if (!s->workers_busy) {
        if (s->workers && mess_workers_threads(s->workers) != threads) {
            mess_workers_free(s->workers);
            s->workers = NULL;
        }
        if (!s->workers && mess_workers_new(threads, &s->workers) != MESS_OK)
            s->workers = NULL;
        if (s->workers) {
            w = s->workers;
            s->workers_busy = 1;
        }
    }
    pthread_mutex_unlock(&s->pool_lock);
    return w;
}

static void workers_give(const mess_server *cs)
{
    mess_server *s = (mess_server *)(uintptr_t)cs;
    pthread_mutex_lock(&s->pool_lock);
    s->workers_busy = 0;
    pthread_mutex_unlock(&s->pool_lock);
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

/* Whether the server holds shard j's graph (a server opened on a shard
 * subset does not hold the others). */
static int holds_shard(const mess_server *s, uint32_t j)
{
    return s->shards[j].graph != NULL;
}

/* The shards a search covers: all M (nsel 0: a whole response) or a shard
 * set (a partial response, shards in increasing order). */
struct search_sel {
    const uint32_t *shards; /* the caller's set, any order */
    size_t n;               /* 0: every shard */
};

/* The response goes to a malloc'd buffer (*resp, when resp != NULL) or
 * into the caller's buf of cap bytes (MESS_ELIMIT if smaller than the
 * response, whose size *resp_len then holds).  With a shard set it is a
 * partial response; each shard's count and entries are the same bytes
 * either way. */
static int server_search(const mess_server *s, const uint8_t *req,
                         size_t req_len, const struct search_sel *sel,
                         unsigned threads, uint8_t **resp, uint8_t *buf,
                         size_t cap, size_t *resp_len)
{
    struct wire_request rq;
    struct search_job sj;
    struct hnsw_hit *hits = NULL;
    uint32_t j, M, *list = NULL;
    uint64_t *codes = NULL;
    mess_workers *w;
    size_t n, i, t, nscratch = 0, items;
    size_t total = 0, len, off, pool = 0;
    uint8_t *out, *dst;
    int rc;

    if (resp)
        *resp = NULL;
    *resp_len = 0;
    memset(&sj, 0, sizeof sj);
    M = s->p.shards;
    n = M;
    if (sel->n) {
        /* the set, checked and sorted through a mark per shard */
        uint8_t *mark;
        if (!sel->shards || sel->n > M)
            return MESS_EINVAL;
        mark = (uint8_t *)calloc(M, 1);
        list = (uint32_t *)mess_malloc_array(sel->n, sizeof *list);
        if (!mark || !list) {
            free(mark);
            free(list);
            return MESS_ENOMEM;
        }
        for (i = 0, rc = MESS_OK; i < sel->n && rc == MESS_OK; i++) {
            if (sel->shards[i] >= M || mark[sel->shards[i]])
                rc = MESS_EINVAL;
            else
                mark[sel->shards[i]] = 1;
        }
        for (j = 0, n = 0; rc == MESS_OK && j < M; j++)
            if (mark[j]) {
                if (!holds_shard(s, j))
                    rc = MESS_ESTATE;
                list[n++] = j;
            }
        free(mark);
        if (rc != MESS_OK) {
            free(list);
            return rc;
        }
        sj.list = list;
    } else if (s->held != M) {
        return MESS_ESTATE; /* opened on a subset: only a partial search */
    }
    rc = wire_request_parse(&s->p, req, req_len, &rq);
    if (rc == MESS_OK)
        rc = mess_server_check_owner(s, rq.owner);
    if (rc != MESS_OK)
        goto done;
    if (threads == 0)
        threads = 1;
    if (threads > MESS_MAX_THREADS)
        threads = MESS_MAX_THREADS;
    if (threads > n)
        threads = (unsigned)n;
    sj.s = s;
    sj.req = &rq;
    sj.n = n;
    sj.width = search_width;
    if (sj.width > n)
        sj.width = (unsigned)n;
    /* one item per thread and a half (the counter balances uneven shards) */
    sj.chunk = threads == 1 ? n : (n + 2 * threads - 1) / (2 * threads);
    if (sj.width == 0)
        sj.chunk = 1;
    nscratch = (size_t)threads * (sj.width ? sj.width : 1);
    sj.scratch = (struct hnsw_scratch **)calloc(nscratch, sizeof *sj.scratch);
    sj.hits = (struct hnsw_hit **)calloc(M, sizeof *sj.hits);
    sj.found = (size_t *)calloc(M, sizeof *sj.found);
    if (!sj.scratch || !sj.hits || !sj.found) {
        rc = MESS_ENOMEM;
        goto done;
    }
    for (t = 0; t < nscratch; t++)
        if ((rc = scratch_take(s, &sj.scratch[t])) != MESS_OK)
            goto done;
    for (i = 0; i < n; i++) {
        j = list ? list[i] : (uint32_t)i;
        pool += search_room(s, j, wire_request_budget(&rq, j));
    }
    hits = (struct hnsw_hit *)mess_malloc_array(pool ? pool : 1, sizeof *hits);
    if (!hits) {
        rc = MESS_ENOMEM;
        goto done;
    }
    for (i = 0, off = 0; i < n; i++) {
        j = list ? list[i] : (uint32_t)i;
        sj.hits[j] = hits + off;
        off += search_room(s, j, wire_request_budget(&rq, j));
    }
    if (sj.width > 0) {
        /* each listed shard's job: its code from the request, its budget */
        sj.jobs = (struct hnsw_job *)mess_calloc_array(n, sizeof *sj.jobs);
        codes = (uint64_t *)mess_malloc_array(n, (size_t)params_words(&s->p) * 8);
        if (!sj.jobs || !codes) {
            rc = MESS_ENOMEM;
            goto done;
        }
        for (i = 0; i < n; i++) {
            uint32_t budget;
            j = list ? list[i] : (uint32_t)i;
            budget = wire_request_budget(&rq, j);
            wire_request_code(&rq, &s->p, j, codes + i * params_words(&s->p));
            sj.jobs[i].h = s->shards[j].graph;
            sj.jobs[i].query = codes + i * params_words(&s->p);
            sj.jobs[i].P = budget == 0 ? 0 : search_room(s, j, budget);
            sj.jobs[i].ef = s->p.ef_search > budget ? s->p.ef_search : budget;
            sj.jobs[i].out = sj.hits[j];
        }
    }
    items = (n + sj.chunk - 1) / sj.chunk;
    w = threads > 1 ? workers_take(s, threads) : NULL;
    if (w) {
        rc = workers_for(w, items, search_chunk, &sj);
        workers_give(s);
    } else {
        rc = parallel_for(items, threads, search_chunk, &sj);
    }
    if (rc != MESS_OK)
        goto done;
    for (j = 0; j < M; j++)
        total += sj.found[j];
    /* exact size, one allocation (or the caller's buffer) */
    len = list ? wire_partial_bytes(&s->p, n, total) : wire_response_bytes(&s->p, total);
    if (!resp) {
        *resp_len = len;
        if (cap < len) {
            rc = MESS_ELIMIT;
            goto done;
        }
        out = buf;
    } else {
        out = (uint8_t *)malloc(len);
        if (!out) {
            rc = MESS_ENOMEM;
            goto done;
        }
    }
    dst = list ? wire_partial_start(out, &s->p, rq.request_id, (uint32_t)n)
               : wire_response_start(out, &s->p, rq.request_id);
    for (i = 0; i < n; i++) {
        const struct shard_store *st;
        size_t e;
        j = list ? list[i] : (uint32_t)i;
        st = &s->shards[j];
        dst = list ? wire_partial_put_section(dst, j, sj.found[j])
                   : wire_response_put_count(dst, sj.found[j]);
        /* a mapped arena is read here only, for the entries returned: each
         * entry is a random place in it, so the lines of the entry
         * COPY_AHEAD places on are asked for while this one is copied */
        for (e = 0; e < sj.found[j]; e++, dst += s->entry_bytes) {
            if (copy_ahead && e + copy_ahead < sj.found[j])
                prefetch_entry(shard_entry(st, s->entry_bytes,
                                           sj.hits[j][e + copy_ahead].node),
                               s->entry_bytes);
            memcpy(dst, shard_entry(st, s->entry_bytes, sj.hits[j][e].node),
                   s->entry_bytes);
        }
    }
    if (resp)
        *resp = out;
    *resp_len = len;
done:
    if (sj.scratch)
        for (t = 0; t < nscratch; t++)
            scratch_give(s, sj.scratch[t]);
    free(sj.jobs);
    free(codes);
    free(hits);
    free(sj.scratch);
    free(sj.hits);
    free(sj.found);
    free(list);
    return rc;
}

static const struct search_sel all_shards = {NULL, 0};

int mess_server_search(const mess_server *s, const uint8_t *req,
                       size_t req_len, unsigned threads, uint8_t **resp,
                       size_t *resp_len)
{
    if (!s || !req || !resp || !resp_len)
        return MESS_EINVAL;
    return server_search(s, req, req_len, &all_shards, threads, resp, NULL, 0,
                         resp_len);
}

int mess_server_search_into(const mess_server *s, const uint8_t *req,
                            size_t req_len, unsigned threads, uint8_t *resp,
                            size_t cap, size_t *resp_len)
{
    if (!s || !req || !resp || !resp_len)
        return MESS_EINVAL;
    return server_search(s, req, req_len, &all_shards, threads, NULL, resp, cap,
                         resp_len);
}

int mess_server_search_shards(const mess_server *s, const uint8_t *req,
                              size_t req_len, const uint32_t *shards,
                              size_t nshards, unsigned threads, uint8_t **part,
                              size_t *part_len)
{
    struct search_sel sel;
    if (part)
        *part = NULL;
    if (part_len)
        *part_len = 0;
    if (!s || !req || !part || !part_len || !shards || nshards == 0)
        return MESS_EINVAL;
    sel.shards = shards;
    sel.n = nshards;
    return server_search(s, req, req_len, &sel, threads, part, NULL, 0, part_len);
}

struct search_batch {
    const mess_server *s;
    const uint8_t *const *reqs;
    const size_t *req_lens;
    uint8_t **resps;
    size_t *resp_lens;
    int *status;
};

static int search_item(void *ctx, size_t i, unsigned worker)
{
    struct search_batch *b = (struct search_batch *)ctx;
    int rc;
    MESS_UNUSED(worker);
    rc = b->reqs[i] ? server_search(b->s, b->reqs[i], b->req_lens[i], &all_shards,
                                    1, &b->resps[i], NULL, 0, &b->resp_lens[i])
                    : MESS_EINVAL;
    if (b->status) {
        b->status[i] = rc;
        return MESS_OK; /* items are independent */
    }
    return rc;
}

int mess_server_search_batch(const mess_server *s, const uint8_t *const *reqs,
                             const size_t *req_lens, size_t n,
                             mess_workers *w, uint8_t **resps,
                             size_t *resp_lens, int *status)
{
    struct search_batch b;
    size_t i;
    int rc;
    if (!s || (n && (!reqs || !req_lens || !resps || !resp_lens)))
        return MESS_EINVAL;
    for (i = 0; i < n; i++) {
        resps[i] = NULL;
        resp_lens[i] = 0;
        if (status)
            status[i] = MESS_OK;
    }
    b.s = s;
    b.reqs = reqs;
    b.req_lens = req_lens;
    b.resps = resps;
    b.resp_lens = resp_lens;
    b.status = status;
    rc = workers_for(w, n, search_item, &b);
    if (status) {
        for (i = 0; i < n; i++)
            if (status[i] != MESS_OK)
                return status[i];
        return rc;
    }
    if (rc != MESS_OK)
        for (i = 0; i < n; i++) {
            free(resps[i]);
            resps[i] = NULL;
            resp_lens[i] = 0;
        }
    return rc;
}
