/*
 * test_layout.c - growable public structs (mess.h, "Growable structs").
 *
 * This file is an older caller: it includes tests/layout_old.h, not
 * mess.h, so its mess_params lacks train_sample, its mess_finish_stats
 * lacks unopened and its mess_server_stats lacks min_shard / max_shard.
 * It runs the protocol through the same symbols and checks that the
 * library neither reads nor writes past the sizes it compiled, that the
 * missing fields take their defaults, and that a size of 0, below the
 * first layout, or larger with unknown fields set, is refused.
 */
#include "layout_old.h"
#define HARNESS_NO_WIRE /* wire.h would bring today's mess.h */
#include "harness.h"

#define DIM 16
#define N 300
#define CANARY 0xA5

/* An old struct followed by canary bytes the library must not touch. */
struct params_box { mess_params p; uint8_t tail[64]; };
struct fstats_box { mess_finish_stats st; uint8_t tail[64]; };
struct sstats_box { mess_server_stats st; uint8_t tail[64]; };

static int tail_intact(const uint8_t *t, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (t[i] != CANARY)
            return 0;
    return 1;
}

static float g_data[N * DIM];

static void make_data(void)
{
    uint32_t x = 12345;
    size_t i;
    for (i = 0; i < N * DIM; i++) {
        x = x * 1664525u + 1013904223u;
        g_data[i] = (float)(x >> 8) / (float)(1u << 24) - 0.5f;
    }
}

static void small_params(mess_params *p)
{
    p->kappa = 64;
    p->shards = 8;
    p->per_item = 2;
    p->hnsw_m = 8;
    p->ef_construction = 40;
}

static void test_old_params_default(void)
{
    struct params_box b;
    memset(&b, CANARY, sizeof b);
    CHECK_OK(mess_params_default(&b.p, DIM));
    CHECK(b.p.size == sizeof(mess_params));
    CHECK(b.p.dim == DIM && b.p.kappa == 128 && b.p.shards == 64 &&
          b.p.per_item == 16 && b.p.hnsw_m == 16 && b.p.payload == 0);
    /* the struct's padding aside, nothing beyond it was written */
    CHECK(tail_intact(b.tail, sizeof b.tail));
    CHECK_OK(mess_params_check(&b.p));
}

static void test_old_protocol(void)
{
    struct params_box b, got;
    struct fstats_box fs;
    struct sstats_box ss;
    mess_client *c = NULL;
    mess_server *s = NULL;
    mess_query *q = NULL;
    uint8_t *up = NULL, *req = NULL, *resp = NULL;
    size_t up_len = 0, req_len = 0, resp_len = 0, n_out = 0, i;
    uint64_t ids[N], out_ids[5];
    float dists[5];
    uint8_t seed[32] = {7};

    memset(&b, CANARY, sizeof b);
    CHECK_OK(mess_params_default(&b.p, DIM));
    small_params(&b.p);
    CHECK_OK(mess_client_new(&b.p, g_data, N, seed, 1, &c));
    CHECK_OK(mess_server_new(&b.p, &s));
    if (!c || !s)
        goto done;
    for (i = 0; i < N; i++)
        ids[i] = 1000 + i;
    CHECK_OK(mess_client_upload(c, ids, g_data, N, 1, &up, &up_len));
    CHECK(up_len == mess_upload_size(&b.p, N));
    CHECK_OK(mess_server_apply_upload(s, up, up_len, 1));

    /* the client's parameters come back in the old layout: train_sample
     * (not in this struct) was defaulted, nothing past the struct written */
    memset(&got, CANARY, sizeof got);
    CHECK_OK(mess_client_params(c, &got.p));
    CHECK(got.p.size == sizeof(mess_params));
    CHECK(got.p.dim == DIM && got.p.kappa == 64 && got.p.shards == 8 &&
          got.p.per_item == 2 && got.p.ef_construction == 40);
    CHECK(tail_intact(got.tail, sizeof got.tail));

    CHECK_OK(mess_client_request(c, g_data + 42 * DIM, 40, &q, &req, &req_len));
    CHECK_OK(mess_server_search(s, req, req_len, 1, &resp, &resp_len));
    memset(&fs, CANARY, sizeof fs);
    CHECK_OK(mess_client_finish(c, q, resp, resp_len, 5, out_ids, dists, &n_out,
                                &fs.st));
    CHECK(n_out >= 1 && out_ids[0] == 1042 && dists[0] == 0.0f);
    CHECK(fs.st.size == sizeof(mess_finish_stats));
    CHECK(fs.st.candidates > 0 && fs.st.unique >= n_out &&
          fs.st.auth_failures == 0);
    CHECK(tail_intact(fs.tail, sizeof fs.tail));

    memset(&ss, CANARY, sizeof ss);
    CHECK_OK(mess_server_stats_get(s, &ss.st));
    CHECK(ss.st.size == sizeof(mess_server_stats));
    CHECK(ss.st.entries == (size_t)N * 2 && ss.st.live == (size_t)N * 2 &&
          ss.st.deleted == 0 && ss.st.bytes > 0);
    CHECK(tail_intact(ss.tail, sizeof ss.tail));
done:
    mess_buf_free(up);
    mess_buf_free(req);
    mess_buf_free(resp);
    mess_query_free(q);
    mess_client_free(c);
    mess_server_free(s);
}

static void test_sizes_refused(void)
{
    struct params_box b;
    struct fstats_box fs;
    struct sstats_box ss;
    mess_client *c = (mess_client *)0;
    mess_server *s = NULL;
    const size_t first = offsetof(mess_params, payload) + sizeof(uint32_t);
    uint8_t seed[32] = {1};

    CHECK_OK(mess_params_default(&b.p, DIM));
    small_params(&b.p);
    /* size 0: a caller that filled the struct by hand and forgot it */
    b.p.size = 0;
    CHECK_RC(mess_params_check(&b.p), MESS_EINVAL);
    CHECK_RC(mess_client_new(&b.p, g_data, N, seed, 1, &c), MESS_EINVAL);
    CHECK(c == NULL);
    CHECK_RC(mess_server_new(&b.p, &s), MESS_EINVAL);
    CHECK(s == NULL);
    CHECK(mess_upload_size(&b.p, 1) == 0);
    /* one byte short of the first layout (which ends after `payload`) */
    b.p.size = (uint32_t)first - 1;
    CHECK_RC(mess_params_check(&b.p), MESS_EINVAL);
    CHECK_RC(mess_server_new(&b.p, &s), MESS_EINVAL);
    /* exactly the first layout is enough */
    b.p.size = (uint32_t)first;
    CHECK_OK(mess_params_check(&b.p));
    memset(&b, CANARY, sizeof b);
    CHECK_RC(mess_params_default_sized(&b.p, first - 4, DIM), MESS_EINVAL);
    CHECK_RC(mess_params_default_sized(&b.p, 0, DIM), MESS_EINVAL);
    CHECK(b.p.size == 0xA5A5A5A5u && tail_intact(b.tail, sizeof b.tail));

    CHECK_OK(mess_params_default(&b.p, DIM));
    small_params(&b.p);
    CHECK_OK(mess_server_new(&b.p, &s));
    if (s) {
        memset(&ss, CANARY, sizeof ss);
        CHECK_RC(mess_server_stats_get_sized(s, &ss.st, 0), MESS_EINVAL);
        CHECK_RC(mess_server_stats_get_sized(s, &ss.st, 2 * sizeof(size_t)),
                 MESS_EINVAL);
        CHECK(ss.st.size == 0xA5A5A5A5u);
        CHECK(tail_intact(ss.tail, sizeof ss.tail));
        mess_server_free(s);
    }
    /* finish refuses a too-small stats struct before reading anything */
    {
        size_t n_out = 7;
        uint8_t junk[8] = {0};
        mess_client *cc = NULL;
        CHECK_OK(mess_client_new(&b.p, g_data, N, seed, 1, &cc));
        memset(&fs, CANARY, sizeof fs);
        CHECK_RC(mess_client_finish_sized(cc, (mess_query *)junk, junk, sizeof junk,
                                          1, NULL, NULL, &n_out, &fs.st, 8),
                 MESS_EINVAL);
        CHECK(n_out == 7 && fs.st.size == 0xA5A5A5A5u);
        mess_client_free(cc);
    }
}

/* A newer caller (one more field than this library knows): accepted while
 * the unknown field is zero (its default), refused when set. */
struct params_newer {
    mess_params old;
    uint32_t train_sample;
    uint32_t future;
};

static void test_newer_caller(void)
{
    struct params_newer n;
    mess_server *s = NULL;
    memset(&n, 0, sizeof n);
    CHECK_OK(mess_params_default_sized(&n.old, sizeof n, DIM));
    CHECK(n.old.size == sizeof n && n.train_sample == 0 && n.future == 0);
    small_params(&n.old);
    CHECK_OK(mess_params_check(&n.old));
    CHECK_OK(mess_server_new(&n.old, &s));
    mess_server_free(s);
    s = NULL;
    n.future = 1;
    CHECK_RC(mess_params_check(&n.old), MESS_EINVAL);
    CHECK_RC(mess_server_new(&n.old, &s), MESS_EINVAL);
    CHECK(s == NULL);
}

int main(void)
{
    make_data();
    RUN(test_old_params_default);
    RUN(test_old_protocol);
    RUN(test_sizes_refused);
    RUN(test_newer_caller);
    HARNESS_END();
}
