/*
 * setup.c - the fixed deployment every fuzz target starts from (fuzz.h).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hnsw_bin.h"
#include "fuzz.h"

#define FUZZ_TRAIN 1000

/* Where the bundled SIFT set is; MESS_FUZZ_DATA overrides (default: the
 * repository's datasets/sift, targets run from the repository root). */
static const char *data_dir(void)
{
    const char *d = getenv("MESS_FUZZ_DATA");
    return d && *d ? d : "datasets/sift";
}

void fuzz_fail(const char *what)
{
    fprintf(stderr, "fuzz invariant broken: %s\n", what);
    abort();
}

void fuzz_params(mess_params *p)
{
    mess_params_default(p, 128);
    p->kappa = 64;
    p->shards = 4;
    p->per_item = 2;
    p->hnsw_m = 4;
    p->ef_construction = 16;
    p->train_sample = FUZZ_TRAIN;
}

uint64_t fuzz_item_id(size_t i)
{
    /* spread-out ids, as a caller's would be */
    return 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
}

static float *read_f32(const char *name, size_t *n)
{
    char path[4096];
    float *v = NULL;
    size_t dim = 0;
    snprintf(path, sizeof path, "%s/%s", data_dir(), name);
    if (mess_vecs_read_f32(path, &v, n, &dim) != MESS_OK || dim != 128) {
        fprintf(stderr, "fuzz setup: cannot read %s (run from the repository root "
                        "or set MESS_FUZZ_DATA)\n", path);
        exit(2);
    }
    return v;
}

static void must(int rc, const char *what)
{
    if (rc != MESS_OK) {
        fprintf(stderr, "fuzz setup: %s: %s\n", what, mess_strerror(rc));
        exit(2);
    }
}

const struct fuzz_fixture *fuzz_fixture(void)
{
    static struct fuzz_fixture fx;
    static int ready;
    static const uint8_t seed[32] = "libmess fuzz fixture seed 000001";
    float *train, *base, *queries;
    uint64_t ids[FUZZ_ITEMS], del_ids[FUZZ_ITEMS / 4];
    size_t n_train, n_base, n_query, i;

    if (ready)
        return &fx;
    fuzz_params(&fx.p);
    train = read_f32("learn.bvecs", &n_train);
    base = read_f32("base.bvecs", &n_base);
    queries = read_f32("query.bvecs", &n_query);
    if (n_train < FUZZ_TRAIN || n_base < FUZZ_ITEMS || n_query < 1) {
        fprintf(stderr, "fuzz setup: the SIFT set is too small\n");
        exit(2);
    }
    must(mess_client_new(&fx.p, train, FUZZ_TRAIN, seed, 1, &fx.client),
         "client");
    for (i = 0; i < FUZZ_ITEMS; i++)
        ids[i] = fuzz_item_id(i);
    for (i = 0; i < FUZZ_ITEMS / 4; i++)
        del_ids[i] = ids[i];
    must(mess_client_upload(fx.client, ids, base, FUZZ_ITEMS, 1, &fx.upload,
                            &fx.upload_len), "upload");
    must(mess_server_new(&fx.p, &fx.server), "server");
    must(mess_server_apply_upload(fx.server, fx.upload, fx.upload_len, 1),
         "apply upload");
    must(mess_client_delete(fx.client, del_ids, FUZZ_ITEMS / 4, &fx.del,
                            &fx.del_len), "delete");
    must(mess_client_request(fx.client, queries, FUZZ_POOL, &fx.query,
                             &fx.request, &fx.request_len), "request");
    must(mess_server_search(fx.server, fx.request, fx.request_len, 1,
                            &fx.response, &fx.response_len), "search");
    memcpy(fx.q, queries, sizeof fx.q);
    memcpy(fx.x, base, sizeof fx.x);
    mess_vecs_free(train);
    mess_vecs_free(base);
    mess_vecs_free(queries);
    ready = 1;
    return &fx;
}

const char *fuzz_tmp_path(const char *suffix)
{
    static char path[4096];
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/messfuzz-%ld%s", dir && *dir ? dir : "/tmp",
             (long)getpid(), suffix);
    return path;
}

int fuzz_write_file(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    int ok;
    if (!f)
        return -1;
    ok = size == 0 || fwrite(data, 1, size, f) == size;
    ok = fclose(f) == 0 && ok;
    return ok ? 0 : -1;
}

/* The base graph of the delta target (fuzz_delta.c, make_seeds.c): shard
 * 0's IsoHash codes of the first 24 base vectors, item 3 deleted, written
 * as a graph file; built once. */
int fuzz_delta_base(struct hnsw **graph, uint8_t **file, size_t *len)
{
    static uint8_t *buf;
    static size_t n;
    const struct fuzz_fixture *fx = fuzz_fixture();
    struct hnsw_params hp;
    struct hnsw *h = NULL;
    uint64_t *codes;
    uint8_t digest[32];
    float *base;
    size_t nb, i;
    const char *path;
    FILE *f;
    int fd;
    memset(&hp, 0, sizeof hp);
    hp.bits = fx->p.kappa;
    hp.m = fx->p.hnsw_m;
    hp.ef_construction = fx->p.ef_construction;
    hp.seed = 1;
    must(hnsw_new(&hp, &h), "hnsw_new");
    base = read_f32("base.bvecs", &nb);
    codes = (uint64_t *)malloc((size_t)fx->p.shards * (fx->p.kappa / 64) * 8);
    if (!codes)
        return -1;
    for (i = 0; i < 24 && i < nb; i++) {
        must(mess_client_codes(fx->client, base + i * 128, codes), "codes");
        must(hnsw_add(h, codes, hnsw_label_of(fuzz_item_id(i), 0), NULL), "hnsw_add");
    }
    mess_vecs_free(base);
    free(codes);
    must(hnsw_delete(h, hnsw_label_of(fuzz_item_id(3), 0)), "hnsw_delete");
    if (graph) {
        *graph = h;
        return 0;
    }
    if (!buf) {
        path = fuzz_tmp_path(".base");
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || hnsw_write_graph(h, fd, digest) != MESS_OK || close(fd) != 0)
            return -1;
        f = fopen(path, "rb");
        if (!f || fseek(f, 0, SEEK_END) != 0 || (long)(n = (size_t)ftell(f)) < 0 ||
            fseek(f, 0, SEEK_SET) != 0 || !(buf = (uint8_t *)malloc(n)) ||
            fread(buf, 1, n, f) != n)
            return -1;
        fclose(f);
        unlink(path);
    }
    hnsw_free(h);
    *file = buf;
    *len = n;
    return 0;
}
