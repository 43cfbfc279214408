/*
 * internal.h - helpers shared by the library's source files.  Not installed.
 *
 * Every parser in libmess reads through struct mess_rd, which never reads
 * past its length: a short buffer turns into MESS_EFORMAT, not a crash.
 * Every serializer appends to struct mess_wr, a growable buffer.
 * All integers on the wire and on disk are little-endian.
 */
#ifndef MESS_INTERNAL_H
#define MESS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mess_experimental.h"

#define MESS_UNUSED(x) ((void)(x))

/* ---- error messages (error.c) ------------------------------------------- */

/* Formats a message into msg[cap] (nothing when msg is NULL or cap 0):
 * the calls that report why they refused an input, a file or a state.
 * mess_fail returns rc, so `return mess_fail(msg, cap, MESS_EFORMAT, ...)`. */
#if defined(__GNUC__)
#define MESS_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define MESS_PRINTF(f, a)
#endif
void mess_say(char *msg, size_t cap, const char *fmt, ...) MESS_PRINTF(3, 4);
int mess_fail(char *msg, size_t cap, int rc, const char *fmt, ...) MESS_PRINTF(4, 5);

/* The file name alone, for messages: the part of path after its last '/'. */
const char *mess_base_name(const char *path);

/* ---- checked size arithmetic ------------------------------------------ */

/* *out = a * b; returns 0, or MESS_ELIMIT on size_t overflow. */
static inline int mess_mul_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a)
        return MESS_ELIMIT;
    *out = a * b;
    return MESS_OK;
}

/* *out = a + b; returns 0, or MESS_ELIMIT on size_t overflow. */
static inline int mess_add_size(size_t a, size_t b, size_t *out)
{
    if (b > SIZE_MAX - a)
        return MESS_ELIMIT;
    *out = a + b;
    return MESS_OK;
}

/* malloc(n * size) with overflow check; NULL on overflow or failure. */
static inline void *mess_malloc_array(size_t n, size_t size)
{
    size_t bytes;
    if (mess_mul_size(n, size, &bytes) != MESS_OK)
        return NULL;
    return malloc(bytes ? bytes : 1);
}

/* calloc with an explicit zero-size guard (calloc(0, x) may return NULL). */
static inline void *mess_calloc_array(size_t n, size_t size)
{
    if (n == 0 || size == 0)
        return calloc(1, 1);
    return calloc(n, size);
}

/* ---- little-endian encode / decode -------------------------------------- */

static inline void mess_store_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline void mess_store_u64(uint8_t *p, uint64_t v)
{
    mess_store_u32(p, (uint32_t)v);
    mess_store_u32(p + 4, (uint32_t)(v >> 32));
}

static inline uint32_t mess_load_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static inline uint64_t mess_load_u64(const uint8_t *p)
{
    return (uint64_t)mess_load_u32(p) | (uint64_t)mess_load_u32(p + 4) << 32;
}

/* ---- bounded reader ------------------------------------------------------ */

struct mess_rd {
    const uint8_t *p;
    size_t len;
    size_t off;
};

static inline void mess_rd_init(struct mess_rd *r, const void *p, size_t len)
{
    r->p = (const uint8_t *)p;
    r->len = len;
    r->off = 0;
}

static inline size_t mess_rd_left(const struct mess_rd *r)
{
    return r->len - r->off;
}

/* Returns a pointer to the next n bytes and advances, or NULL if short. */
static inline const uint8_t *mess_rd_take(struct mess_rd *r, size_t n)
{
    const uint8_t *q;
    if (n > r->len - r->off)
        return NULL;
    q = r->p + r->off;
    r->off += n;
    return q;
}

static inline int mess_rd_u8(struct mess_rd *r, uint8_t *v)
{
    const uint8_t *q = mess_rd_take(r, 1);
    if (!q)
        return MESS_EFORMAT;
    *v = q[0];
    return MESS_OK;
}

static inline int mess_rd_u32(struct mess_rd *r, uint32_t *v)
{
    const uint8_t *q = mess_rd_take(r, 4);
    if (!q)
        return MESS_EFORMAT;
    *v = mess_load_u32(q);
    return MESS_OK;
}

static inline int mess_rd_u64(struct mess_rd *r, uint64_t *v)
{
    const uint8_t *q = mess_rd_take(r, 8);
    if (!q)
        return MESS_EFORMAT;
    *v = mess_load_u64(q);
    return MESS_OK;
}

static inline int mess_rd_bytes(struct mess_rd *r, void *dst, size_t n)
{
    const uint8_t *q = mess_rd_take(r, n);
    if (!q)
        return MESS_EFORMAT;
    if (n)
        memcpy(dst, q, n);
    return MESS_OK;
}

/* ---- growable writer ------------------------------------------------------ */

struct mess_wr {
    uint8_t *p;
    size_t len;
    size_t cap;
    int err;   /* sticky: first failure (MESS_ENOMEM / MESS_ELIMIT) */
    int fixed; /* p is the caller's buffer of cap bytes: never grown or freed */
};

/* Defined in bytes.c. */
void mess_wr_init(struct mess_wr *w);
/* A writer over a caller-owned buffer of cap bytes (the _into calls):
 * writing past cap is MESS_ELIMIT (sticky), nothing is reallocated, and
 * mess_wr_free leaves the buffer alone. */
void mess_wr_init_fixed(struct mess_wr *w, uint8_t *buf, size_t cap);
/* Makes room for n more bytes; returns a pointer to them, or NULL: on an
 * error (err set) and, with err still MESS_OK, for n == 0 before anything
 * was written (there is no buffer to point into yet). */
uint8_t *mess_wr_reserve(struct mess_wr *w, size_t n);
void mess_wr_bytes(struct mess_wr *w, const void *src, size_t n);
void mess_wr_u8(struct mess_wr *w, uint8_t v);
void mess_wr_u32(struct mess_wr *w, uint32_t v);
void mess_wr_u64(struct mess_wr *w, uint64_t v);
/* Frees the buffer (after an error, or when the caller did not take it). */
void mess_wr_free(struct mess_wr *w);

/* ---- growable public structs (mess.h, "Growable structs") --------------- */

/* The end of a struct's last field: its size without trailing padding
 * (a newer header's next field may sit in that padding). */
#define MESS_FIELD_END(type, field) \
    (offsetof(type, field) + sizeof(((type *)0)->field))

/* Reads a caller's struct `in` of in_size bytes (its size field) into the
 * library's struct `full` (already holding the defaults; its fields end at
 * `known` bytes): the first min(in_size, known) bytes are copied, the rest
 * of `full` keeps its defaults; full's size field is left as it was.
 * MESS_EINVAL (nothing changed) if in_size < min_size, or if a byte of
 * `in` beyond `known` is not zero (a field this library does not know is
 * set).  Defined in bytes.c. */
int mess_struct_in(void *full, size_t known, const void *in, size_t in_size,
                   size_t min_size);
/* Writes the library's struct `full` (fields ending at `known` bytes) into
 * the caller's `out` of `size` bytes: min(size, known) bytes copied, bytes
 * beyond `known` zeroed, out's size field set to size.  MESS_EINVAL
 * (nothing written) if size < min_size or size > UINT32_MAX. */
int mess_struct_out(void *out, size_t size, const void *full, size_t known,
                    size_t min_size);

#endif /* MESS_INTERNAL_H */
