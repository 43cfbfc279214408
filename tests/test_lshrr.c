/*
 * test_lshrr.c - randomized response: exact flip rates, independence,
 * reproducibility, the PRR memo cache and the (PRR, IRR) composition.
 */
#include <math.h>
#include <sodium.h>
#include <stdio.h>

#include "../lshrr.h"
#include "harness.h"

static const uint8_t seed[32] = {7, 7, 7};

/* Flip rate over `codes` codes of `bits` bits must be within 4 sigma. */
static int rate_ok(int geometric, double p, size_t codes, uint32_t bits)
{
    struct mess_rng r;
    uint64_t c[8];
    size_t i, ones = 0, total = codes * bits;
    double rate, sigma;
    uint32_t w;
    mess_rng_init(&r, NULL, 0);
    for (i = 0; i < codes; i++) {
        memset(c, 0, sizeof c);
        if (geometric)
            lshrr_flip_geometric(&r, c, bits, p);
        else
            lshrr_flip(&r, c, bits, p);
        for (w = 0; w < bits / 64; w++)
            ones += (size_t)__builtin_popcountll(c[w]);
    }
    rate = (double)ones / (double)total;
    sigma = sqrt(p * (1 - p) / (double)total);
    printf("# %s p=%.2f: rate %.6f (4 sigma %.6f)\n", geometric ? "geometric" : "threshold",
           p, rate, 4 * sigma);
    return fabs(rate - p) <= 4 * sigma;
}

static void test_flip_rates(void)
{
    static const double ps[] = {0.01, 0.08, 0.12, 0.21, 0.5};
    size_t i;
    for (i = 0; i < 5; i++)
        CHECK(rate_ok(0, ps[i], 10000000 / 128, 128)); /* 10^7 bits */
    for (i = 0; i < 4; i++)
        CHECK(rate_ok(1, ps[i], 2000000 / 128, 128));
}

/* Chi-square of the joint flips of bit pairs (i, i+d) against
 * independence: 3 degrees of freedom, 99.9% quantile 16.27. */
static void test_pair_independence(void)
{
    struct mess_rng r;
    const double p = 0.12;
    size_t cnt[4] = {0, 0, 0, 0}, n = 0, it;
    uint32_t b;
    double chi = 0, e[4];
    int k;
    mess_rng_init(&r, NULL, 0);
    for (it = 0; it < 20000; it++) {
        uint64_t c[2] = {0, 0};
        lshrr_flip(&r, c, 128, p);
        for (b = 0; b + 1 < 128; b += 2) {
            int x = (int)(c[b / 64] >> (b % 64) & 1);
            int y = (int)(c[(b + 1) / 64] >> ((b + 1) % 64) & 1);
            cnt[x * 2 + y]++;
            n++;
        }
    }
    e[0] = (1 - p) * (1 - p);
    e[1] = e[2] = p * (1 - p);
    e[3] = p * p;
    for (k = 0; k < 4; k++) {
        double ex = e[k] * (double)n;
        chi += ((double)cnt[k] - ex) * ((double)cnt[k] - ex) / ex;
    }
    printf("# pair chi-square %.2f (3 dof)\n", chi);
    CHECK(chi < 16.27);
}

static void test_reproducible(void)
{
    struct mess_rng a, b;
    uint64_t x[2] = {0, 0}, y[2] = {0, 0};
    int i, same = 1;
    mess_rng_init(&a, seed, 5);
    mess_rng_init(&b, seed, 5);
    for (i = 0; i < 100; i++) {
        lshrr_flip(&a, x, 128, 0.3);
        lshrr_flip(&b, y, 128, 0.3);
        same &= x[0] == y[0] && x[1] == y[1];
    }
    CHECK(same);
    /* another stream id: another stream */
    mess_rng_init(&b, seed, 6);
    CHECK(mess_rng_u64(&a) != mess_rng_u64(&b));
    /* CSPRNG mode: two generators never agree */
    mess_rng_init(&a, NULL, 5);
    mess_rng_init(&b, NULL, 5);
    CHECK(mess_rng_u64(&a) != mess_rng_u64(&b));
    mess_rng_wipe(&a);
    mess_rng_wipe(&b);
    /* bad arguments */
    CHECK_RC(lshrr_flip(&a, x, 128, 0.6), MESS_EINVAL);
    CHECK_RC(lshrr_flip(&a, x, 128, NAN), MESS_EINVAL);
    CHECK_RC(lshrr_flip(&a, NULL, 128, 0.1), MESS_EINVAL);
}

static void test_memo(void)
{
    struct lshrr_memo *m = NULL;
    struct mess_rng r;
    uint8_t key[32] = {1};
    uint64_t clean[4 * 2] = {0}, o1[8], o2[8], o3[8];
    float q1[4] = {1, 2, 3, 4}, q2[4] = {1, 2, 3, 5}, q3[4] = {9, 9, 9, 9};
    int hit;

    mess_rng_init(&r, NULL, 0);
    CHECK_OK(lshrr_memo_new(2, 4, 128, key, &m));
    if (!m)
        return;
    /* without IRR the memoised report comes back identical */
    CHECK_OK(lshrr_query_report(m, &r, q1, 4, clean, 0.3, 0.0, o1, &hit));
    CHECK(hit == 0);
    CHECK_OK(lshrr_query_report(m, &r, q1, 4, clean, 0.3, 0.0, o2, &hit));
    CHECK(hit == 1 && memcmp(o1, o2, sizeof o1) == 0);
    /* with IRR the submissions differ */
    CHECK_OK(lshrr_query_report(m, &r, q1, 4, clean, 0.3, 0.1, o3, &hit));
    CHECK(hit == 1 && memcmp(o1, o3, sizeof o1) != 0);
    /* capacity 2, least recently used goes: q1 was used last, q2 then q3 */
    CHECK_OK(lshrr_query_report(m, &r, q2, 4, clean, 0.3, 0.0, o2, &hit));
    CHECK(hit == 0 && lshrr_memo_count(m) == 2);
    CHECK_OK(lshrr_query_report(m, &r, q1, 4, clean, 0.3, 0.0, o2, &hit));
    CHECK(hit == 1);
    CHECK_OK(lshrr_query_report(m, &r, q3, 4, clean, 0.3, 0.0, o2, &hit));
    CHECK(hit == 0); /* evicts q2 */
    CHECK_OK(lshrr_query_report(m, &r, q1, 4, clean, 0.3, 0.0, o2, &hit));
    CHECK(hit == 1 && memcmp(o1, o2, sizeof o1) == 0);
    CHECK_OK(lshrr_query_report(m, &r, q2, 4, clean, 0.3, 0.0, o2, &hit));
    CHECK(hit == 0);

    /* round trip and hostile input */
    {
        struct mess_wr w;
        struct mess_rd rd;
        struct lshrr_memo *b = NULL;
        size_t cut;
        mess_wr_init(&w);
        CHECK_OK(lshrr_memo_serialize(m, &w));
        mess_rd_init(&rd, w.p, w.len);
        CHECK_OK(lshrr_memo_deserialize(&rd, key, &b));
        if (b) {
            CHECK(lshrr_memo_count(b) == 2);
            CHECK_OK(lshrr_query_report(b, &r, q1, 4, clean, 0.3, 0.0, o3, &hit));
            CHECK(hit == 1 && memcmp(o1, o3, sizeof o1) == 0);
            lshrr_memo_free(b);
        }
        for (cut = 0; cut < w.len; cut++) {
            b = NULL;
            mess_rd_init(&rd, w.p, cut);
            CHECK(lshrr_memo_deserialize(&rd, key, &b) != MESS_OK && b == NULL);
        }
        memset(w.p, 0xff, 8); /* hostile capacity */
        mess_rd_init(&rd, w.p, w.len);
        CHECK_RC(lshrr_memo_deserialize(&rd, key, &b), MESS_EFORMAT);
        mess_wr_free(&w);
    }
    lshrr_memo_free(m);
}

/* PRR a then IRR b flips each bit with p_q = a(1-b) + b(1-a). */
static void test_composition(void)
{
    struct lshrr_memo *m = NULL;
    struct mess_rng r;
    uint8_t key[32] = {2};
    const double a = 0.0417424, b = 0.0417424;
    double pq = lshrr_effective_p(a, b), rate, sigma;
    uint64_t clean[2] = {0, 0}, out[2];
    size_t i, ones = 0, n = 40000;
    float q[2];
    int hit;
    CHECK(fabs(pq - 0.08) < 1e-6);
    mess_rng_init(&r, NULL, 0);
    CHECK_OK(lshrr_memo_new(64, 1, 128, key, &m));
    if (!m)
        return;
    for (i = 0; i < n; i++) {
        q[0] = (float)i;
        q[1] = 1.0f;
        lshrr_query_report(m, &r, q, 2, clean, a, b, out, &hit);
        ones += (size_t)(__builtin_popcountll(out[0]) + __builtin_popcountll(out[1]));
    }
    rate = (double)ones / (double)(n * 128);
    sigma = sqrt(pq * (1 - pq) / (double)(n * 128));
    printf("# composed flip rate %.5f, p_q %.5f, 4 sigma %.5f\n", rate, pq, 4 * sigma);
    CHECK(fabs(rate - pq) <= 4 * sigma);
    lshrr_memo_free(m);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    RUN(test_flip_rates);
    RUN(test_pair_independence);
    RUN(test_reproducible);
    RUN(test_memo);
    RUN(test_composition);
    HARNESS_END();
}
