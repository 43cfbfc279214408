/*
 * planner.c - the correctness model (paper Proposition 4.1, Appendix B) and
 * the recall it predicts from the client's clean codes: the mess_plan_*
 * functions of mess_experimental.h (`mess plan`, docs/PRIVACY.md).  The
 * search check the prediction can include is plansearch.c; the numerical
 * helpers shared with the privacy accountants (accountant.c) are numeric.c.
 */
#include <math.h>

#include "internal.h"
#include "hnsw_bin.h"
#include "metric.h"
#include "numeric.h"
#include "parallel.h"
#include "plansearch.h"

/* ------------------------------------------------------------------------
 * Correctness model (Proposition 4.1, Appendix B)
 * ---------------------------------------------------------------------- */

int mess_plan_compound_flip(double p_store, double p_query, double *p_plus)
{
    if (!p_plus || !numeric_flip_ok0(p_store) || !numeric_flip_ok0(p_query))
        return MESS_EINVAL;
    *p_plus = p_store * (1.0 - p_query) + p_query * (1.0 - p_store);
    return MESS_OK;
}

static double overtake(uint32_t kappa, double p_plus, double d_star, double d)
{
    double sd = sqrt(2.0 * kappa * p_plus * (1.0 - p_plus));
    double mu = (d_star - d) * (1.0 - 2.0 * p_plus);
    if (sd == 0.0)
        return mu > 0 ? 1.0 : mu < 0 ? 0.0 : 0.5;
    return numeric_normal_cdf(mu / sd);
}

int mess_plan_overtake(uint32_t kappa, double p_plus, uint32_t d_star,
                       uint32_t d, double *prob)
{
    if (!prob || kappa == 0 || d_star > kappa || d > kappa || !numeric_flip_ok0(p_plus))
        return MESS_EINVAL;
    *prob = overtake(kappa, p_plus, d_star, d);
    return MESS_OK;
}

/* Rank moments from a row of overtaking probabilities. */
static void rank_moments(const double *row, const double *count, uint32_t kappa,
                         double occupancy, double *mean, double *var)
{
    double mu = 0.0, s2 = 0.0;
    uint32_t d;
    for (d = 0; d <= kappa; d++) {
        mu += count[d] * row[d];
        s2 += count[d] * row[d] * (1.0 - row[d]);
    }
    *mean = 1.0 + occupancy * mu;
    *var = occupancy * s2;
}

int mess_plan_rank(uint32_t kappa, double p_plus, uint32_t d_star,
                   const double *count, double occupancy, double *mean,
                   double *var)
{
    double *row;
    uint32_t d;
    if (!count || !mean || !var || kappa == 0 || d_star > kappa ||
        !numeric_flip_ok0(p_plus) || !(occupancy > 0.0 && occupancy <= 1.0))
        return MESS_EINVAL;
    if (kappa > MESS_MAX_BITS)
        return MESS_ELIMIT;
    for (d = 0; d <= kappa; d++)
        if (!(count[d] >= 0.0) || count[d] == INFINITY)
            return MESS_EINVAL;
    row = (double *)mess_malloc_array((size_t)kappa + 1, sizeof *row);
    if (!row)
        return MESS_ENOMEM;
    for (d = 0; d <= kappa; d++)
        row[d] = overtake(kappa, p_plus, d_star, d);
    rank_moments(row, count, kappa, occupancy, mean, var);
    free(row);
    return MESS_OK;
}

static double hit(double mean, double var, double budget)
{
    double x = budget + 0.5 - mean;
    if (var == 0.0)
        return x >= 0.0 ? 1.0 : 0.0;
    return numeric_normal_cdf(x / sqrt(var));
}

int mess_plan_hit(double mean, double var, double budget, double *prob)
{
    if (!prob || !(mean >= 1.0) || mean == INFINITY || !(var >= 0.0) ||
        var == INFINITY || !(budget >= 0.0) || budget == INFINITY)
        return MESS_EINVAL;
    *prob = hit(mean, var, budget);
    return MESS_OK;
}

int mess_plan_recovery(const double *p_hit, size_t n, double *prob)
{
    double miss = 1.0;
    size_t s;
    if (!p_hit || !prob || n == 0)
        return MESS_EINVAL;
    for (s = 0; s < n; s++) {
        if (!(p_hit[s] >= 0.0 && p_hit[s] <= 1.0))
            return MESS_EINVAL;
        miss *= 1.0 - p_hit[s];
    }
    *prob = 1.0 - miss;
    return MESS_OK;
}

/* E over a uniform t-subset S of prod_{s in S} miss[s], by the same
 * shard-by-shard sampling programme as the route weights (scratch: t + 1). */
static double expected_miss(const double *miss, size_t m, size_t t,
                            double *h)
{
    size_t i, j;
    for (j = 0; j <= t; j++)
        h[j] = 0.0;
    h[0] = 1.0;
    for (i = 0; i < m; i++) {
        double left = (double)(m - i);
        size_t jhi = i + 1 < t ? i + 1 : t;
        for (j = jhi + 1; j-- > 0;) {
            double stay = 1.0 - (double)(t - j) / left, v;
            if (stay < 0.0)
                stay = 0.0;
            v = h[j] * stay;
            if (j > 0)
                v += h[j - 1] * (double)(t - j + 1) / left * miss[i];
            h[j] = v;
        }
    }
    return h[t];
}

int mess_plan_recovery_uniform(const double *p_hit, size_t m, size_t t,
                               double *prob)
{
    double miss[MESS_MAX_SHARDS], h[MESS_MAX_SHARDS + 1];
    size_t s;
    if (!p_hit || !prob || m == 0 || t == 0 || t > m)
        return MESS_EINVAL;
    if (m > MESS_MAX_SHARDS)
        return MESS_ELIMIT;
    for (s = 0; s < m; s++) {
        if (!(p_hit[s] >= 0.0 && p_hit[s] <= 1.0))
            return MESS_EINVAL;
        miss[s] = 1.0 - p_hit[s];
    }
    *prob = 1.0 - expected_miss(miss, m, t, h);
    if (*prob < 0.0)
        *prob = 0.0;
    return MESS_OK;
}

/* ---- the conditional model --------------------------------------------- */

/* Pr[perturbed distance = x | clean distance d], x = 0..kappa: the d
 * differing coordinates stay different with probability 1 - p_plus, the
 * others become different with probability p_plus (the proof of
 * Proposition 4.1), so it is Binomial(d, 1-p_plus) * Binomial(kappa-d,
 * p_plus), convolved exactly. */
static void distance_pmf(uint32_t kappa, double p_plus, uint32_t d, double *out,
                         double *tmp)
{
    uint32_t i, j;
    for (i = 0; i <= kappa; i++)
        out[i] = 0.0;
    for (j = 0; j <= kappa - d; j++)
        tmp[j] = exp(numeric_binom_logpmf(j, kappa - d, p_plus, 1.0 - p_plus));
    for (i = 0; i <= d; i++) {
        double a = exp(numeric_binom_logpmf(i, d, 1.0 - p_plus, p_plus));
        if (a == 0.0)
            continue;
        for (j = 0; j <= kappa - d; j++)
            out[i + j] += a * tmp[j];
    }
}

int mess_plan_distance_pmf(uint32_t kappa, double p_plus, uint32_t d,
                           double *pmf)
{
    double *tmp;
    if (!pmf || kappa == 0 || d > kappa || !numeric_flip_ok0(p_plus))
        return MESS_EINVAL;
    if (kappa > MESS_MAX_BITS)
        return MESS_ELIMIT;
    tmp = (double *)mess_malloc_array((size_t)kappa + 1, sizeof *tmp);
    if (!tmp)
        return MESS_ENOMEM;
    distance_pmf(kappa, p_plus, d, pmf, tmp);
    free(tmp);
    return MESS_OK;
}

/* Tables of the conditional model for one p_plus: g[d][x] = Pr[D = x | d],
 * f[d][x] = Pr[D < x | d] + Pr[D = x | d] / 2 (an item at clean distance d
 * overtakes a target whose perturbed distance is x; ties split evenly),
 * and the window [lo[d], hi[d]] outside which g[d] is below 1e-16. */
struct cond_tables {
    uint32_t kappa;
    double *g, *f;
    uint32_t *lo, *hi;
};

/* Idempotent: cond_build releases the tables when it fails and the caller
 * releases them again on its way out. */
static void cond_free(struct cond_tables *ct)
{
    free(ct->g);
    free(ct->f);
    free(ct->lo);
    free(ct->hi);
    ct->g = ct->f = NULL;
    ct->lo = ct->hi = NULL;
}

static int cond_build(struct cond_tables *ct, uint32_t kappa, double p_plus)
{
    size_t k1 = (size_t)kappa + 1, cells = k1 * k1;
    double *tmp;
    uint32_t d, x;
    memset(ct, 0, sizeof *ct);
    ct->kappa = kappa;
    ct->g = (double *)mess_malloc_array(cells, sizeof(double));
    ct->f = (double *)mess_malloc_array(cells, sizeof(double));
    ct->lo = (uint32_t *)mess_malloc_array(k1, sizeof(uint32_t));
    ct->hi = (uint32_t *)mess_malloc_array(k1, sizeof(uint32_t));
    tmp = (double *)mess_malloc_array(k1, sizeof(double));
    if (!ct->g || !ct->f || !ct->lo || !ct->hi || !tmp) {
        free(tmp);
        cond_free(ct);
        return MESS_ENOMEM;
    }
    for (d = 0; d <= kappa; d++) {
        double *g = ct->g + d * k1, *f = ct->f + d * k1, below = 0.0;
        distance_pmf(kappa, p_plus, d, g, tmp);
        ct->lo[d] = 0;
        ct->hi[d] = kappa;
        while (ct->lo[d] < kappa && g[ct->lo[d]] < 1e-16)
            ct->lo[d]++;
        while (ct->hi[d] > ct->lo[d] && g[ct->hi[d]] < 1e-16)
            ct->hi[d]--;
        for (x = 0; x <= kappa; x++) {
            f[x] = below + 0.5 * g[x];
            below += g[x];
        }
    }
    free(tmp);
    return MESS_OK;
}

/* Pr[rank <= budget] of a target at clean distance d_star, for every
 * budget in bud[0..nb-1] (ascending), added to out[]: a mixture over the
 * target's perturbed distance x (weight g(x)) of the Gaussian rank with
 * mean 1 + mu[x] and variance var[x].  Only budgets with |z| <= 8.5 need
 * the normal CDF; those above take the full weight through a difference
 * array (sat, nb + 1 entries of scratch). */
static void cond_hits(const struct cond_tables *ct, uint32_t d_star,
                      const double *mu, const double *var, const double *bud,
                      size_t nb, double *out, double *sat)
{
    size_t k1 = (size_t)ct->kappa + 1, j;
    const double *g = ct->g + d_star * k1;
    double run = 0.0;
    uint32_t x;
    for (j = 0; j <= nb; j++)
        sat[j] = 0.0;
    for (x = ct->lo[d_star]; x <= ct->hi[d_star]; x++) {
        double w = g[x], mean = 1.0 + mu[x], sd = sqrt(var[x] > 0.0 ? var[x] : 0.0);
        double from = mean - 0.5 - 8.5 * sd, upto = mean - 0.5 + 8.5 * sd;
        size_t lo = 0, hi = nb;
        if (w == 0.0)
            continue;
        while (lo < hi) { /* first budget >= from */
            size_t mid = (lo + hi) / 2;
            if (bud[mid] < from)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (j = lo; j < nb && bud[j] <= upto; j++) {
            double z = bud[j] + 0.5 - mean;
            if (sd == 0.0)
                out[j] += z >= 0.0 ? w : 0.0;
            else
                out[j] += w * numeric_normal_cdf(z / sd);
        }
        sat[j] += w;
    }
    for (j = 0; j < nb; j++) {
        run += sat[j];
        out[j] += run;
    }
}

int mess_plan_hit_conditional(uint32_t kappa, double p_plus, uint32_t d_star,
                              const double *count, double occupancy,
                              double budget, double *prob)
{
    struct cond_tables ct;
    double *mu, *var;
    size_t k1 = (size_t)kappa + 1;
    uint32_t d, x;
    int rc;
    if (!count || !prob || kappa == 0 || d_star > kappa || !numeric_flip_ok0(p_plus) ||
        !(occupancy > 0.0 && occupancy <= 1.0) || !(budget >= 0.0) ||
        budget == INFINITY)
        return MESS_EINVAL;
    if (kappa > MESS_PLAN_MAX_CONDITIONAL_BITS)
        return MESS_ELIMIT;
    for (d = 0; d <= kappa; d++)
        if (!(count[d] >= 0.0) || count[d] == INFINITY)
            return MESS_EINVAL;
    rc = cond_build(&ct, kappa, p_plus);
    if (rc != MESS_OK)
        return rc;
    mu = (double *)mess_calloc_array(k1, sizeof *mu);
    var = (double *)mess_calloc_array(k1, sizeof *var);
    if (!mu || !var) {
        free(mu);
        free(var);
        cond_free(&ct);
        return MESS_ENOMEM;
    }
    for (d = 0; d <= kappa; d++) {
        const double *f = ct.f + d * k1;
        if (count[d] == 0.0)
            continue;
        for (x = 0; x <= kappa; x++) {
            mu[x] += occupancy * count[d] * f[x];
            var[x] += occupancy * count[d] * f[x] * (1.0 - f[x]);
        }
    }
    {
        double sat[2];
        *prob = 0.0;
        cond_hits(&ct, d_star, mu, var, &budget, 1, prob, sat);
    }
    if (*prob > 1.0)
        *prob = 1.0;
    free(mu);
    free(var);
    cond_free(&ct);
    return MESS_OK;
}

/* ---- predicted recall from the client's clean codes -------------------- */

#define PLAN_BLOCK 1024

struct plan {
    const mess_client *c;
    mess_params p;
    int model;
    const float *data, *queries;
    size_t n, nq, k, words, cw; /* cw = M * words per vector */
    uint64_t *qcodes;           /* nq x cw */
    uint64_t *bcodes;           /* PLAN_BLOCK x cw */
    size_t block_start, block_len;
    uint32_t *hist;             /* nq x M x (kappa + 1) */
    /* exact top-k when no truth is given: per query k (dist, index) */
    int find_truth;
    double *tdist;
    uint32_t *tidx;
    size_t *tfill;
    /* phase 2 */
    const uint32_t *truth;
    double p_plus;
    struct cond_tables ct;      /* MESS_PLAN_CONDITIONAL */
    size_t npools;
    double *bud;                /* distinct per-shard budgets, ascending */
    size_t nbud;
    size_t *pool_b0, *pool_b1;  /* per pool: indices into bud */
    double *pool_f;             /* per pool: share of shards given b1 */
    double *partial;            /* nq x npools */
    /* the search check (plansearch.h): clean codes of the simulated shards
     * kept from phase 1 */
    uint32_t nsim;
    uint32_t sim_shard[MESS_PLAN_MAX_CHECK_SHARDS];
    uint64_t *simcodes;         /* n x nsim x words */
};

static int plan_codes(void *ctx, size_t i, unsigned worker)
{
    struct plan *pl = (struct plan *)ctx;
    uint64_t *code = pl->bcodes + i * pl->cw;
    uint32_t j;
    int rc;
    MESS_UNUSED(worker);
    rc = mess_client_codes(pl->c, pl->data + (pl->block_start + i) * pl->p.dim, code);
    for (j = 0; rc == MESS_OK && j < pl->nsim; j++)
        memcpy(pl->simcodes + ((pl->block_start + i) * pl->nsim + j) * pl->words,
               code + (size_t)pl->sim_shard[j] * pl->words, pl->words * sizeof *code);
    return rc;
}

/* One query against the current block: distance histograms per shard and,
 * when needed, the running exact top-k. */
static int plan_block_query(void *ctx, size_t q, unsigned worker)
{
    struct plan *pl = (struct plan *)ctx;
    const uint64_t *qc = pl->qcodes + q * pl->cw;
    uint32_t M = pl->p.shards, kap1 = pl->p.kappa + 1;
    uint32_t *h = pl->hist + q * (size_t)M * kap1;
    uint32_t dist[MESS_MAX_SHARDS];
    size_t i, s;
    MESS_UNUSED(worker);
    for (i = 0; i < pl->block_len; i++) {
        /* one distance per shard, POPCNT chosen at run time (hnsw_bin.c) */
        hnsw_hamming_blocks(qc, pl->bcodes + i * pl->cw, M, pl->words, dist);
        for (s = 0; s < M; s++)
            h[s * kap1 + dist[s]]++;
    }
    if (pl->find_truth) {
        double *td = pl->tdist + q * pl->k;
        uint32_t *ti = pl->tidx + q * pl->k;
        size_t *fill = pl->tfill + q;
        for (i = 0; i < pl->block_len; i++) {
            size_t idx = pl->block_start + i, pos;
            double dd = metric_distance(pl->p.metric, pl->queries + q * pl->p.dim,
                                        pl->data + idx * pl->p.dim, pl->p.dim);
            if (*fill == pl->k && !(dd < td[pl->k - 1]))
                continue;
            pos = *fill < pl->k ? (*fill)++ : pl->k - 1;
            while (pos > 0 && dd < td[pos - 1]) {
                td[pos] = td[pos - 1];
                ti[pos] = ti[pos - 1];
                pos--;
            }
            td[pos] = dd;
            ti[pos] = (uint32_t)idx;
        }
    }
    return MESS_OK;
}

/* Phase 2 for one query: per target and shard the hit probability at every
 * distinct budget, then per pool the route-averaged recovery. */
static int plan_query_recall(void *ctx, size_t q, unsigned worker)
{
    struct plan *pl = (struct plan *)ctx;
    uint32_t M = pl->p.shards, kappa = pl->p.kappa, t = pl->p.per_item;
    size_t kap1 = (size_t)kappa + 1, nb = pl->nbud;
    const uint32_t *h = pl->hist + q * (size_t)M * kap1;
    double occ = (double)t / (double)M;
    double *count = NULL, *row = NULL, *hits = NULL, *ph = NULL, *scratch = NULL;
    double *mu = NULL, *var = NULL, *mu1 = NULL, *var1 = NULL, *sat = NULL;
    uint64_t *tc = NULL;
    size_t i, s, b, d, x;
    int rc = MESS_ENOMEM;
    MESS_UNUSED(worker);
    count = (double *)mess_malloc_array(kap1, sizeof *count);
    row = (double *)mess_malloc_array(kap1, sizeof *row);
    hits = (double *)mess_malloc_array((size_t)M * nb, sizeof *hits);
    sat = (double *)mess_malloc_array(nb + 1, sizeof *sat);
    ph = (double *)mess_malloc_array(M, sizeof *ph);
    scratch = (double *)mess_malloc_array((size_t)t + 1, sizeof *scratch);
    tc = (uint64_t *)mess_malloc_array(pl->cw, sizeof *tc);
    if (pl->model == MESS_PLAN_CONDITIONAL) {
        mu = (double *)mess_calloc_array((size_t)M * kap1, sizeof *mu);
        var = (double *)mess_calloc_array((size_t)M * kap1, sizeof *var);
        mu1 = (double *)mess_malloc_array(kap1, sizeof *mu1);
        var1 = (double *)mess_malloc_array(kap1, sizeof *var1);
        if (!mu || !var || !mu1 || !var1)
            goto out;
        /* Mean and variance of the overtaking count given the target's
         * perturbed distance x, over all items, per shard. */
        for (s = 0; s < M; s++)
            for (d = 0; d <= kappa; d++) {
                double c = (double)h[s * kap1 + d] * occ;
                const double *f = pl->ct.f + d * kap1;
                if (c == 0.0)
                    continue;
                for (x = 0; x <= kappa; x++) {
                    mu[s * kap1 + x] += c * f[x];
                    var[s * kap1 + x] += c * f[x] * (1.0 - f[x]);
                }
            }
    }
    if (!count || !row || !hits || !sat || !ph || !scratch || !tc)
        goto out;
    for (i = 0; i < pl->k; i++) {
        uint32_t target = pl->truth[q * pl->k + i];
        rc = mess_client_codes(pl->c, pl->data + (size_t)target * pl->p.dim, tc);
        if (rc != MESS_OK)
            goto out;
        for (s = 0; s < M; s++) {
            const uint64_t *qc = pl->qcodes + q * pl->cw + s * pl->words;
            double *hs = hits + s * nb;
            uint32_t dstar = 0;
            size_t w;
            for (w = 0; w < pl->words; w++)
                dstar += (uint32_t)__builtin_popcountll(qc[w] ^ tc[s * pl->words + w]);
            if (pl->model == MESS_PLAN_CONDITIONAL) {
                /* the target is not its own background */
                const double *f = pl->ct.f + (size_t)dstar * kap1;
                for (x = 0; x <= kappa; x++) {
                    mu1[x] = mu[s * kap1 + x] - occ * f[x];
                    var1[x] = var[s * kap1 + x] - occ * f[x] * (1.0 - f[x]);
                }
                for (b = 0; b < nb; b++)
                    hs[b] = 0.0;
                cond_hits(&pl->ct, dstar, mu1, var1, pl->bud, nb, hs, sat);
                for (b = 0; b < nb; b++)
                    hs[b] = hs[b] > 1.0 ? 1.0 : hs[b];
            } else {
                double mean, v;
                for (d = 0; d < kap1; d++) {
                    count[d] = (double)h[s * kap1 + d];
                    row[d] = overtake(kappa, pl->p_plus, dstar, (double)d);
                }
                count[dstar] -= 1.0; /* the target is not its own background */
                if (count[dstar] < 0.0)
                    count[dstar] = 0.0;
                rank_moments(row, count, kappa, occ, &mean, &v);
                for (b = 0; b < nb; b++)
                    hs[b] = hit(mean, v, pl->bud[b]);
            }
        }
        for (b = 0; b < pl->npools; b++) {
            double f = pl->pool_f[b];
            for (s = 0; s < M; s++)
                ph[s] = 1.0 - ((1.0 - f) * hits[s * nb + pl->pool_b0[b]] +
                               f * hits[s * nb + pl->pool_b1[b]]);
            pl->partial[q * pl->npools + b] += 1.0 - expected_miss(ph, M, t, scratch);
        }
    }
    rc = MESS_OK;
out:
    free(count);
    free(row);
    free(hits);
    free(ph);
    free(scratch);
    free(tc);
    free(mu);
    free(var);
    free(mu1);
    free(var1);
    free(sat);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static size_t find_budget(const double *bud, size_t nb, double v)
{
    size_t lo = 0, hi = nb - 1;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (bud[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The per-shard budgets of every pool as the protocol splits it:
 * floor(B/M) to every shard and one more to B mod M of them. */
static int plan_budgets(struct plan *pl, const size_t *pools)
{
    size_t M = pl->p.shards, b, j, n = 0;
    pl->bud = (double *)mess_malloc_array(2 * pl->npools, sizeof(double));
    pl->pool_b0 = (size_t *)mess_malloc_array(pl->npools, sizeof(size_t));
    pl->pool_b1 = (size_t *)mess_malloc_array(pl->npools, sizeof(size_t));
    pl->pool_f = (double *)mess_malloc_array(pl->npools, sizeof(double));
    if (!pl->bud || !pl->pool_b0 || !pl->pool_b1 || !pl->pool_f)
        return MESS_ENOMEM;
    for (b = 0; b < pl->npools; b++) {
        size_t base = pools[b] / M;
        pl->bud[n++] = (double)(base < MESS_MAX_BUDGET ? base : MESS_MAX_BUDGET);
        pl->bud[n++] = (double)(base + 1 < MESS_MAX_BUDGET ? base + 1 : MESS_MAX_BUDGET);
    }
    qsort(pl->bud, n, sizeof(double), cmp_double);
    for (b = 0, j = 0; b < n; b++)
        if (j == 0 || pl->bud[b] != pl->bud[j - 1])
            pl->bud[j++] = pl->bud[b];
    pl->nbud = j;
    for (b = 0; b < pl->npools; b++) {
        size_t base = pools[b] / M;
        pl->pool_b0[b] = find_budget(pl->bud, pl->nbud,
                                     (double)(base < MESS_MAX_BUDGET ? base : MESS_MAX_BUDGET));
        pl->pool_b1[b] = find_budget(pl->bud, pl->nbud,
                                     (double)(base + 1 < MESS_MAX_BUDGET ? base + 1 : MESS_MAX_BUDGET));
        pl->pool_f[b] = (double)(pools[b] % M) / (double)M;
    }
    return MESS_OK;
}

int mess_plan_recall_model(const mess_client *c, int model, const float *data,
                           size_t n, const float *queries, size_t nq,
                           const uint32_t *truth, size_t k, const size_t *pools,
                           size_t npools, unsigned threads, double *recall)
{
    return mess_plan_recall_search(c, model, data, n, queries, nq, truth, k, pools,
                                   npools, NULL, threads, recall);
}

int mess_plan_recall_search(const mess_client *c, int model, const float *data,
                            size_t n, const float *queries, size_t nq,
                            const uint32_t *truth, size_t k, const size_t *pools,
                            size_t npools, struct mess_plan_search *search_in,
                            unsigned threads, double *recall)
{
    struct plan pl;
    double p_plus, *eff = NULL, *budget_eff = NULL;
    size_t i, b, kap1, hsize;
    uint32_t *own_truth = NULL;
    int rc;
    /* the caller's struct, read within its size (mess.h, "Growable
     * structs"): eff and recall_exact default to NULL */
    struct mess_plan_search sbuf, *search = NULL;

    if (search_in) {
        memset(&sbuf, 0, sizeof sbuf);
        if (search_in->size < MESS_PLAN_SEARCH_MIN_SIZE ||
            mess_struct_in(&sbuf, MESS_FIELD_END(struct mess_plan_search, recall_exact),
                           search_in, search_in->size,
                           MESS_PLAN_SEARCH_MIN_SIZE) != MESS_OK)
            return MESS_EINVAL;
        search = &sbuf;
    }

    if (!c || !data || !queries || !pools || !recall || n == 0 || nq == 0 ||
        k == 0 || k > n || npools == 0 ||
        (model != MESS_PLAN_PAPER && model != MESS_PLAN_CONDITIONAL))
        return MESS_EINVAL;
    if (search && search->check_shards > MESS_PLAN_MAX_CHECK_SHARDS)
        return MESS_ELIMIT;
    if (n > UINT32_MAX)
        return MESS_ELIMIT;
    {
        size_t x;
        if (mess_mul_size(nq, k, &x) != MESS_OK ||
            mess_mul_size(nq, npools, &x) != MESS_OK)
            return MESS_ELIMIT;
    }
    memset(&pl, 0, sizeof pl);
    rc = mess_client_params(c, &pl.p);
    if (rc != MESS_OK)
        return rc;
    if (model == MESS_PLAN_CONDITIONAL && pl.p.kappa > MESS_PLAN_MAX_CONDITIONAL_BITS)
        return MESS_ELIMIT;
    if (truth)
        for (i = 0; i < nq * k; i++)
            if (truth[i] >= n)
                return MESS_EINVAL;
    rc = mess_plan_compound_flip(pl.p.p_store,
                                 mess_effective_flip(pl.p.p_prr, pl.p.p_irr),
                                 &p_plus);
    if (rc != MESS_OK)
        return rc;
    pl.c = c;
    pl.model = model;
    pl.data = data;
    pl.queries = queries;
    pl.n = n;
    pl.nq = nq;
    pl.k = k;
    pl.words = pl.p.kappa / 64;
    pl.cw = (size_t)pl.p.shards * pl.words;
    pl.npools = npools;
    pl.p_plus = p_plus;
    if (search && search->check_shards > 0) {
        /* spread over 0..M-1 */
        pl.nsim = search->check_shards < pl.p.shards ? search->check_shards : pl.p.shards;
        for (i = 0; i < pl.nsim; i++)
            pl.sim_shard[i] = (uint32_t)(i * pl.p.shards / pl.nsim);
    }
    kap1 = (size_t)pl.p.kappa + 1;
    if (mess_mul_size(nq, (size_t)pl.p.shards * kap1, &hsize) != MESS_OK)
        return MESS_ELIMIT;
    rc = plan_budgets(&pl, pools);
    if (rc != MESS_OK)
        goto out;
    if (model == MESS_PLAN_CONDITIONAL) {
        rc = cond_build(&pl.ct, pl.p.kappa, p_plus);
        if (rc != MESS_OK)
            goto out;
    }
    pl.qcodes = (uint64_t *)mess_malloc_array(nq, pl.cw * sizeof(uint64_t));
    pl.bcodes = (uint64_t *)mess_malloc_array(PLAN_BLOCK, pl.cw * sizeof(uint64_t));
    pl.hist = (uint32_t *)mess_calloc_array(hsize, sizeof(uint32_t));
    pl.partial = (double *)mess_calloc_array(nq * npools, sizeof(double));
    pl.find_truth = truth == NULL;
    if (pl.find_truth) {
        pl.tdist = (double *)mess_malloc_array(nq * k, sizeof(double));
        pl.tidx = own_truth = (uint32_t *)mess_malloc_array(nq * k, sizeof(uint32_t));
        pl.tfill = (size_t *)mess_calloc_array(nq, sizeof(size_t));
    }
    if (pl.nsim) {
        pl.simcodes = (uint64_t *)mess_malloc_array(n, (size_t)pl.nsim * pl.words *
                                                    sizeof(uint64_t));
        eff = (double *)mess_malloc_array(npools, sizeof *eff);
        budget_eff = (double *)mess_malloc_array(pl.nbud, sizeof *budget_eff);
    }
    rc = MESS_ENOMEM;
    if (!pl.qcodes || !pl.bcodes || !pl.hist || !pl.partial ||
        (pl.find_truth && (!pl.tdist || !pl.tidx || !pl.tfill)) ||
        (pl.nsim && (!pl.simcodes || !eff || !budget_eff)))
        goto out;
    for (i = 0; i < nq; i++) {
        rc = mess_client_codes(c, queries + i * pl.p.dim, pl.qcodes + i * pl.cw);
        if (rc != MESS_OK)
            goto out;
    }
    /* Phase 1: stream the database in blocks: hash, then histogram the
     * per-shard distances to every query (and track the exact top-k). */
    for (pl.block_start = 0; pl.block_start < n; pl.block_start += PLAN_BLOCK) {
        pl.block_len = n - pl.block_start < PLAN_BLOCK ? n - pl.block_start : PLAN_BLOCK;
        rc = parallel_for(pl.block_len, threads ? threads : 1, plan_codes, &pl);
        if (rc == MESS_OK)
            rc = parallel_for(nq, threads ? threads : 1, plan_block_query, &pl);
        if (rc != MESS_OK)
            goto out;
    }
    pl.truth = truth ? truth : own_truth;
    if (pl.nsim) {
        /* The search check: the share of each budget's exact per-shard
         * top-P that the server's HNSW returns on this data. */
        struct plan_search_in in;
        size_t cq = search->check_queries ? search->check_queries : 100;
        memset(&in, 0, sizeof in);
        in.p = &pl.p;
        in.ef_search = search->ef_search;
        in.nshards = pl.nsim;
        in.shard = pl.sim_shard;
        in.codes = pl.simcodes;
        in.n = n;
        in.qcodes = pl.qcodes;
        in.nq = cq < nq ? cq : nq;
        in.truth = pl.truth;
        in.k = k;
        in.bud = pl.bud;
        in.nbud = pl.nbud;
        rc = plan_search_efficiency(&in, threads, budget_eff, NULL);
        if (rc != MESS_OK)
            goto out;
        for (b = 0; b < npools; b++)
            eff[b] = (1.0 - pl.pool_f[b]) * budget_eff[pl.pool_b0[b]] +
                     pl.pool_f[b] * budget_eff[pl.pool_b1[b]];
        if (search->recall_exact) {
            /* the curve of the exact per-shard search, first */
            rc = parallel_for(nq, threads ? threads : 1, plan_query_recall, &pl);
            if (rc != MESS_OK)
                goto out;
            for (b = 0; b < npools; b++) {
                double s = 0.0;
                for (i = 0; i < nq; i++) {
                    s += pl.partial[i * npools + b];
                    pl.partial[i * npools + b] = 0.0;
                }
                search->recall_exact[b] = s / ((double)nq * (double)k);
            }
        }
        /* The HNSW search at budget P acts as an exact search of budget
         * eff(P) P (kept non-decreasing, as the models need). */
        for (b = 0; b < pl.nbud; b++) {
            pl.bud[b] *= budget_eff[b];
            if (b > 0 && pl.bud[b] < pl.bud[b - 1])
                pl.bud[b] = pl.bud[b - 1];
        }
    }
    rc = parallel_for(nq, threads ? threads : 1, plan_query_recall, &pl);
    if (rc != MESS_OK)
        goto out;
    for (b = 0; b < npools; b++) {
        double s = 0.0;
        for (i = 0; i < nq; i++)
            s += pl.partial[i * npools + b];
        recall[b] = s / ((double)nq * (double)k);
    }
    if (pl.nsim && search->eff)
        memcpy(search->eff, eff, npools * sizeof *eff);
out:
    free(pl.simcodes);
    free(eff);
    free(budget_eff);
    cond_free(&pl.ct);
    free(pl.bud);
    free(pl.pool_b0);
    free(pl.pool_b1);
    free(pl.pool_f);
    free(pl.qcodes);
    free(pl.bcodes);
    free(pl.hist);
    free(pl.partial);
    free(pl.tdist);
    free(own_truth);
    free(pl.tfill);
    return rc;
}

int mess_plan_recall(const mess_client *c, const float *data, size_t n,
                     const float *queries, size_t nq, const uint32_t *truth,
                     size_t k, const size_t *pools, size_t npools,
                     unsigned threads, double *recall)
{
    return mess_plan_recall_model(c, MESS_PLAN_PAPER, data, n, queries, nq, truth,
                                  k, pools, npools, threads, recall);
}
