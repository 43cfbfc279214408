/*
 * state.c - turns a fuzz input into a state file (fuzz.h, fuzz_state_file):
 * the container's checksum would otherwise hide every parser behind it.
 */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "statefile.h"
#include "fuzz.h"

#define SUM_BYTES 32

static int wrap_body(const char *path, uint32_t role, const uint8_t *in,
                     size_t size)
{
    struct mess_wr w;
    const uint8_t *body = in + MESS_PARAMS_BYTES;
    size_t len = size - MESS_PARAMS_BYTES;
    size_t bound = ZSTD_compressBound(len), z;
    uint8_t *q;
    int rc;

    mess_wr_init(&w);
    mess_wr_bytes(&w, "MESSSTAT", 8);
    mess_wr_u32(&w, MESS_STATE_FILE_VERSION);
    mess_wr_u32(&w, role);
    mess_wr_u32(&w, 0);
    mess_wr_bytes(&w, in, MESS_PARAMS_BYTES);
    mess_wr_u64(&w, len);
    mess_wr_u64(&w, 0); /* stored length, patched below */
    q = mess_wr_reserve(&w, bound + SUM_BYTES);
    if (!q) {
        mess_wr_free(&w);
        return -1;
    }
    z = ZSTD_compress(q, bound, body, len, 1);
    if (ZSTD_isError(z))
        fuzz_fail("zstd cannot compress");
    mess_store_u64(q - 8, z);
    w.len = (size_t)(q - w.p) + z + SUM_BYTES;
    crypto_generichash(w.p + w.len - SUM_BYTES, SUM_BYTES, w.p, w.len - SUM_BYTES,
                       NULL, 0);
    rc = fuzz_write_file(path, w.p, w.len);
    mess_wr_free(&w);
    return rc;
}

int fuzz_state_file(const char *path, uint32_t role, const uint8_t *data,
                    size_t size)
{
    uint8_t *copy;
    int rc;
    if (size == 0)
        return fuzz_write_file(path, data, 0);
    switch (data[0] % 3) {
    case 1:
        if (size - 1 < MESS_PARAMS_BYTES)
            return fuzz_write_file(path, data + 1, size - 1);
        return wrap_body(path, role, data + 1, size - 1);
    case 2:
        if (size - 1 < SUM_BYTES)
            return fuzz_write_file(path, data + 1, size - 1);
        copy = (uint8_t *)malloc(size - 1);
        if (!copy)
            return -1;
        memcpy(copy, data + 1, size - 1);
        crypto_generichash(copy + size - 1 - SUM_BYTES, SUM_BYTES, copy,
                           size - 1 - SUM_BYTES, NULL, 0);
        rc = fuzz_write_file(path, copy, size - 1);
        free(copy);
        return rc;
    default:
        return fuzz_write_file(path, data + 1, size - 1);
    }
}
