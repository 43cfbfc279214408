/*
 * wal.c - the write-ahead log of a directory-backed server: records of
 * validated upload / delete buffers, appended with one write + fdatasync,
 * scanned as hostile input on open (see wal.h for the format and rules).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <sodium.h>

#include "atomicfile.h"
#include "wal.h"

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

static int kind_known(uint32_t kind)
{
    return kind == WAL_UPLOAD || kind == WAL_DELETE || kind == WAL_COMPACT;
}

/* Whether a complete record starts at pos (magic, a length that fits,
 * the checksum).  *body_len is its body length when it does; otherwise
 * *why says what is wrong.  *hashed adds the bytes hashed. */
static int complete_at(const uint8_t *buf, size_t len, size_t pos, size_t *body_len,
                       const char **why, uint64_t *hashed)
{
    uint8_t sum[WAL_SUM_BYTES];
    uint64_t blen;
    size_t left = len - pos;
    if (left < WAL_OVERHEAD) {
        *why = "cut short";
        return 0;
    }
    if (mess_load_u32(buf + pos) != WAL_MAGIC) {
        *why = "no record magic";
        return 0;
    }
    blen = mess_load_u64(buf + pos + 24);
    if (blen > WAL_MAX_BODY || blen > (uint64_t)(left - WAL_OVERHEAD)) {
        *why = "length past the end of the log";
        return 0;
    }
    *hashed += WAL_HEAD_BYTES + blen;
    crypto_generichash(sum, sizeof sum, buf + pos, WAL_HEAD_BYTES + (size_t)blen, NULL, 0);
    if (memcmp(sum, buf + pos + WAL_HEAD_BYTES + (size_t)blen, WAL_SUM_BYTES) != 0) {
        *why = "checksum mismatch";
        return 0;
    }
    *body_len = (size_t)blen;
    return 1;
}

/* After a damaged record at bad: the offset of the first complete record
 * after it, len if there is none, or SIZE_MAX if finding out would hash
 * more than the budget (wal.h). */
static size_t complete_after(const uint8_t *buf, size_t len, size_t bad)
{
    uint64_t budget = 2 * (uint64_t)(len - bad) + ((uint64_t)1 << 20), hashed = 0;
    size_t q, blen;
    const char *why;
    for (q = bad + 1; q < len && len - q >= WAL_OVERHEAD; q++) {
        const uint8_t *hit = (const uint8_t *)memchr(buf + q, (int)(WAL_MAGIC & 0xff),
                                                     len - q - WAL_OVERHEAD + 1);
        uint64_t cand;
        if (!hit)
            break;
        q = (size_t)(hit - buf);
        if (mess_load_u32(hit) != WAL_MAGIC || !kind_known(mess_load_u32(hit + 4)))
            continue;
        cand = mess_load_u64(hit + 24);
        if (cand > WAL_MAX_BODY || cand > (uint64_t)(len - q - WAL_OVERHEAD))
            continue;
        if (hashed + WAL_HEAD_BYTES + cand > budget)
            return SIZE_MAX;
        if (complete_at(buf, len, q, &blen, &why, &hashed))
            return q;
    }
    return len;
}

int wal_scan(const uint8_t *buf, size_t len, uint64_t gen, struct wal_scan *out,
             char *msg, size_t cap)
{
    size_t pos = 0, blen, next;
    uint64_t hashed = 0;
    const char *why = "";
    memset(out, 0, sizeof *out);
    if (msg && cap)
        msg[0] = '\0';
    while (pos < len) {
        uint32_t kind;
        uint64_t rgen, seq;
        if (!complete_at(buf, len, pos, &blen, &why, &hashed))
            break;
        kind = mess_load_u32(buf + pos + 4);
        rgen = mess_load_u64(buf + pos + 8);
        seq = mess_load_u64(buf + pos + 16);
        if (!kind_known(kind)) {
            mess_say(msg, cap, "write-ahead log: record %llu at byte %zu has unknown kind %lu",
                (unsigned long long)out->records, pos, (unsigned long)kind);
            goto corrupt;
        }
        if (out->records == 0) {
            if (rgen > gen) {
                mess_say(msg, cap,
                    "write-ahead log: record 0 is of generation %llu, newer than the "
                    "manifest's %llu",
                    (unsigned long long)rgen, (unsigned long long)gen);
                goto corrupt;
            }
            out->log_gen = rgen;
        } else if (rgen != out->log_gen) {
            mess_say(msg, cap,
                "write-ahead log: record %llu at byte %zu is of generation %llu, "
                "the records before it of %llu",
                (unsigned long long)out->records, pos, (unsigned long long)rgen,
                (unsigned long long)out->log_gen);
            goto corrupt;
        }
        if (seq != out->records) {
            mess_say(msg, cap,
                "write-ahead log: record %llu at byte %zu has sequence number %llu "
                "(a record is missing or repeated)",
                (unsigned long long)out->records, pos, (unsigned long long)seq);
            goto corrupt;
        }
        out->records++;
        pos += WAL_OVERHEAD + blen;
    }
    out->valid = pos;
    out->cut = len - pos;
    out->stale = out->records > 0 && out->log_gen < gen;
    if (pos < len) {
        next = complete_after(buf, len, pos);
        if (next == SIZE_MAX) {
            mess_say(msg, cap,
                "write-ahead log: record %llu at byte %zu is damaged (%s) and too many "
                "candidate records follow it to tell a torn tail from corruption",
                (unsigned long long)out->records, pos, why);
            goto corrupt;
        }
        if (next < len) {
            mess_say(msg, cap,
                "write-ahead log: record %llu at byte %zu is damaged (%s) but a complete "
                "record follows at byte %zu: the log is corrupt, not torn",
                (unsigned long long)out->records, pos, why, next);
            goto corrupt;
        }
    }
    return MESS_OK;
corrupt:
    memset(out, 0, sizeof *out);
    return MESS_EFORMAT;
}

int wal_scan_next(const uint8_t *buf, const struct wal_scan *sc, size_t *pos,
                  struct wal_record *rec)
{
    size_t p = *pos;
    if (sc->stale || p >= sc->valid || sc->valid - p < WAL_OVERHEAD)
        return 0;
    rec->kind = mess_load_u32(buf + p + 4);
    rec->seq = mess_load_u64(buf + p + 16);
    rec->len = (size_t)mess_load_u64(buf + p + 24);
    rec->body = buf + p + WAL_HEAD_BYTES;
    rec->offset = p;
    *pos = p + WAL_OVERHEAD + rec->len;
    return 1;
}

static void encode_head(uint8_t head[WAL_HEAD_BYTES], uint32_t kind, uint64_t gen,
                        uint64_t seq, size_t len)
{
    mess_store_u32(head, WAL_MAGIC);
    mess_store_u32(head + 4, kind);
    mess_store_u64(head + 8, gen);
    mess_store_u64(head + 16, seq);
    mess_store_u64(head + 24, (uint64_t)len);
}

static void record_sum(uint8_t sum[WAL_SUM_BYTES], const uint8_t head[WAL_HEAD_BYTES],
                       const uint8_t *body, size_t len)
{
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, WAL_SUM_BYTES);
    crypto_generichash_update(&st, head, WAL_HEAD_BYTES);
    if (len)
        crypto_generichash_update(&st, body, len);
    crypto_generichash_final(&st, sum, WAL_SUM_BYTES);
}

void wal_encode(struct mess_wr *w, uint32_t kind, uint64_t gen, uint64_t seq,
                const uint8_t *body, size_t len)
{
    uint8_t head[WAL_HEAD_BYTES], sum[WAL_SUM_BYTES];
    if ((uint64_t)len > WAL_MAX_BODY) {
        if (!w->err)
            w->err = MESS_ELIMIT;
        return;
    }
    encode_head(head, kind, gen, seq, len);
    record_sum(sum, head, body, len);
    mess_wr_bytes(w, head, sizeof head);
    mess_wr_bytes(w, body, len);
    mess_wr_bytes(w, sum, sizeof sum);
}

/* ---- the file ------------------------------------------------------------- */

struct wal {
    int fd;           /* -1: a missing log opened read-only */
    char *path;
    unsigned flags;
    uint8_t *map;     /* the log as opened, until wal_ready */
    size_t map_len;
    struct wal_scan sc;
    size_t pos;       /* replay position in map */
    uint64_t gen;     /* the manifest generation appends are made for */
    uint64_t count;   /* records of gen in the log */
    uint64_t end;     /* bytes in the file (after wal_ready) */
    size_t open_size; /* the file's size when scanned */
    int ready, broken;
    int claimed;      /* wal_claim done: this handle writes the file */
    int ro_errno;     /* why a writable open fell back to read-only (0: none) */
};

int wal_torn_head(const struct wal *w, uint32_t *kind, uint64_t *seq, uint64_t *len)
{
    uint8_t h[WAL_HEAD_BYTES];
    if (!w || w->fd < 0 || w->sc.stale || w->sc.cut < WAL_HEAD_BYTES ||
        pread(w->fd, h, sizeof h, (off_t)w->sc.valid) != (ssize_t)sizeof h ||
        mess_load_u32(h) != WAL_MAGIC)
        return 0;
    *kind = mess_load_u32(h + 4);
    *seq = mess_load_u64(h + 16);
    *len = mess_load_u64(h + 24);
    return 1;
}

static void unmap(struct wal *w)
{
    if (w->map)
        munmap(w->map, w->map_len);
    w->map = NULL;
    w->map_len = 0;
}

void wal_close(struct wal *w)
{
    if (!w)
        return;
    unmap(w);
    if (w->fd >= 0)
        close(w->fd);
    free(w->path);
    free(w);
}

int wal_open(const char *path, uint64_t gen, unsigned flags, struct wal **out,
             char *msg, size_t cap)
{
    struct wal *w;
    struct stat st;
    int rc = MESS_OK, ro = (flags & WAL_READONLY) != 0;
    static const uint8_t none[1] = {0};

    if (msg && cap)
        msg[0] = '\0';
    if (!out)
        return MESS_EINVAL;
    *out = NULL;
    if (!path)
        return MESS_EINVAL;
    w = (struct wal *)calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        return MESS_ENOMEM;
    }
    w->flags = flags;
    w->gen = gen;
    w->fd = atomicfile_open_regular(path, ro ? O_RDONLY : O_RDWR, 0);
    if (w->fd < 0 && errno == ENOENT && !ro) {
        /* a missing log is an empty one: create it durably */
        rc = atomicfile_replace(path, none, 0, 0644);
        if (rc == MESS_OK)
            w->fd = atomicfile_open_regular(path, O_RDWR, 0);
        else if (errno == EACCES || errno == EROFS || errno == EPERM) {
            rc = MESS_OK; /* a directory we may not write: read-only below */
            w->ro_errno = errno;
            w->flags |= WAL_READONLY;
            ro = 1;
            errno = ENOENT; /* and no log to read */
        }
    }
    if (w->fd < 0 && !ro && (errno == EACCES || errno == EROFS || errno == EPERM)) {
        /* a log (or directory) we may not write: read it, refuse appends */
        w->ro_errno = errno;
        w->flags |= WAL_READONLY;
        ro = 1;
        w->fd = atomicfile_open_regular(path, O_RDONLY, 0);
    }
    if (rc == MESS_OK && w->fd < 0 && (errno == ELOOP || errno == EINVAL)) {
        /* a link or a non-regular file planted as the log: never followed */
        mess_say(msg, cap, "write-ahead log %s: %s", path,
                 errno == ELOOP ? "a symbolic link (a server directory's files are never followed)"
                                : "not a regular file");
        wal_close(w);
        return MESS_EFORMAT;
    }
    if (rc != MESS_OK || (w->fd < 0 && !(ro && errno == ENOENT))) {
        mess_say(msg, cap, "write-ahead log %s: %s", path, strerror(errno));
        wal_close(w);
        return rc != MESS_OK ? rc : MESS_EIO;
    }
    if (w->fd >= 0) {
        if (fstat(w->fd, &st) != 0) {
            mess_say(msg, cap, "write-ahead log %s: %s", path, strerror(errno));
            wal_close(w);
            return MESS_EIO;
        }
        if (!S_ISREG(st.st_mode)) {
            mess_say(msg, cap, "write-ahead log %s: not a regular file", path);
            wal_close(w);
            return MESS_EFORMAT;
        }
        if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX / 2) {
            mess_say(msg, cap, "write-ahead log %s: too large to map", path);
            wal_close(w);
            return MESS_ELIMIT;
        }
        if (st.st_size > 0) {
            void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, w->fd, 0);
            if (m == MAP_FAILED) {
                mess_say(msg, cap, "write-ahead log %s: cannot map it: %s", path,
                    strerror(errno));
                wal_close(w);
                return MESS_EIO;
            }
            w->map = (uint8_t *)m;
            w->map_len = (size_t)st.st_size;
        }
    }
    rc = wal_scan(w->map, w->map_len, gen, &w->sc, msg, cap);
    if (rc != MESS_OK) {
        wal_close(w);
        return rc;
    }
    w->count = w->sc.stale ? 0 : w->sc.records;
    w->end = w->sc.valid;
    w->open_size = w->map_len;
    *out = w;
    return MESS_OK;
}

const struct wal_scan *wal_info(const struct wal *w)
{
    return &w->sc;
}

int wal_replay_next(struct wal *w, struct wal_record *rec)
{
    if (w->ready || !w->map)
        return 0;
    return wal_scan_next(w->map, &w->sc, &w->pos, rec);
}

/* A fresh empty log under the path, then the descriptor switched to it. */
static int replace_empty(struct wal *w, uint64_t gen)
{
    static const uint8_t none[1] = {0};
    int fd, rc = atomicfile_replace(w->path, none, 0, 0644);
    if (rc == MESS_OK) {
        fd = atomicfile_open_regular(w->path, O_RDWR, 0);
        if (fd < 0)
            rc = MESS_EIO;
        else {
            close(w->fd);
            w->fd = fd;
        }
    }
    if (rc != MESS_OK) {
        w->broken = 1;
        return rc;
    }
    w->gen = gen;
    w->count = 0;
    w->end = 0;
    return MESS_OK;
}

int wal_ready(struct wal *w)
{
    if (!w)
        return MESS_EINVAL;
    unmap(w);
    w->ready = 1; /* the file is not changed here: see wal_claim */
    return MESS_OK;
}

int wal_claim(struct wal *w)
{
    struct stat a, b;
    int rc = MESS_OK;
    if (!wal_writable(w) || !w->ready)
        return MESS_EINVAL;
    if (w->claimed)
        return MESS_OK;
    if (w->broken)
        return MESS_EIO;
    if (fstat(w->fd, &a) != 0 || stat(w->path, &b) != 0)
        return MESS_EIO;
    if (a.st_dev != b.st_dev || a.st_ino != b.st_ino ||
        (uint64_t)a.st_size != (uint64_t)w->open_size) {
        /* replaced (a checkpoint) or written by another handle since this
         * one read it: appending at this handle's end would overwrite or
         * orphan that handle's records */
        errno = ESTALE;
        return MESS_ESTATE;
    }
    if (w->sc.stale)
        rc = replace_empty(w, w->gen);
    else if (w->sc.cut > 0 &&
             (ftruncate(w->fd, (off_t)w->sc.valid) != 0 || fsync(w->fd) != 0)) {
        w->broken = 1;
        rc = MESS_EIO;
    }
    if (rc == MESS_OK)
        w->claimed = 1;
    return rc;
}

/* Writes the iovecs fully at the current offset (a partial writev is
 * continued; EINTR retried). */
static int write_all(int fd, struct iovec *iov, int n)
{
    while (n > 0) {
        ssize_t k = writev(fd, iov, n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        while (n > 0 && (size_t)k >= iov->iov_len) {
            k -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + k;
            iov->iov_len -= (size_t)k;
        }
    }
    return 0;
}

int wal_writable(const struct wal *w)
{
    return w && !(w->flags & WAL_READONLY) && w->fd >= 0;
}

int wal_readonly_errno(const struct wal *w)
{
    return w ? w->ro_errno : 0;
}

int wal_append(struct wal *w, uint32_t kind, const uint8_t *body, size_t len)
{
    uint8_t head[WAL_HEAD_BYTES], sum[WAL_SUM_BYTES];
    struct iovec iov[3];
    int err;
    if (!wal_writable(w) || !w->ready || !w->claimed || !kind_known(kind) ||
        (!body && len))
        return MESS_EINVAL;
    if (w->broken)
        return MESS_EIO;
    if ((uint64_t)len > WAL_MAX_BODY)
        return MESS_ELIMIT;
    encode_head(head, kind, w->gen, w->count, len);
    record_sum(sum, head, body, len);
    iov[0].iov_base = head;
    iov[0].iov_len = sizeof head;
    iov[1].iov_base = (void *)(uintptr_t)body;
    iov[1].iov_len = len;
    iov[2].iov_base = sum;
    iov[2].iov_len = sizeof sum;
    if (lseek(w->fd, (off_t)w->end, SEEK_SET) != (off_t)w->end ||
        write_all(w->fd, iov, 3) != 0 || fdatasync(w->fd) != 0) {
        /* cut back what was written: a torn record followed by a later
         * good one would read as corruption */
        err = errno;
        if (ftruncate(w->fd, (off_t)w->end) != 0 || fdatasync(w->fd) != 0)
            w->broken = 1;
        errno = err;
        return MESS_EIO;
    }
    w->end += WAL_OVERHEAD + (uint64_t)len;
    w->count++;
    return MESS_OK;
}

int wal_reset(struct wal *w, uint64_t gen)
{
    if (!wal_writable(w))
        return MESS_EINVAL;
    unmap(w);
    w->ready = 1;
    w->claimed = 1; /* the caller holds the directory's writer claim */
    return replace_empty(w, gen);
}

uint64_t wal_count(const struct wal *w)
{
    return w->count;
}

uint64_t wal_size(const struct wal *w)
{
    return w->ready ? w->end : (uint64_t)w->map_len;
}

uint64_t wal_generation(const struct wal *w)
{
    return w->gen;
}
