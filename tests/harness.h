/*
 * harness.h - the minimal test harness shared by every tests/test_*.c.
 *
 * A test file defines test functions and lists them in main() with RUN().
 * CHECK() records a failure with its location and goes on; the program
 * prints "N passed, N failed" as its last line and exits non-zero when any
 * check failed.  tests/run.sh adds the counts of all test programs.
 */
#ifndef MESS_TEST_HARNESS_H
#define MESS_TEST_HARNESS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The buffers' layout: tests read it through wire.h (which includes mess.h;
 * a test compiled against another header defines HARNESS_NO_WIRE). */
#ifndef HARNESS_NO_WIRE
#include "wire.h"
#endif

static int harness_passed, harness_failed, harness_test_failed;

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "  FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            harness_test_failed = 1;                                         \
        }                                                                    \
    } while (0)

#define CHECK_RC(expr, want)                                                 \
    do {                                                                     \
        int check_rc_ = (expr);                                              \
        if (check_rc_ != (want)) {                                           \
            fprintf(stderr, "  FAIL %s:%d: %s returned %d (%s), want %d\n",  \
                    __FILE__, __LINE__, #expr, check_rc_,                    \
                    mess_strerror(check_rc_), (int)(want));                  \
            harness_test_failed = 1;                                         \
        }                                                                    \
    } while (0)

#define CHECK_OK(expr) CHECK_RC(expr, MESS_OK)

#define RUN(fn)                                                              \
    do {                                                                     \
        harness_test_failed = 0;                                             \
        fn();                                                                \
        if (harness_test_failed) {                                           \
            harness_failed++;                                                \
            printf("not ok - %s\n", #fn);                                    \
        } else {                                                             \
            harness_passed++;                                                \
            printf("ok - %s\n", #fn);                                        \
        }                                                                    \
        fflush(stdout);                                                      \
    } while (0)

#define HARNESS_END()                                                        \
    do {                                                                     \
        printf("%d passed, %d failed\n", harness_passed, harness_failed);    \
        return harness_failed ? 1 : 0;                                       \
    } while (0)

#ifndef HARNESS_NO_WIRE
/* Offsets and shards of the entries of a response, at most cap of them;
 * returns how many.  The layout is wire.h's: its constants and
 * wire_response_next walk it (the header is not checked here). */
static inline size_t test_response_entries(const uint8_t *resp, size_t len,
                                           size_t eb, uint32_t shards,
                                           size_t *off, uint32_t *shard,
                                           size_t cap)
{
    struct wire_response r;
    size_t n = 0;
    uint32_t j, c, e;
    mess_rd_init(&r.body, resp, len);
    if (!mess_rd_take(&r.body, WIRE_RESPONSE_BODY_OFFSET))
        return 0;
    for (j = 0; j < shards; j++) {
        const uint8_t *entries = wire_response_next(&r, eb, &c);
        if (!entries)
            break;
        for (e = 0; e < c; e++)
            if (n < cap) {
                off[n] = (size_t)(entries - resp) + (size_t)e * eb;
                shard[n++] = j;
            }
    }
    return n;
}
#endif

/* The whole file at path in a malloc'd buffer (*len bytes; an empty file
 * gives a buffer of length 0), or NULL with *len = 0 if it cannot be read. */
static inline uint8_t *test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    long n;
    *len = 0;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
        fseek(f, 0, SEEK_SET) == 0 &&
        (buf = (uint8_t *)malloc((size_t)n + 1)) != NULL) {
        if (fread(buf, 1, (size_t)n, f) == (size_t)n) {
            *len = (size_t)n;
        } else {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    return buf;
}

/* Path of a file under datasets/ (tests run from the repository root). */
#define DATA(name) ("datasets/" name)

#endif
