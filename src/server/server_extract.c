/*
 * server_extract.c - a shard group's directory made from a server
 * directory (mess_server_extract, PLAN D20), and where a handle stands in
 * its directory's history (mess_server_log_position).
 *
 * The extract copies, for each shard of the set, the graph file, its
 * delta chain (docs/PROTOCOL.md "Proportional checkpoint") and the
 * arena's valid bytes the source's MANIFEST names (the graph checked
 * against the manifest's digest while it is copied), writes empty files
 * for every other shard (as mess_server_create does), a MANIFEST of the
 * source's generation and an empty write-ahead log, all in a temporary
 * directory next to the destination that is opened once (every graph
 * attached, every length checked) and then renamed into place.  Files
 * are copied, never hard-linked: an arena is appended to in place by a
 * later checkpoint, which must not reach the source.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "atomicfile.h"
#include "server.h"
#include "wal.h"

#define COPY_CHUNK ((size_t)1 << 20)

/* Copies the first `want` bytes of regular file src (exactly `want` long,
 * or at least: an arena may carry bytes past its valid length) into the
 * new file dst, fsync'd.  digest: the BLAKE2b-256 the copied bytes must
 * have (a graph file), or NULL. */
static int copy_file(const char *src, const char *dst, uint64_t want, int at_least,
                     const uint8_t *digest, uint8_t *buf, char *msg, size_t cap)
{
    crypto_generichash_state h;
    struct stat st;
    uint64_t done = 0;
    int in, out, rc = MESS_OK, err = 0;

    in = atomicfile_open_regular(src, O_RDONLY, 0);
    if (in < 0 && (errno == ELOOP || errno == EINVAL))
        return mess_fail(msg, cap, MESS_EFORMAT, "%s: %s", mess_base_name(src),
                         errno == ELOOP ? STORE_LINK_REFUSED : "not a regular file");
    if (in < 0)
        return mess_fail(msg, cap, MESS_EIO, "%s: %s", mess_base_name(src), strerror(errno));
    if (fstat(in, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(in);
        return mess_fail(msg, cap, MESS_EFORMAT, "%s: not a regular file", mess_base_name(src));
    }
    if (at_least ? (uint64_t)st.st_size < want : (uint64_t)st.st_size != want) {
        close(in);
        return mess_fail(msg, cap, MESS_EFORMAT, "%s: %llu bytes, the manifest says %llu%s",
                    mess_base_name(src), (unsigned long long)st.st_size,
                    (unsigned long long)want, at_least ? " (truncated)" : "");
    }
    out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0) {
        err = errno;
        close(in);
        errno = err;
        return mess_fail(msg, cap, MESS_EIO, "%s: %s", dst, strerror(err));
    }
    crypto_generichash_init(&h, NULL, 0, STORE_DIGEST_BYTES);
    while (rc == MESS_OK && done < want) {
        size_t n = want - done < COPY_CHUNK ? (size_t)(want - done) : COPY_CHUNK;
        ssize_t k = read(in, buf, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            err = k < 0 ? errno : 0;
            rc = mess_fail(msg, cap, MESS_EIO, "%s: %s", mess_base_name(src),
                      err ? strerror(err) : "shorter than its size");
            break;
        }
        crypto_generichash_update(&h, buf, (size_t)k);
        if (store_write_all(out, buf, (size_t)k) != MESS_OK) {
            err = errno;
            rc = mess_fail(msg, cap, MESS_EIO, "%s: %s", dst, strerror(err));
        }
        done += (uint64_t)k;
    }
    if (rc == MESS_OK && digest) {
        uint8_t sum[STORE_DIGEST_BYTES];
        crypto_generichash_final(&h, sum, sizeof sum);
        if (sodium_memcmp(sum, digest, sizeof sum) != 0)
            rc = mess_fail(msg, cap, MESS_EFORMAT,
                      "%s: digest differs from the manifest's (modified)", mess_base_name(src));
    }
    if (rc == MESS_OK && fsync(out) != 0) {
        err = errno;
        rc = mess_fail(msg, cap, MESS_EIO, "%s: %s", dst, strerror(err));
    }
    if (close(out) != 0 && rc == MESS_OK) {
        err = errno;
        rc = mess_fail(msg, cap, MESS_EIO, "%s: %s", dst, strerror(err));
    }
    close(in);
    if (err)
        errno = err;
    return rc;
}

/* Shard j of a server of parameters p with nothing in it: an empty graph
 * file and an empty arena of generation gen in dir, and their record. */
static int write_empty(const mess_params *p, uint32_t j, const char *dir, uint64_t gen,
                       struct store_shard *rec, char *msg, size_t cap)
{
    struct hnsw_params hp = server_graph_params(p, j);
    struct hnsw *g = NULL;
    struct stat st;
    char *path;
    int fd, rc, err = 0;

    memset(rec, 0, sizeof *rec);
    rec->graph_gen = rec->arena_gen = gen;
    rc = hnsw_new(&hp, &g);
    if (rc != MESS_OK)
        return mess_fail(msg, cap, rc, "shard %u: cannot make an empty graph", (unsigned)j);
    path = store_file_path(dir, NULL, j, gen, "graph");
    fd = path ? open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644) : -1;
    if (fd < 0)
        rc = path ? MESS_EIO : MESS_ENOMEM;
    if (rc == MESS_OK)
        rc = hnsw_write_graph(g, fd, rec->graph_digest);
    if (rc == MESS_OK && fstat(fd, &st) != 0)
        rc = MESS_EIO;
    if (rc == MESS_OK)
        rec->graph_bytes = (uint64_t)st.st_size;
    if (rc == MESS_OK && fsync(fd) != 0)
        rc = MESS_EIO;
    if (fd >= 0 && close(fd) != 0 && rc == MESS_OK)
        rc = MESS_EIO;
    err = errno;
    hnsw_free(g);
    free(path);
    if (rc == MESS_OK) {
        path = store_file_path(dir, NULL, j, gen, "arena");
        fd = path ? open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644) : -1;
        if (fd < 0)
            rc = path ? MESS_EIO : MESS_ENOMEM;
        if (rc == MESS_OK && fsync(fd) != 0)
            rc = MESS_EIO;
        if (fd >= 0 && close(fd) != 0 && rc == MESS_OK)
            rc = MESS_EIO;
        err = errno;
        free(path);
    }
    if (rc != MESS_OK) {
        errno = err;
        return mess_fail(msg, cap, rc, "shard %u: cannot write its empty files: %s", (unsigned)j,
                    rc == MESS_EIO ? strerror(err) : mess_strerror(rc));
    }
    return MESS_OK;
}

/* Removes the temporary directory and whatever is in it (only files). */
static void remove_tree(const char *dir)
{
    int err = errno;
    DIR *d = opendir(dir);
    struct dirent *e;
    if (d) {
        while ((e = readdir(d)) != NULL) {
            char *p;
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            p = store_file_path(dir, e->d_name, 0, 0, NULL);
            if (p)
                unlink(p);
            free(p);
        }
        closedir(d);
    }
    rmdir(dir);
    errno = err;
}

/* The directory that holds path (for the fsync after the rename), malloc'd. */
static char *parent_of(const char *path)
{
    size_t n = strlen(path);
    char *p;
    while (n > 1 && path[n - 1] == '/')
        n--; /* "a/b/" is "a/b" */
    while (n > 0 && path[n - 1] != '/')
        n--;
    while (n > 1 && path[n - 1] == '/')
        n--;
    p = (char *)malloc(n ? n + 1 : 2);
    if (!p)
        return NULL;
    if (n == 0)
        strcpy(p, ".");
    else {
        memcpy(p, path, n);
        p[n] = '\0';
    }
    return p;
}

int mess_server_extract(const char *src_dir, const uint32_t *shards, size_t nshards,
                        const char *dst_dir, char *msg, size_t cap)
{
    struct store_manifest m;
    struct store_shard *rec = NULL;
    struct stat st;
    struct wal *w = NULL;
    mess_server *hs = NULL, *check = NULL;
    struct mess_wr mw;
    uint8_t *want = NULL, *buf = NULL;
    char *tmp = NULL, *path = NULL, *from = NULL, *parent = NULL;
    char why[256];
    uint32_t j, k;
    int rc, made = 0, fd;

    if (msg && cap)
        msg[0] = '\0';
    memset(&m, 0, sizeof m);
    if (!src_dir || !dst_dir || !shards || nshards == 0 || (cap && !msg) ||
        !*src_dir || !*dst_dir)
        return mess_fail(msg, cap, MESS_EINVAL, "invalid argument");
    if (sodium_init() < 0)
        return MESS_ECRYPTO;
    if (lstat(dst_dir, &st) == 0) {
        errno = EEXIST;
        return mess_fail(msg, cap, MESS_EEXIST, "%s exists (the extract makes a new directory)",
                    dst_dir);
    }
    if (errno != ENOENT) {
        int err = errno;
        rc = mess_fail(msg, cap, MESS_EIO, "%s: %s", dst_dir, strerror(err));
        errno = err;
        return rc;
    }
    rc = store_read_manifest(src_dir, &m, msg, cap);
    if (rc != MESS_OK)
        return rc;
    want = (uint8_t *)calloc(m.p.shards, 1);
    rec = (struct store_shard *)mess_calloc_array(m.p.shards, sizeof *rec);
    buf = (uint8_t *)malloc(COPY_CHUNK);
    if (!want || !rec || !buf) {
        rc = mess_fail(msg, cap, MESS_ENOMEM, "out of memory");
        goto done;
    }
    rc = store_shard_set(shards, nshards, m.p.shards, want, msg, cap);
    if (rc != MESS_OK)
        goto done;
    /* The files hold the source's state at its generation; updates in its
     * log after it would be lost (a group is extracted from a finished,
     * checkpointed server). */
    path = store_file_path(src_dir, "wal", 0, 0, NULL);
    if (!path) {
        rc = mess_fail(msg, cap, MESS_ENOMEM, "out of memory");
        goto done;
    }
    why[0] = '\0';
    rc = wal_open(path, m.generation, WAL_READONLY, &w, why, sizeof why);
    free(path);
    path = NULL;
    if (rc != MESS_OK) {
        rc = mess_fail(msg, cap, rc, "%s/wal: %s", src_dir,
                  why[0] ? why : "cannot read the write-ahead log");
        goto done;
    }
    if (wal_count(w) > 0) {
        rc = mess_fail(msg, cap, MESS_ESTATE,
                  "%s/wal holds %llu updates after generation %llu: checkpoint the source "
                  "first", src_dir, (unsigned long long)wal_count(w),
                  (unsigned long long)m.generation);
        goto done;
    }
    rc = server_alloc(&m.p, 0, &hs);
    if (rc != MESS_OK) {
        rc = mess_fail(msg, cap, rc, "cannot make the server handle");
        goto done;
    }
    hs->owned = m.owned;
    memcpy(hs->owner, m.owner, MESS_OWNER_BYTES);

    /* a temporary directory next to dst: the rename into place is the
     * commit, so a failure or a crash never leaves a half-written dst */
    tmp = (char *)malloc(strlen(dst_dir) + 16);
    if (!tmp) {
        rc = mess_fail(msg, cap, MESS_ENOMEM, "out of memory");
        goto done;
    }
    strcpy(tmp, dst_dir);
    while (strlen(tmp) > 1 && tmp[strlen(tmp) - 1] == '/')
        tmp[strlen(tmp) - 1] = '\0';
    strcat(tmp, ".tmp-XXXXXX");
    if (!mkdtemp(tmp)) {
        int err = errno;
        rc = mess_fail(msg, cap, MESS_EIO, "cannot make a directory next to %s: %s", dst_dir,
                  strerror(err));
        errno = err;
        goto done;
    }
    made = 1;
    for (j = 0; j < m.p.shards && rc == MESS_OK; j++) {
        const struct store_shard *e = &m.shard[j];
        if (!want[j]) {
            rc = write_empty(&m.p, j, tmp, m.generation, &rec[j], msg, cap);
            continue;
        }
        rec[j] = *e;
        from = store_file_path(src_dir, NULL, j, e->graph_gen, "graph");
        path = store_file_path(tmp, NULL, j, e->graph_gen, "graph");
        rc = from && path ? copy_file(from, path, e->graph_bytes, 0, e->graph_digest, buf,
                                      msg, cap)
                          : mess_fail(msg, cap, MESS_ENOMEM, "out of memory");
        free(from);
        free(path);
        from = path = NULL;
        for (k = 0; k < e->chain_len && rc == MESS_OK; k++) {
            /* the shard's delta chain (its digests are checked when the
             * copy is opened below: a delta's digest covers all its bytes
             * but the last 32, which hold it) */
            from = store_file_path(src_dir, NULL, j, e->chain[k].gen, "delta");
            path = store_file_path(tmp, NULL, j, e->chain[k].gen, "delta");
            rc = from && path ? copy_file(from, path, e->chain[k].bytes, 0, NULL, buf,
                                          msg, cap)
                              : mess_fail(msg, cap, MESS_ENOMEM, "out of memory");
            free(from);
            free(path);
            from = path = NULL;
        }
        if (rc != MESS_OK)
            break;
        from = store_file_path(src_dir, NULL, j, e->arena_gen, "arena");
        path = store_file_path(tmp, NULL, j, e->arena_gen, "arena");
        rc = from && path ? copy_file(from, path, e->arena_bytes, 1, NULL, buf, msg, cap)
                          : mess_fail(msg, cap, MESS_ENOMEM, "out of memory");
        free(from);
        free(path);
        from = path = NULL;
    }
    if (rc != MESS_OK)
        goto done;

    mess_wr_init(&mw);
    store_encode_manifest(hs, m.generation, rec, &mw);
    rc = mw.err;
    path = store_file_path(tmp, "MANIFEST", 0, 0, NULL);
    if (rc == MESS_OK && !path)
        rc = MESS_ENOMEM;
    fd = rc == MESS_OK ? open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644) : -1;
    if (rc == MESS_OK && fd < 0)
        rc = MESS_EIO;
    if (rc == MESS_OK)
        rc = store_write_all(fd, mw.p, mw.len);
    if (rc == MESS_OK && fsync(fd) != 0)
        rc = MESS_EIO;
    if (fd >= 0 && close(fd) != 0 && rc == MESS_OK)
        rc = MESS_EIO;
    mess_wr_free(&mw);
    free(path);
    path = NULL;
    if (rc != MESS_OK) {
        int err = errno;
        rc = mess_fail(msg, cap, rc, "MANIFEST: cannot write it: %s",
                  rc == MESS_EIO ? strerror(err) : mess_strerror(rc));
        errno = err;
        goto done;
    }
    /* Opened once as any open does (every graph attached, every length
     * checked against its MANIFEST); the open also makes the empty log. */
    rc = store_open(tmp, &m.p, NULL, 0, STORE_EAGER, &check, why, sizeof why);
    mess_server_free(check);
    if (rc != MESS_OK) {
        rc = mess_fail(msg, cap, rc, "the extracted directory does not open: %s", why);
        goto done;
    }
    if (atomicfile_sync(tmp) != MESS_OK) {
        int err = errno;
        rc = mess_fail(msg, cap, MESS_EIO, "%s: %s", tmp, strerror(err));
        errno = err;
        goto done;
    }
    if (lstat(dst_dir, &st) == 0 || rename(tmp, dst_dir) != 0) {
        /* (rename replaces an empty directory: looked for just before) */
        int err = lstat(dst_dir, &st) == 0 || errno == ENOTEMPTY ? EEXIST : errno;
        rc = mess_fail(msg, cap, err == EEXIST ? MESS_EEXIST : MESS_EIO, "%s: %s", dst_dir,
                  err == EEXIST ? "exists (made while the extract ran)" : strerror(err));
        errno = err;
        goto done;
    }
    made = 0;
    parent = parent_of(dst_dir);
    if (!parent || atomicfile_sync(parent) != MESS_OK) {
        /* dst is complete; only its name's durability is in doubt */
        int err = errno;
        rc = mess_fail(msg, cap, MESS_EIO, "%s: the directory that holds it cannot be synced: %s",
                  dst_dir, parent ? strerror(err) : "out of memory");
        errno = err;
    }
done:
    if (made)
        remove_tree(tmp);
    if (w)
        wal_close(w);
    mess_server_free(hs);
    free(parent);
    free(tmp);
    free(buf);
    free(rec);
    free(want);
    free(m.shard);
    return rc;
}

int mess_server_log_position(const mess_server *s, uint64_t *generation,
                             uint64_t *log_records)
{
    if (generation)
        *generation = 0;
    if (log_records)
        *log_records = 0;
    if (!s || !generation || !log_records || !s->dir)
        return MESS_EINVAL;
    *generation = s->generation;
    *log_records = s->wal ? wal_count(s->wal) : 0;
    return MESS_OK;
}
