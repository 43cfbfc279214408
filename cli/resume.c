/*
 * resume.c - a long `mess insert` that stops part-way.  SIGINT and SIGTERM
 * end it after the batch being applied (every batch the server applied is
 * durable: its log holds it), with a line saying how many items are
 * stored; `mess insert --resume` finds how many of FILE's leading rows the
 * server already stores (mess_server_count_stored, which changes nothing)
 * and goes on after them.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../mess.h"
#include "cli.h"

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
    stop_signal = sig;
}

void cli_stop_catch(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    /* once: a second Ctrl-C ends the process at once, which leaves the
     * directory as consistent as the first would (the log's torn tail is
     * cut at the next open) */
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int cli_stop_requested(void)
{
    return (int)stop_signal;
}

/* How many entries of rows [j, j + m) of x (ids first + j, ...) the
 * server stores, of how many: *stored, *records.  An id of them the
 * server holds with another vector (mess_server_count_stored: MESS_ESTATE,
 * errno EEXIST) counts as not stored, with *other set.  MESS_OK or the
 * code. */
static int rows_stored(mess_client *c, const mess_server *s, const float *x, size_t dim,
                       uint64_t first, size_t j, size_t m, unsigned threads,
                       size_t *stored, size_t *records, int *other)
{
    uint64_t *ids = (uint64_t *)malloc(m * sizeof *ids);
    uint8_t *buf = NULL;
    size_t len = 0, i;
    int rc;
    *stored = *records = 0;
    *other = 0;
    if (!ids)
        return MESS_ENOMEM;
    for (i = 0; i < m; i++)
        ids[i] = first + j + i;
    rc = mess_client_upload(c, ids, x + j * dim, m, threads, &buf, &len);
    if (rc == MESS_OK) {
        errno = 0;
        rc = mess_server_count_stored(s, buf, len, stored, records);
        if (rc == MESS_ESTATE && errno == EEXIST) {
            *other = 1;
            *stored = 0;
            rc = MESS_OK;
        }
    }
    mess_buf_free(buf);
    free(ids);
    return rc;
}

int cli_stored_prefix(mess_client *c, const mess_server *s, const float *x, size_t n,
                      size_t dim, uint64_t first, size_t batch, unsigned threads,
                      const char *file, size_t *rows, int *other)
{
    size_t i = 0, m = 0, stored = 0, records = 0, lo, hi;
    int rc = MESS_OK, oth = 0, seen;
    /* file NULL: quiet (cli_insert_stored, after a failure already said).
     * An insert applies FILE's rows in order, in batches the server
     * applies all or nothing, so what an interrupted one stored is a
     * prefix.  Every row of it is checked (a batch at a time, encoded as
     * the insert encodes it: the client's cost of inserting them), so
     * rows stored that are not a prefix (ids of another file) are never
     * skipped: the prefix ends at the first row not stored, and a later
     * row stored is refused by the upload that holds it (MESS_ESTATE,
     * nothing applied).  A row whose id the server holds with another
     * vector ends the prefix too (*other: FILE and --first-id do not
     * continue the insert that stored that id, and --resume must not
     * skip rows it never inserted). */
    *rows = 0;
    if (other)
        *other = 0;
    for (i = 0; i < n; i += m) {
        m = n - i < batch ? n - i : batch;
        rc = rows_stored(c, s, x, dim, first, i, m, threads, &stored, &records, &oth);
        if (rc != MESS_OK || stored < records || oth)
            break;
    }
    seen = oth;
    if (rc == MESS_OK && i < n && (stored > 0 || oth)) {
        /* the batch where the prefix ends: its first row not stored as
         * FILE has it, by halving on "rows lo..mid all stored as FILE has
         * them" (true up to that row, false from it on), which holds
         * however the rows after it are stored: probing row mid alone
         * walked past a row holding another vector when rows after it
         * were stored (an id of a complete insert deleted and inserted
         * again with another vector), and --resume skipped it.  Rows
         * lo..mid are encoded once each step: about a batch in all */
        lo = i, hi = i + m;
        while (rc == MESS_OK && lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            rc = rows_stored(c, s, x, dim, first, lo, mid - lo + 1, threads, &stored,
                             &records, &oth);
            if (rc == MESS_OK && !oth && stored == records)
                lo = mid + 1;
            else if (rc == MESS_OK && (oth || stored == 0 || mid > lo))
                hi = mid;
            else if (rc == MESS_OK) {
                if (file)
                    cli_error("--resume: '%s' row %zu (id %llu) is partly stored (%zu of "
                              "its %zu entries): not what an interrupted insert leaves",
                              file, mid, (unsigned long long)(first + mid), stored, records);
                return CLI_FAIL;
            }
        }
        i = lo;
    }
    /* the row where the prefix ends: not stored, or its id holds another
     * vector */
    if (rc == MESS_OK && i < n && seen &&
        (rc = rows_stored(c, s, x, dim, first, i, 1, 1, &stored, &records, &oth)) ==
            MESS_OK &&
        oth) {
        if (other)
            *other = 1;
        if (file) {
            cli_error("--resume: '%s' row %zu: the server holds id %llu with another "
                      "vector, stored by another insert, not by an earlier run of this "
                      "one: FILE with --first-id %llu does not continue it, so nothing "
                      "is skipped or inserted (give the --first-id that insert used, or "
                      "ids not in use)",
                      file, i, (unsigned long long)(first + i), (unsigned long long)first);
            return CLI_FAIL;
        }
    }
    if (rc == MESS_EINVAL && file) {
        /* a row the insert itself would refuse: a zero vector under cos */
        mess_params p;
        size_t r;
        mess_client_params(c, &p);
        for (r = i; r < i + m && r < n; r++)
            if (cli_zero_row(file, x, r, dim, p.metric))
                return CLI_FAIL;
    }
    if (rc != MESS_OK) {
        if (file)
            cli_fail("--resume: server probe", NULL, rc);
        return CLI_FAIL;
    }
    *rows = i;
    return CLI_OK;
}

void cli_insert_stored(mess_client *c, const mess_server *s, const float *x, size_t dim,
                       size_t batch, unsigned threads, const char *file, const char *spath,
                       uint64_t first, size_t stored, size_t n)
{
    size_t rows;
    int other = 0;
    /* the directory is the truth: rows stored before this run count too
     * (an insert run again without --resume fails on its first batch).
     * Checked only when this run knows of none: otherwise its rows 0 ..
     * stored - 1 are the prefix (applied by it, or checked by --resume),
     * and a stop (Ctrl-C) should not wait for the client to encode them
     * all again. */
    if (stored == 0 &&
        cli_stored_prefix(c, s, x, n, dim, first, batch, threads, NULL, &rows, &other) ==
            CLI_OK)
        stored = rows;
    else if (stored < n)
        /* the row after this run's: refused as stored, with another vector? */
        cli_stored_prefix(c, s, x + stored * dim, 1, dim, first + stored, 1, 1, NULL,
                          &rows, &other);
    if (other)
        cli_error("'%s' row %zu: the server holds id %llu with another vector (stored "
                  "by another insert, not by an earlier run of this one): --first-id %llu "
                  "overlaps ids in use, and --resume would not skip it",
                  file, stored, (unsigned long long)(first + stored),
                  (unsigned long long)first);
    if (stored == 0)
        cli_error("none of the %zu items of '%s' is stored in '%s'", n, file, spath);
    else if (stored == n) /* the rest was there before (the same ids) */
        cli_error("all %zu items of '%s' are stored in '%s' (ids %llu to %llu)", n, file,
                  spath, (unsigned long long)first, (unsigned long long)(first + n - 1));
    else if (other)
        cli_error("%zu of the %zu items of '%s' are stored in '%s' and durable (rows 0 to "
                  "%zu, ids %llu to %llu)",
                  stored, n, file, spath, stored - 1, (unsigned long long)first,
                  (unsigned long long)(first + stored - 1));
    else
        cli_error("%zu of the %zu items of '%s' are stored in '%s' and durable (rows 0 to "
                  "%zu, ids %llu to %llu); `mess insert --resume` with the same FILE and "
                  "--first-id inserts the rest",
                  stored, n, file, spath, stored - 1, (unsigned long long)first,
                  (unsigned long long)(first + stored - 1));
}
