/*
 * bench_batch.c - `mess bench batch`: a batch of queries through the
 * protocol one call at a time and through the batch calls over persistent
 * workers (mess.h, "Batches"), measured in the same run.
 *
 * One client and one server are built in memory from a TEXMEX set.  For Q
 * queries and T threads, three paths answer the same queries:
 *
 *   per-call T    mess_client_request, mess_server_search(threads T),
 *                 mess_client_finish with set_threads(T): every search and
 *                 finish starts and joins its own threads (fan-out over
 *                 shards, over entries);
 *   per-call 1    the same on one thread (no thread started);
 *   batch T       mess_client_request_batch, mess_server_search_batch,
 *                 mess_client_finish_batch on one mess_workers of T threads
 *                 made before the timing (parallel across queries).
 *
 * Per query and phase, the process's CPU time over all threads (what the
 * thread starts cost, robust on a shared machine) and the wall time, best
 * of --rounds rounds that rotate the order of the paths, and the ratios
 * per-call T / batch T.  The last line is one JSON object.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../mess.h"
#include "../mess_experimental.h"
#include "bench.h"

#define K 10
#define PATHS 3

static const char help[] =
    "usage: mess bench batch [--data DIR] [--base N] [--queries Q] [--threads T]\n"
    "                        [--pool B] [--rounds R] [PARAMETER OPTIONS]\n"
    "\n"
    "A batch of Q queries answered one call at a time (each search and finish\n"
    "starting T threads, and on one thread) and through the batch calls over\n"
    "one persistent mess_workers of T threads; wall ms/query per phase (best\n"
    "of R interleaved rounds) and the per-call / batch ratios, same run.\n"
    "\n"
    "  --data DIR     TEXMEX set with base, learn and query .bvecs or .fvecs\n"
    "                 (default datasets/sift)\n"
    "  --base N       index the first N base vectors (default 5000)\n"
    "  --queries Q    queries per batch (default 200; the query file repeats)\n"
    "  --threads T    threads (default 2)\n"
    "  --pool B       total candidate pool per query (default 400)\n"
    "  --rounds R     interleaved rounds (default 3)\n"
    "Parameters default to --shards 16 --per-item 4 (the rest the library's\n"
    "defaults); the usual parameter options apply.\n";

/* Seconds for the whole batch per phase (request, search, finish): wall
 * time and the process's CPU time over all its threads. */
struct run {
    double wall[3], cpu[3];
};

static void tick(double *w, double *c)
{
    *w = cli_wall_s();
    *c = cli_cpu_s();
}

static void tock(struct run *r, int phase, double w0, double c0)
{
    r->wall[phase] = cli_wall_s() - w0;
    r->cpu[phase] = cli_cpu_s() - c0;
}

static int read_any(const char *dir, const char *name, float **x, size_t *n,
                    size_t *dim)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.bvecs", dir, name);
    if (mess_vecs_read_f32(path, x, n, dim) == MESS_OK)
        return MESS_OK;
    snprintf(path, sizeof path, "%s/%s.fvecs", dir, name);
    return mess_vecs_read_f32(path, x, n, dim);
}

struct ctx {
    mess_client *c;
    mess_server *s;
    const float *q;
    size_t nq, dim, pool, rs;
    unsigned threads;
    mess_workers *w;
    mess_query **qs;
    uint8_t **reqs, **resps, *reqbuf;
    size_t *req_lens, *resp_lens, *n_out;
    uint64_t *ids;
    float *dists;
    mess_finish_stats *st;
};

static void free_round(struct ctx *x)
{
    size_t i;
    for (i = 0; i < x->nq; i++) {
        mess_query_free(x->qs[i]);
        x->qs[i] = NULL;
        mess_buf_free(x->resps[i]);
        x->resps[i] = NULL;
    }
}

/* One call at a time with `threads` per call. */
static int per_call(struct ctx *x, unsigned threads, struct run *r)
{
    size_t i;
    double w0, c0;
    int rc = mess_client_set_threads(x->c, threads);
    tick(&w0, &c0);
    for (i = 0; rc == MESS_OK && i < x->nq; i++) {
        rc = mess_client_request_into(x->c, x->q + i * x->dim, x->pool, &x->qs[i],
                                      x->reqbuf + i * x->rs, x->rs, &x->req_lens[i]);
        x->reqs[i] = x->reqbuf + i * x->rs;
    }
    tock(r, 0, w0, c0);
    tick(&w0, &c0);
    for (i = 0; rc == MESS_OK && i < x->nq; i++)
        rc = mess_server_search(x->s, x->reqs[i], x->req_lens[i], threads, &x->resps[i],
                                &x->resp_lens[i]);
    tock(r, 1, w0, c0);
    tick(&w0, &c0);
    for (i = 0; rc == MESS_OK && i < x->nq; i++)
        rc = mess_client_finish(x->c, x->qs[i], x->resps[i], x->resp_lens[i], K,
                                x->ids + i * K, x->dists + i * K, &x->n_out[i], &x->st[i]);
    tock(r, 2, w0, c0);
    return rc;
}

static int batch(struct ctx *x, struct run *r)
{
    size_t len, i;
    double w0, c0;
    int rc;
    tick(&w0, &c0);
    rc = mess_client_request_batch(x->c, x->q, x->nq, x->pool, x->w, x->qs,
                                   x->reqbuf, x->nq * x->rs, &len);
    tock(r, 0, w0, c0);
    for (i = 0; i < x->nq; i++) {
        x->reqs[i] = x->reqbuf + i * x->rs;
        x->req_lens[i] = len;
    }
    tick(&w0, &c0);
    if (rc == MESS_OK)
        rc = mess_server_search_batch(x->s, (const uint8_t *const *)x->reqs, x->req_lens,
                                      x->nq, x->w, x->resps, x->resp_lens, NULL);
    tock(r, 1, w0, c0);
    tick(&w0, &c0);
    if (rc == MESS_OK)
        rc = mess_client_finish_batch(x->c, (const mess_query *const *)x->qs,
                                      (const uint8_t *const *)x->resps, x->resp_lens,
                                      x->nq, K, x->w, x->ids, x->dists, x->n_out, x->st,
                                      NULL);
    tock(r, 2, w0, c0);
    return rc;
}

int bench_batch(int argc, char **argv)
{
    static const char *const names[PATHS] = {"per-call T", "per-call 1", "batch T"};
    struct cli_args a;
    const char *dir;
    long nbase, nq, threads, pool, rounds;
    float *base = NULL, *learn = NULL, *query = NULL, *qs = NULL;
    size_t nb, nl, nqf, dim, d2, d3, i, round, p;
    mess_params prm;
    struct ctx x;
    struct run best[PATHS], r;
    uint64_t *ids = NULL;
    uint8_t *up = NULL;
    size_t up_len = 0, ph, bad = 0;
    int rc;

    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(help, stdout);
        cli_params_help(stdout, 1);
        return CLI_OK;
    }
    dir = cli_opt(&a, "--data");
    if (!dir)
        dir = "datasets/sift";
    if (cli_opt_long(&a, "--base", 1, 1L << 24, 5000, &nbase) ||
        cli_opt_long(&a, "--queries", 1, 1L << 20, 200, &nq) ||
        cli_opt_long(&a, "--threads", 1, MESS_MAX_THREADS, 2, &threads) ||
        cli_opt_long(&a, "--pool", 1, 1L << 24, 400, &pool) ||
        cli_opt_long(&a, "--rounds", 1, 100, 3, &rounds))
        return CLI_USAGE;
    if (read_any(dir, "base", &base, &nb, &dim) != MESS_OK ||
        read_any(dir, "learn", &learn, &nl, &d2) != MESS_OK ||
        read_any(dir, "query", &query, &nqf, &d3) != MESS_OK || d2 != dim || d3 != dim) {
        cli_error("%s: cannot read base, learn and query vectors of one dimension", dir);
        rc = CLI_FAIL;
        goto out0;
    }
    if ((size_t)nbase > nb)
        nbase = (long)nb;
    {
        int own_m = cli_opt(&a, "--shards") != NULL, own_t = cli_opt(&a, "--per-item") != NULL;
        if (cli_params_options(&a, 1, &prm) || cli_check_unused(&a)) {
            rc = CLI_USAGE;
            goto out0;
        }
        prm.dim = (uint32_t)dim;
        if (!own_m)
            prm.shards = 16;
        if (!own_t)
            prm.per_item = prm.shards < 4 ? prm.shards : 4;
    }
    memset(&x, 0, sizeof x);
    x.nq = (size_t)nq;
    x.dim = dim;
    x.pool = (size_t)pool;
    x.threads = (unsigned)threads;
    x.rs = mess_request_size(&prm);
    qs = (float *)malloc(x.nq * dim * sizeof *qs);
    ids = (uint64_t *)malloc((size_t)nbase * sizeof *ids);
    x.qs = (mess_query **)calloc(x.nq, sizeof *x.qs);
    x.reqs = (uint8_t **)calloc(x.nq, sizeof *x.reqs);
    x.resps = (uint8_t **)calloc(x.nq, sizeof *x.resps);
    x.reqbuf = (uint8_t *)malloc(x.nq * (x.rs ? x.rs : 1));
    x.req_lens = (size_t *)calloc(x.nq, sizeof(size_t));
    x.resp_lens = (size_t *)calloc(x.nq, sizeof(size_t));
    x.n_out = (size_t *)calloc(x.nq, sizeof(size_t));
    x.ids = (uint64_t *)calloc(x.nq * K, sizeof *x.ids);
    x.dists = (float *)calloc(x.nq * K, sizeof *x.dists);
    x.st = (mess_finish_stats *)calloc(x.nq, sizeof *x.st);
    if (!qs || !ids || !x.qs || !x.reqs || !x.resps || !x.reqbuf || !x.req_lens ||
        !x.resp_lens || !x.n_out || !x.ids || !x.dists || !x.st) {
        rc = cli_fail("bench batch", NULL, MESS_ENOMEM);
        goto out;
    }
    for (i = 0; i < x.nq; i++)
        memcpy(qs + i * dim, query + (i % nqf) * dim, dim * sizeof *qs);
    x.q = qs;
    for (i = 0; i < (size_t)nbase; i++)
        ids[i] = i;
    rc = mess_client_new(&prm, learn, nl, NULL, (unsigned)threads, &x.c);
    if (rc == MESS_OK)
        rc = mess_server_new(&prm, &x.s);
    if (rc == MESS_OK)
        rc = mess_client_upload(x.c, ids, base, (size_t)nbase, (unsigned)threads, &up,
                                &up_len);
    if (rc == MESS_OK)
        rc = mess_server_apply_upload(x.s, up, up_len, (unsigned)threads);
    if (rc == MESS_OK)
        rc = mess_workers_new((unsigned)threads, &x.w);
    if (rc != MESS_OK) {
        rc = cli_fail("bench batch: build", NULL, rc);
        goto out;
    }
    for (p = 0; p < PATHS; p++)
        for (ph = 0; ph < 3; ph++)
            best[p].wall[ph] = best[p].cpu[ph] = 1e30;
    for (round = 0; round < (size_t)rounds; round++)
        for (p = 0; p < PATHS; p++) {
            size_t pp = (p + round) % PATHS; /* rotate the order */
            rc = pp == 0 ? per_call(&x, (unsigned)threads, &r)
               : pp == 1 ? per_call(&x, 1, &r)
                         : batch(&x, &r);
            if (rc != MESS_OK) {
                rc = cli_fail("bench batch", names[pp], rc);
                goto out;
            }
            for (i = 0; i < x.nq; i++)
                bad += x.n_out[i] == 0; /* every query finds something */
            free_round(&x);
            for (ph = 0; ph < 3; ph++) {
                if (r.wall[ph] < best[pp].wall[ph])
                    best[pp].wall[ph] = r.wall[ph];
                if (r.cpu[ph] < best[pp].cpu[ph])
                    best[pp].cpu[ph] = r.cpu[ph];
            }
        }
    if (bad) {
        cli_error("%zu queries returned no result (a bug)", bad);
        rc = CLI_FAIL;
        goto out;
    }
    printf("mess bench batch: %ld queries, %ld base vectors of dim %zu, M=%u t=%u kappa=%u, "
           "pool %ld, %ld threads, best of %ld rounds\n",
           nq, nbase, dim, prm.shards, prm.per_item, prm.kappa, pool, threads, rounds);
    {
        static const char *const what[2] = {"CPU ms/query (all threads)", "wall ms/query"};
        double tot[2][PATHS];
        int m;
        for (m = 0; m < 2; m++) {
            printf("  %-27s %9s %9s %9s %9s\n", what[m], "request", "search", "finish",
                   "total");
            for (p = 0; p < PATHS; p++) {
                const double *v = m ? best[p].wall : best[p].cpu;
                tot[m][p] = v[0] + v[1] + v[2];
                printf("    %-25s %9.4f %9.4f %9.4f %9.4f\n", names[p], 1e3 * v[0] / nq,
                       1e3 * v[1] / nq, 1e3 * v[2] / nq, 1e3 * tot[m][p] / nq);
            }
            printf("    per-call T / batch T: search %.2fx, finish %.2fx, total %.2fx\n",
                   (m ? best[0].wall[1] : best[0].cpu[1]) / (m ? best[2].wall[1] : best[2].cpu[1]),
                   (m ? best[0].wall[2] : best[0].cpu[2]) / (m ? best[2].wall[2] : best[2].cpu[2]),
                   tot[m][0] / tot[m][2]);
        }
        printf("{\"bench\":\"batch\",\"queries\":%ld,\"base\":%ld,\"threads\":%ld,"
               "\"pool\":%ld,\"cpu_ms_per_query\":{\"per_call_t\":%.5f,\"per_call_1\":%.5f,"
               "\"batch_t\":%.5f},\"wall_ms_per_query\":{\"per_call_t\":%.5f,"
               "\"per_call_1\":%.5f,\"batch_t\":%.5f},\"cpu_ratio_search\":%.3f,"
               "\"cpu_ratio_total\":%.3f,\"wall_ratio_search\":%.3f,\"wall_ratio_total\":%.3f}\n",
               nq, nbase, threads, pool, 1e3 * tot[0][0] / nq, 1e3 * tot[0][1] / nq,
               1e3 * tot[0][2] / nq, 1e3 * tot[1][0] / nq, 1e3 * tot[1][1] / nq,
               1e3 * tot[1][2] / nq, best[0].cpu[1] / best[2].cpu[1], tot[0][0] / tot[0][2],
               best[0].wall[1] / best[2].wall[1], tot[1][0] / tot[1][2]);
    }
    rc = CLI_OK;
out:
    free_round(&x);
    mess_workers_free(x.w);
    mess_client_free(x.c);
    mess_server_free(x.s);
    mess_buf_free(up);
    free(qs);
    free(ids);
    free(x.qs);
    free(x.reqs);
    free(x.resps);
    free(x.reqbuf);
    free(x.req_lens);
    free(x.resp_lens);
    free(x.n_out);
    free(x.ids);
    free(x.dists);
    free(x.st);
out0:
    mess_vecs_free(base);
    mess_vecs_free(learn);
    mess_vecs_free(query);
    return rc;
}
