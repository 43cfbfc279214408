/*
 * test_wipe.c - no copy of the master key is left in heap memory that is
 * freed while a client is saved or loaded (zstd's working memory, stdio
 * buffers, the library's own buffers).
 *
 * Every block freed in the window is scanned for either 16-byte half of
 * the master key just before it is released: under AddressSanitizer (make
 * check) through its free hook, which sees every free (realloc's included);
 * in a build without it, through a free() defined here that scans the block
 * (malloc_usable_size) and forwards to the C library's.  A positive control
 * (a block holding the key, freed) shows the scan sees frees; a second one
 * (the decompressed client body) shows the key recomputed here is the
 * library's.
 */
#define _GNU_SOURCE /* dlsym(RTLD_NEXT), malloc_usable_size */
#include <dlfcn.h>
#include <malloc.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../mess.h"
#include "statefile.h"
#include "harness.h"
#include "sift.h"

static uint8_t master[32];
static volatile int armed;
static volatile size_t hits, scanned_blocks;

static void scan_block(const volatile void *vp, size_t n)
{
    const uint8_t *p = (const uint8_t *)vp;
    size_t i;
    int h;
    if (!armed || !p || n < 16)
        return;
    scanned_blocks++;
    for (i = 0; i + 16 <= n; i++)
        for (h = 0; h < 2; h++)
            if (p[i] == master[16 * h] && memcmp(p + i, master + 16 * h, 16) == 0) {
                hits++;
                return;
            }
}

#if defined(__SANITIZE_ADDRESS__)
int __sanitizer_install_malloc_and_free_hooks(
    void (*malloc_hook)(const volatile void *, size_t),
    void (*free_hook)(const volatile void *));
size_t __sanitizer_get_allocated_size(const volatile void *p);

static void on_free(const volatile void *p)
{
    if (armed && p)
        scan_block(p, __sanitizer_get_allocated_size(p));
}

static void on_malloc(const volatile void *p, size_t n)
{
    (void)p;
    (void)n;
}

static int install(void)
{
    return __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free) != 0;
}
#else
static void (*real_free)(void *);

void free(void *p)
{
    if (!p)
        return;
    if (armed)
        scan_block(p, malloc_usable_size(p));
    if (real_free)
        real_free(p);
    /* else: freed by dlsym while main looks up the real free; kept */
}

static int install(void)
{
    void *f = dlsym(RTLD_NEXT, "free");
    memcpy(&real_free, &f, sizeof f);
    return real_free != NULL;
}
#endif

static char dir[] = "build/wipeXXXXXX";
/* called through a volatile pointer: the compiler cannot drop the stores
 * into a block it sees freed right after */
static void (*volatile release)(void *) = free;

static void test_freed_heap_holds_no_key(void)
{
    static const uint8_t seed[32] = "libmess wipe test seed 000000001";
    static const uint8_t domain[] = "libmess deterministic master key";
    mess_params p, fp;
    mess_client *c = NULL, *c2 = NULL;
    float *small;
    size_t raw_len, before;
    uint8_t *raw, *blk;
    char plain[64], sealed[64];

    small = test_sift_learn_rows(500, 64);
    CHECK(small != NULL);
    if (!small)
        return;
    CHECK_OK(test_small_client(&p, 64, 2, 1, small, 500, seed, &c));
    free(small);
    if (!c)
        return;
    /* the documented key schedule: master = BLAKE2b-256(key = seed; domain) */
    crypto_generichash(master, 32, domain, sizeof domain, seed, 32);
    snprintf(plain, sizeof plain, "%s/plain.client", dir);
    snprintf(sealed, sizeof sealed, "%s/sealed.client", dir);

    {   /* valgrind replaces free() everywhere, ours included: nothing to see */
        const char *pre = getenv("LD_PRELOAD");
        if (pre && strstr(pre, "vgpreload")) {
            printf("  (under valgrind, whose free() replaces the scanning one: "
                   "not run; make check runs it under ASan)\n");
            unlink(plain);
            mess_client_free(c);
            return;
        }
    }
    CHECK(install());
    /* positive control 1: a freed block holding the key is seen */
    blk = (uint8_t *)malloc(100);
    CHECK(blk != NULL);
    if (blk) {
        memset(blk, 0x5a, 100);
        memcpy(blk + 33, master, 32);
        armed = 1;
        release(blk);
        armed = 0;
    }
    CHECK(hits == 1);
    hits = 0;
    scanned_blocks = 0;

    armed = 1;
    CHECK_OK(mess_client_save(c, plain, NULL));
    CHECK_OK(mess_client_load(plain, NULL, &c2));
    mess_client_free(c2);
    c2 = NULL;
    CHECK_OK(mess_client_save(c, sealed, "wipe test passphrase"));
    CHECK_OK(mess_client_load(sealed, "wipe test passphrase", &c2));
    mess_client_free(c2);
    armed = 0;
    printf("  %zu blocks freed during save and load, %zu held a half of the master key\n",
           (size_t)scanned_blocks, (size_t)hits);
    CHECK(scanned_blocks > 10);
    CHECK(hits == 0);

    /* positive control 2: the body of the unsealed file holds this key */
    CHECK_OK(statefile_read(plain, STATEFILE_CLIENT, NULL, 0, &fp, &raw, &raw_len));
    before = hits;
    armed = 1;
    scan_block(raw, raw_len);
    armed = 0;
    CHECK(hits == before + 1);
    hits = 0;
    statefile_free_raw(raw, raw_len);
    unlink(plain);
    unlink(sealed);
    mess_client_free(c);
}

int main(void)
{
#if !defined(__SANITIZE_ADDRESS__)
    /* Before anything allocates: a free() that ran before it would be
     * dropped (real_free still NULL), a leak valgrind reports. */
    if (!install()) {
        fprintf(stderr, "cannot find the C library's free()\n");
        return 1;
    }
#endif
    if (sodium_init() < 0)
        return 1;
    mkdir("build", 0755);
    if (!mkdtemp(dir)) {
        fprintf(stderr, "cannot create a directory under build/\n");
        return 1;
    }
    RUN(test_freed_heap_holds_no_key);
    CHECK(rmdir(dir) == 0);
    HARNESS_END();
}
