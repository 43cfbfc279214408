/*
 * client_request.c - a query's request (paper section 4.2): hash the query
 * into every shard, randomized response (lshrr.h), split the pool.
 */
#include <math.h>
#include <sodium.h>

#include "client.h"
#include "isohash.h"
#include "lshrr.h"
#include "metric.h"
#include "parallel.h"
#include "rng.h"

/* ------------------------------------------------------------------------
 * Query request and finish (client)
 * ---------------------------------------------------------------------- */

void mess_query_free(mess_query *q)
{
    if (!q)
        return;
    if (q->q)
        sodium_memzero(q->q, (size_t)q->dim * sizeof(float));
    free(q->q);
    free(q->budgets);
    free(q);
}

/* Builds the request for qv with the coins of operation `op` into w
 * (initialised by the caller; freed by it on failure) and its query into
 * *q_out.  Changes nothing in the client: the caller advances the
 * operation counter once the request is complete.  Only reads the client,
 * so a batch runs it from several threads at once. */
int client_request_build(const mess_client *c, const float *qv, size_t pool,
                         uint64_t op, mess_query **q_out, struct mess_wr *w)
{
    const mess_params *p;
    mess_query *q = NULL;
    struct mess_rng rng;
    uint64_t *clean = NULL, *report = NULL;
    uint8_t *dst;
    uint32_t words;
    size_t i;
    int rc;

    if (!qv || pool == 0)
        return MESS_EINVAL;
    *q_out = NULL;
    p = &c->p;
    if (pool > (size_t)MESS_MAX_BUDGET * p->shards)
        return MESS_ELIMIT;
    for (i = 0; i < p->dim; i++)
        if (!isfinite(qv[i]))
            return MESS_EINVAL;
    if (p->metric == MESS_METRIC_COSINE && vector_is_zero(qv, p->dim))
        return MESS_EINVAL; /* no direction: every cosine distance 1 */
    words = params_words(p);
    q = (mess_query *)calloc(1, sizeof *q);
    clean = (uint64_t *)mess_malloc_array((size_t)p->shards * words, 8);
    report = (uint64_t *)mess_malloc_array((size_t)p->shards * words, 8);
    if (!q || !clean || !report) {
        rc = MESS_ENOMEM;
        goto fail;
    }
    q->q = (float *)mess_malloc_array(p->dim, sizeof(float));
    q->dim = p->dim;
    q->budgets = (uint16_t *)mess_malloc_array(p->shards, sizeof(uint16_t));
    if (!q->q || !q->budgets) {
        rc = MESS_ENOMEM;
        goto fail;
    }
    memcpy(q->q, qv, (size_t)p->dim * sizeof(float));
    /* The whole request is allocated before the op counter changes: a
     * failed call leaves the client as it was. */
    dst = wire_request_begin(w, p, c->owner);
    if (!dst) {
        rc = w->err;
        goto fail;
    }

    rc = isohash_hash_all(c->hash, qv, clean);
    if (rc != MESS_OK)
        goto fail;
    client_coins_init(c, &rng, op, COIN_QUERY, 0, 0);
    rc = lshrr_query_report(c->keys->memo, &rng, qv, p->dim, p->shards,
                            p->kappa, clean, p->p_prr, p->p_irr, report);
    /* The request id and the rotation of the pool split are fresh coins,
     * independent of the clean query (access-pattern theorem, 5.2.3). */
    mess_rng_bytes(&rng, q->request_id, sizeof q->request_id);
    wire_split_pool(p->shards, pool, mess_rng_u32(&rng) % p->shards, q->budgets);
    mess_rng_wipe(&rng);
    if (rc != MESS_OK)
        goto fail;

    wire_request_put(dst, p, q->request_id, q->budgets, report);
    sodium_memzero(clean, (size_t)p->shards * words * 8);
    free(clean);
    free(report);
    *q_out = q;
    return MESS_OK;
fail:
    if (clean)
        sodium_memzero(clean, (size_t)p->shards * words * 8);
    free(clean);
    free(report);
    mess_query_free(q);
    return rc;
}

int client_request(mess_client *c, const float *qv, size_t pool,
                   mess_query **q_out, struct mess_wr *w)
{
    int rc = client_request_build(c, qv, pool, c->op_counter, q_out, w);
    if (rc == MESS_OK)
        c->op_counter++;
    return rc;
}

/* ------------------------------------------------------------------------
 * The public entry points (mess.h): each holds the handle's lock around
 * the request, for writing (client_core.c, "The client's locked entry points").
 * ---------------------------------------------------------------------- */

int mess_client_request(mess_client *c, const float *q, size_t pool,
                        mess_query **q_out, uint8_t **req, size_t *req_len)
{
    struct mess_wr w;
    int rc;
    if (!c || !q_out || !req || !req_len)
        return MESS_EINVAL;
    *q_out = NULL;
    *req = NULL;
    *req_len = 0;
    mess_wr_init(&w);
    client_lock(c);
    rc = client_request(c, q, pool, q_out, &w);
    client_unlock(c);
    return wr_hand_over(&w, rc, req, req_len);
}

int mess_client_request_into(mess_client *c, const float *q, size_t pool,
                             mess_query **q_out, uint8_t *req, size_t cap,
                             size_t *req_len)
{
    struct mess_wr w;
    int rc;
    if (!c || !q_out || !req || !req_len)
        return MESS_EINVAL;
    *q_out = NULL;
    *req_len = mess_request_size(&c->p);
    if (cap < *req_len)
        return MESS_ELIMIT;
    mess_wr_init_fixed(&w, req, cap);
    client_lock(c);
    rc = client_request(c, q, pool, q_out, &w);
    client_unlock(c);
    return rc;
}

struct request_batch {
    const mess_client *c;
    const float *queries;
    size_t pool, req_bytes;
    uint64_t op0;
    mess_query **q_out;
    uint8_t *reqs;
};

static int request_item(void *ctx, size_t i, unsigned worker)
{
    struct request_batch *b = (struct request_batch *)ctx;
    struct mess_wr w;
    MESS_UNUSED(worker);
    mess_wr_init_fixed(&w, b->reqs + i * b->req_bytes, b->req_bytes);
    return client_request_build(b->c, b->queries + i * (size_t)b->c->p.dim, b->pool,
                         b->op0 + i, &b->q_out[i], &w);
}

int mess_client_request_batch(mess_client *c, const float *queries, size_t nq,
                              size_t pool, mess_workers *w, mess_query **q_out,
                              uint8_t *reqs, size_t cap, size_t *req_len)
{
    struct request_batch b;
    size_t i, need;
    int rc;
    if (!c || (!queries && nq) || (!q_out && nq) || (!reqs && nq) || !req_len)
        return MESS_EINVAL;
    for (i = 0; i < nq; i++)
        q_out[i] = NULL;
    *req_len = mess_request_size(&c->p);
    if (mess_mul_size(nq, *req_len, &need) != MESS_OK || cap < need)
        return MESS_ELIMIT;
    if (nq > 0 && mess_mul_size(nq, c->p.dim, &need) != MESS_OK)
        return MESS_ELIMIT;
    b.c = c;
    b.queries = queries;
    b.pool = pool;
    b.req_bytes = *req_len;
    b.q_out = q_out;
    b.reqs = reqs;
    client_lock(c);
    b.op0 = c->op_counter;
    rc = workers_for(w, nq, request_item, &b);
    if (rc == MESS_OK)
        c->op_counter += nq;
    client_unlock(c);
    if (rc != MESS_OK)
        for (i = 0; i < nq; i++) {
            mess_query_free(q_out[i]);
            q_out[i] = NULL;
        }
    return rc;
}
