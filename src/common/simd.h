/*
 * simd.h - the SIMD level the running CPU offers to the cores that choose
 * their code at run time (the isohash projection, the ChaCha20 and
 * Poly1305 lanes), and the tests' override of that choice.  Internal.
 *
 * Level 0 is the portable code, 1 AVX2, 2 AVX-512F.  Every level gives
 * the same bits (each core's tests compare them), so the choice is speed
 * only.  Without MESS_SIMD_DISPATCH (not x86 GCC/clang, or a build with
 * -DMESS_NO_POPCNT_DISPATCH: build/mess-portable) the level is always 0.
 */
#ifndef MESS_SIMD_H
#define MESS_SIMD_H

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && \
    !defined(MESS_NO_POPCNT_DISPATCH)
#define MESS_SIMD_DISPATCH 1
#endif

/* What the CPU offers: 0, 1 or 2. */
int simd_cpu_level(void);

/* The level a core uses: *forced when a test has set it (>= 0), else the
 * CPU's. */
int simd_level(const int *forced);

/* Sets *forced to level, -1 giving the choice back to the CPU: MESS_OK,
 * or MESS_EINVAL (and *forced unchanged) for a level outside -1..2 or
 * above what the CPU offers. */
int simd_force(int *forced, int level);

#endif
