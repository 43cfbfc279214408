/*
 * test_lazy_threads.c - the first searches of a server directory whose
 * shards have delta chains (docs/PROTOCOL.md "Lazy apply"), made from
 * several threads at once on one handle: the open applied nothing, the
 * threads race to be first on each shard (whole searches, partial
 * searches of one shard, stats, the server view, mess_server_error,
 * batches), and every answer equals the server in memory given the same
 * buffers.  Run under ASan in make check and under
 * ThreadSanitizer by make tsan (any report fails).
 */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../mess_experimental.h"
#include "harness.h"
#include "sift.h"

#define N_BASE 600
#define N_SMALL 3   /* checkpoints of 20 items: the chains' deltas */
#define THREADS 4
#define NQ 16
#define ROUNDS 3
#define POOL 48

static mess_params P;
static mess_server *ref;    /* in memory: the reference */
static mess_server *server; /* the lazily opened directory */
static uint8_t *req[NQ];
static size_t req_len[NQ];
static pthread_barrier_t start;

struct worker {
    unsigned index;
    int errors, mismatches;
};

static int same_search(const uint32_t *shard, unsigned q, unsigned threads)
{
    uint8_t *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    int ok;
    if (shard)
        ok = mess_server_search_shards(server, req[q], req_len[q], shard, 1, 1, &a, &la) ==
                 MESS_OK &&
             mess_server_search_shards(ref, req[q], req_len[q], shard, 1, 1, &b, &lb) == MESS_OK;
    else
        ok = mess_server_search(server, req[q], req_len[q], threads, &a, &la) == MESS_OK &&
             mess_server_search(ref, req[q], req_len[q], 1, &b, &lb) == MESS_OK;
    ok = ok ? (la == lb && memcmp(a, b, la) == 0 ? 1 : 0) : -1;
    mess_buf_free(a);
    mess_buf_free(b);
    return ok;
}

static void *worker_main(void *arg)
{
    struct worker *w = (struct worker *)arg;
    unsigned i;
    pthread_barrier_wait(&start);
    for (i = 0; i < NQ; i++) {
        unsigned q = (i + w->index * 5) % NQ;
        uint32_t one = (q + w->index) % P.shards;
        int r;
        if (w->index == THREADS - 1 && i % 4 == 0) {
            mess_server_stats st;
            st.size = sizeof st;
            if (mess_server_stats_get(server, &st) != MESS_OK || st.live + st.deleted != st.entries)
                w->errors++;
        }
        if (w->index == THREADS - 2 && i % 4 == 1) {
            /* the other callers that read shards: the server view, the
             * error line, a batch (every shard) */
            char msg[128];
            size_t nodes = 0;
            uint32_t sh = (q + 1) % P.shards;
            const uint8_t *rq[2];
            size_t rl[2], ol[2];
            uint8_t *out[2] = {NULL, NULL};
            if (mess_server_shard_nodes(server, sh, &nodes) != MESS_OK || nodes == 0 ||
                mess_server_error(server, msg, sizeof msg) != MESS_OK)
                w->errors++;
            rq[0] = req[q];
            rq[1] = req[(q + 1) % NQ];
            rl[0] = req_len[q];
            rl[1] = req_len[(q + 1) % NQ];
            if (mess_server_search_batch(server, rq, rl, 2, NULL, out, ol, NULL) != MESS_OK)
                w->errors++;
            mess_buf_free(out[0]);
            mess_buf_free(out[1]);
        }
        /* worker 0's whole searches fan out on two threads of their own */
        r = same_search(w->index % 2 ? &one : NULL, q, w->index == 0 ? 2 : 1);
        if (r < 0)
            w->errors++;
        else if (r == 0)
            w->mismatches++;
    }
    return NULL;
}

static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[800];
    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static int count_deltas(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL) {
        size_t a = strlen(e->d_name);
        n += a > 6 && strcmp(e->d_name + a - 6, ".delta") == 0;
    }
    closedir(d);
    return n;
}

static char dir[] = "build/lazythrXXXXXX";

static void test_first_searches_at_once(void)
{
    char sub[300], msg[256];
    unsigned r, t;
    snprintf(sub, sizeof sub, "%s/s", dir);
    for (r = 0; r < ROUNDS; r++) {
        pthread_t th[THREADS];
        struct worker w[THREADS];
        mess_server_stats s0, s1;
        server = NULL;
        CHECK_OK(mess_server_open(sub, &P, NULL, 0, &server));
        if (!server)
            return;
        s0.size = s1.size = sizeof s0;
        CHECK_OK(mess_server_stats_get(server, &s0));
        for (t = 0; t < THREADS; t++) {
            memset(&w[t], 0, sizeof w[t]);
            w[t].index = t;
            CHECK(pthread_create(&th[t], NULL, worker_main, &w[t]) == 0);
        }
        for (t = 0; t < THREADS; t++) {
            pthread_join(th[t], NULL);
            CHECK(w[t].errors == 0);
            CHECK(w[t].mismatches == 0);
        }
        CHECK_OK(mess_server_error(server, msg, sizeof msg));
        CHECK_OK(mess_server_stats_get(server, &s1));
        CHECK(s1.entries == s0.entries && s1.live == s0.live);
        CHECK(s1.bytes > s0.bytes); /* applied by the threads, not the open */
        mess_server_free(server);
        server = NULL;
    }
}

int main(void)
{
    static const uint8_t seed[32] = "libmess lazy threads test seed 1";
    float *base = NULL, *query = NULL, *learn = NULL;
    size_t nb, nq, nl, dim, i;
    mess_client *c = NULL;
    mess_server *s = NULL;
    uint64_t *ids;
    uint8_t *buf;
    size_t len;
    char sub[300];

    if (test_read_sift(&base, &nb, &query, &nq, &learn, &nl, &dim) != 0)
        return 1;
    if (nb < N_BASE + 20 * N_SMALL || nq < NQ) {
        fprintf(stderr, "datasets/sift is too small\n");
        return 1;
    }
    mess_params_default(&P, (uint32_t)dim);
    P.shards = 8;
    P.per_item = 2;
    P.kappa = 64;
    ids = (uint64_t *)malloc((N_BASE + 20 * N_SMALL) * sizeof *ids);
    for (i = 0; i < N_BASE + 20 * N_SMALL; i++)
        ids[i] = i;
    mkdir("build", 0755);
    if (!ids || !mkdtemp(dir) ||
        mess_client_new(&P, learn, nl < 2000 ? nl : 2000, seed, 1, &c) != MESS_OK ||
        mess_server_new(&P, &ref) != MESS_OK) {
        fprintf(stderr, "cannot set the test up\n");
        return 1;
    }
    snprintf(sub, sizeof sub, "%s/s", dir);
    CHECK_OK(mess_server_create(sub, &P, &s));
    for (i = 0; i <= N_SMALL; i++) {
        size_t from = i == 0 ? 0 : N_BASE + 20 * (i - 1), n = i == 0 ? N_BASE : 20;
        CHECK_OK(mess_client_upload(c, ids + from, base + from * dim, n, 1, &buf, &len));
        CHECK_OK(mess_server_apply_upload(ref, buf, len, 1));
        CHECK_OK(mess_server_apply_upload(s, buf, len, 1));
        CHECK_OK(mess_server_checkpoint(s));
        mess_buf_free(buf);
    }
    mess_server_free(s);
    CHECK(count_deltas(sub) >= (int)P.shards); /* chains to apply */
    for (i = 0; i < NQ; i++) {
        mess_query *q = NULL;
        CHECK_OK(mess_client_request(c, query + i * dim, POOL, &q, &req[i], &req_len[i]));
        mess_query_free(q);
    }
    pthread_barrier_init(&start, NULL, THREADS);
    RUN(test_first_searches_at_once);
    pthread_barrier_destroy(&start);
    for (i = 0; i < NQ; i++)
        mess_buf_free(req[i]);
    mess_server_free(ref);
    mess_client_free(c);
    free(ids);
    mess_vecs_free(base);
    mess_vecs_free(query);
    mess_vecs_free(learn);
    rm_tree(sub);
    rmdir(dir);
    HARNESS_END();
}
