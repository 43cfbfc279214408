/*
 * server_checkpoint.c - writing a server directory (PLAN D14,
 * docs/PROTOCOL.md "Server directory", "Proportional checkpoint"):
 * mess_server_checkpoint writes each changed shard's arena, delta or new
 * graph file and then the MANIFEST, one checkpoint at a time per
 * directory; mess_server_create and mess_server_import write a new
 * directory's first generation the same way, mess_server_export the
 * travel form (server_state.c).  The upper half of the directory with
 * server_open.c, over the store's files (src/store/server_store.c).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "atomicfile.h"
#include "params.h"
#include "server.h"
#include "wal.h"

/* ---- checkpoint ------------------------------------------------------------ */

/* The shard's new arena content as two pieces (arena part, heap tail) from
 * node `from` on. */
static void arena_pieces(const mess_server *s, const struct shard_store *st,
                         size_t from, const uint8_t **a, size_t *alen,
                         const uint8_t **b, size_t *blen)
{
    size_t n = hnsw_count(st->graph), eb = s->entry_bytes;
    size_t split = from < st->base ? st->base : from;
    *a = from < st->base ? st->arena + from * eb : NULL;
    *alen = from < st->base ? (st->base - from) * eb : 0;
    *b = st->entries + (split - st->base) * eb;
    *blen = (n - split) * eb;
}

/* Appends the heap tail to the current arena file after its valid bytes
 * (whatever a crashed checkpoint left past them is cut first). */
static int arena_append(const mess_server *s, const struct shard_store *st,
                        const char *path)
{
    const uint8_t *a, *b;
    size_t alen, blen;
    int fd, rc = MESS_OK;
    arena_pieces(s, st, (size_t)st->nodes, &a, &alen, &b, &blen);
    fd = atomicfile_open_regular(path, O_WRONLY, 0); /* never through a link */
    if (fd < 0)
        return MESS_EIO;
    if (ftruncate(fd, (off_t)st->arena_bytes) != 0 ||
        lseek(fd, (off_t)st->arena_bytes, SEEK_SET) < 0)
        rc = MESS_EIO;
    if (rc == MESS_OK)
        rc = store_write_all(fd, a, alen);
    if (rc == MESS_OK)
        rc = store_write_all(fd, b, blen);
    if (rc == MESS_OK && fsync(fd) != 0)
        rc = MESS_EIO;
    if (close(fd) != 0 && rc == MESS_OK)
        rc = MESS_EIO;
    return rc;
}
/* After a commit: removes every shard-JJJJ-GGGGGGGG.{graph,delta,arena} of
 * a shard this handle holds that the new MANIFEST (records rec) does not
 * name: the files this checkpoint replaced (a folded chain, an old base
 * or arena) and whatever a crashed checkpoint left.  A file a reader still
 * maps keeps its pages. */
static void sweep(const mess_server *s, const struct store_shard *rec)
{
    DIR *d = opendir(s->dir);
    struct dirent *e;
    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name, *ext;
        char *end;
        unsigned long j;
        unsigned long long g;
        int named = 0;
        uint32_t k;
        if (strncmp(n, "shard-", 6) != 0 || !isdigit((unsigned char)n[6]))
            continue;
        j = strtoul(n + 6, &end, 10);
        if (*end != '-' || !isdigit((unsigned char)end[1]))
            continue;
        g = strtoull(end + 1, &end, 10);
        if (*end != '.' || j >= s->p.shards || !s->shards[j].graph)
            continue;
        ext = end + 1;
        if (strcmp(ext, "graph") == 0)
            named = g == rec[j].graph_gen;
        else if (strcmp(ext, "arena") == 0)
            named = g == rec[j].arena_gen;
        else if (strcmp(ext, "delta") == 0) {
            for (k = 0; k < rec[j].chain_len; k++)
                named |= g == rec[j].chain[k].gen;
        } else
            continue;
        if (!named) {
            char *p = store_file_path(s->dir, n, 0, 0, NULL);
            if (p)
                unlink(p);
            free(p);
        }
    }
    closedir(d);
}

/* Writes every changed shard's files for the next generation, then the
 * MANIFEST, and only then changes the handle (mess.h).  fresh: the
 * directory's MANIFEST as it is now (a subset server: the other shards'
 * records come from it, not from what this handle read at open) or NULL. */
static int checkpoint_locked(mess_server *s, const struct store_manifest *fresh)
{
    uint32_t M = s->p.shards, j;
    uint64_t gen = s->generation + 1;
    struct store_shard *rec;
    uint8_t *made; /* 1: new graph file, 2: new arena file (to remove on failure) */
    struct mess_wr w;
    char *path = NULL, *tmp = NULL;
    int rc = MESS_OK, committed = 0;

    if (fresh && fresh->generation >= gen)
        gen = fresh->generation + 1;
    rec = (struct store_shard *)mess_calloc_array(M, sizeof *rec);
    made = (uint8_t *)calloc(M, 1);
    if (!rec || !made) {
        free(rec);
        free(made);
        return MESS_ENOMEM;
    }
    for (j = 0; j < M && rc == MESS_OK; j++) {
        struct shard_store *st = &s->shards[j];
        rec[j].graph_gen = st->graph_gen;
        rec[j].graph_bytes = st->graph_bytes;
        memcpy(rec[j].graph_digest, st->graph_digest, STORE_DIGEST_BYTES);
        rec[j].nodes = st->nodes;
        rec[j].arena_gen = st->arena_gen;
        rec[j].arena_bytes = st->arena_bytes;
        rec[j].chain_len = st->chain_len;
        memcpy(rec[j].chain, st->chain, sizeof rec[j].chain);
        if (!st->graph) {
            /* not held: its files and record are its holder's */
            if (fresh)
                rec[j] = fresh->shard[j];
            continue;
        }
        if (st->pending)
            continue; /* chain not applied (lazy open): unchanged, its record stays */
        rec[j].nodes = hnsw_count(st->graph);
        rec[j].arena_bytes = rec[j].nodes * (uint64_t)s->entry_bytes;
        if (st->rewrite || st->arena_gen == 0) {
            const uint8_t *a, *b;
            size_t alen, blen;
            arena_pieces(s, st, 0, &a, &alen, &b, &blen);
            rec[j].arena_gen = gen;
            path = store_file_path(s->dir, NULL, j, gen, "arena");
            rc = path ? store_write_file(path, a, alen, b, blen) : MESS_ENOMEM;
            if (rc == MESS_OK)
                made[j] |= 2;
        } else if (rec[j].nodes > st->nodes) {
            path = store_file_path(s->dir, NULL, j, st->arena_gen, "arena");
            rc = path ? arena_append(s, st, path) : MESS_ENOMEM;
        }
        free(path);
        path = NULL;
        if (rc == MESS_OK && (st->dirty || st->graph_gen == 0 || st->fold)) {
            /* a delta while the fold rule allows one, else a new base */
            uint64_t est = UINT64_MAX, chain_bytes = 0;
            uint32_t k;
            for (k = 0; k < st->chain_len; k++)
                chain_bytes += st->chain[k].bytes;
            if (st->graph_gen != 0 && !st->rewrite && !st->fold &&
                st->chain_len < STORE_CHAIN_MAX)
                est = hnsw_delta_bytes(st->graph);
            if (est != UINT64_MAX &&
                (chain_bytes + est) * STORE_FOLD_DEN <= st->graph_bytes * STORE_FOLD_NUM) {
                struct store_delta *d = &rec[j].chain[st->chain_len];
                path = store_file_path(s->dir, NULL, j, gen, "delta");
                rc = path ? store_delta_write(st, j, gen, path, d) : MESS_ENOMEM;
                if (rc == MESS_OK) {
                    made[j] |= 4;
                    d->nodes = rec[j].nodes;
                    rec[j].chain_len = st->chain_len + 1;
                }
            } else {
                path = store_file_path(s->dir, NULL, j, gen, "graph");
                rc = path ? store_graph_write(st->graph, path, &rec[j].graph_bytes,
                                              rec[j].graph_digest)
                          : MESS_ENOMEM;
                if (rc == MESS_OK) {
                    made[j] |= 1;
                    rec[j].graph_gen = gen;
                    rec[j].chain_len = 0;
                }
            }
            free(path);
            path = NULL;
        }
    }
    if (rc == MESS_OK) {
        mess_wr_init(&w);
        store_encode_manifest(s, gen, rec, &w);
        rc = w.err;
        tmp = store_file_path(s->dir, "MANIFEST.tmp", 0, 0, NULL);
        path = store_file_path(s->dir, "MANIFEST", 0, 0, NULL);
        if (rc == MESS_OK && (!tmp || !path))
            rc = MESS_ENOMEM;
        if (rc == MESS_OK)
            rc = store_write_file(tmp, w.p, w.len, NULL, 0);
        mess_wr_free(&w);
        if (rc == MESS_OK && rename(tmp, path) != 0) {
            int err = errno;
            unlink(tmp);
            errno = err;
            rc = MESS_EIO;
        }
        if (rc == MESS_OK) {
            committed = 1;
            /* A failed directory fsync after the rename is reported, but
             * the new MANIFEST and every file it names are complete. */
            rc = atomicfile_sync(s->dir);
            /* the log's records are in the files now: an empty log for
             * gen (a failure refuses later appends: MESS_EIO) */
            if (wal_writable(s->wal)) {
                int lrc = wal_reset(s->wal, gen);
                if (rc == MESS_OK)
                    rc = lrc;
            }
        }
    }
    free(tmp);
    free(path);
    if (!committed) {
        /* nothing names the new files: remove them, the handle stays */
        int err = errno;
        for (j = 0; j < M; j++) {
            char *p;
            if (made[j] & 1) {
                p = store_file_path(s->dir, NULL, j, gen, "graph");
                if (p)
                    unlink(p);
                free(p);
            }
            if (made[j] & 2) {
                p = store_file_path(s->dir, NULL, j, gen, "arena");
                if (p)
                    unlink(p);
                free(p);
            }
            if (made[j] & 4) {
                p = store_file_path(s->dir, NULL, j, gen, "delta");
                if (p)
                    unlink(p);
                free(p);
            }
        }
        free(rec);
        free(made);
        errno = err;
        return rc;
    }
    /* Committed: old files go, the handle takes the new generation and
     * maps what it wrote (a mapping that fails keeps the heap copy). */
    for (j = 0; j < M; j++) {
        struct shard_store *st = &s->shards[j];
        if (!st->graph || st->pending)
            continue;
        if ((made[j] & 1) && st->graph_gen != 0) {
            char *p = store_file_path(s->dir, NULL, j, st->graph_gen, "graph");
            if (p)
                unlink(p);
            free(p);
        }
        if (made[j] & 1) {
            /* the graph attached to its new file: its heap tail goes (a
             * graph that cannot be mapped keeps the heap; same content) */
            char *p = store_file_path(s->dir, NULL, j, gen, "graph");
            struct hnsw *g = NULL;
            void *gm = NULL;
            size_t gl = 0;
            if (p && store_graph_map(&s->p, j, p, rec[j].graph_bytes, rec[j].graph_digest, NULL,
                                     NULL, 0, &g, &gm, &gl, NULL, 0) == MESS_OK) {
                store_free_graph(st);
                st->graph = g;
                st->graph_map = gm;
                st->graph_map_len = gl;
                /* the code layout again on the new graph (the same lists;
                 * without memory the shard searches without it, the same
                 * results) */
                if (s->search.layout == MESS_LAYOUT_CODES)
                    hnsw_layout_build(g);
            }
            /* the change record restarts at the new base, mapped or (when
             * it cannot be mapped) the heap graph with the same content,
             * or the next delta would be written against the old mark
             * (MESS_ENOMEM: untracked, the next checkpoint folds) */
            hnsw_track(st->graph);
            free(p);
        }
        if ((made[j] & 2) && st->arena_gen != 0) {
            char *p = store_file_path(s->dir, NULL, j, st->arena_gen, "arena");
            if (p)
                unlink(p);
            free(p);
        }
        if (rec[j].arena_bytes != st->arena_map || (made[j] & 2)) {
            char *p = store_file_path(s->dir, NULL, j, rec[j].arena_gen, "arena");
            int fd = p ? atomicfile_open_regular(p, O_RDONLY, 0) : -1;
            void *mp = MAP_FAILED;
            if (fd >= 0 && rec[j].arena_bytes > 0)
                mp = mmap(NULL, (size_t)rec[j].arena_bytes, PROT_READ, MAP_SHARED, fd, 0);
            if (fd >= 0)
                close(fd);
            free(p);
            if (mp != MAP_FAILED) {
                store_arena_advise(mp, (size_t)rec[j].arena_bytes);
                store_unmap_arena(st);
                st->arena = (const uint8_t *)mp;
                st->arena_map = (size_t)rec[j].arena_bytes;
                st->base = (size_t)rec[j].nodes;
                free(st->entries);
                st->entries = NULL;
                st->cap = 0;
            }
        }
        if (made[j] & 4)
            hnsw_track(st->graph); /* the next delta starts here */
        store_take_record(st, &rec[j]);
        st->dirty = 0;
        st->rewrite = 0;
        st->fold = 0;
    }
    sweep(s, rec);
    s->generation = gen;
    s->owner_dirty = 0;
    free(rec);
    free(made);
    return rc;
}

/* One checkpoint at a time per directory: a write lock on S/LOCK (fcntl:
 * other processes) and a mutex (other handles in this process), held from
 * reading the MANIFEST to renaming the new one.  Servers opened on
 * disjoint shard sets of one directory so checkpoint in turn, each
 * keeping the others' records.  Process-wide on purpose (mess.h,
 * "Conventions"): fcntl record locks belong to the process, so they cannot
 * keep two handles of one process apart; this mutex does. */
static pthread_mutex_t store_mutex = PTHREAD_MUTEX_INITIALIZER;

static int checkpoint(mess_server *s)
{
    struct store_manifest m;
    struct flock fl;
    char *p;
    int fd, rc, err;
    memset(&m, 0, sizeof m);
    p = store_file_path(s->dir, "LOCK", 0, 0, NULL);
    if (!p)
        return MESS_ENOMEM;
    pthread_mutex_lock(&store_mutex);
    fd = store_open_lock(p);
    free(p);
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    rc = fd < 0 ? MESS_EIO : MESS_OK;
    while (rc == MESS_OK && fcntl(fd, F_SETLKW, &fl) != 0)
        if (errno != EINTR)
            rc = MESS_EIO;
    if (rc == MESS_OK && s->held != s->p.shards && s->generation > 0) {
        uint8_t fa[MESS_FINGERPRINT_BYTES], fb[MESS_FINGERPRINT_BYTES];
        rc = store_read_manifest(s->dir, &m, NULL, 0);
        if (rc == MESS_OK) {
            params_fingerprint(&m.p, fa);
            params_fingerprint(&s->p, fb);
            if (memcmp(fa, fb, sizeof fa) != 0)
                rc = MESS_EPARAM;
            else if (m.owned && s->owned &&
                     sodium_memcmp(m.owner, s->owner, MESS_OWNER_BYTES) != 0)
                rc = MESS_EOWNER; /* another holder's client owns it */
            else
                rc = store_held_current(s, &m, NULL, 0);
            if (rc == MESS_OK && m.owned && !s->owned) {
                s->owned = 1; /* another holder's first upload: the same client's */
                memcpy(s->owner, m.owner, MESS_OWNER_BYTES);
            }
        }
    }
    if (rc == MESS_OK)
        rc = s->held == s->p.shards ? store_claim_log(s)
                                    : store_claim_subset(s, m.shard ? m.generation : s->generation);
    if (rc == MESS_OK)
        rc = checkpoint_locked(s, s->held != s->p.shards && m.shard ? &m : NULL);
    err = errno;
    if (s->held != s->p.shards)
        store_release_claim(s);
    free(m.shard);
    if (fd >= 0)
        close(fd); /* releases the lock */
    pthread_mutex_unlock(&store_mutex);
    errno = err;
    return rc;
}

int mess_server_checkpoint(mess_server *s)
{
    if (!s || !s->dir)
        return MESS_EINVAL;
    /* folding the log would drop the records of the shards a subset
     * does not hold: the whole server (or their holder) checkpoints */
    if (s->log_foreign)
        return MESS_ESTATE;
    if (s->wal && !wal_writable(s->wal) && wal_count(s->wal) > 0) {
        errno = wal_readonly_errno(s->wal);
        return MESS_EIO; /* a log it cannot empty */
    }
    return checkpoint(s);
}

/* ---- create, import, export ---------------------------------------------- */

/* An empty directory to write a new server into: made (*made = 1), or
 * an existing empty one.  A non-empty one (or a file there) is
 * MESS_EEXIST with errno EEXIST: a name taken, not an I/O failure. */
static int new_dir(const char *dir, int *made)
{
    DIR *d;
    struct dirent *e;
    int empty = 1;
    *made = 0;
    if (mkdir(dir, 0755) == 0) {
        *made = 1;
        return MESS_OK;
    }
    if (errno != EEXIST)
        return MESS_EIO;
    d = opendir(dir);
    if (!d && errno == ENOTDIR) {
        errno = EEXIST; /* a file there */
        return MESS_EEXIST;
    }
    if (!d)
        return MESS_EIO;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            empty = 0;
    closedir(d);
    if (!empty) {
        errno = EEXIST;
        return MESS_EEXIST;
    }
    return MESS_OK;
}

/* Writes server s (in memory, every shard) as generation 1 of a new
 * directory; s becomes backed by it. */
static int store_write_new(mess_server *s, const char *dir)
{
    uint32_t j;
    int made, rc;
    if (!host_little_endian())
        return MESS_EFORMAT;
    if (s->dir || s->held != s->p.shards)
        return MESS_EINVAL;
    rc = new_dir(dir, &made);
    if (rc != MESS_OK)
        return rc;
    s->dir = (char *)malloc(strlen(dir) + 1);
    if (!s->dir) {
        if (made)
            rmdir(dir);
        return MESS_ENOMEM;
    }
    strcpy(s->dir, dir);
    s->generation = 0; /* graph_gen / arena_gen 0: no file yet */
    rc = checkpoint(s);
    if (rc != MESS_OK) {
        int err = errno;
        for (j = 0; j < s->p.shards; j++)
            s->shards[j].graph_gen = s->shards[j].arena_gen = 0;
        if (made) {
            char *lock = store_file_path(dir, "LOCK", 0, 0, NULL);
            if (lock)
                unlink(lock);
            free(lock);
            rmdir(dir);
        }
        free(s->dir);
        s->dir = NULL;
        errno = err;
    }
    return rc;
}

int mess_server_create(const char *dir, const mess_params *p, mess_server **out)
{
    mess_server *s = NULL;
    int rc;
    if (out)
        *out = NULL;
    if (!dir || !p || !out)
        return MESS_EINVAL;
    rc = mess_server_new(p, &s);
    if (rc == MESS_OK)
        rc = store_write_new(s, dir);
    if (rc == MESS_OK)
        rc = store_open_log(s, 1, NULL, 0);
    if (rc != MESS_OK) {
        int err = errno;
        mess_server_free(s);
        errno = err;
        return rc;
    }
    *out = s;
    return MESS_OK;
}

int mess_server_export(const mess_server *s, const char *file)
{
    return mess_server_save(s, file);
}

int mess_server_import(const char *file, const char *dir)
{
    mess_server *s = NULL;
    int rc;
    if (!file || !dir)
        return MESS_EINVAL;
    rc = mess_server_load(file, NULL, &s);
    if (rc == MESS_OK)
        rc = store_write_new(s, dir);
    {
        int err = errno;
        mess_server_free(s);
        errno = err;
    }
    return rc;
}
