/*
 * hnsw_score.c - a whole gathered neighbour list scored at once: the
 * query's Hamming distances to the 128-bit codes of the listed nodes, and
 * the mask of those below a bound, so that a beam (hnsw_many.c) runs its
 * queue updates only for the neighbours that can enter them, off the
 * per-code path.  One copy per popcount level of SIMD_POPCOUNT (simd.h),
 * chosen at run time: 0 the portable popcount, 1 POPCNT, 2 AVX2 (a nibble
 * table, four codes a step).  Every copy gives the same distances and mask
 * (tests/test_hnsw.c compares them).
 */
#include "hnsw_internal.h"
#include "simd.h"

#ifdef HNSW_DISPATCH
#include <immintrin.h>
#endif

/* The body of the scalar copies: one distance per id, then its bit of the
 * mask, with no branch on the distance. */
HNSW_INLINE uint64_t score_list_body(const uint64_t *q, const uint64_t *codes,
                                     const uint32_t *ids, uint32_t n, uint32_t bound,
                                     uint32_t *dist)
{
    const uint64_t q0 = q[0], q1 = q[1];
    uint64_t mask = 0;
    uint32_t i;
    for (i = 0; i < n; i++) {
        const uint64_t *c = codes + 2 * (size_t)ids[i];
        uint32_t d = (uint32_t)(__builtin_popcountll(q0 ^ c[0]) +
                                __builtin_popcountll(q1 ^ c[1]));
        dist[i] = d;
        mask |= (uint64_t)(d < bound) << i;
    }
    return mask;
}

static uint64_t score_list_soft(const uint64_t *q, const uint64_t *codes,
                                const uint32_t *ids, uint32_t n, uint32_t bound,
                                uint32_t *dist)
{
    return score_list_body(q, codes, ids, n, bound, dist);
}

#ifdef HNSW_DISPATCH
static HNSW_POPCNT uint64_t score_list_popcnt(const uint64_t *q, const uint64_t *codes,
                                              const uint32_t *ids, uint32_t n,
                                              uint32_t bound, uint32_t *dist)
{
    return score_list_body(q, codes, ids, n, bound, dist);
}

/* Four codes a step: two codes per 256-bit register XORed with the query,
 * each byte's popcount from a nibble table (vpshufb), the bytes of each
 * 64-bit word summed (vpsadbw), the two words of a code added, the four
 * distances compared with the bound at once; the rest one at a time. */
__attribute__((target("avx2,popcnt"))) static uint64_t
score_list_avx2_popcnt(const uint64_t *q, const uint64_t *codes, const uint32_t *ids,
                       uint32_t n, uint32_t bound, uint32_t *dist)
{
    const __m256i table = _mm256_setr_epi8(0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4,
                                           0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4);
    const __m256i low = _mm256_set1_epi8(0x0f), zero = _mm256_setzero_si256();
    const __m256i qq = _mm256_setr_epi64x((long long)q[0], (long long)q[1],
                                          (long long)q[0], (long long)q[1]);
    /* after the two horizontal adds: c0 c2 in lane 0, c1 c3 in lane 1 */
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 0, 0, 0, 0);
    const __m128i lim = _mm_set1_epi32((int)(bound > 0x7fffffffu ? 0x7fffffffu : bound));
    uint64_t mask = 0;
    uint32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const uint64_t *c0 = codes + 2 * (size_t)ids[i], *c1 = codes + 2 * (size_t)ids[i + 1];
        const uint64_t *c2 = codes + 2 * (size_t)ids[i + 2], *c3 = codes + 2 * (size_t)ids[i + 3];
        __m256i a = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)c0)),
            _mm_loadu_si128((const __m128i *)c1), 1);
        __m256i b = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)c2)),
            _mm_loadu_si128((const __m128i *)c3), 1);
        __m256i pa, pb, s;
        __m128i d4;
        a = _mm256_xor_si256(a, qq);
        b = _mm256_xor_si256(b, qq);
        pa = _mm256_add_epi8(_mm256_shuffle_epi8(table, _mm256_and_si256(a, low)),
                             _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(a, 4), low)));
        pb = _mm256_add_epi8(_mm256_shuffle_epi8(table, _mm256_and_si256(b, low)),
                             _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(b, 4), low)));
        /* per 64-bit word its popcount: a = [c0 lo, c0 hi | c1 lo, c1 hi] */
        pa = _mm256_sad_epu8(pa, zero);
        pb = _mm256_sad_epu8(pb, zero);
        s = _mm256_hadd_epi32(pa, pb); /* [c0lo c0hi c2lo c2hi | c1lo c1hi c3lo c3hi] */
        s = _mm256_hadd_epi32(s, s);   /* [c0 c2 c0 c2 | c1 c3 c1 c3] */
        d4 = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(s, order));
        _mm_storeu_si128((__m128i *)(dist + i), d4);
        mask |= (uint64_t)(unsigned)_mm_movemask_ps(_mm_castsi128_ps(_mm_cmplt_epi32(d4, lim)))
                << i;
    }
    for (; i < n; i++) {
        const uint64_t *c = codes + 2 * (size_t)ids[i];
        uint32_t d = (uint32_t)(__builtin_popcountll(q[0] ^ c[0]) +
                                __builtin_popcountll(q[1] ^ c[1]));
        dist[i] = d;
        mask |= (uint64_t)(d < bound) << i;
    }
    return mask;
}
#endif

hnsw_score_list_fn hnsw_score_list_pick(void)
{
#ifdef HNSW_DISPATCH
    int level = simd_level(SIMD_POPCOUNT); /* hnsw_popcount_hw's answer */
    if (level >= 2)
        return score_list_avx2_popcnt;
    if (level == 1)
        return score_list_popcnt;
#endif
    return score_list_soft;
}
