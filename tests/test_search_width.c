/*
 * test_search_width.c - the server's interleaved search (hnsw_search_many,
 * server_search_set_width) answers every request with the bytes of the
 * former path (the shards one after the other through hnsw_search), on
 * real SIFT data with deleted items:
 *
 * - mess_server_search at widths 1..16 and 1..3 threads, the partial
 *   search of shard sets and the batch call (its requests searched in
 *   groups, shard by shard, or in the throughput mode, a window of
 *   requests per shard across the workers, also after a compaction)
 *   equal width 0 byte for byte, budgets above a shard's live nodes
 *   included, a bad request failing alone;
 * - a multi-threaded search keeps its worker threads across queries (the
 *   server's workers are made once) and two threads searching at once
 *   (one on the kept workers, one starting its own) get the same bytes;
 *   a forked child (none of the parent's threads) starts its own;
 * - all of the above again over the code layout (mess_server_set_layout),
 *   with deleted items, then after a compaction on every path.
 * Run under ASan in make check and under ThreadSanitizer by make tsan.
 */
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../mess.h"
#include "server.h"
#include "harness.h"
#include "testdir.h"

#define N_ITEMS 3000
#define NQ 24

static float *base, *queries, *train;
static size_t n_base, n_query, n_train, dim;
static mess_params params;
static const uint8_t seed[32] = "search width test seed 00000001";
static mess_client *cl;
static mess_server *srv;
static uint8_t *reqs[NQ];
static size_t req_lens[NQ];
/* width 0's responses */
static uint8_t *ref[NQ];
static size_t ref_lens[NQ];

static int setup(void)
{
    static uint64_t ids[N_ITEMS], del[N_ITEMS / 7 + 1];
    uint8_t *buf = NULL;
    size_t len = 0, i, nd = 0;
    int rc;
    for (i = 0; i < N_ITEMS; i++) {
        ids[i] = 7 + i;
        if (i % 7 == 3)
            del[nd++] = ids[i];
    }
    rc = mess_client_new(&params, train, n_train, seed, 2, &cl);
    if (rc == MESS_OK)
        rc = mess_server_new(&params, &srv);
    if (rc == MESS_OK)
        rc = mess_client_upload(cl, ids, base, N_ITEMS, 2, &buf, &len);
    if (rc == MESS_OK) {
        rc = mess_server_apply_upload(srv, buf, len, 2);
        mess_buf_free(buf);
        buf = NULL;
    }
    /* deleted items route searches but are never returned */
    if (rc == MESS_OK)
        rc = mess_client_delete(cl, del, nd, &buf, &len);
    if (rc == MESS_OK) {
        rc = mess_server_apply_delete(srv, buf, len, NULL);
        mess_buf_free(buf);
    }
    /* pools from small to more than the index holds per shard */
    for (i = 0; i < NQ && rc == MESS_OK; i++) {
        mess_query *q = NULL;
        size_t pool = i % 3 == 0 ? 40 : i % 3 == 1 ? 400 : 20000;
        rc = mess_client_request(cl, queries + i * dim, pool, &q, &reqs[i], &req_lens[i]);
        mess_query_free(q);
    }
    CHECK(server_search_get_width(srv) == SERVER_SEARCH_WIDTH);
    CHECK_RC(server_search_set_width(srv, HNSW_MANY_MAX + 1), MESS_EINVAL);
    CHECK_OK(server_search_set_width(srv, 0));
    for (i = 0; i < NQ && rc == MESS_OK; i++)
        rc = mess_server_search(srv, reqs[i], req_lens[i], 1, &ref[i], &ref_lens[i]);
    server_search_set_width(srv, SERVER_SEARCH_WIDTH);
    return rc;
}

static int same_as_ref(size_t i, const uint8_t *resp, size_t len)
{
    return len == ref_lens[i] && memcmp(resp, ref[i], len) == 0;
}

static void test_widths_and_threads(void)
{
    static const unsigned widths[] = {0, 1, 2, 3, 5, 8, 16};
    size_t w, t, i, differ = 0, failed = 0;
    for (w = 0; w < sizeof widths / sizeof *widths; w++) {
        CHECK_OK(server_search_set_width(srv, widths[w]));
        for (t = 1; t <= 3; t++)
            for (i = 0; i < NQ; i++) {
                uint8_t *resp = NULL;
                size_t len = 0;
                if (mess_server_search(srv, reqs[i], req_lens[i], (unsigned)t, &resp,
                                       &len) != MESS_OK)
                    failed++;
                else
                    differ += !same_as_ref(i, resp, len);
                mess_buf_free(resp);
            }
    }
    server_search_set_width(srv, SERVER_SEARCH_WIDTH);
    CHECK(failed == 0);
    CHECK(differ == 0);
}

/* A shard set's partial response holds, per shard, the bytes of the whole
 * response's section: rebuilt by mess_response_merge it is the same. */
static void test_partial_and_batch(void)
{
    uint32_t even[64], odd[64];
    size_t ne = 0, no = 0, i, differ = 0, failed = 0;
    uint32_t j;
    mess_workers *w = NULL;
    uint8_t *resps[NQ];
    size_t lens[NQ];
    for (j = 0; j < params.shards; j++) {
        if (j % 2)
            odd[no++] = j;
        else
            even[ne++] = j;
    }
    for (i = 0; i < NQ; i++) {
        uint8_t *pa = NULL, *pb = NULL, *resp = NULL;
        size_t la = 0, lb = 0, len = 0;
        const uint8_t *parts[2];
        size_t plens[2];
        char msg[128];
        if (mess_server_search_shards(srv, reqs[i], req_lens[i], odd, no, 2, &pa, &la) ||
            mess_server_search_shards(srv, reqs[i], req_lens[i], even, ne, 1, &pb, &lb)) {
            failed++;
        } else {
            parts[0] = pa;
            parts[1] = pb;
            plens[0] = la;
            plens[1] = lb;
            if (mess_response_merge(&params, reqs[i], req_lens[i], parts, plens, 2, &resp,
                                    &len, msg, sizeof msg) != MESS_OK)
                failed++;
            else
                differ += !same_as_ref(i, resp, len);
        }
        mess_buf_free(pa);
        mess_buf_free(pb);
        mess_buf_free(resp);
    }
    CHECK(failed == 0);
    CHECK(differ == 0);
    CHECK_OK(mess_workers_new(2, &w));
    CHECK_OK(mess_server_search_batch(srv, (const uint8_t *const *)reqs, req_lens, NQ, w,
                                      resps, lens, NULL));
    for (i = 0, differ = 0; i < NQ; i++) {
        differ += !same_as_ref(i, resps[i], lens[i]);
        mess_buf_free(resps[i]);
    }
    CHECK(differ == 0);
    mess_workers_free(w);
}

/* Batches search their requests in groups, shard by shard (the path
 * before the throughput mode, by_shard 0): every size of batch and of
 * pool, every width, with a missing request (its status alone fails) and
 * one of another owner's length garbage (likewise). */
static void test_batch_groups(void)
{
    static const unsigned widths[] = {0, 1, 4, 8, 16};
    static const unsigned threads[] = {1, 3};
    const uint8_t *rq[NQ];
    uint8_t *resps[NQ], junk[64];
    size_t lens[NQ], i, wi, ti, n, differ = 0, wrong = 0;
    int status[NQ];
    memset(junk, 0x33, sizeof junk);
    CHECK_OK(server_search_set_by_shard(srv, 0));
    for (wi = 0; wi < sizeof widths / sizeof *widths; wi++)
        for (ti = 0; ti < 2; ti++) {
            mess_workers *w = NULL;
            CHECK_OK(server_search_set_width(srv, widths[wi]));
            CHECK_OK(mess_workers_new(threads[ti], &w));
            for (n = 1; n <= NQ; n += 7) {
                size_t lens_in[NQ];
                for (i = 0; i < n; i++) {
                    rq[i] = reqs[i];
                    lens_in[i] = req_lens[i];
                }
                if (n > 2) {
                    rq[1] = NULL;
                    rq[n - 1] = junk;
                    lens_in[n - 1] = sizeof junk;
                }
                if (mess_server_search_batch(srv, rq, lens_in, n, w, resps, lens, status) ==
                        MESS_OK &&
                    n > 2)
                    wrong++;
                for (i = 0; i < n; i++) {
                    if (n > 2 && (i == 1 || i == n - 1))
                        wrong += status[i] == MESS_OK || resps[i] != NULL;
                    else
                        differ += status[i] != MESS_OK || !same_as_ref(i, resps[i], lens[i]);
                    mess_buf_free(resps[i]);
                }
            }
            mess_workers_free(w);
        }
    server_search_set_width(srv, SERVER_SEARCH_WIDTH);
    CHECK_OK(server_search_set_by_shard(srv, SEARCH_WINDOW));
    CHECK(differ == 0);
    CHECK(wrong == 0);
}

/* One batch through the throughput mode: n of the requests (a missing one
 * at 1 and a garbage one at n - 1 when n > 2); per request, the bytes of
 * its own search (ref / ref_lens), or its failure.  status NULL: the call
 * fails whole when a request is bad, with every response NULL. */
static void batch_check(mess_workers *w, size_t n, int with_status, uint8_t **want,
                        const size_t *want_lens, size_t *differ, size_t *wrong)
{
    static uint8_t junk[64];
    const uint8_t *rq[NQ] = {NULL};
    uint8_t *resps[NQ];
    size_t lens_in[NQ] = {0}, lens[NQ], i;
    int status[NQ], rc, bad = n > 2;
    memset(junk, 0x33, sizeof junk);
    for (i = 0; i < n; i++) {
        rq[i] = reqs[i];
        lens_in[i] = req_lens[i];
    }
    if (bad) {
        rq[1] = NULL;
        rq[n - 1] = junk;
        lens_in[n - 1] = sizeof junk;
    }
    rc = mess_server_search_batch(srv, rq, lens_in, n, w, resps, lens,
                                  with_status ? status : NULL);
    *wrong += (rc == MESS_OK) == bad;
    for (i = 0; i < n; i++) {
        int failed = bad && (i == 1 || i == n - 1);
        if (!with_status && bad)
            *wrong += resps[i] != NULL || lens[i] != 0;
        else if (failed)
            *wrong += status[i] == MESS_OK || resps[i] != NULL;
        else
            *differ += (with_status && status[i] != MESS_OK) || !resps[i] ||
                       lens[i] != want_lens[i] || memcmp(resps[i], want[i], lens[i]) != 0;
        mess_buf_free(resps[i]);
    }
}

/* The throughput mode (server_search_set_by_shard): every window (1, a
 * few, more than the batch), width, worker count, batch size, with and
 * without statuses, bad requests among good ones, on a server with
 * deleted items: each response the bytes of its own mess_server_search. */
static void test_batch_by_shard(void)
{
    static const unsigned windows[] = {1, 3, 7, SEARCH_WINDOW};
    static const unsigned widths[] = {1, 8, 16};
    static const unsigned threads[] = {1, 2, 3};
    static const size_t sizes[] = {1, 5, NQ};
    size_t wn, wi, ti, si, differ = 0, wrong = 0, runs = 0;
    CHECK_RC(server_search_set_by_shard(srv, SEARCH_WINDOW_MAX + 1), MESS_EINVAL);
    for (ti = 0; ti < sizeof threads / sizeof *threads; ti++) {
        mess_workers *w = NULL;
        CHECK_OK(mess_workers_new(threads[ti], &w));
        for (wn = 0; wn < sizeof windows / sizeof *windows; wn++)
            for (wi = 0; wi < sizeof widths / sizeof *widths; wi++) {
                CHECK_OK(server_search_set_by_shard(srv, windows[wn]));
                CHECK_OK(server_search_set_width(srv, widths[wi]));
                for (si = 0; si < sizeof sizes / sizeof *sizes; si++, runs++)
                    batch_check(w, sizes[si], (int)(runs % 2), ref, ref_lens, &differ,
                                &wrong);
            }
        /* NULL workers: inline */
        batch_check(NULL, NQ, 1, ref, ref_lens, &differ, &wrong);
        mess_workers_free(w);
    }
    server_search_set_width(srv, SERVER_SEARCH_WIDTH);
    CHECK_OK(server_search_set_by_shard(srv, SEARCH_WINDOW));
    printf("  %zu batches\n", runs);
    CHECK(differ == 0);
    CHECK(wrong == 0);
}

struct searcher {
    size_t differ, failed;
};

static void *search_main(void *arg)
{
    struct searcher *s = (struct searcher *)arg;
    size_t r, i;
    for (r = 0; r < 5; r++)
        for (i = 0; i < NQ; i++) {
            uint8_t *resp = NULL;
            size_t len = 0;
            if (mess_server_search(srv, reqs[i], req_lens[i], 2, &resp, &len) != MESS_OK)
                s->failed++;
            else
                s->differ += !same_as_ref(i, resp, len);
            mess_buf_free(resp);
        }
    return NULL;
}

static void test_workers_kept(void)
{
    static struct searcher a, b;
    mess_workers *w;
    uint8_t *resp = NULL;
    size_t len = 0, i, moved = 0;
    pthread_t ta, tb;
    CHECK_OK(mess_server_search(srv, reqs[0], req_lens[0], 2, &resp, &len));
    mess_buf_free(resp);
    w = srv->workers;
    CHECK(w != NULL && mess_workers_threads(w) == 2 && !srv->workers_busy);
    for (i = 0; i < 50; i++) {
        resp = NULL;
        CHECK_OK(mess_server_search(srv, reqs[i % NQ], req_lens[i % NQ], 2, &resp, &len));
        mess_buf_free(resp);
        moved += srv->workers != w;
    }
    CHECK(moved == 0);
    /* another thread count replaces them */
    resp = NULL;
    CHECK_OK(mess_server_search(srv, reqs[1], req_lens[1], 3, &resp, &len));
    CHECK(same_as_ref(1, resp, len));
    mess_buf_free(resp);
    CHECK(srv->workers != NULL && mess_workers_threads(srv->workers) == 3);
    CHECK(pthread_create(&ta, NULL, search_main, &a) == 0);
    CHECK(pthread_create(&tb, NULL, search_main, &b) == 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK(a.failed == 0 && b.failed == 0);
    CHECK(a.differ == 0 && b.differ == 0);
}

/* A child forked after the server started its workers has none of their
 * threads: its multi-threaded searches start their own (the kept handle
 * would wait forever) and answer the same bytes. */
static void test_fork_child(void)
{
    uint8_t *resp = NULL;
    size_t len = 0;
    int status = -1;
    pid_t pid;
    CHECK_OK(mess_server_search(srv, reqs[0], req_lens[0], 2, &resp, &len));
    mess_buf_free(resp);
    CHECK(srv->workers != NULL);
    fflush(stdout);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        size_t i, bad = 0;
        alarm(60); /* a hang fails the test instead of stopping make check */
        for (i = 0; i < NQ; i++) {
            resp = NULL;
            if (mess_server_search(srv, reqs[i], req_lens[i], 2, &resp, &len) != MESS_OK ||
                !same_as_ref(i, resp, len))
                bad++;
            mess_buf_free(resp);
        }
        _exit(bad == 0 ? 0 : 1);
    }
    if (pid > 0)
        waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* the parent's workers are still its own */
    resp = NULL;
    CHECK_OK(mess_server_search(srv, reqs[2], req_lens[2], 2, &resp, &len));
    CHECK(same_as_ref(2, resp, len));
    mess_buf_free(resp);
}

/* After a compaction (no deleted node: the interleaved searches take the
 * common case's loops) every path of hnsw_search_many (fast 0 .. 3:
 * server_search_set_paths) on every popcount level the CPU has (3 scores
 * each neighbour list at once, hnsw_score.c) answers with the bytes of the
 * shards searched one after the other (width 0).  Last: it compacts. */
static void test_paths_compacted(void)
{
    static const unsigned widths[] = {1, 3, 8, 16};
    uint8_t *cref[NQ];
    size_t clen[NQ], i, w, differ = 0, failed = 0, runs = 0;
    int fast, level, have = hnsw_popcount_hw();
    CHECK_OK(mess_server_compact(srv, 2));
    CHECK_OK(server_search_set_width(srv, 0));
    for (i = 0; i < NQ; i++) {
        cref[i] = NULL;
        CHECK_OK(mess_server_search(srv, reqs[i], req_lens[i], 1, &cref[i], &clen[i]));
    }
    /* fast 4 here: fast 3 over the code layout (kept by the compaction) */
    for (level = 0; level <= have; level++) {
        CHECK_OK(hnsw_popcount_force(level));
        for (fast = 0; fast <= 4; fast++) {
            server_search_set_paths(srv, fast > 3 ? 3 : fast, HNSW_MANY_CLEAR_WORDS);
            server_search_set_read_layout(srv, fast > 3);
            for (w = 0; w < sizeof widths / sizeof *widths; w++) {
                CHECK_OK(server_search_set_width(srv, widths[w]));
                for (i = 0; i < NQ; i++) {
                    uint8_t *resp = NULL;
                    size_t len = 0;
                    if (mess_server_search(srv, reqs[i], req_lens[i], 1 + (unsigned)(i % 2),
                                           &resp, &len) != MESS_OK)
                        failed++;
                    else
                        differ += !cref[i] || len != clen[i] || memcmp(resp, cref[i], len) != 0;
                    runs++;
                    mess_buf_free(resp);
                }
            }
        }
    }
    CHECK_OK(hnsw_popcount_force(-1));
    server_search_set_paths(srv, HNSW_MANY_FAST, HNSW_MANY_CLEAR_WORDS);
    server_search_set_read_layout(srv, 1);
    server_search_set_width(srv, SERVER_SEARCH_WIDTH);
    /* the throughput mode on the compacted graphs, 1 and 2 workers */
    for (w = 1; w <= 2; w++) {
        mess_workers *wk = NULL;
        size_t wrong = 0;
        CHECK_OK(mess_workers_new((unsigned)w, &wk));
        batch_check(wk, NQ, 1, cref, clen, &differ, &wrong);
        batch_check(wk, 2, 0, cref, clen, &differ, &wrong);
        CHECK(wrong == 0);
        mess_workers_free(wk);
    }
    printf("  %zu searches on %d popcount level(s) x 5 paths x 4 widths\n", runs, have + 1);
    CHECK(failed == 0);
    CHECK(differ == 0);
    for (i = 0; i < NQ; i++)
        mess_buf_free(cref[i]);
}

/* 1 if files a and b hold the same bytes. */
static int same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int ca = 0, cb = 0, same = fa && fb;
    while (same && ca != EOF) {
        ca = getc(fa);
        cb = getc(fb);
        same = ca == cb;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

/* A directory-backed server reads its arenas' pages for the entries it
 * returns in three ways (server_search_set_payload_io): faults one by
 * one, the watch that asks for the rest at once, every entry asked for
 * before the copy; the bytes are the in-memory server's each way, for a
 * whole, a partial and a batch search.  Reading a whole arena (the
 * view of every entry, the export) lifts the random advice and restores
 * it: the same entries, the same travel file. */
static void test_payload_reads(void)
{
    const char *dir = "build/test_search_width.dir", *file = "build/test_search_width.srv",
               *again = "build/test_search_width.srv2";
    static const uint32_t some[3] = {1, 4, 9};
    mess_server *ds = NULL;
    mess_workers *w = NULL;
    uint8_t *resps[NQ];
    size_t lens[NQ], i, differ = 0, failed = 0;
    int mode;
    rm_tree(dir);
    unlink(file);
    unlink(again);
    CHECK_OK(mess_server_export(srv, file));
    CHECK_OK(mess_server_import(file, dir));
    CHECK_OK(mess_server_open(dir, &params, NULL, 0, &ds));
    if (!ds)
        return;
    CHECK_OK(mess_workers_new(2, &w));
    CHECK(server_search_set_payload_io(ds, 3) == MESS_EINVAL);
    for (mode = 0; mode <= 2; mode++) {
        CHECK_OK(server_search_set_payload_io(ds, mode));
        for (i = 0; i < NQ; i++) {
            uint8_t *resp = NULL, *part = NULL, *whole = NULL;
            size_t len = 0, plen = 0, wlen = 0;
            if (mess_server_search(ds, reqs[i], req_lens[i], 1 + (unsigned)(i % 2), &resp,
                                   &len) != MESS_OK)
                failed++;
            else
                differ += !same_as_ref(i, resp, len);
            /* a partial search of 3 shards, and the in-memory server's */
            if (mess_server_search_shards(ds, reqs[i], req_lens[i], some, 3, 1, &part, &plen) ||
                mess_server_search_shards(srv, reqs[i], req_lens[i], some, 3, 1, &whole,
                                          &wlen))
                failed++;
            else
                differ += plen != wlen || memcmp(part, whole, plen) != 0;
            mess_buf_free(resp);
            mess_buf_free(part);
            mess_buf_free(whole);
        }
        if (mess_server_search_batch(ds, (const uint8_t *const *)reqs, req_lens, NQ, w, resps,
                                     lens, NULL) != MESS_OK) {
            failed++;
        } else {
            for (i = 0; i < NQ; i++) {
                differ += !same_as_ref(i, resps[i], lens[i]);
                mess_buf_free(resps[i]);
            }
        }
    }
    CHECK(failed == 0);
    CHECK(differ == 0);
    /* the whole arena read: a shard's entries, the travel file */
    {
        size_t n = 0, m = 0, eb = ds->entry_bytes;
        uint8_t *a = NULL, *b = NULL;
        CHECK_OK(mess_server_shard_nodes(ds, 2, &n));
        CHECK_OK(mess_server_shard_nodes(srv, 2, &m));
        CHECK(n == m && n > 0);
        a = (uint8_t *)malloc(n * eb + 1);
        b = (uint8_t *)malloc(n * eb + 1);
        if (a && b) {
            CHECK_OK(mess_server_shard_entries(ds, 2, a, n));
            CHECK_OK(mess_server_shard_entries(srv, 2, b, n));
            CHECK(memcmp(a, b, n * eb) == 0);
        }
        free(a);
        free(b);
        CHECK_OK(mess_server_export(ds, again));
        CHECK(same_file(file, again));
    }
    mess_workers_free(w);
    mess_server_free(ds);
    rm_tree(dir);
    unlink(file);
    unlink(again);
}

/* The code layout (mess_server_set_layout) on the server with deleted
 * items: its memory counted, bad values refused, and the searches above
 * (widths, threads, partial, batch, groups) give width 0's bytes over it;
 * it stays on for test_paths_compacted. */
static void test_layout_codes(void)
{
    mess_server_stats a, b;
    CHECK_OK(mess_server_stats_get(srv, &a));
    CHECK_RC(mess_server_set_layout(srv, 2), MESS_EINVAL);
    CHECK_RC(mess_server_set_layout(NULL, MESS_LAYOUT_CODES), MESS_EINVAL);
    CHECK_OK(mess_server_set_layout(srv, MESS_LAYOUT_CODES));
    CHECK_OK(mess_server_stats_get(srv, &b));
    /* 40 M bytes a node (M 8: 320), for at least every node */
    CHECK(b.bytes - a.bytes >= 320 * b.entries);
    test_widths_and_threads();
    test_partial_and_batch();
    test_batch_groups();
    /* off and on again: the same blocks */
    CHECK_OK(mess_server_set_layout(srv, MESS_LAYOUT_DEFAULT));
    CHECK_OK(mess_server_stats_get(srv, &b));
    CHECK(b.bytes == a.bytes);
    CHECK_OK(mess_server_set_layout(srv, MESS_LAYOUT_CODES));
    test_widths_and_threads();
}

static void setup_failed(void)
{
    CHECK(!"client, server, upload, delete, requests, width-0 responses");
}

int main(void)
{
    size_t d2, d3, i;
    if (mess_vecs_read_f32(DATA("sift/base.bvecs"), &base, &n_base, &dim) ||
        mess_vecs_read_f32(DATA("sift/query.bvecs"), &queries, &n_query, &d2) ||
        mess_vecs_read_f32(DATA("sift/learn.bvecs"), &train, &n_train, &d3) ||
        n_base < N_ITEMS || n_query < NQ) {
        fprintf(stderr, "cannot read datasets/sift\n");
        return 1;
    }
    mess_params_default(&params, (uint32_t)dim);
    params.shards = 16;
    params.per_item = 4;
    params.hnsw_m = 8;
    params.ef_construction = 40;
    params.train_sample = 1000;
    if (setup() == MESS_OK) {
        RUN(test_widths_and_threads);
        RUN(test_partial_and_batch);
        RUN(test_batch_groups);
        RUN(test_batch_by_shard);
        RUN(test_workers_kept);
        RUN(test_fork_child);
        RUN(test_payload_reads);
        RUN(test_layout_codes);
        RUN(test_paths_compacted);
    } else {
        RUN(setup_failed);
    }
    for (i = 0; i < NQ; i++) {
        mess_buf_free(reqs[i]);
        mess_buf_free(ref[i]);
    }
    mess_client_free(cl);
    mess_server_free(srv);
    mess_vecs_free(base);
    mess_vecs_free(queries);
    mess_vecs_free(train);
    HARNESS_END();
}
