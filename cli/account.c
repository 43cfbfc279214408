/*
 * account.c - `mess account access|search|stored|versions|random-lsh|report|summary` (the
 * privacy accountants of paper section 5.2 / Appendix A.1) and `mess plan`
 * (the correctness model of Proposition 4.1 / Appendix B).  Each prints its
 * findings and, as its last line, one JSON object.
 */
#include <math.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../mess.h"
#include "cli.h"

/* A number for JSON (JSON has no inf / nan). */
static void json_num(const char *key, double v, int comma)
{
    if (isfinite(v))
        printf("\"%s\":%.9g%s", key, v, comma ? "," : "");
    else
        printf("\"%s\":null%s", key, comma ? "," : "");
}

static const char account_help[] =
    "usage: mess account WHAT [OPTIONS]   (mess account WHAT --help)\n"
    "\n"
    "Privacy accountants of the paper's section 5.2 and Appendix A.1: what the\n"
    "server can learn, in nats (an event's probability changes by at most a\n"
    "factor e^xi, plus delta where one is given).  Pure numerics over public\n"
    "parameters, except `report`, which uses the client's secret hashes\n"
    "locally.  Last line: one JSON object.\n"
    "\n"
    "  access      eta_R, xi_AP of the access pattern          (Theorem 5.4)\n"
    "  search      gamma_eq, gamma_ne, xi_SP of query reuse     (Theorem 5.5)\n"
    "  stored      eta_D, pure and pair-specific stored-data XDP (Thm 5.2, Cor. 5.3)\n"
    "  versions    the same for a version history of one id (updates)\n"
    "  random-lsh  the random-hyperplane LSH regression value   (App. A.2.6)\n"
    "  report      stored/access/search values for real pairs   (App. A.1)\n"
    "  summary     the bottom line for a client, in plain words\n";

static const char access_help[] =
    "usage: mess account access --p-prr A --p-irr B --repeats R [--distance DQ]\n"
    "\n"
    "Access-pattern privacy (Theorem 5.4).  One logical query is submitted R\n"
    "times: its permanent report (a keyed PRF of the query, the same on every\n"
    "submission) flips each bit with probability A, every submission adds\n"
    "fresh instantaneous flips with probability B.\n"
    "The server's complete access transcript (perturbed reports, HNSW\n"
    "traversal, results) is eta_R-XDP with respect to D_Q, the fixed-hash\n"
    "Hamming distance of two query values summed over the contacted shards:\n"
    "\n"
    "  eta_R = ln(((1-A)(1-B)^R + A B^R) / (A(1-B)^R + (1-A) B^R))\n"
    "  xi_ap = eta_R * DQ                       (printed with --distance)\n"
    "\n"
    "A, B in [0, 1/2] (not both 0); R >= 1 (closed form, any R up to 2^53).\n"
    "As R grows eta_R rises to ln((1-A)/A): the permanent report caps the\n"
    "averaging attack.  Last line: {\"eta_R\":...,\"xi_ap\":...}.\n";

static int account_access(int argc, char **argv)
{
    struct cli_args a;
    double pa, pb, eta;
    long r, dq;
    int rc;
    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(access_help, stdout);
        return CLI_OK;
    }
    if (!cli_opt(&a, "--p-prr") || !cli_opt(&a, "--p-irr") || !cli_opt(&a, "--repeats")) {
        cli_error("account access needs --p-prr, --p-irr and --repeats (see --help)");
        return CLI_USAGE;
    }
    if (cli_opt_double(&a, "--p-prr", 0.0, 0.5, 0.0, &pa) ||
        cli_opt_double(&a, "--p-irr", 0.0, 0.5, 0.0, &pb) ||
        cli_opt_long(&a, "--repeats", 1, 0x7fffffffffffffffL, 1, &r) ||
        cli_opt_long(&a, "--distance", 0, 0x7fffffffffffffffL, -1, &dq) ||
        cli_check_unused(&a))
        return CLI_USAGE;
    rc = mess_account_access(pa, pb, (uint64_t)r, &eta);
    if (rc != MESS_OK)
        return rc == MESS_EINVAL
                   ? (cli_error("--p-prr and --p-irr cannot both be 0 (no finite guarantee)"),
                      CLI_USAGE)
                   : cli_fail("account access", NULL, rc);
    printf("per-coordinate eta_R = %.6f (R = %ld, effective query flip %.6g)\n", eta,
           r, mess_effective_flip(pa, pb));
    if (dq >= 0)
        printf("access transcript: xi_ap = eta_R * %ld = %.6f\n", dq, eta * (double)dq);
    printf("{");
    json_num("eta_R", eta, dq >= 0);
    if (dq >= 0)
        json_num("xi_ap", eta * (double)dq, 0);
    printf("}\n");
    return CLI_OK;
}

static const char search_help[] =
    "usage: mess account search --p-prr A --p-irr B --repeats R --bits KQ --distance U\n"
    "\n"
    "Search-pattern privacy (Theorem 5.5): can the server tell whether the R-th\n"
    "submission repeats the same logical query (shared permanent report) or\n"
    "is a new one (fresh permanent report)?  Per coordinate, the largest\n"
    "|log-likelihood ratio| between 'reuse' and 'split' over every report\n"
    "sequence, by exact enumeration of the sufficient statistics (ones among\n"
    "the first R-1 reports, last report):\n"
    "\n"
    "  gamma_eq       the two queries agree on the clean bit\n"
    "  gamma_ne       they differ\n"
    "  xi_sp          (KQ - U) gamma_eq + U gamma_ne   (XDP over workloads)\n"
    "  xi_sp_uniform  KQ max(gamma_eq, gamma_ne)       (ordinary DP bound)\n"
    "\n"
    "KQ: bits contacted (M * kappa when every shard is searched); U: fixed-hash\n"
    "distance of the two query values over those bits (U <= KQ).  A in [0,1/2],\n"
    "B in (0, 1/2], R >= 1; R = 1 gives gamma_eq = 0, gamma_ne = eta_1.\n"
    "Last line: {\"gamma_eq\",\"gamma_ne\",\"xi_sp\",\"xi_sp_uniform\"}.\n";

static int account_search(int argc, char **argv)
{
    struct cli_args a;
    double pa, pb, geq, gne, xi, xu;
    long r, bits, u;
    int rc;
    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(search_help, stdout);
        return CLI_OK;
    }
    if (!cli_opt(&a, "--p-prr") || !cli_opt(&a, "--p-irr") || !cli_opt(&a, "--repeats") ||
        !cli_opt(&a, "--bits") || !cli_opt(&a, "--distance")) {
        cli_error("account search needs --p-prr, --p-irr, --repeats, --bits and --distance");
        return CLI_USAGE;
    }
    if (cli_opt_double(&a, "--p-prr", 0.0, 0.5, 0.0, &pa) ||
        cli_opt_double(&a, "--p-irr", 1e-300, 0.5, 0.0, &pb) ||
        cli_opt_long(&a, "--repeats", 1, 0x7fffffffffffffffL, 1, &r) ||
        cli_opt_long(&a, "--bits", 1, (long)MESS_MAX_SHARDS * MESS_MAX_BITS, 1, &bits) ||
        cli_opt_long(&a, "--distance", 0, (long)MESS_MAX_SHARDS * MESS_MAX_BITS, 0, &u) ||
        cli_check_unused(&a))
        return CLI_USAGE;
    if (u > bits) {
        cli_error("--distance %ld exceeds --bits %ld", u, bits);
        return CLI_USAGE;
    }
    rc = mess_account_search(pa, pb, (uint64_t)r, &geq, &gne);
    if (rc == MESS_OK)
        rc = mess_account_search_xi(pa, pb, (uint64_t)r, (uint64_t)bits, (uint64_t)u,
                                    &xi, &xu);
    if (rc != MESS_OK)
        return cli_fail("account search", NULL, rc);
    printf("per coordinate: gamma_eq = %.6f, gamma_ne = %.6f (R = %ld)\n", geq, gne, r);
    printf("workload pair: xi_sp = (%ld - %ld) * gamma_eq + %ld * gamma_ne = %.6f\n",
           bits, u, u, xi);
    printf("uniform bound: %ld * max = %.6f\n", bits, xu);
    printf("{");
    json_num("gamma_eq", geq, 1);
    json_num("gamma_ne", gne, 1);
    json_num("xi_sp", xi, 1);
    json_num("xi_sp_uniform", xu, 0);
    printf("}\n");
    return CLI_OK;
}

/* A per-shard list of fixed-hash distances (OPT d1,...,dM) into *d. */
static int parse_distances(const char *list, const char *opt, const char *what,
                           uint32_t **d, size_t *m)
{
    uint64_t *v;
    size_t i;
    *d = NULL;
    if (cli_parse_list(list, 0, MESS_MAX_BITS, &v, m) != 0) {
        cli_error("%s: expected comma-separated integers in [0, %d]", opt,
                  MESS_MAX_BITS);
        return CLI_USAGE;
    }
    if (*m > MESS_MAX_SHARDS) {
        free(v);
        cli_error("%s: at most %d shards", opt, MESS_MAX_SHARDS);
        return CLI_USAGE;
    }
    *d = (uint32_t *)malloc(*m * sizeof **d);
    for (i = 0; *d && i < *m; i++)
        (*d)[i] = (uint32_t)v[i];
    free(v);
    return *d ? CLI_OK : cli_fail(what, NULL, MESS_ENOMEM);
}

static const char stored_help[] =
    "usage: mess account stored --p-store P --distances d1,...,dM --per-item T\n"
    "                           --delta D [--fixed] [--tail EPS]\n"
    "\n"
    "Stored-data privacy of one challenge pair (x0, x1) whose fixed-hash codes\n"
    "differ in d_s bits in shard s.  Each record is stored in T of the M\n"
    "shards, every bit flipped with probability P.\n"
    "\n"
    "  eta_D    ln((1-P)/P): per differing bit                  (Prop. 5.1)\n"
    "  xi_pure  eta_D * (sum of the T largest d_s): pure XDP of the complete\n"
    "           stored index, any route                          (Theorem 5.2)\n"
    "  xi_pld   inf{eps : sum_u w(u) delta_u(eps) <= D}: pair-specific XDP at\n"
    "           delta D, w(u) the distribution of the summed distance over a\n"
    "           uniform T-of-M route (dynamic programme), delta_u the exact\n"
    "           randomized-response profile                     (Corollary 5.3)\n"
    "  --fixed  the list is the T realized shards (identifier-fixed route):\n"
    "           w is a point mass at their sum\n"
    "  --tail EPS  also the Corollary 5.3 bound on Pr[privacy loss > EPS]\n"
    "\n"
    "P in (0, 1/2]; d_s <= 4096; M <= 1024; D in [1e-20, 1).\n"
    "Last line: {\"eta_D\",\"xi_pure\",\"xi_pld\",\"u_max\",\"u_mean\",...}.\n";

static int account_stored(int argc, char **argv)
{
    struct cli_args a;
    const char *list;
    double p, delta, tail_eps;
    long t;
    uint32_t *d = NULL;
    size_t m;
    int fixed, rc;
    mess_account_stored_result r;
    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(stored_help, stdout);
        return CLI_OK;
    }
    list = cli_opt(&a, "--distances");
    fixed = cli_flag(&a, "--fixed");
    if (!list || !cli_opt(&a, "--p-store") || !cli_opt(&a, "--delta") ||
        (!fixed && !cli_opt(&a, "--per-item"))) {
        cli_error("account stored needs --p-store, --distances, --per-item and --delta");
        return CLI_USAGE;
    }
    if (cli_opt_double(&a, "--p-store", 1e-300, 0.5, 0.0, &p) ||
        cli_opt_double(&a, "--delta", MESS_ACCOUNT_MIN_DELTA, 0.999999, 0.0, &delta) ||
        cli_opt_long(&a, "--per-item", 1, MESS_MAX_SHARDS, 0, &t) ||
        cli_opt_double(&a, "--tail", 0.0, 1e12, -1.0, &tail_eps) ||
        cli_check_unused(&a))
        return CLI_USAGE;
    rc = parse_distances(list, "--distances", "account stored", &d, &m);
    if (rc != CLI_OK)
        return rc;
    if (fixed && t != 0 && (size_t)t != m) {
        free(d);
        cli_error("--fixed: the list must hold exactly the %ld realized shards", t);
        return CLI_USAGE;
    }
    if (fixed)
        t = (long)m;
    if ((size_t)t > m) {
        free(d);
        cli_error("--per-item %ld exceeds the %zu distances given", t, m);
        return CLI_USAGE;
    }
    rc = mess_account_stored(p, d, m, (size_t)t, fixed, delta, &r);
    if (rc != MESS_OK) {
        free(d);
        if (rc == MESS_ELIMIT)
            cli_error("account stored: the route distribution is too large to compute "
                      "exactly (%s); --fixed gives the worst route", mess_strerror(rc));
        else
            cli_fail("account stored", NULL, rc);
        return CLI_FAIL;
    }
    printf("eta_D = %.6f per differing bit; route %s, %ld of %zu shards\n", r.eta,
           fixed ? "identifier-fixed" : "uniform", t, m);
    printf("aggregate distance: max %llu, mean %.4f\n", (unsigned long long)r.u_max,
           r.u_mean);
    printf("pure XDP (Theorem 5.2): %.6f; pair-specific at delta %.3g (Corollary 5.3): %.6f\n",
           r.xi_pure, delta, r.xi_pld);
    printf("{");
    json_num("eta_D", r.eta, 1);
    json_num("xi_pure", r.xi_pure, 1);
    json_num("xi_pld", r.xi_pld, 1);
    json_num("delta", delta, 1);
    printf("\"u_max\":%llu,", (unsigned long long)r.u_max);
    json_num("u_mean", r.u_mean, tail_eps >= 0);
    if (tail_eps >= 0) {
        /* The tail needs the profile itself, not just its inverse. */
        size_t len;
        double *logw = NULL, bound = 1.0, exact = 1.0;
        mess_account_pld *pld = NULL;
        if (fixed) {
            len = (size_t)r.u_max + 1;
            logw = (double *)malloc(len * sizeof *logw);
            if (logw) {
                size_t u;
                for (u = 0; u < len; u++)
                    logw[u] = u + 1 == len ? 0.0 : -INFINITY;
            }
        } else if (mess_account_route_weights(d, m, (size_t)t, NULL, 0, &len) == MESS_OK) {
            logw = (double *)malloc(len * sizeof *logw);
            if (logw && mess_account_route_weights(d, m, (size_t)t, logw, len, &len) != MESS_OK) {
                free(logw);
                logw = NULL;
            }
        }
        rc = logw ? mess_account_pld_new(p, logw, len, &pld) : MESS_ENOMEM;
        if (rc == MESS_OK)
            rc = mess_account_pld_tail(pld, tail_eps, &bound, &exact);
        mess_account_pld_free(pld);
        free(logw);
        if (rc != MESS_OK) {
            printf("}\n");
            free(d);
            return cli_fail("account stored --tail", NULL, rc);
        }
        json_num("tail_eps", tail_eps, 1);
        json_num("tail_bound", bound, 1);
        json_num("tail_augmented", exact, 0);
    }
    printf("}\n");
    free(d);
    return CLI_OK;
}

static const char versions_help[] =
    "usage: mess account versions --p-store P --distances d1,...,dM --per-item T\n"
    "                             --delta D [--changed c1,...,cM] [--versions V]\n"
    "                             [--fixed]\n"
    "\n"
    "Stored-data privacy of a version history of one id (an item inserted,\n"
    "then updated V - 1 times; Theorem V of docs/PRIVACY.md).  The\n"
    "storage coins are a PRF of (shard, id): per position two coins, F0 for a\n"
    "clean 0 and F1 for a clean 1, the same in every version.  The two\n"
    "challenge histories differ by one mask in every version, d_s bits of it\n"
    "in shard s, of which c_s positions change within the history\n"
    "(--changed; default all of them: c_s = d_s, the worst case).  Whatever V:\n"
    "\n"
    "  per bit  eta_D on a position that never changes, 2 eta_D on one that\n"
    "           changes (two reports): the history is randomized response on\n"
    "           d_s + c_s bits, at most twice the snapshot's d_s\n"
    "  xi_pure, xi_pld  as `mess account stored` on the distances d_s + c_s\n"
    "  snapshot  the same for one version (c_s = 0), for comparison\n"
    "\n"
    "Which positions change is not protected: a changed clean bit shows as a\n"
    "changed stored bit with probability (1-P)^2 + P^2 (`shown`), and reading\n"
    "that stored bit as the clean bit of every version errs with probability\n"
    "P^2 / ((1-P)^2 + P^2) (`read_error`, the least 2 eta_D allows).\n"
    "V (2): versions, >= 1; V = 1 is one snapshot (--changed must be 0s).\n"
    "Last line: {\"eta_D\",\"eta_changed\",\"shown\",\"read_error\",\"xi_pure\",\n"
    "\"xi_pld\",\"xi_pure_snapshot\",\"xi_pld_snapshot\",\"u_max\",\"u_mean\",...}.\n";

static int account_versions(int argc, char **argv)
{
    struct cli_args a;
    const char *list, *clist;
    double p, delta, eta2, shown, rerr;
    long t, v;
    uint32_t *d = NULL, *c = NULL;
    size_t m, mc = 0, s;
    int fixed, rc;
    mess_account_stored_result r, r1;
    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(versions_help, stdout);
        return CLI_OK;
    }
    list = cli_opt(&a, "--distances");
    clist = cli_opt(&a, "--changed");
    fixed = cli_flag(&a, "--fixed");
    if (!list || !cli_opt(&a, "--p-store") || !cli_opt(&a, "--delta") ||
        (!fixed && !cli_opt(&a, "--per-item"))) {
        cli_error("account versions needs --p-store, --distances, --per-item and --delta");
        return CLI_USAGE;
    }
    if (cli_opt_double(&a, "--p-store", 1e-300, 0.5, 0.0, &p) ||
        cli_opt_double(&a, "--delta", MESS_ACCOUNT_MIN_DELTA, 0.999999, 0.0, &delta) ||
        cli_opt_long(&a, "--per-item", 1, MESS_MAX_SHARDS, 0, &t) ||
        cli_opt_long(&a, "--versions", 1, 0x7fffffffffffffffL, 2, &v) ||
        cli_check_unused(&a))
        return CLI_USAGE;
    rc = parse_distances(list, "--distances", "account versions", &d, &m);
    if (rc == CLI_OK && clist)
        rc = parse_distances(clist, "--changed", "account versions", &c, &mc);
    if (rc != CLI_OK) {
        free(d);
        return rc;
    }
    if (c && mc != m) {
        cli_error("--changed lists %zu shards, --distances %zu", mc, m);
        rc = CLI_USAGE;
        goto done;
    }
    for (s = 0; c && s < m; s++)
        if (c[s] > d[s] || (v == 1 && c[s] != 0)) {
            if (v == 1)
                cli_error("--changed: one version changes nothing (use 0s)");
            else
                cli_error("--changed: shard %zu has %u changed of %u differing bits",
                          s, c[s], d[s]);
            rc = CLI_USAGE;
            goto done;
        }
    if (fixed && t != 0 && (size_t)t != m) {
        cli_error("--fixed: the list must hold exactly the %ld realized shards", t);
        rc = CLI_USAGE;
        goto done;
    }
    if (fixed)
        t = (long)m;
    if ((size_t)t > m) {
        cli_error("--per-item %ld exceeds the %zu distances given", t, m);
        rc = CLI_USAGE;
        goto done;
    }
    rc = mess_account_version_bits(p, &eta2, &shown, &rerr);
    if (rc == MESS_OK)
        rc = mess_account_stored(p, d, m, (size_t)t, fixed, delta, &r1);
    if (rc == MESS_OK && v == 1)
        r = r1;
    else if (rc == MESS_OK)
        rc = mess_account_versions(p, d, c, m, (size_t)t, fixed, delta, &r);
    if (rc != MESS_OK) {
        if (rc == MESS_ELIMIT && !fixed)
            cli_error("account versions: the route distribution is too large to "
                      "compute exactly (%s); --fixed gives the worst route",
                      mess_strerror(rc));
        else
            cli_fail("account versions", NULL, rc);
        rc = CLI_FAIL;
        goto done;
    }
    printf("per bit: eta_D = %.6f unchanged, %.6f changed within the history "
           "(any number of versions)\n", r.eta, eta2);
    printf("a changed bit shows with probability %.6f; read as the clean bit it "
           "errs with probability %.6g\n", shown, rerr);
    printf("history of %ld version%s, route %s, %ld of %zu shards: aggregate "
           "distance max %llu, mean %.4f\n", v, v == 1 ? "" : "s",
           fixed ? "identifier-fixed" : "uniform", t, m, (unsigned long long)r.u_max,
           r.u_mean);
    printf("pure XDP: %.6f (one version %.6f); pair-specific at delta %.3g: %.6f "
           "(one version %.6f)\n", r.xi_pure, r1.xi_pure, delta, r.xi_pld, r1.xi_pld);
    printf("{");
    json_num("eta_D", r.eta, 1);
    json_num("eta_changed", eta2, 1);
    json_num("shown", shown, 1);
    json_num("read_error", rerr, 1);
    json_num("xi_pure", r.xi_pure, 1);
    json_num("xi_pld", r.xi_pld, 1);
    json_num("xi_pure_snapshot", r1.xi_pure, 1);
    json_num("xi_pld_snapshot", r1.xi_pld, 1);
    json_num("delta", delta, 1);
    printf("\"versions\":%ld,\"u_max\":%llu,", v, (unsigned long long)r.u_max);
    json_num("u_mean", r.u_mean, 0);
    printf("}\n");
    rc = CLI_OK;
done:
    free(d);
    free(c);
    return rc;
}

static const char lsh_help[] =
    "usage: mess account random-lsh --p-store P --bits K --angle DTHETA --delta D\n"
    "\n"
    "The random-hyperplane LSH case (Appendix A.2.6, a regression value of the\n"
    "paper): K bits that differ independently with probability DTHETA (the\n"
    "normalised angle of the pair), each flipped with probability P.\n"
    "\n"
    "  xi_mixture  exact: the randomized-response profile mixed over\n"
    "              u ~ Binomial(K, DTHETA), inverted at delta D (Corollary 5.3\n"
    "              with the hash-sampling distribution as w)\n"
    "  xi_paper    eta * K * a*, a* > DTHETA solving K KL(a* || DTHETA) =\n"
    "              ln(1/D): the distance exceeds K a* with probability at most\n"
    "              D (Chernoff-Hoeffding), and below it randomized response is\n"
    "              pure eta-XDP per differing bit.  This is the form of\n"
    "              Fernandes et al. (2021): a tail bound on the distance plus a\n"
    "              pure guarantee; it reproduces the paper's 20.041 for\n"
    "              P = 0.21, K = 128, DTHETA = 0.05, D = 0.01, where the exact\n"
    "              mixture gives 12.465.  Both are valid (xi, D) pairs; the\n"
    "              mixture is tighter because it does not spend D on the tail.\n"
    "\n"
    "Last line: {\"xi_mixture\",\"xi_paper\"}.\n";

static int account_random_lsh(int argc, char **argv)
{
    struct cli_args a;
    double p, dt, delta, xm, xc;
    long k;
    int rc;
    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(lsh_help, stdout);
        return CLI_OK;
    }
    if (!cli_opt(&a, "--p-store") || !cli_opt(&a, "--bits") || !cli_opt(&a, "--angle") ||
        !cli_opt(&a, "--delta")) {
        cli_error("account random-lsh needs --p-store, --bits, --angle and --delta");
        return CLI_USAGE;
    }
    if (cli_opt_double(&a, "--p-store", 1e-300, 0.5, 0.0, &p) ||
        cli_opt_long(&a, "--bits", 1, MESS_MAX_BITS, 128, &k) ||
        cli_opt_double(&a, "--angle", 0.0, 1.0, 0.0, &dt) ||
        cli_opt_double(&a, "--delta", MESS_ACCOUNT_MIN_DELTA, 0.999999, 0.0, &delta) ||
        cli_check_unused(&a))
        return CLI_USAGE;
    rc = mess_account_random_lsh(p, (uint32_t)k, dt, delta, &xm, &xc);
    if (rc != MESS_OK)
        return cli_fail("account random-lsh", NULL, rc);
    printf("exact mixture over Binomial(%ld, %.6g): xi = %.6f at delta %.3g\n", k, dt, xm,
           delta);
    printf("Chernoff distance tail + pure XDP (paper's regression form): xi = %.6f\n", xc);
    printf("{");
    json_num("xi_mixture", xm, 1);
    json_num("xi_paper", xc, 0);
    printf("}\n");
    return CLI_OK;
}

static const char report_help[] =
    "usage: mess account report --client C --pairs FILE --delta D [--repeats R]\n"
    "                           [--updates] [--passphrase-env V]\n"
    "\n"
    "The accountants on real challenge pairs (Appendix A.1): FILE (.fvecs or\n"
    ".bvecs) holds pairs as consecutive rows (x0, x1).  For each pair the\n"
    "client's own secret hashes give the per-shard distances d_s (computed\n"
    "here, never sent anywhere), then with the client's parameters:\n"
    "\n"
    "  stored  xi_pure, xi_pld at D (uniform route), the single-shard\n"
    "          worst eta_D * max d_s                    (Thm 5.2, Cor. 5.3)\n"
    "  access  xi_ap = eta_R * D_Q with D_Q = sum of d_s over all M shards\n"
    "          (every query contacts every shard)       (Theorem 5.4)\n"
    "  search  xi_sp for a reuse-vs-new workload with KQ = M * kappa bits and\n"
    "          U = D_Q                                  (Theorem 5.5)\n"
    "  history xi_pld_history: the stored value for a version history of the\n"
    "          pair's id in which every differing bit changes (the worst\n"
    "          case, any number of versions; `mess account versions`)\n"
    "\n"
    "--updates: the rows are real updates instead, (old, new) versions of one\n"
    "id.  Per update: the changed bits c_s per shard, their mean over the\n"
    "route, how many of them the server reads (each shows with probability\n"
    "(1-p_D)^2 + p_D^2) as a share of a version's t * kappa bits, the error of\n"
    "those reads, and the values of the changed bits: xi_pure_changed and\n"
    "xi_pld_changed for two histories that differ in exactly those bits.\n"
    "Last line: {\"updates\",\"mean_changed\",\"mean_read_share\",\n"
    "\"max_read_share\",\"read_error\",\"max_xi_pld_changed\",...}.\n"
    "\n"
    "R (1): submissions of one logical query.  One JSON line per pair, then a\n"
    "summary as the last line: {\"pairs\",\"max_xi_pure\",\"max_xi_pld\",\n"
    "\"mean_xi_pld\",\"max_xi_single_shard\",\"max_xi_ap\",\"max_xi_sp\",\n"
    "\"max_xi_pld_history\",...}.\n";

static int account_report(int argc, char **argv)
{
    struct cli_args a;
    const char *cpath, *file;
    const char *pass = NULL;
    double delta, eta_r = 0, geq = 0, gne = 0, p_q;
    double max_pure = 0, max_pld = 0, sum_pld = 0, max_single = 0, max_ap = 0, max_sp = 0;
    double max_hist = 0, shown = 0, rerr = 0, sum_changed = 0, sum_share = 0, max_share = 0;
    long repeats;
    int updates;
    mess_client *c = NULL;
    mess_params p;
    float *x = NULL;
    uint64_t *c0 = NULL, *c1 = NULL;
    uint32_t *d = NULL;
    size_t n, dim, i, s, w, words;
    int rc;

    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(report_help, stdout);
        return CLI_OK;
    }
    cpath = cli_opt(&a, "--client");
    file = cli_opt(&a, "--pairs");
    updates = cli_flag(&a, "--updates");
    if (cli_passphrase(&a, &pass))
        return CLI_USAGE;
    if (!cpath || !file || !cli_opt(&a, "--delta")) {
        cli_error("account report needs --client, --pairs and --delta (see --help)");
        return CLI_USAGE;
    }
    if (cli_opt_double(&a, "--delta", MESS_ACCOUNT_MIN_DELTA, 0.999999, 0.0, &delta) ||
        cli_opt_long(&a, "--repeats", 1, 0x7fffffffffffffffL, 1, &repeats) ||
        cli_check_unused(&a))
        return CLI_USAGE;
    rc = cli_read_vectors(file, "--pairs", &x, &n, &dim);
    if (rc != CLI_OK)
        return rc;
    if (n == 0 || n % 2) {
        mess_vecs_free(x);
        cli_error("'%s' has %zu rows; pairs need an even, non-zero number", file, n);
        return CLI_FAIL;
    }
    errno = 0;
    rc = mess_client_load(cpath, pass, &c);
    if (rc != MESS_OK) {
        int err = errno;
        mess_vecs_free(x);
        errno = err;
        return cli_fail("cannot load client state", cpath, rc);
    }
    mess_client_params(c, &p);
    if (dim != p.dim) {
        cli_error("'%s' has dimension %zu, the client expects %u", file, dim, p.dim);
        rc = CLI_FAIL;
        goto done;
    }
    words = p.kappa / 64;
    c0 = (uint64_t *)malloc((size_t)p.shards * words * sizeof *c0);
    c1 = (uint64_t *)malloc((size_t)p.shards * words * sizeof *c1);
    d = (uint32_t *)malloc(p.shards * sizeof *d);
    if (!c0 || !c1 || !d) {
        rc = cli_fail("account report", NULL, MESS_ENOMEM);
        goto done;
    }
    if (p.p_store <= 0) {
        cli_error("the client stores without noise (p_store = 0): no stored-data guarantee");
        rc = CLI_FAIL;
        goto done;
    }
    rc = mess_account_version_bits(p.p_store, NULL, &shown, &rerr);
    if (rc != MESS_OK) {
        rc = cli_fail("stored accountant", NULL, rc);
        goto done;
    }
    p_q = mess_effective_flip(p.p_prr, p.p_irr);
    if (p_q > 0) {
        rc = mess_account_access(p.p_prr, p.p_irr, (uint64_t)repeats, &eta_r);
        if (rc == MESS_OK && p.p_irr > 0)
            rc = mess_account_search(p.p_prr, p.p_irr, (uint64_t)repeats, &geq, &gne);
        if (rc != MESS_OK) {
            rc = cli_fail("query accountants", NULL, rc);
            goto done;
        }
    }
    for (i = 0; i < n / 2; i++) {
        mess_account_stored_result r, rh;
        uint64_t dq = 0;
        uint32_t dmax = 0;
        double xi_sp;
        if ((rc = mess_client_codes(c, x + 2 * i * dim, c0)) != MESS_OK ||
            (rc = mess_client_codes(c, x + (2 * i + 1) * dim, c1)) != MESS_OK) {
            rc = cli_fail("hashing", NULL, rc);
            goto done;
        }
        for (s = 0; s < p.shards; s++) {
            uint32_t h = 0;
            for (w = 0; w < words; w++) {
                uint64_t v = c0[s * words + w] ^ c1[s * words + w];
                while (v) {
                    v &= v - 1;
                    h++;
                }
            }
            d[s] = h;
            dq += h;
            if (h > dmax)
                dmax = h;
        }
        if (updates) {
            /* d holds the bits the update changes: the values of exactly
             * those bits, in a history where all of them change */
            double mean_read, share;
            rc = mess_account_versions(p.p_store, d, NULL, p.shards, p.per_item, 0,
                                       delta, &r);
            if (rc != MESS_OK) {
                rc = cli_fail("stored accountant", NULL, rc);
                goto done;
            }
            /* r.u_mean is the route mean of 2 c_s */
            mean_read = shown * r.u_mean / 2;
            share = mean_read / ((double)p.per_item * p.kappa);
            printf("{\"update\":%zu,\"changed\":[", i);
            for (s = 0; s < p.shards; s++)
                printf("%s%u", s ? "," : "", d[s]);
            printf("],");
            json_num("changed_mean", r.u_mean / 2, 1);
            json_num("read_mean", mean_read, 1);
            json_num("read_share", share, 1);
            json_num("xi_pure_changed", r.xi_pure, 1);
            json_num("xi_pld_changed", r.xi_pld, 0);
            printf("}\n");
            sum_changed += r.u_mean / 2;
            sum_share += share;
            max_share = fmax(max_share, share);
            max_pld = fmax(max_pld, r.xi_pld);
            continue;
        }
        rc = mess_account_stored(p.p_store, d, p.shards, p.per_item, 0, delta, &r);
        if (rc == MESS_OK)
            rc = mess_account_versions(p.p_store, d, NULL, p.shards, p.per_item, 0,
                                       delta, &rh);
        if (rc != MESS_OK) {
            rc = cli_fail("stored accountant", NULL, rc);
            goto done;
        }
        xi_sp = (double)((uint64_t)p.shards * p.kappa - dq) * geq + (double)dq * gne;
        printf("{\"pair\":%zu,\"d\":[", i);
        for (s = 0; s < p.shards; s++)
            printf("%s%u", s ? "," : "", d[s]);
        printf("],\"u_max\":%llu,", (unsigned long long)r.u_max);
        json_num("u_mean", r.u_mean, 1);
        json_num("xi_pure", r.xi_pure, 1);
        json_num("xi_pld", r.xi_pld, 1);
        json_num("xi_single_shard", r.eta * dmax, 1);
        printf("\"d_q\":%llu,", (unsigned long long)dq);
        json_num("xi_ap", p_q > 0 ? eta_r * (double)dq : INFINITY, 1);
        json_num("xi_sp", p.p_irr > 0 ? xi_sp : INFINITY, 1);
        json_num("xi_pld_history", rh.xi_pld, 0);
        printf("}\n");
        max_hist = fmax(max_hist, rh.xi_pld);
        max_pure = fmax(max_pure, r.xi_pure);
        max_pld = fmax(max_pld, r.xi_pld);
        sum_pld += r.xi_pld;
        max_single = fmax(max_single, r.eta * dmax);
        max_ap = fmax(max_ap, eta_r * (double)dq);
        max_sp = fmax(max_sp, xi_sp);
    }
    if (updates) {
        printf("{\"updates\":%zu,", n / 2);
        json_num("delta", delta, 1);
        printf("\"shards\":%u,\"per_item\":%u,\"bits\":%u,", p.shards, p.per_item,
               p.kappa);
        json_num("p_store", p.p_store, 1);
        json_num("shown", shown, 1);
        json_num("read_error", rerr, 1);
        json_num("mean_changed", sum_changed / (double)(n / 2), 1);
        json_num("mean_read_share", sum_share / (double)(n / 2), 1);
        json_num("max_read_share", max_share, 1);
        json_num("max_xi_pld_changed", max_pld, 0);
        printf("}\n");
        rc = CLI_OK;
        goto done;
    }
    printf("{\"pairs\":%zu,", n / 2);
    json_num("delta", delta, 1);
    printf("\"shards\":%u,\"per_item\":%u,\"bits\":%u,\"repeats\":%ld,", p.shards,
           p.per_item, p.kappa, repeats);
    json_num("p_store", p.p_store, 1);
    json_num("p_query", p_q, 1);
    json_num("eta_D", log((1 - p.p_store) / p.p_store), 1);
    json_num("eta_R", p_q > 0 ? eta_r : INFINITY, 1);
    json_num("gamma_eq", geq, 1);
    json_num("gamma_ne", gne, 1);
    json_num("max_xi_pure", max_pure, 1);
    json_num("max_xi_pld", max_pld, 1);
    json_num("mean_xi_pld", sum_pld / (double)(n / 2), 1);
    json_num("max_xi_single_shard", max_single, 1);
    json_num("max_xi_ap", p_q > 0 ? max_ap : INFINITY, 1);
    json_num("max_xi_sp", p.p_irr > 0 ? max_sp : INFINITY, 1);
    json_num("max_xi_pld_history", max_hist, 0);
    printf("}\n");
    rc = CLI_OK;
done:
    free(c0);
    free(c1);
    free(d);
    mess_vecs_free(x);
    mess_client_free(c);
    return rc;
}

static const char summary_help[] =
    "usage: mess account summary --client C [--angle A] [--delta D]\n"
    "                            [--passphrase-env V]\n"
    "\n"
    "The bottom line for the client's parameters, in plain words: what the\n"
    "server sees, what it cannot conclude (reading code bits; telling an item\n"
    "or a query from one at angle A; repeated queries) and what it can (near\n"
    "items linkable within a shard; updates; deletes), each with the number\n"
    "the accountants compute (Theorems 5.2-5.4 and V of docs/PRIVACY.md).\n"
    "\"Tells apart with probability\" is (1 + TV) / 2, the best guess between\n"
    "two equally likely inputs, TV the total variation of the two views.\n"
    "Pairs are modelled with random hyperplanes (each bit differs with\n"
    "probability A); `mess account report` gives real pairs' values.\n"
    "\n"
    "A (0.05): normalised angle d_theta = angle / pi in (0, 1/2], the paper's\n"
    "near radius.  D (1e-5): the delta of the item's xi_pld.\n"
    "Last line: {\"eta_D\",\"item_tv\",\"item_xi_pld\",\"query_tv\",\n"
    "\"update_shown\",\"update_read_error\",...}.\n";

/* Prints text's paragraphs (one per line) wrapped at 76 columns at spaces,
 * and its last line, the JSON object, as it is. */
static void print_wrapped(const char *text)
{
    const char *line = text, *end;
    while (*line) {
        const char *nl = strchr(line, '\n');
        end = nl ? nl : line + strlen(line);
        if (!nl || !nl[1] || *line == '{') {
            fwrite(line, 1, (size_t)(end - line), stdout);
            fputc('\n', stdout);
        } else {
            while (end - line > 76) {
                const char *cut = line + 76, *stop;
                while (cut > line && *cut != ' ')
                    cut--;
                if (cut == line)
                    break;
                for (stop = cut; stop > line && stop[-1] == ' ';)
                    stop--;
                fwrite(line, 1, (size_t)(stop - line), stdout);
                fputc('\n', stdout);
                for (line = cut; *line == ' ';)
                    line++;
            }
            fwrite(line, 1, (size_t)(end - line), stdout);
            fputc('\n', stdout);
        }
        line = nl ? nl + 1 : end;
    }
}

static int account_summary(int argc, char **argv)
{
    struct cli_args a;
    const char *cpath, *pass = NULL;
    double angle, delta;
    mess_client *c = NULL;
    mess_params p;
    char *text = NULL;
    size_t len = 0;
    int rc;
    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(summary_help, stdout);
        return CLI_OK;
    }
    cpath = cli_opt(&a, "--client");
    if (cli_passphrase(&a, &pass))
        return CLI_USAGE;
    if (!cpath) {
        cli_error("account summary needs --client (see --help)");
        return CLI_USAGE;
    }
    if (cli_opt_double(&a, "--angle", 1e-9, 0.5, 0.05, &angle) ||
        cli_opt_double(&a, "--delta", MESS_ACCOUNT_MIN_DELTA, 0.999999, 1e-5, &delta) ||
        cli_check_unused(&a))
        return CLI_USAGE;
    errno = 0;
    rc = mess_client_load(cpath, pass, &c);
    if (rc != MESS_OK)
        return cli_fail("cannot load client state", cpath, rc);
    mess_client_params(c, &p);
    mess_client_free(c);
    if (p.p_store <= 0 || mess_effective_flip(p.p_prr, p.p_irr) <= 0) {
        cli_error("the client %s without noise (p_store %g, p_query %g): no guarantee "
                  "to summarise", p.p_store <= 0 ? "stores" : "queries", p.p_store,
                  mess_effective_flip(p.p_prr, p.p_irr));
        return CLI_FAIL;
    }
    rc = mess_account_summary(&p, angle, delta, NULL, 0, &len);
    if (rc == MESS_OK) {
        text = (char *)malloc(len + 1);
        rc = text ? mess_account_summary(&p, angle, delta, text, len + 1, &len)
                  : MESS_ENOMEM;
    }
    if (rc != MESS_OK) {
        free(text);
        return cli_fail("account summary", NULL, rc);
    }
    print_wrapped(text);
    free(text);
    return CLI_OK;
}

int cli_cmd_account(int argc, char **argv)
{
    static const struct {
        const char *name;
        cli_command_fn fn;
    } subs[] = {{"access", account_access},
                {"search", account_search},
                {"stored", account_stored},
                {"versions", account_versions},
                {"random-lsh", account_random_lsh},
                {"report", account_report},
                {"summary", account_summary}};
    size_t i;
    if (argc < 1 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
        fputs(account_help, argc < 1 ? stderr : stdout);
        return argc < 1 ? CLI_USAGE : CLI_OK;
    }
    for (i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (strcmp(argv[0], subs[i].name) == 0)
            return subs[i].fn(argc - 1, argv + 1);
    cli_error("unknown accountant '%s' (see mess account --help)", argv[0]);
    return CLI_USAGE;
}
