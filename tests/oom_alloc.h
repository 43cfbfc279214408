/*
 * oom_alloc.h - allocation-failure injection for tests/test_oom.c.
 *
 * tests/oom_alloc.c counts every allocation and can make the n-th one
 * fail, the way SQLite tests itself.  It is built in one of two ways:
 *
 *   OOM_WRAP      the allocator calls of the objects linked into the test
 *                 program (libmess.a and the test itself) are redirected
 *                 with the linker's --wrap (malloc, calloc, realloc, free,
 *                 posix_memalign, aligned_alloc, strdup) to __wrap_*,
 *                 which count, may fail, and pass on to the real allocator.
 *                 Works under AddressSanitizer (whose allocator stays the
 *                 real one, so leaks and double frees are still caught);
 *                 allocations inside libsodium, zstd, LAPACK and libc are
 *                 not seen.
 *   (default)     the program itself defines malloc, calloc, realloc, free,
 *                 posix_memalign, aligned_alloc, memalign, valloc, pvalloc
 *                 and reallocarray on top of glibc's __libc_* entry points,
 *                 so every allocation of the process goes through the
 *                 counter: libsodium's, zstd's, LAPACK's and libc's own
 *                 (stdio buffers, qsort) too.  Release builds only (the
 *                 sanitizers bring their own malloc).
 *
 * Counters are atomic; a multi-threaded call still fails exactly one
 * allocation (or, persistent, every one from the n-th on), though which
 * thread gets it may vary.
 */
#ifndef MESS_OOM_ALLOC_H
#define MESS_OOM_ALLOC_H

/* From now on, fail the n-th allocation (n >= 1); with persistent != 0
 * every later one as well.  n = 0 disarms. */
void oom_arm(unsigned long n, int persistent);
/* Disarms; returns the number of allocation calls seen since oom_arm and
 * sets *fired (may be NULL) to whether a failure was injected. */
unsigned long oom_disarm(int *fired);
/* on != 0: allocations pass (uncounted) until oom_hold(0), so a test's
 * own work inside an armed window neither fails nor shifts n. */
void oom_hold(int on);
/* Blocks allocated through the counter and not yet freed (net). */
long oom_live(void);
/* "wrap" or "interpose": which build this is. */
const char *oom_mode(void);

#endif
