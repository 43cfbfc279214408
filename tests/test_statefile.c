/*
 * test_statefile.c - the state-file container from the outside: how saving
 * creates its temporary file, what a failed save or load reports (code and
 * errno), passphrase rules, and the sealed file's length.
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

#include "../mess.h"
#include "harness.h"

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
        mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
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
    float *learn, *small;
    size_t nl, dl, i, j;

    if (mess_vecs_read_f32(DATA("sift/learn.bvecs"), &learn, &nl, &dl) != MESS_OK ||
        nl < 500) {
        fprintf(stderr, "cannot read datasets/sift\n");
        return 1;
    }
    /* a small client: 64 components, two shards of 64 bits */
    small = (float *)malloc(500 * 64 * sizeof *small);
    for (i = 0; i < 500; i++)
        for (j = 0; j < 64; j++)
            small[i * 64 + j] = learn[i * dl + j];
    mess_vecs_free(learn);
    mess_params_default(&p, 64);
    p.shards = 2;
    p.per_item = 1;
    p.kappa = 64;
    if (mess_client_new(&p, small, 500, seed, 0, 1, &client) != MESS_OK) {
        fprintf(stderr, "cannot create the test client\n");
        return 1;
    }
    free(small);
    mkdir("build", 0755);
    if (!mkdtemp(dir)) {
        fprintf(stderr, "cannot create a directory under build/\n");
        return 1;
    }
    RUN(test_symlink_not_followed);
    RUN(test_errno_kept);
    RUN(test_errno_privileged);
    RUN(test_passphrase_rules);
    mess_client_free(client);
    CHECK(rmdir(dir) == 0);
    HARNESS_END();
}
