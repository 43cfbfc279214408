/*
 * test_server_view.c - the read-only server view on the bundled real SIFT
 * data: node counts, codes equal to the client's clean codes when p_D = 0,
 * label uniqueness, graph structure (levels, links, entry point), the
 * compressed-row links against the per-node ones, ciphertexts against a real
 * response, deleted flags, and every error path.
 */
#include <stdio.h>

#include "../mess_experimental.h"
#include "harness.h"
#include "sift.h"

#define N_ITEMS 800
#define SHARDS 8
#define PER_ITEM 2

static float *base, *train;
static size_t n_base, n_train, dim;
static mess_params P;
static mess_client *C;
static mess_server *S;

static const uint8_t seed[32] = {7, 1, 7, 2, 7, 3, 7, 4, 7, 5, 7, 6, 7, 7,
                                 7, 8, 7, 9, 7, 10, 7, 11, 7, 12, 7, 13, 7,
                                 14, 7, 15, 7, 16};

static int setup(void)
{
    uint64_t ids[N_ITEMS];
    uint8_t *buf;
    size_t len, i;
    int rc;
    if (test_read_sift(&base, &n_base, NULL, NULL, &train, &n_train, &dim) ||
        n_base < N_ITEMS)
        return -1;
    mess_params_default(&P, (uint32_t)dim);
    P.shards = SHARDS;
    P.per_item = PER_ITEM;
    P.p_store = 0; /* clean codes on the server: checkable against the client */
    P.ef_construction = 60;
    P.train_sample = 2000;
    for (i = 0; i < N_ITEMS; i++)
        ids[i] = 1000 + i;
    rc = mess_client_new(&P, train, n_train, seed, 2, &C);
    if (rc == MESS_OK)
        rc = mess_server_new(&P, &S);
    if (rc == MESS_OK)
        rc = mess_client_upload(C, ids, base, N_ITEMS, 2, &buf, &len);
    if (rc == MESS_OK) {
        rc = mess_server_apply_upload(S, buf, len, 2);
        mess_buf_free(buf);
    }
    return rc;
}

static void test_counts(void)
{
    mess_server_stats st;
    size_t total = 0, n;
    uint32_t j;
    for (j = 0; j < SHARDS; j++) {
        CHECK_OK(mess_server_shard_nodes(S, j, &n));
        total += n;
    }
    CHECK(total == (size_t)N_ITEMS * PER_ITEM);
    CHECK_OK(mess_server_stats_get(S, &st));
    CHECK(st.entries == total);
}

/* With p_D = 0 every stored code is the clean code of one item for that
 * shard, and every item's code sits in exactly t shards. */
static void test_codes_are_clean_codes(void)
{
    size_t words = P.kappa / 64, i, n, k;
    uint64_t *clean = (uint64_t *)malloc(N_ITEMS * SHARDS * words * 8);
    unsigned *hits = (unsigned *)calloc(N_ITEMS, sizeof *hits);
    uint32_t j;
    for (i = 0; i < N_ITEMS; i++)
        CHECK_OK(mess_client_codes(C, base + i * dim, clean + i * SHARDS * words));
    for (j = 0; j < SHARDS; j++) {
        uint64_t *codes;
        size_t unmatched = 0;
        CHECK_OK(mess_server_shard_nodes(S, j, &n));
        codes = (uint64_t *)malloc(n * words * 8);
        CHECK_OK(mess_server_shard_codes(S, j, codes, n));
        for (k = 0; k < n; k++) {
            size_t found = 0;
            for (i = 0; i < N_ITEMS; i++)
                if (!memcmp(codes + k * words,
                            clean + (i * SHARDS + j) * words, words * 8)) {
                    hits[i]++;
                    found = 1;
                    break;
                }
            unmatched += !found;
        }
        CHECK(unmatched == 0);
        free(codes);
    }
    for (i = 0; i < N_ITEMS; i++)
        if (hits[i] != PER_ITEM)
            break;
    CHECK(i == N_ITEMS);
    free(clean);
    free(hits);
}

static int cmp_label(const void *a, const void *b)
{
    return memcmp(a, b, MESS_LABEL_BYTES);
}

static void test_labels_unique(void)
{
    uint8_t *all = (uint8_t *)malloc(N_ITEMS * PER_ITEM * MESS_LABEL_BYTES);
    size_t off = 0, n, i, dup = 0, hi_zero = 0;
    uint32_t j;
    for (j = 0; j < SHARDS; j++) {
        CHECK_OK(mess_server_shard_nodes(S, j, &n));
        CHECK_OK(mess_server_shard_labels(S, j, all + off * MESS_LABEL_BYTES, n));
        off += n;
    }
    /* per-shard PRF labels: no label repeats, not even across shards, and
     * all 128 bits carry the PRF (a 64-bit label would leave the upper
     * half zero) */
    qsort(all, off, MESS_LABEL_BYTES, cmp_label);
    for (i = 1; i < off; i++)
        dup += memcmp(all + i * MESS_LABEL_BYTES, all + (i - 1) * MESS_LABEL_BYTES,
                      MESS_LABEL_BYTES) == 0;
    for (i = 0; i < off; i++) {
        static const uint8_t zero[8];
        hi_zero += memcmp(all + i * MESS_LABEL_BYTES + 8, zero, 8) == 0;
    }
    CHECK(dup == 0 && hi_zero == 0);
    free(all);
}

static void test_graph_structure(void)
{
    uint32_t j;
    for (j = 0; j < SHARDS; j++) {
        size_t n, i, n_ids, bad = 0, mismatch = 0;
        uint32_t *levels, ep, top = 0, l;
        CHECK_OK(mess_server_shard_nodes(S, j, &n));
        levels = (uint32_t *)malloc(n * sizeof *levels);
        CHECK_OK(mess_server_shard_levels(S, j, levels, n));
        CHECK_OK(mess_server_shard_entry_point(S, j, &ep));
        for (i = 0; i < n; i++)
            if (levels[i] > top)
                top = levels[i];
        CHECK(ep < n && levels[ep] == top);
        CHECK(top >= 1); /* m_L = 1/ln 16: some of ~200 nodes reach level 1 */
        for (l = 0; l <= top; l++) {
            size_t *offs = (size_t *)malloc((n + 1) * sizeof *offs);
            uint32_t *ids;
            CHECK_OK(mess_server_shard_links(S, j, l, offs, n + 1, NULL, 0, &n_ids));
            ids = (uint32_t *)malloc((n_ids ? n_ids : 1) * sizeof *ids);
            CHECK_OK(mess_server_shard_links(S, j, l, offs, n + 1, ids, n_ids, &n_ids));
            CHECK(offs[n] == n_ids);
            if (l == 0)
                CHECK(n_ids > n); /* a connected bottom layer */
            for (i = 0; i < n; i++) {
                uint32_t one[2 * MESS_MAX_HNSW_M];
                size_t cnt = 0, e;
                size_t want = offs[i + 1] - offs[i];
                if (levels[i] < l) {
                    bad += want != 0;
                    CHECK_RC(mess_server_shard_neighbors(S, j, (uint32_t)i, l, one,
                                                         2 * MESS_MAX_HNSW_M, &cnt),
                             MESS_EINVAL);
                    continue;
                }
                CHECK_OK(mess_server_shard_neighbors(S, j, (uint32_t)i, l, one,
                                                     2 * MESS_MAX_HNSW_M, &cnt));
                mismatch += cnt != want ||
                            (cnt && memcmp(one, ids + offs[i], cnt * 4));
                bad += cnt > (l ? P.hnsw_m : 2 * P.hnsw_m);
                for (e = 0; e < cnt; e++)
                    bad += one[e] >= n || one[e] == i || levels[one[e]] < l;
            }
            free(offs);
            free(ids);
        }
        CHECK(bad == 0);
        CHECK(mismatch == 0);
        free(levels);
    }
}

/* Every ciphertext of a real response is one of the view's entries of
 * the shard it came from. */
static void test_entries_match_response(void)
{
    size_t eb = mess_payload_size(&P), rl, sl, n[SHARDS];
    struct wire_response r;
    uint8_t *ent[SHARDS], *req, *resp;
    mess_query *q;
    uint32_t j;
    size_t missing = 0, got = 0;
    for (j = 0; j < SHARDS; j++) {
        CHECK_OK(mess_server_shard_nodes(S, j, &n[j]));
        ent[j] = (uint8_t *)malloc(n[j] * eb);
        CHECK_OK(mess_server_shard_entries(S, j, ent[j], n[j]));
    }
    CHECK_OK(mess_client_request(C, base + 5 * dim, 4 * SHARDS, &q, &req, &rl));
    CHECK_OK(mess_server_search(S, req, rl, 1, &resp, &sl));
    mess_rd_init(&r.body, resp, sl); /* the layout is wire.h's */
    CHECK(mess_rd_take(&r.body, WIRE_RESPONSE_BODY_OFFSET) != NULL);
    for (j = 0; j < SHARDS; j++) {
        uint32_t cnt, e;
        const uint8_t *es = wire_response_next(&r, eb, &cnt);
        size_t k;
        if (!es)
            break;
        for (e = 0; e < cnt; e++) {
            for (k = 0; k < n[j]; k++)
                if (!memcmp(ent[j] + k * eb, es + (size_t)e * eb, eb))
                    break;
            missing += k == n[j];
            got++;
        }
    }
    CHECK(j == SHARDS && mess_rd_left(&r.body) == 0);
    CHECK(got == 4 * SHARDS);
    CHECK(missing == 0);
    mess_query_free(q);
    mess_buf_free(req);
    mess_buf_free(resp);
    for (j = 0; j < SHARDS; j++)
        free(ent[j]);
}

static void test_deleted_flags(void)
{
    uint64_t ids[3] = {1000, 1001, 1500};
    uint8_t *buf;
    size_t len, missing, flagged = 0, n, i;
    uint32_t j;
    CHECK_OK(mess_client_delete(C, ids, 3, &buf, &len));
    CHECK_OK(mess_server_apply_delete(S, buf, len, &missing));
    CHECK(missing == 0);
    mess_buf_free(buf);
    for (j = 0; j < SHARDS; j++) {
        uint8_t *d;
        CHECK_OK(mess_server_shard_nodes(S, j, &n));
        d = (uint8_t *)malloc(n);
        CHECK_OK(mess_server_shard_deleted(S, j, d, n));
        for (i = 0; i < n; i++) {
            CHECK(d[i] <= 1);
            flagged += d[i];
        }
        free(d);
    }
    CHECK(flagged == 3 * PER_ITEM);
}

static void test_errors(void)
{
    mess_server *empty;
    size_t n, n0, offs[4];
    uint64_t one[64 * 2];
    uint32_t ep, ids[64];
    uint8_t flag;
    CHECK_RC(mess_server_shard_nodes(NULL, 0, &n), MESS_EINVAL);
    CHECK_RC(mess_server_shard_nodes(S, SHARDS, &n), MESS_EINVAL);
    CHECK_RC(mess_server_shard_nodes(S, 0, NULL), MESS_EINVAL);
    CHECK_RC(mess_server_shard_codes(S, 0, NULL, 1000), MESS_EINVAL);
    CHECK_RC(mess_server_shard_codes(S, 0, one, 1), MESS_ELIMIT);
    CHECK_RC(mess_server_shard_labels(S, SHARDS, (uint8_t *)one, 64), MESS_EINVAL);
    CHECK_RC(mess_server_shard_labels(S, 0, (uint8_t *)one, 1), MESS_ELIMIT);
    CHECK_RC(mess_server_shard_levels(S, 0, ids, 1), MESS_ELIMIT);
    CHECK_RC(mess_server_shard_deleted(S, 0, &flag, 1), MESS_ELIMIT);
    CHECK_RC(mess_server_shard_entries(S, 0, &flag, 1), MESS_ELIMIT);
    CHECK_OK(mess_server_shard_nodes(S, 0, &n0));
    CHECK_RC(mess_server_shard_neighbors(S, 0, (uint32_t)n0, 0, ids, 64, &n), MESS_EINVAL);
    CHECK_RC(mess_server_shard_neighbors(S, 0, 0, 40, ids, 64, &n), MESS_EINVAL);
    CHECK_RC(mess_server_shard_neighbors(S, 0, 0, 0, ids, 1, &n), MESS_ELIMIT);
    CHECK(n > 1);
    CHECK_RC(mess_server_shard_neighbors(S, 0, 0, 0, NULL, 5, &n), MESS_EINVAL);
    CHECK_RC(mess_server_shard_links(S, 0, 0, offs, 4, NULL, 0, &n), MESS_ELIMIT);
    CHECK_OK(mess_server_new(&P, &empty));
    CHECK_RC(mess_server_shard_entry_point(empty, 0, &ep), MESS_ENOTFOUND);
    CHECK_OK(mess_server_shard_nodes(empty, 3, &n));
    CHECK(n == 0);
    CHECK_OK(mess_server_shard_links(empty, 0, 0, offs, 1, NULL, 0, &n));
    CHECK(n == 0 && offs[0] == 0);
    CHECK_OK(mess_server_shard_codes(empty, 0, one, 0));
    mess_server_free(empty);
}

int main(void)
{
    if (setup() != MESS_OK) {
        printf("cannot build the test index from datasets/sift\n");
        printf("0 passed, 1 failed\n");
        return 1;
    }
    RUN(test_counts);
    RUN(test_codes_are_clean_codes);
    RUN(test_labels_unique);
    RUN(test_graph_structure);
    RUN(test_entries_match_response);
    RUN(test_deleted_flags);
    RUN(test_errors);
    mess_client_free(C);
    mess_server_free(S);
    free(base);
    free(train);
    HARNESS_END();
}
