/*
 * sift_search.c - libmess from C, end to end on the bundled SIFT set: train
 * the client's hashes on learn.bvecs, insert base.bvecs, query with
 * query.bvecs, compare with groundtruth.ivecs.  Both roles run in this one
 * process; the byte buffers between them are what a network would carry.
 *
 *   build/examples/sift_search [DIR [POOL [THREADS]]]   (DIR = datasets/sift)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../mess.h"
#include "../mess_experimental.h" /* mess_vecs_read_f32, mess_ivecs_read */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "sift_search: %s: %s\n", what, mess_strerror(rc));
    return 1;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "datasets/sift";
    size_t pool = argc > 2 ? (size_t)strtoul(argv[2], NULL, 10) : 1500;
    unsigned threads = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 2;
    char path[4096];
    float *base = NULL, *train = NULL, *queries = NULL;
    int32_t *gt = NULL;
    size_t nb, nt, nq, ngt, d, d2, d3, kgt, i, q, hits = 0;
    uint64_t *ids = NULL;
    mess_params p;
    mess_client *c = NULL;
    mess_server *s = NULL;
    uint8_t *buf;
    size_t len, req_bytes = 0, resp_bytes = 0;
    double t0, t_build, t_query;
    int rc;

#define READ(fn, name, out, n, dim)                                      \
    snprintf(path, sizeof path, "%s/%s", dir, name);                     \
    if ((rc = fn(path, out, n, dim)) != MESS_OK)                         \
        return fail(path, rc);
    READ(mess_vecs_read_f32, "base.bvecs", &base, &nb, &d)
    READ(mess_vecs_read_f32, "learn.bvecs", &train, &nt, &d2)
    READ(mess_vecs_read_f32, "query.bvecs", &queries, &nq, &d3)
    READ(mess_ivecs_read, "groundtruth.ivecs", &gt, &ngt, &kgt)
    if (d2 != d || d3 != d || ngt != nq || kgt < 10)
        return fail("datasets do not match", MESS_EFORMAT);

    /* The paper's defaults: M = 64 shards, t = 16, kappa = 128, p_D = 0.08,
     * effective query flip 0.08, efConstruction = 300. */
    mess_params_default(&p, (uint32_t)d);
    t0 = now();
    if ((rc = mess_client_new(&p, train, nt, NULL, threads, &c)) != MESS_OK)
        return fail("client", rc);
    if ((rc = mess_server_new(&p, &s)) != MESS_OK)
        return fail("server", rc);
    ids = (uint64_t *)malloc(nb * sizeof *ids);
    for (i = 0; i < nb; i++)
        ids[i] = i;
    if ((rc = mess_client_upload(c, ids, base, nb, threads, &buf, &len)) != MESS_OK)
        return fail("upload", rc);
    rc = mess_server_apply_upload(s, buf, len, threads);
    mess_buf_free(buf);
    if (rc != MESS_OK)
        return fail("apply upload", rc);
    t_build = now() - t0;

    t0 = now();
    for (q = 0; q < nq; q++) {
        mess_query *qs;
        uint8_t *req, *resp;
        size_t rl, sl, got, j, k;
        uint64_t res[10];
        float dist[10];
        if ((rc = mess_client_request(c, queries + q * d, pool, &qs, &req, &rl)))
            return fail("request", rc);
        rc = mess_server_search(s, req, rl, threads, &resp, &sl);
        mess_buf_free(req);
        if (rc != MESS_OK)
            return fail("search", rc);
        rc = mess_client_finish(c, qs, resp, sl, 10, res, dist, &got, NULL);
        mess_buf_free(resp);
        mess_query_free(qs);
        if (rc != MESS_OK)
            return fail("finish", rc);
        req_bytes += rl;
        resp_bytes += sl;
        for (j = 0; j < got; j++)
            for (k = 0; k < 10; k++)
                hits += res[j] == (uint64_t)gt[q * kgt + k];
    }
    t_query = now() - t0;

    printf("items %zu, queries %zu, pool %zu\n", nb, nq, pool);
    printf("build %.1f s, %.2f ms/query\n", t_build, 1e3 * t_query / (double)nq);
    printf("recall@10 %.4f\n", (double)hits / (double)(nq * 10));
    printf("bytes/query: request %zu, response %.0f\n", req_bytes / nq,
           (double)resp_bytes / (double)nq);
    mess_client_free(c);
    mess_server_free(s);
    mess_vecs_free(base);
    mess_vecs_free(train);
    mess_vecs_free(queries);
    mess_vecs_free(gt);
    free(ids);
    return 0;
}
