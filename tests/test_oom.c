/*
 * test_oom.c - allocation-failure injection over the public API, the way
 * SQLite tests itself (tests/oom_alloc.h has the allocator).
 *
 * For every public function that allocates, the call is repeated with the
 * n-th allocation failing, n = 1, 2, ... until a run completes without
 * reaching n.  After every injected failure the call must return
 * MESS_ENOMEM, clear its outputs, free everything it allocated (the net
 * count of live blocks is back where it was; under ASan LeakSanitizer
 * checks the same at exit) and leave the client and the server it was given
 * byte-identical (their saved files are compared).  A call that succeeds in
 * spite of the failure (a fallback, e.g. libc's unbuffered stdio) must
 * leave the same state as a run with no failure.  Every successful run that
 * changes state is compared with a reference run, and the fixture is then
 * reloaded from its saved files.
 *
 * make check runs this bounded (one-shot failures, single-threaded, a small
 * fixture; MESS_OOM_FULL unset).  make oom-test runs MESS_OOM_FULL=1:
 * one-shot and persistent failures (every allocation from the n-th on),
 * two threads as well, sealed client files, on the ASan build (library
 * allocations, --wrap) and on a release build that interposes malloc for
 * the whole process (libsodium, zstd, LAPACK and libc allocations too).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../mess_experimental.h"
#include "harness.h"
#include "oom_alloc.h"

#define DIM 16
#define N_TRAIN 160
#define N_BASE 40
#define N_UP 6
#define OUT_DIRTY 1000   /* a failed call left an output set */
#define STATE_DIRTY 1001 /* a failed call changed a handle it made itself */

static const uint8_t seed[32] = {7, 1, 7, 2, 7, 3, 7, 4, 7, 5, 7, 6, 7, 7, 7, 8,
                                 7, 9, 7, 10, 7, 11, 7, 12, 7, 13, 7, 14, 7, 15, 7, 16};

static int full, persistent;
static unsigned threads = 1;
static char dir[128];
static mess_params P;
static float train[N_TRAIN * DIM], base[N_BASE * DIM], upv[N_UP * DIM], query[DIM];
static uint64_t base_ids[N_BASE], up_ids[N_UP], del_ids[4];

/* The fixture: a deterministic client, a server holding N_BASE items with
 * some deleted, an upload and a delete buffer, a request and its response. */
static mess_client *C;
static mess_server *S;
static uint8_t *UP, *DEL, *REQ, *RESP, *BASE_UP, *EMPTY_SAVE;
static size_t UP_LEN, DEL_LEN, REQ_LEN, RESP_LEN, BASE_UP_LEN, EMPTY_SAVE_LEN;
static mess_query *Q;
static uint8_t *QSEAL; /* Q sealed (mess_query_seal) */
static size_t QSEAL_LEN;
static mess_account_pld *PLD;

static unsigned long total_allocs, total_injected, total_recovered;

/* ---- helpers ------------------------------------------------------------- */

static float frand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

static void path_of(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *b = NULL;
    long n;
    *len = 0;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        b = (uint8_t *)malloc((size_t)n + 1);
        if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
            free(b);
            b = NULL;
        }
        *len = (size_t)n;
    }
    fclose(f);
    return b;
}

/* 1 if the scratch directory holds a temporary of `name` (NAME.tmp...). */
static int leftover(const char *name)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char prefix[256];
    int found = 0;
    snprintf(prefix, sizeof prefix, "%s.tmp", name);
    if (!d)
        return 1;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
            found = 1;
    closedir(d);
    return found;
}

/* The saved bytes of the client and the server (either may be NULL). */
struct state {
    uint8_t *c, *s;
    size_t c_len, s_len;
};

static void state_take(struct state *st, const mess_client *c, const mess_server *s)
{
    char pc[256], ps[256];
    memset(st, 0, sizeof *st);
    path_of(pc, sizeof pc, "state.client");
    path_of(ps, sizeof ps, "state.server");
    if (c) {
        CHECK_OK(mess_client_save(c, pc, NULL));
        st->c = slurp(pc, &st->c_len);
        CHECK(st->c != NULL);
    }
    if (s) {
        CHECK_OK(mess_server_save(s, ps));
        st->s = slurp(ps, &st->s_len);
        CHECK(st->s != NULL);
    }
}

static int state_same(const struct state *a, const struct state *b)
{
    return a->c_len == b->c_len && a->s_len == b->s_len &&
           (!a->c_len || memcmp(a->c, b->c, a->c_len) == 0) &&
           (!a->s_len || memcmp(a->s, b->s, a->s_len) == 0);
}

static void state_free(struct state *st)
{
    free(st->c);
    free(st->s);
    memset(st, 0, sizeof *st);
}

/* Reloads the fixture's client and server from the baseline files. */
static void restore(void)
{
    char pc[256], ps[256];
    mess_client *c = NULL;
    mess_server *s = NULL;
    path_of(pc, sizeof pc, "base.client");
    path_of(ps, sizeof ps, "base.server");
    CHECK_OK(mess_client_load(pc, NULL, &c));
    CHECK_OK(mess_server_load(ps, NULL, &s));
    if (c) {
        mess_client_free(C);
        C = c;
    }
    if (s) {
        mess_server_free(S);
        S = s;
    }
}

static void save_baseline(void)
{
    char pc[256], ps[256];
    path_of(pc, sizeof pc, "base.client");
    path_of(ps, sizeof ps, "base.server");
    CHECK_OK(mess_client_save(C, pc, NULL));
    CHECK_OK(mess_server_save(S, ps));
}

/* ---- the sweep -------------------------------------------------------------- */

typedef int (*call_fn)(void);

/* Frees the fixture's client and server; returns the live block count
 * without them. */
static long release(void)
{
    mess_client_free(C);
    mess_server_free(S);
    C = NULL;
    S = NULL;
    return oom_live();
}

/* Runs call with the n-th allocation failing for n = 1, 2, ... (see the
 * file comment).  Every run starts from a client and a server loaded from
 * the baseline files, and ends by freeing them: the live block count must
 * then be what it was before they were loaded, whatever the call allocated
 * for them (capacity) or for itself. */
static void sweep(const char *name, call_fn call)
{
    struct state before, after, ref;
    unsigned long n, injected = 0, recovered = 0, calls = 0;
    int rc, fired;
    long live0, live1;

    restore();
    state_take(&before, C, S);
    /* the reference run, no failure */
    rc = call();
    if (rc != MESS_OK) {
        fprintf(stderr, "  FAIL %s: the call without failures returned %d (%s)\n", name,
                rc, mess_strerror(rc));
        harness_test_failed = 1;
        state_free(&before);
        return;
    }
    state_take(&ref, C, S);
    for (n = 1;; n++) {
        int err;
        live0 = release();
        restore();
        errno = 0;
        oom_arm(n, persistent);
        rc = call();
        err = errno;
        calls = oom_disarm(&fired);
        state_take(&after, C, S);
        if (rc == MESS_OK) {
            if (!state_same(&after, &ref)) {
                fprintf(stderr, "  FAIL %s: allocation %lu failed, the call succeeded "
                                "but left another state than a run without failure\n",
                        name, n);
                harness_test_failed = 1;
            }
        } else {
            injected++;
            if (!fired) {
                fprintf(stderr, "  FAIL %s: returned %d (%s) with no allocation failed\n",
                        name, rc, mess_strerror(rc));
                harness_test_failed = 1;
            } else if (rc != MESS_ENOMEM && !(rc == MESS_EIO && err == ENOMEM)) {
                /* MESS_EIO with errno ENOMEM: libc could not allocate for a
                 * file (fopen's FILE); the error stands as the OS gave it */
                fprintf(stderr, "  FAIL %s: allocation %lu failed: returned %d (%s), want "
                                "MESS_ENOMEM\n",
                        name, n, rc,
                        rc == OUT_DIRTY     ? "an output left set"
                        : rc == STATE_DIRTY ? "the server changed"
                                            : mess_strerror(rc));
                harness_test_failed = 1;
            }
            if (!state_same(&after, &before)) {
                fprintf(stderr, "  FAIL %s: allocation %lu failed: the %s changed\n", name,
                        n,
                        after.c_len != before.c_len ||
                                (after.c_len && memcmp(after.c, before.c, after.c_len))
                            ? "client"
                            : "server");
                harness_test_failed = 1;
            }
        }
        state_free(&after);
        live1 = release();
        if (live1 != live0) {
            fprintf(stderr, "  FAIL %s: allocation %lu failed: %ld block(s) leaked\n", name,
                    n, live1 - live0);
            harness_test_failed = 1;
        }
        if (rc == MESS_OK && !fired)
            break;
        if (rc == MESS_OK)
            recovered++;
        if (harness_test_failed && !full)
            break; /* one report per function is enough in make check */
    }
    restore();
    printf("# %-28s %5lu allocations, %5lu failures injected, %lu recovered\n", name,
           calls, injected, recovered);
    total_allocs += calls;
    total_injected += injected;
    total_recovered += recovered;
    state_free(&before);
    state_free(&ref);
}

/* ---- the calls --------------------------------------------------------------- */

static int c_server_new(void)
{
    mess_server *s = (mess_server *)&s; /* must be cleared on failure */
    int rc = mess_server_new(&P, &s);
    if (rc != MESS_OK)
        return s ? OUT_DIRTY : rc;
    mess_server_free(s);
    return rc;
}

static int c_apply_upload(void)
{
    return mess_server_apply_upload(S, UP, UP_LEN, threads);
}

/* The bulk build: every item into an empty server, which must still save
 * as an empty server after a failure. */
static int c_apply_upload_empty(void)
{
    char path[256];
    mess_server *s = NULL;
    uint8_t *b;
    size_t len;
    int rc;
    oom_hold(1);
    rc = mess_server_new(&P, &s);
    oom_hold(0);
    if (rc != MESS_OK)
        return MESS_EINVAL;
    rc = mess_server_apply_upload(s, BASE_UP, BASE_UP_LEN, threads);
    oom_hold(1);
    if (rc != MESS_OK) {
        path_of(path, sizeof path, "empty.server");
        if (mess_server_save(s, path) != MESS_OK)
            rc = MESS_EINVAL;
        b = slurp(path, &len);
        if (!b || len != EMPTY_SAVE_LEN || memcmp(b, EMPTY_SAVE, len) != 0)
            rc = STATE_DIRTY;
        free(b);
    }
    mess_server_free(s);
    oom_hold(0);
    return rc;
}

static int c_apply_delete(void)
{
    size_t missing = 0;
    return mess_server_apply_delete(S, DEL, DEL_LEN, &missing);
}

static int c_compact(void)
{
    return mess_server_compact(S, threads);
}

static int c_search(void)
{
    uint8_t *resp = (uint8_t *)&resp;
    size_t len = 1;
    int rc = mess_server_search(S, REQ, REQ_LEN, threads, &resp, &len);
    if (rc != MESS_OK)
        return resp || len ? OUT_DIRTY : rc;
    mess_buf_free(resp);
    return rc;
}

static int c_server_save(void)
{
    char path[256], tmp[300];
    uint8_t *b;
    size_t len;
    FILE *f;
    int rc;
    path_of(path, sizeof path, "old.server");
    oom_hold(1);
    f = fopen(path, "wb"); /* an older file the save replaces */
    if (!f || fputs("older file\n", f) < 0 || fclose(f) != 0)
        return MESS_EINVAL;
    oom_hold(0);
    rc = mess_server_save(S, path);
    if (rc == MESS_OK)
        return rc;
    oom_hold(1);
    b = slurp(path, &len);
    snprintf(tmp, sizeof tmp, "%s", strrchr(path, '/') + 1);
    if (!b || len != 11 || memcmp(b, "older file\n", 11) != 0 || leftover(tmp))
        rc = OUT_DIRTY;
    free(b);
    oom_hold(0);
    return rc;
}

static int c_server_load(void)
{
    char path[256];
    mess_server *s = (mess_server *)&s;
    int rc;
    path_of(path, sizeof path, "base.server");
    rc = mess_server_load(path, &P, &s);
    if (rc != MESS_OK)
        return s ? OUT_DIRTY : rc;
    mess_server_free(s);
    return rc;
}

static int c_server_view(void)
{
    mess_server_stats st;
    uint64_t codes[64 * 4];
    uint8_t labels[64 * MESS_LABEL_BYTES];
    uint32_t levels[64], ids[1024], node;
    uint8_t deleted[64], *entries;
    size_t nodes, offsets[65], n_ids, nn;
    int rc = mess_server_stats_get(S, &st);
    if (rc != MESS_OK)
        return rc;
    if ((rc = mess_server_shard_nodes(S, 0, &nodes)) != MESS_OK)
        return rc;
    if (nodes > 64)
        return MESS_ELIMIT;
    oom_hold(1);
    entries = (uint8_t *)malloc(64 * mess_payload_size(&P));
    oom_hold(0);
    if (!entries)
        return MESS_EINVAL;
    if ((rc = mess_server_shard_entry_point(S, 0, &node)) == MESS_OK &&
        (rc = mess_server_shard_codes(S, 0, codes, 64)) == MESS_OK &&
        (rc = mess_server_shard_labels(S, 0, labels, 64)) == MESS_OK &&
        (rc = mess_server_shard_levels(S, 0, levels, 64)) == MESS_OK &&
        (rc = mess_server_shard_deleted(S, 0, deleted, 64)) == MESS_OK &&
        (rc = mess_server_shard_entries(S, 0, entries, 64)) == MESS_OK &&
        (rc = mess_server_shard_neighbors(S, 0, node, 0, ids, 1024, &nn)) == MESS_OK)
        rc = mess_server_shard_links(S, 0, 0, offsets, 65, ids, 1024, &n_ids);
    oom_hold(1);
    free(entries);
    oom_hold(0);
    return rc;
}

/* mess_server_set_ef_search changes the saved server (its parameters). */
static int c_set_ef(void)
{
    return mess_server_set_ef_search(S, 40);
}

/* The small getters and size functions: they must not need memory. */
static int c_getters(void)
{
    mess_params pc, ps;
    uint8_t tc[MESS_OWNER_BYTES], ts[MESS_OWNER_BYTES];
    uint32_t version, role;
    int sealed, rc;
    double x;
    char path[256];
    path_of(path, sizeof path, "base.server");
    if ((rc = mess_client_params(C, &pc)) != MESS_OK ||
        (rc = mess_server_params(S, &ps)) != MESS_OK ||
        (rc = mess_params_check(&pc)) != MESS_OK ||
        (rc = mess_client_owner(C, tc)) != MESS_OK ||
        (rc = mess_server_owner(S, ts)) != MESS_OK ||
        (rc = mess_server_check_owner(S, tc)) != MESS_OK ||
        (rc = mess_state_file_peek(path, &version, &role, &sealed)) != MESS_OK ||
        (rc = mess_account_eta(0.1, &x)) != MESS_OK ||
        (rc = mess_plan_compound_flip(0.08, 0.08, &x)) != MESS_OK ||
        (rc = mess_plan_overtake(64, 0.15, 10, 20, &x)) != MESS_OK)
        return rc;
    if (!mess_version() || mess_client_is_deterministic(C) != 1 ||
        mess_upload_size(&pc, 3) == 0 || mess_delete_size(&pc, 3) == 0 ||
        mess_request_size(&pc) == 0 || mess_response_size(&pc, 10) == 0 ||
        !(mess_effective_flip(0.04, 0.04) > 0) || !(mess_split_flip(0.08) > 0))
        return MESS_EINVAL;
    return MESS_OK;
}

static int c_client_new(void)
{
    mess_client *c = (mess_client *)&c;
    int rc = mess_client_new(&P, train, N_TRAIN, full ? NULL : seed, threads, &c);
    if (rc != MESS_OK)
        return c ? OUT_DIRTY : rc;
    mess_client_free(c);
    return rc;
}

static int c_client_new_seeded(void)
{
    mess_client *c = (mess_client *)&c;
    int rc = mess_client_new(&P, train, N_TRAIN, seed, threads, &c);
    if (rc != MESS_OK)
        return c ? OUT_DIRTY : rc;
    mess_client_free(c);
    return rc;
}

static int c_client_upload(void)
{
    uint8_t *buf = (uint8_t *)&buf;
    size_t len = 1;
    int rc = mess_client_upload(C, up_ids, upv, N_UP, threads, &buf, &len);
    if (rc != MESS_OK)
        return buf || len ? OUT_DIRTY : rc;
    mess_buf_free(buf);
    return rc;
}

/* Re-inserts ids the fixture deleted (a new generation of each), with
 * one fresh id. */
static int c_client_reupload(void)
{
    uint8_t *buf = (uint8_t *)&buf;
    size_t len = 1;
    int rc = mess_client_upload(C, base_ids + 29, base + 29 * DIM, 4, threads, &buf, &len);
    if (rc != MESS_OK)
        return buf || len ? OUT_DIRTY : rc;
    mess_buf_free(buf);
    return rc;
}

static int c_client_delete(void)
{
    uint8_t *buf = (uint8_t *)&buf;
    size_t len = 1;
    int rc = mess_client_delete(C, base_ids, 5, &buf, &len);
    if (rc != MESS_OK)
        return buf || len ? OUT_DIRTY : rc;
    mess_buf_free(buf);
    return rc;
}

static int c_client_request(void)
{
    mess_query *q = (mess_query *)&q;
    uint8_t *req = (uint8_t *)&req;
    size_t len = 1;
    int rc = mess_client_request(C, query, 24, &q, &req, &len);
    if (rc != MESS_OK)
        return q || req || len ? OUT_DIRTY : rc;
    mess_query_free(q);
    mess_buf_free(req);
    return rc;
}

static int finish_with(int verify_all)
{
    uint64_t ids[5];
    float dists[5];
    size_t n = 0;
    mess_finish_stats st;
    int rc;
    if ((rc = mess_client_set_threads(C, threads)) != MESS_OK ||
        (rc = mess_client_set_verify_all(C, verify_all)) != MESS_OK)
        return rc;
    return mess_client_finish(C, Q, RESP, RESP_LEN, 5, ids, dists, &n, &st);
}

static int c_client_finish(void)
{
    return finish_with(0);
}

static int c_client_finish_all(void)
{
    return finish_with(1);
}

/* The batch calls over a mess_workers made inside the call (so its thread
 * starts are swept too): a failure leaves no output set. */
static uint8_t batch_reqs[3 * 4096];

static int c_request_batch(void)
{
    mess_workers *w = (mess_workers *)&w;
    mess_query *qs[3] = {(mess_query *)qs, (mess_query *)qs, (mess_query *)qs};
    size_t len = 0, i;
    int rc = mess_workers_new(2, &w);
    if (rc != MESS_OK)
        return w ? OUT_DIRTY : rc;
    if (mess_request_size(&P) > sizeof batch_reqs / 3) {
        mess_workers_free(w);
        return MESS_ELIMIT;
    }
    rc = mess_client_request_batch(C, base, 3, 24, w, qs, batch_reqs, sizeof batch_reqs,
                                   &len);
    mess_workers_free(w);
    if (rc != MESS_OK)
        return qs[0] || qs[1] || qs[2] ? OUT_DIRTY : rc;
    for (i = 0; i < 3; i++)
        mess_query_free(qs[i]);
    return rc;
}

static int c_search_batch(void)
{
    mess_workers *w = NULL;
    const uint8_t *reqs[2];
    size_t lens[2], out_lens[2] = {1, 1};
    uint8_t *outs[2] = {(uint8_t *)reqs, (uint8_t *)reqs};
    int rc = mess_workers_new(2, &w);
    if (rc != MESS_OK)
        return rc;
    reqs[0] = reqs[1] = REQ;
    lens[0] = lens[1] = REQ_LEN;
    rc = mess_server_search_batch(S, reqs, lens, 2, w, outs, out_lens, NULL);
    mess_workers_free(w);
    if (rc != MESS_OK)
        return outs[0] || outs[1] || out_lens[0] || out_lens[1] ? OUT_DIRTY : rc;
    mess_buf_free(outs[0]);
    mess_buf_free(outs[1]);
    return rc;
}

static int c_finish_batch(void)
{
    mess_workers *w = NULL;
    const mess_query *qs[2];
    const uint8_t *resps[2];
    size_t lens[2], n_out[2];
    uint64_t ids[10];
    float dists[10];
    mess_finish_stats st[2];
    int rc = mess_workers_new(2, &w);
    if (rc != MESS_OK)
        return rc;
    qs[0] = qs[1] = Q;
    resps[0] = resps[1] = RESP;
    lens[0] = lens[1] = RESP_LEN;
    rc = mess_client_finish_batch(C, qs, resps, lens, 2, 5, w, ids, dists, n_out, st, NULL);
    mess_workers_free(w);
    return rc;
}

static int c_client_codes(void)
{
    uint64_t codes[64];
    return mess_client_codes(C, query, codes);
}

static int save_client_to(const char *name, const char *pass)
{
    char path[256], tmp[300];
    uint8_t *b;
    size_t len;
    FILE *f;
    int rc;
    path_of(path, sizeof path, name);
    oom_hold(1);
    f = fopen(path, "wb");
    if (!f || fputs("older file\n", f) < 0 || fclose(f) != 0)
        return MESS_EINVAL;
    oom_hold(0);
    rc = mess_client_save(C, path, pass);
    if (rc == MESS_OK)
        return rc;
    oom_hold(1);
    b = slurp(path, &len);
    snprintf(tmp, sizeof tmp, "%s", strrchr(path, '/') + 1);
    if (!b || len != 11 || memcmp(b, "older file\n", 11) != 0 || leftover(tmp))
        rc = OUT_DIRTY;
    free(b);
    oom_hold(0);
    return rc;
}

static int c_client_save(void)
{
    return save_client_to("old.client", NULL);
}

static int c_client_save_sealed(void)
{
    return save_client_to("old.sealed", "correct horse");
}

/* The save that never replaces a file: a failed one leaves nothing at its
 * path (no file, no temporary). */
static int c_client_save_new(void)
{
    char path[256];
    struct stat st;
    int rc;
    path_of(path, sizeof path, "new.client");
    unlink(path);
    rc = mess_client_save_new(C, path, NULL, 0);
    if (rc != MESS_OK && (lstat(path, &st) == 0 || leftover("new.client")))
        return OUT_DIRTY;
    return rc;
}

static int c_client_save_pass(void)
{
    char path[256];
    path_of(path, sizeof path, "pass.client");
    return mess_client_save_pass(C, path, "correct\0horse", 13);
}

static int c_client_load_pass(void)
{
    char path[256];
    mess_client *c = (mess_client *)&c;
    int rc;
    path_of(path, sizeof path, "pass.client");
    rc = mess_client_load_pass(path, "correct\0horse", 13, &c);
    if (rc != MESS_OK)
        return c ? OUT_DIRTY : rc;
    mess_client_free(c);
    return rc;
}

static int load_client_from(const char *name, const char *pass)
{
    char path[256];
    mess_client *c = (mess_client *)&c;
    int rc;
    path_of(path, sizeof path, name);
    rc = mess_client_load(path, pass, &c);
    if (rc != MESS_OK)
        return c ? OUT_DIRTY : rc;
    mess_client_free(c);
    return rc;
}

static int c_client_load(void)
{
    return load_client_from("base.client", NULL);
}

static int c_client_load_sealed(void)
{
    return load_client_from("sealed.client", "correct horse");
}

/* The query state (mess.h, "Query state"): sealing and saving Q, and
 * loading it into the caller's array, which a failure leaves all NULL. */
static int c_query_seal(void)
{
    uint8_t *buf = (uint8_t *)&buf;
    size_t len = 1;
    const mess_query *q = Q;
    int rc = mess_query_seal(C, &q, 1, &buf, &len);
    if (rc != MESS_OK)
        return buf || len ? OUT_DIRTY : rc;
    mess_buf_free(buf);
    return rc;
}

static int c_query_save(void)
{
    char path[256];
    const mess_query *q = Q;
    int rc;
    path_of(path, sizeof path, "saved.qstate");
    rc = mess_query_save(C, &q, 1, path);
    if (rc != MESS_OK && leftover("saved.qstate"))
        return OUT_DIRTY;
    return rc;
}

static int query_loaded(int rc, mess_query **qs, size_t n)
{
    if (rc != MESS_OK)
        return qs[0] || qs[1] || n ? OUT_DIRTY : rc;
    mess_query_free(qs[0]);
    return n == 1 && !qs[1] ? rc : OUT_DIRTY;
}

static int c_query_unseal(void)
{
    mess_query *qs[2] = {(mess_query *)&qs, (mess_query *)&qs};
    size_t n = 9;
    int rc = mess_query_unseal(C, QSEAL, QSEAL_LEN, qs, 2, &n);
    return query_loaded(rc, qs, n);
}

static int c_query_load(void)
{
    char path[256];
    mess_query *qs[2] = {(mess_query *)&qs, (mess_query *)&qs};
    size_t n = 9;
    int rc;
    path_of(path, sizeof path, "pending.qstate");
    rc = mess_query_load(C, path, qs, 2, &n);
    return query_loaded(rc, qs, n);
}

static int c_plan_paper(void)
{
    size_t pools[2] = {8, 24};
    double recall[2];
    return mess_plan_recall(C, base, N_BASE, query, 1, NULL, 3, pools, 2, threads, recall);
}

static int c_plan_conditional(void)
{
    size_t pools[2] = {8, 24};
    double recall[2];
    return mess_plan_recall_model(C, MESS_PLAN_CONDITIONAL, base, N_BASE, query, 1, NULL, 3,
                                  pools, 2, threads, recall);
}

static int c_plan_search(void)
{
    size_t pools[2] = {8, 24};
    double recall[2], eff[2], exact[2];
    struct mess_plan_search ps;
    memset(&ps, 0, sizeof ps);
    ps.size = sizeof ps;
    ps.ef_search = 0;
    ps.check_shards = 2;
    ps.check_queries = 1;
    ps.eff = eff;
    ps.recall_exact = exact;
    return mess_plan_recall_search(C, MESS_PLAN_CONDITIONAL, base, N_BASE, query, 1, NULL, 3,
                                   pools, 2, &ps, threads, recall);
}

static int c_vecs(void)
{
    char pf[256], pb[256], pi[256], pu[256];
    uint64_t *u = NULL;
    float *f = NULL;
    uint8_t *b = NULL, bv[4 * DIM];
    int32_t *iv = NULL, ivv[4 * DIM];
    size_t n, d, i;
    int rc;
    path_of(pf, sizeof pf, "v.fvecs");
    path_of(pb, sizeof pb, "v.bvecs");
    path_of(pi, sizeof pi, "v.ivecs");
    path_of(pu, sizeof pu, "v.u64vecs");
    for (i = 0; i < 4 * DIM; i++) {
        bv[i] = (uint8_t)i;
        ivv[i] = (int32_t)i;
    }
    if ((rc = mess_fvecs_write(pf, base, 4, DIM)) != MESS_OK ||
        (rc = mess_bvecs_write(pb, bv, 4, DIM)) != MESS_OK ||
        (rc = mess_ivecs_write(pi, ivv, 4, DIM)) != MESS_OK ||
        (rc = mess_u64vecs_write(pu, base_ids, 4, 3)) != MESS_OK)
        return rc;
    if ((rc = mess_fvecs_read(pf, &f, &n, &d)) != MESS_OK)
        return f ? OUT_DIRTY : rc;
    mess_vecs_free(f);
    f = NULL;
    if ((rc = mess_vecs_read_f32(pb, &f, &n, &d)) != MESS_OK)
        return f ? OUT_DIRTY : rc;
    mess_vecs_free(f);
    if ((rc = mess_bvecs_read(pb, &b, &n, &d)) != MESS_OK)
        return b ? OUT_DIRTY : rc;
    mess_vecs_free(b);
    if ((rc = mess_ivecs_read(pi, &iv, &n, &d)) != MESS_OK)
        return iv ? OUT_DIRTY : rc;
    mess_vecs_free(iv);
    if ((rc = mess_u64vecs_read(pu, &u, &n, &d)) != MESS_OK)
        return u ? OUT_DIRTY : rc;
    mess_vecs_free(u);
    return rc;
}

static const uint32_t acct_d[8] = {3, 9, 1, 12, 7, 0, 5, 10};

static int c_account_route(void)
{
    double logw[128];
    size_t len;
    mess_account_stored_result r;
    int rc = mess_account_route_weights(acct_d, 8, 3, logw, 128, &len);
    if (rc == MESS_OK)
        rc = mess_account_stored(0.08, acct_d, 8, 3, 0, 1e-6, &r);
    if (rc == MESS_OK)
        rc = mess_account_stored(0.08, acct_d, 3, 3, 1, 1e-6, &r);
    return rc;
}

static int c_account_pld(void)
{
    double logw[128], x, y;
    size_t len;
    uint64_t umax;
    mess_account_pld *pld = (mess_account_pld *)&pld;
    int rc = mess_account_route_weights(acct_d, 8, 3, logw, 128, &len);
    if (rc != MESS_OK)
        return rc;
    rc = mess_account_pld_new(0.1, logw, len, &pld);
    if (rc != MESS_OK)
        return pld && pld != (mess_account_pld *)&pld ? OUT_DIRTY : rc;
    if ((rc = mess_account_pld_delta(pld, 1.0, &x)) == MESS_OK &&
        (rc = mess_account_pld_epsilon(pld, 1e-6, &x)) == MESS_OK &&
        (rc = mess_account_pld_tail(pld, 2.0, &x, &y)) == MESS_OK)
        rc = mess_account_pld_support(pld, &umax, &x);
    mess_account_pld_free(pld);
    return rc;
}

static int c_account_misc(void)
{
    double a, b;
    int rc;
    if ((rc = mess_account_random_lsh(0.21, 128, 0.05, 0.01, &a, &b)) != MESS_OK ||
        (rc = mess_account_search(0.04, 0.04, 5, &a, &b)) != MESS_OK ||
        (rc = mess_account_search_xi(0.04, 0.04, 5, 256, 20, &a, &b)) != MESS_OK ||
        (rc = mess_account_access(0.04, 0.04, 5, &a)) != MESS_OK ||
        (rc = mess_account_rr_delta(0.1, 40, 1.0, &a)) != MESS_OK ||
        (rc = mess_account_stored_pure(0.08, acct_d, 8, 3, &a)) != MESS_OK)
        return rc;
    return MESS_OK;
}

static int c_plan_models(void)
{
    double count[65], pmf[65], mean, var, prob, hits[4] = {0.5, 0.2, 0.7, 0.1};
    size_t i;
    int rc;
    for (i = 0; i < 65; i++)
        count[i] = (double)(i % 7);
    if ((rc = mess_plan_distance_pmf(64, 0.15, 10, pmf)) != MESS_OK ||
        (rc = mess_plan_rank(64, 0.15, 10, count, 0.25, &mean, &var)) != MESS_OK ||
        (rc = mess_plan_hit(mean, var, 8, &prob)) != MESS_OK ||
        (rc = mess_plan_hit_conditional(64, 0.15, 10, count, 0.25, 8, &prob)) != MESS_OK ||
        (rc = mess_plan_recovery(hits, 4, &prob)) != MESS_OK ||
        (rc = mess_plan_recovery_uniform(hits, 4, 2, &prob)) != MESS_OK)
        return rc;
    return MESS_OK;
}

/* ---- fixture ------------------------------------------------------------------ */

static int fixture(void)
{
    uint64_t s = 12345;
    size_t i, missing;
    uint8_t *buf;
    size_t len;
    char path[256];

    for (i = 0; i < N_TRAIN * DIM; i++)
        train[i] = frand(&s);
    for (i = 0; i < N_BASE * DIM; i++)
        base[i] = frand(&s);
    for (i = 0; i < N_UP * DIM; i++)
        upv[i] = frand(&s);
    for (i = 0; i < DIM; i++)
        query[i] = base[3 * DIM + i] + 0.01f * frand(&s);
    for (i = 0; i < N_BASE; i++)
        base_ids[i] = 1000 + 7 * i;
    for (i = 0; i < N_UP; i++)
        up_ids[i] = 5000 + 3 * i;
    for (i = 0; i < 4; i++)
        del_ids[i] = base_ids[10 + 2 * i];

    mess_params_default(&P, DIM);
    P.shards = 4;
    P.per_item = 2;
    P.hnsw_m = 4;
    P.ef_construction = 16;
    if (mess_client_new(&P, train, N_TRAIN, seed, 1, &C) != MESS_OK ||
        mess_server_new(&P, &S) != MESS_OK)
        return -1;
    path_of(path, sizeof path, "empty.server");
    if (mess_server_save(S, path) != MESS_OK ||
        !(EMPTY_SAVE = slurp(path, &EMPTY_SAVE_LEN)))
        return -1;
    if (mess_client_upload(C, base_ids, base, N_BASE, 1, &BASE_UP, &BASE_UP_LEN) != MESS_OK)
        return -1;
    if (mess_server_apply_upload(S, BASE_UP, BASE_UP_LEN, 1) != MESS_OK)
        return -1;
    /* three deleted, so compaction has work; DEL removes four more */
    if (mess_client_delete(C, base_ids + 30, 3, &buf, &len) != MESS_OK ||
        mess_server_apply_delete(S, buf, len, &missing) != MESS_OK)
        return -1;
    mess_buf_free(buf);
    if (mess_client_upload(C, up_ids, upv, N_UP, 1, &UP, &UP_LEN) != MESS_OK ||
        mess_client_delete(C, del_ids, 4, &DEL, &DEL_LEN) != MESS_OK ||
        mess_client_request(C, query, 24, &Q, &REQ, &REQ_LEN) != MESS_OK ||
        mess_server_search(S, REQ, REQ_LEN, 1, &RESP, &RESP_LEN) != MESS_OK)
        return -1;
    save_baseline();
    {
        const mess_query *q = Q;
        path_of(path, sizeof path, "pending.qstate");
        if (mess_query_seal(C, &q, 1, &QSEAL, &QSEAL_LEN) != MESS_OK ||
            mess_query_save(C, &q, 1, path) != MESS_OK)
            return -1;
    }
    path_of(path, sizeof path, "sealed.client");
    if (full && mess_client_save(C, path, "correct horse") != MESS_OK)
        return -1;
    path_of(path, sizeof path, "pass.client");
    if (full && mess_client_save_pass(C, path, "correct\0horse", 13) != MESS_OK)
        return -1;
    (void)PLD;
    return 0;
}

static void fixture_free(void)
{
    mess_client_free(C);
    mess_server_free(S);
    mess_buf_free(UP);
    mess_buf_free(BASE_UP);
    free(EMPTY_SAVE);
    mess_buf_free(DEL);
    mess_buf_free(REQ);
    mess_buf_free(RESP);
    mess_query_free(Q);
    mess_buf_free(QSEAL);
}

/* ---- tests -------------------------------------------------------------------- */

/* The injector itself: the n-th allocation fails, others do not. */
static void test_injector(void)
{
    void *a, *b, *c;
    int fired;
    long live = oom_live();
    oom_arm(2, 0);
    a = malloc(8);
    b = malloc(8);
    c = calloc(2, 8);
    CHECK(oom_disarm(&fired) == 3);
    CHECK(fired);
    CHECK(a != NULL && b == NULL && c != NULL);
    CHECK(oom_live() == live + 2);
    free(a);
    free(c);
    CHECK(oom_live() == live);
}

static void test_server(void)
{
    sweep("mess_server_new", c_server_new);
    sweep("mess_server_apply_upload", c_apply_upload);
    sweep("apply_upload (empty server)", c_apply_upload_empty);
    sweep("mess_server_apply_delete", c_apply_delete);
    sweep("mess_server_compact", c_compact);
    sweep("mess_server_search", c_search);
    sweep("mess_server_save", c_server_save);
    sweep("mess_server_load", c_server_load);
    sweep("mess_server_stats/views", c_server_view);
    sweep("mess_server_set_ef_search", c_set_ef);
    sweep("getters, sizes, peek", c_getters);
}

static void test_client(void)
{
    sweep("mess_client_new", c_client_new);
    if (full)
        sweep("mess_client_new (seeded)", c_client_new_seeded);
    sweep("mess_client_upload", c_client_upload);
    sweep("upload (deleted ids again)", c_client_reupload);
    sweep("mess_client_delete", c_client_delete);
    sweep("mess_client_request", c_client_request);
    sweep("mess_client_finish", c_client_finish);
    sweep("finish (verify all)", c_client_finish_all);
    sweep("mess_client_codes", c_client_codes);
    sweep("mess_client_request_batch", c_request_batch);
    sweep("mess_server_search_batch", c_search_batch);
    sweep("mess_client_finish_batch", c_finish_batch);
    sweep("mess_client_save", c_client_save);
    sweep("mess_client_save_new", c_client_save_new);
    sweep("mess_client_load", c_client_load);
    sweep("mess_query_seal", c_query_seal);
    sweep("mess_query_unseal", c_query_unseal);
    sweep("mess_query_save", c_query_save);
    sweep("mess_query_load", c_query_load);
    if (full) {
        sweep("mess_client_save (sealed)", c_client_save_sealed);
        sweep("mess_client_load (sealed)", c_client_load_sealed);
        sweep("mess_client_save_pass", c_client_save_pass);
        sweep("mess_client_load_pass", c_client_load_pass);
    }
}

static void test_vecs(void)
{
    sweep("mess_*vecs_read/write", c_vecs);
}

static void test_accountants(void)
{
    sweep("mess_account_route/stored", c_account_route);
    sweep("mess_account_pld_*", c_account_pld);
    sweep("mess_account_lsh/search/..", c_account_misc);
    sweep("mess_plan_* (one shard)", c_plan_models);
    sweep("mess_plan_recall", c_plan_paper);
    sweep("mess_plan_recall (cond.)", c_plan_conditional);
    sweep("mess_plan_recall_search", c_plan_search);
}

/* Files of dir whose names end in suffix. */
static int count_suffix(const char *d, const char *suffix)
{
    DIR *dd = opendir(d);
    struct dirent *e;
    int n = 0;
    size_t ls = strlen(suffix);
    if (!dd)
        return -1;
    while ((e = readdir(dd)) != NULL) {
        size_t l = strlen(e->d_name);
        n += l > ls && strcmp(e->d_name + l - ls, suffix) == 0;
    }
    closedir(dd);
    return n;
}

#define NDIRUP 16 /* small uploads of test_dir_checkpoint */

/* Copies directory d0 to d (replacing it), opens it (the log's pending
 * upload is replayed), checkpoints it with the n-th allocation failing
 * (n = 0: none), then uploads and checkpoints twice more, closes it,
 * reopens it and searches.  *folded: the checkpoint under test
 * folded a chain; *resp: the answer (NULL when the reopen fails: *why
 * says why). */
static int dir_run(const char *d0, const char *d, unsigned long n, uint8_t *const *ups,
                   const size_t *lens, int *ckpt_rc, int *fired, unsigned long *calls,
                   int *folded, uint8_t **resp, size_t *resp_len, char *why, size_t why_cap)
{
    char cmd[700];
    mess_server *s = NULL;
    int rc, k, chain;
    *resp = NULL;
    *fired = 0;
    *calls = 0;
    why[0] = '\0';
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", d, d0, d);
    if (system(cmd) != 0)
        return MESS_EIO;
    rc = mess_server_open(d, &P, NULL, 0, &s);
    if (rc != MESS_OK)
        return rc;
    chain = count_suffix(d, ".delta");
    if (n)
        oom_arm(n, 0);
    *ckpt_rc = mess_server_checkpoint(s);
    if (n)
        *calls = oom_disarm(fired);
    *folded = count_suffix(d, ".delta") < chain;
    for (k = 0; k < 2 && rc == MESS_OK; k++) {
        rc = mess_server_apply_upload(s, ups[k], lens[k], 1);
        if (rc == MESS_EIO && *ckpt_rc != MESS_OK && k == 0) {
            /* the log could not be emptied after the commit: the handle
             * refuses appends (mess.h); a new open goes on */
            mess_server_free(s);
            s = NULL;
            rc = mess_server_open(d, &P, NULL, 0, &s);
            if (rc == MESS_OK)
                rc = mess_server_apply_upload(s, ups[k], lens[k], 1);
        }
        if (rc == MESS_OK)
            rc = mess_server_checkpoint(s);
    }
    mess_server_free(s);
    s = NULL;
    if (rc != MESS_OK) {
        snprintf(why, why_cap, "a later upload or checkpoint: %s", mess_strerror(rc));
        return rc;
    }
    rc = mess_server_verify(d, why, why_cap);
    if (rc != MESS_OK)
        return rc;
    rc = mess_server_open(d, &P, NULL, 0, &s);
    if (rc == MESS_OK)
        rc = mess_server_search(s, REQ, REQ_LEN, 1, resp, resp_len);
    mess_server_free(s);
    return rc;
}

/* A server directory's checkpoint with the n-th allocation failing, for
 * every n (the proportional checkpoint, docs/PROTOCOL.md): whatever
 * failed, the handle goes on, its next checkpoints commit, and the
 * directory then verifies, opens and answers as after a run with no
 * failure.  The checkpoint under test folds shard chains of K deltas, so
 * failures after its commit (mapping the new base) are reached too; the
 * handle must then still write deltas the reopen can apply. */
static void test_dir_checkpoint(void)
{
    char d0[256], d[256], why[300];
    uint8_t *ups[NDIRUP], *ref = NULL, *got;
    size_t lens[NDIRUP], ref_len = 0, got_len, i;
    float v[6 * DIM];
    uint64_t ids[6], rs = 4242;
    mess_server *w = NULL;
    unsigned long n, calls = 0, injected = 0;
    int k, rc, crc, fired, folded = 0;

    path_of(d0, sizeof d0, "dir0");
    path_of(d, sizeof d, "dir1");
    memset(ups, 0, sizeof ups);
    for (k = 0; k < NDIRUP; k++) {
        for (i = 0; i < 6; i++)
            ids[i] = 9000 + 10 * (uint64_t)k + i;
        for (i = 0; i < 6 * DIM; i++)
            v[i] = frand(&rs);
        CHECK_OK(mess_client_upload(C, ids, v, 6, 1, &ups[k], &lens[k]));
    }
    CHECK_OK(mess_server_create(d0, &P, &w));
    CHECK_OK(mess_server_apply_upload(w, BASE_UP, BASE_UP_LEN, 1));
    CHECK_OK(mess_server_checkpoint(w));
    /* small checkpoints (deltas) until the next one folds a chain: the
     * directory d0 then has that upload in its log */
    for (k = 0; k < NDIRUP - 2 && !folded; k++) {
        CHECK_OK(mess_server_apply_upload(w, ups[k], lens[k], 1));
        mess_buf_free(ref);
        ref = NULL;
        rc = dir_run(d0, d, 0, ups + NDIRUP - 2, lens + NDIRUP - 2, &crc, &fired, &calls,
                     &folded, &ref, &ref_len, why, sizeof why);
        CHECK_OK(rc);
        CHECK_OK(crc);
        if (rc != MESS_OK) {
            fprintf(stderr, "  FAIL run without failures: %s\n", why);
            break;
        }
        if (!folded)
            CHECK_OK(mess_server_checkpoint(w));
    }
    mess_server_free(w);
    CHECK(folded);
    if (!folded)
        goto done;
    for (n = 1;; n++) {
        int f2;
        rc = dir_run(d0, d, n, ups + NDIRUP - 2, lens + NDIRUP - 2, &crc, &fired, &calls,
                     &f2, &got, &got_len, why, sizeof why);
        if (crc != MESS_OK)
            injected++;
        if (rc != MESS_OK || got_len != ref_len || memcmp(got, ref, ref_len) != 0) {
            fprintf(stderr, "  FAIL directory checkpoint: allocation %lu failed (checkpoint "
                            "returned %d): afterwards %s (%s)\n",
                    n, crc, rc != MESS_OK ? mess_strerror(rc) : "other answers", why);
            harness_test_failed = 1;
        }
        mess_buf_free(got);
        if (!fired || (harness_test_failed && !full))
            break;
    }
    printf("# %-28s %5lu allocations, %5lu failures injected\n", "checkpoint (directory)",
           calls, injected);
done:
    mess_buf_free(ref);
    for (k = 0; k < NDIRUP; k++)
        mess_buf_free(ups[k]);
    restore();
}

/* The first search of a lazily opened directory (docs/PROTOCOL.md "Lazy
 * apply") with the n-th allocation failing, for every n: the search fails
 * with MESS_ENOMEM or answers; either way the next search (nothing
 * failing) resumes the chains where they stopped and answers exactly as a
 * run without failures. */
static void test_dir_lazy(void)
{
    char d[256];
    uint8_t *ups[2], *ref = NULL, *got = NULL;
    size_t lens[2], ref_len = 0, got_len = 0, i;
    float v[6 * DIM];
    uint64_t ids[6], rs = 77;
    mess_server *w = NULL, *s = NULL;
    unsigned long n, calls = 0, injected = 0;
    int k, rc, fired;

    path_of(d, sizeof d, "lazy");
    for (k = 0; k < 2; k++) {
        for (i = 0; i < 6; i++)
            ids[i] = 9500 + 10 * (uint64_t)k + i;
        for (i = 0; i < 6 * DIM; i++)
            v[i] = frand(&rs);
        CHECK_OK(mess_client_upload(C, ids, v, 6, 1, &ups[k], &lens[k]));
    }
    CHECK_OK(mess_server_create(d, &P, &w));
    CHECK_OK(mess_server_apply_upload(w, BASE_UP, BASE_UP_LEN, 1));
    CHECK_OK(mess_server_checkpoint(w));
    for (k = 0; k < 2; k++) {
        CHECK_OK(mess_server_apply_upload(w, ups[k], lens[k], 1));
        CHECK_OK(mess_server_checkpoint(w));
    }
    mess_server_free(w);
    CHECK(count_suffix(d, ".delta") > 0);
    CHECK_OK(mess_server_open(d, &P, NULL, 0, &s));
    CHECK_OK(mess_server_search(s, REQ, REQ_LEN, 1, &ref, &ref_len));
    mess_server_free(s);
    for (n = 1; ref; n++) {
        s = NULL;
        CHECK_OK(mess_server_open(d, &P, NULL, 0, &s));
        if (!s)
            break;
        oom_arm(n, 0);
        rc = mess_server_search(s, REQ, REQ_LEN, 1, &got, &got_len);
        calls = oom_disarm(&fired);
        if (rc != MESS_OK) {
            injected++;
            CHECK_RC(rc, MESS_ENOMEM);
            rc = mess_server_search(s, REQ, REQ_LEN, 1, &got, &got_len);
        }
        if (rc != MESS_OK || got_len != ref_len || memcmp(got, ref, ref_len) != 0) {
            fprintf(stderr, "  FAIL lazy apply: allocation %lu failed: afterwards %s\n", n,
                    rc != MESS_OK ? mess_strerror(rc) : "other answers");
            harness_test_failed = 1;
        }
        mess_buf_free(got);
        got = NULL;
        mess_server_free(s);
        if (!fired || (harness_test_failed && !full))
            break;
    }
    printf("# %-28s %5lu allocations, %5lu failures injected\n", "first search (lazy apply)",
           calls, injected);
    mess_buf_free(ref);
    for (k = 0; k < 2; k++)
        mess_buf_free(ups[k]);
    restore();
}

/* The first upload into a lazily opened directory with the n-th
 * allocation failing, for every n, then a checkpoint (nothing failing):
 * the upload fails with MESS_ENOMEM and changes nothing (a shard whose
 * chain stopped half-way stays pending: the checkpoint keeps its record
 * and files) or goes in, and the checkpoint writes the shards it changed
 * as deltas over their applied chains; after a failure the same handle
 * retries it and checkpoints again.  The directory then verifies, opens
 * and answers as the server in memory given the same buffers. */
static void test_dir_lazy_upload(void)
{
    char d0[256], d[256], cmd[1024], why[300];
    uint8_t *ups[3], *ref = NULL, *got = NULL;
    size_t lens[3], ref_len = 0, got_len = 0, i;
    float v[6 * DIM];
    uint64_t ids[6], rs = 99;
    mess_server *w = NULL, *m = NULL, *s = NULL;
    unsigned long n, calls = 0, injected = 0;
    int k, rc, fired;

    path_of(d0, sizeof d0, "lazyup0");
    path_of(d, sizeof d, "lazyup1");
    for (k = 0; k < 3; k++) {
        for (i = 0; i < 6; i++)
            ids[i] = 9700 + 10 * (uint64_t)k + i;
        for (i = 0; i < 6 * DIM; i++)
            v[i] = frand(&rs);
        CHECK_OK(mess_client_upload(C, ids, v, 6, 1, &ups[k], &lens[k]));
    }
    CHECK_OK(mess_server_new(&P, &m));
    CHECK_OK(mess_server_create(d0, &P, &w));
    CHECK_OK(mess_server_apply_upload(w, BASE_UP, BASE_UP_LEN, 1));
    CHECK_OK(mess_server_apply_upload(m, BASE_UP, BASE_UP_LEN, 1));
    CHECK_OK(mess_server_checkpoint(w));
    for (k = 0; k < 3; k++) {
        if (k < 2) {
            CHECK_OK(mess_server_apply_upload(w, ups[k], lens[k], 1));
            CHECK_OK(mess_server_checkpoint(w));
        }
        CHECK_OK(mess_server_apply_upload(m, ups[k], lens[k], 1));
    }
    mess_server_free(w);
    CHECK(count_suffix(d0, ".delta") > 0);
    CHECK_OK(mess_server_search(m, REQ, REQ_LEN, 1, &ref, &ref_len));
    for (n = 1; ref; n++) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", d, d0, d);
        if (system(cmd) != 0) {
            CHECK(0);
            break;
        }
        s = NULL;
        CHECK_OK(mess_server_open(d, &P, NULL, 0, &s));
        if (!s)
            break;
        oom_arm(n, 0);
        rc = mess_server_apply_upload(s, ups[2], lens[2], 1);
        calls = oom_disarm(&fired);
        if (rc != MESS_OK) {
            injected++;
            CHECK_RC(rc, MESS_ENOMEM);
            CHECK_OK(mess_server_checkpoint(s));
            rc = mess_server_apply_upload(s, ups[2], lens[2], 1);
        }
        if (rc == MESS_OK)
            rc = mess_server_checkpoint(s);
        mess_server_free(s);
        s = NULL;
        why[0] = '\0';
        if (rc == MESS_OK)
            rc = mess_server_verify(d, why, sizeof why);
        if (rc == MESS_OK)
            rc = mess_server_open(d, &P, NULL, 0, &s);
        if (rc == MESS_OK)
            rc = mess_server_search(s, REQ, REQ_LEN, 1, &got, &got_len);
        if (rc != MESS_OK || got_len != ref_len || memcmp(got, ref, ref_len) != 0) {
            fprintf(stderr, "  FAIL lazy upload: allocation %lu failed: afterwards %s (%s)\n",
                    n, rc != MESS_OK ? mess_strerror(rc) : "other answers", why);
            harness_test_failed = 1;
        }
        mess_buf_free(got);
        got = NULL;
        mess_server_free(s);
        if (!fired || (harness_test_failed && !full))
            break;
    }
    printf("# %-28s %5lu allocations, %5lu failures injected\n", "first upload (lazy apply)",
           calls, injected);
    mess_buf_free(ref);
    mess_server_free(m);
    for (k = 0; k < 3; k++)
        mess_buf_free(ups[k]);
    restore();
}

static void run_all(void)
{
    RUN(test_server);
    RUN(test_client);
    RUN(test_vecs);
    RUN(test_accountants);
    if (!persistent && threads == 1) {
        RUN(test_dir_checkpoint);
        RUN(test_dir_lazy);
        RUN(test_dir_lazy_upload);
    }
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    struct stat sb;
    char cmd[300];
    int rc;

    full = getenv("MESS_OOM_FULL") && atoi(getenv("MESS_OOM_FULL")) > 0;
    /* state files are saved after every failure: keep them in memory */
    if (!tmp || !*tmp)
        tmp = stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) ? "/dev/shm" : "/tmp";
    snprintf(dir, sizeof dir, "%s/mess-oom-XXXXXX", tmp);
    if (!mkdtemp(dir)) {
        fprintf(stderr, "mkdtemp %s: %s\n", dir, strerror(errno));
        printf("0 passed, 1 failed\n");
        return 1;
    }
    printf("# allocator: %s%s\n", oom_mode(), full ? ", full run" : ", bounded run");
    RUN(test_injector);
    if (fixture() != 0) {
        fprintf(stderr, "  FAIL fixture could not be built\n");
        harness_failed++;
    } else {
        run_all();
        if (full) {
            persistent = 1;
            printf("# persistent failures (every allocation from the n-th on)\n");
            run_all();
            persistent = 0;
            threads = 2;
            printf("# two threads\n");
            run_all();
        }
    }
    printf("# %lu allocation points, %lu failures injected, %lu recovered\n", total_allocs,
           total_injected, total_recovered);
    fixture_free();
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    rc = system(cmd);
    (void)rc;
    HARNESS_END();
}
