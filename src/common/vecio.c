/*
 * vecio.c - readers and writers for the TEXMEX vector formats
 * (.fvecs / .ivecs / .bvecs) and .u64vecs (64-bit ids), validating every
 * record header.  MESS_EIO leaves errno as the failing system call set it
 * (EISDIR for a directory, EINVAL for another non-regular file).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomicfile.h"
#include "internal.h"

/* Reads a whole vecs file of elem-byte components into a fresh array.
 * The file must be a whole number of records, all of the same dim. */
static int vecs_read(const char *path, size_t elem, void **out, size_t *n_out,
                     size_t *dim_out)
{
    FILE *f;
    struct stat st;
    uint8_t hdr[4];
    uint32_t dim, d;
    size_t rec, n, i, row, total;
    uint8_t *buf = NULL;
    int rc = MESS_EFORMAT, err = 0, fd;

    if (!path || !out || !n_out || !dim_out)
        return MESS_EINVAL;
    *out = NULL;
    *n_out = *dim_out = 0;
    fd = atomicfile_open_file(path, O_RDONLY, 0, &st); /* regular, a FIFO never waited on */
    if (fd < 0)
        return MESS_EIO; /* errno: open's, EISDIR or EINVAL */
    f = fdopen(fd, "rb");
    if (!f) {
        err = errno;
        close(fd);
        errno = err;
        return MESS_EIO;
    }
    if (fread(hdr, 1, 4, f) != 4)
        goto short_read; /* empty or shorter than one header */
    dim = mess_load_u32(hdr);
    if (dim == 0 || dim > MESS_MAX_DIM)
        goto done;
    row = (size_t)dim * elem;
    rec = 4 + row;
    if ((uint64_t)st.st_size % rec != 0)
        goto done;
    n = (size_t)((uint64_t)st.st_size / rec);
    if (mess_mul_size(n, row, &total) != MESS_OK) {
        rc = MESS_ELIMIT;
        goto done;
    }
    buf = (uint8_t *)malloc(total ? total : 1);
    if (!buf) {
        rc = MESS_ENOMEM;
        goto done;
    }
    for (i = 0; i < n; i++) {
        if (i > 0) {
            if (fread(hdr, 1, 4, f) != 4)
                goto short_read;
            d = mess_load_u32(hdr);
            if (d != dim)
                goto done;
        }
        if (fread(buf + i * row, 1, row, f) != row)
            goto short_read;
    }
    *out = buf;
    buf = NULL;
    *n_out = n;
    *dim_out = dim;
    rc = MESS_OK;
    goto done;
short_read: /* a read error is the system's; end of file is the format's */
    if (ferror(f)) {
        err = errno ? errno : EIO;
        rc = MESS_EIO;
    }
done:
    free(buf);
    fclose(f);
    if (rc == MESS_EIO)
        errno = err;
    return rc;
}

int mess_fvecs_read(const char *path, float **out, size_t *n, size_t *dim)
{
    return vecs_read(path, 4, (void **)out, n, dim);
}

int mess_ivecs_read(const char *path, int32_t **out, size_t *n, size_t *dim)
{
    return vecs_read(path, 4, (void **)out, n, dim);
}

int mess_bvecs_read(const char *path, uint8_t **out, size_t *n, size_t *dim)
{
    return vecs_read(path, 1, (void **)out, n, dim);
}

int mess_u64vecs_read(const char *path, uint64_t **out, size_t *n, size_t *dim)
{
    return vecs_read(path, 8, (void **)out, n, dim);
}

static int has_suffix(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

int mess_vecs_read_f32(const char *path, float **out, size_t *n, size_t *dim)
{
    uint8_t *b;
    float *f;
    size_t i, total;
    int rc;

    if (!path || !out || !n || !dim)
        return MESS_EINVAL;
    if (has_suffix(path, ".fvecs"))
        return mess_fvecs_read(path, out, n, dim);
    if (!has_suffix(path, ".bvecs"))
        return MESS_EINVAL;
    rc = mess_bvecs_read(path, &b, n, dim);
    if (rc != MESS_OK)
        return rc;
    total = *n * *dim; /* fits: the bytes were allocated */
    f = (float *)mess_malloc_array(total, sizeof(float));
    if (!f) {
        free(b);
        *n = *dim = 0;
        return MESS_ENOMEM;
    }
    for (i = 0; i < total; i++)
        f[i] = (float)b[i];
    free(b);
    *out = f;
    return MESS_OK;
}

/* Writes through atomicfile.c (the state files' mkstemp temporary next to
 * PATH, fsync, rename), so a crash never leaves a torn file under the
 * final name and a symlink planted at PATH.tmp (or any temporary name) is
 * never followed.  The new file is 0600, like the client file: vectors
 * and result ids are the user's data, and a umask cannot be read without
 * changing it (not safe in a library that threads call). */
static int vecs_write(const char *path, const void *v, size_t n, size_t dim,
                      size_t elem)
{
    struct atomicfile af;
    uint8_t *buf;
    size_t i, row, cap, used = 0;
    int rc;

    if (!path || (!v && n) || dim == 0 || dim > MESS_MAX_DIM)
        return MESS_EINVAL;
    row = dim * elem;
    /* whole records per write: 64 KiB, or one record if it is larger */
    cap = 4 + row > 65536 ? 4 + row : 65536;
    buf = (uint8_t *)malloc(cap);
    if (!buf)
        return MESS_ENOMEM;
    rc = atomicfile_begin(&af, path, 0600);
    if (rc != MESS_OK) {
        free(buf);
        return rc;
    }
    for (i = 0; rc == MESS_OK && i < n; i++) {
        if (used + 4 + row > cap) {
            rc = atomicfile_write(&af, buf, used);
            used = 0;
        }
        mess_store_u32(buf + used, (uint32_t)dim);
        memcpy(buf + used + 4, (const uint8_t *)v + i * row, row);
        used += 4 + row;
    }
    if (rc == MESS_OK && used)
        rc = atomicfile_write(&af, buf, used);
    free(buf);
    return atomicfile_end(&af, path, rc);
}

int mess_fvecs_write(const char *path, const float *v, size_t n, size_t dim)
{
    return vecs_write(path, v, n, dim, 4);
}

int mess_ivecs_write(const char *path, const int32_t *v, size_t n, size_t dim)
{
    return vecs_write(path, v, n, dim, 4);
}

int mess_bvecs_write(const char *path, const uint8_t *v, size_t n, size_t dim)
{
    return vecs_write(path, v, n, dim, 1);
}

int mess_u64vecs_write(const char *path, const uint64_t *v, size_t n, size_t dim)
{
    return vecs_write(path, v, n, dim, 8);
}

void mess_vecs_free(void *p)
{
    free(p);
}
