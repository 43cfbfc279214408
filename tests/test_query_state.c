/*
 * test_query_state.c - pending queries kept outside the process (mess.h,
 * "Query state"): sealed into a buffer or saved to a file, read back by the
 * client that made them in a NEW PROCESS (this program executed again),
 * and finished there with the responses made before: the same results as
 * without the restart.  Another client's state, other parameters, another
 * version, every changed byte and every cut of the buffer and of the file
 * are refused with their codes, never a crash.
 */
#include <errno.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../mess_experimental.h"
#include "statefile.h"
#include "harness.h"
#include "sift.h"

#define NQ 5
#define POOL 40
#define K 10
#define N_BASE 600

static char dir[] = "build/qstateXXXXXX";
static mess_params P;
static mess_client *C, *OTHER, *SMALL; /* OTHER: another seed; SMALL: other params */
static mess_query *Q[NQ], *SMALL_Q;
static uint8_t *RESP[NQ];
static size_t RESP_LEN[NQ];
static uint64_t REF_IDS[NQ][K];
static float REF_DISTS[NQ][K];
static size_t REF_N[NQ];

static void path_of(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

static int write_file(const char *path, const uint8_t *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    int ok = f && (n == 0 || fwrite(b, 1, n, f) == n);
    if (f && fclose(f) != 0)
        ok = 0;
    return ok ? 0 : -1;
}

/* Finishes qs[i] with RESP[i] and requires REF's results, bit for bit. */
static int same_results(mess_query *const *qs, size_t n)
{
    size_t i, got;
    uint64_t ids[K];
    float dists[K];
    int same = n == NQ;
    for (i = 0; same && i < n; i++) {
        if (mess_client_finish(C, qs[i], RESP[i], RESP_LEN[i], K, ids, dists, &got,
                               NULL) != MESS_OK ||
            got != REF_N[i] || memcmp(ids, REF_IDS[i], got * sizeof *ids) != 0 ||
            memcmp(dists, REF_DISTS[i], got * sizeof *dists) != 0)
            same = 0;
    }
    return same;
}

static void free_all(mess_query **qs, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        mess_query_free(qs[i]);
        qs[i] = NULL;
    }
}

static void test_buffer_roundtrip(void)
{
    uint8_t *buf = NULL, *buf2 = NULL, *into;
    size_t len = 0, len2 = 0, n = 99, i;
    mess_query *back[NQ + 1];

    CHECK_OK(mess_query_seal(C, (const mess_query *const *)Q, NQ, &buf, &len));
    CHECK(len == mess_query_sealed_size(&P, NQ));
    CHECK(len == 52 + 16 + NQ * (16 + 2 * (size_t)P.shards + 4 * (size_t)P.dim));
    CHECK(mess_query_state_version() == MESS_QUERY_STATE_VERSION);
    /* a random nonce: sealing again gives other bytes of the same length */
    CHECK_OK(mess_query_seal(C, (const mess_query *const *)Q, NQ, &buf2, &len2));
    CHECK(len2 == len && memcmp(buf, buf2, len) != 0);
    mess_buf_free(buf2);

    /* cap below the count: MESS_ELIMIT with the count, nothing made */
    for (i = 0; i <= NQ; i++)
        back[i] = (mess_query *)&back;
    CHECK_RC(mess_query_unseal(C, buf, len, NULL, 0, &n), MESS_ELIMIT);
    CHECK(n == NQ);
    CHECK_RC(mess_query_unseal(C, buf, len, back, NQ - 1, &n), MESS_ELIMIT);
    CHECK(n == NQ);
    for (i = 0; i < NQ - 1; i++)
        CHECK(back[i] == NULL);
    CHECK(back[NQ - 1] == (mess_query *)&back); /* beyond cap: untouched */
    CHECK_OK(mess_query_unseal(C, buf, len, back, NQ + 1, &n));
    CHECK(n == NQ);
    CHECK(same_results(back, n));
    /* a loaded query seals and loads again */
    CHECK_OK(mess_query_seal(C, (const mess_query *const *)back, n, &buf2, &len2));
    free_all(back, n);
    CHECK_OK(mess_query_unseal(C, buf2, len2, back, NQ, &n));
    CHECK(same_results(back, n));
    free_all(back, n);
    mess_buf_free(buf2);

    /* one query alone */
    CHECK_OK(mess_query_seal(C, (const mess_query *const *)&Q[2], 1, &buf2, &len2));
    CHECK(len2 == mess_query_sealed_size(&P, 1));
    CHECK_OK(mess_query_unseal(C, buf2, len2, back, 1, &n));
    CHECK(n == 1);
    if (n == 1) {
        uint64_t ids[K];
        float dists[K];
        size_t got = 0;
        CHECK_OK(mess_client_finish(C, back[0], RESP[2], RESP_LEN[2], K, ids, dists,
                                    &got, NULL));
        CHECK(got == REF_N[2] && memcmp(ids, REF_IDS[2], got * sizeof *ids) == 0);
        /* and not with another query's response */
        CHECK_RC(mess_client_finish(C, back[0], RESP[1], RESP_LEN[1], K, ids, dists,
                                    &got, NULL),
                 MESS_EAUTH);
        mess_query_free(back[0]);
    }
    mess_buf_free(buf2);

    /* into the caller's buffer: one byte short is refused, nothing written */
    into = (uint8_t *)malloc(len);
    if (into) {
        memset(into, 0xa5, len);
        CHECK_RC(mess_query_seal_into(C, (const mess_query *const *)Q, NQ, into, len - 1,
                                      &len2),
                 MESS_ELIMIT);
        CHECK(len2 == len);
        for (i = 0; i < len && into[i] == 0xa5; i++)
            ;
        CHECK(i == len);
        CHECK_OK(mess_query_seal_into(C, (const mess_query *const *)Q, NQ, into, len,
                                      &len2));
        CHECK(len2 == len);
        CHECK_OK(mess_query_unseal(C, into, len, back, NQ, &n));
        CHECK(same_results(back, n));
        free_all(back, n);
        free(into);
    }

    /* arguments */
    CHECK_RC(mess_query_seal(C, (const mess_query *const *)Q, 0, &buf2, &len2),
             MESS_EINVAL);
    CHECK(buf2 == NULL && len2 == 0);
    CHECK_RC(mess_query_seal(NULL, (const mess_query *const *)Q, 1, &buf2, &len2),
             MESS_EINVAL);
    CHECK_RC(mess_query_seal(C, NULL, 1, &buf2, &len2), MESS_EINVAL);
    /* a query of another client's dimension */
    CHECK_RC(mess_query_seal(C, (const mess_query *const *)&SMALL_Q, 1, &buf2, &len2),
             MESS_EINVAL);
    CHECK(mess_query_sealed_size(&P, 0) == 0);
    CHECK(mess_query_sealed_size(NULL, 1) == 0);
    CHECK_RC(mess_query_unseal(C, buf, len, back, NQ, NULL), MESS_EINVAL);
    CHECK_RC(mess_query_unseal(C, NULL, len, back, NQ, &n), MESS_EINVAL);
    CHECK_RC(mess_query_unseal(C, buf, len, NULL, NQ, &n), MESS_EINVAL);
    mess_buf_free(buf);
}

/* Another client (same parameters, other keys) reads nothing: MESS_EAUTH;
 * a client of other parameters MESS_EPARAM.  Both for buffers and files. */
static void test_other_client(void)
{
    uint8_t *buf = NULL;
    size_t len = 0, n = 7;
    mess_query *back[NQ];
    char path[256];

    CHECK_OK(mess_query_seal(C, (const mess_query *const *)Q, NQ, &buf, &len));
    CHECK_RC(mess_query_unseal(OTHER, buf, len, back, NQ, &n), MESS_EAUTH);
    CHECK(n == 0 && back[0] == NULL && back[NQ - 1] == NULL);
    CHECK_RC(mess_query_unseal(SMALL, buf, len, back, NQ, &n), MESS_EPARAM);
    mess_buf_free(buf);
    path_of(path, sizeof path, "other.qstate");
    CHECK_OK(mess_query_save(C, (const mess_query *const *)Q, NQ, path));
    n = 7;
    CHECK_RC(mess_query_load(OTHER, path, back, NQ, &n), MESS_EAUTH);
    CHECK(n == 0 && back[0] == NULL);
    CHECK_RC(mess_query_load(SMALL, path, back, NQ, &n), MESS_EPARAM);
    /* the other client's own state is readable by it, not by C */
    CHECK_OK(mess_query_save(SMALL, (const mess_query *const *)&SMALL_Q, 1, path));
    CHECK_RC(mess_query_load(C, path, back, NQ, &n), MESS_EPARAM);
    CHECK_OK(mess_query_load(SMALL, path, back, NQ, &n));
    CHECK(n == 1);
    if (n == 1)
        mess_query_free(back[0]);
    unlink(path);
}

/* Every byte of the sealed buffer changed (three ways) and every cut:
 * refused with the code its field calls for, outputs cleared. */
static void test_every_byte_buffer(void)
{
    static const uint8_t masks[3] = {0x01, 0x80, 0xff};
    uint8_t *buf = NULL;
    size_t len = 0, i, m, n, wrong = 0, cuts = 0;
    mess_query *back[NQ];

    CHECK_OK(mess_query_seal(C, (const mess_query *const *)Q, NQ, &buf, &len));
    if (!buf)
        return;
    for (i = 0; i < len; i++)
        for (m = 0; m < 3; m++) {
            int rc, want;
            buf[i] ^= masks[m];
            n = 99;
            rc = mess_query_unseal(C, buf, len, back, NQ, &n);
            buf[i] ^= masks[m];
            want = i < 4    ? MESS_EFORMAT
                   : i < 8  ? MESS_EVERSION
                   : i < 24 ? MESS_EPARAM
                   : i < 28 ? MESS_EFORMAT /* the count no longer fits the length */
                            : MESS_EAUTH;
            if (rc != want || n != 0 || back[0] != NULL) {
                if (wrong++ < 5)
                    fprintf(stderr, "  byte %zu ^ 0x%02x: %s, want %s\n", i, masks[m],
                            mess_error_name(rc), mess_error_name(want));
                if (rc == MESS_OK)
                    free_all(back, n);
            }
        }
    CHECK(wrong == 0);
    for (i = 0; i < len; i++) {
        int rc = mess_query_unseal(C, buf, i, back, NQ, &n);
        cuts += rc == MESS_EFORMAT && n == 0;
    }
    CHECK(cuts == len);
    /* the version alone: MESS_EVERSION, before anything else is read */
    mess_store_u32(buf + 4, MESS_QUERY_STATE_VERSION + 1);
    memset(buf + 8, 0, 16);
    CHECK_RC(mess_query_unseal(C, buf, len, back, NQ, &n), MESS_EVERSION);
    mess_buf_free(buf);
}

/* The file: mode 0600, role 3 in its header, refused by the other roles'
 * loaders and refusing their files; every byte changed and every cut
 * refused, never a crash; another version refused by version. */
static void test_file(void)
{
    char path[256], cpath[256], bad[256];
    uint8_t *file, *body = NULL;
    size_t flen = 0, i, n = 0, refused = 0, blen;
    uint32_t version = 0, role = 0;
    int sealed = -1;
    struct stat st;
    mess_query *back[NQ];
    mess_client *c2 = NULL;
    mess_params p;

    path_of(path, sizeof path, "all.qstate");
    path_of(cpath, sizeof cpath, "client.mess");
    path_of(bad, sizeof bad, "bad.qstate");
    CHECK_OK(mess_query_save(C, (const mess_query *const *)Q, NQ, path));
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
    CHECK_OK(mess_state_file_peek(path, &version, &role, &sealed));
    CHECK(version == MESS_STATE_FILE_VERSION && role == 3 && sealed == 0);
    CHECK_OK(mess_query_load(C, path, back, NQ, &n));
    CHECK(same_results(back, n));
    free_all(back, n);
    CHECK_RC(mess_query_load(C, path, back, 2, &n), MESS_ELIMIT);
    CHECK(n == NQ && back[0] == NULL && back[1] == NULL);
    CHECK_RC(mess_client_load(path, NULL, &c2), MESS_EROLE);
    {
        mess_server *s2 = NULL;
        CHECK_RC(mess_server_load(path, NULL, &s2), MESS_EROLE);
        CHECK(s2 == NULL);
    }
    CHECK_OK(mess_client_save(C, cpath, NULL));
    CHECK_RC(mess_query_load(C, cpath, back, NQ, &n), MESS_EROLE);
    errno = 0;
    CHECK_RC(mess_query_load(C, bad, back, NQ, &n), MESS_EIO);
    CHECK(errno == ENOENT);
    CHECK_RC(mess_query_save(C, (const mess_query *const *)Q, NQ, NULL), MESS_EINVAL);

    file = test_read_file(path, &flen);
    CHECK(file != NULL && flen > 100);
    if (!file)
        return;
    for (i = 0; i < flen; i++) {
        int rc;
        file[i] ^= 0x10;
        CHECK(write_file(bad, file, flen) == 0);
        file[i] ^= 0x10;
        rc = mess_query_load(C, bad, back, NQ, &n);
        refused += rc != MESS_OK && n == 0 && back[0] == NULL;
        if (rc == MESS_OK)
            free_all(back, n);
    }
    CHECK(refused == flen);
    refused = 0;
    for (i = 0; i < flen; i++) {
        CHECK(write_file(bad, file, i) == 0);
        refused += mess_query_load(C, bad, back, NQ, &n) != MESS_OK;
    }
    CHECK(refused == flen);

    /* a body of another version inside a valid container: MESS_EVERSION */
    CHECK_OK(statefile_read(path, STATEFILE_QUERY, NULL, 0, &p, &body, &blen));
    if (body) {
        mess_store_u32(body + 4, 2);
        CHECK_OK(statefile_write(bad, STATEFILE_QUERY, &p, body, blen, NULL, 0, 0600));
        CHECK_RC(mess_query_load(C, bad, back, NQ, &n), MESS_EVERSION);
        statefile_free_raw(body, blen);
    }
    free(file);
    unlink(bad);
    unlink(path);
    unlink(cpath);
}

/* The restart: this process saves the client, the queries and the
 * responses; a new process (this program executed again with --finish)
 * loads them and finishes; its results are the ones made here. */
static int child_finish(const char *d)
{
    char path[512];
    mess_client *c = NULL;
    mess_query **qs = NULL;
    size_t n = 0, i, got;
    FILE *out;
    int rc;

    snprintf(path, sizeof path, "%s/client.mess", d);
    if (mess_client_load(path, NULL, &c) != MESS_OK)
        return 2;
    snprintf(path, sizeof path, "%s/queries.qstate", d);
    if (mess_query_load(c, path, NULL, 0, &n) != MESS_ELIMIT || n == 0)
        return 3;
    qs = (mess_query **)calloc(n, sizeof *qs);
    if (!qs || mess_query_load(c, path, qs, n, &n) != MESS_OK)
        return 4;
    snprintf(path, sizeof path, "%s/child.out", d);
    out = fopen(path, "wb");
    if (!out)
        return 5;
    rc = 0;
    for (i = 0; i < n && rc == 0; i++) {
        uint8_t *resp;
        size_t len;
        uint64_t ids[K];
        float dists[K];
        char rp[512];
        snprintf(rp, sizeof rp, "%s/resp-%zu", d, i);
        resp = test_read_file(rp, &len);
        if (!resp ||
            mess_client_finish(c, qs[i], resp, len, K, ids, dists, &got, NULL) != MESS_OK)
            rc = 6;
        else if (fwrite(&got, sizeof got, 1, out) != 1 ||
                 fwrite(ids, sizeof *ids, got, out) != got ||
                 fwrite(dists, sizeof *dists, got, out) != got)
            rc = 7;
        free(resp);
    }
    if (fclose(out) != 0 && rc == 0)
        rc = 8;
    for (i = 0; i < n; i++)
        mess_query_free(qs[i]);
    free(qs);
    mess_client_free(c);
    return rc;
}

static void test_new_process(void)
{
    char path[256], self[4096];
    uint8_t *out;
    size_t i, len = 0, off = 0;
    ssize_t sl;
    pid_t pid;
    int status = -1, same = 1;

    path_of(path, sizeof path, "client.mess");
    CHECK_OK(mess_client_save(C, path, NULL));
    path_of(path, sizeof path, "queries.qstate");
    CHECK_OK(mess_query_save(C, (const mess_query *const *)Q, NQ, path));
    for (i = 0; i < NQ; i++) {
        char name[32];
        snprintf(name, sizeof name, "resp-%zu", i);
        path_of(path, sizeof path, name);
        CHECK(write_file(path, RESP[i], RESP_LEN[i]) == 0);
    }
    sl = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(sl > 0);
    if (sl <= 0)
        return;
    self[sl] = '\0';
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        execl(self, self, "--finish", dir, (char *)NULL);
        _exit(127);
    }
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fprintf(stderr, "  the new process exited with %d\n", status);
    path_of(path, sizeof path, "child.out");
    out = test_read_file(path, &len);
    CHECK(out != NULL);
    for (i = 0; out && i < NQ && same; i++) {
        size_t got;
        if (len - off < sizeof got) {
            same = 0;
            break;
        }
        memcpy(&got, out + off, sizeof got);
        off += sizeof got;
        same = got == REF_N[i] && len - off >= got * 12 &&
               memcmp(out + off, REF_IDS[i], got * 8) == 0 &&
               memcmp(out + off + got * 8, REF_DISTS[i], got * 4) == 0;
        off += got * 12;
    }
    CHECK(same && off == len);
    free(out);
    unlink(path);
    path_of(path, sizeof path, "client.mess");
    unlink(path);
    path_of(path, sizeof path, "queries.qstate");
    unlink(path);
    for (i = 0; i < NQ; i++) {
        char name[32];
        snprintf(name, sizeof name, "resp-%zu", i);
        path_of(path, sizeof path, name);
        unlink(path);
    }
}

static int fixture(void)
{
    static const uint8_t seed[32] = "libmess query state test seed 01";
    static const uint8_t seed2[32] = "libmess query state test seed 02";
    float *base = NULL, *query = NULL, *learn = NULL, *small = NULL;
    size_t nb, nq, nl, dim, i, j;
    uint64_t ids[N_BASE];
    mess_server *s = NULL;
    uint8_t *up = NULL, *req = NULL;
    size_t up_len, req_len;
    mess_params sp;
    int rc = -1;

    if (test_read_sift(&base, &nb, &query, &nq, &learn, &nl, &dim) != 0)
        return -1;
    if (nb < N_BASE || nq < NQ || nl < 1000)
        goto out;
    mess_params_default(&P, (uint32_t)dim);
    P.shards = 4;
    P.per_item = 2;
    P.train_sample = 1000;
    if (mess_client_new(&P, learn, 1000, seed, 1, &C) != MESS_OK ||
        mess_client_new(&P, learn, 1000, seed2, 1, &OTHER) != MESS_OK ||
        mess_server_new(&P, &s) != MESS_OK)
        goto out;
    for (i = 0; i < N_BASE; i++)
        ids[i] = 1000 + 3 * i;
    if (mess_client_upload(C, ids, base, N_BASE, 1, &up, &up_len) != MESS_OK ||
        mess_server_apply_upload(s, up, up_len, 1) != MESS_OK)
        goto out;
    for (i = 0; i < NQ; i++) {
        if (mess_client_request(C, query + i * dim, POOL, &Q[i], &req, &req_len) !=
                MESS_OK ||
            mess_server_search(s, req, req_len, 1, &RESP[i], &RESP_LEN[i]) != MESS_OK ||
            mess_client_finish(C, Q[i], RESP[i], RESP_LEN[i], K, REF_IDS[i],
                               REF_DISTS[i], &REF_N[i], NULL) != MESS_OK ||
            REF_N[i] != K)
            goto out;
        mess_buf_free(req);
        req = NULL;
    }
    /* other parameters: 64 components, two shards of 64 bits */
    small = (float *)malloc(500 * 64 * sizeof *small);
    if (!small)
        goto out;
    for (i = 0; i < 500; i++)
        for (j = 0; j < 64; j++)
            small[i * 64 + j] = learn[i * dim + j];
    mess_params_default(&sp, 64);
    sp.shards = 2;
    sp.per_item = 1;
    sp.kappa = 64;
    if (mess_client_new(&sp, small, 500, seed, 1, &SMALL) != MESS_OK ||
        mess_client_request(SMALL, small, 8, &SMALL_Q, &req, &req_len) != MESS_OK)
        goto out;
    rc = 0;
out:
    mess_buf_free(up);
    mess_buf_free(req);
    mess_server_free(s);
    mess_vecs_free(base);
    mess_vecs_free(query);
    mess_vecs_free(learn);
    free(small);
    if (rc != 0)
        fprintf(stderr, "cannot build the test deployment\n");
    return rc;
}

int main(int argc, char **argv)
{
    size_t i;
    if (argc == 3 && strcmp(argv[1], "--finish") == 0)
        return child_finish(argv[2]);
    if (fixture() != 0)
        return 1;
    mkdir("build", 0755);
    if (!mkdtemp(dir)) {
        fprintf(stderr, "cannot create a directory under build/\n");
        return 1;
    }
    RUN(test_buffer_roundtrip);
    RUN(test_other_client);
    RUN(test_every_byte_buffer);
    RUN(test_file);
    RUN(test_new_process);
    for (i = 0; i < NQ; i++) {
        mess_query_free(Q[i]);
        mess_buf_free(RESP[i]);
    }
    mess_query_free(SMALL_Q);
    mess_client_free(C);
    mess_client_free(OTHER);
    mess_client_free(SMALL);
    CHECK(rmdir(dir) == 0);
    HARNESS_END();
}
