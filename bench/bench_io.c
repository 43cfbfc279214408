/*
 * bench_io.c - `mess bench io`: what a deployment whose payload arenas do
 * not stay in memory sees (docs/PERFORMANCE.md "Storage reads per query").
 *
 * Opens server directory S and its client (S.client), makes one request
 * per query of a TEXMEX set for every pool B, and in the same process:
 *   - measures the device under the directory: 4 KiB random reads with
 *     O_DIRECT (the page cache bypassed) over the arena files, from one
 *     thread (queue depth 1) and from 32 (depth 32), reads/s;
 *   - the first queries after a cold open: every file of S evicted from
 *     the page cache, mess_server_open, the first search and the next
 *     FIRST_NEXT; bytes read from storage (/proc/self/io read_bytes) and
 *     times; under the former advice (no graph read-in, arenas with
 *     readahead) and today's default, alternating;
 *   - per pool, per mode and per number of queries in flight (threads, one
 *     query each): the arenas evicted before every round (graphs stay
 *     warm), the round's searches timed, bytes read per query; then the
 *     same searches again, warm.  The modes alternate round by round:
 *       new     arenas random, a copy that meets uncached pages asks for
 *               every entry still to copy at once (the default)
 *       random  arenas random, each entry's page read by its own fault
 *       former  arenas with the kernel's readahead, faults one by one
 *               (the policy before: a fault reads the readahead window)
 *       ask     arenas random, every entry's pages asked for before the
 *               copy, cached or not (what the watch saves a warm copy)
 *   - the warm path alone, the payload watch on and off alternating;
 *   - the floor of a cold round: its queries' pages at the device's rate
 *     at depth 32, and each mode's median against it;
 *   - the process's memory: private (anonymous) against mapped file pages.
 * Eviction is posix_fadvise(POSIX_FADV_DONTNEED) per file of S only (after
 * madvise(MADV_DONTNEED) of this process's own arena mappings, whose
 * mapped pages the kernel would keep); the machine's caches are never
 * dropped.  The last line is one JSON object.
 */
#define _GNU_SOURCE /* O_DIRECT; madvise(MADV_DONTNEED) */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../mess.h"
#include "server.h"
#include "bench.h"

#define MAXT 16   /* queries in flight, at most */
#define PAGE 4096 /* the device reads' size */
#define FIRST_NEXT 9 /* queries timed after the first one of a cold open */

static const char help[] =
    "usage: mess bench io --server S --data DIR [--client F] [--queries Q]\n"
    "                     [--pools LIST] [--threads LIST] [--modes LIST]\n"
    "                     [--device-reads N] [--first R]\n"
    "\n"
    "Storage reads per query with the payload arenas cold (evicted before\n"
    "each round with posix_fadvise DONTNEED, graphs warm) and warm, for the\n"
    "first Q queries of DIR (200) at each pool B of LIST (500,1500,4000) and\n"
    "T queries in flight (--threads, 1,2,8): bytes read from storage per\n"
    "query (/proc/self/io), server time p50/p99, the same warm.  --modes:\n"
    "new (asks for the rest of a response's pages at once, the default),\n"
    "random (arenas random, one fault per entry), former (kernel readahead,\n"
    "the policy before), ask (every entry's pages asked for, cached or not);\n"
    "default new,random; they alternate round by round.\n"
    "Also: the device's 4 KiB O_DIRECT random-read rate at depth 1 and 32 over\n"
    "the arena files (--device-reads N per depth, 4000; 0 skips), the floor\n"
    "(a cold round's pages at the depth-32 rate) and each mode's ratio to it,\n"
    "the first queries after a cold open, former advice and today's (median\n"
    "of R, 3; 0 skips), and\n"
    "private against mapped-file memory.  Last line: one JSON object.\n";

/* ---- storage counters ------------------------------------------------------ */

/* Bytes this process has caused to be read from storage: /proc/self/io
 * read_bytes, or getrusage's blocks in where /proc lacks it. */
static double io_read_bytes(void)
{
    FILE *f = fopen("/proc/self/io", "r");
    char line[128];
    struct rusage ru;
    if (f) {
        unsigned long long v;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "read_bytes: %llu", &v) == 1) {
                fclose(f);
                return (double)v;
            }
        fclose(f);
    }
    getrusage(RUSAGE_SELF, &ru);
    return 512.0 * (double)ru.ru_inblock;
}

/* Waits until this process's reads from storage stop growing (what a
 * background read-in submitted has arrived): two equal readings 50 ms
 * apart, 10 s at most. */
static void settle_reads(void)
{
    double last = io_read_bytes(), now;
    int i;
    for (i = 0; i < 200; i++) {
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
        now = io_read_bytes();
        if (now == last)
            return;
        last = now;
    }
}

/* ---- eviction ------------------------------------------------------------------ */

static void evict_file(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return;
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

/* Every file of dir; *graph_bytes: the graph files' and deltas' lengths. */
static void evict_dir(const char *dir, double *graph_bytes)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[4096];
    *graph_bytes = 0;
    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        size_t n = strlen(e->d_name);
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (n > 6 && (strcmp(e->d_name + n - 6, ".graph") == 0 ||
                      strcmp(e->d_name + n - 6, ".delta") == 0) &&
            stat(path, &st) == 0)
            *graph_bytes += (double)st.st_size;
        evict_file(path);
    }
    closedir(d);
}

/* The arenas of s: this process's mappings emptied (a mapped page is not
 * evicted), then the files' pages dropped. */
static void evict_arenas(const mess_server *s)
{
    uint32_t j;
    for (j = 0; j < s->p.shards; j++) {
        const struct shard_store *st = &s->shards[j];
        char *path;
        if (!st->graph || !st->arena)
            continue;
        madvise((void *)(uintptr_t)st->arena, st->arena_map, MADV_DONTNEED);
        path = store_file_path(s->dir, NULL, j, st->arena_gen, "arena");
        if (path)
            evict_file(path);
        free(path);
    }
}

/* ---- modes ---------------------------------------------------------------------- */

enum { MODE_NEW, MODE_RANDOM, MODE_FORMER, MODE_ASK, MODES };
static const char *const mode_name[MODES] = {"new", "random", "former", "ask"};

static void set_mode(mess_server *s, int mode)
{
    uint32_t j;
    for (j = 0; j < s->p.shards; j++) {
        const struct shard_store *st = &s->shards[j];
        if (st->graph && st->arena)
            posix_madvise((void *)(uintptr_t)st->arena, st->arena_map,
                          mode == MODE_FORMER ? POSIX_MADV_NORMAL : POSIX_MADV_RANDOM);
    }
    server_search_set_payload_io(s, mode == MODE_NEW ? 1 : mode == MODE_ASK ? 2 : 0);
}

/* ---- the device's own rate -------------------------------------------------------- */

struct dev_job {
    int *fds;
    const double *sizes; /* per file */
    size_t nfiles, reads;
    uint64_t seed;
    int failed;
};

static uint64_t next_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void *dev_reader(void *arg)
{
    struct dev_job *d = (struct dev_job *)arg;
    void *buf = NULL;
    size_t i;
    if (posix_memalign(&buf, PAGE, PAGE) != 0) {
        d->failed = 1;
        return NULL;
    }
    for (i = 0; i < d->reads; i++) {
        size_t f = (size_t)(next_rand(&d->seed) % d->nfiles);
        uint64_t pages = (uint64_t)(d->sizes[f] / PAGE);
        off_t off = (off_t)(next_rand(&d->seed) % (pages ? pages : 1)) * PAGE;
        if (pread(d->fds[f], buf, PAGE, off) != PAGE) {
            d->failed = 1;
            break;
        }
    }
    free(buf);
    return NULL;
}

/* 4 KiB O_DIRECT random reads over the arena files of s from `threads`
 * threads, `reads` in all: reads/s, or 0 if the files refuse O_DIRECT. */
static double device_rate(const mess_server *s, unsigned threads, size_t reads)
{
    struct dev_job job[32];
    pthread_t tid[32];
    int fds[MESS_MAX_SHARDS];
    double sizes[MESS_MAX_SHARDS], t0, rate = 0;
    size_t n = 0, i;
    uint32_t j;
    int failed = 0;
    for (j = 0; j < s->p.shards && n < MESS_MAX_SHARDS; j++) {
        const struct shard_store *st = &s->shards[j];
        char *path;
        if (!st->graph || st->arena_bytes < PAGE)
            continue;
        path = store_file_path(s->dir, NULL, j, st->arena_gen, "arena");
        fds[n] = path ? open(path, O_RDONLY | O_DIRECT) : -1;
        free(path);
        if (fds[n] < 0)
            break;
        sizes[n++] = (double)st->arena_bytes;
    }
    if (n == 0 || j < s->p.shards)
        goto out;
    if (threads > 32)
        threads = 32;
    t0 = cli_wall_s();
    for (i = 0; i < threads; i++) {
        job[i].fds = fds;
        job[i].sizes = sizes;
        job[i].nfiles = n;
        job[i].reads = reads / threads;
        job[i].seed = 0x10 + i;
        job[i].failed = 0;
        if (pthread_create(&tid[i], NULL, dev_reader, &job[i]) != 0) {
            threads = (unsigned)i;
            failed = 1;
        }
    }
    for (i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
        failed |= job[i].failed;
    }
    if (!failed && threads > 0)
        rate = (double)(reads / threads * threads) / (cli_wall_s() - t0);
out:
    for (i = 0; i < n; i++)
        close(fds[i]);
    return rate;
}

/* ---- searches in flight ----------------------------------------------------------------- */

struct qjob {
    const mess_server *s;
    const uint8_t *req;
    size_t len;
    double ms;
    int rc;
};

static void *run_query(void *arg)
{
    struct qjob *q = (struct qjob *)arg;
    uint8_t *resp = NULL;
    size_t len = 0;
    double t0 = cli_wall_s();
    q->rc = mess_server_search(q->s, q->req, q->len, 1, &resp, &len);
    q->ms = 1e3 * (cli_wall_s() - t0);
    mess_buf_free(resp);
    return NULL;
}

/* T searches at once, one per thread (one on this thread when T is 1). */
static int run_round(struct qjob *q, unsigned T)
{
    pthread_t tid[MAXT];
    unsigned t, started = 0;
    int rc = MESS_OK;
    if (T == 1) {
        run_query(q);
        return q->rc;
    }
    for (t = 0; t < T; t++, started++)
        if (pthread_create(&tid[t], NULL, run_query, &q[t]) != 0) {
            rc = MESS_ENOMEM;
            break;
        }
    for (t = 0; t < started; t++) {
        pthread_join(tid[t], NULL);
        if (q[t].rc != MESS_OK && rc == MESS_OK)
            rc = q[t].rc;
    }
    return rc;
}

/* The load averages over 1, 5 and 15 minutes ("" if unknown). */
static void load_now(char out[64])
{
    FILE *f = fopen("/proc/loadavg", "r");
    out[0] = 0;
    if (f) {
        if (!fgets(out, 15, f))
            out[0] = 0;
        fclose(f);
    }
    out[strcspn(out, "\n")] = 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile (0..1) of v[0..n), sorted in place. */
static double quantile(double *v, size_t n, double q)
{
    size_t i;
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, cmp_double);
    i = (size_t)(q * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

static double mean(const double *v, size_t n)
{
    double t = 0;
    size_t i;
    for (i = 0; i < n; i++)
        t += v[i];
    return n ? t / (double)n : 0;
}

/* One (pool, threads, mode)'s figures over its rounds. */
struct cell {
    double *cold, *warm; /* ms per query */
    double bytes, wall;  /* bytes read while cold, wall of the cold rounds */
    size_t n;
};

int bench_io(int argc, char **argv)
{
    struct cli_args a;
    const char *dir, *client_path, *data;
    char cpath[4096], path[4096], load[64];
    uint64_t *pools = NULL, *threads = NULL;
    size_t npools = 0, nthreads = 0, nmodes = 0, i, k, t, m, nq = 0, qn, qdim;
    long queries, dev_reads, first_reps;
    int modes[MODES], rc = MESS_OK;
    mess_client *c = NULL;
    mess_server *s = NULL;
    mess_params p;
    float *qv = NULL;
    uint8_t **reqs = NULL; /* [pool][query] */
    size_t *lens = NULL;
    struct cell *cells = NULL;
    double rate1 = 0, rate32 = 0, graph_bytes = 0;
    struct cli_memory mem;
    FILE *json;
    char *jbuf = NULL;
    size_t jlen = 0;

    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(help, stdout);
        return CLI_OK;
    }
    dir = cli_opt(&a, "--server");
    data = cli_opt(&a, "--data");
    client_path = cli_opt(&a, "--client");
    if (cli_parse_list(cli_opt(&a, "--pools") ? cli_opt(&a, "--pools") : "500,1500,4000", 1,
                       1000000, &pools, &npools) != 0 ||
        cli_parse_list(cli_opt(&a, "--threads") ? cli_opt(&a, "--threads") : "1,2,8", 1, MAXT,
                       &threads, &nthreads) != 0) {
        cli_error("bad --pools or --threads list (threads 1..%d)", MAXT);
        free(pools);
        return CLI_USAGE;
    }
    {
        const char *ms = cli_opt(&a, "--modes");
        char buf[64], *tok, *save = NULL;
        snprintf(buf, sizeof buf, "%s", ms ? ms : "new,random");
        for (tok = strtok_r(buf, ",", &save); tok && rc == MESS_OK;
             tok = strtok_r(NULL, ",", &save)) {
            for (m = 0; m < MODES && strcmp(tok, mode_name[m]) != 0; m++)
                ;
            if (m == MODES || nmodes == MODES)
                rc = MESS_EINVAL;
            else
                modes[nmodes++] = (int)m;
        }
        if (rc != MESS_OK || nmodes == 0) {
            cli_error("--modes: a list of new, random, former, ask");
            free(pools);
            free(threads);
            return CLI_USAGE;
        }
    }
    if (cli_opt_long(&a, "--queries", 1, 1000000, 200, &queries) ||
        cli_opt_long(&a, "--device-reads", 0, 10000000, 4000, &dev_reads) ||
        cli_opt_long(&a, "--first", 0, 100, 3, &first_reps) || cli_check_unused(&a)) {
        free(pools);
        free(threads);
        return CLI_USAGE;
    }
    if (!dir || !data) {
        cli_error("--server and --data are required (mess bench io --help)");
        free(pools);
        free(threads);
        return CLI_USAGE;
    }
    if (!client_path) {
        snprintf(cpath, sizeof cpath, "%s.client", dir);
        client_path = cpath;
    }
    json = open_memstream(&jbuf, &jlen);
    if (!json) {
        free(pools);
        free(threads);
        return CLI_FAIL;
    }
    load_now(load);
    printf("mess bench io: %s, load %s\n", dir, load);
    fprintf(json, "{\"server\":\"%s\",\"load_before\":\"%s\"", dir, load);
    rc = mess_client_load(client_path, NULL, &c);
    if (rc != MESS_OK) {
        cli_fail("cannot load the client", client_path, rc);
        goto out;
    }
    mess_client_params(c, &p);
    snprintf(path, sizeof path, "%s/query.bvecs", data);
    rc = mess_vecs_read_f32(path, &qv, &qn, &qdim);
    if (rc != MESS_OK) {
        cli_fail("cannot read", path, rc);
        goto out;
    }
    nq = (size_t)queries < qn ? (size_t)queries : qn;
    reqs = (uint8_t **)calloc(npools * nq, sizeof *reqs);
    lens = (size_t *)calloc(npools * nq, sizeof *lens);
    cells = (struct cell *)calloc(npools * nthreads * nmodes, sizeof *cells);
    if (!reqs || !lens || !cells) {
        rc = MESS_ENOMEM;
        goto out;
    }
    for (i = 0; i < npools * nthreads * nmodes && rc == MESS_OK; i++) {
        cells[i].cold = (double *)calloc(nq, sizeof(double));
        cells[i].warm = (double *)calloc(nq, sizeof(double));
        if (!cells[i].cold || !cells[i].warm)
            rc = MESS_ENOMEM;
    }
    for (k = 0; k < npools && rc == MESS_OK; k++)
        for (i = 0; i < nq && rc == MESS_OK; i++) {
            mess_query *mq = NULL;
            rc = mess_client_request(c, qv + i * qdim, (size_t)pools[k], &mq,
                                     &reqs[k * nq + i], &lens[k * nq + i]);
            mess_query_free(mq);
        }
    if (rc != MESS_OK)
        goto out;

    /* the first queries after a cold open, before any handle maps the
     * files (a mapped page is not evicted): the former advice (main's
     * default before issue 33: graph random while attaching, no read-in,
     * arenas with readahead) and today's default, alternating */
    fprintf(json, ",\"first\":[");
    for (k = 0; k < npools && first_reps > 0 && rc == MESS_OK; k++) {
        static const unsigned masks[2] = {MESS_ADVICE_GRAPH_RANDOM_OPEN, MESS_ADVICE_DEFAULT};
        static const char *const names[2] = {"former", "new"};
        double open_ms[2][100], first_ms[2][100], next_ms[2][100], bytes[2][100],
            bytes10[2][100], b0, t0;
        long r;
        size_t v;
        for (r = 0; r < first_reps && rc == MESS_OK; r++)
            for (v = 0; v < 2 && rc == MESS_OK; v++) {
                size_t vi = (v + (size_t)r) % 2, q;
                mess_server *x = NULL;
                mess_server_set_advice(masks[vi], NULL);
                evict_dir(dir, &graph_bytes);
                b0 = io_read_bytes();
                t0 = cli_wall_s();
                rc = mess_server_open(dir, &p, NULL, 0, &x);
                open_ms[vi][r] = 1e3 * (cli_wall_s() - t0);
                /* the first query, then the next FIRST_NEXT */
                for (q = 0; q <= FIRST_NEXT && rc == MESS_OK; q++) {
                    size_t qi = k * nq + ((size_t)r * (FIRST_NEXT + 1) + q) % nq;
                    uint8_t *resp = NULL;
                    size_t len;
                    t0 = cli_wall_s();
                    rc = mess_server_search(x, reqs[qi], lens[qi], 1, &resp, &len);
                    if (q == 0) {
                        first_ms[vi][r] = 1e3 * (cli_wall_s() - t0);
                        bytes[vi][r] = io_read_bytes() - b0;
                        t0 = cli_wall_s();
                        next_ms[vi][r] = 0;
                    } else {
                        next_ms[vi][r] += 1e3 * (cli_wall_s() - t0) / FIRST_NEXT;
                    }
                    mess_buf_free(resp);
                }
                mess_server_free(x);
                /* until the background read-in is over: the next round
                 * starts cold, and its bytes are counted here */
                settle_reads();
                bytes10[vi][r] = io_read_bytes() - b0;
            }
        mess_server_set_advice(MESS_ADVICE_DEFAULT, NULL);
        if (rc != MESS_OK)
            break;
        for (v = 0; v < 2; v++) {
            double om = quantile(open_ms[v], (size_t)first_reps, 0.5);
            double fm = quantile(first_ms[v], (size_t)first_reps, 0.5);
            double nm = quantile(next_ms[v], (size_t)first_reps, 0.5);
            double bm = quantile(bytes[v], (size_t)first_reps, 0.5);
            double b10 = quantile(bytes10[v], (size_t)first_reps, 0.5);
            double target = graph_bytes + 2.5 * (double)pools[k] * PAGE;
            printf("  cold open, B = %llu, %-6s: open %.1f ms, first query %.1f ms (read %.1f "
                   "MB by its end; graphs %.1f MB + 2.5 x B x 4 KiB = %.1f MB), next %d "
                   "queries %.1f ms each, %.1f MB read in all\n",
                   (unsigned long long)pools[k], names[v], om, fm, bm / 1e6, graph_bytes / 1e6,
                   target / 1e6, FIRST_NEXT, nm, b10 / 1e6);
            fprintf(json, "%s{\"pool\":%llu,\"advice\":\"%s\",\"open_ms\":%.3f,"
                          "\"first_ms\":%.3f,\"next_ms\":%.3f,\"read_bytes\":%.0f,"
                          "\"read_bytes_all\":%.0f,\"graph_bytes\":%.0f,\"target_bytes\":%.0f}",
                    k || v ? "," : "", (unsigned long long)pools[k], names[v], om, fm, nm, bm,
                    b10, graph_bytes, target);
        }
    }
    fprintf(json, "]");
    if (rc != MESS_OK) {
        cli_error("bench io: cold open: %s", mess_strerror(rc));
        goto out;
    }

    rc = cli_server_open(dir, &p, client_path, &s);
    if (rc != MESS_OK) {
        s = NULL;
        goto out;
    }
    rc = server_ready(s, NULL, 0);
    if (rc != MESS_OK) {
        cli_error("bench io: %s", mess_strerror(rc));
        goto out;
    }
    settle_reads(); /* the open's graph read-in, before the device is timed */
    if (dev_reads > 0) {
        rate1 = device_rate(s, 1, (size_t)dev_reads);
        rate32 = device_rate(s, 32, (size_t)dev_reads * 4);
        printf("  device, 4 KiB O_DIRECT random reads over the arenas: %.0f/s at depth 1 "
               "(%.1f us), %.0f/s at depth 32\n",
               rate1, rate1 > 0 ? 1e6 / rate1 : 0, rate32);
    }
    fprintf(json, ",\"device_reads_s_qd1\":%.1f,\"device_reads_s_qd32\":%.1f", rate1, rate32);

    /* every query once: the graphs' pages warm for what follows */
    for (i = 0; i < nq && rc == MESS_OK; i++) {
        struct qjob q;
        q.s = s;
        q.req = reqs[(npools - 1) * nq + i];
        q.len = lens[(npools - 1) * nq + i];
        rc = run_round(&q, 1);
    }
    /* per pool and queries in flight: rounds of T queries, the modes
     * alternating round by round (rotating which goes first) */
    for (k = 0; k < npools && rc == MESS_OK; k++)
        for (t = 0; t < nthreads && rc == MESS_OK; t++) {
            unsigned T = (unsigned)threads[t];
            size_t r, rounds = nq / T;
            for (r = 0; r < rounds && rc == MESS_OK; r++)
                for (m = 0; m < nmodes && rc == MESS_OK; m++) {
                    size_t mi = (m + r) % nmodes;
                    struct cell *cl = &cells[(k * nthreads + t) * nmodes + mi];
                    struct qjob q[MAXT];
                    double b0, w0;
                    unsigned u;
                    for (u = 0; u < T; u++) {
                        q[u].s = s;
                        q[u].req = reqs[k * nq + r * T + u];
                        q[u].len = lens[k * nq + r * T + u];
                    }
                    set_mode(s, modes[mi]);
                    evict_arenas(s);
                    b0 = io_read_bytes();
                    w0 = cli_wall_s();
                    rc = run_round(q, T);
                    cl->wall += cli_wall_s() - w0;
                    cl->bytes += io_read_bytes() - b0;
                    for (u = 0; u < T; u++)
                        cl->cold[cl->n + u] = q[u].ms;
                    if (rc == MESS_OK)
                        rc = run_round(q, T); /* again: the pages now cached */
                    for (u = 0; u < T; u++)
                        cl->warm[cl->n + u] = q[u].ms;
                    cl->n += T;
                }
        }
    set_mode(s, MODE_NEW);
    /* the warm path alone, with and without the payload watch: every query
     * once untimed (its pages and lines cached), then timed, the two
     * alternating query by query; CPU time besides wall (the machine's
     * other jobs preempt a wall figure, not a CPU one) */
    fprintf(json, ",\"warm\":[");
    for (k = 0; k < npools && rc == MESS_OK; k++) {
        double wall[2] = {0, 0}, cpu[2] = {0, 0};
        /* the pool's pages in first (the cold rounds evicted them) */
        for (i = 0; i < nq && rc == MESS_OK; i++) {
            uint8_t *resp = NULL;
            size_t len;
            rc = mess_server_search(s, reqs[k * nq + i], lens[k * nq + i], 1, &resp, &len);
            mess_buf_free(resp);
        }
        for (i = 0; i < nq && rc == MESS_OK; i++) {
            size_t v;
            for (v = 0; v < 2 && rc == MESS_OK; v++) {
                int io = (int)((v + i) % 2);
                uint8_t *resp = NULL;
                size_t len;
                double c0, w0;
                server_search_set_payload_io(s, io);
                rc = mess_server_search(s, reqs[k * nq + i], lens[k * nq + i], 1, &resp, &len);
                mess_buf_free(resp);
                resp = NULL;
                c0 = cli_cpu_s();
                w0 = cli_wall_s();
                if (rc == MESS_OK)
                    rc = mess_server_search(s, reqs[k * nq + i], lens[k * nq + i], 1, &resp,
                                            &len);
                cpu[io] += cli_cpu_s() - c0;
                wall[io] += cli_wall_s() - w0;
                mess_buf_free(resp);
            }
        }
        printf("  warm, B = %llu: watch off %.3f ms (CPU %.3f), on %.3f ms (CPU %.3f): "
               "on / off %.3f (CPU %.3f)\n",
               (unsigned long long)pools[k], 1e3 * wall[0] / (double)nq,
               1e3 * cpu[0] / (double)nq, 1e3 * wall[1] / (double)nq, 1e3 * cpu[1] / (double)nq,
               wall[1] / wall[0], cpu[1] / cpu[0]);
        fprintf(json, "%s{\"pool\":%llu,\"off_ms\":%.4f,\"on_ms\":%.4f,\"off_cpu_ms\":%.4f,"
                      "\"on_cpu_ms\":%.4f}",
                k ? "," : "", (unsigned long long)pools[k], 1e3 * wall[0] / (double)nq,
                1e3 * wall[1] / (double)nq, 1e3 * cpu[0] / (double)nq, 1e3 * cpu[1] / (double)nq);
    }
    fprintf(json, "]");
    server_search_set_payload_io(s, 1);
    if (rc != MESS_OK) {
        cli_error("bench io: search: %s", mess_strerror(rc));
        goto out;
    }

    printf("  %-6s %-7s %-7s %10s %10s %10s %10s %10s %10s %8s %9s\n", "pool", "threads",
           "mode", "MB/query", "pages/B", "cold p50", "cold p99", "warm p50", "warm mean",
           "floor", "p50/floor");
    fprintf(json, ",\"runs\":[");
    for (k = 0; k < npools; k++)
        for (t = 0; t < nthreads; t++)
            for (m = 0; m < nmodes; m++) {
                struct cell *cl = &cells[(k * nthreads + t) * nmodes + m];
                double bq = cl->n ? cl->bytes / (double)cl->n : 0;
                /* the round's pages (T queries share the device) at depth 32 */
                double floor_ms =
                    rate32 > 0 ? 1e3 * (double)threads[t] * (bq / PAGE) / rate32 : 0;
                double wmean = mean(cl->warm, cl->n), cmean = mean(cl->cold, cl->n);
                double c50 = quantile(cl->cold, cl->n, 0.5), c99 = quantile(cl->cold, cl->n, 0.99);
                double w50 = quantile(cl->warm, cl->n, 0.5), w99 = quantile(cl->warm, cl->n, 0.99);
                double qps = cl->wall > 0 ? (double)cl->n / cl->wall : 0;
                printf("  %-6llu %-7llu %-7s %10.2f %10.2f %10.2f %10.2f %10.3f %10.3f %8.2f %8.2fx\n",
                       (unsigned long long)pools[k], (unsigned long long)threads[t],
                       mode_name[modes[m]], bq / 1e6, bq / PAGE / (double)pools[k], c50, c99,
                       w50, wmean, floor_ms, floor_ms > 0 ? c50 / floor_ms : 0);
                fprintf(json, "%s{\"pool\":%llu,\"threads\":%llu,\"mode\":\"%s\",\"queries\":%zu,"
                              "\"read_bytes_per_query\":%.0f,\"cold_p50_ms\":%.3f,"
                              "\"cold_p99_ms\":%.3f,\"cold_mean_ms\":%.3f,\"cold_qps\":%.2f,"
                              "\"warm_p50_ms\":%.4f,\"warm_p99_ms\":%.4f,\"warm_mean_ms\":%.4f,"
                              "\"floor_ms\":%.3f}",
                        k || t || m ? "," : "", (unsigned long long)pools[k],
                        (unsigned long long)threads[t], mode_name[modes[m]], cl->n, bq, c50, c99,
                        cmean, qps, w50, w99, wmean, floor_ms);
            }
    fprintf(json, "]");
    cli_memory(dir, &mem);
    printf("  memory: %.1f MB resident, %.1f MB private (anonymous), %.1f MB mapped file "
           "pages, of them %.1f MB the directory's\n",
           mem.rss / 1e6, mem.anon / 1e6, (mem.rss - mem.anon) / 1e6,
           (mem.dir_rss - mem.dir_anon) / 1e6);
    fprintf(json, ",\"rss_bytes\":%.0f,\"private_bytes\":%.0f,\"file_mapped_bytes\":%.0f,"
                  "\"dir_mapped_bytes\":%.0f",
            mem.rss, mem.anon, mem.rss - mem.anon, mem.dir_rss - mem.dir_anon);
out:
    if (json) {
        load_now(load);
        printf("  load %s after\n", load);
        fprintf(json, ",\"load_after\":\"%s\"}", load);
        fclose(json);
        if (rc == MESS_OK)
            printf("%s\n", jbuf);
        free(jbuf);
    }
    for (i = 0; cells && i < npools * nthreads * nmodes; i++) {
        free(cells[i].cold);
        free(cells[i].warm);
    }
    free(cells);
    for (i = 0; reqs && i < npools * nq; i++)
        mess_buf_free(reqs[i]);
    free(reqs);
    free(lens);
    free(pools);
    free(threads);
    mess_vecs_free(qv);
    mess_server_free(s);
    mess_client_free(c);
    return rc == MESS_OK ? CLI_OK : CLI_FAIL;
}
