/*
 * test_update_attack.c - the update attack of issue 30 against the
 * accountant's version-history bound (docs/PRIVACY.md, "Versions of an
 * item"), through the real client and server on the bundled SIFT set.
 *
 * Each of ITEMS ids is inserted, then updated (delete + insert of the same
 * id) to VERSIONS - 1 other vectors, all different base vectors.  The
 * server is told exactly which of its records are the id's versions (the
 * complete view), and reads every stored bit that differs between two
 * versions as the clean bit of each version.  The storage coins are two
 * per (shard, id, position), so such a read is right in every version
 * (coins 0, 0) or wrong in every version (coins 1, 1).  The accountant
 * bounds a position that changes within a history at 2 eta_D, for any
 * number of versions; the least error that allows for a bit is
 * 1 / (1 + e^(2 eta_D)) = p_D^2 / ((1 - p_D)^2 + p_D^2)
 * (mess_account_version_bits), and the attack must not do better, while
 * doing better than the single-snapshot bound 1 / (1 + e^eta_D) = p_D
 * (the doubling is real).  Also: only changed positions are ever read, and
 * a changed position shows with probability (1 - p_D)^2 + p_D^2.
 */
#include <math.h>
#include <stdio.h>

#include "../mess.h"
#include "../mess_experimental.h"
#include "harness.h"
#include "sift.h"

/* Width of the statistical checks in binomial standard deviations (as in
 * tests/test_averaging.c: production runs draw fresh keys every time). */
#define Z_BOUND 5.0
#define SHARDS 4
#define PER_ITEM 2
#define VERSIONS 40
#define ITEMS 24
#define BACKGROUND 300

static float *base, *train;
static size_t n_base, n_train, dim;

static const uint8_t seed[32] = {2, 7, 1, 8, 2, 8, 1, 8, 2, 8, 4, 5, 9, 0, 4, 5,
                                 2, 3, 5, 3, 6, 0, 2, 8, 7, 4, 7, 1, 3, 5, 2, 6};

#include "apply_one.h"

/* Vector of version k of item it: a distinct base row for every version. */
static const float *version_vector(size_t it, size_t k)
{
    return base + (BACKGROUND + it * VERSIONS + k) * dim;
}

struct outcome {
    size_t positions;  /* (item, shard, bit) positions of the ids' entries */
    size_t changed;    /* of which the clean history changes */
    size_t read;       /* of which the stored history changes: read */
    size_t wrong;      /* of which the reads are wrong (in every version) */
    size_t mixed;      /* reads right in some versions, wrong in others */
    size_t unchanged_read; /* read though the clean bit never changed */
    double min_share, max_share; /* per version: share of its t kappa bits read */
};

static int bit(const uint64_t *code, size_t b)
{
    return (int)((code[b / 64] >> (b % 64)) & 1);
}

static void attack(const uint8_t *seed_or_null, uint32_t kappa, double p_store,
                   struct outcome *o)
{
    mess_params p;
    mess_client *c = NULL;
    mess_server *s = NULL;
    uint32_t words = kappa / 64, j;
    size_t it, k, b, n;
    uint64_t *clean = (uint64_t *)malloc((size_t)VERSIONS * SHARDS * words * 8);
    uint64_t *codes[SHARDS] = {NULL};
    struct added (*where)[VERSIONS] = malloc(sizeof(struct added[ITEMS][VERSIONS]));
    uint64_t bg[BACKGROUND];
    uint8_t *buf;
    size_t len;

    memset(o, 0, sizeof *o);
    o->min_share = 1.0;
    mess_params_default(&p, (uint32_t)dim);
    p.shards = SHARDS;
    p.per_item = PER_ITEM;
    p.kappa = kappa;
    p.p_store = p_store;
    p.ef_construction = 40;
    p.train_sample = 2000;
    CHECK_OK(mess_client_new(&p, train, n_train, seed_or_null, 2, &c));
    CHECK_OK(mess_server_new(&p, &s));
    if (!c || !s || !clean || !where)
        goto out;
    for (k = 0; k < BACKGROUND; k++)
        bg[k] = 1000000 + k;
    CHECK_OK(mess_client_upload(c, bg, base, BACKGROUND, 2, &buf, &len));
    CHECK_OK(mess_server_apply_upload(s, buf, len, 2));
    mess_buf_free(buf);
    for (it = 0; it < ITEMS; it++)
        for (k = 0; k < VERSIONS; k++) {
            if (k > 0)
                CHECK_OK(delete_one(c, s, 77 + it));
            CHECK_OK(apply_one(c, s, 77 + it, version_vector(it, k), &where[it][k]));
        }
    for (j = 0; j < SHARDS; j++) {
        CHECK_OK(mess_server_shard_nodes(s, j, &n));
        codes[j] = (uint64_t *)malloc((n ? n : 1) * words * 8);
        if (!codes[j])
            goto out;
        CHECK_OK(mess_server_shard_codes(s, j, codes[j], n));
    }
    for (it = 0; it < ITEMS; it++) {
        size_t read_bits = 0, shards_in = 0;
        for (k = 0; k < VERSIONS; k++)
            CHECK_OK(mess_client_codes(c, version_vector(it, k),
                                       clean + k * SHARDS * words));
        for (j = 0; j < SHARDS; j++) {
            size_t node[VERSIONS], nv = 0;
            for (k = 0; k < VERSIONS; k++) {
                const struct added *a = &where[it][k];
                if (a->after[j] == a->before[j] + 1)
                    node[nv++] = a->before[j];
            }
            if (nv == 0)
                continue;
            CHECK(nv == VERSIONS); /* the route depends on the id only */
            shards_in++;
            for (b = 0; b < kappa; b++) {
                int c0 = bit(clean + j * words, b), y0 = bit(codes[j] + node[0] * words, b);
                int clean_changes = 0, stored_changes = 0, right = 0;
                for (k = 0; k < VERSIONS; k++) {
                    int ck = bit(clean + (k * SHARDS + j) * words, b);
                    int yk = bit(codes[j] + node[k] * words, b);
                    clean_changes |= ck != c0;
                    stored_changes |= yk != y0;
                    right += yk == ck;
                }
                o->positions++;
                o->changed += (size_t)clean_changes;
                if (!stored_changes)
                    continue;
                /* the attack: a stored bit that changed is read as clean */
                o->read++;
                read_bits++;
                o->unchanged_read += (size_t)!clean_changes;
                if (right == 0)
                    o->wrong++;
                else if (right != VERSIONS)
                    o->mixed++;
            }
        }
        CHECK(shards_in == PER_ITEM);
        if (shards_in) {
            double share = (double)read_bits / ((double)shards_in * kappa);
            o->min_share = fmin(o->min_share, share);
            o->max_share = fmax(o->max_share, share);
        }
    }
out:
    for (j = 0; j < SHARDS; j++)
        free(codes[j]);
    free(where);
    free(clean);
    mess_client_free(c);
    mess_server_free(s);
}

/* Runs the attack and checks it against the accountant; with `strict` the
 * lower bound on the error is asserted (it is vacuous at small p_D, where
 * the expected number of wrong reads is below Z_BOUND sigma). */
static void run(const char *what, const uint8_t *seed_or_null, uint32_t kappa,
                double p_store, int strict)
{
    struct outcome o;
    double eta, eta2, shown, least, err, sigma, share, sigma_s;
    attack(seed_or_null, kappa, p_store, &o);
    CHECK_OK(mess_account_eta(p_store, &eta));
    CHECK_OK(mess_account_version_bits(p_store, &eta2, &shown, &least));
    if (o.read == 0 || o.changed == 0) {
        CHECK(!"no position read");
        return;
    }
    err = (double)o.wrong / (double)o.read;
    sigma = sqrt(least * (1 - least) / (double)o.read);
    share = (double)o.read / (double)o.changed;
    sigma_s = sqrt(shown * (1 - shown) / (double)o.changed);
    printf("# %s (kappa %u, p_D %.3f, %d versions of %d ids): read %.1f-%.1f%% of each "
           "version's bits, %zu of %zu changed positions (%.4f; shown %.4f), "
           "error %.4f (%zu wrong; bound 2 eta_D = %.3f allows >= %.4f, "
           "one snapshot eta_D = %.3f >= %.4f)\n",
           what, kappa, p_store, VERSIONS, ITEMS, 100 * o.min_share, 100 * o.max_share,
           o.read, o.changed, share, shown, err, o.wrong, eta2, least, eta,
           1 / (1 + exp(eta)));
    CHECK(o.positions == (size_t)ITEMS * PER_ITEM * kappa);
    /* the change pattern: only changed clean bits show, at the stated rate */
    CHECK(o.unchanged_read == 0);
    CHECK(fabs(share - shown) <= Z_BOUND * sigma_s);
    /* two coins per position: a read is right or wrong in every version */
    CHECK(o.mixed == 0);
    /* the attack is within the history bound ... */
    if (strict)
        CHECK(err >= least - Z_BOUND * sigma);
    /* ... and beyond the one-snapshot bound, which does not cover it */
    CHECK(err + Z_BOUND * sigma < 1 / (1 + exp(eta)));
}

static void test_update_attack_default(void)
{
    run("deterministic", seed, 128, 0.08, 1);
    run("production", NULL, 128, 0.08, 1);
}

static void test_update_attack_high_flip(void)
{
    run("deterministic", seed, 128, 0.2, 1);
}

/* The cosine defaults' bits and flip (mess_params_default_for). */
static void test_update_attack_cosine_flip(void)
{
    run("deterministic", seed, 64, 0.016, 0);
}

int main(void)
{
    if (test_read_sift(&base, &n_base, NULL, NULL, &train, &n_train, &dim) ||
        n_base < BACKGROUND + ITEMS * VERSIONS) {
        printf("cannot read the bundled SIFT set\n0 passed, 1 failed\n");
        return 1;
    }
    RUN(test_update_attack_default);
    RUN(test_update_attack_high_flip);
    RUN(test_update_attack_cosine_flip);
    mess_vecs_free(base);
    mess_vecs_free(train);
    HARNESS_END();
}
