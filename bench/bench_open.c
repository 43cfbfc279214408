/*
 * bench_open.c - `mess bench open`: the time to open a server directory
 * (mess_server_open: MANIFEST, graph files, arenas mapped) against loading
 * the same server from its exported one-file form (mess_server_load: read,
 * decompress, copy every ciphertext), with a cold and a warm page cache.
 *
 * Cold without root or drop_caches: every file of the directory and the
 * travel file is fsync'd and given posix_fadvise(POSIX_FADV_DONTNEED)
 * before each cold run, which evicts its clean pages from the page cache
 * on Linux (pages still mapped by another process stay).  Warm runs follow
 * a run that read the same files.  Each figure is the median of --repeat
 * runs.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../mess.h"
#include "bench.h"

static const char open_help[] =
    "usage: mess bench open --server S [--repeat R]\n"
    "\n"
    "Times opening server directory S (mess_server_open) and loading the same\n"
    "server from its exported file (mess_server_load; exported next to S and\n"
    "removed after), each with a cold page cache (the files' pages evicted\n"
    "with posix_fadvise DONTNEED, no root needed) and a warm one; medians of\n"
    "R runs (5).  Last line: {\"open_cold_ms\",\"open_warm_ms\",\"load_cold_ms\",\n"
    "\"load_warm_ms\",\"dir_bytes\",\"travel_bytes\",\"entries\",\"shards\",...}.\n";

/* Evicts one file's pages; adds its size to *bytes. */
static void evict(const char *path, size_t *bytes)
{
    struct stat st;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return;
    if (fstat(fd, &st) == 0 && bytes)
        *bytes += (size_t)st.st_size;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

static size_t evict_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t bytes = 0;
    char path[4096];
    if (!d)
        return 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        evict(path, &bytes);
    }
    closedir(d);
    return bytes;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int bench_open(int argc, char **argv)
{
    struct cli_args a;
    const char *spath;
    long repeat;
    char *travel = NULL;
    mess_server *s = NULL;
    mess_server_stats st;
    mess_params p;
    double *t = NULL, oc, ow, lc, lw, t0;
    size_t dir_bytes = 0, travel_bytes = 0, i;
    int rc = CLI_FAIL, fd;

    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(open_help, stdout);
        return CLI_OK;
    }
    spath = cli_opt(&a, "--server");
    if (cli_opt_long(&a, "--repeat", 1, 1000, 5, &repeat))
        return CLI_USAGE;
    if (!spath) {
        cli_error("bench open needs --server (see --help)");
        return CLI_USAGE;
    }
    if (cli_check_unused(&a))
        return CLI_USAGE;
    if (cli_server_open(spath, NULL, NULL, &s) != CLI_OK)
        return CLI_FAIL;
    st.size = sizeof st;
    mess_server_stats_get(s, &st);
    mess_server_params(s, &p);
    travel = (char *)malloc(strlen(spath) + 32);
    t = (double *)malloc(4 * (size_t)repeat * sizeof *t);
    if (!travel || !t) {
        cli_error("out of memory");
        goto done;
    }
    sprintf(travel, "%s.bench.XXXXXX", spath);
    fd = mkstemp(travel);
    if (fd < 0) {
        cli_error("%s: %s", travel, strerror(errno));
        goto done;
    }
    close(fd);
    errno = 0;
    if (mess_server_export(s, travel) != MESS_OK) {
        cli_error("cannot export to '%s': %s", travel, strerror(errno));
        unlink(travel);
        goto done;
    }
    mess_server_free(s);
    s = NULL;
    for (i = 0; i < (size_t)repeat; i++) {
        mess_server *x = NULL;
        int r1, r2, r3, r4;
        dir_bytes = evict_dir(spath);
        travel_bytes = 0;
        evict(travel, &travel_bytes);
        t0 = cli_wall_s();
        r1 = mess_server_open(spath, NULL, NULL, 0, &x);
        t[i] = cli_wall_s() - t0;
        mess_server_free(x);
        t0 = cli_wall_s();
        r2 = mess_server_open(spath, NULL, NULL, 0, &x);
        t[repeat + i] = cli_wall_s() - t0;
        mess_server_free(x);
        t0 = cli_wall_s(); /* the travel file was evicted above: cold */
        r3 = mess_server_load(travel, NULL, &x);
        t[2 * repeat + i] = cli_wall_s() - t0;
        mess_server_free(x);
        t0 = cli_wall_s();
        r4 = mess_server_load(travel, NULL, &x);
        t[3 * repeat + i] = cli_wall_s() - t0;
        mess_server_free(x);
        if (r1 != MESS_OK || r2 != MESS_OK || r3 != MESS_OK || r4 != MESS_OK) {
            cli_error("bench open: %s", mess_strerror(r1 ? r1 : r2 ? r2 : r3 ? r3 : r4));
            unlink(travel);
            goto done;
        }
    }
    unlink(travel);
    oc = median(t, (size_t)repeat) * 1e3;
    ow = median(t + repeat, (size_t)repeat) * 1e3;
    lc = median(t + 2 * repeat, (size_t)repeat) * 1e3;
    lw = median(t + 3 * repeat, (size_t)repeat) * 1e3;
    printf("server %s: %u shards, %zu entries; directory %zu bytes, exported file %zu bytes\n",
           spath, p.shards, st.entries, dir_bytes, travel_bytes);
    printf("  open (directory)   cold %9.2f ms   warm %9.2f ms\n", oc, ow);
    printf("  load (one file)    cold %9.2f ms   warm %9.2f ms\n", lc, lw);
    printf("{\"open_cold_ms\":%.3f,\"open_warm_ms\":%.3f,\"load_cold_ms\":%.3f,"
           "\"load_warm_ms\":%.3f,\"dir_bytes\":%zu,\"travel_bytes\":%zu,"
           "\"entries\":%zu,\"shards\":%u,\"repeat\":%ld,\"cold\":\"posix_fadvise DONTNEED\"}\n",
           oc, ow, lc, lw, dir_bytes, travel_bytes, st.entries, p.shards, repeat);
    rc = CLI_OK;
done:
    mess_server_free(s);
    free(travel);
    free(t);
    return rc;
}
