/*
 * test_accountant.c - the privacy accountants and the correctness model
 * against independent brute force on small instances (every output for
 * kappa <= 12, every t-subset for M <= 10, every report sequence for
 * R <= 8), symmetry, monotonicity, limits, the paper's regression value,
 * extreme sizes, and bad arguments.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../mess_experimental.h"
#include "harness.h"

#define NEAR(a, b, tol) (fabs((a) - (b)) <= (tol) * (1.0 + fabs(b)))

/* Deterministic test inputs (xorshift). */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

static int popcount32(uint32_t v)
{
    int c = 0;
    while (v) {
        v &= v - 1;
        c++;
    }
    return c;
}

/* ---- brute force: randomized response on k bits, all 2^k outputs ------- */

/* Pr[output y | clean code x], every bit flipped with probability p. */
static double rr_prob(uint32_t x, uint32_t y, int k, double p)
{
    int flips = popcount32((x ^ y) & ((1u << k) - 1));
    return pow(p, flips) * pow(1.0 - p, k - flips);
}

/* Hockey-stick divergence sum_y [P(y) - e^eps Q(y)]_+ between the output
 * distributions of clean codes x0 and x1 (k bits). */
static double brute_delta(uint32_t x0, uint32_t x1, int k, double p, double eps)
{
    double s = 0.0;
    uint32_t y;
    for (y = 0; y < (1u << k); y++) {
        double v = rr_prob(x0, y, k, p) - exp(eps) * rr_prob(x1, y, k, p);
        if (v > 0)
            s += v;
    }
    return s;
}

static void test_eta(void)
{
    double e;
    CHECK_OK(mess_account_eta(0.08, &e));
    CHECK(NEAR(e, log(0.92 / 0.08), 1e-14));
    CHECK_OK(mess_account_eta(0.5, &e));
    CHECK(e == 0.0);
    CHECK_OK(mess_account_eta(1e-300, &e));
    CHECK(isfinite(e) && e > 600);
    CHECK_RC(mess_account_eta(0.0, &e), MESS_EINVAL);
    CHECK_RC(mess_account_eta(0.6, &e), MESS_EINVAL);
    CHECK_RC(mess_account_eta(NAN, &e), MESS_EINVAL);
    CHECK_RC(mess_account_eta(0.1, NULL), MESS_EINVAL);
}

/* Corollary 5.3's binomial profile equals the hockey-stick divergence over
 * all 2^k outputs, in both directions. */
static void test_rr_profile_brute(void)
{
    const double ps[] = {0.03, 0.08, 0.21, 0.37, 0.5};
    const double epss[] = {0.0, 0.3, 1.0, 2.5, 4.0, 9.0};
    const int k = 10;
    size_t i, j;
    int u;
    for (i = 0; i < sizeof ps / sizeof ps[0]; i++)
        for (u = 0; u <= k; u++) {
            uint32_t x0 = 0x2b5 & ((1u << k) - 1), x1 = x0 ^ ((1u << u) - 1);
            for (j = 0; j < sizeof epss / sizeof epss[0]; j++) {
                double d, fwd = brute_delta(x0, x1, k, ps[i], epss[j]),
                          rev = brute_delta(x1, x0, k, ps[i], epss[j]);
                CHECK_OK(mess_account_rr_delta(ps[i], (uint64_t)u, epss[j], &d));
                CHECK(fabs(d - fwd) < 1e-13);
                CHECK(fabs(fwd - rev) < 1e-13); /* symmetric */
            }
        }
}

/* ---- route weights: every t-subset of M <= 10 shards ------------------ */

static void brute_route(const uint32_t *d, int m, int t, double *w, int len)
{
    uint32_t mask;
    int u, count = 0;
    for (u = 0; u < len; u++)
        w[u] = 0;
    for (mask = 0; mask < (1u << m); mask++) {
        int s, sum = 0;
        if (popcount32(mask) != t)
            continue;
        for (s = 0; s < m; s++)
            if (mask >> s & 1)
                sum += (int)d[s];
        w[sum] += 1;
        count++;
    }
    for (u = 0; u < len; u++)
        w[u] /= count;
}

static void test_route_weights_brute(void)
{
    int trial;
    for (trial = 0; trial < 60; trial++) {
        int m = 1 + (int)rnd(10), t = 1 + (int)rnd((uint32_t)m), s, u, largest = 0;
        uint32_t d[10], sorted[10];
        double logw[10 * 20 + 1], w[10 * 20 + 1], total = 0.0;
        size_t len;
        for (s = 0; s < m; s++)
            d[s] = rnd(trial % 3 == 0 ? 3 : 20);
        /* the pure distance is the largest t-subset sum */
        memcpy(sorted, d, sizeof d);
        {
            uint32_t mask;
            for (mask = 0; mask < (1u << m); mask++) {
                int sum = 0;
                if (popcount32(mask) != t)
                    continue;
                for (s = 0; s < m; s++)
                    if (mask >> s & 1)
                        sum += (int)d[s];
                if (sum > largest)
                    largest = sum;
            }
        }
        CHECK_OK(mess_account_route_weights(d, (size_t)m, (size_t)t, NULL, 0, &len));
        CHECK(len == (size_t)largest + 1);
        CHECK_RC(mess_account_route_weights(d, (size_t)m, (size_t)t, logw, len - 1, &len),
                 MESS_ELIMIT);
        CHECK_OK(mess_account_route_weights(d, (size_t)m, (size_t)t, logw, len, &len));
        brute_route(d, m, t, w, (int)len);
        for (u = 0; u < (int)len; u++) {
            CHECK(fabs(exp(logw[u]) - w[u]) < 1e-14);
            CHECK((w[u] == 0) == (logw[u] == -INFINITY));
            total += exp(logw[u]);
        }
        CHECK(fabs(total - 1.0) < 1e-13);
        {
            double xi, eta;
            CHECK_OK(mess_account_stored_pure(0.1, d, (size_t)m, (size_t)t, &xi));
            mess_account_eta(0.1, &eta);
            CHECK(NEAR(xi, eta * largest, 1e-14));
        }
    }
}

/* The route-averaged profile against the complete view enumerated: every
 * t-subset route, every output of its t * k bits, both directions. */
static void test_mixture_brute(void)
{
    const int m = 5, t = 2, k = 4; /* 8 released bits per route */
    const double ps[] = {0.08, 0.2, 0.45};
    uint32_t d[5] = {1, 3, 0, 4, 2};
    double logw[9];
    size_t len, ip, ie;
    int routes = 0;
    uint32_t mask;
    CHECK_OK(mess_account_route_weights(d, m, t, logw, 9, &len));
    for (mask = 0; mask < (1u << m); mask++)
        routes += popcount32(mask) == t;
    for (ip = 0; ip < 3; ip++) {
        mess_account_pld *pld;
        double p = ps[ip];
        CHECK_OK(mess_account_pld_new(p, logw, len, &pld));
        for (ie = 0; ie < 8; ie++) {
            double eps = 0.6 * (double)ie, fwd = 0, rev = 0, got;
            for (mask = 0; mask < (1u << m); mask++) {
                uint32_t x0 = 0, x1 = 0;
                int s, pos = 0;
                if (popcount32(mask) != t)
                    continue;
                /* the route's t blocks concatenated; x1 differs from x0 in
                 * d_s bits of block s */
                for (s = 0; s < m; s++)
                    if (mask >> s & 1) {
                        x1 |= ((1u << d[s]) - 1) << pos;
                        pos += k;
                    }
                (void)x0;
                fwd += brute_delta(x0, x1, t * k, p, eps) / routes;
                rev += brute_delta(x1, x0, t * k, p, eps) / routes;
            }
            CHECK_OK(mess_account_pld_delta(pld, eps, &got));
            CHECK(fabs(got - fwd) < 1e-12);
            CHECK(fabs(fwd - rev) < 1e-12);
        }
        /* inversion: delta(xi) <= delta0 < delta(xi - 1e-6) */
        {
            double xi, a, b;
            CHECK_OK(mess_account_pld_epsilon(pld, 0.01, &xi));
            mess_account_pld_delta(pld, xi, &a);
            mess_account_pld_delta(pld, xi > 2e-6 ? xi - 2e-6 : 0, &b);
            CHECK(a <= 0.01);
            CHECK(xi == 0 || b > 0.01);
        }
        mess_account_pld_free(pld);
    }
}

/* Tail bound of Corollary 5.3 against the exact augmented tail. */
static void test_tail(void)
{
    uint32_t d[8] = {2, 5, 0, 7, 3, 3, 1, 6};
    double logw[64], bound, exact, prev = 2.0;
    size_t len;
    mess_account_pld *pld;
    int i;
    CHECK_OK(mess_account_route_weights(d, 8, 3, logw, 64, &len));
    CHECK_OK(mess_account_pld_new(0.1, logw, len, &pld));
    for (i = 0; i <= 40; i++) {
        double eps = 1.5 * i;
        CHECK_OK(mess_account_pld_tail(pld, eps, &bound, &exact));
        CHECK(exact <= bound + 1e-15);
        CHECK(bound <= prev + 1e-15); /* non-increasing */
        prev = bound;
    }
    CHECK(bound < 1e-6); /* beyond eta * 18 = 39.5 nothing is left */
    CHECK_OK(mess_account_pld_tail(pld, 0.0, &bound, NULL));
    CHECK(bound == 1.0);
    CHECK_RC(mess_account_pld_tail(pld, -1.0, &bound, NULL), MESS_EINVAL);
    mess_account_pld_free(pld);
}

static void test_stored(void)
{
    uint32_t d[16], dp[16];
    mess_account_stored_result r, r2, rf;
    double prev = INFINITY;
    int s, i;
    for (s = 0; s < 16; s++)
        d[s] = (uint32_t)(s * 5 % 13);
    CHECK_OK(mess_account_stored(0.08, d, 16, 4, 0, 1e-5, &r));
    CHECK(r.u_max == 12 + 11 + 10 + 10);
    CHECK(r.xi_pld <= r.xi_pure + 1e-12 && r.xi_pld > 0);
    CHECK(r.u_mean > 0 && r.u_mean < r.u_max);
    /* a permutation of the shards changes nothing */
    for (s = 0; s < 16; s++)
        dp[s] = d[(s * 7) % 16];
    CHECK_OK(mess_account_stored(0.08, dp, 16, 4, 0, 1e-5, &r2));
    CHECK(r2.xi_pld == r.xi_pld && r2.u_max == r.u_max);
    /* identifier-fixed on the 4 worst shards: at least the averaged value */
    {
        uint32_t worst[4] = {12, 11, 10, 10};
        CHECK_OK(mess_account_stored(0.08, worst, 4, 4, 1, 1e-5, &rf));
        CHECK(rf.xi_pure == r.xi_pure && rf.xi_pld >= r.xi_pld);
        CHECK(rf.u_mean == 43.0);
    }
    /* monotone: larger p, smaller eps; larger distances, larger eps */
    for (i = 1; i <= 10; i++) {
        CHECK_OK(mess_account_stored(0.05 * i, d, 16, 4, 0, 1e-5, &r2));
        CHECK(r2.xi_pld <= prev);
        prev = r2.xi_pld;
    }
    CHECK(prev == 0.0); /* p = 1/2 */
    for (s = 0; s < 16; s++)
        dp[s] = d[s] + 1;
    CHECK_OK(mess_account_stored(0.08, dp, 16, 4, 0, 1e-5, &r2));
    CHECK(r2.xi_pld > r.xi_pld);
    /* smaller delta, larger eps */
    CHECK_OK(mess_account_stored(0.08, d, 16, 4, 0, 1e-9, &r2));
    CHECK(r2.xi_pld >= r.xi_pld);
    /* one shard, fixed: the single-shard randomized response */
    {
        uint32_t one = 7;
        mess_account_pld *pld;
        double lw[8], xi;
        for (s = 0; s < 8; s++)
            lw[s] = s == 7 ? 0.0 : -INFINITY;
        CHECK_OK(mess_account_stored(0.2, &one, 1, 1, 1, 1e-3, &rf));
        CHECK_OK(mess_account_pld_new(0.2, lw, 8, &pld));
        CHECK_OK(mess_account_pld_epsilon(pld, 1e-3, &xi));
        CHECK(xi == rf.xi_pld);
        mess_account_pld_free(pld);
    }
    /* bad input */
    CHECK_RC(mess_account_stored(0.0, d, 16, 4, 0, 1e-5, &r), MESS_EINVAL);
    CHECK_RC(mess_account_stored(0.08, d, 16, 17, 0, 1e-5, &r), MESS_EINVAL);
    CHECK_RC(mess_account_stored(0.08, d, 16, 0, 0, 1e-5, &r), MESS_EINVAL);
    CHECK_RC(mess_account_stored(0.08, d, 16, 4, 1, 1e-5, &r), MESS_EINVAL);
    CHECK_RC(mess_account_stored(0.08, d, 16, 4, 0, 0.0, &r), MESS_EINVAL);
    CHECK_RC(mess_account_stored(0.08, d, 16, 4, 0, 1.0, &r), MESS_EINVAL);
    CHECK_RC(mess_account_stored(0.08, NULL, 16, 4, 0, 1e-5, &r), MESS_EINVAL);
    CHECK_RC(mess_account_stored(0.08, d, 16, 4, 0, 1e-5, NULL), MESS_EINVAL);
    dp[3] = MESS_MAX_BITS + 1;
    CHECK_RC(mess_account_stored(0.08, dp, 16, 4, 0, 1e-5, &r), MESS_EINVAL);
}

/* ---- brute force: version histories under memoized storage coins ------ */

/* Output distribution of the stored codes of v versions (k bits each; the
 * output index is version 0's bits, then version 1's, ...) for clean codes
 * h[0..v-1]: per position two coins F0, F1 drawn once, version j stores
 * c ^ F_c (src/client/client_update.c, store_perturb). */
static void history_dist(const uint32_t *h, int v, int k, double p, double *out)
{
    uint32_t f0, f1, full = (1u << k) - 1;
    int j;
    memset(out, 0, sizeof(double) << (v * k));
    for (f0 = 0; f0 <= full; f0++)
        for (f1 = 0; f1 <= full; f1++) {
            double pr = pow(p, popcount32(f0) + popcount32(f1)) *
                        pow(1.0 - p, 2 * k - popcount32(f0) - popcount32(f1));
            uint32_t y = 0;
            for (j = 0; j < v; j++) {
                uint32_t c = h[j];
                y |= (c ^ ((~c & f0) | (c & f1))) << (j * k);
            }
            out[y] += pr;
        }
}

static double hockey(const double *a, const double *b, size_t n, double eps)
{
    double s = 0.0;
    size_t y;
    for (y = 0; y < n; y++)
        if (a[y] - exp(eps) * b[y] > 0)
            s += a[y] - exp(eps) * b[y];
    return s;
}

/* The theorem of docs/PRIVACY.md, "Versions of an item": two histories
 * differing by the same mask D in every version have exactly the
 * randomized-response profile (both directions) and pure loss on
 * |D| + |D & changed| bits, for any number of versions; a position that
 * changes in one history and not in the other gives
 * delta(eps) = (1-p)^2 + p^2 for every eps. */
static void test_versions_brute(void)
{
    const double ps[] = {0.08, 0.21};
    const double epss[] = {0.0, 0.7, 2.0, 4.5};
    enum { K = 3, V = 3 };
    static double a[1 << (K * V)], b[1 << (K * V)];
    size_t y;
    int pi, trial, e, checked = 0;
    for (pi = 0; pi < 2; pi++) {
        double p = ps[pi], eta = log((1 - p) / p);
        for (trial = 0; trial < 60; trial++) {
            int v = 2 + trial % 2, k = K, j;
            uint32_t h[V], h2[V], mask = rnd(8), changed = 0, u;
            double maxlr = 0.0, ref;
            for (j = 0; j < v; j++) {
                h[j] = rnd(8);
                h2[j] = h[j] ^ mask;
                changed |= h[j] ^ h[0];
            }
            u = (uint32_t)(popcount32(mask) + popcount32(mask & changed));
            history_dist(h, v, k, p, a);
            history_dist(h2, v, k, p, b);
            for (e = 0; e < 4; e++) {
                CHECK_OK(mess_account_rr_delta(p, u, epss[e], &ref));
                CHECK(NEAR(hockey(a, b, (size_t)1 << (v * k), epss[e]), ref, 1e-12));
                CHECK(NEAR(hockey(b, a, (size_t)1 << (v * k), epss[e]), ref, 1e-12));
            }
            for (y = 0; y < ((size_t)1 << (v * k)); y++) {
                CHECK((a[y] > 0) == (b[y] > 0)); /* same change pattern */
                if (a[y] > 0)
                    maxlr = fmax(maxlr, fabs(log(a[y] / b[y])));
            }
            CHECK(NEAR(maxlr, eta * u, 1e-9));
            checked++;
        }
        /* a position changing in one history only: an event of probability
         * (1-p)^2 + p^2 that the other history never produces */
        {
            uint32_t h[2] = {0, 1}, h2[2] = {0, 0};
            double shown, err, eta2;
            history_dist(h, 2, 1, p, a);
            history_dist(h2, 2, 1, p, b);
            CHECK_OK(mess_account_version_bits(p, &eta2, &shown, &err));
            for (e = 0; e < 4; e++)
                CHECK(NEAR(hockey(a, b, 4, epss[e]), shown, 1e-12));
            CHECK(NEAR(eta2, 2 * eta, 1e-14));
            CHECK(NEAR(shown, (1 - p) * (1 - p) + p * p, 1e-14));
            CHECK(NEAR(err, 1.0 / (1.0 + exp(eta2)), 1e-12));
            /* given a changed stored bit, Pr[stored == clean] from the
             * distribution itself: output 2 (v0 = 0, v1 = 1) reads right, 1 wrong */
            CHECK(NEAR(a[1] / (a[1] + a[2]), err, 1e-12)); /* y = v0 | v1 << 1 */
        }
    }
    CHECK(checked == 120);
}

/* The history accountant is the stored one on d + changed. */
static void test_versions(void)
{
    uint32_t d[8] = {5, 0, 9, 3, 12, 7, 1, 4}, c[8] = {5, 0, 2, 0, 12, 3, 1, 0}, e[8];
    mess_account_stored_result r, ref;
    int s;
    for (s = 0; s < 8; s++)
        e[s] = d[s] + c[s];
    CHECK_OK(mess_account_versions(0.08, d, c, 8, 3, 0, 1e-5, &r));
    CHECK_OK(mess_account_stored(0.08, e, 8, 3, 0, 1e-5, &ref));
    CHECK(r.xi_pld == ref.xi_pld && r.xi_pure == ref.xi_pure && r.u_max == ref.u_max);
    /* NULL: every differing bit changes, twice the distances */
    for (s = 0; s < 8; s++)
        e[s] = 2 * d[s];
    CHECK_OK(mess_account_versions(0.08, d, NULL, 8, 3, 0, 1e-5, &r));
    CHECK_OK(mess_account_stored(0.08, e, 8, 3, 0, 1e-5, &ref));
    CHECK(r.xi_pld == ref.xi_pld && r.xi_pure == ref.xi_pure);
    CHECK(NEAR(r.xi_pure, 2 * (12 + 9 + 7) * log(0.92 / 0.08), 1e-12));
    /* no change: one snapshot */
    memset(c, 0, sizeof c);
    CHECK_OK(mess_account_versions(0.08, d, c, 8, 3, 0, 1e-5, &r));
    CHECK_OK(mess_account_stored(0.08, d, 8, 3, 0, 1e-5, &ref));
    CHECK(r.xi_pld == ref.xi_pld);
    /* fixed route, distances past MESS_MAX_BITS once doubled */
    {
        uint32_t big[2] = {MESS_MAX_BITS, MESS_MAX_BITS - 1};
        CHECK_OK(mess_account_versions(0.08, big, NULL, 2, 2, 1, 1e-5, &r));
        CHECK(r.u_max == 4 * (uint64_t)MESS_MAX_BITS - 2);
    }
    c[2] = 10; /* more changed than differing */
    CHECK_RC(mess_account_versions(0.08, d, c, 8, 3, 0, 1e-5, &r), MESS_EINVAL);
    CHECK_RC(mess_account_versions(0.0, d, NULL, 8, 3, 0, 1e-5, &r), MESS_EINVAL);
    CHECK_RC(mess_account_versions(0.08, NULL, NULL, 8, 3, 0, 1e-5, &r), MESS_EINVAL);
    CHECK_RC(mess_account_versions_sized(0.08, d, NULL, 8, 3, 0, 1e-5, &r, 4),
             MESS_EINVAL);
    CHECK_RC(mess_account_version_bits(0.0, NULL, NULL, NULL), MESS_EINVAL);
    CHECK_RC(mess_account_version_bits(0.51, NULL, NULL, NULL), MESS_EINVAL);
    CHECK_OK(mess_account_version_bits(0.5, NULL, NULL, NULL));
}

/* A number of the summary's JSON line. */
static double summary_num(const char *text, const char *key)
{
    char pat[64];
    const char *at;
    snprintf(pat, sizeof pat, "\"%s\":", key);
    at = strstr(text, pat);
    return at ? strtod(at + strlen(pat), NULL) : NAN;
}

/* The bottom line: its numbers are the accountants', its length query and
 * its refusals. */
static void test_summary(void)
{
    mess_params p;
    char *text, small[16];
    size_t len = 0, len2 = 0;
    double xi, eta2, shown, err;
    mess_params_default(&p, 128);
    p.shards = 4;
    p.per_item = 2;
    CHECK_OK(mess_account_summary(&p, 0.05, 1e-5, NULL, 0, &len));
    CHECK(len > 500);
    text = (char *)malloc(len + 1);
    if (!text)
        return;
    CHECK_OK(mess_account_summary(&p, 0.05, 1e-5, text, len + 1, &len2));
    CHECK(len2 == len && strlen(text) == len && text[len - 1] == '\n');
    CHECK(strstr(text, "What the server sees") && strstr(text, "What it cannot conclude") &&
          strstr(text, "What it can conclude"));
    CHECK(NEAR(summary_num(text, "eta_D"), log(0.92 / 0.08), 1e-8));
    CHECK_OK(mess_account_random_lsh(0.08, 2 * 128, 0.05, 1e-5, &xi, NULL));
    CHECK(NEAR(summary_num(text, "item_xi_pld"), xi, 1e-8));
    CHECK_OK(mess_account_version_bits(0.08, &eta2, &shown, &err));
    CHECK(NEAR(summary_num(text, "update_shown"), shown, 1e-8));
    CHECK(NEAR(summary_num(text, "update_read_error"), err, 1e-8));
    CHECK(NEAR(summary_num(text, "eta_changed"), eta2, 1e-8));
    CHECK(NEAR(summary_num(text, "update_far_share"), shown / 2, 1e-8));
    CHECK(summary_num(text, "delete_entries") == 2.0);
    CHECK(summary_num(text, "payload_bytes") == (double)mess_payload_size(&p));
    /* (1 + TV) / 2 with TV the profile at 0: the mixture's xi is 0 at
     * delta just above TV and positive just below */
    {
        double tv = summary_num(text, "item_entry_tv"), x0, x1;
        CHECK(tv > 0 && tv < 1);
        CHECK_OK(mess_account_random_lsh(0.08, 128, 0.05, tv * (1 + 1e-7), &x0, NULL));
        CHECK_OK(mess_account_random_lsh(0.08, 128, 0.05, tv * (1 - 1e-7), &x1, NULL));
        CHECK(x0 == 0.0 && x1 > 0.0);
    }
    /* the 60% angles: at them the guess is right with probability 0.6 */
    {
        double a = summary_num(text, "item_angle_60"), d;
        mess_account_pld *pld;
        double *lw = (double *)malloc(257 * sizeof *lw);
        int u;
        CHECK(a > 0 && a < 0.05);
        for (u = 0; lw && u <= 256; u++)
            lw[u] = u * log(a) + (256 - u) * log1p(-a) + lgamma(257) - lgamma(u + 1) -
                    lgamma(257 - u);
        if (lw) {
            CHECK_OK(mess_account_pld_new(0.08, lw, 257, &pld));
            CHECK_OK(mess_account_pld_delta(pld, 0.0, &d));
            CHECK(fabs((1 + d) / 2 - 0.6) < 1e-6);
            mess_account_pld_free(pld);
        }
        free(lw);
    }
    CHECK_RC(mess_account_summary(&p, 0.05, 1e-5, small, sizeof small, &len2),
             MESS_ELIMIT);
    CHECK(len2 == len);
    CHECK_RC(mess_account_summary(&p, 0.0, 1e-5, NULL, 0, &len), MESS_EINVAL);
    CHECK_RC(mess_account_summary(&p, 0.6, 1e-5, NULL, 0, &len), MESS_EINVAL);
    CHECK_RC(mess_account_summary(&p, 0.05, 0.0, NULL, 0, &len), MESS_EINVAL);
    CHECK_RC(mess_account_summary(NULL, 0.05, 1e-5, NULL, 0, &len), MESS_EINVAL);
    CHECK_RC(mess_account_summary(&p, 0.05, 1e-5, NULL, 0, NULL), MESS_EINVAL);
    p.p_store = 0.0;
    CHECK_RC(mess_account_summary(&p, 0.05, 1e-5, NULL, 0, &len), MESS_EINVAL);
    free(text);
}

/* Extreme sizes: kappa 4096, M 1024, p near 0 and near 1/2. */
static void test_extremes(void)
{
    static uint32_t d[MESS_MAX_SHARDS];
    mess_account_stored_result r;
    size_t s, len;
    const double ps[] = {1e-9, 0.08, 0.4999999};
    size_t i;
    for (s = 0; s < MESS_MAX_SHARDS; s++)
        d[s] = MESS_MAX_BITS;
    for (i = 0; i < 3; i++) {
        CHECK_OK(mess_account_stored(ps[i], d, MESS_MAX_SHARDS, MESS_MAX_SHARDS, 1,
                                     1e-10, &r));
        CHECK(isfinite(r.xi_pld) && r.xi_pld > 0 && r.xi_pld <= r.xi_pure);
    }
    /* M = 1024, t = 16, near-pair distances: the paper's scale */
    for (s = 0; s < MESS_MAX_SHARDS; s++)
        d[s] = rnd(60);
    CHECK_OK(mess_account_stored(0.08, d, MESS_MAX_SHARDS, 16, 0, 1e-6, &r));
    CHECK(isfinite(r.xi_pld) && r.xi_pld > 0 && r.xi_pld < r.xi_pure);
    /* the programme's limits give MESS_ELIMIT, not a crash or a huge stall */
    for (s = 0; s < MESS_MAX_SHARDS; s++)
        d[s] = MESS_MAX_BITS;
    CHECK_OK(mess_account_route_weights(d, MESS_MAX_SHARDS, 512, NULL, 0, &len));
    CHECK(len == 512u * MESS_MAX_BITS + 1);
    {
        double *lw = (double *)malloc(len * sizeof *lw);
        CHECK(lw != NULL);
        if (lw)
            CHECK_RC(mess_account_route_weights(d, MESS_MAX_SHARDS, 512, lw, len, &len),
                     MESS_ELIMIT);
        free(lw);
    }
    CHECK_RC(mess_account_route_weights(d, MESS_MAX_SHARDS + 1, 2, NULL, 0, &len),
             MESS_ELIMIT);
    {
        double e;
        CHECK_OK(mess_account_rr_delta(0.3, (uint64_t)MESS_MAX_SHARDS * MESS_MAX_BITS,
                                       5.0, &e));
        CHECK(isfinite(e) && e > 0 && e <= 1);
        CHECK_RC(mess_account_rr_delta(0.3, (uint64_t)MESS_MAX_SHARDS * MESS_MAX_BITS + 1,
                                       5.0, &e),
                 MESS_ELIMIT);
    }
}

/* ---- query accountants: every report sequence for R <= 8 ---------------- */

/* Pr[reports y (R bits) | clean bit v] with a permanent report from PRR a and
 * IRR b on every submission. */
static double seq_prob(int v, uint32_t y, int R, double a, double b)
{
    double s = 0;
    int z, j;
    for (z = 0; z <= 1; z++) {
        double pr = z == v ? 1 - a : a;
        for (j = 0; j < R; j++)
            pr *= ((int)(y >> j & 1) == z) ? 1 - b : b;
        s += pr;
    }
    return s;
}

static void test_access_brute(void)
{
    const double as[] = {0.0, 0.02, 0.0417424, 0.1, 0.3, 0.5};
    const double bs[] = {0.0, 0.0417424, 0.15, 0.49};
    size_t i, j;
    int R;
    for (i = 0; i < 6; i++)
        for (j = 0; j < 4; j++)
            for (R = 1; R <= 8; R++) {
                double a = as[i], b = bs[j], best = 0, eta;
                uint32_t y;
                if (a + b == 0) {
                    CHECK_RC(mess_account_access(a, b, (uint64_t)R, &eta), MESS_EINVAL);
                    continue;
                }
                for (y = 0; y < (1u << R); y++) {
                    double l = fabs(log(seq_prob(0, y, R, a, b)) - log(seq_prob(1, y, R, a, b)));
                    if (l > best)
                        best = l;
                }
                CHECK_OK(mess_account_access(a, b, (uint64_t)R, &eta));
                CHECK(NEAR(eta, best, 1e-12));
            }
}

static void test_access_limits(void)
{
    double e, prev = 0, a = 0.0417424, pq = mess_effective_flip(a, a);
    uint64_t R;
    CHECK_OK(mess_account_access(a, a, 1, &e));
    CHECK(NEAR(e, log((1 - pq) / pq), 1e-13)); /* R = 1: one report */
    for (R = 1; R <= 1000000; R *= 10) {
        CHECK_OK(mess_account_access(a, a, R, &e));
        CHECK(e >= prev && isfinite(e)); /* grows with R ... */
        prev = e;
    }
    CHECK(NEAR(e, log((1 - a) / a), 1e-12)); /* ... up to the permanent report */
    CHECK_OK(mess_account_access(a, a, MESS_ACCOUNT_MAX_REPEATS, &e));
    CHECK(NEAR(e, log((1 - a) / a), 1e-12));
    CHECK_OK(mess_account_access(0.5, 0.5, 7, &e));
    CHECK(e == 0.0);
    CHECK_OK(mess_account_access(0.2, 0.1, 5, &prev));
    CHECK_OK(mess_account_access(0.3, 0.1, 5, &e));
    CHECK(e < prev); /* more noise, less leakage */
    CHECK_RC(mess_account_access(a, a, 0, &e), MESS_EINVAL);
    CHECK_RC(mess_account_access(a, a, MESS_ACCOUNT_MAX_REPEATS + 1, &e), MESS_ELIMIT);
    CHECK_RC(mess_account_access(-0.1, a, 3, &e), MESS_EINVAL);
    CHECK_RC(mess_account_access(a, 0.7, 3, &e), MESS_EINVAL);
    CHECK_RC(mess_account_access(a, NAN, 3, &e), MESS_EINVAL);
    CHECK_RC(mess_account_access(a, a, 3, NULL), MESS_EINVAL);
}

/* Reuse and split distributions of section 5.2.4 over all 2^R sequences. */
static double reuse_prob(int v, uint32_t y, int R, double a, double b)
{
    return seq_prob(v, y, R, a, b);
}

static double split_prob(int v, int vp, uint32_t y, int R, double a, double b)
{
    return seq_prob(v, y & ((1u << (R - 1)) - 1), R - 1, a, b) *
           seq_prob(vp, y >> (R - 1) & 1, 1, a, b);
}

static void test_search_brute(void)
{
    const double as[] = {0.0, 0.0417424, 0.1, 0.25, 0.5};
    const double bs[] = {0.0417424, 0.1, 0.3, 0.5};
    size_t i, j;
    int R;
    for (i = 0; i < 5; i++)
        for (j = 0; j < 4; j++)
            for (R = 1; R <= 8; R++) {
                double a = as[i], b = bs[j], geq = 0, gne = 0, e, n;
                uint32_t y;
                int v;
                for (v = 0; v <= 1; v++)
                    for (y = 0; y < (1u << R); y++) {
                        double ru = log(reuse_prob(v, y, R, a, b));
                        double l1 = fabs(ru - log(split_prob(v, v, y, R, a, b)));
                        double l2 = fabs(ru - log(split_prob(v, 1 - v, y, R, a, b)));
                        geq = l1 > geq ? l1 : geq;
                        gne = l2 > gne ? l2 : gne;
                    }
                CHECK_OK(mess_account_search(a, b, (uint64_t)R, &e, &n));
                CHECK(fabs(e - geq) < 1e-12 * (1 + geq));
                CHECK(fabs(n - gne) < 1e-12 * (1 + gne));
                if (R == 1) {
                    double eta1;
                    mess_account_access(a, b, 1, &eta1);
                    CHECK(e < 1e-15);        /* nothing to reuse */
                    CHECK(NEAR(n, eta1, 1e-13)); /* a single report */
                }
            }
}

/* The extreme-count rule used for large R agrees with full enumeration. */
static double endpoint_gamma(double a, double b, double R, int ne)
{
    double best = 0, lb = log(b), l1b = log1p(-b), la = log(a), l1a = log1p(-a);
    double ks[2];
    int ik, v, y, z;
    ks[0] = 0;
    ks[1] = R - 1;
    for (ik = 0; ik < 2; ik++)
        for (v = 0; v <= 1; v++)
            for (y = 0; y <= 1; y++) {
                int vp = ne ? 1 - v : v;
                double k = ks[ik], rest = R - 1 - k, reuse = 0, first = 0, last = 0;
                for (z = 0; z <= 1; z++) {
                    double lf = z ? k * l1b + rest * lb : k * lb + rest * l1b;
                    double lr = z == v ? l1a : la, lrp = z == vp ? l1a : la;
                    double li = z == y ? l1b : lb;
                    reuse += exp(lr + lf + li - (R * l1b));
                    first += exp(lr + lf - ((R - 1) * l1b));
                    last += exp(lrp + li);
                }
                {
                    double l = fabs(log(reuse) - log(first) - log(last) + l1b);
                    best = l > best ? l : best;
                }
            }
    return best;
}

static void test_search_large(void)
{
    const double a = 0.0417424, b = 0.0417424;
    double e, n;
    uint64_t R;
    for (R = 2; R <= 70000; R = R * 3 + 1) { /* crosses the 2^16 switch */
        CHECK_OK(mess_account_search(a, b, R, &e, &n));
        CHECK(NEAR(e, endpoint_gamma(a, b, (double)R, 0), 1e-10));
        CHECK(NEAR(n, endpoint_gamma(a, b, (double)R, 1), 1e-10));
    }
    CHECK_OK(mess_account_search(0.1, 0.2, 1000000, &e, &n));
    CHECK(isfinite(e) && isfinite(n) && e > 0 && n >= e);
    CHECK_OK(mess_account_search(0.1, 0.2, MESS_ACCOUNT_MAX_REPEATS, &e, &n));
    CHECK(isfinite(e) && isfinite(n));
    CHECK_OK(mess_account_search(0.5, 0.5, 10, &e, &n));
    CHECK(e == 0.0 && n == 0.0);
    {
        double xi, xu;
        CHECK_OK(mess_account_search(a, b, 10, &e, &n));
        CHECK_OK(mess_account_search_xi(a, b, 10, 8192, 300, &xi, &xu));
        CHECK(NEAR(xi, (8192 - 300) * e + 300 * n, 1e-14));
        CHECK(NEAR(xu, 8192 * (e > n ? e : n), 1e-14));
        CHECK(xi <= xu);
        CHECK_RC(mess_account_search_xi(a, b, 10, 100, 101, &xi, &xu), MESS_EINVAL);
        CHECK_RC(mess_account_search_xi(a, b, 10, 0, 0, &xi, &xu), MESS_EINVAL);
    }
    CHECK_RC(mess_account_search(a, 0.0, 3, &e, &n), MESS_EINVAL);
    CHECK_RC(mess_account_search(a, b, 0, &e, &n), MESS_EINVAL);
    CHECK_RC(mess_account_search(a, b, MESS_ACCOUNT_MAX_REPEATS + 1, &e, &n), MESS_ELIMIT);
    CHECK_RC(mess_account_search(0.6, b, 3, &e, &n), MESS_EINVAL);
    CHECK_RC(mess_account_search(a, b, 3, NULL, &n), MESS_EINVAL);
}

/* ---- random-hyperplane LSH regression (Appendix A.2.6) ------------------ */

/* The exact mixture, summed directly with lgamma probabilities. */
static double mixture_delta(double p, int kappa, double dt, double eps)
{
    double eta = log((1 - p) / p), s = 0;
    int u, z;
    for (u = 0; u <= kappa; u++) {
        double lw = lgamma(kappa + 1.0) - lgamma(u + 1.0) - lgamma(kappa - u + 1.0) +
                    u * log(dt) + (kappa - u) * log1p(-dt);
        for (z = 0; z <= u; z++) {
            double loss = (2.0 * z - u) * eta;
            double lz = lgamma(u + 1.0) - lgamma(z + 1.0) - lgamma(u - z + 1.0) +
                        z * log1p(-p) + (u - z) * log(p);
            if (loss > eps)
                s += exp(lw + lz) * (1 - exp(eps - loss));
        }
    }
    return s;
}

static void test_random_lsh(void)
{
    double xm, xc, lo = 0, hi = 200;
    int i;
    CHECK_OK(mess_account_random_lsh(0.21, 128, 0.05, 0.01, &xm, &xc));
    CHECK(fabs(xc - 20.041) < 5e-4); /* the paper's regression value */
    for (i = 0; i < 60; i++) {
        double mid = 0.5 * (lo + hi);
        if (mixture_delta(0.21, 128, 0.05, mid) <= 0.01)
            hi = mid;
        else
            lo = mid;
    }
    CHECK(fabs(xm - hi) < 1e-7);
    CHECK(xm < xc); /* the exact mixture is tighter */
    CHECK_OK(mess_account_random_lsh(0.21, 128, 0.0, 0.01, &xm, &xc));
    CHECK(xm == 0.0 && xc == 0.0);
    CHECK_OK(mess_account_random_lsh(0.5, 128, 0.3, 0.01, &xm, &xc));
    CHECK(xm == 0.0 && xc == 0.0);
    CHECK_OK(mess_account_random_lsh(0.21, 4096, 0.5, 1e-12, &xm, NULL));
    CHECK(isfinite(xm) && xm > 0);
    CHECK_RC(mess_account_random_lsh(0.21, 0, 0.05, 0.01, &xm, &xc), MESS_EINVAL);
    CHECK_RC(mess_account_random_lsh(0.21, 4097, 0.05, 0.01, &xm, &xc), MESS_ELIMIT);
    CHECK_RC(mess_account_random_lsh(0.21, 128, 1.5, 0.01, &xm, &xc), MESS_EINVAL);
    CHECK_RC(mess_account_random_lsh(0.21, 128, 0.05, 1e-30, &xm, &xc), MESS_EINVAL);
}

static void test_pld_args(void)
{
    double lw[3] = {-INFINITY, -INFINITY, -INFINITY}, x;
    mess_account_pld *pld = NULL;
    CHECK_RC(mess_account_pld_new(0.1, lw, 3, &pld), MESS_EINVAL);
    CHECK(pld == NULL);
    lw[1] = NAN;
    CHECK_RC(mess_account_pld_new(0.1, lw, 3, &pld), MESS_EINVAL);
    lw[1] = INFINITY;
    CHECK_RC(mess_account_pld_new(0.1, lw, 3, &pld), MESS_EINVAL);
    lw[1] = 5.0; /* unnormalised weights are normalised */
    CHECK_RC(mess_account_pld_new(0.0, lw, 3, &pld), MESS_EINVAL);
    CHECK_RC(mess_account_pld_new(0.1, lw, 0, &pld), MESS_EINVAL);
    CHECK_RC(mess_account_pld_new(0.1, NULL, 3, &pld), MESS_EINVAL);
    CHECK_OK(mess_account_pld_new(0.1, lw, 3, &pld));
    {
        double d1;
        CHECK_OK(mess_account_rr_delta(0.1, 1, 0.5, &d1));
        CHECK_OK(mess_account_pld_delta(pld, 0.5, &x));
        CHECK(fabs(x - d1) < 1e-15);
    }
    CHECK_RC(mess_account_pld_delta(pld, -0.1, &x), MESS_EINVAL);
    CHECK_RC(mess_account_pld_delta(pld, NAN, &x), MESS_EINVAL);
    CHECK_RC(mess_account_pld_epsilon(pld, 0.0, &x), MESS_EINVAL);
    CHECK_RC(mess_account_pld_epsilon(NULL, 0.1, &x), MESS_EINVAL);
    mess_account_pld_free(pld);
    mess_account_pld_free(NULL);
}

/* ---- correctness model ------------------------------------------------ */

static void test_plan_pieces(void)
{
    double pp, pr, prev = 1.0, mean, var, h;
    double count[129];
    uint32_t d;
    CHECK_OK(mess_plan_compound_flip(0.08, 0.08, &pp));
    CHECK(NEAR(pp, 0.08 * 0.92 * 2, 1e-15));
    CHECK_OK(mess_plan_compound_flip(0.0, 0.12, &pp));
    CHECK(pp == 0.12);
    CHECK_RC(mess_plan_compound_flip(0.6, 0.1, &pp), MESS_EINVAL);
    /* overtaking: 1/2 at a tie, falls with the background distance */
    CHECK_OK(mess_plan_overtake(128, 0.1472, 20, 20, &pr));
    CHECK(pr == 0.5);
    for (d = 0; d <= 128; d++) {
        CHECK_OK(mess_plan_overtake(128, 0.1472, 20, d, &pr));
        CHECK(pr <= prev);
        prev = pr;
    }
    CHECK_OK(mess_plan_overtake(128, 0.0, 20, 19, &pr));
    CHECK(pr == 1.0);
    CHECK_OK(mess_plan_overtake(128, 0.0, 20, 21, &pr));
    CHECK(pr == 0.0);
    CHECK_OK(mess_plan_overtake(128, 0.5, 0, 128, &pr));
    CHECK(pr == 0.5);
    CHECK_RC(mess_plan_overtake(128, 0.1, 129, 0, &pr), MESS_EINVAL);
    /* rank moments against the direct sum */
    {
        double m2 = 0, v2 = 0;
        for (d = 0; d <= 128; d++) {
            count[d] = (double)((d * 37) % 11);
            CHECK_OK(mess_plan_overtake(128, 0.15, 30, d, &pr));
            m2 += count[d] * pr;
            v2 += count[d] * pr * (1 - pr);
        }
        CHECK_OK(mess_plan_rank(128, 0.15, 30, count, 0.25, &mean, &var));
        CHECK(NEAR(mean, 1 + 0.25 * m2, 1e-14));
        CHECK(NEAR(var, 0.25 * v2, 1e-14));
        count[5] = -1;
        CHECK_RC(mess_plan_rank(128, 0.15, 30, count, 0.25, &mean, &var), MESS_EINVAL);
        count[5] = 0;
        CHECK_RC(mess_plan_rank(128, 0.15, 30, count, 0.0, &mean, &var), MESS_EINVAL);
    }
    /* hit: the continuity correction puts 1/2 at budget = mean - 1/2 */
    CHECK_OK(mess_plan_hit(10.5, 4.0, 10.0, &h));
    CHECK(NEAR(h, 0.5, 1e-15));
    CHECK_OK(mess_plan_hit(3.0, 0.0, 3.0, &h));
    CHECK(h == 1.0);
    CHECK_OK(mess_plan_hit(3.0, 0.0, 2.0, &h));
    CHECK(h == 0.0);
    CHECK_RC(mess_plan_hit(0.5, 1.0, 2.0, &h), MESS_EINVAL);
    CHECK_RC(mess_plan_hit(3.0, -1.0, 2.0, &h), MESS_EINVAL);
}

static void test_recovery_brute(void)
{
    int trial;
    for (trial = 0; trial < 40; trial++) {
        int m = 1 + (int)rnd(10), t = 1 + (int)rnd((uint32_t)m), s, count = 0;
        double ph[10], want = 0, got, direct;
        uint32_t mask;
        for (s = 0; s < m; s++)
            ph[s] = rnd(1001) / 1000.0;
        for (mask = 0; mask < (1u << m); mask++) {
            double miss = 1;
            if (popcount32(mask) != t)
                continue;
            for (s = 0; s < m; s++)
                if (mask >> s & 1)
                    miss *= 1 - ph[s];
            want += 1 - miss;
            count++;
        }
        want /= count;
        CHECK_OK(mess_plan_recovery_uniform(ph, (size_t)m, (size_t)t, &got));
        CHECK(fabs(got - want) < 1e-13);
        CHECK_OK(mess_plan_recovery(ph, (size_t)m, &direct));
        if (t == m)
            CHECK(fabs(got - direct) < 1e-13);
    }
    {
        double ph[2] = {0.5, 1.5}, x;
        CHECK_RC(mess_plan_recovery(ph, 2, &x), MESS_EINVAL);
        CHECK_RC(mess_plan_recovery_uniform(ph, 2, 3, &x), MESS_EINVAL);
    }
}


/* The perturbed-distance law against all 2^kappa flip patterns. */
static void test_distance_pmf_brute(void)
{
    const int kappa = 10;
    const double pps[] = {0.0, 0.05, 0.1472, 0.3, 0.5};
    size_t ip;
    int d;
    for (ip = 0; ip < 5; ip++)
        for (d = 0; d <= kappa; d++) {
            double want[11] = {0}, got[11], total = 0;
            uint32_t e, diff = (1u << d) - 1;
            int x;
            for (e = 0; e < (1u << kappa); e++)
                want[popcount32(diff ^ e)] += rr_prob(0, e, kappa, pps[ip]);
            CHECK_OK(mess_plan_distance_pmf((uint32_t)kappa, pps[ip], (uint32_t)d, got));
            for (x = 0; x <= kappa; x++) {
                CHECK(fabs(got[x] - want[x]) < 1e-14);
                total += got[x];
            }
            CHECK(fabs(total - 1) < 1e-13);
        }
    {
        double pmf[11];
        CHECK_RC(mess_plan_distance_pmf(10, 0.1, 11, pmf), MESS_EINVAL);
        CHECK_RC(mess_plan_distance_pmf(10, 0.6, 1, pmf), MESS_EINVAL);
        CHECK_RC(mess_plan_distance_pmf(10, 0.1, 1, NULL), MESS_EINVAL);
    }
}

/* The conditional hit probability: exact cases without noise, and a
 * simulation of its own generative assumptions (every item's perturbed
 * distance drawn independently, the target's included). */
static void test_hit_conditional(void)
{
    double count[33] = {0}, h;
    count[1] = 2;
    count[5] = 5;
    /* no noise: the rank is 1 + 2 */
    CHECK_OK(mess_plan_hit_conditional(32, 0.0, 3, count, 1.0, 3.0, &h));
    CHECK(fabs(h - 1.0) < 1e-12);
    CHECK_OK(mess_plan_hit_conditional(32, 0.0, 3, count, 1.0, 2.0, &h));
    CHECK(fabs(h) < 1e-12);
    /* one tie at the target's distance counts half: rank 3.5 +- 0.5 */
    count[3] = 1;
    CHECK_OK(mess_plan_hit_conditional(32, 0.0, 3, count, 1.0, 3.0, &h));
    CHECK(fabs(h - 0.5) < 1e-12);
    {
        const uint32_t kappa = 32, dstar = 6, trials = 4000;
        const double pp = 0.15, budget = 4.0;
        double cnt[33] = {0}, model, paper, mean, var;
        uint32_t tr, hits = 0;
        cnt[8] = 10;
        cnt[10] = 20;
        cnt[13] = 40;
        cnt[16] = 60;
        CHECK_OK(mess_plan_hit_conditional(kappa, pp, dstar, cnt, 1.0, budget, &model));
        CHECK_OK(mess_plan_rank(kappa, pp, dstar, cnt, 1.0, &mean, &var));
        CHECK_OK(mess_plan_hit(mean, var, budget, &paper));
        for (tr = 0; tr < trials; tr++) {
            /* perturbed distance of an item at clean distance d */
            double ahead = 0;
            int d, i, b, x0 = 0;
            for (b = 0; b < (int)kappa; b++)
                x0 += (b < (int)dstar) != (rnd(1000000) < pp * 1e6);
            for (d = 0; d <= (int)kappa; d++)
                for (i = 0; i < (int)cnt[d]; i++) {
                    int x = 0;
                    for (b = 0; b < (int)kappa; b++)
                        x += (b < d) != (rnd(1000000) < pp * 1e6);
                    ahead += x < x0 ? 1.0 : x == x0 ? 0.5 : 0.0;
                }
            hits += 1.0 + ahead <= budget + 0.5;
        }
        CHECK(fabs(model - (double)hits / trials) < 0.04);
        CHECK(fabs(paper - (double)hits / trials) > fabs(model - (double)hits / trials));
    }
    CHECK_RC(mess_plan_hit_conditional(MESS_PLAN_MAX_CONDITIONAL_BITS + 1, 0.1, 3, count,
                                       1.0, 3.0, &h),
             MESS_ELIMIT);
    CHECK_RC(mess_plan_hit_conditional(32, 0.1, 33, count, 1.0, 3.0, &h), MESS_EINVAL);
    CHECK_RC(mess_plan_hit_conditional(32, 0.1, 3, count, 1.5, 3.0, &h), MESS_EINVAL);
    CHECK_RC(mess_plan_hit_conditional(32, 0.1, 3, count, 1.0, -1.0, &h), MESS_EINVAL);
}

/* Predicted recall on real SIFT vectors from a client trained here. */
/* mess_account_stored_result is filled within the caller's size. */
static void test_stored_result_size(void)
{
    const uint32_t d[4] = {3, 5, 7, 9};
    mess_account_stored_result r;
    unsigned char buf[sizeof r + 16];
    size_t i, known = MESS_ACCOUNT_STORED_RESULT_MIN_SIZE;
    int ok = 1;
    CHECK_OK(mess_account_stored(0.08, d, 4, 2, 0, 1e-5, &r));
    CHECK(r.size == sizeof r && r.xi_pld > 0.0);
    memset(buf, 0xA5, sizeof buf);
    CHECK_RC(mess_account_stored_sized(0.08, d, 4, 2, 0, 1e-5,
                                       (mess_account_stored_result *)(void *)buf,
                                       known - 1), MESS_EINVAL);
    CHECK_RC(mess_account_stored_sized(0.08, d, 4, 2, 0, 1e-5,
                                       (mess_account_stored_result *)(void *)buf, 0),
             MESS_EINVAL);
    for (i = 0; i < sizeof buf; i++)
        ok &= buf[i] == 0xA5;
    CHECK(ok);
    /* a newer caller's larger struct: the fields this library does not
     * know are zeroed, nothing past the given size is written */
    CHECK_OK(mess_account_stored_sized(0.08, d, 4, 2, 0, 1e-5,
                                       (mess_account_stored_result *)(void *)buf,
                                       sizeof buf - 8));
    for (i = known, ok = 1; i < sizeof buf - 8; i++)
        ok &= buf[i] == 0;
    for (; i < sizeof buf; i++)
        ok &= buf[i] == 0xA5;
    CHECK(ok);
    CHECK(memcmp(buf + sizeof(uint32_t), (unsigned char *)&r + sizeof(uint32_t),
                 known - sizeof(uint32_t)) == 0);
}

static void test_plan_recall_sift(void)
{
    uint8_t seed[32];
    float *learn = NULL, *base = NULL, *q = NULL;
    size_t nl, nb, nq, dim, i;
    mess_params p;
    mess_client *c = NULL;
    const size_t pools[6] = {8, 32, 128, 512, 2048, 8000};
    double r1[6], r2[6], r3[6];
    uint32_t *truth;
    const size_t n = 1500, nqs = 12, k = 5;

    if (mess_vecs_read_f32(DATA("sift/learn.bvecs"), &learn, &nl, &dim) != MESS_OK ||
        mess_vecs_read_f32(DATA("sift/base.bvecs"), &base, &nb, &dim) != MESS_OK ||
        mess_vecs_read_f32(DATA("sift/query.bvecs"), &q, &nq, &dim) != MESS_OK) {
        CHECK(!"bundled SIFT set readable");
        goto out;
    }
    memset(seed, 7, sizeof seed);
    mess_params_default(&p, (uint32_t)dim);
    p.shards = 4; /* small, to keep the test fast */
    p.per_item = 2;
    p.kappa = 64;
    p.train_sample = 1000;
    CHECK_OK(mess_client_new(&p, learn, nl, seed, 1, &c));
    if (!c)
        goto out;
    CHECK_OK(mess_plan_recall(c, base, n, q, nqs, NULL, k, pools, 6, 2, r1));
    for (i = 0; i < 6; i++) {
        CHECK(r1[i] >= 0 && r1[i] <= 1);
        if (i)
            CHECK(r1[i] >= r1[i - 1]);
    }
    CHECK(r1[0] < 0.5);   /* one candidate per shard finds few */
    CHECK(r1[5] > 0.999); /* the whole database finds everything */
    {
        double rc_[6];
        CHECK_OK(mess_plan_recall_model(c, MESS_PLAN_CONDITIONAL, base, n, q, nqs, NULL, k,
                                        pools, 6, 2, rc_));
        for (i = 0; i < 6; i++) {
            CHECK(rc_[i] >= 0 && rc_[i] <= 1 + 1e-12);
            if (i)
                CHECK(rc_[i] >= rc_[i - 1] - 1e-12);
        }
        CHECK(rc_[5] > 0.999);
        CHECK_OK(mess_plan_recall_model(c, MESS_PLAN_PAPER, base, n, q, nqs, NULL, k,
                                        pools, 6, 1, rc_));
        for (i = 0; i < 6; i++)
            CHECK(rc_[i] == r1[i]); /* mess_plan_recall is the paper's model */
        CHECK_RC(mess_plan_recall_model(c, 7, base, n, q, nqs, NULL, k, pools, 6, 1, rc_),
                 MESS_EINVAL);
    }
    /* the same with the exact top-k given, computed independently here */
    truth = (uint32_t *)malloc(nqs * k * sizeof *truth);
    if (truth) {
        size_t qi;
        for (qi = 0; qi < nqs; qi++) {
            double best[5];
            size_t j, fill = 0;
            for (j = 0; j < n; j++) {
                double s = 0;
                size_t x, pos;
                for (x = 0; x < dim; x++) {
                    double t = (double)q[qi * dim + x] - base[j * dim + x];
                    s += t * t;
                }
                if (fill == k && !(s < best[k - 1]))
                    continue;
                pos = fill < k ? fill++ : k - 1;
                while (pos > 0 && s < best[pos - 1]) {
                    best[pos] = best[pos - 1];
                    truth[qi * k + pos] = truth[qi * k + pos - 1];
                    pos--;
                }
                best[pos] = s;
                truth[qi * k + pos] = (uint32_t)j;
            }
        }
        CHECK_OK(mess_plan_recall(c, base, n, q, nqs, truth, k, pools, 6, 1, r2));
        for (i = 0; i < 6; i++)
            CHECK(fabs(r1[i] - r2[i]) < 1e-12);
        truth[0] = (uint32_t)n;
        CHECK_RC(mess_plan_recall(c, base, n, q, nqs, truth, k, pools, 6, 1, r2),
                 MESS_EINVAL);
        free(truth);
    }
    /* less noise, better predicted recall */
    mess_client_free(c);
    c = NULL;
    p.p_store = 0.02;
    p.p_prr = p.p_irr = mess_split_flip(0.02);
    CHECK_OK(mess_client_new(&p, learn, nl, seed, 1, &c));
    if (c) {
        CHECK_OK(mess_plan_recall(c, base, n, q, nqs, NULL, k, pools, 6, 1, r3));
        CHECK(r3[1] > r1[1] && r3[2] > r1[2]);
    }
    CHECK_RC(mess_plan_recall(c, base, n, q, nqs, NULL, 0, pools, 6, 1, r3), MESS_EINVAL);
    CHECK_RC(mess_plan_recall(c, base, n, q, nqs, NULL, n + 1, pools, 6, 1, r3),
             MESS_EINVAL);
    CHECK_RC(mess_plan_recall(NULL, base, n, q, nqs, NULL, k, pools, 6, 1, r3),
             MESS_EINVAL);
    /* struct mess_plan_search is read within its size (mess.h, "Growable
     * structs"): 0 or below the first layout is refused, the first layout
     * alone (no eff / recall_exact) is enough */
    if (c) {
        struct mess_plan_search ps;
        memset(&ps, 0, sizeof ps);
        ps.check_shards = 1;
        ps.check_queries = 2;
        CHECK_RC(mess_plan_recall_search(c, MESS_PLAN_PAPER, base, n, q, 2, NULL, k,
                                         pools, 2, &ps, 1, r3), MESS_EINVAL);
        ps.size = MESS_PLAN_SEARCH_MIN_SIZE - 1;
        CHECK_RC(mess_plan_recall_search(c, MESS_PLAN_PAPER, base, n, q, 2, NULL, k,
                                         pools, 2, &ps, 1, r3), MESS_EINVAL);
        ps.size = MESS_PLAN_SEARCH_MIN_SIZE;
        ps.eff = (double *)(uintptr_t)1; /* beyond the size: never read */
        CHECK_OK(mess_plan_recall_search(c, MESS_PLAN_PAPER, base, n, q, 2, NULL, k,
                                         pools, 2, &ps, 1, r3));
    }
out:
    mess_client_free(c);
    mess_vecs_free(learn);
    mess_vecs_free(base);
    mess_vecs_free(q);
}

int main(void)
{
    RUN(test_eta);
    RUN(test_rr_profile_brute);
    RUN(test_route_weights_brute);
    RUN(test_mixture_brute);
    RUN(test_tail);
    RUN(test_stored);
    RUN(test_versions_brute);
    RUN(test_versions);
    RUN(test_summary);
    RUN(test_extremes);
    RUN(test_access_brute);
    RUN(test_access_limits);
    RUN(test_search_brute);
    RUN(test_search_large);
    RUN(test_random_lsh);
    RUN(test_pld_args);
    RUN(test_plan_pieces);
    RUN(test_recovery_brute);
    RUN(test_distance_pmf_brute);
    RUN(test_hit_conditional);
    RUN(test_stored_result_size);
    RUN(test_plan_recall_sift);
    HARNESS_END();
}
