/*
 * plan_config.c - `mess plan --target-recall R [--max-xi X]`: searches
 * configurations (M, t, kappa, and the flips their privacy limits allow)
 * for the fewest bytes per query reaching a recall target, with the
 * correctness model and the search check of `mess plan` (plan.c), on the
 * client's own data.  Everything runs locally.  The search and the
 * privacy units it works in are the library's mess_plan_choose
 * (src/plan/choose.c, mess_experimental.h); this file reads the options
 * and prints the candidates and the winner.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../mess.h"
#include "cli.h"

static const char help[] =
    "usage: mess plan --target-recall R --train FILE --data FILE --queries FILE\n"
    "                 [--max-xi X] [--max-xi-query Y] [options]\n"
    "\n"
    "Searches configurations for the fewest bytes per query reaching Recall@k\n"
    "R under privacy limits, on the client's own data (nothing leaves this\n"
    "process).  For every M in --grid-shards, t in --grid-per-item (t <= M)\n"
    "and kappa in --grid-bits it takes the least noise the limits allow:\n"
    "\n"
    "  p_D: the smallest flip with  ln((1-p_D)/p_D) t kappa / 128 <= X\n"
    "  p_q: the smallest flip with  ln((1-p_q)/p_q) M kappa / 128 <= Y and\n"
    "       ln((1-a)/a) M kappa / 128 <= Y_cap, a = p_PRR = p_IRR (the split\n"
    "       of p_q; the bound for any number of submissions of one query)\n"
    "  both: ln((1-p)/p) kappa / 128 <= Z for p = p_D and p = p_q (one shard's\n"
    "       code of an item or a query: the per-shard noise floor)\n"
    "\n"
    "These are the accountants' pure stored-data bound (Theorem 5.2) and the\n"
    "access-pattern bound (Theorem 5.4) for a pair whose codes differ in\n"
    "1/128 of the bits of every shard (a pair's distance in bits grows with\n"
    "kappa).  The defaults are the paper's configuration (M 64, t 16, kappa\n"
    "128, p_D = p_q = 0.08): X = 39.08, Y = 156.3, Y_cap = 200.6, Z = 2.442,\n"
    "so without --max-xi* the search is at privacy no worse than the\n"
    "defaults' in these units (real pairs can differ).  Without Z the totals alone let fewer shards and bits with\n"
    "almost no noise pass (on SIFT, M 16, t 4, kappa 64 would store codes\n"
    "with p_D = 3e-9 and send queries with p_q = 3e-9): --max-xi-shard inf\n"
    "drops it.  Check a choice on real pairs with `mess account report`.\n"
    "\n"
    "Then it trains each candidate's hashes on --train, predicts the recall\n"
    "curve over --pools with the conditional model and the search check of\n"
    "`mess plan` (see mess plan --help), takes the smallest pool reaching R,\n"
    "and its bytes: request + response (mess_request_size,\n"
    "mess_response_size).  The candidate with the fewest bytes wins.\n"
    "\n"
    "  --target-recall R  recall to reach (0 < R < 1)\n"
    "  --max-xi X         stored-data limit (39.08, the defaults' value)\n"
    "  --max-xi-query Y   access-pattern limit, one submission (156.3)\n"
    "  --max-xi-cap Y     access-pattern limit, any submissions (200.6)\n"
    "  --max-xi-shard Z   one shard's limit, items and queries (2.442; inf: none)\n"
    "  --grid-shards L    M values (16,32,64)\n"
    "  --grid-per-item L  t values (4,8,16)\n"
    "  --grid-bits L      kappa values, multiples of 64 (64,128,256)\n"
    "  --train FILE       hash training set, disjoint from --data\n"
    "  --data FILE        the vectors the client stores\n"
    "  --queries FILE     sample of queries; --sample N uses the first N (200)\n"
    "  --gt FILE.ivecs    their exact top-k in --data (default: computed here)\n"
    "  -k K               recall depth (10)\n"
    "  --pools LIST       B values, comma list (250,500,750,1000,1250,1500,\n"
    "                     2000,2500,3000,4000)\n"
    "  --ef-search N      the server's beam floor (0)\n"
    "  --check-shards S   shards the search check rebuilds (4)\n"
    "  --check-queries N  queries the check uses (100)\n"
    "  --threads N        worker threads (1)\n"
    "  --seed-env V / --seed-file F  deterministic hashes (64 hex digits)\n"
    "  --metric, --payload, --hnsw-m, --ef-construction, --train-sample:\n"
    "                     as for mess init (the grid sets the others; a .bvecs\n"
    "                     --data counts u8 payloads' bytes unless --payload says)\n"
    "\n"
    "One line per candidate, then the winner; last line: {\"target\",\"max_xi\",\n"
    "\"max_xi_query\",\"max_xi_cap\",\"max_xi_shard\",\"best\":{...} or null,\"candidates\":[{\"shards\",\n"
    "\"per_item\",\"bits\",\"p_store\",\"p_query\",\"xi_store\",\"xi_query\",\n"
    "\"xi_cap\",\"xi_shard\",\"pool\",\"recall_at_pool\",\"bytes\",\"curve\"},...]}.\n";

/* The candidates as the library reported them, for the last line. */
struct cands {
    mess_plan_candidate *c;
    double *curves; /* npl per candidate */
    size_t n, cap, npl;
    int oom;
};

static void print_line(const mess_plan_candidate *c, size_t npl)
{
    printf("%5u %4u %5u %9.4g %9.4g %8.2f %8.2f %8.2f ", c->shards, c->per_item, c->bits,
           c->p_store, c->p_query, c->xi_store, c->xi_query, c->xi_cap);
    if (c->pool)
        printf("%7zu %8.4f %10.0f\n", c->pool, c->recall, c->bytes);
    else
        printf("%7s %8.4f %10s\n", "-", c->curve[npl - 1], "-");
    fflush(stdout);
}

/* on_candidate: one line now, a copy for the JSON line */
static void keep_candidate(void *ctx, const mess_plan_candidate *c)
{
    struct cands *cs = (struct cands *)ctx;
    print_line(c, cs->npl);
    if (cs->oom)
        return;
    if (cs->n == cs->cap) {
        size_t cap = cs->cap ? 2 * cs->cap : 16;
        mess_plan_candidate *nc = (mess_plan_candidate *)realloc(cs->c, cap * sizeof *nc);
        double *cv;
        if (nc)
            cs->c = nc;
        cv = nc ? (double *)realloc(cs->curves, cap * cs->npl * sizeof *cv) : NULL;
        if (!nc || !cv) {
            cs->oom = 1;
            return;
        }
        cs->curves = cv;
        cs->cap = cap;
    }
    cs->c[cs->n] = *c;
    memcpy(cs->curves + cs->n * cs->npl, c->curve, cs->npl * sizeof *cs->curves);
    cs->n++;
}

static void print_cand(const mess_plan_candidate *c, const double *curve,
                       const size_t *pools, size_t npl)
{
    size_t b;
    printf("{\"shards\":%u,\"per_item\":%u,\"bits\":%u,\"p_store\":%.6g,"
           "\"p_query\":%.6g,\"p_prr\":%.6g,\"xi_store\":%.6g,\"xi_query\":%.6g,"
           "\"xi_cap\":%.6g,\"xi_shard\":%.6g,",
           c->shards, c->per_item, c->bits, c->p_store, c->p_query, c->p_prr, c->xi_store,
           c->xi_query, c->xi_cap, c->xi_shard);
    if (c->pool)
        printf("\"pool\":%zu,\"recall_at_pool\":%.6f,\"bytes\":%.0f,", c->pool,
               c->recall, c->bytes);
    else
        printf("\"pool\":null,\"recall_at_pool\":null,\"bytes\":null,");
    printf("\"curve\":[");
    for (b = 0; b < npl; b++)
        printf("%s[%zu,%.6f]", b ? "," : "", pools[b], curve[b]);
    printf("]}");
}

int cli_plan_configs(int argc, char **argv)
{
    static const char *const grid_defaults[4] = {
        "16,32,64", "4,8,16", "64,128,256", "250,500,750,1000,1250,1500,2000,2500,3000,4000"};
    static const char *const grid_set[] = {"--shards", "--per-item", "--bits",
                                           "--p-store", "--p-query", "--p-prr",
                                           "--p-irr", "--client", NULL};
    struct cli_args a;
    const char *tpath, *dpath, *qpath, *gpath;
    double target, x, y, ycap, z, lim[4];
    long k, sample, threads, ef_search, check_shards, check_queries;
    struct cli_grid g = {NULL, 0, 0, 0, NULL, 0};
    size_t i, best = (size_t)-1;
    size_t n, dim, nq, qdim, ntr, trdim;
    float *train = NULL, *data = NULL, *queries = NULL;
    uint32_t *truth = NULL;
    struct cands cs;
    struct mess_plan_choose_in in;
    mess_plan_choice ch;
    uint8_t seed[32];
    int have_seed, payload_named, rc = CLI_FAIL;
    mess_params base;

    memset(&cs, 0, sizeof cs);
    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(help, stdout);
        return CLI_OK;
    }
    for (i = 0; grid_set[i]; i++)
        if (cli_opt(&a, grid_set[i])) {
            cli_error("%s: --target-recall searches M, t, kappa and the flips itself "
                      "(--grid-shards, --grid-per-item, --grid-bits, --max-xi*); "
                      "it trains its own clients from --train", grid_set[i]);
            return CLI_USAGE;
        }
    mess_plan_default_limits(lim);
    tpath = cli_opt(&a, "--train");
    dpath = cli_opt(&a, "--data");
    qpath = cli_opt(&a, "--queries");
    gpath = cli_opt(&a, "--gt");
    payload_named = cli_opt(&a, "--payload") != NULL;
    if (cli_opt_double(&a, "--target-recall", 1e-9, 1.0 - 1e-9, 0.9, &target) ||
        cli_opt_double(&a, "--max-xi", 1e-9, 1e9, lim[0], &x) ||
        cli_opt_double(&a, "--max-xi-query", 1e-9, 1e9, lim[1], &y) ||
        cli_opt_double(&a, "--max-xi-cap", 1e-9, 1e9, lim[2], &ycap) ||
        cli_opt_double(&a, "--max-xi-shard", 1e-9, INFINITY, lim[3], &z) ||
        cli_opt_long(&a, "-k", 1, 10000, 10, &k) ||
        cli_opt_long(&a, "--sample", 1, 100000000, 200, &sample) ||
        cli_opt_long(&a, "--threads", 1, 256, 1, &threads) ||
        cli_opt_long(&a, "--check-shards", 0, MESS_PLAN_MAX_CHECK_SHARDS, 4,
                     &check_shards) ||
        cli_opt_long(&a, "--check-queries", 1, 100000000, 100, &check_queries) ||
        cli_params_options(&a, 1, &base) || cli_seed(&a, seed, &have_seed, 0))
        return CLI_USAGE;
    ef_search = (long)base.ef_search;
    /* byte data: the bytes of u8 payloads, which mess init chooses for it */
    if (!payload_named && dpath && cli_has_suffix(dpath, ".bvecs"))
        base.payload = MESS_PAYLOAD_U8;
    if ((rc = cli_grid_read(&a, grid_defaults, &g)) != CLI_OK)
        goto done;
    if (cli_check_unused(&a)) {
        rc = CLI_USAGE;
        goto done;
    }
    if (!tpath || !dpath || !qpath) {
        cli_error("plan --target-recall needs --train, --data and --queries (see --help)");
        rc = CLI_USAGE;
        goto done;
    }
    if ((rc = cli_read_vectors(tpath, "training file", &train, &ntr, &trdim)) != CLI_OK ||
        (rc = cli_read_vectors(dpath, "--data", &data, &n, &dim)) != CLI_OK ||
        (rc = cli_read_vectors(qpath, "--queries", &queries, &nq, &qdim)) != CLI_OK)
        goto done;
    rc = CLI_FAIL;
    if (trdim != dim || qdim != dim) {
        cli_error("--train has dimension %zu, --data %zu and --queries %zu: they must agree",
                  trdim, dim, qdim);
        goto done;
    }
    if ((size_t)sample < nq)
        nq = (size_t)sample;
    if ((size_t)k > n) {
        cli_error("-k %ld exceeds the %zu data vectors", k, n);
        rc = CLI_USAGE;
        goto done;
    }
    if (gpath && (rc = cli_read_truth(gpath, nq, k, n, &truth)) != CLI_OK)
        goto done;
    rc = CLI_FAIL;
    base.dim = (uint32_t)dim;
    if (cli_grid_check_training(&g, tpath, ntr, &base))
        goto done;
    printf("configurations at xi_store <= %.4g, xi_query <= %.4g, xi_cap <= %.4g, "
           "xi_shard <= %.4g (per 1/128 of the code); target Recall@%ld %.4g over %zu "
           "queries, %zu items\n", x, y, ycap, z, k, target, nq, n);
    printf("%5s %4s %5s %9s %9s %8s %8s %8s %7s %8s %10s\n", "M", "t", "kappa", "p_D",
           "p_q", "xi_st", "xi_q", "xi_cap", "pool", "recall", "bytes");
    memset(&in, 0, sizeof in);
    in.size = sizeof in; /* mess.h, "Growable structs" */
    in.k = (uint32_t)k;
    in.base = &base;
    in.train = train;
    in.ntrain = ntr;
    in.data = data;
    in.n = n;
    in.queries = queries;
    in.nq = nq;
    in.truth = truth;
    in.target_recall = target;
    in.max_xi = x;
    in.max_xi_query = y;
    in.max_xi_cap = ycap;
    in.max_xi_shard = z;
    cli_grid_input(&g, &in);
    in.check_shards = (uint32_t)check_shards;
    in.check_queries = (uint32_t)check_queries;
    in.threads = (uint32_t)threads;
    in.seed = have_seed ? seed : NULL;
    in.on_candidate = keep_candidate;
    in.ctx = &cs;
    cs.npl = g.npools;
    rc = mess_plan_choose(&in, &ch);
    if (cs.oom)
        goto oom;
    if (rc != MESS_OK && rc != MESS_ENOTFOUND &&
        !(rc == MESS_EINVAL && cs.n == 0)) { /* no t fits an M: no candidate */
        cli_error("plan: %s", mess_strerror(rc));
        rc = CLI_FAIL;
        goto done;
    }
    if (rc == MESS_OK)
        for (i = 0; i < cs.n && best == (size_t)-1; i++)
            if (cs.c[i].shards == ch.best.shards && cs.c[i].per_item == ch.best.per_item &&
                cs.c[i].bits == ch.best.bits)
                best = i;
    if (best != (size_t)-1)
        printf("fewest bytes: M = %u, t = %u, kappa = %u, p_D = %.4g, p_q = %.4g "
               "(--p-prr = --p-irr = %.6g): B = %zu, %.0f bytes per query, predicted "
               "%.4f\n", ch.best.shards, ch.best.per_item, ch.best.bits, ch.best.p_store,
               ch.best.p_query, ch.best.p_prr, ch.best.pool, ch.best.bytes, ch.best.recall);
    else
        printf("no candidate reaches %.4g at the pools tried\n", target);
    printf("{\"target\":%.6g,\"k\":%ld,\"queries\":%zu,\"items\":%zu,\"max_xi\":%.6g,"
           "\"max_xi_query\":%.6g,\"max_xi_cap\":%.6g,\"max_xi_shard\":%.6g,"
           "\"ef_search\":%ld,\"best\":", target, k, nq, n, x, y, ycap, isinf(z) ? 1e308 : z,
           ef_search);
    if (best == (size_t)-1)
        printf("null");
    else
        print_cand(&cs.c[best], cs.curves + best * g.npools, g.pools, g.npools);
    printf(",\"candidates\":[");
    for (i = 0; i < cs.n; i++) {
        if (i)
            putchar(',');
        print_cand(&cs.c[i], cs.curves + i * g.npools, g.pools, g.npools);
    }
    printf("]}\n");
    rc = CLI_OK;
    goto done;
oom:
    cli_error("out of memory");
    rc = CLI_FAIL;
done:
    free(cs.c);
    free(cs.curves);
    cli_grid_free(&g);
    mess_vecs_free(train);
    mess_vecs_free(data);
    mess_vecs_free(queries);
    free(truth);
    return rc;
}
