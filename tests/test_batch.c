/*
 * test_batch.c - persistent workers (mess_workers) and the batch calls
 * that reuse them, on real SIFT data.  Run under ASan in make check and
 * under ThreadSanitizer by make tsan.
 *
 * - Workers: every item of a job runs exactly once, on a worker id below
 *   the pool's size; the first error stops the job and is returned; the
 *   same threads serve thousands of jobs; two threads submitting to one
 *   pool take turns.
 * - Caller-owned buffers: each _into call writes the bytes the allocating
 *   call returns (two clients from one seed: same coins); a buffer one
 *   byte short is MESS_ELIMIT with the size needed and changes nothing
 *   (the next operation of both clients still agrees).
 * - Batches: request_batch equals the same requests made one by one,
 *   search_batch and finish_batch equal the per-call results; a bad item
 *   fails alone (status) or the whole batch (no status, nothing kept).
 */
#include <pthread.h>

#include "../mess.h"
#include "../mess_experimental.h"
#include "parallel.h"
#include "harness.h"
#include "sift.h"

#define THREADS 4

/* ---- workers ------------------------------------------------------------- */

struct count_job {
    unsigned char *hits;   /* per item: times run */
    unsigned threads;
    size_t fail_at;        /* item returning MESS_EFORMAT, or (size_t)-1 */
    int bad_worker;
};

static int count_item(void *ctx, size_t i, unsigned worker)
{
    struct count_job *j = (struct count_job *)ctx;
    j->hits[i]++;
    if (worker >= j->threads)
        j->bad_worker = 1; /* racy write of a constant: only set on failure */
    return i == j->fail_at ? MESS_EFORMAT : MESS_OK;
}

static void test_workers_basics(void)
{
    mess_workers *w = NULL;
    CHECK_RC(mess_workers_new(2, NULL), MESS_EINVAL);
    CHECK_RC(mess_workers_new(MESS_MAX_THREADS + 1, &w), MESS_ELIMIT);
    CHECK(w == NULL);
    CHECK_OK(mess_workers_new(0, &w));
    CHECK(mess_workers_threads(w) == 1);
    mess_workers_free(w);
    CHECK(mess_workers_threads(NULL) == 0);
    mess_workers_free(NULL);
}

static void test_workers_jobs(void)
{
    enum { N = 2000 };
    static unsigned char hits[N];
    struct count_job j;
    mess_workers *w = NULL;
    size_t i, round, wrong = 0;
    CHECK_OK(mess_workers_new(THREADS, &w));
    if (!w)
        return;
    CHECK(mess_workers_threads(w) == THREADS);
    memset(&j, 0, sizeof j);
    j.hits = hits;
    j.threads = THREADS;
    j.fail_at = (size_t)-1;
    /* the same threads serve many jobs, each item exactly once */
    for (round = 0; round < 500; round++) {
        size_t n = 1 + (round * 37) % N;
        memset(hits, 0, sizeof hits);
        if (workers_for(w, n, count_item, &j) != MESS_OK)
            wrong++;
        for (i = 0; i < N; i++)
            wrong += hits[i] != (i < n);
    }
    CHECK(wrong == 0);
    CHECK(j.bad_worker == 0);
    /* an error stops the job and is the result; the pool stays usable */
    memset(hits, 0, sizeof hits);
    j.fail_at = 10;
    CHECK_RC(workers_for(w, N, count_item, &j), MESS_EFORMAT);
    CHECK(hits[10] == 1);
    j.fail_at = (size_t)-1;
    memset(hits, 0, sizeof hits);
    CHECK_OK(workers_for(w, N, count_item, &j));
    for (i = 0, wrong = 0; i < N; i++)
        wrong += hits[i] != 1;
    CHECK(wrong == 0);
    /* zero items, and NULL workers (inline) */
    CHECK_OK(workers_for(w, 0, count_item, &j));
    memset(hits, 0, sizeof hits);
    CHECK_OK(workers_for(NULL, 5, count_item, &j));
    CHECK(hits[0] == 1 && hits[4] == 1 && hits[5] == 0);
    mess_workers_free(w);
}

/* Two threads submit jobs to one pool at the same time: they take turns,
 * and each job still runs each of its items once. */
struct submitter {
    mess_workers *w;
    unsigned char hits[3000];
    int wrong;
};

static void *submit_main(void *arg)
{
    struct submitter *s = (struct submitter *)arg;
    struct count_job j;
    size_t round, i;
    memset(&j, 0, sizeof j);
    j.hits = s->hits;
    j.threads = THREADS;
    j.fail_at = (size_t)-1;
    for (round = 0; round < 100; round++) {
        memset(s->hits, 0, sizeof s->hits);
        if (workers_for(s->w, sizeof s->hits, count_item, &j) != MESS_OK)
            s->wrong++;
        for (i = 0; i < sizeof s->hits; i++)
            s->wrong += s->hits[i] != 1;
    }
    s->wrong += j.bad_worker;
    return NULL;
}

static void test_workers_shared(void)
{
    static struct submitter a, b;
    pthread_t ta, tb;
    mess_workers *w = NULL;
    CHECK_OK(mess_workers_new(THREADS, &w));
    if (!w)
        return;
    a.w = b.w = w;
    CHECK(pthread_create(&ta, NULL, submit_main, &a) == 0);
    CHECK(pthread_create(&tb, NULL, submit_main, &b) == 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK(a.wrong == 0 && b.wrong == 0);
    mess_workers_free(w);
}

static void setup_failed(void)
{
    CHECK(!"client, server, upload; upload_into equal to upload, refused one byte short");
}

/* ---- protocol ------------------------------------------------------------ */

#define N_ITEMS 1200
#define NQ 16
#define POOL 64
#define K 10

static float *base, *queries, *train;
static size_t n_base, n_query, n_train, dim;
static mess_params params;
static const uint8_t seed[32] = "batch test seed 0000000000000001";

/* Two clients from one seed (same keys and coins while their operations
 * match) and a server holding the first one's upload. */
static mess_client *c1, *c2;
static mess_server *srv;

static int setup(void)
{
    uint64_t ids[N_ITEMS];
    uint8_t *up = NULL, *up2;
    size_t len = 0, len2 = 0, i, cap;
    int rc, same;
    for (i = 0; i < N_ITEMS; i++)
        ids[i] = 100 + i;
    rc = mess_client_new(&params, train, n_train, seed, 2, &c1);
    if (rc == MESS_OK)
        rc = mess_client_new(&params, train, n_train, seed, 2, &c2);
    if (rc == MESS_OK)
        rc = mess_server_new(&params, &srv);
    if (rc == MESS_OK)
        rc = mess_client_upload(c1, ids, base, N_ITEMS, 2, &up, &len);
    if (rc != MESS_OK)
        return rc;
    /* upload_into: one byte short is refused with the size, then fits */
    cap = mess_upload_size(&params, N_ITEMS);
    up2 = (uint8_t *)malloc(cap);
    if (!up2 || cap != len) {
        mess_buf_free(up);
        free(up2);
        return MESS_EFORMAT;
    }
    same = mess_client_upload_into(c2, ids, base, N_ITEMS, 2, up2, cap - 1, &len2) ==
               MESS_ELIMIT && len2 == cap;
    same = same && mess_client_upload_into(c2, ids, base, N_ITEMS, 2, up2, cap, &len2) ==
                       MESS_OK && len2 == len && memcmp(up, up2, len) == 0;
    rc = same ? mess_server_apply_upload(srv, up, len, 2) : MESS_EFORMAT;
    mess_buf_free(up);
    free(up2);
    return rc;
}

/* The next request of c1 (allocating) and of c2 (into) are identical:
 * the clients' operation counters agree. */
static int next_requests_agree(const float *q)
{
    uint8_t *r1 = NULL, r2[1 << 14];
    size_t l1 = 0, l2 = 0;
    mess_query *q1 = NULL, *q2 = NULL;
    int same = 0;
    if (mess_client_request(c1, q, POOL, &q1, &r1, &l1) == MESS_OK &&
        mess_client_request_into(c2, q, POOL, &q2, r2, sizeof r2, &l2) == MESS_OK)
        same = l1 == l2 && memcmp(r1, r2, l1) == 0;
    mess_buf_free(r1);
    mess_query_free(q1);
    mess_query_free(q2);
    return same;
}

static void test_into(void)
{
    size_t need = mess_request_size(&params), len = 0, l1 = 0, i;
    uint8_t *buf = (uint8_t *)malloc(need + 64), *resp = NULL, *r2;
    mess_query *q = (mess_query *)&len, *q1 = NULL;
    uint64_t del_ids[3] = {100, 101, 102};
    if (!buf)
        return;
    CHECK(next_requests_agree(queries));
    /* request_into one byte short: MESS_ELIMIT with the size, no query,
     * and the operation counter did not move */
    memset(buf, 0x5A, need + 64);
    CHECK_RC(mess_client_request_into(c2, queries, POOL, &q, buf, need - 1, &len),
             MESS_ELIMIT);
    CHECK(len == need && q == NULL && buf[0] == 0x5A);
    CHECK(next_requests_agree(queries + dim));
    /* nothing is written past the request */
    CHECK_OK(mess_client_request_into(c1, queries, POOL, &q1, buf, need + 64, &len));
    CHECK(len == need && buf[need] == 0x5A && buf[need + 63] == 0x5A);
    CHECK_OK(mess_client_request_into(c2, queries, POOL, &q, buf, need, &len));

    /* search_into: the bytes of the allocating search; exact size needed */
    CHECK_OK(mess_server_search(srv, buf, len, 2, &resp, &l1));
    r2 = (uint8_t *)malloc(l1);
    if (r2) {
        size_t l2 = 0;
        CHECK_RC(mess_server_search_into(srv, buf, len, 2, r2, l1 - 1, &l2), MESS_ELIMIT);
        CHECK(l2 == l1);
        CHECK_OK(mess_server_search_into(srv, buf, len, 1, r2, l1, &l2));
        CHECK(l2 == l1 && memcmp(resp, r2, l1) == 0);
        CHECK(l1 <= mess_response_size(&params, POOL));
        free(r2);
    }
    mess_buf_free(resp);
    mess_query_free(q);
    mess_query_free(q1);

    /* delete_into one byte short changes nothing: had it marked the ids
     * deleted, c2's next upload of them would move to a new generation
     * (other labels) and differ from c1's */
    {
        size_t dneed = mess_delete_size(&params, 3), dl = 0, ul1 = 0, ul2 = 0;
        uint8_t *d1 = NULL, *u1 = NULL, *u2 = NULL;
        CHECK_RC(mess_client_delete_into(c2, del_ids, 3, buf, dneed - 1, &dl), MESS_ELIMIT);
        CHECK(dl == dneed);
        CHECK_OK(mess_client_upload(c1, del_ids, base, 3, 1, &u1, &ul1));
        CHECK_OK(mess_client_upload(c2, del_ids, base, 3, 1, &u2, &ul2));
        CHECK(ul1 == ul2 && u1 && u2 && memcmp(u1, u2, ul1) == 0);
        mess_buf_free(u1);
        mess_buf_free(u2);
        /* and a delete_into that fits equals the allocating delete */
        CHECK_OK(mess_client_delete(c1, del_ids, 3, &d1, &dl));
        CHECK_OK(mess_client_delete_into(c2, del_ids, 3, buf, need + 64, &len));
        CHECK(len == dl && d1 && memcmp(d1, buf, dl) == 0);
        mess_buf_free(d1);
    }
    /* arguments */
    CHECK_RC(mess_client_request_into(c2, queries, POOL, &q, NULL, need, &len), MESS_EINVAL);
    CHECK_RC(mess_server_search_into(srv, buf, need, 1, NULL, 10, &len), MESS_EINVAL);
    for (i = 0; i < 2; i++)
        CHECK(next_requests_agree(queries + (2 + i) * dim));
    free(buf);
}

static void test_batches(void)
{
    size_t rs = mess_request_size(&params), len = 0, i, bad;
    uint8_t *reqs = (uint8_t *)malloc(NQ * rs), *one[NQ];
    size_t one_len[NQ], resp_len[NQ], batch_len[NQ], n_a[NQ], n_b[NQ];
    uint8_t *resp[NQ], *batch_resp[NQ];
    const uint8_t *req_ptr[NQ];
    size_t req_lens[NQ];
    mess_query *qa[NQ], *qb[NQ];
    mess_finish_stats st_a[NQ];
    struct { mess_finish_stats st; uint8_t pad[24]; } st_b[NQ];
    uint64_t ids_a[NQ * K], ids_b[NQ * K];
    float d_a[NQ * K], d_b[NQ * K], *bad_q;
    int status[NQ];
    mess_workers *w = NULL;

    CHECK_OK(mess_workers_new(THREADS, &w));
    if (!reqs || !w)
        goto out;
    CHECK(next_requests_agree(queries));
    /* requests: the batch equals the same requests made one at a time */
    for (i = 0; i < NQ; i++)
        CHECK_OK(mess_client_request(c1, queries + i * dim, POOL, &qa[i], &one[i],
                                     &one_len[i]));
    CHECK_OK(mess_client_request_batch(c2, queries, NQ, POOL, w, qb, reqs, NQ * rs, &len));
    CHECK(len == rs);
    for (i = 0, bad = 0; i < NQ; i++)
        bad += one_len[i] != rs || memcmp(one[i], reqs + i * rs, rs) != 0;
    CHECK(bad == 0);
    CHECK(next_requests_agree(queries + 3 * dim));
    /* too small, or one bad query: nothing kept, counter unchanged */
    {
        mess_query *qc[NQ];
        CHECK_RC(mess_client_request_batch(c2, queries, NQ, POOL, w, qc, reqs,
                                           NQ * rs - 1, &len), MESS_ELIMIT);
        CHECK(len == rs && qc[0] == NULL);
        bad_q = (float *)malloc(NQ * dim * sizeof(float));
        if (bad_q) {
            memcpy(bad_q, queries, NQ * dim * sizeof(float));
            bad_q[5 * dim + 7] = 0.0f / 0.0f; /* NaN */
            CHECK_RC(mess_client_request_batch(c2, bad_q, NQ, POOL, w, qc, reqs,
                                               NQ * rs, &len), MESS_EINVAL);
            for (i = 0, bad = 0; i < NQ; i++)
                bad += qc[i] != NULL;
            CHECK(bad == 0);
            free(bad_q);
        }
        CHECK(next_requests_agree(queries + 4 * dim));
    }

    /* searches: the batch's responses are the per-call ones */
    for (i = 0; i < NQ; i++) {
        req_ptr[i] = one[i];
        req_lens[i] = one_len[i];
        CHECK_OK(mess_server_search(srv, one[i], one_len[i], 1, &resp[i], &resp_len[i]));
    }
    CHECK_OK(mess_server_search_batch(srv, req_ptr, req_lens, NQ, w, batch_resp,
                                      batch_len, NULL));
    for (i = 0, bad = 0; i < NQ; i++) {
        bad += batch_len[i] != resp_len[i] ||
               memcmp(batch_resp[i], resp[i], resp_len[i]) != 0;
        mess_buf_free(batch_resp[i]);
    }
    CHECK(bad == 0);
    /* a truncated request fails alone with a status array, ... */
    req_lens[6] = 10;
    CHECK_RC(mess_server_search_batch(srv, req_ptr, req_lens, NQ, w, batch_resp,
                                      batch_len, status), MESS_EFORMAT);
    for (i = 0, bad = 0; i < NQ; i++) {
        if (i == 6)
            bad += status[i] != MESS_EFORMAT || batch_resp[i] != NULL || batch_len[i] != 0;
        else
            bad += status[i] != MESS_OK || batch_len[i] != resp_len[i] ||
                   memcmp(batch_resp[i], resp[i], resp_len[i]) != 0;
        mess_buf_free(batch_resp[i]);
    }
    CHECK(bad == 0);
    /* ... and the whole batch without one (nothing kept) */
    CHECK_RC(mess_server_search_batch(srv, req_ptr, req_lens, NQ, w, batch_resp,
                                      batch_len, NULL), MESS_EFORMAT);
    for (i = 0, bad = 0; i < NQ; i++)
        bad += batch_resp[i] != NULL;
    CHECK(bad == 0);
    req_lens[6] = one_len[6];

    /* finishes: the batch's results and stats are the per-call ones; the
     * stats array is indexed with the caller's struct size */
    for (i = 0; i < NQ; i++)
        CHECK_OK(mess_client_finish(c1, qa[i], resp[i], resp_len[i], K, ids_a + i * K,
                                    d_a + i * K, &n_a[i], &st_a[i]));
    memset(st_b, 0xEE, sizeof st_b);
    CHECK_OK(mess_client_finish_batch_sized(c2, (const mess_query *const *)qb,
                                            (const uint8_t *const *)resp, resp_len, NQ,
                                            K, w, ids_b, d_b, n_b, &st_b[0].st,
                                            sizeof st_b[0], status));
    for (i = 0, bad = 0; i < NQ; i++)
        bad += status[i] != MESS_OK || n_a[i] != n_b[i] ||
               memcmp(ids_a + i * K, ids_b + i * K, n_a[i] * sizeof *ids_a) != 0 ||
               memcmp(d_a + i * K, d_b + i * K, n_a[i] * sizeof *d_a) != 0 ||
               st_b[i].st.size != sizeof st_b[0] ||
               st_b[i].st.candidates != st_a[i].candidates ||
               st_b[i].st.unique != st_a[i].unique ||
               st_b[i].st.unopened != st_a[i].unopened ||
               st_b[i].st.auth_failures != 0;
    CHECK(bad == 0);
    /* a response whose entries were all forged fails its item only */
    {
        uint8_t *forged = (uint8_t *)malloc(resp_len[2]), *orig = resp[2];
        size_t e, off[256], eb = mess_payload_size(&params), ne;
        uint32_t sh[256];
        if (forged) {
            memcpy(forged, resp[2], resp_len[2]);
            ne = test_response_entries(forged, resp_len[2], eb, params.shards, off, sh, 256);
            CHECK(ne > 0);
            for (e = 0; e < ne; e++)
                forged[off[e] + eb - 1] ^= 0x40; /* every entry fails the AEAD */
            resp[2] = forged;
            CHECK_RC(mess_client_finish_batch(c2, (const mess_query *const *)qb,
                                              (const uint8_t *const *)resp, resp_len,
                                              NQ, K, w, ids_b, d_b, n_b, NULL, status),
                     MESS_EAUTH);
            for (i = 0, bad = 0; i < NQ; i++)
                bad += i == 2 ? (status[i] != MESS_EAUTH || n_b[i] != 0)
                              : (status[i] != MESS_OK || n_b[i] != n_a[i]);
            CHECK(bad == 0);
            resp[2] = orig;
            free(forged);
        }
    }
    for (i = 0; i < NQ; i++) {
        mess_buf_free(one[i]);
        mess_buf_free(resp[i]);
        mess_query_free(qa[i]);
        mess_query_free(qb[i]);
    }
out:
    mess_workers_free(w);
    free(reqs);
}

int main(void)
{
    RUN(test_workers_basics);
    RUN(test_workers_jobs);
    RUN(test_workers_shared);
    if (test_read_sift(&base, &n_base, &queries, &n_query, &train, &n_train, &dim) ||
        n_base < N_ITEMS || n_query < NQ) {
        fprintf(stderr, "cannot read datasets/sift\n");
        return 1;
    }
    mess_params_default(&params, (uint32_t)dim);
    params.kappa = 64;
    params.shards = 8;
    params.per_item = 2;
    params.hnsw_m = 8;
    params.ef_construction = 32;
    params.train_sample = 1000;
    if (setup() == MESS_OK) {
        RUN(test_into);
        RUN(test_batches);
    } else {
        RUN(setup_failed);
    }
    mess_client_free(c1);
    mess_client_free(c2);
    mess_server_free(srv);
    mess_vecs_free(base);
    mess_vecs_free(queries);
    mess_vecs_free(train);
    HARNESS_END();
}
