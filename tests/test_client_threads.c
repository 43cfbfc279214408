/*
 * test_client_threads.c - one client handle driven from several threads at
 * once (mess.h, "Threads"): requests, finishes, uploads, deletes and saves
 * overlap.  Run under ASan in make check and under ThreadSanitizer by
 * make tsan (any report fails).
 *
 * The client is in deterministic mode, where every request's coins, its
 * request id included, are a function of the operation counter: two
 * requests that read the same counter (a lost update) would carry the
 * same request id, so every request id must be distinct.  Each finish must
 * authenticate its response and find the query's own nearest item.
 */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "../mess_experimental.h"
#include "harness.h"
#include "sift.h"

#define N_ITEMS 800
#define THREADS 4
#define ROUNDS 12
#define POOL 48

static float *base, *train;
static size_t n_base, n_train, dim;
static mess_client *client;
static mess_server *server;
/* The server's contract is readers/writer (searches together, an apply
 * alone); the test keeps it so that only the client is shared freely. */
static pthread_rwlock_t server_lock = PTHREAD_RWLOCK_INITIALIZER;
static uint8_t request_ids[THREADS * ROUNDS][16];
static char save_path[64];

struct worker {
    unsigned index;
    int errors, misses, saves;
};

static void *worker_main(void *arg)
{
    struct worker *w = (struct worker *)arg;
    unsigned r;
    for (r = 0; r < ROUNDS; r++) {
        size_t item = (size_t)(w->index * ROUNDS + r) * 7 % N_ITEMS, req_len, resp_len, got;
        mess_query *q;
        uint8_t *req, *resp;
        uint64_t ids[5];
        float dists[5];
        mess_finish_stats st;
        if (mess_client_request(client, base + item * dim, POOL, &q, &req, &req_len) != MESS_OK) {
            w->errors++;
            continue;
        }
        memcpy(request_ids[w->index * ROUNDS + r], req + WIRE_REQUEST_ID_OFFSET, WIRE_REQUEST_ID_BYTES);
        pthread_rwlock_rdlock(&server_lock);
        if (mess_server_search(server, req, req_len, 1, &resp, &resp_len) != MESS_OK) {
            pthread_rwlock_unlock(&server_lock);
            w->errors++;
            mess_buf_free(req);
            mess_query_free(q);
            continue;
        }
        pthread_rwlock_unlock(&server_lock);
        mess_buf_free(req);
        if (mess_client_finish(client, q, resp, resp_len, 5, ids, dists, &got, &st) != MESS_OK ||
            st.auth_failures != 0)
            w->errors++;
        else if (got == 0 || ids[0] != item)
            w->misses++;
        mess_buf_free(resp);
        mess_query_free(q);

        if (w->index == 0) {
            /* upload a fresh item, delete the previous round's */
            uint64_t id = 100000 + r, old = id - 1;
            uint8_t *buf;
            size_t len;
            if (mess_client_upload(client, &id, base + r * dim, 1, 1, &buf, &len) != MESS_OK) {
                w->errors++;
            } else {
                pthread_rwlock_wrlock(&server_lock);
                w->errors += mess_server_apply_upload(server, buf, len, 1) != MESS_OK;
                pthread_rwlock_unlock(&server_lock);
                mess_buf_free(buf);
            }
            if (r > 0) {
                if (mess_client_delete(client, &old, 1, &buf, &len) != MESS_OK) {
                    w->errors++;
                } else {
                    pthread_rwlock_wrlock(&server_lock);
                    w->errors += mess_server_apply_delete(server, buf, len, NULL) != MESS_OK;
                    pthread_rwlock_unlock(&server_lock);
                    mess_buf_free(buf);
                }
            }
        } else if (w->index == 1 && r % 4 == 0) {
            w->errors += mess_client_save(client, save_path, NULL) != MESS_OK;
            w->saves++;
        }
    }
    return NULL;
}

/* finish through a pointer to a const client: a compile-time check that
 * finish promises not to change the handle. */
static int finish_const(const mess_client *c, const mess_query *q, const uint8_t *resp,
                        size_t len, uint64_t *ids, float *dists, size_t *got)
{
    return mess_client_finish(c, q, resp, len, 5, ids, dists, got, NULL);
}

/* A query may be finished more than once, with the same result. */
static void test_finish_twice(void)
{
    mess_query *q;
    uint8_t *req, *resp;
    size_t req_len, resp_len, g1 = 0, g2 = 0;
    uint64_t i1[5], i2[5];
    float d1[5], d2[5];
    CHECK_OK(mess_client_request(client, base + 11 * dim, POOL, &q, &req, &req_len));
    CHECK_OK(mess_server_search(server, req, req_len, 1, &resp, &resp_len));
    CHECK_OK(finish_const(client, q, resp, resp_len, i1, d1, &g1));
    CHECK_OK(finish_const(client, q, resp, resp_len, i2, d2, &g2));
    CHECK(g1 == 5 && g1 == g2 && memcmp(i1, i2, sizeof i1) == 0 &&
          memcmp(d1, d2, sizeof d1) == 0 && i1[0] == 11);
    mess_buf_free(req);
    mess_buf_free(resp);
    mess_query_free(q);
}

static int cmp16(const void *a, const void *b)
{
    return memcmp(a, b, 16);
}

static void test_one_client_many_threads(void)
{
    pthread_t th[THREADS];
    struct worker w[THREADS];
    mess_client *again = NULL;
    size_t i, dup = 0;
    int errors = 0, misses = 0;
    for (i = 0; i < THREADS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].index = (unsigned)i;
        CHECK(pthread_create(&th[i], NULL, worker_main, &w[i]) == 0);
    }
    for (i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        errors += w[i].errors;
        misses += w[i].misses;
    }
    printf("  %d threads x %d rounds: %d errors, %d queries missing their own item\n",
           THREADS, ROUNDS, errors, misses);
    CHECK(errors == 0);
    CHECK(misses <= THREADS * ROUNDS / 10);
    qsort(request_ids, THREADS * ROUNDS, 16, cmp16);
    for (i = 1; i < THREADS * ROUNDS; i++)
        dup += memcmp(request_ids[i - 1], request_ids[i], 16) == 0;
    CHECK(dup == 0); /* no operation counter value was used twice */
    CHECK(w[1].saves > 0);
    CHECK_OK(mess_client_load(save_path, NULL, &again));
    mess_client_free(again);
}

int main(void)
{
    static const uint8_t seed[32] = "client threads test seed 0000001";
    mess_params p;
    uint64_t *ids;
    uint8_t *buf;
    size_t len, i;
    int fd;
    if (test_read_sift(&base, &n_base, NULL, NULL, &train, &n_train, &dim) ||
        n_base < N_ITEMS) {
        fprintf(stderr, "cannot read datasets/sift\n");
        return 1;
    }
    strcpy(save_path, "/tmp/mess_client_threads_XXXXXX");
    fd = mkstemp(save_path);
    if (fd < 0)
        return 1;
    close(fd);
    mess_params_default(&p, (uint32_t)dim);
    p.shards = 8;
    p.per_item = 2;
    p.hnsw_m = 8;
    p.ef_construction = 40;
    p.train_sample = 1000;
    ids = (uint64_t *)malloc(N_ITEMS * sizeof *ids);
    for (i = 0; i < N_ITEMS; i++)
        ids[i] = i;
    if (mess_client_new(&p, train, n_train < 1000 ? n_train : 1000, seed, 2, &client) ||
        mess_server_new(&p, &server) ||
        mess_client_upload(client, ids, base, N_ITEMS, 2, &buf, &len) ||
        mess_server_apply_upload(server, buf, len, 2)) {
        fprintf(stderr, "setup failed\n");
        return 1;
    }
    mess_buf_free(buf);
    free(ids);
    RUN(test_finish_twice);
    RUN(test_one_client_many_threads);
    unlink(save_path);
    mess_client_free(client);
    mess_server_free(server);
    mess_vecs_free(base);
    mess_vecs_free(train);
    HARNESS_END();
}
