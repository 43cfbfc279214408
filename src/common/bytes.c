/*
 * bytes.c - the growable little-endian writer used by every serializer,
 * and mess_buf_free for the buffers it hands to callers.
 */
#include "internal.h"

void mess_wr_init(struct mess_wr *w)
{
    w->p = NULL;
    w->len = 0;
    w->cap = 0;
    w->err = MESS_OK;
    w->fixed = 0;
}

void mess_wr_init_fixed(struct mess_wr *w, uint8_t *buf, size_t cap)
{
    w->p = buf;
    w->len = 0;
    w->cap = cap;
    w->err = MESS_OK;
    w->fixed = 1;
}

uint8_t *mess_wr_reserve(struct mess_wr *w, size_t n)
{
    size_t need, cap;
    uint8_t *q;

    if (w->err)
        return NULL;
    if (mess_add_size(w->len, n, &need) != MESS_OK) {
        w->err = MESS_ELIMIT;
        return NULL;
    }
    if (need > w->cap && w->fixed) {
        w->err = MESS_ELIMIT; /* the caller's buffer is full */
        return NULL;
    }
    if (need > w->cap) {
        cap = w->cap ? w->cap : 256;
        while (cap < need)
            cap = cap > SIZE_MAX / 2 ? need : cap * 2;
        q = (uint8_t *)realloc(w->p, cap);
        if (!q) {
            w->err = MESS_ENOMEM;
            return NULL;
        }
        w->p = q;
        w->cap = cap;
    }
    if (!w->p)          /* nothing reserved yet and n == 0: no NULL + 0 */
        return NULL;
    q = w->p + w->len;
    w->len = need;
    return q;
}

void mess_wr_bytes(struct mess_wr *w, const void *src, size_t n)
{
    uint8_t *q = mess_wr_reserve(w, n);
    if (q && n)
        memcpy(q, src, n);
}

void mess_wr_u8(struct mess_wr *w, uint8_t v)
{
    uint8_t *q = mess_wr_reserve(w, 1);
    if (q)
        q[0] = v;
}

void mess_wr_u32(struct mess_wr *w, uint32_t v)
{
    uint8_t *q = mess_wr_reserve(w, 4);
    if (q)
        mess_store_u32(q, v);
}

void mess_wr_u64(struct mess_wr *w, uint64_t v)
{
    uint8_t *q = mess_wr_reserve(w, 8);
    if (q)
        mess_store_u64(q, v);
}

void mess_wr_free(struct mess_wr *w)
{
    if (!w->fixed)
        free(w->p);
    mess_wr_init(w);
}

/* The public release of a buffer a writer handed to the caller (mess.h). */
void mess_buf_free(uint8_t *buf)
{
    free(buf);
}

int mess_struct_in(void *full, size_t known, const void *in, size_t in_size,
                   size_t min_size)
{
    const uint8_t *b = (const uint8_t *)in;
    uint32_t keep;
    size_t i;
    if (!full || !in || in_size < min_size || in_size < sizeof keep)
        return MESS_EINVAL;
    for (i = known; i < in_size; i++)
        if (b[i] != 0)
            return MESS_EINVAL; /* a field this library does not know is set */
    memcpy(&keep, full, sizeof keep);
    memcpy(full, in, in_size < known ? in_size : known);
    memcpy(full, &keep, sizeof keep);
    return MESS_OK;
}

int mess_struct_out(void *out, size_t size, const void *full, size_t known,
                    size_t min_size)
{
    uint32_t size32;
    if (!out || !full || size < min_size || size < sizeof size32 ||
        size > UINT32_MAX)
        return MESS_EINVAL;
    if (size <= known) {
        memcpy(out, full, size);
    } else {
        memcpy(out, full, known);
        memset((uint8_t *)out + known, 0, size - known);
    }
    size32 = (uint32_t)size;
    memcpy(out, &size32, sizeof size32);
    return MESS_OK;
}
