/*
 * init_choose.c - `mess init --target-recall R | --max-bytes N --sample
 * FILE [--queries FILE]`: the parameters chosen from a sample of the
 * user's data by the library's configuration search (mess_plan_choose,
 * src/plan/choose.c), printed with the reason, before protocol.c's init
 * creates the client and the server as with explicit flags.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../mess.h"
#include "cli.h"

/* The grid and pools of an init: kappa 256 is left out of the grid of
 * mess plan --target-recall (on the bundled SIFT set it never had the
 * fewest bytes, and it costs the most to predict: a 27-candidate search
 * took 20 minutes of wall time at a load of 12 on two cores), and the
 * pools start lower, where small data sets reach their targets. */
#define INIT_GRID_SHARDS "16,32,64"
#define INIT_GRID_PER_ITEM "4,8,16"
#define INIT_GRID_BITS "64,128"
#define INIT_POOLS "100,175,250,375,500,750,1000,1250,1500,2000,2500,3000,4000"

/* Queries held out of the sample when no --queries is given: at most this
 * many, and at most a fifth of the sample. */
#define HOLDOUT_MAX 200

const char *const cli_init_choose_opts[] = {
    "--target-recall", "--max-bytes", "--sample", "--queries", "--holdout", "-k", "--pools",
    "--max-xi", "--max-xi-query", "--max-xi-cap", "--max-xi-shard", "--check-shards",
    "--grid-shards", "--grid-per-item", "--grid-bits", NULL};

static const char *bound_name(uint32_t b)
{
    switch (b) {
    case MESS_PLAN_BOUND_STORE: return "--max-xi (stored data)";
    case MESS_PLAN_BOUND_QUERY: return "--max-xi-query (one submission)";
    case MESS_PLAN_BOUND_CAP: return "--max-xi-cap (any number of submissions)";
    case MESS_PLAN_BOUND_SHARD: return "--max-xi-shard (one shard's code)";
    default: return "none (the 1e-12 floor)";
    }
}

/* on_candidate: one short line per candidate */
static void candidate_line(void *ctx, const mess_plan_candidate *c)
{
    (void)ctx;
    printf("  M %2u t %2u kappa %3u  %-3s ", c->shards, c->per_item, c->bits,
           cli_payload_name(c->payload));
    if (c->pool)
        printf("B %5zu  %9.0f bytes  predicted %.4f\n", c->pool, c->bytes, c->recall);
    else
        printf("not reached (best %.4f at %.0f bytes)\n", c->recall, c->bytes);
    fflush(stdout);
}

int cli_init_choose(struct cli_args *a, const char *train, int payload_named,
                    const uint8_t *seed, long threads, mess_params *p, size_t *pool,
                    double *predicted)
{
    static const char *const fixed[] = {"--shards", "--per-item", "--bits", "--p-store",
                                        "--p-query", "--p-prr", "--p-irr", NULL};
    static const char *const grid_defaults[4] = {INIT_GRID_SHARDS, INIT_GRID_PER_ITEM,
                                                 INIT_GRID_BITS, INIT_POOLS};
    const char *spath = cli_opt(a, "--sample"), *qpath = cli_opt(a, "--queries");
    double target, max_bytes, lim[4], x, y, ycap, z;
    long k, holdout, check_shards;
    float *tr = NULL, *sample = NULL, *queries = NULL;
    size_t ntr, trdim, n, dim, nq = 0, qdim, i;
    struct cli_grid g = {NULL, 0, 0, 0, NULL, 0};
    struct mess_plan_choose_in in;
    mess_plan_choice ch;
    int rc = CLI_USAGE;

    for (i = 0; fixed[i]; i++)
        if (cli_opt(a, fixed[i])) {
            cli_error("%s: --target-recall and --max-bytes choose M, t, kappa and the "
                      "flips from --sample (see mess init --help)", fixed[i]);
            return CLI_USAGE;
        }
    mess_plan_default_limits(lim);
    if (cli_opt_double(a, "--target-recall", 1e-9, 1.0 - 1e-9, 0, &target) ||
        cli_opt_double(a, "--max-bytes", 1, 1e15, 0, &max_bytes) ||
        cli_opt_double(a, "--max-xi", 1e-9, 1e9, lim[0], &x) ||
        cli_opt_double(a, "--max-xi-query", 1e-9, 1e9, lim[1], &y) ||
        cli_opt_double(a, "--max-xi-cap", 1e-9, 1e9, lim[2], &ycap) ||
        cli_opt_double(a, "--max-xi-shard", 1e-9, INFINITY, lim[3], &z) ||
        cli_opt_long(a, "-k", 1, 10000, 10, &k) ||
        cli_opt_long(a, "--holdout", 1, 100000000, HOLDOUT_MAX, &holdout) ||
        cli_opt_long(a, "--check-shards", 0, MESS_PLAN_MAX_CHECK_SHARDS, 4, &check_shards))
        return CLI_USAGE;
    if ((target > 0) == (max_bytes > 0)) {
        cli_error("init: give one of --target-recall R and --max-bytes N, not both");
        return CLI_USAGE;
    }
    if (!spath) {
        cli_error("init --target-recall / --max-bytes needs --sample FILE: vectors like "
                  "those to be stored, ideally as many (see --help)");
        return CLI_USAGE;
    }
    if ((rc = cli_grid_read(a, grid_defaults, &g)) != CLI_OK)
        goto done;
    if ((rc = cli_read_vectors(train, "training file", &tr, &ntr, &trdim)) != CLI_OK ||
        (rc = cli_read_vectors(spath, "--sample", &sample, &n, &dim)) != CLI_OK ||
        (qpath && (rc = cli_read_vectors(qpath, "--queries", &queries, &nq, &qdim)) != CLI_OK))
        goto done;
    rc = CLI_FAIL;
    if (trdim != dim || (qpath && qdim != dim)) {
        cli_error("--train has dimension %zu, --sample %zu%s: they must agree", trdim, dim,
                  qpath ? " and --queries another" : "");
        goto done;
    }
    if (!qpath) { /* the sample's last rows are the queries, the rest the data */
        nq = (size_t)holdout < n / 5 ? (size_t)holdout : n / 5;
        if (nq == 0) {
            cli_error("--sample '%s' has %zu vectors: too few to hold out queries from "
                      "(give --queries)", spath, n);
            goto done;
        }
        n -= nq;
        queries = sample + n * dim; /* freed with the sample */
    }
    if ((size_t)k > n) {
        cli_error("-k %ld exceeds the %zu data vectors of the sample", k, n);
        rc = CLI_USAGE;
        goto done;
    }
    p->dim = (uint32_t)dim;
    if (cli_grid_check_training(&g, train, ntr, p))
        goto done;
    cli_norm_hint(spath, "sample", sample, n, dim, p->metric);
    printf("choosing from '%s': %zu items, %zu %s queries, ", spath, n, nq,
           qpath ? "given" : "held-out");
    if (target > 0)
        printf("the fewest bytes for Recall@%ld >= %.4g", k, target);
    else
        printf("the highest Recall@%ld within %.0f bytes per query", k, max_bytes);
    printf(", at xi_store <= %.4g, xi_query <= %.4g, xi_cap <= %.4g, xi_shard <= %.4g\n",
           x, y, ycap, z);
    fflush(stdout);
    memset(&in, 0, sizeof in);
    in.size = sizeof in; /* mess.h, "Growable structs" */
    in.k = (uint32_t)k;
    in.base = p;
    in.train = tr;
    in.ntrain = ntr;
    in.data = sample;
    in.n = n;
    in.queries = queries;
    in.nq = nq;
    in.target_recall = target;
    in.max_bytes = max_bytes;
    in.max_xi = x;
    in.max_xi_query = y;
    in.max_xi_cap = ycap;
    in.max_xi_shard = z;
    cli_grid_input(&g, &in);
    in.check_shards = (uint32_t)check_shards;
    in.check_queries = 100;
    in.choose_payload = !payload_named;
    in.threads = (uint32_t)threads;
    in.seed = seed;
    in.on_candidate = candidate_line;
    rc = mess_plan_choose(&in, &ch);
    if (rc == MESS_ENOTFOUND) {
        const mess_plan_candidate *b = &ch.best;
        if (target > 0)
            cli_error("no configuration reaches Recall@%ld %.4g on this sample at the pools "
                      "tried (up to B %zu) within the privacy limits: the best reachable is "
                      "%.4f (M %u, t %u, kappa %u, %s payload, %.0f bytes per query); ask for "
                      "less, or give --max-bytes", k, target, g.pools[g.npools - 1], b->recall,
                      b->shards, b->per_item, b->bits, cli_payload_name(b->payload),
                      b->bytes);
        else
            cli_error("no configuration fits %.0f bytes per query at the pools tried: the "
                      "fewest is %.0f (M %u, t %u, kappa %u, %s payload, predicted %.4f)",
                      max_bytes, b->bytes, b->shards, b->per_item, b->bits,
                      cli_payload_name(b->payload), b->recall);
        rc = CLI_FAIL;
        goto done;
    }
    if (rc != MESS_OK) {
        rc = cli_fail("choosing the configuration", NULL, rc);
        goto done;
    }
    if (!payload_named && ch.payload_recall[MESS_PAYLOAD_U8] == 0)
        printf("payload recall (exact search over the sample as decoded): f16 %.4f, "
               "i8 %.4f\n", ch.payload_recall[MESS_PAYLOAD_F16],
               ch.payload_recall[MESS_PAYLOAD_I8]);
    printf("chose M %u, t %u, kappa %u, p_D %.4g, p_PRR = p_IRR %.6g (p_q %.4g), %s "
           "payload: B %zu, %.0f bytes per query, predicted Recall@%ld %.4f\n",
           ch.best.shards, ch.best.per_item, ch.best.bits, ch.best.p_store, ch.best.p_prr,
           ch.best.p_query, cli_payload_name(ch.best.payload), ch.best.pool, ch.best.bytes,
           k, ch.best.recall);
    printf("flips set by: p_D %s; p_q %s\n", bound_name(ch.best.store_bound),
           bound_name(ch.best.query_bound));
    printf("query with: mess query --pool %zu\n", ch.best.pool);
    *p = ch.params;
    *pool = ch.best.pool;
    *predicted = ch.best.recall;
    rc = CLI_OK;
done:
    cli_grid_free(&g);
    mess_vecs_free(tr);
    mess_vecs_free(sample);
    if (qpath)
        mess_vecs_free(queries);
    return rc;
}
