/*
 * bench_throughput.c - `mess bench throughput`: both roles in throughput
 * mode on a server directory, queries/s per core beside hnswlib's batch
 * knn_query (docs/PERFORMANCE.md, "Throughput").
 *
 * Opens server directory S and its client (S.client), takes the first Q
 * queries of a TEXMEX set and, for every worker count T and batch size b
 * asked, answers them in batches of b over one mess_workers of T threads:
 *   - mess_client_request_batch (the client's encode),
 *   - mess_server_search_batch in each server mode asked (the throughput
 *     mode, shard by shard over windows of W requests, and W = 0: the
 *     former groups of 8 requests per worker), the modes alternating per
 *     batch and their responses required byte-identical (BLAKE2b of each;
 *     the bench fails otherwise),
 *   - mess_client_finish_batch (the client's open, rerank and top 10),
 * each phase's process CPU time (all threads) and wall time summed over
 * the batches, best of R rounds; queries/s per core is Q over the CPU
 * seconds.  Recall@10 against DIR/groundtruth.ivecs, and the codes the
 * server scores per query (hnsw_scratch_counts, as bench server counts
 * them).  With --hnswlib, scripts/hnswlib_ref.py in the same invocation:
 * hnswlib (M 16, efConstruction 300) on DIR's raw vectors, one batch
 * knn_query on 1 and 2 threads per ef, and the smallest ef whose recall@10
 * is at least libmess's set beside the server's and both roles' figures.
 * The last line is one JSON object.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "hnsw_bin.h"
#include "../mess.h"
#include "server.h"
#include "bench.h"

#define K 10
#define MAXL 8

static const char help[] =
    "usage: mess bench throughput --server S --data DIR [--client F] [--queries Q]\n"
    "                             [--pool B] [--ef-search E] [--batches LIST]\n"
    "                             [--threads LIST] [--windows LIST] [--rounds R]\n"
    "                             [--hnswlib] [--hnswlib-index F] [--python P]\n"
    "                             [--layout L]\n"
    "\n"
    "Both roles in throughput mode on directory S (client S.client unless\n"
    "--client) for the first Q queries of DIR (1000) at pool B (1500): in\n"
    "batches of each size of --batches (1,16,64,256) over a mess_workers of\n"
    "each count of --threads (1,2), mess_client_request_batch,\n"
    "mess_server_search_batch in each server mode of --windows (256,0: the\n"
    "throughput mode over windows of that many requests; 0 the groups of 8 per\n"
    "worker, the former mode; responses required byte-identical) and\n"
    "mess_client_finish_batch; queries/s per core (process CPU time) per\n"
    "phase, best of R rounds (3), recall@10 against DIR/groundtruth.ivecs and\n"
    "the codes scored per query.  --ef-search E: the server's beam floor for\n"
    "the run (default its own).  --hnswlib: hnswlib's batch knn_query on 1 and\n"
    "2 threads in the same invocation (scripts/hnswlib_ref.py, --python P,\n"
    "default /usr/bin/python3; --hnswlib-index F keeps its index in F).\n"
    "--layout L: the server's search layout, default or codes\n"
    "(mess_server_set_layout, built before the runs).\n";

/* Seconds summed over a run's batches: request, search per mode, finish. */
struct phase {
    double cpu, wall;
};

struct run {
    struct phase req, fin, search[MAXL];
};

struct ctx {
    mess_client *c;
    mess_server *s;
    mess_workers *w;
    const float *q;
    size_t nq, dim, pool, rs, b, qcap; /* qcap: requests a batch holds */
    const unsigned *windows;
    size_t nwin;
    const uint64_t *gt;
    size_t gk;
    mess_query **qs;
    uint8_t *reqbuf, **reqs, **resps;
    size_t *req_lens, *resp_lens, *n_out;
    uint64_t *ids;
    float *dists;
    uint8_t (*digest)[16];
    int have_digest;
    size_t differ, hits, bad;
};

static void phase_start(double *w0, double *c0)
{
    *w0 = cli_wall_s();
    *c0 = cli_cpu_s();
}

static void phase_add(struct phase *p, double w0, double c0)
{
    p->wall += cli_wall_s() - w0;
    p->cpu += cli_cpu_s() - c0;
}

static void free_resps(struct ctx *x, size_t m)
{
    size_t i;
    for (i = 0; i < m; i++) {
        mess_buf_free(x->resps[i]);
        x->resps[i] = NULL;
    }
}

/* Every query once, in batches of x->b: request, each server mode (its
 * order rotating per batch), finish of the last mode's responses. */
static int one_run(struct ctx *x, size_t round, struct run *r)
{
    size_t q0, i, k, slice = 0;
    double w0, c0;
    int rc = MESS_OK;
    memset(r, 0, sizeof *r);
    for (q0 = 0; q0 < x->nq && rc == MESS_OK; q0 += x->b, slice++) {
        size_t m = x->nq - q0 < x->b ? x->nq - q0 : x->b, len = 0;
        phase_start(&w0, &c0);
        rc = mess_client_request_batch(x->c, x->q + q0 * x->dim, m, x->pool, x->w, x->qs,
                                       x->reqbuf, m * x->rs, &len);
        phase_add(&r->req, w0, c0);
        for (i = 0; i < m; i++) {
            x->reqs[i] = x->reqbuf + i * len;
            x->req_lens[i] = len;
        }
        for (k = 0; k < x->nwin && rc == MESS_OK; k++) {
            size_t v = (k + slice + round) % x->nwin;
            server_search_set_by_shard(x->s, x->windows[v]);
            phase_start(&w0, &c0);
            rc = mess_server_search_batch(x->s, (const uint8_t *const *)x->reqs, x->req_lens,
                                          m, x->w, x->resps, x->resp_lens, NULL);
            phase_add(&r->search[v], w0, c0);
            /* the modes' bytes: the first's digests, the others compared */
            for (i = 0; rc == MESS_OK && i < m; i++) {
                uint8_t d[16];
                crypto_generichash(d, sizeof d, x->resps[i], x->resp_lens[i], NULL, 0);
                if (k == 0)
                    memcpy(x->digest[i], d, sizeof d);
                else
                    x->differ += memcmp(d, x->digest[i], sizeof d) != 0;
            }
            if (k + 1 < x->nwin)
                free_resps(x, m);
        }
        phase_start(&w0, &c0);
        if (rc == MESS_OK)
            rc = mess_client_finish_batch(x->c, (const mess_query *const *)x->qs,
                                          (const uint8_t *const *)x->resps, x->resp_lens, m, K,
                                          x->w, x->ids, x->dists, x->n_out, NULL, NULL);
        phase_add(&r->fin, w0, c0);
        /* recall@10 of the round (every round alike but for the coins) */
        for (i = 0; rc == MESS_OK && i < m; i++) {
            size_t a, g;
            x->bad += x->n_out[i] == 0;
            for (a = 0; a < x->n_out[i]; a++)
                for (g = 0; g < K && g < x->gk; g++)
                    x->hits += x->ids[i * K + a] == x->gt[(q0 + i) * x->gk + g];
        }
        free_resps(x, m);
        for (i = 0; i < m; i++) {
            mess_query_free(x->qs[i]);
            x->qs[i] = NULL;
        }
    }
    server_search_set_by_shard(x->s, SEARCH_WINDOW);
    return rc;
}

/* Codes scored per query: every shard search of the first n queries'
 * requests through hnsw_search on one scratch (bench server's count). */
static int count_codes(mess_client *c, const mess_server *s, const float *q, size_t n,
                       size_t dim, size_t pool, double *codes, double *expanded)
{
    struct hnsw_counts cnt;
    uint8_t **reqs = (uint8_t **)calloc(n, sizeof *reqs);
    size_t *lens = (size_t *)calloc(n, sizeof *lens), i;
    double hits = 0;
    int rc = reqs && lens ? MESS_OK : MESS_ENOMEM;
    for (i = 0; i < n && rc == MESS_OK; i++) {
        mess_query *mq = NULL;
        rc = mess_client_request(c, q + i * dim, pool, &mq, &reqs[i], &lens[i]);
        mess_query_free(mq);
    }
    if (rc == MESS_OK)
        rc = bench_count_work(s, reqs, lens, n, &cnt, &hits);
    if (rc == MESS_OK) {
        *codes = (double)(cnt.upper + cnt.scored) / (double)n;
        *expanded = (double)cnt.expanded / (double)n;
    }
    for (i = 0; reqs && i < n; i++)
        mess_buf_free(reqs[i]);
    free(reqs);
    free(lens);
    return rc;
}

/* A number after "key": in one JSON line, or -1. */
static double json_num(const char *line, const char *key)
{
    char pat[64];
    const char *p;
    snprintf(pat, sizeof pat, "\"%s\":", key);
    p = strstr(line, pat);
    return p ? strtod(p + strlen(pat), NULL) : -1.0;
}

/* hnswlib's lines (in the array text): the smallest ef whose recall is at
 * least `recall`, its q/s per core on 1 and 2 threads; 0 if none. */
static int hnswlib_pick(const char *text, double recall, double *ef, double *rec,
                        double *t1, double *t2)
{
    const char *p = text;
    *ef = 0;
    while ((p = strstr(p, "{\"ef\":")) != NULL) {
        const char *end = strchr(p, '}');
        char line[512];
        size_t n = end ? (size_t)(end - p) + 1 : strlen(p);
        if (n >= sizeof line)
            n = sizeof line - 1;
        memcpy(line, p, n);
        line[n] = 0;
        if (json_num(line, "recall") >= recall) {
            *ef = json_num(line, "ef");
            *rec = json_num(line, "recall");
            *t1 = json_num(line, "qps_per_core_t1");
            *t2 = json_num(line, "qps_per_core_t2");
            return 1;
        }
        p += n;
    }
    return 0;
}

int bench_throughput(int argc, char **argv)
{
    struct cli_args a;
    const char *dir, *client_path, *data, *python, *hindex;
    char path[4096], cpath[4096], load0[64], load1[64];
    unsigned batches[MAXL], threads[MAXL], windows[MAXL];
    size_t nb, nt, nwin, i, ti, bi, k, r, qn, gn;
    long queries, pool, rounds, efs;
    struct ctx x;
    struct run best, run;
    mess_params p;
    float *qv = NULL;
    uint64_t *gt = NULL;
    double codes = 0, expanded = 0, recall = 0, best_search[MAXL], best_all[MAXL];
    double all_hits = 0, all_answers = 0;
    int rc, want_hnswlib, said = 0, layout;
    FILE *json = NULL;
    char *jbuf = NULL;
    size_t jlen = 0;

    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(help, stdout);
        return CLI_OK;
    }
    dir = cli_opt(&a, "--server");
    data = cli_opt(&a, "--data");
    client_path = cli_opt(&a, "--client");
    python = cli_opt(&a, "--python");
    hindex = cli_opt(&a, "--hnswlib-index");
    want_hnswlib = cli_flag(&a, "--hnswlib");
    if (!python)
        python = "/usr/bin/python3";
    if (cli_opt_ulist(&a, "--batches", "1,16,64,256", batches, MAXL, &nb) ||
        cli_opt_ulist(&a, "--threads", "1,2", threads, MAXL, &nt) ||
        cli_opt_ulist(&a, "--windows", "256,0", windows, MAXL, &nwin)) {
        cli_error("bad --batches, --threads or --windows list");
        return CLI_USAGE;
    }
    if (cli_opt_long(&a, "--queries", 1, 1000000, 1000, &queries) ||
        cli_opt_long(&a, "--pool", 1, 1000000, 1500, &pool) ||
        cli_opt_long(&a, "--rounds", 1, 100, 3, &rounds) ||
        cli_opt_long(&a, "--ef-search", -1, MESS_MAX_EF, -1, &efs) ||
        cli_layout_opt(&a, &layout) != CLI_OK || cli_check_unused(&a))
        return CLI_USAGE;
    for (i = 0; i < nb; i++)
        if (batches[i] == 0 || batches[i] > 100000) {
            cli_error("--batches: 1 .. 100000 requests a batch");
            return CLI_USAGE;
        }
    for (i = 0; i < nt; i++)
        if (threads[i] == 0 || threads[i] > MESS_MAX_THREADS) {
            cli_error("--threads: 1 .. %d", MESS_MAX_THREADS);
            return CLI_USAGE;
        }
    for (i = 0; i < nwin; i++)
        if (windows[i] > SEARCH_WINDOW_MAX) {
            cli_error("--windows: 0 .. %d", SEARCH_WINDOW_MAX);
            return CLI_USAGE;
        }
    if (!dir || !data) {
        cli_error("--server and --data are required (mess bench throughput --help)");
        return CLI_USAGE;
    }
    if (!client_path) {
        snprintf(cpath, sizeof cpath, "%s.client", dir);
        client_path = cpath;
    }
    memset(&x, 0, sizeof x);
    bench_loadavg(load0, sizeof load0);
    printf("mess bench throughput: %s, load %s\n", dir, load0);
    rc = mess_client_load(client_path, NULL, &x.c);
    if (rc != MESS_OK)
        return cli_fail("cannot load the client", client_path, rc);
    mess_client_params(x.c, &p);
    if (cli_server_open(dir, &p, client_path, &x.s) != CLI_OK) {
        mess_client_free(x.c);
        return CLI_FAIL;
    }
    if (cli_server_layout(x.s, layout, dir) != CLI_OK) {
        rc = MESS_EPARAM;
        said = 1;
        goto out;
    }
    rc = server_ready(x.s, NULL, 0);
    if (rc == MESS_OK && efs >= 0)
        rc = mess_server_set_ef_search(x.s, (uint32_t)efs);
    if (rc != MESS_OK) {
        cli_fail("bench throughput", dir, rc);
        said = 1;
        goto out;
    }
    mess_server_params(x.s, &p);
    snprintf(path, sizeof path, "%s/query.bvecs", data);
    rc = mess_vecs_read_f32(path, &qv, &qn, &x.dim);
    if (rc != MESS_OK) {
        cli_fail("cannot read", path, rc);
        said = 1;
        goto out;
    }
    snprintf(path, sizeof path, "%s/groundtruth.ivecs", data);
    if (cli_read_ids(path, "ground truth", &gt, &gn, &x.gk) != CLI_OK) {
        rc = MESS_EIO;
        said = 1; /* cli_read_ids said why */
        goto out;
    }
    x.nq = (size_t)queries < qn ? (size_t)queries : qn;
    if (gn < x.nq) {
        cli_error("%s: %zu rows for %zu queries", path, gn, x.nq);
        rc = MESS_EINVAL;
        said = 1;
        goto out;
    }
    x.q = qv;
    x.gt = gt;
    x.pool = (size_t)pool;
    x.rs = mess_request_size(&p);
    x.windows = windows;
    x.nwin = nwin;
    {
        size_t maxb = 0;
        for (i = 0; i < nb; i++)
            if (batches[i] > maxb)
                maxb = batches[i];
        if (maxb > x.nq)
            maxb = x.nq;
        x.qcap = maxb;
        x.qs = (mess_query **)calloc(maxb, sizeof *x.qs);
        x.reqbuf = (uint8_t *)malloc(maxb * x.rs);
        x.reqs = (uint8_t **)calloc(maxb, sizeof *x.reqs);
        x.resps = (uint8_t **)calloc(maxb, sizeof *x.resps);
        x.req_lens = (size_t *)calloc(maxb, sizeof *x.req_lens);
        x.resp_lens = (size_t *)calloc(maxb, sizeof *x.resp_lens);
        x.n_out = (size_t *)calloc(maxb, sizeof *x.n_out);
        x.ids = (uint64_t *)calloc(maxb * K, sizeof *x.ids);
        x.dists = (float *)calloc(maxb * K, sizeof *x.dists);
        x.digest = (uint8_t(*)[16])calloc(maxb, sizeof *x.digest);
        if (!x.qs || !x.reqbuf || !x.reqs || !x.resps || !x.req_lens || !x.resp_lens ||
            !x.n_out || !x.ids || !x.dists || !x.digest) {
            rc = MESS_ENOMEM;
            goto out;
        }
    }
    rc = count_codes(x.c, x.s, x.q, x.nq < 200 ? x.nq : 200, x.dim, x.pool, &codes,
                     &expanded);
    if (rc != MESS_OK)
        goto out;
    printf("  pool %zu, ef_search %u: %.0f codes scored per query (upper layers "
           "included), %.0f nodes expanded (first %zu queries)\n",
           x.pool, p.ef_search, codes, expanded, x.nq < 200 ? x.nq : 200);
    json = open_memstream(&jbuf, &jlen);
    if (!json) {
        rc = MESS_ENOMEM;
        goto out;
    }
    fprintf(json, "{\"server\":\"%s\",\"queries\":%zu,\"pool\":%zu,\"ef_search\":%u,"
                  "\"codes_per_query\":%.1f,\"expanded_per_query\":%.1f,\"runs\":[",
            dir, x.nq, x.pool, p.ef_search, codes, expanded);
    printf("  q/s per core (CPU of all threads); wall q/s in brackets\n");
    printf("  %-7s %-6s %12s", "workers", "batch", "request");
    for (k = 0; k < nwin; k++) {
        char name[32];
        snprintf(name, sizeof name, "search W%u", windows[k]);
        printf(" %18s", name);
    }
    printf(" %12s %10s\n", "finish", "all three");
    for (k = 0; k < nwin; k++)
        best_search[k] = best_all[k] = 0;
    for (ti = 0; ti < nt && rc == MESS_OK; ti++) {
        rc = mess_workers_new(threads[ti], &x.w);
        for (bi = 0; bi < nb && rc == MESS_OK; bi++) {
            x.b = batches[bi];
            best.req.cpu = best.req.wall = best.fin.cpu = best.fin.wall = 1e30;
            for (k = 0; k < nwin; k++)
                best.search[k].cpu = best.search[k].wall = 1e30;
            x.hits = 0;
            for (r = 0; r < (size_t)rounds && rc == MESS_OK; r++) {
                rc = one_run(&x, r, &run);
#define KEEP(f)                           \
    if (run.f.cpu < best.f.cpu)           \
        best.f.cpu = run.f.cpu;           \
    if (run.f.wall < best.f.wall)         \
        best.f.wall = run.f.wall;
                KEEP(req)
                KEEP(fin)
                for (k = 0; k < nwin; k++) {
                    KEEP(search[k])
                }
#undef KEEP
            }
            if (rc != MESS_OK)
                break;
            recall = (double)x.hits / ((double)rounds * (double)x.nq * K);
            all_hits += (double)x.hits;
            all_answers += (double)rounds * (double)x.nq * K;
            printf("  %-7u %-6u %12.0f", threads[ti], batches[bi],
                   (double)x.nq / best.req.cpu);
            fprintf(json, "%s{\"threads\":%u,\"batch\":%u,\"recall\":%.4f,"
                          "\"request_qps_per_core\":%.1f,\"finish_qps_per_core\":%.1f,"
                          "\"request_qps\":%.1f,\"finish_qps\":%.1f,\"search\":[",
                    ti || bi ? "," : "", threads[ti], batches[bi], recall,
                    (double)x.nq / best.req.cpu, (double)x.nq / best.fin.cpu,
                    (double)x.nq / best.req.wall, (double)x.nq / best.fin.wall);
            for (k = 0; k < nwin; k++) {
                double all = (double)x.nq / (best.req.cpu + best.search[k].cpu + best.fin.cpu);
                printf(" %9.0f [%6.0f]", (double)x.nq / best.search[k].cpu,
                       (double)x.nq / best.search[k].wall);
                fprintf(json, "%s{\"window\":%u,\"qps_per_core\":%.1f,\"qps\":%.1f,"
                              "\"all_qps_per_core\":%.1f}",
                        k ? "," : "", windows[k], (double)x.nq / best.search[k].cpu,
                        (double)x.nq / best.search[k].wall, all);
                if (threads[ti] == 1 && (double)x.nq / best.search[k].cpu > best_search[k])
                    best_search[k] = (double)x.nq / best.search[k].cpu;
                if (threads[ti] == 1 && all > best_all[k])
                    best_all[k] = all;
            }
            fprintf(json, "]}");
            printf(" %12.0f %10.0f\n", (double)x.nq / best.fin.cpu,
                   (double)x.nq / (best.req.cpu + best.search[0].cpu + best.fin.cpu));
            fflush(stdout);
        }
        mess_workers_free(x.w);
        x.w = NULL;
    }
    if (rc != MESS_OK) {
        fclose(json);
        json = NULL;
        goto out;
    }
    recall = all_answers > 0 ? all_hits / all_answers : 0; /* every run's */
    printf("  recall@10 %.4f; responses differing between server modes: %zu\n", recall,
           x.differ);
    fprintf(json, "],\"recall\":%.4f,\"differ\":%zu", recall, x.differ);
    if (want_hnswlib) {
        char cmd[8192], *hbuf = NULL;
        size_t hlen = 0;
        FILE *h = open_memstream(&hbuf, &hlen);
        double ef, rec = 0, t1 = 0, t2 = 0;
        snprintf(cmd, sizeof cmd,
                 "%s scripts/hnswlib_ref.py --data '%s' --queries %zu --throughput 1,2 "
                 "--ef " BENCH_HNSWLIB_EFS "%s%s%s 2>/dev/null",
                 python, data, x.nq, hindex ? " --index '" : "", hindex ? hindex : "",
                 hindex ? "'" : "");
        if (!h) {
            rc = MESS_ENOMEM;
            goto out;
        }
        bench_hnswlib_lines(cmd, h);
        fclose(h);
        fprintf(json, ",%s", hbuf);
        if (hnswlib_pick(hbuf, recall, &ef, &rec, &t1, &t2)) {
            printf("  hnswlib at ef %.0f (recall@10 %.4f >= %.4f): %.0f q/s per core on 1 "
                   "thread, %.0f on 2\n",
                   ef, rec, recall, t1, t2);
            for (k = 0; k < nwin; k++)
                printf("  hnswlib / libmess (1 worker, best batch, W%u): server search "
                       "%.2fx, all three roles %.2fx\n",
                       windows[k], t1 / best_search[k], t1 / best_all[k]);
            fprintf(json, ",\"hnswlib_ef\":%.0f,\"hnswlib_recall\":%.4f,"
                          "\"hnswlib_qps_per_core_t1\":%.1f,\"hnswlib_qps_per_core_t2\":%.1f,"
                          "\"ratio_search\":%.3f,\"ratio_all\":%.3f",
                    ef, rec, t1, t2, t1 / best_search[0], t1 / best_all[0]);
        } else {
            printf("  hnswlib: no ef reached recall@10 %.4f\n", recall);
        }
        free(hbuf);
    }
    bench_loadavg(load1, sizeof load1);
    fprintf(json, ",\"load_before\":\"%s\",\"load_after\":\"%s\"}", load0, load1);
    fclose(json);
    json = NULL;
    printf("  load %s before, %s after\n", load0, load1);
    printf("%s\n", jbuf);
    if (x.differ || x.bad)
        rc = MESS_EFORMAT;
out:
    if (json)
        fclose(json);
    free(jbuf);
    mess_workers_free(x.w);
    for (i = 0; x.qs && i < x.qcap; i++)
        mess_query_free(x.qs[i]); /* a run that failed midway */
    free(x.qs);
    free(x.reqbuf);
    free(x.reqs);
    free(x.resps);
    free(x.req_lens);
    free(x.resp_lens);
    free(x.n_out);
    free(x.ids);
    free(x.dists);
    free(x.digest);
    free(gt);
    mess_vecs_free(qv);
    mess_server_free(x.s);
    mess_client_free(x.c);
    if (rc != MESS_OK) {
        if (said) /* the reason is printed already */
            return CLI_FAIL;
        if (x.differ)
            cli_error("%zu responses differ between server modes", x.differ);
        else if (x.bad)
            cli_error("%zu queries returned no result (a bug)", x.bad);
        else
            cli_error("bench throughput: %s", mess_strerror(rc));
        return CLI_FAIL;
    }
    return CLI_OK;
}
