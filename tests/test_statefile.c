/*
 * test_statefile.c - the state-file container from the outside: how saving
 * creates its temporary file, what a failed save or load reports (code and
 * errno), the save that never replaces a file (processes racing to create
 * one), passphrase rules, and the sealed file's length.
 */
#define _GNU_SOURCE /* unshare(CLONE_NEWNS) for the read-only mount */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sodium.h>

#include "../mess.h"
#include "statefile.h"
#include "harness.h"
#include "sift.h"

static char dir[] = "build/statefileXXXXXX";
static mess_client *client;

static void path_of(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

/* Entries of dir whose name starts with prefix. */
static int count_prefix(const char *prefix)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

static int file_equals(const char *path, const char *text)
{
    size_t n;
    uint8_t *b = test_read_file(path, &n);
    int same = b && n == strlen(text) && memcmp(b, text, n) == 0;
    free(b);
    return same;
}

/* The acknowledged-change totals (issue 29 item 7): a new client counts
 * from 0 and keeps its notes across a save (container version 3); a
 * client file of version 2, written by libmess 0.3.0 before the totals
 * (tests/fixtures/client-v2.mess: dim 8, 2 shards, ids 0..9 inserted, 3
 * deleted), still loads, its totals unknown (MESS_ENOTFOUND), notes
 * ignored, and is written back as version 3, still unknown; a server
 * travel file of version 2 still loads. */
static void test_applied_counts(void)
{
    char path[300];
    mess_client *c = NULL;
    mess_server *s = NULL;
    uint64_t up = 9, del = 9;
    uint32_t version = 0, role = 0;
    int sealed = 0;
    path_of(path, sizeof path, "counted.mess");
    CHECK_OK(mess_client_applied(client, &up, &del));
    CHECK(up == 0 && del == 0);
    CHECK_OK(mess_client_note_applied(client, 5, 0));
    CHECK_OK(mess_client_note_applied(client, 0, 2));
    CHECK_OK(mess_client_applied(client, &up, &del));
    CHECK(up == 5 && del == 2);
    CHECK_OK(mess_client_save(client, path, NULL));
    CHECK_OK(mess_state_file_peek(path, &version, &role, &sealed));
    CHECK(version == 3 && role == 1);
    CHECK_OK(mess_client_load(path, NULL, &c));
    CHECK_OK(mess_client_applied(c, &up, &del));
    CHECK(up == 5 && del == 2);
    mess_client_free(c);
    c = NULL;
    CHECK_RC(mess_client_applied(NULL, &up, &del), MESS_EINVAL);
    CHECK_RC(mess_client_applied(client, NULL, &del), MESS_EINVAL);
    CHECK_RC(mess_client_note_applied(NULL, 1, 1), MESS_EINVAL);
    /* a version 2 file */
    CHECK_OK(mess_state_file_peek("tests/fixtures/client-v2.mess", &version, &role, &sealed));
    CHECK(version == 2 && role == 1 && sealed == 0);
    CHECK_OK(mess_client_load("tests/fixtures/client-v2.mess", NULL, &c));
    CHECK_RC(mess_client_applied(c, &up, &del), MESS_ENOTFOUND);
    CHECK(up == 0 && del == 0);
    CHECK_OK(mess_client_note_applied(c, 4, 0));
    CHECK_RC(mess_client_applied(c, &up, &del), MESS_ENOTFOUND);
    CHECK_OK(mess_client_save(c, path, NULL));
    mess_client_free(c);
    c = NULL;
    CHECK_OK(mess_state_file_peek(path, &version, &role, &sealed));
    CHECK(version == 3);
    CHECK_OK(mess_client_load(path, NULL, &c));
    CHECK_RC(mess_client_applied(c, &up, &del), MESS_ENOTFOUND);
    mess_client_free(c);
    CHECK_OK(mess_server_load("tests/fixtures/server-v2.mess", NULL, &s));
    mess_server_free(s);
    CHECK(unlink(path) == 0);
}

/* A symlink planted where older versions put their temporary file (and a
 * regular file at the same kind of name) is neither followed nor reused. */
static void test_symlink_not_followed(void)
{
    char path[256], tmp[300], victim[256];
    mess_client *c2 = NULL;
    FILE *f;
    struct stat st;

    path_of(path, sizeof path, "sym.client");
    path_of(victim, sizeof victim, "victim");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    f = fopen(victim, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs("precious", f);
    fclose(f);
    CHECK(symlink("victim", tmp) == 0);
    CHECK_OK(mess_client_save(client, path, NULL));
    CHECK(file_equals(victim, "precious"));
    CHECK(lstat(tmp, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(lstat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0600);
    CHECK_OK(mess_client_load(path, NULL, &c2));
    mess_client_free(c2);
    /* the server file too, and no temporary is left behind */
    CHECK_OK(mess_client_save(client, path, "a passphrase"));
    CHECK(file_equals(victim, "precious"));
    CHECK(count_prefix("sym.client.tmp") == 1); /* only the planted link */
    unlink(tmp);
    unlink(path);
    unlink(victim);
}

/* MESS_EIO leaves errno as the failing call set it. */
static void test_errno_kept(void)
{
    char path[256];
    mess_client *c2 = (mess_client *)1;
    mess_server *s = (mess_server *)1;

    path_of(path, sizeof path, "missing.client");
    errno = 0;
    CHECK_RC(mess_client_load(path, NULL, &c2), MESS_EIO);
    CHECK(errno == ENOENT && c2 == NULL);
    errno = 0;
    CHECK_RC(mess_server_load(path, NULL, &s), MESS_EIO);
    CHECK(errno == ENOENT && s == NULL);
    path_of(path, sizeof path, "no/such/dir/x.client");
    errno = 0;
    CHECK_RC(mess_client_save(client, path, NULL), MESS_EIO);
    CHECK(errno == ENOENT);
    /* a directory where a file is expected */
    errno = 0;
    CHECK_RC(mess_client_load(dir, NULL, &c2), MESS_EIO);
    CHECK(errno == EISDIR);
    errno = 0;
    CHECK_RC(mess_client_save(client, dir, NULL), MESS_EIO);
    CHECK(errno == EISDIR);
}

/* A FIFO where a state file is expected (a mistyped path, a hostile
 * directory): refused at once, MESS_EIO with errno EINVAL.  Before, the
 * open waited for a writer that never came (alarm: the test fails rather
 * than hangs). */
static void test_fifo_refused(void)
{
    char path[256];
    mess_client *c2 = (mess_client *)1;
    mess_server *s = (mess_server *)1;
    uint32_t version, role;
    int sealed;

    path_of(path, sizeof path, "fifo.client");
    CHECK(mkfifo(path, 0600) == 0);
    alarm(20);
    errno = 0;
    CHECK_RC(mess_client_load(path, NULL, &c2), MESS_EIO);
    CHECK(errno == EINVAL && c2 == NULL);
    errno = 0;
    CHECK_RC(mess_server_load(path, NULL, &s), MESS_EIO);
    CHECK(errno == EINVAL && s == NULL);
    errno = 0;
    CHECK_RC(mess_state_file_peek(path, &version, &role, &sealed), MESS_EIO);
    CHECK(errno == EINVAL);
    alarm(0);
    unlink(path);
}

/* mess_client_save_new creates the file mess_client_save writes and never
 * replaces anything at its path: a file, a dangling symlink (not
 * followed: nothing appears at its target), a directory.  A refusal is
 * MESS_EEXIST with errno EEXIST, leaves the name as it was and no
 * temporary behind. */
static void test_save_new(void)
{
    char path[256], plain[256], taken[256], dangling[256], target[256], sub[256];
    uint8_t *a, *b;
    size_t na, nb;
    mess_client *c2 = NULL;
    struct stat st;
    FILE *f;

    path_of(path, sizeof path, "new.client");
    path_of(plain, sizeof plain, "plain.client");
    path_of(taken, sizeof taken, "taken.client");
    path_of(dangling, sizeof dangling, "dangling.client");
    path_of(target, sizeof target, "nowhere");
    path_of(sub, sizeof sub, "sub.client");
    CHECK_OK(mess_client_save_new(client, path, NULL, 0));
    CHECK(lstat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0600 &&
          st.st_nlink == 1);
    CHECK_OK(mess_client_load(path, NULL, &c2));
    mess_client_free(c2);
    c2 = NULL;
    CHECK_OK(mess_client_save(client, plain, NULL));
    a = test_read_file(path, &na);
    b = test_read_file(plain, &nb);
    CHECK(a && b && na == nb && memcmp(a, b, na) == 0); /* the same file */
    free(b);
    /* a second save_new over it: refused, the file's bytes unchanged */
    errno = 0;
    CHECK_RC(mess_client_save_new(client, path, NULL, 0), MESS_EEXIST);
    CHECK(errno == EEXIST);
    b = test_read_file(path, &nb);
    CHECK(a && b && na == nb && memcmp(a, b, na) == 0);
    free(a);
    free(b);
    f = fopen(taken, "wb");
    CHECK(f != NULL);
    if (f) {
        fputs("precious", f);
        fclose(f);
    }
    CHECK_RC(mess_client_save_new(client, taken, NULL, 0), MESS_EEXIST);
    CHECK(file_equals(taken, "precious"));
    CHECK(symlink("nowhere", dangling) == 0);
    CHECK_RC(mess_client_save_new(client, dangling, NULL, 0), MESS_EEXIST);
    CHECK(lstat(target, &st) != 0 && errno == ENOENT);
    CHECK(lstat(dangling, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(mkdir(sub, 0700) == 0);
    CHECK_RC(mess_client_save_new(client, sub, NULL, 0), MESS_EEXIST);
    CHECK(lstat(sub, &st) == 0 && S_ISDIR(st.st_mode));
    /* sealed, and the arguments mess_client_save_pass refuses */
    CHECK_RC(mess_client_save_new(client, path, "x", 1), MESS_EEXIST);
    unlink(path);
    CHECK_OK(mess_client_save_new(client, path, "a passphrase", 12));
    CHECK_OK(mess_client_load(path, "a passphrase", &c2));
    mess_client_free(c2);
    CHECK_RC(mess_client_save_new(NULL, plain, NULL, 0), MESS_EINVAL);
    CHECK_RC(mess_client_save_new(client, NULL, NULL, 0), MESS_EINVAL);
    CHECK_RC(mess_client_save_new(client, plain, "", 0), MESS_EINVAL);
    CHECK_RC(mess_client_save_new(client, plain, NULL, 3), MESS_EINVAL);
    path_of(sub, sizeof sub, "no/such/dir/x.client");
    errno = 0;
    CHECK_RC(mess_client_save_new(client, sub, NULL, 0), MESS_EIO);
    CHECK(errno == ENOENT);
    /* no temporary left by any of them */
    CHECK(count_prefix("new.client.") == 0 && count_prefix("taken.client.") == 0 &&
          count_prefix("dangling.client.") == 0 && count_prefix("sub.client.") == 0);
    path_of(sub, sizeof sub, "sub.client");
    rmdir(sub);
    unlink(path);
    unlink(plain);
    unlink(taken);
    unlink(dangling);
}

/* RACERS processes create one client file at once, RACE_ROUNDS times.
 * Each waits on a pipe until the parent closes its end, so all start
 * together; it exits 0 if it created the file, 1 for MESS_EEXIST, 2 for
 * anything else.  Returns the winners, or -1 if a process failed
 * otherwise or the count of losers is not the rest.  naive: check, then
 * replace (access(2) then mess_client_save), the race save_new closes. */
#define RACERS 4
#define RACE_ROUNDS 50
#define NAIVE_ROUNDS 10 /* the comparison only */
static int race_round(const char *path, int naive)
{
    pid_t pids[RACERS];
    int fds[2], i, st, won = 0, lost = 0;
    char c;
    if (pipe(fds) != 0)
        return -1;
    fflush(stdout);
    fflush(stderr);
    for (i = 0; i < RACERS; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            int rc;
            close(fds[1]);
            if (read(fds[0], &c, 1) != 0)
                _exit(2);
            if (naive)
                rc = access(path, F_OK) == 0 ? MESS_EEXIST
                                             : mess_client_save(client, path, NULL);
            else
                rc = mess_client_save_new(client, path, NULL, 0);
            _exit(rc == MESS_OK ? 0 : rc == MESS_EEXIST ? 1 : 2);
        }
    }
    close(fds[0]);
    close(fds[1]); /* every racer's read returns now */
    for (i = 0; i < RACERS; i++) {
        if (pids[i] < 0 || waitpid(pids[i], &st, 0) != pids[i] || !WIFEXITED(st))
            return -1;
        won += WEXITSTATUS(st) == 0;
        lost += WEXITSTATUS(st) == 1;
    }
    return won + lost == RACERS ? won : -1;
}

static void test_save_new_race(void)
{
    char path[256];
    mess_client *c2;
    int r, w, good = 0, naive_multi = 0;
    path_of(path, sizeof path, "race.client");
    for (r = 0; r < RACE_ROUNDS; r++) {
        unlink(path);
        w = race_round(path, 0);
        c2 = NULL;
        /* one winner, the rest MESS_EEXIST, a whole file, no temporary */
        good += w == 1 && mess_client_load(path, NULL, &c2) == MESS_OK &&
                count_prefix("race.client.") == 0;
        mess_client_free(c2);
    }
    CHECK(good == RACE_ROUNDS);
    printf("  %d rounds of %d processes: exactly one created the file in %d\n",
           RACE_ROUNDS, RACERS, good);
    /* the same race through check-then-replace, for comparison: every
     * racer that saw no file replaces whatever the others wrote */
    for (r = 0; r < NAIVE_ROUNDS; r++) {
        unlink(path);
        w = race_round(path, 1);
        CHECK(w >= 1);
        naive_multi += w > 1;
    }
    printf("  check-then-replace: more than one process wrote the file in %d of %d "
           "rounds\n", naive_multi, NAIVE_ROUNDS);
    unlink(path);
}

/* Passphrases: bytes with a length (NUL included), never empty; with a
 * passphrase an unsealed file is refused. */
static void test_passphrase_rules(void)
{
    static const char pass[] = "ab\0cd";
    char path[256], plain[256];
    mess_client *c2 = NULL;

    path_of(path, sizeof path, "pass.client");
    path_of(plain, sizeof plain, "plain.client");
    CHECK_OK(mess_client_save_pass(client, path, pass, 5));
    CHECK_RC(mess_client_load_pass(path, pass, 2, &c2), MESS_EPASS);
    CHECK_RC(mess_client_load(path, "ab", &c2), MESS_EPASS);
    CHECK_RC(mess_client_load_pass(path, "ab\0xx", 5, &c2), MESS_EPASS);
    CHECK_RC(mess_client_load(path, NULL, &c2), MESS_EPASS);
    CHECK_OK(mess_client_load_pass(path, pass, 5, &c2));
    CHECK(mess_client_is_deterministic(c2) == 1);
    mess_client_free(c2);
    c2 = NULL;
    /* empty: refused, and nothing written */
    CHECK_RC(mess_client_save(client, plain, ""), MESS_EINVAL);
    CHECK_RC(mess_client_save_pass(client, plain, pass, 0), MESS_EINVAL);
    CHECK_RC(mess_client_save_pass(client, plain, NULL, 3), MESS_EINVAL);
    CHECK(access(plain, F_OK) != 0);
    CHECK_RC(mess_client_load(path, "", &c2), MESS_EINVAL);
    CHECK(c2 == NULL);
    /* an unsealed file under a sealed one's name */
    CHECK_OK(mess_client_save(client, plain, NULL));
    CHECK_RC(mess_client_load(plain, "ab", &c2), MESS_EPASS);
    CHECK(c2 == NULL);
    CHECK_RC(mess_client_load_pass(plain, pass, 5, &c2), MESS_EPASS);
    CHECK_OK(mess_client_load(plain, NULL, &c2));
    mess_client_free(c2);
    unlink(path);
    unlink(plain);
}

static void write_bytes(const char *path, const uint8_t *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        CHECK(fwrite(b, 1, n, f) == n);
        fclose(f);
    }
}

static size_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (size_t)st.st_size : 0;
}

/* Container version 1 is refused with MESS_EVERSION, and the header says
 * which version it is. */
static void test_version_1_refused(void)
{
    char path[256];
    uint8_t *b;
    size_t n;
    uint32_t version = 0, role = 0;
    int sealed = -1;
    mess_client *c2 = NULL;
    mess_server *s = NULL;

    path_of(path, sizeof path, "v1.client");
    CHECK_OK(mess_client_save(client, path, NULL));
    CHECK_OK(mess_state_file_peek(path, &version, &role, &sealed));
    CHECK(version == MESS_STATE_FILE_VERSION && version == 3 && role == 1 && sealed == 0);
    b = test_read_file(path, &n);
    CHECK(b && n > 100);
    if (!b || n <= 100)
        return;
    /* a well-formed file of version 1: checksum recomputed */
    mess_store_u32(b + 8, 1);
    crypto_generichash(b + n - 32, 32, b, n - 32, NULL, 0);
    write_bytes(path, b, n);
    CHECK_RC(mess_client_load(path, NULL, &c2), MESS_EVERSION);
    CHECK(c2 == NULL);
    CHECK_RC(mess_server_load(path, NULL, &s), MESS_EVERSION);
    CHECK_OK(mess_state_file_peek(path, &version, &role, &sealed));
    CHECK(version == 1 && role == 1 && sealed == 0);
    /* not a state file */
    write_bytes(path, (const uint8_t *)"hello, world, not a state file", 30);
    CHECK_RC(mess_state_file_peek(path, &version, &role, &sealed), MESS_EFORMAT);
    free(b);
    unlink(path);
}

/* A sealed file's length shows neither the body's length nor small changes
 * of it: the raw length field is zero, the body is padded to a Padme
 * length, and bodies 0 to 20 x 72 bytes longer (a query's memo entry was 72
 * bytes) inside one bucket give files of one length. */
static void test_sealed_length_padded(void)
{
    static const char pass[] = "length test";
    char path[256];
    mess_params p;
    uint8_t *raw, *b, *back = NULL;
    size_t base = (size_t)1 << 17, n, k, first = 0, back_len = 0;
    mess_query *q;
    uint8_t *req;
    size_t rl, i;
    float x[64];

    path_of(path, sizeof path, "pad.client");
    mess_client_params(client, &p);
    raw = (uint8_t *)malloc(base + 20 * 72);
    randombytes_buf(raw, base + 20 * 72); /* incompressible, like keys */
    for (k = 0; k <= 20; k++) {
        CHECK_OK(statefile_write(path, STATEFILE_CLIENT, &p, raw, base + 72 * k,
                                 pass, strlen(pass), 0600));
        n = file_size(path);
        if (k == 0)
            first = n;
        CHECK(n == first);
    }
    /* what the length is: header, seal block, a padded body, tag, checksum */
    n = first - 100 - 56 - 16 - 32;
    CHECK(n > 16 + base + 20 * 72 && statefile_padme(n) == n);
    b = test_read_file(path, &n);
    CHECK(b && n > 100 && mess_load_u64(b + 84) == 0); /* no raw length */
    free(b);
    CHECK_OK(statefile_read(path, STATEFILE_CLIENT, pass, strlen(pass), &p, &back,
                            &back_len));
    CHECK(back_len == base + 20 * 72 && back && memcmp(back, raw, back_len) == 0);
    statefile_free_raw(back, back_len);
    free(raw);

    /* a client's sealed file: a padded length before and after 20 new
     * queries (which since the memo cache went change nothing in the body) */
    for (k = 0; k < 2; k++) {
        CHECK_OK(mess_client_save(client, path, pass));
        n = file_size(path) - 100 - 56 - 16 - 32;
        CHECK(statefile_padme(n) == n);
        for (i = 0; i < 20; i++) {
            for (rl = 0; rl < 64; rl++)
                x[rl] = (float)((i * 64 + rl + 1000 * k) % 97);
            CHECK_OK(mess_client_request(client, x, 16, &q, &req, &rl));
            mess_buf_free(req);
            mess_query_free(q);
        }
    }
    unlink(path);
}

/* Padme: only the top floor(log2 E) + 1 bits of a length remain. */
static void test_padme(void)
{
    size_t len, prev = 0, worst = 0;
    CHECK(statefile_padme(0) == 0 && statefile_padme(1) == 1);
    CHECK(statefile_padme(100) == 104);       /* E=6, S=3: multiples of 8 */
    CHECK(statefile_padme(1u << 20) == 1u << 20);
    CHECK(statefile_padme((1u << 20) + 1) == (1u << 20) + (1u << 15));
    for (len = 2; len < 300000; len += 7) {
        size_t p = statefile_padme(len);
        CHECK(p >= len && p >= prev);
        if ((p - len) * 1000 / len > worst)
            worst = (p - len) * 1000 / len;
        prev = p;
    }
    CHECK(worst <= 125); /* at most 12.5 % from 16 bytes on, less as lengths grow */
    CHECK(statefile_padme(SIZE_MAX - 3) == 0);
}

/* Runs fn in a child; returns the child's exit status (0 = all checks held). */
static int in_child(int (*fn)(void))
{
    pid_t pid;
    int st;
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0)
        _exit(fn());
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return 99;
    return WEXITSTATUS(st);
}

static int as_nobody(void)
{
    char path[256], locked[256];
    mess_client *c2 = NULL;
    int bad = 0;
    path_of(path, sizeof path, "ro/x.client");
    path_of(locked, sizeof locked, "perm.client");
    if (setgid(65534) != 0 || setuid(65534) != 0)
        return 77;
    errno = 0;
    bad |= mess_client_save(client, path, NULL) != MESS_EIO || errno != EACCES;
    errno = 0;
    bad |= mess_client_load(locked, NULL, &c2) != MESS_EIO || errno != EACCES;
    return bad;
}

static int on_readonly_mount(void)
{
    char ro[256], path[256];
    int bad;
    path_of(ro, sizeof ro, "ro");
    path_of(path, sizeof path, "ro/x.client");
    if (unshare(CLONE_NEWNS) != 0 ||
        mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", ro, "tmpfs", MS_RDONLY, NULL) != 0)
        return 77;
    errno = 0;
    bad = mess_client_save(client, path, NULL) != MESS_EIO || errno != EROFS;
    return bad;
}

/* Permission denied (as an unprivileged user) and a read-only file system
 * (a private mount namespace): both need root, which this sandbox has; a
 * run without it says so and checks nothing here. */
static void test_errno_privileged(void)
{
    char ro[256], locked[256];
    int rc;
    path_of(ro, sizeof ro, "ro");
    path_of(locked, sizeof locked, "perm.client");
    CHECK(mkdir(ro, 0755) == 0);
    CHECK(chmod(dir, 0755) == 0);
    CHECK_OK(mess_client_save(client, locked, NULL)); /* mode 0600, root's */
    if (geteuid() != 0) {
        printf("  (not root: permission and read-only checks not run)\n");
    } else {
        rc = in_child(as_nobody);
        CHECK(rc == 0);
        rc = in_child(on_readonly_mount);
        if (rc == 77)
            printf("  (no mount namespace here: read-only check not run)\n");
        else
            CHECK(rc == 0);
    }
    unlink(locked);
    rmdir(ro);
    chmod(dir, 0700);
}

int main(void)
{
    static const uint8_t seed[32] = "libmess statefile test seed 0001";
    mess_params p;
    float *small;

    /* a small client: 64 components, two shards of 64 bits */
    small = test_sift_learn_rows(500, 64);
    if (!small || test_small_client(&p, 64, 2, 1, small, 500, seed, &client) != MESS_OK)
        return 1;
    free(small);
    mkdir("build", 0755);
    if (!mkdtemp(dir)) {
        fprintf(stderr, "cannot create a directory under build/\n");
        return 1;
    }
    RUN(test_symlink_not_followed);
    RUN(test_errno_kept);
    RUN(test_fifo_refused);
    RUN(test_save_new);
    RUN(test_save_new_race);
    RUN(test_errno_privileged);
    RUN(test_passphrase_rules);
    RUN(test_version_1_refused);
    RUN(test_sealed_length_padded);
    RUN(test_padme);
    RUN(test_applied_counts);
    mess_client_free(client);
    CHECK(rmdir(dir) == 0);
    HARNESS_END();
}
