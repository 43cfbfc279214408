/*
 * bench_server.c - `mess bench server`: the server's search on a server
 * directory, against its floor (docs/PERFORMANCE.md, "Server").
 *
 * Opens server directory S and its client (S.client, as eval/onem.py
 * build saves it), makes one request per query of a TEXMEX set at pool
 * B, and in the same process:
 *   - measures this machine's rates: the latency of a dependent load from
 *     a buffer far larger than the caches (one pointer chase), the time
 *     per line of 16 independent chases (what prefetching can reach), and
 *     one 128-bit Hamming distance in L1;
 *   - counts the work of the searches (hnsw_scratch_counts): distances of
 *     the greedy descent, nodes expanded, link ids read, codes scored,
 *     cache lines of link lists, per shard and per query;
 *   - times mess_server_search on one and two threads for every search
 *     width (0: the shards one after the other, the path before
 *     hnsw_search_many; W: W shard searches interleaved per thread), the
 *     rounds rotating the order of the variants, best round each, and
 *     requires every variant's responses to be byte-identical;
 *   - a throughput mode: mess_server_search_batch over one mess_workers
 *     of T threads, queries/s per core (CPU time);
 *   - optionally hnswlib on the raw vectors (scripts/hnswlib_ref.py
 *     --throughput), queries/s per core at matching recall, same run.
 * The last line is one JSON object.
 */
#define _DEFAULT_SOURCE /* madvise(MADV_HUGEPAGE) for the chase's second buffer */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/mman.h>

#include <sodium.h>

#include "hnsw_bin.h"
#include "../mess.h"
#include "server.h"
#include "wire.h"
#include "bench.h"

#define MAXV 16
#define K 10

static const char help[] =
    "usage: mess bench server --server S --data DIR [--client F] [--queries Q]\n"
    "                         [--pool B] [--widths LIST] [--threads LIST]\n"
    "                         [--rounds R] [--batch-threads LIST] [--hnswlib]\n"
    "                         [--fast LIST] [--warm] [--layout LIST]\n"
    "\n"
    "The server's search on directory S (client S.client unless --client)\n"
    "for the first Q queries of DIR (1000) at pool B (1500): work counts,\n"
    "memory latency and the floor, ms/query per search width (0 = shards one\n"
    "after the other, the former path; 8 the default) and threads (1,2),\n"
    "best of R rotating rounds (3), responses required byte-identical; then\n"
    "queries/s per core of mess_server_search_batch on T workers, and with\n"
    "--hnswlib the same for hnswlib on the raw vectors (scripts/hnswlib_ref.py,\n"
    "--python P, default /usr/bin/python3).  --ahead LIST: entries prefetched\n"
    "ahead while a response is copied (0,4; 0 = the former copy).  --keep LIST:\n"
    "1 = searches on more than one thread use the server's kept workers, 0 =\n"
    "threads started per search (the former way); default 1.  --fast LIST: 1 =\n"
    "the interleaved searches run the common case (128-bit codes, no deleted\n"
    "node) in loops of their own, 2 = those loops gathering without a branch\n"
    "on the visit bit, 3 = and each neighbour list scored at once (its\n"
    "distances, then the queue updates of those below the bound), 0 = the\n"
    "general loops; default 3.  --popcount LIST: the popcount level per\n"
    "variant (0 baseline, 1 POPCNT, 2 AVX2 list scoring; default the CPU's).\n"
    "--layout LIST: default, codes or both (default,codes): the graphs read as\n"
    "they are, or through the code layout (mess_server_set_layout, built once\n"
    "at the start; its bytes per entry printed); default: default.\n"
    "--warm:\n"
    "every variant also timed warm (each search run twice, the second timed:\n"
    "its lines in cache, what is left is the search's instructions).\n"
    "  --travel F     load travel file F in memory (mess_server_load) instead of\n"
    "                 opening a directory; --client is then required\n"
    "  --chase-mib N  buffer of the pointer chase (default: the bytes of the\n"
    "                 shards' codes and layer-0 link lists, the search's footprint)\n";

/* ---- machine rates ------------------------------------------------------ */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ns per line: `ways` independent chases through one random cycle of the
 * buffer's lines (ways 1: the latency of a dependent load). */
static double chase(const uint64_t *buf, size_t lines, unsigned ways, size_t steps)
{
    size_t p[16], i;
    unsigned w;
    double t0;
    uint64_t sink = 0;
    for (w = 0; w < ways; w++)
        p[w] = (size_t)w * (lines / ways);
    t0 = cli_cpu_s();
    for (i = 0; i < steps; i++)
        for (w = 0; w < ways; w++)
            p[w] = (size_t)buf[p[w] * 8];
    for (w = 0; w < ways; w++)
        sink += p[w];
    if (sink == 1)
        printf(" ");
    return 1e9 * (cli_cpu_s() - t0) / ((double)steps * ways);
}

/* huge: the buffer in transparent huge pages (2 MiB: one TLB entry covers
 * 512 times the bytes), where the kernel grants them. */
static int rates(size_t mib, int huge, double *lat, double *par, double *ham_ns)
{
    size_t lines = mib * 1024 * 1024 / 64, i, *perm;
    uint64_t *buf, seed = 7, codes[2 * 64], q[2] = {0x123456789abcdefull, 42}, acc = 0;
    uint32_t d[64];
    double t0;
    int r;
    void *m = mmap(NULL, lines * 64, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return MESS_ENOMEM;
#ifdef MADV_HUGEPAGE
    madvise(m, lines * 64, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#endif
    buf = (uint64_t *)m;
    perm = (size_t *)malloc(lines * sizeof *perm);
    if (!perm) {
        munmap(m, lines * 64);
        return MESS_ENOMEM;
    }
    for (i = 0; i < lines; i++)
        perm[i] = i;
    for (i = lines - 1; i > 0; i--) { /* one random cycle (Sattolo) */
        size_t j = (size_t)(rng_next(&seed) % i), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (i = 0; i < lines; i++)
        buf[i * 8] = perm[i];
    free(perm);
    chase(buf, lines, 1, 100000); /* warm the TLB walk caches a little */
    *lat = 1e9;
    *par = 1e9;
    for (r = 0; r < 3; r++) {
        double a = chase(buf, lines, 1, 1000000), b = chase(buf, lines, 16, 200000);
        if (a < *lat)
            *lat = a;
        if (b < *par)
            *par = b;
    }
    munmap(m, lines * 64);
    for (i = 0; i < 2 * 64; i++)
        codes[i] = rng_next(&seed);
    *ham_ns = 1e9;
    for (r = 0; r < 3; r++) {
        size_t it;
        t0 = cli_cpu_s();
        for (it = 0; it < 200000; it++) {
            q[0] ^= acc;
            hnsw_hamming_many(q, codes, 64, 2, d);
            acc += d[it & 63];
        }
        t0 = 1e9 * (cli_cpu_s() - t0) / (200000.0 * 64);
        if (t0 < *ham_ns)
            *ham_ns = t0;
    }
    if (acc == 1)
        printf(" ");
    return MESS_OK;
}

/* ---- work counts ---------------------------------------------------------- */

int bench_count_work(const mess_server *s, uint8_t **reqs, const size_t *lens,
                     size_t nq, struct hnsw_counts *c, double *hits)
{
    struct hnsw_scratch *sc;
    struct hnsw_hit *out = NULL;
    size_t q, cap = 0;
    int rc = hnsw_scratch_new(&sc);
    *hits = 0;
    for (q = 0; q < nq && rc == MESS_OK; q++) {
        struct wire_request rq;
        uint32_t j;
        rc = wire_request_parse(&s->p, reqs[q], lens[q], &rq);
        for (j = 0; j < s->p.shards && rc == MESS_OK; j++) {
            uint64_t code[MESS_MAX_BITS / 64];
            uint32_t budget = wire_request_budget(&rq, j);
            size_t live = hnsw_live(s->shards[j].graph), room, ef, got;
            room = budget < live ? budget : live;
            if (room == 0)
                continue;
            if (room > cap) {
                free(out);
                cap = room;
                out = (struct hnsw_hit *)malloc(cap * sizeof *out);
                if (!out) {
                    rc = MESS_ENOMEM;
                    break;
                }
            }
            wire_request_code(&rq, &s->p, j, code);
            ef = s->p.ef_search > budget ? s->p.ef_search : budget;
            rc = hnsw_search(s->shards[j].graph, sc, code, room, ef, out, &got);
            *hits += (double)got;
        }
    }
    hnsw_scratch_counts(sc, c);
    hnsw_scratch_free(sc);
    free(out);
    return rc;
}

/* ---- timing ------------------------------------------------------------------ */

struct variant {
    unsigned width, threads, ahead, keep, fast, warm, pop, lay;
    double cpu, wall; /* best round, seconds for all queries */
    double rcpu, rwall; /* this round's */
};

static int run_variant(mess_server *s, uint8_t **reqs, const size_t *lens,
                       size_t nq, struct variant *v, uint8_t (*digest)[16],
                       int check, size_t *differ, double *cpu, double *wall)
{
    size_t q;
    int rc = server_search_set_width(s, v->width);
    server_search_set_copy_ahead(s, v->ahead);
    server_search_set_paths(s, (int)v->fast, HNSW_MANY_CLEAR_WORDS);
    server_search_set_read_layout(s, (int)v->lay);
    if (rc == MESS_OK)
        rc = hnsw_popcount_force((int)v->pop);
    server_search_set_keep_workers(s, (int)v->keep);
    *cpu = *wall = 0;
    for (q = 0; q < nq && rc == MESS_OK; q++) {
        uint8_t *resp = NULL, h[16];
        size_t len;
        double c0, w0;
        if (v->warm) { /* the same search first, untimed: its lines in cache */
            rc = mess_server_search(s, reqs[q], lens[q], v->threads, &resp, &len);
            mess_buf_free(resp);
            resp = NULL;
            if (rc != MESS_OK)
                break;
        }
        c0 = cli_cpu_s();
        w0 = cli_wall_s();
        rc = mess_server_search(s, reqs[q], lens[q], v->threads, &resp, &len);
        *cpu += cli_cpu_s() - c0;
        *wall += cli_wall_s() - w0;
        if (rc != MESS_OK)
            break;
        /* outside the timing */
        crypto_generichash(h, sizeof h, resp, len, NULL, 0);
        if (!check)
            memcpy(digest[q], h, sizeof h);
        else if (memcmp(digest[q], h, sizeof h) != 0)
            ++*differ;
        mess_buf_free(resp);
    }
    server_search_set_width(s, SERVER_SEARCH_WIDTH);
    server_search_set_copy_ahead(s, SERVER_COPY_AHEAD);
    server_search_set_keep_workers(s, 1);
    server_search_set_paths(s, HNSW_MANY_FAST, HNSW_MANY_CLEAR_WORDS);
    return rc;
}

/* Throughput: batches of BATCH requests (a serving loop answering what has
 * arrived, sending and freeing the responses before the next batch) over
 * persistent workers; CPU and wall seconds of the batch calls. */
static int run_batch(const mess_server *s, uint8_t **reqs, const size_t *lens,
                     size_t nq, unsigned threads, double *cpu, double *wall)
{
    enum { BATCH = 16 };
    mess_workers *w = NULL;
    uint8_t *resps[BATCH];
    size_t rl[BATCH], q0, i;
    int rc = mess_workers_new(threads, &w);
    *cpu = *wall = 0;
    for (q0 = 0; q0 < nq && rc == MESS_OK; q0 += BATCH) {
        size_t m = nq - q0 < BATCH ? nq - q0 : BATCH;
        double c0 = cli_cpu_s(), w0 = cli_wall_s();
        rc = mess_server_search_batch(s, (const uint8_t *const *)reqs + q0, lens + q0, m, w,
                                      resps, rl, NULL);
        *cpu += cli_cpu_s() - c0;
        *wall += cli_wall_s() - w0;
        for (i = 0; rc == MESS_OK && i < m; i++)
            mess_buf_free(resps[i]);
    }
    mess_workers_free(w);
    return rc;
}

void bench_loadavg(char *out, size_t cap)
{
    FILE *f = fopen("/proc/loadavg", "r");
    out[0] = 0;
    if (f) {
        if (fgets(out, (int)cap, f)) {
            char *p = out;
            int sp = 0;
            for (; *p; p++)
                if (*p == ' ' && ++sp == 3) {
                    *p = 0;
                    break;
                }
        }
        fclose(f);
    }
}

/* hnswlib on the raw vectors: its --throughput lines, echoed and kept. */
static void hnswlib_run(const char *python, const char *data, size_t nq, FILE *json)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "%s scripts/hnswlib_ref.py --data '%s' --queries %zu --throughput 1,2 "
             "--ef " BENCH_HNSWLIB_EFS " 2>/dev/null",
             python, data, nq);
    fputc(',', json);
    bench_hnswlib_lines(cmd, json);
}

int bench_server(int argc, char **argv)
{
    struct cli_args a;
    const char *dir, *client_path, *data, *python, *travel;
    char path[4096], cpath[4096], load0[64], load1[64];
    unsigned widths[MAXV], threads[MAXV], bthreads[MAXV], aheads[MAXV], keeps[2], fasts[4], pops[3];
    size_t nw, nt, nbt, na, nk, nf, npop = 0, nl = 0, nv = 0, i, r, nq, qn, qdim, differ = 0;
    unsigned lays[2];
    const char *layout_list;
    long queries = 1000, pool = 1500, rounds = 3, chase_mib = 1024;
    struct variant *v = NULL;
    mess_client *c = NULL;
    mess_server *s = NULL;
    mess_params p;
    float *qv = NULL;
    uint8_t **reqs = NULL, (*digest)[16] = NULL;
    size_t *lens = NULL;
    struct hnsw_counts cnt;
    double lat, par, lat_huge, par_huge, ham_ns, hits, per_q, lines_q, floor_ms, serial_ms;
    int rc, want_hnswlib, want_warm;
    FILE *json;
    char *jbuf = NULL;
    size_t jlen = 0;

    cli_args_init(&a, argc, argv);
    if (cli_wants_help(&a)) {
        fputs(help, stdout);
        return CLI_OK;
    }
    dir = cli_opt(&a, "--server");
    travel = cli_opt(&a, "--travel");
    data = cli_opt(&a, "--data");
    client_path = cli_opt(&a, "--client");
    python = cli_opt(&a, "--python");
    want_hnswlib = cli_flag(&a, "--hnswlib");
    want_warm = cli_flag(&a, "--warm");
    layout_list = cli_opt(&a, "--layout");
    if (!python)
        python = "/usr/bin/python3";
    if (cli_opt_ulist(&a, "--widths", "0,8", widths, MAXV, &nw) ||
        cli_opt_ulist(&a, "--threads", "1,2", threads, MAXV, &nt) ||
        cli_opt_ulist(&a, "--batch-threads", "1,2", bthreads, MAXV, &nbt) ||
        cli_opt_ulist(&a, "--ahead", "0,4", aheads, MAXV, &na) ||
        cli_opt_ulist(&a, "--keep", "1", keeps, 2, &nk) ||
        cli_opt_ulist(&a, "--fast", "3", fasts, 4, &nf) ||
        (cli_opt(&a, "--popcount") &&
         cli_parse_ulist(cli_opt(&a, "--popcount"), pops, 3, &npop))) {
        cli_error("bad --widths, --threads, --ahead, --keep, --fast, --popcount or "
                  "--batch-threads list");
        return CLI_USAGE;
    }
    if (cli_opt_long(&a, "--queries", 1, 1000000, 1000, &queries) ||
        cli_opt_long(&a, "--pool", 1, 1000000, 1500, &pool) ||
        cli_opt_long(&a, "--rounds", 1, 100, 3, &rounds) ||
        cli_opt_long(&a, "--chase-mib", 0, 65536, 0, &chase_mib) || cli_check_unused(&a))
        return CLI_USAGE;
    if (travel && !dir)
        dir = travel;
    if (!dir || !data || (travel && !client_path)) {
        cli_error("--server (or --travel with --client) and --data are required "
                  "(mess bench server --help)");
        return CLI_USAGE;
    }
    for (i = 0; i < nf; i++)
        if (fasts[i] > 3) {
            cli_error("--fast: 0, 1, 2 or 3");
            return CLI_USAGE;
        }
    {
        /* --layout: default and / or codes */
        const char *l = layout_list ? layout_list : "default";
        while (*l && nl < 2) {
            size_t len = strcspn(l, ",");
            if (len == 7 && !strncmp(l, "default", 7))
                lays[nl++] = MESS_LAYOUT_DEFAULT;
            else if (len == 5 && !strncmp(l, "codes", 5))
                lays[nl++] = MESS_LAYOUT_CODES;
            else
                break;
            l += len + (l[len] == ',');
        }
        if (*l || nl == 0) {
            cli_error("--layout: default, codes or default,codes");
            return CLI_USAGE;
        }
    }
    if (!cli_opt(&a, "--popcount")) {
        pops[0] = (unsigned)hnsw_popcount_hw(); /* the CPU's */
        npop = 1;
    }
    for (i = 0; i < npop; i++)
        if (pops[i] > (unsigned)hnsw_popcount_hw()) {
            cli_error("--popcount: 0 .. %d on this CPU", hnsw_popcount_hw());
            return CLI_USAGE;
        }
    for (i = 0; i < nw; i++)
        if (widths[i] > HNSW_MANY_MAX) {
            cli_error("--widths: at most %d", HNSW_MANY_MAX);
            return CLI_USAGE;
        }
    if (!client_path) {
        snprintf(cpath, sizeof cpath, "%s.client", dir);
        client_path = cpath;
    }
    bench_loadavg(load0, sizeof load0);
    printf("mess bench server: %s, load %s\n", dir, load0);
    rc = mess_client_load(client_path, NULL, &c);
    if (rc != MESS_OK)
        return cli_fail("cannot load the client", client_path, rc);
    mess_client_params(c, &p);
    if (travel) {
        double t0 = cli_wall_s();
        rc = mess_server_load(travel, &p, &s);
        if (rc != MESS_OK) {
            mess_client_free(c);
            return cli_fail("cannot load the server", travel, rc);
        }
        printf("  loaded %s in memory in %.1f s\n", travel, cli_wall_s() - t0);
    } else {
        double t0;
        rc = cli_server_open(dir, &p, client_path, &s);
        if (rc != MESS_OK) {
            mess_client_free(c);
            return CLI_FAIL;
        }
        /* the delta chains a lazy open left (bench_count_work reads the graphs) */
        t0 = cli_wall_s();
        rc = server_ready(s, NULL, 0);
        if (rc != MESS_OK) {
            if (cli_server_unusable(s, dir) == CLI_OK)
                cli_error("bench server: %s", mess_strerror(rc));
            mess_server_free(s);
            mess_client_free(c);
            return CLI_FAIL;
        }
        printf("  delta chains applied in %.3f s\n", cli_wall_s() - t0);
    }
    for (i = 0; i < nl; i++)
        if (lays[i] == MESS_LAYOUT_CODES) {
            mess_server_stats st0, st1;
            double t0 = cli_wall_s();
            mess_server_stats_get(s, &st0);
            rc = mess_server_set_layout(s, MESS_LAYOUT_CODES);
            if (rc == MESS_EPARAM) {
                cli_error("--layout codes: server '%s' has codes of other than 128 bits",
                          dir ? dir : travel);
                goto out;
            }
            if (rc != MESS_OK) {
                cli_fail("cannot build the code layout", dir ? dir : travel, rc);
                goto out;
            }
            mess_server_stats_get(s, &st1);
            printf("  code layout built in %.2f s: %.1f bytes per entry (%zu entries), "
                   "server %.1f -> %.1f bytes per entry\n",
                   cli_wall_s() - t0, (double)(st1.bytes - st0.bytes) / (double)st1.entries,
                   st1.entries, (double)st0.bytes / (double)st1.entries,
                   (double)st1.bytes / (double)st1.entries);
            break;
        }
    snprintf(path, sizeof path, "%s/query.bvecs", data);
    rc = mess_vecs_read_f32(path, &qv, &qn, &qdim);
    if (rc != MESS_OK) {
        cli_fail("cannot read", path, rc);
        goto out;
    }
    nq = (size_t)queries < qn ? (size_t)queries : qn;
    reqs = (uint8_t **)calloc(nq, sizeof *reqs);
    lens = (size_t *)calloc(nq, sizeof *lens);
    digest = (uint8_t(*)[16])calloc(nq, sizeof *digest);
    if (!reqs || !lens || !digest) {
        rc = MESS_ENOMEM;
        goto out;
    }
    for (i = 0; i < nq && rc == MESS_OK; i++) {
        mess_query *mq = NULL;
        rc = mess_client_request(c, qv + i * qdim, (size_t)pool, &mq, &reqs[i], &lens[i]);
        mess_query_free(mq);
    }
    if (rc != MESS_OK)
        goto out;

    /* rates and work; the chase over as many bytes as the graphs' codes
     * and layer-0 lists (random lines of it hit the caches as often as the
     * searches' do, if they were spread evenly) */
    if (chase_mib == 0) {
        double bytes = 0;
        uint32_t j;
        for (j = 0; j < s->p.shards; j++)
            bytes += (double)hnsw_count(s->shards[j].graph) *
                     (8.0 * params_words(&s->p) + 4.0 * (1 + 2 * s->p.hnsw_m));
        chase_mib = (long)(bytes / (1024 * 1024)) + 1;
    }
    rc = rates((size_t)chase_mib, 1, &lat_huge, &par_huge, &ham_ns);
    if (rc == MESS_OK)
        rc = rates((size_t)chase_mib, 0, &lat, &par, &ham_ns);
    if (rc == MESS_OK)
        rc = bench_count_work(s, reqs, lens, nq, &cnt, &hits);
    if (rc != MESS_OK)
        goto out;
    per_q = (double)cnt.searches / (double)nq;
    printf("  rates: dependent load %.1f ns (%ld MiB chase, 4 KiB pages; %.1f ns in 2 MiB "
           "pages), 16 chases %.1f ns/line (%.1f), 128-bit distance %.2f ns\n",
           lat, chase_mib, lat_huge, par, par_huge, ham_ns);
    printf("  per query: %.1f shard searches, %.1f hits; per search: upper distances %.1f, "
           "expanded %.1f, link ids %.1f, codes scored %.1f, link lines %.1f\n",
           per_q, hits / (double)nq, (double)cnt.upper / (double)cnt.searches,
           (double)cnt.expanded / (double)cnt.searches,
           (double)cnt.links / (double)cnt.searches,
           (double)cnt.scored / (double)cnt.searches,
           (double)cnt.link_lines / (double)cnt.searches);
    /* lines a query must bring in if none is cached: one per code read
     * (16-byte codes, random nodes) and the link lists' lines */
    lines_q = (double)(cnt.upper + cnt.scored + cnt.link_lines) / (double)nq;
    floor_ms = 1e-6 * (lines_q * par + (double)(cnt.upper + cnt.scored) / (double)nq * ham_ns);
    /* one dependent round trip per expansion (list prefetched a step ahead,
     * codes of the neighbours in parallel): a single beam's chain */
    serial_ms = 1e-6 * ((double)cnt.expanded / (double)nq) * lat;
    printf("  per query: %.0f lines (codes %.0f, link lists %.0f), %.0f distances; "
           "floor %.3f ms (lines x 16-chase rate + distances); one beam's chain %.3f ms\n",
           lines_q, (double)(cnt.upper + cnt.scored) / (double)nq,
           (double)cnt.link_lines / (double)nq, (double)(cnt.upper + cnt.scored) / (double)nq,
           floor_ms, serial_ms);

    v = (struct variant *)calloc(nt * 2 * nf * npop * nl * nk * nw * na, sizeof *v);
    if (!v) {
        rc = MESS_ENOMEM;
        goto out;
    }
    for (i = 0; i < nt; i++) {
        size_t k, x, y, z, f;
        for (z = 0; z < (want_warm ? 2u : 1u); z++)
            for (f = 0; f < nf * npop * nl; f++)
                for (y = 0; y < nk; y++)
                    for (k = 0; k < nw; k++)
                        for (x = 0; x < na; x++, nv++) {
                            v[nv].width = widths[k];
                            v[nv].threads = threads[i];
                            v[nv].ahead = aheads[x];
                            v[nv].keep = keeps[y];
                            v[nv].fast = fasts[f / (npop * nl)];
                            v[nv].pop = pops[(f / nl) % npop];
                            v[nv].lay = lays[f % nl];
                            v[nv].warm = (unsigned)z;
                            v[nv].cpu = v[nv].wall = 1e30;
                        }
    }
    /* Each round runs every variant on every slice of SLICE queries, the
     * order of the variants rotating per slice, so a change of the
     * machine's load falls on all of them alike; a variant's time in a
     * round is the sum over slices, and its figure the best round.  The
     * first run of each slice gives the reference digests. */
    for (r = 0; r < (size_t)rounds && rc == MESS_OK; r++) {
        enum { SLICE = 20 };
        size_t q0, slice = 0;
        for (i = 0; i < nv; i++)
            v[i].rcpu = v[i].rwall = 0;
        for (q0 = 0; q0 < nq && rc == MESS_OK; q0 += SLICE, slice++) {
            size_t m = nq - q0 < SLICE ? nq - q0 : SLICE;
            for (i = 0; i < nv && rc == MESS_OK; i++) {
                size_t k = (i + slice + r) % nv;
                double cpu, wall;
                rc = run_variant(s, reqs + q0, lens + q0, m, &v[k], digest + q0,
                                 r > 0 || i > 0, &differ, &cpu, &wall);
                v[k].rcpu += cpu;
                v[k].rwall += wall;
            }
        }
        for (i = 0; i < nv; i++) {
            if (v[i].rcpu < v[i].cpu)
                v[i].cpu = v[i].rcpu;
            if (v[i].rwall < v[i].wall)
                v[i].wall = v[i].rwall;
        }
    }
    if (rc != MESS_OK)
        goto out;
    json = open_memstream(&jbuf, &jlen);
    if (!json) {
        rc = MESS_ENOMEM;
        goto out;
    }
    fprintf(json, "{\"server\":\"%s\",\"queries\":%zu,\"pool\":%ld,\"lat_ns\":%.2f,"
                  "\"line16_ns\":%.2f,\"lat_huge_ns\":%.2f,\"line16_huge_ns\":%.2f,\"ham_ns\":%.3f,\"searches\":%.2f,\"upper\":%.2f,"
                  "\"expanded\":%.2f,\"links\":%.2f,\"scored\":%.2f,\"link_lines\":%.2f,"
                  "\"lines_per_query\":%.1f,\"floor_ms\":%.4f,\"chain_ms\":%.4f,\"variants\":[",
            dir, nq, pool, lat, par, lat_huge, par_huge, ham_ns, per_q, (double)cnt.upper / (double)cnt.searches,
            (double)cnt.expanded / (double)cnt.searches, (double)cnt.links / (double)cnt.searches,
            (double)cnt.scored / (double)cnt.searches,
            (double)cnt.link_lines / (double)cnt.searches, lines_q, floor_ms, serial_ms);
    printf("  %-5s %-5s %-4s %-7s %-6s %-6s %-7s %-5s %10s %10s %9s %9s %9s\n", "keep", "fast", "pop", "layout", "width",
           "ahead", "threads", "warm", "cpu ms/q", "wall ms/q", "cpu gain", "wall gain",
           "cpu/floor");
    for (i = 0; i < nv; i++) {
        double cms = 1e3 * v[i].cpu / (double)nq, wms = 1e3 * v[i].wall / (double)nq;
        /* the first variant at these threads */
        size_t first = i - i % (nw * na * nk * nf * npop * nl * (want_warm ? 2u : 1u));
        printf("  %-5u %-5u %-4u %-7s %-6u %-6u %-7u %-5u %10.3f %10.3f %8.2fx %8.2fx %8.2fx\n",
               v[i].keep, v[i].fast, v[i].pop, v[i].lay ? "codes" : "default", v[i].width, v[i].ahead, v[i].threads, v[i].warm, cms, wms,
               v[first].cpu / v[i].cpu, v[first].wall / v[i].wall, cms / floor_ms);
        fprintf(json, "%s{\"keep\":%u,\"fast\":%u,\"popcount\":%u,\"layout\":%u,\"width\":%u,\"ahead\":%u,\"threads\":%u,"
                      "\"warm\":%u,\"cpu_ms\":%.4f,\"wall_ms\":%.4f}",
                i ? "," : "", v[i].keep, v[i].fast, v[i].pop, v[i].lay, v[i].width, v[i].ahead, v[i].threads,
                v[i].warm, cms, wms);
    }
    fprintf(json, "],\"differ\":%zu,\"batch\":[", differ);
    printf("  responses differing between variants: %zu (of %zu per variant)\n", differ, nq);
    /* the batch with its requests searched one by one (group 1) and in
     * groups shard by shard (8), alternating, best round each */
    for (i = 0; i < nbt && rc == MESS_OK; i++) {
        static const unsigned groups[2] = {1, 8};
        double cpu[2] = {1e30, 1e30}, wall[2] = {1e30, 1e30};
        size_t gi;
        for (r = 0; r < (size_t)rounds && rc == MESS_OK; r++)
            for (gi = 0; gi < 2 && rc == MESS_OK; gi++) {
                size_t gk = (gi + r) % 2;
                double c1, w1;
                server_search_set_by_shard(s, 0); /* the groups' path */
                server_search_set_group(s, groups[gk]);
                rc = run_batch(s, reqs, lens, nq, bthreads[i], &c1, &w1);
                if (c1 < cpu[gk])
                    cpu[gk] = c1;
                if (w1 < wall[gk])
                    wall[gk] = w1;
            }
        server_search_set_group(s, 8);
        server_search_set_by_shard(s, SEARCH_WINDOW);
        for (gi = 0; gi < 2; gi++) {
            printf("  batches of 16 on %u worker(s), group %u: %.0f queries/s, %.0f queries/s "
                   "per core (CPU)\n",
                   bthreads[i], groups[gi], (double)nq / wall[gi], (double)nq / cpu[gi]);
            fprintf(json, "%s{\"threads\":%u,\"group\":%u,\"qps\":%.1f,\"qps_per_core\":%.1f}",
                    i || gi ? "," : "", bthreads[i], groups[gi], (double)nq / wall[gi],
                    (double)nq / cpu[gi]);
        }
    }
    fprintf(json, "]");
    if (rc == MESS_OK && want_hnswlib)
        hnswlib_run(python, data, nq, json);
    bench_loadavg(load1, sizeof load1);
    fprintf(json, ",\"load_before\":\"%s\",\"load_after\":\"%s\"}", load0, load1);
    fclose(json);
    printf("  load %s before, %s after\n", load0, load1);
    if (rc == MESS_OK)
        printf("%s\n", jbuf);
    free(jbuf);
    if (differ)
        rc = MESS_EFORMAT;
out:
    for (i = 0; reqs && i < nq; i++)
        mess_buf_free(reqs[i]);
    free(reqs);
    free(lens);
    free(digest);
    free(v);
    mess_vecs_free(qv);
    mess_server_free(s);
    mess_client_free(c);
    if (rc != MESS_OK) {
        if (differ)
            cli_error("%zu responses differ between search variants", differ);
        else
            cli_error("bench server: %s", mess_strerror(rc));
        return CLI_FAIL;
    }
    return CLI_OK;
}
