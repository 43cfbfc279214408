/*
 * plan.c - `mess plan`: the correctness model of Proposition 4.1 and
 * Appendix B on the client's own data, to choose a candidate pool B before
 * outsourcing.  Everything runs locally from the client's clean codes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../mess.h"
#include "cli.h"

static const char plan_help[] =
    "usage: mess plan --client C --data FILE --queries FILE [options]\n"
    "       mess plan --train FILE --data FILE --queries FILE [parameters] [options]\n"
    "\n"
    "Predicts Recall@k as a function of the total candidate pool B from the\n"
    "correctness model (Proposition 4.1, Appendix B), on the client's own data\n"
    "and clean codes (secret; nothing is sent anywhere), and prints the\n"
    "smallest B reaching --target.  Per query q, true top-k item i, shard s:\n"
    "\n"
    "  p_q     = p_PRR(1-p_IRR) + p_IRR(1-p_PRR)        effective query flip\n"
    "  p_plus  = p_D(1-p_q) + p_q(1-p_D)                 compound flip\n"
    "  P_ov(d) = Phi((d*_s - d)(1-2p_plus) / sqrt(2 kappa p_plus(1-p_plus)))\n"
    "            a background item at clean distance d overtakes the target\n"
    "            at clean distance d*_s\n"
    "  rank    ~ N(1 + mu_s, sigma_s^2), mu_s = (t/M) sum_d N_s(d) P_ov(d),\n"
    "            sigma_s^2 = (t/M) sum_d N_s(d) P_ov(d)(1 - P_ov(d)),\n"
    "            N_s(d): items of FILE at distance d from q in shard s's hash\n"
    "  P_hit   = Phi((P + 1/2 - (1 + mu_s)) / sigma_s), P = the shard's budget\n"
    "            (B split over the M shards as the protocol does)\n"
    "  recover = 1 - prod over the item's t shards of (1 - P_hit), averaged\n"
    "            over a uniform t-of-M route\n"
    "  Recall@k(B) = mean over queries and true top-k items of recover\n"
    "\n"
    "That is the paper's model (column \"paper\").  It treats the overtaking\n"
    "events of one target as independent although they all compare against\n"
    "the same perturbed target distance X, which makes it pessimistic at small\n"
    "pools.  Column \"conditional\" conditions on X: Pr[X = x | d*] is the\n"
    "exact law Binomial(d*, 1-p_plus) * Binomial(kappa-d*, p_plus), an item at\n"
    "clean distance d overtakes with Pr[X_d < x] + Pr[X_d = x]/2, and\n"
    "P_hit = sum_x Pr[X = x | d*] Phi((P + 1/2 - 1 - mu(x)) / sigma(x)).  Both\n"
    "assume an exact top-P search per shard.  The server searches an HNSW\n"
    "graph with beam ef = max(P, ef_search), which on some data (sentence\n"
    "embeddings) misses part of that top-P at small P.  The search check\n"
    "rebuilds --check-shards shards here as the server would hold them and\n"
    "measures, per pool, the share eff of targets in a shard's exact top-P that\n"
    "the HNSW search returns (column \"search\"); both models are evaluated at\n"
    "the budget eff*P, and column \"exact\" is the model without the check.\n"
    "The correction is pessimistic where eff is far below 1; a warning says\n"
    "when eff < 0.99 at the chosen pool (raise the server's ef_search).\n"
    "docs/PRIVACY.md and docs/TEXT.md compare with measured recall.\n"
    "\n"
    "With --target-recall R it searches configurations instead: the fewest\n"
    "bytes per query reaching R under privacy limits (mess plan\n"
    "--target-recall 0.95 --help).\n"
    "\n"
    "  --client C         client state (its hashes and parameters)\n"
    "  --train FILE       or: train a client here with the parameters below\n"
    "  --data FILE        the vectors the client stores (.fvecs / .bvecs)\n"
    "  --queries FILE     sample of queries; --sample N uses the first N\n"
    "  --gt FILE.ivecs    their exact top-k as row indices of --data\n"
    "                     (default: computed here with the client's metric)\n"
    "  -k K               recall depth (10)\n"
    "  --target R         recall to reach (0.9)\n"
    "  --model M          conditional (default, kappa <= 1024) or paper: the\n"
    "                     curve that picks the smallest pool\n"
    "  --pools LIST       B values: comma list or A:B:STEP (M, 2M, ..., 128M)\n"
    "  --threads N        worker threads (1)\n"
    "  --ef-search N      the server's search beam floor (the client's ef_search)\n"
    "  --check-shards S   shards the search check rebuilds (4; 0: no check, the\n"
    "                     models assume exact per-shard search and say so)\n"
    "  --check-queries N  queries of the sample the check uses (100)\n"
    "  --passphrase-env V client file passphrase in $V\n"
    "  --seed-env V       deterministic hashes (with --train): seed as 64 hex\n"
    "                     digits in $V (or --seed-file F; never on the command line)\n"
    "parameters (with --train):\n";

static const char plan_help_tail[] =
    "\n"
    "Last line: {\"pool\":smallest B or null,\"recall_at_pool\",\"model\",\n"
    "\"target\",\"k\",\"queries\",\"p_plus\",\"curve\":[[B,recall],...] (of --model),\n"
    "\"curve_paper\",\"curve_conditional\",\"search_eff\" (null without check),\n"
"\"ef_search\",\"check_shards\",...}.\n";

/* "a,b,c" or "lo:hi:step"; every value in [1, max]. */
static int parse_pools(const char *s, size_t max, size_t **out, size_t *n)
{
    unsigned long lo, hi, step;
    size_t k = 0;
    size_t *v;
    if (strchr(s, ':')) {
        if (sscanf(s, "%lu:%lu:%lu", &lo, &hi, &step) != 3 || lo < 1 || hi < lo ||
            step < 1 || hi > max || (hi - lo) / step >= 100000)
            return -1;
        v = (size_t *)malloc(((hi - lo) / step + 1) * sizeof *v);
        if (!v)
            return -1;
        for (; lo <= hi; lo += step)
            v[k++] = lo;
        *out = v;
        *n = k;
        return 0;
    }
    {
        uint64_t *list;
        size_t i;
        if (cli_parse_list(s, 1, max, &list, &k) != 0)
            return -1;
        v = (size_t *)malloc(k * sizeof *v);
        for (i = 0; v && i < k; i++)
            v[i] = (size_t)list[i];
        free(list);
        if (!v)
            return -1;
    }
    *out = v;
    *n = k;
    return 0;
}

/* "key":[[B,r],...] (null without values) */
static void print_curve(const char *key, const size_t *pools, const double *r,
                        size_t n, int comma)
{
    size_t i;
    printf("\"%s\":", key);
    if (!r)
        printf("null");
    else {
        putchar('[');
        for (i = 0; i < n; i++)
            printf("%s[%zu,%.6f]", i ? "," : "", pools[i], r[i]);
        putchar(']');
    }
    if (comma)
        putchar(',');
}

/* A client from --client, or trained here from --train and the parameters. */
static int plan_client(struct cli_args *a, mess_client **c)
{
    const char *cpath = cli_opt(a, "--client"), *train = cli_opt(a, "--train");
    long threads;
    uint8_t seed[32];
    int have_seed;
    mess_params p;

    if (cli_params_options(a, 0, &p) ||
        cli_opt_long(a, "--threads", 1, 256, 1, &threads) ||
        cli_seed(a, seed, &have_seed, 0))
        return CLI_USAGE;
    if (!cpath == !train) {
        cli_error("plan needs exactly one of --client and --train (see --help)");
        return CLI_USAGE;
    }
    if (cpath) {
        static const char *const train_only[] = {
            "--shards", "--per-item", "--bits", "--train-sample", "--p-store",
            "--p-query", "--p-prr", "--p-irr", NULL};
        size_t i;
        if (have_seed) {
            cli_error("--seed-env / --seed-file go with --train; a client state has its "
                      "own keys");
            return CLI_USAGE;
        }
        for (i = 0; train_only[i]; i++)
            if (cli_opt(a, train_only[i])) {
                cli_error("%s goes with --train; a client state has its own parameters",
                          train_only[i]);
                return CLI_USAGE;
            }
        return cli_client_load(a, cpath, c);
    }
    return cli_train_client(train, &p, have_seed ? seed : NULL, threads, c, NULL);
}

int cli_cmd_plan(int argc, char **argv)
{
    struct cli_args a;
    const char *dpath, *qpath, *gpath, *plist;
    long k, sample, threads, ef_search, check_shards, check_queries;
    double target, p_plus, t0, t1, *eff = NULL, *exact = NULL;
    struct mess_plan_search search;
    mess_client *c = NULL;
    mess_params p;
    float *data = NULL, *queries = NULL;
    uint32_t *truth = NULL;
    size_t *pools = NULL, npools = 0, n, dim, nq, qdim, i, best;
    double *recall = NULL, *cond, *sel;
    const char *model_name;
    int rc, model;

    for (i = 0; i < (size_t)argc; i++) /* the configuration search: plan_config.c */
        if (strncmp(argv[i], "--target-recall", 15) == 0)
            return cli_plan_configs(argc, argv);
    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(plan_help, stdout);
        cli_params_help(stdout, 0);
        fputs(plan_help_tail, stdout);
        return CLI_OK;
    }
    model_name = cli_opt(&a, "--model");
    if (!model_name)
        model_name = "conditional";
    if (strcmp(model_name, "conditional") == 0)
        model = MESS_PLAN_CONDITIONAL;
    else if (strcmp(model_name, "paper") == 0)
        model = MESS_PLAN_PAPER;
    else {
        cli_error("--model: expected conditional or paper, got '%s'", model_name);
        return CLI_USAGE;
    }
    dpath = cli_opt(&a, "--data");
    qpath = cli_opt(&a, "--queries");
    gpath = cli_opt(&a, "--gt");
    plist = cli_opt(&a, "--pools");
    if (cli_opt_long(&a, "-k", 1, 10000, 10, &k) ||
        cli_opt_long(&a, "--sample", 1, 100000000, 100000000, &sample) ||
        cli_opt_double(&a, "--target", 0.0, 1.0, 0.9, &target))
        return CLI_USAGE;
    if (!dpath || !qpath) {
        cli_error("plan needs --data and --queries (see --help)");
        return CLI_USAGE;
    }
    rc = plan_client(&a, &c);
    if (rc != CLI_OK)
        return rc;
    /* --threads was parsed by plan_client (it also trains); read it again. */
    mess_client_params(c, &p);
    if (cli_opt_long(&a, "--threads", 1, 256, 1, &threads) ||
        cli_opt_long(&a, "--ef-search", 0, MESS_MAX_EF, (long)p.ef_search, &ef_search) ||
        cli_opt_long(&a, "--check-shards", 0, MESS_PLAN_MAX_CHECK_SHARDS, 4, &check_shards) ||
        cli_opt_long(&a, "--check-queries", 1, 100000000, 100, &check_queries) ||
        cli_check_unused(&a)) {
        mess_client_free(c);
        return CLI_USAGE;
    }
    if (plist) {
        if (parse_pools(plist, (size_t)MESS_MAX_BUDGET * p.shards, &pools, &npools) != 0) {
            cli_error("--pools: expected B1,B2,... or LO:HI:STEP with 1 <= B <= %zu",
                      (size_t)MESS_MAX_BUDGET * p.shards);
            rc = CLI_USAGE;
            goto done;
        }
    } else {
        npools = 128;
        pools = (size_t *)malloc(npools * sizeof *pools);
        if (!pools) {
            rc = CLI_FAIL;
            goto done;
        }
        for (i = 0; i < npools; i++)
            pools[i] = (i + 1) * p.shards;
    }
    rc = cli_read_vectors(dpath, "--data", &data, &n, &dim);
    if (rc != CLI_OK)
        goto done;
    rc = cli_read_vectors(qpath, "--queries", &queries, &nq, &qdim);
    if (rc != CLI_OK)
        goto done;
    if (dim != p.dim || qdim != p.dim) {
        cli_error("--data has dimension %zu and --queries %zu; the client expects %u",
                  dim, qdim, p.dim);
        rc = CLI_FAIL;
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
    recall = (double *)malloc(4 * npools * sizeof *recall);
    if (!recall) {
        rc = CLI_FAIL;
        goto done;
    }
    cond = p.kappa <= MESS_PLAN_MAX_CONDITIONAL_BITS ? recall + npools : NULL;
    if (model == MESS_PLAN_CONDITIONAL && !cond) {
        cli_error("--model conditional needs kappa <= %d (use --model paper)",
                  MESS_PLAN_MAX_CONDITIONAL_BITS);
        rc = CLI_USAGE;
        goto done;
    }
    memset(&search, 0, sizeof search);
    search.size = sizeof search; /* mess.h, "Growable structs" */
    search.ef_search = (uint32_t)ef_search;
    search.check_shards = (uint32_t)check_shards;
    search.check_queries = (uint32_t)check_queries;
    if (check_shards > 0) {
        search.eff = eff = recall + 2 * npools;
        exact = recall + 3 * npools;
    }
    t0 = cli_wall_s();
    search.recall_exact = model == MESS_PLAN_PAPER ? exact : NULL;
    rc = mess_plan_recall_search(c, MESS_PLAN_PAPER, data, n, queries, nq, truth,
                                 (size_t)k, pools, npools, &search, (unsigned)threads,
                                 recall);
    search.recall_exact = model == MESS_PLAN_CONDITIONAL ? exact : NULL;
    if (rc == MESS_OK && cond)
        rc = mess_plan_recall_search(c, MESS_PLAN_CONDITIONAL, data, n, queries, nq,
                                     truth, (size_t)k, pools, npools, &search,
                                     (unsigned)threads, cond);
    if (rc != MESS_OK) {
        cli_error("plan: %s", mess_strerror(rc));
        rc = CLI_FAIL;
        goto done;
    }
    t1 = cli_wall_s();
    sel = model == MESS_PLAN_CONDITIONAL ? cond : recall;
    mess_plan_compound_flip(p.p_store, mess_effective_flip(p.p_prr, p.p_irr), &p_plus);
    printf("predicted Recall@%ld over %zu queries, %zu items; M = %u, t = %u, kappa = %u, "
           "p_D = %.4g, p_q = %.4g (p_plus = %.4g)\n",
           k, nq, n, p.shards, p.per_item, p.kappa, p.p_store,
           mess_effective_flip(p.p_prr, p.p_irr), p_plus);
    if (eff)
        printf("search check: %ld of %u shards rebuilt, %zu queries, server beam "
               "ef = max(P, %ld)\n", check_shards < (long)p.shards ? check_shards :
               (long)p.shards, p.shards, nq < (size_t)check_queries ? nq :
               (size_t)check_queries, ef_search);
    printf("%10s %10s %10s %12s %8s %10s\n", "pool", "per_shard", "paper", "conditional",
           "search", "exact");
    best = npools;
    for (i = 0; i < npools; i++) {
        printf("%10zu %10.2f %10.4f", pools[i], (double)pools[i] / p.shards, recall[i]);
        if (cond)
            printf(" %12.4f", cond[i]);
        else
            printf(" %12s", "-");
        if (eff)
            printf(" %8.4f %10.4f\n", eff[i], exact[i]);
        else
            printf(" %8s %10s\n", "-", "-");
        if (best == npools && sel[i] >= target)
            best = i;
    }
    if (best < npools)
        printf("smallest pool reaching %.4g (%s model): B = %zu (predicted %.4f)\n", target,
               model_name, pools[best], sel[best]);
    else
        printf("no pool tried reaches %.4g (%s model; largest predicted %.4f)\n", target,
               model_name, sel[npools - 1]);
    /* The model's domain: exact per-shard search.  Say when it is left. */
    if (!eff)
        fprintf(stderr, "mess plan: warning: no search check (--check-shards 0): the "
                "prediction assumes each shard returns its exact top-P, which the "
                "server's HNSW may not do on this data; it can be optimistic\n");
    else {
        size_t at = best < npools ? best : npools - 1;
        if (eff[at] < 0.99) {
            size_t P = pools[at] / p.shards;
            fprintf(stderr, "mess plan: warning: at B = %zu the server's HNSW (beam "
                    "ef = max(%zu, %ld)) returns only %.3f of a shard's exact top-P "
                    "on this data; the prediction includes that loss to first order "
                    "and may still be optimistic: raise the server's ef_search "
                    "(--ef-search here to predict it)\n", pools[at], P, ef_search,
                    eff[at]);
        }
    }
    printf("{\"k\":%ld,\"queries\":%zu,\"items\":%zu,\"target\":%.6g,\"model\":\"%s\",",
           k, nq, n, target, model_name);
    if (best < npools)
        printf("\"pool\":%zu,\"recall_at_pool\":%.6f,", pools[best], sel[best]);
    else
        printf("\"pool\":null,\"recall_at_pool\":null,");
    printf("\"shards\":%u,\"per_item\":%u,\"bits\":%u,\"p_store\":%.6g,\"p_query\":%.6g,"
           "\"p_plus\":%.6g,\"seconds\":%.3f,",
           p.shards, p.per_item, p.kappa, p.p_store, mess_effective_flip(p.p_prr, p.p_irr),
           p_plus, t1 - t0);
    printf("\"ef_search\":%ld,\"check_shards\":%ld,", ef_search, eff ? check_shards : 0L);
    print_curve("curve", pools, sel, npools, 1);
    print_curve("curve_paper", pools, recall, npools, 1);
    print_curve("curve_conditional", pools, cond, npools, 1);
    print_curve("search_eff", pools, eff, npools, 1);
    print_curve("curve_exact_search", pools, exact, npools, 0);
    printf("}\n");
    rc = CLI_OK;
done:
    mess_client_free(c);
    mess_vecs_free(data);
    mess_vecs_free(queries);
    free(truth);
    free(pools);
    free(recall);
    return rc;
}
