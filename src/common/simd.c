/*
 * simd.c - the one CPU-dispatch point (simd.h): the CPU's features resolved
 * once, and the table of forced levels.
 */
#include <pthread.h>

#include "internal.h"
#include "simd.h"

#ifdef MESS_SIMD_DISPATCH
#include <cpuid.h>
#endif

/* The CPU's features, written once under cpu_once and only read after. */
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;
static int cpu_max[SIMD_CORES];

/* The tests' overrides (simd_force), -1 while the CPU decides. */
static int forced[SIMD_CORES] = {-1, -1, -1, -1, -1, -1};

#ifdef MESS_SIMD_DISPATCH
/* F16C (VCVTPH2PS, half to float in the AVX registers): the CPUID bit
 * (leaf 1, ECX bit 29), read from <cpuid.h> because clang's
 * __builtin_cpu_supports does not name "f16c", and AVX, whose check
 * includes the operating system's saving of the YMM state. */
static int cpu_f16c(void)
{
    unsigned int eax, ebx, ecx, edx;
    if (!__builtin_cpu_supports("avx") || !__get_cpuid(1, &eax, &ebx, &ecx, &edx))
        return 0;
    return (ecx & (1u << 29)) != 0;
}
#endif

static void cpu_resolve(void)
{
    int level = 0;
#ifdef MESS_SIMD_DISPATCH
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        level = 2;
    else if (__builtin_cpu_supports("avx2"))
        level = 1;
    /* 2: AVX2 for the neighbour lists scored at once (hnsw_score.c) */
    cpu_max[SIMD_POPCOUNT] = !__builtin_cpu_supports("popcnt")  ? 0
                             : __builtin_cpu_supports("avx2") ? 2
                                                              : 1;
    cpu_max[SIMD_METRIC] = __builtin_cpu_supports("avx") != 0;
    cpu_max[SIMD_F16] = cpu_f16c();
#endif
    cpu_max[SIMD_PROJECT] = level;
    cpu_max[SIMD_CHACHA] = level;
    cpu_max[SIMD_POLY1305] = level;
}

int simd_cpu_max(enum simd_core core)
{
    pthread_once(&cpu_once, cpu_resolve);
    return (unsigned)core < SIMD_CORES ? cpu_max[core] : 0;
}

int simd_cpu_level(void)
{
    return simd_cpu_max(SIMD_CHACHA);
}

int simd_level(enum simd_core core)
{
    if ((unsigned)core >= SIMD_CORES)
        return 0;
    return forced[core] >= 0 ? forced[core] : simd_cpu_max(core);
}

int simd_force(enum simd_core core, int level)
{
    if ((unsigned)core >= SIMD_CORES || level < -1 || level > 2 ||
        level > simd_cpu_max(core))
        return MESS_EINVAL;
    forced[core] = level;
    return MESS_OK;
}
