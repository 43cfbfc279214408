/*
 * oom_alloc.c - the allocation counter and failure injector of
 * tests/oom_alloc.h (see there for the two ways it is built).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "oom_alloc.h"

static unsigned long oom_fail_at; /* 0: off */
static int oom_persistent;
static unsigned long oom_calls;
static int oom_fired;
static long oom_blocks;
static int oom_held;

void oom_hold(int on)
{
    __atomic_store_n(&oom_held, on, __ATOMIC_SEQ_CST);
}

void oom_arm(unsigned long n, int persistent)
{
    __atomic_store_n(&oom_calls, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&oom_fired, 0, __ATOMIC_SEQ_CST);
    oom_persistent = persistent;
    __atomic_store_n(&oom_fail_at, n, __ATOMIC_SEQ_CST);
}

unsigned long oom_disarm(int *fired)
{
    __atomic_store_n(&oom_fail_at, 0, __ATOMIC_SEQ_CST);
    if (fired)
        *fired = __atomic_load_n(&oom_fired, __ATOMIC_SEQ_CST);
    return __atomic_load_n(&oom_calls, __ATOMIC_SEQ_CST);
}

long oom_live(void)
{
    return __atomic_load_n(&oom_blocks, __ATOMIC_SEQ_CST);
}

/* One allocation request: 1 if it must fail. */
static int oom_should_fail(void)
{
    unsigned long at = __atomic_load_n(&oom_fail_at, __ATOMIC_SEQ_CST), k;
    if (at == 0 || __atomic_load_n(&oom_held, __ATOMIC_SEQ_CST))
        return 0;
    k = __atomic_add_fetch(&oom_calls, 1, __ATOMIC_SEQ_CST);
    if (k == at || (oom_persistent && k > at)) {
        __atomic_store_n(&oom_fired, 1, __ATOMIC_SEQ_CST);
        return 1;
    }
    return 0;
}

static void *oom_counted(void *p)
{
    if (p)
        __atomic_add_fetch(&oom_blocks, 1, __ATOMIC_SEQ_CST);
    return p;
}

static void oom_released(void *p)
{
    if (p)
        __atomic_sub_fetch(&oom_blocks, 1, __ATOMIC_SEQ_CST);
}

#ifdef OOM_WRAP

const char *oom_mode(void) { return "wrap"; }

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
int __real_posix_memalign(void **p, size_t align, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
int __wrap_posix_memalign(void **p, size_t align, size_t n);
void *__wrap_aligned_alloc(size_t align, size_t n);
char *__wrap_strdup(const char *s);

#define REAL_MALLOC __real_malloc
#define REAL_CALLOC __real_calloc
#define REAL_REALLOC __real_realloc
#define REAL_FREE __real_free
#define REAL_MEMALIGN(a, n) (__real_aligned_alloc((a), (n)))
#define FN(name) __wrap_##name

#else

const char *oom_mode(void) { return "interpose"; }

void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);
void __libc_free(void *p);
void *__libc_memalign(size_t align, size_t n);

void *malloc(size_t n);
void *calloc(size_t n, size_t size);
void *realloc(void *p, size_t n);
void free(void *p);
int posix_memalign(void **p, size_t align, size_t n);
void *aligned_alloc(size_t align, size_t n);
void *memalign(size_t align, size_t n);
void *valloc(size_t n);
void *pvalloc(size_t n);
void *reallocarray(void *p, size_t n, size_t size);
char *strdup(const char *s);

#define REAL_MALLOC __libc_malloc
#define REAL_CALLOC __libc_calloc
#define REAL_REALLOC __libc_realloc
#define REAL_FREE __libc_free
#define REAL_MEMALIGN(a, n) (__libc_memalign((a), (n)))
#define FN(name) name

void *memalign(size_t align, size_t n)
{
    if (oom_should_fail()) {
        errno = ENOMEM;
        return NULL;
    }
    return oom_counted(REAL_MEMALIGN(align, n));
}

void *valloc(size_t n)
{
    return memalign(4096, n);
}

void *pvalloc(size_t n)
{
    return memalign(4096, (n + 4095) & ~(size_t)4095);
}

void *reallocarray(void *p, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, n * size);
}

#endif

void *FN(malloc)(size_t n)
{
    if (oom_should_fail()) {
        errno = ENOMEM;
        return NULL;
    }
    return oom_counted(REAL_MALLOC(n));
}

void *FN(calloc)(size_t n, size_t size)
{
    if (oom_should_fail()) {
        errno = ENOMEM;
        return NULL;
    }
    return oom_counted(REAL_CALLOC(n, size));
}

void *FN(realloc)(void *p, size_t n)
{
    void *q;
    if (oom_should_fail()) {
        errno = ENOMEM;
        return NULL;
    }
    q = REAL_REALLOC(p, n);
    if (!p)
        return oom_counted(q);
    if (!q && n == 0)
        oom_released(p); /* glibc: realloc(p, 0) frees p */
    return q;
}

void FN(free)(void *p)
{
    oom_released(p);
    REAL_FREE(p);
}

int FN(posix_memalign)(void **p, size_t align, size_t n)
{
    void *q;
    if (align < sizeof(void *) || (align & (align - 1)) != 0)
        return EINVAL;
    if (oom_should_fail())
        return ENOMEM;
    q = REAL_MEMALIGN(align, n ? n : 1);
    if (!q)
        return ENOMEM;
    *p = oom_counted(q);
    return 0;
}

void *FN(aligned_alloc)(size_t align, size_t n)
{
    if (oom_should_fail()) {
        errno = ENOMEM;
        return NULL;
    }
    return oom_counted(REAL_MEMALIGN(align, n));
}

char *FN(strdup)(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = (char *)FN(malloc)(n);
    if (d)
        memcpy(d, s, n);
    return d;
}
