/*
 * test_extract.c - a shard group's directory made from a server directory
 * (mess_server_extract, server_extract.c) and mess_server_log_position.
 * The extracted directory answers its shards byte for byte as the source
 * does, refuses the others when opened on its set, takes updates through
 * its own log (never reaching the source's files), and every refusal
 * (dst exists, source missing / not a directory / damaged / with updates
 * in its log, bad shard sets) leaves no dst and no temporary directory.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../mess.h"
#include "harness.h"
#include "testdir.h"
#include "sift.h"

#define DIM 64
#define NQ 6

static char root[] = "build/extractXXXXXX";
static mess_params P;
static float *vecs;
static uint8_t *up1, *up2, *up3, *del;
static size_t up1_len, up2_len, up3_len, del_len;
static uint8_t *req[NQ];
static size_t req_len[NQ];

static void path_of(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", root, name);
}

/* Entries of root whose name starts with prefix. */
static int count_prefix(const char *prefix)
{
    DIR *d = opendir(root);
    struct dirent *e;
    int n = 0;
    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

/* 1 if a and b answer every request on the shard set with the same bytes. */
static int same_parts(const mess_server *a, const mess_server *b, const uint32_t *set,
                      size_t n)
{
    int q, same = 1;
    for (q = 0; q < NQ; q++) {
        uint8_t *ra = NULL, *rb = NULL;
        size_t la = 0, lb = 0;
        if (mess_server_search_shards(a, req[q], req_len[q], set, n, 1, &ra, &la) != MESS_OK ||
            mess_server_search_shards(b, req[q], req_len[q], set, n, 1, &rb, &lb) != MESS_OK ||
            la != lb || memcmp(ra, rb, la) != 0)
            same = 0;
        mess_buf_free(ra);
        mess_buf_free(rb);
    }
    return same;
}

/* A source directory with two uploads and a delete, checkpointed. */
static void make_source(const char *dir)
{
    mess_server *s = NULL;
    CHECK_OK(mess_server_create(dir, &P, &s));
    CHECK_OK(mess_server_apply_upload(s, up1, up1_len, 1));
    CHECK_OK(mess_server_apply_upload(s, up2, up2_len, 1));
    CHECK_OK(mess_server_apply_delete(s, del, del_len, NULL));
    CHECK_OK(mess_server_checkpoint(s));
    mess_server_free(s);
}

static void test_extract_answers(void)
{
    char src[256], dst[256], msg[300], a[300], b[300];
    uint32_t set[2] = {2, 0}, sorted[2] = {0, 2}, other[1] = {1};
    mess_server *s = NULL, *x = NULL, *w = NULL, *m = NULL;
    uint8_t *resp = NULL, *part = NULL;
    size_t resp_len = 0, part_len = 0, n = 0;
    uint64_t gen = 0, recs = 0, src_gen = 0;
    struct stat sa, sb;
    uint32_t j;

    path_of(src, sizeof src, "src");
    path_of(dst, sizeof dst, "group-0");
    make_source(src);
    CHECK_OK(mess_server_open(src, &P, NULL, 0, &s));
    CHECK_OK(mess_server_log_position(s, &src_gen, &recs));
    CHECK(recs == 0);
    msg[0] = 'x';
    CHECK_OK(mess_server_extract(src, set, 2, dst, msg, sizeof msg));
    CHECK(msg[0] == '\0');
    CHECK(count_prefix("group-0.tmp-") == 0);

    /* opened on its set: its shards byte for byte, the others refused */
    CHECK_OK(mess_server_open(dst, &P, set, 2, &x));
    CHECK(same_parts(s, x, sorted, 2));
    CHECK(same_parts(s, x, set + 1, 1));
    CHECK_RC(mess_server_search_shards(x, req[0], req_len[0], other, 1, 1, &resp, &resp_len),
             MESS_ESTATE);
    CHECK_RC(mess_server_search(x, req[0], req_len[0], 1, &resp, &resp_len), MESS_ESTATE);
    CHECK(resp == NULL);
    CHECK_OK(mess_server_log_position(x, &gen, &recs));
    CHECK(gen == src_gen && recs == 0);
    mess_server_free(x);
    x = NULL;
    CHECK(mess_server_verify(dst, msg, sizeof msg) == MESS_OK);

    /* the files are copies (not links) of the source's, the others empty */
    for (j = 0; j < 4; j++) {
        shard_file(src, j, ".arena", a, sizeof a);
        shard_file(dst, j, ".arena", b, sizeof b);
        CHECK(a[0] && b[0] && stat(a, &sa) == 0 && stat(b, &sb) == 0);
        CHECK(sa.st_ino != sb.st_ino && sb.st_nlink == 1);
        CHECK(j == 1 || j == 3 ? sb.st_size == 0 && sa.st_size > 0 : files_equal(a, b));
        shard_file(src, j, ".graph", a, sizeof a);
        shard_file(dst, j, ".graph", b, sizeof b);
        CHECK(j == 1 || j == 3 ? !files_equal(a, b) : files_equal(a, b));
    }

    /* opened whole (a group's server): the same answers on its shards, the
     * others empty; its updates go to its own log and files only */
    CHECK_OK(mess_server_open(dst, &P, NULL, 0, &w));
    CHECK(same_parts(s, w, sorted, 2));
    CHECK_OK(mess_server_shard_nodes(w, 1, &n));
    CHECK(n == 0);
    CHECK_OK(mess_records_split(&P, up3, up3_len, sorted, 2, &part, &part_len));
    shard_file(src, 0, ".arena", a, sizeof a);
    CHECK(stat(a, &sa) == 0);
    CHECK_OK(mess_server_apply_upload(w, part, part_len, 1));
    CHECK_OK(mess_server_log_position(w, &gen, &recs));
    CHECK(gen == src_gen && recs == 1);
    mess_server_free(w);
    w = NULL;
    /* reopened: the log's upload replayed */
    CHECK_OK(mess_server_open(dst, &P, NULL, 0, &w));
    CHECK_OK(mess_server_log_position(w, &gen, &recs));
    CHECK(gen == src_gen && recs == 1);
    CHECK_OK(mess_server_new(&P, &m)); /* the source's changes and up3, in memory */
    CHECK_OK(mess_server_apply_upload(m, up1, up1_len, 1));
    CHECK_OK(mess_server_apply_upload(m, up2, up2_len, 1));
    CHECK_OK(mess_server_apply_delete(m, del, del_len, NULL));
    CHECK_OK(mess_server_apply_upload(m, up3, up3_len, 1));
    CHECK(same_parts(m, w, sorted, 2));
    CHECK(!same_parts(s, w, sorted, 2));
    mess_server_free(m);
    m = NULL;
    CHECK_OK(mess_server_checkpoint(w));
    CHECK_OK(mess_server_log_position(w, &gen, &recs));
    CHECK(gen == src_gen + 1 && recs == 0);
    shard_file(src, 0, ".arena", b, sizeof b);
    CHECK(stat(b, &sb) == 0 && sb.st_size == sa.st_size); /* the source's arena as it was */
    mess_server_free(w);
    mess_server_free(s);
    mess_buf_free(part);

    /* the source's files are untouched: it opens at its generation */
    CHECK_OK(mess_server_open(src, &P, NULL, 0, &m));
    CHECK_OK(mess_server_log_position(m, &gen, &recs));
    CHECK(gen == src_gen && recs == 0);
    mess_server_free(m);
    rm_tree(dst);
    rm_tree(src);
}

/* Each refusal: its code and message, no dst and no temporary directory. */
static void test_extract_refusals(void)
{
    char src[256], dst[256], msg[300], path[300], file[300];
    uint32_t set[1] = {1}, dup[2] = {1, 1}, far[1] = {4};
    mess_server *s = NULL;
    size_t n;
    uint8_t *b;

    path_of(src, sizeof src, "rsrc");
    path_of(dst, sizeof dst, "rdst");
    path_of(file, sizeof file, "afile");
    make_source(src);

#define REFUSED(call, code, text)                                              \
    do {                                                                       \
        msg[0] = '\0';                                                         \
        CHECK_RC(call, code);                                                  \
        CHECK(strstr(msg, text) != NULL);                                      \
        if (!strstr(msg, text))                                                \
            fprintf(stderr, "  message: %s\n", msg);                           \
        CHECK(access(dst, F_OK) != 0 && count_prefix("rdst.tmp-") == 0);       \
    } while (0)

    REFUSED(mess_server_extract(src, dup, 2, dst, msg, sizeof msg), MESS_EINVAL, "twice");
    REFUSED(mess_server_extract(src, far, 1, dst, msg, sizeof msg), MESS_EINVAL, "range");
    REFUSED(mess_server_extract(src, set, 0, dst, msg, sizeof msg), MESS_EINVAL, "invalid");
    path_of(path, sizeof path, "missing");
    REFUSED(mess_server_extract(path, set, 1, dst, msg, sizeof msg), MESS_EIO,
            "No such file");
    b = (uint8_t *)"not a server";
    {
        FILE *f = fopen(file, "wb");
        CHECK(f && fwrite(b, 1, 12, f) == 12);
        if (f)
            fclose(f);
    }
    REFUSED(mess_server_extract(file, set, 1, dst, msg, sizeof msg), MESS_EFORMAT,
            "not a server directory");

    /* dst exists: a directory (even empty) or a file */
    CHECK(mkdir(dst, 0755) == 0);
    errno = 0;
    msg[0] = '\0';
    CHECK_RC(mess_server_extract(src, set, 1, dst, msg, sizeof msg), MESS_EEXIST);
    CHECK(errno == EEXIST && strstr(msg, "exists") != NULL);
    CHECK(rmdir(dst) == 0);
    errno = 0;
    CHECK_RC(mess_server_extract(src, set, 1, file, msg, sizeof msg), MESS_EEXIST);
    CHECK(errno == EEXIST);
    CHECK(count_prefix("afile.tmp-") == 0);

    /* a graph file modified after its header: the digest refuses it */
    shard_file(src, 1, ".graph", path, sizeof path);
    b = test_read_file(path, &n);
    CHECK(b != NULL && n > 200);
    if (b) {
        FILE *f;
        b[n - 1] ^= 1;
        f = fopen(path, "r+b");
        CHECK(f && fseek(f, (long)n - 1, SEEK_SET) == 0 && fputc(b[n - 1], f) != EOF);
        if (f)
            fclose(f);
        REFUSED(mess_server_extract(src, set, 1, dst, msg, sizeof msg), MESS_EFORMAT,
                "digest differs");
        /* another shard's set does not read that file */
        {
            uint32_t zero[1] = {0};
            CHECK_OK(mess_server_extract(src, zero, 1, dst, msg, sizeof msg));
            rm_tree(dst);
        }
        b[n - 1] ^= 1;
        f = fopen(path, "r+b");
        CHECK(f && fseek(f, (long)n - 1, SEEK_SET) == 0 && fputc(b[n - 1], f) != EOF);
        if (f)
            fclose(f);
        free(b);
    }
    /* an arena shorter than the manifest says */
    shard_file(src, 1, ".arena", path, sizeof path);
    b = test_read_file(path, &n);
    CHECK(b != NULL && n > 10);
    if (b) {
        CHECK(truncate(path, (off_t)n - 10) == 0);
        REFUSED(mess_server_extract(src, set, 1, dst, msg, sizeof msg), MESS_EFORMAT,
                "truncated");
        {
            FILE *f = fopen(path, "wb");
            CHECK(f && fwrite(b, 1, n, f) == n);
            if (f)
                fclose(f);
        }
        free(b);
    }
    /* a missing graph file */
    shard_file(src, 1, ".graph", path, sizeof path);
    {
        char moved[320];
        snprintf(moved, sizeof moved, "%s.away", path);
        CHECK(rename(path, moved) == 0);
        REFUSED(mess_server_extract(src, set, 1, dst, msg, sizeof msg), MESS_EIO,
                "No such file");
        CHECK(rename(moved, path) == 0);
    }
    /* a damaged MANIFEST */
    path_of(path, sizeof path, "rsrc/MANIFEST");
    b = test_read_file(path, &n);
    CHECK(b != NULL);
    if (b) {
        FILE *f;
        b[20] ^= 0x40;
        f = fopen(path, "wb");
        CHECK(f && fwrite(b, 1, n, f) == n);
        if (f)
            fclose(f);
        REFUSED(mess_server_extract(src, set, 1, dst, msg, sizeof msg), MESS_EFORMAT,
                "checksum");
        b[20] ^= 0x40;
        f = fopen(path, "wb");
        CHECK(f && fwrite(b, 1, n, f) == n);
        if (f)
            fclose(f);
        free(b);
    }
    /* updates in the source's log after its generation */
    CHECK_OK(mess_server_open(src, &P, NULL, 0, &s));
    CHECK_OK(mess_server_apply_upload(s, up3, up3_len, 1));
    mess_server_free(s);
    REFUSED(mess_server_extract(src, set, 1, dst, msg, sizeof msg), MESS_ESTATE,
            "checkpoint the source first");
    /* repaired source: the extract goes through */
    CHECK_OK(mess_server_open(src, &P, NULL, 0, &s));
    CHECK_OK(mess_server_checkpoint(s));
    mess_server_free(s);
    CHECK_OK(mess_server_extract(src, set, 1, dst, msg, sizeof msg));
    CHECK_OK(mess_server_verify(dst, msg, sizeof msg));
    unlink(file);
    rm_tree(dst);
    rm_tree(src);
#undef REFUSED
}

static void test_log_position(void)
{
    char dir[256];
    mess_server *m = NULL, *s = NULL;
    uint64_t gen = 9, recs = 9;
    size_t missing;
    path_of(dir, sizeof dir, "pos");
    CHECK_OK(mess_server_new(&P, &m));
    CHECK_RC(mess_server_log_position(m, &gen, &recs), MESS_EINVAL);
    CHECK(gen == 0 && recs == 0);
    CHECK_RC(mess_server_log_position(NULL, &gen, &recs), MESS_EINVAL);
    mess_server_free(m);
    CHECK_OK(mess_server_create(dir, &P, &s));
    CHECK_RC(mess_server_log_position(s, NULL, &recs), MESS_EINVAL);
    CHECK_OK(mess_server_log_position(s, &gen, &recs));
    CHECK(gen == 1 && recs == 0);
    CHECK_OK(mess_server_apply_upload(s, up1, up1_len, 1));
    CHECK_OK(mess_server_apply_delete(s, del, del_len, &missing));
    CHECK_OK(mess_server_log_position(s, &gen, &recs));
    CHECK(gen == 1 && recs == 2);
    /* a refused update is no record */
    CHECK_RC(mess_server_apply_upload(s, up1, up1_len, 1), MESS_ESTATE);
    CHECK_OK(mess_server_log_position(s, &gen, &recs));
    CHECK(gen == 1 && recs == 2);
    CHECK_OK(mess_server_checkpoint(s));
    CHECK_OK(mess_server_log_position(s, &gen, &recs));
    CHECK(gen == 2 && recs == 0);
    CHECK_OK(mess_server_apply_upload(s, up2, up2_len, 1));
    mess_server_free(s);
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &s));
    CHECK_OK(mess_server_log_position(s, &gen, &recs));
    CHECK(gen == 2 && recs == 1);
    mess_server_free(s);
    rm_tree(dir);
}

int main(void)
{
    static const uint8_t seed[32] = "libmess extract test seed 000001";
    mess_client *c = NULL;
    size_t i;
    uint64_t ids[450];

    vecs = test_sift_learn_rows(1000, DIM);
    if (!vecs || test_small_client(&P, DIM, 4, 2, vecs + 450 * DIM, 550, seed, &c) != MESS_OK)
        return 1;
    for (i = 0; i < 450; i++)
        ids[i] = i;
    if (mess_client_upload(c, ids, vecs, 200, 1, &up1, &up1_len) != MESS_OK ||
        mess_client_upload(c, ids + 200, vecs + 200 * DIM, 200, 1, &up2, &up2_len) != MESS_OK ||
        mess_client_upload(c, ids + 400, vecs + 400 * DIM, 50, 1, &up3, &up3_len) != MESS_OK ||
        mess_client_delete(c, ids, 50, &del, &del_len) != MESS_OK) {
        fprintf(stderr, "cannot encode the test buffers\n");
        return 1;
    }
    for (i = 0; i < NQ; i++) {
        mess_query *q = NULL;
        if (mess_client_request(c, vecs + (460 + i) * DIM, 64, &q, &req[i], &req_len[i]) !=
            MESS_OK) {
            fprintf(stderr, "cannot encode the test requests\n");
            return 1;
        }
        mess_query_free(q);
    }
    mess_client_free(c);
    mkdir("build", 0755);
    if (!mkdtemp(root)) {
        fprintf(stderr, "cannot create a directory under build/\n");
        return 1;
    }
    RUN(test_extract_answers);
    RUN(test_extract_refusals);
    RUN(test_log_position);
    for (i = 0; i < NQ; i++)
        mess_buf_free(req[i]);
    mess_buf_free(up1);
    mess_buf_free(up2);
    mess_buf_free(up3);
    mess_buf_free(del);
    free(vecs);
    CHECK(rmdir(root) == 0);
    HARNESS_END();
}
