/*
 * accountant.c - privacy accountants (paper section 5.2, Appendix A.1).
 * The correctness model (Proposition 4.1, Appendix B) and the recall
 * planner went to src/plan/planner.c, the numerical helpers both use to
 * src/common/numeric.c.
 *
 * Numerics.  Randomized response on u differing coordinates has a privacy
 * loss that is an integer multiple of eta: world 0 reports z of the u
 * coordinates as x0's bit with probability Binomial(u, 1-p)(z), world 1 with
 * Binomial(u, p)(z), and the log-likelihood ratio is (2z - u) eta.  A
 * mixture over u (the route-averaged distance distribution) is therefore a
 * distribution over integer multiples k of eta, the "privacy-loss
 * distribution" (PLD) below, and every profile value is a finite sum of
 * non-negative terms over it.  Binomial probabilities come from Loader's
 * saddle-point form in log space (accurate for any u), the far tails are
 * cut only where a geometric bound proves the dropped mass below 1e-30 in
 * total, and that bound is added back to every delta, so the profile is an
 * upper bound.
 */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"
#include "numeric.h"

#define MAX_DISTANCE ((uint64_t)MESS_MAX_SHARDS * MESS_MAX_BITS)
#define TRUNC_MASS 1e-30           /* PLD mass that may be dropped, in total */
#define FULL_ENUM_REPEATS (1u << 16) /* search accountant: enumerate every count */
#define BISECT_ABS 1e-9
#define BISECT_REL 1e-15

/* ------------------------------------------------------------------------
 * Small numerical helpers (those the correctness model shares, the flip
 * checks, the normal CDF and the binomial log-probability, in numeric.c)
 * ---------------------------------------------------------------------- */

/* ln(e^x + e^y), exact at -INFINITY. */
static double log_add(double x, double y)
{
    if (x == -INFINITY)
        return y;
    if (y == -INFINITY)
        return x;
    if (x < y) {
        double t = x;
        x = y;
        y = t;
    }
    return x + log1p(exp(y - x));
}

/* n * ln(v), with 0 * ln(0) = 0. */
static double mul_log(double n, double lv)
{
    return n == 0.0 ? 0.0 : n * lv;
}

/* The window [lo, hi] of Binomial(u, q) around its mode outside which the
 * mass is at most e^logtol on each side.  Past the mode the ratio of
 * consecutive probabilities r falls monotonically, so the tail beyond z is
 * at most f(z) r / (1 - r); *outside gets the sum of both bounds. */
static void binom_window(uint64_t u, double q, double q1, double logtol,
                         uint64_t *lo, uint64_t *hi, double *outside)
{
    double n = (double)u, m = floor((n + 1.0) * q);
    uint64_t mode = m > n ? u : (uint64_t)m, z;
    *outside = 0.0;
    for (z = mode; z < u; z++) {
        double r = (n - (double)z) / ((double)z + 1.0) * q / q1, b;
        if (r >= 1.0)
            continue;
        b = numeric_binom_logpmf((double)z, n, q, q1) + log(r) - log1p(-r);
        if (b <= logtol) {
            *outside += exp(b);
            break;
        }
    }
    *hi = z;
    for (z = mode; z > 0; z--) {
        double r = (double)z / (n - (double)z + 1.0) * q1 / q, b;
        if (r >= 1.0)
            continue;
        b = numeric_binom_logpmf((double)z, n, q, q1) + log(r) - log1p(-r);
        if (b <= logtol) {
            *outside += exp(b);
            break;
        }
    }
    *lo = z;
}

/* ------------------------------------------------------------------------
 * Privacy-loss distribution of randomized response mixed over distances
 * ---------------------------------------------------------------------- */

struct mess_account_pld {
    double p, eta;
    int64_t kmin;    /* atom i has loss (kmin + i) * eta */
    size_t n;        /* atoms */
    double *mass;    /* world-0 probability of each loss */
    double dropped;  /* proven bound on the mass cut from the tails */
    uint64_t u_max;
    double u_mean;
};

int mess_account_eta(double p, double *eta)
{
    if (!eta || !numeric_flip_ok(p))
        return MESS_EINVAL;
    *eta = log1p(-p) - log(p);
    return MESS_OK;
}

void mess_account_pld_free(mess_account_pld *pld)
{
    if (!pld)
        return;
    free(pld->mass);
    free(pld);
}

struct support {
    uint64_t u, lo, hi;
    double w;
};

int mess_account_pld_new(double p, const double *logw, size_t len,
                         mess_account_pld **out)
{
    mess_account_pld *pld;
    struct support *sup;
    double lmax = -INFINITY, total = 0.0, logtol, q = 1.0 - p;
    size_t u, ns = 0, i;
    int64_t kmin = INT64_MAX, kmax = INT64_MIN;

    if (!out)
        return MESS_EINVAL;
    *out = NULL;
    if (!logw || len == 0 || !numeric_flip_ok(p))
        return MESS_EINVAL;
    if ((uint64_t)(len - 1) > MAX_DISTANCE)
        return MESS_ELIMIT;
    for (u = 0; u < len; u++) {
        if (isnan(logw[u]) || logw[u] == INFINITY)
            return MESS_EINVAL;
        if (logw[u] > lmax)
            lmax = logw[u];
    }
    if (lmax == -INFINITY)
        return MESS_EINVAL;
    for (u = 0; u < len; u++)
        total += exp(logw[u] - lmax);
    pld = (mess_account_pld *)calloc(1, sizeof *pld);
    if (!pld)
        return MESS_ENOMEM;
    pld->p = p;
    pld->eta = log1p(-p) - log(p);
    for (u = 0; u < len; u++)
        if (exp(logw[u] - lmax) / total > 0.0)
            ns++;
    sup = (struct support *)mess_malloc_array(ns, sizeof *sup);
    if (!sup) {
        free(pld);
        return MESS_ENOMEM;
    }
    /* Each distance may leave TRUNC_MASS / (2 ns) in each tail. */
    logtol = log(TRUNC_MASS) - log(2.0 * (double)ns);
    for (u = 0, i = 0; u < len; u++) {
        double w = exp(logw[u] - lmax) / total, outside;
        if (!(w > 0.0))
            continue;
        sup[i].u = u;
        sup[i].w = w;
        pld->u_max = u;
        pld->u_mean += w * (double)u;
        binom_window(u, q, p, logtol - log(w), &sup[i].lo, &sup[i].hi, &outside);
        pld->dropped += w * outside;
        if ((int64_t)(2 * sup[i].lo) - (int64_t)u < kmin)
            kmin = (int64_t)(2 * sup[i].lo) - (int64_t)u;
        if ((int64_t)(2 * sup[i].hi) - (int64_t)u > kmax)
            kmax = (int64_t)(2 * sup[i].hi) - (int64_t)u;
        i++;
    }
    pld->kmin = kmin;
    pld->n = (size_t)(kmax - kmin + 1);
    pld->mass = (double *)mess_calloc_array(pld->n, sizeof(double));
    if (!pld->mass) {
        free(sup);
        free(pld);
        return MESS_ENOMEM;
    }
    for (i = 0; i < ns; i++) {
        uint64_t z;
        double n = (double)sup[i].u;
        for (z = sup[i].lo; z <= sup[i].hi; z++) {
            int64_t k = (int64_t)(2 * z) - (int64_t)sup[i].u;
            pld->mass[k - kmin] +=
                sup[i].w * exp(numeric_binom_logpmf((double)z, n, q, p));
        }
    }
    free(sup);
    *out = pld;
    return MESS_OK;
}

/* delta(eps) in the direction world 0 vs world 1.  Randomized response is
 * symmetric (world 1's loss distribution is world 0's: Binomial(u, p) at z
 * equals Binomial(u, 1-p) at u - z) and the route weights are the same in
 * both worlds, so this is also the reverse direction's profile. */
static double pld_delta(const mess_account_pld *pld, double eps)
{
    double s = 0.0;
    size_t i;
    for (i = pld->n; i-- > 0;) {
        double loss = (double)(pld->kmin + (int64_t)i) * pld->eta;
        if (loss <= eps)
            break;
        s += pld->mass[i] * -expm1(eps - loss);
    }
    return s + pld->dropped;
}

int mess_account_pld_delta(const mess_account_pld *pld, double eps,
                           double *delta)
{
    if (!pld || !delta || !(eps >= 0.0) || eps == INFINITY)
        return MESS_EINVAL;
    *delta = pld_delta(pld, eps);
    if (*delta > 1.0)
        *delta = 1.0;
    return MESS_OK;
}

int mess_account_pld_epsilon(const mess_account_pld *pld, double delta0,
                             double *xi)
{
    double lo = 0.0, hi;
    if (!pld || !xi || !(delta0 >= MESS_ACCOUNT_MIN_DELTA && delta0 < 1.0))
        return MESS_EINVAL;
    if (pld_delta(pld, 0.0) <= delta0) {
        *xi = 0.0;
        return MESS_OK;
    }
    /* Above the largest loss the profile is only the dropped mass. */
    hi = (double)(pld->kmin + (int64_t)pld->n - 1) * pld->eta;
    while (hi - lo > fmax(BISECT_ABS, BISECT_REL * hi)) {
        double mid = 0.5 * (lo + hi);
        if (pld_delta(pld, mid) <= delta0)
            hi = mid;
        else
            lo = mid;
    }
    *xi = hi;
    return MESS_OK;
}

static double tail_ratio(const mess_account_pld *pld, double a, double eps)
{
    return pld_delta(pld, a) / -expm1(a - eps);
}

int mess_account_pld_tail(const mess_account_pld *pld, double eps,
                          double *bound, double *exact)
{
    const int grid = 256;
    double best = 1.0, lo, hi;
    int i, bi = -1;
    if (!pld || !bound || !(eps >= 0.0) || eps == INFINITY)
        return MESS_EINVAL;
    if (exact) {
        double s = 0.0;
        size_t j;
        for (j = pld->n; j-- > 0;) {
            if ((double)(pld->kmin + (int64_t)j) * pld->eta <= eps)
                break;
            s += pld->mass[j];
        }
        *exact = fmin(1.0, s + pld->dropped);
    }
    if (eps > 0.0) {
        /* Coarse grid over [0, eps), then golden-section refinement around
         * the best point; any a gives a valid bound. */
        for (i = 0; i < grid; i++) {
            double r = tail_ratio(pld, eps * i / grid, eps);
            if (r < best) {
                best = r;
                bi = i;
            }
        }
        if (bi >= 0) {
            const double g = 0.61803398874989484820;
            double x1, x2, f1, f2;
            lo = eps * (bi > 0 ? bi - 1 : 0) / grid;
            hi = eps * (bi + 1) / grid;
            x1 = hi - g * (hi - lo);
            x2 = lo + g * (hi - lo);
            f1 = tail_ratio(pld, x1, eps);
            f2 = tail_ratio(pld, x2, eps);
            for (i = 0; i < 80 && hi - lo > 1e-12 * eps; i++) {
                if (f1 < f2) {
                    hi = x2;
                    x2 = x1;
                    f2 = f1;
                    x1 = hi - g * (hi - lo);
                    f1 = tail_ratio(pld, x1, eps);
                } else {
                    lo = x1;
                    x1 = x2;
                    f1 = f2;
                    x2 = lo + g * (hi - lo);
                    f2 = tail_ratio(pld, x2, eps);
                }
            }
            best = fmin(best, fmin(f1, f2));
        }
    }
    *bound = fmin(1.0, best);
    return MESS_OK;
}

int mess_account_pld_support(const mess_account_pld *pld, uint64_t *u_max,
                             double *u_mean)
{
    if (!pld)
        return MESS_EINVAL;
    if (u_max)
        *u_max = pld->u_max;
    if (u_mean)
        *u_mean = pld->u_mean;
    return MESS_OK;
}

/* A point mass at u: the identifier-fixed route, or one shard. */
static int pld_point(double p, uint64_t u, mess_account_pld **out)
{
    double *logw;
    size_t i;
    int rc;
    if (u > MAX_DISTANCE)
        return MESS_ELIMIT;
    logw = (double *)mess_malloc_array((size_t)u + 1, sizeof *logw);
    if (!logw)
        return MESS_ENOMEM;
    for (i = 0; i < (size_t)u; i++)
        logw[i] = -INFINITY;
    logw[u] = 0.0;
    rc = mess_account_pld_new(p, logw, (size_t)u + 1, out);
    free(logw);
    return rc;
}

int mess_account_rr_delta(double p, uint64_t u, double eps, double *delta)
{
    mess_account_pld *pld;
    int rc;
    if (!delta || !numeric_flip_ok(p) || !(eps >= 0.0) || eps == INFINITY)
        return MESS_EINVAL;
    rc = pld_point(p, u, &pld);
    if (rc != MESS_OK)
        return rc;
    rc = mess_account_pld_delta(pld, eps, delta);
    mess_account_pld_free(pld);
    return rc;
}

/* ------------------------------------------------------------------------
 * Stored data (Theorem 5.2, Corollary 5.3, Appendix A.1.1)
 * ---------------------------------------------------------------------- */

/* d[s] <= dmax: MESS_MAX_BITS for one snapshot, twice that for a version
 * history (a bit that changes within the history counts twice). */
static int check_distances(const uint32_t *d, size_t m, size_t t, uint32_t dmax)
{
    size_t s;
    if (!d || m == 0 || t == 0 || t > m)
        return MESS_EINVAL;
    if (m > MESS_MAX_SHARDS)
        return MESS_ELIMIT;
    for (s = 0; s < m; s++)
        if (d[s] > dmax)
            return MESS_EINVAL;
    return MESS_OK;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Sum of the t largest of d[0..m-1] (d already checked). */
static uint64_t sum_largest(const uint32_t *d, size_t m, size_t t)
{
    uint32_t sorted[MESS_MAX_SHARDS];
    uint64_t s = 0;
    size_t i;
    memcpy(sorted, d, m * sizeof *d);
    qsort(sorted, m, sizeof *sorted, cmp_u32);
    for (i = m - t; i < m; i++)
        s += sorted[i];
    return s;
}

int mess_account_stored_pure(double p_store, const uint32_t *d, size_t m,
                             size_t t, double *xi)
{
    double eta;
    int rc;
    if (!xi || mess_account_eta(p_store, &eta) != MESS_OK)
        return MESS_EINVAL;
    rc = check_distances(d, m, t, MESS_MAX_BITS);
    if (rc != MESS_OK)
        return rc;
    *xi = eta * (double)sum_largest(d, m, t);
    return MESS_OK;
}

static int route_weights(const uint32_t *d, size_t m, size_t t, uint32_t dmax,
                         double *logw, size_t cap, size_t *len);

int mess_account_route_weights(const uint32_t *d, size_t m, size_t t,
                               double *logw, size_t cap, size_t *len)
{
    return route_weights(d, m, t, MESS_MAX_BITS, logw, cap, len);
}

static int route_weights(const uint32_t *d, size_t m, size_t t, uint32_t dmax,
                         double *logw, size_t cap, size_t *len)
{
    uint32_t sorted[MESS_MAX_SHARDS];
    uint64_t umax, total = 0, ub, prefix = 0;
    size_t tt, i, j, u, width, cells;
    int complement, rc;
    double *g;

    if (!len)
        return MESS_EINVAL;
    rc = check_distances(d, m, t, dmax);
    if (rc != MESS_OK)
        return rc;
    umax = sum_largest(d, m, t);
    *len = (size_t)umax + 1;
    if (!logw)
        return MESS_OK;
    if (cap < *len)
        return MESS_ELIMIT;
    memcpy(sorted, d, m * sizeof *d);
    qsort(sorted, m, sizeof *sorted, cmp_u32); /* ascending: less work early */
    for (i = 0; i < m; i++)
        total += sorted[i];
    /* Choosing t shards is leaving out m - t: run the programme on the
     * smaller side; the chosen sum is total - excluded sum. */
    complement = t > m - t;
    tt = complement ? m - t : t;
    ub = sum_largest(sorted, m, tt);
    width = (size_t)ub + 1;
    if ((tt + 1) > MESS_ACCOUNT_MAX_CELLS / width)
        return MESS_ELIMIT;
    cells = (tt + 1) * width;
    {
        /* The updates the programme below will make, before making them. */
        double work = 0.0;
        for (i = 0; i < m; i++) {
            prefix += sorted[i];
            work += (double)((i + 1 < tt ? i + 1 : tt) + 1) *
                    (double)((prefix < ub ? prefix : ub) + 1);
        }
        if (work > MESS_ACCOUNT_MAX_WORK)
            return MESS_ELIMIT;
        prefix = 0;
    }
    g = (double *)mess_calloc_array(cells, sizeof *g);
    if (!g)
        return MESS_ENOMEM;
    /* g[j][u] = Pr[j of the shards seen so far are in the route and their
     * distances sum to u].  The route is a uniform tt-subset drawn shard by
     * shard: with j chosen among the first i, shard i+1 is in it with
     * probability (tt - j) / (m - i).  This is F_i(j, u) of A.1.1 divided by
     * C(m, tt), so every entry stays in [0, 1]. */
    g[0] = 1.0;
    for (i = 0; i < m; i++) {
        double left = (double)(m - i);
        size_t di = sorted[i], jhi = i + 1 < tt ? i + 1 : tt, uhi;
        prefix += di;
        uhi = (size_t)(prefix < ub ? prefix : ub);
        for (j = jhi + 1; j-- > 0;) {
            double *row = g + j * width;
            double stay = 1.0 - (double)(tt - j) / left;
            if (stay < 0.0)
                stay = 0.0;
            if (j == 0) {
                for (u = 0; u <= uhi; u++)
                    row[u] *= stay;
                continue;
            }
            {
                const double *prev = g + (j - 1) * width;
                double pick = (double)(tt - j + 1) / left;
                for (u = uhi + 1; u-- > 0;) {
                    double v = row[u] * stay;
                    if (u >= di)
                        v += prev[u - di] * pick;
                    row[u] = v;
                }
            }
        }
    }
    for (u = 0; u < *len; u++)
        logw[u] = -INFINITY;
    for (u = 0; u < width; u++) {
        double w = g[tt * width + u];
        size_t at;
        if (!(w > 0.0))
            continue;
        at = complement ? (size_t)(total - u) : u;
        if (at < *len)
            logw[at] = log(w);
    }
    free(g);
    return MESS_OK;
}

static int account_stored(double p_store, const uint32_t *d, size_t m, size_t t,
                          uint32_t dmax, int fixed, double delta0,
                          mess_account_stored_result *out);

int mess_account_stored_sized(double p_store, const uint32_t *d, size_t m,
                              size_t t, int fixed, double delta0,
                              mess_account_stored_result *out, size_t out_size)
{
    mess_account_stored_result r;
    int rc;
    if (!out || out_size < MESS_ACCOUNT_STORED_RESULT_MIN_SIZE)
        return MESS_EINVAL; /* mess.h, "Growable structs" */
    rc = account_stored(p_store, d, m, t, MESS_MAX_BITS, fixed, delta0, &r);
    if (rc == MESS_OK)
        rc = mess_struct_out(out, out_size, &r,
                             MESS_FIELD_END(mess_account_stored_result, xi_pld),
                             MESS_ACCOUNT_STORED_RESULT_MIN_SIZE);
    return rc;
}

static int account_stored(double p_store, const uint32_t *d, size_t m, size_t t,
                          uint32_t dmax, int fixed, double delta0,
                          mess_account_stored_result *out)
{
    mess_account_pld *pld = NULL;
    double *logw = NULL;
    size_t len;
    int rc;

    if (!out || !numeric_flip_ok(p_store) ||
        !(delta0 >= MESS_ACCOUNT_MIN_DELTA && delta0 < 1.0))
        return MESS_EINVAL;
    rc = check_distances(d, m, t, dmax);
    if (rc != MESS_OK)
        return rc;
    if (fixed && t != m)
        return MESS_EINVAL;
    memset(out, 0, sizeof *out);
    out->size = (uint32_t)sizeof *out;
    out->eta = log1p(-p_store) - log(p_store);
    out->u_max = sum_largest(d, m, t);
    out->xi_pure = out->eta * (double)out->u_max;
    if (fixed) {
        rc = pld_point(p_store, out->u_max, &pld);
    } else {
        rc = route_weights(d, m, t, dmax, NULL, 0, &len);
        if (rc == MESS_OK) {
            logw = (double *)mess_malloc_array(len, sizeof *logw);
            rc = logw ? route_weights(d, m, t, dmax, logw, len, &len)
                      : MESS_ENOMEM;
        }
        if (rc == MESS_OK)
            rc = mess_account_pld_new(p_store, logw, len, &pld);
        free(logw);
    }
    if (rc != MESS_OK)
        return rc;
    out->u_mean = pld->u_mean;
    rc = mess_account_pld_epsilon(pld, delta0, &out->xi_pld);
    mess_account_pld_free(pld);
    return rc;
}

/* ------------------------------------------------------------------------
 * Version histories of one id (docs/PRIVACY.md, "Versions of an item")
 *
 * The storage coins are a PRF of (shard, id): per position two coins F0,
 * F1 ~ Bernoulli(p_D), fixed whatever the number of versions, and a
 * version with clean bit c stores c ^ F_c.  So every version whose clean
 * bit is 0 stores the same report A = F0 of 0, every version whose clean
 * bit is 1 the same report B = 1 - F1 of 1.  Two histories that differ by
 * the same mask in every version (the same change pattern) differ, per
 * masked position, in one randomized-response report where the position
 * never changes and in two (A and B) where it does: the history is
 * randomized response on d_s + c_s bits of shard s, for any number of
 * versions.  Which positions change is not protected: a changed position
 * shows as a changed stored bit unless F0 != F1.
 * ---------------------------------------------------------------------- */

int mess_account_version_bits(double p_store, double *eta_changed,
                              double *shown, double *read_error)
{
    double p = p_store, q = 1.0 - p_store;
    if (!numeric_flip_ok(p))
        return MESS_EINVAL;
    if (eta_changed) /* two reports, A and B, each eta_D */
        *eta_changed = 2.0 * (log1p(-p) - log(p));
    if (shown) /* F0 == F1: both 0 (stored = clean) or both 1 (negated) */
        *shown = q * q + p * p;
    if (read_error) /* given a changed stored bit, the coins are both 1 */
        *read_error = p * p / (q * q + p * p);
    return MESS_OK;
}

int mess_account_versions_sized(double p_store, const uint32_t *d,
                                const uint32_t *changed, size_t m, size_t t,
                                int fixed, double delta0,
                                mess_account_stored_result *out, size_t out_size)
{
    mess_account_stored_result r;
    uint32_t e[MESS_MAX_SHARDS];
    size_t s;
    int rc;
    if (!out || out_size < MESS_ACCOUNT_STORED_RESULT_MIN_SIZE)
        return MESS_EINVAL; /* mess.h, "Growable structs" */
    rc = check_distances(d, m, t, MESS_MAX_BITS);
    if (rc != MESS_OK)
        return rc;
    /* changed = NULL: every differing position changes (the worst case of
     * any history of two or more versions) */
    for (s = 0; s < m; s++) {
        uint32_t c = changed ? changed[s] : d[s];
        if (c > d[s])
            return MESS_EINVAL;
        e[s] = d[s] + c;
    }
    rc = account_stored(p_store, e, m, t, 2 * MESS_MAX_BITS, fixed, delta0, &r);
    if (rc == MESS_OK)
        rc = mess_struct_out(out, out_size, &r,
                             MESS_FIELD_END(mess_account_stored_result, xi_pld),
                             MESS_ACCOUNT_STORED_RESULT_MIN_SIZE);
    return rc;
}

/* ------------------------------------------------------------------------
 * Access pattern (Theorem 5.4) and search pattern (Theorem 5.5)
 * ---------------------------------------------------------------------- */

static int repeats_ok(uint64_t r)
{
    return r >= 1 && r <= MESS_ACCOUNT_MAX_REPEATS;
}

int mess_account_access(double a, double b, uint64_t repeats, double *eta_r)
{
    double rho, num, den;
    if (!eta_r || !numeric_flip_ok0(a) || !numeric_flip_ok0(b) || a + b == 0.0)
        return MESS_EINVAL;
    if (repeats < 1)
        return MESS_EINVAL;
    if (!repeats_ok(repeats))
        return MESS_ELIMIT;
    /* Divide numerator and denominator by (1-b)^R: with
     * rho = R ln(b / (1-b)) <= 0 nothing overflows for any R. */
    rho = b == 0.0 ? -INFINITY : (double)repeats * (log(b) - log1p(-b));
    num = log_add(log1p(-a), a == 0.0 ? -INFINITY : log(a) + rho);
    den = log_add(a == 0.0 ? -INFINITY : log(a), log1p(-a) + rho);
    *eta_r = num - den;
    if (*eta_r < 0.0) /* rounding at a = b = 1/2 */
        *eta_r = 0.0;
    return MESS_OK;
}

/* ln Pr[first R-1 reports have k ones | permanent bit z]. */
static double log_first(int z, double k, double rest, double lb, double l1b)
{
    return z ? mul_log(k, l1b) + mul_log(rest, lb)
             : mul_log(k, lb) + mul_log(rest, l1b);
}

/* |ln P_reuse^v(y) - ln P_split^{v,vp}(y)| for a sequence with k ones among
 * its first R-1 reports and last report y (section 5.2.4). */
static double search_ratio(int v, int vp, double k, double rest, int y,
                           double la, double l1a, double lb, double l1b)
{
    double reuse = -INFINITY, first = -INFINITY, last = -INFINITY;
    int z;
    for (z = 0; z <= 1; z++) {
        double lr = z == v ? l1a : la, lrp = z == vp ? l1a : la;
        double lf = log_first(z, k, rest, lb, l1b);
        double li = z == y ? l1b : lb;
        if (lr > -INFINITY)
            reuse = log_add(reuse, lr + lf + li);
        if (lr > -INFINITY)
            first = log_add(first, lr + lf);
        if (lrp > -INFINITY)
            last = log_add(last, lrp + li);
    }
    return fabs(reuse - (first + last));
}

int mess_account_search(double a, double b, uint64_t repeats, double *gamma_eq,
                        double *gamma_ne)
{
    double la, l1a, lb, l1b, geq = 0.0, gne = 0.0, n1;
    uint64_t k, step;
    int v, y;
    if (!gamma_eq || !gamma_ne || !numeric_flip_ok0(a) || !numeric_flip_ok(b) ||
        repeats < 1)
        return MESS_EINVAL;
    if (!repeats_ok(repeats))
        return MESS_ELIMIT;
    la = a == 0.0 ? -INFINITY : log(a);
    l1a = log1p(-a);
    lb = log(b);
    l1b = log1p(-b);
    n1 = (double)(repeats - 1);
    /* Beyond FULL_ENUM_REPEATS only the extreme counts: for fixed y the
     * ratio is affine in the posterior of the permanent bit, which is
     * monotone in k, so |ln ratio| peaks at k = 0 or k = R-1. */
    step = repeats <= FULL_ENUM_REPEATS || repeats == 1 ? 1 : repeats - 1;
    for (k = 0; k < repeats; k += step)
        for (v = 0; v <= 1; v++)
            for (y = 0; y <= 1; y++) {
                double kk = (double)k, rest = n1 - kk;
                double e = search_ratio(v, v, kk, rest, y, la, l1a, lb, l1b);
                double ne = search_ratio(v, 1 - v, kk, rest, y, la, l1a, lb, l1b);
                if (e > geq)
                    geq = e;
                if (ne > gne)
                    gne = ne;
            }
    *gamma_eq = geq;
    *gamma_ne = gne;
    return MESS_OK;
}

int mess_account_search_xi(double a, double b, uint64_t repeats, uint64_t bits,
                           uint64_t distance, double *xi_sp, double *xi_uniform)
{
    double geq, gne;
    int rc;
    if (!xi_sp || !xi_uniform || bits == 0 || distance > bits)
        return MESS_EINVAL;
    if (bits > MAX_DISTANCE)
        return MESS_ELIMIT;
    rc = mess_account_search(a, b, repeats, &geq, &gne);
    if (rc != MESS_OK)
        return rc;
    *xi_sp = (double)(bits - distance) * geq + (double)distance * gne;
    *xi_uniform = (double)bits * (geq > gne ? geq : gne);
    return MESS_OK;
}

/* ------------------------------------------------------------------------
 * Random-hyperplane LSH (Appendix A.2.6)
 * ---------------------------------------------------------------------- */

/* KL(x || y) between Bernoulli distributions, 0 ln 0 = 0. */
static double kl_bern(double x, double y)
{
    double s = 0.0;
    if (x > 0.0)
        s += x * (log(x) - log(y));
    if (x < 1.0)
        s += (1.0 - x) * (log1p(-x) - log1p(-y));
    return s;
}

int mess_account_random_lsh(double p, uint32_t kappa, double d_theta,
                            double delta0, double *xi_mixture,
                            double *xi_chernoff)
{
    double eta;
    int rc;
    if (!numeric_flip_ok(p) || kappa == 0 || !(d_theta >= 0.0 && d_theta <= 1.0) ||
        !(delta0 >= MESS_ACCOUNT_MIN_DELTA && delta0 < 1.0))
        return MESS_EINVAL;
    if (kappa > MESS_MAX_BITS)
        return MESS_ELIMIT;
    eta = log1p(-p) - log(p);
    if (xi_mixture) {
        double *logw = (double *)mess_malloc_array((size_t)kappa + 1, sizeof *logw);
        mess_account_pld *pld;
        uint32_t u;
        if (!logw)
            return MESS_ENOMEM;
        for (u = 0; u <= kappa; u++)
            logw[u] = numeric_binom_logpmf(u, kappa, d_theta, 1.0 - d_theta);
        rc = mess_account_pld_new(p, logw, (size_t)kappa + 1, &pld);
        free(logw);
        if (rc != MESS_OK)
            return rc;
        rc = mess_account_pld_epsilon(pld, delta0, xi_mixture);
        mess_account_pld_free(pld);
        if (rc != MESS_OK)
            return rc;
    }
    if (xi_chernoff) {
        /* Pr[d_H >= kappa a] <= exp(-kappa KL(a || d_theta)) for a > d_theta
         * (Chernoff-Hoeffding); a* makes it delta0, and pure randomized
         * response at distance kappa a* holds outside that event. */
        double lo = d_theta, hi = 1.0, target = -log(delta0) / kappa;
        if (d_theta == 0.0) {
            hi = 0.0;
        } else if (d_theta < 1.0 && kl_bern(1.0, d_theta) > target) {
            while (hi - lo > 1e-15) {
                double mid = 0.5 * (lo + hi);
                if (kl_bern(mid, d_theta) >= target)
                    hi = mid;
                else
                    lo = mid;
            }
        }
        *xi_chernoff = eta * kappa * hi;
    }
    return MESS_OK;
}

/* ------------------------------------------------------------------------
 * The bottom line in plain words (docs/PRIVACY.md, "The bottom line")
 *
 * A paragraph for one client's parameters, each sentence carrying a number
 * computed here by the accountants above, followed by one JSON line with
 * those numbers.  Distances come from the random-hyperplane model (each of
 * n bits differs with probability `angle`, Appendix A.2.6), so the numbers
 * need no data; `mess account report` gives them for real pairs.
 * ---------------------------------------------------------------------- */

struct text {
    char *buf;
    size_t cap, len;
};

static void text_add(struct text *t, const char *fmt, ...)
{
    va_list ap;
    int n;
    char *at = t->buf && t->len < t->cap ? t->buf + t->len : NULL;
    va_start(ap, fmt);
    n = vsnprintf(at, at ? t->cap - t->len : 0, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->len += (size_t)n;
}

/* Total variation between the views of x and x' (the hockey stick at
 * eps = 0) for randomized response with flip p on n bits that differ each
 * with probability angle; the best guess between the two, equally likely,
 * is right with probability (1 + TV) / 2. */
static int model_tv(double p, uint64_t n, double angle, double delta0, double *tv,
                    double *xi)
{
    double *logw;
    mess_account_pld *pld;
    uint64_t u;
    int rc;
    if (n > MAX_DISTANCE)
        return MESS_ELIMIT;
    logw = (double *)mess_malloc_array((size_t)n + 1, sizeof *logw);
    if (!logw)
        return MESS_ENOMEM;
    for (u = 0; u <= n; u++)
        logw[u] = numeric_binom_logpmf((double)u, (double)n, angle, 1.0 - angle);
    rc = mess_account_pld_new(p, logw, (size_t)n + 1, &pld);
    free(logw);
    if (rc != MESS_OK)
        return rc;
    *tv = fmin(1.0, pld_delta(pld, 0.0));
    rc = xi ? mess_account_pld_epsilon(pld, delta0, xi) : MESS_OK;
    mess_account_pld_free(pld);
    return rc;
}

/* The largest angle at which the best guess is right with probability at
 * most `success` (bisection; TV grows with the angle). */
static int model_angle(double p, uint64_t n, double success, double *angle)
{
    double lo = 0.0, hi = 0.5, tv;
    int i, rc;
    for (i = 0; i < 40; i++) {
        double mid = 0.5 * (lo + hi);
        rc = model_tv(p, n, mid, 0.5, &tv, NULL);
        if (rc != MESS_OK)
            return rc;
        if ((1.0 + tv) / 2.0 <= success)
            lo = mid;
        else
            hi = mid;
    }
    *angle = lo;
    return MESS_OK;
}

#define SUMMARY_SUCCESS 0.6 /* "hard to tell apart": a guess right at most 60% */

int mess_account_summary(const mess_params *p, double angle, double delta0,
                         char *text, size_t cap, size_t *len)
{
    struct text t;
    double eta, eta2, shown, rerr, r, near_bits, p_q;
    double tv1, tvt, xi_t, tvq, tvq_perm = 1.0, a_item, a_query;
    uint64_t n_item, n_query;
    int rc;

    if (!p || !len || !(angle > 0.0 && angle <= 0.5) ||
        !(delta0 >= MESS_ACCOUNT_MIN_DELTA && delta0 < 1.0) ||
        mess_params_check(p) != MESS_OK || !numeric_flip_ok(p->p_store))
        return MESS_EINVAL;
    p_q = mess_effective_flip(p->p_prr, p->p_irr);
    if (!numeric_flip_ok(p_q))
        return MESS_EINVAL;
    n_item = (uint64_t)p->per_item * p->kappa;
    n_query = (uint64_t)p->shards * p->kappa;
    eta = log1p(-p->p_store) - log(p->p_store);
    mess_account_version_bits(p->p_store, &eta2, &shown, &rerr);
    r = 2.0 * p->p_store * (1.0 - p->p_store);
    near_bits = p->kappa * (angle * (1.0 - r) + (1.0 - angle) * r);
    if ((rc = model_tv(p->p_store, p->kappa, angle, delta0, &tv1, NULL)) != MESS_OK ||
        (rc = model_tv(p->p_store, n_item, angle, delta0, &tvt, &xi_t)) != MESS_OK ||
        (rc = model_tv(p_q, n_query, angle, delta0, &tvq, NULL)) != MESS_OK ||
        (p->p_prr > 0.0 &&
         (rc = model_tv(p->p_prr, n_query, angle, delta0, &tvq_perm, NULL)) != MESS_OK) ||
        (rc = model_angle(p->p_store, n_item, SUMMARY_SUCCESS, &a_item)) != MESS_OK ||
        (rc = model_angle(p_q, n_query, SUMMARY_SUCCESS, &a_query)) != MESS_OK)
        return rc;

    t.buf = text;
    t.cap = text ? cap : 0;
    t.len = 0;
    text_add(&t,
             "What the server sees: %u shards; each item is stored as %u "
             "entries, one in each of %u shards, each a random-looking label, a "
             "%u-bit code of the item with "
             "every bit flipped with probability %.3g, and a %zu-byte ciphertext "
             "of its vector and id.  Of a query it sees %u codes (every bit "
             "flipped with probability %.3g per submission), a budget per shard, "
             "and its own search.\n",
             p->shards, p->per_item, p->per_item, p->kappa, p->p_store,
             mess_payload_size(p), p->shards, p_q);
    text_add(&t,
             "What it cannot conclude: it cannot decrypt vectors, ids or "
             "payloads, nor read a code bit from an entry with an error below "
             "%.3g (%.2f nats per bit).  Whether an item is x or a near x' "
             "(angle %.3g of pi, %.1f degrees) it guesses right with probability "
             "at most %.3f from one entry, %.3f from all %u entries "
             "(xi %.1f at delta %.3g); only items closer than %.2g degrees "
             "(%.2g differing bits in all its entries on average), at most %.2f.  "
             "Two queries %.1f degrees apart it tells apart with probability at "
             "most %.3f; closer than %.2g degrees (%.2g differing bits in all "
             "its codes), at most %.2f; ",
             p->p_store, eta, angle, angle * 180.0, (1.0 + tv1) / 2.0,
             (1.0 + tvt) / 2.0, p->per_item, xi_t, delta0, a_item * 180.0,
             a_item * (double)n_item, SUMMARY_SUCCESS, angle * 180.0,
             (1.0 + tvq) / 2.0, a_query * 180.0, a_query * (double)n_query,
             SUMMARY_SUCCESS);
    if (p->p_prr > 0.0)
        text_add(&t,
                 "the same query asked any number of times gives no more than its "
                 "permanent report (every bit flipped with probability %.3g: at "
                 "most %.3f), never the clean code.\n",
                 p->p_prr, (1.0 + tvq_perm) / 2.0);
    else
        text_add(&t, "the same query asked again and again averages to its clean "
                     "code (no permanent report: p_PRR = 0).\n");
    text_add(&t,
             "What it can conclude: near items look near, within a shard two "
             "items %.1f degrees apart have stored codes %.1f bits apart on "
             "average against %.1f for unrelated items, so it can link near "
             "items that share a shard (that is how it searches).  An update "
             "shows which bits changed (%.0f%% of them) and there the bits of "
             "both versions, each wrong with probability %.2g: about %.1f%% of "
             "an item's bits for a move of %.1f degrees, %.0f%% for a new "
             "vector, up to %.0f%% after many updates (once every bit has "
             "changed); a bit's loss stays %.2f nats however often the item is "
             "updated.  A delete tells it which %u entries were one item and that "
             "they are gone, nothing about the vector.\n",
             angle * 180.0, near_bits, p->kappa / 2.0, 100.0 * shown, rerr,
             100.0 * shown * angle, angle * 180.0, 100.0 * shown / 2.0,
             100.0 * shown, eta2, p->per_item);
    text_add(&t,
             "(Model: each bit of two codes differs with probability angle/pi, "
             "random hyperplanes; real pairs: mess account report.)\n");
    text_add(&t,
             "{\"angle\":%.9g,\"delta\":%.9g,\"eta_D\":%.9g,\"p_query\":%.9g,"
             "\"payload_bytes\":%zu,\"near_bits\":%.9g,\"far_bits\":%.9g,"
             "\"item_entry_tv\":%.9g,\"item_tv\":%.9g,\"item_xi_pld\":%.9g,"
             "\"item_angle_60\":%.9g,\"query_tv\":%.9g,\"query_repeated_tv\":%.9g,"
             "\"query_angle_60\":%.9g,\"update_shown\":%.9g,"
             "\"update_read_error\":%.9g,\"update_near_share\":%.9g,"
             "\"update_far_share\":%.9g,\"eta_changed\":%.9g,\"delete_entries\":%u}\n",
             angle, delta0, eta, p_q, mess_payload_size(p), near_bits, p->kappa / 2.0,
             tv1, tvt, xi_t, a_item, tvq, p->p_prr > 0.0 ? tvq_perm : 1.0, a_query,
             shown, rerr, shown * angle, shown / 2.0, eta2, p->per_item);
    *len = t.len;
    if (text && t.len >= cap)
        return MESS_ELIMIT;
    return MESS_OK;
}
