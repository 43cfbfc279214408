/*
 * test_protocol.c - the MESS protocol end to end on the bundled real SIFT
 * data: recall, insert after build, delete, save/load, and the privacy
 * invariants of the design checked on the actual buffers.
 */
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <unistd.h>

#include "../mess.h"
#include "statefile.h"
#include "harness.h"
#include "sift.h"

/* A scaled-down configuration so the suite stays fast under ASan. */
#define N_BASE 3000
#define N_QUERY 60
#define K 10

static float *base, *queries, *train;
static size_t n_base, n_query, n_train, dim;
static int32_t *truth; /* exact L2 top-K of the first N_BASE base vectors */

static const uint8_t seed[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13,
                                 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24,
                                 25, 26, 27, 28, 29, 30, 31, 32};

static void small_params(mess_params *p)
{
    mess_params_default(p, (uint32_t)dim);
    p->shards = 16;
    p->per_item = 4;
    p->ef_construction = 100;
    p->train_sample = 3000;
}

static float l2(const float *a, const float *b)
{
    double s = 0;
    size_t i;
    for (i = 0; i < dim; i++)
        s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return (float)s;
}

static void exact_truth(void)
{
    size_t q, i, j;
    truth = (int32_t *)malloc(n_query * K * sizeof *truth);
    for (q = 0; q < n_query; q++) {
        float best[K];
        int32_t ids[K];
        for (j = 0; j < K; j++) {
            best[j] = INFINITY;
            ids[j] = -1;
        }
        for (i = 0; i < n_base; i++) {
            float d = l2(queries + q * dim, base + i * dim);
            if (d < best[K - 1]) {
                j = K - 1;
                while (j > 0 && best[j - 1] > d) {
                    best[j] = best[j - 1];
                    ids[j] = ids[j - 1];
                    j--;
                }
                best[j] = d;
                ids[j] = (int32_t)i;
            }
        }
        memcpy(truth + q * K, ids, sizeof ids);
    }
}

static int load_data(void)
{
    if (test_read_sift(&base, &n_base, &queries, &n_query, &train, &n_train, &dim))
        return -1;
    if (n_base > N_BASE)
        n_base = N_BASE;
    if (n_query > N_QUERY)
        n_query = N_QUERY;
    exact_truth();
    return 0;
}

static int build(const mess_params *p, const uint8_t *sd, mess_client **c,
                 mess_server **s, size_t n)
{
    uint64_t *ids = (uint64_t *)malloc(n * sizeof *ids);
    uint8_t *buf;
    size_t len, i;
    int rc;
    for (i = 0; i < n; i++)
        ids[i] = i;
    rc = mess_client_new(p, train, n_train, sd, 2, c);
    if (rc == MESS_OK)
        rc = mess_server_new(p, s);
    if (rc == MESS_OK)
        rc = mess_client_upload(*c, ids, base, n, 2, &buf, &len);
    if (rc == MESS_OK) {
        if (len != mess_upload_size(p, n))
            rc = MESS_EFORMAT;
        if (rc == MESS_OK)
            rc = mess_server_apply_upload(*s, buf, len, 2);
        mess_buf_free(buf);
    }
    free(ids);
    return rc;
}

/* Runs one query through the three steps. */
static int run_query(mess_client *c, const mess_server *s, const float *q,
                     size_t pool, uint64_t *ids, float *d, size_t *got,
                     mess_finish_stats *st)
{
    mess_query *qs;
    uint8_t *req, *resp;
    size_t rl, sl;
    int rc = mess_client_request(c, q, pool, &qs, &req, &rl);
    if (rc != MESS_OK)
        return rc;
    rc = mess_server_search(s, req, rl, 2, &resp, &sl);
    mess_buf_free(req);
    if (rc == MESS_OK) {
        rc = mess_client_finish(c, qs, resp, sl, K, ids, d, got, st);
        mess_buf_free(resp);
    }
    mess_query_free(qs);
    return rc;
}

static double recall_at(mess_client *c, const mess_server *s, size_t pool)
{
    size_t q, hits = 0, got, i, j;
    uint64_t ids[K];
    float d[K];
    mess_finish_stats st;
    for (q = 0; q < n_query; q++) {
        if (run_query(c, s, queries + q * dim, pool, ids, d, &got, &st) != MESS_OK)
            return -1.0;
        for (i = 0; i < K; i++)
            for (j = 0; j < got; j++)
                if ((uint64_t)truth[q * K + i] == ids[j]) {
                    hits++;
                    break;
                }
    }
    return (double)hits / (double)(n_query * K);
}

static mess_client *g_client;
static mess_server *g_server;
static mess_params g_params;

static void test_build_and_recall(void)
{
    double r_small, r_big;
    small_params(&g_params);
    CHECK_OK(build(&g_params, seed, &g_client, &g_server, n_base));
    if (!g_server)
        return;
    r_small = recall_at(g_client, g_server, 80);
    r_big = recall_at(g_client, g_server, 400);
    printf("# recall@10 (N=%zu, M=16, t=4, p_D=0.08, p_q=0.08): B=80 %.3f, B=400 %.3f\n",
           n_base, r_small, r_big);
    CHECK(r_big >= r_small);
    CHECK(r_big >= 0.85);
}

static void test_no_noise_recall(void)
{
    mess_params p;
    mess_client *c = NULL;
    mess_server *s = NULL;
    double r;
    small_params(&p);
    p.p_store = p.p_prr = p.p_irr = 0.0;
    CHECK_OK(build(&p, seed, &c, &s, n_base));
    if (!s)
        return;
    r = recall_at(c, s, 200);
    printf("# No-Noise recall@10 at B=200: %.3f\n", r);
    CHECK(r >= 0.9);
    mess_client_free(c);
    mess_server_free(s);
}

/* Byte payloads (MESS_PAYLOAD_U8) on SIFT's byte vectors: an entry is
 * 16 + 8 + dim bytes and decoding is exact, so every distance returned is
 * the exact one (integer data: the squared distance is an integer, exact
 * in any summation order); a vector that is not bytes is refused. */
static void test_u8_payload(void)
{
    mess_params p;
    mess_client *c = NULL;
    mess_server *s = NULL;
    uint64_t id = 7000000, ia[K];
    float v[128], da[K];
    uint8_t *buf = NULL;
    size_t len = 0, q, ga, exact = 0, got = 0, i;
    mess_finish_stats st;
    double r;
    small_params(&p);
    p.payload = MESS_PAYLOAD_U8;
    CHECK(mess_payload_size(&p) == 16 + 8 + dim);
    CHECK_OK(build(&p, seed, &c, &s, n_base));
    if (!s)
        goto out;
    r = recall_at(c, s, 400);
    printf("# u8 payloads: recall@10 at B=400 %.3f, entry %zu bytes (f32 %zu)\n", r,
           mess_payload_size(&p), mess_payload_size(&g_params));
    CHECK(r >= 0.85);
    for (q = 0; q < 20; q++) {
        CHECK_OK(run_query(c, s, queries + q * dim, 400, ia, da, &ga, &st));
        for (i = 0; i < ga; i++, got++)
            exact += ia[i] < n_base &&
                     da[i] == l2(queries + q * dim, base + ia[i] * dim);
    }
    printf("# u8 payloads: %zu of %zu distances exact\n", exact, got);
    CHECK(got > 0 && exact == got);
    /* not a byte: fraction, negative, above 255; nothing encoded */
    CHECK(dim <= 128);
    for (i = 0; i < 3; i++) {
        memcpy(v, base, dim * sizeof *v);
        v[dim - 1] = i == 0 ? 3.5f : i == 1 ? -1.0f : 256.0f;
        CHECK_RC(mess_client_upload(c, &id, v, 1, 1, &buf, &len), MESS_EINVAL);
    }
    v[dim - 1] = 255.0f;
    CHECK_OK(mess_client_upload(c, &id, v, 1, 1, &buf, &len));
    mess_buf_free(buf);
out:
    mess_client_free(c);
    mess_server_free(s);
}

/* Embeddings of fewer than 64 dimensions: the default 64-bit codes exceed
 * dim, so each shard's hash stacks IsoHash blocks (kappa > dim).  The
 * deployment must work end to end: a stored item queried with its own
 * vector comes back first at distance 0. */
static void test_small_dim(void)
{
    enum { D = 32, ITEMS = 2000, NQ = 50 };
    mess_params p;
    mess_client *c = NULL;
    mess_server *s = NULL;
    float *tr = (float *)malloc((size_t)n_train * D * sizeof(float));
    float *x = (float *)malloc((size_t)ITEMS * D * sizeof(float));
    uint64_t ids[ITEMS], got_ids[K];
    float got_d[K];
    uint8_t *buf = NULL, *req = NULL, *resp = NULL;
    size_t len, i, got, hits = 0, rl, sl;
    mess_finish_stats st;

    for (i = 0; i < n_train; i++)
        memcpy(tr + i * D, train + i * dim, D * sizeof(float));
    for (i = 0; i < ITEMS; i++) {
        memcpy(x + i * D, base + i * dim, D * sizeof(float));
        ids[i] = i;
    }
    mess_params_default(&p, D);
    p.shards = 16;
    p.per_item = 4;
    p.ef_construction = 100;
    CHECK(p.kappa == 128 && p.kappa > p.dim);
    CHECK_OK(mess_params_check(&p));
    CHECK_OK(mess_client_new(&p, tr, n_train, seed, 2, &c));
    CHECK_OK(mess_server_new(&p, &s));
    if (c && s && mess_client_upload(c, ids, x, ITEMS, 2, &buf, &len) == MESS_OK) {
        CHECK_OK(mess_server_apply_upload(s, buf, len, 2));
        mess_buf_free(buf);
        for (i = 0; i < NQ; i++) {
            mess_query *q = NULL;
            const float *v = x + i * 37 * D;
            if (mess_client_request(c, v, 200, &q, &req, &rl) != MESS_OK)
                break;
            if (mess_server_search(s, req, rl, 1, &resp, &sl) == MESS_OK) {
                if (mess_client_finish(c, q, resp, sl, K, got_ids, got_d, &got,
                                       &st) == MESS_OK && got > 0 && got_d[0] == 0.0f)
                    hits++;
                mess_buf_free(resp);
            }
            mess_buf_free(req);
            mess_query_free(q);
        }
    }
    printf("# dim %d, kappa %u: %zu of %d self-queries first at distance 0\n", D,
           p.kappa, hits, NQ);
    CHECK(hits >= NQ * 9 / 10);
    mess_client_free(c);
    mess_server_free(s);
    free(tr);
    free(x);
}

/* Every record of an upload: shard | label | code | entry. */
static size_t record_bytes(const mess_params *p)
{
    return wire_upload_record_bytes(p);
}

static int contains(const uint8_t *hay, size_t n, const void *needle, size_t m)
{
    size_t i;
    for (i = 0; i + m <= n; i++)
        if (memcmp(hay + i, needle, m) == 0)
            return 1;
    return 0;
}

static void id_bytes(uint64_t id, uint8_t out[8])
{
    size_t b;
    for (b = 0; b < 8; b++)
        out[b] = (uint8_t)(id >> (8 * b));
}

/* Nothing the server receives or stores holds an id or vector bytes: the
 * upload and delete buffers as they cross, and the server state file's
 * uncompressed body. */
static void test_server_sees_no_plaintext(void)
{
    mess_params p = g_params, fp;
    mess_server *s = NULL;
    uint64_t ids[50];
    uint8_t *buf, *raw = NULL, idb[8];
    size_t len, dlen, raw_len = 0, i;
    char path[64];
    uint8_t *del;

    for (i = 0; i < 50; i++)
        ids[i] = 0x9e3779b97f4a7c15ull * (i + 1000); /* distinctive byte patterns */
    CHECK_OK(mess_client_upload(g_client, ids, base + 100 * dim, 50, 1, &buf, &len));
    CHECK(len == mess_upload_size(&p, 50));
    CHECK_OK(mess_client_delete(g_client, ids, 10, &del, &dlen));
    CHECK_OK(mess_server_new(&p, &s));
    if (!s)
        return;
    CHECK_OK(mess_server_apply_upload(s, buf, len, 1));
    snprintf(path, sizeof path, "/tmp/mess_test_view_%ld", (long)getpid());
    CHECK_OK(mess_server_save(s, path));
    CHECK_OK(statefile_read(path, STATEFILE_SERVER, NULL, 0, &fp, &raw, &raw_len));
    CHECK(raw_len > 50 * p.per_item * mess_payload_size(&p));
    for (i = 0; i < 50; i++) {
        const float *x = base + (100 + i) * dim;
        size_t off;
        id_bytes(ids[i], idb);
        CHECK(!contains(buf, len, idb, 8));
        CHECK(!contains(del, dlen, idb, 8));
        CHECK(raw && !contains(raw, raw_len, idb, 8));
        for (off = 0; off + 4 <= dim; off += dim / 4) {
            CHECK(!contains(buf, len, x + off, 16));
            CHECK(raw && !contains(raw, raw_len, x + off, 16));
        }
    }
    statefile_free_raw(raw, raw_len);
    remove(path);
    mess_buf_free(buf);
    mess_buf_free(del);
    mess_server_free(s);
}

/* Bits in which an upload record's stored code differs from the clean code
 * of its shard (clean: M codes of `words` words, from mess_client_codes). */
static size_t record_flips(const uint8_t *rec, const uint64_t *clean,
                           uint32_t words)
{
    uint32_t shard = wire_record_shard(rec), w;
    uint64_t code[MESS_MAX_BITS / 64];
    size_t flips = 0;
    wire_load_code(rec + WIRE_CODE_OFFSET, words, code);
    for (w = 0; w < words; w++)
        flips += (size_t)__builtin_popcountll(code[w] ^ clean[(size_t)shard * words + w]);
    return flips;
}

static void test_upload_invariants(void)
{
    mess_params p = g_params;
    uint8_t *buf;
    size_t len, i, rb = record_bytes(&p), flips = 0, bits = 0, code_b = p.kappa / 8;
    uint32_t words = p.kappa / 64;
    uint64_t *clean = (uint64_t *)malloc((size_t)p.shards * words * 8);
    double sigma;

    /* Each item alone in an upload: the test knows which records are its t
     * copies (the server cannot: records are sorted by (shard, label)). */
    for (i = 0; i < 200; i++) {
        uint64_t id = 5000000 + i;
        size_t r, r2;
        const float *x = base + (i % n_base) * dim;
        CHECK_OK(mess_client_codes(g_client, x, clean));
        CHECK_OK(mess_client_upload(g_client, &id, x, 1, 1, &buf, &len));
        CHECK(len == WIRE_RECORDS_OFFSET + p.per_item * rb);
        for (r = 0; r < p.per_item; r++) {
            const uint8_t *rec = buf + WIRE_RECORDS_OFFSET + r * rb;
            flips += record_flips(rec, clean, words);
            bits += p.kappa;
            /* no value is equal across the t copies of one item: shards
             * distinct, labels, codes, SIVs and ciphertexts all differ */
            for (r2 = 0; r2 < r; r2++) {
                const uint8_t *o = buf + WIRE_RECORDS_OFFSET + r2 * rb;
                const size_t ent = WIRE_CODE_OFFSET + code_b; /* the entry */
                CHECK(memcmp(o, rec, WIRE_SHARD_BYTES) != 0);
                CHECK(memcmp(o + WIRE_LABEL_OFFSET, rec + WIRE_LABEL_OFFSET,
                             WIRE_LABEL_BYTES) != 0);
                CHECK(memcmp(o + WIRE_CODE_OFFSET, rec + WIRE_CODE_OFFSET, code_b) != 0);
                CHECK(memcmp(o + ent, rec + ent, 16) != 0);
                CHECK(memcmp(o + ent + 16, rec + ent + 16, 8) != 0);
                CHECK(memcmp(o + ent + 16, rec + ent + 16,
                             mess_payload_size(&p) - 16) != 0);
            }
        }
        free(buf);
    }
    /* stored bits flip at exactly p_D against the clean codes */
    sigma = sqrt(p.p_store * (1 - p.p_store) / (double)bits);
    printf("# stored flip rate %.5f (p_D %.3f, 4 sigma %.5f, %zu bits)\n",
           (double)flips / bits, p.p_store, 4 * sigma, bits);
    CHECK(fabs((double)flips / bits - p.p_store) <= 4 * sigma);
    free(clean);
}

/* Production mode (no seed): one upload of many copies of the same vector.
 * Every record has its own coin stream, so the stored bits flip at p_D
 * against the clean codes and no two records of a shard carry the same
 * perturbed code (equal codes would mean shared coins; by chance it happens
 * with probability about 1e-9 per pair). */
static void test_production_upload_coins(void)
{
    enum { ITEMS = 50 };
    mess_params p = g_params;
    mess_client *c = NULL;
    uint64_t ids[ITEMS];
    float *x = (float *)malloc((size_t)ITEMS * dim * sizeof(float));
    uint32_t words = p.kappa / 64;
    uint64_t *clean = (uint64_t *)malloc((size_t)p.shards * words * 8);
    size_t rb = record_bytes(&p), code_b = p.kappa / 8, len, r, r2;
    size_t flips = 0, bits = 0, same = 0, nrec;
    uint8_t *buf = NULL;
    double sigma;

    CHECK_OK(mess_client_new(&p, train, n_train, NULL, 2, &c));
    CHECK(mess_client_is_deterministic(c) == 0);
    CHECK(mess_client_is_deterministic(g_client) == 1);
    CHECK(mess_client_is_deterministic(NULL) == 0);
    for (r = 0; r < ITEMS; r++) {
        ids[r] = 7000000 + r;
        memcpy(x + r * dim, base, dim * sizeof(float));
    }
    CHECK_OK(mess_client_codes(c, base, clean));
    CHECK_OK(mess_client_upload(c, ids, x, ITEMS, 2, &buf, &len));
    nrec = (size_t)ITEMS * p.per_item;
    CHECK(len == WIRE_RECORDS_OFFSET + nrec * rb);
    for (r = 0; r < nrec && len == WIRE_RECORDS_OFFSET + nrec * rb; r++) {
        const uint8_t *rec = buf + WIRE_RECORDS_OFFSET + r * rb;
        flips += record_flips(rec, clean, words);
        bits += p.kappa;
        for (r2 = 0; r2 < r; r2++) {
            const uint8_t *o = buf + WIRE_RECORDS_OFFSET + r2 * rb;
            if (memcmp(o, rec, WIRE_SHARD_BYTES) == 0 &&
                memcmp(o + WIRE_CODE_OFFSET, rec + WIRE_CODE_OFFSET, code_b) == 0)
                same++;
        }
    }
    sigma = sqrt(p.p_store * (1 - p.p_store) / (double)bits);
    printf("# production stored flip rate %.5f (p_D %.3f, 4 sigma %.5f), "
           "equal codes in a shard: %zu\n",
           (double)flips / bits, p.p_store, 4 * sigma, same);
    CHECK(fabs((double)flips / bits - p.p_store) <= 4 * sigma);
    CHECK(same == 0);
    mess_buf_free(buf);
    mess_client_free(c);
    free(clean);
    free(x);
}

/* Differing bits between two requests' code sections. */
static size_t request_code_diff(const uint8_t *a, const uint8_t *b, size_t off,
                                size_t len)
{
    size_t i, d = 0;
    for (i = off; i < len; i++)
        d += (size_t)__builtin_popcount((unsigned)(a[i] ^ b[i]));
    return d;
}

static void test_request_invariants(void)
{
    mess_query *q1, *q2, *q3;
    uint8_t *r1, *r2, *r3;
    size_t l1, l2, l3, i, d12, d13, nbits, sum = 0;
    mess_params p = g_params;
    size_t codes_off = wire_request_codes_offset(&p);
    double b = p.p_irr, pq = mess_effective_flip(p.p_prr, p.p_irr), want, sd;
    uint16_t lo = 0xffff, hi = 0;
    struct wire_request rq1;
    /* fresh query vectors, never asked before */
    float q[512], q_other[512];
    for (i = 0; i < dim; i++) {
        q[i] = queries[(n_query - 1) * dim + i] + 1.0f;
        q_other[i] = q[i] + 0.25f;
    }
    CHECK_OK(mess_client_request(g_client, q, 500, &q1, &r1, &l1));
    CHECK_OK(mess_client_request(g_client, q, 500, &q2, &r2, &l2));
    CHECK_OK(mess_client_request(g_client, q_other, 500, &q3, &r3, &l3));
    CHECK(l1 == mess_request_size(&p) && l2 == l1 && l3 == l1);
    CHECK_OK(wire_request_parse(&p, r1, l1, &rq1));
    /* the repeated query's request differs (fresh IRR coins, request id) */
    CHECK(memcmp(r1 + codes_off, r2 + codes_off, l1 - codes_off) != 0);
    CHECK(memcmp(r1 + WIRE_REQUEST_ID_OFFSET, r2 + WIRE_REQUEST_ID_OFFSET,
                 WIRE_REQUEST_ID_BYTES) != 0);
    /* ... while its permanent report is reused: two submissions differ by
     * the IRR flips only, 2b(1-b) of the bits, not by two independent
     * perturbations, 2 p_q (1 - p_q) */
    nbits = (l1 - codes_off) * 8;
    d12 = request_code_diff(r1, r2, codes_off, l1);
    d13 = request_code_diff(r1, r3, codes_off, l1);
    want = 2 * b * (1 - b);
    sd = sqrt(want * (1 - want) / (double)nbits);
    printf("# repeated query: %.4f of request bits differ (IRR only %.4f, +-4 sd %.4f; "
           "independent reports %.4f)\n", (double)d12 / nbits, want, 4 * sd,
           2 * pq * (1 - pq));
    CHECK(fabs((double)d12 / nbits - want) <= 4 * sd);
    CHECK(d13 > d12);
    /* budgets: the pool split evenly, nothing else (no clean-query input) */
    for (i = 0; i < p.shards; i++) {
        uint16_t v = (uint16_t)wire_request_budget(&rq1, (uint32_t)i);
        sum += v;
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    CHECK(sum == 500 && hi - lo <= 1);
    /* no query bytes in the request */
    for (i = 0; i + 4 <= dim; i += 4)
        CHECK(!contains(r1, l1, q + i, 16));
    mess_buf_free(r1);
    mess_buf_free(r2);
    mess_buf_free(r3);
    mess_query_free(q1);
    mess_query_free(q2);
    mess_query_free(q3);
}

static void test_tampered_response(void)
{
    mess_query *qs;
    uint8_t *req, *resp, *tmp;
    size_t rl, sl, got, got1, cut, n, i, a, b, tampered = 0;
    size_t eb = mess_payload_size(&g_params), off[400];
    uint32_t shard[400];
    uint64_t ids[K], ids0[K], ids1[K];
    float d[K], d1[K];
    mess_finish_stats st;

    CHECK_OK(mess_client_request(g_client, queries, 160, &qs, &req, &rl));
    CHECK_OK(mess_server_search(g_server, req, rl, 1, &resp, &sl));
    CHECK_OK(mess_client_finish(g_client, qs, resp, sl, K, ids0, d, &got, &st));
    CHECK(st.auth_failures == 0 && st.candidates == 160);
    n = test_response_entries(resp, sl, eb, g_params.shards, off, shard, 400);
    CHECK(n == 160);
    tmp = (uint8_t *)malloc(sl);
    /* one flipped bit anywhere in an entry (SIV, id or vector bytes): that
     * entry is dropped, the rest is used.  By default a tampered copy of an
     * id already authenticated is not opened, so not counted; verify-all
     * counts every one, and the results are the same. */
    memcpy(tmp, resp, sl);
    for (i = 0; i < n; i += 7, tampered++)
        tmp[off[i] + (i * 37) % eb] ^= (uint8_t)(1u << (i % 8));
    CHECK_OK(mess_client_finish(g_client, qs, tmp, sl, K, ids, d, &got, &st));
    CHECK(st.auth_failures > 0 && st.auth_failures <= tampered);
    CHECK(st.unique + st.auth_failures + st.unopened == st.candidates);
    CHECK(got == K);
    CHECK_OK(mess_client_set_verify_all(g_client, 1));
    CHECK_OK(mess_client_finish(g_client, qs, tmp, sl, K, ids1, d1, &got1, &st));
    CHECK_OK(mess_client_set_verify_all(g_client, 0));
    CHECK(st.auth_failures == tampered && st.unopened == 0);
    CHECK(got1 == got && memcmp(ids1, ids, got * sizeof *ids) == 0 &&
          memcmp(d1, d, got * sizeof *d) == 0);
    /* entries moved to another shard's slot fail (the shard is bound as
     * associated data) */
    memcpy(tmp, resp, sl);
    for (a = 0, b = n - 1; a < n && shard[a] == shard[b]; a++)
        ;
    if (a < n) {
        memcpy(tmp + off[a], resp + off[b], eb);
        memcpy(tmp + off[b], resp + off[a], eb);
        CHECK_OK(mess_client_finish(g_client, qs, tmp, sl, K, ids, d, &got, &st));
        CHECK(st.auth_failures == 2);
    }
    /* every entry tampered: nothing usable is an error, with the count */
    memcpy(tmp, resp, sl);
    for (i = 0; i < n; i++)
        tmp[off[i] + eb - 1] ^= 0x80;
    CHECK_RC(mess_client_finish(g_client, qs, tmp, sl, K, ids, d, &got, &st), MESS_EAUTH);
    CHECK(st.auth_failures == n);
    free(tmp);
    /* a response to another request is refused */
    resp[WIRE_HEADER_BYTES + 6] ^= 1; /* in the request id */
    CHECK_RC(mess_client_finish(g_client, qs, resp, sl, K, ids, d, &got, &st), MESS_EAUTH);
    resp[WIRE_HEADER_BYTES + 6] ^= 1;
    /* a count above the shard's budget is a format error */
    resp[WIRE_RESPONSE_BODY_OFFSET] = 0xff; /* shard 0's count */
    CHECK_RC(mess_client_finish(g_client, qs, resp, sl, K, ids, d, &got, &st), MESS_EFORMAT);
    /* every truncation is refused without a crash */
    mess_buf_free(resp);
    CHECK_OK(mess_server_search(g_server, req, rl, 1, &resp, &sl));
    for (cut = 0; cut < sl; cut += (cut < 200 ? 1 : 97))
        CHECK(mess_client_finish(g_client, qs, resp, cut, K, ids, d, &got, &st) != MESS_OK);
    CHECK_OK(mess_client_finish(g_client, qs, resp, sl, K, ids, d, &got, &st));
    CHECK(got == K && memcmp(ids, ids0, sizeof ids) == 0);
    mess_buf_free(req);
    mess_buf_free(resp);
    mess_query_free(qs);
}

static void test_hostile_buffers(void)
{
    mess_server_stats before, after;
    uint64_t id = 777777;
    uint8_t *buf, *resp;
    size_t len, cut, sl;
    mess_query *qs;

    mess_server_stats_get(g_server, &before);
    CHECK_OK(mess_client_upload(g_client, &id, base, 1, 1, &buf, &len));
    for (cut = 0; cut < len; cut += 3)
        CHECK(mess_server_apply_upload(g_server, buf, cut, 1) != MESS_OK);
    buf[WIRE_RECORDS_OFFSET] = 0xff; /* shard out of range */
    buf[WIRE_RECORDS_OFFSET + 1] = 0xff;
    CHECK_RC(mess_server_apply_upload(g_server, buf, len, 1), MESS_EFORMAT);
    mess_server_stats_get(g_server, &after);
    CHECK(after.entries == before.entries);
    mess_buf_free(buf);
    /* requests: truncated, or for other parameters */
    CHECK_OK(mess_client_request(g_client, queries, 100, &qs, &buf, &len));
    for (cut = 0; cut < len; cut += 5)
        CHECK(mess_server_search(g_server, buf, cut, 1, &resp, &sl) != MESS_OK);
    buf[10] ^= 1; /* fingerprint */
    CHECK_RC(mess_server_search(g_server, buf, len, 1, &resp, &sl), MESS_EPARAM);
    mess_buf_free(buf);
    mess_query_free(qs);
    /* delete buffers: truncated, shard out of range */
    CHECK_OK(mess_client_delete(g_client, &id, 1, &buf, &len));
    for (cut = 0; cut < len; cut++)
        CHECK(mess_server_apply_delete(g_server, buf, cut, NULL) != MESS_OK);
    buf[WIRE_RECORDS_OFFSET] = 0xff;
    buf[WIRE_RECORDS_OFFSET + 1] = 0xff;
    CHECK_RC(mess_server_apply_delete(g_server, buf, len, NULL), MESS_EFORMAT);
    mess_buf_free(buf);
}

/* Real state files, truncated or with one byte changed, are refused with
 * an error and no state. */
static void test_hostile_state_files(void)
{
    char sp[64], cp[64];
    mess_server *s = NULL;
    mess_client *c = NULL;
    uint8_t *file;
    size_t flen, i;
    FILE *f;
    const char *paths[2];
    int role;

    snprintf(sp, sizeof sp, "/tmp/mess_test_hs_%ld", (long)getpid());
    snprintf(cp, sizeof cp, "/tmp/mess_test_hc_%ld", (long)getpid());
    CHECK_OK(mess_server_save(g_server, sp));
    CHECK_OK(mess_client_save(g_client, cp, NULL));
    CHECK_RC(mess_server_load(cp, NULL, &s), MESS_EROLE);
    CHECK_RC(mess_client_load(sp, NULL, &c), MESS_EROLE);
    paths[0] = sp;
    paths[1] = cp;
    for (role = 0; role < 2; role++) {
        f = fopen(paths[role], "rb");
        CHECK(f != NULL);
        if (!f)
            continue;
        fseek(f, 0, SEEK_END);
        flen = (size_t)ftell(f);
        rewind(f);
        file = (uint8_t *)malloc(flen);
        CHECK(fread(file, 1, flen, f) == flen);
        fclose(f);
        for (i = 0; i < 24; i++) {
            size_t cut = i < 12 ? i * 9 : flen / 12 * (i - 11) - 1;
            size_t pos = (i * 7919 + 13) % flen;
            int rc;
            /* truncated */
            f = fopen(paths[role], "wb");
            fwrite(file, 1, cut, f);
            fclose(f);
            rc = role ? mess_client_load(cp, NULL, &c) : mess_server_load(sp, NULL, &s);
            CHECK(rc != MESS_OK && !c && !s);
            /* one byte changed */
            file[pos] ^= 0x10;
            f = fopen(paths[role], "wb");
            fwrite(file, 1, flen, f);
            fclose(f);
            file[pos] ^= 0x10;
            rc = role ? mess_client_load(cp, NULL, &c) : mess_server_load(sp, NULL, &s);
            CHECK(rc != MESS_OK && !c && !s);
        }
        free(file);
    }
    remove(sp);
    remove(cp);
}

static void test_insert_delete_compact_persist(void)
{
    uint64_t new_ids[20], del_ids[10], ids[K];
    float d[K];
    size_t i, j, got, missing, len;
    uint8_t *buf;
    mess_finish_stats st;
    mess_client *c2 = NULL;
    mess_server *s2 = NULL;
    char cp[64], sp[64];
    int seen;

    /* insert after build: new items are found by their own vectors */
    for (i = 0; i < 20; i++)
        new_ids[i] = 100000 + i;
    CHECK_OK(mess_client_upload(g_client, new_ids, base + (n_base - 20) * dim, 20, 1, &buf, &len));
    CHECK_OK(mess_server_apply_upload(g_server, buf, len, 1));
    /* applying it twice is refused: the ids are stored already (the
     * server's state, MESS_ESTATE; the buffer itself is valid) */
    CHECK_RC(mess_server_apply_upload(g_server, buf, len, 1), MESS_ESTATE);
    mess_buf_free(buf);
    CHECK_OK(run_query(g_client, g_server, base + (n_base - 5) * dim, 200, ids, d, &got, &st));
    CHECK(got > 0 && d[0] == 0.0f);

    /* delete ten items that are their own nearest neighbours */
    for (i = 0; i < 10; i++)
        del_ids[i] = i * 7;
    CHECK_OK(mess_client_delete(g_client, del_ids, 10, &buf, &len));
    CHECK(len == mess_delete_size(&g_params, 10));
    CHECK_OK(mess_server_apply_delete(g_server, buf, len, &missing));
    CHECK(missing == 0);
    CHECK_OK(mess_server_apply_delete(g_server, buf, len, &missing));
    CHECK(missing == 10 * g_params.per_item);
    mess_buf_free(buf);

    snprintf(cp, sizeof cp, "/tmp/mess_test_c_%ld", (long)getpid());
    snprintf(sp, sizeof sp, "/tmp/mess_test_s_%ld", (long)getpid());
    for (j = 0; j < 3; j++) {
        /* j = 0: live; 1: after save/load; 2: after compaction */
        mess_client *c = j == 0 ? g_client : c2;
        mess_server *s = j == 0 ? g_server : s2;
        seen = 0;
        for (i = 0; i < 10; i++) {
            size_t r;
            CHECK_OK(run_query(c, s, base + del_ids[i] * dim, 400, ids, d, &got, &st));
            for (r = 0; r < got; r++)
                seen += ids[r] == del_ids[i];
        }
        CHECK(seen == 0);
        if (j == 0) {
            CHECK_OK(mess_client_save(g_client, cp, NULL));
            CHECK_OK(mess_server_save(g_server, sp));
            CHECK_OK(mess_client_load(cp, NULL, &c2));
            CHECK_OK(mess_server_load(sp, &g_params, &s2));
            if (!c2 || !s2)
                return;
        } else if (j == 1) {
            mess_server_stats stt;
            CHECK_OK(mess_server_compact(s2, 2));
            mess_server_stats_get(s2, &stt);
            CHECK(stt.deleted == 0);
        }
    }
    mess_client_free(c2);
    mess_server_free(s2);
    remove(cp);
    remove(sp);
}

/* 1 if the two files have identical bytes. */
static int same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb, ca, cb;
    while (same) {
        ca = fgetc(fa);
        cb = fgetc(fb);
        if (ca != cb)
            same = 0;
        if (ca == EOF || cb == EOF)
            break;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

static void test_deterministic_roundtrip(void)
{
    /* Same seed: identical states; save/load: identical answers. */
    mess_params p;
    mess_client *a = NULL, *b = NULL, *c = NULL;
    mess_server *sa = NULL, *sb = NULL, *sc = NULL;
    uint64_t ia[K], ib[K];
    float da[K], db[K];
    size_t ga, gb, q;
    mess_finish_stats st;
    char cp[64], sp[64];

    small_params(&p);
    CHECK_OK(build(&p, seed, &a, &sa, 1000));
    CHECK_OK(build(&p, seed, &b, &sb, 1000));
    if (!sa || !sb)
        return;
    snprintf(cp, sizeof cp, "/tmp/mess_test_dc_%ld", (long)getpid());
    snprintf(sp, sizeof sp, "/tmp/mess_test_ds_%ld", (long)getpid());
    CHECK_OK(mess_client_save(b, cp, "pass phrase"));
    CHECK_OK(mess_server_save(sb, sp));
    CHECK_RC(mess_client_load(cp, NULL, &c), MESS_EPASS);
    CHECK_RC(mess_client_load(sp, NULL, &c), MESS_EROLE);
    CHECK_OK(mess_client_load(cp, "pass phrase", &c));
    CHECK_OK(mess_server_load(sp, NULL, &sc));
    if (!c || !sc)
        return;
    /* save(load(file)) is the same file, for both roles */
    {
        char cp2[80], cp3[80], sp2[80];
        mess_client *c2 = NULL;
        snprintf(cp2, sizeof cp2, "%s_plain", cp);
        snprintf(cp3, sizeof cp3, "%s_again", cp);
        snprintf(sp2, sizeof sp2, "%s_again", sp);
        CHECK_OK(mess_server_save(sc, sp2));
        CHECK(same_file(sp, sp2));
        CHECK_OK(mess_client_save(b, cp2, NULL));
        CHECK_OK(mess_client_load(cp2, NULL, &c2));
        if (c2)
            CHECK_OK(mess_client_save(c2, cp3, NULL));
        CHECK(same_file(cp2, cp3));
        mess_client_free(c2);
        remove(cp2);
        remove(cp3);
        remove(sp2);
    }
    /* the same seed and the loaded copy answer identically */
    for (q = 0; q < 10; q++) {
        CHECK_OK(run_query(a, sa, queries + q * dim, 200, ia, da, &ga, &st));
        CHECK_OK(run_query(c, sc, queries + q * dim, 200, ib, db, &gb, &st));
        CHECK(ga == gb && memcmp(ia, ib, ga * sizeof *ia) == 0 &&
              memcmp(da, db, ga * sizeof *da) == 0);
    }
    /* other parameters: the server file is refused */
    p.per_item = 5;
    mess_server_free(sc);
    sc = NULL;
    CHECK_RC(mess_server_load(sp, &p, &sc), MESS_EPARAM);
    mess_client_free(a);
    mess_client_free(b);
    mess_client_free(c);
    mess_server_free(sa);
    mess_server_free(sb);
    remove(cp);
    remove(sp);
}

int main(void)
{
    if (load_data() != 0) {
        printf("cannot read datasets/sift (run from the repository root)\n");
        printf("0 passed, 1 failed\n");
        return 1;
    }
    RUN(test_build_and_recall);
    RUN(test_no_noise_recall);
    RUN(test_u8_payload);
    RUN(test_small_dim);
    RUN(test_server_sees_no_plaintext);
    RUN(test_upload_invariants);
    RUN(test_production_upload_coins);
    RUN(test_request_invariants);
    RUN(test_tampered_response);
    RUN(test_hostile_buffers);
    RUN(test_hostile_state_files);
    RUN(test_insert_delete_compact_persist);
    RUN(test_deterministic_roundtrip);
    mess_client_free(g_client);
    mess_server_free(g_server);
    free(base);
    free(queries);
    free(train);
    free(truth);
    HARNESS_END();
}
