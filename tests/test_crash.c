/*
 * test_crash.c - crash safety of the state files: a child process saving a
 * state is killed with SIGKILL at a random moment, ROUNDS times per role
 * (default 100, MESS_CRASH_ROUNDS overrides); after every kill the file
 * must load and be exactly the old state or exactly the new one, never a
 * torn mixture (statefile.c writes PATH.tmp.XXXXXX, fsyncs, renames).
 *
 * The kill delay is drawn uniformly from [0, 1.25 x the measured save
 * time], so kills land in serialization, compression, the write, the fsync
 * and after the rename; the test requires both outcomes to occur.  The
 * save time is re-measured as the rounds go (a loaded machine slows it),
 * so the draws keep spanning the whole save.
 *
 * make check runs a lighter version (30 rounds, a 1,500-item server);
 * make crash-test runs the full one: MESS_CRASH_ROUNDS=100 and
 * MESS_CRASH_ITEMS=8000 (a server file of about 10 MB).
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../mess_experimental.h"
#include "harness.h"
#include "sift.h"

static float *base, *queries, *train;
static size_t n_base, n_query, n_train, dim;
static unsigned rounds = 30;
static size_t n_items = 1500;
static char dir[] = "build/crashXXXXXX";

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Puts the old state back under path (by rename, like the library). */
static int restore(const char *path, const uint8_t *bytes, size_t len)
{
    char tmp[512];
    FILE *f;
    snprintf(tmp, sizeof tmp, "%s.restore", path);
    f = fopen(tmp, "wb");
    if (!f || fwrite(bytes, 1, len, f) != len || fclose(f) != 0)
        return -1;
    return rename(tmp, path);
}

typedef int (*save_fn)(const void *state, const char *path);
typedef int (*check_fn)(const char *path, int which); /* 0 old, 1 new */

static int save_server(const void *s, const char *path)
{
    return mess_server_save((const mess_server *)s, path);
}

static int save_client(const void *c, const char *path)
{
    return mess_client_save((const mess_client *)c, path, NULL);
}

/* Time of one save in a child as the kills will see it: fork included,
 * right after the old file was put back (its dirty pages are flushed
 * with the save's fsync), the slowest of three. */
static double time_save(save_fn save, const void *state, const char *path,
                        const uint8_t *old_bytes, size_t old_len)
{
    double worst = 0.0;
    int i;
    for (i = 0; i < 3; i++) {
        double t0;
        pid_t pid;
        int status;
        restore(path, old_bytes, old_len);
        t0 = now();
        pid = fork();
        if (pid == 0)
            _exit(save(state, path) == MESS_OK ? 0 : 1);
        waitpid(pid, &status, 0);
        if (now() - t0 > worst)
            worst = now() - t0;
    }
    return worst;
}

struct outcome {
    unsigned old_state, new_state, killed_mid_save, torn;
};

static void kill_loop(const char *role, save_fn save, const void *new_state,
                      const char *path, const uint8_t *old_bytes, size_t old_len,
                      const uint8_t *new_bytes, size_t new_len, check_fn check,
                      struct outcome *o)
{
    double t_save = time_save(save, new_state, path, old_bytes, old_len);
    unsigned r, streak = 0;
    uint64_t s = 0x2545f4914f6cdd1dull;
    memset(o, 0, sizeof *o);
    for (r = 0; r < rounds; r++) {
        pid_t pid;
        int status;
        double delay;
        uint8_t *got;
        size_t len;
        CHECK(restore(path, old_bytes, old_len) == 0);
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        delay = 1.25 * t_save * (double)(s >> 11) / 9007199254740992.0;
        pid = fork();
        if (pid == 0)
            _exit(save(new_state, path) == MESS_OK ? 0 : 1);
        {
            struct timespec ts;
            ts.tv_sec = (time_t)delay;
            ts.tv_nsec = (long)((delay - (double)ts.tv_sec) * 1e9);
            nanosleep(&ts, NULL);
        }
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        if (WIFSIGNALED(status)) {
            o->killed_mid_save++;
            /* ten kills in a row mid-save: the machine got slower */
            if (++streak == 10) {
                t_save = time_save(save, new_state, path, old_bytes, old_len);
                streak = 0;
            }
        } else {
            CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
            streak = 0;
        }
        got = test_read_file(path, &len);
        CHECK(got != NULL);
        if (!got)
            continue;
        if (len == old_len && memcmp(got, old_bytes, len) == 0) {
            o->old_state++;
            CHECK(check(path, 0) == 0);
        } else if (len == new_len && memcmp(got, new_bytes, len) == 0) {
            o->new_state++;
            CHECK(check(path, 1) == 0);
        } else {
            o->torn++;
        }
        free(got);
    }
    printf("  %s: %u kills at random points of a %.1f ms save (%u before it "
           "ended): %u old state, %u new state, %u torn\n",
           role, rounds, t_save * 1e3, o->killed_mid_save, o->old_state,
           o->new_state, o->torn);
    CHECK(o->torn == 0);
    CHECK(o->old_state + o->new_state == rounds);
    if (rounds >= 20) /* the kills must really land on both sides of the rename */
        CHECK(o->old_state > 0 && o->new_state > 0 && o->killed_mid_save > 0);
}

/* ---- server ------------------------------------------------------------- */

static mess_server *srv_old, *srv_new;
static mess_client *srv_client;
static uint8_t *srv_req;
static size_t srv_req_len;

/* The loaded server must hold what the expected one holds and answer the
 * same request with the same bytes. */
static int check_server(const char *path, int which)
{
    mess_server *s = NULL, *want = which ? srv_new : srv_old;
    mess_server_stats a, b;
    uint8_t *r1 = NULL, *r2 = NULL;
    size_t l1 = 0, l2 = 0;
    int bad;
    if (mess_server_load(path, NULL, &s) != MESS_OK)
        return -1;
    mess_server_stats_get(s, &a);
    mess_server_stats_get(want, &b);
    bad = a.entries != b.entries || a.live != b.live ||
          mess_server_search(s, srv_req, srv_req_len, 1, &r1, &l1) != MESS_OK ||
          mess_server_search(want, srv_req, srv_req_len, 1, &r2, &l2) != MESS_OK ||
          l1 != l2 || memcmp(r1, r2, l1) != 0;
    mess_buf_free(r1);
    mess_buf_free(r2);
    mess_server_free(s);
    return bad ? -1 : 0;
}

static void test_server_kills(void)
{
    static const uint8_t seed[32] = "crash safety test seed 000000001";
    const size_t N_OLD = n_items, N_NEW = n_items / 10;
    mess_params p;
    uint64_t *ids = (uint64_t *)malloc((N_OLD + N_NEW) * sizeof *ids);
    uint8_t *buf, *old_b, *new_b;
    size_t len, i, old_len, new_len;
    char path[512], path2[512];
    mess_query *q;
    struct outcome o;

    mess_params_default(&p, (uint32_t)dim);
    p.kappa = 64;
    p.shards = 8;
    p.per_item = 2;
    p.hnsw_m = 8;
    p.ef_construction = 24;
    p.train_sample = 1000;
    for (i = 0; i < N_OLD + N_NEW; i++)
        ids[i] = 1000 + i;
    CHECK_OK(mess_client_new(&p, train, n_train, seed, 2, &srv_client));
    CHECK_OK(mess_server_new(&p, &srv_old));
    CHECK_OK(mess_server_new(&p, &srv_new));
    CHECK_OK(mess_client_upload(srv_client, ids, base, N_OLD, 2, &buf, &len));
    CHECK_OK(mess_server_apply_upload(srv_old, buf, len, 2));
    CHECK_OK(mess_server_apply_upload(srv_new, buf, len, 2));
    mess_buf_free(buf);
    /* the new state: more items and some deletions */
    CHECK_OK(mess_client_upload(srv_client, ids + N_OLD, base + (size_t)N_OLD * dim,
                                N_NEW, 2, &buf, &len));
    CHECK_OK(mess_server_apply_upload(srv_new, buf, len, 2));
    mess_buf_free(buf);
    CHECK_OK(mess_client_delete(srv_client, ids, N_NEW, &buf, &len));
    CHECK_OK(mess_server_apply_delete(srv_new, buf, len, NULL));
    mess_buf_free(buf);
    CHECK_OK(mess_client_request(srv_client, queries, 80, &q, &srv_req, &srv_req_len));

    snprintf(path, sizeof path, "%s/server.mess", dir);
    snprintf(path2, sizeof path2, "%s/server-new.mess", dir);
    CHECK_OK(mess_server_save(srv_new, path2));
    CHECK_OK(mess_server_save(srv_old, path));
    old_b = test_read_file(path, &old_len);
    new_b = test_read_file(path2, &new_len);
    CHECK(old_b && new_b && (old_len != new_len || memcmp(old_b, new_b, old_len) != 0));
    if (old_b && new_b)
        kill_loop("server state", save_server, srv_new, path, old_b, old_len, new_b,
                  new_len, check_server, &o);
    printf("  server state file: %zu bytes\n", new_len);
    free(old_b);
    free(new_b);
    mess_buf_free(srv_req);
    mess_query_free(q);
    mess_server_free(srv_old);
    mess_server_free(srv_new);
    mess_client_free(srv_client);
    free(ids);
}

/* ---- client ----------------------------------------------------------- */

static uint64_t cli_codes[2][16 * 2];

/* The loaded client must hash like the expected one and carry its keys:
 * its upload of one item equals the expected client's byte for byte. */
static mess_client *cli_old, *cli_new;

static int check_client(const char *path, int which)
{
    mess_client *c = NULL, *want = which ? cli_new : cli_old;
    uint64_t codes[16 * 2], id = 42;
    uint8_t *b1 = NULL, *b2 = NULL;
    size_t l1 = 0, l2 = 0;
    int bad;
    if (mess_client_load(path, NULL, &c) != MESS_OK)
        return -1;
    bad = mess_client_codes(c, base, codes) != MESS_OK ||
          memcmp(codes, cli_codes[which], sizeof codes) != 0 ||
          /* an upload of an id never deleted changes neither client (a
           * delete would: it records the id in the generation map) and is
           * a function of the keys alone (storage coins are a PRF) */
          mess_client_upload(c, &id, base, 1, 1, &b1, &l1) != MESS_OK ||
          mess_client_upload(want, &id, base, 1, 1, &b2, &l2) != MESS_OK || l1 != l2 ||
          memcmp(b1, b2, l1) != 0;
    mess_buf_free(b1);
    mess_buf_free(b2);
    mess_client_free(c);
    return bad ? -1 : 0;
}

static void test_client_kills(void)
{
    static const uint8_t seed_a[32] = "crash safety client seed A000001";
    mess_params p;
    size_t i;
    uint8_t *old_b, *new_b;
    size_t old_len, new_len;
    char path[512], path2[512];
    struct outcome o;

    /* a client state of about a megabyte (16 shards x 128 bits of IsoHash) */
    mess_params_default(&p, (uint32_t)dim);
    p.shards = 16;
    p.per_item = 4;
    p.train_sample = 1000;
    p.dim = (uint32_t)dim;
    CHECK_OK(mess_client_new(&p, train, n_train, seed_a, 2, &cli_old));
    snprintf(path, sizeof path, "%s/client.mess", dir);
    snprintf(path2, sizeof path2, "%s/client-new.mess", dir);
    CHECK_OK(mess_client_save(cli_old, path, NULL));
    /* the new state: the same client after 50 queries (its counter) */
    CHECK_OK(mess_client_load(path, NULL, &cli_new));
    for (i = 0; cli_new && i < 50; i++) {
        mess_query *q;
        uint8_t *req;
        size_t rl;
        CHECK_OK(mess_client_request(cli_new, queries + i * dim, 40, &q, &req, &rl));
        mess_buf_free(req);
        mess_query_free(q);
    }
    CHECK_OK(mess_client_codes(cli_old, base, cli_codes[0]));
    CHECK_OK(mess_client_codes(cli_new, base, cli_codes[1]));
    CHECK_OK(mess_client_save(cli_new, path2, NULL));
    old_b = test_read_file(path, &old_len);
    new_b = test_read_file(path2, &new_len);
    CHECK(old_b && new_b);
    if (old_b && new_b)
        kill_loop("client state", save_client, cli_new, path, old_b, old_len, new_b,
                  new_len, check_client, &o);
    printf("  client state file: %zu bytes\n", new_len);
    free(old_b);
    free(new_b);
    mess_client_free(cli_old);
    mess_client_free(cli_new);
}

/* Removes every file in dir (the states and any temporary a killed save
 * left, PATH.tmp.XXXXXX), then dir. */
static void cleanup(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[512];
    while (d && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

int main(void)
{
    const char *env = getenv("MESS_CRASH_ROUNDS");
    if (env && atoi(env) > 0)
        rounds = (unsigned)atoi(env);
    env = getenv("MESS_CRASH_ITEMS");
    if (env && atoi(env) >= 100)
        n_items = (size_t)atoi(env);
    if (test_read_sift(&base, &n_base, &queries, &n_query, &train, &n_train, &dim) ||
        n_base < n_items + n_items / 10) {
        fprintf(stderr, "cannot read datasets/sift\n");
        return 1;
    }
    mkdir("build", 0755);
    if (!mkdtemp(dir)) {
        fprintf(stderr, "cannot create a directory under build/\n");
        return 1;
    }
    RUN(test_server_kills);
    RUN(test_client_kills);
    cleanup();
    mess_vecs_free(base);
    mess_vecs_free(queries);
    mess_vecs_free(train);
    HARNESS_END();
}
