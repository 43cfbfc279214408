/*
 * atomicfile.c - a file replaced through a mkstemp temporary in the same
 * directory, fsync and rename, or created without replacing anything
 * through the same temporary and link (see atomicfile.h).  Shared by the
 * state files (statefile.c) and the vector / id files (vecio.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomicfile.h"
#include "mess.h"

int atomicfile_write(struct atomicfile *af, const void *data, size_t len)
{
    const uint8_t *p = (const uint8_t *)data;
    while (len > 0) {
        ssize_t k = write(af->fd, p, len);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return MESS_EIO;
        }
        p += k;
        len -= (size_t)k;
    }
    return MESS_OK;
}

int atomicfile_open_file(const char *path, int flags, unsigned mode, struct stat *st)
{
    int err, fd = open(path, flags | O_NONBLOCK | O_CLOEXEC, (mode_t)mode);
    if (fd < 0)
        return -1;
    if (fstat(fd, st) != 0)
        err = errno;
    else if (!S_ISREG(st->st_mode))
        err = S_ISDIR(st->st_mode) ? EISDIR : EINVAL;
    else
        return fd;
    close(fd);
    errno = err;
    return -1;
}

int atomicfile_open_regular(const char *path, int flags, unsigned mode)
{
    struct stat st;
    int fd;
    st.st_mode = 0; /* set only if the open succeeded */
    fd = atomicfile_open_file(path, flags | O_NOFOLLOW, mode, &st);
    if (fd < 0 && errno == EISDIR && S_ISDIR(st.st_mode))
        errno = EINVAL; /* a directory it opened: EINVAL, as any other kind */
    return fd;
}

int atomicfile_sync(const char *path)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC), rc = MESS_OK, err = 0;
    struct stat st;
    if (fd < 0)
        return MESS_EIO;
    if (fsync(fd) != 0) {
        err = errno;
        if (!(err == EINVAL && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)))
            rc = MESS_EIO;
    }
    close(fd);
    errno = err;
    return rc;
}

/* Syncs the directory holding the path in `copy` (a writable copy: dirname
 * may change it) so the rename itself is durable. */
static int sync_parent(char *copy)
{
    return atomicfile_sync(dirname(copy));
}

int atomicfile_begin(struct atomicfile *af, const char *path, unsigned mode)
{
    static const char suffix[] = ".tmp.XXXXXX";
    size_t plen = strlen(path);
    int err;
    af->fd = -1;
    af->tmp = (char *)malloc(plen + sizeof suffix);
    af->dir = strdup(path);
    if (!af->tmp || !af->dir) {
        free(af->tmp);
        free(af->dir);
        af->tmp = af->dir = NULL;
        return MESS_ENOMEM;
    }
    memcpy(af->tmp, path, plen);
    memcpy(af->tmp + plen, suffix, sizeof suffix);
    af->fd = mkstemp(af->tmp);
    if (af->fd >= 0 && fchmod(af->fd, (mode_t)mode) != 0) {
        err = errno;
        close(af->fd);
        unlink(af->tmp);
        af->fd = -1;
        errno = err;
    }
    if (af->fd < 0) {
        err = errno;
        free(af->tmp);
        free(af->dir);
        af->tmp = af->dir = NULL;
        errno = err;
        return MESS_EIO;
    }
    return MESS_OK;
}

/* Gives the fsync'd temporary its final name.  Replacing: rename(2) over
 * path.  Creating: link(2) to path, which fails with EEXIST if anything
 * is there (a file, a directory, a symlink, dangling or not: link follows
 * neither name), so of two processes creating one path exactly one wins;
 * the temporary's own name is then removed (a crash in between leaves it
 * as a stray PATH.tmp.XXXXXX beside a complete file).  On failure the
 * temporary is removed too.  MESS_OK, MESS_EEXIST (errno EEXIST), or
 * MESS_EIO with errno set. */
static int publish(const char *tmp, const char *path, int create)
{
    int rc = MESS_OK, err = 0;
    if (create ? link(tmp, path) != 0 : rename(tmp, path) != 0) {
        err = errno;
        rc = err == EEXIST && create ? MESS_EEXIST : MESS_EIO;
    }
    if (create || rc != MESS_OK)
        unlink(tmp);
    errno = err;
    return rc;
}

static int end(struct atomicfile *af, const char *path, int rc, int create)
{
    int err = errno;
    if (rc == MESS_OK && fsync(af->fd) != 0) {
        rc = MESS_EIO;
        err = errno;
    }
    if (close(af->fd) != 0 && rc == MESS_OK) {
        rc = MESS_EIO;
        err = errno;
    }
    if (rc != MESS_OK)
        unlink(af->tmp);
    else if ((rc = publish(af->tmp, path, create)) != MESS_OK)
        err = errno;
    else if ((rc = sync_parent(af->dir)) != MESS_OK)
        err = errno;
    free(af->tmp);
    free(af->dir);
    af->tmp = af->dir = NULL;
    af->fd = -1;
    errno = err;
    return rc;
}

int atomicfile_end(struct atomicfile *af, const char *path, int rc)
{
    return end(af, path, rc, 0);
}

int atomicfile_end_new(struct atomicfile *af, const char *path, int rc)
{
    return end(af, path, rc, 1);
}

int atomicfile_replace(const char *path, const uint8_t *data, size_t len,
                       unsigned mode)
{
    struct atomicfile af;
    int rc = atomicfile_begin(&af, path, mode);
    if (rc != MESS_OK)
        return rc;
    return atomicfile_end(&af, path, atomicfile_write(&af, data, len));
}

int atomicfile_create(const char *path, const uint8_t *data, size_t len,
                      unsigned mode)
{
    struct atomicfile af;
    int rc = atomicfile_begin(&af, path, mode);
    if (rc != MESS_OK)
        return rc;
    return atomicfile_end_new(&af, path, atomicfile_write(&af, data, len));
}
