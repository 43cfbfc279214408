/*
 * bench_protocol.c - `mess bench protocol`: the MESS protocol on a real
 * TEXMEX set, against plaintext references measured in the same run.
 *
 * For each flip configuration (No-Noise, p_D/p_q = 0.08/0.08, 0.08/0.12 by
 * default) it builds a client and a server in memory and reports:
 *   - build: seconds and entries/s (hash, perturb, encrypt, insert);
 *   - recall@10 against the exact ground truth for every total pool B of
 *     the curve (the paper's candidate budget, section 6);
 *   - at the timing pool: server ms/query on one thread, client ms/query
 *     (request encoding + finish), exact bytes/query;
 *   - server memory per entry.
 * Payload encodings f16 / i8 are built for the timing configuration and
 * reported as recall and bytes at each pool.  The plaintext references are
 * the exact top-10 (recall 1 by definition) and hnswlib HNSW on the raw
 * vectors, run through scripts/hnswlib_ref.py in the same invocation.
 * Times are process CPU time (robust on a shared machine; during a query
 * phase only that phase runs) with the wall time beside it.  The last line is one JSON object.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../mess.h"
#include "client.h"
#include "bench.h"

#define MAX_POOLS 32
#define MAX_CONFIGS 8
#define K 10

struct dataset {
    float *base, *query, *learn;
    int32_t *gt;
    size_t nb, nq, nl, dim, gk;
};

struct config {
    const char *name;
    double p_store, p_query;
};

struct result {
    const char *name;
    uint32_t payload;
    double train_s, build_s, build_cpu_s, entries_per_s;
    size_t entries, server_bytes;
    double recall[MAX_POOLS];
    double bytes[MAX_POOLS];
    double unique[MAX_POOLS];
    /* at the timing pool */
    int timed;
    double srv_cpu_ms, srv_wall_ms, enc_cpu_ms, fin_cpu_ms, cli_wall_ms;
    double fin_all_cpu_ms; /* finish with verify-all, the same responses */
    double fin_entry_cpu_ms; /* finish on the per-entry libsodium path */
    size_t differs;        /* queries whose results differed from it (bug) */
    double t_bytes, t_recall;
};

static void free_dataset(struct dataset *d)
{
    mess_vecs_free(d->base);
    mess_vecs_free(d->query);
    mess_vecs_free(d->learn);
    mess_vecs_free(d->gt);
}

static int load_dataset(const char *dir, size_t max_query,
                        struct dataset *d)
{
    char path[4096];
    size_t d2, d3, gn;
    int rc;
    memset(d, 0, sizeof *d);
    if (cli_read_set(dir, "base", &d->base, &d->nb, &d->dim) ||
        cli_read_set(dir, "query", &d->query, &d->nq, &d2) ||
        cli_read_set(dir, "learn", &d->learn, &d->nl, &d3))
        return -1;
    snprintf(path, sizeof path, "%s/groundtruth.ivecs", dir);
    rc = mess_ivecs_read(path, &d->gt, &gn, &d->gk);
    if (rc != MESS_OK) {
        cli_fail("cannot read", path, rc);
        return -1;
    }
    if (d2 != d->dim || d3 != d->dim || gn != d->nq || d->gk < K) {
        cli_error("'%s': inconsistent dimensions or ground truth", dir);
        return -1;
    }
    if (max_query && max_query < d->nq)
        d->nq = max_query;
    return 0;
}

static size_t parse_list(const char *s, long *out, size_t max)
{
    size_t n = 0;
    while (s && *s && n < max) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v <= 0)
            return 0;
        out[n++] = v;
        s = end;
        if (*s == ',')
            s++;
        else if (*s)
            return 0;
    }
    return s && *s ? 0 : n;
}

static size_t hits_at_k(const int32_t *gt, const uint64_t *ids, size_t got)
{
    size_t g, r, h = 0;
    for (g = 0; g < K; g++)
        for (r = 0; r < got; r++)
            if ((uint64_t)(uint32_t)gt[g] == ids[r]) {
                h++;
                break;
            }
    return h;
}

/* Builds client + server for params p; fills the build fields of res. */
static int build(const struct dataset *d, const mess_params *p,
                 const uint8_t *seed, unsigned threads, mess_client **c,
                 mess_server **s, struct result *res)
{
    const size_t batch = 20000;
    uint64_t *ids;
    size_t i;
    double t0 = cli_wall_s(), c0 = cli_cpu_s();
    mess_server_stats st;
    int rc;

    *c = NULL;
    *s = NULL;
    ids = (uint64_t *)malloc(d->nb * sizeof *ids);
    if (!ids)
        return MESS_ENOMEM;
    for (i = 0; i < d->nb; i++)
        ids[i] = i;
    rc = mess_client_new(p, d->learn, d->nl, seed, threads, c);
    res->train_s = cli_wall_s() - t0;
    /* the build proper: hash, perturb, encrypt (client), insert (server) */
    t0 = cli_wall_s();
    c0 = cli_cpu_s();
    if (rc == MESS_OK)
        rc = mess_server_new(p, s);
    for (i = 0; rc == MESS_OK && i < d->nb; i += batch) {
        size_t m = d->nb - i < batch ? d->nb - i : batch, len;
        uint8_t *buf;
        rc = mess_client_upload(*c, ids + i, d->base + i * d->dim, m, threads,
                                &buf, &len);
        if (rc == MESS_OK) {
            rc = mess_server_apply_upload(*s, buf, len, threads);
            mess_buf_free(buf);
        }
        if (isatty(2))
            fprintf(stderr, "\r  build %s: %zu/%zu", res->name, i + m, d->nb);
    }
    if (isatty(2))
        fputc('\n', stderr);
    free(ids);
    if (rc != MESS_OK)
        return rc;
    res->build_s = cli_wall_s() - t0;
    res->build_cpu_s = cli_cpu_s() - c0;
    mess_server_stats_get(*s, &st);
    res->entries = st.entries;
    res->server_bytes = st.bytes;
    res->entries_per_s = res->build_s > 0 ? (double)st.entries / res->build_s : 0;
    return MESS_OK;
}

/* Timers of one timed pool, summed over its queries. */
struct timers {
    double enc_c, srv_c, srv_w, fin_c, fin_all_c, fin_entry_c, cli_w;
};

/* Finishes responses [0, n) of a batch with verify-all off or on, on the
 * batched path or the per-entry one (client_finish_set_batched); CPU (and
 * wall) time added to the timers given. */
static int finish_batch(mess_client *c, mess_query **qs, const uint8_t *hold,
                        size_t cap, const size_t *sl, size_t n, int verify_all,
                        int batched, uint64_t *ids, float *dists, size_t *got,
                        mess_finish_stats *st, double *cpu, double *wall)
{
    size_t i;
    double c0, w0;
    int rc = mess_client_set_verify_all(c, verify_all);
    client_finish_set_batched(c, batched);
    c0 = cli_cpu_s();
    w0 = cli_wall_s();
    for (i = 0; i < n && rc == MESS_OK; i++)
        rc = mess_client_finish(c, qs[i], hold + i * cap, sl[i], K, ids + i * K,
                                dists + i * K, &got[i], &st[i]);
    *cpu += cli_cpu_s() - c0;
    if (wall)
        *wall += cli_wall_s() - w0;
    client_finish_set_batched(c, 1);
    mess_client_set_verify_all(c, 0);
    return rc;
}

/* Whether query i of the batch got the same results in two finishes. */
static int same_results(size_t i, const size_t *got_a, const uint64_t *ids_a,
                        const float *d_a, const size_t *got_b, const uint64_t *ids_b,
                        const float *d_b)
{
    return got_a[i] == got_b[i] &&
           memcmp(ids_a + i * K, ids_b + i * K, got_a[i] * sizeof *ids_a) == 0 &&
           memcmp(d_a + i * K, d_b + i * K, got_a[i] * sizeof *d_a) == 0;
}

/* Recall and bytes at every pool; timing at `tpool` when timed.
 *
 * Each role runs as it would in its own process: a batch of requests, then
 * the server's searches back to back (one thread; each response is moved to
 * the client's receive area and freed, so the server allocator reaches the
 * steady state of a serving loop), then the client's finishes.  At the
 * timing pool the finishes are also run with verify-all, the default's
 * baseline, and on the per-entry libsodium path (the finish before the
 * lane core), the three in an order that rotates per batch so none always
 * finds the responses in cache; all must rank the same (res->differs if
 * not). */
static int evaluate(const struct dataset *d, mess_client *c, const mess_server *s,
                    const mess_params *p, const long *pools, size_t npools,
                    long tpool, int timed, struct result *res)
{
    enum { BATCH = 32 };
    mess_query *qs[BATCH];
    size_t rl[BATCH], sl[BATCH], got[BATCH], got_all[BATCH], got_ent[BATCH];
    mess_finish_stats st[BATCH], st_all[BATCH], st_ent[BATCH];
    uint64_t ids[BATCH * K], ids_all[BATCH * K], ids_ent[BATCH * K];
    float dists[BATCH * K], dists_all[BATCH * K], dists_ent[BATCH * K];
    uint8_t *hold = NULL;
    size_t b, q0, i, n = 0, cap;
    int rc = MESS_OK;

    memset(qs, 0, sizeof qs);
    for (b = 0; b < npools && rc == MESS_OK; b++) {
        size_t hits = 0;
        double bytes = 0, uniq = 0, c0, w0;
        int timing = timed && pools[b] == tpool;
        struct timers t;
        memset(&t, 0, sizeof t);
        /* a slot holds a request, then its response */
        cap = mess_response_size(p, (size_t)pools[b]);
        if (cap < mess_request_size(p))
            cap = mess_request_size(p);
        free(hold);
        hold = (uint8_t *)malloc(BATCH * cap);
        if (!hold || cap == 0) {
            rc = MESS_ENOMEM;
            break;
        }
        for (q0 = 0; q0 < d->nq && rc == MESS_OK; q0 += n) {
            size_t v, rot = (q0 / BATCH) % 3;
            n = d->nq - q0 < BATCH ? d->nq - q0 : BATCH;
            c0 = cli_cpu_s();
            w0 = cli_wall_s();
            for (i = 0; i < n && rc == MESS_OK; i++) {
                uint8_t *req;
                rc = mess_client_request(c, d->query + (q0 + i) * d->dim,
                                         (size_t)pools[b], &qs[i], &req, &rl[i]);
                if (rc == MESS_OK)
                    memcpy(hold + i * cap, req, rl[i]);
                mess_buf_free(req);
            }
            t.enc_c += cli_cpu_s() - c0;
            t.cli_w += cli_wall_s() - w0;
            for (i = 0; i < n && rc == MESS_OK; i++) {
                uint8_t *resp = NULL;
                c0 = cli_cpu_s();
                w0 = cli_wall_s();
                rc = mess_server_search(s, hold + i * cap, rl[i], 1, &resp, &sl[i]);
                t.srv_c += cli_cpu_s() - c0;
                t.srv_w += cli_wall_s() - w0;
                if (rc == MESS_OK && sl[i] > cap)
                    rc = MESS_EFORMAT; /* larger than mess_response_size: a bug */
                if (rc == MESS_OK)
                    memcpy(hold + i * cap, resp, sl[i]);
                mess_buf_free(resp);
            }
            for (v = 0; v < 3 && rc == MESS_OK; v++) {
                switch ((v + rot) % 3) {
                case 0:
                    rc = finish_batch(c, qs, hold, cap, sl, n, 0, 1, ids, dists, got, st,
                                      &t.fin_c, &t.cli_w);
                    break;
                case 1:
                    if (timing)
                        rc = finish_batch(c, qs, hold, cap, sl, n, 1, 1, ids_all,
                                          dists_all, got_all, st_all, &t.fin_all_c, NULL);
                    break;
                default:
                    if (timing)
                        rc = finish_batch(c, qs, hold, cap, sl, n, 0, 0, ids_ent,
                                          dists_ent, got_ent, st_ent, &t.fin_entry_c, NULL);
                    break;
                }
            }
            for (i = 0; i < n && rc == MESS_OK; i++) {
                if (timing &&
                    (!same_results(i, got, ids, dists, got_all, ids_all, dists_all) ||
                     !same_results(i, got, ids, dists, got_ent, ids_ent, dists_ent) ||
                     memcmp(&st[i], &st_ent[i], sizeof st[i]) != 0))
                    res->differs++;
                hits += hits_at_k(d->gt + (q0 + i) * d->gk, ids + i * K, got[i]);
                bytes += (double)(rl[i] + sl[i]);
                uniq += (double)st[i].unique;
            }
            for (i = 0; i < n; i++) {
                mess_query_free(qs[i]);
                qs[i] = NULL;
            }
        }
        if (rc != MESS_OK)
            break;
        res->recall[b] = (double)hits / ((double)d->nq * K);
        res->bytes[b] = bytes / (double)d->nq;
        res->unique[b] = uniq / (double)d->nq;
        if (timing) {
            double nq = (double)d->nq;
            res->timed = 1;
            res->srv_cpu_ms = 1e3 * t.srv_c / nq;
            res->srv_wall_ms = 1e3 * t.srv_w / nq;
            res->enc_cpu_ms = 1e3 * t.enc_c / nq;
            res->fin_cpu_ms = 1e3 * t.fin_c / nq;
            res->fin_all_cpu_ms = 1e3 * t.fin_all_c / nq;
            res->fin_entry_cpu_ms = 1e3 * t.fin_entry_c / nq;
            res->cli_wall_ms = 1e3 * t.cli_w / nq;
            res->t_bytes = res->bytes[b];
            res->t_recall = res->recall[b];
        }
    }
    for (i = 0; i < BATCH; i++)
        mess_query_free(qs[i]);
    free(hold);
    return rc;
}

/* hnswlib on the raw vectors through the Python helper: one JSON line per
 * ef, "{"ef":E,"recall":R,"ms_per_query":T}", and a build line. */
static void hnswlib_ref(const char *python, const char *script, const char *dir,
                        FILE *json)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s %s --data '%s' --ef 10,20,40,80,160,320 2>/dev/null",
             python, script, dir);
    bench_hnswlib_lines(cmd, json);
}

static const char help[] =
    "usage: mess bench protocol [options]\n"
    "\n"
    "Recall@10 vs total pool B for No-Noise and MESS flip settings, with\n"
    "timing, bytes per query, build rate and server memory; plaintext hnswlib\n"
    "on the raw vectors as reference in the same run.\n"
    "\n"
    "  --data DIR        base/query/learn (.bvecs|.fvecs), groundtruth.ivecs\n"
    "                    (datasets/sift)\n"
    "  --pools LIST      total pools B (100,200,400,800,1500,2500,4000)\n"
    "  --configs LIST    of nonoise, d8q8 (p_D 0.08, p_q 0.08), d8q12\n"
    "                    (nonoise,d8q8,d8q12)\n"
    "  --payloads LIST   of f32,f16,i8,u8 for the timing configuration (f32,f16,i8)\n"
    "  --timing-pool B   pool of the time and bytes figures (1500)\n"
    "  --queries N       use the first N queries (all)\n"
    "  --threads N       build threads (2); searches and finishes use one\n"
    "  --client-threads N  workers opening response entries in finish (1)\n"
    "  --shards M --per-item T  graphs and copies per item (64, 16)\n"
    "  --seed-env V      deterministic seed: 64 hex digits in $V, or --seed-file F\n"
    "                    (a fixed one by default)\n"
    "  --no-hnswlib      skip the plaintext hnswlib reference\n"
    "  --python P        interpreter for scripts/hnswlib_ref.py (/usr/bin/python3)\n";

static int parse_configs(const char *s, struct config *out, size_t *n)
{
    static const struct config known[] = {
        {"nonoise", 0.0, 0.0}, {"d8q8", 0.08, 0.08}, {"d8q12", 0.08, 0.12}};
    char buf[256], *tok, *save = NULL;
    size_t i;
    *n = 0;
    snprintf(buf, sizeof buf, "%s", s);
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        for (i = 0; i < sizeof known / sizeof known[0]; i++)
            if (strcmp(tok, known[i].name) == 0)
                break;
        if (i == sizeof known / sizeof known[0] || *n == MAX_CONFIGS) {
            cli_error("--configs: unknown or too many entries ('%s')", tok);
            return -1;
        }
        out[(*n)++] = known[i];
    }
    return *n ? 0 : -1;
}

static void print_result(const struct result *r, const long *pools, size_t np,
                         const mess_params *p)
{
    size_t b;
    static const char *const pl[] = {"f32", "f16", "i8", "u8"};
    printf("\n%s payload %s (M=%u t=%u kappa=%u p_D=%.3g p_q=%.3g)\n", r->name,
           pl[r->payload], p->shards, p->per_item, p->kappa, p->p_store,
           mess_effective_flip(p->p_prr, p->p_irr));
    printf("  hash training %.2f s; build (hash, perturb, encrypt, insert) %.2f s"
           " (%.0f entries/s, %.2f s CPU), %zu entries, server %zu bytes"
           " (%.1f bytes/entry)\n",
           r->train_s, r->build_s, r->entries_per_s, r->build_cpu_s, r->entries, r->server_bytes,
           r->entries ? (double)r->server_bytes / (double)r->entries : 0.0);
    printf("  %8s %8s %10s %12s\n", "pool", "recall", "unique", "bytes/query");
    for (b = 0; b < np; b++)
        printf("  %8ld %8.4f %10.1f %12.0f\n", pools[b], r->recall[b], r->unique[b],
               r->bytes[b]);
    if (r->timed)
        printf("  timing: server %.3f ms/query CPU (%.3f wall, 1 thread); client "
               "encode %.3f + finish %.3f = %.3f ms/query CPU (%.3f wall); "
               "finish with verify-all %.3f (%.2fx); finish per entry (libsodium "
               "calls, no lane core) %.3f (%.2fx)\n",
               r->srv_cpu_ms, r->srv_wall_ms, r->enc_cpu_ms, r->fin_cpu_ms,
               r->enc_cpu_ms + r->fin_cpu_ms, r->cli_wall_ms, r->fin_all_cpu_ms,
               r->fin_cpu_ms > 0 ? r->fin_all_cpu_ms / r->fin_cpu_ms : 0.0,
               r->fin_entry_cpu_ms,
               r->fin_cpu_ms > 0 ? r->fin_entry_cpu_ms / r->fin_cpu_ms : 0.0);
}

static void json_result(FILE *f, const struct result *r, const long *pools,
                        size_t np)
{
    static const char *const pl[] = {"f32", "f16", "i8", "u8"};
    size_t b;
    fprintf(f, "{\"config\":\"%s\",\"payload\":\"%s\",\"train_s\":%.3f,"
               "\"build_s\":%.3f,\"build_cpu_s\":%.3f,\"entries_per_s\":%.1f,\"entries\":%zu,\"server_bytes\":%zu,"
               "\"server_bytes_per_entry\":%.1f,\"recall\":{",
            r->name, pl[r->payload], r->train_s, r->build_s, r->build_cpu_s,
            r->entries_per_s, r->entries,
            r->server_bytes,
            r->entries ? (double)r->server_bytes / (double)r->entries : 0.0);
    for (b = 0; b < np; b++)
        fprintf(f, "%s\"%ld\":%.4f", b ? "," : "", pools[b], r->recall[b]);
    fprintf(f, "},\"bytes_per_query\":{");
    for (b = 0; b < np; b++)
        fprintf(f, "%s\"%ld\":%.0f", b ? "," : "", pools[b], r->bytes[b]);
    fprintf(f, "}");
    if (r->timed)
        fprintf(f, ",\"server_ms_per_query\":%.4f,\"server_wall_ms_per_query\":%.4f,"
                   "\"client_encode_ms\":%.4f,\"client_finish_ms\":%.4f,"
                   "\"client_ms_per_query\":%.4f,\"client_wall_ms_per_query\":%.4f,"
                   "\"client_finish_verify_all_ms\":%.4f,\"client_finish_per_entry_ms\":%.4f",
                r->srv_cpu_ms, r->srv_wall_ms, r->enc_cpu_ms, r->fin_cpu_ms,
                r->enc_cpu_ms + r->fin_cpu_ms, r->cli_wall_ms, r->fin_all_cpu_ms,
                r->fin_entry_cpu_ms);
    fprintf(f, "}");
}

int bench_protocol(int argc, char **argv)
{
    struct cli_args a;
    const char *dir, *pools_s, *configs_s, *payloads_s, *python;
    long pools[MAX_POOLS], tpool, nq, threads, cthreads, pay[4], shards, per_item;
    size_t np, nc, npay, i, j, b;
    struct config cfg[MAX_CONFIGS];
    struct dataset d;
    uint8_t seed[32];
    struct result *res;
    size_t nres = 0;
    char *jbuf = NULL;
    size_t jlen = 0;
    FILE *json;
    int no_hnsw, have_seed, rc = CLI_OK;
    const char *pnames[] = {"f32", "f16", "i8", "u8"};

    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(help, stdout);
        return CLI_OK;
    }
    dir = cli_opt(&a, "--data");
    pools_s = cli_opt(&a, "--pools");
    configs_s = cli_opt(&a, "--configs");
    payloads_s = cli_opt(&a, "--payloads");
    for (i = 0; i < 32; i++)
        seed[i] = (uint8_t)(0x5a ^ i);
    if (cli_seed(&a, seed, &have_seed, 0))
        return CLI_USAGE;
    python = cli_opt(&a, "--python");
    no_hnsw = cli_flag(&a, "--no-hnswlib");
    if (cli_opt_long(&a, "--timing-pool", 1, 65535L * 64, 1500, &tpool) ||
        cli_opt_long(&a, "--queries", 0, 100000000, 0, &nq) ||
        cli_opt_long(&a, "--threads", 1, 256, 2, &threads) ||
        cli_opt_long(&a, "--client-threads", 1, 64, 1, &cthreads) ||
        cli_opt_long(&a, "--shards", 1, MESS_MAX_SHARDS, 64, &shards) ||
        cli_opt_long(&a, "--per-item", 1, MESS_MAX_SHARDS, 16, &per_item) ||
        cli_check_unused(&a))
        return CLI_USAGE;
    if (!dir)
        dir = "datasets/sift";
    if (!python)
        python = "/usr/bin/python3";
    np = parse_list(pools_s ? pools_s : "100,200,400,800,1500,2500,4000", pools, MAX_POOLS);
    if (np == 0) {
        cli_error("--pools: expected a comma-separated list of positive integers");
        return CLI_USAGE;
    }
    if (parse_configs(configs_s ? configs_s : "nonoise,d8q8,d8q12", cfg, &nc))
        return CLI_USAGE;
    npay = 0;
    {
        char buf[64], *tok, *save = NULL;
        snprintf(buf, sizeof buf, "%s", payloads_s ? payloads_s : "f32,f16,i8");
        for (tok = strtok_r(buf, ",", &save); tok && npay < 4; tok = strtok_r(NULL, ",", &save)) {
            for (j = 0; j < 4 && strcmp(tok, pnames[j]) != 0; j++)
                ;
            if (j == 4) {
                cli_error("--payloads: unknown encoding '%s'", tok);
                return CLI_USAGE;
            }
            pay[npay++] = (long)j;
        }
    }
    /* the timing pool is always part of the curve */
    for (b = 0; b < np && pools[b] != tpool; b++)
        ;
    if (b == np && np < MAX_POOLS)
        pools[np++] = tpool;
    if (load_dataset(dir, (size_t)nq, &d) != 0) {
        free_dataset(&d);
        return CLI_FAIL;
    }
    res = (struct result *)calloc(nc + npay, sizeof *res);
    json = open_memstream(&jbuf, &jlen);
    if (!res || !json) {
        free(res);
        free_dataset(&d);
        cli_error("out of memory");
        return CLI_FAIL;
    }
    printf("mess bench protocol: %s, %zu base, %zu queries, dim %zu, %zu training vectors\n",
           dir, d.nb, d.nq, d.dim, d.nl);
    printf("exact top-%d reference: recall 1 by definition (ground truth)\n", K);
    fprintf(json, "{\"bench\":\"protocol\",\"data\":\"%s\",\"base\":%zu,\"queries\":%zu,"
                  "\"dim\":%zu,\"timing_pool\":%ld,\"build_threads\":%ld,"
                  "\"client_threads\":%ld,",
            dir, d.nb, d.nq, d.dim, tpool, threads, cthreads);
    if (!no_hnsw) {
        char script[4096];
        snprintf(script, sizeof script, "scripts/hnswlib_ref.py");
        printf("plaintext HNSW (hnswlib on the raw vectors, M=16, efConstruction=300, one thread):\n");
        hnswlib_ref(python, script, dir, json);
        fprintf(json, ",");
    }
    fprintf(json, "\"runs\":[");

    /* configurations with f32 payloads, then the payload variants of the
     * timing configuration (d8q8 if present, else the first). */
    {
        size_t tcfg = 0;
        for (i = 0; i < nc; i++)
            if (strcmp(cfg[i].name, "d8q8") == 0)
                tcfg = i;
        for (i = 0; i < nc + npay && rc == CLI_OK; i++) {
            const struct config *cf = i < nc ? &cfg[i] : &cfg[tcfg];
            uint32_t payload = i < nc ? MESS_PAYLOAD_F32 : (uint32_t)pay[i - nc];
            mess_params p;
            mess_client *c;
            mess_server *s;
            struct result *r = &res[nres];
            int err;
            if (i >= nc && payload == MESS_PAYLOAD_F32)
                continue; /* already measured */
            mess_params_default(&p, (uint32_t)d.dim);
            p.shards = (uint32_t)shards;
            p.per_item = (uint32_t)per_item;
            p.p_store = cf->p_store;
            p.p_prr = p.p_irr = mess_split_flip(cf->p_query);
            p.payload = payload;
            r->name = cf->name;
            r->payload = payload;
            err = build(&d, &p, seed, (unsigned)threads, &c, &s, r);
            if (err == MESS_OK)
                err = mess_client_set_threads(c, (unsigned)cthreads);
            if (err == MESS_OK)
                err = evaluate(&d, c, s, &p, pools, np, tpool,
                               i == tcfg || i >= nc, r);
            if (err == MESS_OK && r->differs) {
                cli_error("%s: %zu queries ranked differently with verify-all or per entry",
                          cf->name, r->differs);
                rc = CLI_FAIL;
            } else if (err != MESS_OK) {
                cli_error("%s: %s", cf->name, mess_strerror(err));
                rc = CLI_FAIL;
            } else {
                print_result(r, pools, np, &p);
                fflush(stdout);
                json_result(json, r, pools, np);
                nres++;
                if (i + 1 < nc + npay)
                    fprintf(json, ",");
            }
            mess_client_free(c);
            mess_server_free(s);
        }
    }
    fprintf(json, "]}");
    fclose(json);
    if (rc == CLI_OK) {
        /* strip a trailing comma left by a skipped f32 variant */
        char *p = strstr(jbuf, ",]}");
        if (p)
            memmove(p, p + 1, strlen(p + 1) + 1);
        printf("%s\n", jbuf);
    }
    free(jbuf);
    free(res);
    free_dataset(&d);
    return rc;
}
