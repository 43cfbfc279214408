/*
 * test_lshrr.c - randomized response: exact flip rates, independence,
 * reproducibility, the PRR as a PRF of the query and the (PRR, IRR)
 * composition.
 */
#include <math.h>
#include <sodium.h>
#include <stdio.h>

#include "lshrr.h"
#include "harness.h"

static const uint8_t seed[32] = {7, 7, 7};

typedef int (*flip_fn)(struct mess_rng *, uint64_t *, uint32_t, double);
static const struct {
    const char *name;
    flip_fn fn;
} samplers[] = {
    {"bitsliced", lshrr_flip},
    {"threshold", lshrr_flip_threshold},
    {"geometric", lshrr_flip_geometric},
};
#define NSAMPLERS 3

/* Flip rate over `codes` codes of `bits` bits must be within 4 sigma.  The
 * coins come from a seeded stream, so the check is reproducible. */
static int rate_ok(int s, double p, size_t codes, uint32_t bits)
{
    struct mess_rng r;
    uint64_t c[8];
    size_t i, ones = 0, total = codes * bits;
    double rate, sigma;
    uint32_t w;
    mess_rng_init(&r, seed, (uint64_t)(p * 1000) + 100 * (uint64_t)s);
    for (i = 0; i < codes; i++) {
        memset(c, 0, sizeof c);
        samplers[s].fn(&r, c, bits, p);
        for (w = 0; w < bits / 64; w++)
            ones += (size_t)__builtin_popcountll(c[w]);
    }
    rate = (double)ones / (double)total;
    sigma = sqrt(p * (1 - p) / (double)total);
    printf("# %s p=%.2f: rate %.6f (4 sigma %.6f)\n", samplers[s].name, p,
           rate, 4 * sigma);
    return fabs(rate - p) <= 4 * sigma;
}

static void test_flip_rates(void)
{
    static const double ps[] = {0.01, 0.08, 0.12, 0.21, 0.5};
    size_t i;
    int s;
    for (s = 0; s < NSAMPLERS; s++)
        for (i = 0; i < 5; i++)
            CHECK(rate_ok(s, ps[i], 10000000 / 128, 128)); /* 10^7 bits */
}

/* Probabilities that are not multiples of 2^-32 round to the nearest one;
 * p = 0 never flips; bits past `bits` are never touched. */
static void test_flip_edges(void)
{
    struct mess_rng r;
    uint64_t c[2];
    size_t i, ones = 0;
    int s;
    mess_rng_init(&r, seed, 1);
    for (s = 0; s < NSAMPLERS; s++) {
        int clean = 1;
        for (i = 0; i < 2000; i++) {
            c[0] = 0;
            c[1] = 0;
            samplers[s].fn(&r, c, 100, 0.5);
            clean &= (c[1] >> 36) == 0;
            ones += (size_t)(__builtin_popcountll(c[0]) + __builtin_popcountll(c[1]));
            c[0] = 0x0123456789abcdefULL;
            samplers[s].fn(&r, c, 64, 0.0);
            clean &= c[0] == 0x0123456789abcdefULL;
        }
        CHECK(clean);
    }
    /* 3 x 2000 x 100 bits at p = 1/2 */
    CHECK(fabs((double)ones / 600000.0 - 0.5) < 4 * sqrt(0.25 / 600000.0));
    /* p = 2^-34 rounds to 0 and never flips */
    c[0] = 0;
    for (i = 0; i < 100; i++)
        CHECK_OK(lshrr_flip(&r, c, 64, ldexp(1.0, -34)));
    CHECK(c[0] == 0);
    for (s = 0; s < NSAMPLERS; s++) {
        CHECK_RC(samplers[s].fn(&r, c, 128, 0.6), MESS_EINVAL);
        CHECK_RC(samplers[s].fn(&r, c, 128, -0.1), MESS_EINVAL);
        CHECK_RC(samplers[s].fn(&r, c, 128, NAN), MESS_EINVAL);
        CHECK_RC(samplers[s].fn(&r, NULL, 128, 0.1), MESS_EINVAL);
        CHECK_RC(samplers[s].fn(NULL, c, 128, 0.1), MESS_EINVAL);
        CHECK_RC(samplers[s].fn(&r, c, 0, 0.1), MESS_EINVAL);
    }
    mess_rng_wipe(&r);
}

/* Chi-square of the joint flips of bit pairs against independence (3
 * degrees of freedom, 99.9% quantile 16.27), for neighbouring bits, bits
 * across the 64-bit word boundary, the same bit of both words, and the
 * last bit of one code with the first of the next. */
static double chi_square(const size_t cnt[4], double p)
{
    double e[4], n = (double)(cnt[0] + cnt[1] + cnt[2] + cnt[3]), chi = 0;
    int k;
    e[0] = (1 - p) * (1 - p);
    e[1] = e[2] = p * (1 - p);
    e[3] = p * p;
    for (k = 0; k < 4; k++)
        chi += ((double)cnt[k] - e[k] * n) * ((double)cnt[k] - e[k] * n) / (e[k] * n);
    return chi;
}

static int bit(const uint64_t *c, uint32_t i)
{
    return (int)(c[i / 64] >> (i % 64) & 1);
}

static void test_pair_independence(void)
{
    const double p = 0.12;
    int s;
    for (s = 0; s < NSAMPLERS; s++) {
        struct mess_rng r;
        size_t near[4] = {0}, cross[4] = {0}, same[4] = {0}, next[4] = {0}, it;
        uint64_t prev[2] = {0, 0};
        double chi[4];
        uint32_t b;
        mess_rng_init(&r, seed, 50 + (uint64_t)s);
        for (it = 0; it < 20000; it++) {
            uint64_t c[2] = {0, 0};
            samplers[s].fn(&r, c, 128, p);
            for (b = 0; b + 1 < 128; b += 2)
                near[bit(c, b) * 2 + bit(c, b + 1)]++;
            cross[bit(c, 63) * 2 + bit(c, 64)]++;
            for (b = 0; b < 64; b++)
                same[bit(c, b) * 2 + bit(c, b + 64)]++;
            if (it > 0)
                next[bit(prev, 127) * 2 + bit(c, 0)]++;
            prev[0] = c[0];
            prev[1] = c[1];
        }
        chi[0] = chi_square(near, p);
        chi[1] = chi_square(cross, p);
        chi[2] = chi_square(same, p);
        chi[3] = chi_square(next, p);
        printf("# %s pair chi-square (3 dof): neighbours %.2f, word boundary "
               "%.2f, bit i / i+64 %.2f, consecutive codes %.2f\n",
               samplers[s].name, chi[0], chi[1], chi[2], chi[3]);
        CHECK(chi[0] < 16.27 && chi[1] < 16.27 && chi[2] < 16.27 && chi[3] < 16.27);
    }
}

static void test_reproducible(void)
{
    struct mess_rng a, b;
    uint64_t x[2] = {0, 0}, y[2] = {0, 0};
    uint8_t bytes_a[1000], bytes_b[1000];
    int i, s, same = 1;
    for (s = 0; s < NSAMPLERS; s++) {
        mess_rng_init(&a, seed, 5);
        mess_rng_init(&b, seed, 5);
        for (i = 0; i < 100; i++) {
            samplers[s].fn(&a, x, 128, 0.3);
            samplers[s].fn(&b, y, 128, 0.3);
            same &= x[0] == y[0] && x[1] == y[1];
        }
    }
    CHECK(same);
    /* the byte stream does not depend on how it is read */
    mess_rng_init(&a, seed, 9);
    mess_rng_init(&b, seed, 9);
    for (i = 0; i < 1000; i++)
        mess_rng_bytes(&a, bytes_a + i, 1);
    mess_rng_bytes(&b, bytes_b, 3);
    mess_rng_bytes(&b, bytes_b + 3, 997);
    CHECK(memcmp(bytes_a, bytes_b, sizeof bytes_a) == 0);
    /* another stream id or another seed: another stream */
    mess_rng_init(&a, seed, 5);
    mess_rng_init(&b, seed, 6);
    CHECK(mess_rng_u64(&a) != mess_rng_u64(&b));
    {
        uint8_t seed2[32];
        memcpy(seed2, seed, 32);
        seed2[31] ^= 1;
        mess_rng_init(&a, seed, 5);
        mess_rng_init(&b, seed2, 5);
        CHECK(mess_rng_u64(&a) != mess_rng_u64(&b));
    }
    /* CSPRNG mode: two generators with the same stream id never agree, and
     * neither do their flips */
    mess_rng_init(&a, NULL, 5);
    mess_rng_init(&b, NULL, 5);
    CHECK(mess_rng_u64(&a) != mess_rng_u64(&b));
    x[0] = x[1] = y[0] = y[1] = 0;
    lshrr_flip(&a, x, 128, 0.3);
    lshrr_flip(&b, y, 128, 0.3);
    CHECK(x[0] != y[0] || x[1] != y[1]);
    mess_rng_wipe(&a);
    mess_rng_wipe(&b);
}

/* The permanent report is a PRF of the query (no cache): the same query
 * gets the same PRR under one key, -0 as +0, whatever was asked in between;
 * another query or another key gets another one. */
static void test_prr_prf(void)
{
    struct mess_rng r;
    uint8_t key[32] = {1}, key2[32] = {9};
    uint64_t clean[4 * 2] = {0}, o1[8], o2[8], o3[8];
    float q1[4] = {1, 2, 3, 4}, q1z[4] = {1, 2, 3, 4}, q2[4] = {1, 2, 3, 5};
    int i;

    mess_rng_init(&r, NULL, 0);
    /* without IRR the report is the PRR: identical every time */
    CHECK_OK(lshrr_query_report(key, &r, q1, 4, 4, 128, clean, 0.3, 0.0, o1));
    for (i = 0; i < 100; i++) {
        float q[4] = {(float)i, 7, 7, 7};
        CHECK_OK(lshrr_query_report(key, &r, q, 4, 4, 128, clean, 0.3, 0.0, o3));
    }
    CHECK_OK(lshrr_query_report(key, &r, q1, 4, 4, 128, clean, 0.3, 0.0, o2));
    CHECK(memcmp(o1, o2, sizeof o1) == 0);
    /* -0 and +0 are one query */
    q1z[0] = 1;
    {
        float a0[4] = {0.0f, 2, 3, 4}, b0[4] = {-0.0f, 2, 3, 4};
        CHECK_OK(lshrr_query_report(key, &r, a0, 4, 4, 128, clean, 0.3, 0.0, o2));
        CHECK_OK(lshrr_query_report(key, &r, b0, 4, 4, 128, clean, 0.3, 0.0, o3));
        CHECK(memcmp(o2, o3, sizeof o2) == 0);
    }
    /* with IRR the submissions differ */
    CHECK_OK(lshrr_query_report(key, &r, q1z, 4, 4, 128, clean, 0.3, 0.1, o3));
    CHECK(memcmp(o1, o3, sizeof o1) != 0);
    /* another query, another key: another PRR */
    CHECK_OK(lshrr_query_report(key, &r, q2, 4, 4, 128, clean, 0.3, 0.0, o2));
    CHECK(memcmp(o1, o2, sizeof o1) != 0);
    CHECK_OK(lshrr_query_report(key2, &r, q1, 4, 4, 128, clean, 0.3, 0.0, o2));
    CHECK(memcmp(o1, o2, sizeof o1) != 0);
    /* arguments */
    CHECK_RC(lshrr_query_report(NULL, &r, q1, 4, 4, 128, clean, 0.3, 0.0, o2), MESS_EINVAL);
    CHECK_RC(lshrr_query_report(key, &r, q1, 0, 4, 128, clean, 0.3, 0.0, o2), MESS_EINVAL);
    CHECK_RC(lshrr_query_report(key, &r, q1, 4, 4, 100, clean, 0.3, 0.0, o2), MESS_EINVAL);
    CHECK_RC(lshrr_query_report(key, &r, q1, 4, 4, 128, clean, 0.6, 0.0, o2), MESS_EINVAL);
    mess_rng_wipe(&r);
}

/* PRR a then IRR b flips each bit with p_q = a(1-b) + b(1-a), over many
 * distinct queries (each its own PRR), for the paper's symmetric split of
 * p_q = 0.08 and an asymmetric pair. */
static void test_composition(void)
{
    static const double ab[2][2] = {{0.0417424, 0.0417424}, {0.03, 0.1}};
    int c;
    CHECK(fabs(lshrr_effective_p(ab[0][0], ab[0][1]) - 0.08) < 1e-6);
    for (c = 0; c < 2; c++) {
        struct mess_rng r;
        uint8_t key[32] = {2};
        const double a = ab[c][0], b = ab[c][1];
        double pq = lshrr_effective_p(a, b), rate, sigma;
        uint64_t clean[2] = {0x5555aaaa5555aaaaULL, 0x0f0f0f0f0f0f0f0fULL}, out[2];
        size_t i, ones = 0, n = 40000;
        float q[2];
        mess_rng_init(&r, seed, 70 + (uint64_t)c);
        for (i = 0; i < n; i++) {
            q[0] = (float)i;
            q[1] = 1.0f;
            CHECK_OK(lshrr_query_report(key, &r, q, 2, 1, 128, clean, a, b, out));
            ones += (size_t)(__builtin_popcountll(out[0] ^ clean[0]) +
                             __builtin_popcountll(out[1] ^ clean[1]));
        }
        rate = (double)ones / (double)(n * 128);
        sigma = sqrt(pq * (1 - pq) / (double)(n * 128));
        printf("# a=%.4f b=%.4f: composed flip rate %.5f, p_q %.5f, 4 sigma %.5f\n",
               a, b, rate, pq, 4 * sigma);
        CHECK(fabs(rate - pq) <= 4 * sigma);
    }
}

/* The averaging attack of section 4.3: many submissions of one query,
 * majority-voted bit by bit, recover the permanent report, not the clean
 * code; each submission differs from the permanent report in a fraction b
 * of the bits, independently. */
static void test_averaging_recovers_prr_only(void)
{
    enum { SUBMISSIONS = 301, SHARDS = 4 };
    struct mess_rng r;
    uint8_t key[32] = {3};
    const double a = 0.2, b = 0.1;
    uint64_t clean[SHARDS * 2], out[SHARDS * 2], prr[SHARDS * 2],
        vote[SHARDS * 2];
    uint32_t votes[SHARDS * 128];
    size_t i, k, off_prr = 0, off_clean = 0;
    float q[3] = {0.25f, -1.5f, 8.0f};
    double rate, sigma;
    mess_rng_init(&r, seed, 80);
    for (k = 0; k < SHARDS * 2; k++)
        clean[k] = mess_rng_u64(&r);
    memset(votes, 0, sizeof votes);
    /* without IRR the report is the PRR */
    CHECK_OK(lshrr_query_report(key, &r, q, 3, SHARDS, 128, clean, a, 0.0, prr));
    for (i = 0; i < SUBMISSIONS; i++) {
        CHECK_OK(lshrr_query_report(key, &r, q, 3, SHARDS, 128, clean, a, b, out));
        for (k = 0; k < SHARDS * 2; k++)
            off_prr += (size_t)__builtin_popcountll(out[k] ^ prr[k]);
        for (k = 0; k < SHARDS * 128; k++)
            votes[k] += (uint32_t)(out[k / 64] >> (k % 64) & 1);
    }
    memset(vote, 0, sizeof vote);
    for (k = 0; k < SHARDS * 128; k++)
        if (votes[k] > SUBMISSIONS / 2)
            vote[k / 64] |= (uint64_t)1 << (k % 64);
    CHECK(memcmp(vote, prr, sizeof prr) == 0);
    for (k = 0; k < SHARDS * 2; k++)
        off_clean += (size_t)__builtin_popcountll(vote[k] ^ clean[k]);
    rate = (double)off_prr / (SUBMISSIONS * SHARDS * 128.0);
    sigma = sqrt(b * (1 - b) / (SUBMISSIONS * SHARDS * 128.0));
    printf("# majority of %d submissions = the PRR, %zu of %d bits off the "
           "clean code (a = %.2f); submissions off the PRR at %.4f (b = %.2f, "
           "4 sigma %.4f)\n",
           SUBMISSIONS, off_clean, SHARDS * 128, a, rate, b, 4 * sigma);
    /* 512 bits at a = 0.2: about 102 differ (sigma 9) */
    CHECK(off_clean > 60 && off_clean < 150);
    CHECK(fabs(rate - b) <= 4 * sigma);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    RUN(test_flip_rates);
    RUN(test_flip_edges);
    RUN(test_pair_independence);
    RUN(test_reproducible);
    RUN(test_prr_prf);
    RUN(test_composition);
    RUN(test_averaging_recovers_prr_only);
    HARNESS_END();
}
