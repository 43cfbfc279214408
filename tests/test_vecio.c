/*
 * test_vecio.c - TEXMEX readers: the bundled files parse, round trips are
 * exact, and malformed files are refused with MESS_EFORMAT.
 */
#include <errno.h>
#include <stdint.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../mess_experimental.h"
#include "harness.h"

static const char *tmp_path(const char *ext)
{
    static char buf[256];
    snprintf(buf, sizeof buf, "/tmp/mess_test_vecio_%ld%s", (long)getpid(), ext);
    return buf;
}

static void write_raw(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return;
    fwrite(p, 1, n, f);
    fclose(f);
}

static void test_roundtrip_fvecs(void)
{
    float v[6] = {1.5f, -2.0f, 3.25f, 0.0f, 1e30f, -1e-30f};
    float *back = NULL;
    size_t n = 0, d = 0;
    const char *p = tmp_path(".fvecs");
    CHECK_OK(mess_fvecs_write(p, v, 2, 3));
    CHECK_OK(mess_fvecs_read(p, &back, &n, &d));
    CHECK(n == 2 && d == 3);
    CHECK(back && memcmp(back, v, sizeof v) == 0);
    mess_vecs_free(back);
    remove(p);
}

static void test_roundtrip_bvecs_as_float(void)
{
    uint8_t v[8] = {0, 1, 2, 255, 7, 8, 9, 10};
    float *back = NULL;
    size_t n = 0, d = 0, i;
    const char *p = tmp_path(".bvecs");
    CHECK_OK(mess_bvecs_write(p, v, 2, 4));
    CHECK_OK(mess_vecs_read_f32(p, &back, &n, &d));
    CHECK(n == 2 && d == 4);
    for (i = 0; back && i < 8; i++)
        CHECK(back[i] == (float)v[i]);
    mess_vecs_free(back);
    remove(p);
}

static void test_malformed(void)
{
    const char *p = tmp_path(".fvecs");
    uint8_t buf[64];
    float *out = NULL;
    size_t n, d;

    /* empty file */
    write_raw(p, buf, 0);
    CHECK_RC(mess_fvecs_read(p, &out, &n, &d), MESS_EFORMAT);
    /* dim 0 */
    memset(buf, 0, sizeof buf);
    write_raw(p, buf, 8);
    CHECK_RC(mess_fvecs_read(p, &out, &n, &d), MESS_EFORMAT);
    /* huge dim */
    buf[0] = 0xff; buf[1] = 0xff; buf[2] = 0xff; buf[3] = 0x7f;
    write_raw(p, buf, 8);
    CHECK_RC(mess_fvecs_read(p, &out, &n, &d), MESS_EFORMAT);
    /* negative dim */
    buf[3] = 0xff;
    write_raw(p, buf, 8);
    CHECK_RC(mess_fvecs_read(p, &out, &n, &d), MESS_EFORMAT);
    /* dim 2, but size not a whole number of records */
    memset(buf, 0, sizeof buf);
    buf[0] = 2;
    write_raw(p, buf, 13);
    CHECK_RC(mess_fvecs_read(p, &out, &n, &d), MESS_EFORMAT);
    /* two records whose dims disagree */
    buf[12] = 3;
    write_raw(p, buf, 24);
    CHECK_RC(mess_fvecs_read(p, &out, &n, &d), MESS_EFORMAT);
    CHECK(out == NULL);
    /* missing file, unknown extension */
    remove(p);
    CHECK_RC(mess_fvecs_read(p, &out, &n, &d), MESS_EIO);
    CHECK_RC(mess_vecs_read_f32("x.txt", &out, &n, &d), MESS_EINVAL);
    CHECK_RC(mess_fvecs_read(NULL, &out, &n, &d), MESS_EINVAL);
}

static void test_truncated_at_every_length(void)
{
    float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    const char *p = tmp_path(".fvecs");
    uint8_t whole[64];
    FILE *f;
    size_t len, cut, n, d;
    float *out;

    CHECK_OK(mess_fvecs_write(p, v, 2, 4));
    f = fopen(p, "rb");
    CHECK(f != NULL);
    if (!f)
        return;
    len = fread(whole, 1, sizeof whole, f);
    fclose(f);
    CHECK(len == 40);
    for (cut = 0; cut < len; cut++) {
        int rc;
        out = NULL;
        write_raw(p, whole, cut);
        rc = mess_fvecs_read(p, &out, &n, &d);
        if (cut == 20) {
            CHECK(rc == MESS_OK && n == 1 && d == 4);
        } else {
            CHECK(rc == MESS_EFORMAT);
        }
        mess_vecs_free(out);
    }
    remove(p);
}

/* .u64vecs keeps ids of any size, including the ones .ivecs cannot hold
 * (2^31, 2^32 + 906 which int32 would write as 906, 2^64 - 1). */
static void test_roundtrip_u64vecs(void)
{
    uint64_t v[6] = {0, 2147483647u, 2147483648u, 4294967296u + 906u,
                     UINT64_MAX, 906};
    uint64_t *back = NULL;
    size_t n = 0, d = 0;
    const char *p = tmp_path(".u64vecs");
    CHECK_OK(mess_u64vecs_write(p, v, 3, 2));
    CHECK_OK(mess_u64vecs_read(p, &back, &n, &d));
    CHECK(n == 3 && d == 2);
    CHECK(back && memcmp(back, v, sizeof v) == 0);
    mess_vecs_free(back);
    /* 4 + 16 bytes per record: 60 bytes; 59 is malformed */
    {
        FILE *f = fopen(p, "rb");
        uint8_t raw[64];
        size_t len = f ? fread(raw, 1, sizeof raw, f) : 0;
        if (f)
            fclose(f);
        CHECK(len == 60);
        write_raw(p, raw, 59);
        CHECK_RC(mess_u64vecs_read(p, &back, &n, &d), MESS_EFORMAT);
    }
    remove(p);
}

/* MESS_EIO keeps the system's reason in errno. */
static void test_errno_kept(void)
{
    float v[2] = {1, 2}, *back = NULL;
    uint64_t *ids = NULL;
    size_t n, d;
    errno = 0;
    CHECK_RC(mess_fvecs_read("/nonexistent/x.fvecs", &back, &n, &d), MESS_EIO);
    CHECK(errno == ENOENT);
    errno = 0;
    CHECK_RC(mess_u64vecs_read("/tmp", &ids, &n, &d), MESS_EIO);
    CHECK(errno == EISDIR);
    errno = 0;
    CHECK_RC(mess_fvecs_write("/nonexistent/dir/x.fvecs", v, 1, 2), MESS_EIO);
    CHECK(errno == ENOENT);
    errno = 0;
    CHECK_RC(mess_fvecs_write("/tmp", v, 1, 2), MESS_EIO); /* rename onto a dir */
    CHECK(errno == EISDIR);
    remove("/tmp.tmp");
}

/* A FIFO as a vector file is refused at once, MESS_EIO with errno EINVAL
 * (before, the open waited for a writer; alarm: the test fails rather
 * than hangs). */
static void test_fifo_refused(void)
{
    char path[64];
    float *back = NULL;
    size_t n, d;
    snprintf(path, sizeof path, "/tmp/mess-vecio-fifo.%ld", (long)getpid());
    unlink(path);
    CHECK(mkfifo(path, 0600) == 0);
    alarm(20);
    errno = 0;
    CHECK_RC(mess_fvecs_read(path, &back, &n, &d), MESS_EIO);
    CHECK(errno == EINVAL && back == NULL);
    alarm(0);
    unlink(path);
}

/* Number of entries of /tmp whose name starts with prefix. */
static int count_prefix(const char *prefix)
{
    DIR *d = opendir("/tmp");
    struct dirent *e;
    int n = 0;
    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
            n++;
    closedir(d);
    return n;
}

/* Issue 12 item 8's sibling: the writers used fopen(PATH.tmp), which
 * followed a symlink planted there (and wrote the vectors into its
 * target).  Now they write through the state files' mkstemp temporary:
 * the planted link and its target are untouched, PATH is a regular 0600
 * file, and no temporary is left.  Every writer, and a file larger than
 * the 64 KiB write buffer. */
static void test_symlink_not_followed(void)
{
    char path[256], tmp[300], victim[256], name[64];
    static float big[3000 * 10];
    float *back = NULL;
    uint8_t b[4] = {1, 2, 3, 4};
    int32_t iv[2] = {7, -1};
    uint64_t u[2] = {1, (uint64_t)1 << 40};
    struct stat st;
    size_t n = 0, d = 0, i;
    FILE *f;
    int w;

    snprintf(name, sizeof name, "mess_test_vecio_%ld_sym", (long)getpid());
    snprintf(path, sizeof path, "/tmp/%s.vecs", name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    snprintf(victim, sizeof victim, "/tmp/%s.victim", name);
    for (i = 0; i < 3000 * 10; i++)
        big[i] = (float)i;
    for (w = 0; w < 5; w++) {
        f = fopen(victim, "wb");
        CHECK(f != NULL);
        if (!f)
            return;
        fputs("precious", f);
        fclose(f);
        unlink(tmp);
        CHECK(symlink(victim, tmp) == 0);
        switch (w) {
        case 0: CHECK_OK(mess_fvecs_write(path, big, 3000, 10)); break;
        case 1: CHECK_OK(mess_bvecs_write(path, b, 1, 4)); break;
        case 2: CHECK_OK(mess_ivecs_write(path, iv, 1, 2)); break;
        case 3: CHECK_OK(mess_u64vecs_write(path, u, 1, 2)); break;
        default: CHECK_OK(mess_fvecs_write(path, big, 0, 10)); break;
        }
        CHECK(lstat(victim, &st) == 0 && st.st_size == 8);
        f = fopen(victim, "rb");
        if (f) {
            char got[16] = {0};
            CHECK(fread(got, 1, sizeof got, f) == 8 && memcmp(got, "precious", 8) == 0);
            fclose(f);
        }
        CHECK(lstat(tmp, &st) == 0 && S_ISLNK(st.st_mode));
        CHECK(lstat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0600);
        CHECK(count_prefix(name) == 3); /* PATH, the planted link, the victim */
    }
    /* the large file went through several buffer flushes intact */
    CHECK_OK(mess_fvecs_write(path, big, 3000, 10));
    CHECK_OK(mess_fvecs_read(path, &back, &n, &d));
    CHECK(n == 3000 && d == 10 && back && memcmp(back, big, sizeof big) == 0);
    mess_vecs_free(back);
    unlink(tmp);
    unlink(path);
    unlink(victim);
}

int main(void)
{
    RUN(test_roundtrip_fvecs);
    RUN(test_roundtrip_bvecs_as_float);
    RUN(test_malformed);
    RUN(test_truncated_at_every_length);
    RUN(test_roundtrip_u64vecs);
    RUN(test_errno_kept);
    RUN(test_fifo_refused);
    RUN(test_symlink_not_followed);
    HARNESS_END();
}
