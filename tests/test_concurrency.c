/*
 * test_concurrency.c - many threads on one server, and parallel builds, on
 * real SIFT data.  Run under ASan in make check and under ThreadSanitizer
 * by make tsan.
 *
 * - Concurrent search: 4 threads each send every request to the same
 *   server (with a 2-thread fan-out inside each search) and must get
 *   exactly the bytes a lone sequential search returns.
 * - Parallel build: deterministic mode makes training, upload encoding and
 *   the server's per-shard inserts a function of the inputs alone, so the
 *   2-thread build must equal the 1-thread build byte for byte.
 * - Parallel finish: 1, 2 or 3 client workers peeking and opening the same
 *   (partly tampered) responses give the same results and counts, in the
 *   default mode and with verify-all.
 */
#include <pthread.h>

#include "../mess_experimental.h"
#include "harness.h"
#include "sift.h"

#define N_ITEMS 1500
#define N_REQ 24
#define THREADS 4

static float *base, *queries, *train;
static size_t n_base, n_query, n_train, dim;
static mess_params params;
static const uint8_t seed[32] = "concurrency test seed 0000000001";

static mess_server *server;
static uint8_t *req[N_REQ], *want[N_REQ];
static size_t req_len[N_REQ], want_len[N_REQ];

struct worker {
    size_t first;
    int mismatches, errors;
};

static void *search_worker(void *arg)
{
    struct worker *w = (struct worker *)arg;
    size_t k, i;
    for (k = 0; k < 3; k++)
        for (i = 0; i < N_REQ; i++) {
            size_t r = (i + w->first) % N_REQ, len;
            uint8_t *resp;
            if (mess_server_search(server, req[r], req_len[r], 2, &resp, &len) != MESS_OK) {
                w->errors++;
                continue;
            }
            if (len != want_len[r] || memcmp(resp, want[r], len) != 0)
                w->mismatches++;
            mess_buf_free(resp);
        }
    return NULL;
}

static int build(unsigned threads, mess_client **c, mess_server **s, uint8_t **up,
                 size_t *up_len)
{
    uint64_t ids[N_ITEMS];
    size_t i;
    int rc;
    for (i = 0; i < N_ITEMS; i++)
        ids[i] = 5000 + i;
    rc = mess_client_new(&params, train, n_train, seed, threads, c);
    if (rc == MESS_OK)
        rc = mess_server_new(&params, s);
    if (rc == MESS_OK)
        rc = mess_client_upload(*c, ids, base, N_ITEMS, threads, up, up_len);
    if (rc == MESS_OK)
        rc = mess_server_apply_upload(*s, *up, *up_len, threads);
    return rc;
}

static void test_parallel_build(void)
{
    mess_client *c1 = NULL, *c2 = NULL;
    mess_server *s1 = NULL, *s2 = NULL;
    uint8_t *u1 = NULL, *u2 = NULL, *r1, *r2;
    size_t l1 = 0, l2 = 0, i, a, b;
    uint64_t codes1[64], codes2[64];
    mess_query *q;
    CHECK_OK(build(1, &c1, &s1, &u1, &l1));
    CHECK_OK(build(2, &c2, &s2, &u2, &l2));
    CHECK(l1 == l2 && u1 && u2 && memcmp(u1, u2, l1) == 0);
    CHECK_OK(mess_client_codes(c1, queries, codes1));
    CHECK_OK(mess_client_codes(c2, queries, codes2));
    CHECK(memcmp(codes1, codes2, sizeof(uint64_t) * params.shards) == 0);
    /* the two servers answer every request identically */
    for (i = 0; i < 8; i++) {
        CHECK_OK(mess_client_request(c1, queries + i * dim, 96, &q, &r1, &a));
        mess_query_free(q);
        CHECK_OK(mess_server_search(s1, r1, a, 1, &r2, &b));
        {
            uint8_t *r3;
            size_t c;
            CHECK_OK(mess_server_search(s2, r1, a, 2, &r3, &c));
            CHECK(b == c && memcmp(r2, r3, b) == 0);
            mess_buf_free(r3);
        }
        mess_buf_free(r1);
        mess_buf_free(r2);
    }
    /* compaction in parallel equals compaction in sequence */
    {
        uint64_t ids[100];
        uint8_t *d, *x, *y;
        size_t dl, xl, yl;
        for (i = 0; i < 100; i++)
            ids[i] = 5000 + 7 * i;
        CHECK_OK(mess_client_delete(c1, ids, 100, &d, &dl));
        CHECK_OK(mess_server_apply_delete(s1, d, dl, NULL));
        CHECK_OK(mess_server_apply_delete(s2, d, dl, NULL));
        mess_buf_free(d);
        CHECK_OK(mess_server_compact(s1, 1));
        CHECK_OK(mess_server_compact(s2, 2));
        CHECK_OK(mess_client_request(c1, queries, 96, &q, &r1, &a));
        mess_query_free(q);
        CHECK_OK(mess_server_search(s1, r1, a, 1, &x, &xl));
        CHECK_OK(mess_server_search(s2, r1, a, 2, &y, &yl));
        CHECK(xl == yl && memcmp(x, y, xl) == 0);
        mess_buf_free(x);
        mess_buf_free(y);
        mess_buf_free(r1);
    }
    mess_buf_free(u1);
    mess_buf_free(u2);
    mess_client_free(c1);
    mess_client_free(c2);
    mess_server_free(s1);
    mess_server_free(s2);
}

/* Flips one bit in every 5th entry of a response; returns how many. */
static size_t tamper_every_5th(uint8_t *resp, size_t len)
{
    size_t eb = mess_payload_size(&params), off[1024], e, n, tampered = 0;
    uint32_t shard[1024];
    n = test_response_entries(resp, len, eb, params.shards, off, shard, 1024);
    for (e = 0; e < n; e += 5, tampered++)
        resp[off[e] + (e * 13) % eb] ^= (uint8_t)(1u << (e % 8));
    return tampered;
}

static void test_parallel_finish(void)
{
    mess_client *c = NULL;
    mess_server *s = NULL;
    uint8_t *up = NULL, *req1, *resp;
    size_t up_len = 0, i, len, rl;
    mess_query *q;
    CHECK_OK(build(2, &c, &s, &up, &up_len));
    mess_buf_free(up);
    for (i = 0; i < 6; i++) {
        uint64_t ids[3][2][10];
        float d[3][2][10];
        size_t got[3][2];
        mess_finish_stats st[3][2];
        unsigned w;
        int all;
        CHECK_OK(mess_client_request(c, queries + i * dim, 64 + 40 * i, &q, &req1, &rl));
        CHECK_OK(mess_server_search(s, req1, rl, 1, &resp, &len));
        if (i % 2)
            CHECK(tamper_every_5th(resp, len) > 0);
        for (w = 0; w < 3; w++)
            for (all = 0; all < 2; all++) {
                CHECK_OK(mess_client_set_threads(c, w + 1));
                CHECK_OK(mess_client_set_verify_all(c, all));
                CHECK_OK(mess_client_finish(c, q, resp, len, 10, ids[w][all], d[w][all],
                                            &got[w][all], &st[w][all]));
            }
        for (w = 0; w < 3; w++)
            for (all = 0; all < 2; all++) {
                CHECK(got[w][all] == got[0][0] &&
                      memcmp(ids[w][all], ids[0][0], got[0][0] * sizeof(uint64_t)) == 0 &&
                      memcmp(d[w][all], d[0][0], got[0][0] * sizeof(float)) == 0);
                CHECK(st[w][all].candidates == st[0][all].candidates &&
                      st[w][all].unique == st[0][all].unique &&
                      st[w][all].auth_failures == st[0][all].auth_failures &&
                      st[w][all].unopened == st[0][all].unopened);
            }
        CHECK(st[0][1].unopened == 0 && st[0][0].unopened > 0);
        CHECK(i % 2 == 0 || st[0][1].auth_failures > 0);
        mess_buf_free(req1);
        mess_buf_free(resp);
        mess_query_free(q);
    }
    mess_client_free(c);
    mess_server_free(s);
}

static void test_concurrent_search(void)
{
    mess_client *c = NULL;
    uint8_t *up = NULL;
    size_t up_len = 0, i;
    pthread_t th[THREADS];
    struct worker w[THREADS];
    mess_query *q;
    CHECK_OK(build(2, &c, &server, &up, &up_len));
    mess_buf_free(up);
    for (i = 0; i < N_REQ; i++) {
        CHECK_OK(mess_client_request(c, queries + i * dim, 32 + 8 * i, &q, &req[i],
                                     &req_len[i]));
        mess_query_free(q);
        CHECK_OK(mess_server_search(server, req[i], req_len[i], 1, &want[i],
                                    &want_len[i]));
    }
    for (i = 0; i < THREADS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].first = i * 5;
        CHECK(pthread_create(&th[i], NULL, search_worker, &w[i]) == 0);
    }
    for (i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        CHECK(w[i].errors == 0 && w[i].mismatches == 0);
    }
    for (i = 0; i < N_REQ; i++) {
        mess_buf_free(req[i]);
        mess_buf_free(want[i]);
    }
    mess_server_free(server);
    mess_client_free(c);
}

int main(void)
{
    if (test_read_sift(&base, &n_base, &queries, &n_query, &train, &n_train, &dim) ||
        n_base < N_ITEMS || n_query < N_REQ) {
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
    RUN(test_parallel_build);
    RUN(test_concurrent_search);
    RUN(test_parallel_finish);
    mess_vecs_free(base);
    mess_vecs_free(queries);
    mess_vecs_free(train);
    HARNESS_END();
}
