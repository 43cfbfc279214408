/*
 * fuzz_vecs.c - the TEXMEX readers (.fvecs, .ivecs, .bvecs, and the
 * by-extension float reader).  The first input byte picks the reader; the
 * rest is the file.  Accepted files must satisfy n * (4 + dim * elem) ==
 * file size.
 */
#include <unistd.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const suffix[5] = {".fvecs", ".ivecs", ".bvecs", ".fvecs",
                                          ".bvecs"};
    static const size_t elem[5] = {4, 4, 1, 4, 1};
    unsigned which;
    const char *path;
    void *v = NULL;
    size_t n = 0, dim = 0;
    int rc;

    if (size == 0)
        return 0;
    which = data[0] % 5;
    path = fuzz_tmp_path(suffix[which]);
    if (fuzz_write_file(path, data + 1, size - 1) != 0)
        return 0;
    switch (which) {
    case 0: rc = mess_fvecs_read(path, (float **)&v, &n, &dim); break;
    case 1: rc = mess_ivecs_read(path, (int32_t **)&v, &n, &dim); break;
    case 2: rc = mess_bvecs_read(path, (uint8_t **)&v, &n, &dim); break;
    default: rc = mess_vecs_read_f32(path, (float **)&v, &n, &dim); break;
    }
    if (rc == MESS_OK) {
        size_t file_elem = which == 4 ? 1 : elem[which];
        if (dim == 0 || dim > MESS_MAX_DIM || n * (4 + dim * file_elem) != size - 1)
            fuzz_fail("accepted a vecs file of the wrong shape");
        if (n > 0) /* touch the last component: it must be inside the array */
            ((volatile uint8_t *)v)[n * dim * (which >= 3 ? 4 : elem[which]) - 1];
    } else if (v || n || dim) {
        fuzz_fail("a failed read left outputs");
    }
    mess_vecs_free(v);
    unlink(path);
    return 0;
}
