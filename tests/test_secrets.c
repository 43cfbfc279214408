/*
 * test_secrets.c - no secret reaches the server or a log.
 *
 * Deterministic mode derives every key from the seed by the documented key
 * schedule (docs/PROTOCOL.md), so the test recomputes the master key, the
 * shard AEAD and label keys and the other subkeys itself, proves it got
 * them right (a stored payload opens under its recomputed shard key, a
 * stored label matches its recomputed PRF), and then scans
 *   - every buffer sent to the server (upload, delete, request), the
 *     responses, and the server state file, raw and decompressed,
 *   - everything the library and the mess tool wrote to stderr, error
 *     paths included,
 * for the keys (raw, and as hex for text), the seed, the ids and any
 * 16-byte run of a stored vector's float encoding.  Positive controls
 * (the client file's body, a decrypted payload) show the scanner finds
 * secrets where they are.
 */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../mess.h"
#include "payload.h"
#include "statefile.h"
#include "harness.h"
#include "sift.h"

#define N_ITEMS 300
#define M_SHARDS 8

static float *base, *queries, *train;
static size_t n_base, n_query, n_train, dim;
static char dir[] = "build/secretsXXXXXX";

/* ---- needles: fixed-length byte strings in an open-addressing set ------- */

enum kind { K_KEY, K_SEED, K_ID, K_VECTOR, K_PASS, K_KINDS };
static const char *const kind_name[K_KINDS] = {"key", "seed", "id", "vector bytes",
                                               "passphrase"};

#define SET_BITS 20
struct needle {
    uint8_t len;   /* 0 = empty slot */
    uint8_t kind;
    uint8_t b[16];
};
static struct needle *set8, *set16;

static uint64_t mix(const uint8_t *p, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull, w;
    size_t i;
    for (i = 0; i < n; i += 8) {
        memcpy(&w, p + i, 8);
        h ^= w;
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 29;
    }
    return h;
}

static void add(struct needle *set, size_t n, const uint8_t *p, enum kind k)
{
    uint64_t i = mix(p, n) & ((1u << SET_BITS) - 1);
    while (set[i].len && memcmp(set[i].b, p, n) != 0)
        i = (i + 1) & ((1u << SET_BITS) - 1);
    set[i].len = (uint8_t)n;
    set[i].kind = (uint8_t)k;
    memcpy(set[i].b, p, n);
}

static int lookup(const struct needle *set, size_t n, const uint8_t *p)
{
    uint64_t i = mix(p, n) & ((1u << SET_BITS) - 1);
    while (set[i].len) {
        if (memcmp(set[i].b, p, n) == 0)
            return set[i].kind;
        i = (i + 1) & ((1u << SET_BITS) - 1);
    }
    return -1;
}

/* A 32-byte secret: both raw halves, and for text both hex cases. */
static void add_secret(const uint8_t *key, size_t len, enum kind k)
{
    char hex[129];
    size_t i, j;
    for (i = 0; i + 16 <= len; i += 16)
        add(set16, 16, key + i, k);
    sodium_bin2hex(hex, sizeof hex, key, len);
    for (j = 0; j < 2; j++) {
        for (i = 0; i + 16 <= 2 * len; i += 16)
            add(set16, 16, (const uint8_t *)hex + i, k);
        for (i = 0; hex[i]; i++)
            hex[i] = (char)toupper((unsigned char)hex[i]);
    }
}

struct hits {
    size_t n[K_KINDS];
};

static void scan(const uint8_t *p, size_t len, struct hits *h)
{
    size_t i;
    int k;
    memset(h, 0, sizeof *h);
    for (i = 0; i + 8 <= len; i++) {
        if ((k = lookup(set8, 8, p + i)) >= 0)
            h->n[k]++;
        if (i + 16 <= len && (k = lookup(set16, 16, p + i)) >= 0)
            h->n[k]++;
    }
}

static void expect_clean(const char *what, const uint8_t *p, size_t len)
{
    struct hits h;
    int k;
    scan(p, len, &h);
    for (k = 0; k < K_KINDS; k++)
        if (h.n[k]) {
            fprintf(stderr, "  FAIL %s: %zu matches of a %s\n", what, h.n[k],
                    kind_name[k]);
            CHECK(h.n[k] == 0);
        }
}

/* ---- the key schedule, recomputed -------------------------------------- */

struct keys {
    uint8_t master[32], route[32], memo[32], coin[32], hash[32], store[32];
    struct payload_keys aead[M_SHARDS]; /* ChaCha20, Poly1305, HChaCha20 */
    uint8_t label[M_SHARDS][32];
};

static void derive(const uint8_t seed[32], uint32_t shards, struct keys *k)
{
    static const uint8_t domain[] = "libmess deterministic master key";
    uint32_t j;
    crypto_generichash(k->master, 32, domain, sizeof domain, seed, 32);
    crypto_kdf_derive_from_key(k->route, 32, 0, "MESSrout", k->master);
    crypto_kdf_derive_from_key(k->memo, 32, 0, "MESSmemo", k->master);
    crypto_kdf_derive_from_key(k->coin, 32, 0, "MESScoin", k->master);
    crypto_kdf_derive_from_key(k->hash, 32, 0, "MESShash", k->master);
    crypto_kdf_derive_from_key(k->store, 32, 0, "MESSstor", k->master);
    for (j = 0; j < shards && j < M_SHARDS; j++) {
        crypto_kdf_derive_from_key(k->aead[j].enc, 32, j, "MESSpenc", k->master);
        crypto_kdf_derive_from_key(k->aead[j].mac, 32, j, "MESSpmac", k->master);
        crypto_kdf_derive_from_key(k->aead[j].prf, 32, j, "MESSpprf", k->master);
        crypto_kdf_derive_from_key(k->label[j], 32, j, "MESSlabl", k->master);
    }
}

static void add_keys(const struct keys *k, uint32_t shards)
{
    uint32_t j;
    add_secret(k->master, 32, K_KEY);
    add_secret(k->route, 32, K_KEY);
    add_secret(k->memo, 32, K_KEY);
    add_secret(k->coin, 32, K_KEY);
    add_secret(k->hash, 32, K_KEY);
    add_secret(k->store, 32, K_KEY);
    for (j = 0; j < shards; j++) {
        add_secret(k->aead[j].enc, 32, K_KEY);
        add_secret(k->aead[j].mac, 32, K_KEY);
        add_secret(k->aead[j].prf, 32, K_KEY);
        add_secret(k->label[j], 32, K_KEY);
    }
}

static uint64_t item_id(size_t i)
{
    uint8_t in[8], out[8];
    uint64_t v;
    mess_store_u64(in, (uint64_t)i);
    crypto_generichash(out, 8, in, 8, NULL, 0);
    memcpy(&v, out, 8);
    return v | 1u;
}

/* Every 16-byte run of 4 non-zero floats of vector x (f32 little-endian),
 * and its id. */
static void add_item(uint64_t id, const float *x)
{
    uint8_t enc[4 * 4096], idb[8];
    size_t i;
    mess_store_u64(idb, id);
    add(set8, 8, idb, K_ID);
    for (i = 0; i < dim; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        mess_store_u32(enc + 4 * i, u);
    }
    for (i = 0; i + 4 <= dim; i++)
        if (x[i] != 0 && x[i + 1] != 0 && x[i + 2] != 0 && x[i + 3] != 0)
            add(set16, 16, enc + 4 * i, K_VECTOR);
}

/* ---- library ------------------------------------------------------------- */

static const uint8_t lib_seed[32] = "secret scan test seed 0000000001";
static const char *const lib_pass = "correct horse battery staple";

static void test_library(void)
{
    struct keys k;
    mess_params p;
    mess_client *c = NULL, *c2 = NULL;
    mess_server *s = NULL;
    uint64_t ids[N_ITEMS];
    uint8_t *up = NULL, *del = NULL, *plain, *raw, *file;
    size_t up_len, del_len, i, raw_len, flen, rec_bytes, n_rec, opened = 0, labels = 0;
    mess_params fp;
    char path[512], errpath[512];
    int saved_err, fd;
    struct hits h;

    mess_params_default(&p, (uint32_t)dim);
    p.kappa = 64;
    p.shards = M_SHARDS;
    p.per_item = 2;
    p.hnsw_m = 8;
    p.ef_construction = 32;
    p.train_sample = 1000;
    derive(lib_seed, p.shards, &k);
    add_keys(&k, p.shards);
    add_secret(lib_seed, 32, K_SEED);
    add(set16, 16, (const uint8_t *)lib_pass, K_PASS);
    for (i = 0; i < N_ITEMS; i++) {
        ids[i] = item_id(i);
        add_item(ids[i], base + i * dim);
    }

    /* the library's stderr goes to a file for the whole test */
    snprintf(errpath, sizeof errpath, "%s/lib.stderr", dir);
    fflush(stderr);
    saved_err = dup(2);
    fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    close(fd);

    CHECK_OK(mess_client_new(&p, train, n_train, lib_seed, 1, &c));
    CHECK_OK(mess_server_new(&p, &s));
    CHECK_OK(mess_client_upload(c, ids, base, N_ITEMS, 1, &up, &up_len));
    CHECK_OK(mess_server_apply_upload(s, up, up_len, 1));

    /* the recomputed keys are the library's: payloads open, labels match */
    rec_bytes = wire_upload_record_bytes(&p);
    n_rec = (up_len - WIRE_RECORDS_OFFSET) / rec_bytes;
    plain = (uint8_t *)malloc(8 + 4 * dim);
    for (i = 0; i < n_rec; i++) {
        const uint8_t *rec = up + WIRE_RECORDS_OFFSET + i * rec_bytes;
        uint32_t shard = wire_record_shard(rec);
        uint64_t id;
        float x[4096];
        uint8_t msg[12], out[16];
        if (shard < M_SHARDS &&
            payload_open(&p, &k.aead[shard], payload_ctx(shard, 0), rec + WIRE_CODE_OFFSET + wire_code_bytes(&p),
                         plain, &id, x) == MESS_OK) {
            opened++;
            mess_store_u64(msg, id); /* generation 0: never deleted */
            mess_store_u32(msg + 8, 0);
            crypto_generichash(out, 16, msg, 12, k.label[shard], 32);
            labels += memcmp(out, wire_record_label(rec), WIRE_LABEL_BYTES) == 0;
        }
    }
    CHECK(n_rec == (size_t)N_ITEMS * p.per_item);
    CHECK(opened == n_rec && labels == n_rec);
    /* positive control: a decrypted payload holds an id and vector runs */
    scan(plain, 8 + 4 * dim, &h);
    CHECK(h.n[K_ID] == 1 && h.n[K_VECTOR] > 0);
    free(plain);

    expect_clean("upload buffer", up, up_len);
    CHECK_OK(mess_client_delete(c, ids, 20, &del, &del_len));
    expect_clean("delete buffer", del, del_len);
    CHECK_OK(mess_server_apply_delete(s, del, del_len, NULL));
    for (i = 0; i < 20; i++) {
        mess_query *q;
        uint8_t *req, *resp;
        size_t rl, sl, got;
        uint64_t out_ids[10];
        float d[10];
        mess_finish_stats st;
        int rc;
        /* queries: real query vectors, and stored vectors themselves */
        const float *qv = i % 2 ? queries + i * dim : base + i * dim;
        CHECK_OK(mess_client_request(c, qv, 64, &q, &req, &rl));
        expect_clean("request buffer", req, rl);
        CHECK_OK(mess_server_search(s, req, rl, 1, &resp, &sl));
        expect_clean("response buffer", resp, sl);
        /* error paths too: a tampered response, a truncated one */
        resp[sl - 1] ^= 1;
        rc = mess_client_finish(c, q, resp, sl, 10, out_ids, d, &got, &st);
        CHECK(rc == MESS_OK || rc == MESS_EAUTH); /* one entry forged */
        CHECK(st.auth_failures <= 1);
        CHECK_RC(mess_client_finish(c, q, resp, sl / 2, 10, out_ids, d, &got, &st),
                 MESS_EFORMAT);
        mess_buf_free(req);
        mess_buf_free(resp);
        mess_query_free(q);
    }

    /* the server file, raw and decompressed */
    snprintf(path, sizeof path, "%s/server.mess", dir);
    CHECK_OK(mess_server_save(s, path));
    file = test_read_file(path, &flen);
    CHECK(file && flen > 0);
    expect_clean("server state file", file, flen);
    free(file);
    CHECK_OK(statefile_read(path, 2, NULL, 0, &fp, &raw, &raw_len));
    expect_clean("server state body", raw, raw_len);
    statefile_free_raw(raw, raw_len);

    /* positive control: the plain client body holds the master key */
    snprintf(path, sizeof path, "%s/client.mess", dir);
    CHECK_OK(mess_client_save(c, path, NULL));
    CHECK_OK(statefile_read(path, 1, NULL, 0, &fp, &raw, &raw_len));
    scan(raw, raw_len, &h);
    CHECK(h.n[K_KEY] >= 2);
    statefile_free_raw(raw, raw_len);
    {   /* positive control for text: a log line with a shard key in hex */
        char line[160];
        int n = snprintf(line, sizeof line, "key=");
        sodium_bin2hex(line + n, sizeof line - (size_t)n, k.aead[3].enc, 32);
        scan((const uint8_t *)line, strlen(line), &h);
        CHECK(h.n[K_KEY] >= 2);
    }
    /* a sealed client file shows neither key nor passphrase */
    CHECK_OK(mess_client_save(c, path, lib_pass));
    file = test_read_file(path, &flen);
    expect_clean("sealed client file", file, flen);
    free(file);
    CHECK_RC(mess_client_load(path, "wrong passphrase", &c2), MESS_EPASS);
    CHECK_RC(mess_client_load(path, NULL, &c2), MESS_EPASS);
    CHECK_OK(mess_client_load(path, lib_pass, &c2));
    mess_client_free(c2);

    fflush(stderr);
    dup2(saved_err, 2);
    close(saved_err);
    file = test_read_file(errpath, &flen);
    CHECK(flen == 0); /* the library never prints */
    if (file)
        expect_clean("library stderr", file, flen);
    free(file);
    unlink(errpath);
    mess_buf_free(up);
    mess_buf_free(del);
    mess_server_free(s);
    mess_client_free(c);
}

/* ---- the mess tool ----------------------------------------------------- */

static char tool_seed_hex[65]; /* the tool takes it from the environment */

static int run_tool(const char *args, const char *errpath)
{
    char cmd[4096];
    const char *tool = getenv("MESS");
    snprintf(cmd, sizeof cmd,
             "MESS_TEST_PASS='%s' MESS_TEST_SEED='%s' MESS_TEST_SEED_SHORT='%.63s' "
             "%s %s >/dev/null 2>>%s",
             lib_pass, tool_seed_hex, tool_seed_hex, tool && *tool ? tool : "build/mess",
             args, errpath);
    return system(cmd);
}

static void test_tool_stderr(void)
{
    static const uint8_t tool_seed[32] = "secret scan tool seed 0000000001";
    char *seedhex = tool_seed_hex, args[2048], errpath[512], cpath[512], spath[512];
    struct keys k;
    uint8_t *err;
    size_t len;
    const char *tool = getenv("MESS");

    CHECK(access(tool && *tool ? tool : "build/mess", X_OK) == 0);
    sodium_bin2hex(seedhex, sizeof tool_seed_hex, tool_seed, 32);
    derive(tool_seed, M_SHARDS, &k);
    add_keys(&k, M_SHARDS);
    add_secret(tool_seed, 32, K_SEED);
    snprintf(errpath, sizeof errpath, "%s/tool.stderr", dir);
    snprintf(cpath, sizeof cpath, "%s/tool.client", dir);
    snprintf(spath, sizeof spath, "%s/tool.server", dir);
    unlink(errpath);

    snprintf(args, sizeof args,
             "init --client %s --server %s --train datasets/sift/learn.bvecs "
             "--shards 8 --per-item 2 --bits 64 --hnsw-m 8 --ef-construction 32 "
             "--train-sample 1000 --seed-env MESS_TEST_SEED --passphrase-env MESS_TEST_PASS",
             cpath, spath);
    CHECK(run_tool(args, errpath) == 0);
    snprintf(args, sizeof args,
             "insert --client %s --server %s datasets/sift/query.bvecs "
             "--passphrase-env MESS_TEST_PASS", cpath, spath);
    CHECK(run_tool(args, errpath) == 0);
    snprintf(args, sizeof args,
             "query --client %s --server %s datasets/sift/query.bvecs -k 10 --pool 64 "
             "--passphrase-env MESS_TEST_PASS", cpath, spath);
    CHECK(run_tool(args, errpath) == 0);
    snprintf(args, sizeof args,
             "delete --client %s --server %s --ids 1,2,3 --passphrase-env MESS_TEST_PASS",
             cpath, spath);
    CHECK(run_tool(args, errpath) == 0);
    /* failures: no passphrase, a wrong one, a corrupted client file, a bad seed */
    snprintf(args, sizeof args, "query --client %s --server %s datasets/sift/query.bvecs "
             "--pool 64", cpath, spath);
    CHECK(run_tool(args, errpath) != 0);
    snprintf(args, sizeof args, "query --client %s --server %s datasets/sift/query.bvecs "
             "--pool 64 --passphrase-env HOME", cpath, spath);
    CHECK(run_tool(args, errpath) != 0);
    snprintf(args, sizeof args,
             "init --client %s.2 --server %s.2 --train datasets/sift/learn.bvecs "
             "--seed-env MESS_TEST_SEED_SHORT", cpath, spath);
    CHECK(run_tool(args, errpath) != 0);
    /* a seed on the command line is refused, and not repeated */
    snprintf(args, sizeof args,
             "init --client %s.2 --server %s.2 --train datasets/sift/learn.bvecs "
             "--seed %s", cpath, spath, seedhex);
    CHECK(run_tool(args, errpath) != 0);
    {
        /* flip a byte in the middle of the client file */
        size_t n;
        uint8_t *f = test_read_file(cpath, &n);
        FILE *o;
        CHECK(f && n > 200);
        if (f && n > 200) {
            f[n / 2] ^= 0x40;
            o = fopen(cpath, "wb");
            fwrite(f, 1, n, o);
            fclose(o);
        }
        free(f);
    }
    snprintf(args, sizeof args, "query --client %s --server %s datasets/sift/query.bvecs "
             "--pool 64 --passphrase-env MESS_TEST_PASS", cpath, spath);
    CHECK(run_tool(args, errpath) != 0);

    err = test_read_file(errpath, &len);
    CHECK(err != NULL && len > 0); /* the failures did say something */
    if (getenv("MESS_SHOW_STDERR") && err)
        fwrite(err, 1, len, stdout);
    if (err)
        expect_clean("mess tool stderr", err, len);
    free(err);
    {
        /* and every file of the server directory the tool wrote */
        DIR *d = opendir(spath);
        struct dirent *e;
        char fp[1200];
        int files = 0;
        CHECK(d != NULL);
        while (d && (e = readdir(d)) != NULL) {
            uint8_t *f;
            if (e->d_name[0] == '.')
                continue;
            snprintf(fp, sizeof fp, "%s/%s", spath, e->d_name);
            f = test_read_file(fp, &len);
            if (f)
                expect_clean("server directory written by the tool", f, len);
            free(f);
            unlink(fp);
            files++;
        }
        if (d)
            closedir(d);
        CHECK(files > 2); /* MANIFEST, graph files, arenas */
    }
    unlink(errpath);
    unlink(cpath);
    rmdir(spath);
    snprintf(args, sizeof args, "%s.2", cpath);
    unlink(args);
    snprintf(args, sizeof args, "%s.2", spath);
    unlink(args);
}

int main(void)
{
    if (sodium_init() < 0 ||
        test_read_sift(&base, &n_base, &queries, &n_query, &train, &n_train, &dim) ||
        n_base < N_ITEMS) {
        fprintf(stderr, "cannot read datasets/sift\n");
        return 1;
    }
    set8 = (struct needle *)calloc((size_t)1 << SET_BITS, sizeof *set8);
    set16 = (struct needle *)calloc((size_t)1 << SET_BITS, sizeof *set16);
    mkdir("build", 0755);
    if (!mkdtemp(dir)) {
        fprintf(stderr, "cannot create a directory under build/\n");
        return 1;
    }
    RUN(test_library);
    RUN(test_tool_stderr);
    {   /* the state files test_library left (one holds a key in clear) */
        static const char *const left[] = {"server.mess", "client.mess"};
        char path[sizeof dir + 32];
        size_t i;
        for (i = 0; i < sizeof left / sizeof left[0]; i++) {
            snprintf(path, sizeof path, "%s/%s", dir, left[i]);
            unlink(path);
        }
    }
    CHECK(rmdir(dir) == 0);
    free(set8);
    free(set16);
    mess_vecs_free(base);
    mess_vecs_free(queries);
    mess_vecs_free(train);
    HARNESS_END();
}
