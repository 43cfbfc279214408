/*
 * cli.h - the `mess` command-line tool: shared argument handling and the
 * per-command entry points (one file per command family in cli/).  cli/
 * uses the public headers only; the benchmark program (bench/,
 * build/mess-bench) links args.c, files.c, clock.c, memory.c and server.c
 * too.
 */
#ifndef MESS_CLI_H
#define MESS_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../mess_experimental.h"

/* Exit codes of the tool. */
#define CLI_OK 0
#define CLI_FAIL 1  /* the operation failed (message on stderr) */
#define CLI_USAGE 2 /* bad command line */

/* The arguments after the command name.  Options are "--name value",
 * "--name=value" or a bare "--flag"; short "-k value" is accepted where a
 * command documents it.  Anything else is positional. */
struct cli_args {
    int argc;
    char **argv;
    unsigned char used[256]; /* which argv entries were consumed */
};

void cli_args_init(struct cli_args *a, int argc, char **argv);
/* Value of option `name` ("--x" or "-k"), or NULL if absent. */
const char *cli_opt(struct cli_args *a, const char *name);
/* 1 if the bare flag is present. */
int cli_flag(struct cli_args *a, const char *name);
/* Parsed numeric options: return 0 and store the value (def if absent), or
 * print an error naming the option and return -1. */
int cli_opt_long(struct cli_args *a, const char *name, long lo, long hi,
                 long def, long *out);
int cli_opt_double(struct cli_args *a, const char *name, double lo, double hi,
                   double def, double *out);
/* Positional argument i (0-based) among those not consumed by options. */
const char *cli_positional(struct cli_args *a, int i);
/* Fails (returns -1 with a message) if an argument was not consumed. */
int cli_check_unused(struct cli_args *a);
/* "--help" or "-h" present. */
int cli_wants_help(struct cli_args *a);

/* files.c.  cli_fail: "mess: PATH: strerror(errno)" on stderr for MESS_EIO
 * (call it right after the failing library call, errno intact), "mess:
 * PATH: <mess_strerror(rc)> (<what>)" otherwise (a state file of another
 * format version says which version it found and which is expected);
 * "mess: <what>: <mess_strerror(rc)>" when path is NULL.  CLI_FAIL. */
int cli_fail(const char *what, const char *path, int rc);
/* 1 if s ends with suffix (".bvecs"), else 0. */
int cli_has_suffix(const char *s, const char *suffix);
/* -1 with a message listing the accepted extensions unless path ends in
 * .fvecs / .bvecs (vectors) or .ivecs / .u64vecs (ids). */
int cli_vectors_ext(const char *path, const char *what);
int cli_ids_ext(const char *path, const char *what);
/* A benchmark data set's part NAME (base, query, learn) in directory DIR:
 * DIR/NAME.bvecs, else DIR/NAME.fvecs, as float32.  MESS_OK, or the
 * library's code after cli_fail's message naming the file. */
int cli_read_set(const char *dir, const char *name, float **x, size_t *n,
                 size_t *dim);
/* A vector file as float32 (.fvecs / .bvecs), every component finite (a
 * non-finite one is refused with its row).  CLI_OK, or the exit code after
 * a message naming the file and the reason; `what` says which file it is
 * ("training file", "queries", ...). */
int cli_read_vectors(const char *path, const char *what, float **x, size_t *n,
                     size_t *dim);
/* After the library refused a vector with MESS_EINVAL: if row `row` of x
 * (dim components, read from `path`) is a zero vector under the cosine
 * metric, says so naming the file and the row and returns 1; else 0. */
int cli_zero_row(const char *path, const float *x, size_t row, size_t dim,
                 uint32_t metric);
/* Ids (.ivecs: negative entries read as CLI_NO_ID; .u64vecs), n x k. */
int cli_read_ids(const char *path, const char *what, uint64_t **ids, size_t *n,
                 size_t *k);
/* mess plan's --gt (and plan --target-recall's): the first k ids of the
 * first nq rows of the .ivecs file path, each an item of --data (below n),
 * into a malloc'd nq x k array *truth.  CLI_OK, or CLI_FAIL after a
 * message: the file's reason (cli_fail), too few rows or ids, an id
 * outside --data, out of memory. */
int cli_read_truth(const char *path, size_t nq, long k, size_t n, uint32_t **truth);
/* Writes n x k ids; CLI_NO_ID (no result) is -1 in .ivecs and 2^64-1 in
 * .u64vecs.  An id above 2^31-1 refuses the .ivecs file (nothing written). */
#define CLI_NO_ID UINT64_MAX
/* A training set of n rows for parameters p (dim set): refused (-1, with a
 * message) below min(kappa, dim) + 1 rows, where the principal subspace the
 * hash projects on is not even determined; a warning on stderr below
 * CLI_TRAIN_WARN rows (on the bundled SIFT set, M = 16, t = 4, B = 400,
 * recall@10 was 0.970 / 0.973 / 0.971 / 0.961 / 0.973 with 10 / 129 / 150
 * / 1000 / 4992 rows: no cost measured there, but issue 13 measured
 * 0.570 -> 0.422 with 10 rows on 100-d data, so the check is a warning). */
#define CLI_TRAIN_WARN 1000
/* 0 if PATH can be replaced by an atomic save (a temporary file created in
 * its directory, renamed over it: the directory must be writable and
 * searchable; the file's own mode does not matter); else -1 after
 * "mess: DIR: strerror(errno)". */
int cli_save_possible(const char *path);
/* A new client file (mess init) never replaces one.  cli_client_fresh:
 * CLI_OK if nothing is at path (lstat: a dangling symlink counts), else
 * cli_client_exists's message naming the file (how to keep it and go on:
 * --force) and CLI_FAIL; the save itself (mess_client_save_new) refuses a
 * file created meanwhile with MESS_EEXIST, and gets the same message.
 * cli_keep_replaced (--force): moves the file at path to
 * PATH.replaced-YYYYmmddTHHMMSS (local time; .2, .3, ... if taken: no file
 * is overwritten), prints that name and gives it in *kept (malloc'd, NULL
 * if nothing was there; kept may be NULL); CLI_OK if nothing was there.
 * cli_undo_init: an init that failed after these puts things back: the
 * client file it created (created) is removed, and the kept one (kept,
 * or NULL) linked back to path, each said. */
int cli_client_fresh(const char *path);
int cli_client_exists(const char *path);
int cli_keep_replaced(const char *path, char **kept);
void cli_undo_init(const char *path, int created, const char *kept);
/* The client state at cpath, sealed or not, with the passphrase of
 * --passphrase-env (cli_passphrase: CLI_USAGE when its variable is unset
 * or empty); a refusal of the library is cli_fail's "cannot load client
 * state" / "cannot write client state" naming cpath (CLI_FAIL).
 * cli_client_load sets *c to NULL first. */
int cli_client_load(struct cli_args *a, const char *cpath, mess_client **c);
int cli_client_save(struct cli_args *a, const mess_client *c, const char *cpath);
/* cli_client_load for a command that saves the client file: it first
 * takes the file's lock (an flock held until the process exits; another
 * command holding it is CLI_FAIL, "another mess command is using this
 * client file"), so that two such commands never load the same state
 * and the second save loses the first one's changes (the generation of
 * a re-inserted id: its entries then failed authentication).  always 0
 * (query, request): only a deterministic client, which is saved after
 * its requests, is locked, then loaded again; a production client is
 * never written by them and is not locked. */
int cli_client_load_to_save(struct cli_args *a, const char *cpath, mess_client **c,
                            int always);
/* That lock alone (CLI_OK when there is no file to lock), for init
 * --force, which moves the file aside: a command using it would save over
 * the new one. */
int cli_client_lock(const char *cpath);
int cli_check_training(const char *path, size_t n, const mess_params *p);
/* A hint on stderr when the norms of the vectors of path spread (`what`:
 * "training", "sample"; the 95th over the 5th percentile above the
 * metric's threshold; under l2 it suggests --metric cos): under l2, length then
 * counts as much as direction, which is not what embeddings compared by
 * angle mean; under cos, the codes (made from the vectors as given) lose
 * recall.  Measured by eval/norm_spread.py on the bundled SIFT set (every
 * norm 512 +-0.3%, spread 1.004) with each vector scaled by its own factor,
 * log-uniform on [1, R] (M 16, t 4, Recall@10 at pool 1000 against the
 * exact cosine top 10; vectors normalised to length 1 give 0.994-0.9995 at
 * every spread):
 *
 *   spread (95th / 5th)   1.004  1.09   1.22   1.43   1.87   2.20   2.70   4.62
 *   --metric l2           0.988  0.906  0.779  0.669  0.584  0.533  0.484  0.377
 *   --metric cos          0.998  0.997  0.998  0.997  0.992  0.975  0.917  0.704
 *
 * --metric l2 against the exact L2 top 10 stays 0.982-0.993: L2 data
 * whose norms vary are served well, and norms alone cannot tell them from
 * embeddings meant for angles.  Isotropic Gaussian data, L2 data by
 * construction, spread 3.67 / 2.37 / 1.81 / 1.52 / 1.23 / 1.13 at 4 / 8 /
 * 16 / 32 / 128 / 384 dimensions, so l2 hints only from 2.5, above every
 * such set of 8 dimensions or more: it is meant for issue 29's case (0.64
 * with l2 on embeddings of norms 1.6 to 8.8, a min / max of 5.5; their
 * 95th / 5th percentile was not reported), not the milder spreads that
 * already cost cosine-meant data (README.md "Defaults" says to normalise
 * those).  cos hints from 2, where its loss passes a point; normalising
 * never changes cosine neighbours, so a hint there costs nothing.  Inner
 * product: no hint.
 * python/mess/core.py (NORM_SPREAD_HINT) uses the same thresholds. */
#define CLI_NORM_SPREAD_L2 2.5
#define CLI_NORM_SPREAD_COS 2.0
void cli_norm_hint(const char *path, const char *what, const float *x, size_t n,
                   size_t dim, uint32_t metric);
/* The client of init and plan --train: reads the training file (its
 * dimension sets p->dim), checks its rows (cli_check_training) and the
 * parameters together, trains.  *rows: the training rows (may be NULL).
 * CLI_OK, or the code to exit with (the message is printed). */
int cli_train_client(const char *train, mess_params *p, const uint8_t *seed,
                     long threads, mess_client **out, size_t *rows);
int cli_write_ids(const char *path, const char *what, const uint64_t *ids,
                  size_t n, size_t k);

/* The client file's passphrase from the environment variable named by
 * --passphrase-env (never from the command line, where ps would show it):
 * *out is NULL without the option; -1 with a message if the variable is
 * not set. */
int cli_passphrase(struct cli_args *a, const char **out);

/* 64 hex digits into a 32-byte seed; -1 if malformed. */
int cli_parse_seed(const char *hex, unsigned char seed[32]);

/* The deterministic-mode seed from --seed-env NAME (64 hex digits in $NAME)
 * or --seed-file PATH (64 hex digits, trailing newline allowed): *have is 1
 * and seed filled, or *have is 0 without either option.  --seed HEX on the
 * command line is refused (ps and shell history would show the master key).
 * warn: print that the seed is the master key.  -1 with a message. */
int cli_seed(struct cli_args *a, unsigned char seed[32], int *have, int warn);

/* The public-parameter options (--shards --per-item --bits --p-store
 * --p-query --p-prr --p-irr --train-sample; with graph also --hnsw-m
 * --ef-construction --ef-search --metric --payload) into *p, starting from
 * mess_params_default; p->dim is left 0 for the caller.  -1 with a message
 * naming the option and what it accepts. */
int cli_params_options(struct cli_args *a, int graph, mess_params *p);
/* Their help lines, with the defaults taken from mess_params_default. */
void cli_params_help(FILE *f, int graph);
/* The option values naming a metric / payload encoding ("l2", "f32", ...);
 * "?" for a value out of range. */
const char *cli_metric_name(uint32_t metric);
const char *cli_payload_name(uint32_t payload);

/* "a,b,c": one or more decimal integers in [lo, hi] separated by single
 * commas, into a malloc'd array; -1 if malformed or out of range. */
int cli_parse_list(const char *s, uint64_t lo, uint64_t hi, uint64_t **out,
                   size_t *n);
/* "a,b,c": one to `max` decimal integers in [0, UINT_MAX] separated by
 * single commas, into out[0..*n); -1 if malformed, out of range or longer:
 * the value lists of the bench commands. */
int cli_parse_ulist(const char *s, unsigned *out, size_t max, size_t *n);
/* Option `name` (def when absent) by cli_parse_ulist; no message: the
 * bench commands name all their lists in one. */
int cli_opt_ulist(struct cli_args *a, const char *name, const char *def, unsigned *out,
                  size_t max, size_t *n);
/* Option `name` (def when absent) by cli_parse_list, with a message naming
 * the option and the range on failure (-1): the --grid-* lists of mess plan
 * --target-recall and mess init --target-recall. */
int cli_parse_grid(struct cli_args *a, const char *name, const char *def, uint64_t lo,
                   uint64_t hi, uint64_t **v, size_t *n);
/* The candidates of a configuration search (mess plan --target-recall,
 * mess init --target-recall): --grid-shards, --grid-per-item, --grid-bits
 * (multiples of 64) and --pools, `def` their defaults in that order. */
struct cli_grid {
    uint32_t *v; /* M values, then t values, then kappa values */
    size_t nm, nt, nk;
    size_t *pools;
    size_t npools;
};
/* Reads the four lists; CLI_USAGE (said) for a bad list, CLI_FAIL when out
 * of memory; on failure *g holds nothing to free. */
int cli_grid_read(struct cli_args *a, const char *const def[4], struct cli_grid *g);
/* The grid and pools fields of a mess_plan_choose input. */
void cli_grid_input(const struct cli_grid *g, struct mess_plan_choose_in *in);
/* cli_check_training for the grid's largest kappa: the training set must
 * determine its subspace.  -1 (said) if it cannot. */
int cli_grid_check_training(const struct cli_grid *g, const char *train, size_t ntrain,
                            const mess_params *p);
void cli_grid_free(struct cli_grid *g);

/* memory.c: this process's resident bytes from /proc/self/smaps: all
 * (rss) and of them anonymous (anon: private memory, a mapped graph's
 * copied pages included), and the same for the mappings of files under
 * directory dir (NULL: none): dir_rss - dir_anon are the directory's
 * file pages mapped (the page cache's).  -1 (all 0) without /proc. */
struct cli_memory {
    double rss, anon, dir_rss, dir_anon;
};
int cli_memory(const char *dir, struct cli_memory *m);

/* clock.c: monotonic wall time and the process's CPU time, in seconds. */
double cli_wall_s(void);
double cli_cpu_s(void);

/* "mess: <message>\n" on stderr. */
void cli_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Command entry points: argc/argv start after the command name. */
typedef int (*cli_command_fn)(int argc, char **argv);

/* bench.c: mess bench WHAT runs the benchmark program beside this one
 * (build/mess-bench, from bench/; not installed) with the same arguments,
 * or says that the benchmarks are built from the source tree. */
int cli_cmd_bench(int argc, char **argv);
/* protocol.c: the protocol driven from files */
int cli_cmd_init(int argc, char **argv);
int cli_cmd_insert(int argc, char **argv);
int cli_cmd_query(int argc, char **argv);
int cli_cmd_delete(int argc, char **argv);
int cli_cmd_compact(int argc, char **argv);
int cli_cmd_info(int argc, char **argv);
/* The results of n queries at k as `mess query` and `mess finish` report
 * them (protocol.c): each query's k ids (CLI_NO_ID past its results), its
 * finish statistics and bytes summed, and hits against the ground truth. */
struct cli_tally {
    size_t n, k;
    uint64_t *out;          /* n x k ids, for --out */
    const uint64_t *gt;     /* n x gk ground-truth ids, or NULL */
    size_t gk;
    double req_b, resp_b, cand, uniq;
    size_t auth, unopened, hits;
};
/* The tally of n queries at k (out allocated); gtp, when not NULL, is read
 * (cli_read_ids) into *gt, which must hold n rows of at least k ids (the
 * caller frees *gt).  CLI_OK, or the exit code after a message. */
int cli_tally_init(struct cli_tally *t, size_t n, long k, const char *gtp, uint64_t **gt);
/* Query i's results: got ids, its statistics and buffer sizes. */
void cli_tally_add(struct cli_tally *t, size_t i, const uint64_t *ids, size_t got,
                   const mess_finish_stats *st, size_t req_len, size_t resp_len);
/* Recall@k against the ground truth (0 for no query). */
double cli_tally_recall(const struct cli_tally *t);

/* twoparty.c: the two parties as processes exchanging files */
int cli_cmd_request(int argc, char **argv);
int cli_cmd_search(int argc, char **argv);
int cli_cmd_finish(int argc, char **argv);
/* server.c: the server directory (docs/PROTOCOL.md, "Server directory").
 * cli_server_open: mess_server_open with a message naming the file and the
 * reason (an exported server, a damaged or missing file, other
 * parameters when expect is given: then other_role names the client).
 * cli_server_write: mess_server_checkpoint, with a message.  Both return
 * CLI_OK or CLI_FAIL. */
int cli_server_open(const char *dir, const mess_params *expect,
                    const char *client, mess_server **s);
int cli_server_write(mess_server *s, const char *dir);
/* "cannot write server 'DIR' (it keeps its last checkpoint): <reason>"
 * (err: errno of a MESS_EIO); CLI_FAIL. */
int cli_server_failed(const char *dir, int rc, int err);
/* After a call on s failed: if a shard's delta chain could not be applied
 * (mess_server_error, docs/PROTOCOL.md "Lazy apply"), says so naming the
 * file and returns CLI_FAIL; else CLI_OK (nothing said). */
int cli_server_unusable(const mess_server *s, const char *dir);
/* CLI_OK if dir does not exist or is an empty directory (init makes the
 * server there), else a message and CLI_FAIL. */
int cli_server_fresh(const char *dir);
/* --layout default|codes (mess_server_set_layout) into *layout
 * (MESS_LAYOUT_DEFAULT when absent); CLI_USAGE with a message for another
 * word.  cli_server_layout applies it to s (nothing for the default),
 * CLI_FAIL with a message naming dir when it cannot. */
int cli_layout_opt(struct cli_args *a, int *layout);
int cli_server_layout(mess_server *s, int layout, const char *dir);
/* resume.c: an insert that stops part-way.  cli_stop_catch: SIGINT and
 * SIGTERM (once each; the next one ends the process) set the flag that
 * cli_stop_requested returns (the signal's number, 0 if none came).
 * cli_stored_prefix: how many of FILE's leading rows x[0..n) (ids first,
 * first + 1, ...) the server stores (*rows): every row up to the first
 * not stored is checked, `batch` rows at a time encoded with `threads`
 * (mess_server_count_stored, which changes nothing); CLI_OK, or CLI_FAIL
 * after a message naming FILE (a row partly stored, or the prefix ends at
 * a row whose id the server holds with another vector; file NULL: no
 * message, *other (may be NULL) set in that case).  cli_insert_stored:
 * the line saying how many of FILE's n
 * items are stored (and durable: the larger of `stored`, what this run
 * applied, and the prefix the server stores) and how to insert the rest. */
void cli_stop_catch(void);
int cli_stop_requested(void);
int cli_stored_prefix(mess_client *c, const mess_server *s, const float *x, size_t n,
                      size_t dim, uint64_t first, size_t batch, unsigned threads,
                      const char *file, size_t *rows, int *other);
void cli_insert_stored(mess_client *c, const mess_server *s, const float *x, size_t dim,
                       size_t batch, unsigned threads, const char *file, const char *spath,
                       uint64_t first, size_t stored, size_t n);
int cli_cmd_export(int argc, char **argv);
int cli_cmd_import(int argc, char **argv);
int cli_cmd_verify(int argc, char **argv);
int cli_cmd_extract(int argc, char **argv);
int cli_cmd_checkpoint(int argc, char **argv);
/* account.c: mess account access|search|stored|random-lsh|report */
int cli_cmd_account(int argc, char **argv);
/* plan.c: mess plan (correctness model, predicted recall) */
int cli_cmd_plan(int argc, char **argv);
int cli_cmd_estimate(int argc, char **argv);
/* plan_config.c: mess plan --target-recall (configuration search) */
int cli_plan_configs(int argc, char **argv);
/* init_choose.c: `mess init --target-recall R | --max-bytes N --sample
 * FILE`: chooses the parameters from the sample (mess_plan_choose) and
 * prints what it chose and why.  *p holds the options' parameters (metric,
 * payload, graph; payload_named: --payload was given) and receives the
 * choice; *pool the B to query with.  CLI_OK, or the exit code after a
 * message.  cli_init_choose_opts: the options it reads (NULL-terminated). */
extern const char *const cli_init_choose_opts[];
int cli_init_choose(struct cli_args *a, const char *train, int payload_named,
                    const uint8_t *seed, long threads, mess_params *p, size_t *pool,
                    double *predicted);

#endif
