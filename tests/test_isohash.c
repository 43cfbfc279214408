/*
 * test_isohash.c - per-shard IsoHash on the bundled SIFT training set:
 * orthogonal projections, equalised variances, reproducibility, shards that
 * differ, Hamming distance that tracks angle, and hostile input.
 */
#include <math.h>
#include <stdio.h>

#include "isohash.h"
#include "harness.h"
#include "sift.h"

static float *train, *base;
static size_t n_train, n_base, dim;
static struct isohash *h;
static struct isohash_params hp;

static void params(struct isohash_params *p, uint32_t kappa, uint32_t shards)
{
    memset(p, 0, sizeof *p);
    p->dim = (uint32_t)dim;
    p->kappa = kappa;
    p->shards = shards;
    p->threads = 2;
    memset(p->seed, 0x5a, 32);
}

static void test_train(void)
{
    params(&hp, 128, 4);
    CHECK_OK(isohash_train(&hp, train, n_train, &h));
}

static void test_projection_orthonormal(void)
{
    uint32_t j, a, b, r;
    size_t stride;
    double worst = 0;
    for (j = 0; j < 4; j++) {
        const float *P = isohash_projection(h, j, &stride);
        for (a = 0; a < 128; a++)
            for (b = a; b < 128; b++) {
                double s = 0;
                for (r = 0; r < dim; r++)
                    s += (double)P[r * stride + a] * P[r * stride + b];
                s -= a == b ? 1.0 : 0.0;
                if (fabs(s) > worst)
                    worst = fabs(s);
            }
    }
    printf("# max |P^T P - I| = %.2e\n", worst);
    CHECK(worst < 1e-5);
}

static void test_equal_variances(void)
{
    uint32_t j, i;
    size_t s, stride;
    for (j = 0; j < 4; j++) {
        const float *P = isohash_projection(h, j, &stride);
        double var[128], mean[128], avg = 0, worst = 0;
        memset(var, 0, sizeof var);
        memset(mean, 0, sizeof mean);
        for (s = 0; s < n_train; s++)
            for (i = 0; i < 128; i++) {
                double y = 0;
                size_t r;
                for (r = 0; r < dim; r++)
                    y += (double)train[s * dim + r] * P[r * stride + i];
                mean[i] += y;
                var[i] += y * y;
            }
        for (i = 0; i < 128; i++) {
            mean[i] /= (double)n_train;
            var[i] = var[i] / (double)n_train - mean[i] * mean[i];
            avg += var[i] / 128;
        }
        for (i = 0; i < 128; i++)
            if (fabs(var[i] - avg) / avg > worst)
                worst = fabs(var[i] - avg) / avg;
        printf("# shard %u: LP residual %.2e after %u iterations, measured max "
               "|var - mean| / mean %.2e\n",
               j, isohash_residual(h, j), isohash_iterations(h, j), worst);
        CHECK(isohash_residual(h, j) <= ISOHASH_DEFAULT_TOL);
        CHECK(worst <= 2 * ISOHASH_DEFAULT_TOL);
    }
}

static void test_reproducible_and_distinct(void)
{
    struct isohash *again = NULL;
    uint64_t a[2 * 64], b[2 * 64];
    CHECK_OK(isohash_train(&hp, train, n_train, &again));
    if (!again)
        return;
    CHECK_OK(isohash_hash(h, 1, base, 64, a));
    CHECK_OK(isohash_hash(again, 1, base, 64, b));
    CHECK(memcmp(a, b, sizeof a) == 0);
    /* shards differ: same subsample (the training set is smaller than the
     * default sample), different rotations */
    CHECK_OK(isohash_hash(h, 2, base, 64, b));
    CHECK(memcmp(a, b, sizeof a) != 0);
    {
        size_t st, r;
        const float *p1 = isohash_projection(h, 1, &st), *p2 = isohash_projection(h, 2, &st);
        double diff = 0;
        for (r = 0; r < dim; r++)
            diff += fabs((double)p1[r * st] - p2[r * st]);
        CHECK(diff > 0.1);
    }
    isohash_free(again);
    /* another seed, another hash */
    hp.seed[0] ^= 1;
    CHECK_OK(isohash_train(&hp, train, n_train, &again));
    if (again) {
        CHECK_OK(isohash_hash(again, 1, base, 64, b));
        CHECK(memcmp(a, b, sizeof a) != 0);
        isohash_free(again);
    }
    hp.seed[0] ^= 1;
}

/* The four hashing paths (loops and BLAS, per shard and all shards) give
 * the same codes: the same sums in the same order. */
static size_t bits_apart(const uint64_t *a, const uint64_t *b, size_t words)
{
    size_t i, n = 0;
    for (i = 0; i < words; i++)
        n += (size_t)__builtin_popcountll(a[i] ^ b[i]);
    return n;
}

static void test_batch_matches_single(void)
{
    uint64_t batch[2 * 50], blas[2 * 50], all[4 * 2], all_blas[4 * 2];
    size_t i, differ = 0;
    uint32_t j;
    for (j = 0; j < 4; j++) {
        CHECK_OK(isohash_hash(h, j, base, 50, batch));
        CHECK_OK(isohash_hash_sgemm(h, j, base, 50, blas));
        differ += bits_apart(batch, blas, 2 * 50);
        for (i = 0; i < 50; i++) {
            CHECK_OK(isohash_hash_all(h, base + i * dim, all));
            CHECK_OK(isohash_hash_all_sgemv(h, base + i * dim, all_blas));
            differ += bits_apart(batch + 2 * i, all + 2 * j, 2);
            differ += bits_apart(all, all_blas, 4 * 2);
        }
    }
    /* a compiler that contracts to FMA may round a near-zero projection
     * differently */
    printf("# bits differing between the hashing paths: %zu of %d\n", differ,
           3 * 4 * 50 * 128);
    CHECK(differ <= 6);
}

/* The projection loops (portable, AVX2, AVX-512: whichever the CPU has)
 * give the same float bits, not only the same codes, on the set's vectors
 * and on signed random ones, for column counts with and without a
 * remainder after the register blocks (4 x 128 and 3 x 64 columns). */
static void test_projection_paths_identical(void)
{
    struct isohash_params p3;
    struct isohash *h3 = NULL;
    float *y0 = (float *)malloc(512 * sizeof(float)), *y1 = (float *)malloc(512 * sizeof(float));
    float *xr = (float *)malloc(dim * sizeof(float));
    size_t i, r, differ = 0, compared = 0;
    int isa, cpu = isohash_project_isa();
    uint64_t s = 0x9e3779b97f4a7c15ull;
    params(&p3, 64, 3);
    CHECK_OK(isohash_train(&p3, train, n_train, &h3));
    CHECK(y0 && y1 && xr && h3);
    if (!y0 || !y1 || !xr || !h3) {
        free(y0), free(y1), free(xr), isohash_free(h3);
        return;
    }
    printf("# projection ISA on this CPU: %d\n", cpu);
    for (r = 0; r < 400; r++) {
        const struct isohash *hh = r % 2 ? h3 : h;
        size_t cols = r % 2 ? 3 * 64 : 4 * 128;
        const float *x = base + (r % n_base) * dim;
        if (r >= 200) { /* signed, of several magnitudes */
            for (i = 0; i < dim; i++) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                xr[i] = (float)((int64_t)(s >> 11) - (1ll << 52)) * 0x1p-40f;
            }
            x = xr;
        }
        CHECK_OK(isohash_project_force(0));
        CHECK_OK(isohash_project_all(hh, x, y0));
        for (isa = 1; isa <= cpu; isa++) {
            CHECK_OK(isohash_project_force(isa));
            CHECK_OK(isohash_project_all(hh, x, y1));
            differ += memcmp(y0, y1, cols * sizeof(float)) != 0;
            compared++;
        }
    }
    CHECK_RC(isohash_project_force(cpu + 1 > 2 ? 3 : cpu + 1), MESS_EINVAL);
    CHECK_OK(isohash_project_force(-1));
    CHECK(isohash_project_isa() == cpu);
    printf("# projections compared across ISAs: %zu, differing: %zu\n", compared, differ);
    CHECK(differ == 0);
    free(y0);
    free(y1);
    free(xr);
    isohash_free(h3);
}

/* Spearman rank correlation of Hamming distance and angle on pairs. */
static double rank_of(const double *v, size_t n, size_t i)
{
    size_t k, less = 0, eq = 0;
    for (k = 0; k < n; k++) {
        less += v[k] < v[i];
        eq += v[k] == v[i];
    }
    return (double)less + (double)(eq - 1) / 2.0;
}

static void test_hamming_tracks_angle(void)
{
    enum { PAIRS = 600 };
    double ham[PAIRS], ang[PAIRS], rh[PAIRS], ra[PAIRS], mh = 0, ma = 0, c = 0,
           vh = 0, va = 0, rho;
    uint64_t codes[2 * 2];
    double mu[256];
    size_t p, r, s;
    memset(mu, 0, sizeof mu);
    for (s = 0; s < n_train; s++)
        for (r = 0; r < dim; r++)
            mu[r] += train[s * dim + r] / (double)n_train;
    for (p = 0; p < PAIRS; p++) {
        const float *x = base + p * dim, *y = base + (p * 7 + 13) % n_base * dim;
        double xy = 0, xx = 0, yy = 0;
        float xs[256], ys[256];
        /* the hash sees x - mu: the angle between vectors centred on the
         * training mean (the whole learn set here) */
        for (r = 0; r < dim; r++) {
            xs[r] = x[r] - (float)mu[r];
            ys[r] = y[r] - (float)mu[r];
            xy += xs[r] * ys[r];
            xx += xs[r] * xs[r];
            yy += ys[r] * ys[r];
        }
        ang[p] = acos(xy / sqrt(xx * yy));
        isohash_hash(h, 0, x, 1, codes);
        isohash_hash(h, 0, y, 1, codes + 2);
        ham[p] = (double)(__builtin_popcountll(codes[0] ^ codes[2]) +
                          __builtin_popcountll(codes[1] ^ codes[3]));
    }
    for (p = 0; p < PAIRS; p++) {
        rh[p] = rank_of(ham, PAIRS, p);
        ra[p] = rank_of(ang, PAIRS, p);
        mh += rh[p] / PAIRS;
        ma += ra[p] / PAIRS;
    }
    for (p = 0; p < PAIRS; p++) {
        c += (rh[p] - mh) * (ra[p] - ma);
        vh += (rh[p] - mh) * (rh[p] - mh);
        va += (ra[p] - ma) * (ra[p] - ma);
    }
    rho = c / sqrt(vh * va);
    printf("# Spearman(Hamming, angle) over %d real pairs: %.3f\n", PAIRS, rho);
    CHECK(rho > 0.8);
}

static void test_bad_shapes(void)
{
    struct isohash_params p;
    struct isohash *x = NULL;
    uint64_t codes[4];
    float *bad;
    params(&p, 192, 1); /* kappa > dim without a rotation: repeated bits */
    p.rotation = ISOHASH_PCA;
    CHECK_RC(isohash_train(&p, train, n_train, &x), MESS_EINVAL);
    params(&p, 100, 1); /* not a multiple of 64 */
    CHECK_RC(isohash_train(&p, train, n_train, &x), MESS_EINVAL);
    params(&p, 0, 1);
    CHECK_RC(isohash_train(&p, train, n_train, &x), MESS_EINVAL);
    params(&p, 64, 1);
    CHECK_RC(isohash_train(&p, train, 1, &x), MESS_EINVAL);
    CHECK_RC(isohash_train(NULL, train, n_train, &x), MESS_EINVAL);
    CHECK_RC(isohash_train(&p, NULL, n_train, &x), MESS_EINVAL);
    p.tol = -1;
    CHECK_RC(isohash_train(&p, train, n_train, &x), MESS_EINVAL);
    p.tol = NAN;
    CHECK_RC(isohash_train(&p, train, n_train, &x), MESS_EINVAL);
    params(&p, 64, 1);
    p.rotation = 7;
    CHECK_RC(isohash_train(&p, train, n_train, &x), MESS_EINVAL);
    params(&p, 64, 1);
    p.dim = 0;
    CHECK_RC(isohash_train(&p, train, n_train, &x), MESS_EINVAL);
    params(&p, 64, 1);
    p.kappa = MESS_MAX_BITS + 64;
    CHECK_RC(isohash_train(&p, train, n_train, &x), MESS_ELIMIT);
    params(&p, 64, 1);
    p.shards = 0;
    CHECK_RC(isohash_train(&p, train, n_train, &x), MESS_EINVAL);
    /* a non-finite training value */
    bad = (float *)malloc(100 * dim * sizeof(float));
    if (bad) {
        params(&p, 64, 1);
        memcpy(bad, train, 100 * dim * sizeof(float));
        bad[57 * dim + 3] = NAN;
        CHECK_RC(isohash_train(&p, bad, 100, &x), MESS_EINVAL);
        bad[57 * dim + 3] = INFINITY;
        CHECK_RC(isohash_train(&p, bad, 100, &x), MESS_EINVAL);
        free(bad);
    }
    CHECK(x == NULL);
    CHECK_RC(isohash_hash(h, 4, base, 1, NULL), MESS_EINVAL);
    CHECK_RC(isohash_hash(h, 4, base, 1, codes), MESS_EINVAL);
    CHECK_RC(isohash_hash(NULL, 0, base, 1, codes), MESS_EINVAL);
    CHECK_RC(isohash_hash_all(h, NULL, codes), MESS_EINVAL);
    CHECK_RC(isohash_hash_sgemm(h, 4, base, 1, codes), MESS_EINVAL);
    CHECK_RC(isohash_hash_all_sgemv(NULL, base, codes), MESS_EINVAL);
    CHECK(isnan(isohash_residual(h, 4)) && isohash_projection(h, 4, NULL) == NULL);
}

/* The LP tolerance and iteration cap are honoured, and the target variance
 * is the mean of the projected variances. */
static void test_lp_parameters(void)
{
    struct isohash_params p;
    struct isohash *x = NULL;
    params(&p, 64, 1);
    p.max_iter = 2;
    CHECK_OK(isohash_train(&p, train, n_train, &x));
    if (x) {
        printf("# LP capped at 2 iterations: residual %.2e\n",
               isohash_residual(x, 0));
        CHECK(isohash_iterations(x, 0) == 2 && isohash_residual(x, 0) > 1e-3);
        isohash_free(x);
        x = NULL;
    }
    params(&p, 64, 1);
    p.tol = 1e-5;
    CHECK_OK(isohash_train(&p, train, n_train, &x));
    if (x) {
        printf("# LP to 1e-5: residual %.2e after %u iterations\n",
               isohash_residual(x, 0), isohash_iterations(x, 0));
        CHECK(isohash_residual(x, 0) <= 1e-5);
        isohash_free(x);
        x = NULL;
    }
    /* no LP: a random rotation leaves the variances unequal */
    params(&p, 64, 1);
    p.rotation = ISOHASH_RANDOM;
    CHECK_OK(isohash_train(&p, train, n_train, &x));
    if (x) {
        CHECK(isohash_iterations(x, 0) == 0 && isohash_residual(x, 0) > 0.05);
        isohash_free(x);
    }
}

/* kappa > dim: stacked blocks, each orthonormal and isotropic, all bits of
 * the same variance, the blocks different rotations. */
static void test_stacked_blocks(void)
{
    struct isohash_params p;
    struct isohash *x = NULL;
    const float *P;
    size_t stride, s, r;
    uint32_t a, b, i;
    double worst = 0, cross = 0, var[256], mean[256], avg = 0, spread = 0;
    params(&p, 256, 1);
    CHECK_OK(isohash_train(&p, train, n_train, &x));
    if (!x)
        return;
    P = isohash_projection(x, 0, &stride);
    for (a = 0; a < 256; a++)
        for (b = a; b < 256; b++) {
            double dot = 0;
            for (r = 0; r < dim; r++)
                dot += (double)P[r * stride + a] * P[r * stride + b];
            if (a / 128 == b / 128) {
                dot -= a == b ? 1.0 : 0.0;
                worst = fabs(dot) > worst ? fabs(dot) : worst;
            } else if (fabs(dot) > cross) {
                cross = fabs(dot);
            }
        }
    memset(var, 0, sizeof var);
    memset(mean, 0, sizeof mean);
    for (s = 0; s < n_train; s++)
        for (i = 0; i < 256; i++) {
            double y = 0;
            for (r = 0; r < dim; r++)
                y += (double)train[s * dim + r] * P[r * stride + i];
            mean[i] += y;
            var[i] += y * y;
        }
    for (i = 0; i < 256; i++) {
        mean[i] /= (double)n_train;
        var[i] = var[i] / (double)n_train - mean[i] * mean[i];
        avg += var[i] / 256;
    }
    for (i = 0; i < 256; i++)
        if (fabs(var[i] - avg) / avg > spread)
            spread = fabs(var[i] - avg) / avg;
    printf("# kappa 256 on d %zu: within-block max |P^T P - I| %.2e, largest "
           "cross-block |cos| %.3f, variance spread %.2e (LP %.2e), "
           "target %.1f vs mean %.1f\n",
           dim, worst, cross, spread, isohash_residual(x, 0),
           isohash_target_variance(x, 0), avg);
    CHECK(worst < 1e-5);
    CHECK(cross > 0.05 && cross < 0.999); /* different rotations */
    CHECK(isohash_residual(x, 0) <= ISOHASH_DEFAULT_TOL);
    CHECK(spread <= 2 * ISOHASH_DEFAULT_TOL);
    CHECK(fabs(isohash_target_variance(x, 0) - avg) / avg < 1e-4);
    isohash_free(x);
    x = NULL;

    /* a small embedding (the first 10 SIFT coordinates), 64 bits: 7 blocks
     * of 10, the last one truncated to 4 */
    {
        float *small = (float *)malloc(n_train * 10 * sizeof(float));
        uint64_t c[3];
        if (!small)
            return;
        for (s = 0; s < n_train; s++)
            memcpy(small + s * 10, train + s * dim, 10 * sizeof(float));
        memset(&p, 0, sizeof p);
        p.dim = 10;
        p.kappa = 64;
        p.shards = 3;
        memset(p.seed, 9, 32);
        CHECK_OK(isohash_train(&p, small, n_train, &x));
        if (x) {
            printf("# d 10, kappa 64: residual %.2e\n", isohash_residual(x, 0));
            CHECK(isohash_residual(x, 0) <= ISOHASH_DEFAULT_TOL);
            CHECK_OK(isohash_hash_all(x, small, c));
            CHECK(c[0] != c[1] && c[0] != 0 && c[0] != ~(uint64_t)0);
            isohash_free(x);
        }
        free(small);
    }
}

static void test_serialize(void)
{
    struct mess_wr w;
    struct mess_rd r;
    struct isohash *b = NULL;
    uint64_t a1[2 * 20], a2[2 * 20];
    size_t cut;
    mess_wr_init(&w);
    CHECK_OK(isohash_serialize(h, &w));
    mess_rd_init(&r, w.p, w.len);
    CHECK_OK(isohash_deserialize(&r, &b));
    if (b) {
        CHECK_OK(isohash_hash(h, 3, base, 20, a1));
        CHECK_OK(isohash_hash(b, 3, base, 20, a2));
        CHECK(memcmp(a1, a2, sizeof a1) == 0);
        isohash_free(b);
    }
    for (cut = 0; cut < w.len; cut += (cut < 64 ? 1 : 4093)) {
        b = NULL;
        mess_rd_init(&r, w.p, cut);
        CHECK(isohash_deserialize(&r, &b) != MESS_OK && b == NULL);
    }
    memset(w.p, 0xff, 4); /* hostile dim */
    mess_rd_init(&r, w.p, w.len);
    CHECK_RC(isohash_deserialize(&r, &b), MESS_EFORMAT);
    mess_wr_free(&w);
}

int main(void)
{
    if (test_read_sift(&base, &n_base, NULL, NULL, &train, &n_train, &dim)) {
        printf("cannot read datasets/sift\n0 passed, 1 failed\n");
        return 1;
    }
    RUN(test_train);
    if (!h) {
        HARNESS_END();
    }
    RUN(test_projection_orthonormal);
    RUN(test_equal_variances);
    RUN(test_reproducible_and_distinct);
    RUN(test_batch_matches_single);
    RUN(test_projection_paths_identical);
    RUN(test_hamming_tracks_angle);
    RUN(test_bad_shapes);
    RUN(test_lp_parameters);
    RUN(test_stacked_blocks);
    RUN(test_serialize);
    isohash_free(h);
    free(train);
    free(base);
    HARNESS_END();
}
