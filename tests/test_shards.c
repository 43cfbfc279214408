/*
 * test_shards.c - one deployment served by shard groups (D18, mess.h
 * "Shard groups"): mess_records_split, mess_server_search_shards and
 * mess_response_merge on real SIFT data.
 *
 * The whole server S applies every upload and delete; for G = 1, 2, 4 and
 * 64 groups, G servers each apply only their group's split of the same
 * buffers.  For every query the partial responses of the G servers, merged
 * in reverse order, must be byte-identical to S's response (and finish must
 * accept them); so must the partials S itself gives for the same sets.
 * Hostile partials (overlap, gap, another request, over budget, cut short,
 * trailing bytes, sections out of order, other version or parameters) are
 * refused with their code and a message saying which.
 */
#include "../mess_experimental.h"
#include "harness.h"
#include "sift.h"

#define N_ITEMS 1200
#define N_FIRST 800 /* the first upload; the rest is a second one */
#define N_DEL 150
#define SHARDS 64
#define N_QUERIES 12
#define POOL 256

static float *base, *queries, *train;
static size_t n_base, n_query, n_train, dim, eb;
static mess_params P;
static mess_client *C;
static mess_server *S;
static uint8_t *ups[2], *del;
static size_t up_lens[2], del_len;

static const uint8_t seed[32] = "shard groups test seed 00000001";

static uint64_t item_id(size_t i)
{
    return 7000 + 3 * (uint64_t)i;
}

/* Group of shard j when the M shards are spread over g groups: contiguous
 * blocks, or round-robin (the groups' sets are then not intervals). */
static uint32_t group_of(uint32_t j, uint32_t g, int round_robin)
{
    return round_robin ? j % g : (uint32_t)((uint64_t)j * g / SHARDS);
}

/* The shards of group k (in decreasing order: sets need no order). */
static size_t group_set(uint32_t k, uint32_t g, int round_robin, uint32_t *set)
{
    size_t n = 0;
    uint32_t j;
    for (j = SHARDS; j-- > 0;)
        if (group_of(j, g, round_robin) == k)
            set[n++] = j;
    return n;
}

static int setup(void)
{
    uint64_t ids[N_ITEMS];
    size_t i;
    int rc;
    if (test_read_sift(&base, &n_base, &queries, &n_query, &train, &n_train, &dim) ||
        n_base < N_ITEMS || n_query < N_QUERIES)
        return -1;
    mess_params_default(&P, (uint32_t)dim);
    P.shards = SHARDS;
    P.kappa = 64;
    P.per_item = 4;
    P.hnsw_m = 8;
    P.ef_construction = 40;
    P.train_sample = 2000;
    eb = mess_payload_size(&P);
    for (i = 0; i < N_ITEMS; i++)
        ids[i] = item_id(i);
    rc = mess_client_new(&P, train, n_train, seed, 1, &C);
    if (rc == MESS_OK)
        rc = mess_server_new(&P, &S);
    if (rc == MESS_OK)
        rc = mess_client_upload(C, ids, base, N_FIRST, 2, &ups[0], &up_lens[0]);
    if (rc == MESS_OK)
        rc = mess_client_upload(C, ids + N_FIRST, base + N_FIRST * dim,
                                N_ITEMS - N_FIRST, 2, &ups[1], &up_lens[1]);
    /* every 8th item deleted */
    for (i = 0; i < N_DEL; i++)
        ids[i] = item_id(8 * i);
    if (rc == MESS_OK)
        rc = mess_client_delete(C, ids, N_DEL, &del, &del_len);
    if (rc == MESS_OK)
        rc = mess_server_apply_upload(S, ups[0], up_lens[0], 2);
    if (rc == MESS_OK)
        rc = mess_server_apply_upload(S, ups[1], up_lens[1], 2);
    if (rc == MESS_OK) {
        size_t missing = 1;
        rc = mess_server_apply_delete(S, del, del_len, &missing);
        if (rc == MESS_OK && missing != 0)
            rc = MESS_ESTATE;
    }
    return rc;
}

/* Records of an upload or delete buffer. */
static uint64_t records_of(const uint8_t *buf, size_t len)
{
    return len >= WIRE_RECORDS_OFFSET ? mess_load_u64(buf + WIRE_CLIENT_BODY_OFFSET) : 0;
}

/* ---- split ----------------------------------------------------------------- */

static void test_split_partition(void)
{
    uint32_t set[SHARDS], k, g;
    size_t n, b;
    for (b = 0; b < 3; b++) {
        const uint8_t *buf = b < 2 ? ups[b] : del;
        size_t len = b < 2 ? up_lens[b] : del_len, rec;
        uint64_t total = 0;
        uint8_t *out;
        size_t out_len;
        rec = b < 2 ? WIRE_CODE_OFFSET + P.kappa / 8 + eb : WIRE_CODE_OFFSET;
        /* every shard, in decreasing order: the same bytes */
        n = group_set(0, 1, 0, set);
        CHECK_OK(mess_records_split(&P, buf, len, set, n, &out, &out_len));
        CHECK(out_len == len && memcmp(out, buf, len) == 0);
        mess_buf_free(out);
        /* 4 round-robin groups: their records add up, each in its shards only,
         * header and owner tag unchanged */
        for (g = 4, k = 0; k < g; k++) {
            size_t i;
            n = group_set(k, g, 1, set);
            CHECK_OK(mess_records_split(&P, buf, len, set, n, &out, &out_len));
            if (!out)
                continue;
            CHECK(memcmp(out, buf, WIRE_CLIENT_BODY_OFFSET) == 0);
            CHECK(out_len == WIRE_RECORDS_OFFSET + records_of(out, out_len) * rec);
            for (i = 0; i < records_of(out, out_len); i++)
                CHECK(group_of(mess_load_u32(out + WIRE_RECORDS_OFFSET + i * rec), g, 1) == k);
            total += records_of(out, out_len);
            mess_buf_free(out);
        }
        CHECK(total == records_of(buf, len));
    }
}

static void test_split_refuses(void)
{
    uint32_t set[2] = {3, 9}, dup[2] = {5, 5}, big[1] = {SHARDS};
    uint8_t *out = (uint8_t *)1, *copy;
    size_t out_len = 1, rec = WIRE_CODE_OFFSET + P.kappa / 8 + eb;
    mess_params other = P;
    CHECK_RC(mess_records_split(&P, ups[0], up_lens[0], dup, 2, &out, &out_len), MESS_EINVAL);
    CHECK(out == NULL && out_len == 0);
    CHECK_RC(mess_records_split(&P, ups[0], up_lens[0], big, 1, &out, &out_len), MESS_EINVAL);
    CHECK_RC(mess_records_split(&P, ups[0], up_lens[0], set, 0, &out, &out_len), MESS_EINVAL);
    CHECK_RC(mess_records_split(&P, ups[0], up_lens[0], NULL, 2, &out, &out_len), MESS_EINVAL);
    CHECK_RC(mess_records_split(NULL, ups[0], up_lens[0], set, 2, &out, &out_len), MESS_EINVAL);
    CHECK_RC(mess_records_split(&P, ups[0], up_lens[0] - 1, set, 2, &out, &out_len), MESS_EFORMAT);
    CHECK(out == NULL);
    other.shards = 32;
    CHECK_RC(mess_records_split(&other, ups[0], up_lens[0], set, 2, &out, &out_len), MESS_EPARAM);
    copy = (uint8_t *)malloc(up_lens[0] + 1);
    memcpy(copy, ups[0], up_lens[0]);
    copy[up_lens[0]] = 0;
    CHECK_RC(mess_records_split(&P, copy, up_lens[0] + 1, set, 2, &out, &out_len), MESS_EFORMAT);
    /* a record in a shard of no group: refused, not dropped */
    mess_store_u32(copy + WIRE_RECORDS_OFFSET + 5 * rec, SHARDS);
    CHECK_RC(mess_records_split(&P, copy, up_lens[0], set, 2, &out, &out_len), MESS_EFORMAT);
    memcpy(copy, ups[0], up_lens[0]);
    mess_store_u32(copy + WIRE_VERSION_OFFSET, WIRE_VERSION + 1);
    CHECK_RC(mess_records_split(&P, copy, up_lens[0], set, 2, &out, &out_len), MESS_EVERSION);
    memcpy(copy, ups[0], up_lens[0]);
    copy[0] = 'X';
    CHECK_RC(mess_records_split(&P, copy, up_lens[0], set, 2, &out, &out_len), MESS_EFORMAT);
    CHECK(out == NULL && out_len == 0);
    free(copy);
}

/* ---- groups of servers ------------------------------------------------------- */

struct groups {
    uint32_t g;
    int rr;
    mess_server *srv[SHARDS];
    uint32_t set[SHARDS][SHARDS];
    size_t n[SHARDS];
};

static void groups_build(struct groups *G, uint32_t g, int rr)
{
    uint32_t k;
    size_t b;
    memset(G, 0, sizeof *G);
    G->g = g;
    G->rr = rr;
    for (k = 0; k < g; k++) {
        uint8_t *part;
        size_t len, missing, total_missing = 0;
        G->n[k] = group_set(k, g, rr, G->set[k]);
        CHECK_OK(mess_server_new(&P, &G->srv[k]));
        for (b = 0; b < 3; b++) {
            part = NULL;
            CHECK_OK(mess_records_split(&P, b < 2 ? ups[b] : del, b < 2 ? up_lens[b] : del_len,
                                        G->set[k], G->n[k], &part, &len));
            if (!part)
                continue;
            if (b < 2) {
                CHECK_OK(mess_server_apply_upload(G->srv[k], part, len, 1));
            } else {
                CHECK_OK(mess_server_apply_delete(G->srv[k], part, len, &missing));
                total_missing += missing;
            }
            mess_buf_free(part);
        }
        CHECK(total_missing == 0);
    }
}

static void groups_free(struct groups *G)
{
    uint32_t k;
    for (k = 0; k < G->g; k++)
        mess_server_free(G->srv[k]);
}

/* Partials of G's servers (from_whole: of S, on the same sets) for req,
 * merged in reverse order; returns the merged response or NULL. */
static uint8_t *groups_answer(const struct groups *G, int from_whole,
                              const uint8_t *req, size_t req_len, size_t *len)
{
    uint8_t *parts[SHARDS], *resp = NULL;
    size_t lens[SHARDS];
    const uint8_t *order[SHARDS];
    size_t olens[SHARDS];
    char msg[200];
    uint32_t k;
    *len = 0;
    for (k = 0; k < G->g; k++) {
        parts[k] = NULL;
        CHECK_OK(mess_server_search_shards(from_whole ? S : G->srv[k], req, req_len,
                                           G->set[k], G->n[k], 1 + k % 2, &parts[k],
                                           &lens[k]));
        order[G->g - 1 - k] = parts[k];
        olens[G->g - 1 - k] = lens[k];
    }
    for (k = 0; k < G->g; k++)
        if (!parts[k])
            goto out;
    CHECK_OK(mess_response_merge(&P, req, req_len, order, olens, G->g, &resp, len,
                                 msg, sizeof msg));
    CHECK(msg[0] == '\0');
out:
    for (k = 0; k < G->g; k++)
        mess_buf_free(parts[k]);
    return resp;
}

static void check_groups(uint32_t g, int rr)
{
    struct groups G;
    size_t qi, identical = 0, whole_identical = 0;
    groups_build(&G, g, rr);
    for (qi = 0; qi < N_QUERIES; qi++) {
        const float *q = queries + qi * dim;
        size_t pool = qi % 3 == 2 ? 40 : POOL; /* 40 < M: some budgets are 0 */
        mess_query *qs = NULL;
        uint8_t *req = NULL, *resp = NULL, *merged, *whole;
        size_t req_len, resp_len, mlen, wlen;
        CHECK_OK(mess_client_request(C, q, pool, &qs, &req, &req_len));
        CHECK_OK(mess_server_search(S, req, req_len, 1, &resp, &resp_len));
        merged = groups_answer(&G, 0, req, req_len, &mlen);
        whole = groups_answer(&G, 1, req, req_len, &wlen);
        if (merged && resp && mlen == resp_len && memcmp(merged, resp, mlen) == 0)
            identical++;
        if (whole && resp && wlen == resp_len && memcmp(whole, resp, wlen) == 0)
            whole_identical++;
        if (qi == 0 && merged) {
            uint64_t ids[10];
            float d[10];
            size_t n = 0;
            CHECK_OK(mess_client_finish(C, qs, merged, mlen, 10, ids, d, &n, NULL));
            CHECK(n == 10);
        }
        mess_buf_free(merged);
        mess_buf_free(whole);
        mess_buf_free(resp);
        mess_buf_free(req);
        mess_query_free(qs);
    }
    printf("  %u groups%s: %zu/%d merged responses identical to the whole server's "
           "(%zu/%d from its own subset search)\n", (unsigned)g,
           rr ? " (round-robin)" : "", identical, N_QUERIES, whole_identical, N_QUERIES);
    CHECK(identical == N_QUERIES);
    CHECK(whole_identical == N_QUERIES);
    groups_free(&G);
}

static void test_groups_1(void) { check_groups(1, 0); }
static void test_groups_2(void) { check_groups(2, 0); }
static void test_groups_4(void) { check_groups(4, 1); }
static void test_groups_64(void) { check_groups(64, 0); }

static void test_search_shards_refuses(void)
{
    uint32_t dup[2] = {1, 1}, big[2] = {0, SHARDS}, ok[2] = {4, 2};
    mess_query *qs = NULL;
    uint8_t *req = NULL, *part = (uint8_t *)1;
    size_t req_len = 0, len = 1;
    CHECK_OK(mess_client_request(C, queries, POOL, &qs, &req, &req_len));
    if (!req)
        return;
    CHECK_RC(mess_server_search_shards(S, req, req_len, dup, 2, 1, &part, &len), MESS_EINVAL);
    CHECK(part == NULL && len == 0);
    CHECK_RC(mess_server_search_shards(S, req, req_len, big, 2, 1, &part, &len), MESS_EINVAL);
    CHECK_RC(mess_server_search_shards(S, req, req_len, ok, 0, 1, &part, &len), MESS_EINVAL);
    CHECK_RC(mess_server_search_shards(S, req, req_len, NULL, 2, 1, &part, &len), MESS_EINVAL);
    CHECK_RC(mess_server_search_shards(S, req, req_len - 1, ok, 2, 1, &part, &len), MESS_EFORMAT);
    req[WIRE_HEADER_BYTES] ^= 1; /* another client's owner tag */
    CHECK_RC(mess_server_search_shards(S, req, req_len, ok, 2, 1, &part, &len), MESS_EOWNER);
    CHECK(part == NULL);
    req[WIRE_HEADER_BYTES] ^= 1;
    CHECK_OK(mess_server_search_shards(S, req, req_len, ok, 2, 1, &part, &len));
    /* two sections, shards 2 then 4 */
    CHECK(part && len >= WIRE_PARTIAL_BODY_OFFSET + 2 * WIRE_SECTION_BYTES &&
          memcmp(part, "MSRP", 4) == 0 &&
          mess_load_u32(part + WIRE_PARTIAL_SECTIONS_OFFSET) == 2 &&
          mess_load_u32(part + WIRE_PARTIAL_BODY_OFFSET) == 2);
    mess_buf_free(part);
    mess_buf_free(req);
    mess_query_free(qs);
}

/* ---- hostile partials ---------------------------------------------------------- */

/* A partial rebuilt from sections: shard[i], count[i] with entries taken
 * from src (cycled), for tampering that a byte flip cannot express. */
static uint8_t *build_partial(const uint8_t *request_id, const uint32_t *shard,
                              const uint32_t *count, uint32_t n, const uint8_t *src,
                              size_t *len)
{
    size_t total = 0, i, e;
    uint8_t *buf, *dst;
    for (i = 0; i < n; i++)
        total += count[i];
    *len = WIRE_PARTIAL_BODY_OFFSET + n * WIRE_SECTION_BYTES + total * eb;
    buf = (uint8_t *)malloc(*len);
    dst = wire_partial_start(buf, &P, request_id, n);
    for (i = 0; i < n; i++) {
        dst = wire_partial_put_section(dst, shard[i], count[i]);
        for (e = 0; e < count[i]; e++, dst += eb)
            memcpy(dst, src, eb);
    }
    return buf;
}

static int merge_says(const uint8_t *req, size_t req_len, const uint8_t *const *parts,
                      const size_t *lens, size_t n, int want, const char *words)
{
    uint8_t *resp = (uint8_t *)1;
    size_t len = 1;
    char msg[200];
    int rc = mess_response_merge(&P, req, req_len, parts, lens, n, &resp, &len, msg,
                                 sizeof msg);
    if (rc != want || resp != NULL || len != 0 || (words && !strstr(msg, words))) {
        fprintf(stderr, "  merge gave %d (%s) '%s', want %d and '%s'\n", rc,
                mess_strerror(rc), msg, want, words ? words : "");
        return 0;
    }
    return 1;
}

static void test_hostile_partials(void)
{
    uint32_t lo[32], hi[32], j;
    mess_query *qa = NULL, *qb = NULL;
    uint8_t *ra = NULL, *rb = NULL, *a_lo = NULL, *a_hi = NULL, *b_hi = NULL, *t, *resp;
    size_t la, lb, l_lo, l_hi, lb_hi, lt, rlen;
    const uint8_t *parts[4];
    size_t lens[4];
    char msg[200];
    for (j = 0; j < 32; j++) {
        lo[j] = j;
        hi[j] = 32 + j;
    }
    CHECK_OK(mess_client_request(C, queries, POOL, &qa, &ra, &la));
    CHECK_OK(mess_client_request(C, queries + dim, POOL, &qb, &rb, &lb));
    CHECK_OK(mess_server_search_shards(S, ra, la, lo, 32, 1, &a_lo, &l_lo));
    CHECK_OK(mess_server_search_shards(S, ra, la, hi, 32, 1, &a_hi, &l_hi));
    CHECK_OK(mess_server_search_shards(S, rb, lb, hi, 32, 1, &b_hi, &lb_hi));
    if (!ra || !rb || !a_lo || !a_hi || !b_hi)
        goto done;
    /* the genuine pair merges */
    parts[0] = a_hi, lens[0] = l_hi, parts[1] = a_lo, lens[1] = l_lo;
    CHECK_OK(mess_response_merge(&P, ra, la, parts, lens, 2, &resp, &rlen, NULL, 0));
    mess_buf_free(resp);
    /* overlap, gap, another request's part, another request */
    parts[2] = a_lo, lens[2] = l_lo;
    CHECK(merge_says(ra, la, parts, lens, 3, MESS_EFORMAT, "overlap: shard 0"));
    CHECK(merge_says(ra, la, parts, lens, 1, MESS_EFORMAT, "gap: 32 shard(s)"));
    parts[0] = b_hi, lens[0] = lb_hi;
    CHECK(merge_says(ra, la, parts, lens, 2, MESS_EAUTH, "part 0 answers another request"));
    parts[0] = a_hi, lens[0] = l_hi;
    CHECK(merge_says(rb, lb, parts, lens, 2, MESS_EAUTH, "another request"));
    /* cut short, trailing bytes */
    lens[1] = l_lo - 1;
    CHECK(merge_says(ra, la, parts, lens, 2, MESS_EFORMAT, "part 1: section 31 is cut short"));
    lens[1] = WIRE_PARTIAL_BODY_OFFSET - 1;
    CHECK(merge_says(ra, la, parts, lens, 2, MESS_EFORMAT, "part 1: section count"));
    lens[1] = 10;
    CHECK(merge_says(ra, la, parts, lens, 2, MESS_EFORMAT, "part 1: not a partial"));
    t = (uint8_t *)malloc(l_lo + 3);
    memcpy(t, a_lo, l_lo);
    memset(t + l_lo, 0, 3);
    parts[1] = t, lens[1] = l_lo + 3;
    CHECK(merge_says(ra, la, parts, lens, 2, MESS_EFORMAT, "3 bytes after its last section"));
    /* header: magic, version, parameters; section count 0 and above M */
    lens[1] = l_lo;
    t[0] = 'X';
    CHECK(merge_says(ra, la, parts, lens, 2, MESS_EFORMAT, "not a partial response"));
    t[0] = 'M';
    mess_store_u32(t + WIRE_VERSION_OFFSET, WIRE_VERSION + 1);
    CHECK(merge_says(ra, la, parts, lens, 2, MESS_EVERSION, "version"));
    mess_store_u32(t + WIRE_VERSION_OFFSET, WIRE_VERSION);
    t[WIRE_VERSION_OFFSET + 4] ^= 0x80;
    CHECK(merge_says(ra, la, parts, lens, 2, MESS_EPARAM, "other parameters"));
    t[WIRE_VERSION_OFFSET + 4] ^= 0x80;
    mess_store_u32(t + WIRE_PARTIAL_SECTIONS_OFFSET, 0);
    CHECK(merge_says(ra, la, parts, lens, 2, MESS_EFORMAT, "section count must be 1..64"));
    mess_store_u32(t + WIRE_PARTIAL_SECTIONS_OFFSET, SHARDS + 1);
    CHECK(merge_says(ra, la, parts, lens, 2, MESS_EFORMAT, "section count must be 1..64"));
    mess_store_u32(t + WIRE_PARTIAL_SECTIONS_OFFSET, 32);
    /* the first section's shard out of range; then equal to the next */
    mess_store_u32(t + WIRE_PARTIAL_BODY_OFFSET, SHARDS);
    CHECK(merge_says(ra, la, parts, lens, 2, MESS_EFORMAT, "section 0 names shard 64"));
    mess_store_u32(t + WIRE_PARTIAL_BODY_OFFSET, 1);
    CHECK(merge_says(ra, la, parts, lens, 2, MESS_EFORMAT, "section 1 names shard 1"));
    free(t);
    /* the whole server's response is not a partial */
    CHECK_OK(mess_server_search(S, ra, la, 1, &resp, &rlen));
    parts[1] = resp, lens[1] = rlen;
    CHECK(merge_says(ra, la, parts, lens, 2, MESS_EFORMAT, "not a partial response"));
    mess_buf_free(resp);
    /* a section over its budget (POOL / M = 4 per shard), well formed */
    {
        uint32_t shard[2] = {3, 7}, count[2] = {4, 5};
        t = build_partial(ra + WIRE_REQUEST_ID_OFFSET, shard, count, 2,
                          a_lo + WIRE_PARTIAL_BODY_OFFSET + WIRE_SECTION_BYTES, &lt);
        parts[0] = t, lens[0] = lt;
        CHECK(merge_says(ra, la, parts, lens, 1, MESS_EFORMAT,
                         "part 0: shard 7 returns 5 entries, over its budget 4"));
        count[1] = 4;
        free(t);
        t = build_partial(ra + WIRE_REQUEST_ID_OFFSET, shard, count, 2,
                          a_lo + WIRE_PARTIAL_BODY_OFFSET + WIRE_SECTION_BYTES, &lt);
        parts[0] = t, lens[0] = lt;
        CHECK(merge_says(ra, la, parts, lens, 1, MESS_EFORMAT, "gap: 62 shard(s)"));
        free(t);
    }
    /* bad arguments */
    parts[0] = a_lo, lens[0] = l_lo, parts[1] = NULL, lens[1] = 0;
    CHECK(merge_says(ra, la, parts, lens, 2, MESS_EINVAL, "part 1 is NULL"));
    CHECK(merge_says(ra, la, parts, lens, 0, MESS_EINVAL, NULL));
    CHECK(merge_says(ra, la - 1, parts, lens, 1, MESS_EFORMAT, "the request"));
    CHECK_RC(mess_response_merge(&P, ra, la, parts, lens, 1, NULL, &rlen, msg, sizeof msg),
             MESS_EINVAL);
done:
    mess_buf_free(ra);
    mess_buf_free(rb);
    mess_buf_free(a_lo);
    mess_buf_free(a_hi);
    mess_buf_free(b_hi);
    mess_query_free(qa);
    mess_query_free(qb);
}

int main(void)
{
    if (setup() != MESS_OK) {
        fprintf(stderr, "setup failed (datasets/sift)\n");
        return 1;
    }
    RUN(test_split_partition);
    RUN(test_split_refuses);
    RUN(test_search_shards_refuses);
    RUN(test_hostile_partials);
    RUN(test_groups_1);
    RUN(test_groups_2);
    RUN(test_groups_4);
    RUN(test_groups_64);
    mess_buf_free(ups[0]);
    mess_buf_free(ups[1]);
    mess_buf_free(del);
    mess_server_free(S);
    mess_client_free(C);
    mess_vecs_free(base);
    mess_vecs_free(queries);
    mess_vecs_free(train);
    HARNESS_END();
}
