/*
 * client_finish.c - a query's finish (paper section 4.2): check the
 * response, authenticate and decrypt one copy per claimed id, rerank by
 * the exact distance, keep the best k.
 */
#include <math.h>
#include <sodium.h>

#include "chacha_lanes.h"
#include "client.h"
#include "metric.h"
#include "parallel.h"
#include "poly1305_lanes.h"
#include "simd.h"

struct scored {
    uint64_t id;
    float dist;
};

/* Order of the results: ascending distance, ties by id. */
static int scored_less(const struct scored *x, const struct scored *y)
{
    return x->dist < y->dist || (x->dist == y->dist && x->id < y->id);
}

static int scored_cmp(const void *a, const void *b)
{
    const struct scored *x = (const struct scored *)a, *y = (const struct scored *)b;
    return scored_less(x, y) ? -1 : scored_less(y, x);
}

/* Max-heap (by scored_less) of the best k so far. */
static void heap_offer(struct scored *h, size_t *n, size_t k, struct scored v)
{
    size_t i, c;
    if (*n < k) {
        i = (*n)++;
        while (i > 0 && scored_less(&h[(i - 1) / 2], &v)) {
            h[i] = h[(i - 1) / 2];
            i = (i - 1) / 2;
        }
        h[i] = v;
        return;
    }
    if (!scored_less(&v, &h[0]))
        return;
    i = 0;
    for (;;) {
        c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && scored_less(&h[c], &h[c + 1]))
            c++;
        if (!scored_less(&v, &h[c]))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
}

/* The distinct ids a response's entries claim, each with the chain of its
 * copies in response order.  An id is claimed by peeking (unauthenticated);
 * it is only accepted once one of its copies authenticates. */
#define NO_ENTRY ((size_t)-1)

struct claim {
    uint64_t id;
    size_t first;    /* the first copy (NO_ENTRY: none chained yet) */
    size_t last;     /* the last copy chained so far */
    size_t accepted; /* the authenticated copy (NO_ENTRY: none yet) */
    float dist;      /* exact distance of the accepted copy's vector */
};

struct entry_ref {
    const uint8_t *entry;
    uint64_t claimed; /* peeked id */
    size_t claim;     /* index into the claims */
    size_t next;      /* next copy of the same claimed id */
    uint32_t shard;
    uint32_t gen;     /* the claimed id's current generation (its AD) */
    int opened, ok;
};

/* Open addressing from a claimed id to its claim (slot value = index + 1). */
struct claim_map {
    size_t *slot;
    size_t mask;
};

static int claim_map_init(struct claim_map *m, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    m->mask = cap - 1;
    m->slot = (size_t *)calloc(cap, sizeof *m->slot);
    return m->slot ? MESS_OK : MESS_ENOMEM;
}

/* Index of id's claim; a new one (claims[*n]) when unseen. */
static size_t claim_map_get(struct claim_map *m, struct claim *claims,
                            size_t *n, uint64_t id)
{
    size_t i = (size_t)((id * 0x9e3779b97f4a7c15ull) >> 17) & m->mask;
    while (m->slot[i]) {
        if (claims[m->slot[i] - 1].id == id)
            return m->slot[i] - 1;
        i = (i + 1) & m->mask;
    }
    m->slot[i] = ++*n;
    claims[*n - 1].id = id;
    claims[*n - 1].first = NO_ENTRY;
    claims[*n - 1].accepted = NO_ENTRY;
    return *n - 1;
}

/* Work shared by the peek and open passes: `list` names the entries to
 * process.  An entry is opened into its worker's scratch plaintext and,
 * when `rerank` (not in the verify-only pass), decoded into the worker's
 * vector and its exact distance to q stored in its claim: no plaintext
 * outlives its worker's next batch of PAYLOAD_BATCH entries (and the
 * scratch is wiped when the finish returns). */
struct open_job {
    const mess_client *c;
    struct entry_ref *e;
    struct claim *claims;
    const size_t *list;
    const float *q;
    size_t n, chunk;
    uint8_t *scratch; /* workers x PAYLOAD_BATCH x payload_plain_bytes */
    float *xs;        /* workers x PAYLOAD_BATCH x dim */
    int rerank;
};

static size_t job_chunks(struct open_job *o, unsigned workers)
{
    o->chunk = workers > 1 ? (o->n + 4 * workers - 1) / (4 * workers) : o->n;
    if (o->chunk == 0)
        o->chunk = 1;
    return (o->n + o->chunk - 1) / o->chunk;
}

/* The old per-entry path (one libsodium call per block) when 0: kept so a
 * benchmark can time both in one process (the handle's finish_batched). */
void client_finish_set_batched(mess_client *c, int on)
{
    client_lock(c);
    c->finish_batched = on != 0;
    client_unlock(c);
}

void client_finish_set_simd(int on)
{
    chacha_lanes_force(on ? -1 : 0);
    poly1305_lanes_force(on ? -1 : 0);
    metric_set_simd(on);
    simd_force(SIMD_F16, on ? -1 : 0);
}

static int peek_chunk(void *ctx, size_t i, unsigned worker)
{
    enum { G = 64 };
    struct open_job *o = (struct open_job *)ctx;
    const struct payload_keys *kp[G];
    const uint8_t *ep[G];
    uint64_t id[G];
    size_t k, m, l, end = (i + 1) * o->chunk;
    (void)worker;
    if (end > o->n)
        end = o->n;
    for (k = i * o->chunk; k < end; k += m) {
        m = end - k < G ? end - k : G;
        for (l = 0; l < m; l++) {
            kp[l] = aead_key(o->c, o->e[k + l].shard);
            ep[l] = o->e[k + l].entry;
        }
        if (o->c->finish_batched)
            payload_peek_ids(m, kp, ep, id);
        else
            for (l = 0; l < m; l++)
                id[l] = payload_peek_id(kp[l], ep[l]);
        for (l = 0; l < m; l++) {
            o->e[k + l].claimed = id[l];
            o->e[k + l].gen = client_gen_current(o->c, id[l]);
        }
    }
    return MESS_OK;
}

/* Authenticates and decrypts the listed entries and reranks the authentic
 * ones; independent per entry (each claim has at most one listed entry).
 * PAYLOAD_BATCH entries at a time: their keystream and SIV blocks run
 * together in the lane core, then the authentic ones are decoded and
 * reranked together (metric_distance_many) while their plaintexts are
 * still in cache. */
static int open_chunk(void *ctx, size_t i, unsigned worker)
{
    struct open_job *o = (struct open_job *)ctx;
    const mess_params *p = &o->c->p;
    size_t pb = payload_plain_bytes(p), k, m, l, end = (i + 1) * o->chunk;
    uint8_t *pl = o->scratch + (size_t)worker * PAYLOAD_BATCH * pb;
    float *x = o->xs + (size_t)worker * PAYLOAD_BATCH * p->dim;
    const struct payload_keys *kp[PAYLOAD_BATCH];
    size_t rerank[PAYLOAD_BATCH], nx;
    double dist[PAYLOAD_BATCH];
    const uint8_t *ep[PAYLOAD_BATCH];
    uint64_t cx[PAYLOAD_BATCH], id[PAYLOAD_BATCH];
    int ok[PAYLOAD_BATCH];
    if (end > o->n)
        end = o->n;
    for (k = i * o->chunk; k < end; k += m) {
        m = end - k < PAYLOAD_BATCH ? end - k : PAYLOAD_BATCH;
        for (l = 0; l < m; l++) {
            struct entry_ref *e = &o->e[o->list[k + l]];
            kp[l] = aead_key(o->c, e->shard);
            ep[l] = e->entry;
            cx[l] = payload_ctx(e->shard, e->gen);
            id[l] = e->claimed;
        }
        if (o->c->finish_batched)
            payload_open_peeked_many(p, m, kp, cx, ep, id, pl, ok);
        else
            for (l = 0; l < m; l++)
                ok[l] = payload_open_peeked(p, kp[l], cx[l], ep[l], id[l],
                                            pl + l * pb) == MESS_OK;
        for (l = 0, nx = 0; l < m; l++) {
            struct entry_ref *e = &o->e[o->list[k + l]];
            e->opened = 1;
            e->ok = ok[l];
            if (e->ok && o->rerank) {
                payload_decode_vector(p, pl + l * pb + 8, x + nx * p->dim);
                rerank[nx++] = e->claim;
            }
        }
        if (o->c->finish_batched)
            metric_distance_many(p->metric, o->q, x, nx, p->dim, dist);
        else
            for (l = 0; l < nx; l++)
                dist[l] = metric_distance(p->metric, o->q, x + l * p->dim, p->dim);
        for (l = 0; l < nx; l++)
            o->claims[rerank[l]].dist = (float)dist[l];
    }
    return MESS_OK;
}

/* Short lists run on the calling thread: starting workers costs more than
 * a few dozen openings (and a hostile response can force many short
 * rounds, one per copy of a forged id). */
static int run_job(struct open_job *o, unsigned workers, parallel_fn fn)
{
    if (o->n < 64)
        workers = 1;
    return o->n ? parallel_for(job_chunks(o, workers), workers, fn, o) : MESS_OK;
}

/* A finish in progress: the entries of the response, the ids they claim,
 * the workers' scratch and the counts reported in mess_finish_stats. */
struct finish {
    const mess_client *c;
    const mess_params *p;
    struct wire_response r;
    size_t total;           /* entries in the response */
    struct entry_ref *ent;  /* total */
    struct claim *claims;   /* up to total; nclaims used */
    size_t nclaims, nok;
    size_t *list;           /* total: the entries of an open round */
    struct claim_map map;
    struct open_job oj;
    unsigned workers;
    mess_finish_stats st;
};

/* Step 1: the response answers this query (request id) and has the shape
 * it asked for (counts within budgets, nothing more). */
static int finish_check_response(struct finish *f, const mess_query *q,
                                 const uint8_t *resp, size_t resp_len)
{
    int rc = wire_response_open(f->p, resp, resp_len, &f->r);
    if (rc != MESS_OK)
        return rc;
    if (sodium_memcmp(f->r.request_id, q->request_id, WIRE_REQUEST_ID_BYTES) != 0)
        return MESS_EAUTH; /* a response to another request (e.g. a replay) */
    return wire_response_check(&f->r, f->p, q->budgets, &f->total);
}

/* Step 2: every buffer the finish needs, sized by the response. */
static int finish_alloc(struct finish *f, size_t k, struct scored **best)
{
    size_t n = f->total ? f->total : 1;
    *best = (struct scored *)mess_malloc_array(k ? k : 1, sizeof **best);
    f->ent = (struct entry_ref *)mess_malloc_array(n, sizeof *f->ent);
    f->claims = (struct claim *)mess_malloc_array(n, sizeof *f->claims);
    f->list = (size_t *)mess_malloc_array(n, sizeof *f->list);
    f->oj.scratch = (uint8_t *)mess_malloc_array((size_t)f->workers * PAYLOAD_BATCH,
                                                 payload_plain_bytes(f->p));
    f->oj.xs = (float *)mess_malloc_array((size_t)f->workers * PAYLOAD_BATCH * f->p->dim,
                                          sizeof(float));
    if (!*best || !f->ent || !f->claims || !f->list || !f->oj.scratch || !f->oj.xs ||
        claim_map_init(&f->map, f->total) != MESS_OK)
        return MESS_ENOMEM;
    return MESS_OK;
}

/* Step 3: index the entries (shard by shard, in response order), peek
 * every entry's claimed id and chain the copies of each claimed id.
 * Copies of one item all carry its id; an id is only accepted once one of
 * its copies authenticates (step 4). */
static int finish_claim_ids(struct finish *f, const mess_query *q)
{
    size_t entry_bytes = payload_entry_bytes(f->p), i;
    uint32_t j;
    int rc;
    for (j = 0, i = 0; j < f->p->shards; j++) {
        uint32_t count, e;
        const uint8_t *entries = wire_response_next(&f->r, entry_bytes, &count);
        for (e = 0; e < count; e++, i++) {
            memset(&f->ent[i], 0, sizeof f->ent[i]);
            f->ent[i].entry = entries + (size_t)e * entry_bytes;
            f->ent[i].shard = j;
            f->ent[i].next = NO_ENTRY;
        }
    }
    f->oj.c = f->c;
    f->oj.e = f->ent;
    f->oj.claims = f->claims;
    f->oj.q = q->q;
    f->oj.n = f->total;
    rc = run_job(&f->oj, f->workers, peek_chunk);
    if (rc != MESS_OK)
        return rc;
    for (i = 0; i < f->total; i++) {
        size_t cl = claim_map_get(&f->map, f->claims, &f->nclaims, f->ent[i].claimed);
        f->ent[i].claim = cl;
        if (f->claims[cl].first == NO_ENTRY)
            f->claims[cl].first = i;
        else
            f->ent[f->claims[cl].last].next = i;
        f->claims[cl].last = i;
    }
    return MESS_OK;
}

/* Step 4: authenticate one copy per claimed id, in rounds: open (and
 * rerank) the current copy of every unresolved claim; a failure moves that
 * claim to its next copy.  Every authentic entry claims its true id, so
 * the accepted set (and for each id the copy used: the first authentic
 * one) is the same as when opening every entry, whatever the server sent;
 * each entry is opened at most once, so a hostile response costs at most
 * one opening per entry.  Redundant copies stay unopened. */
static int finish_authenticate(struct finish *f)
{
    size_t nactive = f->nclaims, a;
    int rc;
    f->oj.list = f->list;
    f->oj.rerank = 1;
    for (a = 0; a < f->nclaims; a++)
        f->list[a] = f->claims[a].first;
    while (nactive) {
        size_t kept = 0;
        f->oj.n = nactive;
        rc = run_job(&f->oj, f->workers, open_chunk);
        if (rc != MESS_OK)
            return rc;
        for (a = 0; a < nactive; a++) {
            struct entry_ref *e = &f->ent[f->list[a]];
            struct claim *cl = &f->claims[e->claim];
            if (e->ok) {
                cl->accepted = f->list[a];
                f->nok++;
            } else {
                f->st.auth_failures++;
                if (e->next != NO_ENTRY)
                    f->list[kept++] = e->next;
            }
        }
        nactive = kept;
    }
    return MESS_OK;
}

/* Step 5 (verify-all only): authenticate the copies not opened too, only
 * to count them. */
static int finish_verify_rest(struct finish *f)
{
    size_t i, a;
    int rc;
    f->oj.n = 0;
    for (i = 0; i < f->total; i++)
        if (!f->ent[i].opened)
            f->list[f->oj.n++] = i;
    f->oj.rerank = 0;
    rc = run_job(&f->oj, f->workers, open_chunk);
    if (rc != MESS_OK)
        return rc;
    for (a = 0; a < f->oj.n; a++) {
        if (f->ent[f->list[a]].ok)
            f->nok++;
        else
            f->st.auth_failures++;
    }
    return MESS_OK;
}

/* Step 6: the best k of the accepted ids (each reranked once), ascending
 * by distance, ties by id. */
static size_t finish_best_k(struct finish *f, struct scored *best, size_t k,
                            uint64_t *ids, float *dists)
{
    size_t nbest = 0, a, i;
    for (i = 0; i < f->total; i++)
        f->st.unopened += !f->ent[i].opened;
    for (a = 0; a < f->nclaims; a++) {
        struct scored v;
        if (f->claims[a].accepted == NO_ENTRY)
            continue;
        f->st.unique++;
        v.id = f->claims[a].id;
        v.dist = f->claims[a].dist;
        if (k)
            heap_offer(best, &nbest, k, v);
    }
    f->st.candidates = f->total;
    qsort(best, nbest, sizeof *best, scored_cmp);
    for (i = 0; i < nbest; i++) {
        ids[i] = best[i].id;
        dists[i] = best[i].dist;
    }
    return nbest;
}

int client_finish(const mess_client *c, const mess_query *q,
                  const uint8_t *resp, size_t resp_len, size_t k,
                  uint64_t *ids, float *dists, size_t *n_out,
                  mess_finish_stats *stats, unsigned workers)
{
    struct finish f;
    struct scored *best = NULL;
    int rc;

    if (!c || !q || !resp || !n_out || (k && (!ids || !dists)))
        return MESS_EINVAL;
    *n_out = 0;
    memset(&f, 0, sizeof f);
    f.c = c;
    f.p = &c->p;
    f.workers = workers ? workers : c->threads ? c->threads : 1;
    if (f.workers > 64)
        f.workers = 64;
    rc = finish_check_response(&f, q, resp, resp_len);
    if (rc == MESS_OK)
        rc = finish_alloc(&f, k, &best);
    if (rc == MESS_OK)
        rc = finish_claim_ids(&f, q);
    if (rc == MESS_OK)
        rc = finish_authenticate(&f);
    if (rc == MESS_OK && c->verify_all)
        rc = finish_verify_rest(&f);
    if (rc == MESS_OK) {
        *n_out = finish_best_k(&f, best, k, ids, dists);
        rc = (f.total > 0 && f.nok == 0) ? MESS_EAUTH : MESS_OK;
    }
    if (stats)
        *stats = f.st;
    if (f.oj.scratch)
        sodium_memzero(f.oj.scratch,
                       (size_t)f.workers * PAYLOAD_BATCH * payload_plain_bytes(f.p));
    if (f.oj.xs)
        sodium_memzero(f.oj.xs,
                       (size_t)f.workers * PAYLOAD_BATCH * f.p->dim * sizeof(float));
    free(f.oj.scratch);
    free(f.oj.xs);
    free(f.list);
    free(f.claims);
    free(f.ent);
    free(best);
    free(f.map.slot);
    return rc;
}

/* ------------------------------------------------------------------------
 * The public entry points (mess.h): each holds the handle's lock around
 * the finish, for reading (client_core.c, "The client's locked entry points").
 * ---------------------------------------------------------------------- */

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
