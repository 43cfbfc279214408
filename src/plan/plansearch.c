/*
 * plansearch.c - the search check of `mess plan` (plansearch.h).
 */
#include <stdlib.h>
#include <string.h>

#include "plansearch.h"
#include "hnsw_bin.h"
#include "lshrr.h"
#include "parallel.h"
#include "rng.h"

/* A fixed, public seed: the check is a local simulation whose coins need
 * no secrecy (nothing it draws is stored or sent), and a fixed seed makes
 * `mess plan` repeatable. */
static const uint8_t check_seed[32] = "libmess plan search check v1...";

struct ps_job {
    const struct plan_search_in *in;
    double *found;     /* nshards x nbud: targets the HNSW search returned */
    double *inexact;   /* nshards x nbud: expected targets of an exact search */
};

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static size_t find_member(const uint32_t *mem, size_t m, uint32_t v)
{
    size_t lo = 0, hi = m;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (mem[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int ps_shard(void *ctx, size_t jj, unsigned worker)
{
    struct ps_job *job = (struct ps_job *)ctx;
    const struct plan_search_in *in = job->in;
    const mess_params *p = in->p;
    uint32_t shard = in->shard[jj], kappa = p->kappa, words = kappa / 64;
    size_t ns = in->nshards, nb = in->nbud, n = in->n, k = in->k;
    size_t m, cnt = 0, cap, i, q, b, maxp = 0;
    double pq = lshrr_effective_p(p->p_prr, p->p_irr);
    double *found = job->found + jj * nb, *inexact = job->inexact + jj * nb;
    uint8_t *mark = NULL;
    uint32_t *mem = NULL, *dist = NULL;
    uint64_t *pc = NULL, qc[MESS_MAX_BITS / 64];
    size_t *tpos = NULL, *tlt = NULL, *teq = NULL;
    struct hnsw_hit *hits = NULL;
    struct hnsw *h = NULL;
    struct hnsw_scratch *sc = NULL;
    struct hnsw_params hp;
    struct mess_rng r;
    int rc;
    MESS_UNUSED(worker);

    /* The shard's size as the server would hold it. */
    m = (size_t)((double)n * p->per_item / p->shards + 0.5);
    if (m < 1)
        m = 1;
    if (m > n)
        m = n;
    cap = m + in->nq * k;
    if (cap > n)
        cap = n;
    rc = mess_rng_init(&r, check_seed, 0x706c616e00000000ull | shard);
    if (rc != MESS_OK)
        return rc;
    rc = MESS_ENOMEM;
    mark = (uint8_t *)calloc(n, 1);
    mem = (uint32_t *)mess_malloc_array(cap, sizeof *mem);
    tpos = (size_t *)mess_malloc_array(k, sizeof *tpos);
    tlt = (size_t *)mess_malloc_array(k, sizeof *tlt);
    teq = (size_t *)mess_malloc_array(k, sizeof *teq);
    if (!mark || !mem || !tpos || !tlt || !teq)
        goto out;
    /* Every target of the simulated queries, then a uniform sample. */
    for (i = 0; i < in->nq * k; i++) {
        uint32_t t = in->truth[i];
        if (!mark[t]) {
            mark[t] = 1;
            mem[cnt++] = t;
        }
    }
    if (m >= n) {
        for (i = 0; i < n; i++)
            if (!mark[i]) {
                mark[i] = 1;
                mem[cnt++] = (uint32_t)i;
            }
    } else {
        while (cnt < m) {
            uint32_t v = mess_rng_below(&r, (uint32_t)n);
            if (!mark[v]) {
                mark[v] = 1;
                mem[cnt++] = v;
            }
        }
    }
    m = cnt;
    qsort(mem, m, sizeof *mem, cmp_u32); /* the server inserts in upload order */
    for (b = 0; b < nb; b++)
        if ((size_t)in->bud[b] > maxp)
            maxp = (size_t)in->bud[b];
    if (maxp > m)
        maxp = m;
    pc = (uint64_t *)mess_malloc_array(m, words * sizeof *pc);
    dist = (uint32_t *)mess_malloc_array(m, sizeof *dist);
    hits = (struct hnsw_hit *)mess_malloc_array(maxp ? maxp : 1, sizeof *hits);
    if (!pc || !dist || !hits)
        goto out;
    memset(&hp, 0, sizeof hp);
    hp.bits = kappa;
    hp.m = p->hnsw_m;
    hp.ef_construction = p->ef_construction;
    /* the server's level seed (server_graph_params, src/store/server_store.c) */
    hp.seed = 0x4d455353u + shard;
    rc = hnsw_new(&hp, &h);
    if (rc == MESS_OK)
        rc = hnsw_reserve(h, m);
    if (rc == MESS_OK)
        rc = hnsw_scratch_new(&sc);
    for (i = 0; rc == MESS_OK && i < m; i++) {
        uint64_t *c = pc + i * words;
        memcpy(c, in->codes + ((size_t)mem[i] * ns + jj) * words, words * sizeof *c);
        rc = lshrr_flip(&r, c, kappa, p->p_store);
        if (rc == MESS_OK)
            rc = hnsw_add(h, c, hnsw_label_of(mem[i], 0), NULL);
    }
    if (rc != MESS_OK)
        goto out;
    for (q = 0; q < in->nq; q++) {
        const uint32_t *tr = in->truth + q * k;
        size_t t;
        memcpy(qc, in->qcodes + (q * p->shards + shard) * words, words * sizeof *qc);
        rc = lshrr_flip(&r, qc, kappa, pq);
        if (rc != MESS_OK)
            goto out;
        hnsw_hamming_many(qc, pc, m, words, dist);
        /* each target's place: items strictly closer, items at its distance */
        for (t = 0; t < k; t++) {
            size_t pos = find_member(mem, m, tr[t]), lt = 0, eq = 0;
            for (i = 0; i < m; i++) {
                lt += dist[i] < dist[pos];
                eq += dist[i] == dist[pos] && i != pos;
            }
            tpos[t] = pos;
            tlt[t] = lt;
            teq[t] = eq;
        }
        for (b = 0; b < nb; b++) {
            size_t P = (size_t)in->bud[b], ef, nf = 0, any = 0, f;
            if (P == 0)
                continue;
            for (t = 0; t < k; t++)
                any += tlt[t] < P;
            if (!any)
                continue;
            if (P > m)
                P = m;
            ef = in->ef_search > P ? in->ef_search : P;
            rc = hnsw_search(h, sc, qc, P, ef, hits, &nf);
            if (rc != MESS_OK)
                goto out;
            for (t = 0; t < k; t++) {
                size_t room = (size_t)in->bud[b];
                if (tlt[t] >= room)
                    continue;
                /* an exact top-P search breaking ties at random keeps the
                 * target with probability (P - closer) / (tied + 1) */
                room -= tlt[t];
                inexact[b] += room > teq[t] ? 1.0 : (double)room / (double)(teq[t] + 1);
                for (f = 0; f < nf; f++)
                    if (hits[f].node == tpos[t]) {
                        found[b] += 1.0;
                        break;
                    }
            }
        }
    }
    rc = MESS_OK;
out:
    mess_rng_wipe(&r);
    hnsw_scratch_free(sc);
    hnsw_free(h);
    free(mark);
    free(mem);
    free(tpos);
    free(tlt);
    free(teq);
    free(pc);
    free(dist);
    free(hits);
    return rc;
}

int plan_search_efficiency(const struct plan_search_in *in, unsigned threads,
                           double *eff, size_t *examined)
{
    struct ps_job job;
    size_t b, j, nb;
    int rc;

    if (!in || !eff || !in->p || !in->shard || !in->codes || !in->qcodes ||
        !in->truth || !in->bud || in->nshards == 0 || in->nshards > in->p->shards ||
        in->n == 0 || in->n > UINT32_MAX || in->nq == 0 || in->k == 0 || in->nbud == 0)
        return MESS_EINVAL;
    nb = in->nbud;
    job.in = in;
    job.found = (double *)mess_calloc_array(in->nshards * nb, sizeof(double));
    job.inexact = (double *)mess_calloc_array(in->nshards * nb, sizeof(double));
    rc = MESS_ENOMEM;
    if (job.found && job.inexact)
        rc = parallel_for(in->nshards, threads ? threads : 1, ps_shard, &job);
    if (rc == MESS_OK)
        for (b = 0; b < nb; b++) {
            double f = 0.0, e = 0.0;
            for (j = 0; j < in->nshards; j++) {
                f += job.found[j * nb + b];
                e += job.inexact[j * nb + b];
            }
            eff[b] = e > 0.0 ? (f < e ? f / e : 1.0) : 1.0;
        }
    if (rc == MESS_OK && examined)
        *examined = in->nq * in->k * in->nshards;
    free(job.found);
    free(job.inexact);
    return rc;
}
