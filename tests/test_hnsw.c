/*
 * test_hnsw.c - the binary HNSW engine on real codes (signs of a seeded
 * Gaussian projection of the bundled SIFT set): recall against exact
 * Hamming top-P, deletion, compaction, serialization, hostile buffers,
 * concurrent searches.
 */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE, MAP_ANONYMOUS: test_layout_huge */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include <sodium.h>

#include "hnsw_bin.h"
#include "hnsw_internal.h" /* hnsw_score_list_pick */
#include "parallel.h"
#include "rng.h"
#include "harness.h"
#include "sift.h"

#define BITS 128
#define WORDS (BITS / 64)
#define NQ 100
/* Test labels: both halves depend on x, so a comparison of one half only
 * would not tell them apart from the colliding pairs of test_label_width. */
#define LB(x) hnsw_label_of((uint64_t)(x), ~(uint64_t)(x))

static uint64_t *codes, *qcodes;
static size_t n, nq;

/* sign(x . r_i) for BITS seeded Gaussian directions r_i */
static uint64_t *project(const float *x, size_t count, size_t dim,
                         const float *dirs)
{
    uint64_t *c = (uint64_t *)calloc(count * WORDS, 8);
    size_t i, b, k;
    for (i = 0; i < count; i++)
        for (b = 0; b < BITS; b++) {
            double s = 0;
            for (k = 0; k < dim; k++)
                s += (x[i * dim + k] - 20.0) * dirs[b * dim + k];
            if (s > 0)
                c[i * WORDS + b / 64] |= (uint64_t)1 << (b % 64);
        }
    return c;
}

static int load_codes(void)
{
    float *base, *q, *dirs;
    size_t dim, i;
    struct mess_rng r;
    uint8_t seed[32] = {42};
    if (test_read_sift(&base, &n, &q, &nq, NULL, NULL, &dim))
        return -1;
    if (n > 5000)
        n = 5000;
    if (nq > NQ)
        nq = NQ;
    dirs = (float *)malloc(BITS * dim * sizeof *dirs);
    mess_rng_init(&r, seed, 1);
    for (i = 0; i < BITS * dim; i++)
        dirs[i] = (float)mess_rng_gaussian(&r);
    codes = project(base, n, dim, dirs);
    qcodes = project(q, nq, dim, dirs);
    free(base);
    free(q);
    free(dirs);
    return 0;
}

static struct hnsw *build(size_t count, uint32_t m, uint32_t efc)
{
    struct hnsw_params p = {BITS, m, efc, 7};
    struct hnsw *h = NULL;
    size_t i;
    if (hnsw_new(&p, &h) != MESS_OK)
        return NULL;
    for (i = 0; i < count; i++)
        if (hnsw_add(h, codes + i * WORDS, LB(1000 + i), NULL) != MESS_OK) {
            hnsw_free(h);
            return NULL;
        }
    return h;
}

/* Exact top-P distance threshold: recall counts hits whose distance is
 * within the P-th smallest distance (ties make the exact set ambiguous). */
static uint32_t kth_distance(const uint64_t *q, size_t count, size_t P)
{
    uint32_t hist[BITS + 1] = {0}, d;
    size_t i, acc = 0;
    for (i = 0; i < count; i++)
        hist[hnsw_hamming(q, codes + i * WORDS, WORDS)]++;
    for (d = 0; d <= BITS; d++) {
        acc += hist[d];
        if (acc >= P)
            return d;
    }
    return BITS;
}

static double recall(struct hnsw *h, size_t P, size_t ef)
{
    struct hnsw_scratch *s;
    struct hnsw_hit *hits = (struct hnsw_hit *)malloc(P * sizeof *hits);
    size_t q, got, i, good = 0;
    hnsw_scratch_new(&s);
    for (q = 0; q < nq; q++) {
        uint32_t kth = kth_distance(qcodes + q * WORDS, n, P);
        hnsw_search(h, s, qcodes + q * WORDS, P, ef, hits, &got);
        for (i = 0; i < got; i++)
            good += hits[i].dist <= kth;
    }
    hnsw_scratch_free(s);
    free(hits);
    return (double)good / (double)(nq * P);
}

static struct hnsw *g;

static void test_recall(void)
{
    double r25, r100;
    g = build(n, 16, 100);
    CHECK(g != NULL);
    if (!g)
        return;
    CHECK(hnsw_count(g) == n && hnsw_live(g) == n);
    r25 = recall(g, 25, 64);
    r100 = recall(g, 100, 100);
    printf("# HNSW recall vs exact Hamming (n=%zu): P=25 ef=64 %.3f, P=100 ef=100 %.3f\n",
           n, r25, r100);
    CHECK(r25 >= 0.95);
    CHECK(r100 >= 0.95);
}

static void test_results_sorted_and_exact_distances(void)
{
    struct hnsw_scratch *s;
    struct hnsw_hit hits[50];
    size_t got, i;
    hnsw_scratch_new(&s);
    CHECK_OK(hnsw_search(g, s, qcodes, 50, 80, hits, &got));
    CHECK(got == 50);
    for (i = 0; i < got; i++) {
        CHECK(hits[i].dist == hnsw_hamming(qcodes, codes + (size_t)hits[i].node * WORDS, WORDS));
        CHECK(hnsw_label_eq(hits[i].label, LB(1000 + hits[i].node)));
        if (i > 0)
            CHECK(hits[i - 1].dist < hits[i].dist ||
                  (hits[i - 1].dist == hits[i].dist && hits[i - 1].node < hits[i].node));
    }
    /* every node finds itself at distance 0 */
    for (i = 0; i < n; i += 97) {
        CHECK_OK(hnsw_search(g, s, codes + i * WORDS, 1, 32, hits, &got));
        CHECK(got == 1 && hits[0].dist == 0);
    }
    hnsw_scratch_free(s);
}

/* Labels are 128 bits compared in full (issue 12 item 10): two labels that
 * share their first (or last) 64 bits are different labels, found, deleted
 * and serialized each on its own; only a full 128-bit match is refused. */
static void test_label_width(void)
{
    struct hnsw_params p = {BITS, 8, 32, 3};
    struct hnsw *h = NULL, *b = NULL;
    struct mess_wr w;
    struct mess_rd r;
    const struct hnsw_label a = hnsw_label_of(0x0123456789abcdefull, 1),
                            same_lo = hnsw_label_of(0x0123456789abcdefull, 2),
                            same_hi = hnsw_label_of(7, 1);
    uint32_t node;
    CHECK_OK(hnsw_new(&p, &h));
    if (!h)
        return;
    CHECK_OK(hnsw_add(h, codes, a, &node));
    CHECK(node == 0);
    CHECK_OK(hnsw_add(h, codes + WORDS, same_lo, &node));
    CHECK(node == 1);
    CHECK_OK(hnsw_add(h, codes + 2 * WORDS, same_hi, &node));
    CHECK(node == 2);
    CHECK_RC(hnsw_add(h, codes + 3 * WORDS, a, NULL), MESS_EINVAL);
    CHECK_OK(hnsw_find(h, same_lo, &node));
    CHECK(node == 1 && hnsw_label_eq(hnsw_label(h, 1), same_lo) &&
          !hnsw_label_eq(hnsw_label(h, 0), same_lo));
    CHECK_RC(hnsw_find(h, hnsw_label_of(0x0123456789abcdefull, 3), NULL), MESS_ENOTFOUND);
    CHECK_OK(hnsw_delete(h, a));
    CHECK_RC(hnsw_find(h, a, NULL), MESS_ENOTFOUND);
    CHECK_OK(hnsw_find(h, same_lo, NULL));
    CHECK_OK(hnsw_find(h, same_hi, NULL));
    /* the full labels survive a save and load */
    mess_wr_init(&w);
    CHECK_OK(hnsw_serialize(h, &w));
    mess_rd_init(&r, w.p, w.len);
    CHECK_OK(hnsw_deserialize(&r, &p, &b));
    if (b) {
        CHECK(hnsw_label_eq(hnsw_label(b, 0), a) && hnsw_label_eq(hnsw_label(b, 1), same_lo) &&
              hnsw_label_eq(hnsw_label(b, 2), same_hi));
        CHECK_RC(hnsw_find(b, a, NULL), MESS_ENOTFOUND);
        CHECK_OK(hnsw_find(b, same_lo, &node));
        CHECK(node == 1);
    }
    /* a version-1 index (64-bit labels) is refused */
    if (w.len > 8) {
        w.p[4] = 1;
        b = (hnsw_free(b), NULL);
        mess_rd_init(&r, w.p, w.len);
        CHECK_RC(hnsw_deserialize(&r, &p, &b), MESS_EVERSION);
    }
    hnsw_free(b);
    mess_wr_free(&w);
    hnsw_free(h);
}

static void test_delete_and_compact(void)
{
    struct hnsw_scratch *s;
    struct hnsw_hit hits[40];
    struct hnsw *c = NULL;
    uint32_t *map = (uint32_t *)malloc(n * sizeof *map);
    size_t got, i, j, bad = 0, lost = 0;
    hnsw_scratch_new(&s);
    for (i = 0; i < n; i += 3)
        CHECK_OK(hnsw_delete(g, LB(1000 + i)));
    CHECK_RC(hnsw_delete(g, LB(1000)), MESS_ENOTFOUND);
    CHECK_RC(hnsw_find(g, LB(1000), NULL), MESS_ENOTFOUND);
    CHECK_OK(hnsw_find(g, LB(1001), NULL));
    CHECK(hnsw_deleted(g) == (n + 2) / 3);
    for (i = 0; i < nq; i++) {
        CHECK_OK(hnsw_search(g, s, qcodes + i * WORDS, 40, 64, hits, &got));
        for (j = 0; j < got; j++)
            bad += hits[j].node % 3 == 0 || hnsw_is_deleted(g, hits[j].node);
    }
    CHECK(bad == 0);
    CHECK_OK(hnsw_compact(g, &c, map));
    if (!c)
        return;
    CHECK(hnsw_count(c) == hnsw_live(g) && hnsw_deleted(c) == 0);
    for (i = 0; i < n; i++) {
        if (i % 3 == 0) {
            CHECK(map[i] == UINT32_MAX);
            continue;
        }
        CHECK(map[i] < hnsw_count(c) && hnsw_label_eq(hnsw_label(c, map[i]), LB(1000 + i)));
        CHECK_OK(hnsw_search(c, s, codes + i * WORDS, 10, 32, hits, &got));
        for (j = 0; j < got; j++)
            if (hnsw_label_eq(hits[j].label, LB(1000 + i)))
                break;
        lost += j == got;
    }
    printf("# live nodes not found by their own code after compaction: %zu of %zu\n",
           lost, hnsw_count(c));
    CHECK(lost * 1000 <= hnsw_count(c)); /* at most 0.1% (exact ties at distance 0) */
    /* a deleted label can be inserted again */
    CHECK_OK(hnsw_add(g, codes, LB(1000), NULL));
    CHECK_OK(hnsw_find(g, LB(1000), NULL));
    CHECK_RC(hnsw_add(g, codes, LB(1000), NULL), MESS_EINVAL);
    hnsw_free(c);
    hnsw_scratch_free(s);
    free(map);
}

static void test_serialize_roundtrip(void)
{
    struct mess_wr w;
    struct mess_rd r;
    struct hnsw *b = NULL;
    struct hnsw_scratch *s;
    struct hnsw_hit h1[30], h2[30];
    struct hnsw_params wrong = *hnsw_get_params(g);
    size_t i, g1, g2;
    mess_wr_init(&w);
    CHECK_OK(hnsw_serialize(g, &w));
    mess_rd_init(&r, w.p, w.len);
    CHECK_OK(hnsw_deserialize(&r, hnsw_get_params(g), &b));
    CHECK(mess_rd_left(&r) == 0);
    if (!b)
        return;
    hnsw_scratch_new(&s);
    CHECK(hnsw_count(b) == hnsw_count(g) && hnsw_deleted(b) == hnsw_deleted(g));
    for (i = 0; i < nq; i++) {
        hnsw_search(g, s, qcodes + i * WORDS, 30, 50, h1, &g1);
        hnsw_search(b, s, qcodes + i * WORDS, 30, 50, h2, &g2);
        CHECK(g1 == g2 && memcmp(h1, h2, g1 * sizeof *h1) == 0);
    }
    wrong.m = 8;
    mess_rd_init(&r, w.p, w.len);
    hnsw_free(b);
    b = NULL;
    CHECK_RC(hnsw_deserialize(&r, &wrong, &b), MESS_EPARAM);
    hnsw_scratch_free(s);
    mess_wr_free(&w);
}

/* A reserved bulk insert builds the same graph and ends without spare
 * capacity; a load is exact too; single adds grow geometrically. */
static void test_reserve(void)
{
    struct hnsw_params p = {BITS, 8, 40, 7};
    struct hnsw *a = NULL, *b = NULL, *c = NULL;
    struct mess_wr wa, wb;
    struct mess_rd r;
    size_t i, count = 3000, full, before;
    CHECK_OK(hnsw_new(&p, &a));
    CHECK_OK(hnsw_new(&p, &b));
    CHECK_OK(hnsw_reserve(b, count));
    before = hnsw_bytes(b);
    for (i = 0; i < count; i++) {
        CHECK_OK(hnsw_add(a, codes + i * WORDS, LB(1000 + i), NULL));
        CHECK_OK(hnsw_add(b, codes + i * WORDS, LB(1000 + i), NULL));
    }
    mess_wr_init(&wa);
    mess_wr_init(&wb);
    CHECK_OK(hnsw_serialize(a, &wa));
    CHECK_OK(hnsw_serialize(b, &wb));
    CHECK(wa.len == wb.len && memcmp(wa.p, wb.p, wa.len) == 0);
    /* the fixed per-node arrays did not move after the reservation: only
     * upper levels and the label map were added */
    full = hnsw_bytes(b);
    CHECK(full > before && hnsw_bytes(a) > full);
    mess_rd_init(&r, wb.p, wb.len);
    CHECK_OK(hnsw_deserialize(&r, &p, &c));
    CHECK(c && hnsw_bytes(c) <= full);
    CHECK_OK(hnsw_reserve(b, 10)); /* never shrinks */
    CHECK(hnsw_bytes(b) == full);
    CHECK_RC(hnsw_reserve(b, (size_t)HNSW_MAX_NODES + 1), MESS_ELIMIT);
    CHECK_RC(hnsw_reserve(NULL, 10), MESS_EINVAL);
    mess_wr_free(&wa);
    mess_wr_free(&wb);
    hnsw_free(a);
    hnsw_free(b);
    hnsw_free(c);
}

/* Serialized index over the first `count` codes of `bits` bits (the codes
 * array read as words/2 consecutive 128-bit codes per node). */
static int build_bytes(uint32_t bits, size_t count, struct mess_wr *w)
{
    struct hnsw_params p = {bits, 8, 40, 3};
    struct hnsw *h = NULL;
    size_t i, words = bits / 64;
    int rc = hnsw_new(&p, &h);
    for (i = 0; rc == MESS_OK && i < count; i++)
        rc = hnsw_add(h, codes + i * words, LB(i), NULL);
    mess_wr_init(w);
    if (rc == MESS_OK)
        rc = hnsw_serialize(h, w);
    hnsw_free(h);
    return rc;
}

/* The popcount is chosen at run time: the instruction and the baseline code
 * build the same graphs and return the same hits and distances. */
static void test_popcount_paths(void)
{
    static const uint32_t bits[2] = {128, 256};
    struct mess_wr soft, hw;
    struct hnsw_hit a[40], b[40];
    uint32_t d1[64], d2[64], b1[32], b2[32];
    struct hnsw_scratch *s = NULL;
    size_t i, k, ga, gb;
    int have = hnsw_popcount_hw();
    CHECK_RC(hnsw_popcount_force(3), MESS_EINVAL);
    CHECK_RC(hnsw_popcount_force(-2), MESS_EINVAL);
#if defined(__x86_64__) && defined(__GNUC__)
    /* this CPU's answer, not the build machine's flags: 2 adds AVX2 */
    CHECK(have == (!__builtin_cpu_supports("popcnt") ? 0
                   : __builtin_cpu_supports("avx2") ? 2 : 1));
    if (have < 2)
        CHECK_RC(hnsw_popcount_force(2), MESS_EINVAL);
#endif
    printf("  popcount: %s\n", have ? "POPCNT instruction" : "baseline code");
    if (!have) {
        CHECK_RC(hnsw_popcount_force(1), MESS_EINVAL);
        return;
    }
    CHECK_OK(hnsw_scratch_new(&s));
    for (k = 0; k < 2; k++) {
        CHECK_OK(hnsw_popcount_force(0));
        CHECK(hnsw_popcount_hw() == 0);
        CHECK_OK(build_bytes(bits[k], 1500, &soft));
        CHECK_OK(hnsw_popcount_force(1));
        CHECK(hnsw_popcount_hw() == 1);
        CHECK_OK(build_bytes(bits[k], 1500, &hw));
        CHECK(soft.len == hw.len && soft.len > 0 && memcmp(soft.p, hw.p, soft.len) == 0);
        mess_wr_free(&hw);
        if (have >= 2) { /* the inserts' lists scored at once, in AVX2 */
            CHECK_OK(hnsw_popcount_force(2));
            CHECK_OK(build_bytes(bits[k], 1500, &hw));
            CHECK(soft.len == hw.len && memcmp(soft.p, hw.p, soft.len) == 0);
            mess_wr_free(&hw);
        }
        mess_wr_free(&soft);
    }
    for (i = 0; i < nq; i++) {
        const uint64_t *q = qcodes + i * WORDS;
        CHECK_OK(hnsw_popcount_force(0));
        CHECK_OK(hnsw_search(g, s, q, 40, 60, a, &ga));
        hnsw_hamming_many(q, codes, 64, WORDS, d1);
        /* blocks: 32 "shards" of 2 words, query codes against codes */
        hnsw_hamming_blocks(qcodes, codes + i * WORDS, 32, WORDS, b1);
        CHECK_OK(hnsw_popcount_force(1));
        CHECK_OK(hnsw_search(g, s, q, 40, 60, b, &gb));
        hnsw_hamming_many(q, codes, 64, WORDS, d2);
        hnsw_hamming_blocks(qcodes, codes + i * WORDS, 32, WORDS, b2);
        CHECK(ga == 40 && ga == gb && memcmp(a, b, ga * sizeof *a) == 0);
        CHECK(memcmp(d1, d2, sizeof d1) == 0 && memcmp(b1, b2, sizeof b1) == 0);
        for (k = 0; k < 64; k++)
            CHECK(d1[k] == hnsw_hamming(q, codes + k * WORDS, WORDS));
        for (k = 0; k < 32; k++)
            CHECK(b1[k] == hnsw_hamming(qcodes + k * WORDS, codes + (i + k) * WORDS, WORDS));
    }
    CHECK_OK(hnsw_popcount_force(-1));
    CHECK(hnsw_popcount_hw() == have);
    hnsw_scratch_free(s);
}

/* A neighbour list scored at once (hnsw_score.c) on every popcount level
 * the CPU has: each distance is hnsw_hamming's and each bit of the mask is
 * distance < bound, for lists of 0 to 64 random ids (repeats allowed) and
 * bounds from 0 to past the largest distance. */
static void test_score_list(void)
{
    enum { NODES = 300 };
    uint64_t c[2 * NODES], q[2], mask;
    uint32_t ids[HNSW_SCORE_MAX], dist[HNSW_SCORE_MAX];
    uint64_t st = 0x5eed;
    int have = hnsw_popcount_hw(), level, t;
    size_t i, bad = 0, runs = 0;
    for (i = 0; i < 2 * NODES; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        /* a few codes all ones or all zeros: distances 0 and 128 */
        c[i] = i < 4 ? 0 : i < 8 ? ~(uint64_t)0 : st ^ (st >> 29);
    }
    for (level = 0; level <= have; level++) {
        hnsw_score_list_fn f;
        CHECK_OK(hnsw_popcount_force(level));
        f = hnsw_score_list_pick();
        for (t = 0; t < 400; t++) {
            uint32_t len = (uint32_t)(t % (HNSW_SCORE_MAX + 1)), bound, k;
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            q[0] = t % 7 == 0 ? 0 : st;
            q[1] = t % 11 == 0 ? ~(uint64_t)0 : st >> 7 ^ st << 13;
            bound = (uint32_t)(t * 7 % 131);
            for (k = 0; k < len; k++) {
                st = st * 6364136223846793005ull + 1442695040888963407ull;
                ids[k] = (uint32_t)((st >> 33) % NODES);
            }
            mask = f(q, c, ids, len, bound, dist);
            for (k = 0; k < len; k++) {
                uint32_t d = hnsw_hamming(q, c + 2 * (size_t)ids[k], 2);
                bad += dist[k] != d || ((mask >> k) & 1) != (d < bound);
            }
            bad += len < 64 && (mask >> len) != 0;
            runs++;
        }
    }
    CHECK_OK(hnsw_popcount_force(-1));
    printf("  score lists: %zu on %d popcount level(s)\n", runs, have + 1);
    CHECK(bad == 0);
}

static void test_hostile_buffers(void)
{
    struct hnsw *small = build(150, 4, 16), *b;
    struct mess_wr w;
    struct mess_rd r;
    struct mess_rng rng;
    uint8_t seed[32] = {9};
    size_t cut, i, accepted = 0;
    CHECK(small != NULL);
    if (!small)
        return;
    hnsw_delete(small, LB(1003));
    mess_wr_init(&w);
    CHECK_OK(hnsw_serialize(small, &w));
    for (cut = 0; cut < w.len; cut++) {
        b = NULL;
        mess_rd_init(&r, w.p, cut);
        CHECK(hnsw_deserialize(&r, NULL, &b) != MESS_OK && b == NULL);
    }
    /* random byte flips: never a crash; whatever loads must be searchable */
    mess_rng_init(&rng, seed, 2);
    for (i = 0; i < 3000; i++) {
        size_t pos = mess_rng_below(&rng, (uint32_t)w.len);
        uint8_t old = w.p[pos];
        w.p[pos] ^= (uint8_t)(1u << mess_rng_below(&rng, 8));
        b = NULL;
        mess_rd_init(&r, w.p, w.len);
        if (hnsw_deserialize(&r, NULL, &b) == MESS_OK) {
            struct hnsw_scratch *s;
            struct hnsw_hit hits[10];
            size_t got;
            accepted++;
            hnsw_scratch_new(&s);
            CHECK_OK(hnsw_search(b, s, qcodes, 10, 20, hits, &got));
            hnsw_scratch_free(s);
            hnsw_free(b);
        }
        w.p[pos] = old;
    }
    printf("# %zu of 3000 one-bit corruptions still parse (codes and labels carry no checks)\n",
           accepted);
    /* hostile node count */
    {
        uint8_t buf[64];
        memcpy(buf, w.p, 64);
        memset(buf + 36, 0xff, 8); /* n */
        mess_rd_init(&r, buf, 64);
        CHECK_RC(hnsw_deserialize(&r, NULL, &b), MESS_EFORMAT);
    }
    mess_wr_free(&w);
    hnsw_free(small);
}

struct thread_arg {
    size_t first;
    int ok;
};

/* g attached from its graph file (test_concurrent_search), or g itself */
static struct hnsw *g_mapped;
static void *graph_map(const struct hnsw *h, size_t *len, uint8_t digest[32]);

static void *search_thread(void *arg)
{
    struct thread_arg *t = (struct thread_arg *)arg;
    struct hnsw_scratch *s, *s2;
    struct hnsw_hit a[20], b[20];
    size_t i, ga, gb, rep;
    hnsw_scratch_new(&s);
    hnsw_scratch_new(&s2);
    t->ok = 1;
    for (rep = 0; rep < 3; rep++)
        for (i = t->first; i < nq; i += 2) {
            hnsw_search(g, s, qcodes + i * WORDS, 20, 40, a, &ga);
            hnsw_search(g_mapped, s2, qcodes + i * WORDS, 20, 40, b, &gb);
            if (ga != gb || memcmp(a, b, ga * sizeof *a) != 0)
                t->ok = 0;
        }
    hnsw_scratch_free(s);
    hnsw_scratch_free(s2);
    return NULL;
}

/* Threads searching the heap graph and its attached graph file at once
 * (each thread its own scratches) get identical hits. */
static void test_concurrent_search(void)
{
    pthread_t th[4];
    struct thread_arg args[4];
    uint8_t d[32];
    size_t len = 0;
    void *map = graph_map(g, &len, d);
    int i;
    g_mapped = NULL;
    CHECK(map != NULL);
    if (!map || hnsw_attach(map, len, hnsw_get_params(g), &g_mapped) != MESS_OK) {
        CHECK(0);
        g_mapped = g;
    }
    for (i = 0; i < 4; i++) {
        args[i].first = (size_t)i % 2;
        pthread_create(&th[i], NULL, search_thread, &args[i]);
    }
    for (i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(args[i].ok);
    }
    if (g_mapped != g)
        hnsw_free(g_mapped);
    g_mapped = NULL;
    if (map)
        munmap(map, len);
}

/* The read access the leakage evaluation uses sees a well-formed graph:
 * link counts within M / 2M, no self links or duplicates, neighbours exist
 * on the level, the entry point has the top level, codes and labels match
 * what was inserted. */
static void test_graph_access(void)
{
    size_t i, top = 0, links0 = 0, bad = 0;
    uint32_t ep = hnsw_entry_point(g), m = hnsw_get_params(g)->m;
    CHECK(ep < hnsw_count(g));
    for (i = 0; i < hnsw_count(g); i++) {
        uint32_t lv, node = (uint32_t)i;
        const uint32_t *ids;
        size_t k, j, cnt;
        if (hnsw_level(g, node) > top)
            top = hnsw_level(g, node);
        bad += memcmp(hnsw_code(g, node), codes + i * WORDS, WORDS * 8) != 0;
        bad += !hnsw_label_eq(hnsw_label(g, node), LB(1000 + i));
        for (lv = 0; lv <= hnsw_level(g, node); lv++) {
            if (hnsw_neighbors(g, node, lv, &ids, &cnt) != MESS_OK) {
                bad++;
                continue;
            }
            bad += cnt > (lv == 0 ? 2 * m : m) || (lv == 0 && cnt == 0);
            if (lv == 0)
                links0 += cnt;
            for (k = 0; k < cnt; k++) {
                bad += ids[k] == node || ids[k] >= hnsw_count(g) ||
                       hnsw_level(g, ids[k]) < lv;
                for (j = 0; j < k; j++)
                    bad += ids[j] == ids[k];
            }
        }
        CHECK_RC(hnsw_neighbors(g, node, hnsw_level(g, node) + 1, &ids, &cnt), MESS_EINVAL);
    }
    CHECK(bad == 0);
    CHECK(hnsw_level(g, ep) == top);
    CHECK(hnsw_code(g, (uint32_t)hnsw_count(g)) == NULL);
    printf("# %zu nodes, top level %zu, %.1f layer-0 links per node, %.1f bytes per node\n",
           hnsw_count(g), top, (double)links0 / (double)hnsw_count(g),
           (double)hnsw_bytes(g) / (double)hnsw_count(g));
    /* memory per node: at least the code and the layer-0 link block */
    CHECK(hnsw_bytes(g) >= hnsw_count(g) * (WORDS * 8 + 4 * (1 + 2 * m)));
}

/* Shards built concurrently (one thread per index, as the server does)
 * are byte-identical to shards built one after the other. */
#define SHARDS 4
#define SHARD_N 600
static struct hnsw *shard[SHARDS];

static int build_shard(void *ctx, size_t j, unsigned worker)
{
    struct hnsw_params p = {BITS, 8, 40, 0};
    size_t i;
    int rc;
    (void)ctx;
    (void)worker;
    p.seed = 100 + j;
    rc = hnsw_new(&p, &shard[j]);
    for (i = 0; rc == MESS_OK && i < SHARD_N; i++)
        rc = hnsw_add(shard[j], codes + ((i * SHARDS + j) % n) * WORDS, LB(i), NULL);
    return rc;
}

static void test_parallel_shards(void)
{
    struct mess_wr serial[SHARDS], par;
    size_t j;
    for (j = 0; j < SHARDS; j++) {
        CHECK_OK(build_shard(NULL, j, 0));
        mess_wr_init(&serial[j]);
        CHECK_OK(hnsw_serialize(shard[j], &serial[j]));
        hnsw_free(shard[j]);
        shard[j] = NULL;
    }
    CHECK_OK(parallel_for(SHARDS, 2, build_shard, NULL));
    for (j = 0; j < SHARDS; j++) {
        mess_wr_init(&par);
        CHECK_OK(hnsw_serialize(shard[j], &par));
        CHECK(par.len == serial[j].len && memcmp(par.p, serial[j].p, par.len) == 0);
        mess_wr_free(&par);
        mess_wr_free(&serial[j]);
        hnsw_free(shard[j]);
    }
}

/* ---- the graph file (hnsw_write_graph / hnsw_attach / hnsw_check) ------ */

/* Writes h's graph file to a temporary file; *len its size, digest its
 * BLAKE2b-256.  Returns the open descriptor (unlinked), or -1. */
static int graph_tmpfile(const struct hnsw *h, size_t *len, uint8_t digest[32])
{
    char path[] = "/tmp/test_hnsw_graph_XXXXXX";
    int fd = mkstemp(path);
    off_t end;
    if (fd < 0)
        return -1;
    unlink(path);
    if (hnsw_write_graph(h, fd, digest) != MESS_OK || (end = lseek(fd, 0, SEEK_END)) < 0) {
        close(fd);
        return -1;
    }
    *len = (size_t)end;
    return fd;
}

/* The graph file of h mapped MAP_PRIVATE, PROT_READ | PROT_WRITE (as the
 * server maps it), or NULL. */
static void *graph_map(const struct hnsw *h, size_t *len, uint8_t digest[32])
{
    int fd = graph_tmpfile(h, len, digest);
    void *p;
    if (fd < 0)
        return NULL;
    p = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    close(fd);
    return p == MAP_FAILED ? NULL : p;
}

/* The graph file of h in a 4096-aligned heap buffer (corruption tests). */
static uint8_t *graph_buf(const struct hnsw *h, size_t *len)
{
    uint8_t d[32];
    int fd = graph_tmpfile(h, len, d);
    void *p = NULL;
    if (fd < 0)
        return NULL;
    if (posix_memalign(&p, 4096, *len) != 0 || pread(fd, p, *len, 0) != (ssize_t)*len) {
        free(p);
        p = NULL;
    }
    close(fd);
    return (uint8_t *)p;
}

/* Same hits, in the same order, for every query. */
static int same_search(const struct hnsw *a, const struct hnsw *b, size_t P, size_t ef)
{
    struct hnsw_scratch *s;
    struct hnsw_hit h1[40], h2[40];
    size_t q, g1, g2;
    int same = 1;
    if (hnsw_scratch_new(&s) != MESS_OK)
        return 0;
    for (q = 0; q < nq; q++) {
        if (hnsw_search(a, s, qcodes + q * WORDS, P, ef, h1, &g1) != MESS_OK ||
            hnsw_search(b, s, qcodes + q * WORDS, P, ef, h2, &g2) != MESS_OK ||
            g1 != g2 || memcmp(h1, h2, g1 * sizeof *h1) != 0)
            same = 0;
    }
    hnsw_scratch_free(s);
    return same;
}

static int same_serialized(const struct hnsw *a, const struct hnsw *b)
{
    struct mess_wr wa, wb;
    int same;
    mess_wr_init(&wa);
    mess_wr_init(&wb);
    same = hnsw_serialize(a, &wa) == MESS_OK && hnsw_serialize(b, &wb) == MESS_OK &&
           wa.len == wb.len && memcmp(wa.p, wb.p, wa.len) == 0;
    mess_wr_free(&wa);
    mess_wr_free(&wb);
    return same;
}

/* Written, mapped, attached: the same searches, serialized bytes and graph
 * file; the digest is the file's; hnsw_check accepts it. */
static void test_graph_file_roundtrip(void)
{
    struct hnsw *a = build(2000, 16, 64), *b = NULL;
    uint8_t d1[32], d2[32], d3[32];
    size_t len = 0, len2 = 0, i;
    void *map;
    char msg[200];
    CHECK(a != NULL);
    if (!a)
        return;
    for (i = 0; i < 2000; i += 7)
        CHECK_OK(hnsw_delete(a, LB(1000 + i)));
    map = graph_map(a, &len, d1);
    CHECK(map != NULL && len % 4096 == 0);
    if (!map) {
        hnsw_free(a);
        return;
    }
    CHECK_OK(hnsw_graph_digest(map, len, d2));
    CHECK(memcmp(d1, d2, 32) == 0);
    CHECK_OK(hnsw_attach_msg(map, len, hnsw_get_params(a), &b, msg, sizeof msg));
    CHECK(b != NULL);
    if (b) {
        CHECK_OK(hnsw_check_msg(b, msg, sizeof msg));
        CHECK_OK(hnsw_check(a));
        CHECK(hnsw_count(b) == 2000 && hnsw_deleted(b) == hnsw_deleted(a));
        CHECK(hnsw_entry_point(b) == hnsw_entry_point(a));
        CHECK(same_search(a, b, 30, 50));
        CHECK(same_serialized(a, b));
        CHECK(hnsw_heap_bytes(b) < 4096 && hnsw_mapped_bytes(b) == len);
        CHECK(hnsw_find(b, LB(1001), NULL) == MESS_OK);
        CHECK(hnsw_find(b, LB(1007), NULL) == MESS_ENOTFOUND);
        /* an attached graph writes the same file */
        {
            int fd = graph_tmpfile(b, &len2, d3);
            CHECK(fd >= 0 && len2 == len && memcmp(d1, d3, 32) == 0);
            if (fd >= 0)
                close(fd);
        }
        printf("# graph file: %zu nodes, %zu bytes, %.1f bytes per node\n", hnsw_count(b), len,
               (double)len / 2000.0);
    }
    hnsw_free(b);
    /* parameters, alignment, version */
    {
        struct hnsw_params wrong = *hnsw_get_params(a);
        uint8_t *c = (uint8_t *)map;
        wrong.seed++;
        b = NULL;
        CHECK_RC(hnsw_attach(map, len, &wrong, &b), MESS_EPARAM);
        CHECK_RC(hnsw_attach(c + 8, len - 8, NULL, &b), MESS_EINVAL);
        CHECK_RC(hnsw_attach(NULL, len, NULL, &b), MESS_EINVAL);
        CHECK_RC(hnsw_attach(map, len, NULL, NULL), MESS_EINVAL);
        c[8] = 2; /* version 2, checksum recomputed */
        crypto_generichash(c + 232, 32, c, 232, NULL, 0);
        CHECK_RC(hnsw_attach_msg(map, len, NULL, &b, msg, sizeof msg), MESS_EVERSION);
        CHECK(strstr(msg, "version") != NULL);
        CHECK(b == NULL);
    }
    munmap(map, len);
    hnsw_free(a);
}

/* An attached graph extended, deleted from, reserved and compacted like a
 * heap graph with the same history gives the same hits, the same
 * hnsw_serialize bytes and the same graph file (test of item D15). */
static void test_graph_attach_then_insert(void)
{
    struct hnsw_params p = {BITS, 16, 64, 7};
    struct hnsw *a = NULL, *b = NULL, *ca = NULL, *cb = NULL, *c2 = NULL;
    size_t i, len = 0, len2 = 0, first = 1500, more = 1500;
    uint8_t da[32], db[32];
    uint32_t na, nb;
    void *map, *map2 = NULL;
    char msg[200];
    CHECK_OK(hnsw_new(&p, &a));
    for (i = 0; i < first; i++)
        CHECK_OK(hnsw_add(a, codes + i * WORDS, LB(i), NULL));
    for (i = 0; i < first; i += 11)
        CHECK_OK(hnsw_delete(a, LB(i)));
    map = graph_map(a, &len, da);
    CHECK(map != NULL);
    if (!map) {
        hnsw_free(a);
        return;
    }
    CHECK_OK(hnsw_attach(map, len, &p, &b));
    if (!b) {
        hnsw_free(a);
        munmap(map, len);
        return;
    }
    CHECK_OK(hnsw_reserve(b, first + 100)); /* the tail's arrays only */
    for (i = first; i < first + more; i++) {
        CHECK_OK(hnsw_add(a, codes + i * WORDS, LB(i), &na));
        CHECK_OK(hnsw_add(b, codes + i * WORDS, LB(i), &nb));
        CHECK(na == nb && na == i);
        if (i % 5 == 0) { /* deletes of attached nodes and of tail nodes */
            int ra = hnsw_delete(a, LB(i - 700)), rb = hnsw_delete(b, LB(i - 700));
            CHECK(ra == rb && (ra == MESS_OK) == (i - 700 >= first || (i - 700) % 11 != 0));
        }
    }
    CHECK_RC(hnsw_add(b, codes, LB(first + 3), NULL), MESS_EINVAL); /* a live label */
    CHECK_RC(hnsw_delete(b, LB(0)), MESS_ENOTFOUND);                /* deleted in the file */
    CHECK(hnsw_find(b, LB(1), &nb) == MESS_OK && nb == 1);
    CHECK(hnsw_find(b, LB(first + 1), &nb) == MESS_OK && nb == first + 1);
    CHECK(hnsw_count(a) == hnsw_count(b) && hnsw_deleted(a) == hnsw_deleted(b));
    CHECK(same_search(a, b, 30, 50));
    CHECK(same_search(a, b, 10, 10));
    CHECK(same_serialized(a, b));
    CHECK_OK(hnsw_check_msg(b, msg, sizeof msg));
    CHECK(hnsw_heap_bytes(b) < hnsw_heap_bytes(a));
    /* the next generation's file: identical bytes, attaches and checks */
    {
        int fa = graph_tmpfile(a, &len2, da), fb = graph_tmpfile(b, &len2, db);
        CHECK(fa >= 0 && fb >= 0 && memcmp(da, db, 32) == 0);
        if (fb >= 0) {
            map2 = mmap(NULL, len2, PROT_READ | PROT_WRITE, MAP_PRIVATE, fb, 0);
            CHECK(map2 != MAP_FAILED);
            if (map2 == MAP_FAILED)
                map2 = NULL;
        }
        if (fa >= 0)
            close(fa);
        if (fb >= 0)
            close(fb);
    }
    if (map2) {
        CHECK_OK(hnsw_attach(map2, len2, &p, &c2));
        CHECK(c2 && hnsw_check(c2) == MESS_OK && same_search(a, c2, 30, 50) &&
              same_serialized(a, c2));
        hnsw_free(c2);
        munmap(map2, len2);
    }
    CHECK_OK(hnsw_compact(a, &ca, NULL));
    CHECK_OK(hnsw_compact(b, &cb, NULL));
    CHECK(ca && cb && same_serialized(ca, cb));
    hnsw_free(ca);
    hnsw_free(cb);
    hnsw_unreserve(b);
    hnsw_free(b);
    munmap(map, len);
    hnsw_free(a);
}

/* Every operation on an attached graph of a corrupted file: must not fault
 * (ASan), hang or fail other than by a status. */
static void exercise(struct hnsw *b)
{
    struct hnsw_scratch *s;
    struct hnsw_hit hits[20];
    struct hnsw *c = NULL;
    size_t got, q, cnt;
    uint32_t node, lv;
    const uint32_t *ids;
    int fd;
    uint8_t d[32];
    char msg[200];
    if (hnsw_scratch_new(&s) != MESS_OK)
        return;
    for (q = 0; q < 3; q++)
        CHECK_OK(hnsw_search(b, s, qcodes + q * WORDS, 20, 30, hits, &got));
    {
        /* the interleaved searches on each path (the attached graph, not
         * yet changed, takes the fast loops) make hnsw_search's decisions
         * over the hostile bytes too */
        struct hnsw_scratch *sc[2] = {NULL, NULL};
        struct hnsw_job jobs[3];
        struct hnsw_many_opts mo;
        struct hnsw_hit mh[3][20];
        int path;
        if (hnsw_scratch_new(&sc[0]) == MESS_OK && hnsw_scratch_new(&sc[1]) == MESS_OK)
            for (path = 0; path <= HNSW_MANY_FAST; path++) {
                mo.fast = path;
                mo.clear_words = HNSW_MANY_CLEAR_WORDS;
                mo.layout = 0;
                memset(jobs, 0, sizeof jobs);
                for (q = 0; q < 3; q++) {
                    jobs[q].h = b;
                    jobs[q].query = qcodes + q * WORDS;
                    jobs[q].P = 20;
                    jobs[q].ef = 30;
                    jobs[q].out = mh[q];
                }
                CHECK_OK(hnsw_search_many(jobs, 3, sc, 2, &mo));
                for (q = 0; q < 3; q++) {
                    size_t h;
                    CHECK_OK(hnsw_search(b, s, qcodes + q * WORDS, 20, 30, hits, &got));
                    CHECK(jobs[q].n_out == got);
                    for (h = 0; h < got && h < jobs[q].n_out; h++)
                        CHECK(jobs[q].out[h].node == hits[h].node &&
                              jobs[q].out[h].dist == hits[h].dist);
                }
            }
        hnsw_scratch_free(sc[0]);
        hnsw_scratch_free(sc[1]);
    }
    hnsw_check_msg(b, msg, sizeof msg);
    hnsw_find(b, LB(3), &node);
    hnsw_delete(b, LB(5));
    hnsw_delete(b, hnsw_label(b, 7));
    for (node = 0; node < 20 && node < hnsw_count(b); node++)
        for (lv = 0; lv <= hnsw_level(b, node) && lv <= HNSW_MAX_LEVEL + 1; lv++)
            hnsw_neighbors(b, node, lv, &ids, &cnt);
    for (q = 0; q < 4; q++)
        hnsw_add(b, qcodes + q * WORDS, LB(90000 + q), NULL);
    CHECK_OK(hnsw_search(b, s, qcodes, 20, 30, hits, &got));
    fd = open("/dev/null", O_WRONLY);
    if (fd >= 0) {
        hnsw_write_graph(b, fd, d);
        close(fd);
    }
    {
        struct mess_wr w;
        mess_wr_init(&w);
        hnsw_serialize(b, &w);
        mess_wr_free(&w);
    }
    if (hnsw_compact(b, &c, NULL) == MESS_OK)
        hnsw_free(c);
    hnsw_scratch_free(s);
}

/* Truncation at every section boundary and page, flipped bytes in every
 * section, hostile values in every field: attach or check refuses (the
 * digest changes whatever is flipped), and no operation faults. */
static void test_graph_hostile(void)
{
    struct hnsw *a = build(300, 4, 16), *b;
    uint8_t *buf, *copy, d0[32], d[32];
    size_t len = 0, cut, i, refused = 0, flips = 0;
    uint64_t off[8], slen[8];
    struct mess_rng rng;
    uint8_t seed[32] = {15};
    int s;
    CHECK(a != NULL);
    if (!a)
        return;
    for (i = 0; i < 300; i += 9)
        hnsw_delete(a, LB(1000 + i));
    buf = graph_buf(a, &len);
    CHECK(buf != NULL);
    if (!buf) {
        hnsw_free(a);
        return;
    }
    copy = NULL;
    if (posix_memalign((void **)&copy, 4096, len) != 0) {
        free(buf);
        hnsw_free(a);
        return;
    }
    hnsw_graph_digest(buf, len, d0);
    for (s = 0; s < 8; s++) {
        off[s] = mess_load_u64(buf + 104 + 16 * s);
        slen[s] = mess_load_u64(buf + 104 + 16 * s + 8);
    }
    /* truncations: at each section's start and end, +-1, and every page */
    for (s = 0; s < 8; s++) {
        size_t cuts[6] = {off[s], off[s] + 1, off[s] - 1, off[s] + slen[s],
                          off[s] + slen[s] - 1, off[s] + slen[s] / 2};
        int k;
        for (k = 0; k < 6; k++)
            if (cuts[k] < len) {
                b = NULL;
                CHECK_RC(hnsw_attach(buf, cuts[k], NULL, &b), MESS_EFORMAT);
                CHECK(b == NULL);
            }
    }
    for (cut = 0; cut < len; cut += 4096) {
        b = NULL;
        CHECK(hnsw_attach(buf, cut, NULL, &b) != MESS_OK && b == NULL);
    }
    /* every header byte: the checksum (or the zero tail) refuses it */
    memcpy(copy, buf, len);
    for (i = 0; i < 4096; i++) {
        copy[i] ^= 0x10;
        b = NULL;
        CHECK(hnsw_attach(copy, len, NULL, &b) != MESS_OK && b == NULL);
        copy[i] ^= 0x10;
    }
    /* random bit flips in every section: attach (the header is intact),
     * the digest differs, every operation stays in bounds; hnsw_check
     * refuses the structural ones it can see */
    mess_rng_init(&rng, seed, 3);
    for (s = 0; s < 8; s++) {
        size_t k, seen = 0;
        if (slen[s] == 0)
            continue;
        for (k = 0; k < 60; k++) {
            size_t pos = (size_t)off[s] + mess_rng_below(&rng, (uint32_t)slen[s]);
            char msg[200];
            memcpy(copy, buf, len);
            copy[pos] ^= (uint8_t)(1u << mess_rng_below(&rng, 8));
            if (k % 3 == 0) /* a large value, as an attacker would choose */
                copy[pos] = 0xff;
            if (copy[pos] == buf[pos])
                continue;
            flips++;
            hnsw_graph_digest(copy, len, d);
            CHECK(memcmp(d, d0, 32) != 0);
            b = NULL;
            if (hnsw_attach(copy, len, NULL, &b) != MESS_OK) {
                CHECK(s == 2 && b == NULL); /* the entry point's level */
                refused++;
                seen++;
                continue;
            }
            if (hnsw_check_msg(b, msg, sizeof msg) != MESS_OK) {
                refused++;
                seen++;
                CHECK(msg[0] != 0);
            }
            exercise(b);
            hnsw_free(b);
        }
        printf("# section %d: %zu of the flips refused by attach or hnsw_check\n", s, seen);
    }
    printf("# %zu flips, %zu refused by attach or hnsw_check, all by the digest\n", flips, refused);
    /* whole sections of hostile bytes: all ones, then random */
    for (s = 0; s < 8; s++) {
        int pass;
        for (pass = 0; pass < 2; pass++) {
            memcpy(copy, buf, len);
            if (pass == 0)
                memset(copy + off[s], 0xff, (size_t)slen[s]);
            else
                for (i = 0; i < slen[s]; i++)
                    copy[off[s] + i] = (uint8_t)mess_rng_below(&rng, 256);
            b = NULL;
            if (hnsw_attach(copy, len, NULL, &b) != MESS_OK) {
                CHECK(s == 2 && b == NULL); /* the entry point's level */
                continue;
            }
            /* codes are not structure: all-ones codes still check */
            if (s != 0)
                CHECK(hnsw_check(b) == MESS_EFORMAT);
            exercise(b);
            hnsw_free(b);
        }
    }
    /* targeted fields */
    {
        struct targeted {
            int sec;
            size_t at;
            uint32_t v;
        } t[] = {
            {4, 0, 9},                /* node 0's layer-0 count above 2M = 8 */
            {4, 4, 300},              /* a link past the last node */
            {4, 4, 0},                /* node 0 links to itself */
            {2, 0, 40},               /* level above HNSW_MAX_LEVEL */
            {3, 2, 2},                /* deleted flag 2 */
            {3, 1, 1},                /* a node deleted, not in the count */
            {5, 4, 0x7fffffff},       /* upper offset past the blob */
            {1, 16, 0x5a5a5a5a},      /* node 1's label */
        };
        size_t k;
        for (k = 0; k < sizeof t / sizeof t[0]; k++) {
            uint8_t *p;
            memcpy(copy, buf, len);
            p = copy + off[t[k].sec] + t[k].at;
            if (t[k].sec == 2 || t[k].sec == 3)
                *p = (uint8_t)t[k].v;
            else
                mess_store_u32(p, t[k].v);
            b = NULL;
            CHECK_OK(hnsw_attach(copy, len, NULL, &b));
            if (!b)
                continue;
            if (hnsw_check(b) != MESS_EFORMAT)
                printf("  targeted %zu not refused\n", k);
            CHECK(hnsw_check(b) == MESS_EFORMAT);
            exercise(b);
            hnsw_free(b);
        }
    }
    /* a header whose deleted count is n (checksum recomputed): deletes
     * keep the count <= n, so hnsw_live never wraps */
    memcpy(copy, buf, len);
    mess_store_u64(copy + 72, 300);
    crypto_generichash(copy + 232, 32, copy, 232, NULL, 0);
    b = NULL;
    CHECK_OK(hnsw_attach(copy, len, NULL, &b));
    if (b) {
        CHECK(hnsw_check(b) == MESS_EFORMAT);
        CHECK_OK(hnsw_delete(b, LB(1001)));
        CHECK(hnsw_deleted(b) <= hnsw_count(b) && hnsw_live(b) <= hnsw_count(b));
        exercise(b);
        hnsw_free(b);
    }
    /* a label map with no empty slot: finds and adds end */
    memcpy(copy, buf, len);
    for (i = 0; i < slen[7] / 4; i++)
        mess_store_u32(copy + off[7] + 4 * i, (uint32_t)(i % 300));
    b = NULL;
    CHECK_OK(hnsw_attach(copy, len, NULL, &b));
    if (b) {
        CHECK(hnsw_find(b, LB(77777), NULL) == MESS_ENOTFOUND);
        CHECK(hnsw_check(b) == MESS_EFORMAT);
        exercise(b);
        hnsw_free(b);
    }
    free(copy);
    free(buf);
    hnsw_free(a);
}

/* The interleaved searches' fast loops (an attached graph with no deleted
 * node) over hostile layer-0 links: ids past the last node (two, then the
 * whole section all ones, then random bytes) are skipped as hnsw_search
 * skips them, on every path, with the same hits. */
static void test_graph_hostile_fast(void)
{
    struct hnsw *a = build(300, 4, 16), *b;
    uint8_t *buf, *copy;
    size_t len = 0, i;
    uint64_t off4, len4;
    struct mess_rng rng;
    uint8_t seed[32] = {19};
    int pass, fast_seen = 0;
    CHECK(a != NULL);
    if (!a)
        return;
    buf = graph_buf(a, &len);
    copy = NULL;
    if (!buf || posix_memalign((void **)&copy, 4096, len) != 0) {
        free(buf);
        hnsw_free(a);
        CHECK(0);
        return;
    }
    off4 = mess_load_u64(buf + 104 + 16 * 4);
    len4 = mess_load_u64(buf + 104 + 16 * 4 + 8);
    mess_rng_init(&rng, seed, 3);
    for (pass = 0; pass < 4; pass++) {
        struct hnsw_scratch *ref = NULL, *sc[3] = {NULL, NULL, NULL};
        struct hnsw_hit want[40], got[3][40];
        struct hnsw_job jobs[3];
        struct hnsw_many_opts mo;
        size_t nw, q;
        int path;
        memcpy(copy, buf, len);
        if (pass == 0) { /* node 0's first two links past the last node */
            mess_store_u32(copy + off4 + 4, 300);
            mess_store_u32(copy + off4 + 8, 0xffffffffu);
        } else if (pass == 1) {
            memset(copy + off4, 0xff, (size_t)len4);
        } else {
            for (i = 0; i < len4; i++)
                if (mess_rng_below(&rng, 4) == 0)
                    copy[off4 + i] = (uint8_t)mess_rng_below(&rng, 256);
        }
        b = NULL;
        CHECK_OK(hnsw_attach(copy, len, NULL, &b));
        if (!b)
            continue;
        CHECK(hnsw_deleted(b) == 0);
        CHECK_OK(hnsw_scratch_new(&ref));
        for (i = 0; i < 3; i++)
            CHECK_OK(hnsw_scratch_new(&sc[i]));
        /* path HNSW_MANY_FAST + 1: fast 3 over the code layout, built from
         * the hostile lists (ids past the last node, EMPTY, counts past 2M) */
        for (path = 0; path <= HNSW_MANY_FAST + 1 && ref && sc[2]; path++) {
            mo.fast = path > HNSW_MANY_FAST ? HNSW_MANY_FAST : path;
            mo.clear_words = HNSW_MANY_CLEAR_WORDS;
            mo.layout = path > HNSW_MANY_FAST;
            if (path > HNSW_MANY_FAST)
                CHECK_OK(hnsw_layout_build(b));
            memset(jobs, 0, sizeof jobs);
            for (q = 0; q < 3; q++) {
                jobs[q].h = b;
                jobs[q].query = qcodes + q * WORDS;
                jobs[q].P = 20 + 10 * q;
                jobs[q].ef = 40;
                jobs[q].out = got[q];
            }
            CHECK_OK(hnsw_search_many(jobs, 3, sc, 3, &mo));
            for (q = 0; q < 3; q++) {
                size_t h;
                CHECK_OK(hnsw_search(b, ref, qcodes + q * WORDS, 20 + 10 * q, 40, want, &nw));
                CHECK(jobs[q].rc == MESS_OK && jobs[q].n_out == nw);
                for (h = 0; h < nw && h < jobs[q].n_out; h++)
                    CHECK(got[q][h].node == want[h].node && got[q][h].dist == want[h].dist &&
                          hnsw_label_eq(got[q][h].label, want[h].label));
                fast_seen += path == HNSW_MANY_FAST && nw > 1;
            }
        }
        hnsw_scratch_free(ref);
        for (i = 0; i < 3; i++)
            hnsw_scratch_free(sc[i]);
        hnsw_free(b);
    }
    CHECK(fast_seen > 0);
    free(copy);
    free(buf);
    hnsw_free(a);
}

/* Attach is O(1): with every page of the sections but the one holding
 * the entry point's level byte made inaccessible, it still succeeds (a
 * read of any other section page would fault).  Write errors are
 * MESS_EIO. */
static void test_graph_attach_o1(void)
{
    struct hnsw *a = build(3000, 16, 32), *b = NULL;
    size_t len = 0, levels_off, entry_page;
    uint8_t d[32], *map;
    int fd;
    CHECK(a != NULL);
    if (!a)
        return;
    map = (uint8_t *)graph_map(a, &len, d);
    CHECK(map != NULL);
    if (map) {
        levels_off = (size_t)mess_load_u64(map + 104 + 16 * 2);
        entry_page = (levels_off + hnsw_entry_point(a)) / 4096 * 4096;
        CHECK_OK(mprotect(map + 4096, entry_page - 4096, PROT_NONE));
        CHECK_OK(mprotect(map + entry_page + 4096, len - entry_page - 4096, PROT_NONE));
        CHECK_OK(hnsw_attach(map, len, NULL, &b));
        CHECK(b && hnsw_count(b) == 3000 && hnsw_entry_point(b) == hnsw_entry_point(a));
        hnsw_free(b);
        munmap(map, len);
    }
    fd = open("/dev/null", O_RDONLY);
    CHECK(fd >= 0);
    if (fd >= 0) {
        CHECK_RC(hnsw_write_graph(a, fd, d), MESS_EIO);
        close(fd);
    }
    CHECK_RC(hnsw_write_graph(NULL, 1, d), MESS_EINVAL);
    CHECK_RC(hnsw_write_graph(a, -1, d), MESS_EINVAL);
    CHECK_RC(hnsw_write_graph(a, 1, NULL), MESS_EINVAL);
    hnsw_free(a);
}

/* Layout figure of the mapped form at kappa 128, M 16 (docs/HNSW.md). */
static void test_graph_layout_bytes(void)
{
    struct hnsw *b = NULL;
    size_t len = 0, nn = hnsw_count(g);
    uint8_t d[32];
    void *map = graph_map(g, &len, d);
    CHECK(map != NULL);
    if (!map)
        return;
    CHECK_OK(hnsw_attach(map, len, NULL, &b));
    /* past the header page and the padding of 8 sections */
    printf("# mapped form: %.1f bytes per node (%zu nodes, %zu bytes; heap form %.1f)\n",
           (double)(len - 9 * 4096) / (double)nn, nn, len,
           (double)hnsw_bytes(g) / (double)nn);
    CHECK(len - 9 * 4096 < 200 * nn);
    CHECK(b && hnsw_heap_bytes(b) < 4096);
    hnsw_free(b);
    munmap(map, len);
}

static void test_bad_params(void)
{
    struct hnsw_params p = {96, 16, 100, 1};
    struct hnsw *h = NULL;
    CHECK_RC(hnsw_new(&p, &h), MESS_EINVAL);
    p.bits = 128;
    p.m = 1;
    CHECK_RC(hnsw_new(&p, &h), MESS_EINVAL);
    p.m = 16;
    p.ef_construction = 0;
    CHECK_RC(hnsw_new(&p, &h), MESS_EINVAL);
    CHECK_RC(hnsw_new(NULL, &h), MESS_EINVAL);
    CHECK(h == NULL);
}

/* hnsw_search_many: every job's hits and status are hnsw_search's (labels
 * {0, 0} where the job skips them), and the work counted is the same, at
 * every width, over a mix of indexes (one
 * with a third of its nodes deleted, an empty one, a one-node one) and of
 * P and ef (0, below and above the live nodes). */
static void test_search_many(void)
{
    enum { JOBS = 3 * NQ + 6 };
    struct hnsw *idx[4];
    struct hnsw_params p = {BITS, 6, 24, 3};
    struct hnsw_job jobs[JOBS];
    struct hnsw_many_opts mo;
    struct hnsw_hit *want[JOBS];
    size_t want_n[JOBS], i, w, bad = 0, bad_counts = 0;
    int want_rc[JOBS];
    struct hnsw_scratch *ref = NULL, *sc[HNSW_MANY_MAX];
    struct hnsw_counts c0, c1;
    unsigned k;
    idx[0] = g;
    idx[1] = build(700, 6, 24);
    idx[2] = NULL;
    idx[3] = NULL;
    CHECK(idx[1] != NULL);
    CHECK_OK(hnsw_new(&p, &idx[2]));
    CHECK_OK(hnsw_new(&p, &idx[3]));
    if (!idx[1] || !idx[2] || !idx[3])
        goto out;
    for (i = 0; i < 700; i += 3)
        hnsw_delete(idx[1], LB(1000 + i));
    hnsw_add(idx[3], codes, LB(5), NULL);
    CHECK_OK(hnsw_scratch_new(&ref));
    for (k = 0; k < HNSW_MANY_MAX; k++)
        CHECK_OK(hnsw_scratch_new(&sc[k]));
    for (i = 0; i < JOBS; i++) {
        static const size_t Ps[] = {1, 10, 25, 0, 700, 64};
        static const size_t efs[] = {0, 64, 16, 10, 2000, 1};
        jobs[i].h = i < 2 * NQ ? idx[i % 2] : idx[i % 4];
        jobs[i].query = qcodes + (i % nq) * WORDS;
        jobs[i].P = Ps[i % 6];
        jobs[i].ef = efs[(i / 6) % 6];
        jobs[i].skip_labels = i % 5 == 0;
        jobs[i].out = (struct hnsw_hit *)malloc((jobs[i].P + 1) * sizeof(struct hnsw_hit));
        want[i] = (struct hnsw_hit *)malloc((jobs[i].P + 1) * sizeof(struct hnsw_hit));
        want_rc[i] = hnsw_search(jobs[i].h, ref, jobs[i].query, jobs[i].P, jobs[i].ef,
                                 want[i], &want_n[i]);
    }
    hnsw_scratch_counts(ref, &c0);
    CHECK(c0.searches > 0 && c0.expanded > 0 && c0.scored >= c0.expanded &&
          c0.links >= c0.scored && c0.link_lines >= c0.expanded);
    /* every width on each of hnsw_search_many's paths: the common case's
     * branch-free loops (fast 2, the visit bitmap cleared whole), its
     * former loops with the bitmap cleared whole and through the visit
     * list (fast 1; fast 2 with a list runs them too), and the general
     * loops alone (fast 0) */
    /* then fast 3 over the code layout (paths 5 and 6: the bitmap cleared
     * whole and through the list; with deleted nodes, an empty and a
     * one-node graph), and path 7, the layout built but not read */
    for (w = 1; w <= 8 * HNSW_MANY_MAX; w++) {
        static const int fast[8] = {3, 1, 3, 0, 2, 3, 3, 3};
        unsigned path = (unsigned)((w - 1) / HNSW_MANY_MAX);
        if (w == 5 * HNSW_MANY_MAX + 1)
            for (k = 0; k < 4; k++)
                CHECK_OK(hnsw_layout_build(idx[k]));
        mo.fast = fast[path];
        mo.clear_words = path == 2 || path == 6 ? 0 : HNSW_MANY_CLEAR_WORDS;
        mo.layout = path < 7;
        memset(&c1, 0, sizeof c1);
        for (k = 0; k < HNSW_MANY_MAX; k++)
            hnsw_scratch_counts_reset(sc[k]);
        CHECK_OK(hnsw_search_many(jobs, JOBS, sc, (unsigned)((w - 1) % HNSW_MANY_MAX + 1), &mo));
        for (k = 0; k < HNSW_MANY_MAX; k++) {
            struct hnsw_counts c;
            hnsw_scratch_counts(sc[k], &c);
            c1.searches += c.searches;
            c1.upper += c.upper;
            c1.expanded += c.expanded;
            c1.links += c.links;
            c1.scored += c.scored;
            c1.link_lines += c.link_lines;
        }
        bad_counts += memcmp(&c0, &c1, sizeof c0) != 0;
        for (i = 0; i < JOBS; i++) {
            size_t h;
            if (jobs[i].rc != want_rc[i] || jobs[i].n_out != want_n[i]) {
                bad++;
                continue;
            }
            for (h = 0; h < want_n[i]; h++)
                bad += jobs[i].out[h].node != want[i][h].node ||
                       jobs[i].out[h].dist != want[i][h].dist ||
                       !hnsw_label_eq(jobs[i].out[h].label,
                                      jobs[i].skip_labels ? hnsw_label_of(0, 0)
                                                          : want[i][h].label);
        }
    }
    CHECK(bad == 0);
    CHECK(bad_counts == 0);
    hnsw_layout_drop(g); /* shared with the other tests */
    /* bad calls; a bad job fails alone */
    CHECK_RC(hnsw_search_many(jobs, JOBS, sc, 0, NULL), MESS_EINVAL);
    CHECK_RC(hnsw_search_many(jobs, JOBS, sc, HNSW_MANY_MAX + 1, NULL), MESS_EINVAL);
    CHECK_RC(hnsw_search_many(NULL, 1, sc, 1, NULL), MESS_EINVAL);
    CHECK_OK(hnsw_search_many(NULL, 0, sc, 1, NULL));
    jobs[1].query = NULL;
    CHECK_RC(hnsw_search_many(jobs, 3, sc, 2, NULL), MESS_EINVAL);
    CHECK(jobs[1].rc == MESS_EINVAL && jobs[0].rc == MESS_OK && jobs[2].rc == MESS_OK &&
          jobs[0].n_out == want_n[0]);
    for (i = 0; i < JOBS; i++) {
        free(jobs[i].out);
        free(want[i]);
    }
    for (k = 0; k < HNSW_MANY_MAX; k++)
        hnsw_scratch_free(sc[k]);
    hnsw_scratch_free(ref);
out:
    hnsw_free(idx[1]);
    hnsw_free(idx[2]);
    hnsw_free(idx[3]);
}

/* Every block of h's code layout equals what the graph's lists and codes
 * give (count of nodes whose block differs). */
static size_t layout_diff(const struct hnsw *h)
{
    size_t bad = 0, i;
    for (i = 0; i < hnsw_count(h); i++) {
        const uint64_t *blk = lay_block(h, (uint32_t)i), *c = HNSW_LAY_CODES(h, blk);
        const uint32_t *ids = (const uint32_t *)(const void *)blk, *l;
        size_t cnt = 0, k;
        int diff = hnsw_neighbors(h, (uint32_t)i, 0, &l, &cnt) != MESS_OK;
        for (k = 0; !diff && k < h->m0; k++) {
            if (k >= cnt) {
                diff = ids[k] != EMPTY;
                continue;
            }
            diff = ids[k] != l[k] ||
                   memcmp(c + 2 * k, hnsw_code(h, l[k]), 16) != 0;
        }
        bad += diff;
    }
    return bad;
}

/* The code layout stays equal to the graph through inserts (the arrays'
 * growth, reserved or not, links shrunk), deletes, compaction, an
 * attached graph's tail; bytes and failures. */
static void test_layout_coherent(void)
{
    struct hnsw_params p = {BITS, 6, 24, 5}, p256 = {256, 6, 24, 5};
    struct hnsw *a = NULL, *c = NULL, *b = NULL, *wide = NULL;
    size_t i, len = 0, heap;
    uint8_t d[32];
    void *map;
    CHECK(hnsw_layout_node_bytes(&p) == 256 && hnsw_layout_node_bytes(&p256) == 0);
    CHECK_OK(hnsw_new(&p, &a));
    CHECK_OK(hnsw_new(&p256, &wide));
    if (!a || !wide)
        goto out;
    CHECK_RC(hnsw_layout_build(wide), MESS_EPARAM);
    CHECK(hnsw_layout_bytes(wide) == 0);
    CHECK_OK(hnsw_layout_build(a)); /* empty */
    CHECK(hnsw_layout_bytes(a) > 0);
    for (i = 0; i < 400; i++)
        CHECK_OK(hnsw_add(a, codes + i * WORDS, LB(i), NULL));
    CHECK(layout_diff(a) == 0);
    CHECK_OK(hnsw_reserve(a, 1200));
    heap = hnsw_layout_bytes(a);
    CHECK(heap >= 1200 * hnsw_layout_node_bytes(&p));
    for (; i < 1200; i++)
        CHECK_OK(hnsw_add(a, codes + i * WORDS, LB(i), NULL));
    CHECK(hnsw_layout_bytes(a) == heap); /* reserved: no growth */
    for (i = 0; i < 1200; i += 7)
        CHECK_OK(hnsw_delete(a, LB(i)));
    CHECK(layout_diff(a) == 0);
    CHECK_OK(hnsw_compact(a, &c, NULL));
    CHECK(c && hnsw_layout_bytes(c) > 0 && layout_diff(c) == 0);
    /* an attached graph: built over the mapping, then a tail added */
    map = graph_map(a, &len, d);
    CHECK(map != NULL);
    if (map && hnsw_attach(map, len, NULL, &b) == MESS_OK) {
        CHECK_OK(hnsw_layout_build(b));
        CHECK(layout_diff(b) == 0);
        for (i = 1200; i < 1700; i++)
            CHECK_OK(hnsw_add(b, codes + i * WORDS, LB(i), NULL));
        CHECK(layout_diff(b) == 0);
        hnsw_layout_drop(b);
        CHECK(hnsw_layout_bytes(b) == 0);
        hnsw_free(b);
    }
    if (map)
        munmap(map, len);
out:
    hnsw_free(a);
    hnsw_free(c);
    hnsw_free(wide);
}

#if defined(__linux__) && defined(MADV_HUGEPAGE)
/* 1 if the VmFlags of the mapping holding `at` (/proc/self/smaps) name
 * flag, 0 if not, -1 when the file cannot be read or shows no VmFlags
 * for it. */
static int smaps_flag(const void *at_p, const char *flag)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512], want[8];
    int in = 0, found = -1;
    uintptr_t at = (uintptr_t)at_p;
    if (!f)
        return -1;
    snprintf(want, sizeof want, " %s", flag);
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char c;
        const char *colon = strchr(line, ':'), *space = strchr(line, ' ');
        if (sscanf(line, "%lx-%lx %c", &lo, &hi, &c) == 3 && colon && space && colon > space)
            in = lo <= at && at < hi;
        else if (in && !strncmp(line, "VmFlags:", 8))
            found = strstr(line, want) != NULL;
    }
    fclose(f);
    return found;
}

/* 1 if this kernel records MADV_HUGEPAGE on a mapping of its own (VmFlags
 * "hg"): it does under every transparent_hugepage setting, "never"
 * included, but not where transparent huge pages are not built in
 * (madvise fails with EINVAL) or where the smaps show no VmFlags. */
static int kernel_records_huge_advice(void)
{
    size_t len = (size_t)2 << 20;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int r;
    if (p == MAP_FAILED)
        return 0;
    r = madvise(p, len, MADV_HUGEPAGE) == 0 && smaps_flag(p, "hg") == 1;
    munmap(p, len);
    return r;
}
#endif

/* A code layout of 2 MiB or more asks for transparent huge pages (Linux:
 * its mapping's VmFlags say "hg", checked where the kernel records the
 * advice at all), on a 2 MiB boundary; the blocks the same as in 4 KiB
 * pages (layout_diff). */
static void test_layout_huge(void)
{
    struct hnsw_params p = {BITS, 6, 24, 5};
    struct hnsw *a = NULL;
    size_t i;
    CHECK_OK(hnsw_new(&p, &a));
    if (!a)
        return;
    CHECK_OK(hnsw_reserve(a, 9000)); /* 9000 x 256 bytes: past 2 MiB */
    CHECK_OK(hnsw_layout_build(a));
    CHECK(hnsw_layout_bytes(a) >= (size_t)2 << 20);
    CHECK(((uintptr_t)a->lay & (((uintptr_t)2 << 20) - 1)) == 0);
    for (i = 0; i < 600; i++)
        CHECK_OK(hnsw_add(a, codes + i * WORDS, LB(i), NULL));
    CHECK(layout_diff(a) == 0);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (kernel_records_huge_advice())
        CHECK(smaps_flag(a->lay, "hg") == 1);
    else
        printf("# test_layout_huge: this kernel records no MADV_HUGEPAGE; advice not checked\n");
#endif
    hnsw_free(a);
}

int main(void)
{
    if (load_codes() != 0) {
        printf("cannot read datasets/sift\n0 passed, 1 failed\n");
        return 1;
    }
    RUN(test_recall);
    if (!g) {
        HARNESS_END();
    }
    RUN(test_results_sorted_and_exact_distances);
    RUN(test_graph_access);
    RUN(test_serialize_roundtrip);
    RUN(test_popcount_paths);
    RUN(test_concurrent_search);
    RUN(test_search_many);
    RUN(test_label_width);
    RUN(test_delete_and_compact);
    RUN(test_reserve);
    RUN(test_hostile_buffers);
    RUN(test_parallel_shards);
    RUN(test_bad_params);
    RUN(test_graph_file_roundtrip);
    RUN(test_graph_attach_then_insert);
    RUN(test_graph_hostile);
    RUN(test_graph_hostile_fast);
    RUN(test_score_list);
    RUN(test_graph_attach_o1);
    RUN(test_graph_layout_bytes);
    RUN(test_layout_coherent);
    RUN(test_layout_huge);
    hnsw_free(g);
    free(codes);
    free(qcodes);
    HARNESS_END();
}
