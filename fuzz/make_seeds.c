/*
 * make_seeds.c - writes the seed corpora fuzz/corpus/<target>/seed-* from
 * the bundled SIFT data through the real library (make fuzz-seeds).  Run
 * from the repository root.  Seeds are small on purpose: libFuzzer mutates
 * faster on small inputs and the repository stays light.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hnsw_bin.h"
#include "client.h"
#include "server.h"
#include "statefile.h"
#include "wal.h"
#include "fuzz.h"

#define SEED_ITEMS 8

static void die(const char *what, int rc)
{
    fprintf(stderr, "make_seeds: %s: %s\n", what, mess_strerror(rc));
    exit(1);
}

static void put(const char *target, const char *name, uint8_t mode, int with_mode,
                const uint8_t *data, size_t len)
{
    char path[512];
    FILE *f;
    snprintf(path, sizeof path, "fuzz/corpus/%s", target);
    mkdir("fuzz/corpus", 0755);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "fuzz/corpus/%s/seed-%s", target, name);
    f = fopen(path, "wb");
    if (!f || (with_mode && fwrite(&mode, 1, 1, f) != 1) ||
        (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0) {
        fprintf(stderr, "make_seeds: cannot write %s\n", path);
        exit(1);
    }
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    long n;
    if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET) != 0)
        die(path, MESS_EIO);
    buf = (uint8_t *)malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n)
        die(path, MESS_EIO);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* Seeds of a state-file target: the file as is, its raw body, and the
 * file again for the checksum-fixing mode (fuzz.h). */
static void state_seeds(const char *target, const char *path, uint32_t role,
                        const char *pass, const char *name)
{
    mess_params p;
    uint8_t *file, *raw = NULL;
    size_t flen, rlen = 0;
    char n[64];
    int rc;
    file = slurp(path, &flen);
    snprintf(n, sizeof n, "%s-file", name);
    put(target, n, 0, 1, file, flen);
    snprintf(n, sizeof n, "%s-fixsum", name);
    put(target, n, 2, 1, file, flen);
    rc = statefile_read(path, role, pass, pass ? strlen(pass) : 0, &p, &raw, &rlen);
    if (rc != MESS_OK)
        die("statefile_read", rc);
    {
        struct mess_wr w;
        mess_wr_init(&w);
        params_encode(&p, &w);
        mess_wr_bytes(&w, raw, rlen);
        snprintf(n, sizeof n, "%s-body", name);
        put(target, n, 1, 1, w.p, w.len);
        mess_wr_free(&w);
    }
    statefile_free_raw(raw, rlen);
    free(file);
}

static void vecs_seeds(void)
{
    float *f = NULL;
    uint8_t *b = NULL;
    int32_t *g = NULL;
    size_t n, dim, i;
    int rc;
    uint8_t *buf;
    size_t len;
    const char *tmp = "build/seed.tmp";
    if ((rc = mess_bvecs_read("datasets/sift/base.bvecs", &b, &n, &dim)) != MESS_OK ||
        (rc = mess_ivecs_read("datasets/sift/groundtruth.ivecs", &g, &n, &dim)) != MESS_OK)
        die("vecs", rc);
    /* three bvecs records, as bvecs and as fvecs */
    if ((rc = mess_bvecs_write(tmp, b, 3, 128)) != MESS_OK)
        die("bvecs_write", rc);
    buf = slurp(tmp, &len);
    put("vecs", "bvecs", 2, 1, buf, len);
    put("vecs", "bvecs-f32", 4, 1, buf, len);
    free(buf);
    f = (float *)malloc(3 * 128 * sizeof *f);
    for (i = 0; i < 3 * 128; i++)
        f[i] = (float)b[i];
    if ((rc = mess_fvecs_write(tmp, f, 3, 128)) != MESS_OK)
        die("fvecs_write", rc);
    buf = slurp(tmp, &len);
    put("vecs", "fvecs", 0, 1, buf, len);
    put("vecs", "fvecs-f32", 3, 1, buf, len);
    free(buf);
    if ((rc = mess_ivecs_write(tmp, g, 3, dim)) != MESS_OK)
        die("ivecs_write", rc);
    buf = slurp(tmp, &len);
    put("vecs", "ivecs", 1, 1, buf, len);
    free(buf);
    remove(tmp);
    free(f);
    mess_vecs_free(b);
    mess_vecs_free(g);
}

/* The graph file of h (hnsw_write_graph) as seeds of the hnsw_graph
 * target: mode 0 (as is) and mode 1 (checksum recomputed by the target). */
static void graph_seeds(const struct hnsw *h, const char *name)
{
    const char *path = "build/seed.graph";
    char nm[64];
    uint8_t digest[32], *file;
    size_t len;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644), rc;
    if (fd < 0)
        die("graph file", MESS_EIO);
    if ((rc = hnsw_write_graph(h, fd, digest)) != MESS_OK || close(fd) != 0)
        die("hnsw_write_graph", rc ? rc : MESS_EIO);
    file = slurp(path, &len);
    snprintf(nm, sizeof nm, "%s", name);
    put("hnsw_graph", nm, 0, 1, file, len);
    snprintf(nm, sizeof nm, "%s-resum", name);
    put("hnsw_graph", nm, 1, 1, file, len);
    free(file);
    remove(path);
}

static void hnsw_seeds(const struct fuzz_fixture *fx)
{
    struct hnsw_params hp;
    struct hnsw *h;
    struct mess_wr w;
    uint64_t codes[4 * 1];
    float *base;
    size_t n, dim, i;
    int rc;
    memset(&hp, 0, sizeof hp);
    hp.bits = fx->p.kappa;
    hp.m = fx->p.hnsw_m;
    hp.ef_construction = fx->p.ef_construction;
    hp.seed = 1;
    if ((rc = hnsw_new(&hp, &h)) != MESS_OK)
        die("hnsw_new", rc);
    mess_wr_init(&w);
    hnsw_serialize(h, &w);
    put("hnsw", "empty", 0, 0, w.p, w.len);
    mess_wr_free(&w);
    graph_seeds(h, "empty");
    if ((rc = mess_vecs_read_f32("datasets/sift/base.bvecs", &base, &n, &dim)) != MESS_OK)
        die("base", rc);
    /* real codes: shard 0's clean IsoHash codes of 24 base vectors */
    for (i = 0; i < 24; i++) {
        if ((rc = mess_client_codes(fx->client, base + i * dim, codes)) != MESS_OK ||
            (rc = hnsw_add(h, codes, hnsw_label_of(fuzz_item_id(i), 0), NULL)) != MESS_OK)
            die("codes", rc);
    }
    hnsw_delete(h, hnsw_label_of(fuzz_item_id(3), 0));
    mess_wr_init(&w);
    hnsw_serialize(h, &w);
    put("hnsw", "sift24", 0, 0, w.p, w.len);
    mess_wr_free(&w);
    graph_seeds(h, "sift24");
    hnsw_free(h);
    mess_vecs_free(base);
}

/* Seeds of fuzz_merge: the fixture request's partials from the fixture
 * server, as one part (every shard), two halves in reverse order and one
 * part per shard (fuzz_merge.c's input format). */
static void merge_seeds(const struct fuzz_fixture *fx)
{
    static const uint32_t all[4] = {3, 1, 0, 2}, hi[2] = {2, 3}, lo[2] = {0, 1};
    static const struct {
        const char *name;
        size_t n;
        const uint32_t *set[4];
        size_t nset[4];
    } cases[3] = {{"whole", 1, {all}, {4}},
                  {"halves", 2, {hi, lo}, {2, 2}},
                  {"singles", 4, {all, all + 1, all + 2, all + 3}, {1, 1, 1, 1}}};
    size_t c, i;
    for (c = 0; c < 3; c++) {
        struct mess_wr w;
        mess_wr_init(&w);
        mess_wr_u8(&w, (uint8_t)(cases[c].n - 1));
        for (i = 0; i < cases[c].n; i++) {
            uint8_t *part;
            size_t len;
            int rc = mess_server_search_shards(fx->server, fx->request, fx->request_len,
                                               cases[c].set[i], cases[c].nset[i], 1,
                                               &part, &len);
            if (rc != MESS_OK)
                die("search_shards", rc);
            if (i + 1 < cases[c].n) {
                if (len > 0xffff)
                    die("partial too large for a seed", MESS_ELIMIT);
                mess_wr_u8(&w, (uint8_t)len);
                mess_wr_u8(&w, (uint8_t)(len >> 8));
            }
            mess_wr_bytes(&w, part, len);
            mess_buf_free(part);
        }
        if (w.err)
            die("merge seed", w.err);
        put("merge", cases[c].name, 0, 0, w.p, w.len);
        mess_wr_free(&w);
    }
}

/* Write-ahead logs of generation 7 (fuzz_wal.c): empty, three records
 * (bodies from the fixture's real buffers), the same with a torn tail,
 * a stale log of generation 6, and a delete followed by a compaction. */
static void wal_seeds(const struct fuzz_fixture *fx)
{
    struct mess_wr w;
    size_t up = fx->upload_len < 160 ? fx->upload_len : 160;
    put("wal", "empty", 0, 0, NULL, 0);
    mess_wr_init(&w);
    wal_encode(&w, WAL_UPLOAD, 7, 0, fx->upload, up);
    wal_encode(&w, WAL_DELETE, 7, 1, fx->del, fx->del_len);
    wal_encode(&w, WAL_UPLOAD, 7, 2, fx->upload, 24);
    if (w.err)
        die("wal_encode", w.err);
    put("wal", "three", 0, 0, w.p, w.len);
    put("wal", "torn", 0, 0, w.p, w.len - 40);
    mess_wr_free(&w);
    mess_wr_init(&w);
    wal_encode(&w, WAL_DELETE, 6, 0, fx->del, fx->del_len);
    wal_encode(&w, WAL_UPLOAD, 6, 1, fx->upload, 64);
    if (w.err)
        die("wal_encode", w.err);
    put("wal", "stale", 0, 0, w.p, w.len);
    mess_wr_free(&w);
    mess_wr_init(&w);
    wal_encode(&w, WAL_DELETE, 7, 0, fx->del, fx->del_len);
    wal_encode(&w, WAL_COMPACT, 7, 1, NULL, 0);
    if (w.err)
        die("wal_encode", w.err);
    put("wal", "compact", 0, 0, w.p, w.len);
    mess_wr_free(&w);
}

/* The fixture server's MANIFEST (server_store.c, through export and
 * import) as seeds of the manifest target: as it is, and mode 1 (its
 * checksum recomputed by the target). */
static void manifest_seeds(const struct fuzz_fixture *fx)
{
    const char *travel = "build/seed.travel", *dir = "build/seed.dir";
    char path[512];
    uint8_t *file;
    size_t len;
    DIR *d;
    struct dirent *e;
    int rc;
    if ((rc = mess_server_export(fx->server, travel)) != MESS_OK ||
        (rc = mess_server_import(travel, dir)) != MESS_OK)
        die("fixture directory", rc);
    snprintf(path, sizeof path, "%s/MANIFEST", dir);
    file = slurp(path, &len);
    put("manifest", "fixture", 0, 1, file, len);
    put("manifest", "fixture-resum", 1, 1, file, len);
    free(file);
    remove(travel);
    if ((d = opendir(dir)) != NULL) {
        while ((e = readdir(d)) != NULL)
            if (e->d_name[0] != '.') {
                snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
                remove(path);
            }
        closedir(d);
    }
    rmdir(dir);
}

/* Seeds of fuzz_delta: deltas over the target's base graph
 * (fuzz_delta_base), written by the real checkpoint code: none (no change
 * since the mark) and 8 inserts plus a deletion of an older node; mode 0
 * (as is) and mode 1 (digest recomputed by the target). */
static void delta_seeds(const struct fuzz_fixture *fx)
{
    static const struct { const char *name; size_t adds; } kinds[2] = {{"empty", 0},
                                                                       {"add8", 8}};
    const char *path = "build/seed.delta";
    struct hnsw_delta_info di;
    struct hnsw *h;
    uint64_t *codes;
    uint8_t digest[32], *file, *map;
    float *base;
    size_t n, dim, i, len, blen;
    uint64_t bytes;
    int rc, fd, k;
    if ((rc = mess_vecs_read_f32("datasets/sift/base.bvecs", &base, &n, &dim)) != MESS_OK)
        die("base", rc);
    codes = (uint64_t *)malloc((size_t)fx->p.shards * (fx->p.kappa / 64) * 8);
    if (!codes || fuzz_delta_base(NULL, &file, &blen) != 0 ||
        posix_memalign((void **)&map, 4096, blen) != 0)
        die("delta base", MESS_ENOMEM);
    for (k = 0; k < 2; k++) {
        memcpy(map, file, blen);
        if ((rc = hnsw_attach(map, blen, NULL, &h)) != MESS_OK ||
            (rc = hnsw_track(h)) != MESS_OK)
            die("attach the delta base", rc);
        for (i = 0; i < kinds[k].adds; i++)
            if ((rc = mess_client_codes(fx->client, base + (24 + i) * dim, codes)) != MESS_OK ||
                (rc = hnsw_add(h, codes, hnsw_label_of(fuzz_item_id(24 + i), 0), NULL)) !=
                    MESS_OK)
                die("codes", rc);
        if (kinds[k].adds)
            hnsw_delete(h, hnsw_label_of(fuzz_item_id(5), 0));
        memset(&di, 0, sizeof di);
        di.shard = 0;
        di.generation = 2;
        di.base_generation = 1;
        hnsw_graph_digest(file, blen, di.base_digest);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || (rc = hnsw_write_delta(h, &di, fd, digest, &bytes)) != MESS_OK ||
            close(fd) != 0)
            die("hnsw_write_delta", fd < 0 ? MESS_EIO : rc);
        {
            uint8_t *d = slurp(path, &len);
            char nm[64];
            put("delta", kinds[k].name, 0, 1, d, len);
            snprintf(nm, sizeof nm, "%s-resum", kinds[k].name);
            put("delta", nm, 1, 1, d, len);
            free(d);
        }
        hnsw_free(h);
    }
    remove(path);
    free(map);
    free(codes);
    mess_vecs_free(base);
}

/* Seeds of fuzz_query_state: the fixture query's state file (modes 0-2,
 * as state_seeds writes them), its sealed form (mode 3) and its
 * plaintext, one query and two (mode 4: u8 count | plaintext, sealed by
 * the target). */
static void query_state_seeds(const struct fuzz_fixture *fx)
{
    const char *path = "build/seed.qstate";
    const mess_query *one = fx->query, *q = fx->query;
    uint8_t *buf;
    size_t len, i, j;
    uint8_t n;
    int rc;
    if ((rc = mess_query_save(fx->client, &one, 1, path)) != MESS_OK)
        die("mess_query_save", rc);
    state_seeds("query_state", path, STATEFILE_QUERY, NULL, "one");
    remove(path);
    if ((rc = mess_query_seal(fx->client, &one, 1, &buf, &len)) != MESS_OK)
        die("mess_query_seal", rc);
    put("query_state", "sealed", 3, 1, buf, len);
    mess_buf_free(buf);
    for (n = 1; n <= 2; n++) {
        struct mess_wr w;
        char nm[32];
        mess_wr_init(&w);
        mess_wr_u8(&w, n);
        for (i = 0; i < n; i++) {
            mess_wr_bytes(&w, q->request_id, sizeof q->request_id);
            for (j = 0; j < fx->p.shards; j++) {
                mess_wr_u8(&w, (uint8_t)q->budgets[j]);
                mess_wr_u8(&w, (uint8_t)(q->budgets[j] >> 8));
            }
            for (j = 0; j < q->dim; j++) {
                uint32_t bits;
                memcpy(&bits, &q->q[j], 4);
                mess_wr_u32(&w, bits);
            }
        }
        if (w.err)
            die("query state seed", w.err);
        snprintf(nm, sizeof nm, "plain-%u", (unsigned)n);
        put("query_state", nm, 4, 1, w.p, w.len);
        mess_wr_free(&w);
    }
}

int main(void)
{
    const struct fuzz_fixture *fx = fuzz_fixture();
    mess_server *s;
    uint8_t *up;
    size_t len, i;
    uint64_t ids[SEED_ITEMS];
    float *base;
    size_t n, dim;
    int rc;

    /* Client state: the fixture's client is 128 x 256 floats of IsoHash, too
     * big to mutate well, so the seeds come from a small real client: the
     * first 64 SIFT components, one shard of 64 bits. */
    {
        static const uint8_t seed[32] = "libmess fuzz small client seed01";
        mess_params sp;
        mess_client *c;
        float *learn, *small;
        size_t nl, dl, j;
        if ((rc = mess_vecs_read_f32("datasets/sift/learn.bvecs", &learn, &nl, &dl)) !=
            MESS_OK)
            die("learn", rc);
        small = (float *)malloc(500 * 64 * sizeof *small);
        for (i = 0; i < 500; i++)
            for (j = 0; j < 64; j++)
                small[i * 64 + j] = learn[i * dl + j];
        mess_params_default(&sp, 64);
        sp.shards = 1;
        sp.per_item = 1;
        sp.hnsw_m = 4;
        sp.ef_construction = 16;
        if ((rc = mess_client_new(&sp, small, 500, seed, 1, &c)) != MESS_OK)
            die("small client", rc);
        {   /* one query (the counter moves) and two deletes, so the
             * generation map is not empty */
            mess_query *q;
            uint8_t *req;
            uint64_t gone[2] = {3, 77};
            if ((rc = mess_client_request(c, small, 4, &q, &req, &len)) != MESS_OK)
                die("small request", rc);
            mess_query_free(q);
            mess_buf_free(req);
            if ((rc = mess_client_delete(c, gone, 2, &req, &len)) != MESS_OK)
                die("small delete", rc);
            mess_buf_free(req);
        }
        if ((rc = mess_client_save(c, "build/seed.client", NULL)) != MESS_OK)
            die("client save", rc);
        state_seeds("client_state", "build/seed.client", STATEFILE_CLIENT, NULL,
                    "plain");
        if ((rc = mess_client_save(c, "build/seed.client", "fuzz")) != MESS_OK)
            die("client save", rc);
        mess_client_free(c);
        free(small);
        mess_vecs_free(learn);
    }
    {
        uint8_t *file = slurp("build/seed.client", &len);
        put("client_state", "sealed-file", 0, 1, file, len);
        free(file);
    }
    remove("build/seed.client");

    /* a small upload, and a server holding it */
    if ((rc = mess_vecs_read_f32("datasets/sift/base.bvecs", &base, &n, &dim)) != MESS_OK)
        die("base", rc);
    for (i = 0; i < SEED_ITEMS; i++)
        ids[i] = fuzz_item_id(1000 + i);
    if ((rc = mess_client_upload(fx->client, ids, base + 1000 * dim, 4, 1, &up, &len)) !=
        MESS_OK)
        die("upload", rc);
    put("upload", "four-items", 0, 0, up, len);
    mess_buf_free(up);
    if ((rc = mess_client_upload(fx->client, ids, base, 0, 1, &up, &len)) != MESS_OK)
        die("upload", rc);
    put("upload", "empty", 0, 0, up, len);
    mess_buf_free(up);
    if ((rc = mess_client_upload(fx->client, ids, base + 1000 * dim, SEED_ITEMS, 1, &up,
                                 &len)) != MESS_OK ||
        (rc = mess_server_new(&fx->p, &s)) != MESS_OK ||
        (rc = mess_server_apply_upload(s, up, len, 1)) != MESS_OK)
        die("seed server", rc);
    mess_buf_free(up);
    if ((rc = mess_server_save(s, "build/seed.server")) != MESS_OK)
        die("server save", rc);
    state_seeds("server_state", "build/seed.server", STATEFILE_SERVER, NULL, "plain");
    remove("build/seed.server");
    mess_server_free(s);
    mess_vecs_free(base);

    put("delete", "quarter", 0, 0, fx->del, fx->del_len);
    put("request", "query0", 0, 0, fx->request, fx->request_len);
    put("response", "query0", 0, 0, fx->response, fx->response_len);
    merge_seeds(fx);
    vecs_seeds();
    hnsw_seeds(fx);
    wal_seeds(fx);
    manifest_seeds(fx);
    delta_seeds(fx);
    query_state_seeds(fx);
    return 0;
}
