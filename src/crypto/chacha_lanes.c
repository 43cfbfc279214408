/*
 * chacha_lanes.c - the ChaCha20 block function on CHACHA_LANES independent
 * states at once (chacha_lanes.h).
 *
 * The state of lane l is x[0..16)[l]: rows are the 16 words, columns the
 * lanes, so each step of a quarter round is one loop over the lanes with
 * unit stride, which the compiler vectorises (one SIMD register per row
 * and group of lanes).  The body is written once (ROUNDS_BODY) and
 * compiled into one function per instruction set: baseline (4 lanes per
 * group: SSE2 on x86-64, whatever the target has elsewhere), AVX2 (8) and
 * AVX-512F (16, whose rotate is one instruction).  A run-time check picks
 * one; all compute the same function.
 */
#include <sodium.h>

#include "chacha_lanes.h"
#include "internal.h"
#include "simd.h"

#ifdef MESS_SIMD_DISPATCH
#define CHACHA_DISPATCH 1
#define TARGET_AVX2 __attribute__((target("avx2")))
#define TARGET_AVX512 __attribute__((target("avx512f")))
#include <immintrin.h>
#endif

typedef uint32_t lanes_t[16][CHACHA_LANES];

static const uint32_t sigma[4] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u};

#define ROTL32(v, n) ((uint32_t)((v) << (n)) | ((v) >> (32 - (n))))
#define QR(v, a, b, c, d, l)                                                   \
    do {                                                                       \
        v[a][l] += v[b][l];                                                    \
        v[d][l] = ROTL32(v[d][l] ^ v[a][l], 16);                               \
        v[c][l] += v[d][l];                                                    \
        v[b][l] = ROTL32(v[b][l] ^ v[c][l], 12);                               \
        v[a][l] += v[b][l];                                                    \
        v[d][l] = ROTL32(v[d][l] ^ v[a][l], 8);                                \
        v[c][l] += v[d][l];                                                    \
        v[b][l] = ROTL32(v[b][l] ^ v[c][l], 7);                                \
    } while (0)

/* The 20 rounds (no feed-forward) on every lane of x, W lanes at a time:
 * each group is copied into a local W-lane state so the rows can live in
 * registers across the rounds. */
#define ROUNDS_BODY(W)                                                         \
    {                                                                          \
        uint32_t v[16][W];                                                     \
        size_t g, l, w;                                                        \
        int r;                                                                 \
        for (g = 0; g < CHACHA_LANES; g += (W)) {                              \
            for (w = 0; w < 16; w++)                                           \
                for (l = 0; l < (W); l++)                                      \
                    v[w][l] = x[w][g + l];                                     \
            for (r = 0; r < 10; r++) {                                         \
                for (l = 0; l < (W); l++) {                                    \
                    QR(v, 0, 4, 8, 12, l);                                     \
                    QR(v, 1, 5, 9, 13, l);                                     \
                    QR(v, 2, 6, 10, 14, l);                                    \
                    QR(v, 3, 7, 11, 15, l);                                    \
                    QR(v, 0, 5, 10, 15, l);                                    \
                    QR(v, 1, 6, 11, 12, l);                                    \
                    QR(v, 2, 7, 8, 13, l);                                     \
                    QR(v, 3, 4, 9, 14, l);                                     \
                }                                                              \
            }                                                                  \
            for (w = 0; w < 16; w++)                                           \
                for (l = 0; l < (W); l++)                                      \
                    x[w][g + l] = v[w][l];                                     \
        }                                                                      \
    }

/* One pending keystream block: where its bytes go. */
struct lane_out {
    const uint8_t *src;
    uint8_t *dst;
    size_t len; /* 1..64 */
};

static void rounds_base(lanes_t x) ROUNDS_BODY(4)

#ifdef CHACHA_DISPATCH
TARGET_AVX2 static void rounds_avx2(lanes_t x) ROUNDS_BODY(8)
#endif

#ifdef CHACHA_DISPATCH
/* The AVX-512 core by hand: the 16 rows in 16 registers for all 20
 * rounds (GCC's code for ROUNDS_BODY(16) reloads and spills them), and
 * for keystream the feed-forward and a 16 x 16 word transposition in
 * registers (64 unpacks and 128-bit shuffles for 16 blocks) so each
 * lane's block leaves as one 64-byte register instead of 16 words
 * written one by one. */
#define ZQR(a, b, c, d)                                                        \
    do {                                                                       \
        a = _mm512_add_epi32(a, b), d = _mm512_rol_epi32(_mm512_xor_si512(d, a), 16); \
        c = _mm512_add_epi32(c, d), b = _mm512_rol_epi32(_mm512_xor_si512(b, c), 12); \
        a = _mm512_add_epi32(a, b), d = _mm512_rol_epi32(_mm512_xor_si512(d, a), 8);  \
        c = _mm512_add_epi32(c, d), b = _mm512_rol_epi32(_mm512_xor_si512(b, c), 7);  \
    } while (0)

#define Z20(v)                                                                 \
    do {                                                                       \
        int r_;                                                                \
        for (r_ = 0; r_ < 10; r_++) {                                          \
            ZQR(v[0], v[4], v[8], v[12]);                                      \
            ZQR(v[1], v[5], v[9], v[13]);                                      \
            ZQR(v[2], v[6], v[10], v[14]);                                     \
            ZQR(v[3], v[7], v[11], v[15]);                                     \
            ZQR(v[0], v[5], v[10], v[15]);                                     \
            ZQR(v[1], v[6], v[11], v[12]);                                     \
            ZQR(v[2], v[7], v[8], v[13]);                                      \
            ZQR(v[3], v[4], v[9], v[14]);                                      \
        }                                                                      \
    } while (0)

TARGET_AVX512 static void rounds_avx512(lanes_t x)
{
    __m512i v[16];
    int w;
    _Pragma("GCC unroll 16") for (w = 0; w < 16; w++)
        v[w] = _mm512_loadu_si512((const void *)x[w]);
    Z20(v);
    _Pragma("GCC unroll 16") for (w = 0; w < 16; w++)
        _mm512_storeu_si512((void *)x[w], v[w]);
}

/* Keystream of the 16 lanes of x (all computed; the first m used) XORed
 * into their destinations. */
TARGET_AVX512 static void flush_avx512(lanes_t x, const struct lane_out *o, size_t m)
{
    __m512i v[16], t[16], u[16];
    size_t l, b;
    int w, g, j;
    _Pragma("GCC unroll 16") for (w = 0; w < 16; w++)
        v[w] = _mm512_loadu_si512((const void *)x[w]);
    Z20(v);
    _Pragma("GCC unroll 16") for (w = 0; w < 16; w++)
        v[w] = _mm512_add_epi32(v[w], _mm512_loadu_si512((const void *)x[w]));
    /* rows 2i, 2i+1 interleaved: word pairs of lanes 4k..4k+3 */
    _Pragma("GCC unroll 8") for (w = 0; w < 16; w += 2) {
        t[w] = _mm512_unpacklo_epi32(v[w], v[w + 1]);
        t[w + 1] = _mm512_unpackhi_epi32(v[w], v[w + 1]);
    }
    /* u[4g + j]: in 128-bit chunk k, words 4g..4g+3 of lane 4k + j */
    _Pragma("GCC unroll 4") for (g = 0; g < 4; g++) {
        u[4 * g + 0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
        u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
        u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
        u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
    }
    /* v[4k + j]: lane 4k + j's block (chunks k of u[j], u[4 + j], ...) */
    _Pragma("GCC unroll 4") for (j = 0; j < 4; j++) {
        __m512i a = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88);
        __m512i bb = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xdd);
        __m512i c = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88);
        __m512i d = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xdd);
        v[j] = _mm512_shuffle_i32x4(a, c, 0x88);
        v[8 + j] = _mm512_shuffle_i32x4(a, c, 0xdd);
        v[4 + j] = _mm512_shuffle_i32x4(bb, d, 0x88);
        v[12 + j] = _mm512_shuffle_i32x4(bb, d, 0xdd);
    }
    for (l = 0; l < m; l++) {
        if (o[l].len == 64) {
            _mm512_storeu_si512((void *)o[l].dst,
                                _mm512_xor_si512(v[l], _mm512_loadu_si512((const void *)o[l].src)));
            continue;
        }
        {
            uint8_t ks[64];
            _mm512_storeu_si512((void *)ks, v[l]);
            for (b = 0; b < o[l].len; b++)
                o[l].dst[b] = (uint8_t)(o[l].src[b] ^ ks[b]);
            sodium_memzero(ks, sizeof ks);
        }
    }
}
#endif

/* The choice: SIMD_CHACHA in simd.h. */
int chacha_lanes_isa(void)
{
    return simd_level(SIMD_CHACHA);
}

int chacha_lanes_force(int isa)
{
    return simd_force(SIMD_CHACHA, isa);
}

static void rounds(lanes_t x)
{
#ifdef CHACHA_DISPATCH
    switch (chacha_lanes_isa()) {
    case 2:
        rounds_avx512(x);
        return;
    case 1:
        rounds_avx2(x);
        return;
    default:
        break;
    }
#endif
    rounds_base(x);
}

/* Constants and key of lane l. */
static void set_key(lanes_t x, size_t l, const uint8_t *key)
{
    int w;
    for (w = 0; w < 4; w++)
        x[w][l] = sigma[w];
    for (w = 0; w < 8; w++)
        x[4 + w][l] = mess_load_u32(key + 4 * w);
}

/* Unused lanes of a last, partial group compute a copy of lane 0. */
static void fill_rest(lanes_t x, size_t used)
{
    size_t l;
    int w;
    for (l = used; l < CHACHA_LANES; l++)
        for (w = 0; w < 16; w++)
            x[w][l] = x[w][0];
}

void chacha_hchacha_many(size_t n, const uint8_t *const *key,
                         const uint8_t (*in)[16], uint8_t (*out)[32])
{
    lanes_t x;
    size_t i, m, l;
    int w;
    for (i = 0; i < n; i += m) {
        m = n - i < CHACHA_LANES ? n - i : CHACHA_LANES;
        for (l = 0; l < m; l++) {
            set_key(x, l, key[i + l]);
            for (w = 0; w < 4; w++)
                x[12 + w][l] = mess_load_u32(in[i + l] + 4 * w);
        }
        fill_rest(x, m);
        rounds(x);
        for (l = 0; l < m; l++)
            for (w = 0; w < 4; w++) {
                mess_store_u32(out[i + l] + 4 * w, x[w][l]);
                mess_store_u32(out[i + l] + 16 + 4 * w, x[12 + w][l]);
            }
    }
    sodium_memzero(x, sizeof x);
}

void chacha_pad8_many(size_t n, const uint8_t *const *key, const uint32_t *ctr,
                      const uint8_t *const *nonce, uint64_t *pad)
{
    lanes_t x;
    size_t i, m, l;
    int w;
    for (i = 0; i < n; i += m) {
        m = n - i < CHACHA_LANES ? n - i : CHACHA_LANES;
        for (l = 0; l < m; l++) {
            set_key(x, l, key[i + l]);
            x[12][l] = ctr[i + l];
            for (w = 0; w < 3; w++)
                x[13 + w][l] = mess_load_u32(nonce[i + l] + 4 * w);
        }
        fill_rest(x, m);
        rounds(x);
        for (l = 0; l < m; l++)
            pad[i + l] = (uint64_t)(uint32_t)(x[0][l] + sigma[0]) |
                         (uint64_t)(uint32_t)(x[1][l] + sigma[1]) << 32;
    }
    sodium_memzero(x, sizeof x);
}


/* Runs the `m` filled lanes of x (input in x0) and XORs each lane's block
 * into its destination. */
static void flush(lanes_t x, lanes_t x0, const struct lane_out *o, size_t m)
{
    size_t l, b;
    int w;
    uint8_t ks[64];
    fill_rest(x, m);
#ifdef CHACHA_DISPATCH
    if (chacha_lanes_isa() == 2) {
        flush_avx512(x, o, m);
        return;
    }
#endif
    memcpy(x0, x, sizeof(lanes_t));
    rounds(x);
    for (w = 0; w < 16; w++)
        for (l = 0; l < CHACHA_LANES; l++)
            x[w][l] += x0[w][l];
    for (l = 0; l < m; l++) {
        if (o[l].len == 64) {
            for (w = 0; w < 16; w++)
                mess_store_u32(o[l].dst + 4 * w,
                               mess_load_u32(o[l].src + 4 * w) ^ x[w][l]);
            continue;
        }
        for (w = 0; w < 16; w++)
            mess_store_u32(ks + 4 * w, x[w][l]);
        for (b = 0; b < o[l].len; b++)
            o[l].dst[b] = (uint8_t)(o[l].src[b] ^ ks[b]);
    }
    sodium_memzero(ks, sizeof ks);
}

void chacha_xor_many(size_t n, const struct chacha_job *jobs)
{
    lanes_t x, x0;
    struct lane_out o[CHACHA_LANES];
    size_t i, m = 0, off;
    int w;
    for (i = 0; i < n; i++) {
        const struct chacha_job *j = &jobs[i];
        uint32_t ctr = j->ctr;
        for (off = 0; off < j->len; off += 64, ctr++) {
            set_key(x, m, j->key);
            x[12][m] = ctr;
            for (w = 0; w < 3; w++)
                x[13 + w][m] = mess_load_u32(j->nonce + 4 * w);
            o[m].src = j->src + off;
            o[m].dst = j->dst + off;
            o[m].len = j->len - off < 64 ? j->len - off : 64;
            if (++m == CHACHA_LANES) {
                flush(x, x0, o, m);
                m = 0;
            }
        }
    }
    if (m)
        flush(x, x0, o, m);
    sodium_memzero(x, sizeof x);
    sodium_memzero(x0, sizeof x0);
}
