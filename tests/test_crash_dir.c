/*
 * test_crash_dir.c - crash safety of a directory-backed server (issue 15,
 * decisions D14 and D16).  A child process opens the server directory and
 * runs a window of operations; it is killed with SIGKILL at a random
 * moment.  Three kinds, ROUNDS kills each (MESS_CRASH_ROUNDS, default 8 in
 * make check; make crash-test: 100):
 *
 *   insert      uploads and deletes (the write-ahead log's appends); the
 *               kill delay runs from the fork, so kills also land in the
 *               open and the log's replay; after 30% of the kills a torn
 *               record (a prefix of the interrupted op's record) is added
 *               to the log, as a crash in the middle of its write leaves
 *   checkpoint  an upload, then mess_server_checkpoint: the kill aims at
 *               the checkpoint (the delay starts at the upload's
 *               acknowledgement); the uploads are small, so most
 *               checkpoints write a delta per shard and every few a shard's
 *               chain folds into a new graph file (docs/PROTOCOL.md
 *               "Proportional checkpoint"): kills land in both, counted;
 *               every other upload is one item, so those checkpoints also
 *               meet shards whose chains the open left unapplied ("Lazy
 *               apply": their records must stay as they were)
 *   compaction  a delete, then mess_server_compact + checkpoint (aimed
 *               the same way)
 *
 * The child writes one byte to a pipe when it has opened the directory and
 * one after every operation that returned MESS_OK (its acknowledgement).
 * After the kill the parent requires: mess_server_verify passes on the
 * directory as the crash left it; it opens; its state (per shard the set
 * of (label, deleted flag, code, ciphertext)) equals that of an in-memory
 * reference server that applied every acknowledged operation, or those
 * plus the one the kill interrupted (old or new, never a mixture); every
 * acknowledged upload's labels are present and live; a search succeeds.
 * The state the crash left is the next round's start, so recoveries are
 * killed and recovered again.  With 20 or more rounds the kills must land
 * on both sides: inserts before and after an acknowledgement, checkpoints
 * before and after the MANIFEST's rename (a compaction is logged before
 * its checkpoint, so it is "new" once its record is written).
 *
 * The delay is uniform in [0, 1.25 x the aimed-at time], re-measured
 * whenever a child finishes before its kill.  The seed of the delays is
 * printed (MESS_CRASH_SEED=S repeats the draws, not the machine's timing).
 * test_replay checks the same replay rules without kills.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../mess_experimental.h"
#include "wal.h"
#include "harness.h"
#include "sift.h"

#define MAX_SHARDS 16

static float *base, *queries, *train;
static size_t n_base, n_query, n_train, dim;
static unsigned rounds = 8;
static size_t batch = 10, initial = 300;
static uint64_t rng;
static char top[] = "build/crashdirXXXXXX";
static mess_params params;
static mess_client *client;
static uint8_t *req;
static size_t req_len;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long file_len(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static double uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* ---- operations ------------------------------------------------------------ */

enum op_kind { OP_UPLOAD, OP_DELETE, OP_CHECKPOINT, OP_COMPACT };

struct op {
    enum op_kind kind;
    uint8_t *buf;
    size_t len;
    uint64_t id0, items; /* an upload: ids [id0, id0 + items) */
    uint64_t del_after;  /* ids [first_id, del_after) are deleted after it */
};

struct plan {
    struct op *ops;
    size_t n, cap;
    uint64_t next_id;  /* ids uploaded so far: [first_id, next_id) */
    uint64_t first_id;
    uint64_t next_del; /* ids deleted so far: [first_id, next_del) */
};

static void plan_push(struct plan *pl, enum op_kind kind, uint8_t *buf, size_t len)
{
    if (pl->n == pl->cap) {
        pl->cap = pl->cap ? 2 * pl->cap : 64;
        pl->ops = (struct op *)realloc(pl->ops, pl->cap * sizeof *pl->ops);
    }
    pl->ops[pl->n].kind = kind;
    pl->ops[pl->n].buf = buf;
    pl->ops[pl->n].len = len;
    pl->ops[pl->n].id0 = pl->ops[pl->n].items = 0;
    pl->ops[pl->n].del_after = pl->next_del;
    pl->n++;
}

static void plan_upload(struct plan *pl, size_t items)
{
    uint64_t ids[4096];
    uint8_t *buf = NULL;
    size_t len = 0, i, v = (size_t)(pl->next_id - pl->first_id);
    float *vec = (float *)malloc(items * dim * sizeof *vec);
    for (i = 0; i < items; i++) {
        ids[i] = pl->next_id + i;
        memcpy(vec + i * dim, base + ((v + i) % n_base) * dim, dim * sizeof *vec);
    }
    CHECK_OK(mess_client_upload(client, ids, vec, items, 1, &buf, &len));
    free(vec);
    plan_push(pl, OP_UPLOAD, buf, len);
    pl->ops[pl->n - 1].id0 = pl->next_id;
    pl->ops[pl->n - 1].items = items;
    pl->next_id += items;
}

static void plan_delete(struct plan *pl, size_t items)
{
    uint64_t ids[64];
    uint8_t *buf = NULL;
    size_t len = 0, i;
    for (i = 0; i < items && pl->next_del < pl->next_id; i++)
        ids[i] = pl->next_del++;
    CHECK_OK(mess_client_delete(client, ids, i, &buf, &len));
    plan_push(pl, OP_DELETE, buf, len);
}

static void plan_free(struct plan *pl)
{
    size_t i;
    for (i = 0; i < pl->n; i++)
        mess_buf_free(pl->ops[i].buf);
    free(pl->ops);
}

/* Applies op to s; MESS_OK or the failing code. */
static int apply(mess_server *s, const struct op *op)
{
    size_t missing;
    int rc;
    switch (op->kind) {
    case OP_UPLOAD:
        return mess_server_apply_upload(s, op->buf, op->len, 1);
    case OP_DELETE:
        return mess_server_apply_delete(s, op->buf, op->len, &missing);
    case OP_CHECKPOINT:
        return mess_server_checkpoint(s);
    case OP_COMPACT:
        rc = mess_server_compact(s, 1);
        return rc == MESS_OK ? mess_server_checkpoint(s) : rc;
    }
    return MESS_EINVAL;
}

/* The reference applies the in-memory meaning of op (a checkpoint does
 * not change a state; it is not a directory-backed server). */
static int apply_ref(mess_server *ref, const struct op *op)
{
    if (op->kind == OP_CHECKPOINT)
        return MESS_OK;
    if (op->kind == OP_COMPACT)
        return mess_server_compact(ref, 1);
    return apply(ref, op);
}

/* ---- state snapshots -------------------------------------------------------- */

/* Per shard, one row per node: label | deleted | code | ciphertext, sorted. */
struct snap {
    uint8_t *rows[MAX_SHARDS];
    size_t n[MAX_SHARDS];
    size_t row;
};

static size_t g_row;
static int row_cmp(const void *a, const void *b)
{
    return memcmp(a, b, g_row);
}

static int snap_take(const mess_server *s, struct snap *sn)
{
    size_t words = params.kappa / 64, eb = mess_payload_size(&params), j, i;
    memset(sn, 0, sizeof *sn);
    sn->row = MESS_LABEL_BYTES + 1 + words * 8 + eb;
    for (j = 0; j < params.shards; j++) {
        size_t n;
        uint8_t *labels, *del, *entries;
        uint64_t *codes;
        if (mess_server_shard_nodes(s, (uint32_t)j, &n) != MESS_OK)
            return -1;
        labels = (uint8_t *)malloc(n * MESS_LABEL_BYTES + 1);
        del = (uint8_t *)malloc(n + 1);
        entries = (uint8_t *)malloc(n * eb + 1);
        codes = (uint64_t *)malloc(n * words * 8 + 8);
        sn->rows[j] = (uint8_t *)malloc(n * sn->row + 1);
        sn->n[j] = n;
        if (!labels || !del || !entries || !codes || !sn->rows[j] ||
            mess_server_shard_labels(s, (uint32_t)j, labels, n) != MESS_OK ||
            mess_server_shard_deleted(s, (uint32_t)j, del, n) != MESS_OK ||
            mess_server_shard_entries(s, (uint32_t)j, entries, n) != MESS_OK ||
            mess_server_shard_codes(s, (uint32_t)j, codes, n) != MESS_OK) {
            free(labels);
            free(del);
            free(entries);
            free(codes);
            return -1;
        }
        for (i = 0; i < n; i++) {
            uint8_t *r = sn->rows[j] + i * sn->row;
            memcpy(r, labels + i * MESS_LABEL_BYTES, MESS_LABEL_BYTES);
            r[MESS_LABEL_BYTES] = del[i];
            memcpy(r + MESS_LABEL_BYTES + 1, codes + i * words, words * 8);
            memcpy(r + MESS_LABEL_BYTES + 1 + words * 8, entries + i * eb, eb);
        }
        g_row = sn->row;
        qsort(sn->rows[j], n, sn->row, row_cmp);
        free(labels);
        free(del);
        free(entries);
        free(codes);
    }
    return 0;
}

static void snap_free(struct snap *sn)
{
    size_t j;
    for (j = 0; j < MAX_SHARDS; j++)
        free(sn->rows[j]);
}

static int snap_equal(const struct snap *a, const struct snap *b)
{
    size_t j;
    for (j = 0; j < params.shards; j++)
        if (a->n[j] != b->n[j] || memcmp(a->rows[j], b->rows[j], a->n[j] * a->row) != 0)
            return 0;
    return 1;
}

/* Labels of an upload buffer's records not live in the snapshot. */
static size_t missing_labels(const struct snap *sn, const struct op *op)
{
    size_t rb = wire_upload_record_bytes(&params), n, i, j, miss = 0;
    n = (size_t)mess_load_u64(op->buf + WIRE_CLIENT_BODY_OFFSET);
    for (i = 0; i < n; i++) {
        const uint8_t *rec = op->buf + WIRE_RECORDS_OFFSET + i * rb;
        uint32_t shard = wire_record_shard(rec);
        int found = 0;
        for (j = 0; shard < params.shards && j < sn->n[shard] && !found; j++) {
            const uint8_t *r = sn->rows[shard] + j * sn->row;
            found = memcmp(r, wire_record_label(rec), MESS_LABEL_BYTES) == 0 &&
                    r[MESS_LABEL_BYTES] == 0;
        }
        miss += !found;
    }
    return miss;
}

/* ---- one kind of operation, ROUNDS kills ---------------------------------------- */

struct kind_result {
    unsigned killed, finished, old_state, new_state, same, bad_verify, bad_open,
        bad_state, lost, bad_search;
    unsigned in_open, during[4]; /* kills in the open (and replay), and by op kind */
    unsigned committed;          /* kills in a checkpoint after its MANIFEST rename */
    unsigned planted;            /* torn records added after a kill */
    unsigned deltas, folds;      /* shards' chains that grew / restarted (a fold) */
    unsigned max_chain;
    double window;
};

/* Shard j's delta files in dir (its chain once a checkpoint has removed
 * any leftovers). */
static unsigned count_deltas(const char *dir, unsigned j)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char prefix[32];
    unsigned n = 0;
    if (!d)
        return 0;
    snprintf(prefix, sizeof prefix, "shard-%04u-", j);
    while ((e = readdir(d)) != NULL) {
        size_t a = strlen(e->d_name);
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0 && a > 6 &&
             strcmp(e->d_name + a - 6, ".delta") == 0;
    }
    closedir(d);
    return n;
}

static const char *op_name(int k)
{
    return k == OP_UPLOAD ? "upload" : k == OP_DELETE ? "delete"
         : k == OP_CHECKPOINT ? "checkpoint" : "compact+checkpoint";
}

/* The child: open, then ops [from, to), one acknowledgement byte each. */
static void child(const char *dir, const struct plan *pl, size_t from, size_t to, int fd)
{
    mess_server *s = NULL;
    size_t i;
    char c = 'R';
    if (mess_server_open(dir, &params, NULL, 0, &s) != MESS_OK)
        _exit(3);
    if (write(fd, &c, 1) != 1)
        _exit(4);
    c = 'A';
    for (i = from; i < to; i++) {
        if (apply(s, &pl->ops[i]) != MESS_OK)
            _exit(5);
        if (write(fd, &c, 1) != 1)
            _exit(4);
    }
    mess_server_free(s);
    _exit(0);
}

struct run {
    long acks;      /* operations acknowledged */
    int opened;     /* the child said it had opened the directory */
    int killed;     /* the kill came before the child ended */
    int status;
    double elapsed; /* from the start of the delay to the child's end */
};

/* Runs a child on ops [from, to).  With `settle` >= 0 the parent first
 * waits for the open and `settle` acknowledgements (the kill aims at the
 * op after them); then it sleeps `delay` seconds (negative: none) and
 * kills the child. */
static int run_child(const char *dir, const struct plan *pl, size_t from, size_t to,
                     long settle, double delay, struct run *out)
{
    int fds[2];
    pid_t pid;
    double t0;
    char c;
    ssize_t k;
    memset(out, 0, sizeof *out);
    if (pipe(fds) != 0)
        return -1;
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(fds[0]);
        child(dir, pl, from, to, fds[1]);
    }
    close(fds[1]);
    /* reads acknowledgements as they come until `settle` ops are done */
    while (settle >= 0 && (!out->opened || out->acks < settle) &&
           (k = read(fds[0], &c, 1)) == 1) {
        if (c == 'R')
            out->opened = 1;
        else if (c == 'A')
            out->acks++;
    }
    t0 = now();
    if (delay >= 0) {
        struct timespec ts;
        ts.tv_sec = (time_t)delay;
        ts.tv_nsec = (long)((delay - (double)ts.tv_sec) * 1e9);
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
    }
    waitpid(pid, &out->status, 0);
    out->elapsed = now() - t0;
    out->killed = WIFSIGNALED(out->status);
    while (read(fds[0], &c, 1) == 1) {
        if (c == 'R')
            out->opened = 1;
        else if (c == 'A')
            out->acks++;
    }
    close(fds[0]);
    return 0;
}

/* What a crash in the middle of the log's write of op would leave (the
 * kernel wrote part of the record): a prefix of its record, appended to
 * a log that ends cleanly.  1 if planted. */
static int plant_torn(const char *dir, const struct op *op)
{
    char path[700];
    uint8_t *log;
    size_t len, cut;
    struct wal_scan sc;
    struct mess_wr w;
    FILE *f;
    int ok = 0;
    if (op->kind != OP_UPLOAD && op->kind != OP_DELETE)
        return 0;
    snprintf(path, sizeof path, "%s/wal", dir);
    log = test_read_file(path, &len);
    if (!log)
        return 0;
    if (wal_scan(log, len, UINT64_MAX, &sc, NULL, 0) == MESS_OK && sc.cut == 0 &&
        sc.records > 0) {
        mess_wr_init(&w);
        wal_encode(&w, op->kind == OP_UPLOAD ? WAL_UPLOAD : WAL_DELETE, sc.log_gen,
                   sc.records, op->buf, op->len);
        cut = 1 + (size_t)(uniform() * (double)(w.len - 1));
        f = fopen(path, "ab");
        ok = !w.err && f && fwrite(w.p, 1, cut, f) == cut;
        if (f && fclose(f) != 0)
            ok = 0;
        mess_wr_free(&w);
    }
    free(log);
    return ok;
}

/* ROUNDS kills of children running windows of w ops of the plan; the
 * kill aims at the first op of kind `target` in the window (the whole
 * window from the fork if target < 0). */
static void crash_kind(const char *name, struct plan *pl, size_t w, int target,
                       mess_server *ref, struct kind_result *res)
{
    char dir[600], mpath[700], msg[512];
    mess_server *s = NULL;
    size_t at = 0, i;
    unsigned chain[MAX_SHARDS];
    unsigned r;
    double t_aim = -1;
    memset(res, 0, sizeof *res);
    snprintf(dir, sizeof dir, "%s/%s", top, name);
    /* the initial state: op 0 (an upload of `initial` items) and a checkpoint */
    CHECK_OK(mess_server_create(dir, &params, &s));
    if (!s)
        return;
    CHECK_OK(apply(s, &pl->ops[0]));
    CHECK_OK(mess_server_checkpoint(s));
    mess_server_free(s);
    CHECK_OK(apply_ref(ref, &pl->ops[0]));
    at = 1;
    for (i = 0; i < params.shards && i < MAX_SHARDS; i++)
        chain[i] = count_deltas(dir, (unsigned)i);
    for (r = 0; r <= rounds && at < pl->n; r++) {
        size_t to = at + w < pl->n ? at + w : pl->n, done;
        long settle = -1;
        int matched = 0;
        struct run run;
        struct snap got, want;
        double delay;
        uint8_t *manifest, *after;
        size_t manifest_len, after_len;
        snprintf(mpath, sizeof mpath, "%s/MANIFEST", dir);
        manifest = test_read_file(mpath, &manifest_len);
        if (target >= 0)
            for (settle = 0; at + (size_t)settle < to &&
                             pl->ops[at + (size_t)settle].kind != (enum op_kind)target;
                 settle++)
                ;
        /* round 0 runs to the end and measures the aim */
        delay = r == 0 ? -1.0 : 1.25 * t_aim * uniform();
        if (run_child(dir, pl, at, to, settle, delay, &run) != 0) {
            CHECK(0);
            break;
        }
        if (run.killed) {
            res->killed++;
        } else {
            CHECK(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0 &&
                  run.acks == (long)(to - at));
            if (!(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0)) {
                fprintf(stderr, "  %s round %u: the child exited %d\n", name, r,
                        WIFEXITED(run.status) ? WEXITSTATUS(run.status) : -1);
                break;
            }
            res->finished++;
            /* the time of the aimed-at part, re-measured as the machine's
             * load changes */
            t_aim = t_aim < 0 ? run.elapsed : 0.5 * t_aim + 0.5 * run.elapsed;
        }
        done = at + (size_t)run.acks;
        if (run.killed && !run.opened)
            res->in_open++;
        else if (run.killed && done < to)
            res->during[pl->ops[done].kind]++;
        /* was the interrupted checkpoint past its MANIFEST's rename? */
        after = test_read_file(mpath, &after_len);
        if (run.killed && done < to && pl->ops[done].kind >= OP_CHECKPOINT && manifest &&
            after && (after_len != manifest_len || memcmp(after, manifest, after_len) != 0))
            res->committed++;
        free(manifest);
        free(after);
        /* inserts: sometimes the crash also tore the next record */
        if (target < 0 && run.killed && done < to && uniform() < 0.3)
            res->planted += (unsigned)plant_torn(dir, &pl->ops[done]);
        /* the proportional checkpoint: chains that grew, chains folded */
        for (i = 0; i < params.shards && i < MAX_SHARDS; i++) {
            unsigned c = count_deltas(dir, (unsigned)i);
            if (c > chain[i])
                res->deltas++;
            else if (c < chain[i])
                res->folds++;
            if (c > res->max_chain)
                res->max_chain = c;
            chain[i] = c;
        }
        /* the directory as the crash left it */
        if (mess_server_verify(dir, msg, sizeof msg) != MESS_OK) {
            fprintf(stderr, "  %s round %u: verify: %s\n", name, r, msg);
            res->bad_verify++;
            break;
        }
        if (mess_server_open(dir, &params, NULL, 0, &s) != MESS_OK) {
            res->bad_open++;
            break;
        }
        /* acknowledged ops happened; the next one may have */
        for (i = at; i < done; i++)
            CHECK_OK(apply_ref(ref, &pl->ops[i]));
        if (snap_take(s, &got) != 0 || snap_take(ref, &want) != 0) {
            CHECK(0);
            mess_server_free(s);
            break;
        }
        if (snap_equal(&got, &want)) {
            matched = 1;
            /* a checkpoint changes no state: old and new are the same */
            if (run.killed && done < to && pl->ops[done].kind == OP_CHECKPOINT)
                res->same++;
            else if (run.killed && done < to)
                res->old_state++;
        }
        if (!matched && run.killed && done < to) {
            snap_free(&want);
            CHECK_OK(apply_ref(ref, &pl->ops[done]));
            if (snap_take(ref, &want) == 0 && snap_equal(&got, &want)) {
                matched = 1;
                res->new_state++;
                done++;
            }
        }
        if (!matched) {
            fprintf(stderr, "  %s round %u: state after %ld acknowledged ops of %zu is "
                    "neither the old nor the new one\n", name, r, run.acks, to - at);
            res->bad_state++;
        }
        /* every acknowledged upload none of whose ids an acknowledged
         * delete removed is there, live (implied by the equality above,
         * counted on its own) */
        for (i = 0; i < done; i++)
            if (pl->ops[i].kind == OP_UPLOAD && pl->ops[i].id0 >= pl->ops[done - 1].del_after)
                res->lost += (unsigned)missing_labels(&got, &pl->ops[i]);
        {
            uint8_t *resp = NULL;
            size_t rl = 0;
            if (mess_server_search(s, req, req_len, 1, &resp, &rl) != MESS_OK)
                res->bad_search++;
            mess_buf_free(resp);
        }
        snap_free(&got);
        snap_free(&want);
        mess_server_free(s);
        s = NULL;
        if (!matched)
            break;
        at = done;
    }
    res->window = t_aim;
    printf("  %s: %u kills at random points of %s (%.1f ms), %u before the child "
           "ended: in the open+replay %u",
           name, rounds, target < 0 ? "a window from the fork" : op_name(target),
           t_aim * 1e3, res->killed, res->in_open);
    for (i = 0; i < 4; i++)
        if (res->during[i])
            printf(", %s %u", op_name((int)i), res->during[i]);
    if (res->during[OP_CHECKPOINT] + res->during[OP_COMPACT])
        printf(" (%u of these after the MANIFEST's rename)", res->committed);
    if (res->planted)
        printf("; a torn record added after %u of them", res->planted);
    if (res->deltas + res->folds)
        printf("; shard deltas written %u, chains folded %u (longest %u)", res->deltas,
               res->folds, res->max_chain);
    printf("\n  %s: state old %u, new %u, either (a checkpoint) %u; verify failed %u, "
           "open failed %u, other state %u, acknowledged uploads lost %u, search "
           "failed %u\n",
           name, res->old_state, res->new_state, res->same, res->bad_verify,
           res->bad_open, res->bad_state, res->lost, res->bad_search);
    CHECK(res->bad_verify == 0 && res->bad_open == 0 && res->bad_state == 0 &&
          res->lost == 0 && res->bad_search == 0);
    CHECK(res->killed + res->finished == rounds + 1);
    /* the kills must land inside the windows: inserts on both sides of an
     * acknowledgement, checkpoints on both sides of the MANIFEST's rename */
    if (rounds >= 20 && target < 0)
        CHECK(res->killed >= rounds / 2 && res->old_state > 0 && res->new_state > 0);
    if (rounds >= 20 && target >= 0)
        CHECK(res->killed >= rounds / 2 && res->committed > 0 &&
              res->committed < res->during[target]);
    /* checkpoints of small uploads write deltas, and their chains fold */
    if (rounds >= 20 && target == OP_CHECKPOINT)
        CHECK(res->deltas > 0 && res->folds > 0);
}

/* Removes the tree under path (the server directories). */
static void rm_tree(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *e;
    char p[1024];
    struct stat st;
    while (d && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            rm_tree(p);
        else
            unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(path);
}

static void plan_init(struct plan *pl, uint64_t first_id)
{
    memset(pl, 0, sizeof *pl);
    pl->first_id = pl->next_id = pl->next_del = first_id;
    plan_upload(pl, initial);
}

/* Without crashes: what the log brings back on open.  Updates applied
 * after the last checkpoint (uploads, deletes, a compaction) are replayed
 * on open; a subset server replays its shards' part, does not log its
 * own updates, and refuses a checkpoint while the log holds records of
 * other shards; verify reads the log without changing
 * it; a torn record at the end is cut by the next open. */
static void test_replay(void)
{
    struct plan pl;
    mess_server *s = NULL, *ref = NULL, *sub = NULL;
    struct snap got, want;
    char dir[600], wal[700], msg[512];
    uint32_t pick[2] = {3, 1};
    size_t before, after, n, nref;
    plan_init(&pl, 4000000);
    plan_upload(&pl, batch);
    plan_delete(&pl, 4);
    plan_push(&pl, OP_COMPACT, NULL, 0);
    plan_upload(&pl, batch);
    plan_upload(&pl, batch);
    plan_delete(&pl, 6);
    snprintf(dir, sizeof dir, "%s/replay", top);
    snprintf(wal, sizeof wal, "%s/wal", dir);
    CHECK_OK(mess_server_new(&params, &ref));
    CHECK_OK(mess_server_create(dir, &params, &s));
    if (!s || !ref)
        goto out;
    CHECK_OK(apply(s, &pl.ops[0]));
    CHECK_OK(mess_server_checkpoint(s));
    CHECK_OK(apply_ref(ref, &pl.ops[0]));
    /* upload, delete, compaction (not checkpointed), upload */
    CHECK_OK(apply(s, &pl.ops[1]));
    CHECK_OK(apply(s, &pl.ops[2]));
    CHECK_OK(mess_server_compact(s, 1));
    CHECK_OK(apply(s, &pl.ops[4]));
    mess_server_free(s);
    s = NULL;
    CHECK_OK(apply_ref(ref, &pl.ops[1]));
    CHECK_OK(apply_ref(ref, &pl.ops[2]));
    CHECK_OK(apply_ref(ref, &pl.ops[3]));
    CHECK_OK(apply_ref(ref, &pl.ops[4]));
    before = (size_t)file_len(wal);
    CHECK(before > 0);
    CHECK_OK(mess_server_verify(dir, msg, sizeof msg));
    CHECK((size_t)file_len(wal) == before);
    /* a subset: its shards' part of the log; its own part of an upload
     * is logged; no compaction; no checkpoint over other shards' records */
    CHECK_OK(mess_server_open(dir, &params, pick, 2, &sub));
    if (sub) {
        uint8_t *mine = NULL;
        size_t mine_len = 0;
        CHECK_OK(mess_server_shard_nodes(sub, 3, &n));
        CHECK_OK(mess_server_shard_nodes(ref, 3, &nref));
        CHECK(n == nref);
        CHECK_OK(mess_records_split(&params, pl.ops[5].buf, pl.ops[5].len, pick, 2, &mine,
                                    &mine_len));
        /* applied in memory, not logged (durable at its checkpoint) */
        CHECK_OK(mess_server_apply_upload(sub, mine, mine_len, 1));
        CHECK(file_len(wal) == (long)before);
        mess_buf_free(mine);
        mine = NULL;
        CHECK_OK(mess_records_split(&params, pl.ops[6].buf, pl.ops[6].len, pick, 2, &mine,
                                    &mine_len));
        CHECK_OK(mess_server_apply_delete(sub, mine, mine_len, NULL));
        mess_buf_free(mine);
        CHECK_OK(mess_server_compact(sub, 1));
        CHECK(file_len(wal) == (long)before);
        CHECK_RC(mess_server_checkpoint(sub), MESS_ESTATE);
        mess_server_free(sub);
    }
    /* a torn record at the end, then the full open */
    {
        FILE *f = fopen(wal, "ab");
        CHECK(f && fwrite(pl.ops[1].buf, 1, 100, f) == 100 && fclose(f) == 0);
    }
    CHECK_OK(mess_server_verify(dir, msg, sizeof msg));
    CHECK_OK(mess_server_open(dir, &params, NULL, 0, &s));
    after = (size_t)file_len(wal);
    /* an open changes no file: the handle's first change cuts the torn
     * record (docs/PROTOCOL.md "One writer at a time") */
    CHECK(after == before + 100);
    if (s && snap_take(s, &got) == 0 && snap_take(ref, &want) == 0) {
        CHECK(snap_equal(&got, &want));
        CHECK(missing_labels(&got, &pl.ops[4]) == 0);
        snap_free(&got);
        snap_free(&want);
    } else {
        CHECK(0);
    }
    /* the checkpoint folds the log: empty, and the state stays */
    if (s)
        CHECK_OK(mess_server_checkpoint(s));
    CHECK(file_len(wal) == 0);
    mess_server_free(s);
    s = NULL;
    CHECK_OK(mess_server_open(dir, &params, NULL, 0, &s));
    if (s && snap_take(s, &got) == 0 && snap_take(ref, &want) == 0) {
        CHECK(snap_equal(&got, &want));
        snap_free(&got);
        snap_free(&want);
    } else {
        CHECK(0);
    }
out:
    mess_server_free(s);
    mess_server_free(ref);
    plan_free(&pl);
}

static void test_insert_kills(void)
{
    struct plan pl;
    struct kind_result res;
    mess_server *ref = NULL;
    unsigned i;
    plan_init(&pl, 1000000);
    for (i = 0; i < rounds + 2; i++) {
        plan_upload(&pl, batch);
        plan_delete(&pl, 3);
        plan_upload(&pl, batch);
        plan_upload(&pl, batch);
    }
    CHECK_OK(mess_server_new(&params, &ref));
    if (ref)
        crash_kind("insert", &pl, 4, -1, ref, &res);
    mess_server_free(ref);
    plan_free(&pl);
}

static void test_checkpoint_kills(void)
{
    struct plan pl;
    struct kind_result res;
    mess_server *ref = NULL;
    unsigned i;
    plan_init(&pl, 2000000);
    for (i = 0; i < rounds + 2; i++) {
        /* every other upload is one item: it reaches per_item of the
         * shards, so the checkpoint meets shards whose chains the lazy
         * open left unapplied (docs/PROTOCOL.md "Lazy apply") */
        plan_upload(&pl, i % 2 ? 1 : batch);
        plan_push(&pl, OP_CHECKPOINT, NULL, 0);
    }
    CHECK_OK(mess_server_new(&params, &ref));
    if (ref)
        crash_kind("checkpoint", &pl, 2, OP_CHECKPOINT, ref, &res);
    mess_server_free(ref);
    plan_free(&pl);
}

static void test_compaction_kills(void)
{
    struct plan pl;
    struct kind_result res;
    mess_server *ref = NULL;
    unsigned i;
    plan_init(&pl, 3000000);
    for (i = 0; i < rounds + 2; i++) {
        plan_delete(&pl, 2);
        plan_push(&pl, OP_COMPACT, NULL, 0);
    }
    CHECK_OK(mess_server_new(&params, &ref));
    if (ref)
        crash_kind("compaction", &pl, 2, OP_COMPACT, ref, &res);
    mess_server_free(ref);
    plan_free(&pl);
}

int main(void)
{
    static const uint8_t seed[32] = "crash test of a server directory";
    double t0 = now();
    mess_query *q = NULL;
    const char *env = getenv("MESS_CRASH_ROUNDS");
    if (env && atoi(env) > 0)
        rounds = (unsigned)atoi(env);
    env = getenv("MESS_CRASH_SEED");
    rng = env && *env ? strtoull(env, NULL, 0)
                      : (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
    if (rng == 0)
        rng = 1;
    printf("  seed %llu (MESS_CRASH_SEED=%llu repeats the kill delays), %u kills per kind\n",
           (unsigned long long)rng, (unsigned long long)rng, rounds);
    if (test_read_sift(&base, &n_base, &queries, &n_query, &train, &n_train, &dim)) {
        fprintf(stderr, "cannot read datasets/sift\n");
        return 1;
    }
    mess_params_default(&params, (uint32_t)dim);
    params.kappa = 64;
    params.shards = 4;
    params.per_item = 2;
    params.hnsw_m = 8;
    params.ef_construction = 24;
    params.train_sample = 1000;
    if (mess_client_new(&params, train, n_train, seed, 2, &client) != MESS_OK ||
        mess_client_request(client, queries, 40, &q, &req, &req_len) != MESS_OK) {
        fprintf(stderr, "cannot make the client\n");
        return 1;
    }
    mess_query_free(q);
    mkdir("build", 0755);
    if (!mkdtemp(top)) {
        fprintf(stderr, "cannot create a directory under build/\n");
        return 1;
    }
    RUN(test_replay);
    RUN(test_insert_kills);
    RUN(test_checkpoint_kills);
    RUN(test_compaction_kills);
    rm_tree(top);
    mess_buf_free(req);
    mess_client_free(client);
    mess_vecs_free(base);
    mess_vecs_free(queries);
    mess_vecs_free(train);
    printf("  %.1f s in all\n", now() - t0);
    HARNESS_END();
}
