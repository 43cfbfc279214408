/*
 * twoparty.c - `mess request | search | finish`: the protocol's two parties
 * as separate processes exchanging files, so that a server directory
 * handed to an untrusted host is queried without writing code.
 *
 *   client's host:  mess request --client C --query FILE --pool B --out REQ --state QS
 *   server's host:  mess search --server S --request REQ --out RESP
 *   client's host:  mess finish --client C --state QS --response RESP -k K
 *
 * REQ and RESP are the tool's message files (docs/PROTOCOL.md, "The
 * two-party flow as files"): the request and response buffers of every
 * query, nothing secret.  QS is the library's query state file
 * (mess_query_save): the clean queries, sealed under a key of the client;
 * it stays on the client's host.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../mess.h"
#include "cli.h"

/* ------------------------------------------------------------------------
 * Message files
 *
 *   0   magic[8]: "MESSREQS" (requests) or "MESSRSPS" (responses)
 *   8   u32 version (1)
 *   12  u32 n, the messages
 *   16  n x (u64 length | that many bytes: one request or response buffer)
 * Little-endian.  Written to PATH.tmp.XXXXXX, fsync'd and renamed over
 * PATH, so a reader never sees a torn file under the name.
 * ---------------------------------------------------------------------- */

#define MSGFILE_VERSION 1u
#define MSGFILE_HEADER 16

struct msgkind {
    const char magic[9];
    const char *name;  /* "request", "response" */
    const char *maker; /* the command that writes them */
};
static const struct msgkind requests = {"MESSREQS", "request", "mess request"};
static const struct msgkind responses = {"MESSRSPS", "response", "mess search"};

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

/* "mess: PATH: reason" for a failed system call (errno). */
static int sys_fail(const char *path)
{
    cli_error("%s: %s", path, strerror(errno));
    return CLI_FAIL;
}

struct msg_out {
    FILE *f;
    char *tmp; /* the temporary's name */
    const char *path;
};

/* Creates the temporary next to path and writes the header of n
 * messages.  CLI_OK, or CLI_FAIL after the message. */
static int msg_out_begin(struct msg_out *o, const char *path,
                         const struct msgkind *kind, uint32_t n)
{
    uint8_t h[MSGFILE_HEADER];
    mode_t mask;
    int fd;
    o->f = NULL;
    o->path = path;
    o->tmp = (char *)malloc(strlen(path) + sizeof ".tmp.XXXXXX");
    if (!o->tmp) {
        cli_error("out of memory");
        return CLI_FAIL;
    }
    sprintf(o->tmp, "%s.tmp.XXXXXX", path);
    fd = mkstemp(o->tmp);
    if (fd < 0) {
        sys_fail(path);
        free(o->tmp);
        return CLI_FAIL;
    }
    /* mkstemp makes it 0600; nothing in it is secret: the usual mode */
    mask = umask(0);
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0 || !(o->f = fdopen(fd, "wb"))) {
        sys_fail(path);
        close(fd);
        unlink(o->tmp);
        free(o->tmp);
        return CLI_FAIL;
    }
    memcpy(h, kind->magic, 8);
    put_u32(h + 8, MSGFILE_VERSION);
    put_u32(h + 12, n);
    if (fwrite(h, 1, sizeof h, o->f) != sizeof h) {
        sys_fail(path);
        fclose(o->f);
        o->f = NULL;
        unlink(o->tmp);
        free(o->tmp);
        return CLI_FAIL;
    }
    return CLI_OK;
}

static int msg_out_put(struct msg_out *o, const uint8_t *buf, size_t len)
{
    uint8_t l[8];
    put_u32(l, (uint32_t)len);
    put_u32(l + 4, (uint32_t)((uint64_t)len >> 32));
    if (fwrite(l, 1, 8, o->f) != 8 || fwrite(buf, 1, len, o->f) != len)
        return sys_fail(o->path);
    return CLI_OK;
}

/* ok: flush, fsync, close and rename over the path; else (or if a step
 * fails) remove the temporary.  CLI_OK or CLI_FAIL. */
static int msg_out_end(struct msg_out *o, int ok)
{
    int rc = CLI_OK;
    if (!o->f)
        return CLI_FAIL;
    if (ok && (fflush(o->f) != 0 || fsync(fileno(o->f)) != 0))
        rc = sys_fail(o->path);
    if (fclose(o->f) != 0 && ok && rc == CLI_OK)
        rc = sys_fail(o->path);
    o->f = NULL;
    if (ok && rc == CLI_OK && rename(o->tmp, o->path) != 0)
        rc = sys_fail(o->path);
    if (!ok || rc != CLI_OK)
        unlink(o->tmp);
    free(o->tmp);
    return ok ? rc : CLI_FAIL;
}

struct msg_in {
    FILE *f;
    const char *path;
    const struct msgkind *kind;
    uint32_t n, read;
    uint64_t left; /* file bytes not read yet */
};

/* Opens a message file of `kind` and checks its header.  CLI_OK, or
 * CLI_FAIL after the message naming the file and the reason. */
static int msg_in_open(struct msg_in *r, const char *path, const struct msgkind *kind)
{
    uint8_t h[MSGFILE_HEADER];
    struct stat st;
    uint32_t version;
    size_t got;
    r->path = path;
    r->kind = kind;
    r->read = 0;
    r->f = fopen(path, "rb");
    if (!r->f)
        return sys_fail(path);
    if (fstat(fileno(r->f), &st) != 0) {
        sys_fail(path);
        fclose(r->f);
        return CLI_FAIL;
    }
    got = fread(h, 1, sizeof h, r->f);
    if (got != sizeof h || memcmp(h, kind->magic, 8) != 0) {
        cli_error("%s: not a %s file (%s writes them)", path, kind->name, kind->maker);
        fclose(r->f);
        return CLI_FAIL;
    }
    version = get_u32(h + 8);
    if (version != MSGFILE_VERSION) {
        cli_error("%s: %s file version %u, this build reads version %u", path,
                  kind->name, (unsigned)version, MSGFILE_VERSION);
        fclose(r->f);
        return CLI_FAIL;
    }
    r->n = get_u32(h + 12);
    r->left = (uint64_t)st.st_size - sizeof h;
    return CLI_OK;
}

/* The next message in a malloc'd *buf of *len bytes; a length that the
 * file does not hold is refused before anything is allocated. */
static int msg_in_next(struct msg_in *r, uint8_t **buf, size_t *len)
{
    uint8_t l[8];
    uint64_t n;
    *buf = NULL;
    *len = 0;
    if (r->left < 8 || fread(l, 1, 8, r->f) != 8)
        goto short_file;
    r->left -= 8;
    n = (uint64_t)get_u32(l) | (uint64_t)get_u32(l + 4) << 32;
    if (n > r->left || n > (uint64_t)SIZE_MAX - 1)
        goto short_file;
    *buf = (uint8_t *)malloc(n ? (size_t)n : 1);
    if (!*buf) {
        cli_error("out of memory");
        return CLI_FAIL;
    }
    if (fread(*buf, 1, (size_t)n, r->f) != (size_t)n) {
        free(*buf);
        *buf = NULL;
        goto short_file;
    }
    r->left -= n;
    *len = (size_t)n;
    r->read++;
    return CLI_OK;
short_file:
    cli_error("%s: %s %u of %u is cut short (a damaged file, or one still being written)",
              r->path, r->kind->name, (unsigned)r->read + 1, (unsigned)r->n);
    return CLI_FAIL;
}

/* Closes the file; after its last message, bytes left over are refused. */
static int msg_in_close(struct msg_in *r, int check_end)
{
    int rc = CLI_OK;
    if (check_end && r->left != 0) {
        cli_error("%s: %llu bytes after its %u %ss (a damaged file)", r->path,
                  (unsigned long long)r->left, (unsigned)r->n, r->kind->name);
        rc = CLI_FAIL;
    }
    fclose(r->f);
    return rc;
}

/* ------------------------------------------------------------------------
 * The client's files: its state (loaded and saved as mess query does,
 * cli_client_load / cli_client_save in files.c) and its sealed pending
 * queries.
 * ---------------------------------------------------------------------- */

/* The queries of the query state file qpath, read by client c: *qs (n of
 * them, each freed with mess_query_free, the array with free). */
static int load_queries(const mess_client *c, const char *cpath, const char *qpath,
                        mess_query ***qs, size_t *n)
{
    uint32_t version, role;
    int sealed, rc;
    *qs = NULL;
    errno = 0;
    rc = mess_query_load(c, qpath, NULL, 0, n);
    if (rc == MESS_ELIMIT) {
        *qs = (mess_query **)calloc(*n, sizeof **qs);
        if (!*qs) {
            cli_error("out of memory");
            return CLI_FAIL;
        }
        rc = mess_query_load(c, qpath, *qs, *n, n);
    }
    if (rc == MESS_OK)
        return CLI_OK;
    free(*qs);
    *qs = NULL;
    if (rc == MESS_EAUTH)
        cli_error("%s: the query state does not open with client '%s' (made by "
                  "another client, or changed since)", qpath, cpath);
    else if (rc == MESS_EPARAM)
        cli_error("%s: the query state was made for other parameters than client "
                  "'%s''s", qpath, cpath);
    else if (rc == MESS_EROLE)
        cli_error("%s: not a query state file (a client or server state file; "
                  "mess request --state writes them)", qpath);
    else if (rc == MESS_EVERSION &&
             mess_state_file_peek(qpath, &version, &role, &sealed) == MESS_OK &&
             version >= MESS_STATE_FILE_VERSION_MIN && version <= MESS_STATE_FILE_VERSION)
        cli_error("%s: query state of another format version (this build reads "
                  "version %u): make the requests again with this build", qpath,
                  (unsigned)mess_query_state_version());
    else
        cli_fail("cannot load query state", qpath, rc);
    return CLI_FAIL;
}

static void free_queries(mess_query **qs, size_t n)
{
    size_t i;
    for (i = 0; qs && i < n; i++)
        mess_query_free(qs[i]);
    free(qs);
}

/* ------------------------------------------------------------------------
 * mess request
 * ---------------------------------------------------------------------- */

static const char request_help[] =
    "usage: mess request --client C --query FILE --pool B --out REQ --state QS\n"
    "                    [--passphrase-env V]\n"
    "\n"
    "The client's half of a query in the two-party flow as files: makes the\n"
    "request of every query of FILE (.fvecs or .bvecs) with a total candidate\n"
    "pool of B, writes the requests to REQ for `mess search` on the server's\n"
    "host (nothing in REQ is secret) and the pending queries to QS, sealed under\n"
    "a key of client C: QS holds the clean queries, so it stays with the\n"
    "client (mode 0600).  `mess finish --state QS` reads it back, in another\n"
    "process, after a restart too.  Only client C opens QS.\n"
    "\n"
    "The client file is written as by mess query: never for a production\n"
    "client; after its requests for a deterministic (--seed) one, whose\n"
    "operation counter moves (refused before any request if it cannot be).\n"
    "Last line: {\"queries\",\"pool\",\"request_bytes\" (each),\"state_bytes\",\n"
    "\"client_ms_per_query\"}.\n";

int cli_cmd_request(int argc, char **argv)
{
    struct cli_args a;
    const char *cpath, *file, *rpath, *qpath;
    long pool;
    mess_client *c = NULL;
    mess_query **qs = NULL;
    mess_params p;
    float *x = NULL;
    uint8_t *reqs = NULL;
    size_t n = 0, dim, i, req_len = 0, made = 0;
    struct msg_out out;
    struct stat st;
    double t0;
    int rc, requested = 0;

    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(request_help, stdout);
        return CLI_OK;
    }
    cpath = cli_opt(&a, "--client");
    file = cli_opt(&a, "--query");
    rpath = cli_opt(&a, "--out");
    qpath = cli_opt(&a, "--state");
    if (cli_opt_long(&a, "--pool", 1, (long)MESS_MAX_BUDGET * MESS_MAX_SHARDS, 0, &pool))
        return CLI_USAGE;
    cli_opt(&a, "--passphrase-env");
    if (!cpath || !file || !rpath || !qpath || pool == 0) {
        char miss[64] = "";
        if (!cpath)
            strcat(miss, " --client");
        if (!file)
            strcat(miss, " --query");
        if (pool == 0)
            strcat(miss, " --pool");
        if (!rpath)
            strcat(miss, " --out");
        if (!qpath)
            strcat(miss, " --state");
        cli_error("request needs --client, --query, --pool, --out and --state; "
                  "missing:%s (see --help)", miss);
        return CLI_USAGE;
    }
    if (cli_check_unused(&a))
        return CLI_USAGE;
    rc = cli_read_vectors(file, "queries", &x, &n, &dim);
    if (rc != CLI_OK)
        return rc;
    if (n > UINT32_MAX) { /* the reader gives at least one row */
        cli_error("'%s' holds %zu queries; a request file holds at most 4294967295",
                  file, n);
        mess_vecs_free(x);
        return CLI_FAIL;
    }
    rc = cli_client_load_to_save(&a, cpath, &c, 0); /* deterministic: saved */
    if (rc != CLI_OK)
        goto done;
    mess_client_params(c, &p);
    if (dim != p.dim) {
        cli_error("'%s' has dimension %zu, the index expects %u", file, dim, p.dim);
        rc = CLI_FAIL;
        goto done;
    }
    /* as mess query (issue 13 item 7): a deterministic client is saved
     * after its requests, so one that cannot be is refused before them */
    if (mess_client_is_deterministic(c) && cli_save_possible(cpath)) {
        cli_error("%s: a deterministic (--seed) client is saved after its requests "
                  "(its operation counter moves) and this one cannot be; refused "
                  "before making any (a production client needs no write access)",
                  cpath);
        rc = CLI_FAIL;
        goto done;
    }
    req_len = mess_request_size(&p);
    qs = (mess_query **)calloc(n, sizeof *qs);
    reqs = (uint8_t *)malloc(n * req_len);
    if (!qs || !reqs) {
        cli_error("out of memory");
        rc = CLI_FAIL;
        goto done;
    }
    t0 = cli_wall_s();
    for (i = 0; i < n; i++) {
        size_t len;
        rc = mess_client_request_into(c, x + i * dim, (size_t)pool, &qs[i],
                                      reqs + i * req_len, req_len, &len);
        if (rc == MESS_EINVAL && cli_zero_row(file, x, i, dim, p.metric)) {
            rc = CLI_FAIL;
            goto done;
        }
        if (rc != MESS_OK) {
            rc = cli_fail("client request", NULL, rc);
            goto done;
        }
        requested = 1;
        made = i + 1;
    }
    t0 = cli_wall_s() - t0;
    /* the secret half first: requests without their state are of no use */
    errno = 0;
    rc = mess_query_save(c, (const mess_query *const *)qs, n, qpath);
    if (rc != MESS_OK) {
        rc = cli_fail("cannot write query state", qpath, rc);
        goto done;
    }
    rc = msg_out_begin(&out, rpath, &requests, (uint32_t)n);
    for (i = 0; rc == CLI_OK && i < n; i++)
        rc = msg_out_put(&out, reqs + i * req_len, req_len);
    if (rc == CLI_OK || out.f)
        rc = msg_out_end(&out, rc == CLI_OK);
    if (rc != CLI_OK)
        goto done;
    if (mess_client_is_deterministic(c)) {
        requested = 0;
        rc = cli_client_save(&a, c, cpath);
        if (rc != CLI_OK)
            goto done;
    }
    printf("{\"queries\":%zu,\"pool\":%ld,\"request_bytes\":%zu,\"state_bytes\":%lld,"
           "\"client_ms_per_query\":%.4f}\n",
           n, pool, req_len, stat(qpath, &st) == 0 ? (long long)st.st_size : -1LL,
           1e3 * t0 / (double)n);
    rc = CLI_OK;
done:
    /* an error after a request: a deterministic client still saves its
     * counter, as mess query does */
    if (requested && c && mess_client_is_deterministic(c) &&
        cli_client_save(&a, c, cpath) != CLI_OK && rc == CLI_OK)
        rc = CLI_FAIL;
    free_queries(qs, made);
    free(reqs);
    mess_vecs_free(x);
    mess_client_free(c);
    return rc;
}

/* ------------------------------------------------------------------------
 * mess search
 * ---------------------------------------------------------------------- */

static const char search_help[] =
    "usage: mess search --server S --request REQ --out RESP [--threads N]\n"
    "                   [--ef-search E] [--layout L]\n"
    "\n"
    "The server's half of the two-party flow as files: answers every request\n"
    "of REQ (made by mess request) with the server directory S and writes the\n"
    "responses to RESP, for `mess finish` on the client's host.  Needs no\n"
    "client file and nothing secret: run it on the host that holds S.  A\n"
    "request of a client other than the server's owner, or made for other\n"
    "parameters, is refused (nothing written).\n"
    "\n"
    "  --threads N     threads of the fan-out over shards (1)\n"
    "  --ef-search E   the per-shard search beam for this run, as in mess query\n"
    "  --layout L      the search layout, default or codes, as in mess query\n"
    "Last line: {\"queries\",\"mean_request_bytes\",\"mean_response_bytes\",\n"
    "\"server_ms_per_query\"}.\n";

int cli_cmd_search(int argc, char **argv)
{
    struct cli_args a;
    const char *spath, *rpath, *opath;
    long threads, efs;
    int layout;
    mess_server *s = NULL;
    struct msg_in in;
    struct msg_out out;
    double req_b = 0, resp_b = 0, t_srv = 0;
    uint32_t i;
    int rc;

    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(search_help, stdout);
        return CLI_OK;
    }
    spath = cli_opt(&a, "--server");
    rpath = cli_opt(&a, "--request");
    opath = cli_opt(&a, "--out");
    if (cli_opt_long(&a, "--threads", 1, 256, 1, &threads) ||
        cli_opt_long(&a, "--ef-search", 0, MESS_MAX_EF, -1, &efs) ||
        cli_layout_opt(&a, &layout) != CLI_OK)
        return CLI_USAGE;
    if (!spath || !rpath || !opath) {
        cli_error("search needs --server, --request and --out (see --help)");
        return CLI_USAGE;
    }
    if (cli_check_unused(&a))
        return CLI_USAGE;
    if (msg_in_open(&in, rpath, &requests) != CLI_OK)
        return CLI_FAIL;
    if (cli_server_open(spath, NULL, NULL, &s) != CLI_OK) {
        msg_in_close(&in, 0);
        return CLI_FAIL;
    }
    if (efs >= 0)
        mess_server_set_ef_search(s, (uint32_t)efs);
    if (cli_server_layout(s, layout, spath) != CLI_OK) {
        mess_server_free(s);
        msg_in_close(&in, 0);
        return CLI_FAIL;
    }
    rc = msg_out_begin(&out, opath, &responses, in.n);
    for (i = 0; rc == CLI_OK && i < in.n; i++) {
        uint8_t *req, *resp;
        size_t len, resp_len;
        double t;
        rc = msg_in_next(&in, &req, &len);
        if (rc != CLI_OK)
            break;
        t = cli_wall_s();
        rc = mess_server_search(s, req, len, (unsigned)threads, &resp, &resp_len);
        t_srv += cli_wall_s() - t;
        free(req);
        if (rc == MESS_EOWNER) {
            cli_error("%s: request %u was made by a client that is not the owner of "
                      "server '%s' (its requests are refused)", rpath, (unsigned)i + 1,
                      spath);
        } else if (rc == MESS_EPARAM || rc == MESS_EFORMAT || rc == MESS_EVERSION) {
            cli_error("%s: request %u is not a request server '%s' can answer: %s",
                      rpath, (unsigned)i + 1, spath, mess_strerror(rc));
        } else if (rc != MESS_OK) {
            if (cli_server_unusable(s, spath) == CLI_OK)
                cli_fail("server search", NULL, rc);
        } else {
            req_b += (double)len;
            resp_b += (double)resp_len;
            rc = msg_out_put(&out, resp, resp_len);
            mess_buf_free(resp);
            continue;
        }
        rc = CLI_FAIL;
    }
    if (rc == CLI_OK)
        rc = msg_in_close(&in, 1);
    else
        msg_in_close(&in, 0);
    if (rc == CLI_OK || out.f)
        rc = msg_out_end(&out, rc == CLI_OK);
    if (rc == CLI_OK)
        printf("{\"queries\":%u,\"mean_request_bytes\":%.1f,\"mean_response_bytes\":%.1f,"
               "\"server_ms_per_query\":%.4f}\n",
               (unsigned)in.n, in.n ? req_b / in.n : 0.0, in.n ? resp_b / in.n : 0.0,
               in.n ? 1e3 * t_srv / in.n : 0.0);
    mess_server_free(s);
    return rc;
}

/* ------------------------------------------------------------------------
 * mess finish
 * ---------------------------------------------------------------------- */

static const char finish_help[] =
    "usage: mess finish --client C --state QS --response RESP -k K [options]\n"
    "\n"
    "The client's last step of the two-party flow as files: finishes every\n"
    "query of QS (mess request) with its response in RESP (mess search):\n"
    "authenticates and decrypts the entries, reranks exactly and keeps the\n"
    "best K, as mess query does, in another process than the request's (after\n"
    "a restart too).  A response that answers another request (another run\n"
    "of mess request, or another QS), a QS of another client and a RESP of\n"
    "another length are refused, and nothing is written.\n"
    "\n"
    "  -k K            results per query (10)\n"
    "  --out F         the top-k ids per query, as mess query --out writes\n"
    "                  them: F.ivecs or F.u64vecs\n"
    "  --gt F          ground truth (.ivecs or .u64vecs): also report recall@k\n"
    "  --threads N     threads opening response entries (1)\n"
    "  --verify-all    authenticate every entry, not one copy per id\n"
    "  --passphrase-env V  the client file's passphrase in $V\n"
    "The client file is only read.  Last line: mess query's, without\n"
    "\"pool\" and \"server_ms_per_query\" (mess request and mess search print\n"
    "them); \"client_ms_per_query\" is the finish alone.\n";

int cli_cmd_finish(int argc, char **argv)
{
    struct cli_args a;
    const char *cpath, *qpath, *rpath, *outp, *gtp;
    long k, threads;
    mess_client *c = NULL;
    mess_query **qs = NULL;
    mess_params p;
    struct msg_in in;
    int in_open = 0, verify_all, rc;
    uint64_t *gt = NULL, *ids = NULL;
    float *dists = NULL;
    struct cli_tally tl;
    size_t n = 0, i;
    double t_cli = 0;

    memset(&tl, 0, sizeof tl); /* freed at done, also before cli_tally_init */
    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(finish_help, stdout);
        return CLI_OK;
    }
    cpath = cli_opt(&a, "--client");
    qpath = cli_opt(&a, "--state");
    rpath = cli_opt(&a, "--response");
    outp = cli_opt(&a, "--out");
    gtp = cli_opt(&a, "--gt");
    if (cli_opt_long(&a, "-k", 1, 100000, 10, &k) ||
        cli_opt_long(&a, "--threads", 1, 256, 1, &threads))
        return CLI_USAGE;
    cli_opt(&a, "--passphrase-env");
    verify_all = cli_flag(&a, "--verify-all");
    if (!cpath || !qpath || !rpath) {
        cli_error("finish needs --client, --state and --response (see --help)");
        return CLI_USAGE;
    }
    if (cli_check_unused(&a))
        return CLI_USAGE;
    if (outp && cli_ids_ext(outp, "--out"))
        return CLI_USAGE;
    rc = cli_client_load(&a, cpath, &c);
    if (rc != CLI_OK)
        return rc;
    mess_client_params(c, &p);
    mess_client_set_threads(c, (unsigned)threads);
    mess_client_set_verify_all(c, verify_all);
    rc = load_queries(c, cpath, qpath, &qs, &n);
    if (rc != CLI_OK)
        goto done;
    rc = cli_tally_init(&tl, n, k, gtp, &gt);
    if (rc != CLI_OK)
        goto done;
    if (msg_in_open(&in, rpath, &responses) != CLI_OK) {
        rc = CLI_FAIL;
        goto done;
    }
    in_open = 1;
    if (in.n != n) {
        cli_error("%s holds %u responses and %s %zu queries: not the answers to "
                  "these requests", rpath, (unsigned)in.n, qpath, n);
        rc = CLI_FAIL;
        goto done;
    }
    ids = (uint64_t *)malloc((size_t)k * sizeof *ids);
    dists = (float *)malloc((size_t)k * sizeof *dists);
    if (!ids || !dists) {
        cli_error("out of memory");
        rc = CLI_FAIL;
        goto done;
    }
    for (i = 0; i < n; i++) {
        uint8_t *resp;
        size_t len, got;
        mess_finish_stats st;
        double t;
        rc = msg_in_next(&in, &resp, &len);
        if (rc != CLI_OK)
            goto done;
        t = cli_wall_s();
        rc = mess_client_finish(c, qs[i], resp, len, (size_t)k, ids, dists, &got, &st);
        t_cli += cli_wall_s() - t;
        free(resp);
        if (rc == MESS_EAUTH) {
            cli_error("%s: response %zu does not answer request %zu of %s, or its "
                      "entries fail authentication (a response to another mess "
                      "request run, or forged); nothing written", rpath, i + 1, i + 1,
                      qpath);
            rc = CLI_FAIL;
            goto done;
        }
        if (rc != MESS_OK) {
            cli_error("%s: response %zu cannot be read: %s", rpath, i + 1,
                      mess_strerror(rc));
            rc = CLI_FAIL;
            goto done;
        }
        cli_tally_add(&tl, i, ids, got, &st, 0, len);
    }
    in_open = 0;
    if ((rc = msg_in_close(&in, 1)) != CLI_OK)
        goto done;
    if (outp && (rc = cli_write_ids(outp, "--out", tl.out, n, (size_t)k)) != CLI_OK)
        goto done;
    printf("{\"queries\":%zu,\"k\":%ld,\"mean_request_bytes\":%.1f,"
           "\"mean_response_bytes\":%.1f,\"mean_bytes_per_query\":%.1f,"
           "\"mean_candidates\":%.2f,\"mean_unique_candidates\":%.2f,"
           "\"client_ms_per_query\":%.4f,\"auth_failures\":%zu,\"unopened\":%zu",
           n, k, (double)mess_request_size(&p), tl.resp_b / (double)n,
           (double)mess_request_size(&p) + tl.resp_b / (double)n, tl.cand / (double)n,
           tl.uniq / (double)n, 1e3 * t_cli / (double)n, tl.auth, tl.unopened);
    if (gt)
        printf(",\"recall\":%.4f", cli_tally_recall(&tl));
    printf("}\n");
    rc = CLI_OK;
done:
    if (in_open)
        msg_in_close(&in, 0);
    free_queries(qs, n);
    free(gt);
    free(ids);
    free(dists);
    free(tl.out);
    mess_client_free(c);
    return rc;
}
