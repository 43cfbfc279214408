/*
 * choose.c - the configuration search of mess_experimental.h
 * (mess_plan_choose): candidates (M, t, kappa, the least noise the privacy
 * limits allow, and a payload encoding), each trained on the client's
 * training set and predicted by the correctness model with the search
 * check (planner.c, plansearch.c); the winner returned as data.  `mess
 * plan --target-recall` (cli/plan_config.c) prints it, `mess init
 * --target-recall | --max-bytes` creates the client it names.
 *
 * Privacy per configuration, in the units of the accountants (nats), for a
 * reference pair whose codes differ in 1/128 of the bits of every shard
 * (one bit of a 128-bit code; the distance of a pair in bits grows with
 * kappa, so the bound is per unit of hash distance, not per bit):
 *
 *   xi_store = eta_D t kappa / 128          stored data, pure (Theorem 5.2)
 *   xi_query = eta_q M kappa / 128          access pattern, one submission
 *   xi_cap   = ln((1-a)/a) M kappa / 128    access pattern, any number of
 *                                           submissions (a = p_PRR)
 *   xi_shard = eta kappa / 128              one shard's code, eta = eta_D
 *                                           (the single-shard worst case of
 *                                           `mess account report`) and
 *                                           eta_q: the per-shard noise floor
 *
 * with eta_D = ln((1-p_D)/p_D), eta_q = ln((1-p_q)/p_q).  The defaults
 * (M 64, t 16, kappa 128, p_D = p_q = 0.08) give 39.08, 156.3, 200.6 and
 * 2.442.
 * Each candidate takes the least noise its limits allow.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "metric.h"
#include "parallel.h"
#include "params.h"
#include "payload.h"

#define REF_BITS 128.0
#define MIN_FLIP 1e-12 /* flips are never below this (a bound of 27.6 nats per bit) */
#define NPAYLOADS 4    /* MESS_PAYLOAD_F32 .. MESS_PAYLOAD_U8 */

static const uint32_t def_shards[] = {16, 32, 64};
static const uint32_t def_per_item[] = {4, 8, 16};
static const uint32_t def_bits[] = {64, 128, 256};
static const size_t def_pools[] = {250, 500, 750, 1000, 1250, 1500, 2000, 2500, 3000, 4000};

size_t mess_sizeof_plan_choice(void) { return sizeof(mess_plan_choice); }

/* The defaults' limits, computed from mess_params_default. */
static void default_limits(double *x, double *y, double *ycap, double *z)
{
    mess_params p;
    double pq, a;
    mess_params_default(&p, 128);
    pq = mess_effective_flip(p.p_prr, p.p_irr);
    a = p.p_prr;
    *x = log((1 - p.p_store) / p.p_store) * p.per_item * p.kappa / REF_BITS;
    *y = log((1 - pq) / pq) * p.shards * p.kappa / REF_BITS;
    *ycap = log((1 - a) / a) * p.shards * p.kappa / REF_BITS;
    *z = log((1 - p.p_store) / p.p_store) * p.kappa / REF_BITS;
}

void mess_plan_default_limits(double lim[4])
{
    if (lim)
        default_limits(&lim[0], &lim[1], &lim[2], &lim[3]);
}

/* The flip p in (0, 1/2] with ln((1-p)/p) = eta (eta >= 0). */
static double flip_for(double eta)
{
    return 1.0 / (1.0 + exp(eta));
}

/* The least noise a candidate's limits allow, and which limit set it. */
static void candidate_flips(mess_plan_candidate *c, double x, double y, double ycap,
                            double z)
{
    double e1, ecap, aq, a1, zq, zd;
    c->p_store = flip_for(x * REF_BITS / ((double)c->per_item * c->bits));
    c->store_bound = MESS_PLAN_BOUND_STORE;
    zd = flip_for(z * REF_BITS / c->bits);
    if (zd > c->p_store) {
        c->p_store = zd;
        c->store_bound = MESS_PLAN_BOUND_SHARD;
    }
    if (c->p_store < MIN_FLIP) { /* within every limit, and a finite bound */
        c->p_store = MIN_FLIP;
        c->store_bound = MESS_PLAN_BOUND_FLOOR;
    }
    e1 = y * REF_BITS / ((double)c->shards * c->bits);
    ecap = ycap * REF_BITS / ((double)c->shards * c->bits);
    a1 = mess_split_flip(flip_for(e1)); /* even split meeting one submission */
    aq = flip_for(ecap);                /* PRR meeting the cap */
    c->p_prr = a1;
    c->query_bound = MESS_PLAN_BOUND_QUERY;
    if (aq > c->p_prr) {
        c->p_prr = aq;
        c->query_bound = MESS_PLAN_BOUND_CAP;
    }
    zq = mess_split_flip(zd); /* one shard */
    if (zq > c->p_prr) {
        c->p_prr = zq;
        c->query_bound = MESS_PLAN_BOUND_SHARD;
    }
    if (c->p_prr < MIN_FLIP) {
        c->p_prr = MIN_FLIP;
        c->query_bound = MESS_PLAN_BOUND_FLOOR;
    }
    c->p_query = mess_effective_flip(c->p_prr, c->p_prr);
    c->xi_store = log((1 - c->p_store) / c->p_store) * c->per_item * c->bits / REF_BITS;
    c->xi_shard = log((1 - c->p_store) / c->p_store) * c->bits / REF_BITS;
    c->xi_query = log((1 - c->p_query) / c->p_query) * c->shards * c->bits / REF_BITS;
    c->xi_cap = log((1 - c->p_prr) / c->p_prr) * c->shards * c->bits / REF_BITS;
}

/* ---- exact top-k over the sample (the truth, and the payload recall) ---- */

struct topk_job {
    uint32_t metric, dim;
    const float *data, *queries;
    size_t n, k;
    uint32_t *out;          /* nq x k: the top-k indices */
    const uint32_t *truth;  /* payload recall: nq x k, else NULL */
    double *hits;           /* per query: members of truth found */
};

static int topk_query(void *ctx, size_t q, unsigned worker)
{
    struct topk_job *j = (struct topk_job *)ctx;
    size_t i, k = j->k, fill = 0;
    double *dist = (double *)mess_malloc_array(j->n, sizeof *dist);
    double *td = (double *)mess_malloc_array(k, sizeof *td);
    uint32_t *ti = j->out + q * k;
    MESS_UNUSED(worker);
    if (!dist || !td) {
        free(dist);
        free(td);
        return MESS_ENOMEM;
    }
    metric_distance_many(j->metric, j->queries + q * j->dim, j->data, j->n, j->dim, dist);
    for (i = 0; i < j->n; i++) {
        size_t pos;
        if (fill == k && !(dist[i] < td[k - 1]))
            continue; /* ties keep the lower index, as the planner's truth */
        pos = fill < k ? fill++ : k - 1;
        while (pos > 0 && dist[i] < td[pos - 1]) {
            td[pos] = td[pos - 1];
            ti[pos] = ti[pos - 1];
            pos--;
        }
        td[pos] = dist[i];
        ti[pos] = (uint32_t)i;
    }
    if (j->truth) {
        const uint32_t *t = j->truth + q * k;
        size_t a, b, h = 0;
        for (a = 0; a < k; a++)
            for (b = 0; b < k; b++)
                if (ti[a] == t[b]) {
                    h++;
                    break;
                }
        j->hits[q] = (double)h;
    }
    free(dist);
    free(td);
    return MESS_OK;
}

/* out (nq x k): each query's exact top-k in data under the metric; with
 * truth, *recall is the share of truth those top-k hold. */
static int exact_topk(uint32_t metric, uint32_t dim, const float *data, size_t n,
                      const float *queries, size_t nq, size_t k, unsigned threads,
                      uint32_t *out, const uint32_t *truth, double *recall)
{
    struct topk_job j;
    size_t q;
    int rc;
    memset(&j, 0, sizeof j);
    j.metric = metric;
    j.dim = dim;
    j.data = data;
    j.queries = queries;
    j.n = n;
    j.k = k;
    j.out = out;
    j.truth = truth;
    if (truth) {
        j.hits = (double *)mess_calloc_array(nq, sizeof *j.hits);
        if (!j.hits)
            return MESS_ENOMEM;
    }
    rc = parallel_for(nq, threads, topk_query, &j);
    if (rc == MESS_OK && truth) {
        double s = 0;
        for (q = 0; q < nq; q++)
            s += j.hits[q];
        *recall = s / ((double)nq * (double)k);
    }
    free(j.hits);
    return rc;
}

/* The payload recall of each encoding (mess_experimental.h): 1 for the
 * exact ones, measured for f16 and i8; *bytes_only: every component of
 * the data is an integer in [0, 255], so u8 holds it exactly. */
static int payload_recalls(const mess_params *base, const float *data, size_t n,
                           const float *queries, size_t nq, size_t k,
                           const uint32_t *truth, unsigned threads, double *rec,
                           int *bytes_only)
{
    static const uint32_t lossy[] = {MESS_PAYLOAD_F16, MESS_PAYLOAD_I8};
    mess_params p = *base;
    size_t i, e, dim = base->dim;
    float *dec = NULL;
    uint32_t *top = NULL;
    uint8_t *buf = NULL;
    int rc = MESS_ENOMEM;

    memset(rec, 0, NPAYLOADS * sizeof *rec);
    rec[MESS_PAYLOAD_F32] = 1.0;
    p.payload = MESS_PAYLOAD_U8;
    *bytes_only = 1;
    for (i = 0; i < n && *bytes_only; i++)
        if (payload_unencodable(&p, data + i * dim) != dim)
            *bytes_only = 0;
    if (*bytes_only) {
        rec[MESS_PAYLOAD_U8] = 1.0;
        return MESS_OK;
    }
    dec = (float *)mess_malloc_array(n, dim * sizeof *dec);
    top = (uint32_t *)mess_malloc_array(nq, k * sizeof *top);
    buf = (uint8_t *)malloc(payload_plain_bytes(base) + 4 * dim + 64);
    if (!dec || !top || !buf)
        goto out;
    for (e = 0; e < sizeof lossy / sizeof lossy[0]; e++) {
        p.payload = lossy[e];
        for (i = 0; i < n; i++) {
            payload_encode_vector(&p, data + i * dim, buf);
            payload_decode_vector(&p, buf, dec + i * dim);
        }
        rc = exact_topk(p.metric, p.dim, dec, n, queries, nq, k, threads, top, truth,
                        &rec[lossy[e]]);
        if (rc != MESS_OK)
            goto out;
    }
    rc = MESS_OK;
out:
    free(dec);
    free(top);
    free(buf);
    return rc;
}

/* ---- the search ------------------------------------------------------- */

/* Bytes per query of parameters p at pool b. */
static double query_bytes(const mess_params *p, size_t b)
{
    return (double)mess_request_size(p) + (double)mess_response_size(p, b);
}

/* A candidate's pool, recall and bytes with encoding `payload` (payload
 * recall prec): with a target the first pool reaching it, with a budget
 * the pool of the highest recall within it (the fewer bytes among
 * equals).  0 if none; c->recall / bytes then describe the fallback
 * (highest recall, or the smallest pool). */
static size_t place(mess_plan_candidate *c, const mess_params *p, const double *curve,
                    const size_t *pools, size_t npl, double prec, double target,
                    double budget)
{
    size_t b, hit = (size_t)-1, top = 0, small = 0;
    for (b = 0; b < npl; b++) {
        double r = curve[b] * prec, by = query_bytes(p, pools[b]);
        if (r > curve[top] * prec)
            top = b;
        if (pools[b] < pools[small])
            small = b;
        if (target > 0) {
            if (r >= target) {
                hit = b;
                break;
            }
        } else if (by <= budget &&
                   (hit == (size_t)-1 || r > curve[hit] * prec ||
                    (r == curve[hit] * prec && by < query_bytes(p, pools[hit])))) {
            hit = b;
        }
    }
    if (hit == (size_t)-1) {
        b = target > 0 ? top : small;
        c->pool = 0;
        c->recall = curve[b] * prec;
        c->bytes = query_bytes(p, pools[b]);
        return pools[b];
    }
    c->pool = pools[hit];
    c->recall = curve[hit] * prec;
    c->bytes = query_bytes(p, pools[hit]);
    return pools[hit];
}

/* a is better than b (both placed) */
static int better(const mess_plan_candidate *a, const mess_plan_candidate *b, int target)
{
    if (a->pool && !b->pool)
        return 1;
    if (!a->pool && b->pool)
        return 0;
    if (a->pool) /* both reached */
        return target ? a->bytes < b->bytes
                      : a->recall > b->recall || (a->recall == b->recall && a->bytes < b->bytes);
    /* neither: the fallback of mess_experimental.h */
    return target ? a->recall > b->recall || (a->recall == b->recall && a->bytes < b->bytes)
                  : a->bytes < b->bytes;
}

int mess_plan_choose_sized(const struct mess_plan_choose_in *caller,
                           mess_plan_choice *out, size_t out_size)
{
    struct mess_plan_choose_in in;
    mess_plan_choice r;
    mess_params base;
    const uint32_t *gm, *gt, *gk;
    const size_t *pools;
    size_t ngm, ngt, ngk, npl, i, j, l, e, k;
    double x, y, ycap, z, *curve = NULL, *eff;
    uint32_t *own_truth = NULL;
    const uint32_t *truth;
    int rc, have = 0, bytes_only = 0, target;

    if (!caller || !out || out_size < MESS_PLAN_CHOICE_MIN_SIZE)
        return MESS_EINVAL;
    memset(&in, 0, sizeof in);
    if (caller->size < MESS_PLAN_CHOOSE_IN_MIN_SIZE ||
        mess_struct_in(&in, MESS_FIELD_END(struct mess_plan_choose_in, ctx), caller,
                       caller->size, MESS_PLAN_CHOOSE_IN_MIN_SIZE) != MESS_OK)
        return MESS_EINVAL;
    if (!in.base || !in.train || !in.data || !in.queries || in.ntrain == 0 ||
        in.n == 0 || in.nq == 0 || in.k == 0 || in.k > in.n || in.n > UINT32_MAX)
        return MESS_EINVAL;
    if (params_import(in.base, &base) != MESS_OK || base.dim == 0)
        return MESS_EINVAL;
    /* exactly one of a target and a budget */
    target = in.target_recall != 0;
    if (target == (in.max_bytes != 0) ||
        (target && !(in.target_recall > 0 && in.target_recall < 1)) ||
        (!target && !(in.max_bytes > 0)))
        return MESS_EINVAL;
    if (!(in.max_xi >= 0) || !(in.max_xi_query >= 0) || !(in.max_xi_cap >= 0) ||
        !(in.max_xi_shard >= 0) || isinf(in.max_xi) || isinf(in.max_xi_query) ||
        isinf(in.max_xi_cap))
        return MESS_EINVAL;
    if (in.check_shards > MESS_PLAN_MAX_CHECK_SHARDS)
        return MESS_ELIMIT;
    if (in.choose_payload > 1 || base.payload >= NPAYLOADS)
        return MESS_EINVAL;
    gm = in.grid_shards ? in.grid_shards : def_shards;
    ngm = in.grid_shards ? in.n_grid_shards : 3;
    gt = in.grid_per_item ? in.grid_per_item : def_per_item;
    ngt = in.grid_per_item ? in.n_grid_per_item : 3;
    gk = in.grid_bits ? in.grid_bits : def_bits;
    ngk = in.grid_bits ? in.n_grid_bits : 3;
    pools = in.pools ? in.pools : def_pools;
    npl = in.pools ? in.npools : sizeof def_pools / sizeof def_pools[0];
    if (ngm == 0 || ngt == 0 || ngk == 0 || npl == 0)
        return MESS_EINVAL;
    for (i = 0; i < ngk; i++) {
        if (gk[i] == 0 || gk[i] % 64)
            return MESS_EINVAL;
        if (gk[i] > MESS_PLAN_MAX_CONDITIONAL_BITS)
            return MESS_ELIMIT;
    }
    for (i = 0; i < ngm; i++)
        if (gm[i] == 0 || gm[i] > MESS_MAX_SHARDS)
            return MESS_EINVAL;
    for (i = 0; i < ngt; i++)
        if (gt[i] == 0)
            return MESS_EINVAL;
    {   /* some t must fit some M */
        uint32_t mt = gt[0], mm = gm[0];
        for (i = 0; i < ngt; i++)
            mt = gt[i] < mt ? gt[i] : mt;
        for (i = 0; i < ngm; i++)
            mm = gm[i] > mm ? gm[i] : mm;
        if (mt > mm)
            return MESS_EINVAL;
    }
    for (i = 0; i < npl; i++)
        if (pools[i] == 0)
            return MESS_EINVAL;
    k = in.k;
    {
        size_t sz;
        if (mess_mul_size(in.nq, k, &sz) != MESS_OK || mess_mul_size(in.n, base.dim, &sz))
            return MESS_ELIMIT;
    }
    if (in.truth)
        for (i = 0; i < in.nq * k; i++)
            if (in.truth[i] >= in.n)
                return MESS_EINVAL;

    default_limits(&x, &y, &ycap, &z);
    if (in.max_xi > 0)
        x = in.max_xi;
    if (in.max_xi_query > 0)
        y = in.max_xi_query;
    if (in.max_xi_cap > 0)
        ycap = in.max_xi_cap;
    if (in.max_xi_shard > 0)
        z = in.max_xi_shard;
    memset(&r, 0, sizeof r);
    r.max_xi = x;
    r.max_xi_query = y;
    r.max_xi_cap = ycap;
    r.max_xi_shard = z;

    /* the truth once, for every candidate and the payload recall */
    truth = in.truth;
    if (!truth) {
        own_truth = (uint32_t *)mess_malloc_array(in.nq, k * sizeof *own_truth);
        if (!own_truth)
            return MESS_ENOMEM;
        rc = exact_topk(base.metric, base.dim, in.data, in.n, in.queries, in.nq, k,
                        in.threads, own_truth, NULL, NULL);
        if (rc != MESS_OK)
            goto done;
        truth = own_truth;
    }
    if (in.choose_payload) {
        rc = payload_recalls(&base, in.data, in.n, in.queries, in.nq, k, truth,
                             in.threads, r.payload_recall, &bytes_only);
        if (rc != MESS_OK)
            goto done;
    } else {
        r.payload_recall[base.payload] = 1.0;
    }
    rc = MESS_ENOMEM;
    curve = (double *)mess_malloc_array(npl, 2 * sizeof *curve);
    if (!curve)
        goto done;
    eff = curve + npl;
    for (i = 0; i < ngm; i++)
        for (l = 0; l < ngk; l++)
            for (j = 0; j < ngt; j++) {
                struct mess_plan_search s;
                mess_plan_candidate c, pick;
                mess_params p = base;
                mess_client *cl = NULL;
                int have_pick = 0;
                if (gt[j] > gm[i])
                    continue;
                memset(&c, 0, sizeof c);
                c.size = sizeof c;
                c.shards = gm[i];
                c.per_item = gt[j];
                c.bits = gk[l];
                candidate_flips(&c, x, y, ycap, z);
                p.shards = c.shards;
                p.per_item = c.per_item;
                p.kappa = c.bits;
                p.p_store = c.p_store;
                p.p_prr = p.p_irr = c.p_prr;
                if (mess_params_check(&p) != MESS_OK)
                    continue; /* e.g. a flip below the library's range */
                rc = mess_client_new(&p, in.train, in.ntrain, in.seed, in.threads, &cl);
                if (rc != MESS_OK)
                    goto done;
                memset(&s, 0, sizeof s);
                s.size = sizeof s; /* mess.h, "Growable structs" */
                s.ef_search = base.ef_search;
                s.check_shards = in.check_shards;
                s.check_queries = in.check_queries ? in.check_queries : 100;
                s.eff = in.check_shards > 0 ? eff : NULL;
                rc = mess_plan_recall_search(cl, MESS_PLAN_CONDITIONAL, in.data, in.n,
                                             in.queries, in.nq, truth, k, pools, npl, &s,
                                             in.threads, curve);
                mess_client_free(cl);
                if (rc != MESS_OK)
                    goto done;
                r.candidates++;
                /* the encoding: base's, or the best of those weighed */
                for (e = 0; e < NPAYLOADS; e++) {
                    mess_plan_candidate t = c;
                    if (in.choose_payload ? r.payload_recall[e] == 0 ||
                                                (bytes_only && e != MESS_PAYLOAD_U8)
                                          : e != base.payload)
                        continue;
                    p.payload = (uint32_t)e;
                    t.payload = (uint32_t)e;
                    place(&t, &p, curve, pools, npl,
                          in.choose_payload ? r.payload_recall[e] : 1.0,
                          in.target_recall, in.max_bytes);
                    if (!have_pick || better(&t, &pick, target)) {
                        pick = t;
                        have_pick = 1;
                    }
                }
                pick.curve = curve;
                if (in.on_candidate)
                    in.on_candidate(in.ctx, &pick);
                pick.curve = NULL;
                if (!have || better(&pick, &r.best, target)) {
                    r.best = pick;
                    r.params = p;
                    r.params.payload = pick.payload;
                    have = 1;
                }
            }
    if (!have) { /* every candidate refused by mess_params_check */
        rc = MESS_EINVAL;
        goto done;
    }
    r.found = r.best.pool != 0;
    rc = mess_struct_out(out, out_size, &r, MESS_FIELD_END(mess_plan_choice, params),
                         MESS_PLAN_CHOICE_MIN_SIZE);
    if (rc == MESS_OK && !r.found)
        rc = MESS_ENOTFOUND;
done:
    free(curve);
    free(own_truth);
    return rc;
}
