/*
 * test_wal.c - the write-ahead log (wal.c, docs/PROTOCOL.md "Write-ahead
 * log"): a cut at every byte of a three-record log keeps exactly the
 * complete prefix; a flipped byte in any field of a record is a torn tail
 * when it is the last record and corruption (with the byte offset) when a
 * complete record follows; records of an older generation are stale, of a
 * newer one refused; empty and missing logs; appends after a cut tail and
 * after a failed append; hostile lengths and candidate floods.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../mess.h"
#include "wal.h"
#include "harness.h"

static char dir[] = "build/walXXXXXX";
static char path[512];

/* The three records every test starts from: an upload-sized body, an
 * empty delete, a short upload, all of generation 7. */
#define GEN 7
static uint8_t body0[300], body2[45];
static uint8_t *log3;
static size_t log3_len, rec_off[4]; /* rec_off[3] = log3_len */

static void build_log3(void)
{
    struct mess_wr w;
    size_t i;
    for (i = 0; i < sizeof body0; i++)
        body0[i] = (uint8_t)(i * 31 + 7);
    for (i = 0; i < sizeof body2; i++)
        body2[i] = (uint8_t)(0xa5 ^ i);
    mess_wr_init(&w);
    rec_off[0] = w.len;
    wal_encode(&w, WAL_UPLOAD, GEN, 0, body0, sizeof body0);
    rec_off[1] = w.len;
    wal_encode(&w, WAL_DELETE, GEN, 1, NULL, 0);
    rec_off[2] = w.len;
    wal_encode(&w, WAL_UPLOAD, GEN, 2, body2, sizeof body2);
    rec_off[3] = w.len;
    CHECK(w.err == 0);
    log3 = w.p;
    log3_len = w.len;
}

static int write_file(const char *p, const uint8_t *b, size_t n)
{
    FILE *f = fopen(p, "wb");
    if (!f)
        return -1;
    if (n && fwrite(b, 1, n, f) != n) {
        fclose(f);
        return -1;
    }
    return fclose(f);
}

static long file_size(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

/* The records of scanned bytes must be log3's first n, byte for byte. */
static int records_match(const uint8_t *buf, const struct wal_scan *sc, size_t n)
{
    struct wal_record r;
    size_t pos = 0, k = 0;
    static const uint32_t kinds[3] = {WAL_UPLOAD, WAL_DELETE, WAL_UPLOAD};
    const uint8_t *bodies[3] = {body0, NULL, body2};
    static const size_t lens[3] = {sizeof body0, 0, sizeof body2};
    while (wal_scan_next(buf, sc, &pos, &r)) {
        if (k >= 3 || r.kind != kinds[k] || r.seq != k || r.len != lens[k] ||
            r.offset != rec_off[k] || (r.len && memcmp(r.body, bodies[k], r.len) != 0))
            return 0;
        k++;
    }
    return k == n;
}

/* Cut after every byte: exactly the complete records before the cut. */
static void test_truncation_every_offset(void)
{
    size_t k, bad = 0;
    for (k = 0; k <= log3_len; k++) {
        struct wal_scan sc;
        char msg[256];
        size_t whole = k >= rec_off[3] ? 3 : k >= rec_off[2] ? 2 : k >= rec_off[1] ? 1 : 0;
        int rc = wal_scan(log3, k, GEN, &sc, msg, sizeof msg);
        if (rc != MESS_OK || sc.records != whole || sc.valid != rec_off[whole] ||
            sc.cut != k - rec_off[whole] || sc.stale || !records_match(log3, &sc, whole)) {
            if (bad++ < 5)
                fprintf(stderr, "  cut at %zu: rc %d, %llu records, valid %zu, cut %zu (%s)\n",
                        k, rc, (unsigned long long)sc.records, sc.valid, sc.cut, msg);
        }
    }
    CHECK(bad == 0);
    printf("  %zu cuts of a %zu-byte log: each kept its complete prefix\n", log3_len + 1,
           log3_len);
}

/* The same through files, every 5th offset and every record boundary +-1:
 * open, replay, ready (the tail is truncated), append, reopen: the prefix
 * plus the new record, nothing cut. */
static void test_append_after_cut(void)
{
    size_t k, bad = 0, runs = 0;
    for (k = 0; k <= log3_len; k++) {
        struct wal *w = NULL;
        struct wal_record r;
        size_t whole = k >= rec_off[3] ? 3 : k >= rec_off[2] ? 2 : k >= rec_off[1] ? 1 : 0;
        size_t replayed = 0, j;
        int near = 0, ok = 1;
        char msg[256];
        static const uint8_t extra[5] = {1, 2, 3, 4, 5};
        for (j = 0; j < 4; j++)
            near |= k + 1 >= rec_off[j] && k <= rec_off[j] + 1;
        if (k % 5 != 0 && !near)
            continue;
        runs++;
        if (write_file(path, log3, k) != 0) {
            CHECK(0);
            break;
        }
        if (wal_open(path, GEN, 0, &w, msg, sizeof msg) != MESS_OK) {
            fprintf(stderr, "  open at cut %zu: %s\n", k, msg);
            bad++;
            continue;
        }
        ok &= wal_info(w)->cut == k - rec_off[whole];
        while (wal_replay_next(w, &r))
            ok &= r.seq == replayed++;
        ok &= replayed == whole;
        /* wal_ready changes nothing; the writer's claim cuts the tail */
        ok &= wal_ready(w) == MESS_OK && file_size(path) == (long)k;
        ok &= wal_claim(w) == MESS_OK && file_size(path) == (long)rec_off[whole];
        ok &= wal_append(w, WAL_DELETE, extra, sizeof extra) == MESS_OK;
        ok &= wal_count(w) == whole + 1;
        wal_close(w);
        w = NULL;
        ok &= wal_open(path, GEN, WAL_READONLY, &w, msg, sizeof msg) == MESS_OK;
        if (w) {
            replayed = 0;
            ok &= wal_info(w)->cut == 0 && wal_info(w)->records == whole + 1;
            while (wal_replay_next(w, &r)) {
                ok &= r.seq == replayed;
                if (replayed == whole)
                    ok &= r.kind == WAL_DELETE && r.len == sizeof extra &&
                          memcmp(r.body, extra, sizeof extra) == 0;
                else
                    ok &= memcmp(log3 + r.offset, log3 + rec_off[replayed],
                                 rec_off[replayed + 1] - rec_off[replayed]) == 0;
                replayed++;
            }
            wal_close(w);
        }
        if (!ok && bad++ < 5)
            fprintf(stderr, "  append after a cut at %zu failed\n", k);
    }
    CHECK(bad == 0);
    printf("  %zu cut logs reopened, cut back, appended to and read again\n", runs);
}

/* A flipped byte anywhere in record r: the last record is a torn tail; an
 * earlier one is corruption whose message names the record's offset. */
static void test_byte_flips(void)
{
    uint8_t *b = (uint8_t *)malloc(log3_len);
    size_t off, bad = 0, torn = 0, corrupt = 0;
    static const uint8_t masks[3] = {0x01, 0x80, 0xff};
    unsigned m;
    for (off = 0; b && off < log3_len; off++)
        for (m = 0; m < 3; m++) {
            struct wal_scan sc;
            char msg[256], want[64];
            size_t r = off >= rec_off[2] ? 2 : off >= rec_off[1] ? 1 : 0;
            int rc;
            memcpy(b, log3, log3_len);
            b[off] ^= masks[m];
            rc = wal_scan(b, log3_len, GEN, &sc, msg, sizeof msg);
            snprintf(want, sizeof want, "at byte %zu is damaged", rec_off[r]);
            if (r == 2) {
                if (rc != MESS_OK || sc.records != 2 || sc.cut != rec_off[3] - rec_off[2] ||
                    !records_match(b, &sc, 2))
                    bad++;
                else
                    torn++;
            } else if (rc != MESS_EFORMAT || !strstr(msg, want) ||
                       !strstr(msg, "complete record follows")) {
                if (bad++ < 5)
                    fprintf(stderr, "  flip %02x at %zu: rc %d, '%s'\n", masks[m], off, rc,
                            msg);
            } else {
                corrupt++;
            }
        }
    CHECK(b != NULL && bad == 0);
    CHECK(torn == 3 * (rec_off[3] - rec_off[2]) && corrupt == 3 * rec_off[2]);
    printf("  %zu single-byte flips: %zu torn tails, %zu refused as corrupt\n",
           3 * log3_len, torn, corrupt);
    free(b);
}

/* Complete records (checksums right) that break the rules. */
static void test_rules(void)
{
    struct {
        const char *what, *needle;
        uint32_t kind[2];
        uint64_t gen[2], seq[2];
    } cases[] = {
        {"seq gap", "sequence number 2", {1, 1}, {GEN, GEN}, {0, 2}},
        {"seq repeat", "sequence number 0", {1, 2}, {GEN, GEN}, {0, 0}},
        {"first seq not 0", "record 0 at byte 0 has sequence number 1", {1, 1}, {GEN, GEN}, {1, 2}},
        {"two generations", "of generation 6, the records before it of 5", {1, 1}, {5, 6}, {0, 1}},
        {"newer generation", "generation 8, newer than the manifest's 7", {1, 1}, {GEN + 1, GEN + 1}, {0, 1}},
        {"unknown kind", "unknown kind 4", {1, 4}, {GEN, GEN}, {0, 1}},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct mess_wr w;
        struct wal_scan sc;
        char msg[256] = "";
        int rc;
        mess_wr_init(&w);
        wal_encode(&w, cases[i].kind[0], cases[i].gen[0], cases[i].seq[0], body2, 10);
        wal_encode(&w, cases[i].kind[1], cases[i].gen[1], cases[i].seq[1], body2, 20);
        rc = wal_scan(w.p, w.len, GEN, &sc, msg, sizeof msg);
        if (rc != MESS_EFORMAT || !strstr(msg, cases[i].needle)) {
            fprintf(stderr, "  %s: rc %d, '%s'\n", cases[i].what, rc, msg);
            CHECK(0);
        }
        CHECK(sc.records == 0 && sc.valid == 0); /* zeroed on error */
        mess_wr_free(&w);
    }
}

/* Older generation: stale, nothing replayed, emptied by wal_claim, then
 * appends of the manifest's generation; newer: refused, file untouched. */
static void test_generations(void)
{
    struct wal *w = NULL;
    struct wal_record r;
    char msg[256];
    CHECK(write_file(path, log3, log3_len) == 0);
    CHECK_RC(wal_open(path, GEN - 1, 0, &w, msg, sizeof msg), MESS_EFORMAT);
    CHECK(w == NULL && strstr(msg, "newer than the manifest's 6") != NULL);
    CHECK(file_size(path) == (long)log3_len);
    CHECK_OK(wal_open(path, GEN + 1, 0, &w, msg, sizeof msg));
    if (!w)
        return;
    CHECK(wal_info(w)->stale == 1 && wal_info(w)->records == 3 && wal_info(w)->log_gen == GEN);
    CHECK(wal_replay_next(w, &r) == 0 && wal_count(w) == 0);
    CHECK(file_size(path) == (long)log3_len); /* not changed before wal_claim */
    CHECK_OK(wal_ready(w));
    CHECK(file_size(path) == (long)log3_len);
    CHECK_OK(wal_claim(w));
    CHECK(file_size(path) == 0);
    CHECK_OK(wal_append(w, WAL_UPLOAD, body2, sizeof body2));
    wal_close(w);
    w = NULL;
    CHECK_OK(wal_open(path, GEN + 1, WAL_READONLY, &w, msg, sizeof msg));
    if (!w)
        return;
    CHECK(!wal_info(w)->stale && wal_info(w)->records == 1 &&
          wal_info(w)->log_gen == GEN + 1);
    CHECK(wal_replay_next(w, &r) == 1 && r.seq == 0 && r.len == sizeof body2 &&
          memcmp(r.body, body2, sizeof body2) == 0);
    CHECK(wal_replay_next(w, &r) == 0);
    wal_close(w);
}

/* Checkpoint: wal_reset makes an empty log for the next generation. */
static void test_reset(void)
{
    struct wal *w = NULL;
    struct wal_record r;
    char msg[256];
    unlink(path);
    CHECK_OK(wal_open(path, 3, 0, &w, msg, sizeof msg));
    if (!w)
        return;
    CHECK_OK(wal_ready(w));
    CHECK_OK(wal_claim(w));
    CHECK_OK(wal_append(w, WAL_UPLOAD, body0, sizeof body0));
    CHECK_OK(wal_append(w, WAL_DELETE, body2, 8));
    CHECK(wal_count(w) == 2 && wal_size(w) == 2 * WAL_OVERHEAD + sizeof body0 + 8);
    CHECK_OK(wal_reset(w, 4));
    CHECK(file_size(path) == 0 && wal_count(w) == 0 && wal_generation(w) == 4);
    CHECK_OK(wal_append(w, WAL_UPLOAD, body2, 9));
    wal_close(w);
    w = NULL;
    /* the manifest did not move (a crash before its rename cannot leave
     * this log, but a stray one must not replay into generation 3) */
    CHECK_RC(wal_open(path, 3, WAL_READONLY, &w, msg, sizeof msg), MESS_EFORMAT);
    CHECK_OK(wal_open(path, 4, WAL_READONLY, &w, msg, sizeof msg));
    if (!w)
        return;
    CHECK(wal_replay_next(w, &r) == 1 && r.seq == 0 && r.len == 9);
    wal_close(w);
}

/* Missing and empty logs; read-only opens never write. */
static void test_empty_and_missing(void)
{
    struct wal *w = NULL;
    struct wal_record r;
    char msg[256];
    unlink(path);
    CHECK_OK(wal_open(path, 1, WAL_READONLY, &w, msg, sizeof msg));
    CHECK(w != NULL && file_size(path) == -1);
    if (w) {
        CHECK(wal_info(w)->records == 0 && wal_replay_next(w, &r) == 0);
        CHECK(!wal_writable(w) && wal_readonly_errno(w) == 0);
        CHECK_OK(wal_ready(w));
        CHECK_RC(wal_claim(w), MESS_EINVAL);
        CHECK_RC(wal_append(w, WAL_UPLOAD, body2, 1), MESS_EINVAL);
        CHECK_RC(wal_reset(w, 2), MESS_EINVAL);
        wal_close(w);
        w = NULL;
    }
    CHECK_OK(wal_open(path, 1, 0, &w, msg, sizeof msg));
    CHECK(file_size(path) == 0);
    if (w) {
        CHECK(wal_info(w)->records == 0 && wal_replay_next(w, &r) == 0);
        CHECK_RC(wal_append(w, WAL_UPLOAD, body2, 1), MESS_EINVAL); /* before ready */
        CHECK_RC(wal_claim(w), MESS_EINVAL);
        CHECK_OK(wal_ready(w));
        CHECK_RC(wal_append(w, WAL_UPLOAD, body2, 1), MESS_EINVAL); /* before claim */
        CHECK_OK(wal_claim(w));
        CHECK_RC(wal_append(w, 4, body2, 1), MESS_EINVAL);
        CHECK_RC(wal_append(w, WAL_UPLOAD, NULL, 1), MESS_EINVAL);
        CHECK(wal_count(w) == 0 && file_size(path) == 0);
        wal_close(w);
        w = NULL;
    }
    /* read-only on a torn log: the tail is reported, the file kept */
    CHECK(write_file(path, log3, log3_len - 1) == 0);
    CHECK_OK(wal_open(path, GEN, WAL_READONLY, &w, msg, sizeof msg));
    if (w) {
        CHECK(wal_info(w)->records == 2 && wal_info(w)->cut == rec_off[3] - rec_off[2] - 1);
        CHECK_OK(wal_ready(w)); /* ends the replay, cuts nothing */
        CHECK_RC(wal_append(w, WAL_UPLOAD, body2, 1), MESS_EINVAL);
        wal_close(w);
        w = NULL;
    }
    CHECK(file_size(path) == (long)log3_len - 1);
    /* a directory where the log should be */
    unlink(path);
    CHECK(mkdir(path, 0755) == 0);
    CHECK(wal_open(path, GEN, 0, &w, msg, sizeof msg) != MESS_OK && w == NULL);
    CHECK(wal_open(path, GEN, WAL_READONLY, &w, msg, sizeof msg) != MESS_OK && w == NULL);
    rmdir(path);
}

/* An append that fails half-way (the file size limit stops the write)
 * is cut back: the next append lands right after the last good record,
 * and the log reads back without damage. */
static void test_failed_append(void)
{
    struct wal *w = NULL;
    struct wal_record r;
    struct rlimit old, lim;
    uint8_t big[4096];
    char msg[256];
    int rc;
    size_t n = 0;
    memset(big, 0x5a, sizeof big);
    unlink(path);
    CHECK_OK(wal_open(path, 2, 0, &w, msg, sizeof msg));
    if (!w)
        return;
    CHECK_OK(wal_ready(w));
    CHECK_OK(wal_claim(w));
    CHECK_OK(wal_append(w, WAL_UPLOAD, body0, sizeof body0));
    signal(SIGXFSZ, SIG_IGN);
    CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
    lim = old;
    lim.rlim_cur = (rlim_t)(wal_size(w) + 1000);
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    rc = wal_append(w, WAL_UPLOAD, big, sizeof big);
    CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
    signal(SIGXFSZ, SIG_DFL);
    CHECK_RC(rc, MESS_EIO);
    CHECK(wal_count(w) == 1 && file_size(path) == (long)(WAL_OVERHEAD + sizeof body0));
    CHECK_OK(wal_append(w, WAL_DELETE, body2, 12));
    wal_close(w);
    w = NULL;
    CHECK_OK(wal_open(path, 2, WAL_READONLY, &w, msg, sizeof msg));
    if (!w)
        return;
    CHECK(wal_info(w)->cut == 0 && wal_info(w)->records == 2);
    while (wal_replay_next(w, &r))
        CHECK(r.seq == n++);
    CHECK(n == 2);
    wal_close(w);
}

/* Lengths the file cannot hold are torn tails, never allocations; a flood
 * of candidate records after a damaged one is refused, not hashed
 * quadratically. */
static void test_hostile_lengths(void)
{
    static const uint64_t lens[] = {UINT64_MAX, (uint64_t)1 << 63, WAL_MAX_BODY + 1,
                                    WAL_MAX_BODY, 1000};
    size_t i, n = 1 << 16, q;
    uint8_t *b = (uint8_t *)calloc(1, n);
    struct wal_scan sc;
    char msg[256];
    double t0, t;
    struct timespec ts;
    for (i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        uint8_t buf[200];
        memcpy(buf, log3 + rec_off[2], WAL_HEAD_BYTES);
        memset(buf + WAL_HEAD_BYTES, 0, sizeof buf - WAL_HEAD_BYTES);
        mess_store_u64(buf + 24, lens[i]);
        CHECK_OK(wal_scan(buf, sizeof buf, GEN, &sc, msg, sizeof msg));
        CHECK(sc.records == 0 && sc.cut == sizeof buf);
    }
    if (!b) {
        CHECK(0);
        return;
    }
    /* damaged record at 0, then a candidate header every 64 bytes whose
     * length reaches the end of the file */
    for (q = 64; q + WAL_OVERHEAD <= n; q += 64) {
        mess_store_u32(b + q, WAL_MAGIC);
        mess_store_u32(b + q + 4, WAL_UPLOAD);
        mess_store_u64(b + q + 24, n - q - WAL_OVERHEAD);
    }
    clock_gettime(CLOCK_MONOTONIC, &ts);
    t0 = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
    CHECK_RC(wal_scan(b, n, GEN, &sc, msg, sizeof msg), MESS_EFORMAT);
    clock_gettime(CLOCK_MONOTONIC, &ts);
    t = (double)ts.tv_sec + ts.tv_nsec * 1e-9 - t0;
    CHECK(strstr(msg, "too many candidate records") != NULL);
    printf("  candidate flood of %zu KiB refused in %.1f ms\n", n / 1024, t * 1e3);
    /* and a torn tail whose body happens to hold the magic is still torn */
    memset(b, 0, n);
    memcpy(b, log3, rec_off[2]);
    mess_store_u32(b + rec_off[2] + 100, WAL_MAGIC);
    memcpy(b + rec_off[2], log3 + rec_off[2], WAL_HEAD_BYTES);
    CHECK_OK(wal_scan(b, rec_off[2] + 150, GEN, &sc, msg, sizeof msg));
    CHECK(sc.records == 2 && sc.cut == 150);
    free(b);
}

/* As an unprivileged user (the sandbox's root drops to nobody in a
 * child): a log it may not write opens read-only (replayed, appends
 * refused, the file unchanged), and so does a missing one in a directory
 * it may not write. */
static int as_nobody(void)
{
    struct wal *w = NULL;
    struct wal_record r;
    char msg[256], missing[600];
    int bad = 0, n = 0;
    if (setgid(65534) != 0 || setuid(65534) != 0)
        return 77;
    if (wal_open(path, GEN, 0, &w, msg, sizeof msg) != MESS_OK)
        return 1;
    bad |= wal_writable(w) || wal_readonly_errno(w) != EACCES || wal_info(w)->records != 2;
    while (wal_replay_next(w, &r))
        n++;
    bad |= n != 2 || wal_ready(w) != MESS_OK ||
           wal_append(w, WAL_UPLOAD, body2, 3) != MESS_EINVAL;
    wal_close(w);
    w = NULL;
    snprintf(missing, sizeof missing, "%s/none", dir);
    if (wal_open(missing, GEN, 0, &w, msg, sizeof msg) != MESS_OK)
        return 1;
    bad |= wal_writable(w) || wal_readonly_errno(w) != EACCES || wal_info(w)->records != 0 ||
           access(missing, F_OK) == 0;
    wal_close(w);
    return bad;
}

static void test_readonly_fallback(void)
{
    pid_t pid;
    int status = 0;
    CHECK(write_file(path, log3, log3_len - 7) == 0); /* two records, a torn tail */
    if (geteuid() != 0) {
        printf("  (not root: the read-only fallback is not checked)\n");
        return;
    }
    CHECK(chmod(dir, 0755) == 0);
    fflush(stdout);
    pid = fork();
    if (pid == 0)
        _exit(as_nobody());
    waitpid(pid, &status, 0);
    chmod(dir, 0700);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(file_size(path) == (long)log3_len - 7);
}

static void cleanup(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[600];
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (unlink(p) != 0)
            rmdir(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

int main(void)
{
    mkdir("build", 0755);
    if (!mkdtemp(dir)) {
        fprintf(stderr, "mkdtemp %s: %s\n", dir, strerror(errno));
        return 1;
    }
    snprintf(path, sizeof path, "%s/wal", dir);
    build_log3();
    RUN(test_truncation_every_offset);
    RUN(test_append_after_cut);
    RUN(test_byte_flips);
    RUN(test_rules);
    RUN(test_generations);
    RUN(test_reset);
    RUN(test_empty_and_missing);
    RUN(test_failed_append);
    RUN(test_hostile_lengths);
    RUN(test_readonly_fallback);
    free(log3);
    cleanup();
    HARNESS_END();
}
