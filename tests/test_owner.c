/*
 * test_owner.c - a server belongs to the client of its first upload (owner
 * tags in every upload, delete and request buffer; MESS_EOWNER for any
 * other client, with nothing changed); ef_search is server-side tuning,
 * outside the parameter fingerprint; non-finite vectors are refused on
 * upload.  On the bundled SIFT data.
 */
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "../mess_experimental.h"
#include "harness.h"
#include "sift.h"

#define N_BASE 2000
#define N_QUERY 40
#define K 10
#ifndef POOL
#define POOL 16
#endif

static float *base, *queries, *train;
static size_t n_base, n_query, n_train, dim;
static int32_t *truth; /* exact L2 top-K among the first N_BASE */

static const uint8_t seed_a[32] = {1, 2, 3};
static const uint8_t seed_b[32] = {4, 5, 6};
static mess_client *ca, *cb; /* two clients of the same parameters (training
                              is the slow part: made once) */

static void params(mess_params *p)
{
    mess_params_default(p, (uint32_t)dim);
    p->shards = 8;
    p->per_item = 2;
    p->hnsw_m = 8;
    p->ef_construction = 60;
    p->train_sample = 1000;
}

static int load_data(void)
{
    size_t q, i, j;
    if (test_read_sift(&base, &n_base, &queries, &n_query, &train, &n_train, &dim) ||
        n_base < N_BASE || n_query < N_QUERY)
        return -1;
    n_base = N_BASE;
    n_query = N_QUERY;
    n_train = n_train < 1000 ? n_train : 1000;
    truth = (int32_t *)malloc(n_query * K * sizeof *truth);
    for (q = 0; q < n_query; q++) {
        double best[K];
        for (j = 0; j < K; j++)
            best[j] = INFINITY;
        for (i = 0; i < n_base; i++) {
            double d = 0;
            size_t c;
            for (c = 0; c < dim; c++) {
                double e = (double)queries[q * dim + c] - base[i * dim + c];
                d += e * e;
            }
            if (d < best[K - 1]) {
                j = K - 1;
                while (j > 0 && best[j - 1] > d) {
                    best[j] = best[j - 1];
                    truth[q * K + j] = truth[q * K + j - 1];
                    j--;
                }
                best[j] = d;
                truth[q * K + j] = (int32_t)i;
            }
        }
    }
    return 0;
}

static mess_client *client_of(const mess_params *p, const uint8_t *seed)
{
    mess_client *c = NULL;
    CHECK_OK(mess_client_new(p, train, n_train, seed, 2, &c));
    return c;
}

static void insert_all(mess_client *c, mess_server *s, size_t n)
{
    uint64_t *ids = (uint64_t *)malloc(n * sizeof *ids);
    uint8_t *buf;
    size_t i, len;
    for (i = 0; i < n; i++)
        ids[i] = i;
    CHECK_OK(mess_client_upload(c, ids, base, n, 2, &buf, &len));
    CHECK_OK(mess_server_apply_upload(s, buf, len, 2));
    mess_buf_free(buf);
    free(ids);
}

/* Recall@K of the first nq queries at total pool `pool`. */
static double recall(mess_client *c, const mess_server *s, size_t nq, size_t pool)
{
    size_t q, hits = 0;
    for (q = 0; q < nq; q++) {
        mess_query *qs;
        uint8_t *req, *resp;
        size_t req_len, resp_len, got, a, b;
        uint64_t ids[K];
        float dists[K];
        if (mess_client_request(c, queries + q * dim, pool, &qs, &req, &req_len) != MESS_OK)
            return -1;
        if (mess_server_search(s, req, req_len, 1, &resp, &resp_len) != MESS_OK) {
            mess_query_free(qs);
            mess_buf_free(req);
            return -1;
        }
        if (mess_client_finish(c, qs, resp, resp_len, K, ids, dists, &got, NULL) == MESS_OK)
            for (a = 0; a < K; a++)
                for (b = 0; b < got; b++)
                    if (ids[b] == (uint64_t)truth[q * K + a])
                        hits++;
        mess_query_free(qs);
        mess_buf_free(req);
        mess_buf_free(resp);
    }
    return (double)hits / (double)(nq * K);
}

static void save_bytes(const mess_server *s, const char *path, uint8_t **out,
                       size_t *len)
{
    CHECK_OK(mess_server_save(s, path));
    *out = test_read_file(path, len);
    CHECK(*out != NULL);
}

static void test_owner_tags(void)
{
    mess_client *a2 = NULL;
    uint8_t ta[MESS_OWNER_BYTES], tb[MESS_OWNER_BYTES], t2[MESS_OWNER_BYTES];
    char path[] = "/tmp/mess_owner_cXXXXXX";
    int fd = mkstemp(path);
    CHECK_OK(mess_client_owner(ca, ta));
    CHECK_OK(mess_client_owner(cb, tb));
    CHECK(memcmp(ta, tb, sizeof ta) != 0);
    CHECK_RC(mess_client_owner(NULL, ta), MESS_EINVAL);
    CHECK_RC(mess_client_owner(ca, NULL), MESS_EINVAL);
    /* a function of the master key only: the same after save and load */
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
    CHECK_OK(mess_client_save(ca, path, NULL));
    CHECK_OK(mess_client_load(path, NULL, &a2));
    CHECK_OK(mess_client_owner(a2, t2));
    CHECK(memcmp(ta, t2, sizeof ta) == 0);
    unlink(path);
    mess_client_free(a2);
}

static void test_owner_refuses_others(void)
{
    mess_params p;
    mess_server *s, *s2 = NULL;
    mess_query *q;
    uint8_t ta[MESS_OWNER_BYTES], tb[MESS_OWNER_BYTES], got[MESS_OWNER_BYTES];
    uint8_t *buf, *req, *resp = NULL, *before, *after;
    size_t len, req_len, resp_len, blen, alen, missing;
    uint64_t id = N_BASE, del_ids[2] = {0, 1};
    char path[] = "/tmp/mess_owner_sXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
    params(&p);
    mess_client_owner(ca, ta);
    mess_client_owner(cb, tb);
    CHECK_OK(mess_server_new(&p, &s));

    /* a fresh server has no owner: anyone may use it */
    CHECK_RC(mess_server_owner(s, got), MESS_ENOTFOUND);
    CHECK_OK(mess_server_check_owner(s, ta));
    CHECK_OK(mess_server_check_owner(s, tb));
    CHECK_OK(mess_client_request(cb, queries, 40, &q, &req, &req_len));
    CHECK_OK(mess_server_search(s, req, req_len, 1, &resp, &resp_len));
    mess_buf_free(req);
    mess_buf_free(resp);
    mess_query_free(q);

    /* a's first upload makes it the owner */
    insert_all(ca, s, 500);
    CHECK_OK(mess_server_owner(s, got));
    CHECK(memcmp(got, ta, sizeof ta) == 0);
    CHECK_OK(mess_server_check_owner(s, ta));
    CHECK_RC(mess_server_check_owner(s, tb), MESS_EOWNER);
    CHECK(strstr(mess_strerror(MESS_EOWNER), "another client") != NULL);

    /* b is refused on every path, and nothing changes */
    save_bytes(s, path, &before, &blen);
    CHECK_OK(mess_client_upload(cb, &id, base + id * dim, 1, 1, &buf, &len));
    CHECK_RC(mess_server_apply_upload(s, buf, len, 1), MESS_EOWNER);
    mess_buf_free(buf);
    CHECK_OK(mess_client_delete(cb, del_ids, 2, &buf, &len));
    CHECK_RC(mess_server_apply_delete(s, buf, len, &missing), MESS_EOWNER);
    mess_buf_free(buf);
    CHECK_OK(mess_client_request(cb, queries, 40, &q, &req, &req_len));
    resp = NULL;
    CHECK_RC(mess_server_search(s, req, req_len, 1, &resp, &resp_len), MESS_EOWNER);
    CHECK(resp == NULL);
    mess_buf_free(req);
    mess_query_free(q);
    save_bytes(s, path, &after, &alen);
    CHECK(blen == alen && memcmp(before, after, blen) == 0);
    free(before);
    free(after);

    /* the owner goes on: upload, delete, search */
    CHECK_OK(mess_client_upload(ca, &id, base + id * dim, 1, 1, &buf, &len));
    CHECK_OK(mess_server_apply_upload(s, buf, len, 1));
    mess_buf_free(buf);
    CHECK_OK(mess_client_delete(ca, del_ids, 2, &buf, &len));
    CHECK_OK(mess_server_apply_delete(s, buf, len, &missing));
    CHECK(missing == 0);
    mess_buf_free(buf);
    CHECK(recall(ca, s, 5, 200) > 0.3);

    /* the owner is kept in the server file */
    CHECK_OK(mess_server_save(s, path));
    CHECK_OK(mess_server_load(path, &p, &s2));
    CHECK_OK(mess_server_owner(s2, got));
    CHECK(memcmp(got, ta, sizeof ta) == 0);
    CHECK_RC(mess_server_check_owner(s2, tb), MESS_EOWNER);
    CHECK_OK(mess_client_request(cb, queries, 40, &q, &req, &req_len));
    CHECK_RC(mess_server_search(s2, req, req_len, 1, &resp, &resp_len), MESS_EOWNER);
    mess_buf_free(req);
    mess_query_free(q);
    /* compaction keeps it */
    CHECK_OK(mess_server_compact(s2, 1));
    CHECK_RC(mess_server_check_owner(s2, tb), MESS_EOWNER);

    CHECK_RC(mess_server_owner(NULL, got), MESS_EINVAL);
    CHECK_RC(mess_server_check_owner(s, NULL), MESS_EINVAL);
    unlink(path);
    mess_server_free(s);
    mess_server_free(s2);
}

/* Only an upload that is applied makes an owner. */
static void test_owner_survives_failed_first_upload(void)
{
    mess_params p;
    mess_server *s;
    uint8_t *buf, tb[MESS_OWNER_BYTES], got[MESS_OWNER_BYTES];
    size_t len;
    uint64_t ids[2] = {7, 7};
    params(&p);
    CHECK_OK(mess_server_new(&p, &s));
    /* a refused upload (repeated id) makes no owner */
    CHECK_RC(mess_client_upload(ca, ids, base, 2, 1, &buf, &len), MESS_EINVAL);
    ids[1] = 8;
    CHECK_OK(mess_client_upload(ca, ids, base, 2, 1, &buf, &len));
    CHECK_RC(mess_server_apply_upload(s, buf, len - 1, 1), MESS_EFORMAT);
    mess_buf_free(buf);
    CHECK_RC(mess_server_owner(s, got), MESS_ENOTFOUND);
    /* so b may still become the owner */
    insert_all(cb, s, 10);
    mess_client_owner(cb, tb);
    CHECK_OK(mess_server_owner(s, got));
    CHECK(memcmp(got, tb, sizeof tb) == 0);
    mess_server_free(s);
}

static void test_ef_search_outside_fingerprint(void)
{
    mess_params p, ps, got;
    mess_server *s, *s2;
    mess_client *c = ca;
    uint8_t *buf;
    size_t len;
    uint64_t id = 0;
    double r_low, r_high;
    params(&p);
    /* the server made with another ef_search accepts the client's buffers */
    ps = p;
    ps.ef_search = 300;
    CHECK_OK(mess_server_new(&ps, &s));
    insert_all(c, s, N_BASE);
    CHECK_OK(mess_server_params(s, &got));
    CHECK(got.ef_search == 300);

    /* bounds */
    CHECK_RC(mess_server_set_ef_search(s, MESS_MAX_EF + 1), MESS_ELIMIT);
    CHECK_RC(mess_server_set_ef_search(NULL, 10), MESS_EINVAL);
    CHECK_OK(mess_server_params(s, &got));
    CHECK(got.ef_search == 300);

    /* recall responds to the beam: budget 2 per shard searched with ef = 2
     * against ef = 300 */
    CHECK_OK(mess_server_set_ef_search(s, 0));
    r_low = recall(c, s, N_QUERY, POOL);
    CHECK_OK(mess_server_set_ef_search(s, 300));
    r_high = recall(c, s, N_QUERY, POOL);
    printf("  recall@%d at pool %d: ef_search 0 -> %.3f, 300 -> %.3f\n", K,
           POOL, r_low, r_high);
    CHECK(r_low >= 0 && r_high > r_low + 0.03);
    CHECK_OK(mess_server_set_ef_search(s, MESS_MAX_EF));
    CHECK(recall(c, s, 2, POOL) >= 0);
    mess_server_free(s);

    /* train_sample is the client's business: a server made with another
     * value serves the client */
    ps = p;
    ps.train_sample = p.train_sample + 1;
    CHECK_OK(mess_server_new(&ps, &s));
    CHECK_OK(mess_client_upload(c, &id, base, 1, 1, &buf, &len));
    CHECK_OK(mess_server_apply_upload(s, buf, len, 1));
    /* but a protocol field still counts: another p_store is MESS_EPARAM */
    ps = p;
    ps.p_store = 0.1;
    CHECK_OK(mess_server_new(&ps, &s2));
    CHECK_RC(mess_server_apply_upload(s2, buf, len, 1), MESS_EPARAM);
    mess_buf_free(buf);
    mess_server_free(s);
    mess_server_free(s2);
}

static void test_upload_refuses_non_finite(void)
{
    mess_client *c = ca;
    float *v = (float *)malloc(3 * dim * sizeof *v);
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    uint64_t ids[3] = {0, 1, 2};
    uint8_t *buf;
    size_t len, i;
    for (i = 0; i < 3; i++) {
        memcpy(v, base, 3 * dim * sizeof *v);
        v[2 * dim + 17] = bad[i];
        buf = (uint8_t *)1;
        CHECK_RC(mess_client_upload(c, ids, v, 3, 1, &buf, &len), MESS_EINVAL);
        CHECK(buf == NULL && len == 0);
    }
    memcpy(v, base, 3 * dim * sizeof *v);
    CHECK_OK(mess_client_upload(c, ids, v, 3, 1, &buf, &len));
    mess_buf_free(buf);
    free(v);
}

/* Under cosine a zero vector has no direction: an upload or a request
 * with one is MESS_EINVAL (issue 29), and the same vectors pass under l2. */
static void test_zero_vector_under_cosine(void)
{
    mess_params p;
    mess_client *c;
    mess_query *q = NULL;
    float *v = (float *)calloc(3 * dim, sizeof *v);
    uint64_t ids[3] = {0, 1, 2};
    uint8_t *buf = NULL;
    size_t len = 0;
    params(&p);
    p.metric = MESS_METRIC_COSINE;
    c = client_of(&p, seed_a);
    memcpy(v, base, 3 * dim * sizeof *v);
    memset(v + dim, 0, dim * sizeof *v); /* row 1 */
    CHECK_RC(mess_client_upload(c, ids, v, 3, 1, &buf, &len), MESS_EINVAL);
    CHECK(buf == NULL);
    CHECK_RC(mess_client_request(c, v + dim, 100, &q, &buf, &len), MESS_EINVAL);
    CHECK(q == NULL && buf == NULL);
    CHECK_OK(mess_client_upload(ca, ids, v, 3, 1, &buf, &len)); /* l2 */
    mess_buf_free(buf);
    v[dim + 5] = -0.5f; /* a direction: accepted */
    CHECK_OK(mess_client_upload(c, ids, v, 3, 1, &buf, &len));
    mess_buf_free(buf);
    mess_client_free(c);
    free(v);
}

int main(void)
{
    mess_params p;
    if (load_data() != 0) {
        fprintf(stderr, "cannot read datasets/sift\n");
        return 1;
    }
    params(&p);
    ca = client_of(&p, seed_a);
    cb = client_of(&p, seed_b);
    RUN(test_owner_tags);
    RUN(test_owner_refuses_others);
    RUN(test_owner_survives_failed_first_upload);
    RUN(test_ef_search_outside_fingerprint);
    RUN(test_upload_refuses_non_finite);
    RUN(test_zero_vector_under_cosine);
    mess_client_free(ca);
    mess_client_free(cb);
    mess_vecs_free(base);
    mess_vecs_free(queries);
    mess_vecs_free(train);
    free(truth);
    HARNESS_END();
}
