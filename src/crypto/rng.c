/*
 * rng.c - ChaCha20 keystream coins, keyed by the OS CSPRNG or a secret seed.
 */
#include <math.h>
#include <sodium.h>

#include "internal.h"
#include "rng.h"

#define FIRST_FILL 128

static void refill(struct mess_rng *r)
{
    size_t n = r->fill == 0 ? FIRST_FILL : 2 * r->fill;
    if (n > sizeof r->buf)
        n = sizeof r->buf;
    memset(r->buf, 0, n);
    crypto_stream_chacha20_xor_ic(r->buf, r->buf, n, r->nonce, r->counter,
                                  r->key);
    r->counter += n / 64;
    r->fill = n;
    r->pos = 0;
}

int mess_rng_init(struct mess_rng *r, const uint8_t *seed, uint64_t stream_id)
{
    if (sodium_init() < 0)
        return MESS_ECRYPTO;
    if (seed) {
        memcpy(r->key, seed, 32);
        mess_store_u64(r->nonce, stream_id);
    } else {
        randombytes_buf(r->key, 32);
        randombytes_buf(r->nonce, 8);
    }
    r->counter = 0;
    r->pos = 0;
    r->fill = 0;
    return MESS_OK;
}

void mess_rng_bytes(struct mess_rng *r, void *out, size_t n)
{
    uint8_t *o = (uint8_t *)out;
    while (n > 0) {
        size_t k;
        if (r->pos == r->fill)
            refill(r);
        k = r->fill - r->pos;
        if (k > n)
            k = n;
        memcpy(o, r->buf + r->pos, k);
        r->pos += k;
        o += k;
        n -= k;
    }
}

uint32_t mess_rng_u32(struct mess_rng *r)
{
    uint8_t b[4];
    mess_rng_bytes(r, b, 4);
    return mess_load_u32(b);
}

uint64_t mess_rng_u64(struct mess_rng *r)
{
    uint8_t b[8];
    mess_rng_bytes(r, b, 8);
    return mess_load_u64(b);
}

uint32_t mess_rng_below(struct mess_rng *r, uint32_t n)
{
    uint32_t limit = UINT32_MAX - UINT32_MAX % n, x;
    do
        x = mess_rng_u32(r);
    while (x >= limit);
    return x % n;
}

double mess_rng_uniform(struct mess_rng *r)
{
    return (double)(mess_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

double mess_rng_gaussian(struct mess_rng *r)
{
    double u = 1.0 - mess_rng_uniform(r); /* (0, 1] */
    double v = mess_rng_uniform(r);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586476925 * v);
}

void mess_rng_wipe(struct mess_rng *r)
{
    sodium_memzero(r, sizeof *r);
}
