/*
 * lshrr.c - randomized response on packed bits and the two-phase query report.
 */
#include <math.h>
#include <sodium.h>

#include "lshrr.h"

#define DIGEST_BYTES 32

/* round(p * 2^32), saturating; p in [0, 1/2]. */
static uint64_t threshold32(double p)
{
    return (uint64_t)llround(p * 4294967296.0);
}

static int check_args(const struct mess_rng *r, const uint64_t *code,
                      uint32_t bits, double p)
{
    if (!r || !code || bits == 0 || !(p >= 0.0 && p <= 0.5))
        return MESS_EINVAL;
    return MESS_OK;
}

/* Next 4 / 8 keystream bytes as an integer, reading the buffer in place. */
static uint32_t coin32(struct mess_rng *r)
{
    uint32_t u;
    if (r->pos + 4 > r->fill)
        return mess_rng_u32(r);
    u = mess_load_u32(r->buf + r->pos);
    r->pos += 4;
    return u;
}

static uint64_t coin64(struct mess_rng *r)
{
    uint64_t u;
    if (r->pos + 8 > r->fill)
        return mess_rng_u64(r);
    u = mess_load_u64(r->buf + r->pos);
    r->pos += 8;
    return u;
}

/* Mask of `bits` (1..64) low lanes. */
static uint64_t lanes(uint32_t bits)
{
    return bits >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << bits) - 1;
}

int lshrr_flip_threshold(struct mess_rng *r, uint64_t *code, uint32_t bits,
                         double p)
{
    uint64_t t;
    uint32_t i;
    int rc = check_args(r, code, bits, p);
    if (rc != MESS_OK)
        return rc;
    t = threshold32(p);
    if (t == 0)
        return MESS_OK;
    for (i = 0; i < bits; i++)
        if ((uint64_t)coin32(r) < t)
            code[i / 64] ^= (uint64_t)1 << (i % 64);
    return MESS_OK;
}

/* 64 independent Bernoulli(t / 2^32) lanes: lane l flips iff its 32-bit
 * uniform U_l < t.  The U_l are drawn bit-sliced, most significant bit
 * first, one 64-bit random word per bit position, and only as far as some
 * lane is still undecided (its prefix equal to t's); a lane still tied
 * after t's lowest set bit has U_l >= t.  So the result is exactly the
 * comparison of lshrr_flip_threshold, with about log2(64) + 1.3 words per
 * 64 lanes instead of 32. */
static uint64_t bernoulli64(struct mess_rng *r, uint32_t t)
{
    uint64_t und = ~(uint64_t)0, res = 0;
    int k, low = 0;
    while (!(t >> low & 1))
        low++;
    for (k = 31; k >= low; k--) {
        uint64_t w = coin64(r);
        if (t >> k & 1) {
            res |= und & ~w; /* U bit 0 under t bit 1: U < t */
            und &= w;
        } else {
            und &= ~w;       /* U bit 1 over t bit 0: U > t */
        }
        if (!und)
            break;
    }
    return res;
}

int lshrr_flip(struct mess_rng *r, uint64_t *code, uint32_t bits, double p)
{
    uint64_t t;
    uint32_t w;
    int rc = check_args(r, code, bits, p);
    if (rc != MESS_OK)
        return rc;
    t = threshold32(p);
    if (t == 0)
        return MESS_OK;
    for (w = 0; w < (bits + 63) / 64; w++)
        code[w] ^= bernoulli64(r, (uint32_t)t) & lanes(bits - w * 64);
    return MESS_OK;
}

int lshrr_flip_geometric(struct mess_rng *r, uint64_t *code, uint32_t bits,
                         double p)
{
    double lq;
    uint64_t pos = 0;
    int rc = check_args(r, code, bits, p);
    if (rc != MESS_OK || p == 0.0)
        return rc;
    if (p == 0.5)
        return lshrr_flip(r, code, bits, p); /* one word per 64 bits */
    lq = log1p(-p);
    for (;;) {
        /* positions skipped before the next flip: Geometric(p) by inversion */
        double u = 1.0 - mess_rng_uniform(r); /* (0, 1] */
        double skip = floor(log(u) / lq);
        if (skip >= (double)(bits - pos))
            return MESS_OK;
        pos += (uint64_t)skip;
        code[pos / 64] ^= (uint64_t)1 << (pos % 64);
        pos++;
        if (pos >= bits)
            return MESS_OK;
    }
}

double lshrr_effective_p(double a, double b)
{
    return a * (1.0 - b) + b * (1.0 - a);
}

/* ------------------------------------------------------------------------
 * The permanent report as a PRF of the logical query
 * ---------------------------------------------------------------------- */

int lshrr_query_report(const uint8_t key[32], struct mess_rng *r,
                       const float *query, size_t dim, uint32_t shards,
                       uint32_t kappa, const uint64_t *clean, double p_prr,
                       double p_irr, uint64_t *out)
{
    crypto_generichash_state st;
    struct mess_rng prr;
    uint8_t digest[DIGEST_BYTES], dimb[8];
    uint32_t j, words = kappa / 64;
    size_t i;
    int rc = MESS_OK;

    if (!key || !r || !query || !clean || !out || dim == 0 || shards == 0 ||
        kappa == 0 || kappa % 64 != 0 ||
        !(p_prr >= 0.0 && p_prr <= 0.5) || !(p_irr >= 0.0 && p_irr <= 0.5))
        return MESS_EINVAL;
    mess_store_u64(dimb, dim);
    crypto_generichash_init(&st, key, 32, DIGEST_BYTES);
    crypto_generichash_update(&st, dimb, sizeof dimb);
    for (i = 0; i < dim; i++) {
        uint8_t b[4];
        uint32_t u;
        float f = query[i] == 0.0f ? 0.0f : query[i]; /* -0 and +0 alike */
        memcpy(&u, &f, 4);
        mess_store_u32(b, u);
        crypto_generichash_update(&st, b, 4);
    }
    crypto_generichash_final(&st, digest, sizeof digest);
    rc = mess_rng_init(&prr, digest, 0);
    sodium_memzero(digest, sizeof digest);
    sodium_memzero(&st, sizeof st);
    if (rc != MESS_OK)
        return rc;
    memcpy(out, clean, (size_t)shards * words * 8);
    for (j = 0; j < shards && rc == MESS_OK; j++)
        rc = lshrr_flip(&prr, out + (size_t)j * words, kappa, p_prr);
    mess_rng_wipe(&prr);
    for (j = 0; j < shards && rc == MESS_OK; j++)
        rc = lshrr_flip(r, out + (size_t)j * words, kappa, p_irr);
    if (rc != MESS_OK)
        sodium_memzero(out, (size_t)shards * words * 8);
    return rc;
}
