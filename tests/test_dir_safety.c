/*
 * test_dir_safety.c - a server directory is never lost to an ordinary
 * operation (issue 29, items 2 and 3; docs/PROTOCOL.md "One writer per
 * shard", docs/SECURITY.md):
 *
 * - a handle opened on a subset of shards whose shards another handle (a
 *   whole-directory writer in another process, or a second subset handle)
 *   has checkpointed since it opened them refuses its checkpoint with
 *   MESS_ESTATE / ESTALE, and the directory stays whole: it verifies,
 *   opens, and answers as a server in memory fed the accepted buffers;
 * - a symbolic link in a directory is never followed: an arena, a graph
 *   or the LOCK file that is a link makes the open, the checkpoint or
 *   the verify fail with a message naming it, and the file the link
 *   points to is neither written nor created;
 * - a change refused because another process holds the directory's
 *   writer claim is MESS_EBUSY (errno EBUSY), not MESS_ESTATE (item 4:
 *   it was told "an item is already stored"), and changes nothing.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../mess.h"
#include "../mess_experimental.h"
#include "harness.h"
#include "testdir.h"
#include "sift.h"

#define DIM 64
#define NQ 6

static char root[] = "build/dirsafeXXXXXX";
static mess_params P;
static uint8_t *up1, *up2, *up3, *up1_other, *req[NQ];
static size_t up1_len, up2_len, up3_len, up1_other_len, req_len[NQ];

static void path_of(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", root, name);
}

/* The first file of dir whose name ends in suffix, into out. */
static int find_file(const char *dir, const char *suffix, char *out, size_t cap)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t ls = strlen(suffix);
    int found = 0;
    if (!d)
        return 0;
    while (!found && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n > ls && strcmp(e->d_name + n - ls, suffix) == 0) {
            snprintf(out, cap, "%s/%s", dir, e->d_name);
            found = 1;
        }
    }
    closedir(d);
    return found;
}

static int same_answers(const mess_server *a, const mess_server *b)
{
    int q, same = 1;
    for (q = 0; q < NQ && same; q++) {
        uint8_t *ra = NULL, *rb = NULL;
        size_t la = 0, lb = 0;
        same = mess_server_search(a, req[q], req_len[q], 1, &ra, &la) == MESS_OK &&
               mess_server_search(b, req[q], req_len[q], 1, &rb, &lb) == MESS_OK &&
               la == lb && memcmp(ra, rb, la) == 0;
        mess_buf_free(ra);
        mess_buf_free(rb);
    }
    return same;
}

/* path made absolute (as an attacker's link target would be). */
static int absolute(const char *path, char *out, size_t cap)
{
    char cwd[256];
    if (!getcwd(cwd, sizeof cwd))
        return -1;
    return snprintf(out, cap, "%s/%s", cwd, path) < (int)cap ? 0 : -1;
}

static int file_bytes(const char *path, uint8_t **out, size_t *n)
{
    FILE *f = fopen(path, "rb");
    long len;
    *out = NULL;
    *n = 0;
    if (!f)
        return -1;
    if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return -1;
    }
    *out = (uint8_t *)malloc((size_t)len + 1);
    if (!*out || fread(*out, 1, (size_t)len, f) != (size_t)len) {
        fclose(f);
        free(*out);
        *out = NULL;
        return -1;
    }
    fclose(f);
    *n = (size_t)len;
    return 0;
}

/* A directory of up1, checkpointed. */
static void make_dir(const char *dir)
{
    mess_server *s = NULL;
    CHECK_OK(mess_server_create(dir, &P, &s));
    CHECK_OK(mess_server_apply_upload(s, up1, up1_len, 1));
    CHECK_OK(mess_server_checkpoint(s));
    mess_server_free(s);
}

/* In a child process (a real second writer): open the whole directory,
 * apply buf, checkpoint.  The child's exit status is 0 on success. */
static int writer_process(const char *dir, const uint8_t *buf, size_t len)
{
    int status = 0;
    pid_t pid = fork();
    if (pid == 0) {
        mess_server *w = NULL;
        int rc = mess_server_open(dir, &P, NULL, 0, &w);
        if (rc == MESS_OK)
            rc = mess_server_apply_upload(w, buf, len, 1);
        if (rc == MESS_OK)
            rc = mess_server_checkpoint(w);
        mess_server_free(w);
        _exit(rc == MESS_OK ? 0 : 1);
    }
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The directory verifies, opens whole, and answers as a server in memory
 * fed the buffers in `accepted`. */
static void check_whole(const char *dir, const uint8_t *const *bufs, const size_t *lens,
                        size_t n)
{
    char msg[256];
    mess_server *s = NULL, *m = NULL;
    size_t i;
    msg[0] = 0;
    CHECK_OK(mess_server_verify(dir, msg, sizeof msg));
    if (msg[0] && strcmp(msg, "ok") != 0)
        fprintf(stderr, "  verify: %s\n", msg);
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &s));
    CHECK_OK(mess_server_new(&P, &m));
    for (i = 0; i < n; i++)
        CHECK_OK(mess_server_apply_upload(m, bufs[i], lens[i], 1));
    CHECK(s && m && same_answers(s, m));
    mess_server_free(s);
    mess_server_free(m);
}

/* Item 4: another process writes the directory (it has applied an
 * upload and holds the writer claim until it frees its handle); this
 * process's upload and checkpoint are MESS_EBUSY, nothing changes, and
 * once the other is done a fresh handle writes. */
static void test_busy_other_process(void)
{
    char dir[256], c;
    int go[2], ready[2], status = 0;
    mess_server *s = NULL;
    const uint8_t *bufs[3];
    size_t lens[3];
    pid_t pid;
    path_of(dir, sizeof dir, "busy");
    make_dir(dir);
    CHECK(pipe(go) == 0 && pipe(ready) == 0);
    pid = fork();
    if (pid == 0) {
        mess_server *w = NULL;
        int rc = mess_server_open(dir, &P, NULL, 0, &w);
        if (rc == MESS_OK)
            rc = mess_server_apply_upload(w, up2, up2_len, 1); /* claims */
        c = rc == MESS_OK ? 'y' : 'n';
        if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
            rc = MESS_EIO;
        mess_server_free(w); /* gives the claim back; up2 is in the log */
        _exit(rc == MESS_OK ? 0 : 1);
    }
    CHECK(pid > 0);
    if (pid <= 0)
        return;
    CHECK(read(ready[0], &c, 1) == 1 && c == 'y');
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &s));
    errno = 0;
    CHECK_RC(mess_server_apply_upload(s, up3, up3_len, 1), MESS_EBUSY);
    CHECK(errno == EBUSY);
    errno = 0;
    CHECK_RC(mess_server_checkpoint(s), MESS_EBUSY);
    CHECK(errno == EBUSY);
    CHECK(strcmp(mess_error_name(MESS_EBUSY), "MESS_EBUSY") == 0);
    CHECK(strstr(mess_strerror(MESS_EBUSY), "another process is writing") != NULL);
    mess_server_free(s);
    s = NULL;
    CHECK(write(go[1], "x", 1) == 1);
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(go[0]), close(go[1]), close(ready[0]), close(ready[1]);
    /* the other writer is done: a fresh handle writes */
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &s));
    CHECK_OK(mess_server_apply_upload(s, up3, up3_len, 1));
    CHECK_OK(mess_server_checkpoint(s));
    mess_server_free(s);
    bufs[0] = up1, lens[0] = up1_len;
    bufs[1] = up2, lens[1] = up2_len;
    bufs[2] = up3, lens[2] = up3_len;
    check_whole(dir, bufs, lens, 3);
    rm_tree(dir);
}

/* Item 5's probe: mess_server_count_stored counts an upload's records
 * the directory stores and changes nothing (no claim, no log record). */
static void test_count_stored(void)
{
    static const uint32_t one[1] = {0};
    char dir[256];
    mess_server *s = NULL, *sub = NULL;
    size_t stored = 7, records = 7;
    path_of(dir, sizeof dir, "count");
    make_dir(dir); /* up1 */
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &s));
    CHECK_OK(mess_server_count_stored(s, up1, up1_len, &stored, &records));
    CHECK(stored == records && records > 0);
    CHECK_OK(mess_server_count_stored(s, up2, up2_len, &stored, NULL));
    CHECK(stored == 0);
    /* up1's ids with other vectors (another file at the same first id):
     * not "stored", which would let a resume skip rows never inserted */
    errno = 0;
    CHECK_RC(mess_server_count_stored(s, up1_other, up1_other_len, &stored, &records),
             MESS_ESTATE);
    CHECK(errno == EEXIST && stored == 0);
    CHECK_RC(mess_server_count_stored(s, up2, 10, &stored, &records), MESS_EFORMAT);
    CHECK(stored == 0 && records == 0);
    CHECK_RC(mess_server_count_stored(s, NULL, 0, &stored, &records), MESS_EINVAL);
    CHECK_RC(mess_server_count_stored(s, up1, up1_len, NULL, &records), MESS_EINVAL);
    /* it took no claim: another handle writes meanwhile */
    CHECK_OK(mess_server_open(dir, &P, one, 1, &sub));
    CHECK_RC(mess_server_count_stored(sub, up1, up1_len, &stored, &records), MESS_ESTATE);
    mess_server_free(sub);
    CHECK(writer_process(dir, up2, up2_len) == 0);
    mess_server_free(s);
    rm_tree(dir);
}

/* Item 2: a subset handle, then a whole-directory writer in another
 * process checkpoints the same shards; the subset's checkpoint of its
 * own change to them is refused and loses nothing. */
static void test_stale_subset_after_writer(void)
{
    static const uint32_t lo[2] = {0, 1};
    char dir[256];
    mess_server *a = NULL, *reader = NULL;
    uint8_t *mine = NULL;
    size_t mine_len = 0;
    const uint8_t *bufs[2];
    size_t lens[2];
    path_of(dir, sizeof dir, "stale1");
    make_dir(dir);
    CHECK_OK(mess_server_open(dir, &P, lo, 2, &a));
    CHECK(writer_process(dir, up2, up2_len) == 0);
    /* a reader opened in between keeps answering */
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &reader));
    CHECK_OK(mess_records_split(&P, up3, up3_len, lo, 2, &mine, &mine_len));
    CHECK_OK(mess_server_apply_upload(a, mine, mine_len, 1));
    errno = 0;
    CHECK_RC(mess_server_checkpoint(a), MESS_ESTATE);
    CHECK(errno == ESTALE);
    /* still refused on a second try: the handle stays stale */
    CHECK_RC(mess_server_checkpoint(a), MESS_ESTATE);
    mess_server_free(a);
    bufs[0] = up1, lens[0] = up1_len;
    bufs[1] = up2, lens[1] = up2_len;
    {
        mess_server *m = NULL;
        CHECK_OK(mess_server_new(&P, &m));
        CHECK_OK(mess_server_apply_upload(m, up1, up1_len, 1));
        CHECK_OK(mess_server_apply_upload(m, up2, up2_len, 1));
        CHECK(reader && m && same_answers(reader, m));
        mess_server_free(m);
    }
    mess_server_free(reader);
    check_whole(dir, bufs, lens, 2);
    mess_buf_free(mine);
    rm_tree(dir);
}

/* Item 2: two subset handles share shard 1; the second to checkpoint a
 * change to it is refused, the first's change is kept. */
static void test_stale_overlapping_subsets(void)
{
    static const uint32_t ab[2] = {0, 1}, bc[2] = {1, 2};
    char dir[256];
    mess_server *a = NULL, *b = NULL;
    uint8_t *pa = NULL, *pb = NULL;
    size_t la = 0, lb = 0;
    path_of(dir, sizeof dir, "stale2");
    make_dir(dir);
    CHECK_OK(mess_server_open(dir, &P, ab, 2, &a));
    CHECK_OK(mess_server_open(dir, &P, bc, 2, &b));
    CHECK_OK(mess_records_split(&P, up2, up2_len, bc, 2, &pb, &lb));
    CHECK_OK(mess_server_apply_upload(b, pb, lb, 1));
    CHECK_OK(mess_server_checkpoint(b));
    CHECK_OK(mess_records_split(&P, up3, up3_len, ab, 2, &pa, &la));
    CHECK_OK(mess_server_apply_upload(a, pa, la, 1));
    errno = 0;
    CHECK_RC(mess_server_checkpoint(a), MESS_ESTATE);
    CHECK(errno == ESTALE);
    mess_server_free(a);
    mess_server_free(b);
    {
        char msg[256];
        mess_server *s = NULL;
        size_t n1 = 0, n2 = 0;
        CHECK_OK(mess_server_verify(dir, msg, sizeof msg));
        CHECK_OK(mess_server_open(dir, &P, NULL, 0, &s));
        /* b's part is there (shards 1 and 2 grew by b's records) */
        CHECK_OK(mess_server_shard_nodes(s, 1, &n1));
        CHECK_OK(mess_server_shard_nodes(s, 2, &n2));
        CHECK(n1 > 0 && n2 > 0);
        mess_server_free(s);
    }
    /* a stale handle that changed nothing is refused too (as a whole
     * server's is): its view of shard 1 is no longer the directory's */
    mess_buf_free(pb);
    pb = NULL;
    CHECK_OK(mess_records_split(&P, up3, up3_len, bc, 2, &pb, &lb));
    CHECK_OK(mess_server_open(dir, &P, ab, 2, &a));
    CHECK_OK(mess_server_open(dir, &P, bc, 2, &b));
    CHECK_OK(mess_server_apply_upload(b, pb, lb, 1));
    CHECK_OK(mess_server_checkpoint(b));
    errno = 0;
    CHECK_RC(mess_server_checkpoint(a), MESS_ESTATE);
    CHECK(errno == ESTALE);
    mess_server_free(a);
    mess_server_free(b);
    {
        char msg[256];
        CHECK_OK(mess_server_verify(dir, msg, sizeof msg));
    }
    mess_buf_free(pa);
    mess_buf_free(pb);
    rm_tree(dir);
}

/* Item 3: an arena that is a symbolic link to a file outside the
 * directory: the open or the checkpoint that would append to it fails,
 * verify names it, and the outside file keeps its bytes. */
static void test_symlinked_arena(void)
{
    char dir[256], arena[512], outside[256], msg[256];
    uint8_t *before = NULL, *after = NULL;
    size_t nb = 0, na = 0;
    mess_server *s = NULL;
    int rc;
    path_of(dir, sizeof dir, "link1");
    path_of(outside, sizeof outside, "outside.arena");
    make_dir(dir);
    CHECK(find_file(dir, ".arena", arena, sizeof arena));
    CHECK(rename(arena, outside) == 0);
    {
        char target[512];
        /* an absolute target, as an attacker would write */
        CHECK(absolute(outside, target, sizeof target) == 0);
        CHECK(symlink(target, arena) == 0);
    }
    CHECK(file_bytes(outside, &before, &nb) == 0);
    rc = mess_server_open(dir, &P, NULL, 0, &s);
    if (rc == MESS_OK) {
        CHECK_OK(mess_server_apply_upload(s, up2, up2_len, 1));
        CHECK(mess_server_checkpoint(s) != MESS_OK);
        mess_server_free(s);
    } else {
        CHECK_RC(rc, MESS_EFORMAT);
    }
    CHECK(file_bytes(outside, &after, &na) == 0);
    CHECK(na == nb && memcmp(before, after, nb) == 0);
    msg[0] = 0;
    CHECK_RC(mess_server_verify(dir, msg, sizeof msg), MESS_EFORMAT);
    CHECK(strstr(msg, ".arena") != NULL && strstr(msg, "link") != NULL);
    if (!strstr(msg, "link"))
        fprintf(stderr, "  verify said: %s\n", msg);
    free(before);
    free(after);
    unlink(outside);
    rm_tree(dir);
}

/* Item 3: a graph file that is a link, and a LOCK that is a dangling
 * link: the open refuses the graph, the checkpoint creates nothing
 * outside. */
/* A FIFO in place of a graph file, or of the log (a hostile directory):
 * the open and the verify refuse it at once.  Before, open(2) waited for a
 * writer that never came (alarm: the test fails rather than hangs). */
static void test_fifo_in_directory(void)
{
    char dir[256], graph[512], wal[300], msg[256];
    mess_server *s = NULL;
    path_of(dir, sizeof dir, "fifo");
    make_dir(dir);
    CHECK(find_file(dir, ".graph", graph, sizeof graph));
    alarm(20);
    CHECK(unlink(graph) == 0 && mkfifo(graph, 0600) == 0);
    CHECK(mess_server_open(dir, &P, NULL, 0, &s) != MESS_OK);
    CHECK(s == NULL);
    msg[0] = 0;
    CHECK(mess_server_verify(dir, msg, sizeof msg) != MESS_OK);
    CHECK(strstr(msg, ".graph") != NULL);
    rm_tree(dir);
    make_dir(dir);
    snprintf(wal, sizeof wal, "%s/wal", dir);
    unlink(wal);
    CHECK(mkfifo(wal, 0600) == 0);
    s = NULL;
    CHECK(mess_server_open(dir, &P, NULL, 0, &s) != MESS_OK);
    CHECK(s == NULL);
    alarm(0);
    mess_server_free(s);
    rm_tree(dir);
}

static void test_symlinked_graph_and_lock(void)
{
    char dir[256], graph[512], outside[256], lock[300], target[512], msg[256];
    mess_server *s = NULL;
    struct stat st;
    path_of(dir, sizeof dir, "link2");
    path_of(outside, sizeof outside, "outside.graph");
    make_dir(dir);
    CHECK(find_file(dir, ".graph", graph, sizeof graph));
    CHECK(rename(graph, outside) == 0);
    CHECK(absolute(outside, target, sizeof target) == 0);
    CHECK(symlink(target, graph) == 0);
    CHECK_RC(mess_server_open(dir, &P, NULL, 0, &s), MESS_EFORMAT);
    CHECK(s == NULL);
    msg[0] = 0;
    CHECK_RC(mess_server_verify(dir, msg, sizeof msg), MESS_EFORMAT);
    CHECK(strstr(msg, ".graph") != NULL && strstr(msg, "link") != NULL);
    /* put the graph back; now the LOCK is a dangling link out */
    CHECK(unlink(graph) == 0 && rename(outside, graph) == 0);
    snprintf(lock, sizeof lock, "%s/LOCK", dir);
    unlink(lock);
    path_of(outside, sizeof outside, "outside.lock");
    CHECK(absolute(outside, target, sizeof target) == 0);
    CHECK(symlink(target, lock) == 0);
    CHECK_OK(mess_server_open(dir, &P, NULL, 0, &s));
    if (s) {
        /* the first change claims the directory through LOCK: refused
         * (the link is not followed), so nothing is acknowledged */
        errno = 0;
        CHECK_RC(mess_server_apply_upload(s, up2, up2_len, 1), MESS_EIO);
        CHECK(errno == ELOOP);
        CHECK(mess_server_checkpoint(s) != MESS_OK);
        mess_server_free(s);
    }
    CHECK(lstat(outside, &st) != 0 && errno == ENOENT);
    msg[0] = 0;
    CHECK_RC(mess_server_verify(dir, msg, sizeof msg), MESS_EFORMAT);
    CHECK(strstr(msg, "LOCK") != NULL);
    unlink(outside);
    rm_tree(dir);
}

int main(void)
{
    static const uint8_t seed[32] = "libmess dir safety test seed 001";
    mess_client *c = NULL;
    float *vecs;
    size_t i;
    uint64_t ids[600];

    /* These tests fork writer processes while handles opened earlier may
     * still be reading their graph files in on a detached thread
     * (MESS_ADVICE_GRAPH_WILLNEED): a child has that thread's block but
     * not the thread, which memcheck reports as lost in the child.  The
     * read-in is not what these tests check (test_store.c does). */
    if (mess_server_set_advice(MESS_ADVICE_DEFAULT & ~MESS_ADVICE_GRAPH_WILLNEED, NULL) !=
        MESS_OK)
        return 1;
    vecs = test_sift_learn_rows(1200, DIM);
    if (!vecs || test_small_client(&P, DIM, 4, 2, vecs + 600 * DIM, 600, seed, &c) != MESS_OK)
        return 1;
    for (i = 0; i < 600; i++)
        ids[i] = i;
    if (mess_client_upload(c, ids, vecs, 200, 1, &up1, &up1_len) != MESS_OK ||
        mess_client_upload(c, ids + 200, vecs + 200 * DIM, 200, 1, &up2, &up2_len) != MESS_OK ||
        mess_client_upload(c, ids + 400, vecs + 400 * DIM, 200, 1, &up3, &up3_len) != MESS_OK ||
        mess_client_upload(c, ids, vecs + 200 * DIM, 200, 1, &up1_other, &up1_other_len) !=
            MESS_OK) {
        fprintf(stderr, "cannot encode the test buffers\n");
        return 1;
    }
    for (i = 0; i < NQ; i++) {
        mess_query *q = NULL;
        if (mess_client_request(c, vecs + (1100 + i) * DIM, 64, &q, &req[i], &req_len[i]) !=
            MESS_OK) {
            fprintf(stderr, "cannot encode the test requests\n");
            return 1;
        }
        mess_query_free(q);
    }
    mess_client_free(c);
    free(vecs);
    mkdir("build", 0755);
    if (!mkdtemp(root)) {
        fprintf(stderr, "cannot create a directory under build/\n");
        return 1;
    }
    RUN(test_stale_subset_after_writer);
    RUN(test_stale_overlapping_subsets);
    RUN(test_symlinked_arena);
    RUN(test_symlinked_graph_and_lock);
    RUN(test_fifo_in_directory);
    RUN(test_busy_other_process);
    RUN(test_count_stored);
    for (i = 0; i < NQ; i++)
        mess_buf_free(req[i]);
    mess_buf_free(up1);
    mess_buf_free(up2);
    mess_buf_free(up3);
    mess_buf_free(up1_other);
    CHECK(rmdir(root) == 0);
    HARNESS_END();
}
