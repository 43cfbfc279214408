/*
 * files.c - the `mess` tool's vector and id files: the accepted extensions,
 * the system's reason for a failed open/read/write ("mess: PATH: reason"),
 * non-finite components named by row, and ids written without truncation
 * (.ivecs holds ids below 2^31; .u64vecs holds any); a new client file
 * that never replaces one (init, and --force's kept copy); a client state
 * loaded and saved with its passphrase.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../mess.h"
#include "cli.h"

int cli_has_suffix(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* The reason of a failed file call: the system's for MESS_EIO when the
 * library left errno set, else the library's. */
static void file_error(const char *path, int rc, int err, const char *what)
{
    struct stat st;
    if (rc == MESS_EIO && err == EINVAL && stat(path, &st) == 0 && !S_ISREG(st.st_mode) &&
        !S_ISDIR(st.st_mode))
        /* the library's refusal of a FIFO, a device, a socket */
        cli_error("%s: not a regular file", path);
    else if (rc == MESS_EIO && err != 0)
        cli_error("%s: %s", path, strerror(err)); /* D7: exactly this */
    else
        cli_error("%s: %s (%s)", path, mess_strerror(rc), what);
}

int cli_fail(const char *what, const char *path, int rc)
{
    int err = errno; /* the library leaves it as the OS set it on MESS_EIO */
    uint32_t version, role;
    int sealed;
    if (path && rc == MESS_EVERSION &&
        mess_state_file_peek(path, &version, &role, &sealed) == MESS_OK &&
        (version < MESS_STATE_FILE_VERSION_MIN || version > MESS_STATE_FILE_VERSION))
        cli_error("%s: state file format version %u, this build reads versions %u to %u "
                  "(written by another libmess version: re-create it with mess init, "
                  "or use the version that wrote it)",
                  path, (unsigned)version, (unsigned)MESS_STATE_FILE_VERSION_MIN,
                  (unsigned)MESS_STATE_FILE_VERSION);
    else if (path)
        file_error(path, rc, err, what);
    else
        cli_error("%s: %s", what, mess_strerror(rc));
    return CLI_FAIL;
}

int cli_zero_row(const char *path, const float *x, size_t row, size_t dim,
                 uint32_t metric)
{
    size_t e;
    if (metric != MESS_METRIC_COSINE)
        return 0;
    for (e = 0; e < dim; e++)
        if (x[row * dim + e] != 0.0f)
            return 0;
    cli_error("'%s' row %zu is a zero vector: under --metric cos every vector needs a "
              "direction (a length above 0)", path, row);
    return 1;
}

int cli_read_set(const char *dir, const char *name, float **x, size_t *n,
                 size_t *dim)
{
    char path[4096];
    int rc;
    snprintf(path, sizeof path, "%s/%s.bvecs", dir, name);
    if (access(path, R_OK) != 0)
        snprintf(path, sizeof path, "%s/%s.fvecs", dir, name);
    rc = mess_vecs_read_f32(path, x, n, dim);
    if (rc != MESS_OK)
        cli_fail("cannot read", path, rc);
    return rc;
}

int cli_vectors_ext(const char *path, const char *what)
{
    if (cli_has_suffix(path, ".fvecs") || cli_has_suffix(path, ".bvecs"))
        return 0;
    cli_error("%s: unknown extension for %s; accepted: .fvecs (float32), "
              ".bvecs (uint8)", path, what);
    return -1;
}

int cli_ids_ext(const char *path, const char *what)
{
    if (cli_has_suffix(path, ".ivecs") || cli_has_suffix(path, ".u64vecs"))
        return 0;
    cli_error("%s: unknown extension for %s; accepted: .ivecs (int32 ids "
              "below 2^31), .u64vecs (uint64 ids)", path, what);
    return -1;
}

int cli_read_vectors(const char *path, const char *what, float **x, size_t *n,
                     size_t *dim)
{
    size_t i, total;
    int rc;
    *x = NULL;
    if (cli_vectors_ext(path, what))
        return CLI_USAGE;
    errno = 0;
    rc = mess_vecs_read_f32(path, x, n, dim);
    if (rc == MESS_EFORMAT) {
        cli_error("%s: not a valid %s file for %s: malformed or truncated "
                  "(every record: int32 dim, then dim %s; one dim for all)",
                  path, cli_has_suffix(path, ".bvecs") ? ".bvecs" : ".fvecs", what,
                  cli_has_suffix(path, ".bvecs") ? "uint8" : "float32");
        return CLI_FAIL;
    }
    if (rc != MESS_OK)
        return cli_fail(what, path, rc);
    total = *n * *dim;
    for (i = 0; i < total; i++)
        if (!isfinite((*x)[i])) {
            cli_error("%s: row %zu (from 0), component %zu is %s; %s must be "
                      "finite", path, i / *dim, i % *dim,
                      isnan((*x)[i]) ? "NaN" : (*x)[i] > 0 ? "+inf" : "-inf", what);
            mess_vecs_free(*x);
            *x = NULL;
            return CLI_FAIL;
        }
    return CLI_OK;
}

int cli_read_ids(const char *path, const char *what, uint64_t **ids, size_t *n,
                 size_t *k)
{
    int32_t *v = NULL;
    size_t i;
    int rc;
    *ids = NULL;
    if (cli_ids_ext(path, what))
        return CLI_USAGE;
    errno = 0;
    if (cli_has_suffix(path, ".u64vecs")) {
        rc = mess_u64vecs_read(path, ids, n, k);
        if (rc != MESS_OK) {
            *ids = NULL;
            return rc == MESS_EFORMAT
                       ? (cli_error("%s: not a valid .u64vecs file for %s: malformed "
                                    "or truncated (every record: int32 dim, then dim "
                                    "uint64)", path, what), CLI_FAIL)
                       : cli_fail(what, path, rc);
        }
        return CLI_OK;
    }
    rc = mess_ivecs_read(path, &v, n, k);
    if (rc == MESS_EFORMAT) {
        cli_error("%s: not a valid .ivecs file for %s: malformed or truncated "
                  "(every record: int32 dim, then dim int32)", path, what);
        return CLI_FAIL;
    }
    if (rc != MESS_OK)
        return cli_fail(what, path, rc);
    *ids = (uint64_t *)malloc((*n * *k > 0 ? *n * *k : 1) * sizeof **ids);
    if (!*ids) {
        mess_vecs_free(v);
        return cli_fail(what, NULL, MESS_ENOMEM);
    }
    /* a negative entry (-1 pads a short row) matches no id */
    for (i = 0; i < *n * *k; i++)
        (*ids)[i] = v[i] < 0 ? UINT64_MAX : (uint64_t)v[i];
    mess_vecs_free(v);
    return CLI_OK;
}

int cli_read_truth(const char *path, size_t nq, long k, size_t n, uint32_t **truth)
{
    int32_t *gt = NULL;
    uint32_t *t = NULL;
    size_t gn, gk, i, j;
    int rc;
    *truth = NULL;
    errno = 0;
    rc = mess_ivecs_read(path, &gt, &gn, &gk);
    if (rc != MESS_OK)
        return cli_fail("--gt", path, rc);
    rc = CLI_FAIL;
    if (gn < nq || gk < (size_t)k) {
        cli_error("'%s' has %zu rows of %zu ids; need %zu rows of at least %ld", path, gn,
                  gk, nq, k);
        goto done;
    }
    t = (uint32_t *)malloc(nq * (size_t)k * sizeof *t);
    if (!t) {
        cli_error("out of memory");
        goto done;
    }
    for (i = 0; i < nq; i++)
        for (j = 0; j < (size_t)k; j++) {
            int32_t v = gt[i * gk + j];
            if (v < 0 || (size_t)v >= n) {
                cli_error("'%s' row %zu names item %d, outside --data", path, i, v);
                free(t);
                t = NULL;
                goto done;
            }
            t[i * (size_t)k + j] = (uint32_t)v;
        }
    *truth = t;
    rc = CLI_OK;
done:
    mess_vecs_free(gt);
    return rc;
}

int cli_write_ids(const char *path, const char *what, const uint64_t *ids,
                  size_t n, size_t k)
{
    int32_t *v;
    size_t i;
    int rc;
    if (cli_ids_ext(path, what))
        return CLI_USAGE;
    errno = 0;
    if (cli_has_suffix(path, ".u64vecs")) {
        rc = mess_u64vecs_write(path, ids, n, k);
        return rc == MESS_OK ? CLI_OK : cli_fail(what, path, rc);
    }
    for (i = 0; i < n * k; i++)
        if (ids[i] != CLI_NO_ID && ids[i] > INT32_MAX) {
            cli_error("%s: id %llu does not fit .ivecs (int32: ids up to "
                      "2147483647); write a .u64vecs file instead", path,
                      (unsigned long long)ids[i]);
            return CLI_FAIL;
        }
    v = (int32_t *)malloc((n * k > 0 ? n * k : 1) * sizeof *v);
    if (!v)
        return cli_fail(what, NULL, MESS_ENOMEM);
    for (i = 0; i < n * k; i++)
        v[i] = ids[i] == CLI_NO_ID ? -1 : (int32_t)ids[i];
    errno = 0;
    rc = mess_ivecs_write(path, v, n, k);
    free(v);
    return rc == MESS_OK ? CLI_OK : cli_fail(what, path, rc);
}

int cli_check_training(const char *path, size_t n, const mess_params *p)
{
    size_t need = (p->kappa < p->dim ? p->kappa : p->dim) + 1;
    if (n < need) {
        cli_error("%s: %zu training rows; the hash of %u bits on %u dimensions "
                  "needs at least %zu (min(bits, dim) + 1) and works well from "
                  "about %d", path, n, p->kappa, p->dim, need, CLI_TRAIN_WARN);
        return -1;
    }
    if (n < CLI_TRAIN_WARN)
        fprintf(stderr, "mess: warning: %s: only %zu training rows (fewer than "
                "%d): each shard's hash is estimated from few rows; check recall on "
                "your data (mess plan, mess query --gt)\n", path, n, CLI_TRAIN_WARN);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The 95th over the 5th percentile (nearest rank) of the rows' Euclidean
 * norms: 1 when all norms are equal, robust to a few outliers; infinite
 * when at least 5% of the rows are zero and others are not; 0 if memory
 * runs out (no hint then). */
static double norm_spread(const float *x, size_t n, size_t dim)
{
    double *nrm, lo, hi;
    size_t i, j;
    if (n == 0)
        return 1.0;
    nrm = (double *)malloc(n * sizeof *nrm);
    if (!nrm)
        return 0.0;
    for (i = 0; i < n; i++) {
        double ss = 0;
        for (j = 0; j < dim; j++)
            ss += (double)x[i * dim + j] * x[i * dim + j];
        nrm[i] = sqrt(ss);
    }
    qsort(nrm, n, sizeof *nrm, cmp_double);
    lo = nrm[(size_t)(0.05 * (double)(n - 1))];
    hi = nrm[(size_t)(0.95 * (double)(n - 1))];
    free(nrm);
    return lo > 0 ? hi / lo : hi > 0 ? HUGE_VAL : 1.0;
}

void cli_norm_hint(const char *path, const char *what, const float *x, size_t n,
                   size_t dim, uint32_t metric)
{
    double spread;
    if (metric != MESS_METRIC_L2 && metric != MESS_METRIC_COSINE)
        return; /* inner product: the norms are part of the score */
    spread = norm_spread(x, n, dim);
    if (metric == MESS_METRIC_L2 && spread > CLI_NORM_SPREAD_L2)
        fprintf(stderr, "mess: hint: %s: the %s vectors' norms spread (95th / 5th "
                "percentile %.2f); under --metric l2 a vector's length counts as much as "
                "its direction, so if these are embeddings meant to be compared by angle, "
                "give --metric cos and normalise every vector to length 1 before init, "
                "insert and query, or the results are not the cosine neighbours "
                "(eval/norm_spread.py)\n", path, what, spread);
    else if (metric == MESS_METRIC_COSINE && spread > CLI_NORM_SPREAD_COS)
        fprintf(stderr, "mess: hint: %s: the %s vectors' norms spread (95th / 5th "
                "percentile %.2f); the codes are made from the vectors as given, so "
                "cosine recall falls as norms spread: normalise every vector to length 1 "
                "before init, insert and query (the cosine neighbours do not change; "
                "eval/norm_spread.py)\n", path, what, spread);
}

int cli_train_client(const char *train, mess_params *p, const uint8_t *seed,
                     long threads, mess_client **out, size_t *rows)
{
    float *x;
    size_t n, dim;
    int rc = cli_read_vectors(train, "training file", &x, &n, &dim);
    *out = NULL;
    if (rc != CLI_OK)
        return rc;
    p->dim = (uint32_t)dim;
    if (cli_check_training(train, n, p)) {
        mess_vecs_free(x);
        return CLI_FAIL;
    }
    cli_norm_hint(train, "training", x, n, dim, p->metric);
    rc = mess_params_check(p); /* the options were checked one by one */
    if (rc != MESS_OK) {
        mess_vecs_free(x);
        cli_error("invalid parameters: %s", mess_strerror(rc));
        return CLI_USAGE;
    }
    rc = mess_client_new(p, x, n, seed, (unsigned)threads, out);
    mess_vecs_free(x);
    if (rc != MESS_OK)
        return cli_fail("cannot train the client", NULL, rc);
    if (rows)
        *rows = n;
    return CLI_OK;
}

int cli_save_possible(const char *path)
{
    char *dir = strdup(path), *slash;
    int err = 0;
    if (!dir) {
        cli_error("out of memory");
        return -1;
    }
    slash = strrchr(dir, '/');
    if (!slash)
        strcpy(dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    /* the save creates PATH.tmp.XXXXXX in the directory and renames it
     * over PATH (statefile.c), so only the directory's access counts */
    if (access(dir, W_OK | X_OK) != 0)
        err = errno;
    if (err)
        cli_error("%s: %s", dir, strerror(err));
    free(dir);
    return err ? -1 : 0;
}

int cli_client_exists(const char *path)
{
    cli_error("%s exists: init never replaces a client file (it may hold the only "
              "keys of a server); give another --client, or add --force to keep the "
              "old file under a new name and write a new one", path);
    return CLI_FAIL;
}

int cli_client_fresh(const char *path)
{
    struct stat st;
    if (lstat(path, &st) == 0)
        return cli_client_exists(path);
    return CLI_OK; /* a missing directory is the save's own error */
}

int cli_keep_replaced(const char *path, char **kept_out)
{
    char stamp[32], *kept;
    size_t cap = strlen(path) + sizeof ".replaced-YYYYmmddTHHMMSS.999";
    struct stat st;
    struct tm tm;
    time_t now = time(NULL);
    int fd = -1, i, err;

    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return CLI_OK; /* nothing to keep */
        cli_error("%s: %s", path, strerror(errno));
        return CLI_FAIL;
    }
    if (S_ISDIR(st.st_mode)) {
        cli_error("%s is a directory: --force keeps an existing client file under a new "
                  "name, not a directory", path);
        return CLI_FAIL;
    }
    kept = (char *)malloc(cap);
    if (!kept || !localtime_r(&now, &tm) ||
        strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%S", &tm) == 0) {
        free(kept);
        cli_error("out of memory");
        return CLI_FAIL;
    }
    /* The name is claimed with O_EXCL (an empty file) before the rename
     * moves the old file over it: a file already there, an earlier kept
     * copy among them, is never overwritten, and the rename moves exactly
     * what is at path at that moment. */
    for (i = 1; i <= 999 && fd < 0; i++) {
        if (i == 1)
            snprintf(kept, cap, "%s.replaced-%s", path, stamp);
        else
            snprintf(kept, cap, "%s.replaced-%s.%d", path, stamp, i);
        fd = open(kept, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        cli_error("%s: %s", kept, strerror(errno));
        free(kept);
        return CLI_FAIL;
    }
    close(fd);
    if (rename(path, kept) != 0) {
        err = errno;
        unlink(kept);
        cli_error("%s: %s", path, strerror(err));
        free(kept);
        return CLI_FAIL;
    }
    /* durable with the new file: its save fsyncs this same directory */
    cli_error("%s existed: kept as %s (--force)", path, kept);
    if (kept_out)
        *kept_out = kept;
    else
        free(kept);
    return CLI_OK;
}

void cli_undo_init(const char *path, int created, const char *kept)
{
    if (created && unlink(path) == 0)
        cli_error("%s: the new client file is removed (it holds the keys of no server)",
                  path);
    /* link, not rename: a file made at path meanwhile is never replaced */
    if (kept && link(kept, path) == 0 && unlink(kept) == 0)
        cli_error("%s: the old client file is back (from %s)", path, kept);
    else if (kept)
        cli_error("the old client file stays as %s: %s", kept, strerror(errno));
}

int cli_client_load(struct cli_args *a, const char *cpath, mess_client **c)
{
    const char *pass;
    int rc;
    *c = NULL;
    if (cli_passphrase(a, &pass))
        return CLI_USAGE;
    errno = 0;
    rc = mess_client_load(cpath, pass, c);
    if (rc != MESS_OK)
        return cli_fail("cannot load client state", cpath, rc);
    return CLI_OK;
}

/* The client file's lock: an flock on the file itself, held until the
 * process exits.  A save replaces the file (a new inode renamed over it),
 * so a lock taken on a file no longer at cpath is dropped and taken again
 * on the one there now. */
int cli_client_lock(const char *cpath)
{
    int tries;
    for (tries = 0; tries < 16; tries++) {
        struct stat held, now;
        int fd = open(cpath, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO: no wait */
        if (fd < 0)
            return CLI_OK; /* the load names the reason */
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int err = errno;
            close(fd);
            if (err != EWOULDBLOCK)
                return CLI_OK; /* no flock here (as before: unlocked) */
            cli_error("%s: another mess command is using this client file (insert, "
                      "delete and a deterministic client's query save it: one at a "
                      "time); try again when it is done", cpath);
            return CLI_FAIL;
        }
        if (fstat(fd, &held) == 0 && stat(cpath, &now) == 0 &&
            held.st_dev == now.st_dev && held.st_ino == now.st_ino)
            return CLI_OK; /* fd stays open: the lock lasts until exit */
        close(fd);
    }
    return CLI_OK;
}

int cli_client_load_to_save(struct cli_args *a, const char *cpath, mess_client **c,
                            int always)
{
    int rc;
    *c = NULL;
    if (always && cli_client_lock(cpath) != CLI_OK)
        return CLI_FAIL;
    rc = cli_client_load(a, cpath, c);
    if (rc != CLI_OK || always || !mess_client_is_deterministic(*c))
        return rc;
    /* a deterministic client is saved after its requests: locked, and
     * loaded again, as another command may have saved it meanwhile */
    mess_client_free(*c);
    *c = NULL;
    if (cli_client_lock(cpath) != CLI_OK)
        return CLI_FAIL;
    return cli_client_load(a, cpath, c);
}

int cli_client_save(struct cli_args *a, const mess_client *c, const char *cpath)
{
    const char *pass;
    int rc;
    if (cli_passphrase(a, &pass))
        return CLI_USAGE;
    errno = 0;
    rc = mess_client_save(c, cpath, pass);
    if (rc != MESS_OK)
        return cli_fail("cannot write client state", cpath, rc);
    return CLI_OK;
}
