/*
 * simd.c - the SIMD level the running CPU offers (simd.h).
 */
#include "internal.h"
#include "simd.h"

int simd_cpu_level(void)
{
#ifdef MESS_SIMD_DISPATCH
    if (__builtin_cpu_supports("avx512f"))
        return 2;
    if (__builtin_cpu_supports("avx2"))
        return 1;
#endif
    return 0;
}

int simd_level(const int *forced)
{
    return *forced >= 0 ? *forced : simd_cpu_level();
}

int simd_force(int *forced, int level)
{
    if (level < -1 || level > 2 || level > simd_cpu_level())
        return MESS_EINVAL;
    *forced = level;
    return MESS_OK;
}
