/*
 * payload.c - vector encodings and the AEAD around each stored payload.
 */
#include <math.h>
#include <sodium.h>

#include "chacha_lanes.h"
#include "payload.h"
#include "poly1305_lanes.h"
#include "simd.h"

static const uint8_t payload_domain[8] = {'M', 'E', 'S', 'S', 'p', 'a', 'y', '4'};

size_t payload_plain_bytes(const mess_params *p)
{
    return 8 + params_vector_bytes(p);
}

size_t payload_entry_bytes(const mess_params *p)
{
    return PAYLOAD_SIV_BYTES + payload_plain_bytes(p);
}

size_t mess_payload_size(const mess_params *in)
{
    mess_params p;
    if (params_import(in, &p) != MESS_OK || mess_params_check(&p) != MESS_OK)
        return 0;
    return payload_entry_bytes(&p);
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
    if (exp == 31) /* infinity, or a NaN made quiet as VCVTPH2PS does */
        return bits_f32(sign | 0x7f800000u | (man ? 0x400000u : 0) | (man << 13));
    return bits_f32(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

/* Half to float, eight components per instruction (VCVTPH2PS): exact, as
 * the scalar conversion above, and the same bits for every half value
 * (tests/test_payload.c compares all 65,536).  The scalar code spent
 * 1.5-1.8x f32's client time on f16 responses (issue 31). */
#ifdef MESS_SIMD_DISPATCH
#include <immintrin.h>

__attribute__((target("f16c"))) static void f16_decode_f16c(const uint8_t *in,
                                                             uint32_t dim, float *x)
{
    uint32_t i = 0;
    for (; i + 8 <= dim; i += 8)
        _mm256_storeu_ps(x + i, _mm256_cvtph_ps(_mm_loadu_si128(
                                    (const __m128i *)(const void *)(in + 2 * (size_t)i))));
    for (; i < dim; i++)
        x[i] = _cvtsh_ss((unsigned short)(in[2 * i] | in[2 * i + 1] << 8));
}
#endif

/* Bytes to floats (u8 payloads), exact.  The scalar loop is not
 * vectorised at -O2 and cost 2.4x f32's copy in the rerank (issue 31);
 * SSE2, which every x86-64 CPU has, widens 16 bytes per step with no
 * dispatch. */
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

void payload_u8_decode(const uint8_t *in, uint32_t dim, float *x)
{
    uint32_t i = 0;
#if defined(__SSE2__)
    const __m128i z = _mm_setzero_si128();
    for (; i + 16 <= dim; i += 16) {
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(in + i));
        __m128i lo = _mm_unpacklo_epi8(b, z), hi = _mm_unpackhi_epi8(b, z);
        _mm_storeu_ps(x + i, _mm_cvtepi32_ps(_mm_unpacklo_epi16(lo, z)));
        _mm_storeu_ps(x + i + 4, _mm_cvtepi32_ps(_mm_unpackhi_epi16(lo, z)));
        _mm_storeu_ps(x + i + 8, _mm_cvtepi32_ps(_mm_unpacklo_epi16(hi, z)));
        _mm_storeu_ps(x + i + 12, _mm_cvtepi32_ps(_mm_unpackhi_epi16(hi, z)));
    }
#endif
    for (; i < dim; i++)
        x[i] = (float)in[i];
}

void payload_f16_decode(const uint8_t *in, uint32_t dim, float *x)
{
    uint32_t i;
#ifdef MESS_SIMD_DISPATCH
    if (simd_level(SIMD_F16)) {
        f16_decode_f16c(in, dim, x);
        return;
    }
#endif
    for (i = 0; i < dim; i++)
        x[i] = payload_f16_to_f32((uint16_t)(in[2 * i] | in[2 * i + 1] << 8));
}

/* 8-bit encoding: per-vector offset lo and step, codes 0..255.  The step
 * is (hi - lo) / 255, except for an integer-valued vector whose range fits
 * in 255 (SIFT descriptors, quantized embeddings): there step 1 makes the
 * code exact.  Otherwise the error is at most half a step per component. */
static void encode_i8(const float *x, uint32_t dim, uint8_t *out)
{
    float lo = x[0], hi = x[0], step;
    int integral = 1;
    uint32_t i;
    for (i = 0; i < dim; i++) {
        if (x[i] < lo)
            lo = x[i];
        if (x[i] > hi)
            hi = x[i];
        if (integral && !(x[i] == floorf(x[i]) && fabsf(x[i]) < 16777216.0f))
            integral = 0;
    }
    step = (hi - lo) / 255.0f;
    if (integral && hi - lo <= 255.0f)
        step = hi > lo ? 1.0f : 0.0f;
    if (!(step > 0.0f) || !isfinite(step))
        step = 0.0f;
    mess_store_u32(out, f32_bits(lo));
    mess_store_u32(out + 4, f32_bits(step));
    for (i = 0; i < dim; i++) {
        float q = step > 0.0f ? (x[i] - lo) / step + 0.5f : 0.0f;
        out[8 + i] = q >= 255.0f ? 255 : q <= 0.0f ? 0 : (uint8_t)q;
    }
}

/* MESS_PAYLOAD_U8 holds a component as its own byte: it must be an
 * integer in [0, 255] (also false for NaN). */
static int byte_value(float v)
{
    return v >= 0.0f && v <= 255.0f && v == floorf(v);
}

size_t payload_unencodable(const mess_params *p, const float *x)
{
    uint32_t i;
    if (p->payload != MESS_PAYLOAD_U8)
        return p->dim;
    for (i = 0; i < p->dim; i++)
        if (!byte_value(x[i]))
            return i;
    return p->dim;
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
    case MESS_PAYLOAD_U8:
        /* exact: the upload refused every vector payload_unencodable
         * names; the clamp only keeps a cast defined */
        for (i = 0; i < p->dim; i++)
            out[i] = x[i] >= 255.0f ? 255 : x[i] > 0.0f ? (uint8_t)x[i] : 0;
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
        payload_f16_decode(in, p->dim, x);
        break;
    case MESS_PAYLOAD_I8: {
        float lo = bits_f32(mess_load_u32(in));
        float step = bits_f32(mess_load_u32(in + 4));
        for (i = 0; i < p->dim; i++)
            x[i] = lo + step * (float)in[8 + i];
        break;
    }
    case MESS_PAYLOAD_U8:
        payload_u8_decode(in, p->dim, x);
        break;
    default:
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && defined(__FLT_MANT_DIG__) && \
    __FLT_MANT_DIG__ == 24
        /* the encoding is the floats' own bytes on a little-endian host
         * with IEEE binary32: one copy (the element loop cost 4x the AVX
         * distance in the rerank, docs/PERFORMANCE.md) */
        memcpy(x, in, (size_t)p->dim * 4);
#else
        for (i = 0; i < p->dim; i++)
            x[i] = bits_f32(mess_load_u32(in + 4 * i));
#endif
        break;
    }
}

static void make_ad(uint64_t ctx, uint8_t ad[PAYLOAD_AD_BYTES])
{
    memcpy(ad, payload_domain, 8);
    mess_store_u64(ad + 8, ctx);
}

/* siv = HChaCha20(k_prf, Poly1305_{k_mac}(AD || plain))[0..16).  Poly1305
 * under a fixed key is an almost-universal hash of the fixed-length input,
 * never exposed: only its image under the PRF HChaCha20 is (hash-then-PRF,
 * as POLYVAL-then-AES in RFC 8452). */
static void compute_siv(const struct payload_keys *k, const uint8_t ad[PAYLOAD_AD_BYTES],
                        const uint8_t *plain, size_t plen,
                        uint8_t siv[PAYLOAD_SIV_BYTES])
{
    crypto_onetimeauth_state st;
    uint8_t h[crypto_onetimeauth_BYTES], out[crypto_core_hchacha20_OUTPUTBYTES];
    crypto_onetimeauth_init(&st, k->mac);
    crypto_onetimeauth_update(&st, ad, PAYLOAD_AD_BYTES);
    crypto_onetimeauth_update(&st, plain, plen);
    crypto_onetimeauth_final(&st, h);
    crypto_core_hchacha20(out, h, k->prf, NULL);
    memcpy(siv, out, PAYLOAD_SIV_BYTES);
    sodium_memzero(h, sizeof h);
    sodium_memzero(&st, sizeof st);
}

/* ChaCha20 keystream at the position named by the SIV: its first 12 bytes
 * are the nonce, 30 bits of the rest the first block counter c (so a
 * payload of up to 2^30 blocks never wraps).  The id is XORed with bytes
 * 0-7 of block c, the vector with blocks c+1, c+2, ... from their first
 * byte; the rest of block c is not used.  The vector so starts on a block
 * boundary: an f32 vector of 128 dims is exactly 8 blocks, which libsodium
 * runs in its 8-way path with no single-block tail, and the id's pad alone
 * is one HChaCha20 (below).  Two entries of L blocks share keystream if
 * their nonces agree and their counters differ by at most L - 1 (not only
 * when all 126 bits agree): at most (2L - 1) 2^-126 per pair (payload.h). */
static uint32_t siv_counter(const uint8_t siv[PAYLOAD_SIV_BYTES])
{
    return mess_load_u32(siv + 12) & 0x3fffffffu;
}

static void vector_xor(const struct payload_keys *k,
                       const uint8_t siv[PAYLOAD_SIV_BYTES], uint8_t *dst,
                       const uint8_t *src, size_t len)
{
    crypto_stream_chacha20_ietf_xor_ic(dst, src, (unsigned long long)len, siv,
                                       siv_counter(siv) + 1, k->enc);
}

/* HChaCha20(key, in) is the ChaCha20 block function on the state
 * (constants, key, in) without the final feed-forward, returning words 0-3
 * and 12-15.  With in = LE32(c) || nonce that state is exactly the IETF
 * ChaCha20 state of block c, so adding the constants back to words 0-1
 * gives keystream bytes 0-7 of block c: the id's pad. */
static uint64_t id_pad(const struct payload_keys *k,
                       const uint8_t siv[PAYLOAD_SIV_BYTES])
{
    uint8_t in[16], out[crypto_core_hchacha20_OUTPUTBYTES];
    uint64_t pad;
    mess_store_u32(in, siv_counter(siv));
    memcpy(in + 4, siv, 12);
    crypto_core_hchacha20(out, in, k->enc, NULL);
    pad = (uint64_t)(uint32_t)(mess_load_u32(out) + 0x61707865u) |
          (uint64_t)(uint32_t)(mess_load_u32(out + 4) + 0x3320646eu) << 32;
    sodium_memzero(out, sizeof out);
    return pad;
}

uint64_t payload_peek_id(const struct payload_keys *k, const uint8_t *entry)
{
    return mess_load_u64(entry + PAYLOAD_SIV_BYTES) ^ id_pad(k, entry);
}

void payload_seal(const mess_params *p, const struct payload_keys *k,
                  uint64_t ctx, uint64_t id, const float *x, uint8_t *plain,
                  uint8_t *entry)
{
    size_t plen = payload_plain_bytes(p);
    uint8_t ad[PAYLOAD_AD_BYTES];
    mess_store_u64(plain, id);
    payload_encode_vector(p, x, plain + 8);
    make_ad(ctx, ad);
    compute_siv(k, ad, plain, plen, entry);
    mess_store_u64(entry + PAYLOAD_SIV_BYTES, id ^ id_pad(k, entry));
    vector_xor(k, entry, entry + PAYLOAD_SIV_BYTES + 8, plain + 8, plen - 8);
}

int payload_open_peeked(const mess_params *p, const struct payload_keys *k,
                        uint64_t ctx, const uint8_t *entry, uint64_t id,
                        uint8_t *plain)
{
    size_t plen = payload_plain_bytes(p);
    uint8_t ad[PAYLOAD_AD_BYTES], siv[PAYLOAD_SIV_BYTES];
    make_ad(ctx, ad);
    mess_store_u64(plain, id);
    vector_xor(k, entry, plain + 8, entry + PAYLOAD_SIV_BYTES + 8, plen - 8);
    compute_siv(k, ad, plain, plen, siv);
    if (crypto_verify_16(siv, entry) != 0) {
        sodium_memzero(plain, plen);
        return MESS_EAUTH;
    }
    return MESS_OK;
}

int payload_open_raw(const mess_params *p, const struct payload_keys *k,
                     uint64_t ctx, const uint8_t *entry, uint8_t *plain)
{
    return payload_open_peeked(p, k, ctx, entry, payload_peek_id(k, entry), plain);
}

int payload_open(const mess_params *p, const struct payload_keys *k,
                 uint64_t ctx, const uint8_t *entry, uint8_t *plain,
                 uint64_t *id, float *x)
{
    int rc = payload_open_raw(p, k, ctx, entry, plain);
    if (rc != MESS_OK)
        return rc;
    *id = mess_load_u64(plain);
    payload_decode_vector(p, plain + 8, x);
    return MESS_OK;
}

/* ---- batched forms ------------------------------------------------------ */

void payload_peek_ids(size_t n, const struct payload_keys *const *k,
                      const uint8_t *const *entry, uint64_t *id)
{
    enum { G = 64 };
    const uint8_t *key[G], *nonce[G];
    uint32_t ctr[G];
    uint64_t pad[G];
    size_t i, m, l;
    for (i = 0; i < n; i += m) {
        m = n - i < G ? n - i : G;
        for (l = 0; l < m; l++) {
            key[l] = k[i + l]->enc;
            nonce[l] = entry[i + l];
            ctr[l] = siv_counter(entry[i + l]);
        }
        chacha_pad8_many(m, key, ctr, nonce, pad);
        for (l = 0; l < m; l++)
            id[i + l] = mess_load_u64(entry[i + l] + PAYLOAD_SIV_BYTES) ^ pad[l];
    }
    sodium_memzero(pad, sizeof pad);
}

/* Vector keystream.  With the AVX-512 lane core (16 lanes, its output
 * transposed in registers: 18 ns per block against libsodium's 26 on its
 * 8-way path, docs/PERFORMANCE.md) every block runs in the lanes.
 * Otherwise whole runs of LONG_RUN bytes (4 blocks) go to libsodium,
 * whose 4- and 8-block SIMD paths are faster per block than the
 * compiler-vectorised lanes; the blocks after them, which libsodium would
 * compute one at a time (all of a 128-d i8 vector's three), run in the
 * lanes with the other entries'. */
#define LONG_RUN 256

void payload_vector_xor_many(const mess_params *p, size_t n,
                             const struct payload_keys *const *k,
                             const uint8_t *const *entry, uint8_t *plain)
{
    size_t plen = payload_plain_bytes(p), i, m, l;
    size_t head = chacha_lanes_isa() == 2 ? 0 : (plen - 8) / LONG_RUN * LONG_RUN;
    struct chacha_job job[PAYLOAD_BATCH];
    for (i = 0; i < n; i += m) {
        m = n - i < PAYLOAD_BATCH ? n - i : PAYLOAD_BATCH;
        for (l = 0; l < m; l++) {
            const uint8_t *e = entry[i + l];
            uint8_t *pl = plain + (i + l) * plen;
            if (head)
                crypto_stream_chacha20_ietf_xor_ic(pl + 8, e + PAYLOAD_SIV_BYTES + 8, head, e,
                                                   siv_counter(e) + 1, k[i + l]->enc);
            job[l].key = k[i + l]->enc;
            job[l].nonce = e;
            job[l].ctr = siv_counter(e) + 1 + (uint32_t)(head / 64);
            job[l].src = e + PAYLOAD_SIV_BYTES + 8 + head;
            job[l].dst = pl + 8 + head;
            job[l].len = plen - 8 - head;
        }
        chacha_xor_many(m, job);
    }
}

/* The entries' keystream (above), then their Poly1305 hashes side by side
 * in the lanes, then their SIVs' HChaCha20 in one pass over the lanes. */
void payload_open_peeked_many(const mess_params *p, size_t n,
                              const struct payload_keys *const *k,
                              const uint64_t *ctx, const uint8_t *const *entry,
                              const uint64_t *id, uint8_t *plain, int *ok)
{
    size_t plen = payload_plain_bytes(p), i;
    const uint8_t *prf[PAYLOAD_BATCH], *mac[PAYLOAD_BATCH], *adp[PAYLOAD_BATCH],
        *msg[PAYLOAD_BATCH];
    uint8_t ad[PAYLOAD_BATCH][PAYLOAD_AD_BYTES], h[PAYLOAD_BATCH][16],
        siv[PAYLOAD_BATCH][32];
    if (n > PAYLOAD_BATCH)
        n = PAYLOAD_BATCH; /* the caller's contract; never more */
    for (i = 0; i < n; i++)
        mess_store_u64(plain + i * plen, id[i]);
    payload_vector_xor_many(p, n, k, entry, plain);
    for (i = 0; i < n; i++) {
        make_ad(ctx[i], ad[i]);
        adp[i] = ad[i];
        msg[i] = plain + i * plen;
        mac[i] = k[i]->mac;
        prf[i] = k[i]->prf;
    }
    poly1305_many(n, mac, adp, PAYLOAD_AD_BYTES, msg, plen, h);
    chacha_hchacha_many(n, prf, (const uint8_t(*)[16])h, siv);
    for (i = 0; i < n; i++) {
        ok[i] = crypto_verify_16(siv[i], entry[i]) == 0;
        if (!ok[i])
            sodium_memzero(plain + i * plen, plen);
    }
    sodium_memzero(h, sizeof h);
    sodium_memzero(siv, sizeof siv);
}
