/*
 * simd.h - the one CPU-dispatch point: what the running CPU offers, asked
 * once (pthread_once) by every core that chooses its code at run time, and
 * the tests' override of each core's choice.  Internal.
 *
 * Every level of a core gives the same bits (each core's tests compare
 * them), so the choice is speed only.  Without MESS_SIMD_DISPATCH (not x86
 * GCC/clang, or a build with -DMESS_NO_POPCNT_DISPATCH: build/mess-portable)
 * the CPU offers nothing beyond level 0 to any core.
 */
#ifndef MESS_SIMD_H
#define MESS_SIMD_H

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && \
    !defined(MESS_NO_POPCNT_DISPATCH)
#define MESS_SIMD_DISPATCH 1
#endif

/* The cores that choose, and what their levels mean.  Level 0 is always
 * the portable code.  The highest level a core may use is what the CPU
 * offers it (simd_cpu_max); a test or benchmark may force a lower one
 * (simd_force) to compare paths or time them.  The forced levels are one
 * process-wide table in simd.c, -1 (the CPU decides) until forced; forcing
 * is meant for single-threaded test and benchmark set-up, not for a level
 * changed while other threads run the core.
 *
 *   core           file                         levels
 *   SIMD_POPCOUNT  hnsw_bin.c, hnsw_many.c,     0 software, 1 POPCNT,
 *                  src/index/hnsw_score.c       2 POPCNT + AVX2 (list scoring)
 *   SIMD_METRIC    src/common/metric.c          0 portable, 1 AVX (L2, 4 at a time)
 *   SIMD_PROJECT   isohash.c                    0 portable, 1 AVX2, 2 AVX-512F
 *   SIMD_CHACHA    src/crypto/chacha_lanes.c    0 portable, 1 AVX2, 2 AVX-512F
 *   SIMD_POLY1305  src/crypto/poly1305_lanes.c  0 libsodium, 1 AVX2, 2 AVX-512F
 *   SIMD_F16       src/crypto/payload.c         0 portable, 1 F16C (half to float)
 */
enum simd_core {
    SIMD_POPCOUNT,
    SIMD_METRIC,
    SIMD_PROJECT,
    SIMD_CHACHA,
    SIMD_POLY1305,
    SIMD_F16,
    SIMD_CORES
};

/* What the CPU offers: 0, 1 (AVX2) or 2 (AVX-512F); resolved once. */
int simd_cpu_level(void);

/* The highest level the CPU offers the core (0 .. its table maximum). */
int simd_cpu_max(enum simd_core core);

/* The level the core uses: the forced one when a test has set it (>= 0),
 * else simd_cpu_max(core). */
int simd_level(enum simd_core core);

/* Forces the core's level, -1 giving the choice back to the CPU: MESS_OK,
 * or MESS_EINVAL (and the table unchanged) for a level outside -1..2 or
 * above simd_cpu_max(core). */
int simd_force(enum simd_core core, int level);

#endif
