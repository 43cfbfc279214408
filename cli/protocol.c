/*
 * protocol.c - `mess init | insert | query | delete | compact | info`: the
 * protocol driven from files, one process playing both roles.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../mess.h"
#include "cli.h"

static void progress(const char *what, size_t done, size_t total)
{
    if (isatty(2))
        fprintf(stderr, "\r%s %zu/%zu", what, done, total);
    if (isatty(2) && done == total)
        fputc('\n', stderr);
}

/* ------------------------------------------------------------------------ */

static const char init_help[] =
    "usage: mess init --client C --server S --train FILE [options]\n"
    "       mess init --client C --server S --train FILE --sample FILE\n"
    "                 (--target-recall R | --max-bytes N) [--queries FILE] [options]\n"
    "\n"
    "Creates a client state (secret: keys, per-shard IsoHash) and\n"
    "an empty server directory S (new, or empty) for the same public parameters.  FILE (.fvecs or\n"
    ".bvecs) trains the hashes; it should be public data or data outside the\n"
    "protected set (the privacy analysis treats the hash as fixed).  The codes\n"
    "are made from the vectors as given: embeddings compared by angle should\n"
    "be normalised to length 1 before init, insert and query, and a hint on\n"
    "stderr says so when FILE's norms spread (README.md, \"Defaults\").\n"
    "C is a new file: the only copy of the keys S's entries will be sealed\n"
    "under, so init never replaces one.  Anything at C (a file, a symlink)\n"
    "is refused before the training, exit 1, and the file is created\n"
    "without replacing anything, so of two inits racing for C one fails.\n"
    "With no payload option a .bvecs FILE chooses u8 payloads, one exact byte\n"
    "per component (152 bytes an entry at 128 dimensions, 536 as f32): the\n"
    "vectors inserted must then be integers in [0, 255].\n"
    "\n"
    "Parameters from the data (instead of giving M, t, kappa and the\n"
    "flips): mess_plan_choose searches M 16,32,64, t 4,8,16, kappa\n"
    "64,128 at privacy no weaker than the paper's limits (mess plan\n"
    "--target-recall --help states them), predicts each one's recall on the\n"
    "sample (the conditional model with the search check) and prints the\n"
    "candidates, the choice, the limit that set its flips and the B to give\n"
    "mess query --pool (also \"pool\" in the last line).  Without --payload\n"
    "the encoding is chosen too: u8 when the sample is bytes, else f16 or i8\n"
    "when their decoded vectors keep the sample's exact top-k (payload recall\n"
    "times the model's reaches the target), else f32.  A target no candidate\n"
    "reaches is refused (exit 1) naming the best reachable recall.\n"
    "  --target-recall R   the fewest bytes per query reaching Recall@k R\n"
    "  --max-bytes N       ... or the highest predicted recall within N bytes\n"
    "  --sample FILE       vectors like those to be stored, ideally as many\n"
    "                      (recall at a pool falls as the data grow)\n"
    "  --queries FILE      sample queries (default: the sample's last\n"
    "                      --holdout rows, 200, at most a fifth, with their\n"
    "                      exact top-k computed here)\n"
    "  --pools LIST        B values (100,175,250,375,500,750,1000,1250,1500,\n"
    "                      2000,2500,3000,4000)\n"
    "  -k K, --grid-shards, --grid-per-item, --grid-bits, --max-xi*,\n"
    "  --check-shards: as for mess plan --target-recall (10; 16,32,64; 4,8,16;\n"
    "                      64,128; the defaults' limits; 4)\n"
    "\n";

static const char init_help_tail[] =
    "  --seed-env V        deterministic mode: the 32-byte seed as 64 hex digits in $V\n"
    "  --seed-file F       ... or in file F (never on the command line: the seed is\n"
    "                      the master key; for reproducible experiments only)\n"
    "  --threads N         worker threads (1)\n"
    "  --passphrase-env V  seal the client file with the passphrase in $V\n"
    "  --force             an existing C is moved to C.replaced-YYYYmmddTHHMMSS\n"
    "                      (local time; .2, .3, ... if taken: nothing is\n"
    "                      overwritten), the name is printed, then the new C is\n"
    "                      written; S must still be new or empty\n";

int cli_cmd_init(int argc, char **argv)
{
    struct cli_args a;
    const char *cpath, *spath, *train, *pass;
    char *kept = NULL; /* --force: where the old client file went */
    long threads;
    uint8_t seed[32];
    int have_seed, force, payload_named, choosing;
    mess_params p;
    mess_client *c = NULL;
    mess_server *s = NULL;
    size_t n = 0, pool = 0, i;
    double t0, predicted = 0;
    int rc;

    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(init_help, stdout);
        cli_params_help(stdout, 1);
        fputs(init_help_tail, stdout);
        return CLI_OK;
    }
    cpath = cli_opt(&a, "--client");
    spath = cli_opt(&a, "--server");
    train = cli_opt(&a, "--train");
    force = cli_flag(&a, "--force");
    payload_named = cli_opt(&a, "--payload") != NULL;
    if (cli_seed(&a, seed, &have_seed, 1))
        return CLI_USAGE;
    if (!cpath || !spath || !train) {
        cli_error("init needs --client, --server and --train (see --help)");
        return CLI_USAGE;
    }
    /* the configuration from a sample (init_choose.c) reads its options
     * after the checks below: here they only count as used */
    choosing = cli_opt(&a, "--target-recall") || cli_opt(&a, "--max-bytes");
    for (i = 0; choosing && cli_init_choose_opts[i]; i++)
        cli_opt(&a, cli_init_choose_opts[i]);
    if (cli_params_options(&a, 1, &p) ||
        cli_opt_long(&a, "--threads", 1, 256, 1, &threads) ||
        cli_passphrase(&a, &pass) || cli_check_unused(&a))
        return CLI_USAGE;
    /* byte data is stored as its bytes unless the user names an encoding
     * (issue 31: f32 sent 3.5x the bytes for the same recall); a choice
     * from a sample decides from the sample's values */
    if (!payload_named && !choosing && cli_has_suffix(train, ".bvecs"))
        p.payload = MESS_PAYLOAD_U8;
    /* before the training and before the client file is written: an
     * existing server is never replaced (its client would be lost) */
    if (cli_server_fresh(spath) != CLI_OK)
        return CLI_FAIL;
    /* nor is a client file (issue 29: a second init replaced the first
     * one's keys, and its server was lost) */
    if (!force && cli_client_fresh(cpath) != CLI_OK)
        return CLI_FAIL;
    /* with --force, the file it moves aside is locked as a save locks it:
     * an insert or delete using it would otherwise save it over the new
     * one after this init, leaving the new server without its keys */
    if (force && cli_client_lock(cpath) != CLI_OK)
        return CLI_FAIL;
    t0 = cli_wall_s();
    if (choosing) {
        rc = cli_init_choose(&a, train, payload_named, have_seed ? seed : NULL, threads, &p,
                             &pool, &predicted);
        if (rc != CLI_OK)
            return rc;
    }
    rc = cli_train_client(train, &p, have_seed ? seed : NULL, threads, &c, &n);
    if (rc != CLI_OK)
        return rc;
    if (force && cli_keep_replaced(cpath, &kept) != CLI_OK) {
        mess_client_free(c);
        return CLI_FAIL;
    }
    errno = 0;
    rc = mess_client_save_new(c, cpath, pass, pass ? strlen(pass) : 0);
    mess_client_free(c);
    if (rc == MESS_EEXIST) { /* made while this one trained */
        free(kept);
        return cli_client_exists(cpath);
    }
    if (rc != MESS_OK) {
        rc = cli_fail("cannot write client state", cpath, rc);
        cli_undo_init(cpath, 0, kept);
        free(kept);
        return rc;
    }
    errno = 0;
    rc = mess_server_create(spath, &p, &s);
    if (rc != MESS_OK) {
        cli_error("cannot create server directory '%s': %s", spath,
                  rc == MESS_EEXIST ? "it exists and is not empty (made while init trained)"
                  : rc == MESS_EIO && errno ? strerror(errno) : mess_strerror(rc));
        /* a failed init changes nothing (a mistyped --server once left a
         * new client file, which a second init then refused, and with
         * --force the old one moved aside) */
        cli_undo_init(cpath, 1, kept);
        free(kept);
        return CLI_FAIL;
    }
    free(kept);
    mess_server_free(s);
    printf("{\"dim\":%u,\"shards\":%u,\"per_item\":%u,\"bits\":%u,"
           "\"p_store\":%.6g,\"p_prr\":%.6g,\"p_irr\":%.6g,\"p_query\":%.6g,"
           "\"payload\":\"%s\",\"payload_bytes\":%zu,"
           "\"train\":%zu,\"deterministic\":%s,",
           p.dim, p.shards, p.per_item, p.kappa, p.p_store, p.p_prr, p.p_irr,
           mess_effective_flip(p.p_prr, p.p_irr), cli_payload_name(p.payload),
           mess_payload_size(&p), n, have_seed ? "true" : "false");
    if (choosing) /* the chosen B, for mess query --pool */
        printf("\"pool\":%zu,\"predicted_recall\":%.6f,", pool, predicted);
    printf("\"seconds\":%.3f}\n", cli_wall_s() - t0);
    return CLI_OK;
}

/* Loads both states; the server must match the client's parameters.
 * saves: 1 (insert, delete: the client file is saved, and locked first),
 * 0 (query: saved, and locked, only when deterministic);
 * cli_client_load_to_save. */
static int load_both(struct cli_args *a, const char *cpath, const char *spath,
                     mess_client **c, mess_server **s, int saves)
{
    mess_params p;
    int rc;
    *s = NULL;
    rc = cli_client_load_to_save(a, cpath, c, saves);
    if (rc != CLI_OK)
        return rc;
    mess_client_params(*c, &p);
    if (cli_server_open(spath, &p, cpath, s) != CLI_OK) {
        mess_client_free(*c);
        *c = NULL;
        return CLI_FAIL;
    }
    /* Before any work: a server another client has written into would
     * refuse every buffer of this one (MESS_EOWNER). */
    {
        uint8_t tag[MESS_OWNER_BYTES];
        mess_client_owner(*c, tag);
        if (mess_server_check_owner(*s, tag) == MESS_EOWNER) {
            cli_error("server state '%s': this server belongs to another client "
                      "(not to '%s')", spath, cpath);
            mess_client_free(*c);
            mess_server_free(*s);
            *c = NULL;
            *s = NULL;
            return CLI_FAIL;
        }
    }
    return CLI_OK;
}

/* Insert and delete save the client file once the server applied their
 * buffers (it records the generations of ids deleted or inserted again):
 * a file that cannot be saved is refused before any change, as the
 * server would otherwise hold what the client does not know of. */
static int client_unsaveable(const char *cpath, const char *what)
{
    if (cli_save_possible(cpath) == 0)
        return 0;
    cli_error("%s: %s saves the client file after the server applies it, and this one "
              "cannot be saved; refused before changing anything", cpath, what);
    return 1;
}

/* Insert and delete save the client, then checkpoint what they applied;
 * each applied buffer is in the server's log already (fdatasync'd before
 * the call returned), so when either fails (a full disk, a read-only
 * directory) none of it is lost, and saying only "it keeps its last
 * checkpoint" read as if it were. */
static void say_durable(const char *spath)
{
    cli_error("what this command applied is durable all the same: it is in the "
              "write-ahead log of '%s', which every open replays; `mess checkpoint "
              "--server %s` writes it once the cause is fixed",
              spath, spath);
}

/* The client's save failed after the server applied the buffers (a cause
 * the check before could not see: a full disk, a file-size limit): the
 * server keeps them, but the file does not record the generations they
 * moved, and no command of the server's repairs that. */
static void say_client_behind(const char *spath, const char *cpath)
{
    cli_error("the write-ahead log of '%s' holds what this command applied, but client "
              "file '%s' could not record it and keeps its last save: the entries of ids "
              "this command deleted or inserted again will not open with it",
              spath, cpath);
}

/* The client first (cli_client_save reads the passphrase: CLI_USAGE
 * before anything is written), then the server's checkpoint. */
static int save_both(struct cli_args *a, const mess_client *c, const char *cpath,
                     mess_server *s, const char *spath)
{
    int rc;
    if (c) {
        rc = cli_client_save(a, c, cpath);
        if (rc == CLI_FAIL && s)
            say_client_behind(spath, cpath);
        if (rc != CLI_OK)
            return rc;
    }
    if (s) {
        int err;
        errno = 0;
        rc = mess_server_checkpoint(s);
        err = errno;
        if (rc != MESS_OK) {
            cli_server_failed(spath, rc, err);
            if (rc == MESS_EIO)
                say_durable(spath);
            return CLI_FAIL;
        }
    }
    return CLI_OK;
}

static const char insert_help[] =
    "usage: mess insert --client C --server S FILE [--first-id N] [--threads N]\n"
    "                   [--batch N] [--resume]\n"
    "\n"
    "Inserts the vectors of FILE (.fvecs or .bvecs) with ids N, N+1, ... in\n"
    "file order: the client hashes, perturbs and encrypts them into upload\n"
    "buffers of --batch items (10000), the server applies them.  Both states\n"
    "are saved.  Last line: {\"items\",\"entries\",\"upload_bytes\",\"seconds\",...}.\n"
    "\n"
    "Each batch the server applies is durable at once (its log) and all or\n"
    "nothing, in file order.  On a failure, or on SIGINT / SIGTERM (it stops\n"
    "after the batch being applied, saves the client and exits 128 + the\n"
    "signal's number), a line on stderr says how many of FILE's items are\n"
    "stored: rows 0 to R-1, ids N to N+R-1.  Then, or after a crash or a kill,\n"
    "run the same command with --resume.\n"
    "\n"
    "  --resume   skip FILE's leading rows already stored: R is the number of\n"
    "             leading rows whose id (N + row) the server stores, each one\n"
    "             checked (encoded as for the insert, which the server only\n"
    "             looks up: nothing changes); rows R, R+1, ... are inserted as\n"
    "             without --resume (a later row's id already stored is refused,\n"
    "             nothing applied).  Last line adds \"skipped\":R.\n";

int cli_cmd_insert(int argc, char **argv)
{
    struct cli_args a;
    const char *cpath, *spath, *file;
    long first, threads, batch;
    mess_client *c;
    mess_server *s;
    mess_params p;
    float *x = NULL;
    uint64_t *ids = NULL;
    size_t n, dim, i, bytes = 0, skip = 0, stored = 0;
    double t0, t_client = 0, t_server = 0, t;
    int rc, err, resume, sig;

    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(insert_help, stdout);
        return CLI_OK;
    }
    cpath = cli_opt(&a, "--client");
    spath = cli_opt(&a, "--server");
    if (cli_opt_long(&a, "--first-id", 0, 0x7fffffffffffffffL, 0, &first) ||
        cli_opt_long(&a, "--threads", 1, 256, 1, &threads) ||
        cli_opt_long(&a, "--batch", 1, 100000000, 10000, &batch))
        return CLI_USAGE;
    resume = cli_flag(&a, "--resume");
    cli_opt(&a, "--passphrase-env"); /* consumed by load_both */
    file = cli_positional(&a, 0);
    if (!cpath || !spath || !file) {
        cli_error("insert needs --client, --server and FILE (see --help)");
        return CLI_USAGE;
    }
    if (cli_check_unused(&a))
        return CLI_USAGE;
    rc = cli_read_vectors(file, "vectors to insert", &x, &n, &dim);
    if (rc != CLI_OK)
        return rc;
    rc = load_both(&a, cpath, spath, &c, &s, 1);
    if (rc != CLI_OK) {
        mess_vecs_free(x);
        return rc;
    }
    mess_client_params(c, &p);
    if (dim != p.dim) {
        cli_error("'%s' has dimension %zu, the index expects %u", file, dim, p.dim);
        rc = CLI_FAIL;
        goto done;
    }
    if (client_unsaveable(cpath, "insert")) {
        rc = CLI_FAIL;
        goto done;
    }
    ids = (uint64_t *)malloc((n ? n : 1) * sizeof *ids);
    if (!ids) {
        rc = cli_fail("insert", NULL, MESS_ENOMEM);
        goto done;
    }
    for (i = 0; i < n; i++)
        ids[i] = (uint64_t)first + i;
    if (resume && cli_stored_prefix(c, s, x, n, dim, (uint64_t)first, (size_t)batch,
                                    (unsigned)threads, file, &skip, NULL) != CLI_OK) {
        rc = CLI_FAIL;
        goto done;
    }
    stored = skip;
    /* SIGINT / SIGTERM: stop between batches, say how many are stored */
    cli_stop_catch();
    t0 = cli_wall_s();
    for (i = skip; i < n && !cli_stop_requested(); i += (size_t)batch) {
        size_t m = n - i < (size_t)batch ? n - i : (size_t)batch, len;
        uint8_t *buf;
        t = cli_wall_s();
        rc = mess_client_upload(c, ids + i, x + i * dim, m, (unsigned)threads, &buf, &len);
        t_client += cli_wall_s() - t;
        if (rc == MESS_EINVAL) {
            /* ids are distinct: a vector has a NaN or an infinity, is
             * zero under cosine, or (u8 payloads) has a component that is
             * not a byte */
            size_t r, e;
            for (r = i; r < i + m; r++)
                if (cli_zero_row(file, x, r, dim, p.metric)) {
                    rc = CLI_FAIL;
                    goto stopped;
                }
            for (r = i; r < i + m; r++)
                for (e = 0; e < dim; e++) {
                    float v = x[r * dim + e];
                    if (!isfinite(v)) {
                        cli_error("'%s' row %zu: component %zu is %s; vectors must be finite",
                                  file, r, e, isnan(v) ? "NaN" : "infinite");
                        rc = CLI_FAIL;
                        goto stopped;
                    }
                    if (p.payload == MESS_PAYLOAD_U8 &&
                        !(v >= 0.0f && v <= 255.0f && v == floorf(v))) {
                        cli_error("'%s' row %zu: component %zu is %.9g; the index stores "
                                  "u8 payloads, which hold integers in [0, 255] only "
                                  "(init with --payload f32, f16 or i8 for other data)",
                                  file, r, e, (double)v);
                        rc = CLI_FAIL;
                        goto stopped;
                    }
                }
        }
        if (rc != MESS_OK) {
            rc = cli_fail("client upload", NULL, rc);
            goto stopped;
        }
        t = cli_wall_s();
        errno = 0;
        rc = mess_server_apply_upload(s, buf, len, (unsigned)threads);
        err = errno;
        t_server += cli_wall_s() - t;
        mess_buf_free(buf);
        bytes += len;
        if (rc != MESS_OK) {
            if (cli_server_unusable(s, spath) != CLI_OK)
                ; /* said: a shard's delta chain */
            else if (rc == MESS_EIO || rc == MESS_EBUSY ||
                     (rc == MESS_ESTATE && err == ESTALE))
                /* its write-ahead log cannot be written, another process
                 * holds the writer claim, or changed it since the open */
                cli_server_failed(spath, rc, err);
            else if (rc == MESS_ESTATE)
                cli_error("server refused the upload: an id in [%zu, %zu) is already stored"
                          "%s", (size_t)first + i, (size_t)first + i + m,
                          resume ? "" : " (after an interrupted insert, --resume skips "
                                        "the rows stored)");
            else
                cli_fail("server apply", NULL, rc);
            rc = CLI_FAIL;
            goto stopped;
        }
        stored = i + m; /* durable: the server's log holds the batch */
        /* counted once acknowledged; saved with the client below, before
         * the checkpoint (mess verify --client compares) */
        if (mess_client_note_applied(c, m, 0) != MESS_OK) {
            rc = cli_fail("insert", NULL, MESS_EINVAL);
            goto stopped;
        }
        progress("inserted", i + m, n);
    }
    if ((sig = cli_stop_requested()) != 0) {
        cli_error("interrupted (signal %d) after a whole batch", sig);
        rc = 128 + sig;
        goto stopped;
    }
    t = cli_wall_s() - t0;
    rc = save_both(&a, c, cpath, s, spath);
    if (rc == CLI_OK && resume)
        printf("{\"items\":%zu,\"skipped\":%zu,\"entries\":%zu,\"upload_bytes\":%zu,"
               "\"client_seconds\":%.3f,\"server_seconds\":%.3f,\"seconds\":%.3f,"
               "\"entries_per_s\":%.1f}\n",
               n - skip, skip, (n - skip) * p.per_item, bytes, t_client, t_server, t,
               t > 0 ? (double)((n - skip) * p.per_item) / t : 0.0);
    else if (rc == CLI_OK)
        printf("{\"items\":%zu,\"entries\":%zu,\"upload_bytes\":%zu,"
               "\"client_seconds\":%.3f,\"server_seconds\":%.3f,\"seconds\":%.3f,"
               "\"entries_per_s\":%.1f}\n",
               n, n * p.per_item, bytes, t_client, t_server, t,
               t > 0 ? (double)(n * p.per_item) / t : 0.0);
    goto done;
stopped:
    /* what the server applied stays (its log); the client is saved too,
     * since an upload changes it (the generation of an id inserted again),
     * before cli_insert_stored's probes encode rows it did not apply */
    if (stored > skip && save_both(&a, c, cpath, NULL, spath) != CLI_OK)
        rc = CLI_FAIL;
    cli_insert_stored(c, s, x, dim, (size_t)batch, (unsigned)threads, file, spath,
                      (uint64_t)first, stored, n);
done:
    free(ids);
    mess_vecs_free(x);
    mess_client_free(c);
    mess_server_free(s);
    return rc;
}

int cli_tally_init(struct cli_tally *t, size_t n, long k, const char *gtp, uint64_t **gt)
{
    size_t gn = 0;
    memset(t, 0, sizeof *t);
    t->n = n;
    t->k = (size_t)k;
    *gt = NULL;
    if (gtp) {
        int rc = cli_read_ids(gtp, "--gt", gt, &gn, &t->gk);
        if (rc != CLI_OK)
            return rc;
        if (gn != n || t->gk < (size_t)k) {
            cli_error("'%s' has %zu rows of %zu ids; need %zu rows of at least %ld",
                      gtp, gn, t->gk, n, k);
            free(*gt);
            *gt = NULL;
            return CLI_FAIL;
        }
        t->gt = *gt;
    }
    t->out = (uint64_t *)calloc(n ? n * (size_t)k : 1, sizeof *t->out);
    if (!t->out) {
        free(*gt);
        *gt = NULL;
        return cli_fail("query", NULL, MESS_ENOMEM);
    }
    return CLI_OK;
}

void cli_tally_add(struct cli_tally *t, size_t i, const uint64_t *ids, size_t got,
                   const mess_finish_stats *st, size_t req_len, size_t resp_len)
{
    size_t j, g, r;
    t->req_b += (double)req_len;
    t->resp_b += (double)resp_len;
    t->cand += (double)st->candidates;
    t->uniq += (double)st->unique;
    t->auth += st->auth_failures;
    t->unopened += st->unopened;
    for (j = 0; j < t->k; j++)
        t->out[i * t->k + j] = j < got ? ids[j] : CLI_NO_ID;
    if (t->gt)
        for (g = 0; g < t->k; g++)
            for (r = 0; r < got; r++)
                if (t->gt[i * t->gk + g] == ids[r]) {
                    t->hits++;
                    break;
                }
}

double cli_tally_recall(const struct cli_tally *t)
{
    return t->n ? (double)t->hits / ((double)t->n * (double)t->k) : 0.0;
}

static const char query_help[] =
    "usage: mess query --client C --server S FILE -k K --pool B [options]\n"
    "\n"
    "Runs every query of FILE through request -> server search -> finish and\n"
    "reports the exact bytes exchanged and the time each side spent.\n"
    "\n"
    "  -k K            results per query (10); at most B results come back, so\n"
    "                  a K above B is warned about\n"
    "  --pool B        total candidate pool over all shards (required), split\n"
    "                  over the client's M shards: 1 .. 65535 x M\n"
    "  --out F         write the top-k ids per query: F.ivecs (int32; refused\n"
    "                  if an id is 2^31 or more; -1 pads a short row) or\n"
    "                  F.u64vecs (uint64 ids; 2^64-1 pads)\n"
    "  --gt F          ground truth (.ivecs or .u64vecs): also report recall@k\n"
    "  --threads N     threads of the server fan-out and of the client's\n"
    "                  opening of response entries (1)\n"
    "  --ef-search E   the server's per-shard search beam for this run,\n"
    "                  ef = max(budget, E), 0..65535 (the server's own value;\n"
    "                  not saved: set it for good with `mess init --ef-search`)\n"
    "  --layout L      the server's search layout: default, or codes (each\n"
    "                  node's neighbours' codes beside its links, built in\n"
    "                  memory at open: 40 M_hnsw bytes more per entry, the\n"
    "                  same responses; mess_server_set_layout)\n"
    "  --verify-all    authenticate every entry, not one copy per id (same\n"
    "                  results; auth_failures then counts every tampered copy)\n"
    "\n"
    "A query's permanent report is a keyed function of the query, so asking\n"
    "it again (after a failure too) redraws only the instantaneous flips.\n"
    "The client file is not written by a production client; a deterministic\n"
    "(--seed) client is saved after its requests, on every exit, so its\n"
    "operation counter never repeats a coin stream.\n"
    "A deterministic client whose directory cannot take the save (read-only\n"
    "file system, no write permission) is refused before any query runs\n"
    "and before --out is written.\n"
    "Last line: {\"queries\",\"k\",\"pool\",\"mean_request_bytes\",\n"
    "\"mean_response_bytes\",\"mean_candidates\",\"mean_unique_candidates\",\n"
    "\"server_ms_per_query\",\"client_ms_per_query\",\"auth_failures\",\n"
    "\"unopened\" (redundant copies not opened),...}.\n";

int cli_cmd_query(int argc, char **argv)
{
    struct cli_args a;
    const char *cpath, *spath, *file, *outp, *gtp;
    long k, pool, threads, efs;
    mess_client *c = NULL;
    mess_server *s = NULL;
    mess_params p;
    float *q = NULL, *dists = NULL;
    uint64_t *gt = NULL, *ids = NULL;
    struct cli_tally tl;
    size_t n, dim, i;
    double t_srv = 0, t_cli = 0;
    int rc, verify_all, requested = 0, layout;

    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(query_help, stdout);
        return CLI_OK;
    }
    cpath = cli_opt(&a, "--client");
    spath = cli_opt(&a, "--server");
    outp = cli_opt(&a, "--out");
    gtp = cli_opt(&a, "--gt");
    if (cli_opt_long(&a, "-k", 1, 100000, 10, &k) ||
        /* the real bound, 65535 x the client's M, is checked once the
         * client is loaded */
        cli_opt_long(&a, "--pool", 1, LONG_MAX, 0, &pool) ||
        cli_opt_long(&a, "--threads", 1, 256, 1, &threads) ||
        cli_opt_long(&a, "--ef-search", 0, MESS_MAX_EF, -1, &efs) ||
        cli_layout_opt(&a, &layout) != CLI_OK)
        return CLI_USAGE;
    cli_opt(&a, "--passphrase-env");
    verify_all = cli_flag(&a, "--verify-all");
    file = cli_positional(&a, 0);
    /* pool 0: --pool not given (a given 0 is out of its range above) */
    if (!cpath || !spath || !file || pool == 0) {
        char miss[40] = "";
        if (!cpath)
            strcat(miss, " --client");
        if (!spath)
            strcat(miss, " --server");
        if (pool == 0)
            strcat(miss, " --pool");
        if (!file)
            strcat(miss, " FILE");
        cli_error("query needs --client, --server, --pool B and FILE; missing:%s "
                  "(see --help)", miss);
        return CLI_USAGE;
    }
    if (cli_check_unused(&a))
        return CLI_USAGE;
    if (outp && cli_ids_ext(outp, "--out"))
        return CLI_USAGE;
    rc = cli_read_vectors(file, "queries", &q, &n, &dim);
    if (rc != CLI_OK)
        return rc;
    rc = cli_tally_init(&tl, n, k, gtp, &gt);
    if (rc != CLI_OK) {
        mess_vecs_free(q);
        return rc;
    }
    rc = load_both(&a, cpath, spath, &c, &s, 0);
    if (rc != CLI_OK)
        goto done;
    mess_client_params(c, &p);
    mess_client_set_threads(c, (unsigned)threads);
    mess_client_set_verify_all(c, verify_all);
    if (efs >= 0)
        mess_server_set_ef_search(s, (uint32_t)efs);
    if (cli_server_layout(s, layout, spath) != CLI_OK) {
        rc = CLI_FAIL;
        goto done;
    }
    /* issue 29: --pool 67107840 (65535 x MESS_MAX_SHARDS) passed the
     * option's check and failed in the request as "size limit exceeded" */
    if ((unsigned long)pool > (unsigned long)MESS_MAX_BUDGET * p.shards) {
        cli_error("--pool: expected an integer in [1, %lu] for this client (%u shards, "
                  "at most %d candidates each), got %ld",
                  (unsigned long)MESS_MAX_BUDGET * p.shards, p.shards, MESS_MAX_BUDGET, pool);
        rc = CLI_USAGE;
        goto done;
    }
    if (k > pool)
        fprintf(stderr, "mess: warning: -k %ld is larger than --pool %ld: a query returns "
                "at most %ld results (the pool bounds its candidates)\n",
                k, pool, pool);
    if (dim != p.dim) {
        cli_error("'%s' has dimension %zu, the index expects %u", file, dim, p.dim);
        rc = CLI_FAIL;
        goto done;
    }
    /* Issue 13 item 7 under D3: a production client is never written by a
     * query, so a read-only one just works; a deterministic client is saved
     * after its requests (the counter moved), so a directory that cannot
     * take the save is refused here, before any request and before --out. */
    if (mess_client_is_deterministic(c) && cli_save_possible(cpath)) {
        cli_error("%s: a deterministic (--seed) client is saved after its queries "
                  "(its operation counter moves) and this one cannot be; refused "
                  "before running any (a production client needs no write access)",
                  cpath);
        rc = CLI_FAIL;
        goto done;
    }
    ids = (uint64_t *)malloc((size_t)k * sizeof *ids);
    dists = (float *)malloc((size_t)k * sizeof *dists);
    if (!ids || !dists) {
        rc = cli_fail("query", NULL, MESS_ENOMEM);
        goto done;
    }
    for (i = 0; i < n; i++) {
        mess_query *qs;
        uint8_t *req, *resp;
        size_t req_len, resp_len, got;
        mess_finish_stats st;
        double t0 = cli_wall_s(), t1, t2;
        rc = mess_client_request(c, q + i * dim, (size_t)pool, &qs, &req, &req_len);
        if (rc == MESS_EINVAL && cli_zero_row(file, q, i, dim, p.metric)) {
            rc = CLI_FAIL;
            goto done;
        }
        if (rc != MESS_OK) {
            rc = cli_fail("client request", NULL, rc);
            goto done;
        }
        requested = 1;
        t1 = cli_wall_s();
        rc = mess_server_search(s, req, req_len, (unsigned)threads, &resp, &resp_len);
        t2 = cli_wall_s();
        mess_buf_free(req);
        if (rc != MESS_OK) {
            mess_query_free(qs);
            if (cli_server_unusable(s, spath) != CLI_OK)
                rc = CLI_FAIL;
            else
                rc = cli_fail("server search", NULL, rc);
            goto done;
        }
        rc = mess_client_finish(c, qs, resp, resp_len, (size_t)k, ids, dists, &got, &st);
        t_cli += (t1 - t0) + (cli_wall_s() - t2);
        t_srv += t2 - t1;
        mess_buf_free(resp);
        mess_query_free(qs);
        if (rc != MESS_OK) {
            rc = cli_fail("client finish", NULL, rc);
            goto done;
        }
        cli_tally_add(&tl, i, ids, got, &st, req_len, resp_len);
        progress("queries", i + 1, n);
    }
    if (outp && (rc = cli_write_ids(outp, "--out", tl.out, n, (size_t)k)) != CLI_OK)
        goto done;
    /* deterministic mode: the counter moved; saved here, before the
     * summary, so a failed save is the command's failure */
    if (mess_client_is_deterministic(c)) {
        requested = 0;
        rc = save_both(&a, c, cpath, NULL, NULL);
        if (rc != CLI_OK)
            goto done;
    }
    printf("{\"queries\":%zu,\"k\":%ld,\"pool\":%ld,\"mean_request_bytes\":%.1f,"
           "\"mean_response_bytes\":%.1f,\"mean_bytes_per_query\":%.1f,"
           "\"mean_candidates\":%.2f,\"mean_unique_candidates\":%.2f,"
           "\"server_ms_per_query\":%.4f,\"client_ms_per_query\":%.4f,"
           "\"auth_failures\":%zu,\"unopened\":%zu",
           n, k, pool, n ? tl.req_b / n : 0.0, n ? tl.resp_b / n : 0.0,
           n ? (tl.req_b + tl.resp_b) / n : 0.0, n ? tl.cand / n : 0.0,
           n ? tl.uniq / n : 0.0, n ? 1e3 * t_srv / n : 0.0,
           n ? 1e3 * t_cli / n : 0.0, tl.auth, tl.unopened);
    if (gt)
        printf(",\"recall\":%.4f", cli_tally_recall(&tl));
    printf("}\n");
    rc = CLI_OK;
done:
    /* an error after a request: a deterministic client still saves its
     * counter (a production client is never written by a query) */
    if (requested && c && mess_client_is_deterministic(c) &&
        save_both(&a, c, cpath, NULL, NULL) != CLI_OK && rc == CLI_OK)
        rc = CLI_FAIL;
    mess_vecs_free(q);
    free(gt);
    free(ids);
    free(dists);
    free(tl.out);
    mess_client_free(c);
    mess_server_free(s);
    return rc;
}

static const char delete_help[] =
    "usage: mess delete --client C --server S --ids ID[,ID...]\n"
    "\n"
    "Marks the items deleted in every shard that holds them (they still route\n"
    "searches but are never returned); `mess compact` removes them.\n"
    "Checked: the list's syntax, and that no id repeats in it.  Not checked,\n"
    "because the client keeps no list of stored ids (only the generations of\n"
    "those it deleted or re-inserted): that an id was ever stored, or is not\n"
    "deleted already.  Such an id is not refused and nothing is said; its\n"
    "delete records match nothing on the server, which counts them in\n"
    "missing_entries (one per shard the id would be in, --per-item of them).\n"
    "Last line: {\"ids\",\"entries\",\"missing_entries\",\"delete_bytes\"}.\n";

int cli_cmd_delete(int argc, char **argv)
{
    struct cli_args a;
    const char *cpath, *spath, *list;
    mess_client *c;
    mess_server *s;
    uint64_t *ids;
    uint8_t *buf;
    size_t n, len, missing;
    mess_params p;
    int rc, err;

    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(delete_help, stdout);
        return CLI_OK;
    }
    cpath = cli_opt(&a, "--client");
    spath = cli_opt(&a, "--server");
    list = cli_opt(&a, "--ids");
    cli_opt(&a, "--passphrase-env");
    if (!cpath || !spath || !list) {
        cli_error("delete needs --client, --server and --ids (see --help)");
        return CLI_USAGE;
    }
    if (cli_check_unused(&a))
        return CLI_USAGE;
    if (cli_parse_list(list, 0, UINT64_MAX, &ids, &n) != 0) {
        cli_error("--ids: expected a comma-separated list of non-negative integers");
        return CLI_USAGE;
    }
    rc = load_both(&a, cpath, spath, &c, &s, 1);
    if (rc != CLI_OK) {
        free(ids);
        return rc;
    }
    if (client_unsaveable(cpath, "delete")) {
        free(ids);
        mess_client_free(c);
        mess_server_free(s);
        return CLI_FAIL;
    }
    rc = mess_client_delete(c, ids, n, &buf, &len);
    if (rc == MESS_OK) {
        errno = 0;
        rc = mess_server_apply_delete(s, buf, len, &missing);
        err = errno;
        mess_buf_free(buf);
        if (rc != MESS_OK && cli_server_unusable(s, spath) != CLI_OK)
            rc = CLI_FAIL;
        else if (rc == MESS_EIO || rc == MESS_EBUSY || (rc == MESS_ESTATE && err == ESTALE))
            rc = cli_server_failed(spath, rc, err); /* its log cannot be written */
    }
    if (rc == CLI_FAIL) {
        /* said above */
    } else if (rc != MESS_OK) {
        rc = rc == MESS_EINVAL ? (cli_error("--ids: an id is repeated"), CLI_USAGE)
                               : cli_fail("delete", NULL, rc);
    } else {
        /* the client too: it records the deleted ids' generations, and
         * counts the ids the server removed (an id it did not hold
         * misses all its per_item entries) for mess verify --client */
        mess_client_params(c, &p);
        rc = mess_client_note_applied(c, 0, n - (p.per_item ? missing / p.per_item : 0));
        if (rc == MESS_OK)
            rc = save_both(&a, c, cpath, s, spath);
        else
            rc = cli_fail("delete", NULL, rc);
        if (rc == CLI_OK)
            printf("{\"ids\":%zu,\"entries\":%zu,\"missing_entries\":%zu,\"delete_bytes\":%zu}\n",
                   n, n * p.per_item, missing, len);
    }
    free(ids);
    mess_client_free(c);
    mess_server_free(s);
    return rc;
}

static const char compact_help[] =
    "usage: mess compact --server S [--threads N]\n"
    "\n"
    "Rebuilds every shard without its deleted entries and writes them as the\n"
    "server directory's next generation.\n";

/* The pool of info's byte figures unless --pool says: the total pool of
 * the paper's evaluation and of the docs' figures. */
#define INFO_POOL 1500

/* The bytes a query moves at pool B (request + response with every budget
 * filled: mess_response_size), for these parameters and for each payload
 * encoding: ,"pool":B,"request_bytes":...,"bytes_per_query":...,
 * "encodings":{"f32":{"entry_bytes":536,"bytes_per_query":805376},...}.
 * An entry is its 24 bytes of SIV and id plus the vector; u8 holds byte
 * data only (integers in [0, 255]). */
static void print_query_bytes(const mess_params *p, long pool)
{
    mess_params e = *p;
    uint32_t enc;
    printf(",\"pool\":%ld,\"request_bytes\":%zu,\"bytes_per_query\":%zu,\"encodings\":{",
           pool, mess_request_size(p),
           mess_request_size(p) + mess_response_size(p, (size_t)pool));
    for (enc = MESS_PAYLOAD_F32; enc <= MESS_PAYLOAD_U8; enc++) {
        e.payload = enc;
        printf("%s\"%s\":{\"entry_bytes\":%zu,\"bytes_per_query\":%zu}", enc ? "," : "",
               cli_payload_name(enc), mess_payload_size(&e),
               mess_request_size(&e) + mess_response_size(&e, (size_t)pool));
    }
    printf("}");
}

static int print_stats(const mess_server *s, const char *lead, long pool)
{
    mess_server_stats st;
    mess_params p;
    mess_server_stats_get(s, &st);
    mess_server_params(s, &p);
    printf("{%s\"entries\":%zu,\"live\":%zu,\"deleted\":%zu,\"bytes\":%zu,"
           "\"bytes_per_entry\":%.1f,\"min_shard\":%zu,\"max_shard\":%zu,"
           "\"dim\":%u,\"shards\":%u,\"per_item\":%u,\"bits\":%u,"
           "\"p_store\":%.6g,\"p_prr\":%.6g,\"p_irr\":%.6g,\"hnsw_m\":%u,"
           "\"ef_construction\":%u,\"ef_search\":%u,\"metric\":\"%s\","
           "\"payload\":\"%s\",\"payload_bytes\":%zu",
           lead, st.entries, st.live, st.deleted, st.bytes,
           st.entries ? (double)st.bytes / (double)st.entries : 0.0,
           st.entries ? st.min_shard : 0, st.max_shard, p.dim, p.shards,
           p.per_item, p.kappa, p.p_store, p.p_prr, p.p_irr, p.hnsw_m,
           p.ef_construction, p.ef_search, cli_metric_name(p.metric),
           cli_payload_name(p.payload), mess_payload_size(&p));
    print_query_bytes(&p, pool);
    printf("}\n");
    return CLI_OK;
}

int cli_cmd_compact(int argc, char **argv)
{
    struct cli_args a;
    const char *spath;
    long threads;
    mess_server *s;
    int rc, err;

    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(compact_help, stdout);
        return CLI_OK;
    }
    spath = cli_opt(&a, "--server");
    if (cli_opt_long(&a, "--threads", 1, 256, 1, &threads))
        return CLI_USAGE;
    if (!spath) {
        cli_error("compact needs --server (see --help)");
        return CLI_USAGE;
    }
    if (cli_check_unused(&a))
        return CLI_USAGE;
    if (cli_server_open(spath, NULL, NULL, &s) != CLI_OK)
        return CLI_FAIL;
    errno = 0;
    rc = mess_server_compact(s, (unsigned)threads);
    err = errno;
    if (rc != MESS_OK) {
        if (cli_server_unusable(s, spath) != CLI_OK)
            rc = CLI_FAIL;
        else if (rc == MESS_EBUSY)
            rc = cli_server_failed(spath, rc, err);
        else
            rc = cli_fail("compact", spath, rc);
        mess_server_free(s);
        return rc;
    }
    if (cli_server_write(s, spath) != CLI_OK) {
        mess_server_free(s);
        return CLI_FAIL;
    }
    print_stats(s, "\"compacted\":true,", INFO_POOL);
    mess_server_free(s);
    return CLI_OK;
}

static const char info_help[] =
    "usage: mess info --server S [--pool B] [--memory] [--layout L]\n"
    "       mess info --client C [--passphrase-env V] [--pool B]\n"
    "\n"
    "--server: prints what the server holds, which is all it can see: the\n"
    "public parameters, and per shard the perturbed codes, opaque labels, graph\n"
    "links and equal-length ciphertexts.  No id, vector, key or clean code.\n"
    "--memory: also this process's memory after opening S, private\n"
    "(anonymous) bytes against mapped file pages (the page cache's: graphs and\n"
    "arenas are mapped and read as searches touch them), of them the\n"
    "directory's.\n"
    "--layout codes: the search layout built first (mess query --layout), so\n"
    "the memory and the bytes counted include it.\n"
    "--client: whether the client file is sealed, its mode (\"deterministic\":\n"
    "made from a seed, which is its master key; \"production\": keys and coins\n"
    "from the OS) and its parameters (train_sample included).  Nothing secret\n"
    "is printed.  A sealed file needs its passphrase (--passphrase-env) to\n"
    "tell the mode.\n"
    "Both also print what a query moves at pool B (1500): request_bytes,\n"
    "bytes_per_query (request + response with every budget filled) and, per\n"
    "payload encoding (f32, f16, i8, u8: 24 bytes of SIV and id plus the\n"
    "vector; u8 for byte data only), entry_bytes and bytes_per_query.\n";

static int client_info(struct cli_args *a, const char *cpath, long pool)
{
    const char *pass;
    uint32_t version, role;
    int sealed, rc;
    mess_client *c;
    mess_params p;
    if (cli_passphrase(a, &pass) || cli_check_unused(a))
        return CLI_USAGE;
    rc = mess_state_file_peek(cpath, &version, &role, &sealed);
    if (rc == MESS_OK && role != 1)
        rc = MESS_EROLE;
    if (rc != MESS_OK)
        return cli_fail("cannot read client state", cpath, rc);
    if (sealed && !pass) {
        cli_error("%s: the client file is sealed: give its passphrase (--passphrase-env V) "
                  "to see its mode", cpath);
        return CLI_FAIL;
    }
    rc = mess_client_load(cpath, pass, &c);
    if (rc != MESS_OK)
        return cli_fail("cannot load client state", cpath, rc);
    mess_client_params(c, &p);
    printf("{\"mode\":\"%s\",\"sealed\":%s,\"dim\":%u,\"shards\":%u,"
           "\"per_item\":%u,\"bits\":%u,\"p_store\":%.6g,\"p_prr\":%.6g,"
           "\"p_irr\":%.6g,\"hnsw_m\":%u,\"ef_construction\":%u,"
           "\"ef_search\":%u,\"metric\":\"%s\",\"payload\":\"%s\","
           "\"train_sample\":%u",
           mess_client_is_deterministic(c) ? "deterministic" : "production",
           sealed ? "true" : "false", p.dim, p.shards, p.per_item, p.kappa,
           p.p_store, p.p_prr, p.p_irr, p.hnsw_m, p.ef_construction,
           p.ef_search, cli_metric_name(p.metric), cli_payload_name(p.payload),
           p.train_sample);
    print_query_bytes(&p, pool);
    printf("}\n");
    mess_client_free(c);
    return CLI_OK;
}

int cli_cmd_info(int argc, char **argv)
{
    struct cli_args a;
    const char *spath, *cpath;
    mess_server *s;
    long pool;
    int memory, layout;

    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(info_help, stdout);
        return CLI_OK;
    }
    spath = cli_opt(&a, "--server");
    cpath = cli_opt(&a, "--client");
    if (cli_opt_long(&a, "--pool", 1, 65535L * MESS_MAX_SHARDS, INFO_POOL, &pool))
        return CLI_USAGE;
    if (!spath == !cpath) {
        cli_error("info needs one of --server and --client (see --help)");
        return CLI_USAGE;
    }
    if (cpath)
        return client_info(&a, cpath, pool);
    memory = cli_flag(&a, "--memory");
    if (cli_layout_opt(&a, &layout) != CLI_OK || cli_check_unused(&a))
        return CLI_USAGE;
    if (cli_server_open(spath, NULL, NULL, &s) != CLI_OK)
        return CLI_FAIL;
    if (cli_server_layout(s, layout, spath) != CLI_OK) {
        mess_server_free(s);
        return CLI_FAIL;
    }
    if (!memory) {
        print_stats(s, "", pool);
    } else {
        /* this process's memory after the open: private pages against
         * the directory's file pages mapped (the page cache's) */
        struct cli_memory m;
        char lead[256];
        cli_memory(spath, &m);
        snprintf(lead, sizeof lead,
                 "\"process_private_bytes\":%.0f,\"process_mapped_bytes\":%.0f,"
                 "\"dir_mapped_bytes\":%.0f,\"dir_private_bytes\":%.0f,",
                 m.anon, m.rss - m.anon, m.dir_rss - m.dir_anon, m.dir_anon);
        print_stats(s, lead, pool);
    }
    mess_server_free(s);
    return CLI_OK;
}
