/*
 * test_store.c - the server directory (server_store.c, docs/PROTOCOL.md
 * "Server directory"): create, open, checkpoint (append, rewrite after a
 * compaction), export/import byte for byte, the subset open, and hostile
 * directories (truncated, modified, missing files) refused with a code and
 * a message, never a crash.  A server in memory given the same buffers is
 * the reference: the directory-backed one must answer the same bytes.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "../mess.h"
#include "../mess_experimental.h"
#include "harness.h"
#include "testdir.h"
#include "sift.h"

#define DIM 64
#define NQ 6

static char root[] = "build/storeXXXXXX";
static char client_file[300]; /* the test client's file, under root */
static mess_params P;
static float *vecs;  /* 400 x DIM: the items */
static uint8_t *up1, *up2, *del;
static size_t up1_len, up2_len, del_len;
#define NSMALL 12
static uint8_t *ups[NSMALL], *del2; /* 10 items each; 5 of up1's deleted */
static size_t ups_len[NSMALL], del2_len;
#define NDELS 10
static uint8_t *dels[NDELS]; /* 10 of up1's ids each (100..199) */
static size_t dels_len[NDELS];
static uint8_t *req[NQ];
static size_t req_len[NQ];
#define NLQ 40
static uint8_t *lreq[NLQ]; /* more requests, for the lazy apply's equality */
static size_t lreq_len[NLQ];

static void path_of(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", root, name);
}

/* Names in dir (sorted is not needed: counted by suffix). */
static int count_suffix(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL) {
        size_t a = strlen(e->d_name), b = strlen(suffix);
        n += a >= b && strcmp(e->d_name + a - b, suffix) == 0;
    }
    closedir(d);
    return n;
}

/* 1 if both servers answer every request with the same bytes. */
static int same_answers(const mess_server *a, const mess_server *b)
{
    int q, same = 1;
    for (q = 0; q < NQ; q++) {
        uint8_t *ra = NULL, *rb = NULL;
        size_t la = 0, lb = 0;
        if (mess_server_search(a, req[q], req_len[q], 2, &ra, &la) != MESS_OK ||
            mess_server_search(b, req[q], req_len[q], 2, &rb, &lb) != MESS_OK ||
            la != lb || memcmp(ra, rb, la) != 0)
            same = 0;
        mess_buf_free(ra);
        mess_buf_free(rb);
    }
    return same;
}

static size_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (size_t)st.st_size : (size_t)-1;
}

/* Create, apply, checkpoint, reopen: the same answers as a server in
 * memory given the same buffers; the arena is appended to (its name
 * stays), the graph rewritten (a new name, the old one removed). */
static void test_roundtrip_append(void)
{
    char dir[256], arena0[300], arena1[300], graph0[300], graph1[300];
    mess_server *m = NULL, *s = NULL;
    size_t a0;
    path_of(dir, sizeof dir, "rt");
    CHECK_OK(mess_server_new(&P, &m));
    CHECK_OK(mess_server_create(dir, &P, &s));
    CHECK(count_suffix(dir, ".graph") == (int)P.shards);
    CHECK(count_suffix(dir, ".arena") == (int)P.shards);
    CHECK_OK(mess_server_apply_upload(m, up1, up1_len, 1));
    CHECK_OK(mess_server_apply_upload(s, up1, up1_len, 1));
    CHECK(same_answers(m, s));
    CHECK_OK(mess_server_checkpoint(s));
    CHECK(same_answers(m, s)); /* now answered from the mapped arena */
    mess_server_free(s);
    s = NULL;
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &s));
    CHECK(s && same_answers(m, s));
    shard_file(dir, 0, ".arena", arena0, sizeof arena0);
    shard_file(dir, 0, ".graph", graph0, sizeof graph0);
    a0 = file_size(arena0);
    CHECK(a0 > 0 && a0 != (size_t)-1);
    CHECK_OK(mess_server_apply_upload(m, up2, up2_len, 1));
    CHECK_OK(mess_server_apply_upload(s, up2, up2_len, 1));
    CHECK(same_answers(m, s)); /* arena part and heap tail together */
    CHECK_OK(mess_server_checkpoint(s));
    shard_file(dir, 0, ".arena", arena1, sizeof arena1);
    shard_file(dir, 0, ".graph", graph1, sizeof graph1);
    CHECK(strcmp(arena0, arena1) == 0 && file_size(arena1) > a0);
    CHECK(strcmp(graph0, graph1) != 0 && access(graph0, F_OK) != 0);
    CHECK(count_suffix(dir, ".graph") == (int)P.shards);
    mess_server_free(s);
    s = NULL;
    CHECK_OK(mess_server_open(dir, NULL, NULL, 0, &s));
    CHECK(s && same_answers(m, s));
    {
        char msg[256];
        CHECK_OK(mess_server_verify(dir, msg, sizeof msg));
        CHECK(strncmp(msg, "ok:", 3) == 0);
    }
    /* an update applied after the checkpoint is in the write-ahead log
     * (D16): the next open replays it */
    CHECK_OK(mess_server_apply_delete(s, del, del_len, NULL));
    CHECK_OK(mess_server_apply_delete(m, del, del_len, NULL));
    mess_server_free(s);
    s = NULL;
    CHECK_OK(mess_server_open(dir, NULL, NULL, 0, &s));
    CHECK(s && same_answers(m, s));
    mess_server_free(s);
    mess_server_free(m);
    rm_tree(dir);
}

/* Page-cache advice (mess_server_set_advice) changes how the kernel reads
 * the mappings, never what a server answers: under every mask the
 * directory opens, answers as the in-memory server, checkpoints (the graph
 * re-attached and the arena re-mapped under the advice) and reopens the
 * same; an unknown bit is refused and changes nothing. */
static void test_advice(void)
{
    static const unsigned masks[] = {
        0, MESS_ADVICE_GRAPH_RANDOM_OPEN, MESS_ADVICE_GRAPH_RANDOM,
        MESS_ADVICE_ARENA_RANDOM, MESS_ADVICE_GRAPH_WILLNEED_UPPER,
        MESS_ADVICE_GRAPH_WILLNEED,
        MESS_ADVICE_GRAPH_RANDOM_OPEN | MESS_ADVICE_GRAPH_WILLNEED_UPPER,
        0x1f};
    char dir[256];
    mess_server *m = NULL, *s = NULL;
    unsigned prev = 12345, cur = 12345;
    size_t i;
    CHECK_OK(mess_server_set_advice(MESS_ADVICE_DEFAULT, &prev));
    CHECK(prev == MESS_ADVICE_DEFAULT);
    CHECK(mess_server_set_advice(0x20, &cur) == MESS_EINVAL && cur == 12345);
    CHECK(mess_server_set_advice(~0u, NULL) == MESS_EINVAL);
    CHECK_OK(mess_server_set_advice(MESS_ADVICE_DEFAULT, &cur));
    CHECK(cur == MESS_ADVICE_DEFAULT);
    path_of(dir, sizeof dir, "advice");
    CHECK_OK(mess_server_new(&P, &m));
    CHECK_OK(mess_server_create(dir, &P, &s));
    CHECK_OK(mess_server_apply_upload(m, up1, up1_len, 1));
    CHECK_OK(mess_server_apply_upload(s, up1, up1_len, 1));
    CHECK_OK(mess_server_checkpoint(s));
    mess_server_free(s);
    for (i = 0; i < sizeof masks / sizeof masks[0]; i++) {
        s = NULL;
        CHECK_OK(mess_server_set_advice(masks[i], NULL));
        CHECK_OK(mess_server_open(dir, &P, NULL, 0, &s));
        CHECK(s && same_answers(m, s));
        if (s && masks[i] == 0x1f) {
            CHECK_OK(mess_server_apply_upload(m, up2, up2_len, 1));
            CHECK_OK(mess_server_apply_upload(s, up2, up2_len, 1));
            CHECK_OK(mess_server_checkpoint(s));
            CHECK(same_answers(m, s));
            mess_server_free(s);
            s = NULL;
            CHECK_OK(mess_server_open(dir, &P, NULL, 0, &s));
            CHECK(s && same_answers(m, s));
        }
        mess_server_free(s);
    }
    CHECK_OK(mess_server_set_advice(MESS_ADVICE_DEFAULT, &cur));
    CHECK(cur == 0x1f);
    {
        char msg[256];
        CHECK_OK(mess_server_verify(dir, msg, sizeof msg));
    }
    mess_server_free(m);
    rm_tree(dir);
}

/* Delete + compact rewrite the arena under a new name; export is byte for
 * byte the in-memory server's save, twice the same, and survives
 * import -> open -> export unchanged. */
static void test_compact_export_import(void)
{
    char dir[256], dir2[256], fm[256], fs[256], fs2[256], fs3[256];
    char arena0[300], arena1[300];
    mess_server *m = NULL, *s = NULL;
    size_t missing = 9;
    path_of(dir, sizeof dir, "cx");
    path_of(dir2, sizeof dir2, "cx2");
    path_of(fm, sizeof fm, "mem.mess");
    path_of(fs, sizeof fs, "dir.mess");
    path_of(fs2, sizeof fs2, "dir2.mess");
    path_of(fs3, sizeof fs3, "dir3.mess");
    CHECK_OK(mess_server_new(&P, &m));
    CHECK_OK(mess_server_create(dir, &P, &s));
    CHECK_OK(mess_server_apply_upload(m, up1, up1_len, 1));
    CHECK_OK(mess_server_apply_upload(s, up1, up1_len, 1));
    CHECK_OK(mess_server_checkpoint(s));
    shard_file(dir, 1, ".arena", arena0, sizeof arena0);
    CHECK_OK(mess_server_apply_delete(m, del, del_len, NULL));
    CHECK_OK(mess_server_apply_delete(s, del, del_len, &missing));
    CHECK(missing == 0);
    CHECK_OK(mess_server_compact(m, 2));
    CHECK_OK(mess_server_compact(s, 2));
    CHECK(same_answers(m, s));
    CHECK_OK(mess_server_checkpoint(s));
    shard_file(dir, 1, ".arena", arena1, sizeof arena1);
    CHECK(arena1[0] && strcmp(arena0, arena1) != 0 && access(arena0, F_OK) != 0);
    CHECK(count_suffix(dir, ".arena") == (int)P.shards);
    CHECK(same_answers(m, s));
    CHECK_OK(mess_server_save(m, fm));
    CHECK_OK(mess_server_export(s, fs));
    CHECK_OK(mess_server_export(s, fs2));
    CHECK(files_equal(fm, fs) && files_equal(fs, fs2));
    mess_server_free(s);
    s = NULL;
    CHECK_OK(mess_server_import(fs, dir2));
    CHECK_OK(mess_server_open(dir2, &P, NULL, 0, &s));
    CHECK(s && same_answers(m, s));
    CHECK_OK(mess_server_export(s, fs3));
    CHECK(files_equal(fs, fs3));
    {
        uint8_t ta[MESS_OWNER_BYTES], tb[MESS_OWNER_BYTES];
        CHECK_OK(mess_server_owner(m, ta));
        CHECK_OK(mess_server_owner(s, tb));
        CHECK(memcmp(ta, tb, sizeof ta) == 0);
    }
    /* import into a non-empty directory, or of a directory, is refused */
    errno = 0;
    CHECK_RC(mess_server_import(fs, dir2), MESS_EEXIST);
    CHECK(errno == EEXIST);
    CHECK_RC(mess_server_import(dir2, dir), MESS_EIO);
    /* a travel file where a directory is expected */
    {
        mess_server *x = (mess_server *)&x;
        CHECK_RC(mess_server_open(fs, NULL, NULL, 0, &x), MESS_EFORMAT);
        CHECK(x == NULL);
        char msg[300];
        CHECK_RC(mess_server_verify(fs, msg, sizeof msg), MESS_EFORMAT);
        CHECK(strstr(msg, "exported server") != NULL);
    }
    /* a client file there: named as one (it was called "an exported
     * server", the two sharing the state files' magic) */
    {
        mess_server *x = (mess_server *)&x;
        char msg[300];
        CHECK_RC(mess_server_open(client_file, NULL, NULL, 0, &x), MESS_EFORMAT);
        CHECK(x == NULL);
        CHECK_RC(mess_server_verify(client_file, msg, sizeof msg), MESS_EFORMAT);
        CHECK(strstr(msg, "is a client file, not a server directory") != NULL);
        CHECK(strstr(msg, "exported server") == NULL);
    }
    CHECK_RC(mess_server_checkpoint(m), MESS_EINVAL); /* in memory */
    mess_server_free(s);
    mess_server_free(m);
    rm_tree(dir);
    rm_tree(dir2);
    unlink(fm);
    unlink(fs);
    unlink(fs2);
    unlink(fs3);
}

static const uint32_t *one_shard(uint32_t j)
{
    static uint32_t v[1];
    v[0] = j;
    return v;
}

/* A subset server holds only its shards: stats, view, refusals, its own
 * part of an upload (mess_records_split) and its partial search. */
static void test_subset(void)
{
    char dir[256], fs[256];
    mess_server *s = NULL, *sub = NULL, *x;
    mess_server_stats all, part;
    uint32_t pick[2] = {2, 0}, dup[2] = {1, 1}, far[1] = {99};
    size_t n0 = 0, n2 = 0, n1_orig = 0, n;
    uint8_t *resp = NULL;
    size_t resp_len = 0;
    path_of(dir, sizeof dir, "sub");
    path_of(fs, sizeof fs, "sub.mess");
    CHECK_OK(mess_server_create(dir, &P, &s));
    CHECK_OK(mess_server_apply_upload(s, up1, up1_len, 1));
    CHECK_OK(mess_server_checkpoint(s));
    CHECK_OK(mess_server_shard_nodes(s, 0, &n0));
    CHECK_OK(mess_server_shard_nodes(s, 2, &n2));
    CHECK_OK(mess_server_shard_nodes(s, 1, &n1_orig));
    all.size = sizeof all;
    CHECK_OK(mess_server_stats_get(s, &all));
    mess_server_free(s);
    CHECK_OK(mess_server_open(dir, &P, pick, 2, &sub));
    part.size = sizeof part;
    CHECK_OK(mess_server_stats_get(sub, &part));
    CHECK(part.entries == n0 + n2 && part.entries < all.entries);
    CHECK_OK(mess_server_shard_nodes(sub, 2, &n));
    CHECK(n == n2);
    CHECK_RC(mess_server_shard_nodes(sub, 1, &n), MESS_EINVAL);
    /* an upload touching shards 1 and 3 changes nothing */
    CHECK_RC(mess_server_apply_upload(sub, up2, up2_len, 1), MESS_ESTATE);
    CHECK_RC(mess_server_apply_delete(sub, del, del_len, NULL), MESS_ESTATE);
    CHECK_OK(mess_server_stats_get(sub, &part));
    CHECK(part.entries == n0 + n2 && part.deleted == 0);
    CHECK_RC(mess_server_search(sub, req[0], req_len[0], 1, &resp, &resp_len),
             MESS_ESTATE);
    CHECK_RC(mess_server_search_shards(sub, req[0], req_len[0], far, 1, 1, &resp,
                                       &resp_len), MESS_EINVAL);
    {
        uint32_t one[1] = {1};
        CHECK_RC(mess_server_search_shards(sub, req[0], req_len[0], one, 1, 1, &resp,
                                           &resp_len), MESS_ESTATE);
    }
    CHECK_RC(mess_server_export(sub, fs), MESS_EINVAL);
    CHECK(access(fs, F_OK) != 0);
    /* its own part of the upload and the delete: applied, checkpointed,
     * and the other shards' files and records stay as they were */
    {
        uint8_t *mine = NULL, *mine_del = NULL;
        size_t mine_len = 0, mine_del_len = 0, n1 = 0, n1_after = 0;
        CHECK_OK(mess_records_split(&P, up2, up2_len, pick, 2, &mine, &mine_len));
        CHECK_OK(mess_records_split(&P, del, del_len, pick, 2, &mine_del, &mine_del_len));
        CHECK_OK(mess_server_apply_upload(sub, mine, mine_len, 1));
        CHECK_OK(mess_server_apply_delete(sub, mine_del, mine_del_len, NULL));
        CHECK_OK(mess_server_checkpoint(sub));
        mess_server_free(sub);
        sub = NULL;
        /* the whole server, fed the same buffers in memory, answers the
         * two shards with the same bytes as the subset reopened */
        CHECK_OK(mess_server_new(&P, &x));
        CHECK_OK(mess_server_apply_upload(x, up1, up1_len, 1));
        CHECK_OK(mess_server_apply_upload(x, up2, up2_len, 1));
        CHECK_OK(mess_server_apply_delete(x, del, del_len, NULL));
        CHECK_OK(mess_server_open(dir, &P, pick, 2, &sub));
        {
            int q;
            for (q = 0; q < NQ; q++) {
                uint8_t *pa = NULL, *pb = NULL;
                size_t la = 0, lb = 0;
                CHECK_OK(mess_server_search_shards(x, req[q], req_len[q], pick, 2, 1,
                                                   &pa, &la));
                CHECK_OK(mess_server_search_shards(sub, req[q], req_len[q], pick, 2, 2,
                                                   &pb, &lb));
                CHECK(la == lb && la > 0 && pa && pb && memcmp(pa, pb, la) == 0);
                mess_buf_free(pa);
                mess_buf_free(pb);
            }
        }
        mess_server_free(x);
        mess_server_free(sub);
        x = NULL;
        CHECK_OK(mess_server_open(dir, &P, NULL, 0, &x));
        CHECK_OK(mess_server_stats_get(x, &part));
        CHECK(part.entries > all.entries && part.deleted > 0);
        CHECK_OK(mess_server_shard_nodes(x, 1, &n1_after));
        mess_server_free(x);
        x = NULL;
        CHECK_OK(mess_server_open(dir, &P, one_shard(1), 1, &x));
        CHECK_OK(mess_server_shard_nodes(x, 1, &n1));
        CHECK(n1 == n1_after && n1 == n1_orig); /* not the subset's shard */
        mess_server_free(x);
        mess_buf_free(mine);
        mess_buf_free(mine_del);
        {
            char msg[256];
            CHECK_OK(mess_server_verify(dir, msg, sizeof msg));
        }
    }
    x = (mess_server *)&x;
    CHECK_RC(mess_server_open(dir, &P, dup, 2, &x), MESS_EINVAL);
    CHECK(x == NULL);
    CHECK_RC(mess_server_open(dir, &P, far, 1, &x), MESS_EINVAL);
    CHECK_RC(mess_server_open(dir, &P, NULL, 1, &x), MESS_EINVAL);
    rm_tree(dir);
}

/* Two servers on disjoint shard sets of one directory, each fed its part,
 * checkpoint in turn: each keeps the other's records, and the directory
 * is the whole server's (its export equals an in-memory server's save). */
static void test_two_holders(void)
{
    static const uint32_t lo[2] = {0, 1}, hi[2] = {3, 2};
    char dir[256], fm[256], fs[256], msg[256];
    mess_server *s = NULL, *a = NULL, *b = NULL, *m = NULL;
    uint8_t *pa = NULL, *pb = NULL;
    size_t la = 0, lb = 0;
    path_of(dir, sizeof dir, "two");
    path_of(fm, sizeof fm, "two-mem.mess");
    path_of(fs, sizeof fs, "two-dir.mess");
    CHECK_OK(mess_server_create(dir, &P, &s));
    CHECK_OK(mess_server_apply_upload(s, up1, up1_len, 1));
    CHECK_OK(mess_server_checkpoint(s));
    mess_server_free(s);
    s = NULL;
    CHECK_OK(mess_server_open(dir, &P, lo, 2, &a));
    CHECK_OK(mess_server_open(dir, &P, hi, 2, &b));
    CHECK_OK(mess_records_split(&P, up2, up2_len, lo, 2, &pa, &la));
    CHECK_OK(mess_records_split(&P, up2, up2_len, hi, 2, &pb, &lb));
    CHECK_OK(mess_server_apply_upload(a, pa, la, 1));
    CHECK_OK(mess_server_apply_upload(b, pb, lb, 1));
    CHECK_OK(mess_server_checkpoint(b));
    CHECK_OK(mess_server_checkpoint(a)); /* read at open, before b's checkpoint */
    CHECK_OK(mess_server_checkpoint(b)); /* nothing new: keeps a's records */
    mess_server_free(a);
    mess_server_free(b);
    CHECK_OK(mess_server_verify(dir, msg, sizeof msg));
    CHECK_OK(mess_server_new(&P, &m));
    CHECK_OK(mess_server_apply_upload(m, up1, up1_len, 1));
    CHECK_OK(mess_server_apply_upload(m, up2, up2_len, 1));
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &s));
    CHECK(s && same_answers(m, s));
    CHECK_OK(mess_server_save(m, fm));
    CHECK_OK(mess_server_export(s, fs));
    CHECK(files_equal(fm, fs));
    mess_server_free(s);
    mess_server_free(m);
    mess_buf_free(pa);
    mess_buf_free(pb);
    unlink(fm);
    unlink(fs);
    rm_tree(dir);
}

static void write_file(const char *path, const uint8_t *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(b, 1, n, f) == n);
    if (f)
        fclose(f);
}

static void copy_file(const char *from, const char *to)
{
    size_t n;
    uint8_t *b = test_read_file(from, &n);
    CHECK(b != NULL);
    if (b)
        write_file(to, b, n);
    free(b);
}

/* Rewrites the MANIFEST after edit() with a valid checksum. */
static void resum(uint8_t *b, size_t n)
{
    crypto_generichash(b + n - 32, 32, b, n - 32, NULL, 0);
}

/* Each damage gives a code (never a crash) and verify a message naming
 * the reason; the directory is restored in between. */
/* One writer at a time (docs/PROTOCOL.md "One writer at a time"): a
 * handle that only searches never changes the directory, so its open
 * cannot cut a record another handle is writing; a second writer is
 * refused (MESS_EBUSY, errno EBUSY); a handle whose directory another handle changed since
 * it opened is refused (ESTALE) instead of overwriting that change. */
static void test_one_writer(void)
{
    char dir[256], wal[300];
    mess_server *m = NULL, *a = NULL, *b = NULL, *r = NULL;
    uint8_t *tail = NULL;
    size_t end, start, half;
    int fd;
    path_of(dir, sizeof dir, "one");
    snprintf(wal, sizeof wal, "%s/wal", dir);
    CHECK_OK(mess_server_new(&P, &m));
    CHECK_OK(mess_server_apply_upload(m, up1, up1_len, 1));
    CHECK_OK(mess_server_apply_upload(m, up2, up2_len, 1));
    CHECK_OK(mess_server_create(dir, &P, &a));
    if (!m || !a)
        goto out;
    CHECK_OK(mess_server_apply_upload(a, up1, up1_len, 1)); /* a claims */
    /* a second handle searches, and may not write */
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &b));
    errno = 0;
    CHECK_RC(mess_server_apply_upload(b, up2, up2_len, 1), MESS_EBUSY);
    CHECK(errno == EBUSY);
    errno = 0;
    CHECK_RC(mess_server_checkpoint(b), MESS_EBUSY);
    CHECK(errno == EBUSY);
    mess_server_free(b);
    b = NULL;
    /* a's record of up2 caught half written: an open in between must not
     * take it for a crash's torn tail and cut it */
    CHECK_OK(mess_server_apply_upload(a, up2, up2_len, 1));
    end = file_size(wal);
    start = end - (up2_len + 64);
    half = (end - start) / 2;
    tail = (uint8_t *)malloc(end - start - half);
    fd = open(wal, O_RDWR);
    CHECK(fd >= 0 && tail);
    if (fd < 0 || !tail)
        goto out;
    CHECK(pread(fd, tail, end - start - half, (off_t)(start + half)) ==
          (ssize_t)(end - start - half));
    CHECK(ftruncate(fd, (off_t)(start + half)) == 0);
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &r));
    mess_server_free(r);
    r = NULL;
    CHECK(file_size(wal) == start + half); /* untouched by the reader */
    /* the writer's write goes on where it was */
    CHECK(pwrite(fd, tail, end - start - half, (off_t)(start + half)) ==
          (ssize_t)(end - start - half));
    close(fd);
    mess_server_free(a);
    a = NULL;
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &a));
    CHECK(a && same_answers(m, a)); /* no acknowledged upload lost */
    /* b opens, a appends and goes: b's view is stale, its write refused */
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &b));
    CHECK_OK(mess_server_apply_delete(a, del, del_len, NULL));
    CHECK_OK(mess_server_apply_delete(m, del, del_len, NULL));
    mess_server_free(a);
    a = NULL;
    errno = 0; /* the delete is valid in b's view: only the log refuses it */
    CHECK_RC(mess_server_apply_delete(b, del, del_len, NULL), MESS_ESTATE);
    CHECK(errno == ESTALE);
    mess_server_free(b);
    b = NULL;
    /* the same after another handle's checkpoint (a new log file) */
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &b));
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &a));
    CHECK(a && same_answers(m, a));
    CHECK_OK(mess_server_checkpoint(a));
    mess_server_free(a);
    a = NULL;
    errno = 0;
    CHECK_RC(mess_server_checkpoint(b), MESS_ESTATE);
    CHECK(errno == ESTALE);
    mess_server_free(b);
    b = NULL;
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &a));
    CHECK(a && same_answers(m, a));
out:
    free(tail);
    mess_server_free(a);
    mess_server_free(b);
    mess_server_free(m);
    rm_tree(dir);
}

static void test_hostile(void)
{
    char dir[256], man[300], keep[300], arena[300], graph[300], gkeep[300], msg[300];
    mess_server *s = NULL, *x;
    uint8_t *b;
    size_t n, i;
    mess_params other = P;
    path_of(dir, sizeof dir, "bad");
    CHECK_OK(mess_server_create(dir, &P, &s));
    CHECK_OK(mess_server_apply_upload(s, up1, up1_len, 1));
    CHECK_OK(mess_server_checkpoint(s));
    mess_server_free(s);
    snprintf(man, sizeof man, "%s/MANIFEST", dir);
    path_of(keep, sizeof keep, "MANIFEST.keep");
    path_of(gkeep, sizeof gkeep, "graph.keep");
    copy_file(man, keep);
    shard_file(dir, 1, ".arena", arena, sizeof arena);
    shard_file(dir, 1, ".graph", graph, sizeof graph);
    copy_file(graph, gkeep);

    /* other parameters */
    other.hnsw_m = P.hnsw_m + 2;
    x = NULL;
    CHECK_RC(mess_server_open(dir, &other, NULL, 0, &x), MESS_EPARAM);

    /* every byte of the MANIFEST flipped in turn, and every truncation */
    b = test_read_file(keep, &n);
    CHECK(b && n == 112 + P.shards * 80 + 32);
    for (i = 0; b && i < n; i++) {
        b[i] ^= 0x40;
        write_file(man, b, n);
        b[i] ^= 0x40;
        x = NULL;
        CHECK_RC(mess_server_open(dir, NULL, NULL, 0, &x),
                 i >= 8 && i < 12 ? MESS_EVERSION : MESS_EFORMAT);
        CHECK(x == NULL);
    }
    for (i = 0; b && i < n; i += 7) {
        write_file(man, b, i);
        CHECK_RC(mess_server_open(dir, NULL, NULL, 0, &x), MESS_EFORMAT);
    }
    CHECK_RC(mess_server_verify(dir, msg, sizeof msg), MESS_EFORMAT);
    CHECK(strstr(msg, "MANIFEST") != NULL);
    /* checksummed but lying: a node count unlike the arena length, a
     * graph length unlike the file's, a generation from the future */
    if (b) {
        size_t rec1 = 112 + 80;
        b[rec1 + 48] ^= 1; /* nodes of shard 1 */
        resum(b, n);
        write_file(man, b, n);
        CHECK_RC(mess_server_open(dir, NULL, NULL, 0, &x), MESS_EFORMAT);
        b[rec1 + 48] ^= 1;
        b[rec1 + 8] ^= 1; /* graph bytes of shard 1 */
        resum(b, n);
        write_file(man, b, n);
        CHECK_RC(mess_server_open(dir, NULL, NULL, 0, &x), MESS_EFORMAT);
        CHECK_RC(mess_server_verify(dir, msg, sizeof msg), MESS_EFORMAT);
        CHECK(strstr(msg, "shard-0001-") != NULL && strstr(msg, "bytes") != NULL);
        b[rec1 + 8] ^= 1;
        b[rec1 + 0] += 5; /* graph generation beyond the manifest's */
        resum(b, n);
        write_file(man, b, n);
        CHECK_RC(mess_server_open(dir, NULL, NULL, 0, &x), MESS_EFORMAT);
        b[rec1 + 0] -= 5;
        b[8] = 3; /* a later format version */
        resum(b, n);
        write_file(man, b, n);
        CHECK_RC(mess_server_open(dir, NULL, NULL, 0, &x), MESS_EVERSION);
        /* version 1 (before the delta chains): refused, saying what to do */
        b[8] = 1;
        resum(b, n);
        write_file(man, b, n);
        CHECK_RC(mess_server_open(dir, NULL, NULL, 0, &x), MESS_EVERSION);
        CHECK_RC(mess_server_verify(dir, msg, sizeof msg), MESS_EVERSION);
        CHECK(strstr(msg, "version 1") && strstr(msg, "reads version 2") &&
              strstr(msg, "mess export") && strstr(msg, "mess import"));
        b[8] = 2;
    }
    free(b);
    copy_file(keep, man);
    CHECK_OK(mess_server_verify(dir, msg, sizeof msg));

    /* arena: truncated is refused, longer (a crashed append) is fine */
    n = file_size(arena);
    CHECK(truncate(arena, (off_t)n - 1) == 0);
    CHECK_RC(mess_server_open(dir, NULL, NULL, 0, &x), MESS_EFORMAT);
    CHECK_RC(mess_server_verify(dir, msg, sizeof msg), MESS_EFORMAT);
    CHECK(strstr(msg, "truncated") != NULL);
    CHECK(truncate(arena, (off_t)n + 100) == 0);
    x = NULL;
    CHECK_OK(mess_server_open(dir, NULL, NULL, 0, &x));
    /* the next checkpoint cuts the leftover */
    CHECK_OK(mess_server_apply_upload(x, up2, up2_len, 1));
    CHECK_OK(mess_server_checkpoint(x));
    mess_server_free(x);
    x = NULL;
    CHECK_OK(mess_server_verify(dir, msg, sizeof msg));
    copy_file(man, keep);
    shard_file(dir, 1, ".graph", graph, sizeof graph);
    copy_file(graph, gkeep);

    /* graph: one byte changed (digest; open may take it, verify must
     * not), truncated, missing */
    b = test_read_file(gkeep, &n);
    CHECK(b != NULL);
    if (b) {
        b[n / 2] ^= 1;
        write_file(graph, b, n);
        CHECK_RC(mess_server_verify(dir, msg, sizeof msg), MESS_EFORMAT);
        CHECK(strstr(msg, "digest") != NULL);
        x = NULL;
        if (mess_server_open(dir, NULL, NULL, 0, &x) == MESS_OK)
            mess_server_free(x);
        write_file(graph, b, n - 1);
        CHECK_RC(mess_server_open(dir, NULL, NULL, 0, &x), MESS_EFORMAT);
    }
    free(b);
    CHECK(unlink(graph) == 0);
    CHECK_RC(mess_server_open(dir, NULL, NULL, 0, &x), MESS_EIO);
    CHECK_RC(mess_server_verify(dir, msg, sizeof msg), MESS_EIO);
    CHECK(strstr(msg, "shard-0001-") != NULL);
    /* a subset without shard 1 does not need its files */
    {
        uint32_t pick[1] = {0};
        x = NULL;
        CHECK_OK(mess_server_open(dir, NULL, pick, 1, &x));
        mess_server_free(x);
    }
    copy_file(gkeep, graph);
    CHECK_OK(mess_server_verify(dir, msg, sizeof msg));
    CHECK(unlink(man) == 0);
    CHECK_RC(mess_server_open(dir, NULL, NULL, 0, &x), MESS_EIO);
    CHECK_RC(mess_server_verify(dir, msg, sizeof msg), MESS_EIO);
    CHECK(strstr(msg, "MANIFEST") != NULL);
    unlink(keep);
    unlink(gkeep);
    rm_tree(dir);
}

/* The proportional checkpoint (docs/PROTOCOL.md "Proportional
 * checkpoint"): small uploads after a base write per-shard deltas, not a
 * new graph file; a reopen applies the chain and answers exactly as the
 * handle that never closed and the server in memory (and exports the same
 * bytes); a handle reopened on a chain goes on writing deltas; the chain
 * folds into a new base (K deltas or half the base's bytes), and every
 * file no MANIFEST names is gone. */
static void test_delta_chain(void)
{
    char dir[256], graph0[300], graph1[300], fm[256], fs[256], msg[300];
    mess_server *m = NULL, *s = NULL, *r = NULL;
    int k, deltas = 0, folds = 0, maxchain = 0;
    path_of(dir, sizeof dir, "dc");
    path_of(fm, sizeof fm, "dc-mem.mess");
    path_of(fs, sizeof fs, "dc-dir.mess");
    CHECK_OK(mess_server_new(&P, &m));
    CHECK_OK(mess_server_create(dir, &P, &s));
    CHECK_OK(mess_server_apply_upload(m, up1, up1_len, 1));
    CHECK_OK(mess_server_apply_upload(s, up1, up1_len, 1));
    CHECK_OK(mess_server_apply_upload(m, up2, up2_len, 1));
    CHECK_OK(mess_server_apply_upload(s, up2, up2_len, 1));
    CHECK_OK(mess_server_checkpoint(s));
    CHECK(count_suffix(dir, ".delta") == 0);
    shard_file(dir, 0, ".graph", graph0, sizeof graph0);
    for (k = 0; k < NSMALL; k++) {
        int nd;
        CHECK_OK(mess_server_apply_upload(m, ups[k], ups_len[k], 1));
        CHECK_OK(mess_server_apply_upload(s, ups[k], ups_len[k], 1));
        if (k == 1 || k == 7) { /* deletions of older nodes in a delta */
            CHECK_OK(mess_server_apply_delete(m, k == 1 ? del2 : del, k == 1 ? del2_len : del_len, NULL));
            CHECK_OK(mess_server_apply_delete(s, k == 1 ? del2 : del, k == 1 ? del2_len : del_len, NULL));
        }
        CHECK_OK(mess_server_checkpoint(s));
        nd = count_suffix(dir, ".delta");
        CHECK(nd >= 0 && nd <= 8 * (int)P.shards);
        shard_file(dir, 0, ".graph", graph1, sizeof graph1);
        if (strcmp(graph0, graph1) != 0) {
            folds++;
            CHECK(access(graph0, F_OK) != 0); /* the old base is gone */
            memcpy(graph0, graph1, sizeof graph0);
        } else
            deltas++;
        if (nd / (int)P.shards > maxchain)
            maxchain = nd / (int)P.shards;
        CHECK(count_suffix(dir, ".graph") == (int)P.shards);
        CHECK(same_answers(m, s));
        r = NULL;
        CHECK_OK(mess_server_open(dir, &P, NULL, 0, &r));
        CHECK(r && same_answers(m, r) && same_answers(s, r));
        if (r) {
            CHECK_OK(mess_server_save(m, fm));
            CHECK_OK(mess_server_export(r, fs));
            CHECK(files_equal(fm, fs));
        }
        CHECK_OK(mess_server_verify(dir, msg, sizeof msg));
        if (k >= NSMALL / 2 && r) {
            /* from here on the reopened handle writes the next deltas */
            mess_server_free(s);
            s = r;
        } else
            mess_server_free(r);
        r = NULL;
    }
    CHECK(deltas >= 3 && folds >= 1 && maxchain >= 2);
    mess_server_free(s);
    mess_server_free(m);
    unlink(fm);
    unlink(fs);
    rm_tree(dir);
}

/* A delta damaged, truncated or missing is refused with a message naming
 * it (never a crash, never a handle); a subset open applies its shards'
 * chains; mess_server_extract copies them. */
static void test_delta_hostile(void)
{
    char dir[256], dst[256], delta[300], keep[300], msg[300];
    mess_server *s = NULL, *x;
    uint8_t *b;
    size_t n, i;
    path_of(dir, sizeof dir, "dh");
    path_of(dst, sizeof dst, "dh-x");
    path_of(keep, sizeof keep, "delta.keep");
    CHECK_OK(mess_server_create(dir, &P, &s));
    CHECK_OK(mess_server_apply_upload(s, up1, up1_len, 1));
    CHECK_OK(mess_server_apply_upload(s, up2, up2_len, 1));
    CHECK_OK(mess_server_checkpoint(s));
    CHECK_OK(mess_server_apply_upload(s, ups[0], ups_len[0], 1));
    CHECK_OK(mess_server_apply_delete(s, del2, del2_len, NULL));
    CHECK_OK(mess_server_checkpoint(s));
    mess_server_free(s);
    shard_file(dir, 1, ".delta", delta, sizeof delta);
    CHECK(delta[0] != '\0');
    copy_file(delta, keep);
    b = test_read_file(keep, &n);
    CHECK(b != NULL && n > 224);
    for (i = 0; b && i < n; i += 1 + n / 97) {
        int orc;
        b[i] ^= 0x10;
        write_file(delta, b, n);
        b[i] ^= 0x10;
        x = NULL;
        orc = mess_server_open(dir, NULL, NULL, 0, &x);
        /* the open reads a delta's header only (lazy apply): a byte of
         * its body fails the first search instead, naming the file */
        CHECK(orc == MESS_OK || (orc == MESS_EFORMAT && x == NULL && i < 192));
        if (orc == MESS_OK) {
            uint8_t *resp = NULL;
            size_t rl = 0;
            CHECK_RC(mess_server_search(x, req[0], req_len[0], 1, &resp, &rl), MESS_EFORMAT);
            CHECK(resp == NULL);
            CHECK_RC(mess_server_error(x, msg, sizeof msg), MESS_EFORMAT);
            CHECK(strstr(msg, "shard-0001-") != NULL && strstr(msg, ".delta") != NULL);
            mess_server_free(x);
        }
    }
    CHECK_RC(mess_server_verify(dir, msg, sizeof msg), MESS_EFORMAT);
    CHECK(strstr(msg, "shard-0001-") != NULL && strstr(msg, ".delta") != NULL);
    if (b)
        write_file(delta, b, n - 1); /* a length unlike the MANIFEST's: the open */
    CHECK_RC(mess_server_open(dir, NULL, NULL, 0, &x), MESS_EFORMAT);
    CHECK(unlink(delta) == 0);
    CHECK_RC(mess_server_open(dir, NULL, NULL, 0, &x), MESS_EIO);
    CHECK_RC(mess_server_verify(dir, msg, sizeof msg), MESS_EIO);
    CHECK(strstr(msg, ".delta") != NULL);
    {
        uint32_t pick[1] = {0}, one[1] = {1};
        x = NULL;
        CHECK_OK(mess_server_open(dir, NULL, pick, 1, &x)); /* shard 1 not needed */
        mess_server_free(x);
        copy_file(keep, delta);
        x = NULL;
        CHECK_OK(mess_server_open(dir, NULL, one, 1, &x));
        mess_server_free(x);
        CHECK_OK(mess_server_extract(dir, one, 1, dst, msg, sizeof msg));
        if (count_suffix(dst, ".delta") != 1)
            fprintf(stderr, "extract: %s\n", msg);
        CHECK(count_suffix(dst, ".delta") == 1);
        CHECK_OK(mess_server_verify(dst, msg, sizeof msg));
    }
    CHECK_OK(mess_server_verify(dir, msg, sizeof msg));
    free(b);
    unlink(keep);
    rm_tree(dst);
    rm_tree(dir);
}

/* Two holders of disjoint shard sets writing deltas in turn: each
 * checkpoint keeps the other's chains, sweeps only its own shards' files,
 * and the whole directory then opens (every chain applied) and answers as
 * the server in memory. */
static void test_delta_two_holders(void)
{
    static const uint32_t lo[2] = {0, 1}, hi[2] = {3, 2};
    char dir[256], fm[256], fs[256], msg[300];
    mess_server *s = NULL, *a = NULL, *b = NULL, *m = NULL;
    int k;
    path_of(dir, sizeof dir, "dtwo");
    path_of(fm, sizeof fm, "dtwo-mem.mess");
    path_of(fs, sizeof fs, "dtwo-dir.mess");
    CHECK_OK(mess_server_new(&P, &m));
    CHECK_OK(mess_server_create(dir, &P, &s));
    CHECK_OK(mess_server_apply_upload(s, up1, up1_len, 1));
    CHECK_OK(mess_server_apply_upload(s, up2, up2_len, 1));
    CHECK_OK(mess_server_apply_upload(m, up1, up1_len, 1));
    CHECK_OK(mess_server_apply_upload(m, up2, up2_len, 1));
    CHECK_OK(mess_server_checkpoint(s));
    mess_server_free(s);
    s = NULL;
    CHECK_OK(mess_server_open(dir, &P, lo, 2, &a));
    CHECK_OK(mess_server_open(dir, &P, hi, 2, &b));
    for (k = 0; k < 6; k++) {
        uint8_t *pa = NULL, *pb = NULL;
        size_t la = 0, lb = 0;
        CHECK_OK(mess_records_split(&P, ups[k], ups_len[k], lo, 2, &pa, &la));
        CHECK_OK(mess_records_split(&P, ups[k], ups_len[k], hi, 2, &pb, &lb));
        CHECK_OK(mess_server_apply_upload(m, ups[k], ups_len[k], 1));
        CHECK_OK(mess_server_apply_upload(a, pa, la, 1));
        CHECK_OK(mess_server_apply_upload(b, pb, lb, 1));
        if (k % 2) {
            CHECK_OK(mess_server_checkpoint(b));
            CHECK_OK(mess_server_checkpoint(a));
        } else {
            CHECK_OK(mess_server_checkpoint(a));
            CHECK_OK(mess_server_checkpoint(b));
        }
        mess_buf_free(pa);
        mess_buf_free(pb);
        CHECK_OK(mess_server_verify(dir, msg, sizeof msg));
        CHECK_OK(mess_server_open(dir, &P, NULL, 0, &s));
        CHECK(s && same_answers(m, s));
        mess_server_free(s);
        s = NULL;
    }
    CHECK(count_suffix(dir, ".delta") > 0);
    mess_server_free(a);
    mess_server_free(b);
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &s));
    CHECK_OK(mess_server_save(m, fm));
    CHECK_OK(mess_server_export(s, fs));
    CHECK(files_equal(fm, fs));
    mess_server_free(s);
    mess_server_free(m);
    unlink(fm);
    unlink(fs);
    rm_tree(dir);
}

/* Shard j's delta files in dir. */
static int shard_deltas(const char *dir, uint32_t j)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char prefix[32];
    int n = 0;
    snprintf(prefix, sizeof prefix, "shard-%04u-", (unsigned)j);
    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL) {
        size_t a = strlen(e->d_name);
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0 && a > 6 &&
             strcmp(e->d_name + a - 6, ".delta") == 0;
    }
    closedir(d);
    return n;
}

/* The fold rule's other half: tiny checkpoints (deletions) never pass
 * half the base, so a shard's chain grows to K = 8 deltas and the next
 * checkpoint that changes the shard folds it into a new base (its old
 * base and chain removed); no chain is ever longer, and every step opens
 * and answers as the server in memory. */
static void test_delta_fold_k(void)
{
    char dir[256], msg[300], g0[4][300], g1[300];
    mess_server *s = NULL, *m = NULL, *r = NULL;
    int k, chain[4], at8 = 0, folded8 = 0;
    uint32_t j;
    path_of(dir, sizeof dir, "dk");
    CHECK(P.shards == 4);
    CHECK_OK(mess_server_new(&P, &m));
    CHECK_OK(mess_server_create(dir, &P, &s));
    CHECK_OK(mess_server_apply_upload(s, up1, up1_len, 1));
    CHECK_OK(mess_server_apply_upload(s, up2, up2_len, 1));
    CHECK_OK(mess_server_apply_upload(m, up1, up1_len, 1));
    CHECK_OK(mess_server_apply_upload(m, up2, up2_len, 1));
    CHECK_OK(mess_server_checkpoint(s));
    for (j = 0; j < 4; j++) {
        chain[j] = 0;
        shard_file(dir, j, ".graph", g0[j], sizeof g0[j]);
    }
    for (k = 0; k < NDELS; k++) {
        CHECK_OK(mess_server_apply_delete(s, dels[k], dels_len[k], NULL));
        CHECK_OK(mess_server_apply_delete(m, dels[k], dels_len[k], NULL));
        CHECK_OK(mess_server_checkpoint(s));
        for (j = 0; j < 4; j++) {
            int c = shard_deltas(dir, j);
            shard_file(dir, j, ".graph", g1, sizeof g1);
            CHECK(c >= 0 && c <= 8);
            if (c == 8)
                at8 = 1;
            if (strcmp(g1, g0[j]) != 0) { /* a new base: the chain restarted */
                CHECK(c == 0 && access(g0[j], F_OK) != 0);
                if (chain[j] == 8)
                    folded8 = 1;
                memcpy(g0[j], g1, sizeof g1);
            } else
                CHECK(c == chain[j] || c == chain[j] + 1);
            chain[j] = c;
        }
        r = NULL;
        CHECK_OK(mess_server_open(dir, &P, NULL, 0, &r));
        CHECK(r && same_answers(m, r));
        mess_server_free(r);
    }
    CHECK(at8 && folded8);
    CHECK_OK(mess_server_verify(dir, msg, sizeof msg));
    mess_server_free(s);
    mess_server_free(m);
    rm_tree(dir);
}

/* ---- lazy apply (docs/PROTOCOL.md "Lazy apply") ------------------------- */

static void both_upload(mess_server *m, mess_server *s, const uint8_t *b, size_t n)
{
    CHECK_OK(mess_server_apply_upload(m, b, n, 1));
    CHECK_OK(mess_server_apply_upload(s, b, n, 1));
}

/* A directory whose four shards have delta chains of two deltas (a base of
 * 400 items, then two checkpoints of small changes), and in *m the server
 * in memory given the same buffers. */
static void make_chained(const char *dir, mess_server **m)
{
    mess_server *s = NULL;
    uint32_t j;
    CHECK_OK(mess_server_new(&P, m));
    CHECK_OK(mess_server_create(dir, &P, &s));
    both_upload(*m, s, up1, up1_len);
    both_upload(*m, s, up2, up2_len);
    CHECK_OK(mess_server_checkpoint(s));
    both_upload(*m, s, ups[0], ups_len[0]);
    CHECK_OK(mess_server_apply_delete(*m, del2, del2_len, NULL));
    CHECK_OK(mess_server_apply_delete(s, del2, del2_len, NULL));
    CHECK_OK(mess_server_checkpoint(s));
    both_upload(*m, s, ups[1], ups_len[1]);
    CHECK_OK(mess_server_checkpoint(s));
    mess_server_free(s);
    for (j = 0; j < P.shards; j++)
        CHECK(shard_deltas(dir, j) == 2);
}

/* 1 if both servers answer the partial search of request q on shard set
 * (sh, n) with the same bytes. */
static int same_partial(const mess_server *a, const mess_server *b, const uint8_t *r,
                        size_t rl, const uint32_t *sh, size_t n)
{
    uint8_t *pa = NULL, *pb = NULL;
    size_t la = 0, lb = 0;
    int same = mess_server_search_shards(a, r, rl, sh, n, 1, &pa, &la) == MESS_OK &&
               mess_server_search_shards(b, r, rl, sh, n, 1, &pb, &lb) == MESS_OK &&
               la == lb && memcmp(pa, pb, la) == 0;
    mess_buf_free(pa);
    mess_buf_free(pb);
    return same;
}

static int same_many(const mess_server *a, const mess_server *b)
{
    int q, same = 1;
    for (q = 0; q < NLQ; q++) {
        uint8_t *ra = NULL, *rb = NULL;
        size_t la = 0, lb = 0;
        if (mess_server_search(a, lreq[q], lreq_len[q], 1, &ra, &la) != MESS_OK ||
            mess_server_search(b, lreq[q], lreq_len[q], 1, &rb, &lb) != MESS_OK ||
            la != lb || memcmp(ra, rb, la) != 0)
            same = 0;
        mess_buf_free(ra);
        mess_buf_free(rb);
    }
    return same;
}

/* The open does not read a delta's body: one whose body has a byte
 * flipped (its header intact) opens, its stats come from the MANIFEST and
 * the headers, the other shards search and take updates; every call that
 * reads its shard fails with MESS_EFORMAT and mess_server_error names the
 * file, again and again; a checkpoint leaves that shard's chain as it was;
 * verify fails naming the file, and passes once the byte is restored. */
static void test_lazy_body(void)
{
    static const uint32_t others[3] = {0, 2, 3}, bad[1] = {1}, zero[1] = {0};
    char dir[256], delta[300], fe[256], msg[400];
    mess_server *m = NULL, *x = NULL;
    mess_server_stats sm, sx;
    uint8_t *b, *resp = NULL, *part = NULL;
    size_t n, rl = 0, pl = 0;
    int q;
    path_of(dir, sizeof dir, "lzb");
    path_of(fe, sizeof fe, "lzb.mess");
    make_chained(dir, &m);
    shard_file(dir, 1, ".delta", delta, sizeof delta);
    b = test_read_file(delta, &n);
    CHECK(b != NULL && n > 400);
    if (!b || n <= 400) {
        mess_server_free(m);
        rm_tree(dir);
        free(b);
        return;
    }
    b[n / 2] ^= 0x01;
    write_file(delta, b, n);
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &x));
    if (!x) {
        mess_server_free(m);
        rm_tree(dir);
        free(b);
        return;
    }
    CHECK_OK(mess_server_error(x, msg, sizeof msg));
    CHECK(msg[0] == '\0');
    sm.size = sx.size = sizeof sm;
    CHECK_OK(mess_server_stats_get(m, &sm));
    CHECK_OK(mess_server_stats_get(x, &sx));
    CHECK(sx.entries == sm.entries && sx.live == sm.live && sx.deleted == sm.deleted &&
          sx.min_shard == sm.min_shard && sx.max_shard == sm.max_shard);
    for (q = 0; q < NQ; q++)
        CHECK(same_partial(m, x, req[q], req_len[q], others, 3));
    for (q = 0; q < 3; q++) {
        /* sticky: the same failure each time, never a retry */
        CHECK_RC(mess_server_search(x, req[q], req_len[q], 1, &resp, &rl), MESS_EFORMAT);
        CHECK(resp == NULL);
        CHECK_RC(mess_server_search_shards(x, req[q], req_len[q], bad, 1, 1, &part, &pl),
                 MESS_EFORMAT);
        CHECK_RC(mess_server_error(x, msg, sizeof msg), MESS_EFORMAT);
        CHECK(strstr(msg, strrchr(delta, '/') + 1) != NULL);
    }
    CHECK_RC(mess_server_export(x, fe), MESS_EFORMAT);
    CHECK(access(fe, F_OK) != 0);
    CHECK_RC(mess_server_compact(x, 1), MESS_EFORMAT);
    {
        /* an update of shard 1 fails; one of shard 0 goes in */
        uint8_t *p1 = NULL, *p0 = NULL;
        size_t l1 = 0, l0 = 0;
        CHECK_OK(mess_records_split(&P, ups[2], ups_len[2], bad, 1, &p1, &l1));
        CHECK_OK(mess_records_split(&P, ups[2], ups_len[2], zero, 1, &p0, &l0));
        CHECK_RC(mess_server_apply_upload(x, p1, l1, 1), MESS_EFORMAT);
        CHECK_OK(mess_server_apply_upload(x, p0, l0, 1));
        CHECK_OK(mess_server_apply_upload(m, p0, l0, 1));
        mess_buf_free(p1);
        mess_buf_free(p0);
    }
    for (q = 0; q < NQ; q++)
        CHECK(same_partial(m, x, req[q], req_len[q], others, 3));
    CHECK_OK(mess_server_checkpoint(x));
    mess_server_free(x);
    x = NULL;
    {
        size_t n2;
        uint8_t *now = test_read_file(delta, &n2);
        CHECK(now && n2 == n && memcmp(now, b, n) == 0); /* untouched */
        free(now);
    }
    CHECK(shard_deltas(dir, 1) == 2);
    CHECK_RC(mess_server_verify(dir, msg, sizeof msg), MESS_EFORMAT);
    CHECK(strstr(msg, strrchr(delta, '/') + 1) != NULL);
    b[n / 2] ^= 0x01;
    write_file(delta, b, n);
    CHECK_OK(mess_server_verify(dir, msg, sizeof msg));
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &x));
    CHECK(x && same_many(m, x));
    mess_server_free(x);
    mess_server_free(m);
    free(b);
    rm_tree(dir);
}

/* A lazily opened server answers exactly as the server in memory and as
 * one without chains (its export imported), shard by shard as each is
 * first searched and then whole; the first search is what applies (the
 * handle grows then, not at the open). */
static void test_lazy_same(void)
{
    char dir[256], dir2[256], fm[256];
    mess_server *m = NULL, *x = NULL, *y = NULL;
    mess_server_stats s0, s1;
    uint32_t j;
    int q;
    path_of(dir, sizeof dir, "lzs");
    path_of(dir2, sizeof dir2, "lzs-imported");
    path_of(fm, sizeof fm, "lzs.mess");
    make_chained(dir, &m);
    CHECK_OK(mess_server_save(m, fm));
    CHECK_OK(mess_server_import(fm, dir2));
    CHECK(count_suffix(dir2, ".delta") == 0);
    CHECK_OK(mess_server_open(dir2, &P, NULL, 0, &y));
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &x));
    if (!x || !y) {
        mess_server_free(x);
        mess_server_free(y);
        mess_server_free(m);
        return;
    }
    s0.size = s1.size = sizeof s0;
    CHECK_OK(mess_server_stats_get(x, &s0));
    for (j = 0; j < P.shards; j++) {
        uint32_t one[1];
        one[0] = (j * 3 + 1) % P.shards; /* 1, 0, 3, 2 */
        for (q = 0; q < NLQ; q++) {
            CHECK(same_partial(m, x, lreq[q], lreq_len[q], one, 1));
            CHECK(same_partial(y, x, lreq[q], lreq_len[q], one, 1));
        }
    }
    CHECK(same_many(m, x));
    CHECK(same_many(y, x));
    CHECK_OK(mess_server_stats_get(x, &s1));
    CHECK(s1.entries == s0.entries && s1.live == s0.live);
    CHECK(s1.bytes > s0.bytes); /* the chains were applied after the open */
    mess_server_free(x);
    x = NULL;
    /* the batch search and the server view as first readers */
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &x));
    if (x) {
        uint8_t *ra[NLQ], *rb = NULL;
        size_t la[NLQ], lb = 0;
        size_t nx = 0, nm = 0;
        CHECK_OK(mess_server_search_batch(x, (const uint8_t *const *)lreq, lreq_len, NLQ, NULL,
                                          ra, la, NULL));
        for (q = 0; q < NLQ; q++) {
            CHECK_OK(mess_server_search(m, lreq[q], lreq_len[q], 1, &rb, &lb));
            CHECK(ra[q] && la[q] == lb && memcmp(ra[q], rb, lb) == 0);
            mess_buf_free(ra[q]);
            mess_buf_free(rb);
            rb = NULL;
        }
        mess_server_free(x);
        x = NULL;
        CHECK_OK(mess_server_open(dir, &P, NULL, 0, &x));
        for (j = 0; x && j < P.shards; j++) {
            uint8_t *lx, *lm;
            CHECK_OK(mess_server_shard_nodes(x, j, &nx));
            CHECK_OK(mess_server_shard_nodes(m, j, &nm));
            CHECK(nx == nm && nx > 0);
            lx = (uint8_t *)malloc(nx * MESS_LABEL_BYTES);
            lm = (uint8_t *)malloc(nm * MESS_LABEL_BYTES);
            CHECK_OK(mess_server_shard_labels(x, j, lx, nx));
            CHECK_OK(mess_server_shard_labels(m, j, lm, nm));
            CHECK(memcmp(lx, lm, nx * MESS_LABEL_BYTES) == 0);
            free(lx);
            free(lm);
        }
    }
    mess_server_free(x);
    mess_server_free(y);
    mess_server_free(m);
    unlink(fm);
    rm_tree(dir);
    rm_tree(dir2);
}

/* Checkpoint, compact and export of a server where some shards are
 * applied and others not: the directory opens, verifies and answers as
 * the server in memory; the unapplied unchanged shards keep their chains
 * (the same files); a compaction folds every chain away. */
static void test_lazy_partial(void)
{
    static const uint32_t zero[1] = {0}, two[1] = {2}, one[1] = {1}, three[1] = {3};
    char dir[256], fm[256], fx[256], msg[400], d1[300], d3[300], e1[300], e3[300];
    mess_server *m = NULL, *x = NULL;
    uint8_t *part = NULL;
    size_t pl = 0;
    path_of(dir, sizeof dir, "lzp");
    path_of(fm, sizeof fm, "lzp-mem.mess");
    path_of(fx, sizeof fx, "lzp-dir.mess");
    make_chained(dir, &m);

    /* export with shard 3 applied only */
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &x));
    CHECK(x && same_partial(m, x, req[0], req_len[0], three, 1));
    CHECK_OK(mess_server_export(x, fx));
    CHECK_OK(mess_server_save(m, fm));
    CHECK(files_equal(fm, fx));
    mess_server_free(x);
    x = NULL;

    /* checkpoint: shard 2 applied, shard 0 applied and changed, 1 and 3
     * never read */
    shard_file(dir, 1, ".delta", d1, sizeof d1);
    shard_file(dir, 3, ".delta", d3, sizeof d3);
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &x));
    CHECK(x && same_partial(m, x, req[1], req_len[1], two, 1));
    CHECK_OK(mess_records_split(&P, ups[3], ups_len[3], zero, 1, &part, &pl));
    CHECK_OK(mess_server_apply_upload(x, part, pl, 1));
    CHECK_OK(mess_server_apply_upload(m, part, pl, 1));
    mess_buf_free(part);
    CHECK_OK(mess_server_checkpoint(x));
    mess_server_free(x);
    x = NULL;
    shard_file(dir, 1, ".delta", e1, sizeof e1);
    shard_file(dir, 3, ".delta", e3, sizeof e3);
    CHECK(strcmp(d1, e1) == 0 && strcmp(d3, e3) == 0);
    CHECK(shard_deltas(dir, 1) == 2 && shard_deltas(dir, 2) == 2 && shard_deltas(dir, 3) == 2);
    CHECK(shard_deltas(dir, 0) == 3);
    CHECK_OK(mess_server_verify(dir, msg, sizeof msg));
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &x));
    CHECK(x && same_many(m, x));
    /* its change record started right after the apply: shard 0 again */
    CHECK_OK(mess_records_split(&P, ups[4], ups_len[4], zero, 1, &part, &pl));
    CHECK_OK(mess_server_apply_upload(x, part, pl, 1));
    CHECK_OK(mess_server_apply_upload(m, part, pl, 1));
    mess_buf_free(part);
    CHECK_OK(mess_server_checkpoint(x));
    mess_server_free(x);
    x = NULL;
    CHECK_OK(mess_server_verify(dir, msg, sizeof msg));
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &x));
    CHECK(x && same_many(m, x));
    mess_server_free(x);
    x = NULL;

    /* compact with shard 1 applied only: every chain folds away */
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &x));
    CHECK(x && same_partial(m, x, req[2], req_len[2], one, 1));
    CHECK_OK(mess_server_compact(x, 1));
    CHECK_OK(mess_server_compact(m, 1));
    CHECK_OK(mess_server_checkpoint(x));
    mess_server_free(x);
    x = NULL;
    CHECK(count_suffix(dir, ".delta") == 0);
    CHECK(count_suffix(dir, ".graph") == (int)P.shards);
    CHECK_OK(mess_server_verify(dir, msg, sizeof msg));
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &x));
    CHECK(x && same_many(m, x));
    CHECK_OK(mess_server_export(x, fx));
    CHECK_OK(mess_server_save(m, fm));
    CHECK(files_equal(fm, fx));
    /* chains without deletions (nothing to compact) fold away too */
    if (x)
        both_upload(m, x, ups[5], ups_len[5]);
    CHECK_OK(mess_server_checkpoint(x));
    mess_server_free(x);
    x = NULL;
    CHECK(count_suffix(dir, ".delta") > 0);
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &x));
    CHECK_OK(mess_server_compact(x, 1));
    CHECK_OK(mess_server_checkpoint(x));
    mess_server_free(x);
    x = NULL;
    CHECK(count_suffix(dir, ".delta") == 0);
    CHECK_OK(mess_server_verify(dir, msg, sizeof msg));
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &x));
    CHECK(x && same_many(m, x));
    mess_server_free(x);
    mess_server_free(m);
    unlink(fm);
    unlink(fx);
    rm_tree(dir);
}

/* A handle opened lazily before another handle's checkpoint folds the
 * chains (a compaction: each chain's deltas are replaced by a new graph
 * file and unlinked) still answers as it would have at its open: the
 * files its pending chains need were unlinked, not changed, and a reader
 * keeps using what it opened (docs/PROTOCOL.md "Lazy apply"), as it keeps
 * the pages of a replaced graph file it maps. */
static void test_lazy_reader_fold(void)
{
    static const uint32_t two[1] = {2}, one[1] = {1};
    char dir[256], msg[400], delta[300];
    mess_server *m = NULL, *x = NULL, *w = NULL;
    uint8_t *part = NULL;
    size_t pl = 0;
    path_of(dir, sizeof dir, "lzr");
    make_chained(dir, &m);
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &x));
    /* shard 2 applied before the fold, the others after it */
    CHECK(x && same_partial(m, x, req[0], req_len[0], two, 1));
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &w));
    CHECK_OK(mess_server_compact(w, 1));
    CHECK_OK(mess_server_checkpoint(w));
    mess_server_free(w);
    CHECK(count_suffix(dir, ".delta") == 0); /* the chains' files are gone */
    CHECK(x && same_many(m, x));
    if (x && mess_server_error(x, msg, sizeof msg) != MESS_OK)
        fprintf(stderr, "  %s\n", msg);
    CHECK(x && mess_server_error(x, msg, sizeof msg) == MESS_OK && msg[0] == '\0');
    mess_server_free(x);
    x = NULL;
    mess_server_free(m);
    rm_tree(dir);

    /* the mapping is read only when the name is gone: a delta shortened
     * under its name after the open is an error naming it, never a read
     * past the file's end (SIGBUS), and the other shards keep working */
    make_chained(dir, &m);
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &x));
    shard_file(dir, 1, ".delta", delta, sizeof delta);
    CHECK(delta[0] && truncate(delta, (off_t)(file_size(delta) / 2)) == 0);
    CHECK_RC(mess_server_search_shards(x, req[0], req_len[0], one, 1, 1, &part, &pl),
             MESS_EFORMAT);
    CHECK_RC(mess_server_error(x, msg, sizeof msg), MESS_EFORMAT);
    CHECK(delta[0] && strstr(msg, strrchr(delta, '/') + 1) != NULL);
    CHECK(x && same_partial(m, x, req[0], req_len[0], two, 1));
    mess_server_free(x);
    mess_server_free(m);
    rm_tree(dir);
}

/* A first search that cannot open a delta because the process is out of
 * file descriptors (EMFILE) fails with MESS_EIO, but the shard is not
 * marked failed: once descriptors are free the next search applies the
 * chain and answers as the server in memory. */
static void test_lazy_no_fds(void)
{
    static const uint32_t one[1] = {1};
    char dir[256], msg[400];
    mess_server *m = NULL, *x = NULL;
    struct rlimit old, low;
    uint8_t *part = NULL;
    size_t pl = 0;
    int fd, rc, err;
    path_of(dir, sizeof dir, "lzf");
    make_chained(dir, &m);
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &x));
    fd = dup(0); /* the lowest free descriptor: every one below is taken */
    CHECK(fd >= 0 && getrlimit(RLIMIT_NOFILE, &old) == 0);
    if (!x || fd < 0) {
        mess_server_free(x);
        mess_server_free(m);
        rm_tree(dir);
        return;
    }
    close(fd);
    low = old;
    low.rlim_cur = (rlim_t)fd;
    CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0);
    errno = 0;
    rc = mess_server_search_shards(x, req[0], req_len[0], one, 1, 1, &part, &pl);
    err = errno;
    CHECK(setrlimit(RLIMIT_NOFILE, &old) == 0);
    CHECK_RC(rc, MESS_EIO);
    CHECK(err == EMFILE);
    mess_buf_free(part);
    part = NULL;
    CHECK_OK(mess_server_error(x, msg, sizeof msg)); /* not the shard's fault */
    CHECK(same_partial(m, x, req[0], req_len[0], one, 1));
    CHECK(same_many(m, x));
    mess_server_free(x);
    mess_server_free(m);
    rm_tree(dir);
}

/* create refuses a non-empty directory and fills an empty one. */
static void test_create_rules(void)
{
    char dir[256], f[300];
    mess_server *s = NULL;
    path_of(dir, sizeof dir, "cr");
    CHECK(mkdir(dir, 0755) == 0);
    snprintf(f, sizeof f, "%s/other", dir);
    write_file(f, (const uint8_t *)"x", 1);
    errno = 0;
    CHECK_RC(mess_server_create(dir, &P, &s), MESS_EEXIST);
    CHECK(errno == EEXIST && s == NULL);
    CHECK(strcmp(mess_strerror(MESS_EEXIST), "file exists (not replaced)") == 0);
    errno = 0; /* a file there */
    CHECK_RC(mess_server_create(f, &P, &s), MESS_EEXIST);
    CHECK(errno == EEXIST && s == NULL);
    CHECK(unlink(f) == 0);
    CHECK_OK(mess_server_create(dir, &P, &s));
    mess_server_free(s);
    CHECK_RC(mess_server_create(NULL, &P, &s), MESS_EINVAL);
    CHECK_RC(mess_server_open(NULL, NULL, NULL, 0, &s), MESS_EINVAL);
    CHECK_RC(mess_server_checkpoint(NULL), MESS_EINVAL);
    rm_tree(dir);
}

int main(void)
{
    static const uint8_t seed[32] = "libmess store test seed 00000001";
    mess_client *c = NULL;
    size_t i, j;
    uint64_t ids[400];

    vecs = test_sift_learn_rows(1000, DIM);
    if (!vecs || test_small_client(&P, DIM, 4, 2, vecs + 400 * DIM, 600, seed, &c) != MESS_OK)
        return 1;
    for (i = 0; i < 400; i++)
        ids[i] = i;
    if (mess_client_upload(c, ids, vecs, 200, 1, &up1, &up1_len) != MESS_OK ||
        mess_client_upload(c, ids + 200, vecs + 200 * DIM, 200, 1, &up2, &up2_len) != MESS_OK ||
        mess_client_delete(c, ids, 50, &del, &del_len) != MESS_OK ||
        mess_client_delete(c, ids + 60, 5, &del2, &del2_len) != MESS_OK) {
        fprintf(stderr, "cannot encode the test buffers\n");
        return 1;
    }
    for (i = 0; i < NDELS; i++)
        if (mess_client_delete(c, ids + 100 + 10 * i, 10, &dels[i], &dels_len[i]) != MESS_OK) {
            fprintf(stderr, "cannot encode the deletions\n");
            return 1;
        }
    for (i = 0; i < NSMALL; i++) {
        uint64_t sid[10];
        for (j = 0; j < 10; j++)
            sid[j] = 1000 + 10 * i + j;
        if (mess_client_upload(c, sid, vecs + (600 + 10 * i) * DIM, 10, 1, &ups[i],
                               &ups_len[i]) != MESS_OK) {
            fprintf(stderr, "cannot encode the small uploads\n");
            return 1;
        }
    }
    for (i = 0; i < NQ; i++) {
        mess_query *q = NULL;
        if (mess_client_request(c, vecs + (500 + i) * DIM, 64, &q, &req[i], &req_len[i]) !=
            MESS_OK) {
            fprintf(stderr, "cannot encode the test requests\n");
            return 1;
        }
        mess_query_free(q);
    }
    for (i = 0; i < NLQ; i++) {
        mess_query *q = NULL;
        if (mess_client_request(c, vecs + (700 + i) * DIM, 64, &q, &lreq[i], &lreq_len[i]) !=
            MESS_OK) {
            fprintf(stderr, "cannot encode the test requests\n");
            return 1;
        }
        mess_query_free(q);
    }
    mkdir("build", 0755);
    if (!mkdtemp(root)) {
        fprintf(stderr, "cannot create a directory under build/\n");
        return 1;
    }
    path_of(client_file, sizeof client_file, "client.mess");
    if (mess_client_save(c, client_file, NULL) != MESS_OK) {
        fprintf(stderr, "cannot save the test client\n");
        return 1;
    }
    mess_client_free(c);
    RUN(test_roundtrip_append);
    RUN(test_one_writer);
    RUN(test_compact_export_import);
    RUN(test_advice);
    RUN(test_subset);
    RUN(test_two_holders);
    RUN(test_hostile);
    RUN(test_create_rules);
    RUN(test_delta_chain);
    RUN(test_delta_hostile);
    RUN(test_delta_two_holders);
    RUN(test_delta_fold_k);
    RUN(test_lazy_body);
    RUN(test_lazy_same);
    RUN(test_lazy_partial);
    RUN(test_lazy_reader_fold);
    RUN(test_lazy_no_fds);
    for (i = 0; i < NSMALL; i++)
        mess_buf_free(ups[i]);
    mess_buf_free(del2);
    for (i = 0; i < NDELS; i++)
        mess_buf_free(dels[i]);
    for (i = 0; i < NQ; i++)
        mess_buf_free(req[i]);
    for (i = 0; i < NLQ; i++)
        mess_buf_free(lreq[i]);
    mess_buf_free(up1);
    mess_buf_free(up2);
    mess_buf_free(del);
    free(vecs);
    CHECK(unlink(client_file) == 0);
    CHECK(rmdir(root) == 0);
    HARNESS_END();
}
