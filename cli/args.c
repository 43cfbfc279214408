/*
 * args.c - option parsing for the `mess` tool.  Every numeric option is
 * range-checked; an unknown or malformed option is an error, never ignored.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../mess.h"
#include "cli.h"

void cli_args_init(struct cli_args *a, int argc, char **argv)
{
    a->argc = argc < 256 ? argc : 256;
    a->argv = argv;
    memset(a->used, 0, sizeof a->used);
}

void cli_error(const char *fmt, ...)
{
    va_list ap;
    fputs("mess: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* Finds option `name`; returns its value ("" for a bare flag form when
 * want_value is 0) or NULL. */
static const char *find(struct cli_args *a, const char *name, int want_value)
{
    size_t len = strlen(name);
    int i;
    for (i = 0; i < a->argc; i++) {
        const char *s = a->argv[i];
        if (strcmp(s, "--") == 0)
            break;
        if (strncmp(s, name, len) != 0)
            continue;
        if (s[len] == '\0') {
            a->used[i] = 1;
            if (!want_value)
                return "";
            if (i + 1 < a->argc) {
                a->used[i + 1] = 1;
                return a->argv[i + 1];
            }
            return NULL;
        }
        if (want_value && s[len] == '=') {
            a->used[i] = 1;
            return s + len + 1;
        }
    }
    return NULL;
}

const char *cli_opt(struct cli_args *a, const char *name)
{
    return find(a, name, 1);
}

int cli_flag(struct cli_args *a, const char *name)
{
    return find(a, name, 0) != NULL;
}

int cli_wants_help(struct cli_args *a)
{
    return cli_flag(a, "--help") || cli_flag(a, "-h");
}

int cli_opt_long(struct cli_args *a, const char *name, long lo, long hi,
                 long def, long *out)
{
    const char *v = cli_opt(a, name);
    char *end;
    long x;
    if (!v) {
        *out = def;
        return 0;
    }
    errno = 0;
    x = strtol(v, &end, 0);
    if (errno || end == v || *end != '\0' || x < lo || x > hi) {
        cli_error("%s: expected an integer in [%ld, %ld], got '%s'", name, lo,
                  hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

int cli_opt_double(struct cli_args *a, const char *name, double lo, double hi,
                   double def, double *out)
{
    const char *v = cli_opt(a, name);
    char *end;
    double x;
    if (!v) {
        *out = def;
        return 0;
    }
    errno = 0;
    x = strtod(v, &end);
    if (errno || end == v || *end != '\0' || !(x >= lo && x <= hi)) {
        cli_error("%s: expected a number in [%g, %g], got '%s'", name, lo, hi,
                  v);
        return -1;
    }
    *out = x;
    return 0;
}

const char *cli_positional(struct cli_args *a, int idx)
{
    int i, k = 0, after_dashes = 0;
    for (i = 0; i < a->argc; i++) {
        const char *s = a->argv[i];
        if (!after_dashes && strcmp(s, "--") == 0) {
            a->used[i] = 1;
            after_dashes = 1;
            continue;
        }
        if (a->used[i] || (!after_dashes && s[0] == '-' && s[1] != '\0'))
            continue;
        if (k++ == idx) {
            a->used[i] = 1;
            return s;
        }
    }
    return NULL;
}

int cli_check_unused(struct cli_args *a)
{
    int i;
    for (i = 0; i < a->argc; i++) {
        if (!a->used[i]) {
            cli_error("unexpected argument '%s' (see --help)", a->argv[i]);
            return -1;
        }
    }
    return 0;
}

/* The defaults of every parameter option: mess_params_default_for the
 * metric, the one place they are defined (kappa no longer depends on the
 * dimension; cosine and inner-product data have their own). */
static void param_defaults(mess_params *p, uint32_t metric)
{
    mess_params_default_for(p, 1, metric);
    p->dim = 0;
}

static const char *const metric_names[] = {"l2", "ip", "cos", NULL};
static const char *const payload_names[] = {"f32", "f16", "i8", "u8", NULL};

const char *cli_metric_name(uint32_t metric)
{
    return metric < 3 ? metric_names[metric] : "?";
}

const char *cli_payload_name(uint32_t payload)
{
    return payload < 4 ? payload_names[payload] : "?";
}

/* choices[i] names value i; `alias` (or NULL) is one more spelling of
 * value alias_of, accepted and listed after them. */
static int parse_choice(struct cli_args *a, const char *name,
                        const char *const *choices, const char *alias,
                        uint32_t alias_of, uint32_t *out)
{
    const char *v = cli_opt(a, name);
    uint32_t i;
    if (!v)
        return 0;
    for (i = 0; choices[i]; i++)
        if (strcmp(v, choices[i]) == 0) {
            *out = i;
            return 0;
        }
    if (alias && strcmp(v, alias) == 0) {
        *out = alias_of;
        return 0;
    }
    {
        char list[128] = "";
        for (i = 0; choices[i]; i++) {
            if (i)
                strcat(list, ", ");
            strcat(list, choices[i]); /* the short names above: no overflow */
        }
        cli_error("%s: unknown value '%s' (accepted: %s%s%s)", name, v, list,
                  alias ? ", " : "", alias ? alias : "");
    }
    return -1;
}

int cli_params_options(struct cli_args *a, int graph, mess_params *p)
{
    mess_params d;
    long shards, per_item, bits, sample, hm = 0, efc = 0, efs = 0;
    double p_store, p_query, p_prr, p_irr;
    uint32_t metric = MESS_METRIC_L2;

    /* the metric first: it chooses the defaults of the others.  The
     * cosine / inner-product flips are matched to their 64 bits: with
     * --bits the defaults are the paper's (flips matched to 128 bits). */
    /* "cosine" too: Python's and the C macro's (MESS_METRIC_COSINE) spelling */
    if (graph && parse_choice(a, "--metric", metric_names, "cosine", MESS_METRIC_COSINE,
                              &metric))
        return -1;
    param_defaults(&d, cli_opt(a, "--bits") ? MESS_METRIC_L2 : metric);
    *p = d;
    p->metric = metric;
    if (cli_opt_long(a, "--shards", 1, MESS_MAX_SHARDS, d.shards, &shards) ||
        cli_opt_long(a, "--per-item", 1, MESS_MAX_SHARDS, d.per_item, &per_item) ||
        cli_opt_long(a, "--bits", 64, MESS_MAX_BITS, d.kappa, &bits) ||
        cli_opt_long(a, "--train-sample", 0, 100000000, d.train_sample, &sample) ||
        cli_opt_double(a, "--p-store", 0.0, 0.5, d.p_store, &p_store) ||
        cli_opt_double(a, "--p-query", 0.0, 0.5,
                       mess_effective_flip(d.p_prr, d.p_irr), &p_query) ||
        cli_opt_double(a, "--p-prr", 0.0, 0.5, -1.0, &p_prr) ||
        cli_opt_double(a, "--p-irr", 0.0, 0.5, -1.0, &p_irr))
        return -1;
    if (graph &&
        (cli_opt_long(a, "--hnsw-m", 2, MESS_MAX_HNSW_M, d.hnsw_m, &hm) ||
         cli_opt_long(a, "--ef-construction", 1, MESS_MAX_EF, d.ef_construction, &efc) ||
         cli_opt_long(a, "--ef-search", 0, MESS_MAX_EF, d.ef_search, &efs) ||
         parse_choice(a, "--payload", payload_names, NULL, 0, &p->payload)))
        return -1;
    if (bits % 64 != 0) {
        cli_error("--bits: expected a multiple of 64 in [64, %d], got %ld "
                  "(more bits than dimensions is allowed)", MESS_MAX_BITS, bits);
        return -1;
    }
    if (per_item > shards) {
        cli_error("--per-item %ld: at most --shards (%ld): each item goes to "
                  "that many distinct shards", per_item, shards);
        return -1;
    }
    p->shards = (uint32_t)shards;
    p->per_item = (uint32_t)per_item;
    p->kappa = (uint32_t)bits;
    p->train_sample = (uint32_t)sample;
    p->p_store = p_store;
    p->p_prr = p_prr >= 0 ? p_prr : mess_split_flip(p_query);
    p->p_irr = p_irr >= 0 ? p_irr : mess_split_flip(p_query);
    if (graph) {
        p->hnsw_m = (uint32_t)hm;
        p->ef_construction = (uint32_t)efc;
        p->ef_search = (uint32_t)efs;
    }
    return 0;
}

void cli_params_help(FILE *f, int graph)
{
    mess_params d, c;
    param_defaults(&d, MESS_METRIC_L2);
    param_defaults(&c, MESS_METRIC_COSINE);
    fprintf(f,
            "  --shards M          graphs (%u)             --per-item T      shards per item (%u)\n"
            "  --bits K            code bits per shard, a multiple of 64; more\n"
            "                      than the dimension is allowed (%u)\n"
            "  --p-store P         storage flip p_D (%g)\n"
            "  --p-query Q         effective query flip, split evenly into PRR and IRR (%g)\n"
            "  --p-prr A --p-irr B permanent / instantaneous query flips (override --p-query)\n",
            d.shards, d.per_item, d.kappa, d.p_store,
            mess_effective_flip(d.p_prr, d.p_irr));
    if (graph)
        fprintf(f,
                "  --hnsw-m M          HNSW links (%u)         --ef-construction E (%u)\n"
                "  --ef-search E       per-shard search beam, max(budget, E) (%u)\n"
                "  --metric l2|ip|cos  rerank metric, cos also spelled cosine (%s)\n"
                "  --payload f32|f16|i8|u8  payload encoding; u8: one exact byte per\n"
                "                      component, integers in [0, 255] only (%s)\n",
                d.hnsw_m, d.ef_construction, d.ef_search, metric_names[d.metric],
                payload_names[d.payload]);
    if (graph)
        fprintf(f,
                "  with --metric cos or ip and no --bits the defaults are --bits %u,\n"
                "  --p-store %g, --p-query %g, --ef-search %u: 4.12 nats per bit against\n"
                "  2.44; on 100 close SIFT pairs lower on average (xi_pld 0.91x) but\n"
                "  higher for up to 15%% of them in xi_pld (by up to +11%%) and 31%% in\n"
                "  one shard (by up to +45%%) (docs/TEXT.md, \"Decision\")\n",
                c.kappa, c.p_store, mess_effective_flip(c.p_prr, c.p_irr), c.ef_search);
    fprintf(f, "  --train-sample N    IsoHash training rows per shard, 0 for min(n, 20000) (%u)\n",
            d.train_sample);
}

int cli_passphrase(struct cli_args *a, const char **out)
{
    const char *var = cli_opt(a, "--passphrase-env");
    *out = NULL;
    if (!var)
        return 0;
    *out = getenv(var);
    if (!*out) {
        cli_error("--passphrase-env: variable %s is not set", var);
        return -1;
    }
    if (!**out) {
        cli_error("--passphrase-env: variable %s is empty (an empty passphrase "
                  "seals nothing)", var);
        *out = NULL;
        return -1;
    }
    return 0;
}

static int hex_value(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

int cli_seed(struct cli_args *a, unsigned char seed[32], int *have, int warn)
{
    const char *hex = cli_opt(a, "--seed");
    const char *env = cli_opt(a, "--seed-env"), *file = cli_opt(a, "--seed-file");
    char buf[160];
    int rc;
    *have = 0;
    if (hex || cli_flag(a, "--seed")) {
        cli_error("--seed: a seed on the command line shows in ps and in shell history, "
                  "and it is the client's master key; put its 64 hex digits in an "
                  "environment variable (--seed-env NAME) or a file (--seed-file PATH)");
        return -1;
    }
    if ((cli_flag(a, "--seed-env") && !env) || (cli_flag(a, "--seed-file") && !file)) {
        cli_error("--seed-env NAME / --seed-file PATH: the option needs its value");
        return -1;
    }
    if (env && file) {
        cli_error("--seed-env and --seed-file: give one of them");
        return -1;
    }
    if (env) {
        const char *v = getenv(env);
        if (!v) {
            cli_error("--seed-env: variable %s is not set", env);
            return -1;
        }
        if (cli_parse_seed(v, seed) != 0) {
            cli_error("--seed-env: variable %s must hold 64 hex digits", env);
            return -1;
        }
    } else if (file) {
        FILE *f = fopen(file, "r");
        size_t n;
        if (!f) {
            cli_error("%s: %s", file, strerror(errno));
            return -1;
        }
        setvbuf(f, NULL, _IONBF, 0); /* no stdio buffer keeps a copy */
        n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' ||
                         buf[n - 1] == '\t'))
            buf[--n] = '\0';
        rc = cli_parse_seed(buf, seed);
        memset(buf, 0, sizeof buf);
        if (rc != 0) {
            cli_error("--seed-file: %s must hold 64 hex digits", file);
            return -1;
        }
    } else {
        return 0;
    }
    *have = 1;
    if (warn)
        cli_error("warning: deterministic mode: the seed is the client's master key "
                  "(every key and coin follows from it): whoever has it can decrypt "
                  "every item and strip the perturbation; for reproducible experiments, "
                  "not for protecting data");
    return 0;
}

int cli_parse_seed(const char *hex, unsigned char seed[32])
{
    size_t i;
    if (strlen(hex) != 64)
        return -1;
    for (i = 0; i < 32; i++) {
        int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        seed[i] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
}

int cli_parse_list(const char *s, uint64_t lo, uint64_t hi, uint64_t **out,
                   size_t *n)
{
    size_t cap = 16, k = 0;
    uint64_t *v = (uint64_t *)malloc(cap * sizeof *v);
    if (!v)
        return -1;
    while (*s) {
        char *end;
        unsigned long long x;
        if (*s < '0' || *s > '9')
            break;
        errno = 0;
        x = strtoull(s, &end, 10);
        if (end == s || errno == ERANGE || x < lo || x > hi)
            break;
        if (k == cap) {
            uint64_t *w = (uint64_t *)realloc(v, 2 * cap * sizeof *v);
            if (!w)
                break;
            v = w;
            cap *= 2;
        }
        v[k++] = (uint64_t)x;
        s = end;
        if (*s == ',' && s[1])
            s++;
        else if (*s)
            break;
    }
    if (*s || k == 0) {
        free(v);
        return -1;
    }
    *out = v;
    *n = k;
    return 0;
}

int cli_parse_ulist(const char *s, unsigned *out, size_t max, size_t *n)
{
    *n = 0;
    while (s && *s) {
        char *end;
        unsigned long v;
        if (*s < '0' || *s > '9') /* strtoul would take a sign or spaces */
            return -1;
        errno = 0;
        v = strtoul(s, &end, 10);
        if (errno || v > UINT_MAX || *n == max || (*end && *end != ',') ||
            (*end == ',' && !end[1]))
            return -1;
        out[(*n)++] = (unsigned)v;
        s = *end == ',' ? end + 1 : end;
    }
    return *n ? 0 : -1;
}

int cli_opt_ulist(struct cli_args *a, const char *name, const char *def, unsigned *out,
                  size_t max, size_t *n)
{
    const char *s = cli_opt(a, name);
    return cli_parse_ulist(s ? s : def, out, max, n);
}

int cli_parse_grid(struct cli_args *a, const char *name, const char *def,
                   uint64_t lo, uint64_t hi, uint64_t **v, size_t *n)
{
    const char *s = cli_opt(a, name);
    if (cli_parse_list(s ? s : def, lo, hi, v, n) != 0) {
        cli_error("%s: expected a comma list of integers in [%llu, %llu]", name,
                  (unsigned long long)lo, (unsigned long long)hi);
        return -1;
    }
    return 0;
}

int cli_grid_read(struct cli_args *a, const char *const def[4], struct cli_grid *g)
{
    const char *plist = cli_opt(a, "--pools");
    uint64_t *gm = NULL, *gt = NULL, *gk = NULL, *pl = NULL;
    size_t ngm = 0, ngt = 0, ngk = 0, npl = 0, i;
    int rc = CLI_USAGE;
    memset(g, 0, sizeof *g);
    if (cli_parse_grid(a, "--grid-shards", def[0], 1, MESS_MAX_SHARDS, &gm, &ngm) ||
        cli_parse_grid(a, "--grid-per-item", def[1], 1, MESS_MAX_SHARDS, &gt, &ngt) ||
        cli_parse_grid(a, "--grid-bits", def[2], 64, MESS_PLAN_MAX_CONDITIONAL_BITS, &gk,
                       &ngk))
        goto done;
    for (i = 0; i < ngk; i++)
        if (gk[i] % 64) {
            cli_error("--grid-bits: %llu is not a multiple of 64", (unsigned long long)gk[i]);
            goto done;
        }
    if (cli_parse_list(plist ? plist : def[3], 1, (uint64_t)MESS_MAX_BUDGET * 16, &pl,
                       &npl) != 0) {
        cli_error("--pools: expected a comma list of pools B >= 1");
        goto done;
    }
    g->v = (uint32_t *)malloc((ngm + ngt + ngk) * sizeof *g->v);
    g->pools = (size_t *)malloc(npl * sizeof *g->pools);
    if (!g->v || !g->pools) {
        cli_error("out of memory");
        cli_grid_free(g);
        rc = CLI_FAIL;
        goto done;
    }
    for (i = 0; i < ngm; i++)
        g->v[i] = (uint32_t)gm[i];
    for (i = 0; i < ngt; i++)
        g->v[ngm + i] = (uint32_t)gt[i];
    for (i = 0; i < ngk; i++)
        g->v[ngm + ngt + i] = (uint32_t)gk[i];
    for (i = 0; i < npl; i++)
        g->pools[i] = (size_t)pl[i];
    g->nm = ngm, g->nt = ngt, g->nk = ngk, g->npools = npl;
    rc = CLI_OK;
done:
    free(gm);
    free(gt);
    free(gk);
    free(pl);
    return rc;
}

void cli_grid_input(const struct cli_grid *g, struct mess_plan_choose_in *in)
{
    in->grid_shards = g->v;
    in->n_grid_shards = g->nm;
    in->grid_per_item = g->v + g->nm;
    in->n_grid_per_item = g->nt;
    in->grid_bits = g->v + g->nm + g->nt;
    in->n_grid_bits = g->nk;
    in->pools = g->pools;
    in->npools = g->npools;
}

int cli_grid_check_training(const struct cli_grid *g, const char *train, size_t ntrain,
                            const mess_params *p)
{
    mess_params big = *p;
    size_t i;
    for (i = 0; i < g->nk; i++)
        if (g->v[g->nm + g->nt + i] > big.kappa || i == 0)
            big.kappa = g->v[g->nm + g->nt + i];
    return cli_check_training(train, ntrain, &big);
}

void cli_grid_free(struct cli_grid *g)
{
    free(g->v);
    free(g->pools);
    g->v = NULL;
    g->pools = NULL;
}
