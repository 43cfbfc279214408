/*
 * test_choose.c - mess_plan_choose (mess_experimental.h) on a part of the
 * bundled SIFT set: a reachable target gives a winner that meets it by the
 * model, within the privacy limits, with the fewest bytes among the
 * candidates reported; a budget gives the highest recall within it; an
 * unreachable target or budget is MESS_ENOTFOUND with the best reachable
 * described; byte data gets u8 payloads and float data an encoding whose
 * payload recall was weighed; bad input is MESS_EINVAL (or MESS_ELIMIT),
 * never a crash.
 */
#include <math.h>
#include <stdio.h>

#include "../mess_experimental.h"
#include "harness.h"
#include "sift.h"

static float *base, *query, *train;
static size_t n_base, n_query, n_train, dim;

#define N_DATA 2000
#define N_Q 20

static const uint8_t seed[32] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3,
                                 2, 3, 8, 4, 6, 2, 6, 4, 3, 3, 8, 3, 2, 7, 9, 5};
static const uint32_t g_m[] = {16}, g_t[] = {4, 8}, g_k[] = {64};
static const size_t pools[] = {32, 64, 128, 256};

struct seen {
    mess_plan_candidate c[8];
    size_t n;
};

static void note(void *ctx, const mess_plan_candidate *c)
{
    struct seen *s = (struct seen *)ctx;
    if (s->n < 8)
        s->c[s->n++] = *c;
}

static void setup(struct mess_plan_choose_in *in, mess_params *p, struct seen *s)
{
    mess_params_default(p, (uint32_t)dim);
    memset(in, 0, sizeof *in);
    memset(s, 0, sizeof *s);
    in->size = sizeof *in;
    in->k = 10;
    in->base = p;
    in->train = train;
    in->ntrain = n_train;
    in->data = base;
    in->n = N_DATA;
    in->queries = query;
    in->nq = N_Q;
    in->grid_shards = g_m;
    in->n_grid_shards = 1;
    in->grid_per_item = g_t;
    in->n_grid_per_item = 2;
    in->grid_bits = g_k;
    in->n_grid_bits = 1;
    in->pools = pools;
    in->npools = 4;
    in->check_shards = 2;
    in->check_queries = 10;
    in->choose_payload = 1;
    in->threads = 2;
    in->seed = seed;
    in->on_candidate = note;
    in->ctx = s;
}

static double bytes_of(const mess_params *p, size_t pool)
{
    return (double)mess_request_size(p) + (double)mess_response_size(p, pool);
}

static void test_target(void)
{
    struct mess_plan_choose_in in;
    mess_params p;
    mess_plan_choice ch;
    struct seen s;
    double eta;
    size_t i;
    setup(&in, &p, &s);
    in.target_recall = 0.9;
    CHECK_OK(mess_plan_choose(&in, &ch));
    CHECK(ch.found == 1 && ch.candidates == 2 && s.n == 2);
    CHECK(ch.best.pool > 0 && ch.best.recall >= 0.9);
    CHECK(ch.best.payload == MESS_PAYLOAD_U8 && ch.params.payload == MESS_PAYLOAD_U8);
    CHECK(ch.payload_recall[MESS_PAYLOAD_U8] == 1.0);
    CHECK(mess_params_check(&ch.params) == MESS_OK);
    CHECK(ch.params.shards == ch.best.shards && ch.params.per_item == ch.best.per_item &&
          ch.params.kappa == ch.best.bits && ch.params.p_store == ch.best.p_store &&
          ch.params.p_prr == ch.best.p_prr && ch.params.p_irr == ch.best.p_prr);
    CHECK(fabs(ch.best.bytes - bytes_of(&ch.params, ch.best.pool)) < 0.5);
    /* the winner has the fewest bytes of the candidates reaching the target,
     * and each candidate's pool is the first reaching it on its curve */
    for (i = 0; i < s.n; i++) {
        CHECK(s.c[i].pool == 0 || s.c[i].bytes >= ch.best.bytes);
        CHECK(s.c[i].pool == 0 || s.c[i].recall >= 0.9);
    }
    /* within the limits, and one of them binds each flip */
    CHECK(mess_account_eta(ch.best.p_store, &eta) == MESS_OK);
    CHECK(ch.best.xi_store <= ch.max_xi * (1 + 1e-9) &&
          ch.best.xi_query <= ch.max_xi_query * (1 + 1e-9) &&
          ch.best.xi_cap <= ch.max_xi_cap * (1 + 1e-9) &&
          ch.best.xi_shard <= ch.max_xi_shard * (1 + 1e-9));
    CHECK(fabs(eta * ch.best.bits / 128.0 - ch.best.xi_shard) < 1e-9);
    CHECK(ch.best.store_bound != MESS_PLAN_BOUND_FLOOR &&
          ch.best.query_bound != MESS_PLAN_BOUND_FLOOR);
    CHECK(ch.best.curve == NULL);
}

static void test_budget(void)
{
    struct mess_plan_choose_in in;
    mess_params p;
    mess_plan_choice ch;
    struct seen s;
    size_t i;
    setup(&in, &p, &s);
    in.max_bytes = 25000;
    CHECK_OK(mess_plan_choose(&in, &ch));
    CHECK(ch.found == 1 && ch.best.bytes <= 25000 && ch.best.pool > 0);
    for (i = 0; i < s.n; i++)
        CHECK(s.c[i].pool == 0 || s.c[i].recall <= ch.best.recall);
    /* nothing fits 100 bytes: the fewest bytes any candidate needs */
    setup(&in, &p, &s);
    in.max_bytes = 100;
    CHECK_RC(mess_plan_choose(&in, &ch), MESS_ENOTFOUND);
    CHECK(ch.found == 0 && ch.best.pool == 0 && ch.best.bytes > 100);
}

static void test_unreachable(void)
{
    struct mess_plan_choose_in in;
    mess_params p;
    mess_plan_choice ch;
    struct seen s;
    static const size_t tiny[] = {10, 20};
    setup(&in, &p, &s);
    in.target_recall = 0.999;
    in.pools = tiny;
    in.npools = 2;
    CHECK_RC(mess_plan_choose(&in, &ch), MESS_ENOTFOUND);
    CHECK(ch.found == 0 && ch.best.pool == 0 && ch.best.recall < 0.999 &&
          ch.best.recall > 0 && ch.best.bytes > 0 && s.n == 2);
    /* the best reachable is the highest recall reported */
    CHECK(ch.best.recall >= s.c[0].recall && ch.best.recall >= s.c[1].recall);
}

/* Float data that bytes cannot hold: the encoding is weighed, f32 is exact. */
static void test_float_payload(void)
{
    struct mess_plan_choose_in in;
    mess_params p;
    mess_plan_choice ch;
    struct seen s;
    float *x = (float *)malloc(N_DATA * dim * sizeof *x);
    size_t i;
    CHECK(x != NULL);
    if (!x)
        return;
    for (i = 0; i < N_DATA * dim; i++)
        x[i] = base[i] * 0.37f + 0.01f;
    setup(&in, &p, &s);
    in.data = x;
    in.target_recall = 0.9;
    /* the queries scaled the same way keep the neighbours */
    {
        float *q = (float *)malloc(N_Q * dim * sizeof *q);
        CHECK(q != NULL);
        if (!q) {
            free(x);
            return;
        }
        for (i = 0; i < N_Q * dim; i++)
            q[i] = query[i] * 0.37f + 0.01f;
        in.queries = q;
        CHECK_OK(mess_plan_choose(&in, &ch));
        free(q);
    }
    CHECK(ch.payload_recall[MESS_PAYLOAD_F32] == 1.0 &&
          ch.payload_recall[MESS_PAYLOAD_U8] == 0.0);
    CHECK(ch.payload_recall[MESS_PAYLOAD_F16] > 0.9 &&
          ch.payload_recall[MESS_PAYLOAD_F16] <= 1.0);
    CHECK(ch.payload_recall[MESS_PAYLOAD_I8] > 0.5 &&
          ch.payload_recall[MESS_PAYLOAD_I8] <= 1.0);
    CHECK(ch.best.payload != MESS_PAYLOAD_U8 && ch.best.recall >= 0.9);
    /* the choice's bytes are its encoding's */
    CHECK(fabs(ch.best.bytes - bytes_of(&ch.params, ch.best.pool)) < 0.5);
    /* with the payload fixed, base's encoding */
    setup(&in, &p, &s);
    in.target_recall = 0.9;
    in.choose_payload = 0;
    p.payload = MESS_PAYLOAD_F16;
    CHECK_OK(mess_plan_choose(&in, &ch));
    CHECK(ch.best.payload == MESS_PAYLOAD_F16 && ch.params.payload == MESS_PAYLOAD_F16);
    free(x);
}

static void test_bad_input(void)
{
    struct mess_plan_choose_in in;
    mess_params p;
    mess_plan_choice ch;
    struct seen s;
    static const uint32_t k100[] = {100}, k2048[] = {2048}, t32[] = {32};
    static const size_t zero_pool[] = {0};
    uint32_t truth[N_Q * 10];
    size_t i;

    setup(&in, &p, &s);
    in.target_recall = 0.9;
    CHECK_RC(mess_plan_choose(NULL, &ch), MESS_EINVAL);
    CHECK_RC(mess_plan_choose(&in, NULL), MESS_EINVAL);
    CHECK_RC(mess_plan_choose_sized(&in, &ch, 8), MESS_EINVAL);
#define BAD(field, value, want)                         \
    do {                                                \
        setup(&in, &p, &s);                             \
        in.target_recall = 0.9;                         \
        in.field = value;                               \
        CHECK_RC(mess_plan_choose(&in, &ch), want);     \
    } while (0)
    BAD(size, 8, MESS_EINVAL);
    BAD(base, NULL, MESS_EINVAL);
    BAD(train, NULL, MESS_EINVAL);
    BAD(data, NULL, MESS_EINVAL);
    BAD(queries, NULL, MESS_EINVAL);
    BAD(n, 0, MESS_EINVAL);
    BAD(nq, 0, MESS_EINVAL);
    BAD(k, 0, MESS_EINVAL);
    BAD(k, N_DATA + 1, MESS_EINVAL);
    BAD(target_recall, 1.5, MESS_EINVAL);
    BAD(target_recall, NAN, MESS_EINVAL);
    BAD(target_recall, 0, MESS_EINVAL);  /* neither a target nor a budget */
    BAD(max_bytes, 1000, MESS_EINVAL);   /* both */
    BAD(max_xi, -1, MESS_EINVAL);
    BAD(max_xi_query, INFINITY, MESS_EINVAL);
    BAD(grid_bits, k100, MESS_EINVAL);
    BAD(grid_bits, k2048, MESS_ELIMIT);
    setup(&in, &p, &s); /* t above every M */
    in.target_recall = 0.9;
    in.grid_per_item = t32;
    in.n_grid_per_item = 1;
    CHECK_RC(mess_plan_choose(&in, &ch), MESS_EINVAL);
    BAD(n_grid_per_item, 0, MESS_EINVAL);
    BAD(pools, zero_pool, MESS_EINVAL);
    BAD(npools, 0, MESS_EINVAL);
    BAD(check_shards, MESS_PLAN_MAX_CHECK_SHARDS + 1, MESS_ELIMIT);
    BAD(choose_payload, 2, MESS_EINVAL);
#undef BAD
    /* a truth index outside the data */
    for (i = 0; i < N_Q * 10; i++)
        truth[i] = (uint32_t)i;
    truth[5] = N_DATA;
    setup(&in, &p, &s);
    in.target_recall = 0.9;
    in.truth = truth;
    CHECK_RC(mess_plan_choose(&in, &ch), MESS_EINVAL);
    /* base without a dimension */
    setup(&in, &p, &s);
    in.target_recall = 0.9;
    p.dim = 0;
    CHECK_RC(mess_plan_choose(&in, &ch), MESS_EINVAL);
    CHECK(s.n == 0); /* nothing was tried */
}

/* The default limits are the defaults' bounds (mess plan --help). */
static void test_limits(void)
{
    double lim[4];
    mess_plan_default_limits(lim);
    CHECK(fabs(lim[0] - 39.08) < 0.01 && fabs(lim[1] - 156.3) < 0.1 &&
          fabs(lim[2] - 200.6) < 0.1 && fabs(lim[3] - 2.442) < 0.001);
    mess_plan_default_limits(NULL);
    CHECK(mess_sizeof_plan_choice() == sizeof(mess_plan_choice));
}

int main(void)
{
    if (test_read_sift(&base, &n_base, &query, &n_query, &train, &n_train, &dim) ||
        n_base < N_DATA || n_query < N_Q) {
        printf("cannot read datasets/sift (run from the repository root)\n");
        printf("0 passed, 1 failed\n");
        return 1;
    }
    RUN(test_limits);
    RUN(test_bad_input);
    RUN(test_target);
    RUN(test_budget);
    RUN(test_unreachable);
    RUN(test_float_payload);
    mess_vecs_free(base);
    mess_vecs_free(query);
    mess_vecs_free(train);
    HARNESS_END();
}
