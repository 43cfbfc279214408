/*
 * payload.c - vector encodings and the AEAD around each stored payload.
 */
#include <math.h>
#include <sodium.h>

#include "payload.h"

static const uint8_t payload_domain[8] = {'M', 'E', 'S', 'S', 'p', 'a', 'y', '1'};

size_t payload_plain_bytes(const mess_params *p)
{
    return 8 + params_vector_bytes(p);
}

size_t payload_entry_bytes(const mess_params *p)
{
    return PAYLOAD_NONCE_BYTES + payload_plain_bytes(p) + PAYLOAD_TAG_BYTES;
}

size_t mess_payload_size(const mess_params *p)
{
    return p && mess_params_check(p) == MESS_OK ? payload_entry_bytes(p) : 0;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t payload_f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xffu;
    uint32_t man = x & 0x7fffffu;
    int32_t e;

    if (exp == 0xffu) /* inf or NaN (NaN keeps a quiet mantissa bit) */
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
    e = (int32_t)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u); /* overflow to infinity */
    if (e <= 0) {
        /* subnormal half (or zero): shift the implicit-one mantissa */
        uint32_t m, shift, half, rem, r;
        if (e < -10)
            return (uint16_t)sign;
        m = man | 0x800000u;
        shift = (uint32_t)(14 - e);
        r = m >> shift;
        rem = m & ((1u << shift) - 1);
        half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1u)))
            r++;
        return (uint16_t)(sign | r);
    }
    {
        uint32_t r = ((uint32_t)e << 10) | (man >> 13);
        uint32_t rem = man & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (r & 1u)))
            r++; /* may carry into the exponent, up to infinity: correct */
        return (uint16_t)(sign | r);
    }
}

float payload_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;

    if (exp == 0) {
        if (man == 0)
            return bits_f32(sign);
        /* subnormal: value = man * 2^-24 */
        return sign ? -(float)man * 5.9604644775390625e-8f
                    : (float)man * 5.9604644775390625e-8f;
    }
    if (exp == 31)
        return bits_f32(sign | 0x7f800000u | (man << 13));
    return bits_f32(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

/* 8-bit encoding: per-vector offset lo and step (hi - lo) / 255, codes
 * 0..255.  Non-negative data such as SIFT keeps all 8 bits of precision. */
static void encode_i8(const float *x, uint32_t dim, uint8_t *out)
{
    float lo = x[0], hi = x[0], step;
    uint32_t i;
    for (i = 1; i < dim; i++) {
        if (x[i] < lo)
            lo = x[i];
        if (x[i] > hi)
            hi = x[i];
    }
    step = (hi - lo) / 255.0f;
    if (!(step > 0.0f) || !isfinite(step))
        step = 0.0f;
    mess_store_u32(out, f32_bits(lo));
    mess_store_u32(out + 4, f32_bits(step));
    for (i = 0; i < dim; i++) {
        float q = step > 0.0f ? (x[i] - lo) / step + 0.5f : 0.0f;
        out[8 + i] = q >= 255.0f ? 255 : q <= 0.0f ? 0 : (uint8_t)q;
    }
}

void payload_encode_vector(const mess_params *p, const float *x, uint8_t *out)
{
    uint32_t i;
    switch (p->payload) {
    case MESS_PAYLOAD_F16:
        for (i = 0; i < p->dim; i++) {
            uint16_t h = payload_f32_to_f16(x[i]);
            out[2 * i] = (uint8_t)h;
            out[2 * i + 1] = (uint8_t)(h >> 8);
        }
        break;
    case MESS_PAYLOAD_I8:
        encode_i8(x, p->dim, out);
        break;
    default:
        for (i = 0; i < p->dim; i++)
            mess_store_u32(out + 4 * i, f32_bits(x[i]));
        break;
    }
}

void payload_decode_vector(const mess_params *p, const uint8_t *in, float *x)
{
    uint32_t i;
    switch (p->payload) {
    case MESS_PAYLOAD_F16:
        for (i = 0; i < p->dim; i++)
            x[i] = payload_f16_to_f32((uint16_t)(in[2 * i] | in[2 * i + 1] << 8));
        break;
    case MESS_PAYLOAD_I8: {
        float lo = bits_f32(mess_load_u32(in));
        float step = bits_f32(mess_load_u32(in + 4));
        for (i = 0; i < p->dim; i++)
            x[i] = lo + step * (float)in[8 + i];
        break;
    }
    default:
        for (i = 0; i < p->dim; i++)
            x[i] = bits_f32(mess_load_u32(in + 4 * i));
        break;
    }
}

static void make_ad(uint32_t shard, uint8_t ad[12])
{
    memcpy(ad, payload_domain, 8);
    mess_store_u32(ad + 8, shard);
}

void payload_seal(const mess_params *p, const uint8_t key[32],
                  const uint8_t nonce_key[32], uint32_t shard, uint64_t id,
                  const float *x, const uint8_t fresh[PAYLOAD_FRESH_BYTES],
                  uint8_t *plain, uint8_t *entry)
{
    size_t plen = payload_plain_bytes(p);
    unsigned long long clen;
    crypto_generichash_state st;
    uint8_t ad[12];

    mess_store_u64(plain, id);
    payload_encode_vector(p, x, plain + 8);
    make_ad(shard, ad);
    crypto_generichash_init(&st, nonce_key, 32, PAYLOAD_NONCE_BYTES);
    crypto_generichash_update(&st, fresh, PAYLOAD_FRESH_BYTES);
    crypto_generichash_update(&st, ad, sizeof ad);
    crypto_generichash_update(&st, plain, plen);
    crypto_generichash_final(&st, entry, PAYLOAD_NONCE_BYTES);
    crypto_aead_chacha20poly1305_ietf_encrypt(
        entry + PAYLOAD_NONCE_BYTES, &clen, plain, plen, ad, sizeof ad, NULL,
        entry, key);
}

int payload_open(const mess_params *p, const uint8_t key[32], uint32_t shard,
                 const uint8_t *entry, uint8_t *plain, uint64_t *id, float *x)
{
    size_t plen = payload_plain_bytes(p);
    unsigned long long mlen;
    uint8_t ad[12];

    make_ad(shard, ad);
    if (crypto_aead_chacha20poly1305_ietf_decrypt(
            plain, &mlen, NULL, entry + PAYLOAD_NONCE_BYTES,
            plen + PAYLOAD_TAG_BYTES, ad, sizeof ad, entry, key) != 0 ||
        mlen != plen)
        return MESS_EAUTH;
    *id = mess_load_u64(plain);
    payload_decode_vector(p, plain + 8, x);
    return MESS_OK;
}
