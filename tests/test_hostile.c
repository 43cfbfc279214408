/*
 * test_hostile.c - a malicious server's responses, on real SIFT data: the
 * client never crashes, never returns an id whose entry failed
 * authentication, never reports a distance other than the exact one to the
 * authenticated vector, and counts what it rejected (mess_finish_stats).
 * Every response is finished four times, opening one authentic copy per id
 * (the default), every entry (verify-all), one copy per id on the
 * per-entry libsodium path (client_finish_set_batched(client, 0), the
 * finish before the lane core), and one copy per id batched without the SIMD cores
 * (client_finish_set_simd(0): the portable lane core and libsodium's
 * Poly1305, what a CPU without AVX2 runs): the results must be identical.
 *
 * Response layout (wire.h): header | request id | per shard: u16 count |
 * count x entry.  The helpers below split a real response into per-shard
 * entry lists (wire_response_next) and rebuild a tampered one.
 */
#include <math.h>
#include <stdint.h>

#include "../mess_experimental.h"
#include "client.h"
#include "harness.h"
#include "sift.h"

#define N_ITEMS 600
#define M_SHARDS 8
#define POOL 64
#define KMAX 128
#define HDR WIRE_RESPONSE_BODY_OFFSET /* header + request id */

static float *base, *queries, *train;
static size_t n_base, n_query, n_train, dim, entry_bytes;
static mess_client *client;
static mess_server *server;
static mess_params params;
static uint8_t *upload;
static size_t upload_len;

static uint64_t item_id(size_t i)
{
    return 0x100000001b3ull * (uint64_t)(i + 1) + 12345u;
}

/* index of a stored id, or -1 */
static long item_index(uint64_t id)
{
    uint64_t k;
    if (id < 12345u + 0x100000001b3ull)
        return -1;
    k = (id - 12345u) / 0x100000001b3ull;
    if ((id - 12345u) % 0x100000001b3ull != 0 || k < 1 || k > N_ITEMS)
        return -1;
    return (long)(k - 1);
}

static float exact_l2(const float *q, const float *x)
{
    double acc = 0.0;
    size_t i;
    for (i = 0; i < dim; i++) {
        double d = (double)q[i] - x[i];
        acc += d * d;
    }
    return (float)acc;
}

/* ---- a response split into shards ------------------------------------- */
struct resp {
    uint8_t head[HDR];
    size_t count[M_SHARDS];
    const uint8_t *entry[M_SHARDS][POOL + 8]; /* pointers into other buffers */
};

static int split(const uint8_t *buf, size_t len, struct resp *r)
{
    struct wire_response w;
    size_t j, e;
    mess_rd_init(&w.body, buf, len);
    if (!mess_rd_take(&w.body, HDR))
        return -1;
    memcpy(r->head, buf, HDR);
    for (j = 0; j < M_SHARDS; j++) {
        uint32_t count;
        const uint8_t *entries = wire_response_next(&w, entry_bytes, &count);
        if (!entries || count > POOL)
            return -1;
        r->count[j] = count;
        for (e = 0; e < r->count[j]; e++)
            r->entry[j][e] = entries + e * entry_bytes;
    }
    return mess_rd_left(&w.body) == 0 ? 0 : -1;
}

/* Serialises r; the caller frees. */
static uint8_t *join(const struct resp *r, size_t *len)
{
    size_t total = HDR, j, e, off;
    uint8_t *buf;
    for (j = 0; j < M_SHARDS; j++)
        total += WIRE_BUDGET_BYTES + r->count[j] * entry_bytes;
    buf = (uint8_t *)malloc(total);
    memcpy(buf, r->head, HDR);
    off = HDR;
    for (j = 0; j < M_SHARDS; j++) {
        off = (size_t)(wire_response_put_count(buf + off, r->count[j]) - buf);
        for (e = 0; e < r->count[j]; e++, off += entry_bytes)
            memcpy(buf + off, r->entry[j][e], entry_bytes);
    }
    *len = total;
    return buf;
}

struct result {
    int rc;
    size_t n;
    uint64_t ids[KMAX];
    float d[KMAX];
    mess_finish_stats st; /* verify-all: every entry authenticated */
    mess_finish_stats fast; /* the default: one authentic copy per id */
};

static int same_results(const struct result *a, const struct result *b)
{
    return a->rc == b->rc && a->n == b->n &&
           memcmp(a->ids, b->ids, a->n * sizeof a->ids[0]) == 0 &&
           memcmp(a->d, b->d, a->n * sizeof a->d[0]) == 0;
}

/* Finishes in both modes: the results must be identical, the default
 * opening a subset of what verify-all opens.  `out` has verify-all's
 * counts in st and the default's in fast. */
static void finish(const mess_query *q, const uint8_t *buf, size_t len,
                   struct result *out)
{
    struct result f;
    memset(out, 0, sizeof *out);
    memset(&f, 0, sizeof f);
    CHECK_OK(mess_client_set_verify_all(client, 1));
    out->rc = mess_client_finish(client, q, buf, len, KMAX, out->ids, out->d,
                                 &out->n, &out->st);
    CHECK_OK(mess_client_set_verify_all(client, 0));
    f.rc = mess_client_finish(client, q, buf, len, KMAX, f.ids, f.d, &f.n, &f.st);
    out->fast = f.st;
    CHECK(same_results(out, &f));
    {
        struct result e;
        memset(&e, 0, sizeof e);
        client_finish_set_batched(client, 0);
        e.rc = mess_client_finish(client, q, buf, len, KMAX, e.ids, e.d, &e.n, &e.st);
        client_finish_set_batched(client, 1);
        CHECK(same_results(&f, &e));
        CHECK(memcmp(&f.st, &e.st, sizeof f.st) == 0);
        memset(&e, 0, sizeof e);
        client_finish_set_simd(0);
        e.rc = mess_client_finish(client, q, buf, len, KMAX, e.ids, e.d, &e.n, &e.st);
        client_finish_set_simd(1);
        CHECK(same_results(&f, &e));
        CHECK(memcmp(&f.st, &e.st, sizeof f.st) == 0);
    }
    CHECK(out->st.unopened == 0 && f.st.candidates == out->st.candidates &&
          f.st.unique == out->st.unique && f.st.auth_failures <= out->st.auth_failures);
    if (f.rc == MESS_OK || f.rc == MESS_EAUTH)
        CHECK(f.st.unique + f.st.auth_failures + f.st.unopened == f.st.candidates);
}

/* Every promise that holds for any response: results only on success,
 * sorted, distinct, stored ids, exact distances to query qv. */
static void check_sound(const struct result *r, const float *qv)
{
    size_t i;
    CHECK(r->rc == MESS_OK || r->n == 0);
    CHECK(r->n <= r->st.unique);
    CHECK(r->st.unique + r->st.auth_failures <= r->st.candidates);
    for (i = 0; i < r->n; i++) {
        long k = item_index(r->ids[i]);
        CHECK(k >= 0);
        if (k >= 0)
            CHECK(fabsf(r->d[i] - exact_l2(qv, base + (size_t)k * dim)) <=
                  1e-4f * (1.0f + r->d[i]));
        if (i > 0)
            CHECK(r->d[i] >= r->d[i - 1] && r->ids[i] != r->ids[i - 1]);
    }
}

/* A real query q (index qi): its state, request and genuine response. */
struct live {
    mess_query *q;
    uint8_t *req, *resp;
    size_t req_len, resp_len;
    struct resp r;
    const float *qv;
};

static void live_open(struct live *l, size_t qi)
{
    memset(l, 0, sizeof *l);
    l->qv = queries + qi * dim;
    CHECK_OK(mess_client_request(client, l->qv, POOL, &l->q, &l->req, &l->req_len));
    CHECK_OK(mess_server_search(server, l->req, l->req_len, 1, &l->resp, &l->resp_len));
    CHECK(split(l->resp, l->resp_len, &l->r) == 0);
}

static void live_close(struct live *l)
{
    mess_buf_free(l->req);
    mess_buf_free(l->resp);
    mess_query_free(l->q);
}

/* ---- tests --------------------------------------------------------------- */

static void test_genuine(void)
{
    struct live l;
    struct result g;
    live_open(&l, 0);
    finish(l.q, l.resp, l.resp_len, &g);
    CHECK_OK(g.rc);
    CHECK(g.st.candidates > 0 && g.st.auth_failures == 0 && g.n > 0);
    check_sound(&g, l.qv);
    live_close(&l);
}

static void test_duplicates(void)
{
    struct live l;
    struct result g, t;
    struct resp r;
    uint8_t *buf;
    size_t len, j, e;
    live_open(&l, 1);
    finish(l.q, l.resp, l.resp_len, &g);
    /* every entry of every shard replaced by that shard's first entry */
    r = l.r;
    for (j = 0; j < M_SHARDS; j++)
        for (e = 1; e < r.count[j]; e++)
            r.entry[j][e] = r.entry[j][0];
    buf = join(&r, &len);
    finish(l.q, buf, len, &t);
    CHECK_OK(t.rc);
    CHECK(t.st.auth_failures == 0);
    CHECK(t.st.unique <= M_SHARDS && t.n == t.st.unique);
    check_sound(&t, l.qv);
    free(buf);
    live_close(&l);
}

static void test_reorder(void)
{
    struct live l;
    struct result g, t;
    struct resp r;
    uint8_t *buf;
    size_t len, j, e;
    live_open(&l, 2);
    finish(l.q, l.resp, l.resp_len, &g);
    r = l.r;
    for (j = 0; j < M_SHARDS; j++)
        for (e = 0; e < r.count[j]; e++)
            r.entry[j][e] = l.r.entry[j][r.count[j] - 1 - e];
    buf = join(&r, &len);
    finish(l.q, buf, len, &t);
    CHECK(same_results(&g, &t));
    check_sound(&t, l.qv);
    free(buf);
    live_close(&l);
}

/* Entries moved to another shard's slot fail authentication (the shard is
 * associated data): the result is exactly that of a response without them. */
static void test_swap_shards(void)
{
    struct live l;
    struct result t, ref;
    struct resp r, without;
    uint8_t *buf, *buf2;
    size_t len, len2, a, b, e, moved;
    live_open(&l, 3);
    r = l.r;
    without = l.r;
    /* rotate the blocks of shards a = 0 and b = 1 (equal budgets or not:
     * only min(count) entries move so no count exceeds its budget) */
    a = 0;
    b = 1;
    moved = r.count[a] < r.count[b] ? r.count[a] : r.count[b];
    for (e = 0; e < moved; e++) {
        r.entry[a][e] = l.r.entry[b][e];
        r.entry[b][e] = l.r.entry[a][e];
    }
    r.count[a] = r.count[b] = moved;
    without.count[a] = without.count[b] = 0;
    buf = join(&r, &len);
    buf2 = join(&without, &len2);
    finish(l.q, buf, len, &t);
    finish(l.q, buf2, len2, &ref);
    CHECK(moved > 0);
    CHECK_OK(t.rc);
    CHECK(t.st.auth_failures == 2 * moved);
    CHECK(same_results(&t, &ref));
    check_sound(&t, l.qv);
    free(buf);
    free(buf2);
    /* only swapped entries: nothing authenticates -> MESS_EAUTH, stats set */
    for (e = 0; e < M_SHARDS; e++)
        if (e != a && e != b)
            r.count[e] = 0;
    buf = join(&r, &len);
    finish(l.q, buf, len, &t);
    CHECK_RC(t.rc, MESS_EAUTH);
    CHECK(t.n == 0 && t.st.candidates == 2 * moved && t.st.auth_failures == 2 * moved &&
          t.st.unique == 0);
    free(buf);
    live_close(&l);
}

/* Ciphertexts taken from the upload (what the server stores under other
 * labels): in their own shard they are authentic items and come back with
 * their true id and exact distance (the server can choose WHICH stored
 * items to return, not forge one); in another shard they fail. */
static void test_swap_labels(void)
{
    struct live l;
    struct result t;
    struct resp r;
    uint8_t *buf;
    size_t len, rec_bytes = wire_upload_record_bytes(&params), n, i, j, e;
    size_t injected = 0, wrong = 0;
    live_open(&l, 4);
    n = (size_t)mess_load_u64(upload + WIRE_CLIENT_BODY_OFFSET);
    r = l.r;
    /* replace the entries of shards 0..3 with stored entries of other items,
     * half from the right shard, half from the wrong one */
    for (j = 0; j < 4; j++)
        for (e = 0; e < r.count[j]; e++) {
            for (i = (j * 37 + e * 11) % n;; i = (i + 1) % n) {
                const uint8_t *rec = upload + WIRE_RECORDS_OFFSET + i * rec_bytes;
                uint32_t shard = wire_record_shard(rec);
                if ((e % 2 == 0) == (shard == j)) {
                    r.entry[j][e] = rec + WIRE_CODE_OFFSET + wire_code_bytes(&params);
                    if (shard == j)
                        injected++;
                    else
                        wrong++;
                    break;
                }
            }
        }
    buf = join(&r, &len);
    finish(l.q, buf, len, &t);
    CHECK_OK(t.rc);
    CHECK(injected > 0 && wrong > 0);
    CHECK(t.st.auth_failures == wrong);
    check_sound(&t, l.qv);
    free(buf);
    live_close(&l);
}

static void test_truncated_and_oversized(void)
{
    struct live l;
    struct result t;
    struct resp r;
    uint8_t *buf;
    size_t len, cut, j;
    live_open(&l, 5);
    for (cut = 0; cut < l.resp_len; cut += (cut < 300 ? 1 : 61)) {
        finish(l.q, l.resp, cut, &t);
        CHECK(t.rc != MESS_OK && t.n == 0);
    }
    /* trailing bytes, small and large */
    buf = (uint8_t *)calloc(l.resp_len + (1u << 20), 1);
    memcpy(buf, l.resp, l.resp_len);
    finish(l.q, buf, l.resp_len + 1, &t);
    CHECK_RC(t.rc, MESS_EFORMAT);
    finish(l.q, buf, l.resp_len + (1u << 20), &t);
    CHECK_RC(t.rc, MESS_EFORMAT);
    CHECK(t.n == 0);
    free(buf);
    /* a shard returning more than its budget, with the bytes present */
    r = l.r;
    for (j = 0; j < M_SHARDS; j++)
        if (r.count[j] > 0 && r.count[j] < POOL) {
            r.entry[j][r.count[j]] = r.entry[j][0];
            r.count[j]++;
            break;
        }
    buf = join(&r, &len);
    finish(l.q, buf, len, &t);
    CHECK_RC(t.rc, MESS_EFORMAT);
    free(buf);
    /* a count of 65535 with nothing behind it */
    buf = (uint8_t *)malloc(l.resp_len);
    memcpy(buf, l.resp, l.resp_len);
    buf[HDR] = 0xff;
    buf[HDR + 1] = 0xff;
    finish(l.q, buf, l.resp_len, &t);
    CHECK_RC(t.rc, MESS_EFORMAT);
    free(buf);
    live_close(&l);
}

/* An old response for another query is refused (request id); the same
 * entries under the new request id are authentic stale candidates: they
 * come back reranked exactly against the new query (documented limit). */
static void test_replay(void)
{
    struct live a, b;
    struct result t;
    uint8_t *buf;
    live_open(&a, 6);
    live_open(&b, 7);
    finish(b.q, a.resp, a.resp_len, &t);
    CHECK_RC(t.rc, MESS_EAUTH);
    CHECK(t.n == 0);
    /* the same query asked twice: the first response is no answer to the
     * second request either */
    {
        struct live c;
        live_open(&c, 6);
        finish(c.q, a.resp, a.resp_len, &t);
        CHECK_RC(t.rc, MESS_EAUTH);
        live_close(&c);
    }
    buf = (uint8_t *)malloc(a.resp_len);
    memcpy(buf, a.resp, a.resp_len);
    memcpy(buf + WIRE_HEADER_BYTES, b.resp + WIRE_HEADER_BYTES, WIRE_REQUEST_ID_BYTES);
    finish(b.q, buf, a.resp_len, &t);
    CHECK_OK(t.rc);
    check_sound(&t, b.qv);
    free(buf);
    live_close(&a);
    live_close(&b);
}

static void test_all_fail_and_empty(void)
{
    struct live l;
    struct result t;
    struct resp r;
    uint8_t *buf;
    size_t len, j, e, total = 0;
    live_open(&l, 8);
    buf = (uint8_t *)malloc(l.resp_len);
    memcpy(buf, l.resp, l.resp_len);
    {
        size_t off = HDR;
        for (j = 0; j < M_SHARDS; j++) {
            size_t c = l.r.count[j];
            off += WIRE_BUDGET_BYTES;
            for (e = 0; e < c; e++, off += entry_bytes)
                buf[off + entry_bytes - 1] ^= 0x80; /* the tag */
            total += c;
        }
    }
    finish(l.q, buf, l.resp_len, &t);
    CHECK_RC(t.rc, MESS_EAUTH);
    CHECK(t.n == 0 && t.st.candidates == total && t.st.auth_failures == total &&
          t.st.unique == 0);
    free(buf);
    /* a server that returns nothing at all: well-formed, zero results */
    r = l.r;
    for (j = 0; j < M_SHARDS; j++)
        r.count[j] = 0;
    buf = join(&r, &len);
    finish(l.q, buf, len, &t);
    CHECK_OK(t.rc);
    CHECK(t.n == 0 && t.st.candidates == 0);
    free(buf);
    live_close(&l);
}

/* Random tampering: bit flips, count changes, moved blocks, truncation. */
static void test_random_tampering(void)
{
    struct live l;
    struct result t;
    uint64_t s = 0x853c49e6748fea9bull;
    size_t round, rejected = 0, accepted = 0;
    live_open(&l, 9);
    for (round = 0; round < 3000; round++) {
        uint8_t *buf = (uint8_t *)malloc(l.resp_len);
        size_t len = l.resp_len, k, flips;
        memcpy(buf, l.resp, len);
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        flips = 1 + (size_t)(s >> 60);
        for (k = 0; k < flips; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            buf[(s >> 20) % len] ^= (uint8_t)(1u << ((s >> 8) & 7));
        }
        if ((s >> 40) % 5 == 0)
            len -= (size_t)((s >> 44) % len);
        finish(l.q, buf, len, &t);
        check_sound(&t, l.qv);
        if (t.rc == MESS_OK)
            accepted++;
        else
            rejected++;
        free(buf);
    }
    CHECK(accepted > 0 && rejected > 0);
    printf("  random tampering: %zu accepted (tampered entries dropped), %zu refused\n",
           accepted, rejected);
    live_close(&l);
}

int main(void)
{
    static const uint8_t seed[32] = "hostile server test seed 0000001";
    uint64_t ids[N_ITEMS];
    size_t i;
    if (test_read_sift(&base, &n_base, &queries, &n_query, &train, &n_train, &dim) ||
        n_base < N_ITEMS || n_query < 10) {
        fprintf(stderr, "cannot read datasets/sift\n");
        return 1;
    }
    mess_params_default(&params, (uint32_t)dim);
    params.kappa = 64;
    params.shards = M_SHARDS;
    params.per_item = 2;
    params.hnsw_m = 8;
    params.ef_construction = 40;
    params.train_sample = 2000;
    entry_bytes = mess_payload_size(&params);
    for (i = 0; i < N_ITEMS; i++)
        ids[i] = item_id(i);
    if (mess_client_new(&params, train, n_train, seed, 1, &client) ||
        mess_server_new(&params, &server) ||
        mess_client_upload(client, ids, base, N_ITEMS, 1, &upload, &upload_len) ||
        mess_server_apply_upload(server, upload, upload_len, 1)) {
        fprintf(stderr, "setup failed\n");
        return 1;
    }
    RUN(test_genuine);
    RUN(test_duplicates);
    RUN(test_reorder);
    RUN(test_swap_shards);
    RUN(test_swap_labels);
    RUN(test_truncated_and_oversized);
    RUN(test_replay);
    RUN(test_all_fail_and_empty);
    RUN(test_random_tampering);
    mess_buf_free(upload);
    mess_server_free(server);
    mess_client_free(client);
    mess_vecs_free(base);
    mess_vecs_free(queries);
    mess_vecs_free(train);
    HARNESS_END();
}
