/*
 * server_store.c - the server directory's lower half (store.h,
 * PLAN D14): names, the MANIFEST's encoding and parsing, the per-shard
 * graph files, deltas and payload arenas (written, mapped, advised), the
 * lazy apply of delta chains (server_ready, mess_server_error), the
 * writer claim and the write-ahead log's hooks (store_log).  Apply and
 * search (src/server) stand on it; the upper half that stands on them,
 * open + replay + verify (src/server/server_open.c) and checkpoint,
 * create, export and import (src/server/server_checkpoint.c), is in the
 * server component.  Nothing here calls the server component.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "atomicfile.h"
#include "mess_experimental.h"
#include "params.h"
#include "payload.h"
#include "statefile.h"
#include "store.h"
#include "wal.h"

/* ---- messages and names -------------------------------------------------- */

/* "DIR/NAME" or "DIR/shard-JJJJ-GGGGGGGG.EXT" (ext != NULL), malloc'd. */
static char *store_path(const char *dir, const char *name, uint32_t shard,
                        uint64_t gen, const char *ext)
{
    size_t n = strlen(dir) + 64 + (name ? strlen(name) : 0);
    char *p = (char *)malloc(n);
    if (!p)
        return NULL;
    if (ext)
        snprintf(p, n, "%s/shard-%04u-%08llu.%s", dir, (unsigned)shard,
                 (unsigned long long)gen, ext);
    else
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}


void store_unmap_arena(struct shard_store *st)
{
    if (st->arena && st->arena_map)
        munmap((void *)(uintptr_t)st->arena, st->arena_map);
    st->arena = NULL;
    st->arena_map = 0;
}

/* Unmaps a pending chain's deltas (the lazy open's, chain_headers). */
static void unmap_chain(struct shard_store *st)
{
    uint32_t k;
    for (k = 0; k < STORE_CHAIN_MAX; k++) {
        if (st->chain_map[k])
            munmap((void *)(uintptr_t)st->chain_map[k], (size_t)st->chain[k].bytes);
        st->chain_map[k] = NULL;
    }
}

void store_free_graph(struct shard_store *st)
{
    unmap_chain(st);
    hnsw_free(st->graph);
    st->graph = NULL;
    if (st->graph_map && st->graph_map_len)
        munmap(st->graph_map, st->graph_map_len);
    st->graph_map = NULL;
    st->graph_map_len = 0;
}

/* ---- MANIFEST ------------------------------------------------------------- */

static void manifest_encode(const mess_server *s, uint64_t gen,
                            const struct store_shard *rec, struct mess_wr *w)
{
    uint32_t j, k;
    uint8_t *sum;
    mess_wr_bytes(w, STORE_MAGIC, 8);
    mess_wr_u32(w, STORE_VERSION);
    mess_wr_u32(w, s->owned ? STORE_FLAG_OWNED : 0);
    mess_wr_u64(w, gen);
    params_encode(&s->p, w);
    mess_wr_bytes(w, s->owner, MESS_OWNER_BYTES);
    mess_wr_u32(w, (uint32_t)s->entry_bytes);
    mess_wr_u32(w, s->p.shards);
    for (j = 0; j < s->p.shards; j++) {
        mess_wr_u64(w, rec[j].graph_gen);
        mess_wr_u64(w, rec[j].graph_bytes);
        mess_wr_bytes(w, rec[j].graph_digest, STORE_DIGEST_BYTES);
        mess_wr_u64(w, rec[j].nodes);
        mess_wr_u64(w, rec[j].arena_gen);
        mess_wr_u64(w, rec[j].arena_bytes);
        mess_wr_u32(w, rec[j].chain_len);
        mess_wr_u32(w, 0);
        for (k = 0; k < rec[j].chain_len && k < STORE_CHAIN_MAX; k++) {
            mess_wr_u64(w, rec[j].chain[k].gen);
            mess_wr_u64(w, rec[j].chain[k].bytes);
            mess_wr_bytes(w, rec[j].chain[k].digest, STORE_DIGEST_BYTES);
            mess_wr_u64(w, rec[j].chain[k].nodes);
        }
    }
    sum = mess_wr_reserve(w, STORE_DIGEST_BYTES);
    if (sum)
        crypto_generichash(sum, STORE_DIGEST_BYTES, w->p, w->len - STORE_DIGEST_BYTES,
                           NULL, 0);
}

int store_manifest_parse(const uint8_t *buf, size_t len, struct store_manifest *m,
                         char *msg, size_t cap)
{
    struct mess_rd r;
    uint8_t sum[STORE_DIGEST_BYTES];
    uint32_t version, flags, entry_bytes, shards, j;
    static const uint8_t none[MESS_OWNER_BYTES];
    int rc = MESS_OK;
    memset(m, 0, sizeof *m);
    if (!buf || len < 12 || memcmp(buf, STORE_MAGIC, 8) != 0)
        return mess_fail(msg, cap, MESS_EFORMAT, "MANIFEST: not a server manifest (magic)");
    version = mess_load_u32(buf + 8);
    if (version == 1)
        return mess_fail(msg, cap, MESS_EVERSION,
                    "MANIFEST: format version 1 (libmess before the proportional "
                    "checkpoint); this library reads version %u.  Export the server "
                    "with the library that wrote it (`mess export --server DIR FILE`) "
                    "and import the file with this one (`mess import FILE NEWDIR`)",
                    (unsigned)STORE_VERSION);
    if (version != STORE_VERSION)
        return mess_fail(msg, cap, MESS_EVERSION,
                    "MANIFEST: format version %u (this library reads %u)",
                    (unsigned)version, (unsigned)STORE_VERSION);
    if (len < STORE_HEADER_BYTES + STORE_DIGEST_BYTES)
        return mess_fail(msg, cap, MESS_EFORMAT, "MANIFEST: truncated (%zu bytes)", len);
    crypto_generichash(sum, sizeof sum, buf, len - STORE_DIGEST_BYTES, NULL, 0);
    if (sodium_memcmp(sum, buf + len - STORE_DIGEST_BYTES, sizeof sum) != 0)
        return mess_fail(msg, cap, MESS_EFORMAT,
                    "MANIFEST: checksum mismatch (truncated or modified)");
    mess_rd_init(&r, buf, len - STORE_DIGEST_BYTES);
    r.off = 12;
    if (mess_rd_u32(&r, &flags) || mess_rd_u64(&r, &m->generation))
        return mess_fail(msg, cap, MESS_EFORMAT, "MANIFEST: truncated header");
    if (flags & ~STORE_FLAG_OWNED)
        return mess_fail(msg, cap, MESS_EFORMAT, "MANIFEST: unknown flags 0x%x",
                    (unsigned)flags);
    if (m->generation == 0)
        return mess_fail(msg, cap, MESS_EFORMAT, "MANIFEST: generation 0");
    if (params_decode(&r, &m->p) != MESS_OK)
        return mess_fail(msg, cap, MESS_EFORMAT, "MANIFEST: invalid parameters");
    m->owned = (flags & STORE_FLAG_OWNED) != 0;
    if (mess_rd_bytes(&r, m->owner, MESS_OWNER_BYTES) || mess_rd_u32(&r, &entry_bytes) ||
        mess_rd_u32(&r, &shards))
        return mess_fail(msg, cap, MESS_EFORMAT, "MANIFEST: truncated header");
    if (!m->owned && memcmp(m->owner, none, MESS_OWNER_BYTES) != 0)
        return mess_fail(msg, cap, MESS_EFORMAT, "MANIFEST: owner tag without the owned flag");
    if (entry_bytes != payload_entry_bytes(&m->p) || shards != m->p.shards)
        return mess_fail(msg, cap, MESS_EFORMAT,
                    "MANIFEST: entry size %u or shard count %u disagrees with the parameters",
                    (unsigned)entry_bytes, (unsigned)shards);
    if (mess_rd_left(&r) < (size_t)shards * STORE_SHARD_BYTES)
        return mess_fail(msg, cap, MESS_EFORMAT,
                    "MANIFEST: %zu bytes of shard records, %u shards need at least %zu",
                    mess_rd_left(&r), (unsigned)shards,
                    (size_t)shards * STORE_SHARD_BYTES);
    m->shard = (struct store_shard *)mess_calloc_array(shards, sizeof *m->shard);
    if (!m->shard)
        return mess_fail(msg, cap, MESS_ENOMEM, "out of memory");
    for (j = 0; j < shards && rc == MESS_OK; j++) {
        struct store_shard *e = &m->shard[j];
        uint64_t need, prev_gen, prev_nodes;
        uint32_t k, zero;
        if (mess_rd_u64(&r, &e->graph_gen) || mess_rd_u64(&r, &e->graph_bytes) ||
            mess_rd_bytes(&r, e->graph_digest, STORE_DIGEST_BYTES) ||
            mess_rd_u64(&r, &e->nodes) || mess_rd_u64(&r, &e->arena_gen) ||
            mess_rd_u64(&r, &e->arena_bytes) || mess_rd_u32(&r, &e->chain_len) ||
            mess_rd_u32(&r, &zero)) {
            rc = mess_fail(msg, cap, MESS_EFORMAT, "MANIFEST: shard %u: record truncated",
                      (unsigned)j);
            break;
        }
        if (e->graph_gen == 0 || e->graph_gen > m->generation || e->arena_gen == 0 ||
            e->arena_gen > m->generation || e->graph_bytes == 0 ||
            e->graph_bytes > SIZE_MAX || e->nodes > HNSW_MAX_NODES ||
            e->arena_bytes > SIZE_MAX || e->chain_len > STORE_CHAIN_MAX || zero != 0) {
            rc = mess_fail(msg, cap, MESS_EFORMAT,
                      "MANIFEST: shard %u: a generation, length, node count or chain "
                      "length out of range",
                      (unsigned)j);
            break;
        }
        prev_gen = e->graph_gen;
        prev_nodes = 0;
        for (k = 0; k < e->chain_len; k++) {
            struct store_delta *d = &e->chain[k];
            if (mess_rd_u64(&r, &d->gen) || mess_rd_u64(&r, &d->bytes) ||
                mess_rd_bytes(&r, d->digest, STORE_DIGEST_BYTES) ||
                mess_rd_u64(&r, &d->nodes)) {
                rc = mess_fail(msg, cap, MESS_EFORMAT, "MANIFEST: shard %u: chain truncated",
                          (unsigned)j);
                break;
            }
            if (d->gen <= prev_gen || d->gen > m->generation || d->bytes == 0 ||
                d->bytes > SIZE_MAX || d->nodes > e->nodes || d->nodes < prev_nodes ||
                (k + 1 == e->chain_len && d->nodes != e->nodes)) {
                rc = mess_fail(msg, cap, MESS_EFORMAT,
                          "MANIFEST: shard %u: delta %u's generation, length or node "
                          "count out of range", (unsigned)j, (unsigned)k);
                break;
            }
            prev_gen = d->gen;
            prev_nodes = d->nodes;
        }
        if (rc != MESS_OK)
            break;
        need = e->nodes * (uint64_t)entry_bytes; /* nodes < 2^32, entry < 2^32 */
        if (e->arena_bytes != need) {
            rc = mess_fail(msg, cap, MESS_EFORMAT,
                      "MANIFEST: shard %u: arena length %llu for %llu nodes of %u bytes",
                      (unsigned)j, (unsigned long long)e->arena_bytes,
                      (unsigned long long)e->nodes, (unsigned)entry_bytes);
            break;
        }
    }
    if (rc == MESS_OK && mess_rd_left(&r) != 0)
        rc = mess_fail(msg, cap, MESS_EFORMAT, "MANIFEST: %zu bytes after the shard records",
                  mess_rd_left(&r));
    if (rc != MESS_OK) {
        free(m->shard);
        m->shard = NULL;
    }
    return rc;
}

/* ---- file helpers -------------------------------------------------------- */

/* Reads the whole of a regular file of exactly `want` bytes. */
/* Opens path for reading into *fd, refusing anything but a regular file
 * of exactly `want` bytes (at least `want` when at_least: an arena may
 * carry bytes a crash left past the manifest's length). */
static int open_sized(const char *path, uint64_t want, int at_least, int *fd,
                      char *msg, size_t cap)
{
    struct stat st;
    *fd = atomicfile_open_regular(path, O_RDONLY, 0);
    if (*fd < 0 && (errno == ELOOP || errno == EINVAL))
        return mess_fail(msg, cap, MESS_EFORMAT, "%s: %s", mess_base_name(path),
                         errno == ELOOP ? STORE_LINK_REFUSED : "not a regular file");
    if (*fd < 0)
        return mess_fail(msg, cap, MESS_EIO, "%s: %s", mess_base_name(path), strerror(errno));
    if (fstat(*fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(*fd);
        *fd = -1;
        return mess_fail(msg, cap, MESS_EFORMAT, "%s: not a regular file", mess_base_name(path));
    }
    if (at_least ? (uint64_t)st.st_size < want : (uint64_t)st.st_size != want) {
        close(*fd);
        *fd = -1;
        return mess_fail(msg, cap, MESS_EFORMAT, "%s: %llu bytes, the manifest says %llu%s",
                    mess_base_name(path), (unsigned long long)st.st_size,
                    (unsigned long long)want, at_least ? " (truncated)" : "");
    }
    return MESS_OK;
}

/* Reads the next `want` bytes of fd (the file at path, for the message)
 * into b: MESS_OK, or MESS_EIO when a read fails or the file ends first. */
static int read_fd(int fd, uint8_t *b, size_t want, const char *path, char *msg, size_t cap)
{
    size_t got = 0;
    while (got < want) {
        ssize_t k = read(fd, b + got, want - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return mess_fail(msg, cap, MESS_EIO, "%s: %s", mess_base_name(path),
                             k < 0 ? strerror(errno) : "shorter than its size");
        got += (size_t)k;
    }
    return MESS_OK;
}

static int read_exact(const char *path, uint64_t want, uint8_t **out, char *msg,
                      size_t cap)
{
    uint8_t *b;
    int fd, rc;
    *out = NULL;
    if ((rc = open_sized(path, want, 0, &fd, msg, cap)) != MESS_OK)
        return rc;
    b = (uint8_t *)malloc(want ? (size_t)want : 1);
    if (!b) {
        close(fd);
        return mess_fail(msg, cap, MESS_ENOMEM, "out of memory");
    }
    rc = read_fd(fd, b, (size_t)want, path, msg, cap);
    close(fd);
    if (rc != MESS_OK) {
        free(b);
        return rc;
    }
    *out = b;
    return MESS_OK;
}

int store_shard_set(const uint32_t *shards, size_t n, uint32_t count, uint8_t *want,
                    char *msg, size_t cap)
{
    size_t i;
    for (i = 0; i < n; i++) {
        if (shards[i] >= count || want[shards[i]])
            return mess_fail(msg, cap, MESS_EINVAL,
                        shards[i] >= count ? "shard %u out of range (%u shards)"
                                           : "shard %u listed twice",
                        (unsigned)shards[i], (unsigned)count);
        want[shards[i]] = 1;
    }
    return MESS_OK;
}

int store_write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return MESS_EIO;
        p += k;
        n -= (size_t)k;
    }
    return MESS_OK;
}

/* Creates path afresh for writing into *fd, replacing an old file of that
 * name (a checkpoint that crashed before its MANIFEST). */
static int create_new(const char *path, int *fd)
{
    if (unlink(path) != 0 && errno != ENOENT)
        return MESS_EIO;
    *fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    return *fd < 0 ? MESS_EIO : MESS_OK;
}

/* Ends a file create_new made, given the writing's status rc: fsync and
 * close it, or on any failure close and remove it (errno kept). */
static int finish_new(const char *path, int fd, int rc)
{
    if (rc == MESS_OK && fsync(fd) != 0)
        rc = MESS_EIO;
    if (close(fd) != 0 && rc == MESS_OK)
        rc = MESS_EIO;
    if (rc != MESS_OK) {
        int err = errno;
        unlink(path);
        errno = err;
    }
    return rc;
}

/* A new file with `data` (two pieces), fsync'd; an old file of that name
 * (a checkpoint that crashed before its MANIFEST) is replaced. */
int store_write_file(const char *path, const uint8_t *a, size_t alen,
                     const uint8_t *b, size_t blen)
{
    int fd, rc = create_new(path, &fd);
    if (rc != MESS_OK)
        return rc;
    rc = store_write_all(fd, a, alen);
    if (rc == MESS_OK)
        rc = store_write_all(fd, b, blen);
    return finish_new(path, fd, rc);
}

/* ---- graph files ---------------------------------------------------------
 * The graph file is hnsw_file.c's (D15, docs/HNSW.md "Graph file"): written
 * by hnsw_write_graph, mapped MAP_PRIVATE read-write (a mutation copies
 * the page, the file never changes) and attached in O(1). */

/* The graph parameters of shard `shard` (its level seed is public). */
struct hnsw_params server_graph_params(const mess_params *p, uint32_t shard)
{
    struct hnsw_params hp;
    memset(&hp, 0, sizeof hp);
    hp.bits = p->kappa;
    hp.m = p->hnsw_m;
    hp.ef_construction = p->ef_construction;
    hp.seed = 0x4d455353u + shard; /* public: level draws need no secrecy */
    return hp;
}

/* Writes graph g to a new file at path (fsync'd); its length and digest. */
int store_graph_write(const struct hnsw *g, const char *path, uint64_t *bytes,
                      uint8_t digest[STORE_DIGEST_BYTES])
{
    struct stat st;
    int fd, rc = create_new(path, &fd);
    if (rc != MESS_OK)
        return rc;
    rc = hnsw_write_graph(g, fd, digest);
    if (rc == MESS_OK && fstat(fd, &st) != 0)
        rc = MESS_EIO;
    rc = finish_new(path, fd, rc);
    if (rc == MESS_OK)
        *bytes = (uint64_t)st.st_size;
    return rc;
}

/* Writes shard j's delta since its last checkpoint (hnsw_track) to a new
 * file at path, fsync'd; d gets its generation, length and digest. */
int store_delta_write(const struct shard_store *st, uint32_t j, uint64_t gen,
                      const char *path, struct store_delta *d)
{
    struct hnsw_delta_info di;
    int fd, rc = create_new(path, &fd);
    if (rc != MESS_OK)
        return rc;
    memset(&di, 0, sizeof di);
    di.shard = j;
    di.generation = gen;
    di.base_generation = st->graph_gen;
    memcpy(di.base_digest, st->graph_digest, STORE_DIGEST_BYTES);
    if (st->chain_len > 0)
        memcpy(di.prev_digest, st->chain[st->chain_len - 1].digest, STORE_DIGEST_BYTES);
    rc = hnsw_write_delta(st->graph, &di, fd, d->digest, &d->bytes);
    rc = finish_new(path, fd, rc);
    if (rc == MESS_OK)
        d->gen = gen;
    return rc;
}


/* ---- page-cache advice (mess_server_set_advice) ----------------------------
 *
 * Which posix_madvise calls the open and a checkpoint make on the graph and
 * arena mappings; docs/PROTOCOL.md "Open time" has the measurements behind
 * the default.  Read under advice_mutex at every mapping.  Process-wide
 * (mess.h, "Conventions"): mess_server_set_advice is public API without a
 * handle, kept with its signature. */
#define ADVICE_ALL (MESS_ADVICE_GRAPH_RANDOM_OPEN | MESS_ADVICE_GRAPH_RANDOM | \
                    MESS_ADVICE_ARENA_RANDOM | MESS_ADVICE_GRAPH_WILLNEED_UPPER | \
                    MESS_ADVICE_GRAPH_WILLNEED)
static pthread_mutex_t advice_mutex = PTHREAD_MUTEX_INITIALIZER;
static unsigned advice_mask = MESS_ADVICE_DEFAULT;

int mess_server_set_advice(unsigned mask, unsigned *previous)
{
    if (mask & ~(unsigned)ADVICE_ALL)
        return MESS_EINVAL;
    pthread_mutex_lock(&advice_mutex);
    if (previous)
        *previous = advice_mask;
    advice_mask = mask;
    pthread_mutex_unlock(&advice_mutex);
    return MESS_OK;
}

static unsigned advice(void)
{
    unsigned a;
    pthread_mutex_lock(&advice_mutex);
    a = advice_mask;
    pthread_mutex_unlock(&advice_mutex);
    return a;
}

/* Asks the kernel to read section i of an attached graph file in the
 * background (the header at 104 + 16 i: u64 offset, u64 bytes; hnsw_attach
 * has checked both against the file's length). */
static void graph_willneed(uint8_t *m, size_t len, unsigned i)
{
    uint64_t off, n;
    memcpy(&off, m + 104 + 16 * i, 8);
    memcpy(&n, m + 112 + 16 * i, 8);
    if (off < len && n > 0 && n <= len - off)
        posix_madvise(m + (size_t)off, (size_t)n, POSIX_MADV_WILLNEED);
}

/* The advice on a graph mapping: before = 1 before hnsw_attach reads it,
 * 0 after a successful attach. */
static void graph_advise(uint8_t *m, size_t len, unsigned a, int before)
{
    if (before) {
        if (a & (MESS_ADVICE_GRAPH_RANDOM | MESS_ADVICE_GRAPH_RANDOM_OPEN))
            posix_madvise(m, len, POSIX_MADV_RANDOM);
        return;
    }
    /* MESS_ADVICE_GRAPH_WILLNEED: the open's background read-in
     * (store_graphs_readin), not here, where it would cost the open its
     * page allocation and I/O submission */
    if (a & MESS_ADVICE_GRAPH_WILLNEED_UPPER) {
        graph_willneed(m, len, 2); /* levels */
        graph_willneed(m, len, 5); /* upper-link offsets */
        graph_willneed(m, len, 6); /* upper links */
    }
    if ((a & MESS_ADVICE_GRAPH_RANDOM_OPEN) && !(a & MESS_ADVICE_GRAPH_RANDOM))
        posix_madvise(m, len, POSIX_MADV_NORMAL);
}

/* ---- graphs read in at open (MESS_ADVICE_GRAPH_WILLNEED) -------------------
 * Every search walks the graphs, so the open has the kernel read the held
 * shards' graph files in, on a thread of its own (detached: it holds its
 * own copy of the names and never touches the handle, which may be freed
 * first): posix_fadvise(WILLNEED) per file submits the reads, and the
 * first queries find the pages cached or in flight instead of faulting
 * them in one readahead window at a time.  When the graph files are more
 * than half of physical memory they would evict one another (and
 * everything else): then only the sections every search's descent reads
 * are asked for (levels, upper-link offsets, upper links; what
 * MESS_ADVICE_GRAPH_WILLNEED_UPPER names) and layer 0 is read as the
 * searches fault it, page by page under the kernel's readahead. */
struct readin_range {
    size_t file;
    uint64_t off, len; /* len 0: the whole file */
};

struct readin {
    size_t nfiles, nranges;
    char **paths;
    struct readin_range *ranges;
};

static void readin_free(struct readin *r)
{
    size_t i;
    if (!r)
        return;
    for (i = 0; r->paths && i < r->nfiles; i++)
        free(r->paths[i]);
    free(r->paths);
    free(r->ranges);
    free(r);
}

static void *readin_main(void *arg)
{
    struct readin *r = (struct readin *)arg;
    size_t i, cur = (size_t)-1;
    int fd = -1;
    for (i = 0; i < r->nranges; i++) {
        if (r->ranges[i].file != cur) {
            if (fd >= 0)
                close(fd);
            cur = r->ranges[i].file;
            /* gone (a later checkpoint folded it away): nothing to read */
            fd = atomicfile_open_regular(r->paths[cur], O_RDONLY, 0);
        }
        if (fd >= 0)
            posix_fadvise(fd, (off_t)r->ranges[i].off, (off_t)r->ranges[i].len,
                          POSIX_FADV_WILLNEED);
    }
    if (fd >= 0)
        close(fd);
    readin_free(r);
    return NULL;
}

/* Adds section i of the attached graph mapping m (the header at 104 +
 * 16 i, as graph_willneed reads it) of file f to r. */
static void readin_section(struct readin *r, size_t f, const uint8_t *m, size_t len,
                           unsigned i)
{
    uint64_t off, n;
    memcpy(&off, m + 104 + 16 * i, 8);
    memcpy(&n, m + 112 + 16 * i, 8);
    if (off < len && n > 0 && n <= len - off) {
        r->ranges[r->nranges].file = f;
        r->ranges[r->nranges].off = off;
        r->ranges[r->nranges].len = n;
        r->nranges++;
    }
}

void store_graphs_readin(const mess_server *s)
{
    static const unsigned upper[3] = {2, 5, 6}; /* levels, upper offsets, upper links */
    struct readin *r;
    pthread_attr_t attr;
    pthread_t tid;
    double total = 0, phys;
    uint32_t j;
    int whole, started = 0;
    if (!s->dir || !(advice() & MESS_ADVICE_GRAPH_WILLNEED))
        return;
    for (j = 0; j < s->p.shards; j++)
        if (s->shards[j].graph && s->shards[j].graph_map)
            total += (double)s->shards[j].graph_map_len;
    phys = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    whole = phys <= 0 || total <= phys / 2;
    r = (struct readin *)calloc(1, sizeof *r);
    if (!r)
        return; /* advice only: nothing fails for it */
    r->paths = (char **)mess_calloc_array(s->p.shards, sizeof *r->paths);
    r->ranges = (struct readin_range *)mess_calloc_array(s->p.shards, 3 * sizeof *r->ranges);
    for (j = 0; r->paths && r->ranges && j < s->p.shards; j++) {
        const struct shard_store *st = &s->shards[j];
        unsigned i;
        if (!st->graph || !st->graph_map)
            continue;
        r->paths[r->nfiles] = store_path(s->dir, NULL, j, st->graph_gen, "graph");
        if (!r->paths[r->nfiles])
            break;
        if (whole) {
            r->ranges[r->nranges].file = r->nfiles;
            r->ranges[r->nranges].off = 0;
            r->ranges[r->nranges].len = 0;
            r->nranges++;
        } else {
            for (i = 0; i < 3; i++)
                readin_section(r, r->nfiles, (const uint8_t *)st->graph_map,
                               st->graph_map_len, upper[i]);
        }
        r->nfiles++;
    }
    if (r->paths && r->ranges && j == s->p.shards && r->nranges > 0 &&
        pthread_attr_init(&attr) == 0) {
        if (pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0 &&
            pthread_create(&tid, &attr, readin_main, r) == 0)
            started = 1;
        pthread_attr_destroy(&attr);
    }
    if (!started)
        readin_free(r);
}

void store_arena_advise(void *m, size_t len)
{
    if (advice() & MESS_ADVICE_ARENA_RANDOM)
        posix_madvise(m, len, POSIX_MADV_RANDOM);
}

/* Applies deltas *done.. of shard j's chain (base generation base_gen and
 * digest base_digest, `len` deltas, directory dir) to graph g, in order;
 * every delta is read whole and checked as hostile input before it
 * changes g (hnsw_apply_delta), and *done counts the deltas applied (each
 * one whole or not at all), so a call that ran out of memory resumes
 * where it stopped.  The reason names the file. */
static int chain_apply(const char *dir, uint32_t j, uint64_t base_gen,
                       const uint8_t *base_digest, const struct store_delta *chain,
                       const uint8_t *const *maps, uint32_t len, uint32_t *done,
                       struct hnsw *g, char *msg, size_t cap)
{
    struct hnsw_delta_info di;
    int rc = MESS_OK;
    memset(&di, 0, sizeof di);
    di.shard = j;
    di.base_generation = base_gen;
    memcpy(di.base_digest, base_digest, STORE_DIGEST_BYTES);
    if (*done > 0)
        memcpy(di.prev_digest, chain[*done - 1].digest, STORE_DIGEST_BYTES);
    while (*done < len && rc == MESS_OK) {
        const struct store_delta *d = &chain[*done];
        char why[160] = "";
        uint8_t *buf = NULL;
        char *path = store_path(dir, NULL, j, d->gen, "delta");
        if (!path)
            return mess_fail(msg, cap, MESS_ENOMEM, "out of memory");
        di.generation = d->gen;
        memcpy(di.digest, d->digest, STORE_DIGEST_BYTES);
        di.nodes_after = d->nodes;
        rc = read_exact(path, d->bytes, &buf, msg, cap);
        if (rc != MESS_OK && maps && maps[*done]) {
            /* its name is gone: another handle's checkpoint folded the
             * chain after this handle's open, which mapped the file */
            struct stat sb;
            int err = errno;
            if (stat(path, &sb) != 0 && errno == ENOENT)
                rc = MESS_OK;
            errno = err;
        }
        if (rc == MESS_OK) {
            rc = hnsw_apply_delta(g, buf ? buf : maps[*done], (size_t)d->bytes, &di, why,
                                  sizeof why);
            if (rc != MESS_OK)
                rc = mess_fail(msg, cap, rc, "%s: %s", mess_base_name(path),
                          why[0] ? why : mess_strerror(rc));
        }
        if (rc == MESS_OK) {
            memcpy(di.prev_digest, d->digest, STORE_DIGEST_BYTES);
            ++*done;
        }
        free(buf);
        free(path);
    }
    return rc;
}

/* Checks the fixed header of each delta of shard j's chain (record e,
 * directory dir) against the MANIFEST and the base graph g, reading
 * HNSW_DELTA_HEADER_BYTES of each file and nothing of its body (the lazy
 * open, docs/PROTOCOL.md "Lazy apply"): its length, shard, generations,
 * base and previous digests, node counts.  *deleted_after: the deleted
 * count the last header gives.  The reason names the file. */
static int chain_headers(const char *dir, uint32_t j, const struct store_shard *e,
                         const struct hnsw *g, uint64_t *deleted_after,
                         const uint8_t **maps, char *msg, size_t cap)
{
    struct hnsw_delta_info di;
    uint64_t before = hnsw_count(g);
    uint32_t k;
    int rc = MESS_OK;
    memset(&di, 0, sizeof di);
    di.shard = j;
    di.base_generation = e->graph_gen;
    memcpy(di.base_digest, e->graph_digest, STORE_DIGEST_BYTES);
    for (k = 0; k < e->chain_len && rc == MESS_OK; k++) {
        const struct store_delta *d = &e->chain[k];
        uint8_t hdr[HNSW_DELTA_HEADER_BYTES];
        size_t want = d->bytes < sizeof hdr ? (size_t)d->bytes : sizeof hdr;
        char why[160] = "";
        char *path = store_path(dir, NULL, j, d->gen, "delta");
        int fd;
        if (!path)
            return mess_fail(msg, cap, MESS_ENOMEM, "out of memory");
        rc = open_sized(path, d->bytes, 0, &fd, msg, cap);
        if (rc == MESS_OK)
            rc = read_fd(fd, hdr, want, path, msg, cap);
        if (rc == MESS_OK) {
            /* kept for a fold by another handle before the apply (no page
             * is read now; a failed map only loses that fallback) */
            void *mp = mmap(NULL, (size_t)d->bytes, PROT_READ, MAP_SHARED, fd, 0);
            maps[k] = mp == MAP_FAILED ? NULL : (const uint8_t *)mp;
        }
        if (fd >= 0)
            close(fd);
        if (rc == MESS_OK) {
            di.generation = d->gen;
            di.nodes_after = d->nodes;
            rc = hnsw_delta_header_check(g, hdr, want, d->bytes, before, &di, deleted_after,
                                         why, sizeof why);
            if (rc != MESS_OK)
                rc = mess_fail(msg, cap, rc, "%s: %s", mess_base_name(path),
                          why[0] ? why : mess_strerror(rc));
        }
        memcpy(di.prev_digest, d->digest, STORE_DIGEST_BYTES);
        before = d->nodes;
        free(path);
    }
    for (k = 0; rc != MESS_OK && k < e->chain_len; k++) {
        if (maps[k])
            munmap((void *)(uintptr_t)maps[k], (size_t)e->chain[k].bytes);
        maps[k] = NULL;
    }
    return rc;
}

/* A chain whose deltas are large beside the base changes blocks on most
 * pages of the flags and link sections (docs/PROTOCOL.md "Proportional
 * checkpoint"): read those sections ahead in one sweep rather than page
 * by page as the blocks are written (a: the advice mask, 0: none). */
static void chain_readahead(void *m, size_t len, const struct store_delta *chain,
                            uint32_t chain_len, unsigned a)
{
    uint64_t cb = 0;
    uint32_t k;
    for (k = 0; k < chain_len; k++)
        cb += chain[k].bytes;
    if (a && chain_len > 0 && cb * 16 >= len) {
        graph_willneed((uint8_t *)m, len, 3); /* deleted flags */
        graph_willneed((uint8_t *)m, len, 4); /* layer-0 links */
        graph_willneed((uint8_t *)m, len, 6); /* upper links */
    }
}

/* Maps the graph file at path (exactly `want` bytes), attaches shard j's
 * graph to it and applies its delta chain (e: the manifest record, NULL
 * for none or for a chain left to server_ready; dir: where the deltas
 * are); full: also the base's digest and hnsw_check of the result
 * (verify, which reads every page: no advice then).  The caller starts
 * the graph's change record (hnsw_track) when the chain is applied. */
int store_graph_map(const mess_params *p, uint32_t j, const char *path, uint64_t want,
                    const uint8_t *digest, const char *dir, const struct store_shard *e,
                    int full, struct hnsw **g, void **map, size_t *map_len, char *msg,
                    size_t cap)
{
    struct hnsw_params hp = server_graph_params(p, j);
    char why[160];
    unsigned a = full ? 0 : advice();
    void *m;
    int fd, rc;
    *g = NULL;
    *map = NULL;
    *map_len = 0;
    if ((rc = open_sized(path, want, 0, &fd, msg, cap)) != MESS_OK)
        return rc;
    m = mmap(NULL, (size_t)want, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return mess_fail(msg, cap, errno == ENOMEM ? MESS_ENOMEM : MESS_EIO,
                    "%s: cannot map: %s", mess_base_name(path), strerror(errno));
    if (full) {
        uint8_t sum[STORE_DIGEST_BYTES];
        hnsw_graph_digest(m, (size_t)want, sum);
        if (sodium_memcmp(sum, digest, sizeof sum) != 0) {
            munmap(m, (size_t)want);
            return mess_fail(msg, cap, MESS_EFORMAT,
                        "%s: digest differs from the manifest's (modified)",
                        mess_base_name(path));
        }
    }
    graph_advise((uint8_t *)m, (size_t)want, a, 1);
    why[0] = '\0';
    rc = hnsw_attach_msg(m, (size_t)want, &hp, g, why, sizeof why);
    if (rc == MESS_OK && e && e->chain_len > 0) {
        uint32_t done = 0;
        chain_readahead(m, (size_t)want, e->chain, e->chain_len, a);
        rc = chain_apply(dir, j, e->graph_gen, e->graph_digest, e->chain, NULL, e->chain_len,
                         &done, *g, msg, cap);
        if (rc != MESS_OK) {
            hnsw_free(*g);
            *g = NULL;
            munmap(m, (size_t)want);
            return rc;
        }
    }
    if (rc == MESS_OK && full && (rc = hnsw_check_msg(*g, why, sizeof why)) != MESS_OK) {
        hnsw_free(*g);
        *g = NULL;
        if (e && e->chain_len > 0) {
            munmap(m, (size_t)want);
            return mess_fail(msg, cap, rc, "%s with its %u deltas: %s", mess_base_name(path),
                        (unsigned)e->chain_len, why[0] ? why : mess_strerror(rc));
        }
    }
    if (rc != MESS_OK) {
        munmap(m, (size_t)want);
        return mess_fail(msg, cap, rc, "%s: %s", mess_base_name(path),
                    why[0] ? why : mess_strerror(rc));
    }
    graph_advise((uint8_t *)m, (size_t)want, a, 0);
    *map = m;
    *map_len = (size_t)want;
    return MESS_OK;
}

/* ---- lazy apply (docs/PROTOCOL.md "Lazy apply") ------------------------------ */

/* Applies pending shard j's chain, under s->ready_lock.  Running out of
 * memory or of file descriptors (MESS_EIO, errno EMFILE or ENFILE: a
 * delta could not be opened) leaves the shard pending, resumed by the
 * next call; any other failure is the shard's for good. */
static int shard_apply(mess_server *s, uint32_t j)
{
    struct shard_store *st = &s->shards[j];
    char msg[320] = "";
    int rc, err;
    if (st->chain_done == 0)
        chain_readahead(st->graph_map, st->graph_map_len, st->chain, st->chain_len, advice());
    errno = 0;
    rc = chain_apply(s->dir, j, st->graph_gen, st->graph_digest, st->chain,
                     (const uint8_t *const *)st->chain_map, st->chain_len, &st->chain_done,
                     st->graph, msg, sizeof msg);
    err = errno;
    if (rc == MESS_EIO && (err == EMFILE || err == ENFILE)) {
        errno = err;
        return rc; /* the process's descriptors, not the file: resumed later */
    }
    if (rc == MESS_OK && hnsw_count(st->graph) != st->nodes)
        rc = mess_fail(msg, sizeof msg, MESS_EFORMAT,
                       "shard %u: %zu nodes after its chain, the manifest says %llu",
                       (unsigned)j, hnsw_count(st->graph), (unsigned long long)st->nodes);
    if (rc != MESS_ENOMEM)
        unmap_chain(st); /* applied, or failed for good */
    if (rc == MESS_OK) {
        st->pending = 0;
        s->unready--;
        hnsw_track(st->graph); /* MESS_ENOMEM: untracked, the next checkpoint folds */
        return MESS_OK;
    }
    if (rc == MESS_ENOMEM)
        return rc; /* every delta applied whole or not at all: resumed later */
    /* sticky: the graph may hold the deltas before the failing one, so it
     * is never searched or applied to again */
    st->failed = rc;
    st->failed_msg = (char *)malloc(strlen(msg) + 1);
    if (st->failed_msg)
        strcpy(st->failed_msg, msg);
    return rc;
}

int server_ready(const mess_server *cs, const uint32_t *shards, size_t n)
{
    mess_server *s = (mess_server *)(uintptr_t)cs;
    size_t i, count = shards && n ? n : s->p.shards;
    int rc = MESS_OK;
    if (!s->dir)
        return MESS_OK; /* in memory: nothing is ever pending */
    pthread_mutex_lock(&s->ready_lock);
    for (i = 0; s->unready > 0 && i < count; i++) {
        uint32_t j = shards && n ? shards[i] : (uint32_t)i;
        struct shard_store *st;
        int r = MESS_OK;
        if (j >= s->p.shards || !s->shards[j].graph)
            continue;
        st = &s->shards[j];
        if (st->failed)
            r = st->failed;
        else if (st->pending)
            r = shard_apply(s, j);
        if (r != MESS_OK && rc == MESS_OK)
            rc = r;
    }
    pthread_mutex_unlock(&s->ready_lock);
    return rc;
}

int mess_server_error(const mess_server *cs, char *msg, size_t msg_cap)
{
    mess_server *s = (mess_server *)(uintptr_t)cs;
    uint32_t j;
    int rc = MESS_OK;
    if (msg && msg_cap)
        msg[0] = '\0';
    if (!s || (msg_cap && !msg))
        return MESS_EINVAL;
    pthread_mutex_lock(&s->ready_lock);
    for (j = 0; j < s->p.shards && rc == MESS_OK; j++)
        if (s->shards[j].failed) {
            rc = s->shards[j].failed;
            mess_fail(msg, msg_cap, rc, "%s",
                      s->shards[j].failed_msg ? s->shards[j].failed_msg : mess_strerror(rc));
        }
    pthread_mutex_unlock(&s->ready_lock);
    return rc;
}

/* ---- reading a directory: its MANIFEST, each shard's files mapped ----------
 * (the open, store_open in src/server/server_open.c) */

static int read_manifest(const char *dir, struct store_manifest *m, char *msg,
                         size_t cap)
{
    struct stat st;
    char *path;
    uint8_t *buf;
    int rc;
    memset(m, 0, sizeof *m);
    if (stat(dir, &st) != 0)
        return mess_fail(msg, cap, MESS_EIO, "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) {
        /* a state file names its role (mess_state_file_peek): say what
         * was given */
        uint32_t version, role = 0;
        int sealed;
        if (mess_state_file_peek(dir, &version, &role, &sealed) != MESS_OK)
            role = 0;
        if (role == STATEFILE_SERVER)
            return mess_fail(msg, cap, MESS_EFORMAT,
                        "%s is an exported server (one file); import it into a "
                        "directory first (mess_server_import, `mess import FILE DIR`)",
                        dir);
        if (role == STATEFILE_CLIENT || role == STATEFILE_QUERY)
            return mess_fail(msg, cap, MESS_EFORMAT,
                        "%s is a %s file, not a server directory", dir,
                        role == STATEFILE_CLIENT ? "client" : "query state");
        return mess_fail(msg, cap, MESS_EFORMAT, "%s is not a server directory", dir);
    }
    path = store_path(dir, "MANIFEST", 0, 0, NULL);
    if (!path)
        return mess_fail(msg, cap, MESS_ENOMEM, "out of memory");
    if (stat(path, &st) != 0) {
        int err = errno;
        free(path);
        errno = err;
        return mess_fail(msg, cap, MESS_EIO, "%s/MANIFEST: %s%s", dir, strerror(err),
                    err == ENOENT ? " (not a server directory, or its MANIFEST is lost)"
                                  : "");
    }
    if (!S_ISREG(st.st_mode) || st.st_size < STORE_HEADER_BYTES + STORE_DIGEST_BYTES ||
        st.st_size > STORE_HEADER_BYTES +
                         (off_t)MESS_MAX_SHARDS * (STORE_SHARD_BYTES +
                                                   STORE_CHAIN_MAX * STORE_DELTA_BYTES) +
                         STORE_DIGEST_BYTES) {
        free(path);
        return mess_fail(msg, cap, MESS_EFORMAT, "%s/MANIFEST: %lld bytes is not a manifest's size",
                    dir, (long long)st.st_size);
    }
    rc = read_exact(path, (uint64_t)st.st_size, &buf, msg, cap);
    free(path);
    if (rc != MESS_OK)
        return rc;
    rc = store_manifest_parse(buf, (size_t)st.st_size, m, msg, cap);
    free(buf);
    return rc;
}

/* Loads shard j of s (its manifest record e): graph and arena mapping. */
int store_load_shard(mess_server *s, uint32_t j, const struct store_shard *e,
                     int mode, char *msg, size_t cap)
{
    struct shard_store *st = &s->shards[j];
    int full = mode == STORE_VERIFY, lazy = mode == STORE_LAZY && e->chain_len > 0;
    char *path;
    int rc, fd;

    path = store_path(s->dir, NULL, j, e->graph_gen, "graph");
    if (!path)
        return mess_fail(msg, cap, MESS_ENOMEM, "out of memory");
    rc = store_graph_map(&s->p, j, path, e->graph_bytes, e->graph_digest, s->dir, lazy ? NULL : e,
                         full, &st->graph, &st->graph_map, &st->graph_map_len, msg, cap);
    if (rc == MESS_OK && lazy) {
        /* its chain waits for the first operation that reads the shard:
         * the open checks each delta's header only */
        rc = chain_headers(s->dir, j, e, st->graph, &st->pending_deleted, st->chain_map, msg,
                           cap);
        if (rc == MESS_OK) {
            st->pending = 1;
            st->chain_done = 0;
            s->unready++;
        }
    } else if (rc == MESS_OK) {
        if (hnsw_count(st->graph) != e->nodes)
            rc = mess_fail(msg, cap, MESS_EFORMAT, "%s: %zu nodes, the manifest says %llu",
                           mess_base_name(path), hnsw_count(st->graph),
                           (unsigned long long)e->nodes);
        else
            hnsw_track(st->graph); /* MESS_ENOMEM: untracked, the next checkpoint folds */
    }
    free(path);
    if (rc != MESS_OK)
        return rc;

    path = store_path(s->dir, NULL, j, e->arena_gen, "arena");
    if (!path)
        return mess_fail(msg, cap, MESS_ENOMEM, "out of memory");
    rc = open_sized(path, e->arena_bytes, 1, &fd, msg, cap);
    if (rc == MESS_OK && e->arena_bytes > 0) {
        void *m = mmap(NULL, (size_t)e->arena_bytes, PROT_READ, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED)
            rc = mess_fail(msg, cap, errno == ENOMEM ? MESS_ENOMEM : MESS_EIO,
                      "%s: cannot map: %s", mess_base_name(path), strerror(errno));
        else {
            if (!full)
                store_arena_advise(m, (size_t)e->arena_bytes);
            st->arena = (const uint8_t *)m;
            st->arena_map = (size_t)e->arena_bytes;
        }
    }
    if (fd >= 0)
        close(fd);
    free(path);
    if (rc != MESS_OK)
        return rc;
    st->base = (size_t)e->nodes;
    return MESS_OK;
}

void store_take_record(struct shard_store *st, const struct store_shard *e)
{
    st->graph_gen = e->graph_gen;
    st->graph_bytes = e->graph_bytes;
    memcpy(st->graph_digest, e->graph_digest, STORE_DIGEST_BYTES);
    st->nodes = e->nodes;
    st->arena_gen = e->arena_gen;
    st->arena_bytes = e->arena_bytes;
    st->chain_len = e->chain_len;
    memcpy(st->chain, e->chain, sizeof st->chain);
}


/* ---- one writer per directory -------------------------------------------- */

/* The writer claim (docs/PROTOCOL.md "One writer at a time"): an flock on
 * S/LOCK, taken without waiting before a handle first changes the
 * directory (a log append or a checkpoint) and kept until
 * mess_server_free.  An flock belongs to the open file, so it also keeps
 * out the other handles of this process; on Linux it is independent of
 * the checkpoint's fcntl lock on the same file.  A handle that only
 * searches never takes it and never changes a file.  MESS_EBUSY (errno
 * EBUSY) when another handle holds it. */
int store_held_current(const mess_server *s, const struct store_manifest *m, char *msg,
                       size_t cap)
{
    uint32_t j, k;
    for (j = 0; j < s->p.shards; j++) {
        const struct shard_store *st = &s->shards[j];
        const struct store_shard *e = &m->shard[j];
        int same;
        if (!st->graph)
            continue; /* not held */
        same = e->graph_gen == st->graph_gen && e->graph_bytes == st->graph_bytes &&
               memcmp(e->graph_digest, st->graph_digest, STORE_DIGEST_BYTES) == 0 &&
               e->nodes == st->nodes && e->arena_gen == st->arena_gen &&
               e->arena_bytes == st->arena_bytes && e->chain_len == st->chain_len;
        for (k = 0; same && k < e->chain_len; k++)
            same = e->chain[k].gen == st->chain[k].gen &&
                   e->chain[k].bytes == st->chain[k].bytes &&
                   memcmp(e->chain[k].digest, st->chain[k].digest, 32) == 0;
        if (!same) {
            errno = ESTALE;
            return mess_fail(msg, cap, MESS_ESTATE,
                             "shard %u was checkpointed by another handle since this one "
                             "opened it (MANIFEST generation %llu): reopen the server",
                             (unsigned)j, (unsigned long long)m->generation);
        }
    }
    return MESS_OK;
}

int store_open_lock(const char *path)
{
    return atomicfile_open_regular(path, O_RDWR | O_CREAT, 0644);
}

static int claim_writer(mess_server *s)
{
    char *p;
    int fd, err;
    if (s->claimed)
        return MESS_OK;
    p = store_path(s->dir, "LOCK", 0, 0, NULL);
    if (!p)
        return MESS_ENOMEM;
    fd = store_open_lock(p);
    free(p);
    if (fd < 0)
        return MESS_EIO;
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        err = errno;
        if (err == EINTR)
            continue;
        close(fd);
        errno = err == EWOULDBLOCK ? EBUSY : err;
        return err == EWOULDBLOCK ? MESS_EBUSY : MESS_EIO;
    }
    s->claim_fd = fd;
    s->claimed = 1;
    return MESS_OK;
}

void store_release_claim(mess_server *s)
{
    if (s && s->claimed) {
        close(s->claim_fd);
        s->claimed = 0;
    }
}

/* The claim of a whole server before its first change: the directory
 * must still be the one it opened (the MANIFEST's generation, the log
 * as it read it), or another handle's changes would be lost:
 * MESS_ESTATE with errno ESTALE. */
int store_claim_log(mess_server *s)
{
    struct store_manifest m;
    int rc, err, had = s->claimed;
    if (had && s->wal && wal_claim(s->wal) == MESS_OK)
        return MESS_OK;
    rc = claim_writer(s);
    if (rc != MESS_OK)
        return rc;
    memset(&m, 0, sizeof m);
    /* generation 0: a directory being written by store_write_new */
    rc = s->generation > 0 ? read_manifest(s->dir, &m, NULL, 0) : MESS_OK;
    if (rc == MESS_OK && s->generation > 0 && m.generation != s->generation) {
        errno = ESTALE;
        rc = MESS_ESTATE;
    }
    free(m.shard);
    if (rc == MESS_OK && s->wal)
        rc = wal_claim(s->wal);
    if (rc != MESS_OK && !had) {
        err = errno;
        store_release_claim(s);
        errno = err;
    }
    return rc;
}

/* The claim of a subset server for its checkpoint (it does not log, so it
 * gives the claim back after): the log must hold no record of the
 * directory's generation gen, which the checkpoint would drop. */
int store_claim_subset(mess_server *s, uint64_t gen)
{
    struct wal *w = NULL;
    char *path;
    int rc, err;
    rc = claim_writer(s);
    if (rc != MESS_OK)
        return rc;
    path = store_path(s->dir, "wal", 0, 0, NULL);
    rc = path ? wal_open(path, gen, WAL_READONLY, &w, NULL, 0) : MESS_ENOMEM;
    free(path);
    if (rc == MESS_OK && wal_count(w) > 0) {
        errno = ESTALE;
        rc = MESS_ESTATE;
    }
    wal_close(w);
    if (rc != MESS_OK) {
        err = errno;
        store_release_claim(s);
        errno = err;
    }
    return rc;
}

/* ---- the write-ahead log's hooks (D16, wal.c) ----------------------------- */


static int log_record(mess_server *s, uint32_t kind, const uint8_t *buf, size_t len)
{
    int rc;
    /* a subset server does not log: holders of disjoint shard sets may
     * write one directory at once, and would interleave one log; its
     * updates are durable at its checkpoint */
    if (!s->dir || s->replaying || s->held != s->p.shards)
        return MESS_OK;
    if (!wal_writable(s->wal)) {
        if (!wal_readonly_errno(s->wal))
            return MESS_ESTATE; /* a verification's handle */
        errno = wal_readonly_errno(s->wal); /* a directory it may not write */
        return MESS_EIO;
    }
    rc = store_claim_log(s);
    return rc == MESS_OK ? wal_append(s->wal, kind, buf, len) : rc;
}

int store_log(mess_server *s, enum wire_kind kind, const uint8_t *buf, size_t len)
{
    return log_record(s, kind == WIRE_UPLOAD ? WAL_UPLOAD : WAL_DELETE, buf, len);
}

int store_log_compact(mess_server *s)
{
    static const uint8_t none[1] = {0};
    return log_record(s, WAL_COMPACT, none, 0);
}

/* ---- for the server's open, checkpoint and extract (src/server) ---------- */

int store_read_manifest(const char *dir, struct store_manifest *m, char *msg, size_t cap)
{
    return read_manifest(dir, m, msg, cap);
}

char *store_file_path(const char *dir, const char *name, uint32_t shard, uint64_t gen,
                      const char *ext)
{
    return store_path(dir, name, shard, gen, ext);
}

void store_encode_manifest(const mess_server *s, uint64_t gen, const struct store_shard *rec,
                           struct mess_wr *w)
{
    manifest_encode(s, gen, rec, w);
}
