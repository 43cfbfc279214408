/*
 * poly1305_lanes.c - Poly1305 of many messages in SIMD lanes
 * (poly1305_lanes.h).
 *
 * Each lane holds one message's accumulator h and key r as five 26-bit
 * limbs in 64-bit lanes (the representation of poly1305-donna's 32-bit
 * code, the reference most implementations follow).  A 16-byte block m
 * adds its limbs (and 2^128) to h, then h = h r mod 2^130 - 5: 25
 * 32 x 32 -> 64-bit products (vpmuludq, one instruction for all lanes;
 * r_i * 5 precomputed folds the limbs above 2^130 back) and one carry
 * pass.  Bounds: h_i < 2^27 after the add, r_i < 2^26, 5 r_i < 2^29, so a
 * product is < 2^56 and a column of five < 2^59.  Two registers of lanes
 * are interleaved so one's carry chain overlaps the other's products.
 * Lanes past the last message of a group hash a copy of lane 0's message,
 * whose result is dropped.  The final carry, the conditional subtraction
 * of p (by masks, no branch) and the addition of s mod 2^128 run per lane
 * in scalar code.
 */
#include <sodium.h>

#include "internal.h"
#include "poly1305_lanes.h"
#include "simd.h"

#ifdef MESS_SIMD_DISPATCH
#include <immintrin.h>
#define POLY_DISPATCH 1
#endif

#define POLY_MAX_GROUP 16 /* lanes per group: 2 registers of 8 (AVX-512) */
#define MASK26 0x3ffffffu

/* ---- per lane, scalar: key limbs and the final reduction ---------------- */

#ifdef POLY_DISPATCH

/* r (key bytes 0..15, clamped) as five 26-bit limbs into lane l. */
static void key_limbs(const uint8_t *key, uint64_t r[5][POLY_MAX_GROUP], size_t l)
{
    uint32_t t0 = mess_load_u32(key), t1 = mess_load_u32(key + 4);
    uint32_t t2 = mess_load_u32(key + 8), t3 = mess_load_u32(key + 12);
    r[0][l] = t0 & 0x3ffffffu;
    r[1][l] = ((t0 >> 26) | (t1 << 6)) & 0x3ffff03u;
    r[2][l] = ((t1 >> 20) | (t2 << 12)) & 0x3ffc0ffu;
    r[3][l] = ((t2 >> 14) | (t3 << 18)) & 0x3f03fffu;
    r[4][l] = (t3 >> 8) & 0x00fffffu;
}

/* The tag of lane l's accumulator: full carry, h mod p (h - p chosen by a
 * mask when h >= p), plus s = key bytes 16..31, mod 2^128. */
static void finish_lane(const uint64_t hv[5][POLY_MAX_GROUP], size_t l,
                        const uint8_t *key, uint8_t tag[16])
{
    uint32_t h0 = (uint32_t)hv[0][l], h1 = (uint32_t)hv[1][l], h2 = (uint32_t)hv[2][l];
    uint32_t h3 = (uint32_t)hv[3][l], h4 = (uint32_t)hv[4][l];
    uint32_t g0, g1, g2, g3, g4, c, mask;
    uint64_t f;
    c = h1 >> 26, h1 &= MASK26;
    h2 += c, c = h2 >> 26, h2 &= MASK26;
    h3 += c, c = h3 >> 26, h3 &= MASK26;
    h4 += c, c = h4 >> 26, h4 &= MASK26;
    h0 += c * 5, c = h0 >> 26, h0 &= MASK26;
    h1 += c;
    /* g = h + 5 - 2^130: non-negative (top bit clear) exactly when h >= p */
    g0 = h0 + 5, c = g0 >> 26, g0 &= MASK26;
    g1 = h1 + c, c = g1 >> 26, g1 &= MASK26;
    g2 = h2 + c, c = g2 >> 26, g2 &= MASK26;
    g3 = h3 + c, c = g3 >> 26, g3 &= MASK26;
    g4 = h4 + c - (1u << 26);
    mask = (g4 >> 31) - 1u; /* all ones when h >= p */
    h0 = (h0 & ~mask) | (g0 & mask);
    h1 = (h1 & ~mask) | (g1 & mask);
    h2 = (h2 & ~mask) | (g2 & mask);
    h3 = (h3 & ~mask) | (g3 & mask);
    h4 = (h4 & ~mask) | (g4 & mask);
    /* h mod 2^128 as four 32-bit words, plus s */
    h0 = h0 | (h1 << 26);
    h1 = (h1 >> 6) | (h2 << 20);
    h2 = (h2 >> 12) | (h3 << 14);
    h3 = (h3 >> 18) | (h4 << 8);
    f = (uint64_t)h0 + mess_load_u32(key + 16);
    mess_store_u32(tag, (uint32_t)f);
    f = (uint64_t)h1 + mess_load_u32(key + 20) + (f >> 32);
    mess_store_u32(tag + 4, (uint32_t)f);
    f = (uint64_t)h2 + mess_load_u32(key + 24) + (f >> 32);
    mess_store_u32(tag + 8, (uint32_t)f);
    f = (uint64_t)h3 + mess_load_u32(key + 28) + (f >> 32);
    mess_store_u32(tag + 12, (uint32_t)f);
}

/* ---- the lane cores ------------------------------------------------------ */

/* One block into the accumulator of register X (h##X##0..4) under
 * r##X / s##X: the block's 128 bits arrive as lo, hi (64 bits each). */
#define POLY_STEP(X, lo, hi, hib)                                              \
    do {                                                                       \
        V d0, d1, d2, d3, d4, c;                                               \
        h##X##0 = ADD(h##X##0, AND(lo, M26));                                  \
        h##X##1 = ADD(h##X##1, AND(SRL(lo, 26), M26));                         \
        h##X##2 = ADD(h##X##2, AND(OR(SRL(lo, 52), SLL(hi, 12)), M26));        \
        h##X##3 = ADD(h##X##3, AND(SRL(hi, 14), M26));                         \
        h##X##4 = ADD(h##X##4, OR(SRL(hi, 40), hib));                          \
        d0 = ADD(ADD(MUL(h##X##0, r##X##0), MUL(h##X##1, s##X##4)),            \
                 ADD(ADD(MUL(h##X##2, s##X##3), MUL(h##X##3, s##X##2)),        \
                     MUL(h##X##4, s##X##1)));                                  \
        d1 = ADD(ADD(MUL(h##X##0, r##X##1), MUL(h##X##1, r##X##0)),            \
                 ADD(ADD(MUL(h##X##2, s##X##4), MUL(h##X##3, s##X##3)),        \
                     MUL(h##X##4, s##X##2)));                                  \
        d2 = ADD(ADD(MUL(h##X##0, r##X##2), MUL(h##X##1, r##X##1)),            \
                 ADD(ADD(MUL(h##X##2, r##X##0), MUL(h##X##3, s##X##4)),        \
                     MUL(h##X##4, s##X##3)));                                  \
        d3 = ADD(ADD(MUL(h##X##0, r##X##3), MUL(h##X##1, r##X##2)),            \
                 ADD(ADD(MUL(h##X##2, r##X##1), MUL(h##X##3, r##X##0)),        \
                     MUL(h##X##4, s##X##4)));                                  \
        d4 = ADD(ADD(MUL(h##X##0, r##X##4), MUL(h##X##1, r##X##3)),            \
                 ADD(ADD(MUL(h##X##2, r##X##2), MUL(h##X##3, r##X##1)),        \
                     MUL(h##X##4, r##X##0)));                                  \
        c = SRL(d0, 26), h##X##0 = AND(d0, M26);                               \
        d1 = ADD(d1, c), c = SRL(d1, 26), h##X##1 = AND(d1, M26);              \
        d2 = ADD(d2, c), c = SRL(d2, 26), h##X##2 = AND(d2, M26);              \
        d3 = ADD(d3, c), c = SRL(d3, 26), h##X##3 = AND(d3, M26);              \
        d4 = ADD(d4, c), c = SRL(d4, 26), h##X##4 = AND(d4, M26);              \
        h##X##0 = ADD(h##X##0, ADD(c, SLL(c, 2)));                             \
        c = SRL(h##X##0, 26), h##X##0 = AND(h##X##0, M26);                     \
        h##X##1 = ADD(h##X##1, c);                                             \
    } while (0)

/* The body of a core: nh blocks of head, nm blocks of msg, then the padded
 * tail blocks (tail != NULL), for 2 L lanes; h out per lane.  LOADB(p, off,
 * lo, hi) loads block `off` of lanes p[0..L) as two registers. */
#define POLY_CORE_BODY(L)                                                      \
    {                                                                          \
        const V M26 = SET1(MASK26), HIBIT = SET1(1u << 24), ZERO = SET1(0);   \
        V rA0 = LOAD(r[0]), rA1 = LOAD(r[1]), rA2 = LOAD(r[2]);                \
        V rA3 = LOAD(r[3]), rA4 = LOAD(r[4]);                                  \
        V rB0 = LOAD(r[0] + (L)), rB1 = LOAD(r[1] + (L)), rB2 = LOAD(r[2] + (L)); \
        V rB3 = LOAD(r[3] + (L)), rB4 = LOAD(r[4] + (L));                      \
        V sA1 = ADD(rA1, SLL(rA1, 2)), sA2 = ADD(rA2, SLL(rA2, 2));            \
        V sA3 = ADD(rA3, SLL(rA3, 2)), sA4 = ADD(rA4, SLL(rA4, 2));            \
        V sB1 = ADD(rB1, SLL(rB1, 2)), sB2 = ADD(rB2, SLL(rB2, 2));            \
        V sB3 = ADD(rB3, SLL(rB3, 2)), sB4 = ADD(rB4, SLL(rB4, 2));            \
        V hA0 = ZERO, hA1 = ZERO, hA2 = ZERO, hA3 = ZERO, hA4 = ZERO;          \
        V hB0 = ZERO, hB1 = ZERO, hB2 = ZERO, hB3 = ZERO, hB4 = ZERO;          \
        V loA, hiA, loB, hiB;                                                  \
        size_t b;                                                              \
        for (b = 0; b < nh; b++) {                                             \
            LOADB(head, 16 * b, loA, hiA);                                     \
            LOADB(head + (L), 16 * b, loB, hiB);                               \
            POLY_STEP(A, loA, hiA, HIBIT);                                     \
            POLY_STEP(B, loB, hiB, HIBIT);                                     \
        }                                                                      \
        for (b = 0; b < nm; b++) {                                             \
            LOADB(msg, 16 * b, loA, hiA);                                      \
            LOADB(msg + (L), 16 * b, loB, hiB);                                \
            POLY_STEP(A, loA, hiA, HIBIT);                                     \
            POLY_STEP(B, loB, hiB, HIBIT);                                     \
        }                                                                      \
        if (tail) {                                                            \
            LOADB(tail, 0, loA, hiA);                                          \
            LOADB(tail + (L), 0, loB, hiB);                                    \
            POLY_STEP(A, loA, hiA, ZERO);                                      \
            POLY_STEP(B, loB, hiB, ZERO);                                      \
        }                                                                      \
        STORE(h[0], hA0), STORE(h[1], hA1), STORE(h[2], hA2);                  \
        STORE(h[3], hA3), STORE(h[4], hA4);                                    \
        STORE(h[0] + (L), hB0), STORE(h[1] + (L), hB1);                        \
        STORE(h[2] + (L), hB2), STORE(h[3] + (L), hB3);                        \
        STORE(h[4] + (L), hB4);                                                \
    }

/* AVX-512F: 8 lanes per register.  Blocks of lanes 0, 2, 4, 6 in the four
 * 128-bit quarters of one register and 1, 3, 5, 7 in another: the
 * 64-bit unpacks give the low and the high halves in lane order. */
#define V __m512i
#define ADD _mm512_add_epi64
#define MUL _mm512_mul_epu32
#define AND _mm512_and_si512
#define OR _mm512_or_si512
#define SRL _mm512_srli_epi64
#define SLL _mm512_slli_epi64
#define SET1(x) _mm512_set1_epi64((long long)(x))
#define LOAD(p) _mm512_loadu_si512((const void *)(p))
#define STORE(p, v) _mm512_storeu_si512((void *)(p), v)
#define LD(p, off) _mm_loadu_si128((const __m128i *)(const void *)((p) + (off)))
#define LOADB(p, off, lo, hi)                                                  \
    do {                                                                       \
        __m512i a_ = _mm512_castsi128_si512(LD((p)[0], off));                  \
        __m512i b_ = _mm512_castsi128_si512(LD((p)[1], off));                  \
        a_ = _mm512_inserti32x4(a_, LD((p)[2], off), 1);                       \
        b_ = _mm512_inserti32x4(b_, LD((p)[3], off), 1);                       \
        a_ = _mm512_inserti32x4(a_, LD((p)[4], off), 2);                       \
        b_ = _mm512_inserti32x4(b_, LD((p)[5], off), 2);                       \
        a_ = _mm512_inserti32x4(a_, LD((p)[6], off), 3);                       \
        b_ = _mm512_inserti32x4(b_, LD((p)[7], off), 3);                       \
        lo = _mm512_unpacklo_epi64(a_, b_);                                    \
        hi = _mm512_unpackhi_epi64(a_, b_);                                    \
    } while (0)

__attribute__((target("avx512f"))) static void
core_avx512(size_t nh, const uint8_t *const *head, size_t nm, const uint8_t *const *msg,
            const uint8_t *const *tail, const uint64_t r[5][POLY_MAX_GROUP],
            uint64_t h[5][POLY_MAX_GROUP])
    POLY_CORE_BODY(8)

#undef V
#undef ADD
#undef MUL
#undef AND
#undef OR
#undef SRL
#undef SLL
#undef SET1
#undef LOAD
#undef STORE
#undef LOADB

/* AVX2: 4 lanes per register, blocks of lanes 0, 2 in one register and
 * 1, 3 in another. */
#define V __m256i
#define ADD _mm256_add_epi64
#define MUL _mm256_mul_epu32
#define AND _mm256_and_si256
#define OR _mm256_or_si256
#define SRL _mm256_srli_epi64
#define SLL _mm256_slli_epi64
#define SET1(x) _mm256_set1_epi64x((long long)(x))
#define LOAD(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define STORE(p, v) _mm256_storeu_si256((__m256i *)(void *)(p), v)
#define LOADB(p, off, lo, hi)                                                  \
    do {                                                                       \
        __m256i a_ = _mm256_castsi128_si256(LD((p)[0], off));                  \
        __m256i b_ = _mm256_castsi128_si256(LD((p)[1], off));                  \
        a_ = _mm256_inserti128_si256(a_, LD((p)[2], off), 1);                  \
        b_ = _mm256_inserti128_si256(b_, LD((p)[3], off), 1);                  \
        lo = _mm256_unpacklo_epi64(a_, b_);                                    \
        hi = _mm256_unpackhi_epi64(a_, b_);                                    \
    } while (0)

__attribute__((target("avx2"))) static void
core_avx2(size_t nh, const uint8_t *const *head, size_t nm, const uint8_t *const *msg,
          const uint8_t *const *tail, const uint64_t r[5][POLY_MAX_GROUP],
          uint64_t h[5][POLY_MAX_GROUP])
    POLY_CORE_BODY(4)

#undef V
#undef ADD
#undef MUL
#undef AND
#undef OR
#undef SRL
#undef SLL
#undef SET1
#undef LOAD
#undef STORE
#undef LOADB
#undef LD
#endif /* POLY_DISPATCH */

/* ---- dispatch -------------------------------------------------------------- */

/* The choice: SIMD_POLY1305 in simd.h. */
int poly1305_lanes_isa(void)
{
    return simd_level(SIMD_POLY1305);
}

int poly1305_lanes_force(int isa)
{
    return simd_force(SIMD_POLY1305, isa);
}

static void one_sodium(const uint8_t *key, const uint8_t *head, size_t head_len,
                       const uint8_t *msg, size_t len, uint8_t tag[16])
{
    crypto_onetimeauth_state st;
    crypto_onetimeauth_init(&st, key);
    if (head_len)
        crypto_onetimeauth_update(&st, head, head_len);
    crypto_onetimeauth_update(&st, msg, len);
    crypto_onetimeauth_final(&st, tag);
    sodium_memzero(&st, sizeof st);
}

void poly1305_many(size_t n, const uint8_t *const *key, const uint8_t *const *head,
                   size_t head_len, const uint8_t *const *msg, size_t len,
                   uint8_t (*tag)[16])
{
    int isa = poly1305_lanes_isa();
    size_t i;
#ifdef POLY_DISPATCH
    if (isa > 0 && head_len % 16 == 0) {
        size_t group = isa == 2 ? 16 : 8, tl = len % 16, m, l;
        uint64_t r[5][POLY_MAX_GROUP], h[5][POLY_MAX_GROUP];
        uint8_t tbuf[POLY_MAX_GROUP][16];
        const uint8_t *hp[POLY_MAX_GROUP], *mp[POLY_MAX_GROUP], *tp[POLY_MAX_GROUP];
        for (i = 0; i < n; i += m) {
            m = n - i < group ? n - i : group;
            for (l = 0; l < group; l++) {
                size_t src = i + (l < m ? l : 0);
                key_limbs(key[src], r, l);
                hp[l] = head_len ? head[src] : NULL;
                mp[l] = msg[src];
                if (tl) { /* the last, short block: bytes, 1, zeros */
                    memset(tbuf[l], 0, 16);
                    memcpy(tbuf[l], msg[src] + (len - tl), tl);
                    tbuf[l][tl] = 1;
                    tp[l] = tbuf[l];
                }
            }
            if (isa == 2)
                core_avx512(head_len / 16, hp, len / 16, mp, tl ? tp : NULL,
                            (const uint64_t(*)[POLY_MAX_GROUP])r, h);
            else
                core_avx2(head_len / 16, hp, len / 16, mp, tl ? tp : NULL,
                          (const uint64_t(*)[POLY_MAX_GROUP])r, h);
            for (l = 0; l < m; l++)
                finish_lane((const uint64_t(*)[POLY_MAX_GROUP])h, l, key[i + l], tag[i + l]);
        }
        sodium_memzero(r, sizeof r);
        sodium_memzero(h, sizeof h);
        sodium_memzero(tbuf, sizeof tbuf);
        return;
    }
#endif
    (void)isa;
    for (i = 0; i < n; i++)
        one_sodium(key[i], head_len ? head[i] : NULL, head_len, msg[i], len, tag[i]);
}
