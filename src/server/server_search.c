/*
 * server_search.c - the server answers a request: each shard's graph is
 * searched by Hamming distance for its budget, and the hits' ciphertexts
 * are returned in the response (paper section 4.2).
 */
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "parallel.h"
#include "server.h"

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

/* ---- the handle's search options (struct server_search_opts) -------------
 * The width 0 (hnsw_search shard after shard), the former loops of
 * hnsw_search_many, no copy prefetch, group 1 and threads per search are
 * the paths before each improvement, kept for the tests and `mess bench
 * server`, which compare them. */

int server_search_set_width(mess_server *s, unsigned width)
{
    if (width > HNSW_MANY_MAX)
        return MESS_EINVAL;
    s->search.width = width;
    return MESS_OK;
}

unsigned server_search_get_width(const mess_server *s)
{
    return s->search.width;
}

void server_search_set_paths(mess_server *s, int fast, size_t clear_words)
{
    s->search.many.fast = fast;
    s->search.many.clear_words = clear_words;
}

void server_search_set_copy_ahead(mess_server *s, unsigned ahead)
{
    s->search.copy_ahead = ahead;
}

int server_search_set_payload_io(mess_server *s, int mode)
{
    if (mode < 0 || mode > 2)
        return MESS_EINVAL;
    s->search.payload_io = mode;
    return MESS_OK;
}

int server_search_set_group(mess_server *s, unsigned group)
{
    if (group == 0 || group > SEARCH_GROUP)
        return MESS_EINVAL;
    s->search.group = group;
    return MESS_OK;
}

void server_search_set_keep_workers(mess_server *s, int keep)
{
    s->search.keep_workers = keep != 0;
}

int server_search_set_by_shard(mess_server *s, unsigned window)
{
    if (window > SEARCH_WINDOW_MAX)
        return MESS_EINVAL;
    s->search.by_shard = window;
    return MESS_OK;
}

void server_search_set_read_layout(mess_server *s, int on)
{
    s->search.many.layout = on != 0;
}

/* The layout on every held shard's graph (or none); a failure leaves
 * none anywhere. */
int mess_server_set_layout(mess_server *s, int layout)
{
    uint32_t j;
    int rc = MESS_OK;
    if (!s || (layout != MESS_LAYOUT_DEFAULT && layout != MESS_LAYOUT_CODES))
        return MESS_EINVAL;
    if (layout == MESS_LAYOUT_CODES && s->p.kappa != 128)
        return MESS_EPARAM;
    for (j = 0; j < s->p.shards && rc == MESS_OK; j++)
        if (s->shards[j].graph) {
            if (layout == MESS_LAYOUT_CODES)
                rc = hnsw_layout_build(s->shards[j].graph);
            else
                hnsw_layout_drop(s->shards[j].graph);
        }
    if (rc != MESS_OK) {
        for (j = 0; j < s->p.shards; j++)
            hnsw_layout_drop(s->shards[j].graph);
        layout = MESS_LAYOUT_DEFAULT;
    }
    s->search.layout = layout;
    return rc;
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
                          hi - lo < sj->width ? (unsigned)(hi - lo) : sj->width,
                          &sj->s->search.many);
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
    if (s->workers && s->workers_pid != (long)getpid()) {
        /* a child forked from the process that started them: the threads
         * are not in this process (joining them would not return), so the
         * handle's memory is released without a join, and the child
         * starts its own */
        workers_forget(s->workers);
        s->workers = NULL;
        s->workers_busy = 0;
    }
    if (!s->workers_busy) {
        if (s->workers && mess_workers_threads(s->workers) != threads) {
            mess_workers_free(s->workers);
            s->workers = NULL;
        }
        if (!s->workers && mess_workers_new(threads, &s->workers) != MESS_OK)
            s->workers = NULL;
        s->workers_pid = (long)getpid();
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

/* One request in the making: parsed, its jobs built, searched, written. */
struct search_one {
    struct wire_request rq;
    struct search_job sj;
    struct hnsw_hit *hits;
    uint32_t *list;
    uint64_t *codes;
    size_t nscratch;
    unsigned threads;
};

static void one_free(struct search_one *o)
{
    size_t t;
    if (o->sj.scratch)
        for (t = 0; t < o->nscratch; t++)
            scratch_give(o->sj.s, o->sj.scratch[t]);
    free(o->sj.jobs);
    free(o->codes);
    free(o->hits);
    free(o->sj.scratch);
    free(o->sj.hits);
    free(o->sj.found);
    free(o->list);
    memset(o, 0, sizeof *o);
}

/* Checks the shard set and the request, and builds every listed shard's
 * job (its code, budget and hit buffer); with_scratch takes the scratch
 * the request's own run needs (a group run brings its own). */
static int one_prepare(struct search_one *o, const mess_server *s, const uint8_t *req,
                       size_t req_len, const struct search_sel *sel, unsigned threads,
                       int with_scratch)
{
    struct search_job *sj = &o->sj;
    uint32_t j, M = s->p.shards;
    size_t n = M, i, t, off, pool = 0;
    int rc;

    memset(o, 0, sizeof *o);
    sj->s = s;
    if (sel->n) {
        /* the set, checked and sorted through a mark per shard */
        uint8_t *mark;
        if (!sel->shards || sel->n > M)
            return MESS_EINVAL;
        mark = (uint8_t *)calloc(M, 1);
        o->list = (uint32_t *)mess_malloc_array(sel->n, sizeof *o->list);
        if (!mark || !o->list) {
            free(mark);
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
                o->list[n++] = j;
            }
        free(mark);
        if (rc != MESS_OK)
            return rc;
        sj->list = o->list;
    } else if (s->held != M) {
        return MESS_ESTATE; /* opened on a subset: only a partial search */
    }
    rc = wire_request_parse(&s->p, req, req_len, &o->rq);
    if (rc == MESS_OK)
        rc = mess_server_check_owner(s, o->rq.owner);
    if (rc != MESS_OK)
        return rc;
    if (threads == 0)
        threads = 1;
    if (threads > MESS_MAX_THREADS)
        threads = MESS_MAX_THREADS;
    if (threads > n)
        threads = (unsigned)n;
    o->threads = threads;
    sj->req = &o->rq;
    sj->n = n;
    sj->width = sj->s->search.width;
    if (sj->width > n)
        sj->width = (unsigned)n;
    /* two items per thread (the counter balances uneven shards) */
    sj->chunk = threads == 1 ? n : (n + 2 * threads - 1) / (2 * threads);
    if (sj->width == 0)
        sj->chunk = 1;
    sj->hits = (struct hnsw_hit **)calloc(M, sizeof *sj->hits);
    sj->found = (size_t *)calloc(M, sizeof *sj->found);
    if (!sj->hits || !sj->found)
        return MESS_ENOMEM;
    if (with_scratch) {
        o->nscratch = (size_t)threads * (sj->width ? sj->width : 1);
        sj->scratch = (struct hnsw_scratch **)calloc(o->nscratch, sizeof *sj->scratch);
        if (!sj->scratch)
            return MESS_ENOMEM;
        for (t = 0; t < o->nscratch; t++)
            if ((rc = scratch_take(s, &sj->scratch[t])) != MESS_OK)
                return rc;
    }
    for (i = 0; i < n; i++) {
        j = o->list ? o->list[i] : (uint32_t)i;
        pool += search_room(s, j, wire_request_budget(&o->rq, j));
    }
    o->hits = (struct hnsw_hit *)mess_malloc_array(pool ? pool : 1, sizeof *o->hits);
    if (!o->hits)
        return MESS_ENOMEM;
    for (i = 0, off = 0; i < n; i++) {
        j = o->list ? o->list[i] : (uint32_t)i;
        sj->hits[j] = o->hits + off;
        off += search_room(s, j, wire_request_budget(&o->rq, j));
    }
    if (sj->width > 0) {
        /* each listed shard's job: its code from the request, its budget */
        sj->jobs = (struct hnsw_job *)mess_calloc_array(n, sizeof *sj->jobs);
        o->codes = (uint64_t *)mess_malloc_array(n, (size_t)params_words(&s->p) * 8);
        if (!sj->jobs || !o->codes)
            return MESS_ENOMEM;
        for (i = 0; i < n; i++) {
            uint32_t budget;
            j = o->list ? o->list[i] : (uint32_t)i;
            budget = wire_request_budget(&o->rq, j);
            wire_request_code(&o->rq, &s->p, j, o->codes + i * params_words(&s->p));
            sj->jobs[i].h = s->shards[j].graph;
            sj->jobs[i].query = o->codes + i * params_words(&s->p);
            sj->jobs[i].P = budget == 0 ? 0 : search_room(s, j, budget);
            sj->jobs[i].ef = s->p.ef_search > budget ? s->p.ef_search : budget;
            sj->jobs[i].out = sj->hits[j];
            sj->jobs[i].skip_labels = 1; /* the response copies entries by node */
        }
    }
    return MESS_OK;
}

/* Searches the request's shards on its own threads (kept workers when
 * more than one and free, else started for it). */
static int one_run(struct search_one *o)
{
    struct search_job *sj = &o->sj;
    size_t items = (sj->n + sj->chunk - 1) / sj->chunk;
    mess_workers *w = o->threads > 1 && sj->s->search.keep_workers ? workers_take(sj->s, o->threads) : NULL;
    int rc;
    if (w) {
        rc = workers_for(w, items, search_chunk, sj);
        workers_give(sj->s);
    } else {
        rc = parallel_for(items, o->threads, search_chunk, sj);
    }
    return rc;
}

/* ---- reading the payload (docs/PROTOCOL.md "Reading the payload") --------
 * A returned entry of a mapped arena is read from storage by the copy's
 * page fault when its page is not cached.  Arenas are mapped with random
 * advice (MESS_ADVICE_DEFAULT), so a fault reads the entry's own pages,
 * not the device's readahead window; but one copy's faults come one after
 * the other, and B entries would wait B device round trips.  So the copy
 * watches its own pace with a clock read every few entries (nothing more
 * on a warm copy: a system call per entry costs 1-4 us here, more than
 * the entry's copy, and each is a point where a loaded machine preempts).
 * When two stretches in a row took longer than cached pages take
 * (PAYLOAD_SLOW_NS; one slow stretch is mostly a preemption), the next
 * entries' pages are looked up (store_entry_cached), and if one is not
 * cached (or the lookup is unknown), the pages of every entry still to
 * copy are asked for at once (store_entry_willneed: their reads are
 * submitted together and the device serves many at a time); the copy goes
 * on, each fault now waiting for a read already under way.  A cold copy
 * thus reads its first three entries one by one and the rest together. */
#define PAYLOAD_PROBE_MAX 16    /* entries between clock reads, at most */
#define PAYLOAD_SLOW_NS 30000.0 /* a stretch slower than this: uncached? */
#define PAYLOAD_LOOK 2          /* entries looked up after two slow stretches */

struct payload_watch {
    int on;         /* watching: the handle's payload_io, nothing asked yet */
    unsigned slow;  /* slow stretches in a row */
    unsigned chunk; /* entries per stretch: 1, 2, 4, .. PAYLOAD_PROBE_MAX */
    unsigned left;  /* entries of this stretch still to copy */
    double t;       /* when the stretch began, ns */
};

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Whether the arena pages of the next PAYLOAD_LOOK entries from listed
 * shard i0's entry e0 on are cached: 1 all (or none left), 0 one is not,
 * -1 unknown. */
static int payload_cached(const struct search_one *o, size_t i0, size_t e0)
{
    const mess_server *s = o->sj.s;
    size_t i, e, looked = 0;
    int known = 1;
    for (i = i0; i < o->sj.n && looked < PAYLOAD_LOOK; i++) {
        uint32_t j = o->list ? o->list[i] : (uint32_t)i;
        const struct shard_store *st = &s->shards[j];
        for (e = i == i0 ? e0 : 0; e < o->sj.found[j] && looked < PAYLOAD_LOOK; e++)
            if (o->sj.hits[j][e].node < st->base) {
                int c = store_entry_cached(st, s->entry_bytes, o->sj.hits[j][e].node);
                if (c == 0)
                    return 0;
                if (c < 0)
                    known = 0;
                looked++;
            }
    }
    return known ? 1 : -1;
}

/* Asks for the arena pages of the response's entries from listed shard
 * i0's entry e0 on (what the copy has not reached yet). */
static void payload_ask(const struct search_one *o, size_t i0, size_t e0)
{
    const mess_server *s = o->sj.s;
    size_t i, e;
    for (i = i0; i < o->sj.n; i++) {
        uint32_t j = o->list ? o->list[i] : (uint32_t)i;
        const struct shard_store *st = &s->shards[j];
        for (e = i == i0 ? e0 : 0; e < o->sj.found[j]; e++)
            if (o->sj.hits[j][e].node < st->base)
                store_entry_willneed(st, s->entry_bytes, o->sj.hits[j][e].node);
    }
}

/* The end of a stretch of the copy, which stands before listed shard i's
 * entry e: on to the next stretch, or (the pages are not cached) the rest
 * asked for and the watch over. */
static void payload_probe(struct payload_watch *w, const struct search_one *o, size_t i,
                          size_t e)
{
    double t = now_ns(), took = t - w->t;
    w->t = t;
    w->slow = took > PAYLOAD_SLOW_NS ? w->slow + 1 : 0;
    if (w->slow >= 2) {
        if (payload_cached(o, i, e) != 1) {
            payload_ask(o, i, e);
            w->on = 0;
            return;
        }
        w->slow = 0;
        w->t = now_ns(); /* the lookup is not the next stretch's */
    }
    if (w->chunk < PAYLOAD_PROBE_MAX)
        w->chunk *= 2;
    w->left = w->chunk;
}

/* Writes the response to a malloc'd buffer (*resp, when resp != NULL) or
 * into the caller's buf of cap bytes (MESS_ELIMIT if smaller than the
 * response, whose size *resp_len then holds).  With a shard set it is a
 * partial response; each shard's count and entries are the same bytes
 * either way. */
static int one_write(struct search_one *o, uint8_t **resp, uint8_t *buf, size_t cap,
                     size_t *resp_len)
{
    const struct search_job *sj = &o->sj;
    const mess_server *s = sj->s;
    const uint32_t *list = o->list;
    size_t total = 0, len, i, n = sj->n;
    uint8_t *out, *dst;
    uint32_t j;
    unsigned ahead = s->search.copy_ahead;
    struct payload_watch w;
    for (j = 0; j < s->p.shards; j++)
        total += sj->found[j];
    /* exact size, one allocation (or the caller's buffer) */
    len = list ? wire_partial_bytes(&s->p, n, total) : wire_response_bytes(&s->p, total);
    if (!resp) {
        *resp_len = len;
        if (cap < len)
            return MESS_ELIMIT;
        out = buf;
    } else {
        out = (uint8_t *)malloc(len);
        if (!out)
            return MESS_ENOMEM;
    }
    dst = list ? wire_partial_start(out, &s->p, o->rq.request_id, (uint32_t)n)
               : wire_response_start(out, &s->p, o->rq.request_id);
    w.on = s->dir != NULL && s->search.payload_io == 1;
    if (s->dir && s->search.payload_io == 2)
        payload_ask(o, 0, 0); /* every entry's pages, before the copy */
    w.slow = 0;
    w.chunk = w.left = 1;
    w.t = w.on ? now_ns() : 0;
    for (i = 0; i < n; i++) {
        const struct shard_store *st;
        size_t e;
        j = list ? list[i] : (uint32_t)i;
        st = &s->shards[j];
        dst = list ? wire_partial_put_section(dst, j, sj->found[j])
                   : wire_response_put_count(dst, sj->found[j]);
        /* a mapped arena is read here only, for the entries returned: each
         * entry is a random place in it, so the lines of the entry
         * `ahead` places on (the handle's copy_ahead) are asked for while
         * this one is copied, and the copy's pace tells uncached pages
         * (payload_probe above) */
        for (e = 0; e < sj->found[j]; e++, dst += s->entry_bytes) {
            if (ahead && e + ahead < sj->found[j])
                prefetch_entry(shard_entry(st, s->entry_bytes,
                                           sj->hits[j][e + ahead].node),
                               s->entry_bytes);
            memcpy(dst, shard_entry(st, s->entry_bytes, sj->hits[j][e].node),
                   s->entry_bytes);
            if (w.on && --w.left == 0)
                payload_probe(&w, o, i, e + 1);
        }
    }
    if (resp)
        *resp = out;
    *resp_len = len;
    return MESS_OK;
}

static int server_search(const mess_server *s, const uint8_t *req,
                         size_t req_len, const struct search_sel *sel,
                         unsigned threads, uint8_t **resp, uint8_t *buf,
                         size_t cap, size_t *resp_len)
{
    struct search_one o;
    int rc;
    if (resp)
        *resp = NULL;
    *resp_len = 0;
    /* the searched shards' delta chains, if a lazy open left any (one
     * lock when none is pending) */
    rc = server_ready(s, sel->shards, sel->n);
    if (rc != MESS_OK)
        return rc;
    rc = one_prepare(&o, s, req, req_len, sel, threads, 1);
    if (rc == MESS_OK)
        rc = one_run(&o);
    if (rc == MESS_OK)
        rc = one_write(&o, resp, buf, cap, resp_len);
    one_free(&o);
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
    size_t n, group;
};

/* Up to SEARCH_GROUP requests of a batch searched together on one worker,
 * shard by shard: the beams in flight (the handle's width) are the same
 * shard's searches for different requests, so the shard's upper layers and
 * the nodes near its entry point, which every search passes, are read once
 * for all of them.  Each request's response is the bytes server_search
 * gives it (the jobs are the same, only their order differs). */
static int search_group(void *ctx, size_t item, unsigned worker)
{
    struct search_batch *b = (struct search_batch *)ctx;
    const mess_server *s = b->s;
    struct search_one o[SEARCH_GROUP];
    struct hnsw_scratch *scr[HNSW_MANY_MAX];
    struct hnsw_job *all = NULL;
    int st[SEARCH_GROUP], rc = MESS_OK;
    size_t lo = item * b->group, m = b->n - lo < b->group ? b->n - lo : b->group;
    size_t g, i, k, live = 0, M = s->p.shards;
    unsigned width = s->search.width, t, taken = 0;
    MESS_UNUSED(worker);
    for (g = 0; g < m; g++) {
        if (b->reqs[lo + g])
            st[g] = one_prepare(&o[g], s, b->reqs[lo + g], b->req_lens[lo + g],
                                &all_shards, 1, width == 0);
        else {
            memset(&o[g], 0, sizeof o[g]);
            o[g].sj.s = s;
            st[g] = MESS_EINVAL;
        }
        live += st[g] == MESS_OK;
    }
    if (width == 0) { /* the former path: each request on its own */
        for (g = 0; g < m; g++)
            if (st[g] == MESS_OK)
                st[g] = one_run(&o[g]);
    } else if (live > 0) {
        if (width > live * M)
            width = (unsigned)(live * M);
        all = (struct hnsw_job *)mess_malloc_array(live * M, sizeof *all);
        for (t = 0; all && t < width; t++, taken++)
            if (scratch_take(s, &scr[t]) != MESS_OK)
                break;
        if (!all || taken < width) {
            for (g = 0; g < m; g++)
                if (st[g] == MESS_OK)
                    st[g] = MESS_ENOMEM;
        } else {
            for (i = 0, k = 0; i < M; i++)
                for (g = 0; g < m; g++)
                    if (st[g] == MESS_OK)
                        all[k++] = o[g].sj.jobs[i];
            hnsw_search_many(all, k, scr, width, &s->search.many);
            for (i = 0, k = 0; i < M; i++)
                for (g = 0; g < m; g++)
                    if (st[g] == MESS_OK) {
                        o[g].sj.found[i] = all[k].n_out;
                        if (all[k].rc != MESS_OK)
                            st[g] = all[k].rc;
                        k++;
                    }
        }
        for (t = 0; t < taken; t++)
            scratch_give(s, scr[t]);
        free(all);
    }
    for (g = 0; g < m; g++) {
        if (st[g] == MESS_OK)
            st[g] = one_write(&o[g], &b->resps[lo + g], NULL, 0, &b->resp_lens[lo + g]);
        one_free(&o[g]);
        if (b->status)
            b->status[lo + g] = st[g];
        else if (st[g] != MESS_OK && rc == MESS_OK)
            rc = st[g];
    }
    return rc; /* with status, items are independent: MESS_OK */
}

/* ---- throughput mode -------------------------------------------------------
 * A window of a batch's requests is searched shard by shard across the
 * workers: a work item is a run of consecutive shards, and for each the
 * searches of every request of the window in that shard's graph are
 * interleaved (hnsw_search_many, the handle's width), so the shard's upper
 * layers, the nodes near its entry point and the regions many queries
 * share are brought into the cache once for the window instead of once
 * per request.  The window's requests are parsed and their jobs built
 * first, across the workers, and their responses written last, across
 * the workers; every job is the one server_search runs for its request
 * (only the order of the jobs differs), so each response has the bytes
 * of mess_server_search. */
struct search_window {
    const mess_server *s;
    const uint8_t *const *reqs;
    const size_t *req_lens;
    uint8_t **resps;
    size_t *resp_lens;
    struct search_one *o; /* per request of the window */
    int *st;              /* per request: its status so far */
    size_t n;             /* requests in the window */
    size_t per;           /* shards per work item */
    unsigned width;       /* searches in flight per worker */
    struct hnsw_scratch **scratch; /* `width` per worker */
    struct hnsw_job *jobs;         /* per worker: per x n */
};

/* Work item: request `item` parsed and its jobs built. */
static int window_prepare(void *ctx, size_t item, unsigned worker)
{
    struct search_window *sw = (struct search_window *)ctx;
    MESS_UNUSED(worker);
    if (sw->reqs[item])
        sw->st[item] = one_prepare(&sw->o[item], sw->s, sw->reqs[item], sw->req_lens[item],
                                   &all_shards, 1, 0);
    else
        sw->st[item] = MESS_EINVAL;
    return MESS_OK; /* items are independent */
}

/* Work item: shards [item * per, ...) searched for every prepared request,
 * shard after shard; each job's count and status go back to its request's
 * own job (one shard's jobs belong to one item: no two workers write one). */
static int window_search(void *ctx, size_t item, unsigned worker)
{
    struct search_window *sw = (struct search_window *)ctx;
    size_t M = sw->s->p.shards, lo = item * sw->per, hi = lo + sw->per, i, g, k = 0;
    struct hnsw_job *jobs = sw->jobs + (size_t)worker * sw->per * sw->n;
    if (hi > M)
        hi = M;
    for (i = lo; i < hi; i++)
        for (g = 0; g < sw->n; g++)
            if (sw->st[g] == MESS_OK)
                jobs[k++] = sw->o[g].sj.jobs[i];
    if (k == 0)
        return MESS_OK;
    hnsw_search_many(jobs, k, sw->scratch + (size_t)worker * sw->width,
                     k < sw->width ? (unsigned)k : sw->width, &sw->s->search.many);
    for (i = lo, k = 0; i < hi; i++)
        for (g = 0; g < sw->n; g++)
            if (sw->st[g] == MESS_OK)
                sw->o[g].sj.jobs[i] = jobs[k++];
    return MESS_OK;
}

/* Work item: request `item`'s status from its jobs, its response written
 * and its buffers released. */
static int window_write(void *ctx, size_t item, unsigned worker)
{
    struct search_window *sw = (struct search_window *)ctx;
    struct search_one *o = &sw->o[item];
    size_t i;
    MESS_UNUSED(worker);
    for (i = 0; sw->st[item] == MESS_OK && i < sw->s->p.shards; i++) {
        o->sj.found[i] = o->sj.jobs[i].n_out;
        if (o->sj.jobs[i].rc != MESS_OK)
            sw->st[item] = o->sj.jobs[i].rc;
    }
    if (sw->st[item] == MESS_OK)
        sw->st[item] = one_write(o, &sw->resps[item], NULL, 0, &sw->resp_lens[item]);
    one_free(o);
    return MESS_OK;
}

/* The batch's requests [0, n) in windows of the handle's by_shard, each
 * searched shard by shard over w; every request's status in st.  Returns
 * MESS_OK, or MESS_ENOMEM if the working memory cannot be had (st then
 * holds it for every request not yet answered). */
static int search_by_shard(const mess_server *s, const uint8_t *const *reqs,
                           const size_t *req_lens, size_t n, mess_workers *w,
                           uint8_t **resps, size_t *resp_lens, int *st)
{
    struct search_window sw;
    unsigned threads = w ? mess_workers_threads(w) : 1, t;
    size_t M = s->p.shards, window = s->search.by_shard, q0, g, taken = 0, nscr, items;
    int rc = MESS_OK;
    if (threads == 0)
        threads = 1;
    if (window > n)
        window = n;
    memset(&sw, 0, sizeof sw);
    sw.s = s;
    sw.width = s->search.width;
    /* enough shards per item for the width's beams when the window is
     * small, but at least two items per worker while the shards allow */
    sw.per = (sw.width + window - 1) / window;
    if (sw.per > M / (2 * threads))
        sw.per = M / (2 * threads);
    if (sw.per == 0)
        sw.per = 1;
    nscr = (size_t)threads * sw.width;
    sw.o = (struct search_one *)mess_calloc_array(window, sizeof *sw.o);
    sw.st = (int *)mess_calloc_array(window, sizeof *sw.st);
    sw.scratch = (struct hnsw_scratch **)mess_calloc_array(nscr, sizeof *sw.scratch);
    sw.jobs = (struct hnsw_job *)mess_malloc_array((size_t)threads * sw.per,
                                                   window * sizeof *sw.jobs);
    for (taken = 0; sw.o && sw.st && sw.scratch && sw.jobs && taken < nscr; taken++)
        if (scratch_take(s, &sw.scratch[taken]) != MESS_OK)
            break;
    if (!sw.o || !sw.st || !sw.scratch || !sw.jobs || taken < nscr)
        rc = MESS_ENOMEM;
    items = (M + sw.per - 1) / sw.per;
    for (q0 = 0; q0 < n; q0 += window) {
        sw.n = n - q0 < window ? n - q0 : window;
        if (rc != MESS_OK) {
            for (g = 0; g < sw.n; g++)
                st[q0 + g] = rc;
            continue;
        }
        sw.reqs = reqs + q0;
        sw.req_lens = req_lens + q0;
        sw.resps = resps + q0;
        sw.resp_lens = resp_lens + q0;
        /* the items return MESS_OK (their statuses are in sw.st), so every
         * item runs and each request is freed by its write */
        (void)workers_for(w, sw.n, window_prepare, &sw);
        (void)workers_for(w, items, window_search, &sw);
        (void)workers_for(w, sw.n, window_write, &sw);
        for (g = 0; g < sw.n; g++)
            st[q0 + g] = sw.st[g];
    }
    for (t = 0; t < taken; t++)
        scratch_give(s, sw.scratch[t]);
    free(sw.scratch);
    free(sw.jobs);
    free(sw.st);
    free(sw.o);
    return rc;
}

/* The all-or-nothing batch's failure: no response is returned. */
static void drop_responses(uint8_t **resps, size_t *resp_lens, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        free(resps[i]);
        resps[i] = NULL;
        resp_lens[i] = 0;
    }
}

int mess_server_search_batch(const mess_server *s, const uint8_t *const *reqs,
                             const size_t *req_lens, size_t n,
                             mess_workers *w, uint8_t **resps,
                             size_t *resp_lens, int *status)
{
    struct search_batch b;
    size_t i;
    unsigned t;
    int rc;
    if (!s || (n && (!reqs || !req_lens || !resps || !resp_lens)))
        return MESS_EINVAL;
    for (i = 0; i < n; i++) {
        resps[i] = NULL;
        resp_lens[i] = 0;
        if (status)
            status[i] = MESS_OK;
    }
    rc = server_ready(s, NULL, 0); /* every shard's chain (lazy open) */
    if (rc != MESS_OK) {
        for (i = 0; i < n && status; i++)
            status[i] = rc;
        return rc;
    }
    if (s->search.by_shard > 0 && s->search.width > 0 && n > 0) {
        /* the throughput mode (above); the statuses in status, or in a
         * local array for the all-or-nothing call */
        int *st = status ? status : (int *)mess_malloc_array(n, sizeof *st);
        if (!st)
            return MESS_ENOMEM;
        rc = search_by_shard(s, reqs, req_lens, n, w, resps, resp_lens, st);
        for (i = 0; i < n && rc == MESS_OK; i++)
            if (st[i] != MESS_OK)
                rc = st[i];
        if (!status) {
            free(st);
            if (rc != MESS_OK)
                drop_responses(resps, resp_lens, n);
        }
        return rc;
    }
    b.s = s;
    b.reqs = reqs;
    b.req_lens = req_lens;
    b.resps = resps;
    b.resp_lens = resp_lens;
    b.status = status;
    b.n = n;
    /* groups of up to SEARCH_GROUP, at least one per worker */
    t = w ? mess_workers_threads(w) : 1;
    b.group = (n + t - 1) / (t ? t : 1);
    if (b.group > s->search.group)
        b.group = s->search.group;
    if (b.group == 0)
        b.group = 1;
    rc = workers_for(w, (n + b.group - 1) / b.group, search_group, &b);
    if (status) {
        for (i = 0; i < n; i++)
            if (status[i] != MESS_OK)
                return status[i];
        return rc;
    }
    if (rc != MESS_OK)
        drop_responses(resps, resp_lens, n);
    return rc;
}
